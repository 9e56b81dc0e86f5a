"""list_tables, describe_table, sql_query over the demo business database — read-only by
construction: a read-only connection, an authorizer that allows only reading, one statement,
a row limit and a time limit."""

from __future__ import annotations

import re
import sqlite3
import time
from pathlib import Path
from typing import Annotated, Any

from agentlab.paths import var_dir
from agentlab.tools.builtin import demo_business_data
from agentlab.tools.decorator import tool

ROW_LIMIT = 200
TIME_LIMIT_S = 5.0
_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
            getattr(sqlite3, "SQLITE_RECURSIVE", 33)}
_DENIED_FUNCTIONS = {"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"}
_FIRST_WORD = re.compile(r"^\s*(?:--[^\n]*\n\s*)*([A-Za-z]+)")


def ensure_business_db(path: Path | None = None) -> Path:
    path = path or var_dir() / "demo" / "business.sqlite3"
    if not path.exists():
        demo_business_data.build(path)
    return path


def _authorizer(action: int, arg1: Any, arg2: Any, *rest: Any) -> int:
    # Reading is all a query may do; PRAGMA, ATTACH, writes and DDL are denied by SQLite itself.
    if action == sqlite3.SQLITE_FUNCTION and str(arg2).lower() in _DENIED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK if action in _ALLOWED else sqlite3.SQLITE_DENY


def connect(path: Path | None = None, *, authorizer: bool = True) -> sqlite3.Connection:
    """A read-only connection; `authorizer=False` only for our own fixed schema queries."""
    uri = f"file:{ensure_business_db(path)}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    if hasattr(conn, "enable_load_extension"):  # absent where Python lacks the feature
        conn.enable_load_extension(False)
    if authorizer:
        conn.set_authorizer(_authorizer)
    return conn


def _single_statement(query: str) -> str:
    text = query.strip().rstrip(";").strip()
    if not text:
        raise ValueError("Refused: the query is empty")
    # complete_statement() understands quotes: "';'" inside a string is not a separator.
    pos = 0
    for i, char in enumerate(text):
        if char == ";" and sqlite3.complete_statement(text[: i + 1]):
            if text[i + 1:].strip():
                raise ValueError("Refused: one statement per call (found more than one)")
            pos = i
    if pos:
        text = text[:pos]
    word = (_FIRST_WORD.match(text) or [None, ""])[1].upper()
    if word not in {"SELECT", "WITH", "VALUES"}:
        raise ValueError(f"Refused: only SELECT queries are allowed (got {word or 'nothing'})")
    return text


def run_query(query: str, *, path: Path | None = None, row_limit: int = ROW_LIMIT,
              time_limit_s: float | None = None) -> dict[str, Any]:
    statement = _single_statement(query)
    limit_s = TIME_LIMIT_S if time_limit_s is None else time_limit_s
    conn = connect(path)
    deadline = time.monotonic() + limit_s
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    try:
        cursor = conn.execute(statement)
        rows = cursor.fetchmany(row_limit + 1)
    except sqlite3.DatabaseError as exc:
        message = str(exc)
        if message == "interrupted":
            raise ValueError(f"Refused: the query was stopped after {limit_s:g} s "
                             "(time limit); narrow it down") from None
        if "not authorized" in message or "prohibited" in message:
            raise ValueError(f"Refused: only reading is allowed ({message})") from None
        raise ValueError(message) from None
    finally:
        conn.close()
    columns = [d[0] for d in cursor.description or []]
    limited = len(rows) > row_limit
    result: dict[str, Any] = {"columns": columns, "rows": [dict(r) for r in rows[:row_limit]],
                              "row_count": min(len(rows), row_limit)}
    if limited:
        result["note"] = f"only the first {row_limit} rows are shown; add LIMIT or aggregate"
    return result


@tool(category="database")
def list_tables() -> list:
    """The tables of the business database (customers, products, orders, order_items, meta)."""
    return [r["name"] for r in run_query(
        "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")["rows"]]


@tool(category="database")
def describe_table(table: Annotated[str, "table name, e.g. orders"]) -> dict:
    """Columns, types, row count and three sample rows of a table."""
    tables = list_tables.fn()
    if table not in tables:
        raise ValueError(f"no such table: {table}. Tables: {', '.join(tables)}")
    conn = connect(authorizer=False)  # pragma_table_info, a fixed query of ours
    try:
        columns = [{"name": r["name"], "type": r["type"]}
                   for r in conn.execute("SELECT name, type FROM pragma_table_info(?)", (table,))]
    finally:
        conn.close()
    count = run_query(f'SELECT COUNT(*) AS n FROM "{table}"')["rows"][0]["n"]
    sample = run_query(f'SELECT * FROM "{table}" LIMIT 3')["rows"]
    return {"table": table, "columns": columns, "row_count": count, "sample_rows": sample}


@tool(category="database")
def sql_query(query: Annotated[str, "one SQLite SELECT statement"]) -> dict:
    """Run one read-only SQL SELECT on the business database (at most 200 rows, 5 s)."""
    return run_query(query)
