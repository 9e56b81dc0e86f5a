"""Helpers shared by the parsers in :mod:`agentlab.paradigms.parsing` (package-private)."""

from __future__ import annotations

import ast
import contextlib
import json
import re
from collections.abc import Iterator
from typing import Any


class ParseError(ValueError):
    """The model's reply could not be read.

    ``str(error)`` is written for the model, not for a developer: it says what was wrong and
    restates the expected format, so a paradigm can send it back verbatim as the next
    observation / user message and let the model correct itself.
    """


# A fenced block: ```lang\n body ```. The language tag is optional and a missing closing fence
# (output cut off by max_tokens) still counts, so truncated replies keep their body.
FENCE_RE = re.compile(r"```[ \t]*[\w+.-]*[ \t]*\n?(?P<body>.*?)(?:```|\Z)", re.DOTALL)

# A reply that is nothing but one fenced block (some models fence everything they write).
_WHOLE_FENCE_RE = re.compile(
    r"\A\s*```[ \t]*[\w+.-]*[ \t]*\n(?P<body>.*?)\n?[ \t]*```\s*\Z", re.DOTALL
)

# Reasoning models (DeepSeek-R1, Qwen3...) wrap their scratchpad in <think>...</think>; drafts of
# actions inside it must not be executed. Some servers drop the opening tag, keeping "...</think>".
_THINK_RE = re.compile(r"<think>(?P<body>.*?)(?:</think>|\Z)", re.DOTALL | re.IGNORECASE)
_THINK_CLOSE_RE = re.compile(r"\A(?P<body>.*?)</think>", re.DOTALL | re.IGNORECASE)

_QUOTE_PAIRS = {'"': '"', "'": "'", "`": "`", "\u201c": "\u201d", "\u2018": "\u2019"}

_DECODER = json.JSONDecoder()
# Worth a Python-literal retry only when it looks like a quoted key/item follows the bracket.
_LITERAL_START_RE = re.compile(r"[{\[]\s*['\"]")
# Bounds on the literal fallback so a reply full of braces stays linear-ish, not quadratic.
_LITERAL_MAX_CHARS = 20_000
_LITERAL_MAX_TRIES = 20


def split_think(text: str) -> tuple[str, str]:
    """Return (thinking, rest): the <think> blocks' text and the reply without them."""
    thinking = [m.group("body").strip() for m in _THINK_RE.finditer(text)]
    rest = _THINK_RE.sub("", text)
    if not thinking and (m := _THINK_CLOSE_RE.match(rest)):
        thinking, rest = [m.group("body").strip()], rest[m.end() :]
    return "\n".join(t for t in thinking if t), rest


def unwrap_fence(text: str) -> str:
    """Strip one fence around the whole text, if the text is exactly one fenced block."""
    m = _WHOLE_FENCE_RE.match(text)
    if m and "```" not in m.group("body"):
        return m.group("body")
    return text


def strip_quotes(text: str) -> str:
    """Strip whitespace and one pair of matching surrounding quotes or backticks."""
    text = text.strip()
    if len(text) >= 2 and _QUOTE_PAIRS.get(text[0]) == text[-1]:
        text = text[1:-1].strip()
    return text


def _balanced_end(text: str, start: int) -> int | None:
    """Index just past the bracket group opening at text[start], skipping quoted strings."""
    depth, quote, i = 0, "", start
    stop = min(len(text), start + _LITERAL_MAX_CHARS)
    while i < stop:
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def load_value(text: str, start: int = 0, *, literal: bool = True) -> tuple[Any, int] | None:
    """Decode the JSON value starting at text[start]; return (value, end index) or None.

    Falls back to a Python literal for what models often write instead of JSON: single quotes,
    True/False/None, trailing commas (skipped with ``literal=False``).
    """
    try:
        return _DECODER.raw_decode(text, start)
    except json.JSONDecodeError:
        pass
    if not literal or text[start : start + 1] not in ("{", "["):
        return None
    end = _balanced_end(text, start)
    if end is None:
        return None
    span = text[start:end]
    tries = [span] if _LITERAL_START_RE.match(text, start) else []
    if "//" in span or "/*" in span or "#" in span:  # JSON with comments ("// the city")
        tries.append(strip_comments(span))
    for candidate in tries:
        with contextlib.suppress(ValueError):
            return json.loads(candidate), end
        with contextlib.suppress(ValueError, SyntaxError, TypeError, MemoryError,
                                 RecursionError):
            return ast.literal_eval(candidate), end
    return None


_COMMENT_RE = re.compile(r"""("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')|//[^\n]*|/\*.*?\*/|\#[^\n]*""",
                         re.DOTALL)


def strip_comments(text: str) -> str:
    """Remove //, /* */ and # comments outside strings (what models put in their JSON)."""
    return _COMMENT_RE.sub(lambda m: m.group(1) or "", text)


