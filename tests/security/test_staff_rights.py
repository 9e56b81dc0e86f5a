"""Staff whose rights are limited by Django's permissions try to reach further, through the
real admin with the Django test client: make the server send one of its own secrets to their
endpoint, run a command of their choice as the server, run the admin's actions with view
rights only; and an ordinary owner reads an MCP server's command out of a run's export."""

from __future__ import annotations

import json

import pytest
from django.contrib.admin.sites import site
from django.contrib.auth.models import Permission
from django.core.exceptions import PermissionDenied
from django.test import RequestFactory
from django.urls import reverse

from agentlab.models import Agent, McpServer, ModelProfile, Tool
from agentlab.runs.snapshot import snapshot
from agentlab.tools.mcp import HTTP, McpError, McpServerConfig, list_tools
from tests.fake_openai import Reply
from tests.mcp_processes import SERVER
from traces.models import Run

pytestmark = pytest.mark.django_db(transaction=True)

AWS_SECRET = "aws-secret-wJalrXUtnFEMI-K7MDENG"
GITHUB_SECRET = "ghp_server0wnGitHubToken123"
MCP_ARG_TOKEN = "tok-in-the-args-4242"
PROFILES = "/admin/agentlab/modelprofile/"
SERVERS = "/admin/agentlab/mcpserver/"


@pytest.fixture
def server_secrets(monkeypatch):
    """The server's environment holds other secrets besides the LLM keys it allows."""
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", AWS_SECRET)
    monkeypatch.setenv("GITHUB_TOKEN", GITHUB_SECRET)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-the-servers-openai-key")


