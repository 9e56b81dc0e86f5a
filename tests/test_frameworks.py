"""Real agents of real frameworks, traced by their official instrumentors (OpenInference for the
openai SDK, LangGraph, smolagents, the OpenAI Agents SDK and LlamaIndex; the OpenTelemetry GenAI
instrumentation of the openai SDK, with and without message content), export with the SDK's own
OTLP/HTTP exporter; what a user then sees of each run: the tree, the kinds, each model call's
messages, the tool's arguments and result, the question and the answer, the count of model
calls, and the diff of two runs that differ in one tool result.

The agents (tests/framework_agents/) run in the frameworks virtualenv that scripts/test makes
(requirements-frameworks.txt); without it and without AGENTLAB_FRAMEWORKS_PYTHON this module is
skipped. Checks that fail only because the OTLP reader misreads a framework are marked
xfail(strict=True) in GAPS: they flip to failures ("XPASS(strict)") the day the reader is fixed,
and then their line in GAPS goes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.urls import reverse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.fake_openai import FakeOpenAI
from tests.framework_runs import (
    AGENTS,
    ARGUMENTS,
    FRAMEWORKS,
    QUESTION,
    ROOT,
    WEATHER,
    answer,
    frameworks_python,
    run_agent,
)
from tests.otlp_receiver import OTLPReceiver
from traces.diff import diff_steps
from traces.models import Run
from traces.otel.importer import import_otlp
from traces.schema import Step

pytestmark = pytest.mark.django_db
TOKEN = "al_ingest_test_token"
NAMES = list(FRAMEWORKS)
GENAI = ("genai", "genai-no-content")
# (check, framework) -> what the reader (traces/otel/) gets wrong there today.
GAPS = {
    ("tree", "genai"): "GenAI spans (chat, execute_tool) all read as thoughts",
    ("tree", "genai-no-content"): "GenAI spans (chat, execute_tool) all read as thoughts",
    ("llm_calls", "llamaindex"): "request-preparation LLM spans count as model calls",
    ("llm_calls", "genai"): "GenAI chat spans are not read as LLM calls",
    ("llm_calls", "genai-no-content"): "GenAI chat spans are not read as LLM calls",
    ("messages", "langgraph"): "input.value holds LangChain's serialisation; "
                               "llm.input_messages.* is ignored",
    ("messages", "smolagents"): "input.value holds smolagents' ChatMessage reprs; "
                                "llm.input_messages.* is ignored",
    ("messages", "llamaindex"): "input.value holds LlamaIndex's ChatMessage reprs; "
                                "llm.input_messages.* is ignored",
    ("messages", "genai"): "gen_ai.input.messages / gen_ai.output.messages are not read",
    ("messages", "genai-no-content"): "a GenAI span without content reads as a call that "
                                      "sent no messages",
    ("tool", "langgraph"): "the tool's input.value is the bare argument, its output a "
                           "serialised ToolMessage",
    ("tool", "smolagents"): "the tool's input.value wraps the arguments in smolagents' call",
    ("tool", "llamaindex"): "the tool's input.value wraps the arguments, its output is a "
                            "serialised ToolOutput",
    ("tool", "genai"): "gen_ai.tool.call.arguments / gen_ai.tool.call.result are not read",
    ("question", "langgraph"): "the question and answer are in serialised graph state",
    ("question", "smolagents"): "the question is in the serialised run() arguments",
    ("question", "openai-agents"): "the question and answer are not on the agent spans",
    ("question", "llamaindex"): "the question and answer are in serialised workflow state",
    ("question", "genai"): "the question and answer are in gen_ai.*.messages, not read",
    ("diff", "langgraph"): "the diff lands on a step that differs by generated ids",
    ("diff", "smolagents"): "the diff lands on the step span (timings, reprs), not the tool",
    ("diff", "llamaindex"): "the diff lands on a step that differs by memory addresses",
    ("diff", "genai"): "GenAI tool spans are not read, so the diff finds nothing",
}


def cases(check: str, names: list[str] = NAMES) -> list[Any]:
    return [pytest.param(n, id=n, marks=[pytest.mark.xfail(strict=True,
                                                           reason=f"reader gap: {GAPS[check, n]}")]
                         if (check, n) in GAPS else []) for n in names]


# --- where the agents send their spans -----------------------------------------------------
# The one place that knows where spans go: the `agentlab` fixture (`env` for the exporter,
# `take()` what one agent run sent) and `AgentLab.run` (the Run a user then finds). Today a
# real OTLP/HTTP receiver on loopback, its spans made a run by the file import (the same
# run_from_trace the live receiver uses). For the live receiver: `env` points at a live
# server's /v1/traces with an ingest token, and `run()` is the Run that the ReceivedTrace of
# the trace id in `sent.requests` names.

@dataclass
class Sent:
    """What one agent run exported: every export request, as sent, and their headers."""

    requests: list[ExportTraceServiceRequest]
    headers: list[dict[str, str]]
    said: str


@dataclass
class AgentLab:
    receiver: OTLPReceiver
    env: dict[str, str] = field(default_factory=dict)

    def take(self) -> tuple[list[ExportTraceServiceRequest], list[dict[str, str]]]:
        """What arrived since the last take."""
        with self.receiver.lock:
            taken = list(self.receiver.requests), list(self.receiver.headers)
            self.receiver.requests.clear()
            self.receiver.headers.clear()
        return taken

    @staticmethod
    def run(sent: Sent, user: Any) -> Run:
        """The run a user finds for one agent run."""
        merged = ExportTraceServiceRequest()
        for request in sent.requests:
            merged.resource_spans.extend(request.resource_spans)
        (run,) = import_otlp(merged.SerializeToString(), user=user)
        return run


@pytest.fixture(scope="module")
def agentlab() -> Iterator[AgentLab]:
    with OTLPReceiver() as receiver:
        yield AgentLab(receiver, {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
                                  "OTEL_EXPORTER_OTLP_HEADERS": f"Authorization=Bearer%20{TOKEN}"})


# --- the agents, each run once per module ---------------------------------------------------

@pytest.fixture(scope="module")
def sent(agentlab: AgentLab) -> Iterator[Callable[[str, str], Sent]]:
    """`sent(framework, weather)`: that agent's export, run the first time it is asked for."""
    python = frameworks_python()
    if python is None:
        pytest.skip("no frameworks virtualenv (scripts/test makes it; or set "
                    "AGENTLAB_FRAMEWORKS_PYTHON)")
    done: dict[tuple[str, str], Sent] = {}
    with FakeOpenAI() as server:
        def get(name: str, weather: str = WEATHER[0]) -> Sent:
            if (name, weather) not in done:
                said = run_agent(python, FRAMEWORKS[name], server, agentlab.env, weather=weather)
                done[name, weather] = Sent(*agentlab.take(), said=said)
            return done[name, weather]
        yield get


