"""Reflexion control flow: attempts, evaluator scores, lessons, the best attempt.

Scripted models drive the real runtime: right for which steps are recorded, with which roles and
parents, what each prompt contains and how many LLM calls a fixed task costs; not for whether a
real model follows the prompts (the embedded-model end-to-end run covers that).
"""

from __future__ import annotations

import json

import pytest

from agentlab.paradigms.reflexion import Reflexion
from agentlab.paradigms.registry import validate_params
from agentlab.runtime.limits import Limits
from agentlab.runtime.loop import execute
from agentlab.tools.decorator import tool
from tests.scripted_model import ScriptedModel, make_context

TASK = "A bat and a ball cost 1.10 in total; the bat costs 1.00 more. What does the ball cost?"


@tool
def calculator(expression: str) -> str:
    """Evaluate arithmetic."""
    return {"(1.10 - 1.00) / 2": "0.05"}.get(expression, "error")


def final(answer: str) -> str:
    return json.dumps({"thought": "done", "action": "final_answer", "action_input": answer})


def act(name: str, args: dict) -> str:
    return json.dumps({"thought": "compute", "action": name, "action_input": args})


async def run(script, *, models=None, limits=None, **params):
    model = ScriptedModel(script)
    ctx, sink = make_context(model, [calculator], models=models, limits=limits,
                             params=validate_params("reflexion", params))
    outcome = await execute(Reflexion(), ctx, TASK)
    return outcome, sink, model


def attempts(sink) -> list:
    return [s for s in sink.of_kind("message") if s.role == "actor"]


def user_text(request: dict) -> str:
    return request["messages"][-1]["content"]


async def test_stops_after_the_first_attempt_that_passes() -> None:
    judge = ScriptedModel(["Score: 9/10\nProblems: none"], profile_name="judge")
    outcome, sink, model = await run([act("calculator", {"expression": "(1.10 - 1.00) / 2"}),
                                      final("5 cents")], models={"evaluator": judge})
    assert outcome.status == "succeeded" and outcome.answer == "5 cents"
    assert len(model.requests) == 2 and len(judge.requests) == 1
    assert outcome.totals.llm_calls == 3  # actor: tool turn + answer turn; evaluator: 1
    (attempt,) = attempts(sink)
    assert attempt.name == "attempt 1" and attempt.status == "ok" and attempt.text == "5 cents"
    assert attempt.meta["score"] == 9 and attempt.meta["passed"] is True
    llms = sink.of_kind("llm")
    assert [s.role for s in llms] == ["actor", "actor", "evaluator"]
    assert all(s.parent == attempt.seq for s in llms)
    assert sink.of_kind("tool")[0].parent == attempt.seq
    (evaluation,) = sink.of_kind("evaluation")
    assert evaluation.role == "evaluator" and evaluation.parent == attempt.seq
    assert evaluation.output == {"score": 9.0, "problems": "", "passed": True}
    assert "5 cents" in user_text(judge.requests[0])
    assert sink.of_kind("thought")[-1].text == \
        "Returning attempt 1 (score 9/10), the first that passed"
    assert not sink.of_kind("reflection")


async def test_returns_the_best_attempt_not_the_last() -> None:
    outcome, sink, model = await run([
        "10 cents", "Score: 5/10\nProblems: 10 + 110 is 120, not 110.", "Lesson: check the sum.",
        "5 cents?", "Score: 7/10\nProblems: hedged.", "Lesson: commit to the answer.",
        "1 dollar", "Score: 6/10\nProblems: wrong."], actor="direct")
    assert outcome.status == "succeeded" and outcome.answer == "5 cents?"
    assert len(model.requests) == outcome.totals.llm_calls == 8  # 3 x (actor + eval) + 2 lessons
    roles = [s.role for s in sink.of_kind("llm")]
    assert roles == ["actor", "evaluator", "reflector"] * 2 + ["actor", "evaluator"]
    choice = sink.of_kind("thought")[-1]
    assert choice.role == "reflexion"
    assert choice.text == "Returning attempt 2 (score 7/10), the best of 3"
    assert choice.meta["chosen"] == 2 and choice.meta["scores"] == [5, 7, 6]
    reflections = sink.of_kind("reflection")
    assert [r.text for r in reflections] == ["check the sum.", "commit to the answer."]
    assert all(r.role == "reflector" for r in reflections)
    assert [r.parent for r in reflections] == [a.seq for a in attempts(sink)[:2]]
    assert outcome.totals.reflections == 2
    assert sink.of_kind("evaluation")[0].output["problems"] == "10 + 110 is 120, not 110."


