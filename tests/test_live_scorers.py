"""Live scorers (agentlab/monitors/): sampling, the pass over finished runs of every source
with its watermark, the result as the scorer's feedback (run page, runs list filter), the LLM
judge against the scripted OpenAI-compatible server (its profile only, its max tokens, its
timeout, its daily budget), alerts opened once, e-mailed once and closed on recovery, and the
thread that passes in the background. Who sees what is
tests/security/test_live_scorer_access.py's."""

from __future__ import annotations

import json
import re
import threading
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from agentlab.feedback.models import Feedback, FeedbackKey
from agentlab.models import ModelProfile, OutboxEmail
from agentlab.monitors import background, passes, rules
from agentlab.monitors.models import Alert, LiveScore, LiveScorer
from agentlab.tokens.models import create_token
from tests.factories import make_agents, make_run, scripted_profile
from tests.fake_openai import Delay, Fail, FakeOpenAI, Reply
from tests.otlp_spans import AgentTrace, encoded
from tests.waiting import wait_until
from traces.models import Run

pytestmark = pytest.mark.django_db
JUDGE_SAYS = json.dumps({"score": 8, "passed": True, "reasoning": "It names the weather."})


def scorer(**fields) -> LiveScorer:
    """A live scorer, checked as the admin checks it, watching from the runs made after it."""
    defaults = {"name": "sunny check", "kind": "contains", "expected": "sunny",
                "agent_name": "Weather agent", "key": "sunny"}
    made = LiveScorer(**{**defaults, **fields})
    made.full_clean()
    made.save()
    return made


def answered(user, answer: str = "It is sunny in Paris.", **fields) -> Run:
    return make_run(user, [{"kind": "final", "text": answer, "output": answer}], **fields)


def scorer_feedback(run: Run) -> list[tuple]:
    return list(Feedback.objects.filter(run=run, source="scorer").values_list(
        "author_name", "name", "score", "label"))


# -- the pure rules ---------------------------------------------------------------------------

def test_sampling_is_the_same_for_a_run_every_time_and_near_the_rate():
    picks = [rules.sampled(7, run_id, 0.25) for run_id in range(4000)]
    assert picks == [rules.sampled(7, run_id, 0.25) for run_id in range(4000)]
    assert 900 < sum(picks) < 1100
    assert picks != [rules.sampled(8, run_id, 0.25) for run_id in range(4000)]  # per scorer
    assert all(rules.sampled(1, n, 1.0) for n in range(50))
    assert not any(rules.sampled(1, n, 0.0) for n in range(50))


def test_an_episode_opens_once_and_closes_on_recovery():
    assert rules.Episode(False).change(True) == "open"
    assert rules.Episode(True).change(True) is None  # still crossed: nothing new
    assert rules.Episode(True).change(False) == "close"
    assert rules.Episode(False).change(None) is None  # not enough runs yet
    assert rules.breached(0.4, "below", 0.5) and not rules.breached(0.6, "below", 0.5)
    assert rules.rolling([1, 0, 1, 1], 2) == [1, 0.5, 0.5, 1]


# -- the pass ---------------------------------------------------------------------------------

def test_finished_runs_after_the_scorer_are_scored_as_its_feedback(user, client):
    before = answered(user)
    live = scorer()
    sunny, rainy = answered(user), answered(user, "It rains in Oslo.")
    other_agent = answered(user, agent_name="Another agent")
    assert passes.run_once() == {"done": 2}
    assert scorer_feedback(sunny) == [("sunny check", "sunny", 1.0, "pass")]
    assert scorer_feedback(rainy) == [("sunny check", "sunny", 0.0, "fail")]
    assert scorer_feedback(before) == scorer_feedback(other_agent) == []
    assert passes.run_once() == {}  # each run once
    live.refresh_from_db()
    assert live.watermark == rainy.pk  # the last watched run
    key = FeedbackKey.objects.get(name="sunny")
    assert (key.kind, key.minimum, key.maximum) == ("numeric", 0, 1)

    client.force_login(user)
    page = client.get(reverse("run", args=[sunny.pk])).content.decode()
    assert "scorer sunny check" in page
    listed = client.get(reverse("runs"), {"feedback": "sunny>=1"}).content.decode()
    assert f'href="/runs/{sunny.pk}/"' in listed and f'href="/runs/{rainy.pk}/"' not in listed


