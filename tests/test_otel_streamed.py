"""A big OTLP file streams (traces/otel/streamed.py): OTLP JSON lines, a request a line, read a
line at a time, make the run that the same spans make read whole; a bad line is refused by
its number and leaves nothing behind; the limits refuse before the work that grows with them.
Streaming is forced here (AGENTLAB_IMPORT_STREAM_FROM_BYTES=0) on small real traces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import override_settings

from tests.otel_fixtures import make_plan_run
from traces.models import Run, Step
from traces.otel import json_spans, lines, streamed
from traces.otel.decode import Counter, Limits, OTLPError, request_of, spans_of
from traces.otel.importer import import_file
from traces.otlp import export_otlp

pytestmark = pytest.mark.django_db
CAPTURES = Path(__file__).parent / "otel_captures"
STREAM = override_settings(AGENTLAB_IMPORT_STREAM_FROM_BYTES=0)
SEEN = ("seq", "parent", "kind", "role", "name", "status", "input", "output", "text",
        "tokens_in", "tokens_out", "cost_usd", "duration_ms", "meta")
RUN_SEEN = ("agent_name", "paradigm", "input", "final_answer", "status", "error", "llm_calls",
            "tool_calls", "tokens_in", "tokens_out", "cost_usd", "wall_ms", "step_count",
            "started_at", "finished_at", "agent_snapshot")


def as_lines(doc: dict, per_line: int, by: str = "start") -> str:
    """The document's spans as JSON lines, `per_line` spans a line, latest start first (or
    `by` "end": as exporters send them, a span when it ends): a parent's span comes after its
    children's."""
    spans = [({"resource": rs.get("resource", {})}, ss.get("scope", {}), span)
             for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]]
    if by == "start":
        spans.sort(key=lambda s: -int(s[2]["startTimeUnixNano"]))
    else:
        spans.sort(key=lambda s: int(s[2]["endTimeUnixNano"]))
    lines = []
    for start in range(0, len(spans), per_line):
        lines.append(json.dumps({"resourceSpans": [
            {**resource, "scopeSpans": [{"scope": scope, "spans": [span]}]}
            for resource, scope, span in spans[start:start + per_line]]}))
    return "\n".join(lines) + "\n"


def seen(run: Run) -> tuple[dict, list[tuple]]:
    """What a user sees of a run: its fields and its steps as the run page reads them."""
    run.refresh_from_db()
    return ({name: getattr(run, name) for name in RUN_SEEN},
            list(run.steps.order_by("seq").values_list(*SEEN)))


@pytest.mark.parametrize("capture", sorted(p.stem for p in CAPTURES.glob("*.json")))
def test_json_lines_stream_into_the_run_the_whole_document_makes(capture, user, tmp_path):
    doc = json.loads((CAPTURES / f"{capture}.json").read_text())
    (whole,) = import_file(json.dumps(doc).encode(), user=user)
    path = tmp_path / "trace.jsonl"
    path.write_text(as_lines(doc, per_line=2))
    assert path.read_text().count("\n") > 1  # several requests
    with STREAM:
        (run,) = streamed.import_path(path, user=user)
    assert seen(run) == seen(whole)
    assert run.user == user and run.step_count > 2


@pytest.mark.parametrize("capture", ["langgraph", "langgraph-b", "llamaindex", "smolagents"])
def test_steps_written_a_span_at_a_time_are_the_same(capture, user, tmp_path, monkeypatch):
    """Each step written as its line is read (LangGraph's one-argument tool gets its
    arguments from the model's call in an earlier write; LlamaIndex's wrappers and
    preparations are thoughts, worked out before anything was written)."""
    monkeypatch.setattr(streamed, "FLUSH", 1)
    doc = json.loads((CAPTURES / f"{capture}.json").read_text())
    (whole,) = import_file(json.dumps(doc).encode(), user=user)
    path = tmp_path / "trace.jsonl"
    path.write_text(as_lines(doc, per_line=1, by="end"))
    with STREAM:
        (run,) = streamed.import_path(path, user=user)
    assert seen(run) == seen(whole)


