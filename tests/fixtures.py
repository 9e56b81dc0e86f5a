"""Users for the tests (a pytest plugin, loaded by conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user(username="alice", password="pw-alice-123")


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user(username="bob", password="pw-bob-123")


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_superuser(username="root", password="pw-root-123")


@pytest.fixture
def own_var_dir(tmp_path, monkeypatch):
    """A fresh state folder: demo databases are built anew inside it."""
    monkeypatch.setenv("AGENTLAB_VAR_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture(scope="module")
def ex():
    """A ToolExecutor over every built-in tool, with default policies."""
    from agentlab.tools.executor import ToolExecutor
    from agentlab.tools.registry import builtin_tools

    return ToolExecutor(builtin_tools())


@pytest.fixture
def calc_agent(fake_llm):
    """A function-calling ReAct agent with the calculator, on the scripted model server."""
    from agentlab.models import Agent, ModelProfile, Tool

    profile = ModelProfile.objects.create(name="Scripted", base_url=fake_llm.base_url,
                                          model="scripted-model", retries=0)
    agent = Agent(name="Calc agent", paradigm="react", model_profile=profile,
                  params={"mode": "function_calling"})
    agent.full_clean()
    agent.save()
    agent.tools.set(Tool.objects.filter(name="calculator"))
    return agent


@pytest.fixture
def agent(calc_agent):
    """The agent most live tests run: the calculator agent on the scripted model (a module
    that needs another defines its own `agent`)."""
    return calc_agent


@pytest.fixture
def conversation(agent, user):
    """A conversation of `user` with `agent`."""
    from agentlab.chat.models import Conversation

    return Conversation.objects.create(user=user, agent=agent)
