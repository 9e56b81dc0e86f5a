"""The production profile (AGENTLAB_ENV=production) and the Content-Security-Policy every page
passes: `check --deploy` clean, secure cookies, HSTS, the proxy's SSL header, no inline script.

The profile is read when settings load, so those cases run in a subprocess, as a server would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from agentlab.paths import REPO_ROOT

PRODUCTION = {"AGENTLAB_ENV": "production", "DEBUG": "", "ALLOWED_HOSTS": "lab.example"}

# Over HTTPS behind the proxy: the login page's headers and cookies, as JSON.
LOGIN_OVER_TLS = """
import json, django
django.setup()
from django.test import Client
plain = Client().get("/login/", HTTP_HOST="lab.example")
resp = Client().get("/login/", HTTP_HOST="lab.example", HTTP_X_FORWARDED_PROTO="https")
print(json.dumps({"plain": [plain.status_code, plain.get("Location", "")],
                  "status": resp.status_code, "hsts": resp.get("Strict-Transport-Security", ""),
                  "csp": resp.get("Content-Security-Policy", ""),
                  "cookies": {k: bool(v["secure"]) for k, v in resp.cookies.items()}}))
"""


def _run(args: list[str], env: dict[str, str], tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "agentlab.settings",
             "AGENTLAB_VAR_DIR": str(tmp_path), **env})


def test_check_deploy_is_clean_in_production(tmp_path):
    done = _run(["manage.py", "check", "--deploy", "--fail-level", "WARNING"], PRODUCTION,
                tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout


def test_check_deploy_warns_outside_production(tmp_path):
    # The same check without the profile: what the profile is there to fix.
    done = _run(["manage.py", "check", "--deploy"], {"AGENTLAB_ENV": "development"}, tmp_path)
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in done.stdout + done.stderr


def test_production_redirects_to_https_and_sends_secure_headers(tmp_path):
    done = _run(["-c", LOGIN_OVER_TLS], PRODUCTION, tmp_path)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["plain"] == [301, "https://lab.example/login/"]
    assert seen["status"] == 200
    assert "max-age=31536000" in seen["hsts"] and "includeSubDomains" in seen["hsts"]
    assert "upgrade-insecure-requests" in seen["csp"]
    assert seen["cookies"] and all(seen["cookies"].values())  # csrftoken: Secure


@pytest.mark.parametrize(("env", "message"), [
    ({"AGENTLAB_ENV": "staging"}, "AGENTLAB_ENV must be development or production"),
    ({**PRODUCTION, "DEBUG": "1"}, "runs with DEBUG off"),
])
def test_a_wrong_profile_stops_the_server_with_the_reason(tmp_path, env, message):
    done = _run(["manage.py", "check"], env, tmp_path)
    assert done.returncode != 0 and message in done.stderr


@pytest.mark.django_db
def test_every_page_carries_a_policy_without_inline_script(client, user):
    client.force_login(user)
    policy = client.get("/").headers["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";") if " " in part)
    assert directives["script-src"] == "'self'"  # no 'unsafe-inline', no 'unsafe-eval'
    assert directives["default-src"] == "'self'" and directives["frame-ancestors"] == "'none'"


def test_no_template_has_inline_script_or_event_handlers():
    # The browser tests fail on any CSP violation they meet; this finds one on a page they
    # do not open. A <script> with a src or holding JSON data (json_script) is fine.
    import re

    inline = re.compile(r"<script(?![^>]*\b(src|type=\"application/json\")\b)[^>]*>", re.I)
    handler = re.compile(r"\son[a-z]+\s*=", re.I)
    offenders = []
    for root in (REPO_ROOT / "templates", REPO_ROOT / "agentlab"):
        for path in root.rglob("*.html"):
            text = path.read_text(encoding="utf-8")
            if inline.search(text) or handler.search(text) or "javascript:" in text:
                offenders.append(str(path.relative_to(REPO_ROOT)))
    assert not offenders, offenders