def iter_json_objects(
    text: str, start: int = 0, stop: int | None = None
) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """Yield (start, end, object) for each top-level JSON object beginning in text[start:stop].

    An object may extend past ``stop``: markers that happen to sit inside a JSON string must not
    cut it short.
    """
    stop = len(text) if stop is None else stop
    pos, failures = start, 0
    while (begin := text.find("{", pos, stop)) != -1:
        loaded = load_value(text, begin, literal=failures < _LITERAL_MAX_TRIES)
        if loaded is not None and isinstance(loaded[0], dict):
            yield begin, loaded[1], loaded[0]
            pos = loaded[1]
        else:
            failures += 1
            pos = begin + 1


def bracket_span(text: str, open_idx: int, limit: int | None = None) -> tuple[int, int]:
    """Return (inner_start, close_idx) of the ``[...]`` or ``(...)`` group opening at open_idx.

    Brackets are balanced so ``Search[Python [language]]`` keeps its inner pair. When the
    input itself is unbalanced (``Search[a] b]``, ``LLM[Summarise [the text]``), the LAST
    closing bracket on the opening line is used instead; with none, the rest of the line.
    ``close_idx`` is where the closing bracket is (or the end of the line when there is none).
    """
    limit = len(text) if limit is None else limit
    open_ch = text[open_idx]
    close_ch = "]" if open_ch == "[" else ")"
    line_end = text.find("\n", open_idx, limit)
    line_end = limit if line_end == -1 else line_end
    depth = 0
    for i in range(open_idx, limit):
        if text[i] == open_ch:
            depth += 1
        elif text[i] == close_ch:
            depth -= 1
            if depth == 0:
                rest = text[i + 1 : line_end] if i < line_end else ""
                # A stray closer later on the same line belongs to the input, unless a new
                # group opens there (a second call written on the same line).
                if close_ch in rest and open_ch not in rest:
                    return open_idx + 1, i + 1 + rest.rindex(close_ch)
                return open_idx + 1, i
    last = text.rfind(close_ch, open_idx, line_end)
    return open_idx + 1, (last if last != -1 else line_end)


def clean_tool_name(name: str) -> str:
    """Normalise a tool name: '`get_weather()`.' -> 'get_weather', '[search]' -> 'search'."""
    name = name.strip().strip("*_").strip()
    name = strip_quotes(name)
    if name.startswith("[") and name.endswith("]"):  # "Action: [search]" copied from the prompt
        name = name[1:-1]
    name = name.strip().rstrip(".,;:!?").strip()
    if name.endswith("()"):
        name = name[:-2]
    return strip_quotes(name)


def call_args(inner: str) -> dict[str, Any] | str:
    """Arguments of a function-call form: JSON object, keyword literals -> dict, else the text."""
    inner = inner.strip()
    if inner.startswith("{"):
        return coerce_input(inner)
    if "=" in inner:
        try:
            call = ast.parse(f"f({inner})", mode="eval").body
            if isinstance(call, ast.Call) and not call.args and call.keywords:
                return {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords if kw.arg}
        except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
            pass
    return strip_quotes(inner)


# An input written as a call of the tool: `SomeTool({...})`, `get_weather({"city": "Paris"})`.
_CALL_WRAP_RE = re.compile(r"\A`?[A-Za-z_][\w.-]*[ \t]*\([ \t]*(?P<inner>\{.*\})[ \t]*\)`?"
                           r"[ \t]*[.;]?\s*\Z", re.DOTALL)


def coerce_input(raw: str, body: str | None = None, offset: int = 0) -> dict[str, Any] | str:
    """Turn an Action Input into a dict (JSON object, possibly fenced) or a stripped string.

    With ``body``/``offset`` (where ``raw`` sits in the reply) a JSON object or fence is read
    from the whole reply, so a marker-like phrase inside a JSON string does not cut it short.
    """
    stripped = raw.strip()
    if (call := _CALL_WRAP_RE.match(stripped)) is not None:  # get_weather({"city": "Paris"})
        return coerce_input(call.group("inner"))
    source, pos = (body, offset) if body is not None else (stripped, 0)
    if stripped.startswith("```"):
        fence = FENCE_RE.match(source, pos)
        if fence is not None:
            stripped = fence.group("body").strip()
            source, pos = stripped, 0
    if stripped.startswith("{"):
        loaded = load_value(source, pos)
        if loaded is not None and isinstance(loaded[0], dict):
            return loaded[0]
    if stripped.endswith("```") and stripped.count("```") == 1:  # a stray closing fence
        stripped = stripped[:-3].rstrip()
    value = strip_quotes(stripped)
    return "" if value.lower() in ("none", "null", "n/a") else value
