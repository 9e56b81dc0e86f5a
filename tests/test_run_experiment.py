"""`manage.py run_experiment` and `manage.py import_suite` as a user runs them (call_command).

The agents talk to the scripted OpenAI-compatible server (tests/fake_openai.py)."""

from __future__ import annotations

import pytest
from django.core.management.base import CommandError

from agentlab.evals.models import Case, Experiment
from tests.factories import run_experiment, sums_suite

with_db = pytest.mark.django_db(transaction=True)


@pytest.fixture
def setup(fake_llm, staff):
    """Suite "Sums" (three sums) and agents Alpha and Beta on the scripted model; a staff user."""
    return sums_suite(fake_llm.base_url)


@with_db
def test_it_prints_a_line_per_result_and_the_summary_table(fake_llm, setup):
    # One at a time, pairs go case by case, Alpha before Beta: the replies are in that order.
    fake_llm.script("It is 2.", "It is 5.", "It is 5.", "It is 4.", "No idea.", "It is 7.")
    out = run_experiment("Sums", "Alpha", "Beta", "--concurrency", "1")
    lines = out.splitlines()
    assert lines[0].endswith(": suite 'Sums', 3 case(s) × 2 agent(s), 1 at a time")
    progress = [ln for ln in lines if ln.startswith("[")]
    assert [ln.split(" · /runs/")[0] for ln in progress] == [
        "[1/6] Alpha · case 1 · passed (1.00)", "[2/6] Beta · case 1 · failed (0.00)",
        "[3/6] Alpha · case 2 · failed (0.00)", "[4/6] Beta · case 2 · passed (1.00)",
        "[5/6] Alpha · case 3 · failed (0.00)", "[6/6] Beta · case 3 · failed (0.00)"]
    done = next(i for i, ln in enumerate(lines) if ln.startswith("Experiment ")
                and ln.endswith(" succeeded"))
    table = lines[done + 1:]
    assert table[0].split() == ["agent", "mean", "score", "pass", "rate", "errors", "runs",
                                "ok", "tokens", "cost", "$", "wall", "s"]
    assert table[1].split()[:7] == ["Alpha", "0.33", "33%", "(1/3)", "0", "3/3", "45"]
    assert table[2].split()[:7] == ["Beta", "0.33", "33%", "(1/3)", "0", "3/3", "45"]


@with_db
def test_markdown_and_limit(fake_llm, setup):
    fake_llm.responder = lambda body: "2"
    out = run_experiment("Sums", "Alpha", "--limit", "1", "--markdown", "--run-timeout", "40")
    assert "1 case(s) × 1 agent(s), 2 at a time, at most 40 s per run" in out
    assert "| agent | mean score | pass rate | errors | runs ok | tokens | cost $ | wall s |" in out
    assert "| Alpha | 1.00 | 100% (1/1) | 0 | 1/1 |" in out
    experiment = Experiment.objects.get()
    assert (experiment.case_limit, experiment.run_timeout_s) == (1, 40)
    assert experiment.results.get().run.agent_snapshot["limits"]["total_timeout_s"] == 40


@with_db
def test_tags_choose_the_cases(fake_llm, setup):
    fake_llm.responder = lambda body: "6"
    Case.objects.filter(position=3).update(tags=["big"])
    out = run_experiment("Sums", "Alpha", "--tag", "big", "--tag", "huge")
    assert "1 case(s) × 1 agent(s), 2 at a time, tagged big or huge" in out
    assert Experiment.objects.get().results.get().case.question == "3 + 3?"
    with pytest.raises(CommandError, match="no case of the suite 'Sums' is tagged small"):
        run_experiment("Sums", "Alpha", "--tag", "small")


@with_db
def test_unknown_suite_agent_or_judge_is_a_clear_error(setup):
    with pytest.raises(CommandError, match="No suite named 'Nope'. Suites: 'Sums'"):
        run_experiment("Nope", "Alpha")
    with pytest.raises(CommandError, match="No agent named 'Gamma'"):
        run_experiment("Sums", "Gamma")
    with pytest.raises(CommandError, match="No model profile named 'Judge'"):
        run_experiment("Sums", "Alpha", "--judge", "Judge")
    assert not Experiment.objects.exists()
