"""Review queues (agentlab/review/, docs/REVIEW.md): staff make a queue and fill it from the
runs list's filter or with rules; reviewers work through it; the answers are feedback on the
runs; agreement between reviewers. The pure parts first (sampling, agreement, pairing), then
the pages as a person uses them, through the test client."""

from __future__ import annotations

import io
import re
import time
from collections import Counter

import pytest
from django.core.management import call_command
from django.test import Client

from agentlab.feedback import record
from agentlab.feedback.models import Feedback, FeedbackKey
from agentlab.review import agreement, sync
from agentlab.review.models import Item, Queue, Review, Rule
from agentlab.review.pairing import RunFacts, pairs
from agentlab.review.sampling import sampled
from tests.factories import make_queue, make_run

db = pytest.mark.django_db


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


# -- pure -------------------------------------------------------------------------------------

def test_a_sample_is_decided_by_the_run_id_alone():
    ids = range(1, 20_001)
    ten = {i for i in ids if sampled(i, 10)}
    assert 1800 < len(ten) < 2200  # about 10 %
    assert ten == {i for i in ids if sampled(i, 10)}  # the same every time
    assert {i for i in ids if sampled(i, 5)} < ten  # a smaller sample is part of a larger
    assert all(sampled(i, 100) for i in range(1, 100))
    assert not any(sampled(i, 0) for i in range(1, 100))
    # neighbouring ids do not cluster: each thousand gets its share
    per_thousand = Counter(i // 1000 for i in ten)
    assert min(per_thousand.values()) > 60


def test_agreement_per_item_and_over_a_queue():
    assert agreement.agrees(["up", "up"]) is True
    assert agreement.agrees(["up", "down"]) is False
    assert agreement.agrees(["up"]) is None
    # Fleiss' example shape: 3 items, 2 raters; 2 agree, 1 does not.
    a = agreement.measure([["yes", "yes"], ["no", "no"], ["yes", "no"], ["yes"]])
    assert (a.items, a.agreed) == (3, 2)
    assert a.percent == pytest.approx(2 / 3)
    assert a.pairs == pytest.approx(2 / 3)
    # p_yes = p_no = 0.5: chance agreement 0.5, kappa (2/3 - 1/2) / (1/2) = 1/3
    assert a.kappa == pytest.approx(1 / 3)
    assert a.mean_distance is None  # labels, not numbers
    numbers = agreement.measure([[4.0, 5.0], [2.0, 2.0, 3.0]])
    assert numbers.agreed == 0
    assert numbers.mean_distance == pytest.approx((1 + 0 + 1 + 1) / 4)
    perfect = agreement.measure([["a", "a"], ["a", "a"]])
    assert perfect.percent == 1 and perfect.kappa is None  # no variety: kappa says nothing


def test_runs_pair_with_their_origin_or_another_agent_on_the_same_question():
    runs = [RunFacts(1, "What is 6*7?", "ReAct"), RunFacts(2, "what is  6*7?", "ReAct"),
            RunFacts(3, "What is 6*7?", "ReWOO"), RunFacts(4, "Weather?", "ReAct"),
            RunFacts(5, "Weather?", "ReAct", parent=4), RunFacts(6, "Weather?", "Self-Ask")]
    # 2 is ReAct again (no pair); 3 pairs with ReAct's latest (2); 5 with its origin; 6 with
    # the latest ReAct run of its question (5).
    assert pairs(runs) == [(2, 3), (4, 5), (5, 6)]


# -- making and filling a queue -----------------------------------------------------------------

@pytest.fixture
def relevance():
    return FeedbackKey.objects.create(name="relevance", kind="numeric", minimum=1, maximum=5,
                                      description="How well it answers")


@db
def test_staff_make_a_queue_and_fill_it_from_the_runs_lists_filter(staff, user, relevance):
    weather = [make_run(user, agent_name="Weather agent") for _ in range(3)]
    make_run(user, agent_name="Calc agent", input="What is 6*7?")
    make_run(user, agent_name="Weather agent", status="running")  # still going: left out
    root = client_of(staff)
    response = root.post("/review/new/", {
        "name": "Weather answers", "mode": "single", "instructions": "Is the answer right?",
        "keys": [relevance.pk], "thumbs": "on", "reviewers": [user.pk, staff.pk],
        "reviews_needed": 2})
    queue = Queue.objects.get(name="Weather answers")
    assert response.url == f"/review/{queue.pk}/" and queue.owner == staff
    # The runs list offers the current filter to a queue, and the page counts what it keeps.
    runs_page = root.get("/runs/?agent=Weather+agent&sort=-cost").content.decode()
    assert 'href="/review/fill/?agent=Weather+agent&amp;sort=-cost"' in runs_page
    page = root.get("/review/fill/?agent=Weather+agent&sort=-cost&page=2").content.decode()
    assert re.search(r"<strong>3</strong> finished runs match", page)
    assert "Agent: Weather agent" in page
    response = root.post("/review/fill/", {"queue": queue.pk, "query": "agent=Weather+agent"})
    assert response.status_code == 302
    assert sorted(queue.items.values_list("run_id", flat=True)) == [r.pk for r in weather]
    # Again: nothing twice.
    root.post("/review/fill/", {"queue": queue.pk, "query": "agent=Weather+agent"})
    assert queue.items.count() == 3
    # Ordinary users get neither the button nor the page.
    assert "Send these runs to a review queue" not in client_of(user).get("/runs/").content.decode()


@db
def test_a_filter_the_list_would_half_ignore_is_refused_whole(staff, user):
    queue = make_queue(staff, [user])
    make_run(user)
    root = client_of(staff)
    for query, said in (("status=bogus", "Status"), ("nonsense=1", "Not a filter"),
                        ("feedback=speed>=3", "No feedback key")):
        response = root.post("/review/fill/", {"queue": queue.pk, "query": query})
        assert response.status_code == 400, query
        assert said in response.content.decode()
    assert queue.items.count() == 0


# -- working through a queue --------------------------------------------------------------------

@db
def test_a_reviewer_works_through_a_queue_and_the_answers_are_feedback(staff, user, relevance):
    runs = [make_run(user, input=f"Weather {i}?") for i in range(3)]
    queue = make_queue(staff, [user], keys=[relevance], runs=runs,
                       name="Weather", needed=1)
    alice = client_of(user)
    first = alice.get(f"/review/{queue.pk}/work/")
    item = queue.items.get(run=runs[0])
    assert first.url == f"/review/{queue.pk}/items/{item.pk}/"
    page = alice.get(first.url).content.decode()
    # The trace (the run page's step partial) beside the rubric, and where we are.
    assert 'id="step-3"' in page and "get_weather" in page
    assert "Item 1 of 3" in page and "0 / 3</strong> reviewed by you" in page
    assert f'name="key-{relevance.pk}"' in page and 'name="thumbs"' in page
    # A folded payload opens through the queue, not the run's page.
    assert f"/review/runs/{runs[0].pk}/steps/6/payload/" in page
    assert f'href="/runs/{runs[0].pk}/steps/' not in page  # no fork or playground links
    assert alice.get(f"/review/runs/{runs[0].pk}/steps/6/payload/text/").status_code == 200

    response = alice.post(f"/review/{queue.pk}/items/{item.pk}/answer/", {
        f"key-{relevance.pk}": "4", "thumbs": "down", "note": "Right city, wrong day."})
    second = queue.items.get(run=runs[1])
    assert response.url == f"/review/{queue.pk}/work/"
    assert alice.get(response.url).url == f"/review/{queue.pk}/items/{second.pk}/"
    given = {(f.name, f.label or f.score, f.note) for f in Feedback.objects.filter(run=runs[0])}
    assert given == {("relevance", 4.0, ""), ("thumbs", "down", ""),
                     ("note", None, "Right city, wrong day.")}
    # It shows on the run page like any feedback, and in the runs list's filter.
    run_page = alice.get(f"/runs/{runs[0].pk}/").content.decode()
    assert "relevance 4" in run_page and "Right city, wrong day." in run_page
    listed = alice.get("/runs/?feedback=relevance>=4").content.decode()
    assert f'href="/runs/{runs[0].pk}/"' in listed and f'href="/runs/{runs[1].pk}/"' not in listed

    # Skip the second; the third is next; nothing given is refused with the reason.
    assert alice.post(f"/review/{queue.pk}/items/{second.pk}/skip/").url.endswith(
        f"/items/{queue.items.get(run=runs[2]).pk}/")
    third = queue.items.get(run=runs[2])
    refused = alice.post(f"/review/{queue.pk}/items/{third.pk}/answer/", {"note": ""})
    assert refused.status_code == 400
    assert "Give at least one value or a note" in refused.content.decode()
    alice.post(f"/review/{queue.pk}/items/{third.pk}/answer/", {"thumbs": "up"})
    done = alice.get(f"/review/{queue.pk}/work/").content.decode()
    assert "Nothing left for you" in done and "Review the 1 item you skipped" in done
    assert alice.get(f"/review/{queue.pk}/work/?skipped=1").url.endswith(f"/items/{second.pk}/")
    assert dict(Review.objects.values_list("item__run_id", "status")) == {
        runs[0].pk: "done", runs[1].pk: "skipped", runs[2].pk: "done"}
    # Answering again edits the same feedback (one value per key, run and author).
    alice.post(f"/review/{queue.pk}/items/{item.pk}/answer/", {f"key-{relevance.pk}": "2"})
    assert Feedback.objects.get(run=runs[0], name="relevance").score == 2.0
    assert not Feedback.objects.filter(run=runs[0], name="thumbs").exists()  # cleared


@db
def test_a_note_over_the_feedback_limit_is_refused(staff, user, settings):
    settings.AGENTLAB_FEEDBACK_NOTE_CHARS = 50
    queue = make_queue(staff, [user], runs=[make_run(user)])
    item = queue.items.get()
    response = client_of(user).post(f"/review/{queue.pk}/items/{item.pk}/answer/",
                                    {"thumbs": "up", "note": "x" * 51})
    assert response.status_code == 400
    assert "A note is at most 50 characters (this one has 51)" in response.content.decode()
    assert not Feedback.objects.exists() and not Review.objects.exists()


@db
def test_two_reviewers_their_answers_and_their_agreement(staff, user, other_user, relevance):
    runs = [make_run(staff, input=f"Q{i}") for i in range(3)]
    queue = make_queue(staff, [user, other_user], keys=[relevance], runs=runs, needed=2)
    items = list(queue.items.order_by("pk"))
    answers = {user: ["5", "3", "1"], other_user: ["5", "4", "1"]}
    for person, values in answers.items():
        client = client_of(person)
        for item, value in zip(items, values, strict=True):
            thumbs = "up" if value != "1" else "down"
            client.post(f"/review/{queue.pk}/items/{item.pk}/answer/",
                        {f"key-{relevance.pk}": value, "thumbs": thumbs, "note": f"{value}!"})
    page = client_of(staff).get(f"/review/{queue.pk}/").content.decode()
    row = page[page.index(f'id="item-{items[1].pk}"'):]
    row = row[:row.index("</tr>")]
    assert "<strong>alice</strong>: thumbs up, relevance 3" in row
    assert "<strong>bob</strong>: thumbs up, relevance 4" in row and "“4!”" in row
    assert "2 / 2" in row
    table = page[page.index('id="agreement"'):page.index('id="items"')]
    # thumbs: 3 of 3 agree; relevance: 2 of 3 agree, mean distance 1/3
    assert re.search(r'<th>thumbs</th><td class="num">3</td>\s*<td class="num">100%', table)
    assert re.search(r'<th>relevance</th><td class="num">3</td>\s*<td class="num">67%', table)
    assert "0.33" in table
    assert "3 of 3 items complete" in page


# -- rules --------------------------------------------------------------------------------------

@db
def test_a_rule_picks_up_new_runs_as_they_finish(staff, user):
    old = make_run(user, agent_name="Calc agent", status="failed")
    queue = make_queue(staff, [user])
    root = client_of(staff)
    root.post(f"/review/{queue.pk}/rules/", {"which": "failed", "agent": "Calc agent",
                                             "percent": "100", "query": ""})
    rule = queue.rules.get()
    assert rule.query == "agent=Calc+agent&status=failed"
    assert sync.run_pass() == {rule.pk: 0}  # runs before the rule are not new
    failed = make_run(user, agent_name="Calc agent", status="failed")
    make_run(user, agent_name="Calc agent", status="succeeded")
    make_run(user, agent_name="Weather agent", status="failed")
    going = make_run(user, agent_name="Calc agent", status="running")
    assert sync.run_pass() == {rule.pk: 1}
    assert list(queue.items.values_list("run_id", flat=True)) == [failed.pk]
    type(going).objects.filter(pk=going.pk).update(status="failed")  # it finishes later
    assert sync.run_pass() == {rule.pk: 1}
    assert sync.run_pass() == {rule.pk: 0}  # each once
    assert sorted(queue.items.values_list("run_id", flat=True)) == [failed.pk, going.pk]
    assert old.pk not in queue.items.values_list("run_id", flat=True)
    page = root.get(f"/review/{queue.pk}/").content.decode()
    assert "Agent: Calc agent" in page and "2 added" in page


@db
def test_a_rule_samples_by_run_id_and_sees_feedback_given_later(staff, user):
    queue = make_queue(staff, [user])
    sample = Rule.objects.create(queue=queue, query="agent=Sampled", percent=10)
    runs = [make_run(user, agent_name="Sampled", steps=[]) for _ in range(200)]
    sync.run_pass()
    kept = set(queue.items.values_list("run_id", flat=True))
    assert kept == {r.pk for r in runs if sampled(r.pk, 10)} and 5 <= len(kept) <= 45
    sample.delete()
    # "Every run with negative feedback": thumbs down given after the run finished.
    down = Rule.objects.create(queue=queue, query="feedback=down", percent=100,
                               after=runs[-1].pk)
    late = make_run(user, agent_name="Late")
    assert sync.run_pass() == {down.pk: 0}
    record.toggle_thumb(late, 0, user, "down")
    assert sync.run_pass() == {down.pk: 1}
    assert queue.items.filter(run=late).exists()


@db
def test_a_rule_for_guardrail_flags_and_the_command(staff, user):
    queue = make_queue(staff, [user])
    Rule.objects.create(queue=queue, query="guardrail_action=any", percent=100)
    flagged = make_run(user, steps=[{"kind": "guardrail", "name": "pii", "text": "an e-mail",
                                     "meta": {"action": "flag"}},
                                    {"kind": "final", "text": "done"}])
    make_run(user, steps=[{"kind": "guardrail", "name": "judge", "text": "fine",
                           "meta": {"action": "pass"}}])
    out = io.StringIO()
    call_command("review_sync", stdout=out)
    assert "1 item(s) added by 1 rule(s)." in out.getvalue()
    assert list(queue.items.values_list("run_id", flat=True)) == [flagged.pk]


@pytest.mark.django_db(transaction=True)
def test_rules_cover_runs_made_here_imported_and_received_and_run_in_a_thread(staff, user):
    """A thread (never the event loop) runs the pass; runs of every source are rows alike."""
    from agentlab.receiver.models import ReceivedTrace
    from agentlab.tokens.models import create_token
    from tests.otlp_spans import AgentTrace, encoded
    from traces.otel.importer import import_file

    queue = make_queue(staff, [user])
    Rule.objects.create(queue=queue, query="", percent=100)
    own = make_run(user)
    imported = import_file(encoded(AgentTrace(service="imported-app").whole()), user=user)[0]
    token = create_token(user, "agent", "ingest")[1]
    response = Client().post("/v1/traces", encoded(AgentTrace(service="live-app").whole()),
                             content_type="application/x-protobuf",
                             headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200
    received = ReceivedTrace.objects.get(user=user).run
    assert received.agent_snapshot["imported_from"]["service"] == "live-app"
    thread = sync.start(0.05)
    try:
        deadline = time.monotonic() + 10
        while queue.items.count() < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        thread.stop()
        thread.join(5)
    assert sorted(queue.items.values_list("run_id", flat=True)) == sorted(
        [own.pk, imported.pk, received.pk])
    assert thread.name == "review-rules" and thread.passes >= 1


# -- pairwise -----------------------------------------------------------------------------------

@db
def test_pairwise_from_a_filter_and_from_the_diff_page(staff, user, other_user):
    q = "What is the weather in Paris?"
    react = make_run(user, agent_name="ReAct", input=q)
    rewoo = make_run(user, agent_name="ReWOO", input=q, final_answer="Rainy.")
    fork = make_run(user, agent_name="ReAct", input=q, parent_run=react, fork_seq=2)
    queue = make_queue(staff, [user, other_user], mode="pairwise", name="Which agent", needed=2)
    root = client_of(staff)
    root.post("/review/fill/", {"queue": queue.pk, "query": "q=weather"})
    assert set(queue.items.values_list("run_id", "run_b_id")) == {
        (react.pk, rewoo.pk), (react.pk, fork.pk)}
    # The diff page offers its pair to staff.
    diff = root.get(f"/runs/diff/?a={rewoo.pk}&b={fork.pk}").content.decode()
    assert f"/review/pair/?a={rewoo.pk}&amp;b={fork.pk}" in diff
    assert "Send this pair" not in client_of(user).get(
        f"/runs/diff/?a={rewoo.pk}&b={fork.pk}").content.decode()
    response = root.post("/review/pair/", {"a": fork.pk, "b": rewoo.pk, "queue": queue.pk})
    assert response.url == f"/review/{queue.pk}/"
    assert queue.items.filter(run=rewoo, run_b=fork).exists()  # the earlier run is A

    item = queue.items.get(run=react, run_b=rewoo)
    alice = client_of(user)
    page = alice.get(f"/review/{queue.pk}/items/{item.pk}/").content.decode()
    assert "Rainy." in page and "Different answers" in page and "diff-rows" in page
    assert 'value="a"' in page and 'value="tie"' in page
    refused = alice.post(f"/review/{queue.pk}/items/{item.pk}/answer/", {"note": "hm"})
    assert "Say which is better" in refused.content.decode()
    alice.post(f"/review/{queue.pk}/items/{item.pk}/answer/",
               {"choice": "b", "note": "B says it rains, which it does."})
    client_of(other_user).post(f"/review/{queue.pk}/items/{item.pk}/answer/", {"choice": "b"})
    assert dict(Feedback.objects.filter(name="pairwise", author=user).values_list(
        "run_id", "label")) == {react.pk: "worse", rewoo.pk: "better"}
    assert Feedback.objects.get(run=react, author=user, name="pairwise").note == (
        f"Compared with run {rewoo.pk}: B says it rains, which it does.")
    page = root.get(f"/review/{queue.pk}/").content.decode()
    assert "<strong>alice</strong>: better: B" in page and "<strong>bob</strong>: better: B" in page
    assert re.search(r'<th>choice</th><td class="num">1</td>\s*<td class="num">100%', page)
    # The runs list filters by it like any feedback.
    listed = client_of(user).get("/runs/?feedback=pairwise=better").content.decode()
    assert f'href="/runs/{rewoo.pk}/"' in listed and f'href="/runs/{react.pk}/"' not in listed


@db
def test_a_single_queue_takes_no_pair(staff, user):
    queue = make_queue(staff, [user])
    a, b = make_run(user), make_run(user)
    response = client_of(staff).post("/review/pair/", {"a": a.pk, "b": b.pk, "queue": queue.pk})
    assert response.status_code == 404  # only pairwise queues are offered
    assert not Item.objects.exists()
