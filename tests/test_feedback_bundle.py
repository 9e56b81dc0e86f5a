"""Feedback in the run bundle: the optional, versioned "feedback" section (docs/BUNDLE.md
"Sections"), exported with the run and restored by its import as a record of its authors."""

from __future__ import annotations

import copy

import pytest
from django.test import Client

from agentlab.feedback import record
from agentlab.feedback.models import Feedback, FeedbackKey
from tests.factories import make_run
from traces.bundle import BundleError, export_bundle, import_bundle
from traces.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def given(user):
    """A run with a thumb on step 2, a relevance on the run, and a note on step 8."""
    run = make_run(user)
    key = FeedbackKey.objects.create(name="relevance", kind="numeric", minimum=1, maximum=5)
    record.toggle_thumb(run, 2, user, "down")
    record.give_key(run, 0, user, key, "4", note="fine")
    record.give_note(run, 8, user, "the answer should cite its source")
    return run


def test_the_bundle_carries_feedback_and_the_import_keeps_its_authors(given, other_user):
    bundle = export_bundle(given)
    assert bundle["version"] == 1  # an optional section leaves the bundle's version alone
    section = bundle["feedback"]
    assert section["version"] == 1
    assert [(i["seq"], i["name"], i["score"], i["label"], i["note"], i["author"])
            for i in section["items"]] == [
        (0, "relevance", 4.0, "", "fine", "alice"), (2, "thumbs", 0.0, "down", "", "alice"),
        (8, "note", None, "", "the answer should cite its source", "alice")]

    copy_of = import_bundle(bundle, user=other_user)
    rows = list(Feedback.objects.filter(run=copy_of).order_by("seq"))
    assert [(r.seq, r.name, r.author, r.author_name, r.imported) for r in rows] == [
        (0, "relevance", None, "alice", True), (2, "thumbs", None, "alice", True),
        (8, "note", None, "alice", True)]
    assert rows[0].key == FeedbackKey.objects.get(name="relevance")
    assert rows[0].created.isoformat() == section["items"][0]["created"]
    client = Client()
    client.force_login(other_user)
    page = client.get(f"/runs/{copy_of.pk}/").content.decode()
    assert "alice (imported)" in page and "the answer should cite its source" in page
    assert "/edit/" not in page  # nobody here wrote it: nobody edits it
    assert client.post(f"/feedback/{rows[0].pk}/edit/", {"value": "1"}).status_code == 404


def test_a_bundle_without_feedback_still_imports(given, other_user):
    older = export_bundle(given)
    del older["feedback"]
    copy_of = import_bundle(older, user=other_user)
    assert copy_of.steps.count() == 8 and not Feedback.objects.filter(run=copy_of).exists()


@pytest.mark.parametrize(("change", "where", "said"), [
    (lambda s: s.update(version=2), "feedback.version", "unknown feedback version 2"),
    (lambda s: s["items"][1].update(seq=99), "feedback.items[1].seq", "nor the seq of a step"),
    (lambda s: s["items"][0].update(note="n" * 4001), "feedback.items[0].note",
     "at most 4,000 are allowed"),
    (lambda s: s["items"][0].update(name="Not A Key"), "feedback.items[0].name", "not a feedback"),
    (lambda s: s["items"][0].update(extra=1), "feedback.items[0]", "unknown field(s): extra"),
    (lambda s: s["items"].append(dict(s["items"][1])), "feedback.items[3]", "twice"),
    (lambda s: s["items"][0].update(created="yesterday"), "feedback.items[0].created",
     "not an ISO 8601"),
])
def test_a_bad_feedback_section_is_refused_naming_the_place_and_nothing_is_kept(
        given, other_user, change, where, said):
    bundle = copy.deepcopy(export_bundle(given))
    change(bundle["feedback"])
    before = Run.objects.count()
    with pytest.raises(BundleError) as refused:
        import_bundle(bundle, user=other_user)
    assert refused.value.where == where and said in refused.value.message
    assert Run.objects.count() == before
