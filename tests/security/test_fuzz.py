"""Fuzzing what parses input from outside: the run bundle's reader, the OTLP reader (protobuf,
JSON, JSON lines), the upload's dispatch between them, and the socket frame parser (every
frame a browser sends, and the controls a frame carries to a run).

Hypothesis makes the inputs: random bytes and text, random JSON, valid documents mutated at
random places, and known bombs (deep nesting, huge numbers, non-finite numbers, lone
surrogates). The only outcome allowed besides success is the parser's documented error
(BundleError, OTLPError, an `error` frame, ControlError): anything else is a crash. Each example
has a deadline (a hang fails it) and the module's peak memory is bounded.

Bounded in time for CI: the "fuzz" profile's max_examples per test (the whole module takes
well under a minute on two cores); AGENTLAB_FUZZ_SCALE=10 tries ten times as many by hand.
How many inputs were tried is printed at the end and checked (`test_enough_inputs_were_tried`).
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import os
import resource
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from google.protobuf import json_format
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from agentlab.live.frames import LiveConsumer
from agentlab.runs.control import ControlError, RunControl
from traces.bundle import BundleError, load_bundle, parse_json
from traces.otel.decode import OTLPError
from traces.otel.importer import import_file, read_otlp

SCALE = max(1, int(os.environ.get("AGENTLAB_FUZZ_SCALE", "1") or 1))
settings.register_profile(
    "fuzz", max_examples=150 * SCALE, deadline=timedelta(seconds=3), database=None,
    print_blob=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                            HealthCheck.function_scoped_fixture])
FUZZ = settings.get_profile("fuzz")
TRIED: Counter[str] = Counter()  # target -> inputs tried
MIN_TRIED = 1_500  # all targets together, per run of the whole module
# How much the process's peak memory may grow from the first input tried to the end (Hypothesis
# itself takes 30 to 250 MB of it, shrinking a failure more): bounded, not precise.
MAX_GROWTH_MB = 500
_RSS_AT_START: list[int] = []


def _peak_mb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def fuzz(examples: int | None = None) -> settings:
    return settings(FUZZ, max_examples=(examples or FUZZ.max_examples // SCALE) * SCALE)


# ------------------------------------------------------------------------------- inputs

SCALAR = (st.none() | st.booleans() | st.integers() | st.integers(-2**70, 2**70)
          | st.floats() | st.text(max_size=40))
JSON = st.recursive(SCALAR, lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=12), inner, max_size=4), max_leaves=25)
FINITE_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=12), inner, max_size=4), max_leaves=25)


@st.composite
def bombs(draw: st.DrawFn) -> str:
    """Text built to hurt a parser: deep nesting, long numbers, odd constants and escapes."""
    n = draw(st.integers(1, 5_000))
    return draw(st.sampled_from([
        "[" * n + "]" * n, "[" * n, '{"a":' * n + "1" + "}" * n, "1" * n, "-" + "9" * n,
        "1e" + "9" * min(n, 400), "0." + "0" * n + "1", '"\\ud800"', '"\\udfff\\ud800"',
        "NaN", "-Infinity", '{"a": 1, "a": 2}', '"' + "\\u0000" * min(n, 1000) + '"',
        "\ufeff{}", "{" * n, '{"action": ' + "[" * n + "]" * n + "}",
    ]))


@st.composite
def mutated(draw: st.DrawFn, seed: Any, values: st.SearchStrategy[Any] = JSON) -> Any:
    """`seed` with one to four places changed: a value replaced, a key removed or added."""
    doc = copy.deepcopy(seed)
    for _ in range(draw(st.integers(1, 4))):
        doc = _mutate(draw, doc, values)
    return doc


def _mutate(draw: st.DrawFn, node: Any, values: st.SearchStrategy[Any]) -> Any:
    if isinstance(node, dict) and node and draw(st.integers(0, 3)):
        key = draw(st.sampled_from(sorted(node)))
        what = draw(st.sampled_from(["deeper", "deeper", "drop", "add"]))
        if what == "drop":
            del node[key]
        elif what == "add":
            node[draw(st.text(max_size=12))] = draw(values)
        else:
            node[key] = _mutate(draw, node[key], values)
        return node
    if isinstance(node, list) and node and draw(st.integers(0, 3)):
        i = draw(st.integers(0, len(node) - 1))
        what = draw(st.sampled_from(["deeper", "deeper", "drop", "repeat"]))
        if what == "drop":
            del node[i]
        elif what == "repeat":
            node.extend(copy.deepcopy(node[i]) for _ in range(draw(st.integers(1, 3))))
        else:
            node[i] = _mutate(draw, node[i], values)
        return node
    return draw(values)


@st.composite
def mutated_bytes(draw: st.DrawFn, seed: bytes) -> bytes:
    """`seed` with bytes flipped, inserted or cut."""
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 6))):
        what = draw(st.sampled_from(["flip", "insert", "cut", "truncate"]))
        i = draw(st.integers(0, max(len(data) - 1, 0)))
        if what == "flip" and data:
            data[i] = draw(st.integers(0, 255))
        elif what == "insert":
            data[i:i] = draw(st.binary(max_size=12))
        elif what == "cut":
            del data[i:i + draw(st.integers(1, 16))]
        else:
            del data[i:]
    return bytes(data)


# A valid bundle (docs/BUNDLE.md) and a valid OTLP trace: the seeds the mutations start from.
BUNDLE = {
    "format": "agentlab.run-bundle", "version": 1, "exported_at": "2026-01-02T03:04:05+00:00",
    "run": {"source_id": 7, "parent_source_id": None, "fork_seq": None, "agent_name": "a",
            "paradigm": "react", "input": "q", "history": [{"role": "user", "content": "hi"}],
            "status": "succeeded", "final_answer": "4", "error": "",
            "agent_snapshot": {"paradigm": "react", "profiles": {"default": {"name": "p"}}},
            "totals": {"llm_calls": 1, "tool_calls": 1, "cost_usd": 0.5, "wall_ms": 12.5},
            "created": "2026-01-02T03:04:00+00:00", "started_at": "2026-01-02T03:04:01+00:00",
            "finished_at": "2026-01-02T03:04:05+00:00"},
    "steps": [
        {"seq": 1, "kind": "llm", "role": "agent", "name": "m", "parent": None,
         "input": {"messages": [{"role": "user", "content": "q"}]}, "output": {"text": "x"},
         "text": "thinking", "status": "ok", "started_at": 1767323041.0, "duration_ms": 5.0,
         "tokens_in": 10, "tokens_out": 3, "cost_usd": 0.25, "meta": {"model": "m"}},
        {"seq": 2, "kind": "tool", "name": "calculator", "parent": 1, "input": {"expr": "2+2"},
         "output": 4, "text": "4", "status": "ok", "started_at": 1767323042.0},
        {"seq": 3, "kind": "final", "text": "4", "started_at": 1767323043.0},
    ],
}


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    return {"key": key, "value": {"stringValue": value}}


def _span(span_id: str, parent: str, name: str, start: int, **attributes: Any) -> dict[str, Any]:
    return {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": span_id,
            "parentSpanId": parent, "name": name, "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(start + 5_000_000), "status": {"code": 1},
            "attributes": [_attr(k.replace("__", "."), v) for k, v in attributes.items()],
            "events": [{"name": "exception", "timeUnixNano": str(start),
                        "attributes": [_attr("exception.message", "boom")]}]}


T0 = 1_767_323_041_000_000_000
OTLP = {"resourceSpans": [{
    "resource": {"attributes": [_attr("service.name", "agent"),
                                {"key": "tags", "value": {"arrayValue": {"values": [
                                    {"stringValue": "a"}, {"intValue": "2"}]}}}]},
    "scopeSpans": [{"scope": {"name": "openinference"}, "spans": [
        _span("eee19b7ec3c1b174", "", "agent run", T0, openinference__span__kind="AGENT",
              input__value="q", output__value="4"),
        _span("eee19b7ec3c1b175", "eee19b7ec3c1b174", "ChatCompletion", T0 + 1,
              openinference__span__kind="LLM", llm__model_name="m",
              llm__token_count__prompt=10, llm__token_count__completion=3,
              llm__cost__total=0.25, llm__input_messages__0__message__role="user",
              llm__input_messages__0__message__content="q",
              llm__output_messages__0__message__content="x",
              llm__invocation_parameters='{"temperature": 0}', input__mime_type="text/plain"),
        _span("eee19b7ec3c1b176", "eee19b7ec3c1b175", "calculator", T0 + 2,
              openinference__span__kind="TOOL", tool__name="calculator",
              input__value='{"expr": "2+2"}', input__mime_type="application/json",
              output__value="4"),
    ]}]}]}
OTLP_PROTOBUF = json_format.ParseDict(
    json.loads(json.dumps(OTLP).replace("5b8efff798038103d269b633813fc60c",
                                        base64.b64encode(bytes.fromhex(
                                            "5b8efff798038103d269b633813fc60c")).decode())),
    ExportTraceServiceRequest(), ignore_unknown_fields=True).SerializeToString()
# What an attribute's value may be in OTLP/JSON, valid or not (non-finite doubles included).
ANY_VALUE = st.one_of(
    st.builds(lambda v: {"stringValue": v}, st.text(max_size=30) | bombs()),
    st.builds(lambda v: {"intValue": v}, st.integers(-2**64, 2**64).map(str) | st.integers()),
    st.builds(lambda v: {"doubleValue": v},
              st.floats() | st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999"])),
    st.builds(lambda v: {"boolValue": v}, st.booleans()),
    st.builds(lambda v: {"bytesValue": v}, st.binary(max_size=20).map(
        lambda b: base64.b64encode(b).decode()) | st.text(max_size=10)),
    st.builds(lambda v: {"arrayValue": {"values": v}},
              st.lists(st.builds(lambda s: {"stringValue": s}, st.text(max_size=5)),
                       max_size=3)),
    FINITE_JSON,
)
SPAN_KEYS = st.sampled_from([
    "openinference.span.kind", "input.value", "output.value", "input.mime_type",
    "output.mime_type", "llm.token_count.prompt", "llm.token_count.completion",
    "llm.cost.total", "llm.invocation_parameters", "llm.input_messages.0.message.content",
    "llm.input_messages.0.message.tool_calls.0.tool_call.function.arguments",
    "llm.output_messages.0.message.role", "agentlab.step.kind", "agentlab.step.seq",
    "agentlab.step.output", "agentlab.run.status", "agentlab.run.id", "tool.name", "metadata",
    "x"])


@st.composite
def otlp_with_attributes(draw: st.DrawFn) -> dict[str, Any]:
    """The valid trace with some spans' attributes set to odd typed values."""
    doc = copy.deepcopy(OTLP)
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    for _ in range(draw(st.integers(1, 5))):
        span = spans[draw(st.integers(0, len(spans) - 1))]
        span["attributes"].append({"key": draw(SPAN_KEYS), "value": draw(ANY_VALUE)})
    if draw(st.booleans()):
        span = spans[draw(st.integers(0, len(spans) - 1))]
        field = draw(st.sampled_from(["startTimeUnixNano", "endTimeUnixNano", "parentSpanId",
                                      "spanId", "status"]))
        span[field] = draw(st.sampled_from([
            "0", "-1", str(2**64 - 1), str(2**63), "eee19b7ec3c1b174", "", {"code": 2},
            {"code": 2, "message": "x" * 100}, None, 1.5]))
    return doc


