"""Whatever a user uploads or a model writes has size, time and count limits.

Regex bombs in the regex scorer and in Reflexion's `expected`; SQL that would build gigabytes
inside the read-only SQL tool; oversized and malformed bundles (size, depth, numbers, dates,
negative values) through the real upload view and the importer; credentials in URLs of exports.
Each refusal is a clear message where the user sees it — a score error, an evaluation error
step, a tool observation, an import message naming the field — never a frozen loop or a 500.
"""

from __future__ import annotations

import asyncio
import copy
import io
import json
import sqlite3
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from django.contrib.messages import get_messages
from django.contrib.messages.storage.fallback import FallbackStorage
from django.contrib.sessions.backends.db import SessionStore
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.handlers.asgi import ASGIRequest
from django.db import connection
from django.test import Client, RequestFactory
from django.urls import reverse

from agentlab.bench.lock_probe import OtherWriter
from agentlab.evals import runner, scorers
from agentlab.evals.models import Case, Result, Suite
from agentlab.paradigms import user_regex
from agentlab.paradigms.reflexion import Reflexion
from agentlab.paradigms.registry import validate_params
from agentlab.runtime.loop import execute
from agentlab.tools.builtin import business_db
from tests.factories import make_agents, make_run, scripted_profile
from tests.scripted_model import ScriptedModel, make_context
from traces import bundle_store, startup, upsert
from traces.bundle import BundleError, export_bundle, import_bundle
from traces.models import Run, Step
from traces.otlp import export_otlp
from traces.owners import Identity, this_process
from traces.redact import redact_url
from traces.schema import Step as StepRecord
from traces.views import runs as run_views

BOMB = r"(a|aa)+$"  # exponential backtracking, also in the `regex` package
BOMB_TEXT = "a" * 40 + "!"
LOOP_GAP_S = 0.25  # the longest the event loop may go without a turn while a bomb runs


class Ticker:
    """Measures the event loop's longest gap between turns while it is entered."""

    async def __aenter__(self) -> Ticker:
        self.gap, self._stop = 0.0, asyncio.Event()
        self._task = asyncio.ensure_future(self._tick())
        await asyncio.sleep(0)  # the ticker has started: a block from here on is measured
        return self

    async def _tick(self) -> None:
        last = time.perf_counter()
        while not self._stop.is_set():
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            self.gap, last = max(self.gap, now - last), now

    async def __aexit__(self, *exc: object) -> None:
        self._stop.set()
        await self._task


# ---------------------------------------------------------------------------- regex bombs


