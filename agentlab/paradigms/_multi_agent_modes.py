"""Pure helpers of Multi-Agent (package-private): members, answer reading, voting, routing."""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from agentlab.paradigms.parsing import ParseError, iter_json_objects, unwrap_fence
from agentlab.paradigms.prompt_files import load_prompt

FINISH = "FINISH"
ROUTE_HINT = ('Reply with one JSON object: {"next": "<worker name or FINISH>", '
              '"instruction": "...", "answer": "..."}')


@dataclass(frozen=True)
class Member:
    """One participant: a configured agent (`agent`), or an inline role (`instructions`)
    answering with one LLM call, or with a ReAct sub-run when `tools` is true."""

    name: str
    instructions: str = ""
    agent: str = ""
    tools: bool = False


def members_for(mode: str, configured: list[dict[str, Any]]) -> list[Member]:
    """The configured members, or the mode's defaults when none are configured."""
    raw = configured or json.loads(load_prompt("multi_agent_members.json"))[mode]
    try:
        members = [Member(**item) for item in raw]
    except TypeError as exc:  # params that skipped the admin's schema check
        raise ValueError(f"invalid member in params.members: {exc}") from None
    counts = Counter(m.name.casefold() for m in members)
    if twice := sorted(name for name, n in counts.items() if n > 1):
        raise ValueError(f"member names must be unique; repeated: {', '.join(twice)}")
    if mode == "supervisor" and FINISH.casefold() in counts:
        raise ValueError(f"no member may be called {FINISH}: the supervisor uses it to stop")
    return members


_FINAL_RE = re.compile(r"^[ \t*#>_-]*final[ \t]+answer[ \t*_]*:[ \t*_]*", re.IGNORECASE
                       | re.MULTILINE)


def final_answer(text: str) -> str:
    """The text after the last "Final answer:" line, else the whole text (stripped)."""
    marks = list(_FINAL_RE.finditer(text or ""))
    answer = text[marks[-1].end():] if marks else (text or "")
    return answer.strip().strip("*_").strip()


def vote_key(answer: str) -> str:
    """What two answers must share to count as the same vote: case, punctuation and spacing
    do not matter ("2.1 million." == "2.1 Million")."""
    cleaned = re.sub(r"[^\w\s.,]", " ", final_answer(answer).casefold())
    return " ".join(cleaned.split()).strip(" .,")


def majority(answers: dict[str, str]) -> tuple[str | None, dict[str, int]]:
    """(the winning answer, or None on a tie; votes per normalised answer)."""
    keys = {name: vote_key(text) for name, text in answers.items()}
    votes = dict(Counter(keys.values()).most_common())
    top = max(votes.values(), default=0)
    leaders = [key for key, n in votes.items() if n == top]
    if len(leaders) != 1:
        return None, votes
    winner = next(name for name, key in keys.items() if key == leaders[0])
    return final_answer(answers[winner]), votes


@dataclass(frozen=True)
class Route:
    next: str
    instruction: str = ""
    answer: str = ""


def route_format(names: list[str]) -> dict[str, Any]:
    """Structured output for the router; `next` is limited to the workers and FINISH."""
    return {"type": "json_schema", "json_schema": {"name": "supervisor_route", "strict": True,
            "schema": {"type": "object", "properties": {
                "next": {"enum": [*names, FINISH]}, "instruction": {"type": "string"},
                "answer": {"type": "string"}},
                "required": ["next", "instruction", "answer"], "additionalProperties": False}}}


_FIELD_RE = {key: re.compile(rf"^[ \t*\"'-]*{key}[ \t*\"']*:[ \t]*(?P<value>.+)$",
                             re.IGNORECASE | re.MULTILINE)
             for key in ("next", "instruction", "answer")}


def read_route(text: str) -> Route:
    """The router's decision from JSON, or from "next: ..." lines when it wrote text."""
    body = unwrap_fence((text or "").strip())
    for _, _, obj in iter_json_objects(body):
        if isinstance(obj.get("next"), str) and obj["next"].strip():
            return Route(obj["next"].strip(), _text(obj.get("instruction")),
                         _text(obj.get("answer")))
    found = {key: m.group("value").strip().strip("\"',") for key, regex in _FIELD_RE.items()
             if (m := regex.search(body))}
    if found.get("next"):
        return Route(found["next"], found.get("instruction", ""), found.get("answer", ""))
    raise ParseError(f"the supervisor's reply names no next worker. {ROUTE_HINT}")


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value.strip() if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