def _tried(what: str) -> None:
    if not _RSS_AT_START:
        _RSS_AT_START.append(_peak_mb())
    TRIED[what] += 1


def _read(what: str, reader: Any, data: Any,
          allowed: type[Exception] | tuple[type[Exception], ...]) -> None:
    _tried(what)
    try:
        reader(data)
    except allowed as exc:
        assert str(exc), f"{type(exc).__name__} without a message"


# ------------------------------------------------------------------------------- bundles


def _bundle(data: str | bytes) -> None:
    load_bundle(parse_json(data))


@fuzz(300)
@given(st.binary(max_size=400) | st.text(max_size=400).map(str.encode) | bombs())
def test_bundle_reader_on_any_bytes(data):
    _read("bundle: bytes and bombs", _bundle, data, BundleError)


@fuzz(300)
@given(mutated(BUNDLE))
def test_bundle_reader_on_mutated_bundles(doc):
    _read("bundle: mutated documents", load_bundle, doc, BundleError)
    try:  # the same document as text: NaN and Infinity are refused as JSON there
        text = json.dumps(doc)
    except (ValueError, TypeError):  # a key JSON cannot hold
        return
    _read("bundle: mutated documents", _bundle, text, BundleError)


# ------------------------------------------------------------------------------- OTLP


