"""A whole run, from an Agent row to a recorded trace: runner + recorder + ReAct + real HTTP.

The model is the scripted OpenAI-compatible server (deterministic replies); everything else is
real: the openai SDK, the tools executor, the database, the run_agent command."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from agentlab.models import Agent, ModelProfile, Tool
from agentlab.runs.snapshot import create_run, snapshot
from tests.fake_openai import Reply
from traces.models import Run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def agent(fake_llm):
    profile = ModelProfile.objects.create(name="Scripted", base_url=fake_llm.base_url,
                                          model="scripted-model", retries=0,
                                          price_in_per_m=1, price_out_per_m=2)
    agent = Agent(name="Calc agent", paradigm="react", model_profile=profile,
                  params={"mode": "function_calling"})
    agent.full_clean()
    agent.save()
    agent.tools.set(Tool.objects.filter(name__in=["calculator", "get_weather"]))
    return agent


def test_run_agent_records_every_step_in_order(agent, fake_llm, staff, capsys):
    fake_llm.script(Reply(tool_calls=[("calculator", '{"expression": "6*7"}')], usage=(50, 10)),
                    Reply(text="6 times 7 is 42.", usage=(80, 8)))
    call_command("run_agent", "Calc agent", "What is 6*7?", "--no-model")
    out = capsys.readouterr().out
    assert "calculator" in out and "SUCCEEDED: 6 times 7 is 42." in out

    run = Run.objects.get()
    assert run.status == "succeeded" and run.final_answer == "6 times 7 is 42."
    assert (run.llm_calls, run.tool_calls, run.tokens_in, run.tokens_out) == (2, 1, 130, 18)
    assert run.cost_usd == pytest.approx((130 * 1 + 18 * 2) / 1e6)
    steps = list(run.steps.all())
    assert [s.seq for s in steps] == list(range(1, len(steps) + 1))
    assert [s.kind for s in steps] == ["llm", "tool", "llm", "final"]
    llm, tool, _, final = steps
    assert llm.input["messages"][-1]["content"] == "What is 6*7?"
    assert llm.input["tools"][0]["function"]["name"] in {"calculator", "get_weather"}
    assert llm.output["tool_calls"][0]["name"] == "calculator" and llm.status == "ok"
    assert tool.name == "calculator" and tool.output["ok"] and "42" in tool.text
    assert final.text == "6 times 7 is 42."
    assert all(s.status != "running" for s in steps)
    # The model saw the observation on the second call.
    second = fake_llm.requests[1]["messages"]
    assert any(m["role"] == "tool" and "42" in str(m["content"]) for m in second)


def test_a_run_whose_endpoint_is_down_fails_with_the_reason(agent, staff, capsys):
    agent.model_profile.base_url = "http://127.0.0.1:9/v1"
    agent.model_profile.save()
    with pytest.raises(SystemExit) as exit_info:
        call_command("run_agent", "Calc agent", "What is 6*7?", "--no-model")
    assert exit_info.value.code == 1
    run = Run.objects.get()
    assert run.status == "failed" and "cannot reach http://127.0.0.1:9/v1" in run.error
    kinds = list(run.steps.values_list("kind", flat=True))
    assert kinds[-2:] == ["error", "final"]
    assert "cannot reach" in capsys.readouterr().out


def test_an_unknown_agent_lists_the_agents(agent, staff):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="Calc agent"):
        call_command("run_agent", "Nope", "hi")


def test_the_snapshot_freezes_the_agent_and_never_holds_a_key(agent, staff, monkeypatch):
    monkeypatch.setenv("AGENTLAB_TEST_SECRET_KEY", "sk-do-not-store-me")
    agent.model_profile.api_key_env = "AGENTLAB_TEST_SECRET_KEY"
    agent.model_profile.save()
    run = create_run(agent, staff, "hello")
    snap = run.agent_snapshot
    assert snap["paradigm"] == "react" and snap["params"]["mode"] == "function_calling"
    assert snap["params"]["max_iterations"]  # defaults filled in
    assert snap["profiles"]["default"]["api_key_env"] == "AGENTLAB_TEST_SECRET_KEY"
    assert "sk-do-not-store-me" not in json.dumps(snap)
    agent.system_prompt = "edited later"
    agent.save()
    run.refresh_from_db()
    assert run.agent_snapshot == snap == {**snapshot(agent), "system_prompt": ""}


def test_default_data_gives_four_react_agents_on_the_embedded_profile():
    from agentlab.defaults import load_defaults

    load_defaults()
    agents = Agent.objects.filter(paradigm="react").order_by("name")
    modes = {a.name: (a.params["mode"], a.params.get("reflector")) for a in agents}
    assert modes["ReAct (function calling)"][0] == "function_calling"
    assert modes["ReAct (text)"][0] == "text" and modes["ReAct (JSON)"][0] == "json"
    assert modes["ReAct + rule reflector"] == ("json", "rule")
    assert all(a.model_profile.is_embedded for a in agents)
    assert agents[0].tools.filter(name="calculator").exists()
    assert not agents[0].tools.filter(side_effects=True).exists()
