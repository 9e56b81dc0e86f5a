"""A NUL character (U+0000) from any source is stored: PostgreSQL keeps none in text or JSON,
so there it becomes U+FFFD where the value is handed to the database (traces.postgres_text);
SQLite keeps it as it is. On PostgreSQL each of these writes failed with a DataError."""

from __future__ import annotations

import pytest
from django.db import connection

from traces.models import Run, Step
from traces.otel.importer import import_file
from traces.schema import Step as StepRecord
from traces.upsert import upsert_steps

pytestmark = pytest.mark.django_db


def stored(text: str) -> str:
    """`text` as the database under test keeps it."""
    return text.replace("\x00", "\ufffd") if connection.vendor == "postgresql" else text


def test_a_step_holding_nul_in_its_text_and_json_is_written(user):
    run = Run.objects.create(user=user, agent_name="weather\x00bot", status="done",
                             input="rain?\x00", agent_snapshot={"name\x00": "bot\x00"})
    record = StepRecord(seq=1, kind="llm", name="look\x00up", text="sunny\x00",
                        input={"messages": [{"content": "hi\x00"}]},
                        output={"k\x00": ["v\x00", 1, None]})
    upsert_steps([(run.pk, record)])  # the recorder's statement: a model reply, a tool result
    step, run = Step.objects.get(run=run), Run.objects.get(pk=run.pk)
    assert (run.agent_name, run.input) == (stored("weather\x00bot"), stored("rain?\x00"))
    assert run.agent_snapshot == {stored("name\x00"): stored("bot\x00")}
    assert (step.name, step.text) == (stored("look\x00up"), stored("sunny\x00"))
    assert step.input == {"messages": [{"content": stored("hi\x00")}]}
    assert step.output == {stored("k\x00"): [stored("v\x00"), 1, None]}


def test_text_that_only_looks_like_an_escaped_nul_is_stored_as_written(user):
    """JSON writes a NUL as the escape \\u0000; a backslash before it is an escaped one."""
    lookalikes = ["\\u0000", "\\\\u0000", "\\\x00", "\\\\\x00u0000", "a\\u0000b\x00"]
    run = Run.objects.create(user=user, agent_name="\\u0000", status="done",
                             agent_snapshot={"texts": lookalikes})
    run = Run.objects.get(pk=run.pk)
    assert run.agent_name == "\\u0000"
    assert run.agent_snapshot == {"texts": [stored(text) for text in lookalikes]}


@pytest.mark.parametrize("as_json", [False, True])
def test_a_nul_character_anywhere_in_a_trace_imports(user, as_json):
    """A trace holding U+0000 in a resource key, a span name or an attribute's key or value
    imports on either database, protobuf or JSON."""
    from google.protobuf.json_format import MessageToJson
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add()
    key = spans.resource.attributes.add()
    key.key, key.value.string_value = "\x00ervice.name", "agent\x00"
    span = spans.scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = b"\x01" * 16, b"\x02" * 8, "look\x00up"
    attribute = span.attributes.add()
    attribute.key, attribute.value.string_value = "input.value", "Weather\x00in Paris?"
    data = MessageToJson(request).encode() if as_json else request.SerializeToString()
    (run,) = import_file(data, user=user)
    run = Run.objects.get(pk=run.pk)
    resource = run.agent_snapshot["imported_from"]["resource"]
    assert resource == {stored("\x00ervice.name"): stored("agent\x00")}
    assert stored("Weather\x00in Paris?") in run.input
    assert [s.name for s in run.steps.all()] == [stored("look\x00up")]
