"""Warming an agent's prompt (agentlab/runs/warm.py): the commands that start the embedded
model send each agent's first request once, so a person's first question does not wait for
the model to read the agent's prompt. The server here is the scripted OpenAI-compatible one
(tests/fake_openai.py), over HTTP with the real client: it shows what was sent."""

from __future__ import annotations

import pytest

from agentlab.models import Agent, Tool
from agentlab.runs.warm import QUESTION, warm
from tests.factories import scripted_profile
from tests.fake_openai import Fail, Reply
from traces.models import Run, Step

pytestmark = pytest.mark.django_db(transaction=True)


def react_agent(fake_llm) -> Agent:
    agent = Agent.objects.create(
        name="Weather", paradigm="react", model_profile=scripted_profile(fake_llm.base_url),
        system_prompt="You answer about the weather.",
        params={"mode": "function_calling", "few_shot": [
            {"role": "user", "content": "Weather in Rome?"},
            {"role": "assistant", "content": "Sunny."}]})
    agent.tools.set([Tool.objects.get(name="get_weather")])
    return agent


def test_the_agents_first_request_is_sent_once_for_one_token_and_nothing_is_recorded(
        fake_llm) -> None:
    agent = react_agent(fake_llm)
    # A reply that would make a run go on (a tool call, then another model call).
    fake_llm.script(Reply(tool_calls=[("get_weather", '{"city": "Rome"}')]),
                    Reply(text="Sunny."))
    assert warm(agent) >= 0
    (body,) = fake_llm.requests  # one call: the warm-up ends after it, whatever the reply
    assert body["max_tokens"] == 1 and not body.get("stream")
    # The prompt a run of this agent begins with: its system prompt, tools and examples.
    texts = [m.get("content") for m in body["messages"]]
    assert any("You answer about the weather." in (t or "") for t in texts)
    assert texts[-3:-1] == ["Weather in Rome?", "Sunny."] and QUESTION in texts[-1]
    assert [t["function"]["name"] for t in body["tools"]] == ["get_weather"]
    assert not Run.objects.exists() and not Step.objects.exists()


def test_a_server_that_fails_leaves_the_command_going(fake_llm, caplog) -> None:
    agent = react_agent(fake_llm)
    fake_llm.script(Fail(500, "the server broke"), Fail(500, "the server broke"),
                    Fail(500, "the server broke"))
    warm(agent)  # no exception: a command that warms goes on without it
    assert "warming agent 'Weather'" in caplog.text