def test_an_agents_own_runs_are_watched_by_the_agent_not_its_name(user):
    agent = make_agents(scripted_profile("http://127.0.0.1:9/v1"), 1)[0]
    scorer(agent=agent, agent_name="")
    its_own = answered(user, agent=agent, agent_name=agent.name)
    same_name = answered(user, agent_name=agent.name)  # e.g. an import: not this agent's
    assert passes.run_once() == {"done": 1}
    assert scorer_feedback(its_own) and not scorer_feedback(same_name)


def test_a_run_still_going_holds_the_watermark_but_not_the_runs_after_it(user):
    live = scorer()
    first = answered(user)
    going = answered(user, status="running")
    after = answered(user)
    assert passes.run_once() == {"done": 2}
    live.refresh_from_db()
    assert live.watermark == first.pk  # the run still going is not settled
    Run.objects.filter(pk=going.pk).update(status="succeeded")
    assert passes.run_once() == {"done": 1}
    live.refresh_from_db()
    assert live.watermark == after.pk
    assert scorer_feedback(going)[0][2] == 1.0


def test_failed_runs_count_for_the_failure_rate_without_a_score(user):
    scorer()
    failed = answered(user, "", status="failed")
    assert passes.run_once() == {"unanswered": 1}
    assert LiveScore.objects.get(run=failed).run_status == "failed"
    assert scorer_feedback(failed) == []


def test_sampling_scores_about_the_rate_and_the_same_runs_in_every_pass(user):
    live = scorer(sample_rate=0.3)
    runs = [answered(user) for _ in range(60)]
    passes.run_once()
    passes.run_once()
    chosen = set(LiveScore.objects.filter(scorer=live).values_list("run_id", flat=True))
    assert chosen == {r.pk for r in runs if rules.sampled(live.pk, r.pk, 0.3)}
    assert 8 <= len(chosen) <= 30
    live.refresh_from_db()
    assert live.watermark == runs[-1].pk  # the runs not sampled are settled too


def test_a_claim_left_by_a_stopped_process_is_taken_back(user):
    live = scorer(timeout_s=1)
    run = answered(user)
    LiveScore.objects.create(scorer=live, run=run, claimed_at=timezone.now())
    assert passes.run_once() == {}  # claimed by another process: not scored twice
    LiveScore.objects.filter(run=run).update(claimed_at=timezone.now() - timedelta(minutes=5))
    assert passes.run_once() == {"done": 1}
    assert LiveScore.objects.get(run=run).status == "done"


@pytest.mark.django_db(transaction=True)
def test_a_received_and_an_imported_run_are_picked_up(user, tmp_path):
    """Runs that no agent of Agent Lab made: a trace received over OTLP (matched by its
    project) and a bundle imported from a file (matched by its agent's name)."""
    by_project = scorer(name="shop", agent_name="", project="shop-prod", expected="sunny",
                        key="shop-sunny")
    source = answered(user, "Sunny all day.", agent_name="Bundle agent")
    by_name = scorer(name="bundle", agent_name="Bundle agent", expected="sunny",
                     key="bundle-sunny")
    secret = create_token(user, "exporter", "ingest")[1]
    response = Client().post("/v1/traces", encoded(AgentTrace(project="shop-prod").whole()),
                             content_type="application/x-protobuf",
                             headers={"Authorization": f"Bearer {secret}"})
    assert response.status_code == 200
    received = Run.objects.get(agent_snapshot__imported_from__received=True)
    assert received.status == "succeeded" and received.agent is None
    bundle = tmp_path / "run.json"
    call_command("export_run", str(source.pk), "-o", str(bundle))
    call_command("import_run", str(bundle), "--user", user.username)
    imported = Run.objects.exclude(pk__in=[source.pk, received.pk]).get()
    assert passes.run_once() == {"done": 2}
    assert scorer_feedback(received) == [("shop", "shop-sunny", 1.0, "pass")]
    assert scorer_feedback(imported) == [("bundle", "bundle-sunny", 1.0, "pass")]
    assert not LiveScore.objects.filter(run=source).exists()  # older than the scorer
    assert {s.scorer for s in LiveScore.objects.all()} == {by_project, by_name}


