"""The Self-Ask turn: the next follow-up question, or the final answer (Press et al. 2022)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from agentlab.paradigms.parsing.common import ParseError
from agentlab.paradigms.parsing.markers import (
    SELF_ASK_LABELS,
    cut_partial_stop,
    normalise_colons,
    stop_words,
    translate,
)

SELF_ASK_FORMAT = (
    "Reply in this format:\n"
    "Are follow up questions needed here: Yes.\n"
    "Follow up: <one question>\n"
    "or, when you know the answer:\n"
    "So the final answer is: <the answer>"
)


@dataclass(frozen=True)
class FollowUp:
    question: str


@dataclass(frozen=True)
class SelfAskFinal:
    answer: str


# The Self-Ask markers (Press et al. 2022), anywhere in the text, case-insensitive, any spacing
# around the colon. "needed" comes first: it contains "follow up" too (without a colon).
# "Question:" only at a line start; it bounds an answer when the scratchpad moves on.
_SELF_ASK_RE = re.compile(
    r"""(?P<needed>\bare[ \t]+follow[ \t-]*up[ \t]+questions[ \t]+needed(?:[ \t]+here)?[ \t]*[:?]?)
      |(?P<follow>\bfollow[ \t-]*up(?:[ \t]+question)?[ \t]*:)
      |(?P<inter>\bintermediate[ \t]+answer[ \t]*:)
      |(?P<final>\bso[ \t]+the[ \t]+(?:final[ \t]+)?answer[ \t]+is\b[ \t]*:?
                 |\bthe[ \t]+final[ \t]+answer[ \t]+is[ \t]*:|^[ \t]*final[ \t]+answer[ \t]*:)
      |(?P<question>^[ \t]*question[ \t]*:)""",
    re.IGNORECASE | re.MULTILINE | re.VERBOSE,
)


def _clean(text: str) -> str:
    return text.strip().strip("*_").strip()


def parse_self_ask(text: str, *, markers: Mapping[str, Iterable[str]] | None = None
                   ) -> FollowUp | SelfAskFinal:
    """Read a Self-Ask turn: the next follow-up question, or the final answer. ``markers``
    gives other names for the prefixes (parsing/markers.py SELF_ASK_LABELS' keys)."""
    text = (text or "").replace("\r\n", "\n")
    text = normalise_colons(translate(text, markers, SELF_ASK_LABELS))
    text = cut_partial_stop(text, stop_words(markers, "intermediate_answer",
                                             "Intermediate answer"))
    marks = list(_SELF_ASK_RE.finditer(text))
    ends = [m.start() for m in marks[1:]] + [len(text)]
    parts = [(m.lastgroup, text[m.end() : end]) for m, end in zip(marks, ends, strict=False)]
    kinds = [kind for kind, _ in parts]
    follow = max((i for i, k in enumerate(kinds) if k == "follow"), default=None)
    final = max((i for i, k in enumerate(kinds) if k == "final"), default=None)
    # An "Intermediate answer:" with nothing after it is the stop sequence echoed, not an answer.
    answered = follow is not None and any(
        kind == "inter" and body.strip() for kind, body in parts[follow:]
    )
    if follow is not None and not answered and (final is None or final < follow):
        # The question is its first line: the stop sequence should end the text right after it,
        # and whatever a model adds on later lines is not part of the question.
        lines = [line for line in parts[follow][1].split("\n") if line.strip()]
        question = _clean(lines[0]) if lines else ""
        if not question:
            raise ParseError("The 'Follow up:' line has no question. " + SELF_ASK_FORMAT)
        return FollowUp(question)
    if final is not None:
        answer = _clean(parts[final][1].lstrip(":"))
        if not answer:
            raise ParseError(
                "'So the final answer is:' was followed by no answer. " + SELF_ASK_FORMAT
            )
        return SelfAskFinal(answer)
    if answered:
        raise ParseError(
            "The last follow-up question already has its intermediate answer; ask the next "
            "'Follow up:' question or give 'So the final answer is:'. " + SELF_ASK_FORMAT
        )
    needed = next((body for kind, body in reversed(parts) if kind == "needed"), None)
    if needed is not None and _clean(needed).lower().startswith("no"):
        raise ParseError(
            "You said no follow up questions are needed but gave no final answer line. "
            "Reply with: So the final answer is: <the answer>"
        )
    if needed is not None and _clean(needed).lower().startswith("yes"):
        raise ParseError(
            "You said follow up questions are needed but asked none. " + SELF_ASK_FORMAT
        )
    raise ParseError("Could not find a 'Follow up:' question or a final answer. " + SELF_ASK_FORMAT)
