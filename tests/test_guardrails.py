"""The guardrails' pure core (agentlab/guardrails/, agentlab/runtime/guard.py): what each
detector finds and what it leaves alone, redaction markers and spans, and the runtime's guard
on a ReAct run with a scripted model (tests/scripted_model.py: control flow, no database)."""

from __future__ import annotations

import json

import pytest

from agentlab.guardrails import detectors
from agentlab.guardrails.checks import Check, GuardrailBlocked, scan_text, scrub
from agentlab.guardrails.decisions import check_question
from agentlab.guardrails.judge import read_verdict
from agentlab.paradigms.react import ReAct
from agentlab.paradigms.registry import validate_params
from agentlab.runtime.guard import RunGuard, TokenLines
from agentlab.runtime.loop import execute
from agentlab.tools.decorator import tool
from tests.scripted_model import ScriptedModel, call, make_context, reply

CARD = "4111 1111 1111 1111"
IBAN = "DE89 3704 0044 0532 0130 00"
EMAIL = "jane.doe@example.com"
KEY = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlF"
SECRETS = (CARD, IBAN, EMAIL, KEY, "4111111111111111", "DE89370400440532013000")


def found(text: str, detector=detectors.pii) -> list[tuple[str, str]]:
    return [(s.label, text[s.start:s.end]) for s in detector(text)]


def pii(action: str = "redact", stage: str = "output", **kw) -> Check:
    return Check(name=f"pii-{action}", stage=stage, kind="pii", action=action, **kw)


@pytest.mark.parametrize("text, expected", [
    (f"card {CARD}.", [("card", CARD)]),
    ("Amex 3782-822463-10005 on file", [("card", "3782-822463-10005")]),
    ("mastercard 5500000000000004", [("card", "5500000000000004")]),
    (f"IBAN {IBAN}", [("iban", IBAN)]),
    ("GB82WEST12345698765432 is the account", [("iban", "GB82WEST12345698765432")]),
    (f"write to {EMAIL}!", [("email", EMAIL)]),
    ("call +49 30 1234567 or (555) 123-4567", [("phone", "+49 30 1234567"),
                                               ("phone", "(555) 123-4567")]),
    ("UK office 020 7946 0958", [("phone", "020 7946 0958")]),
    (f"key={KEY}", [("api_key", KEY)]),
    ("sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx", [
        ("api_key", "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx")]),
    ("aws AKIAIOSFODNN7EXAMPLE", [("api_key", "AKIAIOSFODNN7EXAMPLE")]),
    ("ghp_" + "a1" * 18, [("api_key", "ghp_" + "a1" * 18)]),
    ("slack xoxb-1234567890-abcdefghij", [("api_key", "xoxb-1234567890-abcdefghij")]),
    ("AIza" + "B" * 35, [("api_key", "AIza" + "B" * 35)]),
    ("Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123", [
        ("api_key", "abcdefghijklmnopqrstuvwxyz0123")]),
    (f"jwt {JWT}", [("api_key", JWT)]),
])
def test_each_detector_finds_its_kind(text, expected):
    assert found(text) == expected


@pytest.mark.parametrize("text", [
    "order 4111 1111 1111 1112 shipped",  # fails Luhn
    "invoice 1234567890123456",  # fails Luhn
    "0000 0000 0000 0000",  # Luhn-valid, no card starts with 0
    "DE89 3704 0044 0532 0130 01",  # fails mod-97
    "on 2024-01-15 at 10:30, 3 items for 1299.00 EUR, population 2100000",
    "sk-short and see §12",
    "version 1.2.3.4 of the file",
])
def test_ordinary_numbers_and_text_are_left_alone(text):
    assert found(text) == []


def test_redaction_replaces_spans_with_markers_and_reports_original_offsets():
    text = f"Card {CARD}, mail {EMAIL}."
    out, hits = scan_text(text, [pii()], subject=True, path="text")
    assert out == "Card [redacted: card], mail [redacted: email]."
    assert [(h.label, h.start, h.end) for h in hits] == [("card", 5, 24), ("email", 31, 51)]
    assert all(set(h.as_dict()) == {"path", "start", "end", "label"} for h in hits)
    assert CARD not in json.dumps([h.as_dict() for h in hits])


def test_flag_keeps_the_text_and_acts_only_on_a_subject():
    text = f"mail {EMAIL}"
    assert scan_text(text, [pii("flag")], subject=True)[0] == text
    assert len(scan_text(text, [pii("flag")], subject=True)[1]) == 1
    assert scan_text(text, [pii("flag")], subject=False) == (text, [])


def test_deny_list_and_max_length():
    deny = Check(name="deny", stage="output", kind="regex", action="redact",
                 pattern=r"project\s+falcon")
    assert scan_text("Project  Falcon ships", [deny], subject=False)[0] == \
        "[redacted: deny] ships"
    longest = Check(name="short", stage="output", kind="max_length", action="redact", limit=5)
    assert scan_text("abcdefgh", [longest], subject=True)[0] == "abcde[redacted: length]"
    assert scan_text("abcdefgh", [longest], subject=False)[0] == "abcdefgh"


