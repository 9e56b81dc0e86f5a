"""`manage.py attach`: a person's own program under the gateway, from their terminal.

The program (tests/gateway_agents/weather_agent.py) is a plain openai SDK loop that knows
nothing of Agent Lab; `attach` runs as a separate process against a real daphne (`live_url`)
with a token, as a person would, and the gateway forwards to the scripted model server."""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.test import Client

from agentlab.gateway.models import GatewayRunner, GatewaySession
from agentlab.tokens.models import create_token
from tests.gateway_clients import CALL, QUESTION, answer
from tests.waiting import wait_until
from traces.models import Run

ROOT = Path(__file__).resolve().parents[1]
AGENT = str(ROOT / "tests" / "gateway_agents" / "weather_agent.py")
PROGRAM = [sys.executable, AGENT, QUESTION]


def attach_command(live_url: str, token: str, *options: str) -> list[str]:
    return [sys.executable, "manage.py", "attach", "--server", live_url, "--token", token,
            *options]


def attach(live_url: str, token: str, *options: str, program: list[str] = PROGRAM,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([*attach_command(live_url, token, *options), "--", *program],
                          cwd=ROOT, capture_output=True, text=True, timeout=90,
                          env={**os.environ, **(env or {})})


def echo_the_tool(body: dict) -> str:
    """A model that answers with what the tool said (the last tool message it was sent)."""
    said = [m["content"] for m in body["messages"] if m.get("role") == "tool"]
    return f"In Paris it is {said[-1]}." if said else "?"


def recorded(live_url: str, token: str, fake_llm, program: list[str] = PROGRAM) -> Run:
    fake_llm.script(CALL)
    fake_llm.responder = echo_the_tool
    done = attach(live_url, token, program=program)
    assert done.returncode == 0, done.stderr
    return Run.objects.latest("pk")


def test_attach_records_the_program_as_one_run_and_passes_its_exit_status_on(
        live_url, user, token, profile, fake_llm):
    fake_llm.script(CALL, answer("sunny, 21 °C"))
    done = attach(live_url, token, program=[*PROGRAM, "3"])
    assert done.returncode == 3  # the program's own
    assert "ANSWER: In Paris it is sunny, 21 °C." in done.stdout  # its output, streamed
    run = Run.objects.get(user=user)
    assert [s.kind for s in run.steps.order_by("seq")][:3] == ["llm", "tool", "llm"]
    assert run.status == "failed" and "exited with status 3" in run.error
    assert run.agent_name == shlex.join([*PROGRAM, "3"])  # which program it was, for the person
    assert f"run {run.pk} (failed): {live_url}/runs/{run.pk}/" in done.stderr
    # the program reached the model through the session, with the token as its key
    assert token not in json.dumps(fake_llm.headers)


def test_a_program_that_cannot_start_ends_its_session_with_127(live_url, user, token):
    done = attach(live_url, token, program=["./no-such-agent", QUESTION])
    assert done.returncode == 127
    assert "cannot start './no-such-agent'" in done.stderr
    assert "it made no model call through the gateway: nothing was recorded." in done.stderr
    assert GatewaySession.objects.get(user=user).exit_code == 127
    assert not Run.objects.exists()


def test_a_replay_is_served_from_the_record_without_asking_the_model(
        live_url, user, token, profile, fake_llm):
    source = recorded(live_url, token, fake_llm)
    asked = len(fake_llm.requests)
    done = attach(live_url, token, "--replay", str(source.pk))
    assert done.returncode == 0, done.stderr
    assert "ANSWER: In Paris it is sunny, 21 °C." in done.stdout
    assert len(fake_llm.requests) == asked  # not one call reached the model
    replay = Run.objects.latest("pk")
    assert replay.parent_run_id == source.pk and replay.status == "succeeded"
    assert "followed the record: no request differed from it." in done.stderr
    assert f"{live_url}/runs/diff/?a={source.pk}&b={replay.pk}" in done.stderr


def test_a_replay_says_where_the_program_first_left_its_record(live_url, user, token, profile,
                                                                fake_llm):
    source = recorded(live_url, token, fake_llm)
    done = attach(live_url, token, "--replay", str(source.pk), env={"WEATHER": "rain"})
    assert done.returncode == 0, done.stderr
    assert "ANSWER: In Paris it is rain." in done.stdout  # live from where it left
    assert "first divergence at step 3 (recorded step 3): " in done.stderr
    assert "message 4 (tool)" in done.stderr


def test_a_fork_at_a_tool_result_gives_the_program_the_edited_observation(
        live_url, user, token, profile, fake_llm):
    source = recorded(live_url, token, fake_llm)
    done = attach(live_url, token, "--fork", str(source.pk), "--at", "2",
                  "--observation", "snowing, -3 °C")
    assert done.returncode == 0, done.stderr
    assert "ANSWER: In Paris it is snowing, -3 °C." in done.stdout
    fork = Run.objects.latest("pk")
    assert (fork.parent_run_id, fork.fork_seq) == (source.pk, 2)
    assert fork.steps.get(kind="tool").meta["edited"] is True
    assert f"/runs/diff/?a={source.pk}&b={fork.pk}" in done.stderr


def test_ctrl_c_ends_the_session_cleanly(live_url, user, token, profile, fake_llm):
    import os

    fake_llm.script(CALL, answer("late"))
    process = subprocess.Popen(
        [*attach_command(live_url, token), "--", *PROGRAM], cwd=ROOT, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "AGENT_PAUSE_S": "60"})
    assert process.stdout is not None
    for line in process.stdout:  # the program made its call and now thinks
        if "thinking" in line:
            break
    process.send_signal(signal.SIGINT)
    _out, err = process.communicate(timeout=30)
    assert process.returncode == 130
    run = Run.objects.get(user=user)
    assert run.status == "failed" and "status 130" in run.error
    assert f"run {run.pk} (failed)" in err
    assert "launcher.py" not in err and "attach.py" not in err  # the program's traceback only
    assert GatewaySession.objects.get(run=run).ended_at is not None