@pytest.fixture
def run_of(sent, agentlab, user) -> Callable[..., Run]:
    return lambda name, weather=WEATHER[0]: agentlab.run(sent(name, weather), user)


def steps_of(run: Run) -> list[Step]:
    return [s.to_record() for s in run.steps.order_by("seq")]


def ancestors(step: Step, by_seq: dict[int, Step]) -> list[Step]:
    out = []
    while step.parent is not None:
        step = by_seq[step.parent]
        out.append(step)
    return out


def weather_tool(steps: list[Step]) -> Step:
    (tool,) = [s for s in steps if s.kind == "tool" and s.name == "get_weather"]
    return tool


# --- the checks ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_each_agent_answers_and_exports_with_the_token(name, sent):
    """The agent ran against the scripted model and its exporter sent the ingest token."""
    exported = sent(name)
    assert exported.said == answer(WEATHER[0])
    assert exported.requests, f"{name} exported no spans"
    assert all(h.get("authorization") == f"Bearer {TOKEN}" for h in exported.headers)


@pytest.mark.parametrize("name", cases("tree"))
def test_the_tree_has_the_model_calls_and_the_tool_between_them(name, run_of):
    steps = steps_of(run_of(name))
    by_seq = {s.seq: s for s in steps}
    tool = weather_tool(steps)
    llm = [s for s in steps if s.kind == "llm"]
    assert any(s.seq < tool.seq for s in llm) and any(s.seq > tool.seq for s in llm)
    # The tool runs in the agent, not inside a model call.
    assert all(a.kind != "llm" for a in ancestors(tool, by_seq))
    assert tool.status == "ok" and all(s.status == "ok" for s in steps)