def test_scrub_walks_json_and_keeps_untouched_values_as_they_are():
    value = {"a": [f"x {KEY}", 3, None], "b": {"c": "plain"}}
    out, hits = scrub(value, [pii()], subject=False, path="output")
    assert out == {"a": ["x [redacted: api_key]", 3, None], "b": {"c": "plain"}}
    assert out["b"] is value["b"] and [h.path for h in hits] == ["output.a[0]"]
    same, none = scrub(value["b"], [pii()], subject=False)
    assert same is value["b"] and none == []


def test_a_blocked_question_is_stored_masked_with_its_decision():
    text, decided = check_question(f"my card is {CARD}", [pii("block", "input",
                                                              message="No cards, please.")])
    assert text == "my card is [redacted: card]"
    assert decided["blocked"] == {"guardrail": "pii-block", "message": "No cards, please."}
    assert decided["decisions"][0]["spans"] == [
        {"path": "question", "start": 11, "end": 30, "label": "card"}]


@pytest.mark.parametrize("reply_text, violation", [
    ("OK\nnothing wrong", False), ("VIOLATION\nprices", True), ("**Violation**: yes", True),
    ("I think it is fine", True),  # neither word: fails closed
])
def test_the_judges_verdict(reply_text, violation):
    assert read_verdict(reply_text)[0] is violation


def test_streamed_tokens_go_out_a_redacted_line_at_a_time():
    lines = TokenLines([pii()])
    sent = [lines.feed(d) for d in ("Card 4111 11", "11 1111 1111\nnext ", "line")]
    assert sent == ["", "Card [redacted: card]\n", ""]


# ---------------------------------------------------------------- the runtime's guard

@tool
def customer_record(name: str) -> str:
    """Look up a customer's record."""
    return f"{name}: card {CARD}, IBAN {IBAN}, e-mail {EMAIL}, api key {KEY}"


def guarded_run(script, checks, question="What is Jane's record?"):
    model = ScriptedModel(script)
    ctx, sink = make_context(model, [customer_record],
                             params=validate_params("react", {"mode": "function_calling"}))
    ctx.guard = RunGuard(checks)
    return model, ctx, sink, execute(ReAct(), ctx, question)


def recorded_text(sink) -> str:
    return json.dumps([s.to_dict() for s in sink.events]) + json.dumps(sink.statuses) + \
        json.dumps(sink.tokens)


async def test_a_tool_observation_is_redacted_before_the_model_and_the_sink_see_it():
    model, _ctx, sink, running = guarded_run(
        [reply("", call("customer_record", {"name": "Jane"})),
         reply(f"Jane pays with {CARD}; write to {EMAIL}.")], [pii()])
    outcome = await running
    assert outcome.status == "succeeded"
    assert not any(s in json.dumps(model.requests[1]) for s in SECRETS)  # the model never saw it
    text = recorded_text(sink)
    assert not any(s in text for s in SECRETS)
    assert "[redacted: card]" in sink.of_kind("tool")[0].text
    decisions = sink.of_kind("guardrail")
    tool_seq = sink.of_kind("tool")[0].seq
    first = next(d for d in decisions if d.meta["step"] == tool_seq)
    assert {s["label"] for s in first.meta["spans"]} == {"card", "iban", "email", "api_key"}
    assert first.meta["action"] == "redact"
    assert outcome.answer == "Jane pays with [redacted: card]; write to [redacted: email]."


async def test_a_block_on_a_tool_observation_stops_the_run_with_its_message():
    model, _ctx, sink, running = guarded_run(
        [reply("", call("customer_record", {"name": "Jane"})), reply("never asked")],
        [pii("block", message="Card data may not leave the billing system.")])
    outcome = await running
    assert outcome.status == "failed"
    assert outcome.error == outcome.answer == "Card data may not leave the billing system."
    assert len(model.requests) == 1  # the model never read the observation
    assert not any(s in recorded_text(sink) for s in SECRETS)
    assert sink.of_kind("guardrail")[0].meta["action"] == "block"


async def test_a_flag_keeps_the_reply_and_records_a_decision():
    _model, _ctx, sink, running = guarded_run([reply(f"Mail {EMAIL}.")],
                                              [Check(name="mail", stage="output", kind="email",
                                                     action="flag")])
    outcome = await running
    assert outcome.answer == f"Mail {EMAIL}."
    (decision,) = sink.of_kind("guardrail")
    assert decision.meta["action"] == "flag" and decision.meta["spans"][0]["label"] == "email"
    assert EMAIL not in json.dumps(decision.to_dict())


async def test_a_run_without_guardrails_records_everything_as_it_was():
    _model, ctx, sink, running = guarded_run([reply(f"Mail {EMAIL}.")], [])
    ctx.guard = None
    await running
    assert EMAIL in recorded_text(sink) and not sink.of_kind("guardrail")


def test_a_block_is_an_exception_carrying_its_message():
    exc = GuardrailBlocked("g", "no")
    assert str(exc) == "no" and exc.guardrail == "g"
