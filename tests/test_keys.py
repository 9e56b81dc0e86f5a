"""Which environment variables may hold a model profile's key: the admin's rule, and the list
of what the server itself reads kept complete."""

from __future__ import annotations

import ast

import pytest
from django.core.exceptions import ValidationError

from agentlab.llm.keys import SERVER_VARIABLES, key_variable_problem
from agentlab.models import ModelProfile
from agentlab.paths import REPO_ROOT

READERS = {"get", "env_bool", "env_list", "env_int", "getenv"}


def variables_read(path) -> set[str]:
    """Every constant name passed to os.environ.get / os.environ[...] / env_*() in a module."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in READERS and isinstance(node.args[0].value, str):
                names.add(node.args[0].value)
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
                and "environ" in ast.unparse(node.value):
            names.add(node.slice.value)
    return names


def test_every_variable_the_settings_read_is_refused_as_a_key_variable():
    read = set()
    for module in ("settings.py", "paths.py", "secrets.py"):
        read |= variables_read(REPO_ROOT / "agentlab" / module)
    assert {"SECRET_KEY", "DATABASE_URL", "REDIS_URL", "DEBUG"} <= read  # the scan sees them
    assert read <= SERVER_VARIABLES, read - SERVER_VARIABLES
    for name in read:
        assert key_variable_problem(name), name


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HF_TOKEN",
                                  "GROQ_KEY", ""])
def test_key_like_names_the_operator_allows_are_accepted(name):
    assert key_variable_problem(name, frozenset({name})) is None


def test_a_key_like_name_off_the_operators_list_is_refused():
    assert "not one of the variables" in key_variable_problem("GITHUB_TOKEN")
    assert "not one of the variables" in key_variable_problem("OPENAI_API_KEY", frozenset())


@pytest.mark.parametrize(("name", "why"), [
    ("SECRET_KEY", "the server itself runs on"), ("DATABASE_URL", "the server itself runs on"),
    ("DJANGO_SECRET_KEY", "the server itself runs on"), ("HOME", "does not look like"),
    ("AWS_SECRET_ACCESS", "does not look like"), ("openai_api_key", "does not look like"),
])
def test_other_names_are_refused_with_the_reason(name, why):
    assert why in key_variable_problem(name)


@pytest.mark.django_db
def test_the_admin_form_refuses_the_servers_own_variables():
    profile = ModelProfile(name="mine", model="m", base_url="http://127.0.0.1:9/v1",
                           api_key_env="SECRET_KEY")
    with pytest.raises(ValidationError) as info:
        profile.full_clean()
    assert "server itself runs on" in str(info.value.message_dict["api_key_env"])
    profile.api_key_env = "OPENAI_API_KEY"
    profile.full_clean()


@pytest.mark.django_db
def test_a_row_naming_a_variable_off_the_list_is_a_system_warning():
    from django.core.checks import run_checks

    from agentlab.models import McpServer

    ModelProfile.objects.create(name="old", model="m", api_key_env="GITHUB_TOKEN")
    McpServer.objects.create(name="hub", transport="http", url="http://127.0.0.1:9/mcp",
                             header_name="Authorization", header_env="AWS_SESSION_TOKEN")
    ModelProfile.objects.create(name="fine", model="m", api_key_env="OPENAI_API_KEY")
    warned = [m.msg for m in run_checks() if m.id == "agentlab.W003"]
    assert len(warned) == 2, warned
    assert "Model profile 'old': GITHUB_TOKEN is not one of" in warned[0] + warned[1]
    assert "MCP server 'hub': AWS_SESSION_TOKEN" in warned[0] + warned[1]
