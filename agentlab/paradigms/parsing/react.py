"""ReAct reply parser (package-private; import from :mod:`agentlab.paradigms.parsing`)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from agentlab.paradigms.parsing.common import (
    ParseError,
    bracket_span,
    call_args,
    clean_tool_name,
    coerce_input,
    iter_json_objects,
    split_think,
    strip_quotes,
    unwrap_fence,
)
from agentlab.paradigms.parsing.markers import (
    REACT_LABELS,
    cut_partial_stop,
    normalise_colons,
    stop_words,
    translate,
)

REACT_FORMAT = (
    "Reply in this format:\n"
    "Thought: <your reasoning>\n"
    "Action: <tool name>\n"
    "Action Input: <the tool's input as a JSON object>\n"
    "or, once you know the answer:\n"
    "Thought: <your reasoning>\n"
    "Final Answer: <the answer>"
)


@dataclass(frozen=True)
class ReactAction:
    thought: str
    tool: str
    tool_input: dict[str, Any] | str


@dataclass(frozen=True)
class ReactFinal:
    thought: str
    answer: str


# A marker at the start of a line, case-insensitive: "Thought:", "**Action 2:**",
# "### Final Answer:", "- Action Input:", "Parameters:"... The longer names come first in the
# alternation so "Action Input" is never read as "Action" followed by the text "Input:".
_LINE_MARKER_RE = re.compile(
    r"""^[ \t]*(?:[#>]+[ \t]*|[-+][ \t]+|\d+[.)][ \t]+)?   # heading, quote, bullet or "1."
        (?:\*\*|__)?[ \t]*
        (?P<name>action[ \t_-]*input|final[ \t_-]*answer|thoughts?|action|parameters
                |arguments|args|input|observation|answer)
        (?:[ \t]*\d+)?                                     # numbered: "Thought 2:"
        [ \t]*(?:\*\*|__)?[ \t]*:[ \t]*(?:\*\*|__)?[ \t]*""",
    re.IGNORECASE | re.MULTILINE | re.VERBOSE,
)
# Markers in the middle of a line ("Thought: ... Action: search Action Input: x"), for models that
# write everything on one line. Case-sensitive and only the distinctive ones, so prose like "the
# answer: 42" is never split; a bare "Action:" must follow the end of a sentence.
_INLINE_MARKER_RE = re.compile(
    r"""(?:(?<=\S)[ \t]+(?:\*\*)?(?P<name>Action[ ]Input|Final[ ]Answer|Observation)
        |(?<=[.!?)\]"'`*])[ \t]+(?:\*\*)?(?P<name2>Action))
        (?:[ \t]*\d+)?(?:\*\*)?:(?:\*\*)?[ \t]*""",
    re.VERBOSE,
)
# The ReAct paper's bracket form on a line of its own, without a marker: "Search[Python]".
_BARE_CALL_RE = re.compile(r"^[ \t]*(?P<name>[A-Za-z_][\w.-]*)\[(?=.*\][ \t]*$)", re.MULTILINE)
# The head of a call in an Action line: "Search[", "`get_weather`(", "**Lookup** [".
_CALL_HEAD_RE = re.compile(r"[`*\"']*(?P<name>[A-Za-z_][\w.-]*)[`*\"']*[ \t]*(?P<open>[\[(])")
# A fence opener left at the end of the text before a JSON blob ("... ```json").
_TRAILING_FENCE_RE = re.compile(r"```[\w+.-]*\s*\Z")
# Looks like the model tried to write a JSON action, for a more helpful error when it is broken.
_BROKEN_BLOB_RE = re.compile(r"[{,]\s*[\"'](?:action|tool|name)[\"']\s*:")

_KINDS = {
    "thought": "thought", "thoughts": "thought", "action": "action", "parameters": "input",
    "arguments": "input", "args": "input", "input": "input", "observation": "observation",
    "answer": "answer",
}  # fmt: skip
# Values of "Action:" that mean "no tool this turn".
_NULL_ACTIONS = {"", "none", "n/a", "na", "null", "nil", "nothing", "no action", "no_action", "-"}
# Tool names that mean "I am done": LangChain's structured-chat "Final Answer" and ReAct's finish.
_FINAL_ACTIONS = {"final answer", "final_answer", "finalanswer", "final-answer", "finish"}
# Keys of a JSON action blob, most specific first.
_BLOB_ACTION_KEYS = ("action", "tool", "tool_name", "function")
_BLOB_INPUT_KEYS = (
    "action_input",
    "tool_input",
    "arguments",
    "args",
    "parameters",
    "params",
    "input",
)
_BLOB_FINAL_KEYS = ("final_answer", "finalAnswer")
# Section kinds that end a multi-line input or final answer. "Input:"/"Answer:" do not: they can
# legitimately appear inside an answer.
_HARD_STOPS = {"thought", "action", "final", "observation"}


@dataclass(frozen=True)
class _Section:
    kind: str  # text (before any marker), thought, action, input, final, answer, observation
    start: int  # where the content starts (just after the marker)
    end: int  # where the next marker starts

    def content(self, text: str) -> str:
        return text[self.start : self.end]


def _sections(text: str) -> list[_Section]:
    """Split the reply at its markers; the first section is the text before any marker."""
    found: list[tuple[int, int, str]] = []
    for m in _LINE_MARKER_RE.finditer(text):
        found.append((m.start(), m.end(), m.group("name")))
    for m in _INLINE_MARKER_RE.finditer(text):
        found.append((m.start(), m.end(), m.group("name") or m.group("name2")))
    found.sort()
    sections: list[_Section] = []
    pos, kind = 0, "text"
    for start, end, name in found:
        if start < pos:  # overlapping matches: the earlier one already took this text
            continue
        sections.append(_Section(kind, pos, start))
        pos, kind = end, _kind(name)
    sections.append(_Section(kind, pos, len(text)))
    return sections


def _kind(name: str) -> str:
    name = re.sub(r"[\s_-]+", " ", name.lower())
    if name == "action input":
        return "input"
    if name == "final answer":
        return "final"
    return _KINDS[name]


def parse_react(text: str, *, markers: Mapping[str, Iterable[str]] | None = None
                ) -> ReactAction | ReactFinal:
    """Read one ReAct turn: a tool call (:class:`ReactAction`) or the answer (:class:`ReactFinal`).
    ``markers`` gives other names for the labels (parsing/markers.py REACT_LABELS' keys).

    Whatever comes first wins: an Action followed by a Final Answer is an action (the model
    must see the observation before answering) and vice versa. Everything after the first
    decision's ``Observation:`` is the model hallucinating the tool's result and is ignored.
    """
    if not text or not text.strip():
        raise ParseError("The reply was empty. " + REACT_FORMAT)
    # Markers in another language or with a full-width colon read as the English ones, and a
    # stop word cut off at the end ("…}\nObs") is not part of the input.
    text = normalise_colons(translate(text.replace("\r\n", "\n"), markers, REACT_LABELS))
    text = cut_partial_stop(text, stop_words(markers, "observation", "Observation"))
    thinking, body = split_think(text)
    body = unwrap_fence(body)
    sections = _sections(body)
    thoughts: list[str] = []
    weak_answer: _Section | None = None  # "Answer:" counts only when no action is found
    null_action: str | None = None

    def thought_text(extra: str = "", *, preamble: bool = True) -> str:
        # The Thought sections, else the text before the first marker, else the <think> block.
        joined = "\n".join(p for p in [*thoughts, extra.strip()] if p)
        if not joined and preamble and sections[0].kind == "text":
            joined = sections[0].content(body).strip()
        return joined or thinking

    for i, current in enumerate(sections):
        kind = current.kind
        if kind == "observation":
            if weak_answer is not None:
                break
            continue  # an echo of an earlier observation, before this turn's decision
        if kind in ("text", "thought"):
            found = _scan_free_text(body, current)
            if found is not None:
                before, result = found
                return _with_thought(result, thought_text(before, preamble=i > 0))
            if kind == "thought":
                thoughts.append(current.content(body).strip())
            continue
        if kind == "action":
            result = _read_action(body, sections, i)
            if isinstance(result, str):
                null_action = result
                continue
            return _with_thought(result, thought_text())
        if kind == "final":
            return ReactFinal(thought_text(), _answer_text(body, sections, i))
        if kind == "answer" and weak_answer is None:
            weak_answer = current
    if weak_answer is not None:
        return ReactFinal(thought_text(), _answer_text(body, sections, sections.index(weak_answer)))
    if null_action is not None:
        shown = f"'Action: {null_action}'" if null_action else "An empty 'Action:' line"
        raise ParseError(f"{shown} was given without a Final Answer. " + REACT_FORMAT)
    if any(s.kind == "input" for s in sections):
        raise ParseError(
            "Found an 'Action Input:' but no 'Action:' line naming the tool. " + REACT_FORMAT
        )
    if _BROKEN_BLOB_RE.search(body):
        raise ParseError(
            "The JSON action could not be read: it is not valid JSON. Write it as "
            '{"action": "<tool name>", "action_input": {...}} or ' + REACT_FORMAT
        )
    raise ParseError("Could not find an Action or a Final Answer. " + REACT_FORMAT)


def _with_thought(result: ReactAction | ReactFinal, thought: str) -> ReactAction | ReactFinal:
    if result.thought:  # a blob's own "thought" key wins over the surrounding text
        return result
    if isinstance(result, ReactAction):
        return ReactAction(thought, result.tool, result.tool_input)
    return ReactFinal(thought, result.answer)


def _scan_free_text(body: str, sec: _Section) -> tuple[str, ReactAction | ReactFinal] | None:
    """Find a JSON action blob or a bare ``Search[x]`` line in free text (no Action marker)."""
    blob = _find_blob(body, sec.start, sec.end)
    bare = _BARE_CALL_RE.search(body, sec.start, sec.end)
    if bare is not None and (blob is None or bare.start() < blob[0]):
        inner_start, close = bracket_span(body, bare.end() - 1, sec.end)
        result = _call_result(bare.group("name"), body[inner_start:close], None)
        return body[sec.start : bare.start()], result
    if blob is not None:
        before = _TRAILING_FENCE_RE.sub("", body[sec.start : blob[0]])
        return before, blob[1]
    return None


def _find_blob(body: str, start: int, stop: int) -> tuple[int, ReactAction | ReactFinal] | None:
    for begin, _end, obj in iter_json_objects(body, start, stop):
        result = _blob_result(obj)
        if result is not None:
            return begin, result
    return None


def _blob_result(obj: dict[str, Any]) -> ReactAction | ReactFinal | None:
    """Read {"action": ..., "action_input": ...} and its variants; None if obj is not one."""
    thought = obj.get("thought") or obj.get("thoughts") or ""
    thought = thought.strip() if isinstance(thought, str) else json.dumps(thought)
    if isinstance(obj.get("function"), dict):  # OpenAI style {"function": {"name", "arguments"}}
        inner = _blob_result(obj["function"])
        return inner and _with_thought(inner, thought)
    name = next((obj[k] for k in _BLOB_ACTION_KEYS if isinstance(obj.get(k), str)), None)
    if (
        name is None
        and isinstance(obj.get("name"), str)
        and ("arguments" in obj or "parameters" in obj)
    ):
        name = obj["name"]
    raw_input = next((obj[k] for k in _BLOB_INPUT_KEYS if k in obj), "")
    if name is not None:
        tool = clean_tool_name(name)
        if tool.lower() in _FINAL_ACTIONS:
            return ReactFinal(thought, _answer_from_value(raw_input))
        if tool.lower() not in _NULL_ACTIONS:
            return ReactAction(thought, tool, _input_from_value(raw_input))
    final = next((obj[k] for k in _BLOB_FINAL_KEYS if k in obj), None)
    if final is None and thought and "answer" in obj:
        final = obj["answer"]  # {"thought", "answer"}; a bare {"answer"} may be quoted data
    if final is not None:
        return ReactFinal(thought, _answer_from_value(final))
    return None


def _input_from_value(value: Any) -> dict[str, Any] | str:
    if isinstance(value, dict):
        return value
    if value is None:
        return ""
    if isinstance(value, str):
        return coerce_input(value)  # OpenAI sends arguments as a JSON string
    return json.dumps(value)


def _answer_from_value(value: Any) -> str:
    if isinstance(value, dict) and len(value) == 1:  # {"answer": "42"} as the "input"
        value = next(iter(value.values()))
    if value is None:
        value = ""
    answer = value.strip() if isinstance(value, str) else json.dumps(value)
    if not answer:
        raise ParseError("The Final Answer was empty. " + REACT_FORMAT)
    return answer


def _read_action(body: str, sections: list[_Section], i: int) -> ReactAction | ReactFinal | str:
    """Read the action at sections[i]; a str result is a null action ("None", "N/A", "")."""
    sec = sections[i]
    content = sec.content(body)
    stripped = content.strip()
    offset = sec.start + len(content) - len(content.lstrip())
    explicit = _explicit_input(body, sections, i)
    if stripped.startswith(("{", "```")):  # LangChain's "Action:\n```json {"action": ...}```"
        blob = _find_blob(body, offset, sec.end)
        if blob is not None:
            return blob[1]
    first_line, _, rest = stripped.partition("\n")
    head = _CALL_HEAD_RE.match(stripped)
    if head is not None and "\n" not in stripped[: head.end()]:
        inner_start, close = bracket_span(body, offset + head.start("open"), sec.end)
        return _call_result(head.group("name"), body[inner_start:close], explicit)
    tool = clean_tool_name(first_line)
    if tool.lower() in _NULL_ACTIONS:
        return tool
    if explicit is None and rest.strip().startswith(("{", "```")):
        explicit = coerce_input(rest, body, offset + len(stripped) - len(rest))
    if tool.lower() in _FINAL_ACTIONS:  # "Action: Final Answer\nAction Input: 42"
        value = explicit if explicit is not None else ""
        return ReactFinal("", _answer_from_value(value))
    return ReactAction("", tool, "" if explicit is None else explicit)


def _call_result(
    name: str, inner: str, explicit: dict[str, Any] | str | None
) -> ReactAction | ReactFinal:
    """``Search[x]`` / ``get_weather(city="Paris")``; an explicit Action Input wins if non-empty."""
    tool = clean_tool_name(name)
    if tool.lower() in _FINAL_ACTIONS:
        return ReactFinal("", _answer_from_value(strip_quotes(inner)))
    if explicit is not None and explicit != "":
        return ReactAction("", tool, explicit)
    return ReactAction("", tool, call_args(inner))


def _explicit_input(body: str, sections: list[_Section], i: int) -> dict[str, Any] | str | None:
    """The Action Input section that belongs to the action at sections[i], if any."""
    for sec in sections[i + 1 :]:
        if sec.kind == "input":
            content = sec.content(body)
            return coerce_input(content, body, sec.start + len(content) - len(content.lstrip()))
        if sec.kind in _HARD_STOPS:
            return None
    return None


def _answer_text(body: str, sections: list[_Section], i: int) -> str:
    """The final answer: its section plus following Input:/Answer: lines, to the next turn."""
    stop = next((k for k in range(i + 1, len(sections)) if sections[k].kind in _HARD_STOPS), None)
    end = sections[stop - 1].end if stop is not None else len(body)
    answer = body[sections[i].start : end].strip()
    if answer.endswith("```") and answer.count("```") == 1:  # a stray closing fence
        answer = answer[:-3].rstrip()
    if not answer:
        raise ParseError("The Final Answer was empty. " + REACT_FORMAT)
    return answer
