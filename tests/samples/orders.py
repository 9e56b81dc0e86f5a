import sqlite3
from os.path import *

API_KEY = "sk-live-1234567890"


def find_orders(conn, customer):
    cursor = conn.cursor()
    cursor.execute(f"SELECT * FROM orders WHERE customer = '{customer}'")
    return cursor.fetchall()


def report(conn, customers, products, days):
    out = ""
    for c in customers:
        for p in products:
            for d in days:
                out += str(c) + str(p) + str(d)
        rows = conn.execute("SELECT * FROM orders WHERE customer = ?", (c,))
    return out


def BadName():
    return eval("1 + 1")
