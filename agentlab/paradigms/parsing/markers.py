"""What small and non-English models write around the format (package-private; import from
:mod:`agentlab.paradigms.parsing`): full-width colons, a stop word cut off at the end, and
markers in another language, configured per agent.

Custom markers are translated to the canonical ones before the parser reads the text, so one
parser serves every language: {"thought": ["Gedanke"], "final_answer": ["Antwort"]} makes
"Gedanke: …" read as "Thought: …"."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

# Colons a model may write after a marker: ASCII, full-width (CJK), small and Armenian-like.
COLONS = ":\uff1a\ufe55\ufe13"
COLON = f"[{COLONS}]"

# The ReAct labels a configuration may give other names for, and their canonical spelling.
REACT_LABELS = {
    "thought": "Thought", "action": "Action", "action_input": "Action Input",
    "observation": "Observation", "final_answer": "Final Answer",
}  # fmt: skip
# The Self-Ask prefixes, likewise.
SELF_ASK_LABELS = {
    "follow_up": "Follow up", "intermediate_answer": "Intermediate answer",
    "final_answer": "So the final answer is",
}  # fmt: skip

MARKERS_SCHEMA = {
    "type": "object",
    "description": "Other names for the format's markers (e.g. another language), each a list "
                   "of alternatives; the English ones are always understood too.",
    "additionalProperties": {"type": "array", "items": {"type": "string", "minLength": 1,
                                                        "maxLength": 60}, "maxItems": 8},
}


def normalise_colons(text: str) -> str:
    """A full-width colon right after a word is an ASCII one ("Thought：…" -> "Thought: …")."""
    return re.sub(rf"(?<=\w)[ \t]*[{COLONS[1:]}][ \t]*", ": ", text)


def cut_partial_stop(text: str, stops: Iterable[str]) -> str:
    """Drop a stop word cut off at the very end ("…}\\nObs"): the server stops on the whole
    word, so a last line that is only its beginning is the model starting the next marker."""
    lines = text.rstrip().rsplit("\n", 1)
    if len(lines) < 2:
        return text
    last = lines[1].strip().lower()
    if len(last) >= 2 and any(s.strip().lower().startswith(last) for s in stops if s.strip()):
        return lines[0]
    return text


def translate(text: str, markers: Mapping[str, Iterable[str]] | None,
              labels: Mapping[str, str]) -> str:
    """Rewrite configured markers ("Gedanke:") into the canonical ones ("Thought:"), at the
    start of a line or after a space, when a colon follows them."""
    if not markers:
        return text
    for key, names in markers.items():
        canonical = labels.get(key)
        if canonical is None:
            continue
        for name in sorted({n.strip() for n in names if n.strip()}, key=len, reverse=True):
            pattern = rf"(?:^|(?<=[\s*#>]))(?:\*\*)?{re.escape(name)}(?:\*\*)?[ \t]*{COLON}"
            text = re.sub(pattern, f"{canonical}:", text, flags=re.IGNORECASE | re.MULTILINE)
    return text


def stop_words(markers: Mapping[str, Iterable[str]] | None, key: str, default: str) -> list[str]:
    """The stop sequences for a marker: the canonical one and its configured names."""
    names = [default, *((markers or {}).get(key) or [])]
    return list(dict.fromkeys(f"{n.strip()}:" for n in names if n.strip()))


def label_alternatives(markers: Mapping[str, Iterable[str]] | None, labels: Mapping[str, str],
                       *, leave_out: str) -> dict[str, list[str]]:
    """Each label (but `leave_out`, the one the server stops at) with the agent's own names for
    it after the English one: what a grammar lets the model write."""
    markers = markers or {}
    return {key: list(dict.fromkeys([default, *(markers.get(key) or [])]))
            for key, default in labels.items() if key != leave_out}