def test_a_slow_regex_is_refused_when_the_scorer_is_saved():
    with pytest.raises(Exception, match="took longer|backtracks"):
        scorer(kind="regex", expected="(a+)+$")
    with pytest.raises(Exception, match="at most 1,000"):
        scorer(kind="regex", expected="a" * 1001)
    assert scorer(kind="regex", expected=r"\bsunny\b").pk


# -- the LLM judge ----------------------------------------------------------------------------

def judge_scorer(base_url: str, **fields) -> LiveScorer:
    profile = scripted_profile(base_url)
    return scorer(name="judge", kind="llm_judge", expected="", rubric="Says the weather.",
                  judge_profile=profile, key="judged", **fields)


def test_the_judge_asks_its_profile_with_the_runs_text_and_its_max_tokens(user, fake_llm):
    fake_llm.script(Reply(JUDGE_SAYS, usage=(1000, 50)))
    judge_scorer(fake_llm.base_url, max_tokens=64)
    run = answered(user, "It is sunny in Paris.")
    assert passes.run_once() == {"done": 1}
    sent = fake_llm.last_request
    assert sent["max_tokens"] == 64
    prompt = sent["messages"][0]["content"]
    assert "It is sunny in Paris." in prompt and "Says the weather." in prompt
    assert scorer_feedback(run) == [("judge", "judged", 0.8, "pass")]
    score = LiveScore.objects.get(run=run)
    assert score.cost_usd == pytest.approx((1000 * 1 + 50 * 2) / 1e6)  # the profile's prices
    assert Feedback.objects.get(run=run, source="scorer").note == "It names the weather."


def test_the_judge_never_goes_to_its_profiles_fallback(user, fake_llm):
    fake_llm.script(Fail(500, "down"))
    with FakeOpenAI() as elsewhere:
        elsewhere.script(Reply(JUDGE_SAYS))
        live = judge_scorer(fake_llm.base_url)
        profile = live.judge_profile
        profile.fallback = ModelProfile.objects.create(
            name="Elsewhere", base_url=elsewhere.base_url, model="m", retries=0)
        profile.save()
        run = answered(user)
        assert passes.run_once() == {"error": 1}
        assert elsewhere.requests == []
    assert "the judge's model failed" in LiveScore.objects.get(run=run).error
    assert scorer_feedback(run) == []


def test_a_judge_slower_than_the_timeout_is_an_error(user, fake_llm):
    fake_llm.script(Delay(3, Reply(JUDGE_SAYS)))
    judge_scorer(fake_llm.base_url, timeout_s=0.5)
    run = answered(user)
    assert passes.run_once() == {"error": 1}
    score = LiveScore.objects.get(run=run)
    assert score.error.startswith("took longer than 0.5 s") and score.duration_ms < 2500


def test_the_daily_budget_stops_the_judge_and_the_page_says_so(user, staff, fake_llm):
    fake_llm.script(*[Reply(JUDGE_SAYS)] * 5)
    live = judge_scorer(fake_llm.base_url, daily_calls=2)
    runs = [answered(user) for _ in range(3)]
    assert passes.run_once() == {"done": 2, "skipped": 1}
    assert len(fake_llm.requests) == 2
    live.refresh_from_db()
    assert live.paused and "daily limit of 2 calls is reached" in live.paused_reason
    assert LiveScore.objects.get(run=runs[2]).status == "skipped"
    answered(user)
    assert passes.run_once() == {"skipped": 1}  # paused: no request until midnight UTC
    assert len(fake_llm.requests) == 2
    client = Client()
    client.force_login(staff)
    page = client.get(reverse("monitors:scorer", args=[live.pk])).content.decode()
    assert "Paused until" in page and "daily limit of 2 calls" in page
    admin = client.get(reverse("admin:monitors_livescorer_changelist")).content.decode()
    assert "Paused until" in admin
    # The next day it scores again.
    tomorrow = timezone.now() + timedelta(days=1)
    answered(user)
    assert passes.run_once(now=tomorrow) == {"done": 1}


