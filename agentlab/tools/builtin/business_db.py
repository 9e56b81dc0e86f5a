"""list_tables, describe_table, sql_query over the demo business database — read-only by
construction: a read-only connection, an authorizer that allows only reading, one statement,
a row limit and a time limit. Memory is bounded too: the progress handler counts time, not
bytes, so `hex(zeroblob(400000000))` would build gigabytes within it; SQLite's own connection
limits (SQLITE_LIMITS: the longest value, the longest query, columns, depth…) refuse that
inside SQLite, and the rows handed back stop at RESULT_CHAR_LIMIT characters."""

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
QUERY_CHAR_LIMIT = 20_000  # the query text; refused before SQLite parses it
RESULT_CHAR_LIMIT = 1_000_000  # the values of the rows handed back, added up
# sqlite3 connection limits (Connection.setlimit). A value (or any string or
# blob built on the way, or a row) over SQLITE_LIMIT_LENGTH is SQLite's "string or blob too big".
SQLITE_LIMITS: tuple[tuple[int, int], ...] = (
    (sqlite3.SQLITE_LIMIT_LENGTH, 250_000),
    (sqlite3.SQLITE_LIMIT_SQL_LENGTH, 4 * QUERY_CHAR_LIMIT),  # bytes: UTF-8 up to 4 a character
    (sqlite3.SQLITE_LIMIT_COLUMN, 100),
    (sqlite3.SQLITE_LIMIT_EXPR_DEPTH, 100),
    (sqlite3.SQLITE_LIMIT_COMPOUND_SELECT, 50),
    (sqlite3.SQLITE_LIMIT_VDBE_OP, 250_000),
    (sqlite3.SQLITE_LIMIT_FUNCTION_ARG, 32),
    (sqlite3.SQLITE_LIMIT_ATTACHED, 0),
    (sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH, 1_000),
    (sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 100),
    (sqlite3.SQLITE_LIMIT_WORKER_THREADS, 0),
)
_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
            getattr(sqlite3, "SQLITE_RECURSIVE", 33)}
_DENIED_FUNCTIONS = {"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"}
_FIRST_WORD = re.compile(r"^\s*(?:--[^\n]*\n\s*)*([A-Za-z]+)")


def ensure_business_db(path: Path | None = None) -> Path:
    """The demo database's path, built (atomically, deterministically) on first use."""
    path = path or var_dir() / "demo" / "business.sqlite3"
    if not path.exists():
        demo_business_data.build(path)
    return path


# Action codes SQLite asks the authorizer about, named for the refusal message.
_ACTION_NAMES = {getattr(sqlite3, f"SQLITE_{n}"): n.replace("_", " ") for n in (
    "INSERT", "UPDATE", "DELETE", "PRAGMA", "ATTACH", "DETACH", "TRANSACTION", "SAVEPOINT",
    "ALTER_TABLE", "REINDEX", "ANALYZE", "CREATE_TABLE", "CREATE_INDEX", "CREATE_VIEW",
    "CREATE_TRIGGER", "CREATE_TEMP_TABLE", "CREATE_TEMP_VIEW", "CREATE_TEMP_INDEX",
    "CREATE_TEMP_TRIGGER", "CREATE_VTABLE", "DROP_TABLE", "DROP_INDEX", "DROP_VIEW",
    "DROP_TRIGGER", "DROP_VTABLE") if hasattr(sqlite3, f"SQLITE_{n}")}


class _Authorizer:
    """Allows reading only; remembers what it denied, for a clear refusal message."""

    def __init__(self) -> None:
        self.denied: str | None = None

    def __call__(self, action: int, arg1: Any, arg2: Any, *rest: Any) -> int:
        if action == sqlite3.SQLITE_FUNCTION and str(arg2).lower() in _DENIED_FUNCTIONS:
            reason = f"the function {str(arg2).lower()}() is not allowed"
        elif action not in _ALLOWED:
            what = _ACTION_NAMES.get(action, f"action {action}")
            reason = f"only SELECT queries are allowed (got {what})"
        else:
            return sqlite3.SQLITE_OK
        self.denied = self.denied or reason  # the first denial explains best
        return sqlite3.SQLITE_DENY


def connect(path: Path | None = None, *, authorizer: _Authorizer | None = None
            ) -> sqlite3.Connection:
    """A read-only connection (mode=ro, no extensions), with `authorizer` when given."""
    uri = f"file:{ensure_business_db(path)}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    for limit, value in SQLITE_LIMITS:
        conn.setlimit(limit, value)
    if hasattr(conn, "enable_load_extension"):  # absent where Python lacks the feature
        conn.enable_load_extension(False)
    if authorizer is not None:
        conn.set_authorizer(authorizer)
    return conn


