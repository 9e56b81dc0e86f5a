"""Inputs that would stall or bloat a web process (issue 35, second round).

- the diff page: word and line diffs that grow with the product of repeating tokens;
- OTLP uploads under the size cap holding millions of events, attributes, links or values;
- imported runs thousands of levels deep (the OTLP export recursed, the steps page asked one
  query per level);
- a staff-written deny-list pattern that backtracks, run on the event loop for every string
  of every emit.

Each test asserts on counts and refusals (what ran, how often, on which thread, the message),
not on the clock; where the old code would run for hours, a spy stops it at the first sign.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import random
import threading
from datetime import UTC, datetime

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from agentlab.guardrails import user_regex
from agentlab.guardrails.checks import Check
from agentlab.models import Guardrail
from agentlab.runtime.guard import RunGuard
from tests.scripted_model import ScriptedModel, make_context
from traces import diff as diff_module
from traces.bundle import BundleError, export_bundle, import_bundle
from traces.models import Run, Step
from traces.otel import decode
from traces.otel.importer import import_file
from traces.otlp import export_otlp, export_otlp_protobuf
from traces.schema import Step as StepRecord
from traces.views import diff as diff_view

REAL_MATCHER = difflib.SequenceMatcher
FIELD_PAIRS = 1_000_000  # what one field's diff may cost (traces.diff.MAX_FIELD_PAIRS)
TOTAL_PAIRS = 5_000_000  # … and one page's together (traces.diff.MAX_TOTAL_PAIRS)


def make_run(user, texts=(), *, parents=None, **fields) -> Run:
    run = Run.objects.create(user=user, agent_name="imported", paradigm="react",
                             agent_snapshot={"paradigm": "react", "profiles": {}},
                             input="q", status="succeeded", final_answer="a",
                             started_at=datetime(2025, 1, 2, tzinfo=UTC), **fields)
    parents = parents or {}
    Step.objects.bulk_create(
        (Step.from_record(run.pk, StepRecord(seq=i, kind="thought", text=text,
                                             parent=parents.get(i),
                                             started_at=1735787045.0 + i))
         for i, text in enumerate(texts, start=1)), batch_size=1000)
    run.step_count = len(texts)
    run.save(update_fields=["step_count"])
    return run


# ------------------------------------------------------------------------------- 1. the diff


class CostSpy:
    """Stands in for difflib.SequenceMatcher in traces.diff: counts what each word or line
    diff would cost (pairs of equal tokens) and stops one over the per-field bound at once."""

    def __init__(self):
        self.fields = 0
        self.spent = 0

    def __call__(self, junk, a, b, autojunk=True):
        if a and isinstance(a[0], str):  # a text's tokens (alignment hands tuples)
            count_b: dict[str, int] = {}
            for token in b:
                count_b[token] = count_b.get(token, 0) + 1
            pairs = sum(count_b.get(token, 0) for token in a)
            assert pairs <= FIELD_PAIRS, f"a diff of {pairs:,} token pairs was started"
            self.fields += 1
            self.spent += pairs
        return REAL_MATCHER(junk, a, b, autojunk=autojunk)


@pytest.fixture
def cost(monkeypatch):
    spy = CostSpy()
    monkeypatch.setattr(diff_module.difflib, "SequenceMatcher", spy)
    return spy


@pytest.mark.django_db
class TestDiffBombs:
    def test_two_30_kb_steps_of_repeating_lines_are_not_matched_line_by_line(
            self, client, user, cost):
        rng = random.Random(35)
        left = "".join(rng.choice(("a\n", "b\n")) for _ in range(15_000))
        right = "".join(rng.choice(("a\n", "b\n")) for _ in range(15_000))
        a, b = make_run(user, [left]), make_run(user, [right])
        client.force_login(user)
        response = client.get(reverse("run_diff"), {"a": a.pk, "b": b.pk})
        assert response.status_code == 200
        page = response.content.decode()
        assert "too long to word-diff (30,000 and 30,000 characters, 15,001 and 15,001 " \
               "lines)" in page

    def test_a_20_mb_upload_size_field_is_never_split_into_tokens(self, cost):
        old, new = "x\n" * 2_000_000, "y\n" * 2_000_000
        chunks = diff_module.diff_text(old, new)
        assert cost.fields == 0
        assert chunks[0][0] == "note" and "4,000,000 and 4,000,000 characters" in chunks[0][1]
        shown = sum(len(text) for tag, text in chunks if tag != "note")
        assert shown <= 2 * diff_module.SHOW_CHARS + 1  # and the common end, "\n"

    def test_the_fields_of_one_diff_spend_one_bounded_budget(self, client, user, cost):
        rng = random.Random(7)
        words = [f"w{i}" for i in range(40)]

        def text():  # 1,799 tokens, 899 of them spaces: ~0.83 M pairs a field, 10 M in all
            return " ".join(rng.choice(words) for _ in range(900))

        a = make_run(user, [text() for _ in range(12)])
        b = make_run(user, [text() for _ in range(12)])
        client.force_login(user)
        response = client.get(reverse("run_diff"), {"a": a.pk, "b": b.pk})
        assert response.status_code == 200
        assert cost.spent <= TOTAL_PAIRS  # the rest were diffed by lines (one line each)
        assert response.content.decode().count('<tr class="op-changed') == 12

    def test_only_the_rows_shown_get_word_diffs(self, client, user, monkeypatch):
        monkeypatch.setattr(diff_view, "PAGE_ROWS", 20)
        calls = []
        real = diff_module.diff_text
        monkeypatch.setattr(diff_module, "diff_text", lambda *a, **k: calls.append(1) or real(
            *a, **k))
        a = make_run(user, [f"left {i}" for i in range(60)])
        b = make_run(user, [f"right {i}" for i in range(60)])
        client.force_login(user)
        response = client.get(reverse("run_diff"), {"a": a.pk, "b": b.pk})
        assert response.status_code == 200
        assert len(calls) == 20
        assert "40 more rows not shown" in response.content.decode()


# ---------------------------------------------------------------------- 2. OTLP count bombs


def _ld(tag: int, payload: bytes) -> bytes:
    out, size = bytearray([tag]), len(payload)
    while size > 0x7F:
        out.append((size & 0x7F) | 0x80)
        size >>= 7
    out.append(size)
    return bytes(out) + payload


def one_span_request(span_fields: bytes) -> bytes:
    """An ExportTraceServiceRequest of one span: ids, a name, then `span_fields` (raw)."""
    span = _ld(0x0A, b"\x01" * 16) + _ld(0x12, b"\x02" * 8) + _ld(0x2A, b"bomb") + span_fields
    return _ld(0x0A, _ld(0x12, _ld(0x12, span)))


@pytest.fixture
def no_parse(monkeypatch):
    """The protobuf and JSON parsers refuse to run: a bomb must be refused before them."""
    def refuse(*args, **kwargs):
        raise AssertionError("the upload was parsed before it was counted")
    monkeypatch.setattr(decode.ExportTraceServiceRequest, "FromString", refuse)
    monkeypatch.setattr(decode.json_format, "ParseDict", refuse)


def json_span(**fields) -> dict:
    span = {"traceId": "01" * 16, "spanId": "02" * 8, "name": "bomb", **fields}
    return {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}


@pytest.mark.django_db
class TestOtlpCountBombs:
    def test_a_20_mb_protobuf_of_one_span_with_ten_million_empty_events(self, user, no_parse):
        data = one_span_request(b"\x5a\x00" * 10_000_000)  # field 11 (events), empty
        assert 19_000_000 < len(data) < 20 * 1024 * 1024  # under the upload cap
        with pytest.raises(decode.OTLPError) as refused:
            import_file(data, user=user)
        assert str(refused.value) == (
            "a span holds more than 10,000 events (the limit, AGENTLAB_OTLP_MAX_EVENTS); "
            "nothing was imported")
        assert not Run.objects.exists()

    def test_the_upload_page_says_why(self, client, user):
        from django.core.files.uploadedfile import SimpleUploadedFile
        client.force_login(user)
        upload = SimpleUploadedFile("bomb.pb", one_span_request(b"\x5a\x00" * 20_000))
        response = client.post(reverse("run_import"), {"bundle": upload}, follow=True)
        assert "bomb.pb was refused: a span holds more than 10,000 events" in \
            response.content.decode()

    def test_json_events_are_counted_before_conversion(self, user, no_parse):
        data = json.dumps(json_span(events=[{}] * 20_000)).encode()
        with pytest.raises(decode.OTLPError, match="a span holds more than 10,000 events"):
            import_file(data, user=user)

    @pytest.mark.parametrize("form", ["protobuf", "json"])
    @pytest.mark.parametrize(("fields", "wire", "message"), [
        ({"attributes": [{"key": "k", "value": {"intValue": "1"}}] * 6},
         _ld(0x4A, _ld(0x0A, b"k") + _ld(0x12, b"\x18\x01")) * 6,
         "a span holds more than 5 attributes (the limit, AGENTLAB_OTLP_MAX_ATTRIBUTES)"),
        ({"links": [{}] * 6}, b"\x6a\x00" * 6,
         "a span holds more than 5 links (the limit, AGENTLAB_OTLP_MAX_LINKS)"),
        ({"events": [{"attributes": [{"key": "k"}] * 6}]},
         _ld(0x5A, _ld(0x1A, _ld(0x0A, b"k")) * 6),
         "a span's event holds more than 5 attributes"),
        ({"attributes": [{"key": "k", "value": {"arrayValue": {"values": [{}] * 6}}}]},
         _ld(0x4A, _ld(0x0A, b"k") + _ld(0x12, _ld(0x2A, b"\x0a\x00" * 6))),
         "an attribute's value holds more than 5 items in one array or kvlist value "
         "(the limit, AGENTLAB_OTLP_MAX_VALUES)"),
    ], ids=["attributes", "links", "event attributes", "array items"])
    def test_every_repeated_field_has_its_limit(self, user, settings, no_parse, form, fields,
                                                wire, message):
        settings.AGENTLAB_OTLP_MAX_ATTRIBUTES = settings.AGENTLAB_OTLP_MAX_EVENTS = 5
        settings.AGENTLAB_OTLP_MAX_LINKS = settings.AGENTLAB_OTLP_MAX_VALUES = 5
        data = (one_span_request(wire) if form == "protobuf"
                else json.dumps(json_span(**fields)).encode())
        with pytest.raises(decode.OTLPError, match=message.replace("(", r"\(").replace(
                ")", r"\)")):
            import_file(data, user=user)

    def test_the_whole_upload_has_a_limit_too(self, user, settings, no_parse):
        settings.AGENTLAB_OTLP_MAX_ITEMS = 10
        attribute = _ld(0x4A, _ld(0x0A, b"k") + _ld(0x12, b"\x18\x01"))
        span = _ld(0x0A, b"\x01" * 16) + _ld(0x12, b"\x02" * 8) + attribute * 4
        data = _ld(0x0A, _ld(0x12, _ld(0x12, span) * 3))
        with pytest.raises(decode.OTLPError, match="more than 10 attributes, events, links "
                                                   "and values .*AGENTLAB_OTLP_MAX_ITEMS"):
            import_file(data, user=user)

    def test_values_nested_deeper_than_the_parser_allows_are_refused(self, user, no_parse):
        value = b""
        for _ in range(60):
            value = _ld(0x2A, _ld(0x0A, value))  # an array holding an array …
        data = one_span_request(_ld(0x4A, _ld(0x0A, b"k") + _ld(0x12, value)))
        with pytest.raises(decode.OTLPError, match="nested more than 32 levels deep"):
            import_file(data, user=user)

    def test_an_array_behind_a_plain_value_is_counted_too(self, user, settings, no_parse):
        # protobuf keeps the last of a oneof's fields: a string first must not hide the array
        settings.AGENTLAB_OTLP_MAX_VALUES = 5
        value = _ld(0x0A, b"plain") + _ld(0x2A, b"\x0a\x00" * 6)
        data = one_span_request(_ld(0x4A, _ld(0x0A, b"k") + _ld(0x12, value)))
        with pytest.raises(decode.OTLPError, match="more than 5 items in one array"):
            import_file(data, user=user)

    def test_an_attribute_cut_short_by_the_end_of_the_data_is_not_otlp(self, user, no_parse):
        data = one_span_request(b"\x4a\x10\x0a\x02ab\x12")  # 16 bytes said, 5 sent
        with pytest.raises(decode.OTLPError, match="runs past the end"):
            import_file(data, user=user)

    def test_an_ordinary_upload_still_comes_in(self, user):
        data = one_span_request(_ld(0x4A, _ld(0x0A, b"input.value") + _ld(0x12, _ld(
            0x0A, b"hello"))) + _ld(0x5A, _ld(0x12, b"an event")))
        ExportTraceServiceRequest.FromString(data)  # well-formed
        [run] = import_file(data, user=user)
        assert run.steps.count() == 1


# ----------------------------------------------------------------------- 3. deep parent chains

DEPTH = 5_000


@pytest.fixture
def deep_run(user):
    return make_run(user, [f"level {i}" for i in range(1, DEPTH + 1)],
                    parents={i: i - 1 for i in range(2, DEPTH + 1)})


@pytest.mark.django_db
class TestDeepRuns:
    def test_a_5000_level_chain_exports_to_otlp(self, deep_run, client, user):
        steps = list(deep_run.steps.order_by("seq"))
        document = export_otlp(deep_run, steps)
        spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
        assert len(spans) == DEPTH + 1
        assert export_otlp_protobuf(deep_run, steps)
        client.force_login(user)
        assert client.get(reverse("run_export_otlp", args=[deep_run.pk])).status_code == 200

    def test_the_steps_page_of_a_deep_run_takes_a_bounded_number_of_queries(
            self, deep_run, client, user, django_assert_max_num_queries):
        client.force_login(user)
        url = reverse("run_steps", args=[deep_run.pk])
        with django_assert_max_num_queries(30):  # 18 today; before: one per level (4,800)
            response = client.get(url, {"after": DEPTH - 200})
        assert response.status_code == 200
        assert f'data-depth="{DEPTH - 1}"' in response.content.decode()

    def test_a_bundle_nested_over_the_limit_is_refused(self, user, settings):
        bundle = export_bundle(make_run(user, ["x"] * 102,
                                        parents={i: i - 1 for i in range(2, 103)}))
        settings.AGENTLAB_IMPORT_MAX_DEPTH = 100
        with pytest.raises(BundleError) as refused:
            import_bundle(bundle, user=user)
        assert refused.value.where == "steps[101].parent"
        assert refused.value.message == ("steps nest 101 levels deep; at most 100 are allowed "
                                         "(AGENTLAB_IMPORT_MAX_DEPTH)")
        assert Run.objects.count() == 1  # the one exported

    def test_an_otlp_trace_nested_over_the_limit_is_refused(self, user, settings):
        settings.AGENTLAB_IMPORT_MAX_DEPTH = 100
        spans = [{"traceId": "01" * 16, "spanId": f"{i:016x}",
                  "parentSpanId": f"{i - 1:016x}" if i > 1 else "", "name": f"s{i}",
                  "startTimeUnixNano": str(1_735_787_045_000_000_000 + i),
                  "endTimeUnixNano": str(1_735_787_046_000_000_000)}
                 for i in range(1, 103)]
        data = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}).encode()
        with pytest.raises(decode.OTLPError, match="levels deep; at most 100 are allowed "
                                                   r"\(AGENTLAB_IMPORT_MAX_DEPTH\)"):
            import_file(data, user=user)
        assert not Run.objects.exists()


# ----------------------------------------------------------- 4. deny-list patterns on emit

HOSTILE = "a" * 41 + "!"  # `(a|aa)+$` backtracks exponentially on it
THREE = [HOSTILE, "a" * 42 + "!", "a" * 43 + "!"]
SLOW = "(a|aa)+$"


@pytest.fixture
def pattern_calls(monkeypatch):
    """Every run of a user's pattern: (thread, text)."""
    calls: list[tuple[int, str]] = []
    real = user_regex.spans

    def spy(pattern, text, *args, **kwargs):
        calls.append((threading.get_ident(), text))
        return real(pattern, text, *args, **kwargs)

    monkeypatch.setattr(user_regex, "spans", spy)
    return calls


