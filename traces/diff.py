"""Align two runs' steps and say where they part (pure: no Django; works on schema.Step lists).

Alignment key: `(kind, role, name, normalised arguments)`, where
- `llm` steps drop the name (the model that answered): two runs on different models, or a
  fallback that answered once, should still line up call by call; a model change shows in the
  row's fields and in the summary instead;
- `tool` and `approval` steps keep the tool name and add their normalised arguments, so a call
  with other arguments is a different step (shown as "changed" when it sits where the old one did);
- other kinds keep their name (a reflection rule, a plan, a LATS node label...).

What differs between any two runs of one program (generated ids, memory addresses,
timestamps, durations: traces.volatile) is no difference: keys and fields are compared without
it, so the first divergence lands on the step that really changed; a changed row shows its
fields as recorded. A step whose end (text, output, status) differs only because a step inside
it differs later is not the first divergence: what is inside it happened first.

Keys are aligned with difflib.SequenceMatcher; replaced blocks are paired positionally as
"changed" where the kinds match, else "deleted" + "inserted". Equal keys whose text, input or
output differ are "changed" too. Word diffs are computed for changed rows only, and only for
the first `shown` rows (the page's).

SequenceMatcher's cost grows with the product of how often each token repeats on both sides
(`_pairs`), so that figure is counted (in linear time) before any matching: a field over
MAX_FIELD_PAIRS is diffed by lines instead of words, and over it by lines too (or over
MAX_DIFF_CHARS, before it is even split) it is shown as one deletion and one insertion after
their common ends, with a note saying why (its sizes). A whole diff spends at most
MAX_TOTAL_PAIRS; past that, every further field is shown the same way.
"""

from __future__ import annotations

import bisect
import difflib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from traces.schema import Step, normalise_args
from traces.volatile import stable, stable_text

DiffOp = Literal["equal", "changed", "inserted", "deleted"]
Chunk = tuple[str, str]  # (tag, text); tag in "equal", "insert", "delete", "note"
Opcode = tuple[str, int, int, int, int]  # as difflib.SequenceMatcher.get_opcodes()
DIFF_FIELDS = ("text", "input", "output")
TOTAL_KEYS = ("steps", "llm_calls", "tool_calls", "tokens", "cost_usd", "wall_ms")
# Over this many characters a field is diffed line by line: word diffs of huge payloads cost
# more than they show.
WORD_DIFF_LIMIT = 20_000
# Timing and retry details differ on every run; they must not make two equal steps "changed".
VOLATILE_KEYS = frozenset({"latency_ms", "ttft_ms", "duration_ms", "attempts"})
# Ids a server makes up for each call of an llm step ("call_8f3…", "chatcmpl-…"): two runs that
# asked and did the same thing differ in them every time, so they are not a difference. (A
# tool's own arguments keep an "id": there it is data.)
CALL_ID_KEYS = frozenset({"tool_call_id", "response_id", "system_fingerprint"})
# Stretches up to this many key pairs (len a × len b) go to SequenceMatcher as they are.
SMALL_ALIGN = 250_000
# What one field's word or line diff may cost: pairs of equal tokens SequenceMatcher would visit
# (at most ~0.25 s at this figure on a 2-core machine, whatever the tokens; a word diff of two
# unrelated 5,000-character texts costs about this); over it the field is not matched by words
# (`diff_text`). Before: two unrelated 20,000-character texts, 3 s; lines that repeat, hours.
MAX_FIELD_PAIRS = 1_000_000
MAX_TOTAL_PAIRS = 5_000_000  # … and all of one diff's fields together
SHOW_CHARS = 100_000  # of a field too long to diff, each side shows this much
MAX_DIFF_CHARS = 500_000  # a field longer than this is not even split into lines
WINDOW = 500
_WORDS = re.compile(r"\s+|\w+|[^\w\s]+")


@dataclass
class DiffRow:
    op: DiffOp
    left: Step | None
    right: Step | None
    fields: dict[str, list[Chunk]] = field(default_factory=dict)  # only fields that differ


@dataclass
class DiffSummary:
    same_answer: bool
    answer_a: str
    answer_b: str
    deltas: dict[str, float | None]  # b - a for TOTAL_KEYS; None where a side has no figure
    totals_a: dict[str, Any] = field(default_factory=dict)
    totals_b: dict[str, Any] = field(default_factory=dict)