def test_each_trace_of_a_file_is_a_run_of_its_own(user, tmp_path):
    docs = [json.loads((CAPTURES / f"{name}.json").read_text()) for name in ("openai",
                                                                             "smolagents")]
    wholes = [import_file(json.dumps(doc).encode(), user=user)[0] for doc in docs]
    a, b = (as_lines(doc, 1).splitlines() for doc in docs)
    path = tmp_path / "two.jsonl"
    path.write_text("\n".join(x for pair in zip(a, b, strict=False) for x in pair)
                    + "\n" + "\n".join(b[len(a):]) + "\n")  # the traces' lines interleaved
    with STREAM:
        runs = streamed.import_path(path, user=user)
    assert [seen(run) for run in runs] == [seen(whole) for whole in wholes]


def test_an_agentlab_export_streams_back_as_its_steps_question_and_answer(user, tmp_path):
    original = make_plan_run(user)
    path = tmp_path / "run.jsonl"
    path.write_text(as_lines(export_otlp(original, list(original.steps.order_by("seq"))), 1))
    with STREAM:
        (run,) = streamed.import_path(path, user=user)
    assert (run.input, run.final_answer, run.agent_name) == ("Weather in Paris?", "sunny?",
                                                             "Weather")
    assert list(run.steps.order_by("seq").values_list("seq", "parent", "kind", "name")) == list(
        original.steps.order_by("seq").values_list("seq", "parent", "kind", "name"))


def test_import_run_streams_a_big_json_lines_file(user, tmp_path, capsys):
    path = tmp_path / "trace.jsonl"
    path.write_text(as_lines(json.loads((CAPTURES / "openai.json").read_text()), 1))
    with override_settings(AGENTLAB_IMPORT_STREAM_FROM_BYTES=path.stat().st_size):
        call_command("import_run", str(path), "--user", user.username)
    (run,) = Run.objects.filter(user=user)
    assert f"Imported run {run.pk} ({run.step_count} steps)" in capsys.readouterr().out
    assert run.input == "What is the weather in Paris?"


def bad_file(tmp_path: Path, bad: str) -> Path:
    good = as_lines(json.loads((CAPTURES / "langgraph.json").read_text()), 1).splitlines()
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join([*good[:3], bad, *good[3:]]) + "\n")
    return path


def nothing_left(before: tuple[int, int]) -> bool:
    return (Run.objects.count(), Step.objects.count()) == before


@pytest.mark.parametrize("bad, said", [
    ('{"resourceSpans": [', "line 4 is not JSON: Expecting value (column 20)"),
    ('{"spans": []}', "line 4: a JSON document without resourceSpans is not an OTLP trace"),
    ('{"resourceSpans": [{"scopeSpans": [{"spans": [{"startTimeUnixNano": "soon"}]}]}]}',
     "line 4: not OTLP/JSON: "),
])
def test_a_malformed_line_is_refused_by_its_number(bad, said, user, tmp_path):
    before = (Run.objects.count(), Step.objects.count())
    with STREAM, pytest.raises(OTLPError) as refused:
        streamed.import_path(bad_file(tmp_path, bad), user=user)
    assert str(refused.value).startswith(said), refused.value
    assert nothing_left(before)


def test_a_span_that_cannot_be_stored_removes_what_was_written(user, tmp_path, monkeypatch):
    monkeypatch.setattr(streamed, "FLUSH", 1)  # each step written as it comes
    infinite = {"key": "x", "value": {"doubleValue": "Infinity"}}
    doc = json.loads((CAPTURES / "langgraph.json").read_text())
    first = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    last = max(first, key=lambda s: int(s["startTimeUnixNano"]))  # the first line's span
    earliest = min(first, key=lambda s: int(s["startTimeUnixNano"]))  # the last line's
    earliest["attributes"].append(infinite)
    path = tmp_path / "trace.jsonl"
    path.write_text(as_lines(doc, 1))
    before = (Run.objects.count(), Step.objects.count())
    with STREAM, pytest.raises(OTLPError, match=f"span {earliest['spanId']}: .*inf is not a "
                                                "finite number"):
        streamed.import_path(path, user=user)
    assert nothing_left(before) and last is not earliest


