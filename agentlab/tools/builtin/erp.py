"""ERP demo: look up orders, move a delivery date (logged, needs approval), send e-mail."""

from __future__ import annotations

import os
import random
import re
import sqlite3
import tempfile
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Annotated

from agentlab.paths import var_dir
from agentlab.tools.decorator import tool

ANCHOR = date(2026, 6, 30)
_LOCAL = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
# local@domain.tld: dot-separated atoms, hostname labels, an alphabetic TLD; no spaces/newlines.
EMAIL = re.compile(rf"{_LOCAL}@(?:{_LABEL}\.)+[A-Za-z]{{2,63}}")
SCHEMA = """
CREATE TABLE orders (order_id TEXT PRIMARY KEY, customer TEXT NOT NULL, email TEXT NOT NULL,
  status TEXT NOT NULL, delivery_date TEXT NOT NULL, item TEXT NOT NULL);
CREATE TABLE delivery_change_log (id INTEGER PRIMARY KEY, order_id TEXT NOT NULL,
  old_date TEXT NOT NULL, new_date TEXT NOT NULL, reason TEXT NOT NULL, changed_at TEXT NOT NULL);
"""


def erp_path() -> Path:
    return var_dir() / "demo" / "erp.sqlite3"


def connect() -> sqlite3.Connection:
    path = erp_path()
    if not path.exists():
        _build(path)
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    return conn


def _build(path: Path) -> None:
    """Write the demo ERP atomically (own temp file, then rename): safe for concurrent first use."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    rng = random.Random(7)
    customers = ["Acme GmbH", "Blue Fjord AS", "Casa Lume SL", "Delta Works Ltd",
                 "Eiko KK", "Fonte Verde SpA"]
    items = ["12 laptops", "40 monitors", "200 USB-C cables", "8 network switches",
             "25 headsets", "60 SSDs"]
    conn = sqlite3.connect(tmp)
    conn.executescript(SCHEMA)
    for n in range(1001, 1061):
        customer = rng.choice(customers)
        status = rng.choice(["open", "open", "shipped", "delivered"])
        when = date.today() + timedelta(days=rng.randint(3, 40)) if status != "delivered" \
            else ANCHOR - timedelta(days=rng.randint(1, 60))
        conn.execute("INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?)", (
            f"SO-{n}", customer, f"orders@{customer.split()[0].lower()}.example.com", status,
            when.isoformat(), rng.choice(items)))
    conn.commit()
    conn.close()
    tmp.replace(path)


def _order_id(order_id: str) -> str:
    digits = re.sub(r"\D", "", order_id)
    if not digits:
        raise ValueError(f"{order_id!r} is not an order number (they look like SO-1001)")
    return f"SO-{int(digits)}"


def _order(conn: sqlite3.Connection, order_id: str) -> dict:
    row = conn.execute("SELECT * FROM orders WHERE order_id = ?", (order_id,)).fetchone()
    if row is None:
        raise ValueError(f"no order {order_id}; order numbers run from SO-1001 to SO-1060")
    return dict(row)


@tool(category="erp")
def query_order(order_id: Annotated[str, "order number, e.g. SO-1001"]) -> dict:
    """Look up an order: customer, e-mail, status, delivery date, item, and its change log."""
    conn = connect()
    try:
        oid = _order_id(order_id)
        order = _order(conn, oid)
        order["delivery_changes"] = [dict(r) for r in conn.execute(
            "SELECT old_date, new_date, reason, changed_at FROM delivery_change_log "
            "WHERE order_id = ? ORDER BY id", (oid,))]
        return order
    finally:
        conn.close()


@tool(category="erp", side_effects=True)
def update_delivery_date(order_id: Annotated[str, "order number, e.g. SO-1001"],
                         new_date: Annotated[str, "ISO date, e.g. 2026-12-24"],
                         reason: Annotated[str, "why the date changes (kept in the log)"]) -> dict:
    """Move an order's delivery date; the change and its reason are written to the log."""
    try:
        when = date.fromisoformat(new_date.strip())
    except ValueError:
        raise ValueError(f"{new_date!r} is not an ISO date (YYYY-MM-DD)") from None
    if when < date.today():
        raise ValueError(f"{when} is in the past; a delivery date must be today or later")
    if not reason.strip():
        raise ValueError("a reason is required (it is kept in the change log)")
    conn = connect()
    try:
        oid = _order_id(order_id)
        order = _order(conn, oid)
        if order["status"] == "delivered":
            raise ValueError(f"{oid} was already delivered on {order['delivery_date']}")
        with conn:
            conn.execute("UPDATE orders SET delivery_date = ? WHERE order_id = ?",
                         (when.isoformat(), oid))
            conn.execute("INSERT INTO delivery_change_log (order_id, old_date, new_date, reason,"
                         " changed_at) VALUES (?, ?, ?, ?, ?)",
                         (oid, order["delivery_date"], when.isoformat(), reason.strip(),
                          datetime.now(UTC).isoformat(timespec="seconds")))
        return {"order_id": oid, "old_date": order["delivery_date"],
                "new_date": when.isoformat(), "logged": True}
    finally:
        conn.close()


@tool(category="erp", side_effects=True)
def send_email(to: Annotated[str, "recipient address"], subject: str, body: str) -> str:
    """Send an e-mail (through Django's mail backend; by default kept in the admin outbox)."""
    from django.core.mail import EmailMessage

    if len(to.strip()) > 254 or not EMAIL.fullmatch(to.strip()):
        raise ValueError(f"{to!r} is not a valid e-mail address")
    if not subject.strip():
        raise ValueError("the subject is empty")
    EmailMessage(subject.strip(), body, to=[to.strip()]).send()
    return f"E-mail sent to {to.strip()}: {subject.strip()!r}"