class TestRegexBombs:
    def test_the_issue_pattern_answers_at_once(self):
        started = time.perf_counter()
        score = scorers.score_answer("regex", "a" * 26 + "!", r"(a+)+$")
        assert not score.passed and time.perf_counter() - started < 0.5

    def test_a_catastrophic_pattern_is_a_score_error_within_the_time_limit(self):
        started = time.perf_counter()
        with pytest.raises(scorers.ScorerError, match=r"regex: the regular expression took "
                                                      r"longer than 1 s on this answer"):
            scorers.score_answer("regex", BOMB_TEXT, BOMB)
        assert time.perf_counter() - started < 3 * user_regex.MATCH_TIMEOUT_S

    async def test_the_event_loop_keeps_turning_while_a_bomb_is_scored(self):
        async with Ticker() as ticker:
            with pytest.raises(scorers.ScorerError, match="took longer than"):
                await scorers.ascore_answer("regex", BOMB_TEXT, BOMB)
        assert ticker.gap < LOOP_GAP_S

    @pytest.mark.parametrize(("pattern", "message"), [
        ("a" * 1001, "1,001 characters long; at most 1,000 are allowed"),
        (r"((a{1000}){1000}){1000}", "expand to"),  # compiled unrolled: gigabytes, in C
        (r"a{1000000}", "expand to 1,000,000 items; at most 20,000"),
        ("[a-", "invalid regular expression '[a-': "),
    ])
    def test_long_and_explosive_patterns_are_refused_before_compiling(self, pattern, message):
        started = time.perf_counter()
        with pytest.raises(scorers.ScorerError, match="regex: ") as info:
            scorers.score_answer("regex", "anything", pattern)
        assert message in str(info.value) and time.perf_counter() - started < 0.2

    def test_legitimate_patterns_behave_as_before(self):
        assert scorers.score_answer("regex", "The answer is 42.", r"\b42\b").passed
        assert scorers.score_answer("regex", "ZÜRICH", r"z[üu]rich").passed
        assert scorers.score_answer("regex", "2026-06-30", r"^\d{4}-\d{2}-\d{2}$").passed
        assert not scorers.score_answer("regex", "forty-two", r"\d+").passed

    @pytest.mark.django_db(transaction=True)
    async def test_an_experiment_records_a_bomb_as_an_error_result_and_goes_on(self, fake_llm,
                                                                               user):
        fake_llm.responder = lambda body: BOMB_TEXT
        profile = await sync_to_async(scripted_profile)(fake_llm.base_url)
        agents = await sync_to_async(make_agents)(profile, 1)

        def suite() -> Suite:
            made = Suite.objects.create(name="Bombs")
            Case.objects.create(suite=made, position=1, question="q1", expected=BOMB,
                                scorer="regex")
            Case.objects.create(suite=made, position=2, question="q2", expected="a+!",
                                scorer="regex")
            return made

        experiment = await sync_to_async(runner.create_experiment)(
            user, await sync_to_async(suite)(), agents, concurrency=1)
        async with Ticker() as ticker:
            done = await runner.run_experiment(experiment.pk)
        got = {r.case.question: r async for r in Result.objects.filter(
            experiment=done).select_related("case")}
        assert got["q1"].status == "error" and "took longer than 1 s" in got["q1"].error
        assert got["q2"].status == "done" and got["q2"].passed
        assert ticker.gap < LOOP_GAP_S

    async def test_reflexion_records_a_bomb_as_an_evaluation_error_and_the_loop_turns(self):
        model = ScriptedModel([BOMB_TEXT])
        params = validate_params("reflexion", {"actor": "direct", "evaluator": "regex",
                                               "expected": BOMB, "max_attempts": 1})
        ctx, sink = make_context(model, params=params)
        async with Ticker() as ticker:
            outcome = await execute(Reflexion(), ctx, "Say a lot of a.")
        assert ticker.gap < LOOP_GAP_S
        evaluation = sink.of_kind("evaluation")[0]
        assert evaluation.status == "error" and evaluation.output["score"] is None
        assert "the check could not be evaluated" in evaluation.text
        assert "took longer than 1 s" in evaluation.meta["check_error"]
        assert BOMB not in evaluation.text  # the expected text stays hidden from the model
        assert outcome.status == "succeeded"  # the attempt is the best there is, unscored

    def test_reflexion_refuses_an_overlong_or_explosive_expected(self):
        with pytest.raises(ValueError, match="invalid parameter for reflexion"):
            validate_params("reflexion", {"evaluator": "regex", "expected": "a" * 1001})

    async def test_a_snapshot_from_elsewhere_is_checked_when_the_run_starts(self):
        model = ScriptedModel([])
        ctx, _ = make_context(model, params={
            **validate_params("reflexion", {}), "actor": "direct", "evaluator": "regex",
            "expected": "((a{1000}){1000}){1000}"})
        started = time.perf_counter()
        outcome = await execute(Reflexion(), ctx, "q")
        assert outcome.status == "failed" and "expand to" in outcome.error
        assert time.perf_counter() - started < 1 and not model.requests


# ---------------------------------------------------------------------------- SQL memory bombs


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