@dataclass
class StepDiff:
    rows: list[DiffRow]
    first_divergence: int | None  # index into rows of the first row that is not "equal"
    summary: DiffSummary


def align_key(step: Step) -> tuple[str, str, str, str]:
    if step.kind == "llm":
        return (step.kind, step.role, "", "")
    if step.kind in ("tool", "approval"):
        return (step.kind, step.role, stable_text(step.name), normalise_args(stable(step.input)))
    return (step.kind, step.role, stable_text(step.name), "")


class Budget:
    """What word diffs may still spend (pairs of equal tokens, see `diff_text`)."""

    def __init__(self, total: int = MAX_TOTAL_PAIRS, per_field: int = MAX_FIELD_PAIRS) -> None:
        self.left, self.per_field = total, per_field

    def allows(self, pairs: int) -> bool:
        return pairs <= min(self.per_field, self.left)

    def spend(self, pairs: int) -> None:
        self.left -= pairs


def diff_steps(a: Sequence[Step], b: Sequence[Step], *, totals_a: Mapping[str, Any] | None = None,
               totals_b: Mapping[str, Any] | None = None, shown: int | None = None,
               budget: Budget | None = None) -> StepDiff:
    """Rows aligning run A's steps (left) with run B's (right), the first divergence, a summary.

    `totals_a`/`totals_b` (e.g. totals_from_run(run)) override the figures counted from the steps.
    Only the first `shown` rows (None: all) get word diffs; a later changed row names its
    differing fields with no chunks. `budget` bounds what the word diffs spend together.
    """
    keys_a, keys_b = [align_key(s) for s in a], [align_key(s) for s in b]
    rows: list[DiffRow] = []
    budget = budget or Budget()

    def pair(left: Step, right: Step) -> DiffRow:
        return _pair(left, right, budget if shown is None or len(rows) < shown else None)

    for tag, i1, i2, j1, j2 in align(keys_a, keys_b):
        if tag == "equal":
            for i, j in zip(range(i1, i2), range(j1, j2), strict=True):
                rows.append(pair(a[i], b[j]))
            continue
        paired = min(i2 - i1, j2 - j1) if tag == "replace" else 0
        for k in range(paired):
            left, right = a[i1 + k], b[j1 + k]
            if left.kind == right.kind:
                rows.append(pair(left, right))
            else:
                rows += [DiffRow("deleted", left, None), DiffRow("inserted", None, right)]
        rows.extend(DiffRow("deleted", a[i], None) for i in range(i1 + paired, i2))
        rows.extend(DiffRow("inserted", None, b[j]) for j in range(j1 + paired, j2))
    first = first_divergence(rows, a, b)
    return StepDiff(rows=rows, first_divergence=first, summary=_summary(a, b, totals_a, totals_b))


END_FIELDS = {"text", "output"}  # what a step with steps inside it has once they ran


def first_divergence(rows: Sequence[DiffRow], a: Sequence[Step] = (),
                     b: Sequence[Step] = ()) -> int | None:
    """The index of the first row that is not "equal", passing over an enclosing step whose
    end alone differs when a step inside it (by the parents in `a` and `b`) differs too:
    that one came first."""
    parents = ({s.seq: s.parent for s in a}, {s.seq: s.parent for s in b})
    changed = [i for i, row in enumerate(rows) if row.op != "equal"]
    for n, i in enumerate(changed):
        row = rows[i]
        ends_only = (row.op == "changed" and set(row.fields) <= END_FIELDS
                     and row.left is not None and row.right is not None
                     and _names(row.left) == _names(row.right))
        if not ends_only:
            return i
        if not any(_inside(rows[j], row, parents) for j in changed[n + 1:]):
            return i
    return None


def _inside(row: DiffRow, outer: DiffRow,
            parents: tuple[dict[int, int | None], dict[int, int | None]]) -> bool:
    """Is `row`'s step inside `outer`'s, on a side both have?"""
    for step, around, side in ((row.left, outer.left, parents[0]),
                               (row.right, outer.right, parents[1])):
        if step is None or around is None:
            continue
        seq, hops = step.parent, 0
        while seq is not None and hops <= len(side):
            if seq == around.seq:
                return True
            seq, hops = side.get(seq), hops + 1
        return False
    return False