def _strip_comments(text: str) -> str:
    """Leading whitespace and SQL comments removed (what a statement starts with)."""
    while True:
        text = text.lstrip()
        if text.startswith("--"):
            text = text.partition("\n")[2]
        elif text.startswith("/*"):
            text = text.partition("*/")[2]
        else:
            return text


def _single_statement(query: str) -> str:
    text = query.strip()
    if len(text) > QUERY_CHAR_LIMIT:
        raise ValueError(f"Refused: the query is {len(text):,} characters long; at most "
                         f"{QUERY_CHAR_LIMIT:,} are allowed")
    # complete_statement() understands quotes and comments: "';'" in a string is no separator.
    for i, char in enumerate(text):
        if char == ";" and sqlite3.complete_statement(text[: i + 1]):
            rest = _strip_comments(text[i + 1:])
            if rest.strip("; \t\r\n"):
                raise ValueError("Refused: one statement per call (found more than one)")
            text = text[:i]
            break
    body = _strip_comments(text)
    if not body:
        raise ValueError("Refused: the query is empty")
    word = (_FIRST_WORD.match(body) or [None, ""])[1].upper()
    if word not in {"SELECT", "WITH", "VALUES"}:
        raise ValueError(f"Refused: only SELECT queries are allowed (got {word or body[:10]})")
    return text


def run_query(query: str, *, path: Path | None = None, row_limit: int | None = None,
              time_limit_s: float | None = None) -> dict[str, Any]:
    """One read-only statement; the limits default to ROW_LIMIT and TIME_LIMIT_S."""
    statement = _single_statement(query)
    limit_rows = ROW_LIMIT if row_limit is None else row_limit
    limit_s = TIME_LIMIT_S if time_limit_s is None else time_limit_s
    guard = _Authorizer()
    conn = connect(path, authorizer=guard)
    deadline = time.monotonic() + limit_s
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 1_000)
    try:
        cursor = conn.execute(statement)
        rows, cut = _fetch(cursor, limit_rows)
    except sqlite3.DatabaseError as exc:
        message = str(exc)
        if message == "interrupted":
            raise ValueError(f"Refused: the query was stopped after {limit_s:g} s "
                             "(time limit); narrow it down or aggregate") from None
        if guard.denied:
            raise ValueError(f"Refused: {guard.denied}; only reading is allowed "
                             f"({message})") from None
        if "not authorized" in message or "readonly" in message:
            raise ValueError(f"Refused: only reading is allowed ({message})") from None
        if message in _LIMIT_MESSAGES:
            raise ValueError(f"Refused: {_LIMIT_MESSAGES[message]} ({message})") from None
        raise ValueError(message) from None  # SQLite's own words: "no such column: foo"
    finally:
        conn.close()
    columns = [d[0] for d in cursor.description or []]
    result: dict[str, Any] = {"columns": columns, "rows": rows, "row_count": len(rows),
                              "limited": cut is not None}
    if cut == "rows":
        result["note"] = (f"limited: only the first {limit_rows} rows are shown; "
                          "add LIMIT or aggregate")
    elif cut == "size":
        result["note"] = (f"limited: only the first {len(rows)} rows are shown, the result "
                          f"reached {RESULT_CHAR_LIMIT:,} characters; select fewer or "
                          "shorter columns (substr), or aggregate")
    return result


_LIMIT_MESSAGES = {
    "string or blob too big": "a value (or a row) would be over "
                              f"{dict(SQLITE_LIMITS)[sqlite3.SQLITE_LIMIT_LENGTH]:,} bytes, "
                              "the length limit; select shorter values (substr, length)",
    "too many columns in result set": "at most "
                                      f"{dict(SQLITE_LIMITS)[sqlite3.SQLITE_LIMIT_COLUMN]} "
                                      "columns are allowed",
}


def _fetch(cursor: sqlite3.Cursor, limit_rows: int) -> tuple[list[dict], str | None]:
    """Up to `limit_rows` rows whose values add up to at most RESULT_CHAR_LIMIT characters;
    and why it stopped early ("rows", "size") or None."""
    rows: list[dict] = []
    size = 0
    for row in cursor:
        if len(rows) == limit_rows:
            return rows, "rows"
        size += sum(len(v) if isinstance(v, str | bytes) else 8 for v in row)
        if size > RESULT_CHAR_LIMIT:
            return rows, "size"
        rows.append(dict(row))
    return rows, None


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
    conn = connect()  # no authorizer: pragma_table_info, a fixed query of ours
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
    """Run one read-only SQL SELECT on the business database (at most 200 rows, 5 s). Tables:
    customers(id, name, email, country, city, segment, signup_date), orders(id, customer_id,
    order_date, status, total), products(id, name, category, unit_price), order_items(id,
    order_id, product_id, quantity, unit_price)."""
    return run_query(query)
