"""Tool rows in the admin: synced from the registry, checked, and — frozen in an agent's
snapshot — turned into the executor a run uses."""

from __future__ import annotations

import asyncio

import pytest
from django.contrib.auth.models import Group
from django.core.checks import run_checks

from agentlab.models import Agent, ModelProfile, Tool
from agentlab.runs.build import executor_for
from agentlab.runs.snapshot import snapshot
from agentlab.tool_rows import sync_tools
from agentlab.tools.registry import builtin_tools

pytestmark = pytest.mark.django_db


def test_every_registered_tool_has_a_row_and_writers_need_approval():
    sync_tools()
    rows = {t.name: t for t in Tool.objects.all()}
    assert set(builtin_tools()) <= set(rows)
    for name, spec in builtin_tools().items():
        assert rows[name].needs_approval == spec.side_effects, name
    assert rows["send_email"].needs_approval and not rows["calculator"].needs_approval


def test_a_row_without_implementation_and_an_unknown_paradigm_fail_the_checks():
    Tool.objects.create(name="vanished_tool")
    profile = ModelProfile.objects.create(name="p", model="m")
    Agent.objects.create(name="Odd", paradigm="telepathy", model_profile=profile)
    messages = {m.id: m.msg for m in run_checks()}
    assert "vanished_tool" in messages["agentlab.E002"]
    assert "telepathy" in messages["agentlab.E001"] and "react" in str(
        [m.hint for m in run_checks() if m.id == "agentlab.E001"])


def test_admin_settings_reach_the_executor(django_user_model):
    sync_tools()
    row = Tool.objects.get(name="calculator")
    row.description = "Adds things up (admin text)"
    row.max_observation_chars = 5
    row.save()
    staff_only = Group.objects.create(name="analysts")
    weather = Tool.objects.get(name="get_weather")
    weather.allowed_groups.add(staff_only)
    user = django_user_model.objects.create_user("carol", password="x")
    agent = Agent.objects.create(name="Tools", paradigm="react",
                                 model_profile=ModelProfile.objects.create(name="p", model="m"))
    agent.tools.set(Tool.objects.filter(name__in=["calculator", "get_weather"]))

    def executor_of(user):  # as agentlab.runs.execution builds it for a run of this user
        groups = user.groups.values_list("name", flat=True)
        return executor_for(snapshot(agent)["tools"], groups, user.is_superuser)

    executor = executor_of(user)
    assert executor.names == ["calculator"]
    schema = executor.openai_tools()[0]["function"]
    assert schema["description"] == "Adds things up (admin text)"
    result = asyncio.run(executor.run("calculator", {"expression": "1234567 * 1"}))
    assert result.output == "1234567" and result.truncated
    assert "[truncated: 7 characters, first 5 shown]" in result.observation
    denied = asyncio.run(executor.run("get_weather", {"city": "Paris"}))
    assert denied.error_type == "permission"
    user.groups.add(staff_only)
    allowed = executor_of(user)
    assert allowed.names == ["calculator", "get_weather"]