@pytest.mark.usefixtures("own_var_dir")
class TestSqlMemoryBombs:
    @pytest.mark.parametrize("sql", [
        "SELECT hex(zeroblob(400000000))",
        "SELECT randomblob(1000000000)",
        "SELECT length(replace(hex(zeroblob(100000)), '0', hex(zeroblob(1000))))",
        "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c LIMIT 200000) "
        "SELECT length(group_concat(hex(zeroblob(100)))) FROM c",
        "SELECT length(printf('%s%s', hex(zeroblob(200000)), hex(zeroblob(200000))))",
    ])
    async def test_a_value_over_the_length_limit_is_refused_without_the_memory(self, ex, sql):
        business_db.ensure_business_db()
        before = peak_rss_mb()
        started = time.perf_counter()
        result = await ex.run("sql_query", {"query": sql})
        assert not result.ok
        assert "Refused: a value (or a row) would be over 250,000 bytes, the length limit" in (
            result.observation)
        assert time.perf_counter() - started < 3
        assert peak_rss_mb() - before < 100  # megabytes, not the gigabytes asked for

    async def test_rows_stop_at_the_result_size_cap_with_a_note(self, ex):
        result = await ex.run("sql_query", {"query": (
            "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c LIMIT 200) "
            "SELECT n, hex(zeroblob(50000)) AS blob FROM c")})
        assert result.ok, result.observation
        data = json.loads(result.output)
        assert data["limited"] is True and 0 < data["row_count"] < 200
        assert "the result reached 1,000,000 characters" in data["note"]
        assert sum(len(r["blob"]) for r in data["rows"]) <= business_db.RESULT_CHAR_LIMIT

    @pytest.mark.parametrize(("sql", "message"), [
        ("SELECT '" + "x" * 20_000 + "' AS x", "at most 20,000 are allowed"),
        ("SELECT " + ", ".join(f"{i} AS c{i}" for i in range(150)), "at most 100 columns"),
        ("SELECT 1" + " UNION ALL SELECT 1" * 60, "too many terms in compound SELECT"),
    ])
    async def test_oversized_queries_are_refused(self, ex, sql, message):
        result = await ex.run("sql_query", {"query": sql})
        assert not result.ok and message in result.observation

    async def test_the_read_only_guarantees_still_hold(self, ex):
        result = await ex.run("sql_query", {"query": "DELETE FROM orders"})
        assert not result.ok and "only SELECT queries are allowed" in result.observation
        conn = business_db.connect()
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            conn.execute("DELETE FROM orders")
        conn.close()


# ---------------------------------------------------------------------------- bundles: size


def thoughts(n: int = 3) -> list[dict]:
    """`n` thought steps, each with a small input: a run to export as a bundle."""
    return [{"kind": "thought", "text": f"step {i}", "input": {"n": i}} for i in range(1, n + 1)]


def request_for(user, stream, *, length: str | None, asgi: bool = False):
    """A POST to the import view whose body is `stream`, declaring Content-Length `length`
    (None: none), with a session, messages and the user; CSRF as the test client does it."""
    boundary = "BoUnDaRy"
    if asgi:
        headers = [(b"content-type", f"multipart/form-data; boundary={boundary}".encode())]
        if length is not None:
            headers.append((b"content-length", length.encode()))
        request = ASGIRequest({"type": "http", "method": "POST", "path": "/runs/import/",
                               "headers": headers, "query_string": b""}, stream)
    else:
        request = RequestFactory().generic(
            "POST", "/runs/import/", b"",
            content_type=f"multipart/form-data; boundary={boundary}")
        request.META.pop("CONTENT_LENGTH", None)
        if length is not None:
            request.META["CONTENT_LENGTH"] = length
        request._stream = stream
    request.user, request.session = user, SessionStore()
    request._messages = FallbackStorage(request)
    request._dont_enforce_csrf_checks = True
    return request


class Tripwire(io.RawIOBase):
    """A body that must not be read at all."""

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        raise AssertionError("the body was read")


class EndlessUpload(io.RawIOBase):
    """A multipart body with one file field of `size` bytes, made as it is read; counts what
    was read."""

    def __init__(self, size: int) -> None:
        self.head = (b'--BoUnDaRy\r\nContent-Disposition: form-data; name="bundle"; '
                     b'filename="big.json"\r\nContent-Type: application/json\r\n\r\n')
        self.size, self.read_bytes = size, 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        size = 64 * 1024 if size is None or size < 0 else size
        total = len(self.head) + self.size
        chunk = b""
        while len(chunk) < size and self.read_bytes < total:
            at = self.read_bytes
            piece = (self.head[at:at + size - len(chunk)] if at < len(self.head)
                     else b"x" * min(size - len(chunk), total - at))
            chunk += piece
            self.read_bytes += len(piece)
        return chunk


def messages_of(request) -> list[str]:
    return [str(m) for m in get_messages(request)]