async def test_ties_go_to_the_earlier_attempt() -> None:
    outcome, _, _ = await run(["A", "Score: 6", "lesson", "B", "Score: 6"], actor="direct",
                              max_attempts=2)
    assert outcome.answer == "A"


async def test_lessons_go_into_the_next_attempts_prompt() -> None:
    outcome, sink, model = await run([
        "10 cents", "Score: 2/10", "Add the two prices up before answering.",
        "6 cents", "Score: 3/10", "Write the equation x + (x + 1.00) = 1.10.",
        "5 cents", "Score: 9/10"], actor="direct", memory_size=1)
    assert outcome.answer == "5 cents"
    first, second, third = (r for r in model.requests if r["messages"][0]["content"].startswith(
        "Answer the user's task"))
    assert user_text(first) == TASK
    assert user_text(second).startswith("Lessons from earlier attempts")
    assert "Add the two prices up" in user_text(second) and TASK in user_text(second)
    # memory_size=1: only the latest lesson is kept in the prompt.
    assert "x + (x + 1.00)" in user_text(third) and "Add the two" not in user_text(third)
    assert attempts(sink)[2].meta["lessons"] == ["Write the equation x + (x + 1.00) = 1.10."]
    # The reflector sees the failed answer and its evaluation.
    reflect = user_text(model.requests[2])
    assert "10 cents" in reflect and "score 2/10" in reflect


async def test_an_unreadable_score_is_an_error_retried_once_then_unscored() -> None:
    outcome, sink, model = await run([
        "10 cents", "Looks fine to me.", "It is fine.", "It was too fast.",
        "5 cents", "Score: 9/10"], actor="direct")
    assert outcome.status == "succeeded" and outcome.answer == "5 cents"
    errors = sink.of_kind("error")
    assert [e.role for e in errors] == ["evaluator", "evaluator"]
    assert all(e.meta == {"format_error": True} for e in errors)
    assert "Could not find a score" in errors[0].text and errors[0].input == "Looks fine to me."
    assert outcome.totals.format_errors == 2
    retry = model.requests[2]["messages"]
    assert retry[-2] == {"role": "assistant", "content": "Looks fine to me."}
    assert "score line only" in retry[-1]["content"]
    first = sink.of_kind("evaluation")[0]
    # Never silently 0 or 10: no score, not passed, and the run went on to attempt 2.
    assert first.output["score"] is None and first.output["passed"] is False
    assert first.status == "error" and first.meta["unreadable_score"] is True
    assert attempts(sink)[0].meta["score"] is None and len(attempts(sink)) == 2


async def test_a_score_given_on_the_retry_counts() -> None:
    outcome, sink, _ = await run(["5 cents", "Correct!", "Score: 10/10"], actor="direct")
    assert outcome.answer == "5 cents" and outcome.totals.llm_calls == 3
    assert sink.of_kind("evaluation")[0].output["score"] == 10


async def test_an_unscored_attempt_loses_to_a_scored_one() -> None:
    outcome, _, _ = await run(["A", "great", "great", "lesson", "B", "Score: 2/10"],
                              actor="direct", max_attempts=2)
    assert outcome.answer == "B"


