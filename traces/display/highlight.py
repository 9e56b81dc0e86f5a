"""Pygments behind small functions: JSON, SQL, code and diffs to HTML (escaped by Pygments).

`python -m traces.display.highlight > static/agentlab/pygments.css` regenerates the one stylesheet
(light rules, then dark ones under prefers-color-scheme); a test keeps the committed file current.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from pygments import highlight as pygments_highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

from traces.display.json_html import value_html

CSS_CLASS = "hl"
LIGHT_STYLE, DARK_STYLE = "default", "github-dark"
_SQL = re.compile(r"^\s*(select|with|insert|update|delete|create|explain|pragma)\b", re.I)
_DIFF = re.compile(r"^(--- |\+\+\+ |@@ |diff --git )", re.M)
# Keys of tool arguments whose string value is code in a known language.
CODE_KEYS = {"sql": "sql", "query": "sql", "code": "python", "source": "python",
             "python": "python", "script": "python", "java": "java", "diff": "diff",
             "patch": "diff"}


@lru_cache(maxsize=32)
def _lexer(name: str) -> Lexer:
    try:
        return get_lexer_by_name(name, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return get_lexer_by_name("text", stripnl=False, ensurenl=False)


_FORMATTER = HtmlFormatter(cssclass=CSS_CLASS)


CACHED_CHARS = 4096  # payloads up to this size keep their highlighting (a few MB at most)


def highlight(code: str, lexer: str) -> SafeString:
    """`code` as highlighted HTML; Pygments escapes every token, so the result is safe."""
    if lexer in ("", "text"):
        return plain(code)
    if len(code) <= CACHED_CHARS:  # a live step is rendered again for each of its versions
        return _highlighted(code, lexer)
    return _pygments(code, lexer)


def _pygments(code: str, lexer: str) -> SafeString:
    return mark_safe(pygments_highlight(code, _lexer(lexer), _FORMATTER))  # noqa: S308


_highlighted = lru_cache(maxsize=1024)(_pygments)


def plain(text: str) -> SafeString:
    return mark_safe(f'<div class="{CSS_CLASS}"><pre>{escape(text)}</pre></div>')  # noqa: S308


def to_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def json_size(value: Any) -> int:
    """Characters of `value` as stored (compact JSON, as the database's Length() counts).
    Not to_json's length: indent makes json use its pure-Python encoder, ~10× slower, and a
    live llm step's whole conversation is sized this way on every frame."""
    return len(json.dumps(value, ensure_ascii=False, default=str))


def guess_lexer(text: str) -> str:
    """A lexer name for free text: JSON, a diff, SQL, or plain."""
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            json.loads(stripped)
        except ValueError:
            pass
        else:
            return "json"
    if _DIFF.search(text):
        return "diff"
    if _SQL.match(text):
        return "sql"
    return "text"


def highlight_value(value: Any) -> SafeString:
    """Any payload: strings by their look, everything else as indented JSON."""
    if isinstance(value, str):
        return highlight(value, guess_lexer(value))
    try:  # compact JSON (C speed) finds a value highlighted before without indenting it again
        compact = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        compact = None
    if compact is not None and len(compact) <= CACHED_CHARS:
        return _highlight_json(compact)
    return _json(value)


@lru_cache(maxsize=512)
def _highlight_json(compact: str) -> SafeString:
    return _json(json.loads(compact))


def _json(value: Any) -> SafeString:
    """A value as indented JSON, highlighted: straight from the value when it is plain JSON
    (the same HTML as Pygments', several times faster: json_html.py), else by Pygments."""
    if (fast := value_html(value)) is not None:
        return mark_safe(fast)  # noqa: S308 (every text escaped, as Pygments does)
    return highlight(to_json(value), "json")


def code_blocks(value: Any) -> list[tuple[str, SafeString]]:
    """Code inside tool arguments ({"sql": "SELECT…"}), highlighted in its own language."""
    if not isinstance(value, dict):
        return []
    blocks = []
    for key, item in value.items():
        lexer = CODE_KEYS.get(str(key).lower())
        if not lexer or not isinstance(item, str) or not item.strip():
            continue
        if lexer == "sql" and not _SQL.match(item):
            continue  # a "query" argument is often a search phrase, not SQL
        blocks.append((str(key), highlight(item, lexer)))
    return blocks


def stylesheet() -> str:
    """The light rules, then the dark ones under prefers-color-scheme (no backgrounds: the
    page's own code panel colour shows through)."""
    def rules(style: str) -> str:
        css = HtmlFormatter(style=style, cssclass=CSS_CLASS).get_style_defs(f".{CSS_CLASS}")
        lines = [line for line in css.splitlines()
                 if not line.startswith((f".{CSS_CLASS} {{ background", "pre {", "td.linenos",
                                         "span.linenos", "td.", "span."))]
        return "\n".join(lines)

    dark = "\n".join(f"  {line}" for line in rules(DARK_STYLE).splitlines())
    return (f"/* Generated by `python -m traces.display.highlight` from Pygments styles "
            f"{LIGHT_STYLE!r} (light) and {DARK_STYLE!r} (dark). Do not edit. */\n"
            f"{rules(LIGHT_STYLE)}\n"
            f"@media (prefers-color-scheme: dark) {{\n{dark}\n}}\n")


if __name__ == "__main__":
    print(stylesheet(), end="")
