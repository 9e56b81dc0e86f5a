"""Feedback (agentlab/feedback/): the rules of a value, giving it on the run page (thumbs, a
value per key, a note, edit, delete), the runs list's filter, the dashboard's chart and the
admin's keys. Who may do what is tests/security/test_feedback_access.py's."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client

from agentlab.feedback import values
from agentlab.feedback.models import Feedback, FeedbackKey
from agentlab.feedback.values import FeedbackError, KeySpec
from tests.factories import make_run

HTMX = {"HTTP_HX_REQUEST": "true"}


# -- the pure rules ---------------------------------------------------------------------------

RELEVANCE = KeySpec("relevance", "numeric", 1, 5)
TONE = KeySpec("tone", "categories", labels=("rude", "neutral", "kind"))
CORRECT = KeySpec("correct", "boolean")


def test_a_value_is_read_by_its_keys_rules():
    assert values.read_value(RELEVANCE, " 4 ") == values.Value(4.0, "")
    assert values.read_value(RELEVANCE, "2.5").score == 2.5
    assert values.read_value(TONE, "rude") == values.Value(None, "rude")
    assert values.read_value(CORRECT, "yes") == values.Value(1.0, "true")
    assert values.read_value(CORRECT, "No") == values.Value(0.0, "false")
    for spec, raw, said in ((RELEVANCE, "9", "from 1 to 5"), (RELEVANCE, "nan", "from 1 to 5"),
                            (RELEVANCE, "four", "not a number"), (TONE, "angry", "one of rude"),
                            (CORRECT, "maybe", "yes or no")):
        with pytest.raises(FeedbackError, match=said):
            values.read_value(spec, raw)


def test_a_note_over_its_limit_says_how_long_it_was():
    assert values.check_note("  fine  ", limit=10) == "fine"
    with pytest.raises(FeedbackError, match=r"at most 10 characters \(this one has 11\)"):
        values.check_note("x" * 11, limit=10)


def test_a_keys_definition_is_checked():
    assert values.key_errors(RELEVANCE, label_chars=20) == {}
    assert values.key_errors(TONE, label_chars=20) == {}
    assert "name" in values.key_errors(KeySpec("Has Space", "boolean"), label_chars=20)
    assert "built in" in values.key_errors(KeySpec("thumbs", "boolean"), label_chars=20)["name"]
    assert "maximum" in values.key_errors(KeySpec("r", "numeric", 5, 1), label_chars=20)
    assert "minimum" in values.key_errors(KeySpec("r", "numeric", None, 1), label_chars=20)
    assert "labels" in values.key_errors(KeySpec("t", "categories", labels=("a",)),
                                         label_chars=20)
    long = values.key_errors(KeySpec("t", "categories", labels=("a", "b" * 21)), label_chars=20)
    assert "at most 20 characters" in long["labels"]


def test_the_filter_grammar():
    known = {"relevance", "tone"}
    assert values.parse_filter("down", known) == values.Filter("thumbs", "=", "down")
    assert values.parse_filter("any", known) == values.Filter(None, "any")
    assert values.parse_filter("relevance >= 4", known) == values.Filter("relevance", ">=", "4")
    assert values.parse_filter("tone=rude", known) == values.Filter("tone", "=", "rude")
    assert values.parse_filter("tone", known) == values.Filter("tone", "any")
    for bad, said in (("speed=1", "No feedback key"), ("relevance>=high", "not a number"),
                      ("'; drop table", "key=value")):
        with pytest.raises(FeedbackError, match=said):
            values.parse_filter(bad, known)


# -- giving it on the run page ----------------------------------------------------------------

@pytest.fixture
def keys(db):
    return {"relevance": FeedbackKey.objects.create(name="relevance", kind="numeric", minimum=1,
                                                    maximum=5, description="How relevant"),
            "tone": FeedbackKey.objects.create(name="tone", kind="categories",
                                               labels=["rude", "neutral", "kind"])}


@pytest.fixture
def run(user):
    return make_run(user)


@pytest.fixture
def alice(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def strip_of(html: str, seq: int) -> str:
    """The feedback strip of target `seq` in a page."""
    start = html.index(f'id="feedback-{seq}"')
    return html[start:html.index("</details></div>", start)]


@pytest.mark.django_db
def test_the_run_page_has_a_strip_beside_every_step_and_one_for_the_run(alice, run):
    page = alice.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="run-feedback"' in page and "Feedback on this run" in page
    for seq in range(0, 9):  # the run, and its eight steps
        assert f'aria-label="Thumbs up on {"the run" if seq == 0 else f"step {seq}"}"' in page
    step3 = page[page.index('id="step-3"'):page.index('id="step-4"')]
    assert 'id="feedback-3"' in step3  # inside its step's card


@pytest.mark.django_db
def test_thumbs_are_one_click_and_a_second_click_takes_it_back(alice, run, user):
    url = f"/feedback/runs/{run.pk}/3/thumbs/"
    strip = alice.post(url, {"value": "down"}, **HTMX).content.decode()
    assert 'aria-pressed="true" aria-label="Thumbs down on step 3"' in strip
    assert re.search(r'thumb-down".*?<span class="count">1</span>', strip)
    row = Feedback.objects.get()
    assert (row.seq, row.name, row.label, row.score, row.author, row.author_name) == (
        3, "thumbs", "down", 0.0, user, "alice")
    strip = alice.post(url, {"value": "up"}, **HTMX).content.decode()  # changes the thumb
    assert 'aria-pressed="true" aria-label="Thumbs up on step 3"' in strip
    assert Feedback.objects.get().label == "up"
    alice.post(url, {"value": "up"}, **HTMX)
    assert not Feedback.objects.exists()
    page = alice.post(url, {"value": "up"})  # without scripts: back to the run at that step
    assert page.status_code == 302 and page["Location"] == f"/runs/{run.pk}/?step=3"
    assert alice.post(url, {"value": "sideways"}, **HTMX).status_code == 400


@pytest.mark.django_db
def test_a_value_per_key_and_a_note_then_edit_and_delete(alice, run, keys):
    form = alice.get(f"/feedback/runs/{run.pk}/0/give/", **HTMX).content.decode()
    assert f'name="key-{keys["relevance"].pk}"' in form and 'max="5"' in form
    assert '<option value="rude">rude</option>' in form
    strip = alice.post(f"/feedback/runs/{run.pk}/0/give/", {
        f"key-{keys['relevance'].pk}": "4", f"key-{keys['tone'].pk}": "kind",
        "note": "Good answer, slow tool."}, **HTMX).content.decode()
    assert "relevance 4" in strip and "tone: kind" in strip and "Good answer, slow tool." in strip
    assert {r.name: (r.score, r.label) for r in Feedback.objects.all()} == {
        "relevance": (4.0, ""), "tone": (None, "kind"), "note": (None, "")}
    # The form again is filled with what was given; clearing a key takes it back.
    again = alice.get(f"/feedback/runs/{run.pk}/0/give/", **HTMX).content.decode()
    assert 'value="4"' in again and '<option value="kind" selected>' in again
    alice.post(f"/feedback/runs/{run.pk}/0/give/", {
        f"key-{keys['relevance'].pk}": "4", "note": "Good answer, slow tool."}, **HTMX)
    assert not Feedback.objects.filter(name="tone").exists()
    # Edit: the row's own form, then the strip with the new value.
    row = Feedback.objects.get(name="relevance")
    edit = alice.get(f"/feedback/{row.pk}/edit/", **HTMX).content.decode()
    assert f'id="fb-{row.pk}"' in edit and 'value="4"' in edit
    strip = alice.post(f"/feedback/{row.pk}/edit/", {"value": "2", "note": "On reflection, no."},
                       **HTMX).content.decode()
    assert "relevance 2" in strip and "On reflection, no." in strip and "(edited)" in strip
    refused = alice.post(f"/feedback/{row.pk}/edit/", {"value": "7", "note": ""}, **HTMX)
    assert "relevance: a number from 1 to 5." in refused.content.decode()
    assert refused["HX-Retarget"] == "closest li"
    assert Feedback.objects.get(pk=row.pk).score == 2.0
    strip = alice.post(f"/feedback/{row.pk}/delete/", **HTMX).content.decode()
    assert "relevance" not in strip and not Feedback.objects.filter(pk=row.pk).exists()


@pytest.mark.django_db
def test_a_note_over_the_limit_is_refused_where_it_was_typed(alice, run, settings):
    settings.AGENTLAB_FEEDBACK_NOTE_CHARS = 50
    answer = alice.post(f"/feedback/runs/{run.pk}/2/give/", {"note": "n" * 51}, **HTMX)
    shown = answer.content.decode()
    assert answer.status_code == 200 and answer["HX-Retarget"] == "this"  # the form, in place
    assert "A note is at most 50 characters (this one has 51)." in shown
    assert "n" * 51 in shown  # what was typed is kept to shorten
    assert not Feedback.objects.exists()
    page = alice.post(f"/feedback/runs/{run.pk}/2/give/", {"note": "n" * 51})  # no scripts
    assert page.status_code == 400 and "at most 50 characters" in page.content.decode()


@pytest.mark.django_db
def test_feedback_on_a_step_the_run_does_not_have_is_a_404(alice, run):
    assert alice.post(f"/feedback/runs/{run.pk}/99/thumbs/", {"value": "up"}).status_code == 404


# -- the runs list, the dashboard, the admin --------------------------------------------------

@pytest.mark.django_db
def test_the_runs_list_filters_by_feedback(alice, user, keys):
    from agentlab.feedback import record

    down, rated, note, none = (make_run(user, input=q) for q in ("q-down", "q-rated", "q-note",
                                                                   "q-none"))
    record.toggle_thumb(down, 2, user, "down")
    record.give_key(rated, 0, user, keys["relevance"], "5")
    record.give_key(rated, 1, user, keys["tone"], "rude")
    record.give_note(note, 0, user, "look at step 3")

    def listed(value: str) -> set[str]:
        page = alice.get("/runs/", {"feedback": value}).content.decode()
        return set(re.findall(r"q-(?:down|rated|note|none)", page))

    assert listed("any") == {"q-down", "q-rated", "q-note"}
    assert listed("down") == {"q-down"}
    assert listed("relevance>=4") == {"q-rated"} and listed("relevance<4") == set()
    assert listed("tone=rude") == {"q-rated"} and listed("tone=kind") == set()
    assert listed("note") == {"q-note"}
    page = alice.get("/runs/", {"feedback": "speed=1"}).content.decode()
    assert "Ignored: Feedback: No feedback key is named “speed”." in page
    assert {"q-down", "q-none"} <= set(re.findall(r"q-\w+", page))  # ignored, not applied
    assert '<option value="tone=rude"></option>' in alice.get("/runs/").content.decode()


@pytest.mark.django_db
def test_the_dashboard_charts_feedback_per_agent_over_time(alice, user):
    from agentlab.feedback import record

    for agent, thumb in (("Alpha", "down"), ("Alpha", "up"), ("Beta", "down")):
        record.toggle_thumb(make_run(user, agent_name=agent, input=agent), 0, user, thumb)
    page = alice.get("/dashboard/", {"period": "7d"}).content.decode()
    assert 'id="chart-feedback"' in page and "3 pieces of feedback given last 7 days" in page
    data = json.loads(re.search(r'id="dashboard-data"[^>]*>(.*?)</script>', page, re.S)[1])
    chart = data["feedback"]
    assert {s["label"]: sum(s["data"]) for s in chart["series"]} == {"Alpha": 2, "Beta": 1}
    assert (sum(chart["up"]), sum(chart["down"])) == (1, 2)
    assert len(chart["labels"]) == 8  # a bar a day, today included
    alpha = next(s for s in chart["series"] if s["label"] == "Alpha")
    assert alpha["link"] == "/runs/?feedback=any&agent=Alpha"
    assert alice.get(alpha["link"]).status_code == 200


@pytest.mark.django_db
def test_the_admin_defines_keys_and_refuses_bad_ones(staff):
    client = Client()
    client.force_login(staff)
    made = client.post("/admin/feedback/feedbackkey/add/", {
        "name": "tone", "kind": "categories", "labels_text": "rude\nneutral\n\nkind\n",
        "description": "How it sounds", "position": "0"})
    assert made.status_code == 302
    assert FeedbackKey.objects.get(name="tone").labels == ["rude", "neutral", "kind"]
    refused = client.post("/admin/feedback/feedbackkey/add/", {
        "name": "relevance", "kind": "numeric", "minimum": "5", "maximum": "1", "position": "0"})
    assert "The maximum must be above the minimum." in refused.content.decode()
    refused = client.post("/admin/feedback/feedbackkey/add/", {
        "name": "thumbs", "kind": "boolean", "position": "0"})
    assert "is built in" in refused.content.decode()


# -- annotations: only on spans that are ours -------------------------------------------------

@pytest.fixture
def collector(settings):
    """A real HTTP server standing in for Phoenix's REST API: records what it is sent."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    got: list[tuple[str, str, dict]] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else {}
            got.append((self.command, self.path, body))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"data": []}')

        do_POST = do_DELETE = _answer

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    settings.AGENTLAB_ANNOTATIONS_URL = f"http://127.0.0.1:{server.server_port}"
    yield got
    server.shutdown()


@pytest.mark.django_db(transaction=True)
def test_annotations_go_for_runs_made_here_and_not_for_imported_ones(collector, user):
    from agentlab.feedback import phoenix, record
    from traces.otel import ids

    mine = make_run(user)
    imported = make_run(user, agent_snapshot={"imported_from": {"source_id": 7}})
    row = record.toggle_thumb(mine, 2, user, "down")
    record.toggle_thumb(imported, 2, user, "down")
    record.toggle_thumb(mine, 2, user, "down")  # taken back
    assert phoenix.flush()
    assert [(method, path.split("?")[0]) for method, path, _ in collector] == [
        ("POST", "/v1/span_annotations"),
        ("DELETE", "/v1/projects/agentlab/span_annotations")]
    sent = collector[0][2]["data"][0]
    assert sent["span_id"] == ids.hex_span(ids.span_id(mine.pk, 2))
    assert (sent["name"], sent["result"]["label"], sent["annotator_kind"]) == (
        "thumbs", "down", "HUMAN")
    assert f"identifier={phoenix.identifier(row)}" in collector[1][1]
