"""The screenshot tour: every page a newcomer meets, made the way a person makes it (forms,
buttons, a run going live, step mode, replay, fork, diff, compare, an experiment), each loaded
at 1400×900 and at a phone's 390×844 and saved as a full-page screenshot.

On every page of the tour: no script error or CSP violation (the browser fixtures fail on
them), a heading, and nothing wider than the window (a table scrolls inside its box).

    AGENTLAB_TOUR_DIR=/tmp/tour AGENTLAB_BROWSER_TESTS=1 AGENTLAB_VAR_DIR=$(mktemp -d) \\
        .venv/bin/python -m pytest tests/browser/test_tour.py

writes NN-name-desktop.png and NN-name-phone.png there (without AGENTLAB_TOUR_DIR, into the
test's temporary folder). The model is the scripted OpenAI-compatible server."""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

import pytest
from playwright.sync_api import expect

from agentlab.evals.models import Case, Suite
from agentlab.models import Agent
from tests.browser_fixtures import Tour, log_in
from tests.fake_openai import Reply
from traces.models import Run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]



def answer(body: dict) -> Reply:
    """ReAct with the calculator: a tool call first, then the answer, streamed."""
    messages = body.get("messages") or []
    if "slowly" in str(messages[-1].get("content", "")) if messages else False:
        return Reply(text="Let me think about it slowly: " + "six times seven, " * 14 + "42.",
                     chunk_delay_s=0.12)
    called = any(m.get("role") == "tool" or str(m.get("content", "")).startswith("Result of")
                 for m in messages)
    if body.get("tools") and not called:
        return Reply(tool_calls=[("calculator", '{"expression": "6*7"}')], usage=(120, 18))
    return Reply(text="6 times 7 is 42, as the calculator says.", usage=(160, 12),
                 chunk_delay_s=0.01)


def wait_done(pk: int, timeout_s: float = 30) -> Run:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run = Run.objects.get(pk=pk)
        if not run.is_active:
            return run
        time.sleep(0.2)
    raise AssertionError(f"run {pk} is still {run.status}")


def run_pk(page) -> int:
    return int(re.search(r"/runs/(\d+)/", page.url).group(1))


@pytest.fixture
def tour(browser_page, live_url, staff, calc_agent, fake_llm, tmp_path) -> Tour:
    fake_llm.responder = answer
    second = Agent(name="Calc agent (text)", paradigm="react", description="ReAct in text mode.",
                   model_profile=calc_agent.model_profile, params={"mode": "text"})
    second.full_clean()
    second.save()
    second.tools.set(calc_agent.tools.all())
    calc_agent.description = "ReAct with function calling and the calculator."
    calc_agent.demo_question = "What is 6*7?"
    calc_agent.save()
    suite = Suite.objects.create(name="Arithmetic", description="Two small products.")
    for pos, (q, e) in enumerate([("What is 6*7?", "42"), ("What is 3*3?", "9")], start=1):
        Case.objects.create(suite=suite, position=pos, question=q, expected=e,
                            scorer="contains", tags=["math"])
    out = Path(os.environ.get("AGENTLAB_TOUR_DIR") or tmp_path / "tour")
    out.mkdir(parents=True, exist_ok=True)
    log_in(browser_page, live_url, "root", "pw-root-123")
    return Tour(browser_page, live_url, out)