def test_the_limits_refuse_before_the_work_that_grows_with_them(user, tmp_path):
    before = (Run.objects.count(), Step.objects.count())
    path = bad_file(tmp_path, "not JSON at all")  # the 4th line would be refused if read
    size = path.stat().st_size
    with STREAM, override_settings(AGENTLAB_IMPORT_MAX_FILE_BYTES=size - 1), \
            pytest.raises(OTLPError, match=f"the file is {size:,} bytes, over the {size - 1:,} "
                                           r"an import may read \(AGENTLAB_IMPORT_MAX_FILE_BYTES"):
        streamed.import_path(path, user=user)
    with STREAM, override_settings(AGENTLAB_IMPORT_MAX_SPANS=2), pytest.raises(
            OTLPError, match=r"^line 3: the file holds more than 2 spans, the most one import "
                             r"may hold \(AGENTLAB_IMPORT_MAX_SPANS\); nothing was imported"):
        streamed.import_path(path, user=user)
    with STREAM, override_settings(AGENTLAB_OTLP_MAX_ATTRIBUTES=3), pytest.raises(
            OTLPError, match=r"^line 1: a (span|resource) holds more than 3 attributes"):
        streamed.import_path(path, user=user)
    assert nothing_left(before)


def test_small_files_and_one_document_are_read_whole(user, tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("streamed")

    monkeypatch.setattr(streamed, "import_lines", refuse)
    doc = json.loads((CAPTURES / "openai.json").read_text())
    path = tmp_path / "trace.jsonl"
    path.write_text(as_lines(doc, 1))  # under AGENTLAB_IMPORT_STREAM_FROM_BYTES
    (small,) = streamed.import_path(path, user=user)
    path.write_text(json.dumps(doc, indent=1))  # one document over many lines
    with STREAM:
        (whole,) = streamed.import_path(path, user=user)
    assert seen(small)[1] == seen(whole)[1]


@pytest.mark.parametrize("capture", sorted(p.stem for p in CAPTURES.glob("*.json")))
def test_the_direct_reader_reads_the_spans_protobufs_parser_reads(capture):
    doc = json.loads((CAPTURES / f"{capture}.json").read_text())
    assert json_spans.spans(doc) == list(spans_of(request_of(doc, Counter(Limits()))))


def test_what_the_direct_reader_does_not_read_goes_to_protobufs_parser(tmp_path):
    span = {"traceId": "AAECAwQFBgcICQoLDA0ODw==", "spanId": "AAECAwQFBgc=", "name": "s",
            "startTimeUnixNano": 5, "endTimeUnixNano": "6", "status": {"code": "STATUS_CODE_ERROR"},
            "attributes": [{"key": "b", "value": {"bytesValue": "AAE="}},
                           {"key": "d", "value": {"doubleValue": "NaN"}},
                           {"key": "i", "value": {"intValue": "-3"}}]}
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}
    assert json_spans.spans(doc) is None  # base64 ids and bytes: protobuf's parser reads them
    path = tmp_path / "odd.jsonl"
    path.write_text(json.dumps(doc) + "\n")
    ((number, (read,)),) = list(lines.requests(path, Limits()))
    assert (number, read.trace_id, read.span_id, read.error) == (
        1, "000102030405060708090a0b0c0d0e0f", "0001020304050607", True)
    assert read.attributes["b"] == "AAE=" and read.attributes["i"] == -3
    span["traceId"], span["spanId"] = "000102030405060708090A0B0C0D0E0F", "0001020304050607"
    span["attributes"].pop(0)
    (direct,) = json_spans.spans(doc)  # hex ids, no bytes: read directly, the same
    assert (direct.trace_id, direct.attributes["i"], direct.end_ns) == (read.trace_id, -3, 6)
