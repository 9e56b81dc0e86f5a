"""MCP servers in the admin: "Refresh tools" makes Tool rows with the listed schemas and the
built-ins' policies, and a ReAct run (real openai SDK against the scripted server) calls an MCP
tool over stdio, its observation in the trace."""

from __future__ import annotations

import pytest
from django.core.checks import run_checks
from django.core.exceptions import ValidationError
from django.core.management import call_command

from agentlab.models import Agent, McpServer, ModelProfile, Tool
from agentlab.tool_rows import refresh_mcp
from tests.fake_openai import Reply
from tests.mcp_processes import SERVER, running
from traces.models import Run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def server() -> McpServer:
    row = McpServer(name="lab", command="python", args=[SERVER, "marker-rows"],
                    env_names=["MCP_TEST_GREETING"])
    row.full_clean()
    row.save()
    return row


def test_refresh_creates_rows_with_schemas_and_approval_for_side_effects(server):
    created, updated = refresh_mcp(server)
    assert "mcp__lab__add" in created and updated == []
    add = Tool.objects.get(name="mcp__lab__add")
    assert add.category == "mcp" and add.mcp_tool == "add" and add.mcp_server == server
    assert add.mcp_schema["required"] == ["a", "b"] and add.mcp_description == "Add two integers."
    assert not add.side_effects and not add.needs_approval  # the server says read-only
    shout = Tool.objects.get(name="mcp__lab__shout")
    assert shout.side_effects and shout.needs_approval
    # A second refresh keeps the admin's choices and updates what the server says.
    Tool.objects.filter(name="mcp__lab__shout").update(needs_approval=False, timeout_s=4)
    Tool.objects.filter(name="mcp__lab__add").update(mcp_description="old")
    created, updated = refresh_mcp(server)
    assert created == [] and "mcp__lab__shout" in updated
    shout.refresh_from_db()
    assert (shout.needs_approval, shout.timeout_s) == (False, 4)
    assert Tool.objects.get(name="mcp__lab__add").mcp_description == "Add two integers."
    assert not [m for m in run_checks() if m.id == "agentlab.E002"]
    assert running("marker-rows") == []


def test_a_server_that_never_answers_fails_the_refresh_within_its_timeout():
    import time

    stuck = McpServer.objects.create(name="stuck", command="sleep", args=["97.5"],
                                     timeout_s=1)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        refresh_mcp(stuck)
    assert time.monotonic() - started < 5
    assert running("97.5") == [] and not stuck.tools.exists()


def test_the_server_environment_names_and_header_variable_are_checked():
    for bad in (["SECRET_KEY"], ["DATABASE_URL"], ["sk-abc"], "PATH"):
        with pytest.raises(ValidationError):
            McpServer(name="x", command="python", env_names=bad).full_clean()
    with pytest.raises(ValidationError):
        McpServer(name="x", transport="http", url="http://127.0.0.1:1/mcp",
                  header_name="Authorization", header_env="DJANGO_SECRET_KEY").full_clean()
    with pytest.raises(ValidationError):
        McpServer(name="Bad Name", command="python").full_clean()
    with pytest.raises(ValidationError):
        McpServer(name="nocmd").full_clean()


def test_the_admin_action_refreshes_and_reports_a_server_that_is_down(server, staff, client):
    down = McpServer.objects.create(name="down", command="/nonexistent/server")
    client.force_login(staff)
    page = client.post("/admin/agentlab/mcpserver/", {
        "action": "refresh_tools", "_selected_action": [server.pk, down.pk]}, follow=True)
    text = page.content.decode()
    assert "Lab: 6 new tool(s): mcp__lab__add" in text  # (the admin capitalises a message)
    assert "Down: FileNotFoundError" in text and Tool.objects.filter(mcp_server=down).count() == 0
    tool = Tool.objects.get(name="mcp__lab__add")
    change = client.get(f"/admin/agentlab/tool/{tool.pk}/change/").content.decode()
    assert "MCP server lab" in change and "&quot;integer&quot;" in change


def test_a_react_run_calls_an_mcp_tool_and_the_trace_shows_the_observation(
        server, fake_llm, staff, capsys, monkeypatch):
    refresh_mcp(server)
    monkeypatch.setenv("MCP_TEST_GREETING", "hello from the lab")
    profile = ModelProfile.objects.create(name="Scripted", base_url=fake_llm.base_url,
                                          model="scripted-model", retries=0)
    agent = Agent(name="MCP agent", paradigm="react", model_profile=profile,
                  params={"mode": "function_calling"})
    agent.full_clean()
    agent.save()
    agent.tools.set(Tool.objects.filter(name__in=["mcp__lab__add", "mcp__lab__whoami"]))
    fake_llm.script(Reply(tool_calls=[("mcp__lab__add", '{"a": 2, "b": "x"}')]),
                    Reply(tool_calls=[("mcp__lab__add", '{"a": 2, "b": 40}')]),
                    Reply(tool_calls=[("mcp__lab__whoami", "{}")]),
                    Reply(text="It is 42."))
    call_command("run_agent", "MCP agent", "What is 2+40?", "--no-model")
    run = Run.objects.get()
    assert run.status == "succeeded" and run.final_answer == "It is 42."
    offered = {t["function"]["name"]: t["function"]
               for t in fake_llm.requests[0]["tools"]}
    assert offered["mcp__lab__add"]["parameters"]["required"] == ["a", "b"]
    assert offered["mcp__lab__add"]["description"] == "Add two integers."
    wrong, add, whoami = list(run.steps.filter(kind="tool"))
    assert not wrong.output["ok"] and wrong.output["error_type"] == "validation"
    assert add.name == "mcp__lab__add" and add.output["ok"] and "2 + 40 = 42" in add.text
    assert "hello from the lab" in whoami.text  # a named variable reaches the process
    second = fake_llm.requests[2]["messages"]
    assert any(m["role"] == "tool" and "2 + 40 = 42" in str(m["content"]) for m in second)
    assert running("marker-rows") == []


def test_a_disabled_server_disables_its_tools(server, fake_llm):
    refresh_mcp(server)
    from agentlab.runs.build import executor_for
    from agentlab.runs.snapshot import snapshot

    profile = ModelProfile.objects.create(name="p", model="m")
    agent = Agent.objects.create(name="A", paradigm="react", model_profile=profile)
    agent.tools.set(Tool.objects.filter(mcp_server=server))
    assert "mcp__lab__add" in executor_for(snapshot(agent)["tools"]).names
    server.enabled = False
    server.save()
    assert executor_for(snapshot(agent)["tools"]).names == []
