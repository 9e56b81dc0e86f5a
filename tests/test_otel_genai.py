"""The OpenTelemetry GenAI conventions read whole: spans the real SDK made in the shapes the
conventions give (messages as JSON attributes, as the older span events, or not recorded)
become the same run as OpenInference spans do; and our export carries both attribute sets,
so a reader of GenAI alone reads our runs."""

from __future__ import annotations

import pytest

from tests.genai_spans import ANSWER, QUESTION, SYSTEM, failed, spans_of, tracer, weather_turn
from tests.otel_fixtures import make_plan_run
from traces.otel.decode import traces
from traces.otel.steps import NO_CONTENT, run_from_trace
from traces.otlp import export_otlp_protobuf


def read(content: str = "attributes"):
    with tracer() as (t, memory):
        weather_turn(t, content)
        return run_from_trace(spans_of(memory.get_finished_spans()))


def test_messages_as_json_attributes_become_llm_steps_tools_and_the_answer():
    run, steps = read("attributes")
    assert (run["input"], run["final_answer"], run["agent_name"]) == (
        QUESTION, ANSWER, "invoke_agent weather")
    assert [(s.kind, s.name, s.parent) for s in steps] == [
        ("llm", "gpt-4o-mini-2024-07-18", None), ("tool", "get_weather", None),
        ("llm", "gpt-4o-mini-2024-07-18", None)]
    ask, tool, answer = steps
    assert ask.input["messages"] == [{"role": "system", "content": SYSTEM},
                                     {"role": "user", "content": QUESTION}]
    assert ask.input["tools"][0]["function"]["name"] == "get_weather"
    assert ask.input["temperature"] == 0.2
    assert ask.output["tool_calls"][0] | {"raw_arguments": ""} == {
        "id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"},
        "raw_arguments": "", "error": None}
    assert ask.output["finish_reason"] == "tool_calls"
    assert (ask.tokens_in, ask.tokens_out) == (40, 12)
    assert (tool.input, tool.text) == ({"city": "Paris"}, "sunny, 21 °C")
    assert tool.meta["gen_ai.tool.call.id"] == "call_1"
    assert answer.input["messages"][2:] == [
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 °C"}]
    assert answer.text == ANSWER and answer.output["model"] == "gpt-4o-mini-2024-07-18"
    assert (run["llm_calls"], run["tool_calls"], run["tokens_in"], run["tokens_out"]) == (
        2, 1, 100, 21)
    # what nothing reads stays on the step; what is read is not repeated there
    assert ask.meta["server.address"] == "api.openai.com"
    assert ask.meta["gen_ai.response.id"] == "chatcmpl-1"
    assert "gen_ai.input.messages" not in ask.meta
    origin = run["agent_snapshot"]["imported_from"]
    assert origin["framework"] == "OpenAI SDK"
    assert origin["instrumentation"] == "opentelemetry.instrumentation.openai_v2 2.1b0"
    assert origin["resource"]["service.name"] == "weather-genai"
    assert "note" not in origin


def test_the_older_span_events_give_the_same_messages():
    _, by_attributes = read("attributes")
    run, by_events = read("events")
    assert [s.input["messages"] for s in by_events if s.kind == "llm"] == [
        s.input["messages"] for s in by_attributes if s.kind == "llm"]
    assert [(s.kind, s.text, s.output) for s in by_events] == [
        (s.kind, s.text, s.output) for s in by_attributes]
    assert (run["input"], run["final_answer"]) == (QUESTION, ANSWER)
    assert not any(k.startswith("otel.events") for s in by_events for k in s.meta)


def test_a_trace_without_message_content_says_so():
    run, steps = read("none")
    ask, tool, answer = steps
    assert ask.kind == "llm" and ask.text == NO_CONTENT and ask.input == {"messages": [],
                                                                          "temperature": 0.2}
    assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only" in tool.text
    assert (ask.tokens_in, ask.output["model"], ask.output["text"]) == (
        40, "gpt-4o-mini-2024-07-18", "")
    assert run["agent_snapshot"]["imported_from"]["note"] == NO_CONTENT
    assert (run["llm_calls"], run["tool_calls"], run["tokens_in"]) == (2, 1, 100)
    assert run["final_answer"] == ""  # not "sent no messages", not a made-up answer


def test_a_failed_tool_is_an_error_step_and_the_run_failed():
    with tracer() as (t, memory):
        failed(t)
        run, steps = run_from_trace(spans_of(memory.get_finished_spans()))
    (tool,) = steps
    assert (tool.kind, tool.status, tool.input) == ("tool", "error", {"city": "Atlantis"})
    assert tool.text == "no such city" and tool.meta["exception.type"] == "RuntimeError"
    assert tool.meta["error.type"] == "RuntimeError"
    assert (run["status"], run["error"]) == ("failed", "the tool failed")


def test_a_nested_agent_is_a_sub_run():
    with tracer() as (t, memory):
        with t.start_as_current_span("invoke_agent planner", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"}):
            weather_turn(t, agent="weather")
        run, steps = run_from_trace(spans_of(memory.get_finished_spans()))
    assert [(s.kind, s.role, s.parent) for s in steps] == [
        ("message", "weather", None), ("llm", "agent", 1), ("tool", "agent", 1),
        ("llm", "agent", 1)]
    assert run["agent_name"] == "invoke_agent planner" and run["final_answer"] == ANSWER


@pytest.mark.django_db
def test_our_export_read_by_its_genai_attributes_alone_is_the_same_run(user):
    """A GenAI-only peer: every OpenInference and agentlab attribute removed."""
    run = make_plan_run(user)
    original = [s.to_record() for s in run.steps.order_by("seq")]
    (spans,) = traces(export_otlp_protobuf(run, run.steps.all())).values()
    for span in spans:
        span.attributes = {k: v for k, v in span.attributes.items() if k.startswith("gen_ai.")}
    fields, steps = run_from_trace(spans)
    assert (fields["input"], fields["agent_name"]) == ("Weather in Paris?", "Weather")
    assert [s.kind for s in steps] == ["message", "llm", "tool", "thought", "llm", "thought"]
    ask, back = steps[1], original[1]
    assert ask.input["messages"] == back.input["messages"]
    assert [t["function"]["name"] for t in ask.input["tools"]] == ["get_weather"]
    assert ask.input["temperature"] == 0.2
    assert ask.output["tool_calls"][0]["arguments"] == {"city": "Paris"}
    assert (ask.output["model"], ask.output["finish_reason"]) == ("gpt-4o-mini-2024",
                                                                  "tool_calls")
    assert (ask.tokens_in, ask.tokens_out) == (100, 20)
    tool = steps[2]
    assert (tool.name, tool.input, tool.text) == ("get_weather", {"city": "Paris"},
                                                  "sunny, 21 °C")
    assert tool.meta["gen_ai.tool.call.id"] == "call_1"
    assert steps[4].status == "error"
    assert (fields["llm_calls"], fields["tool_calls"]) == (2, 1)


def test_events_and_links_nothing_reads_are_kept_on_the_step():
    from opentelemetry.trace import Link

    with tracer() as (t, memory):
        with t.start_as_current_span("invoke_agent weather", attributes={
                "gen_ai.operation.name": "invoke_agent", "app.tier": "gold"}) as root:
            other = root.get_span_context()
            weather_turn(t)
            with t.start_as_current_span("retry", links=[Link(other, {"why": "again"})]) as span:
                span.add_event("cache.miss", {"key": "paris"})
        run, steps = run_from_trace(spans_of(memory.get_finished_spans()))
    retry = next(s for s in steps if s.name == "retry")
    assert '"name": "cache.miss"' in retry.meta["otel.events"]
    assert '"key": "paris"' in retry.meta["otel.events"]
    assert '"why": "again"' in retry.meta["otel.links"]
    assert f'"span_id": "{other.span_id:016x}"' in retry.meta["otel.links"]
    assert run["agent_snapshot"]["imported_from"]["root"] == {"app.tier": "gold"}
