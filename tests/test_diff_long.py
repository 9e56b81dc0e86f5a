"""The diff of long runs (pure: schema Steps, no database): alignment as good as on short runs
(one inserted step in 50k, a changed subtree, a moved block), pages that open on the first
divergence, and a line per subtree saying what changed inside it."""

from __future__ import annotations

from tests.long_runs import planned, records
from traces.diff import diff_steps, word_diffs
from traces.diff_pages import BEFORE, Subtrees, page, start_of
from traces.schema import Step


def flat(n: int) -> list[Step]:
    """A long flat run: llm calls (all one key), tools with arguments of their own, thoughts."""
    steps = []
    for i in range(n):
        if i % 3 == 0:
            steps.append(Step(kind="llm", text="calling", input={"messages": []}))
        elif i % 3 == 1:
            steps.append(Step(kind="tool", name="search", input={"q": f"query {i}"},
                              text=f"found {i}"))
        else:
            steps.append(Step(kind="thought", text=f"thinking {i}"))
    for seq, step in enumerate(steps, start=1):
        step.seq = seq
    return steps


def ops(diff) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in diff.rows:
        counts[row.op] = counts.get(row.op, 0) + 1
    return counts


def test_one_step_inserted_in_50k_is_the_only_difference_and_the_first_divergence():
    a = flat(50_000)
    b = flat(50_000)
    b.insert(30_001, Step(kind="tool", name="get_weather", input={"city": "Paris"}, text="sun"))
    diff = diff_steps(a, b, shown=0)
    assert ops(diff) == {"equal": 50_000, "inserted": 1}
    row = diff.rows[diff.first_divergence]
    assert diff.first_divergence == 30_001 and row.right.name == "get_weather"
    assert all(r.left is r.right or r.left.seq == r.right.seq
               for r in diff.rows[:30_001])  # nothing before it shifted


def test_a_step_changed_inside_one_subtree_of_a_long_run():
    a = records(planned(500, 9))
    b = records(planned(500, 9, changed=frozenset({321})))
    diff = diff_steps(a, b, shown=0)
    assert ops(diff) == {"equal": len(a) - 1, "changed": 1}
    first = diff.rows[diff.first_divergence]
    assert first.left.input == {"city": "city 321.1"} and first.right.input == {"city": "Lyon"}
    assert set(first.fields) == {"input"} and first.fields["input"] == []  # not shown yet
    word_diffs([first])
    assert ("insert", "Lyon") in first.fields["input"]
    subtrees = Subtrees(diff.rows)
    head = 321 * 10  # the changed plan's row
    assert diff.rows[head].left.name == "plan 321"
    assert subtrees.ends[head] == head + 10
    assert subtrees.summary(head) == "1 changed, 8 equal"
    assert subtrees.summary(0) == "9 steps inside, all equal"


def test_a_moved_block_is_deleted_where_it_was_and_inserted_where_it_went():
    a = flat(3_000)
    b = flat(3_000)
    block = b[1000:1006]  # two llm calls, two tools, two thoughts
    del b[1000:1006]
    b[2000:2000] = block
    diff = diff_steps(a, b, shown=0)
    counts = ops(diff)
    assert counts["equal"] >= 3_000 - 6
    moved = [r for r in diff.rows if r.op != "equal"]
    # the two tools (unique calls) show where they left and where they arrived
    assert {r.left.input["q"] for r in moved if r.op == "deleted" and r.left.kind == "tool"} \
        == {"query 1000", "query 1003"}
    assert {r.right.input["q"] for r in moved if r.op == "inserted" and r.right.kind == "tool"} \
        == {"query 1000", "query 1003"}
    assert diff.first_divergence is not None and 995 <= diff.first_divergence <= 1000


def test_the_page_opens_on_the_first_divergence_and_pages_the_rest():
    a = records(planned(400, 9))
    b = records(planned(400, 9, changed=frozenset({300, 350})))
    diff = diff_steps(a, b, shown=0)
    subtrees = Subtrees(diff.rows)
    at = start_of(diff.first_divergence)
    assert at == diff.first_divergence - BEFORE
    first = page(diff.rows, subtrees, at, size=40)
    shown = [item.index for item in first.items if item.kind == "row"]
    assert diff.first_divergence in shown and shown[0] == at
    assert len(first.items) <= 40 + 4 and first.next is not None
    assert first.left == len(diff.rows) - first.next
    second = page(diff.rows, subtrees, first.next, size=40)
    assert second.items[0].index == first.next  # the rest, from where the first page stopped
    # Equal plans are folded whole, with their line; the one that changed is open.
    folds = [item for item in first.items + second.items if item.kind == "fold" and item.row]
    assert folds and all(f.summary == "9 steps inside, all equal" for f in folds)
    assert all(f.stop == f.index + 10 for f in folds)
    opened = next(item for item in second.items if item.kind == "row"
                  and item.row.left.name == "plan 350")
    assert opened.summary == "1 changed, 8 equal"
    # A fold opened: its steps, one level down.
    inside = page(diff.rows, subtrees, folds[0].inner, stop=folds[0].stop, flat=True)
    assert [item.index for item in inside.items] == list(range(folds[0].inner, folds[0].stop))
    assert inside.next is None


def test_no_divergence_opens_at_the_top_with_everything_folded():
    a = records(planned(50, 9))
    diff = diff_steps(a, records(planned(50, 9)), shown=0)
    shown = page(diff.rows, Subtrees(diff.rows), start_of(diff.first_divergence))
    assert diff.first_divergence is None and shown.at == 0 and shown.next is None
    assert [item.kind for item in shown.items] == ["fold"] * 50 + ["row"]  # and the answer
