"""Example turns reordered by what the task asks: the example most like the task comes last."""

from __future__ import annotations

from agentlab.paradigms.prompt_files import similar_last


def pair(task: str, plan: str) -> list[dict]:
    return [{"role": "user", "content": f"Task: {task}"}, {"role": "assistant", "content": plan}]


EXAMPLES = [*pair("How many customers in the business database are in Brazil?", "sql"),
            *pair("What is the square root of 144?", "sqrt"),
            *pair("How warm is it in Rome, in °C?", "weather")]


def plans(turns: list[dict]) -> list[str]:
    return [m["content"] for m in turns if m["role"] == "assistant"]


def test_the_most_similar_example_comes_last_with_its_own_answer() -> None:
    ordered = similar_last(EXAMPLES, "How many orders in the business database were cancelled?")
    assert plans(ordered) == ["sqrt", "weather", "sql"]
    assert ordered[-2]["content"].startswith("Task: How many customers")  # pairs stay whole
    assert plans(similar_last(EXAMPLES, "What is the square root of 1764?"))[-1] == "sqrt"
    # keep: only the nearest ones, still nearest last.
    assert plans(similar_last(EXAMPLES, "What is the square root of 1764?", keep=1)) == ["sqrt"]
    assert plans(similar_last(EXAMPLES, "How warm is the business database?", keep=2)) == [
        "weather", "sql"]


def test_a_task_like_none_keeps_the_given_order() -> None:
    """Question words ("what", "how many", "is") are not a likeness: the last given example,
    the general one, stays last."""
    assert plans(similar_last(EXAMPLES, "What is 17 * 23?")) == ["sql", "sqrt", "weather"]
    assert plans(similar_last(EXAMPLES, "How many people live here?")) == ["sql", "sqrt",
                                                                           "weather"]


def test_the_given_turns_are_not_changed() -> None:
    ordered = similar_last(EXAMPLES, "square root")
    ordered[0]["content"] = "changed"
    assert "changed" not in [m["content"] for m in EXAMPLES]


def test_turns_that_are_not_pairs_keep_their_order() -> None:
    """A tool turn or a question without its reply: reordering by pairs would hand one
    example's answer to another's question, so nothing moves."""
    odd = [*EXAMPLES, {"role": "user", "content": "Task: square root of 9?"}]
    assert similar_last(odd, "square root", keep=1) == odd
    with_tool = [EXAMPLES[0], {"role": "tool", "content": "34"}, *EXAMPLES[1:]]
    assert similar_last(with_tool, "square root") == with_tool
