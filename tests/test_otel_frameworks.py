"""Real traces, read whole: one weather agent run by six frameworks with their own
instrumentors (captured by tests/framework_runs.py into tests/otel_captures/: run a, and run b
where the tool answers "rain" instead): the tree, kinds, messages, tool results, the question
and answer, real call counts, the framework; and the diff of a and b lands on the tool."""

from __future__ import annotations

from pathlib import Path

import pytest

from traces.diff import diff_steps
from traces.otel.calls import PREPARES, records_call
from traces.otel.decode import Span, traces
from traces.otel.steps import NO_CONTENT, run_from_trace

CAPTURES = Path(__file__).parent / "otel_captures"
QUESTION = "What is the weather in Paris?"
ANSWER = "In Paris it is sunny, 21 °C."
# capture -> (framework, the model calls and tools in order, the tool's arguments)
FRAMEWORKS = {
    "openai": ("OpenAI SDK", ["llm", "get_weather", "llm"], {"city": "Paris"}),
    "langgraph": ("LangGraph", ["llm", "get_weather", "llm"], {"city": "Paris"}),
    "smolagents": ("smolagents", ["llm", "get_weather", "llm", "final_answer"],
                   {"city": "Paris"}),
    "llamaindex": ("LlamaIndex", ["llm", "get_weather", "llm"], {"city": "Paris"}),
    "openai-agents": ("OpenAI Agents SDK", ["llm", "get_weather", "llm"], {"city": "Paris"}),
    "genai": ("OpenTelemetry GenAI", ["llm", "get_weather", "llm"], {"city": "Paris"}),
}


def read(name: str):
    (spans,) = traces((CAPTURES / f"{name}.json").read_bytes()).values()
    return run_from_trace(spans)


def said(step) -> str:
    return " ".join(str(m.get("content") or "") for m in step.input["messages"])


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_each_frameworks_trace_reads_whole(name):
    framework, calls, arguments = FRAMEWORKS[name]
    run, steps = read(name)
    assert (run["input"], run["final_answer"], run["status"]) == (QUESTION, ANSWER,
                                                                  "succeeded")
    assert run["agent_snapshot"]["imported_from"]["framework"] == framework
    assert [s.name if s.kind == "tool" else s.kind for s in steps
            if s.kind in ("llm", "tool")] == calls
    assert (run["llm_calls"], run["tool_calls"]) == (calls.count("llm"), len(calls) - 2)
    first, second = (s for s in steps if s.kind == "llm")
    assert QUESTION in said(first) and "sunny, 21 °C" not in said(first)
    assert "sunny, 21 °C" in said(second)  # the tool's result went back to the model
    assert not any(m.get("lc") for s in (first, second) for m in s.input["messages"])
    (call,) = first.output["tool_calls"]
    assert (call["name"], call["arguments"]) == ("get_weather", {"city": "Paris"})
    tool = next(s for s in steps if s.name == "get_weather")
    assert (tool.input, tool.text) == (arguments, "sunny, 21 °C")
    if name != "llamaindex":  # its streamed calls carry no usage
        assert (run["tokens_in"], run["tokens_out"]) == (100, 21)


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_the_diff_of_two_runs_that_differ_in_the_tool_lands_on_the_tool(name):
    (_, a), (_, b) = read(name), read(f"{name}-b")
    diff = diff_steps(a, b)
    row = diff.rows[diff.first_divergence]
    assert (row.op, row.left.kind, row.left.name) == ("changed", "tool", "get_weather")
    assert "rain" in row.right.text


def test_llamaindexs_request_preparation_is_not_a_model_call():
    run, steps = read("llamaindex")
    prepared = [s for s in steps if s.meta.get("otel.span") == "OpenAI._prepare_chat_with_tools"]
    assert len(prepared) == 2 and {s.kind for s in prepared} == {"thought"}
    assert prepared[0].meta["otel.note"] == PREPARES and run["llm_calls"] == 2


def test_a_model_call_is_told_by_its_attribute_names_whatever_they_hold():
    def span(*names: str) -> Span:
        return Span("t", "s", "", "llm", 0, 1, dict.fromkeys(names, "x"))

    assert records_call(span("llm.model_name", "llm.token_count.prompt"))
    assert records_call(span("llm.finish_reason"))
    assert not records_call(span("llm.model_name", "llm.finish_reason.x", "x.llm.token_count."))
    # A name holding a newline is one name, not two lines of names.
    assert not records_call(span("a\nllm.token_count.prompt", "b\nllm.finish_reason"))
    assert records_call(span("a\nb", "gen_ai.usage.input_tokens"))


def test_framework_state_stays_on_the_run_and_steps_not_in_the_messages():
    run, steps = read("langgraph")
    root = run["agent_snapshot"]["imported_from"]["root"]
    assert '"type": "human"' in root["output.value"]  # LangGraph's final state, kept
    llm = next(s for s in steps if s.kind == "llm")
    assert '"lc": 1' in llm.meta["input.value"]  # LangChain's serialisation, kept aside
    tool = next(s for s in steps if s.kind == "tool")
    assert tool.meta["input.value"] == "Paris"  # the bare argument; its call's arguments read
    assert llm.input["messages"][0]["role"] == "system"
    smol, _ = read("smolagents")
    assert smol["agent_snapshot"]["imported_from"]["root"]["smolagents.max_steps"] == 4


def test_a_genai_trace_without_content_says_so():
    run, steps = read("genai-no-content")
    llm = [s for s in steps if s.kind == "llm"]
    assert [s.text for s in llm] == [NO_CONTENT, NO_CONTENT]
    assert run["agent_snapshot"]["imported_from"]["note"] == NO_CONTENT
    assert (run["llm_calls"], run["tool_calls"], run["tokens_in"], run["tokens_out"]) == (
        2, 1, 100, 21)
    assert "sent no messages" not in " ".join(s.text for s in steps)


@pytest.mark.django_db
def test_the_run_page_shows_the_framework_and_a_missing_content_note(client, user):
    from django.urls import reverse

    from traces.otel.importer import import_otlp

    client.force_login(user)
    (langgraph,) = import_otlp((CAPTURES / "langgraph.json").read_bytes(), user=user)
    page = client.get(reverse("run", args=[langgraph.pk])).content.decode()
    assert "traced with <strong>LangGraph</strong>" in page
    assert "<code>openinference.instrumentation.langchain 0.1.80</code>" in page
    assert "service weather-langgraph" in page and 'id="origin-note"' not in page
    (bare,) = import_otlp((CAPTURES / "genai-no-content.json").read_bytes(), user=user)
    page = client.get(reverse("run", args=[bare.pk])).content.decode()
    assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only" in page
    assert 'id="origin-note"' in page
    llm = bare.steps.filter(kind="llm").first()
    said = client.get(reverse("step_messages", args=[bare.pk, llm.seq])).content.decode()
    assert "sent no messages" not in said and "recorded no message content" in said
