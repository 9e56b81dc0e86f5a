"""traces.diff: the alignment of two runs' steps (pure: no database, hand-built Step lists)."""

from __future__ import annotations

from traces.diff import diff_steps, diff_text, normalise_args
from traces.schema import Step


def llm(text: str, **kw) -> Step:
    return Step(kind="llm", name="model-a", text=text, input={"messages": []}, **kw)


def tool(name: str, args: dict, observation: str = "ok", **kw) -> Step:
    return Step(kind="tool", name=name, input=args, text=observation,
                output={"ok": True, "output": observation}, **kw)


def final(answer: str) -> Step:
    return Step(kind="final", text=answer, output=answer)


def run_a() -> list[Step]:
    return [llm("I will compute."), tool("calculator", {"expression": "6*7"}, "42"),
            llm("The answer is 42."), final("42")]


def ops(diff) -> list[str]:
    return [row.op for row in diff.rows]


def test_identical_runs_are_all_equal_with_no_divergence():
    diff = diff_steps(run_a(), run_a())
    assert ops(diff) == ["equal"] * 4
    assert diff.first_divergence is None
    assert all(row.fields == {} for row in diff.rows)
    assert diff.summary.same_answer and diff.summary.answer_a == "42"
    assert diff.summary.deltas["steps"] == 0 and diff.summary.deltas["tokens"] == 0


def test_timings_alone_do_not_make_a_step_changed():
    a, b = run_a(), run_a()
    a[0].output = {"text": "x", "latency_ms": 100.0, "ttft_ms": 5.0}
    b[0].output = {"text": "x", "latency_ms": 900.0, "ttft_ms": 50.0}
    assert ops(diff_steps(a, b)) == ["equal"] * 4


def test_one_inserted_step_is_marked_and_is_the_first_divergence():
    b = run_a()
    b.insert(2, tool("get_weather", {"city": "Paris"}, "sunny"))
    diff = diff_steps(run_a(), b)
    assert ops(diff) == ["equal", "equal", "inserted", "equal", "equal"]
    assert diff.first_divergence == 2
    row = diff.rows[2]
    assert row.left is None and row.right.name == "get_weather"
    assert diff.summary.deltas["steps"] == 1 and diff.summary.deltas["tool_calls"] == 1


def test_a_changed_argument_is_a_changed_row_with_a_word_diff_of_the_input():
    b = run_a()
    b[1] = tool("calculator", {"expression": "6*8"}, "48")
    b[2] = llm("The answer is 48.")
    b[3] = final("48")
    diff = diff_steps(run_a(), b)
    assert ops(diff) == ["equal", "changed", "changed", "changed"]
    assert diff.first_divergence == 1
    row = diff.rows[1]
    assert row.left.input == {"expression": "6*7"} and row.right.input == {"expression": "6*8"}
    chunks = row.fields["input"]
    assert ("delete", "7") in chunks and ("insert", "8") in chunks
    assert "".join(t for tag, t in chunks if tag != "insert") == '{\n  "expression": "6*7"\n}'
    assert "".join(t for tag, t in chunks if tag != "delete") == '{\n  "expression": "6*8"\n}'
    assert row.fields["text"] == [("delete", "42"), ("insert", "48")]
    assert not diff.summary.same_answer
    assert (diff.summary.answer_a, diff.summary.answer_b) == ("42", "48")
    # A final step's output repeats its text: only one diff for it.
    assert set(diff.rows[3].fields) == {"text"}


def test_whitespace_and_key_order_in_arguments_do_not_split_a_step():
    a = [tool("search", {"q": "weather  in\nParis", "n": 3})]
    b = [tool("search", {"n": 3, "q": "weather in Paris"})]
    assert normalise_args(a[0].input) == normalise_args(b[0].input)
    assert ops(diff_steps(a, b)) == ["changed"]  # aligned, the raw input still differs


def test_reordered_tools_show_one_move_as_a_deletion_and_an_insertion():
    a = [llm("plan"), tool("get_weather", {"city": "Paris"}), tool("calculator", {"e": "1+1"}),
         final("done")]
    b = [llm("plan"), tool("calculator", {"e": "1+1"}), tool("get_weather", {"city": "Paris"}),
         final("done")]
    diff = diff_steps(a, b)
    assert sorted(ops(diff)) == ["deleted", "equal", "equal", "equal", "inserted"]
    assert diff.first_divergence == 1
    moved = [r for r in diff.rows if r.op != "equal"]
    names = {(r.op, (r.left or r.right).name) for r in moved}
    assert len({n for _, n in names}) == 1  # the same tool, gone on one side, new on the other


def test_different_kinds_in_a_replaced_block_are_deleted_and_inserted():
    a = [llm("x"), Step(kind="thought", text="hmm"), final("a")]
    b = [llm("x"), Step(kind="error", text="parse error", status="error"), final("a")]
    assert ops(diff_steps(a, b)) == ["equal", "deleted", "inserted", "equal"]


def test_llm_steps_align_across_models_and_show_the_model_change():
    b = run_a()
    b[0] = Step(kind="llm", name="model-b", text="I will compute.", input={"messages": []})
    diff = diff_steps(run_a(), b)
    assert ops(diff)[0] == "changed" and diff.rows[0].fields == {}
    assert (diff.rows[0].left.name, diff.rows[0].right.name) == ("model-a", "model-b")


