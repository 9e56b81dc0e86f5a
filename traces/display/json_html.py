"""A JSON value as highlighted HTML: the very HTML Pygments makes of it indented (its
JsonLexer and the HtmlFormatter traces/display/highlight.py configures), made straight from
the value, several times faster.

Why: a live step's partial highlights its JSON payloads (a tool's arguments, an LLM call's
tool calls and reply), and lexing the indented text and formatting its tokens through
Pygments cost ~30 µs for a three-line object and ~190 µs for a reply: most of the CPU of
rendering a received span's step (`manage.py bench_ingest --profile`). The value's own shape
says what every token is, so nothing is lexed. Only plain JSON values take this path (dicts
with text keys, lists, text, numbers, booleans, None; no NaN): anything else, Pygments.
tests/test_json_html.py checks the output against Pygments' over generated values.
"""

from __future__ import annotations

import json
import math
from html import escape
from typing import Any

HEAD, TAIL = '<div class="hl"><pre><span></span>', "</pre></div>\n"
INDENT = "  "  # highlight.to_json's indent=2
W = '<span class="w">'
CLOSE = "</span>"
_DUMPS = json.JSONEncoder(ensure_ascii=False).encode  # a text value as to_json writes it


class NotPlain(Exception):
    """A value this path does not write as to_json would (Pygments takes it)."""


def value_html(value: Any) -> str | None:
    """`value` as Pygments highlights `json.dumps(value, indent=2, ensure_ascii=False)`,
    or None when it is not a plain JSON value."""
    lines: list[str] = []
    try:
        _value(value, 0, [], "", lines)
    except (NotPlain, RecursionError):
        return None
    return HEAD + "".join(lines) + TAIL


def _scalar(value: Any) -> tuple[str, str]:
    """(CSS class, HTML) of a value that is one token."""
    if isinstance(value, str):
        return "s2", escape(_DUMPS(value), quote=False)
    if value is None:
        return "kc", "null"
    if value is True:
        return "kc", "true"
    if value is False:
        return "kc", "false"
    if type(value) is int:
        return "mi", repr(value)
    if type(value) is float and math.isfinite(value):
        text = repr(value)  # what json writes (float.__repr__)
        return ("mf" if any(c in text for c in ".eE+") else "mi"), text
    raise NotPlain


def _value(value: Any, depth: int, line: list[str], after: str, lines: list[str]) -> None:
    """Write `value`, its first token onto the open `line` (spans already there, ending with
    a whitespace or colon span, or nothing), `after` (',' or '') following its last token."""
    if isinstance(value, dict):
        items, opener, closer = list(value.items()), "{", "}"
    elif isinstance(value, list | tuple):
        items, opener, closer = list(enumerate(value)), "[", "]"
    else:
        cls, html = _scalar(value)
        line.append(f'<span class="{cls}">{html}</span>')
        if after:
            line.append(f'<span class="p">{after}</span>')
        lines.append("".join(line) + "\n")
        return
    if not items:  # "[]," is one punctuation token
        line.append(f'<span class="p">{opener}{closer}{after}</span>')
        lines.append("".join(line) + "\n")
        return
    line.append(f'<span class="p">{opener}</span>')
    lines.append("".join(line) + "\n")
    pad = f"{W}{INDENT * (depth + 1)}{CLOSE}"
    last = len(items) - 1
    for n, (key, item) in enumerate(items):
        inner = [pad]
        if opener == "{":
            if not isinstance(key, str):
                raise NotPlain  # json's own conversion of keys is not worth copying
            inner.append(f'<span class="nt">{escape(_DUMPS(key), quote=False)}</span>'
                         f'<span class="p">:</span>{W} {CLOSE}')
        _value(item, depth + 1, inner, "," if n < last else "", lines)
    end = [f"{W}{INDENT * depth}{CLOSE}"] if depth else []
    end.append(f'<span class="p">{closer}{after}</span>')
    lines.append("".join(end) + "\n")
