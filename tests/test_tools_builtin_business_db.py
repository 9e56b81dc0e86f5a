"""The demo business DB: deterministic content, and sql_query read-only by construction."""

from __future__ import annotations

import json
import sqlite3

import pytest

from agentlab.tools.builtin import business_db
from agentlab.tools.executor import ToolExecutor

pytestmark = pytest.mark.usefixtures("own_var_dir")


async def query(ex: ToolExecutor, sql: str):
    return await ex.run("sql_query", {"query": sql})


async def rows(ex: ToolExecutor, sql: str) -> list[dict]:
    result = await query(ex, sql)
    assert result.ok, result.observation
    return json.loads(result.output)["rows"]


def test_database_is_built_atomically_where_expected(tmp_path):
    path = business_db.ensure_business_db()
    assert path == tmp_path / "demo" / "business.sqlite3" and path.exists()
    assert not list(path.parent.glob("*.tmp"))
    assert business_db.ensure_business_db() == path  # second call reuses it


def test_database_is_deterministic(tmp_path):
    a = business_db.ensure_business_db(tmp_path / "a.sqlite3")
    b = business_db.ensure_business_db(tmp_path / "b.sqlite3")
    dump = [list(sqlite3.connect(p).iterdump()) for p in (a, b)]
    assert dump[0] == dump[1]


async def test_counts_match_an_independent_query(ex, tmp_path):
    counts = {row["t"]: row["n"] for row in await rows(ex, (
        "SELECT 'customers' AS t, COUNT(*) AS n FROM customers UNION ALL "
        "SELECT 'products', COUNT(*) FROM products UNION ALL "
        "SELECT 'orders', COUNT(*) FROM orders UNION ALL "
        "SELECT 'order_items', COUNT(*) FROM order_items"))}
    conn = sqlite3.connect(tmp_path / "demo" / "business.sqlite3")
    for table, n in counts.items():
        assert conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == n
    assert counts["customers"] == 200 and counts["products"] == 40 and counts["orders"] == 3000
    assert counts["order_items"] > 3000
    anchor = conn.execute("SELECT value FROM meta WHERE key = 'anchor_date'").fetchone()[0]
    assert anchor == "2026-06-30"
    first, last = conn.execute("SELECT MIN(order_date), MAX(order_date) FROM orders").fetchone()
    assert first >= "2025-07-01" and last <= anchor
    revenue = await rows(ex, "SELECT ROUND(SUM(total), 2) AS r FROM orders "
                             "WHERE status != 'cancelled'")
    expected = conn.execute("SELECT ROUND(SUM(total), 2) FROM orders "
                            "WHERE status != 'cancelled'").fetchone()[0]
    assert revenue[0]["r"] == expected
    conn.close()


async def test_list_and_describe_tables(ex):
    tables = json.loads((await ex.run("list_tables", {})).output)
    assert {"customers", "products", "orders", "order_items", "meta"} <= set(tables)
    result = await ex.run("describe_table", {"table": "customers"})
    assert result.ok, result.observation
    info = json.loads(result.output)
    names = [c["name"] for c in info["columns"]]
    assert {"country", "city", "segment"} <= set(names)
    assert info["row_count"] == 200 and len(info["sample_rows"]) == 3
    missing = await ex.run("describe_table", {"table": "nope"})
    assert not missing.ok and "no such table: nope" in missing.observation
    assert "customers" in missing.observation


async def test_result_shape(ex):
    result = await query(ex, "SELECT id, name FROM products ORDER BY id LIMIT 2")
    data = json.loads(result.output)
    assert data["columns"] == ["id", "name"] and data["row_count"] == 2
    assert data["rows"][0]["id"] == 1 and data["limited"] is False


@pytest.mark.parametrize(("sql", "message"), [
    ("DROP TABLE orders", "only SELECT queries are allowed (got DROP)"),
    ("DELETE FROM orders", "only SELECT queries are allowed (got DELETE)"),
    ("INSERT INTO meta VALUES ('x', 'y')", "only SELECT queries are allowed (got INSERT)"),
    ("UPDATE orders SET total = 0", "only SELECT queries are allowed (got UPDATE)"),
    ("CREATE TABLE t (x)", "only SELECT queries are allowed (got CREATE)"),
    ("ATTACH DATABASE ':memory:' AS other", "only SELECT queries are allowed (got ATTACH)"),
    ("PRAGMA writable_schema=1", "only SELECT queries are allowed (got PRAGMA)"),
    ("PRAGMA user_version=3", "only SELECT queries are allowed (got PRAGMA)"),
    ("  -- sneaky\n/* c */ drop table orders", "(got DROP)"),
    ("SELECT 1; DROP TABLE orders", "one statement per call"),
    ("SELECT 1; SELECT 2", "one statement per call"),
    ("WITH x AS (SELECT 1) DELETE FROM orders", "only SELECT queries are allowed (got DELETE)"),
    ("SELECT load_extension('/tmp/evil')", "load_extension() is not allowed"),
    ("SELECT * FROM pragma_table_info('orders')", "only SELECT queries are allowed"),
    ("", "the query is empty"),
])
async def test_refusals(ex, sql, message, tmp_path):
    path = business_db.ensure_business_db()
    result = await query(ex, sql)
    assert not result.ok
    assert "Refused" in result.observation and message in result.observation
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT COUNT(*) FROM orders").fetchone()[0] == 3000
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 0
    conn.close()


async def test_connection_itself_is_read_only(tmp_path):
    conn = business_db.connect()  # even without the authorizer, mode=ro refuses writes
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        conn.execute("DELETE FROM orders")
    conn.close()


async def test_time_limit_stops_a_runaway_query(ex, monkeypatch):
    monkeypatch.setattr(business_db, "TIME_LIMIT_S", 0.2)
    result = await query(ex, "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) "
                             "SELECT MAX(n) FROM c")
    assert not result.ok
    assert "stopped after 0.2 s" in result.observation and "time limit" in result.observation


async def test_row_limit_is_reported(ex, monkeypatch):
    result = await query(ex, "SELECT id FROM orders")
    data = json.loads(result.output)
    assert data["row_count"] == 200 and len(data["rows"]) == 200
    assert data["limited"] is True and "first 200 rows" in data["note"]
    monkeypatch.setattr(business_db, "ROW_LIMIT", 5)
    assert len(json.loads((await query(ex, "SELECT id FROM orders")).output)["rows"]) == 5


async def test_sqlite_errors_pass_through_verbatim(ex):
    result = await query(ex, "SELECT foo FROM orders")
    assert not result.ok and "no such column: foo" in result.observation
    result = await query(ex, "SELECT * FROM x")
    assert not result.ok and "no such table: x" in result.observation


async def test_semicolons_inside_strings_and_a_trailing_one_are_fine(ex):
    sql = "SELECT 'a;b' AS s, \"id\" FROM orders WHERE 'x;' = 'x;' ORDER BY id LIMIT 1;"
    assert await rows(ex, sql) == [{"s": "a;b", "id": 1}]
    assert await rows(ex, "SELECT 1 AS one; -- done") == [{"one": 1}]