def test_a_program_that_ignores_ctrl_c_is_terminated_and_its_session_ends(live_url, user, token):
    stubborn = [sys.executable, "-c", "import signal, time; "
                "signal.signal(signal.SIGINT, signal.SIG_IGN); print('ready', flush=True); "
                "time.sleep(60)"]
    process = subprocess.Popen([*attach_command(live_url, token), "--", *stubborn], cwd=ROOT,
                               text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stdout.readline() == "ready\n"
    process.send_signal(signal.SIGINT)
    _out, err = process.communicate(timeout=30)
    assert process.returncode == 128 + signal.SIGTERM  # as a shell reports it
    assert "the program exited with status 143." in err
    assert GatewaySession.objects.get(user=user).ended_at is not None


def test_a_break_tool_holds_the_program_until_the_person_edits_and_resumes(
        live_url, user, token, profile, fake_llm):
    fake_llm.script(CALL)
    fake_llm.responder = echo_the_tool
    process = subprocess.Popen(
        [*attach_command(live_url, token, "--break-tool", "get_weather"), "--", *PROGRAM],
        cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        run = wait_until(lambda: Run.objects.filter(user=user, status="paused").first(),
                         timeout=60)
        held = control(live_url, user, run.pk, action="edit", seq=2,
                       input={"observation": "hail"})
        assert held["detail"]["pending"]["kind"] == "tool"
        control(live_url, user, run.pk, action="resume")
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 0, err
    assert "ANSWER: In Paris it is hail." in out


def control(live_url: str, user, run_id: int, **frame) -> dict:
    """A control frame over HTTP to the server holding the run, as the person's browser."""
    browser = Client()
    browser.force_login(user)
    csrf = "k" * 32
    request = urllib.request.Request(
        f"{live_url}/runs/{run_id}/control", data=json.dumps(frame).encode(), method="POST",
        headers={"Content-Type": "application/json", "X-CSRFToken": csrf,
                 "Cookie": f"sessionid={browser.cookies['sessionid'].value}; csrftoken={csrf}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def test_the_runner_takes_a_fork_asked_for_on_the_run_page(live_url, user, token, profile,
                                                           fake_llm):
    question = "Paris's weather? $(echo pwned); echo pwned"
    source = recorded(live_url, token, fake_llm, [sys.executable, AGENT, question])
    page = Client()
    page.force_login(user)
    assert "manage.py attach --serve" in page.get(f"/runs/{source.pk}/").content.decode()
    runner = subprocess.Popen(
        [*attach_command(live_url, token, "--serve"), "--", sys.executable, AGENT,
         "{question}"], cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: GatewayRunner.objects.filter(user=user).exists(), timeout=30)
        form = page.get(f"/runs/{source.pk}/fork/2/")
        assert "Observation" in form.content.decode() and "your runner" in form.content.decode()
        asked = page.post(f"/runs/{source.pk}/fork/2/", {"observation": "hail"})
        assert asked.status_code == 302 and asked["Location"].startswith("/gateway/jobs/")
        assert "Sent to your runner" in page.get(asked["Location"]).content.decode()
        job = GatewaySession.objects.get(for_runner=True)
        wait_until(lambda: GatewaySession.objects.filter(pk=job.pk, ended_at__isnull=False)
                   .exists(), timeout=60)
        fork = Run.objects.get(pk=GatewaySession.objects.get(pk=job.pk).run_id)
        assert (fork.parent_run_id, fork.fork_seq, fork.status) == (source.pk, 2, "succeeded")
        assert fork.final_answer == "In Paris it is hail."
        assert f"run {fork.pk}" in page.get(asked["Location"]).content.decode()
    finally:
        runner.send_signal(signal.SIGINT)
        out, err = runner.communicate(timeout=30)
    assert runner.returncode == 0, err
    # the run's question reached the program as one argument, never through a shell
    assert f"QUESTION: {question}\n" in out and "\npwned" not in out
    assert "ANSWER: In Paris it is hail." in out
    assert "runner stopped." in err


def test_without_a_runner_the_page_shows_the_command_and_no_one_else_takes_the_job(
        live_url, user, other_user, token, profile, fake_llm):
    source = recorded(live_url, token, fake_llm)
    page = Client()
    page.force_login(user)
    asked = page.post(f"/runs/{source.pk}/fork/2/", {"observation": "it's snowing"})
    shown = page.get(asked["Location"]).content.decode()
    job = GatewaySession.objects.get(for_runner=True)
    command = shlex.join(["python", "manage.py", "attach", "--fork", str(source.pk), "--at", "2",
                          "--observation", "it's snowing", "--", *PROGRAM])
    from django.utils.html import escape

    assert "No runner of yours is listening" in shown and escape(command) in shown
    # Bob's runner, his session calls and his pages never reach alice's job or run.
    bob = create_token(other_user, "bob's", "gateway")[1]
    assert gateway(live_url, bob, "/gateway/runner/next?wait=0") == 204
    assert gateway(live_url, bob, f"/gateway/sessions/{job.key}") == 404
    refused = attach(live_url, bob, "--replay", str(source.pk))
    assert refused.returncode != 0 and f"No run {source.pk} of yours to replay" in refused.stderr
    other = Client()
    other.force_login(other_user)
    assert other.get(asked["Location"]).status_code == 404
    assert other.post(f"/runs/{source.pk}/fork/2/", {"observation": "x"}).status_code == 404
    assert GatewaySession.objects.get(pk=job.pk).taken_at is None
    # The command as shown does the fork (the server and token as the person sets them).
    pasted = shlex.split(command)
    assert pasted[:3] == ["python", "manage.py", "attach"]
    done = subprocess.run([*attach_command(live_url, token), *pasted[3:]], cwd=ROOT,
                          capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    assert "ANSWER: In Paris it is it's snowing." in done.stdout
    # Withdrawn, the job is taken by no runner.
    page.post(asked["Location"])
    assert gateway(live_url, token, "/gateway/runner/next?wait=0") == 204


def gateway(live_url: str, token: str, path: str) -> int:
    request = urllib.request.Request(f"{live_url}{path}",
                                     headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            json.loads(response.read() or b"null")
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


# -- the pieces (no server) --------------------------------------------------------------------

def test_the_command_line_becomes_the_session_a_person_asked_for():
    from agentlab.gateway.launcher import session_fields

    assert session_fields(name="a.py", fork=7, at=3, observation="x", break_tools=["search"],
                          step=True) == {
        "name": "a.py", "on_divergence": "live", "mode": "fork", "source": 7, "fork_seq": 3,
        "edit": {"observation": "x"},
        "debug": {"step_mode": True, "break_tools": ["search"]}}
    written = session_fields(name="a.py", fork=7, at=1, response="no",
                             tool_calls=[{"name": "f", "arguments": {}}])
    assert written["edit"] == {"response": {"text": "no",
                                            "tool_calls": [{"name": "f", "arguments": {}}]}}
    assert session_fields(name="a.py", replay=7, on_divergence="stop") == {
        "name": "a.py", "on_divergence": "stop", "mode": "replay", "source": 7}


def test_a_runner_puts_the_question_in_one_argument():
    from agentlab.gateway.runner import with_question

    question = 'x" ; echo $HOME `id`'
    assert with_question(["python", "a.py", "{question}", "--q={question}"], question) == [
        "python", "a.py", question, f"--q={question}"]


def test_the_page_command_quotes_what_the_person_wrote():
    from agentlab.gateway.runner_pages import paste_command, serve_command

    job = GatewaySession(mode="fork", source_id=12, fork_seq=3,
                         edit={"response": {"text": "it's 'fine'", "tool_calls": []}})
    assert paste_command(job, ["python", "my_agent.py", "why?"]) == (
        "python manage.py attach --fork 12 --at 3 --response 'it'\"'\"'s '\"'\"'fine'\"'\"'' "
        "-- python my_agent.py 'why?'")
    assert serve_command(["python", "a.py", "why?"], "why?") == (
        "python manage.py attach --serve -- python a.py '{question}'")


def gateway_record(user) -> Run:
    """A finished gateway run as the gateway records one: llm, tool, llm, final."""
    from django.utils import timezone

    from traces.models import Step

    run = Run.objects.create(user=user, agent_name="gateway · scripted", input=QUESTION,
                             status="succeeded", agent_snapshot={"gateway": {"session": ""}},
                             started_at=timezone.now(), finished_at=timezone.now())
    call = {"text": "", "tool_calls": [{"id": "c1", "name": "get_weather",
                                        "arguments": {"city": "Paris"}}]}
    for seq, kind, output in ((1, "llm", call), (2, "tool", {"observation": "sunny"}),
                              (3, "llm", {"text": "Sunny."}), (4, "final", "Sunny.")):
        Step.objects.create(run=run, seq=seq, kind=kind, output=output,
                            started_at=run.started_at,
                            meta={"call_id": "c1"} if kind == "tool" else {})
    return run


@pytest.mark.django_db
def test_the_fork_form_of_a_gateway_run_asks_the_runner_for_a_written_reply(user):
    run = gateway_record(user)
    page = Client()
    page.force_login(user)
    final = page.get(f"/runs/{run.pk}/fork/4/").content.decode()
    assert "not something the program sent" in final and "Fork and run" not in final
    bad = page.post(f"/runs/{run.pk}/fork/3/", {"text": "x", "tool_calls": "[{"})
    assert bad.status_code == 400 and "not valid JSON" in bad.content.decode()
    assert not GatewaySession.objects.exists()
    page.post(f"/runs/{run.pk}/fork/1/", {"text": "No need.", "tool_calls": ""})
    job = GatewaySession.objects.get()
    assert (job.mode, job.fork_seq, job.edit, job.question, job.for_runner) == (
        "fork", 1, {"response": {"text": "No need."}}, QUESTION, True)


@pytest.mark.django_db
def test_a_replay_asked_without_a_runner_shows_the_command_to_paste(user):
    run = gateway_record(user)
    page = Client()
    page.force_login(user)
    assert "Where the replay leaves the record" in page.get(f"/runs/{run.pk}/").content.decode()
    asked = page.post(f"/runs/{run.pk}/replay/", {"on_divergence": "stop"})
    shown = page.get(asked["Location"]).content.decode()
    assert (f"python manage.py attach --replay {run.pk} --on-divergence stop -- python "
            f"my_agent.py &#x27;What is the weather in Paris?&#x27;") in shown
    assert "python manage.py attach --serve -- python my_agent.py &#x27;{question}&#x27;" in shown
    part = page.get(f"{asked['Location']}?part=1").content.decode()  # polled for news
    assert part.lstrip().startswith('<div id="job-status"') and "Withdraw" not in part
