"""traces.bundle and the export_run / import_run commands: round-trip, refusals, atomicity."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from traces import upsert
from traces.bundle import (
    BUNDLE_FORMAT,
    BUNDLE_VERSION,
    BundleError,
    export_bundle,
    import_bundle,
    load_bundle,
)
from traces.models import Run, Step
from traces.schema import Step as StepRecord

pytestmark = pytest.mark.django_db

SNAPSHOT = {"name": "Calc agent", "paradigm": "react", "system_prompt": "",
            "profiles": {"default": {"name": "p", "model": "m", "api_key_env": "OPENAI_API_KEY",
                                     "api_key": "sk-leaked"}},
            "tools": {"calculator": {"enabled": True}}, "limits": {"max_steps": 40}}


@pytest.fixture
def run(user):
    run = Run.objects.create(
        user=user, agent_name="Calc agent", paradigm="react", agent_snapshot=SNAPSHOT,
        input="What is 6*7?", history=[{"role": "user", "content": "hi"}], status="succeeded",
        final_answer="42", llm_calls=2, tool_calls=1, tokens_in=130, tokens_out=18,
        cost_usd=0.0002, wall_ms=1234.5, step_count=4,
        started_at=datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC),
        finished_at=datetime(2025, 1, 2, 3, 4, 7, tzinfo=UTC))
    records = [
        StepRecord(seq=1, kind="llm", name="m", input={"messages": [{"role": "user",
                                                                     "content": "What is 6*7?"}]},
                   output={"text": "", "tool_calls": [{"name": "calculator"}]}, tokens_in=50,
                   tokens_out=10, started_at=1735787045.25, duration_ms=800.0,
                   meta={"profile": "p"}),
        StepRecord(seq=2, kind="tool", name="calculator", parent=1, input={"expression": "6*7"},
                   output={"ok": True, "output": "42"}, text="42", started_at=1735787046.0),
        StepRecord(seq=3, kind="llm", name="m", text="It is 42.", started_at=1735787046.5),
        StepRecord(seq=4, kind="final", text="42", output="42", started_at=1735787047.0),
    ]
    Step.objects.bulk_create(Step.from_record(run.pk, s) for s in records)
    return run


def bundle_text(run) -> str:
    return json.dumps(export_bundle(run))


def refusal(data) -> BundleError:
    with pytest.raises(BundleError) as info:
        import_bundle(data, user=Run.objects.first().user)
    assert Run.objects.count() == 1  # only the fixture's run: nothing was imported
    return info.value


def test_export_then_import_gives_the_same_run_and_steps(run, other_user):
    exported = export_bundle(run)
    assert (exported["format"], exported["version"]) == (BUNDLE_FORMAT, BUNDLE_VERSION)
    assert (exported["run"]["started_at"], exported["run"]["finished_at"]) == (
        "2025-01-02T03:04:05+00:00", "2025-01-02T03:04:07+00:00")
    copy_ = import_bundle(json.dumps(exported), user=other_user)
    assert copy_.pk != run.pk and copy_.user == other_user and copy_.agent is None
    again = export_bundle(copy_)
    assert again["steps"] == exported["steps"]
    assert again["run"]["agent_snapshot"].pop("imported_from") == {
        "source_id": run.pk, "parent_source_id": None, "fork_seq": None,
        "exported_at": exported["exported_at"]}
    for key in ("source_id", "created"):
        again["run"].pop(key), exported["run"].pop(key)
    assert again["run"] == exported["run"]
    assert copy_.step_count == 4 and copy_.tokens_in == 130 and copy_.final_answer == "42"


def test_export_never_carries_a_key_only_its_variable_name(run):
    text = bundle_text(run)
    assert "sk-leaked" not in text and "OPENAI_API_KEY" in text


def test_an_imported_bundle_loses_its_secrets_however_it_was_made(run, user):
    """A bundle written elsewhere (by hand, or by an older exporter) may carry keys: the import
    strips every key named like a secret, at any depth, and keeps the variable names."""
    data = export_bundle(run)
    snap = data["run"]["agent_snapshot"]
    snap["profiles"]["default"].update(api_key="sk-one", apiKey="sk-two", Password="pw-3",
                                       client_secret="cs-4")
    snap["agents"] = {"helper": {"profiles": {"default": {"API_KEY": "sk-five",
                                                          "api_key_env": "HELPER_KEY"}}}}
    snap["headers"] = [{"Authorization": "Bearer tok-6", "access_token": "tok-7",
                        "region": "eu"}]
    copy_ = import_bundle(data, user=user)
    stored = json.dumps(Run.objects.get(pk=copy_.pk).agent_snapshot)
    for secret in ("sk-one", "sk-two", "pw-3", "cs-4", "sk-five", "tok-6", "tok-7"):
        assert secret not in stored, secret
    kept = Run.objects.get(pk=copy_.pk).agent_snapshot
    assert kept["profiles"]["default"]["api_key_env"] == "OPENAI_API_KEY"
    assert kept["agents"]["helper"]["profiles"]["default"] == {"api_key_env": "HELPER_KEY"}
    assert kept["headers"] == [{"region": "eu"}]


def test_an_imported_running_run_becomes_interrupted(run, user):
    data = export_bundle(run)
    data["run"]["status"] = "running"
    copy_ = import_bundle(data, user=user)
    assert copy_.status == "interrupted"
    assert copy_.error == "Imported while it was still running; resume it as a fork."


def test_broken_json_is_refused_with_line_and_column(run):
    text = bundle_text(run)
    error = refusal(text.replace('"version": 1,', '"version": 1,\n\n  }', 1))
    assert error.where == "line 3, column 3"
    assert "not valid JSON" in str(error)


def test_not_an_object_and_wrong_format_are_refused(run):
    assert str(refusal("[1, 2]")) == "a bundle must be a JSON object, got array"
    data = export_bundle(run) | {"format": "langfuse"}
    assert str(refusal(data)) == f"format: expected {BUNDLE_FORMAT!r}, got 'langfuse'"


def test_an_unknown_version_is_refused(run):
    error = refusal(export_bundle(run) | {"version": 2})
    assert str(error) == ("version: unknown bundle version 2 (this installation reads "
                          f"version {BUNDLE_VERSION})")


def test_a_value_json_cannot_keep_is_refused_where_it_is(run):
    data = export_bundle(run)
    data["steps"][1]["output"] = {"big": 2**70}
    assert str(refusal(data)) == ("steps[1].output.big: an integer beyond 64 bits is not kept "
                                  "faithfully")


def test_a_bundle_without_its_optional_parts_imports_with_their_defaults(run, user):
    data = export_bundle(run)
    for key in ("history", "totals", "final_answer", "error", "started_at", "finished_at"):
        del data["run"][key]
    imported = import_bundle(data, user=user)
    assert (imported.history, imported.final_answer, imported.error) == ([], "", "")
    assert (imported.llm_calls, imported.tokens_in, imported.cost_usd) == (0, 0, 0)
    assert imported.started_at is None and imported.finished_at is None


def test_a_run_that_never_started_exports_its_missing_times_as_null(run):
    Run.objects.filter(pk=run.pk).update(started_at=None, finished_at=None, status="queued")
    run.refresh_from_db()
    exported = export_bundle(run)["run"]
    assert (exported["started_at"], exported["finished_at"]) == (None, None)
    assert exported["created"] == run.created.isoformat()


def test_a_missing_field_is_named(run):
    data = export_bundle(run)
    del data["steps"][2]["kind"]
    assert str(refusal(data)) == "steps[2].kind: missing"
    data = export_bundle(run)
    del data["run"]["input"]
    assert str(refusal(data)) == "run.input: missing"


def test_a_mistyped_field_is_named(run):
    data = export_bundle(run)
    data["steps"][3]["seq"] = "four"
    assert str(refusal(data)) == "steps[3].seq: expected integer, got string"
    data = export_bundle(run)
    data["run"]["totals"]["tokens_in"] = -1
    assert refusal(data).where == "run.totals.tokens_in"


def test_bad_kinds_statuses_and_unknown_fields_are_named(run):
    data = export_bundle(run)
    data["steps"][1]["kind"] = "dance"
    error = refusal(data)
    assert error.where == "steps[1].kind" and "'dance' is not one of llm" in error.message
    data = export_bundle(run)
    data["run"]["status"] = "done"
    assert refusal(data).where == "run.status"
    data = export_bundle(run)
    data["steps"][0]["colour"] = "red"
    assert str(refusal(data)) == "steps[0]: unknown field(s): colour"


def test_duplicate_seqs_and_dangling_parents_are_refused(run):
    data = export_bundle(run)
    data["steps"][3]["seq"] = 2
    assert str(refusal(data)) == "steps[3].seq: seq 2 appears twice (first at steps[1])"
    data = export_bundle(run)
    data["steps"][1]["parent"] = 99
    assert str(refusal(data)) == "steps[1].parent: no step has seq 99"


def test_nothing_is_half_imported_when_the_database_refuses(run, monkeypatch):
    # Validation passed; a failure while inserting steps must remove the new Run too.
    def fail(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(upsert, "execute", fail)
    with pytest.raises(RuntimeError):
        import_bundle(export_bundle(run), user=run.user)
    assert Run.objects.count() == 1 and Step.objects.count() == 4


def test_load_bundle_returns_schema_steps(run):
    loaded = load_bundle(copy.deepcopy(export_bundle(run)))
    assert loaded.version == BUNDLE_VERSION
    assert [s.seq for s in loaded.steps] == [1, 2, 3, 4]
    assert loaded.steps[1].parent == 1 and loaded.run["input"] == "What is 6*7?"


def test_the_commands_export_and_import(run, user, tmp_path, capsys):
    path = tmp_path / "run.json"
    call_command("export_run", str(run.pk), "-o", str(path))
    call_command("import_run", str(path), "--user", "alice")
    out = capsys.readouterr().out
    new = Run.objects.exclude(pk=run.pk).get()
    assert f"Imported run {new.pk} (4 steps): /runs/{new.pk}/" in out
    call_command("export_run", str(run.pk))
    assert json.loads(capsys.readouterr().out)["run"]["input"] == "What is 6*7?"


def test_import_run_refuses_a_bad_file_with_the_reason(run, user, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(export_bundle(run) | {"version": 7}))
    with pytest.raises(CommandError, match=r"not a valid run bundle: version: unknown bundle "
                                           r"version 7") as info:
        call_command("import_run", str(path), "--user", "alice")
    assert info.value.returncode == 1
    assert Run.objects.count() == 1
    with pytest.raises(CommandError, match="there is no run 999"):
        call_command("export_run", "999")


def test_each_refusal_says_what_was_expected_and_what_came(run):
    """The wording a person fixing a bundle by hand reads (found by mutation testing)."""
    for value, name in [([], "array"), (1.5, "number"), (None, "null"), (True, "boolean"),
                        ("x", "string"), (3, "integer"), ({}, "object")]:
        data = export_bundle(run)
        data["run"]["input"] = value
        if name != "string":
            assert str(refusal(data)) == f"run.input: expected string, got {name}"
    data = export_bundle(run)
    data["steps"][0]["duration_ms"] = "slow"
    assert str(refusal(data)) == "steps[0].duration_ms: expected number or null, got string"
    data = export_bundle(run)
    data["steps"][0]["seq"] = 0
    assert str(refusal(data)) == "steps[0].seq: 0 is less than 1"
    data["steps"][0]["seq"] = -2
    assert str(refusal(data)) == "steps[0].seq: -2 is negative; it must be at least 1"
    data = export_bundle(run)
    data["steps"][1]["kind"] = "dance"
    assert refusal(data).message.startswith("'dance' is not one of llm, thought, tool, ")
    data = export_bundle(run)
    data["steps"][0] |= {"colour": "red", "aroma": "mint"}
    assert str(refusal(data)) == "steps[0]: unknown field(s): aroma, colour"
    data = export_bundle(run)
    del data["run"]
    assert str(refusal(data)) == "run: missing"


def test_the_earliest_bad_place_is_reported_counting_indexes_as_numbers(run):
    data = export_bundle(run)
    data["steps"] = [dict(data["steps"][3], seq=n + 1) for n in range(12)]
    for i in (2, 10):
        data["steps"][i]["kind"] = "dance"
    data["steps"][10]["seq"] = "x"  # at the same depth, steps[2] comes first, not "10"
    assert refusal(data).where == "steps[2].kind"


@pytest.mark.parametrize("key", ["created", "started_at", "finished_at"])
def test_a_run_time_that_is_not_a_date_is_refused_by_name(run, key):
    data = export_bundle(run)
    data["run"][key] = "yesterday"
    with pytest.raises(BundleError) as info:
        load_bundle(data)  # the check itself, before anything is imported
    assert info.value.where == f"run.{key}"


def test_several_problems_in_one_place_report_the_earliest(run):
    data = export_bundle(run)
    data["run"]["status"], data["run"]["input"] = "done", 7  # two in the envelope
    assert refusal(data).where == "run.input"
    data = export_bundle(run)
    data["steps"][0] |= {"seq": "x", "kind": "dance"}  # two in one step
    assert refusal(data).where == "steps[0].kind"


def test_a_valid_step_the_fast_check_leaves_to_the_schema_imports(run, user):
    data = export_bundle(run)
    data["steps"][0]["tokens_in"] = 50.0  # an integer to JSON Schema, not to the fast check
    assert import_bundle(data, user=user).steps.get(seq=1).tokens_in == 50


def test_an_imported_fork_says_where_it_came_from_and_keeps_its_error(run, user):
    source = Run.objects.create(user=user, agent_name="Calc agent", paradigm="react",
                                agent_snapshot=SNAPSHOT, input="q", status="succeeded")
    Run.objects.filter(pk=run.pk).update(parent_run=source, fork_seq=2, status="failed",
                                         error="the model is down")
    run.refresh_from_db()
    data = export_bundle(run)
    copy_ = import_bundle(data, user=user)
    assert copy_.agent_snapshot["imported_from"] == {
        "source_id": run.pk, "parent_source_id": source.pk, "fork_seq": 2,
        "exported_at": data["exported_at"]}
    assert (copy_.status, copy_.error) == ("failed", "the model is down")