def test_every_page_as_a_newcomer_meets_it(tour, browser_page, live_url):
    page = browser_page
    tour.shoot("home", "/")

    # Chat: the index, a conversation with an answered turn.
    tour.shoot("chat", "/chat/")
    page.get_by_role("button", name="New conversation with Calc agent", exact=True).click()
    page.get_by_label("Message").fill("What is 6*7?")
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    page.get_by_role("button", name="Send").click()
    expect(page.locator("#turn-1 [data-live=status]")).to_have_text("finished with an answer",
                                                                    timeout=20_000)
    tour.shoot("conversation")

    # Step mode: a one-off run paused before its first call.
    page.goto(live_url + "/chat/")
    page.get_by_label("Question for Calc agent", exact=True).fill("What is 6*7, step by step?")
    page.locator("form.run-once").first.get_by_label("step mode").check()
    page.get_by_role("button", name="Run Calc agent", exact=True).click()
    expect(page.locator('[data-live="pending"]')).to_be_visible(timeout=15_000)
    tour.shoot("step-mode")
    # The same run's trace page while it is live (paused), then going on to its end.
    live_pk = run_pk(page)
    tour.shoot("live-trace", f"/runs/{live_pk}/")
    page.locator("details.live-debug").evaluate("d => d.open = true")
    page.get_by_label("Step mode: pause before every LLM call and tool call").uncheck()
    page.locator('[data-live="pending"]').get_by_role("button", name="Resume").click()
    expect(page.locator("#run-head .run-meta .status")).to_have_text("finished with an answer",
                                                                     timeout=20_000)
    tour.shoot("finished-trace")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    page.wait_for_url(re.compile(r"\?step=2$"))
    tour.shoot("trace-at-step-2")

    # A live run while its reply streams in: the step, seconds and tokens show.
    page.goto(live_url + "/chat/")
    page.get_by_label("Question for Calc agent (text)", exact=True).fill("What is 6*7, slowly?")
    page.get_by_role("button", name="Run Calc agent (text)", exact=True).click()
    activity = page.locator('[data-live="activity"]')
    expect(activity).to_contain_text("tokens/s", timeout=15_000)
    tour.shoot("live-run")
    expect(page.locator('[data-live="status"]').first).not_to_have_text("running",
                                                                        timeout=30_000)

    # Replay, fork, diff.
    page.goto(f"{live_url}/runs/{live_pk}/")
    page.get_by_role("button", name="Replay").click()
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    replay_pk = run_pk(page)
    wait_done(replay_pk)
    tour.shoot("replay", f"/runs/{replay_pk}/")
    tour.shoot("fork-form", f"/runs/{live_pk}/fork/2/")
    page.get_by_label("Observation").fill("100")
    page.get_by_role("button", name="Fork and run").click()
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    fork_pk = run_pk(page)
    wait_done(fork_pk)
    tour.shoot("fork", f"/runs/{fork_pk}/")
    tour.shoot("diff", f"/runs/diff/?a={live_pk}&b={fork_pk}")
    tour.shoot("playground", f"/runs/{live_pk}/steps/1/playground/")
    tour.shoot("runs", "/runs/")

    # Compare two agents.
    tour.shoot("compare-form", "/compare/")
    page.get_by_label("Question").fill("What is 6*7?")
    for label in page.locator(".compare-agents label.check").all():
        label.locator("input").check()
    page.get_by_role("button", name="Run the comparison").click()
    page.wait_for_url(re.compile(r"/compare/\d+/$"))
    expect(page.locator("table.compare-summary")).to_be_visible(timeout=30_000)
    tour.shoot("compare")

    # Evals: the index, a small experiment, its suite.
    tour.shoot("evals", "/evals/")
    page.select_option("select[name=suite]", label="Arithmetic")
    page.get_by_label("Calc agent (ReAct)", exact=True).check()
    page.get_by_label("Only cases tagged").fill("math")
    page.get_by_role("button", name="Start the experiment").click()
    page.wait_for_url(re.compile(r"/evals/experiments/\d+/$"))
    expect(page.locator("[data-experiment-status]")).to_contain_text("scored", timeout=30_000)
    tour.shoot("experiment")
    tour.shoot("suite", f"/evals/suites/{Suite.objects.get().pk}/")

    # Cases from runs: one run added to the suite from its page, two from the runs list; an LLM
    # step saved as a playground case.
    suite = Suite.objects.get()
    page.goto(f"{live_url}/runs/{live_pk}/")
    page.get_by_text("Add to suite…").click()
    page.locator("#add-to-suite select[name=suite]").select_option(label="Arithmetic")
    page.locator("#add-to-suite").get_by_label("Tags").fill("math, from-chat")
    page.locator("#add-to-suite").scroll_into_view_if_needed()
    tour.shoot("add-to-suite")
    page.locator("#add-to-suite").get_by_role("button", name="Add to suite").click()
    expect(page.locator("#cases-from-run")).to_contain_text("Arithmetic #3")
    page.goto(f"{live_url}/runs/")
    for pk in (replay_pk, fork_pk):
        page.get_by_label(f"Select run {pk}", exact=True).check()
    page.locator("#suite-button").click()
    page.wait_for_url(re.compile(r"/evals/cases/from-runs/"))
    tour.shoot("add-runs-to-suite")
    page.get_by_role("button", name="Add 2 cases").click()
    page.wait_for_url(re.compile(rf"/evals/suites/{suite.pk}/$"))
    tour.shoot("suite-with-cases-from-runs")
    page.goto(f"{live_url}/runs/{live_pk}/steps/1/playground/?save=1#save-case")
    tour.shoot("playground-save")
    page.locator("#save-case").get_by_role("button", name="Save as a playground case").click()
    page.wait_for_url(re.compile(r"/evals/playground-cases/\d+/$"))
    tour.shoot("playground-case")
    tour.shoot("playground-cases", "/evals/playground-cases/")

    tour.shoot("dashboard", "/dashboard/")

    # Access tokens: one made through the form, shown once.
    page.goto(f"{live_url}/tokens/")
    page.fill("input[name=name]", "CI exporter")
    page.click("text=Create token")
    tour.shoot("access-tokens")

    # Admin.
    tour.shoot("admin", "/admin/")
    agent = Agent.objects.get(name="Calc agent")
    tour.shoot("admin-agent", f"/admin/agentlab/agent/{agent.pk}/change/")
    tour.shoot("admin-tools", "/admin/agentlab/tool/")
    tour.shoot("admin-profiles", "/admin/agentlab/modelprofile/")

    page.context.clear_cookies()
    tour.shoot("login", "/login/")
    assert tour.problems == [], "\n".join(tour.problems)
    assert page.js_errors == []


