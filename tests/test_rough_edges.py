"""Issue 38, what a newcomer still trips on: each rough edge as the user meets it (pages through
the Django test client, sockets through the real ASGI application)."""

from __future__ import annotations

from pathlib import Path

import pytest
from channels.testing import WebsocketCommunicator

from agentlab.models import Agent, McpServer, ModelProfile

# -- the admin ---------------------------------------------------------------------------------


def travel_line() -> int:
    """The line of examples/travel.py's first @agent (its declaration's code_ref line)."""
    lines = Path("examples/travel.py").read_text(encoding="utf-8").splitlines()
    return next(i for i, text in enumerate(lines, 1) if text.startswith("@agent("))


@pytest.mark.django_db
def test_a_profile_for_the_embedded_model_may_leave_the_model_blank(client, staff):
    # README, "Point it at another model": embedded = base URL, model and key all blank.
    client.force_login(staff)
    form = {"name": "Mine, embedded", "base_url": "", "model": "", "api_key_env": "",
            "timeout_s": "60", "retries": "2", "price_in_per_m": "0", "price_out_per_m": "0"}
    response = client.post("/admin/agentlab/modelprofile/add/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert ModelProfile.objects.get(name="Mine, embedded").is_embedded
    # An endpoint of one's own still needs the model name it expects, and is told so.
    refused = client.post("/admin/agentlab/modelprofile/add/",
                          {**form, "name": "Ollama", "base_url": "http://127.0.0.1:11434/v1"})
    assert refused.status_code == 200
    assert "An endpoint needs the model name it expects" in refused.content.decode()
    assert not ModelProfile.objects.filter(name="Ollama").exists()


@pytest.mark.django_db
def test_a_script_declared_agent_cannot_be_deleted_in_the_admin(client, staff):
    # examples/travel.py is a script the web server never imports: its declaration is not in
    # this process's registry, but its code still declares the agent at that line.
    profile = ModelProfile.objects.create(name="p", model="m")
    line = travel_line()
    coded = Agent.objects.create(name="travel (script)", paradigm="react", model_profile=profile,
                                 code_ref=f"examples/travel.py:{line}")
    gone = Agent.objects.create(name="gone from code", paradigm="react", model_profile=profile,
                                code_ref="examples/travel.py:1")
    client.force_login(staff)
    assert client.post(f"/admin/agentlab/agent/{coded.pk}/delete/",
                       {"post": "yes"}).status_code == 403
    client.post("/admin/agentlab/agent/", {"action": "delete_selected", "post": "yes",
                                           "_selected_action": [coded.pk]})
    assert Agent.objects.filter(pk=coded.pk).exists()
    assert "Delete" not in client.get(f"/admin/agentlab/agent/{coded.pk}/change/").content.decode(
    ).split('id="content-main"')[1].split("</form>")[1][:400]
    # Once no code declares it at that place, it may go.
    assert client.post(f"/admin/agentlab/agent/{gone.pk}/delete/",
                       {"post": "yes"}).status_code == 302
    assert not Agent.objects.filter(pk=gone.pk).exists()


@pytest.mark.django_db
def test_the_admin_shows_a_paradigms_label_not_its_key(client, staff):
    profile = ModelProfile.objects.create(name="p", model="m")
    line = travel_line()
    coded = Agent.objects.create(name="coded", paradigm="plan_execute", model_profile=profile,
                                 code_ref=f"examples/travel.py:{line}")
    client.force_login(staff)
    page = client.get(f"/admin/agentlab/agent/{coded.pk}/change/").content.decode()
    assert "Plan-and-Execute" in page and ">plan_execute<" not in page
    listing = client.get("/admin/agentlab/agent/").content.decode()
    assert "Plan-and-Execute" in listing and ">plan_execute<" not in listing


@pytest.mark.django_db
def test_the_mcp_servers_help_text_says_name_and_tool(client, staff):
    client.force_login(staff)
    page = client.get("/admin/agentlab/mcpserver/add/").content.decode()
    assert "mcp__&lt;name&gt;__&lt;tool&gt;" in page
    assert McpServer._meta.get_field("name").help_text == "Tools are named mcp__<name>__<tool>."


# -- pages and sockets that do not exist -------------------------------------------------------


@pytest.mark.django_db
def test_a_missing_page_is_the_sites_own(client, user):
    client.force_login(user)
    response = client.get("/no/such/page/")
    assert response.status_code == 404
    page = response.content.decode()
    assert "There is nothing at this address" in page and "/no/such/page/" in page
    assert 'class="topbar"' in page and 'href="/runs/"' in page


@pytest.mark.django_db(transaction=True)
async def test_an_unknown_socket_path_is_closed_cleanly_not_a_server_error():
    from agentlab.asgi import application

    for where in ("/ws/nothing/", "/ws/runs/abc/", "/elsewhere"):
        comm = WebsocketCommunicator(application, where, headers=[(b"origin", b"http://127.0.0.1")])
        connected, code = await comm.connect()
        assert (connected, code) == (False, 4404), where
        await comm.disconnect()


# -- the default data --------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_default_agent_has_the_tools_that_need_approval_and_a_demo_for_them(client, user):
    from agentlab.defaults import load_defaults
    from agentlab.runs.snapshot import snapshot

    load_defaults()
    agent = Agent.objects.get(name="ReAct with approvals")
    waits = {t.name for t in agent.tools.all() if t.needs_approval}
    assert waits == {"update_delivery_date", "send_email"}
    assert "SO-1001" in agent.demo_question and agent.model_profile.is_embedded
    frozen = snapshot(agent)
    assert {n for n, policy in frozen["tools"].items() if policy["needs_approval"]} == waits
    client.force_login(user)
    page = client.get("/").content.decode()
    assert "Run the demo question of ReAct with approvals" in page
    assert "wait for your approval" in page


# -- imports -----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_an_empty_or_text_import_is_refused_with_what_it_is(client, user):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from traces.models import Run

    client.force_login(user)

    def refused(name: str, data: bytes) -> str:
        upload = SimpleUploadedFile(name, data)
        return client.post("/runs/import/", {"bundle": upload}, follow=True).content.decode()

    empty = refused("empty.json", b"")
    assert "empty.json was refused: the file is empty" in empty and "no spans" not in empty
    text = refused("notes.txt", b"Meeting notes\nAsk about the agent's timeouts.\n")
    assert "notes.txt was refused: this is not an OTLP or bundle file" in text
    assert "it begins “Meeting notes Ask about the agent" in text
    assert "protobuf" not in text.split("was refused")[1].split("</li>")[0].replace(
        "OTLP trace data (JSON or protobuf)", "")
    assert not Run.objects.exists()


# -- the runs list -----------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_runs_list_shows_when_an_imported_run_ran_and_sorts_by_it(client, user):
    from datetime import UTC, datetime

    from traces.models import Run

    ran = datetime(2025, 1, 2, 3, 4, tzinfo=UTC)
    new = Run.objects.create(user=user, input="made today", status="succeeded")
    # Imported after it: recorded here later, but it ran long before.
    old = Run.objects.create(user=user, input="imported last year", status="succeeded",
                             started_at=ran, finished_at=ran)
    client.force_login(user)
    page = client.get("/runs/").content.decode()
    assert ">2025-01-02 03:04</td>" in page
    assert page.index(f'data-run="{new.pk}"') < page.index(f'data-run="{old.pk}"')
    earliest = client.get("/runs/?sort=started").content.decode()
    assert earliest.index(f'data-run="{old.pk}"') < earliest.index(f'data-run="{new.pk}"')


# -- figures -----------------------------------------------------------------------------------


def test_a_share_reads_one_way_everywhere():
    from traces.display.figures import format_percent, format_seconds

    assert [format_percent(v) for v in (None, 0, 0.001, 0.5, 2 / 3, 0.999, 1)] == [
        "—", "0%", "<1%", "50%", "67%", ">99%", "100%"]
    assert [format_seconds(v) for v in (None, 50, 1530, 250_000)] == [
        "—", "0.05 s", "1.53 s", "250 s"]


@pytest.mark.django_db
def test_the_dashboard_says_percent_and_seconds_as_its_charts_do(client, user):
    import json
    import re

    from django.utils import timezone

    from traces.models import Run, Step

    for status in ("succeeded", "failed"):
        run = Run.objects.create(user=user, agent_name="Alpha", paradigm="react", input="q",
                                 status=status, step_count=1, llm_calls=1)
        Step.objects.create(run=run, seq=1, kind="llm", role="agent", name="m", status="ok",
                            duration_ms=50.0, started_at=timezone.now())
    client.force_login(user)
    html = client.get("/dashboard/").content.decode()
    assert ">50%</a>" in html and "50.0 %" not in html  # the completion rate
    latency = html[html.index('id="latency"'):]
    latency = latency[:latency.index("</section>")]
    assert "0.05 s" in latency and " ms<" not in latency
    data = json.loads(re.search(r'<script id="dashboard-data" type="application/json">(.*?)'
                                r"</script>", html, re.S).group(1))
    execution = data["latency"]["labels"].index("execution")
    assert data["latency"]["p50_s"][execution] == 0.05


@pytest.mark.django_db
def test_scores_read_as_the_dashboards_percentages(client, user):
    from django.template import Context, Template

    html = Template("{% load trace_tags %}{{ a|percent }} {{ b|percent }}").render(
        Context({"a": 2 / 3, "b": None}))
    assert html == "67% —"


# -- a long question ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_long_questions_heading_is_clamped_with_show_all(client, user):
    from traces.models import Run

    long = Run.objects.create(user=user, input="word " * 10_000, status="succeeded")
    short = Run.objects.create(user=user, input="What is 6*7?", status="succeeded")
    client.force_login(user)
    page = client.get(f"/runs/{long.pk}/").content.decode()
    assert f'<h1 class="question clamped" id="question-{long.pk}">' in page
    assert f'data-show-all="question-{long.pk}"' in page and "show all (50,000 characters)" in page
    page = client.get(f"/runs/{short.pk}/").content.decode()
    assert '<h1 class="question">What is 6*7?</h1>' in page and "show all" not in page


# -- one run's page ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_replayed_steps_first_token_is_said_as_recorded(client, user):
    from django.utils import timezone

    from traces.models import Run, Step

    run = Run.objects.create(user=user, input="q", status="succeeded")
    Step.objects.create(run=run, seq=1, kind="llm", name="m", status="ok", duration_ms=1.0,
                        started_at=timezone.now(), text="It is sunny.",
                        meta={"replayed": True, "source_seq": 1, "ttft_ms": 1530.0})
    Step.objects.create(run=run, seq=2, kind="llm", name="m", status="ok", duration_ms=2000.0,
                        started_at=timezone.now(), text="Live.", meta={"ttft_ms": 1530.0})
    client.force_login(user)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    replayed, live = page.split('data-seq="2"')[0], page.split('data-seq="2"')[1]
    assert "<span>first token, as recorded</span> 1.53 s" in replayed
    assert "<span>first token</span> 1.53 s" not in replayed
    assert "<span>first token</span> 1.53 s" in live


@pytest.mark.django_db
@pytest.mark.parametrize(("status", "label"), [
    ("succeeded", "Final answer"),
    ("stopped", "Answer from what was found when a limit stopped it"),
    ("failed", "No answer: what the agent said as it stopped"),
    ("timed_out", "No answer: what the agent said as it stopped"),
    ("cancelled", "No answer: what the agent said as it stopped"),
])
def test_only_a_succeeded_run_shows_a_final_answer(client, user, status, label):
    from traces.models import Run

    run = Run.objects.create(user=user, input="q", status=status,
                             final_answer="I stopped before I could answer.")
    client.force_login(user)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    box = page[page.index(f'<div class="answer answer-{status}">'):]
    assert box[:box.index("I stopped before")].count(label) == 1
    if status != "succeeded":
        assert "Final answer" not in box[:300]


@pytest.mark.django_db
def test_fork_in_what_next_is_a_link_to_the_steps_it_forks_from(client, user):
    from traces.models import Run

    run = Run.objects.create(user=user, input="q", status="succeeded")
    client.force_login(user)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    row = page[page.index('id="fork-row"'):]
    row = row[:row.index("</div>")]
    assert '<a class="button secondary" href="#steps">Fork from a step ↓</a>' in row
    assert "button-like" not in page and 'id="steps"' in page
