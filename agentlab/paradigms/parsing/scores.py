"""An evaluator's score out of its text: explicit forms first, never an index or a range."""

from __future__ import annotations

import math
import re

from agentlab.paradigms.parsing.common import ParseError

_NUM = r"[-+]?\d+(?:\.\d+)?"
# Scale descriptions are not scores: "(0-10)", "[1 to 10]", "on a scale of 1 to 10",
# "from 1 to 10", "between 0 and 1", "a 1-10 scale".
_RANGE_RE = re.compile(
    rf"""\(\s*{_NUM}\s*(?:-|–|to)\s*{_NUM}\s*\)
       |(?<!\[)\[\s*{_NUM}\s*(?:-|–|to)\s*{_NUM}\s*\](?!\])
       |\b(?:scale|range)\s+(?:of\s+|from\s+)?{_NUM}\s*(?:-|–|to)\s*{_NUM}
       |\bfrom\s+{_NUM}\s+to\s+{_NUM}
       |\bbetween\s+{_NUM}\s+and\s+{_NUM}
       |\b{_NUM}\s*(?:-|–|to)\s*{_NUM}[ \t-]*(?:point[ \t]+)?scale""",
    re.IGNORECASE | re.VERBOSE,
)
# Labels whose number is an index, not a score: "Thought 1", "Step 2", "Attempt 3", "#4"...
_INDEX_RE = re.compile(
    r"""(\b(?:thought|step|attempt|action|observation|trial|iteration|round|question|option
        |candidate|solution|answer|example|item|part|turn|node|path|plan|idea|proposal|choice
        |version|draft|response|case|test|problem|reflection|try|level|depth|criterion|point)s?
        [ \t]*\#?[ \t]*|\#[ \t]*)\d+(?:\.\d+)*""",
    re.IGNORECASE | re.VERBOSE,
)
# List numbering at a line start ("1. The answer is..."), also an index.
_LIST_NUMBER_RE = re.compile(r"^([ \t]*)\d{1,3}[.)](?=[ \t]+\S)", re.MULTILINE)
_DEN = r"(?:[ \t]*(?:/|out[ \t]+of\b|\bof\b)[ \t]*(?P<den>\d+(?:\.\d+)?))?(?P<pct>[ \t]*%)?"
# The score forms, most explicit first; each is searched for its LAST occurrence.
_SCORE_RES = (
    re.compile(rf"\[\[\s*(?P<num>{_NUM})\s*(?:/\s*(?P<den>\d+(?:\.\d+)?)\s*)?\]\](?P<pct>)"),
    re.compile(
        rf"\b(?:scor(?:e|ed|ing)|rat(?:e|ed|ing)|grade[ds]?)\b[^\d\n]{{0,30}}?(?P<num>{_NUM}){_DEN}",
        re.IGNORECASE,
    ),
    re.compile(
        rf"(?P<num>{_NUM})[ \t]*(?:/|out[ \t]+of\b)[ \t]*(?P<den>\d+(?:\.\d+)?)(?P<pct>)",
        re.IGNORECASE,
    ),
    re.compile(rf"(?:\*\*|__)\s*(?P<num>{_NUM}){_DEN}\s*(?:\*\*|__)", re.IGNORECASE),
    re.compile(rf"(?<![\w.])(?P<num>{_NUM})(?![\w])(?P<den>)(?P<pct>[ \t]*%)?"),
)


def parse_score(text: str, *, low: float = 0, high: float = 10) -> float:
    """Read an evaluator's score, a float within [low, high].

    "Score: 7/10", "7", "**8**", "rating: 6.5", "I'd give it a 9 out of 10", "[[7]]", "80%".
    """
    if not low < high:
        raise ValueError(f"parse_score needs low < high, got {low} and {high}")
    fmt = f"Reply with a single score from {low:g} to {high:g}, e.g. 'Score: {(low + high) / 2:g}'."
    cleaned = _RANGE_RE.sub(" ", text or "")
    cleaned = _INDEX_RE.sub(lambda m: m.group(1), cleaned)
    cleaned = _LIST_NUMBER_RE.sub(lambda m: m.group(1), cleaned)
    for regex in _SCORE_RES:
        matches = [m for m in regex.finditer(cleaned) if not _zero_den(m.group("den"))]
        if not matches:
            continue
        m = matches[-1]
        value = float(m.group("num"))
        if m.group("den"):
            den = float(m.group("den"))
            value = value if den == high else value / den * high
        elif m.group("pct"):
            value = value if high == 100 else value / 100 * high
        if not math.isfinite(value) or not low <= value <= high:
            shown = m.group("num") + (f"/{m.group('den')}" if m.group("den") else "")
            shown += "%" if m.group("pct") else ""
            if value != float(m.group("num")):  # rescaled: show what it became
                shown += f" (= {value:g})"
            raise ParseError(f"The score {shown} is outside the range {low:g} to {high:g}. " + fmt)
        return value
    raise ParseError("Could not find a score. " + fmt)


def _zero_den(den: str | None) -> bool:
    return bool(den) and float(den) == 0