def align(ka: Sequence[Any], kb: Sequence[Any]) -> list[Opcode]:
    """difflib-style opcodes aligning two key lists.

    SequenceMatcher is quadratic on keys that repeat (every `llm` step of a run has the same
    key), so big runs are first cut at their common ends and at keys found once on each side
    (patience diff); SequenceMatcher then aligns the small stretches in between.
    """
    ops: list[Opcode] = []
    _align(ka, kb, 0, len(ka), 0, len(kb), ops)
    merged: list[Opcode] = []
    for tag, i1, i2, j1, j2 in ops:
        if i1 == i2 and j1 == j2:
            continue
        if merged and (merged[-1][0] == tag == "equal" or "equal" not in (merged[-1][0], tag)):
            _, mi1, _, mj1, _ = merged[-1]
            tag = "equal" if tag == "equal" else _tag(i2 - mi1, j2 - mj1)
            merged[-1] = (tag, mi1, i2, mj1, j2)
        else:
            merged.append((tag, i1, i2, j1, j2))
    return merged


def _align(ka: Sequence[Any], kb: Sequence[Any], alo: int, ahi: int, blo: int, bhi: int,
           ops: list[Opcode]) -> None:
    start_a, start_b = alo, blo
    while alo < ahi and blo < bhi and ka[alo] == kb[blo]:
        alo, blo = alo + 1, blo + 1
    ops.append(("equal", start_a, alo, start_b, blo))
    end_a, end_b = ahi, bhi
    while ahi > alo and bhi > blo and ka[ahi - 1] == kb[bhi - 1]:
        ahi, bhi = ahi - 1, bhi - 1
    if alo == ahi or blo == bhi or (ahi - alo) * (bhi - blo) <= SMALL_ALIGN:
        _sequence_matcher(ka, kb, alo, ahi, blo, bhi, ops)
    elif anchors := _unique_anchors(ka, kb, alo, ahi, blo, bhi):
        i0, j0 = alo, blo
        for i, j in anchors:
            _align(ka, kb, i0, i, j0, j, ops)
            ops.append(("equal", i, i + 1, j, j + 1))
            i0, j0 = i + 1, j + 1
        _align(ka, kb, i0, ahi, j0, bhi, ops)
    else:  # a huge stretch with no unique key: align it window by window, in proportion
        windows = -(-max(ahi - alo, bhi - blo) // WINDOW)
        for w in range(windows):
            _sequence_matcher(ka, kb, alo + (ahi - alo) * w // windows,
                              alo + (ahi - alo) * (w + 1) // windows,
                              blo + (bhi - blo) * w // windows,
                              blo + (bhi - blo) * (w + 1) // windows, ops)
    ops.append(("equal", ahi, end_a, bhi, end_b))


def _sequence_matcher(ka: Sequence[Any], kb: Sequence[Any], alo: int, ahi: int, blo: int,
                      bhi: int, ops: list[Opcode]) -> None:
    if alo == ahi or blo == bhi:
        ops.append((_tag(ahi - alo, bhi - blo), alo, ahi, blo, bhi))
        return
    matcher = difflib.SequenceMatcher(None, ka[alo:ahi], kb[blo:bhi], autojunk=False)
    ops.extend((tag, alo + i1, alo + i2, blo + j1, blo + j2)
               for tag, i1, i2, j1, j2 in matcher.get_opcodes())


def _unique_anchors(ka: Sequence[Any], kb: Sequence[Any], alo: int, ahi: int, blo: int,
                    bhi: int) -> list[tuple[int, int]]:
    """Keys found exactly once on each side, longest run in the same order on both (by LIS)."""
    count_a: dict[Any, int] = {}
    where_a: dict[Any, int] = {}
    for i in range(alo, ahi):
        count_a[ka[i]] = count_a.get(ka[i], 0) + 1
        where_a[ka[i]] = i
    count_b: dict[Any, int] = {}
    where_b: dict[Any, int] = {}
    for j in range(blo, bhi):
        count_b[kb[j]] = count_b.get(kb[j], 0) + 1
        where_b[kb[j]] = j
    pairs = sorted((where_a[k], where_b[k]) for k, n in count_a.items()
                   if n == 1 and count_b.get(k) == 1)
    # Longest increasing subsequence of the b positions (patience sorting).
    tails: list[int] = []  # index into pairs of the smallest tail of each length
    back: list[int] = [-1] * len(pairs)
    for n, (_, j) in enumerate(pairs):
        k = bisect.bisect_left(tails, j, key=lambda t: pairs[t][1])
        back[n] = tails[k - 1] if k else -1
        if k == len(tails):
            tails.append(n)
        else:
            tails[k] = n
    out: list[tuple[int, int]] = []
    n = tails[-1] if tails else -1
    while n >= 0:
        out.append(pairs[n])
        n = back[n]
    return out[::-1]


def _tag(len_a: int, len_b: int) -> str:
    if len_a and len_b:
        return "replace"
    return "delete" if len_a else "insert"


def _pair(left: Step, right: Step, budget: Budget | None) -> DiffRow:
    """The row of two aligned steps; word diffs only with a `budget` (a row that is shown)."""
    fields: dict[str, list[Chunk]] = {}
    for name in DIFF_FIELDS:
        if name == "output" and left.output == left.text and right.output == right.text:
            continue  # a final step's output repeats its text: one diff is enough
        old = _comparable(getattr(left, name), left.kind)
        new = _comparable(getattr(right, name), right.kind)
        if old != new and stable(old) != stable(new):
            fields[name] = ([] if budget is None
                            else diff_text(render_value(old), render_value(new), budget))
    changed = bool(fields) or left.status != right.status or _names(left) != _names(right)
    return DiffRow("changed" if changed else "equal", left, right, fields)


def _names(step: Step) -> tuple[str, str]:
    return step.role, stable_text(step.name)


def _comparable(value: Any, kind: str = "") -> Any:
    if isinstance(value, dict) and not VOLATILE_KEYS.isdisjoint(value):
        value = {k: v for k, v in value.items() if k not in VOLATILE_KEYS}
    if kind == "llm" and isinstance(value, dict):
        value = {k: v for k, v in value.items() if k != "id"}  # the completion's own id
        return _without_call_ids(value)
    return value


def _without_call_ids(value: Any, depth: int = 0, *, call: bool = False) -> Any:
    """An llm request or response without generated ids: a tool call's `id` (in the reply
    and in the request's assistant messages), each tool message's `tool_call_id`."""
    if depth > 20:
        return value
    if isinstance(value, dict):
        return {k: _without_call_ids(v, depth + 1, call=k == "tool_calls")
                for k, v in value.items()
                if not ((k in CALL_ID_KEYS or (call and k == "id")) and isinstance(v, str))}
    if isinstance(value, list):
        return [_without_call_ids(v, depth + 1, call=call) for v in value]
    return value


def render_value(value: Any) -> str:
    """Stable text for a step field: strings as they are, anything else as sorted, indented JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False, default=str)


def diff_text(old: str, new: str, budget: Budget | None = None) -> list[Chunk]:
    """Word-level diff (lines when either side is over WORD_DIFF_LIMIT characters, or when a
    word diff would cost over the budget); a text whose line diff would too is one deletion
    and one insertion after their common ends, with a note."""
    budget = budget or Budget()
    if max(len(old), len(new)) <= WORD_DIFF_LIMIT:
        words = _diff_tokens(_WORDS.findall(old), _WORDS.findall(new), budget)
        if words is not None:
            return words
    if max(len(old), len(new)) <= MAX_DIFF_CHARS:
        lines = _diff_tokens(old.splitlines(keepends=True), new.splitlines(keepends=True),
                             budget)
        if lines is not None:
            return lines
    return _too_long(old, new)


def _diff_tokens(ta: list[str], tb: list[str], budget: Budget) -> list[Chunk] | None:
    """The diff of two token lists, or None when matching them would cost over `budget`."""
    # Trim the common ends first: the usual change is small inside a long shared text.
    start = 0
    while start < len(ta) and start < len(tb) and ta[start] == tb[start]:
        start += 1
    end = 0
    while end < len(ta) - start and end < len(tb) - start and ta[-1 - end] == tb[-1 - end]:
        end += 1
    mid_a, mid_b = ta[start:len(ta) - end], tb[start:len(tb) - end]
    pairs = _pairs(mid_a, mid_b)
    if not budget.allows(pairs):
        return None
    budget.spend(pairs)
    chunks: list[Chunk] = [("equal", "".join(ta[:start]))]
    matcher = difflib.SequenceMatcher(None, mid_a, mid_b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            chunks.append(("equal", "".join(mid_a[i1:i2])))
            continue
        chunks.append(("delete", "".join(mid_a[i1:i2])))
        chunks.append(("insert", "".join(mid_b[j1:j2])))
    chunks.append(("equal", "".join(ta[len(ta) - end:])))
    return _merge(chunks)


def _pairs(ta: Sequence[str], tb: Sequence[str]) -> int:
    """Pairs of equal tokens across the two sides (the sum over tokens of count in a × count
    in b): what SequenceMatcher's longest-match search visits at least once; linear to count."""
    if not ta or not tb:
        return 0
    count_b: dict[str, int] = {}
    for token in tb:
        count_b[token] = count_b.get(token, 0) + 1
    return sum(count_b.get(token, 0) for token in ta) + len(ta) + len(tb)


def _common_prefix(a: str, b: str) -> int:
    """The length of the common prefix, by halving (slices compare in C: no loop per char)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[low:mid] == b[low:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def _too_long(old: str, new: str) -> list[Chunk]:
    """A text too costly to diff: a note with its sizes, the common ends, and the rest as one
    deletion and one insertion (each cut at SHOW_CHARS)."""
    start = _common_prefix(old, new)
    rest_a, rest_b = old[start:], new[start:]
    end = _common_prefix(rest_a[::-1], rest_b[::-1])
    mid_a, mid_b = rest_a[:len(rest_a) - end], rest_b[:len(rest_b) - end]
    note = (f"too long to word-diff ({len(old):,} and {len(new):,} characters, "
            f"{old.count(chr(10)) + 1:,} and {new.count(chr(10)) + 1:,} lines): the part that "
            "differs is shown whole on each side")
    if max(len(mid_a), len(mid_b)) > SHOW_CHARS:
        note += f", its first {SHOW_CHARS:,} characters"
    return _merge([("note", note), ("equal", old[:start]), ("delete", mid_a[:SHOW_CHARS]),
                   ("insert", mid_b[:SHOW_CHARS]), ("equal", rest_a[len(rest_a) - end:])])


def _merge(chunks: list[Chunk]) -> list[Chunk]:
    merged: list[Chunk] = []
    for tag, text in chunks:
        if not text:
            continue
        if merged and merged[-1][0] == tag:
            merged[-1] = (tag, merged[-1][1] + text)
        else:
            merged.append((tag, text))
    return merged


def totals_of(steps: Sequence[Step]) -> dict[str, Any]:
    """The summary figures counted from the steps themselves."""
    llm = sum(1 for s in steps if s.kind == "llm")
    tools = sum(1 for s in steps if s.kind == "tool")
    wall = None
    if steps:
        start = min(s.started_at for s in steps) * 1000
        wall = max(s.started_at * 1000 + (s.duration_ms or 0) for s in steps) - start
    final = next((s for s in reversed(steps) if s.kind == "final"), None)
    return {
        "steps": len(steps), "llm_calls": llm, "tool_calls": tools,
        "tokens": sum(s.tokens_in + s.tokens_out for s in steps),
        "cost_usd": sum(s.cost_usd for s in steps), "wall_ms": wall,
        "final_answer": final.text if final else "",
    }


def totals_from_run(run: Any) -> dict[str, Any]:
    """The summary figures a Run row holds (read by attribute: no Django import here)."""
    return {
        "steps": run.step_count, "llm_calls": run.llm_calls, "tool_calls": run.tool_calls,
        "tokens": run.tokens_in + run.tokens_out, "cost_usd": run.cost_usd,
        "wall_ms": run.wall_ms, "final_answer": run.final_answer,
    }


def _summary(a: Sequence[Step], b: Sequence[Step], totals_a: Mapping[str, Any] | None,
             totals_b: Mapping[str, Any] | None) -> DiffSummary:
    ta = {**totals_of(a), **(totals_a or {})}
    tb = {**totals_of(b), **(totals_b or {})}
    deltas: dict[str, float | None] = {}
    for key in TOTAL_KEYS:
        va, vb = ta.get(key), tb.get(key)
        deltas[key] = None if va is None or vb is None else vb - va
    answer_a, answer_b = ta["final_answer"] or "", tb["final_answer"] or ""
    return DiffSummary(same_answer=answer_a.split() == answer_b.split(), answer_a=answer_a,
                       answer_b=answer_b, deltas=deltas, totals_a=ta, totals_b=tb)
