"""Real agents of real frameworks, traced by their official instrumentors (OpenInference for the
openai SDK, LangGraph, smolagents, the OpenAI Agents SDK and LlamaIndex; the OpenTelemetry GenAI
instrumentation of the openai SDK, with and without message content), export with the SDK's own
OTLP/HTTP exporter; what a user then sees of each run: the tree, the kinds, each model call's
messages, the tool's arguments and result, the question and the answer, the count of model
calls, and the diff of two runs that differ in one tool result.

The agents (tests/framework_agents/) run in the frameworks virtualenv that scripts/test makes
(requirements-frameworks.txt); without it and without AGENTLAB_FRAMEWORKS_PYTHON this module is
skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from agentlab.receiver.models import ReceivedTrace
from agentlab.tokens.models import create_token
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
from traces.otel.steps import NO_CONTENT
from traces.schema import Step

pytestmark = pytest.mark.django_db(transaction=True)
PROTOBUF = "application/x-protobuf"
TOKEN = "al_ingest_test_token"
NAMES = list(FRAMEWORKS)
GENAI = ("genai", "genai-no-content")


# --- where the agents send their spans -----------------------------------------------------
# Each agent runs once per module (the `sent` fixture), its exporter sending to a loopback
# OTLP/HTTP receiver that keeps every export request as sent. A test then posts those very
# requests, one by one in their order, to Agent Lab's receiver (`POST /v1/traces`, with an
# ingest token of the test's user): the run it checks is the received run. One test
# (`test_each_agent_is_received_live_by_a_running_server`) points the exporter at a running
# daphne instead.

@dataclass
class Sent:
    """What one agent run exported: every export request, as sent, and their headers."""

    requests: list[ExportTraceServiceRequest]
    headers: list[dict[str, str]]
    said: str

    @property
    def trace_id(self) -> str:
        (trace,) = {span.trace_id.hex() for r in self.requests for rs in r.resource_spans
                    for ss in rs.scope_spans for span in ss.spans}
        return trace


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
        """The run a user finds for one agent run: its export requests received here."""
        token = create_token(user, f"agent {AgentLab.tokens}", "ingest")[1]
        AgentLab.tokens += 1
        client = Client()
        for request, headers in zip(sent.requests, sent.headers, strict=True):
            response = client.post("/v1/traces", request.SerializeToString(),
                                   content_type=headers.get("content-type", PROTOBUF),
                                   headers={"Authorization": f"Bearer {token}"})
            assert response.status_code == 200, response.content
        return ReceivedTrace.objects.get(user=user, trace_id=sent.trace_id).run

    tokens = 0


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


@pytest.mark.parametrize("name", NAMES)
def test_the_tree_has_the_model_calls_and_the_tool_between_them(name, run_of):
    steps = steps_of(run_of(name))
    by_seq = {s.seq: s for s in steps}
    tool = weather_tool(steps)
    llm = [s for s in steps if s.kind == "llm"]
    assert any(s.seq < tool.seq for s in llm) and any(s.seq > tool.seq for s in llm)
    # The tool runs in the agent, not inside a model call.
    assert all(a.kind != "llm" for a in ancestors(tool, by_seq))
    assert tool.status == "ok" and all(s.status == "ok" for s in steps)


@pytest.mark.parametrize("name", NAMES)
def test_llm_calls_count_the_real_model_calls(name, run_of):
    run = run_of(name)
    assert [s.kind for s in steps_of(run)].count("llm") == 2
    assert run.llm_calls == 2
    if name != "llamaindex":  # it streams without asking for usage: no tokens to count
        assert (run.tokens_in, run.tokens_out) == (100, 21)


@pytest.mark.parametrize("name", [n for n in NAMES if n != "genai-no-content"])
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


def test_a_trace_without_content_says_so_and_how_to_get_it(run_of, client, user):
    run = run_of("genai-no-content")
    client.force_login(user)
    calls = [s for s in steps_of(run) if s.kind == "llm"]
    assert len(calls) == 2 and all(s.text == NO_CONTENT for s in calls)
    page = client.get(reverse("step_messages", args=[run.pk, calls[0].seq])).content.decode()
    assert "sent no messages" not in page and "span_only" in page
    header = client.get(reverse("run", args=[run.pk])).content.decode()
    assert "recorded no message content" in header


@pytest.mark.parametrize("name", [n for n in NAMES if n != "genai-no-content"])
def test_the_tool_step_shows_its_arguments_and_result(name, run_of):
    tool = weather_tool(steps_of(run_of(name)))
    assert tool.input == {"city": "Paris"} or tool.input == ARGUMENTS
    assert tool.text == WEATHER[0]


@pytest.mark.parametrize("name", [n for n in NAMES if n not in GENAI[1:]])
def test_the_run_has_the_question_and_the_answer(name, run_of):
    run = run_of(name)
    assert run.input == QUESTION
    assert run.final_answer == answer(WEATHER[0])
    assert run.status == "succeeded"


@pytest.mark.parametrize("name", [n for n in NAMES if n not in GENAI[1:]])
def test_the_diff_of_two_runs_points_first_at_the_changed_tool_result(name, run_of):
    a, b = steps_of(run_of(name, WEATHER[0])), steps_of(run_of(name, WEATHER[1]))
    diff = diff_steps(a, b)
    assert diff.first_divergence is not None
    row = diff.rows[diff.first_divergence]
    assert row.op == "changed" and row.left is not None and row.right is not None
    assert (row.left.kind, row.left.name) == ("tool", "get_weather")
    assert row.left.text == WEATHER[0] and row.right.text == WEATHER[1]




@pytest.mark.parametrize("name", [n for n in NAMES if n != "genai-no-content"])
def test_each_agent_is_received_live_by_a_running_server(name, live_url, user, fake_llm):
    """The agent's own exporter sends to daphne's /v1/traces while it runs: one run, finished
    when the agent is, with its question, answer and tool."""
    python = frameworks_python()
    if python is None:
        pytest.skip("no frameworks virtualenv (scripts/test makes it; or set "
                    "AGENTLAB_FRAMEWORKS_PYTHON)")
    token = create_token(user, "live", "ingest")[1]
    said = run_agent(python, FRAMEWORKS[name], fake_llm, {
        "OTEL_EXPORTER_OTLP_ENDPOINT": live_url,
        "OTEL_EXPORTER_OTLP_HEADERS": f"Authorization=Bearer%20{token},"
                                      "x-agentlab-project=weather"})
    assert said == answer(WEATHER[0])
    (trace,) = ReceivedTrace.objects.select_related("run").filter(user=user)
    run = trace.run
    assert trace.project == "weather" and run.status == "succeeded"
    assert (run.input, run.final_answer) == (QUESTION, answer(WEATHER[0]))
    assert weather_tool(steps_of(run)).text == WEATHER[0]


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