def test_a_budget_in_dollars_counts_the_most_a_call_can_cost(user, fake_llm):
    fake_llm.script(*[Reply(JUDGE_SAYS, usage=(400, 20))] * 5)
    # prices 1 and 2 USD per million: a call costs at most ~0.0009 here (prompt + 400 out)
    live = judge_scorer(fake_llm.base_url, daily_budget_usd=0.0015)
    for _ in range(3):
        answered(user)
    counts = passes.run_once()
    assert counts["done"] >= 1 and counts["skipped"] >= 1
    live.refresh_from_db()
    spent = sum(LiveScore.objects.values_list("cost_usd", flat=True))
    assert spent <= 0.0015 and "daily budget of $0.0015 is reached" in live.paused_reason


# -- alerts -----------------------------------------------------------------------------------

@pytest.fixture
def outbox(settings):
    """Mail as the installation sends it by default: into the admin's outbox (agentlab/mail.py),
    not the test runner's memory."""
    settings.MAILERS = {"default": {"BACKEND": "agentlab.mail.OutboxBackend"}}


def test_an_alert_opens_once_is_emailed_once_and_closes_on_recovery(user, staff, outbox):
    staff.email = "oncall@example.com"
    staff.save()
    live = scorer(window=2, alert_on="score", alert_op="below", alert_threshold=0.5)
    answered(user)
    passes.run_once()
    assert not Alert.objects.exists()  # one score: not a full window yet
    for _ in range(2):
        answered(user, "Rain.")
    assert passes.run_once()["alert open"] == 1
    alert = Alert.objects.get()
    assert alert.closed_at is None and alert.owner == user and alert.value == 0
    mail = OutboxEmail.objects.get()
    assert mail.to == "oncall@example.com" and "Alert: sunny check" in mail.subject
    assert f"/scorers/{live.pk}/" in mail.body
    for _ in range(3):  # still below: the same episode, no new alert or e-mail
        answered(user, "Rain.")
        passes.run_once()
    assert Alert.objects.count() == OutboxEmail.objects.count() == 1
    for _ in range(2):
        answered(user)
    assert passes.run_once()["alert close"] == 1
    alert.refresh_from_db()
    assert alert.closed_at is not None and alert.last_value == 1 and alert.recovered_emailed
    assert OutboxEmail.objects.order_by("-pk").first().subject.startswith(
        "[Agent Lab] Recovered: sunny check")
    answered(user, "Rain.")
    answered(user, "Rain.")
    passes.run_once()
    assert Alert.objects.count() == 2  # a new episode


def test_an_alert_on_the_watched_runs_failure_rate(user, outbox):
    scorer(window=3, alert_on="run_failures", alert_op="above", alert_threshold=0.5,
           alert_emails="team@example.com")
    answered(user)
    answered(user, "", status="failed")
    answered(user, "", status="timed_out")
    passes.run_once()
    alert = Alert.objects.get()
    assert alert.value == pytest.approx(2 / 3)
    assert OutboxEmail.objects.get().to == "team@example.com"


# -- where it runs ----------------------------------------------------------------------------

@pytest.mark.django_db(transaction=True)
def test_the_background_thread_scores_without_being_asked(user, settings):
    settings.AGENTLAB_LIVE_SCORING_EVERY_S = 0.05
    scorer()
    run = answered(user)
    try:
        assert background.ensure_running()
        thread = next(t for t in threading.enumerate() if t.name == "live-scorers")
        assert thread is not threading.current_thread()
        wait_until(lambda: scorer_feedback(run), timeout=10)
    finally:
        background.stop()
    assert scorer_feedback(run)[0][2] == 1.0


def test_the_scorer_page_shows_counts_time_cost_and_the_chart_data(user, client):
    live = scorer()
    for answer in ("sunny", "rain", "sunny"):
        answered(user, answer)
    passes.run_once()
    client.force_login(user)
    page = client.get(reverse("monitors:scorer", args=[live.pk])).content.decode()
    data = json.loads(re.search(r'<script id="scorer-data" type="application/json">(.*?)'
                                r"</script>", page, re.S).group(1))
    assert data["rolling"]["score"] == [1, 0, 1]
    assert data["rolling"]["rolling"] == pytest.approx([1, 0.5, 2 / 3], abs=1e-4)
    assert sum(data["days"]["done"]) == 3
    assert 'id="rolling">0.667<' in page
    index = client.get(reverse("monitors:index")).content.decode()
    assert "sunny check" in index and "agent name “Weather agent”" in index