def test_empty_runs():
    both = diff_steps([], [])
    assert both.rows == [] and both.first_divergence is None and both.summary.same_answer
    one = diff_steps([], run_a())
    assert ops(one) == ["inserted"] * 4 and one.first_divergence == 0
    assert one.summary.deltas["steps"] == 4 and one.summary.deltas["wall_ms"] is None
    other = diff_steps(run_a(), [])
    assert ops(other) == ["deleted"] * 4 and other.summary.answer_b == ""


def test_summary_deltas_are_b_minus_a_and_totals_override_the_counts():
    a = [llm("a", tokens_in=100, tokens_out=10, cost_usd=0.01, started_at=1000.0,
             duration_ms=500), final("x")]
    b = [llm("a", tokens_in=150, tokens_out=30, cost_usd=0.03, started_at=2000.0,
             duration_ms=2000), llm("b", tokens_in=5, started_at=2002.0), final("y")]
    a[1].started_at, b[2].started_at = 1000.5, 2002.0
    summary = diff_steps(a, b).summary
    assert summary.deltas["steps"] == 1 and summary.deltas["llm_calls"] == 1
    assert summary.deltas["tokens"] == 75
    assert round(summary.deltas["cost_usd"], 6) == 0.02
    assert summary.deltas["wall_ms"] == 2000 - 500
    given = diff_steps(a, b, totals_a={"wall_ms": 100.0, "final_answer": "same"},
                       totals_b={"wall_ms": 350.0, "final_answer": "same"}).summary
    assert given.deltas["wall_ms"] == 250 and given.same_answer


def test_huge_texts_are_diffed_by_lines():
    old = "".join(f"line {i}\n" for i in range(5000))
    new = old.replace("line 2500\n", "line 2500 edited\n")
    chunks = diff_text(old, new)
    assert chunks[1:3] == [("delete", "line 2500\n"), ("insert", "line 2500 edited\n")]


def test_a_thousand_steps_align_around_a_change_and_a_deletion():
    """Correctness only: how fast is `manage.py bench_traces` (diff 1k/10k)."""
    a = [tool(f"t{i % 5}", {"i": i}, f"observation {i} " * 20) if i % 2 else llm(f"think {i}")
         for i in range(1000)]
    b = list(a)
    b[500] = tool("t0", {"i": -1}, "other")
    del b[700]
    diff = diff_steps(a, b)
    assert diff.first_divergence == 500


def test_ten_thousand_steps_with_repeating_keys_align_exactly():
    # No key is unique here, the hard case for the alignment: it must still find the one
    # deletion and the one insertion, not a wall of changed rows.
    a = [tool("t", {"i": i % 3}) if i % 2 else llm("same") for i in range(10_000)]
    b = list(a)
    del b[3001]
    b.insert(7000, Step(kind="thought", text="extra"))
    diff = diff_steps(a, b)
    assert sorted(ops(diff)).count("equal") == 9999
    assert [r.op for r in diff.rows if r.op != "equal"] == ["deleted", "inserted"]
    assert diff.first_divergence == 3001


def test_the_argument_key_ignores_key_order_and_whitespace_but_not_values():
    same = normalise_args({"q": " a\n b ", "n": [1, {"z": "x  y", "a": None}]})
    assert same == normalise_args({"n": [1, {"a": None, "z": "x y"}], "q": "a b"})
    assert same != normalise_args({"q": "a b", "n": [2, {"a": None, "z": "x y"}]})
    assert normalise_args("  text ") == normalise_args("text")


def run_with(ids: tuple[str, str, str, str], weather: str = "sunny") -> list[Step]:
    """One program's run; `ids`: what differs between any two of its runs (a call id, a
    memory address, a timestamp, a run id)."""
    call, address, when, run_id = ids
    return [
        Step(kind="thought", name="setup", input={"ctx": f"<Context object at {address}>",
                                                  "run_id": run_id, "at": when}),
        Step(kind="llm", text="", input={"messages": [{"role": "user", "content": "Paris?"}]},
             output={"tool_calls": [{"id": call, "name": "get_weather"}],
                     "id": f"chatcmpl-{run_id[:8]}"}),
        Step(kind="node", seq=3, name="tools", text=f"called {call}: {weather}"),
        Step(kind="tool", seq=4, parent=3, name="get_weather", input={"city": "Paris"},
             text=weather, meta={"call": call}),
        Step(kind="final", text=f"It is {weather} (took 1.2s at {when})."),
    ]


FIRST = ("call_8f3aB9xk2L", "0x7f0f1d9e30b0", "2025-01-01T10:00:00.123Z",
         "run-6f1c2b7e-3d4a-4e5f-8a9b-0c1d2e3f4a5b")
SECOND = ("call_Q2w9ZpR7mT", "0x7ff58c4d2f90", "2025-01-02T11:30:05Z",
          "run-0a9b8c7d-6e5f-4a3b-9c2d-1e0f9a8b7c6d")


def test_ids_addresses_and_timestamps_are_no_difference():
    diff = diff_steps(run_with(FIRST), run_with(SECOND))
    assert ops(diff) == ["equal"] * 5 and diff.first_divergence is None


def test_the_first_divergence_is_the_tool_whose_result_changed():
    diff = diff_steps(run_with(FIRST), run_with(SECOND, weather="rain"))
    assert ops(diff) == ["equal", "equal", "changed", "changed", "changed"]
    # the node enclosing the tool ended differently because of it: the tool came first
    row = diff.rows[diff.first_divergence]
    assert (row.left.kind, row.left.name, row.right.text) == ("tool", "get_weather", "rain")
