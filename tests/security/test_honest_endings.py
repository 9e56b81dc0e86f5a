"""A run always ends with an honest status: the last writes of a run failing once or always,
and runs (experiments, half imports) left by a process that is gone, closed by a process that
starts — judged by process identity, not by host name.

Whole runs go through `manage.py run_agent` on the scripted OpenAI-compatible server (the real
runtime, recorder, writer and database); the writes are broken where they happen
(agentlab.runs.recorder.save_status, agentlab.runs.writer.upsert_steps).
Starting processes are real ones:
daphne on the test database (a web process) and a Python process that records a run's first
status (a worker).
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import time
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command
from django.db import OperationalError, connection
from django.utils import timezone

from agentlab.bench.servers import database_url, free_port
from agentlab.evals import runner
from agentlab.evals.models import Experiment, Suite
from agentlab.runs import recorder, writer
from tests.factories import make_agents, scripted_profile
from tests.failing_writes import failing_rows
from tests.fake_openai import Reply
from traces import bundle_store, startup
from traces.models import Run, Step
from traces.owners import Identity, process_id, process_start, this_process
from traces.schema import Step as StepRecord

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]
DEADLINE_S = 30


@pytest.fixture
def answered(calc_agent, fake_llm):
    """`go()` runs the calc agent once (it answers "42" at once) and returns the Run row."""
    def go() -> Run:
        fake_llm.script(Reply(text="It is 42."))
        call_command("run_agent", "Calc agent", "What is 6*7?", "--no-model")
        return Run.objects.get()
    return go


def failing(real, *, times: int | None, when=lambda *a: True):
    """`real`, except that its first `times` calls for which `when(*args)` holds raise
    OperationalError (times=None: all of them). `.failures` counts them."""
    def wrapper(*args, **kwargs):
        if when(*args) and (times is None or wrapper.failures < times):
            wrapper.failures += 1
            raise OperationalError("database is locked")
        return real(*args, **kwargs)
    wrapper.failures = 0
    return wrapper


def finished(_run_id, status, _detail) -> bool:
    return status != "running"


class TestTheFinalStatusWrite:
    def test_failing_once_is_retried_and_the_run_ends_as_it_did(
            self, answered, staff, monkeypatch, quick_retries, caplog):
        save = failing(recorder.save_status, times=1, when=finished)
        monkeypatch.setattr(recorder, "save_status", save)
        with caplog.at_level(logging.WARNING, logger="agentlab.runs.recorder"):
            run = answered()
        assert save.failures == 1
        assert (run.status, run.final_answer, run.llm_calls) == ("succeeded", "It is 42.", 1)
        assert [r.getMessage() for r in caplog.records if r.name == "agentlab.runs.recorder"] == [
            f"run {run.pk}: writing its status 'succeeded' failed (try 1 of 4): database is "
            "locked"]

    def test_failing_always_marks_the_run_failed_instead_of_leaving_it_running(
            self, answered, staff, monkeypatch, quick_retries, caplog):
        save = failing(recorder.save_status, times=None, when=finished)
        monkeypatch.setattr(recorder, "save_status", save)
        with caplog.at_level(logging.WARNING, logger="agentlab.runs.recorder"):
            run = answered()
        assert save.failures == 4  # the first try and three retries, each logged
        assert caplog.text.count("writing its status 'succeeded' failed") == 4
        assert run.status == "failed" and run.finished_at is not None
        assert run.error == ("Its end (succeeded) could not be recorded, so its answer and "
                             "totals are not stored: OperationalError: database is locked")
        assert f"run {run.pk}: its status 'succeeded' could not be written; marking it " \
               "failed instead" in [r.getMessage() for r in caplog.records]

    def test_when_even_the_last_resort_fails_the_writer_marks_it_after_its_next_batch(
            self, answered, staff, monkeypatch, quick_retries, caplog):
        monkeypatch.setattr(recorder, "save_status",
                            failing(recorder.save_status, times=None, when=finished))
        last = failing(recorder.mark_failed, times=1)
        monkeypatch.setattr(recorder, "mark_failed", last)
        with caplog.at_level(logging.ERROR, logger="agentlab.runs.recorder"):
            run = answered()
        assert f"run {run.pk}: could not mark it failed either; the writer tries again after " \
               "its next write" in [r.getMessage() for r in caplog.records]
        assert last.failures == 1 and run.status == "running"  # nothing could write it yet
        # Any later write of this process (another run's step) lets the kept one through.
        other = Run.objects.create(user=staff, input="x", agent_name="t", paradigm="react")

        async def another_write():
            await writer.WRITER.step(recorder.Recorder(other.pk, publish=False),
                                     StepRecord(seq=1, kind="thought", text="later"))
        async_to_sync(another_write)()
        run = wait_for(lambda: Run.objects.get(pk=run.pk), lambda r: r.status != "running")
        assert run.status == "failed"
        assert run.error == ("Its end (succeeded) could not be recorded, so its answer and "
                             "totals are not stored: OperationalError: database is locked")


class TestTheFinalStep:
    def test_a_final_row_that_fails_once_is_written_on_a_retry(
            self, answered, staff, monkeypatch, quick_retries):
        # Twice: the batch, then the writer's own job-by-job retry of it; then the recorder's.
        upsert = failing_rows("final", times=2)
        monkeypatch.setattr(writer, "upsert_steps", upsert)
        run = answered()
        assert upsert.failures == 2
        assert run.status == "succeeded"
        assert list(run.steps.values_list("kind", flat=True)) == ["llm", "final"]

    def test_a_final_row_that_never_lands_ends_the_run_failed_not_running(
            self, answered, staff, monkeypatch, quick_retries, caplog):
        upsert = failing_rows("final", times=None)
        monkeypatch.setattr(writer, "upsert_steps", upsert)
        with caplog.at_level(logging.ERROR, logger="agentlab.runs.recorder"):
            run = answered()
        assert run.status == "failed" and run.finished_at is not None
        assert "could not be recorded, so its trace is incomplete" in run.error
        assert "step 2 (final)" in run.error and "disk I/O error" in run.error
        assert "the row of its final step 2 could not be written" in caplog.text
        assert run.final_answer == "It is 42."  # what is known is still stored
        assert not run.steps.filter(kind="final").exists()


def wait_for(read, ok, timeout_s: float = DEADLINE_S):
    deadline = time.monotonic() + timeout_s
    while True:
        value = read()
        if ok(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


# ---------------------------------------------------------------------------- process identity


def dead_pid() -> int:
    gone = subprocess.Popen(["true"])
    gone.wait()
    return gone.pid


class TestProcessIdentity:
    """Which worker ids name a process that is certainly gone (traces.owners)."""

    def test_this_process_and_a_live_one_are_alive(self):
        from traces.owners import left_by_dead_process

        me = this_process()
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            live = Identity(me.host, child.pid, process_start(child.pid), me.boot, me.place)
            assert not left_by_dead_process(process_id())
            assert not left_by_dead_process(str(live))
            # The same pid with another start time is another process: the owner is gone.
            reused = Identity(me.host, child.pid, live.start + 1, me.boot, me.place)
            assert left_by_dead_process(str(reused))
        finally:
            child.kill()
            child.wait()

    def test_dead_pids_earlier_boots_and_foreign_places(self):
        from traces.owners import left_by_dead_process

        me, pid = this_process(), dead_pid()
        assert left_by_dead_process(str(Identity(me.host, pid, 123, me.boot, me.place)))
        assert left_by_dead_process(str(Identity(me.host, os.getpid(), me.start, "ab12" * 3,
                                                 me.place)))  # an earlier boot: all gone
        # Another machine or container that happens to have this host name: never judged.
        assert not left_by_dead_process(str(Identity(me.host, pid, 123, me.boot,
                                                     "cd34" * 3)))
        assert not left_by_dead_process(f"elsewhere:{pid}/123@{me.boot}.{me.place}")
        assert not left_by_dead_process("") and not left_by_dead_process("garbage")

    def test_old_host_pid_ids_are_still_understood(self):
        from traces.owners import left_by_dead_process

        host = socket.gethostname()
        assert left_by_dead_process(f"{host}:{dead_pid()}")
        assert not left_by_dead_process(f"{host}:1")  # pid 1 lives: cannot tell, left alone
        assert not left_by_dead_process(f"another-host:{dead_pid()}")
        # This process writes the new form, so an old id with its pid was an earlier holder's.
        assert left_by_dead_process(f"{host}:{os.getpid()}")


# ---------------------------------------------------------------------------- starting processes


@pytest.fixture
def leftovers(staff, fake_llm):
    """Rows a stopped process left (and rows it must not touch), by worker id."""
    me, gone = this_process(), dead_pid()
    dead = str(Identity(me.host, gone, 4242, me.boot, me.place))
    foreign = str(Identity(me.host, gone, 4242, me.boot, "ef56" * 3))
    make = lambda **f: Run.objects.create(user=staff, input="q", agent_name="t",  # noqa: E731
                                          paradigm="react", **f)
    rows = {
        "dead": make(status="running", worker=dead),
        "dead_old_form": make(status="paused", worker=f"{me.host}:{gone}"),
        "reused_pid": make(status="running", worker=str(Identity(
            me.host, 1, (process_start(1) or 0) + 1, me.boot, me.place))),
        "alive": make(status="running", worker=process_id()),
        "foreign": make(status="running", worker=foreign),
        "finished": make(status="succeeded", worker=dead),
        "stale_queue": make(status="queued"),
        "fresh_queue": make(status="queued"),
    }
    Run.objects.filter(pk=rows["stale_queue"].pk).update(
        created=timezone.now() - timedelta(seconds=startup.QUEUED_GRACE_S + 60))
    staging = make(status="interrupted", worker=dead)
    Run.objects.filter(pk=staging.pk).update(user=bundle_store.staging_user())
    Step.objects.create(run=staging, seq=1, kind="thought", started_at=timezone.now())
    rows["half_import"] = staging
    suite_agents = make_agents(scripted_profile(fake_llm.base_url), 1)
    suite = Suite.objects.create(name="s")
    suite.cases.create(question="a?", expected="a", scorer="exact")
    experiment = runner.create_experiment(staff, suite, suite_agents)
    Experiment.objects.filter(pk=experiment.pk).update(status="running", worker=dead)
    rows["experiment"] = experiment
    return rows


def assert_swept(rows) -> None:
    status = {name: Run.objects.get(pk=row.pk).status for name, row in rows.items()
              if name not in ("half_import", "experiment")}
    assert status == {"dead": "interrupted", "dead_old_form": "interrupted",
                      "reused_pid": "interrupted", "alive": "running", "foreign": "running",
                      "finished": "succeeded", "stale_queue": "interrupted",
                      "fresh_queue": "queued"}
    assert "resume it as a fork" in Run.objects.get(pk=rows["dead"].pk).error
    assert not Run.objects.filter(pk=rows["half_import"].pk).exists()
    assert not Step.objects.filter(run_id=rows["half_import"].pk).exists()
    experiment = Experiment.objects.get(pk=rows["experiment"].pk)
    assert experiment.status == "interrupted"


def _env() -> dict[str, str]:
    return {**os.environ, "DATABASE_URL": database_url(connection.settings_dict),
            "DJANGO_SETTINGS_MODULE": "agentlab.settings", "ALLOWED_HOSTS": "127.0.0.1"}


class TestStartingProcesses:
    """Real processes that start close what stopped ones left (traces.startup)."""

    def test_the_first_status_a_process_records_sweeps_first(self, leftovers, staff,
                                                             monkeypatch):
        monkeypatch.setattr(startup, "_SWEPT", set())  # this process has not swept yet
        run = Run.objects.create(user=staff, input="q", agent_name="t", paradigm="react")
        async_to_sync(recorder.Recorder(run.pk, publish=False).status)("running", {})
        assert startup.swept()
        assert_swept(leftovers)

    def test_a_starting_web_process_closes_what_stopped_processes_left(self, leftovers, tmp_path):
        port = free_port()
        log = tmp_path / "daphne.log"
        with log.open("w") as out:
            daphne = subprocess.Popen(
                [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                 "agentlab.asgi:application"], cwd=ROOT, env=_env(), stdout=out,
                stderr=subprocess.STDOUT)
        try:
            up = wait_for(lambda: _get(f"http://127.0.0.1:{port}/healthz"), lambda st: st == 200)
            assert up == 200, log.read_text()
            assert_swept(leftovers)  # the first request it served swept first
            assert "left by stopped processes" in log.read_text()
        finally:
            daphne.terminate()
            daphne.wait(timeout=10)


    def test_a_worker_process_closes_them_before_its_first_run(self, leftovers, staff):
        mine = Run.objects.create(user=staff, input="q", agent_name="t", paradigm="react")
        script = ("import asyncio, django; django.setup()\n"
                  "from agentlab.runs.recorder import Recorder\n"
                  f"asyncio.run(Recorder({mine.pk}, publish=False).status('running', {{}}))\n")
        done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=_env(),
                              capture_output=True, text=True, timeout=DEADLINE_S)
        assert done.returncode == 0, done.stderr
        assert_swept(leftovers)
        mine.refresh_from_db()
        assert mine.status == "running" and mine.worker != process_id()  # the worker's own id


    def test_the_sweep_counts_what_it_closed_and_a_second_one_closes_nothing(self, leftovers):
        counts = startup.sweep()
        assert counts == {"runs": 4, "imports": 1, "experiments": 1, "received traces": 0}
        assert_swept(leftovers)
        assert startup.sweep() == {"runs": 0, "imports": 0, "experiments": 0,
                                   "received traces": 0}  # idempotent


def _get(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status
    except OSError:
        return None