def staff_with(django_user_model, username: str, *codenames: str):
    """A staff account (not a superuser) holding exactly these permissions."""
    user = django_user_model.objects.create_user(username, is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    return django_user_model.objects.get(pk=user.pk)  # a fresh permission cache


def profile_form(**values: object) -> dict[str, object]:
    return {"name": "mine", "base_url": "", "model": "m", "api_key_env": "",
            "temperature": "", "max_tokens": "", "timeout_s": "5", "retries": "0",
            "fallback": "", "price_in_per_m": "0", "price_out_per_m": "0", **values}


def ping(client, *profiles: ModelProfile):
    return client.post(PROFILES, {"action": "ping",
                                  "_selected_action": [p.pk for p in profiles]}, follow=True)


# ------------------------------------------------- 1. a key variable is one the operator allows


class TestKeyVariables:
    def test_a_profile_editor_cannot_make_the_test_message_carry_a_server_secret(
            self, client, django_user_model, fake_llm, server_secrets):
        editor = staff_with(django_user_model, "editor", "add_modelprofile",
                            "change_modelprofile", "view_modelprofile")
        client.force_login(editor)
        client.post(f"{PROFILES}add/", profile_form(base_url=fake_llm.base_url,
                                                    api_key_env="AWS_SECRET_ACCESS_KEY"))
        profile = ModelProfile.objects.get(name="mine")  # saved: the variable is not theirs
        assert profile.api_key_env == ""
        fake_llm.script(Reply(text="hi"))
        ping(client, profile)
        assert fake_llm.headers and not [h for h in fake_llm.headers
                                         if AWS_SECRET in json.dumps(h)]

    def test_a_profile_editor_cannot_point_a_keyed_profile_at_their_endpoint(
            self, client, django_user_model, fake_llm, server_secrets):
        keyed = ModelProfile.objects.create(name="openai", base_url="https://api.openai.com/v1",
                                            model="m", api_key_env="OPENAI_API_KEY")
        editor = staff_with(django_user_model, "editor", "change_modelprofile",
                            "view_modelprofile")
        client.force_login(editor)
        client.post(f"{PROFILES}{keyed.pk}/change/",
                    profile_form(name="openai", base_url=fake_llm.base_url,
                                 api_key_env="GITHUB_TOKEN"))
        keyed.refresh_from_db()
        assert (keyed.base_url, keyed.api_key_env) == ("https://api.openai.com/v1",
                                                       "OPENAI_API_KEY")

    @pytest.mark.parametrize("variable", ["AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN"])
    def test_not_even_a_superuser_names_a_variable_off_the_operators_list(
            self, client, staff, variable):
        client.force_login(staff)
        page = client.post(f"{PROFILES}add/", profile_form(api_key_env=variable))
        assert page.status_code == 200 and not ModelProfile.objects.exists()
        assert "AGENTLAB_KEY_VARIABLES" in page.content.decode()

    def test_the_client_refuses_a_variable_off_the_list_whatever_the_row_says(
            self, client, staff, fake_llm, server_secrets):
        # A row written past the form (an old row, a list narrowed since): no request at all.
        forged = ModelProfile.objects.create(name="forged", base_url=fake_llm.base_url,
                                             model="m", api_key_env="GITHUB_TOKEN", retries=0)
        client.force_login(staff)
        page = ping(client, forged).content.decode()
        assert "not one of the variables the operator allows" in page
        assert fake_llm.requests == []

    def test_an_mcp_header_variable_is_on_the_same_list(self, client, staff, server_secrets):
        client.force_login(staff)
        page = client.post(f"{SERVERS}add/", {
            "name": "leak", "transport": "http", "enabled": "on", "timeout_s": "5",
            "command": "", "args": "[]", "env_names": "[]", "url": "http://127.0.0.1:9/mcp",
            "header_name": "Authorization", "header_env": "GITHUB_TOKEN"})
        assert page.status_code == 200 and not McpServer.objects.exists()
        config = McpServerConfig(name="leak", transport=HTTP, url="http://127.0.0.1:9/mcp",
                                 header_name="Authorization", header_env="GITHUB_TOKEN",
                                 timeout_s=2)
        import asyncio

        with pytest.raises(McpError, match="not one of the variables"):
            asyncio.run(list_tools(config))

    def test_the_operator_sets_the_list(self):
        from agentlab.llm.keys import (
            DEFAULT_KEY_VARIABLES,
            allowed_key_variables,
            key_variable_problem,
        )

        assert allowed_key_variables({}) == frozenset(DEFAULT_KEY_VARIABLES)
        mine = allowed_key_variables({"AGENTLAB_KEY_VARIABLES": " AZURE_OPENAI_API_KEY, "})
        assert mine == {"AZURE_OPENAI_API_KEY"}
        assert key_variable_problem("AZURE_OPENAI_API_KEY", mine) is None
        assert key_variable_problem("OPENAI_API_KEY", mine)
        assert key_variable_problem("SECRET_KEY", frozenset({"SECRET_KEY"}))  # never


# ---------------------------------------------- 2. what runs a command is the superuser's only


class TestMcpCommands:
    def test_staff_who_may_add_servers_cannot_add_a_command(self, client, django_user_model):
        editor = staff_with(django_user_model, "editor", "add_mcpserver", "change_mcpserver",
                            "view_mcpserver")
        client.force_login(editor)
        page = client.post(f"{SERVERS}add/", {
            "name": "evil", "transport": "stdio", "enabled": "on", "timeout_s": "5",
            "command": "sh", "args": '["-c", "env > /tmp/loot"]', "env_names": "[]",
            "url": "", "header_name": "", "header_env": ""})
        assert page.status_code == 403 and not McpServer.objects.exists()

    def test_staff_who_may_change_servers_cannot_change_the_command(
            self, client, django_user_model):
        row = McpServer.objects.create(name="lab", command="python", args=[SERVER])
        editor = staff_with(django_user_model, "editor", "change_mcpserver", "view_mcpserver")
        client.force_login(editor)
        client.post(f"{SERVERS}{row.pk}/change/", {
            "name": "lab", "transport": "stdio", "enabled": "on", "timeout_s": "7",
            "command": "sh", "args": '["-c", "env > /tmp/loot"]', "env_names": '["HOME"]',
            "url": "", "header_name": "", "header_env": ""})
        row.refresh_from_db()
        assert (row.command, row.args, row.env_names) == ("python", [SERVER], [])
        assert row.timeout_s == 7  # what is theirs still changes

    def test_a_server_process_gets_a_minimal_environment(self, monkeypatch):
        import asyncio

        from agentlab.tools.mcp import call_tool

        monkeypatch.setenv("OPENAI_API_KEY", "sk-parent-only")
        monkeypatch.setenv("MCP_TEST_GREETING", "handed-on")
        config = McpServerConfig(name="lab", command="python", args=(SERVER,),
                                 env_names=("MCP_TEST_GREETING",), timeout_s=20)
        names = set(asyncio.run(call_tool(config, "environment", {})).split())
        assert "MCP_TEST_GREETING" in names and "OPENAI_API_KEY" not in names
        # LC_CTYPE: set by the child's Python itself (PEP 538's locale coercion).
        assert names <= {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LC_CTYPE",
                         "MCP_TEST_GREETING"}


# ------------------------------------------------- 3. an action needs the right it exercises


class TestActions:
    def test_view_only_staff_cannot_send_a_test_message(self, client, django_user_model,
                                                        fake_llm):
        profile = ModelProfile.objects.create(name="p", base_url=fake_llm.base_url, model="m",
                                              retries=0)
        viewer = staff_with(django_user_model, "viewer", "view_modelprofile")
        client.force_login(viewer)
        assert client.get(PROFILES).status_code == 200  # they do see the list
        fake_llm.script(Reply(text="hi"))
        ping(client, profile)
        assert fake_llm.requests == []

    def test_view_only_staff_cannot_refresh_tools(self, client, django_user_model):
        row = McpServer.objects.create(name="lab", command="python", args=[SERVER])
        viewer = staff_with(django_user_model, "viewer", "view_mcpserver")
        client.force_login(viewer)
        client.post(SERVERS, {"action": "refresh_tools", "_selected_action": [row.pk]},
                    follow=True)
        assert not Tool.objects.filter(mcp_server=row).exists()
        row.refresh_from_db()
        assert row.refreshed is None

    def test_the_actions_check_the_right_themselves(self, django_user_model):
        viewer = staff_with(django_user_model, "viewer", "view_modelprofile", "view_mcpserver")
        request = RequestFactory().post("/")
        request.user = viewer
        for model, action in ((ModelProfile, "ping"), (McpServer, "refresh_tools")):
            model_admin = site._registry[model]
            assert action not in model_admin.get_actions(request)
            with pytest.raises(PermissionDenied):
                getattr(model_admin, action)(request, model.objects.none())


# -------------------------------------------- 4. exports never carry what an MCP server runs


@pytest.fixture
def mcp_run(user):
    """An ordinary owner's run of an agent with an MCP tool whose arguments hold a token."""
    server = McpServer.objects.create(name="lab", command="python",
                                      args=[SERVER, "--token", MCP_ARG_TOKEN],
                                      env_names=["MCP_TEST_GREETING"])
    tool = Tool.objects.create(name="mcp__lab__add", mcp_server=server, mcp_tool="add",
                               mcp_schema={"type": "object"}, category="mcp")
    profile = ModelProfile.objects.create(name="p", base_url="http://127.0.0.1:9/v1", model="m")
    agent = Agent.objects.create(name="a", paradigm="react", model_profile=profile,
                                 params={"mode": "function_calling"})
    agent.tools.set([tool])
    snap = snapshot(agent)
    assert MCP_ARG_TOKEN in json.dumps(snap)  # the run itself needs it
    return Run.objects.create(user=user, agent=agent, agent_name="a", paradigm="react",
                              agent_snapshot=snap, input="q", status="succeeded")


def test_an_owners_exports_never_carry_an_mcp_servers_command(client, user, mcp_run):
    client.force_login(user)
    for name in ("run_export", "run_export_otlp", "run_export_otlp_protobuf"):
        text = client.get(reverse(name, args=[mcp_run.pk])).content.decode(errors="replace")
        assert MCP_ARG_TOKEN not in text and SERVER not in text, name
        assert "MCP_TEST_GREETING" not in text, name
    bundle = client.get(reverse("run_export", args=[mcp_run.pk])).json()
    server = bundle["run"]["agent_snapshot"]["tools"]["mcp__lab__add"]["mcp"]["server"]
    assert server["name"] == "lab" and "command" not in server and "args" not in server
