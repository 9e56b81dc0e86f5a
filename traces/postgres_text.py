"""PostgreSQL stores no NUL character (U+0000) in text or JSON: every string and JSON value
this project sends it is dumped with U+FFFD in the place of each NUL.

Here, where values become the database's, and not where each source reads them: a trace
received or uploaded, a model's reply, a tool's output or a name typed in the admin may carry
a NUL, and on PostgreSQL any of them failed its write with a DataError (a step lost, a run or
upload refused with a database error). SQLite stores NUL as it is; there nothing changes.

The dumpers extend psycopg's own Python ones (its C ones cannot be subclassed): a value
without NUL costs one `in` test and a Python call. They are registered on each new
connection (`connection_created`).
"""

from __future__ import annotations

import re
from typing import Any

from psycopg.types import json, string

NUL, REPLACEMENT = "\x00", "\ufffd"
# In JSON text a NUL is the escape \u0000 (json.dumps escapes every control character); an
# even number of backslashes before it is escaped backslashes, text that only looks alike.
_JSON_NUL = re.compile(rb"(?<!\\)((?:\\\\)*)\\u0000")


def text(value: str) -> str:
    return value.replace(NUL, REPLACEMENT) if NUL in value else value


def json_text(dumped: bytes) -> bytes:
    """psycopg's JSON dumpers give bytes; one `in` test for a value without NUL, no copy."""
    return _JSON_NUL.sub(rb"\1\\ufffd", dumped) if b"\\u0000" in dumped else dumped


def _str_dumper(base: type) -> type:
    class NulFreeStr(base):  # type: ignore[valid-type, misc]
        def dump(self, obj: str) -> Any:  # quote(), for Django's client-side binding, calls it
            return super().dump(text(obj))

    NulFreeStr.__name__ = NulFreeStr.__qualname__ = f"NulFree{base.__name__}"
    return NulFreeStr


def _json_dumper(base: type) -> type:
    class NulFreeJson(base):  # type: ignore[valid-type, misc]
        def dump(self, obj: Any) -> Any:
            return json_text(super().dump(obj))

    NulFreeJson.__name__ = NulFreeJson.__qualname__ = f"NulFree{base.__name__}"
    return NulFreeJson


# What psycopg registers for these types, in its order: the text dumper last, so that it is
# also the one for PyFormat.AUTO, as by default.
_DUMPERS = [(str, _str_dumper(string.StrBinaryDumper)),
            (str, _str_dumper(string.StrDumperUnknown)),
            (json.Jsonb, _json_dumper(json.JsonbBinaryDumper)),
            (json.Jsonb, _json_dumper(json.JsonbDumper))]


def on_connection_created(sender: Any, connection: Any, **kwargs: Any) -> None:
    if connection.vendor != "postgresql":
        return
    registry = connection.connection.adapters
    for cls, dumper in _DUMPERS:
        registry.register_dumper(cls, dumper)