def test_feedback_pages(tour, browser_page, staff):
    """Feedback (agentlab/feedback/): on a run and beside its steps, the form open on a step,
    the runs list filtered by it, the dashboard's chart, the admin's keys."""
    from agentlab.feedback import record
    from agentlab.feedback.models import FeedbackKey
    from tests.factories import make_run

    page = browser_page
    relevance = FeedbackKey.objects.create(name="relevance", kind="numeric", minimum=1,
                                           maximum=5, description="How well it answers")
    tone = FeedbackKey.objects.create(name="tone", kind="categories",
                                      labels=["rude", "neutral", "kind"], position=1)
    FeedbackKey.objects.create(name="correct", kind="boolean", position=2)
    run = make_run(staff, agent_name="Weather agent")
    record.toggle_thumb(run, 0, staff, "up")
    record.give_key(run, 0, staff, relevance, "4", note="Right answer; the SQL step was slow.")
    record.toggle_thumb(run, 3, staff, "down")
    record.give_key(run, 3, staff, tone, "neutral")
    record.give_note(run, 6, staff, "This observation is far too long for the model's context.")
    other = make_run(staff, agent_name="Calc agent", input="What is 6*7?")
    record.toggle_thumb(other, 0, staff, "down")
    tour.shoot("feedback-run", f"/runs/{run.pk}/")
    page.locator("#step-3 .fb-more summary").click()
    expect(page.locator("#step-3 .fb-form")).to_be_visible()
    page.locator("#step-3").scroll_into_view_if_needed()
    tour.shoot("feedback-step-form")
    tour.shoot("feedback-runs-filter", "/runs/?feedback=down")
    tour.shoot("feedback-dashboard", "/dashboard/#feedback")
    tour.shoot("feedback-keys-admin", "/admin/feedback/feedbackkey/")
    assert tour.problems == [], "\n".join(tour.problems)
    assert page.js_errors == []