@fuzz(250)
@given(st.binary(max_size=400) | mutated_bytes(OTLP_PROTOBUF))
def test_otlp_reader_on_protobuf(data):
    _read("otlp: protobuf", read_otlp, data, OTLPError)


@fuzz(250)
@given(mutated(OTLP))
def test_otlp_reader_on_mutated_json(doc):
    try:
        text = json.dumps(doc)
    except (ValueError, TypeError):
        return
    _read("otlp: JSON", read_otlp, text, OTLPError)
    lines = "\n".join([text, json.dumps(OTLP)])  # the collector's file exporter
    _read("otlp: JSON", read_otlp, lines.encode(), OTLPError)


def _with(span: int, key: str, value: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(OTLP)
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"][span]["attributes"].append(
        {"key": key, "value": value})
    return doc


@fuzz(400)
@given(otlp_with_attributes())
# Found by this test: an infinite token count (OverflowError), JSON nested too deep in a
# JSON-typed attribute (RecursionError).
@example(_with(1, "llm.token_count.prompt", {"doubleValue": "Infinity"}))
@example(_with(2, "input.value", {"stringValue": "[" * 5_000}))
def test_otlp_reader_on_odd_attribute_values(doc):
    _read("otlp: attribute values", read_otlp, json.dumps(doc), OTLPError)


