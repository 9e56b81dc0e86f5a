"""Real agents of five frameworks from PyPI through the gateway of a running server (daphne):
the openai SDK loop, LangGraph, smolagents, the OpenAI Agents SDK (chat-completions mode) and
LlamaIndex (tests/framework_agents/, unchanged but for OPENAI_BASE_URL and OPENAI_API_KEY), each
a subprocess in the frameworks virtualenv, as a user runs their own program. The gateway's model
is a profile on the scripted server, routed from the name the agents ask for (gpt-4o-mini, as
the admin maps it); it asks for the weather and then says what the last tool result it was sent
says: an answer shows which observation reached the model.

For each framework: recorded as one run with its llm and tool steps (think, act, observe), held
at a tool breakpoint and edited from /runs/<id>/control, replayed from its record with no model
call, forked at its tool step with an edited observation; the five at once with no session at
all (grouped by conversation); and the examples/ agent (LangGraph) on the embedded model.

Without the frameworks virtualenv and without AGENTLAB_FRAMEWORKS_PYTHON this module is
skipped; scripts/test sets it, so there a missing virtualenv fails (tests.framework_runs).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from agentlab.gateway.grouping import OBSERVATION, text_of
from agentlab.gateway.models import GatewayRoute
from agentlab.models import ModelProfile
from agentlab.profiles import EMBEDDED_PROFILE
from agentlab.tokens.models import create_token
from tests.fake_openai import FakeOpenAI, Reply
from tests.framework_runs import AGENTS, ARGUMENTS, FRAMEWORKS, QUESTION, ROOT, WEATHER, answer
from tests.framework_runs import frameworks_python as find_python
from tests.gateway_clients import scripted_profile
from tests.waiting import wait_until
from traces.diff import diff_steps
from traces.models import Run
from traces.schema import Step

pytestmark = pytest.mark.django_db(transaction=True)
NAMES = ("openai", "langgraph", "smolagents", "openai-agents", "llamaindex")
EDIT = "hail, -2 °C"
MODEL = "gpt-4o-mini"  # LlamaIndex's OpenAI class wants a name it knows
AGENT_TIMEOUT_S = 180  # an agent's imports alone take seconds on a busy machine
FINISHED = ("succeeded", "failed", "cancelled")


# --- the scripted model, and the agents as programs --------------------------------------

def observation(messages: list[dict[str, Any]]) -> str | None:
    """The tool result a request ends with (smolagents writes it as a user message)."""
    last = messages[-1]
    text = text_of(last.get("content"))
    if last.get("role") == "tool":
        return text
    if last.get("role") == "user" and text.startswith(OBSERVATION):
        return text[len(OBSERVATION):]
    return None


def weather_model(body: dict[str, Any]) -> Reply:
    """Ask for the weather; then say what the tool answered (smolagents answers through its
    final_answer tool)."""
    said = observation(body["messages"])
    if said is None:
        return Reply(tool_calls=[("get_weather", ARGUMENTS)], usage=(40, 12))
    tools = {(t.get("function") or {}).get("name") for t in body.get("tools") or []}
    if "final_answer" in tools:
        return Reply(tool_calls=[("final_answer", json.dumps({"answer": answer(said)}))],
                     usage=(60, 9))
    return Reply(text=answer(said), usage=(60, 9))


@pytest.fixture(scope="module")
def python() -> Path:
    found = find_python()
    if found is None:
        pytest.skip("no frameworks virtualenv (scripts/test makes it; or set "
                    "AGENTLAB_FRAMEWORKS_PYTHON)")
    return found


def start(python: Path, script: Path, base_url: str, token: str, *,
          weather: str = WEATHER[0], model: str = MODEL) -> subprocess.Popen:
    """The agent's program, with the gateway as its OpenAI server; its spans are off (the
    gateway records it), so nothing waits for a trace collector."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "OPENAI_", "DJANGO_", "AGENTLAB_"))}
    env |= {"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": token, "AGENT_MODEL": model,
            "WEATHER": weather, "OTEL_SDK_DISABLED": "true", "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([str(python), str(script), QUESTION], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finish(process: subprocess.Popen, *, ok: bool = True) -> tuple[int, str]:
    """(exit status, the last line it printed)."""
    out, err = process.communicate(timeout=AGENT_TIMEOUT_S)
    assert not ok or process.returncode == 0, f"{process.args[1]} failed:\n{err[-4000:]}"
    lines = out.strip().splitlines()
    return process.returncode, lines[-1] if lines else ""


# --- Agent Lab, as the launcher and the person at the run page use it ---------------------

def launcher(url: str, token: str, path: str, body: dict[str, Any],
             status: int = 200) -> dict[str, Any]:
    """A call of the launcher's (manage.py attach): a gateway token, no cookie."""
    response = httpx.post(f"{url}{path}", json=body, timeout=30,
                          headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == status, response.text
    return response.json()


@dataclass
class Lab:
    url: str
    token: str
    python: Path
    model: FakeOpenAI
    page: httpx.Client  # logged in: the person's controls

    def session(self, **fields: Any) -> dict[str, Any]:
        return launcher(self.url, self.token, "/gateway/sessions",
                        {"name": "weather agent", **fields}, 201)

    def agent(self, name: str, session: dict[str, Any] | None = None,
              weather: str = WEATHER[0]) -> subprocess.Popen:
        base = session["base_url"] if session else f"{self.url}/gateway/v1"
        return start(self.python, AGENTS / FRAMEWORKS[name].script, base, self.token,
                     weather=weather)

    def end(self, session: dict[str, Any], exit_code: int) -> dict[str, Any]:
        """What the launcher says when its program exits: the run ends now."""
        return launcher(self.url, self.token, f"/gateway/sessions/{session['session']}/end",
                        {"exit_code": exit_code})

    def run(self, name: str, **fields: Any) -> tuple[str, Run]:
        """One run of the agent in a session of its own (record, replay or fork)."""
        session = self.session(**fields)
        code, said = finish(self.agent(name, session))
        return said, Run.objects.get(pk=self.end(session, code)["run"])

    def state(self, run: int) -> dict[str, Any]:
        response = self.page.get(f"/runs/{run}/control")
        assert response.status_code == 200, response.text
        return response.json()

    def control(self, run: int, **frame: Any) -> dict[str, Any]:
        response = self.page.post(f"/runs/{run}/control", json=frame,
                                  headers={"X-CSRFToken": self.page.cookies["csrftoken"]})
        assert response.status_code == 200, response.text
        return response.json()


def logged_in(url: str, username: str, password: str) -> httpx.Client:
    """A browser's session: the login form, its CSRF cookie, the session cookie."""
    page = httpx.Client(base_url=url, timeout=30)
    page.get("/login/")
    done = page.post("/login/", data={"username": username, "password": password,
                                      "csrfmiddlewaretoken": page.cookies["csrftoken"]})
    assert done.status_code == 302, done.text
    return page


@pytest.fixture
def lab(live_url, user, fake_llm, python) -> Iterator[Lab]:
    GatewayRoute.objects.create(model_name=MODEL, profile=scripted_profile(fake_llm))
    fake_llm.responder = weather_model
    page = logged_in(live_url, "alice", "pw-alice-123")
    try:
        yield Lab(live_url, create_token(user, "frameworks", "gateway")[1], python, fake_llm,
                  page)
    finally:
        page.close()


def steps_of(run: Run) -> list[Step]:
    return [s.to_record() for s in run.steps.order_by("seq")]


def acts(run: Run) -> list[tuple[str, str]]:
    """Its llm and tool steps: (kind, what was called)."""
    return [(s.kind, s.name if s.kind == "tool" else "model") for s in steps_of(run)
            if s.kind in ("llm", "tool")]


THINK_ACT_OBSERVE = [("llm", "model"), ("tool", "get_weather"), ("llm", "model")]


def tool_step(run: Run) -> Step:
    (tool,) = [s for s in steps_of(run) if s.kind == "tool"]
    return tool


# --- the checks ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_recorded_as_one_run_then_replayed_and_forked_from_its_record(name, lab, user):
    said, run = lab.run(name)
    assert said == answer(WEATHER[0])
    assert list(Run.objects.filter(user=user)) == [run]
    assert run.status == "succeeded" and QUESTION in run.input
    assert acts(run) == THINK_ACT_OBSERVE
    tool = tool_step(run)
    assert tool.input == {"city": "Paris"} and tool.text == WEATHER[0]
    assert run.llm_calls == 2 and run.tool_calls == 1
    asked = len(lab.model.requests)

    # Replayed and forked at once, each in its own session.
    with ThreadPoolExecutor(2) as pool:
        replay = pool.submit(lab.run, name, mode="replay", source=run.pk)
        fork = pool.submit(lab.run, name, mode="fork", source=run.pk, fork_seq=tool.seq,
                           edit={"observation": EDIT})
        (replay_said, replayed), (fork_said, forked) = replay.result(), fork.result()

    # The replay: the same answer, every reply from the record, the same requests, and only
    # the fork's one live call reached the model.
    assert replay_said == answer(WEATHER[0]) and replayed.status == "succeeded"
    assert len(lab.model.requests) == asked + 1
    assert observation(lab.model.requests[-1]["messages"]) == EDIT
    calls = [[s for s in steps_of(r) if s.kind == "llm"] for r in (run, replayed)]
    assert [s.input for s in calls[1]] == [s.input for s in calls[0]]
    assert all(s.meta.get("replayed") for s in calls[1])
    assert "first_divergence" not in replayed.agent_snapshot

    # The fork: the edited observation reached the model, the diff points at it first.
    assert fork_said == answer(EDIT)
    assert (forked.parent_run_id, forked.fork_seq) == (run.pk, tool.seq)
    assert tool_step(forked).text == EDIT
    diff = diff_steps(steps_of(run), steps_of(forked))
    first = diff.rows[diff.first_divergence]
    assert (first.left.kind, first.left.seq, first.right.text) == ("tool", tool.seq, EDIT)


@pytest.mark.parametrize("name", NAMES)
def test_held_at_a_tool_breakpoint_and_edited_from_the_run_page(name, lab, user):
    session = lab.session(debug={"break_tools": ["get_weather"]})
    agent = lab.agent(name, session)
    try:
        run = wait_until(lambda: Run.objects.filter(user=user, status="paused").first(),
                         AGENT_TIMEOUT_S, "the agent's tool result held")
        pending = lab.state(run.pk)["detail"]["pending"]
    except BaseException:
        agent.kill()
        raise
    assert pending["kind"] == "tool" and pending["name"] == "get_weather"
    asked = len(lab.model.requests)
    assert agent.poll() is None and asked == 1  # held: its request waits in the gateway
    lab.control(run.pk, action="edit", seq=pending["seq"], input={"observation": EDIT})
    lab.control(run.pk, action="resume")
    code, said = finish(agent)
    run = Run.objects.get(pk=lab.end(session, code)["run"])
    assert said == answer(EDIT)
    assert observation(lab.model.requests[-1]["messages"]) == EDIT
    tool = tool_step(run)
    assert tool.text == EDIT and tool.meta["edited"] is True
    assert acts(run) == THINK_ACT_OBSERVE and run.status == "succeeded"


def test_five_frameworks_at_once_with_no_session_are_five_runs(lab, user):
    """Plain /gateway/v1, all at once: grouped by conversation, each agent its own run (the
    scripted server numbers every tool call call_0); each ends once quiet."""
    weathers = {name: f"sunny, {20 + i} °C" for i, name in enumerate(NAMES)}
    agents = {name: lab.agent(name, weather=w) for name, w in weathers.items()}
    said = {name: finish(agent)[1] for name, agent in agents.items()}
    assert said == {name: answer(w) for name, w in weathers.items()}

    def ended() -> list[Run] | None:
        runs = list(Run.objects.filter(user=user))
        return runs if all(r.status in FINISHED for r in runs) else None

    runs = wait_until(ended, 30, "the quiet runs ended")
    assert len(runs) == len(NAMES)
    by_weather = {tool_step(r).text: r for r in runs}
    assert set(by_weather) == set(weathers.values())
    for weather, run in by_weather.items():
        assert acts(run) == THINK_ACT_OBSERVE
        last = [s for s in steps_of(run) if s.kind == "llm"][-1]  # its own result, no other's
        assert observation(last.input["messages"]) == weather
        assert run.agent_snapshot["gateway"]["grouped_by"] == "conversation"
        assert run.status == "succeeded"


def test_the_example_agent_runs_on_the_embedded_model_through_the_gateway(
        live_url, user, python, embedded_llm):
    """examples/langgraph_weather.py, as its README says to run it, on the embedded model (a
    135M model's tool use is unreliable: it is one run with its calls, ended with the
    program)."""
    ModelProfile.objects.create(name=EMBEDDED_PROFILE, base_url=embedded_llm, model="",
                                temperature=0.0, max_tokens=128, timeout_s=120, retries=0)
    token = create_token(user, "example", "gateway")[1]
    session = launcher(live_url, token, "/gateway/sessions", {"name": "langgraph_weather"}, 201)
    code, said = finish(start(python, ROOT / "examples" / "langgraph_weather.py",
                              session["base_url"], token, model=EMBEDDED_PROFILE), ok=False)
    assert code in (0, 1) and said  # an answer, or "No answer within 8 steps."
    ended = launcher(live_url, token, f"/gateway/sessions/{session['session']}/end",
                     {"exit_code": code})
    run = Run.objects.get(pk=ended["run"])
    assert list(Run.objects.filter(user=user)) == [run]
    assert run.status == ("succeeded" if code == 0 else "failed")
    llm = [s for s in steps_of(run) if s.kind == "llm"]
    assert llm and all(s.status == "ok" for s in llm)
    assert llm[0].input["messages"][-1]["content"] == QUESTION