def test_long_diff_page(tour, browser_page, staff):
    """The diff of two 6,000-step runs: opened on the first divergence, equal plans folded."""
    from tests.factories import make_run
    from tests.long_runs import planned

    a = make_run(staff, planned(600, 9), agent_name="Planner")
    b = make_run(staff, planned(600, 9, changed=frozenset({400, 590})), agent_name="Planner")
    tour.shoot("long-diff", f"/runs/diff/?a={a.pk}&b={b.pk}")
    assert tour.problems == [], "\n".join(tour.problems)
    assert browser_page.js_errors == []


def test_long_run_page(tour, browser_page, staff):
    """A run of 12,000 steps opened at step 9,000: the steps around it, inside its plan, the
    timeline from the stored aggregate with the step's bucket marked, the search form."""
    from tests.factories import make_run
    from traces import timeline_summary

    steps = [{"kind": "plan", "text": f"plan {i}"} if i % 500 == 1 else
             {"kind": "tool" if i % 3 else "thought", "name": "calculator" if i % 3 else "",
              "text": f"step {i}", "duration_ms": float(i % 700), "parent": i - (i - 1) % 500}
             for i in range(1, 12_001)]
    run = make_run(staff, steps, agent_name="Long")
    timeline_summary.update(run, 12_000)  # as an import does
    browser_page.goto(f"{tour.base}/runs/{run.pk}/?step=9000")
    browser_page.locator("#step-9000.current").wait_for()
    browser_page.locator(".waterfall .bar.current").wait_for()
    tour.shoot("long-run")
    assert tour.problems == [], "\n".join(tour.problems)
    assert browser_page.js_errors == []


def test_review_queue_pages(tour, browser_page, staff, django_user_model):
    """Review queues (agentlab/review/): the queues, a queue with who said what, agreement
    and rules, an item with the trace beside the rubric and the keys shown, a pairwise item,
    sending the runs list's filter to a queue, a new queue."""
    from agentlab.feedback.models import FeedbackKey
    from agentlab.review import answers
    from agentlab.review.models import Rule
    from tests.factories import make_queue, make_run

    page = browser_page
    relevance = FeedbackKey.objects.create(name="relevance", kind="numeric", minimum=1,
                                           maximum=5, description="How well it answers")
    tone = FeedbackKey.objects.create(name="tone", kind="categories",
                                      labels=["rude", "neutral", "kind"], position=1)
    ana = django_user_model.objects.create_user("ana")
    ben = django_user_model.objects.create_user("ben")
    runs = [make_run(staff, agent_name="Weather agent", input=f"What is the weather in {city}?")
            for city in ("Paris", "Rome", "Oslo", "Lima")]
    queue = make_queue(staff, [staff, ana, ben], keys=[relevance, tone], runs=runs, needed=2,
                       name="Weather answers")
    queue.instructions = ("Is the answer right for the city asked about? Rate relevance 1–5, "
                          "and the tone.")
    queue.save()
    Rule.objects.create(queue=queue, query="agent=Weather+agent&status=failed", percent=10)
    items = list(queue.items.order_by("pk"))
    given = {ana: [("5", "kind", "up"), ("3", "neutral", "up"), ("2", "rude", "down")],
             ben: [("5", "kind", "up"), ("4", "neutral", "up"), ("1", "neutral", "down")]}
    for person, values in given.items():
        for item, (score, label, thumb) in zip(items, values, strict=False):
            answers.answer(item, person, [relevance, tone],
                           {f"key-{relevance.pk}": score, f"key-{tone.pk}": label,
                            "thumbs": thumb, "note": "Checked against the forecast."
                            if score == "3" else ""}, {})
    tour.shoot("review-queues", "/review/")
    tour.shoot("review-queue", f"/review/{queue.pk}/")
    tour.shoot("review-item", f"/review/{queue.pk}/items/{items[3].pk}/")
    page.keyboard.press("?")
    expect(page.locator("#review-keys")).to_be_visible()
    tour.shoot("review-item-keys")
    page.keyboard.press("Escape")

    a = make_run(staff, agent_name="ReAct", input="What is the weather in Paris?")
    b = make_run(staff, agent_name="ReWOO", input="What is the weather in Paris?",
                 steps=[{"kind": "tool", "name": "get_weather", "input": {"city": "Paris"},
                         "text": "Rain, 14 C"},
                        {"kind": "final", "text": "It rains in Paris.",
                         "output": "It rains in Paris."}])
    pairwise = make_queue(staff, [staff, ana], mode="pairwise", name="ReAct or ReWOO",
                          pairs=[(a, b)])
    tour.shoot("review-pairwise", f"/review/{pairwise.pk}/items/{pairwise.items.get().pk}/")
    tour.shoot("review-fill", "/review/fill/?agent=Weather+agent")
    tour.shoot("review-new", "/review/new/")