@pytest.mark.parametrize("name", cases("llm_calls"))
def test_llm_calls_count_the_real_model_calls(name, run_of):
    run = run_of(name)
    assert [s.kind for s in steps_of(run)].count("llm") == 2
    assert run.llm_calls == 2
    if name != "llamaindex":  # it streams without asking for usage: no tokens to count
        assert (run.tokens_in, run.tokens_out) == (100, 21)


@pytest.mark.parametrize("name", cases("messages"))
def test_each_model_call_shows_the_messages_it_sent(name, run_of, client, user):
    run = run_of(name)
    client.force_login(user)
    first, *_, last = [s for s in steps_of(run) if s.kind == "llm"]
    pages = [client.get(reverse("step_messages", args=[run.pk, s.seq])).content.decode()
             for s in (first, last)]
    assert all("sent no messages" not in page for page in pages)
    assert 'class="msg msg-user"' in pages[0] and QUESTION in pages[0]
    # The second call sent the tool's result back (as a tool message; smolagents' own role).
    assert WEATHER[0] in pages[1]
    call = first.output["tool_calls"][0]
    assert (call["name"], call["arguments"]) == ("get_weather", {"city": "Paris"})


@pytest.mark.parametrize("name", cases("tool", [n for n in NAMES if n != "genai-no-content"]))
def test_the_tool_step_shows_its_arguments_and_result(name, run_of):
    tool = weather_tool(steps_of(run_of(name)))
    assert tool.input == {"city": "Paris"} or tool.input == ARGUMENTS
    assert tool.text == WEATHER[0]


@pytest.mark.parametrize("name", cases("question", [n for n in NAMES if n not in GENAI[1:]]))
def test_the_run_has_the_question_and_the_answer(name, run_of):
    run = run_of(name)
    assert run.input == QUESTION
    assert run.final_answer == answer(WEATHER[0])
    assert run.status == "succeeded"


@pytest.mark.parametrize("name", cases("diff", [n for n in NAMES if n not in GENAI[1:]]))
def test_the_diff_of_two_runs_points_first_at_the_changed_tool_result(name, run_of):
    a, b = steps_of(run_of(name, WEATHER[0])), steps_of(run_of(name, WEATHER[1]))
    diff = diff_steps(a, b)
    assert diff.first_divergence is not None
    row = diff.rows[diff.first_divergence]
    assert row.op == "changed" and row.left is not None and row.right is not None
    assert (row.left.kind, row.left.name) == ("tool", "get_weather")
    assert row.left.text == WEATHER[0] and row.right.text == WEATHER[1]




def _lines(code: str) -> set[str]:
    """Code lines, comments dropped, `from X import a, b` as one line per name."""
    out = set()
    for line in code.splitlines():
        line = line.split("  #")[0].rstrip()
        if line.startswith("from ") and " import " in line:
            module, names = line[5:].split(" import ")
            out |= {f"from {module} import {n.strip()}" for n in names.split(",")}
        elif line.strip() and not line.startswith("#"):
            out.add(line)
    return out


def test_the_docs_set_up_each_framework_as_its_tested_agent_does():
    """Each block of docs/INTEROP.md "Send your agent's traces here" is in a real agent."""
    docs = (ROOT / "docs" / "INTEROP.md").read_text()
    section = docs.split("## Send your agent's traces here")[1].split("\n## ")[0]
    blocks = [b.split("```")[0] for b in section.split("```python\n")[1:]]
    agents = set().union(*(_lines(p.read_text()) for p in AGENTS.glob("*.py")))
    assert len(blocks) >= 6
    for block in blocks:
        missing = [line for line in _lines(block) - agents if "__name__" not in line]
        assert not missing, f"not in tests/framework_agents/: {missing}"