@pytest.mark.django_db
@fuzz(120)
@given(st.one_of(
    st.binary(max_size=200), bombs().map(str.encode),
    mutated(BUNDLE).map(lambda d: json.dumps(d, default=str).encode()),
    mutated(OTLP).map(lambda d: json.dumps(d, default=str).encode()),
    mutated_bytes(OTLP_PROTOBUF)))
def test_an_upload_is_a_run_or_a_sentence(data):
    from django.contrib.auth import get_user_model

    user, _ = get_user_model().objects.get_or_create(username="fuzzer")
    _read("upload: import_file", lambda d: import_file(d, user=user), data,
          (BundleError, OTLPError))


# ------------------------------------------------------------------------------- frames


class Probe(LiveConsumer):
    """The frame parser of every socket, admitted, allowed everything; handlers record."""

    frames = {"sync": "watch", "pause": "control", "approve": "approve", "start": "control"}

    def __init__(self) -> None:
        super().__init__()
        self.admitted, self.sent, self.handled = True, [], []

    async def authorized(self, action: str) -> bool:
        return True

    async def send(self, text_data: str | None = None, bytes_data: bytes | None = None,
                   close: bool = False) -> None:
        self.sent.append(json.loads(text_data or "null"))

    async def do_sync(self, frame: dict[str, Any]) -> None:
        self.handled.append(frame)

    do_pause = do_approve = do_start = do_sync


ACTIONS = st.sampled_from(["sync", "pause", "approve", "start", "nope", ""]) | JSON
FRAMES = st.one_of(
    st.text(max_size=300), bombs(),
    st.dictionaries(st.sampled_from(["action", "seq", "input", "last_seq"]) | st.text(max_size=8),
                    JSON, max_size=4).map(lambda d: json.dumps(d, default=str)),
    st.builds(lambda a, rest: json.dumps({"action": a, **rest}, default=str), ACTIONS,
              st.dictionaries(st.text(max_size=8), JSON, max_size=3)),
)


@fuzz(300)
@given(FRAMES, st.booleans())
# Found by this test: an action that is a list (TypeError: unhashable), and a frame nested
# past Python's JSON parser (RecursionError): each crashed the socket's consumer.
@example('{"action": []}', False)
@example('{"action": {}}', True)
@example("[" * 5_000, False)
def test_every_frame_is_handled_or_answered_with_an_error(text, as_bytes):
    _tried("socket: frames")
    probe = Probe()
    if as_bytes:
        asyncio.run(probe.receive(bytes_data=text.encode("utf-8", "surrogatepass")))
    else:
        asyncio.run(probe.receive(text_data=text))
    assert len(probe.handled) + len(probe.sent) == 1
    if probe.sent:
        assert probe.sent[0]["type"] == "error" and probe.sent[0]["error"]


class QuietPublisher:
    async def status(self, status: str, detail: dict[str, Any]) -> None:
        pass

    async def approval(self, step: Any, expires_at: float | None = None) -> None:
        pass


CONTROL = st.builds(
    lambda action, rest: {**rest, "action": action},
    st.sampled_from(["pause", "resume", "step", "cancel", "debug", "edit", "approve", "deny",
                     "other"]),
    st.dictionaries(st.sampled_from(["seq", "input", "arguments", "reason", "step_mode",
                                     "break_tools", "break_on_error", "break_on_reflection"]),
                    JSON, max_size=4))


@fuzz(250)
@given(st.lists(CONTROL, min_size=1, max_size=4))
def test_a_run_follows_a_control_frame_or_says_why_not(frames):
    async def follow() -> None:
        control = RunControl(7, publisher=QuietPublisher(), cancel_run=lambda run_id: False)
        for frame in frames:
            _tried("socket: run controls")
            try:
                await control.act(frame)
            except ControlError as exc:
                assert str(exc)

    asyncio.run(follow())


# ------------------------------------------------------------------------------- summary


def test_enough_inputs_were_tried(capsys):
    """Run with the whole module: every target above tried its inputs, memory stayed bounded."""
    if len(TRIED) < 8:
        pytest.skip("the fuzz targets did not all run in this session")
    total = sum(TRIED.values())
    growth = _peak_mb() - _RSS_AT_START[0]
    with capsys.disabled():
        print(f"\nfuzz: {total:,} inputs tried; peak memory grew {growth} MB")
        for target, count in sorted(TRIED.items()):
            print(f"  {count:>7,}  {target}")
    assert total >= MIN_TRIED * SCALE
    assert growth < MAX_GROWTH_MB