@pytest.mark.django_db
class TestOversizedUploads:
    def test_an_upload_declared_over_the_cap_is_refused_before_its_body_is_read(self, user):
        declared = str(200 * 1024 * 1024)
        request = request_for(user, Tripwire(), length=declared)
        response = run_views.run_import(request)
        assert response.status_code == 302 and response["Location"] == reverse("runs")
        assert messages_of(request) == [
            "Import: the upload was refused: it is 200 MB, over the 20 MB limit. Import "
            "larger bundles with `manage.py import_run`."]
        assert not Run.objects.exists()

    def test_an_upload_without_content_length_is_refused_unread(self, user):
        request = request_for(user, Tripwire(), length=None)
        run_views.run_import(request)
        assert "it did not say its size (Content-Length)" in messages_of(request)[0]

    def test_a_body_longer_than_it_declares_is_read_only_up_to_the_cap(self, user):
        body = EndlessUpload(200 * 1024 * 1024)  # declares 1 KB, sends 200 MB (ASGI: all of
        request = request_for(user, body, length="1000", asgi=True)  # it reaches the app)
        run_views.run_import(request)
        assert "over the 20 MB limit (stopped reading there)" in messages_of(request)[0]
        assert body.read_bytes <= run_views.MAX_IMPORT_BYTES + 256 * 1024
        assert not Run.objects.exists()

    def test_the_page_shows_the_refusal_of_a_25_mb_upload(self, client, user):
        client.force_login(user)
        upload = SimpleUploadedFile("big.json", b" " * (25 * 1024 * 1024))
        response = client.post(reverse("run_import"), {"bundle": upload}, follow=True)
        assert response.status_code == 200
        assert "it is 25 MB, over the 20 MB limit" in response.content.decode()
        assert not Run.objects.exists()

    def test_the_csrf_check_still_holds(self, user):
        client = Client(enforce_csrf_checks=True)
        client.force_login(user)
        upload = SimpleUploadedFile("run.json", b"{}")
        assert client.post(reverse("run_import"), {"bundle": upload}).status_code == 403


# ---------------------------------------------------------------------------- bundles: values


def deep(levels: int) -> dict:
    value: dict = {}
    for _ in range(levels):
        value = {"a": value}
    return value


def set_at(path: str, value):
    def change(data: dict) -> None:
        *parents, last = path.split(".")
        target = data
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        target[int(last) if last.isdigit() else last] = value
    return change


MALFORMED = [
    (set_at("steps.0.started_at", 1e12), "steps[0].started_at",
     "is not a date between 1970-01-01 and 9999-12-30"),
    (set_at("steps.1.started_at", -86400.0), "steps[1].started_at", "is not a date between"),
    (set_at("run.started_at", "9999-12-31T23:59:59-01:00"), "run.started_at",
     "is not a date between 1970-01-01 and 9999-12-30"),
    (set_at("run.finished_at", "0001-01-01T00:00:00+05:00"), "run.finished_at",
     "is not a date between"),
    (set_at("exported_at", "yesterday"), "exported_at", "is not an ISO 8601 date-time"),
    (set_at("steps.1.input", {"x": float("inf")}), "steps[1].input.x",
     "inf is not a finite number"),
    (set_at("steps.0.meta", deep(120)), "steps[0].meta.a.a.a.a.a.a.a.a.a…",
     "nested more than 100 levels deep"),
    (set_at("steps.0.tokens_in", -5), "steps[0].tokens_in", "-5 is negative"),
    (set_at("steps.0.cost_usd", -0.01), "steps[0].cost_usd", "-0.01 is negative"),
    (set_at("steps.0.duration_ms", -3.0), "steps[0].duration_ms", "is negative"),
    (set_at("run.totals", {"cost_usd": -1.5}), "run.totals.cost_usd", "-1.5 is negative"),
    (set_at("run.totals", {"wall_ms": -1}), "run.totals.wall_ms", "is negative"),
    (set_at("run.fork_seq", -3), "run.fork_seq", "-3 is negative"),
    (set_at("steps.2.meta", {"n": 10**30}), "steps[2].meta.n", "beyond 64 bits"),
    (set_at("run.input", "x" * 1_000_001), "run.input",
     "a text of 1,000,001 characters; at most 1,000,000"),
    (set_at("run.source_id", "s" * 101), "run.source_id", "at most 100"),
    (set_at("run.history", [{}] * 1001), "run.history", "1,001 items; at most 1,000"),
    (set_at("steps", [{"seq": 1, "kind": "thought", "started_at": 1.0}] * 100_001), "steps",
     "100,001 items; at most 100,000"),
]