def deny(pattern: str) -> Check:
    return Check(name="deny", stage="output", kind="regex", action="redact", pattern=pattern)


def emit_llm(ctx, messages):
    return ctx.emit(StepRecord(kind="llm", input={"messages": messages}, status="ok",
                               text="fine"))


def guarded_context(pattern: str):
    ctx, sink = make_context(ScriptedModel([]))
    ctx.guard = RunGuard([deny(pattern)])
    return ctx, sink


class TestDenyListOnEmit:
    async def test_a_slow_pattern_runs_off_the_loop_with_one_budget_for_the_emit(
            self, pattern_calls):
        ctx, sink = guarded_context(SLOW)
        loop_thread = threading.get_ident()
        await emit_llm(ctx, [{"role": "user", "content": text} for text in THREE])
        assert pattern_calls, "the pattern never ran"
        assert all(thread != loop_thread for thread, _ in pattern_calls)
        # one 1 s budget for the emit: the first hostile message spends it, the others are
        # treated as matches (fail closed) without running the pattern again
        assert sum(text in THREE for _, text in pattern_calls) == 1
        [llm] = [s for s in sink.events if s.kind == "llm"]
        shown = llm.input["messages"]
        assert all(m["content"] == "[redacted: deny]" for m in shown)

    async def test_an_emit_does_not_rescan_what_an_earlier_one_checked(self, pattern_calls):
        ctx, _sink = guarded_context(r"\bsecret\b")
        history = [{"role": "user", "content": f"message number {i}"} for i in range(50)]
        await emit_llm(ctx, history)
        before = len(pattern_calls)
        await emit_llm(ctx, [*history, {"role": "user", "content": "one more"}])
        again = [text for _, text in pattern_calls[before:]]
        assert "one more" in again
        assert not any(text.startswith("message number") for text in again)

    async def test_the_loop_stays_free_while_a_pattern_runs(self):
        ctx, _sink = guarded_context(SLOW)
        ticks = 0

        async def tick():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticker = asyncio.create_task(tick())
        await emit_llm(ctx, [{"role": "user", "content": HOSTILE}])
        ticker.cancel()
        assert ticks >= 10  # the pattern ran for its second; the loop went on ticking


@pytest.mark.django_db
class TestSlowPatternsAreRefusedWhenSaved:
    def test_the_model_refuses_a_pattern_that_backtracks(self):
        row = Guardrail(name="slow", kind="regex", pattern=SLOW, action="redact")
        with pytest.raises(ValidationError) as refused:
            row.full_clean()
        assert "the regular expression is too slow" in str(refused.value)

    def test_the_admin_says_why(self, client, staff):
        client.force_login(staff)
        response = client.post(reverse("admin:agentlab_guardrail_add"), {
            "name": "slow", "enabled": "on", "stage": "output", "kind": "regex",
            "action": "redact", "pattern": SLOW, "message": ""})
        assert response.status_code == 200
        assert "the regular expression is too slow" in response.content.decode()
        assert not Guardrail.objects.filter(name="slow").exists()

    def test_an_ordinary_pattern_is_saved(self):
        Guardrail(name="ok", kind="regex", pattern=r"\bsecret[-_ ]?\d+\b",
                  action="redact").full_clean()
