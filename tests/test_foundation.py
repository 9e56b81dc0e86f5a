"""Settings, system checks and the pages a newcomer meets first."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest
from django.core.checks import run_checks
from django.core.management import call_command

from agentlab.models import ModelProfile
from agentlab.paths import REPO_ROOT
from agentlab.secrets import load_secret_key


def test_secret_key_is_generated_once_and_private(tmp_path, monkeypatch):
    monkeypatch.delenv("SECRET_KEY", raising=False)
    key = load_secret_key(tmp_path)
    assert len(key) >= 50
    assert load_secret_key(tmp_path) == key
    assert stat.S_IMODE((tmp_path / "secret_key").stat().st_mode) == 0o600
    monkeypatch.setenv("SECRET_KEY", "from-env")
    assert load_secret_key(tmp_path) == "from-env"


def test_no_secret_key_in_the_repository():
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert "var/secret_key" not in tracked
    assert "SECRET_KEY =" not in (REPO_ROOT / "agentlab/settings.py").read_text().replace(
        "SECRET_KEY = load_secret_key(VAR_DIR)", ""
    )


def _settings_in_subprocess(env: dict[str, str], expr: str) -> str:
    code = f"import django, os; django.setup(); from django.conf import settings; print({expr})"
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "agentlab.settings", **env},
        capture_output=True, text=True, check=True,
    ).stdout.strip()


def test_database_defaults_to_sqlite_in_wal_mode_and_postgres_from_url(tmp_path):
    env = {"AGENTLAB_VAR_DIR": str(tmp_path), "DATABASE_URL": ""}
    db = _settings_in_subprocess(env, "settings.DATABASES['default']")
    assert "sqlite3" in db and "journal_mode=WAL" in db and str(tmp_path) in db
    env["DATABASE_URL"] = "postgres://u:p@db.example:5432/agentlab"
    assert "postgresql" in _settings_in_subprocess(env, "settings.DATABASES['default']['ENGINE']")


def test_channel_layer_is_redis_only_when_configured(tmp_path):
    env = {"AGENTLAB_VAR_DIR": str(tmp_path)}
    layer = "settings.CHANNEL_LAYERS['default']['BACKEND']"
    assert _settings_in_subprocess(env, layer) == "channels.layers.InMemoryChannelLayer"
    env["REDIS_URL"] = "redis://127.0.0.1:6379/0"
    assert _settings_in_subprocess(env, layer) == \
        "channels_redis.pubsub.RedisPubSubChannelLayer"


def test_debug_is_off_unless_asked(tmp_path):
    env = {"AGENTLAB_VAR_DIR": str(tmp_path), "DEBUG": ""}
    assert _settings_in_subprocess(env, "settings.DEBUG") == "False"
    env["DEBUG"] = "true"
    assert _settings_in_subprocess(env, "settings.DEBUG") == "True"


@pytest.mark.django_db
def test_w001_warns_about_an_unset_key_variable(monkeypatch):
    ModelProfile.objects.create(name="OpenAI", base_url="https://api.openai.com/v1",
                                model="gpt-4o-mini", api_key_env="AGENTLAB_TEST_KEY")
    monkeypatch.delenv("AGENTLAB_TEST_KEY", raising=False)
    ids = [m.id for m in run_checks()]
    assert "agentlab.W001" in ids
    monkeypatch.setenv("AGENTLAB_TEST_KEY", "sk-test")
    assert "agentlab.W001" not in [m.id for m in run_checks()]


@pytest.mark.django_db
def test_profile_refuses_a_pasted_key_in_the_variable_field():
    from django.core.exceptions import ValidationError

    profile = ModelProfile(name="x", model="m", api_key_env="sk-abc123secret")
    with pytest.raises(ValidationError, match="NAME of an environment variable"):
        profile.full_clean()


@pytest.mark.django_db
def test_setup_is_idempotent_and_prints_the_admin_password_once(capsys):
    call_command("setup")
    first = capsys.readouterr().out
    assert "password:" in first and "Local SmolLM2" in first
    call_command("setup")
    second = capsys.readouterr().out
    assert "password:" not in second and "already there" in second
    assert ModelProfile.objects.filter(name="Local SmolLM2", base_url="").count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["/", "/admin/", "/runs/"])
def test_pages_redirect_anonymous_users_to_login(client, url):
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/login/") or "/admin/login/" in response["Location"]


@pytest.mark.django_db
def test_home_and_admin_load_for_a_logged_in_user(client, staff):
    ModelProfile.objects.create(name="Local SmolLM2", model="")
    client.force_login(staff)
    home = client.get("/")
    assert home.status_code == 200
    assert b"Local SmolLM2" in home.content and b"embedded" in home.content
    assert b"htmx" in home.content  # {% htmx_script %}
    admin = client.get("/admin/agentlab/modelprofile/")
    assert admin.status_code == 200 and b"Local SmolLM2" in admin.content


@pytest.mark.django_db
def test_home_lists_the_default_agents_with_their_demo_questions(client, user):
    from agentlab.defaults import DEFAULT_AGENTS, load_defaults

    load_defaults()
    client.force_login(user)
    page = client.get("/").content.decode()
    for spec in DEFAULT_AGENTS:
        assert f"Run the demo question of {spec.name}" in page
    assert "Where was the founder of the company that makes the Zephyr X2 born?" in page


@pytest.mark.django_db
def test_login_page_and_health_are_public(client):
    assert client.get("/login/").status_code == 200
    assert client.get("/healthz").json() == {"ok": True}