@pytest.mark.django_db
class TestMalformedBundles:
    @pytest.mark.parametrize(("change", "where", "message"), MALFORMED,
                             ids=[m[1].replace("…", "...") for m in MALFORMED])
    def test_each_bad_value_is_refused_naming_its_field(self, user, change, where, message):
        data = export_bundle(make_run(user, thoughts()))
        change(data)
        with pytest.raises(BundleError) as info:
            import_bundle(data, user=user)
        assert info.value.where == where and message in info.value.message
        assert Run.objects.count() == 1  # nothing imported

    @pytest.mark.parametrize(("text", "where", "message"), [
        ('"cost_usd": 0.0', "steps[0].cost_usd", "inf is not a finite number"),
        ('"cost_usd": 0.0', "", "not a usable JSON value"),
        ('"cost_usd": 0.0', "line 1, column", "nested more than 100 levels deep"),
    ], ids=["1e400", "a 5000-digit integer", "100k-deep nesting"])
    def test_json_text_that_parses_to_unstorable_values_is_refused(self, user, text, where,
                                                                   message):
        bundle = json.dumps(export_bundle(make_run(user, thoughts())))
        replacement = {"steps[0].cost_usd": '"cost_usd": 1e400', "": '"cost_usd": ' + "9" * 5000,
                       "line 1, column": '"cost_usd": ' + "[" * 100_000 + "]" * 100_000}[where]
        with pytest.raises(BundleError) as info:
            import_bundle(bundle.replace(text, replacement, 1), user=user)
        assert info.value.where.startswith(where) and message in info.value.message

    def test_the_page_names_the_field_instead_of_a_500(self, client, user):
        client.force_login(user)
        data = export_bundle(make_run(user, thoughts()))
        data["steps"][0]["started_at"] = 1e12
        upload = SimpleUploadedFile("far.json", json.dumps(data).encode())
        response = client.post(reverse("run_import"), {"bundle": upload}, follow=True)
        page = response.content.decode()
        assert response.status_code == 200 and "far.json was refused: steps[0].started_at: " in page
        assert Run.objects.count() == 1


# ---------------------------------------------------------------------------- bundles: writing


@pytest.mark.django_db(transaction=True)
class TestChunkedImport:
    def test_an_import_never_holds_the_write_lock_for_long(self, user, tmp_path):
        if connection.vendor != "sqlite":
            pytest.skip("SQLite's database-wide write lock; PostgreSQL locks rows")
        data = export_bundle(make_run(user, thoughts(1)))
        data["steps"] = [{**data["steps"][0], "seq": i, "text": "x" * 400,
                          "input": {"messages": [{"role": "user", "content": "y" * 400}]}}
                         for i in range(1, 20_001)]
        with OtherWriter(connection.settings_dict["NAME"]) as other:
            started = time.perf_counter()
            run = import_bundle(data, user=user)
            took = time.perf_counter() - started
        waits, errors = other.waits, other.errors
        assert run.step_count == 20_000 and run.steps.count() == 20_000
        assert not errors, errors[:3]  # never "database is locked" for the other writer
        assert max(waits) < 0.5, f"waited up to {max(waits):.2f} s (import took {took:.1f} s)"

    def test_a_half_import_is_visible_to_no_user_and_a_failure_leaves_nothing(
            self, user, staff, monkeypatch):
        data = export_bundle(make_run(user, thoughts(6)))
        monkeypatch.setattr(bundle_store, "STEP_CHUNK", 2)
        seen, real = [], upsert.execute

        def watching(prepared):  # each chunk's write: what can others see meanwhile?
            new = Run.objects.exclude(pk__in=[r.pk for r in Run.objects.filter(user=user)])
            seen.append((Run.objects.visible_to(user).count(),
                         [(r.user.username, r.user.is_active, r.status, r.input) for r in new]))
            if len(seen) == 3:
                raise sqlite3.OperationalError("disk full")
            return real(prepared)

        monkeypatch.setattr(upsert, "execute", watching)
        with pytest.raises(sqlite3.OperationalError):
            import_bundle(data, user=user)
        assert [count for count, _ in seen] == [1, 1, 1]  # only the exported run, all along
        staging = seen[1][1]
        assert staging == [("agentlab-import", False, "interrupted", bundle_store.IMPORTING)]
        assert Run.objects.count() == 1 and Step.objects.count() == 6  # the original only
        client = Client()
        client.force_login(staff)
        assert not client.login(username="agentlab-import", password="")

    def test_an_import_left_by_a_dead_process_is_removed_by_the_next_start(self, user):
        gone = subprocess.Popen(["true"])
        gone.wait()
        me = this_process()
        left = Run.objects.create(user=bundle_store.staging_user(), input="i", agent_name="t",
                                  status="interrupted",
                                  worker=str(Identity(me.host, gone.pid, 1, me.boot, me.place)))
        Step.objects.create(run=left, seq=1, kind="thought", started_at=datetime.now(UTC))
        assert startup.sweep()["imports"] == 1
        assert not Run.objects.filter(pk=left.pk).exists() and not Step.objects.exists()