def test_live_scorer_pages(tour, browser_page, staff, fake_llm):
    """Live scorers (agentlab/monitors/): a judge's page with its charts, figures and scores,
    the alert banner on another page, the alerts page, the scorer in the admin."""
    from datetime import timedelta

    from django.utils import timezone

    from agentlab.models import ModelProfile
    from agentlab.monitors import passes
    from agentlab.monitors.models import LiveScore, LiveScorer
    from tests.factories import make_run

    type(staff).objects.filter(pk=staff.pk).update(email="oncall@example.com")  # the session stays
    ModelProfile.objects.filter(name="Scripted").update(price_in_per_m=2.5, price_out_per_m=10)
    grades = iter([9, 8, 3, 9, 7, 2, 2, 3, 8, 9, 2, 1, 2])
    fake_llm.responder = lambda body: Reply(
        text=f'{{"score": {next(grades, 5)}, "reasoning": "It answers the question asked."}}',
        usage=(900, 40))
    judge = LiveScorer(
        name="helpful answers", kind="llm_judge", rubric="Answers the question that was asked.",
        judge_profile=ModelProfile.objects.get(name="Scripted"), agent_name="Weather agent",
        key="helpful", sample_rate=1.0, window=5, daily_budget_usd=0.5, alert_on="score",
        alert_op="below", alert_threshold=0.5)
    judge.full_clean()
    judge.save()
    for i in range(13):
        make_run(staff, agent_name="Weather agent", input=f"What is the weather in city {i}?")
    # A pass blocks, as on the scoring thread: not on Playwright's loop in this thread.
    scoring = threading.Thread(target=passes.run_once)
    scoring.start()
    scoring.join(60)
    for n, row in enumerate(LiveScore.objects.order_by("pk")):  # spread over the last days
        LiveScore.objects.filter(pk=row.pk).update(
            claimed_at=timezone.now() - timedelta(days=(12 - n) // 2, hours=n))
    page = browser_page
    tour.shoot("scorer", f"/scorers/{judge.pk}/")
    page.goto(tour.base + "/runs/")
    expect(page.locator(".alert-banner")).to_contain_text("helpful answers")
    tour.shoot("alert-banner")
    tour.shoot("scorers", "/scorers/")
    tour.shoot("alerts", "/scorers/alerts/")
    tour.shoot("scorer-admin", f"/admin/monitors/livescorer/{judge.pk}/change/")


def test_graph_pages(tour, browser_page, staff):
    """The graph of a run (traces/views/graph.py): a debate the real paradigm recorded, a
    LATS search, a received framework trace, and two runs side by side from the diff."""
    from tests import graph_runs

    page = browser_page
    debate = graph_runs.record(staff, graph_runs.debate_steps(), agent_name="Debate team")
    tour.shoot("graph-debate", f"/runs/{debate.pk}/graph/?step=4")
    expect(page.locator(".g-node.at")).to_have_count(1)
    lats = graph_runs.record(staff, graph_runs.lats_steps(), agent_name="LATS search",
                             paradigm="lats")
    tour.shoot("graph-lats", f"/runs/{lats.pk}/graph/?node=search%3Adepth%201")
    received = graph_runs.imported(staff, "openai-agents")
    tour.shoot("graph-received", f"/runs/{received.pk}/graph/")
    fewer = graph_runs.record(staff, [s for s in graph_runs.debate_steps() if s.role != "judge"],
                              agent_name="Debate team")
    page.goto(f"{tour.base}/runs/diff/?a={debate.pk}&b={fewer.pk}")
    page.click("#graphs-link")
    expect(page.locator("svg.run-graph")).to_have_count(2)
    tour.shoot("graphs-side-by-side")
    assert tour.problems == [], "\n".join(tour.problems)
    assert page.js_errors == []


def test_received_trace_pages(tour, browser_page, staff):
    """A trace received over OTLP (agentlab/receiver/): its run live, a span hanging under the
    placeholder of a parent not arrived; the runs list with it going and its project filter."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    from agentlab.receiver.models import ReceivedTrace
    from agentlab.tokens.models import create_token
    from tests.otlp_spans import AgentTrace

    token = create_token(staff, "agent", "ingest")[1]
    exporter = OTLPSpanExporter(endpoint=f"{tour.base}/v1/traces",
                                headers={"Authorization": f"Bearer {token}"})
    exporter.export(AgentTrace(project="weather").whole())
    agent = AgentTrace(service="billing-app", project="billing")
    agent.start()
    agent.llm_asks_tool()
    agent.tool()
    exporter.export(agent.ended)
    run = ReceivedTrace.objects.get(user=staff, done=False).run
    tour.shoot("received-live", f"/runs/{run.pk}/")
    expect(browser_page.locator(".live-panel")).to_contain_text("Receiving spans")
    tour.shoot("received-runs", "/runs/?project=billing")
    assert tour.problems == [], "\n".join(tour.problems)
    assert browser_page.js_errors == []


def test_gateway_run_pages(tour, browser_page, staff, fake_llm):
    """An outside agent's run through the gateway (agentlab/gateway/): held at a breakpoint on
    the tool result it sent, then at its next LLM call with a reply written in the page, and
    the finished run."""
    from tests.gateway_clients import agent_in_session, held_run, post

    page = browser_page
    agent, token, session = agent_in_session(tour.base, staff, fake_llm,
                                             {"break_tools": ["get_weather"]})
    run = held_run(staff)
    page.goto(f"{tour.base}/runs/{run.pk}/")
    pending = page.locator('[data-live="pending"]')
    expect(pending.get_by_label("Tool result the agent sent")).to_have_value("sunny, 21 °C")
    tour.shoot("gateway-held-tool-result")
    page.get_by_label("Hold every LLM call").check()
    pending.get_by_role("button", name="Resume").click()
    expect(pending.locator('[data-live="pending-what"]')).to_have_text("llm scripted (step 3)")
    pending.get_by_label("Write the response yourself").check()
    pending.get_by_label("Response to the agent").fill("Sunny and 21 °C: no umbrella needed.")
    tour.shoot("gateway-held-llm-call")
    pending.get_by_role("button", name="Resume").click()
    assert agent.result() == "Sunny and 21 °C: no umbrella needed."
    post(f"{tour.base}/gateway/sessions/{session}/end", token, {"exit_code": 0})
    expect(page.locator("#run-head .answer-succeeded .text")).to_have_text(
        "Sunny and 21 °C: no umbrella needed.", timeout=20_000)
    tour.shoot("gateway-run")
    assert tour.problems == [], "\n".join(tour.problems)
    assert page.js_errors == []