async def test_a_contains_check_needs_no_evaluator_call() -> None:
    outcome, sink, model = await run(["10 cents", "Compute, do not guess.", "5 cents"],
                                     actor="direct", evaluator="contains", expected="5 CENTS")
    assert outcome.answer == "5 cents" and len(model.requests) == 3
    assert [s.role for s in sink.of_kind("llm")] == ["actor", "reflector", "actor"]
    failed, passed = sink.of_kind("evaluation")
    assert failed.output["score"] == 1 and failed.output["passed"] is False
    assert "5 cents" not in failed.output["problems"].lower()  # the expected text stays hidden
    assert passed.output == {"score": 10, "problems": "", "passed": True}


async def test_a_regex_check() -> None:
    outcome, _, model = await run(["0.05 dollars"], actor="direct", evaluator="regex",
                                  expected=r"\b(5 cents|0\.05)\b")
    assert outcome.answer == "0.05 dollars" and len(model.requests) == 1


async def test_an_invalid_regex_fails_the_run_with_a_clear_error() -> None:
    # The admin refuses it (test_bad_params_are_rejected); a snapshot from elsewhere (an
    # imported bundle) is still checked when the run starts.
    model = ScriptedModel([])
    ctx, _ = make_context(model, [calculator], params={
        **validate_params("reflexion", {}), "actor": "direct", "evaluator": "regex",
        "expected": "(5 cents"})
    outcome = await execute(Reflexion(), ctx, TASK)
    assert outcome.status == "failed" and "invalid regular expression" in outcome.error
    assert not model.requests


async def test_an_attempt_that_runs_out_of_iterations_is_not_evaluated() -> None:
    outcome, sink, model = await run(
        [act("calculator", {"expression": "1 + 1"}), "Call the calculator once, then answer.",
         final("5 cents"), "Score: 8/10"], actor_max_iterations=1, max_attempts=2)
    assert outcome.answer == "5 cents" and len(model.requests) == 4
    first = attempts(sink)[0]
    assert first.status == "error" and first.text.startswith("(not finished")
    evaluation = sink.of_kind("evaluation")[0]
    assert evaluation.meta["skipped"] and evaluation.output["score"] is None


async def test_no_finished_attempt_fails_the_run() -> None:
    outcome, _, _ = await run([act("calculator", {"expression": "1 + 1"})],
                              actor_max_iterations=1, max_attempts=1)
    assert outcome.status == "failed" and "no attempt finished" in outcome.error


async def test_a_run_budget_answers_with_the_best_attempt_so_far() -> None:
    outcome, sink, _ = await run(["10 cents", "Score: 4/10", "lesson"], actor="direct",
                                 limits=Limits(max_llm_calls=3))
    assert outcome.status == "failed" and "3 LLM calls" in outcome.error
    assert "10 cents" in outcome.answer and "attempt 1, score 4/10" in outcome.answer
    assert attempts(sink)[1].status == "error"  # the interrupted attempt is not left running


@pytest.mark.parametrize("params", [{"threshold": 11}, {"threshold": 0}, {"max_attempts": 0},
                                    {"actor": "lats"}, {"evaluator": "contains"},
                                    {"evaluator": "regex", "expected": ""},
                                    {"evaluator": "regex", "expected": "(["}, {"judge": "x"}])
def test_bad_params_are_rejected(params: dict) -> None:
    with pytest.raises(ValueError, match="invalid parameter for reflexion"):
        validate_params("reflexion", params)


def test_defaults_and_demo_metadata() -> None:
    assert validate_params("reflexion", {}) == {
        "max_attempts": 3, "threshold": 8, "actor": "react", "actor_max_iterations": 4,
        "evaluator": "llm", "expected": "", "memory_size": 3}
    assert validate_params("reflexion", {"evaluator": "contains", "expected": "5"})
    assert "calculator" in Reflexion.demo_question and Reflexion.description