# ---------------------------------------------------------------------------- credentials


LEAKY = "https://alice:s3cret@llm.example.com:8443/v1?api_key=sk-live-123&region=eu"
CLEAN = "https://llm.example.com:8443/v1?region=eu"
SECRETS = ("s3cret", "sk-live-123", "alice:", "tok-999", "api_key=", "bob:pw")


@pytest.fixture
def leaky_run(user):
    snapshot = {"paradigm": "react", "profiles": {
        "default": {"name": "p", "model": "m", "base_url": LEAKY, "api_key_env": "P_API_KEY",
                    "fallback": {"name": "f", "base_url": "http://bob:pw@10.0.0.2/v1"}}},
        "agents": {"member": {"profiles": {"default": {
            "base_url": "https://llm.example.com/v1?access_token=tok-999"}}}}}
    error = f"cannot reach {LEAKY} (profile 'p'): connection refused"
    run = Run.objects.create(user=user, agent_name="a", paradigm="react",
                             agent_snapshot=snapshot, input="q", status="failed", error=error)
    Step.objects.bulk_create([Step.from_record(run.pk, s) for s in (
        StepRecord(seq=1, kind="llm", name="m", status="error", text=error,
                   input={"messages": [{"role": "user", "content": "q"}]},
                   meta={"endpoint": LEAKY}, started_at=1735787045.0),
        StepRecord(seq=2, kind="final", text="", started_at=1735787046.0,
                   meta={"error": error}))])
    return run


@pytest.mark.django_db
class TestCredentialsInExports:
    def test_a_bundle_has_no_credentials_and_keeps_the_host(self, leaky_run):
        text = json.dumps(export_bundle(leaky_run))
        assert not [s for s in SECRETS if s in text]
        assert CLEAN in text and "http://10.0.0.2/v1" in text
        assert "https://llm.example.com/v1" in text and "P_API_KEY" in text

    def test_otlp_spans_have_no_credentials(self, leaky_run):
        text = json.dumps(export_otlp(leaky_run, leaky_run.steps.order_by("seq")))
        assert not [s for s in SECRETS if s in text] and CLEAN in text

    def test_the_download_buttons_give_the_same(self, client, user, leaky_run):
        client.force_login(user)
        for name in ("run_export", "run_export_otlp", "run_export_otlp_protobuf"):
            text = client.get(reverse(name, args=[leaky_run.pk])).content.decode(errors="replace")
            assert not [s for s in SECRETS if s in text] and CLEAN in text

    def test_an_import_keeps_no_credentials_either(self, leaky_run, other_user):
        data = export_bundle(leaky_run)
        data["run"]["agent_snapshot"] = copy.deepcopy(leaky_run.agent_snapshot)  # as if sent
        copy_ = import_bundle(data, user=other_user)
        assert not [s for s in SECRETS if s in json.dumps(copy_.agent_snapshot)]

    @pytest.mark.parametrize(("url", "clean"), [
        ("https://user:pass@host/v1", "https://host/v1"),
        ("http://u:p%40ss@h:8080/x?key=1&model=m", "http://h:8080/x?model=m"),
        ("https://h/v1?X-Api-Key=abc&token=t&password=p&sig=s", "https://h/v1"),
        ("https://h/cb#access_token=abc", "https://h/cb"),
        ("https://api.openai.com/v1", "https://api.openai.com/v1"),
        ("postgres://app:pw@db:5432/agentlab", "postgres://db:5432/agentlab"),
    ])
    def test_redact_url(self, url, clean):
        assert redact_url(url) == clean
