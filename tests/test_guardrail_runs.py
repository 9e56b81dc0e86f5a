"""Guardrails on real runs (docs/GUARDRAILS.md): a scripted model (tests/fake_openai.py) and a
billing tool that return realistic PII and secrets, the real database, the run socket, the
exports and a live OTLP collector. What a guardrail redacted is nowhere: not in any row of the
database, not in a socket frame, not in a bundle, an OTLP download or a live span, not in what
the model was sent next. Each decision is a `guardrail` step with its spans."""

from __future__ import annotations

import io
import json

import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.test import Client

from agentlab.models import Guardrail, ModelProfile
from agentlab.runs.snapshot import create_run
from tests.billing import (
    ANSWER,
    CALL,
    CARD,
    EMAIL,
    IBAN,
    KEY,
    REPLY_EMAIL,
    SECRETS,
    billing_agent,
    customer_record,
    guardrail,
    run_to_end,
)
from tests.fake_openai import Reply
from tests.sockets import connect, frames_until, is_type, synced
from traces.models import Run, Step
from traces.otel import live

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def agent(fake_llm, monkeypatch):
    return billing_agent(fake_llm.base_url, monkeypatch)


def leaks(text: str | bytes, among: tuple[str, ...] = SECRETS) -> list[str]:
    if isinstance(text, bytes):
        return [s for s in among if s.encode() in text]
    return [s for s in among if s in text]


def database_dump() -> str:
    out = io.StringIO()
    call_command("dumpdata", stdout=out)
    return out.getvalue()


def decisions(run: Run) -> list[Step]:
    return list(Step.objects.filter(run=run, kind="guardrail").order_by("seq"))


async def test_pii_from_a_tool_and_a_reply_reaches_no_row_frame_export_or_model(
        agent, user, fake_llm, stop_runs):
    await sync_to_async(guardrail)()
    fake_llm.script(CALL, ANSWER)
    run = await sync_to_async(create_run)(agent, user, "What card does Jane Doe pay with?")
    comm = await connect(run.pk, user)
    await synced(comm)
    await comm.send_json_to({"action": "start"})
    frames = await frames_until(comm, is_type("final"))
    await comm.disconnect()
    assert frames[-1]["status"] == "succeeded"
    assert leaks(json.dumps(frames)) == []
    streamed = "".join(f["delta"] for f in frames if f["type"] == "token")  # 4 characters each
    assert streamed == "Jane Doe pays with card [redacted: card].\n"  # whole lines, redacted
    assert "[redacted: card]" in frames[-1]["answer"]
    assert any(f["type"] == "step" and f["kind"] == "guardrail" for f in frames)
    # The model read the observation redacted: it could not repeat what it never saw.
    assert leaks(json.dumps(fake_llm.requests[1])) == []
    assert "[redacted: iban]" in json.dumps(fake_llm.requests[1])
    assert leaks(await sync_to_async(database_dump)()) == []

    run = await Run.objects.aget(pk=run.pk)
    assert run.final_answer == ("Jane Doe pays with card [redacted: card].\n"
                                "Write to [redacted: email].")
    found = await sync_to_async(decisions)(run)
    tool_seq = await Step.objects.filter(run=run, kind="tool").values_list(
        "seq", flat=True).aget()
    on_tool = next(d for d in found if d.meta["step"] == tool_seq)
    assert on_tool.meta["action"] == "redact" and on_tool.meta["guardrail"] == "No PII"
    assert {s["label"] for s in on_tool.meta["spans"]} == {"card", "iban", "email", "api_key"}
    card = next(s for s in on_tool.meta["spans"] if s["label"] == "card")
    observation = customer_record.fn("Jane Doe")
    assert observation[card["start"]:card["end"]] == CARD  # offsets into the original

    client = Client()
    await sync_to_async(client.force_login)(user)
    for url in (f"/runs/{run.pk}/export/", f"/runs/{run.pk}/export/otlp/",
                f"/runs/{run.pk}/export/otlp.pb", f"/runs/{run.pk}/"):
        response = await sync_to_async(client.get)(url)
        assert response.status_code == 200, url
        body = b"".join(response) if response.streaming else response.content
        assert leaks(body) == [], url
    otlp = (await sync_to_async(client.get)(f"/runs/{run.pk}/export/otlp/")).content.decode()
    assert '"GUARDRAIL"' in otlp


async def test_the_live_otlp_export_gets_the_redacted_steps(
        agent, user, fake_llm, collector):
    await sync_to_async(guardrail)()
    fake_llm.script(CALL, ANSWER)
    run = await run_to_end(agent, user)
    assert run.status == "succeeded"
    assert await sync_to_async(live.flush)()
    spans = "\n".join(str(s) for s in collector.spans)
    assert "[redacted: card]" in spans and "GUARDRAIL" in spans
    assert leaks(spans) == []


async def test_a_block_stops_the_run_with_its_message(agent, user, fake_llm):
    await sync_to_async(guardrail)(name="No cards", kind="card", action="block",
                                   message="Card numbers stay in the billing system.")
    fake_llm.script(CALL, ANSWER)
    run = await run_to_end(agent, user)
    assert run.status == "failed"
    assert run.error == run.final_answer == "Card numbers stay in the billing system."
    assert len(fake_llm.requests) == 1  # the observation never went back to the model
    (decision,) = await sync_to_async(decisions)(run)
    assert decision.meta["action"] == "block" and decision.meta["check"] == "card"
    dump = await sync_to_async(database_dump)()
    assert leaks(dump, (CARD, "4111111111111111")) == [] and IBAN in dump  # only cards block
    page = await sync_to_async(_page)(user, f"/runs/{run.pk}/")
    assert "Card numbers stay in the billing system." in page
    links = page[page.index('id="guardrail-decisions"'):]
    assert f'href="?step={decision.seq}"' in links and f"#{decision.seq} No cards: block" in links


def _page(user, url: str) -> str:
    client = Client()
    client.force_login(user)
    return client.get(url).content.decode()


async def test_a_flag_keeps_the_text_and_records_the_decision(agent, user, fake_llm):
    await sync_to_async(guardrail)(name="Mail seen", kind="email", action="flag",
                                   applies_to_all=False)
    await sync_to_async(lambda: agent.guardrails.set(Guardrail.objects.all()))()
    fake_llm.script(ANSWER)
    run = await run_to_end(agent, user)
    assert run.status == "succeeded" and REPLY_EMAIL in run.final_answer
    (decision,) = await sync_to_async(decisions)(run)
    assert decision.meta["action"] == "flag" and decision.meta["spans"][0]["label"] == "email"
    assert REPLY_EMAIL not in json.dumps(decision.meta) + decision.text


async def test_the_question_is_redacted_before_the_run_row_or_the_model_sees_it(
        agent, user, fake_llm):
    await sync_to_async(guardrail)(name="Question PII", stage="input")
    fake_llm.script(Reply(text="Noted."))
    run = await run_to_end(agent, user, f"My card is {CARD}, mail me at {EMAIL}. Is it ok?")
    assert run.input == "My card is [redacted: card], mail me at [redacted: email]. Is it ok?"
    assert leaks(json.dumps(fake_llm.requests)) == []
    first = (await sync_to_async(decisions)(run))[0]
    assert first.seq == 1 and first.meta["stage"] == "input" and first.meta["step"] is None
    assert [s["label"] for s in first.meta["spans"]] == ["card", "email"]
    assert leaks(await sync_to_async(database_dump)()) == []


async def test_a_blocked_question_never_reaches_the_model(agent, user, fake_llm):
    await sync_to_async(guardrail)(name="No secrets asked", stage="input", kind="api_key",
                                   action="block", message="Do not paste keys into a chat.")
    run = await run_to_end(agent, user, f"Why does {KEY} not work?")
    assert run.status == "failed" and run.final_answer == "Do not paste keys into a chat."
    assert fake_llm.requests == []
    assert leaks(run.input + await sync_to_async(database_dump)()) == []


@pytest.mark.parametrize("verdict, status", [("VIOLATION\nIt reveals a discount.", "failed"),
                                             ("OK\nNothing internal.", "succeeded")])
async def test_an_llm_judge_on_its_own_profile_decides_about_the_answer(
        agent, user, fake_llm, verdict, status):
    """Scripted model: the agent's answer, then the judge's verdict (its own profile)."""
    judge = await ModelProfile.objects.acreate(name="Judge", base_url=fake_llm.base_url,
                                               model="judge-model", retries=0)
    await sync_to_async(guardrail)(name="No discounts", kind="judge", action="block",
                                   judge_profile=judge, pattern="Never reveal discounts.",
                                   message="That answer was withheld.")
    fake_llm.script(Reply(text="You get 40% off as a partner."), Reply(text=verdict))
    run = await run_to_end(agent, user, "What discount do partners get?")
    assert run.status == status
    judged = fake_llm.requests[1]
    assert judged["model"] == "judge-model"
    assert "Never reveal discounts." in json.dumps(judged["messages"])
    (decision,) = await sync_to_async(decisions)(run)
    assert decision.meta["check"] == "judge" and decision.meta["judge_model"]
    if status == "failed":
        assert run.final_answer == "That answer was withheld."
        assert decision.meta["action"] == "block"
        assert decision.meta["reason"] == "It reveals a discount."
    else:
        assert run.final_answer == "You get 40% off as a partner."
        assert decision.meta["action"] == "pass"


async def test_the_dashboard_counts_decisions_and_links_to_the_runs(agent, user, fake_llm):
    await sync_to_async(guardrail)()
    fake_llm.script(CALL, ANSWER)
    run = await run_to_end(agent, user)
    page = await sync_to_async(_page)(user, "/dashboard/")
    row = page[page.index('data-guardrail="No PII"'):]
    row = row[:row.index("</tr>")]
    acted = await Step.objects.filter(run=run, kind="guardrail").acount()
    assert acted >= 2 and f'data-col="decisions">{acted}<' in row
    listed = await sync_to_async(_page)(user, "/runs/?guardrail=No+PII&guardrail_action=redact")
    assert f"/runs/{run.pk}/" in listed
    none = await sync_to_async(_page)(user, "/runs/?guardrail_action=block")
    assert f"/runs/{run.pk}/" not in none


def test_the_snapshot_freezes_the_agents_and_the_global_guardrails(agent, user):
    guardrail(name="Everyone")
    own = guardrail(name="Own", kind="email", applies_to_all=False)
    guardrail(name="Someone else's", kind="phone", applies_to_all=False)
    guardrail(name="Off", enabled=False)
    agent.guardrails.add(own)
    run = create_run(agent, user, "hello")
    assert [g["name"] for g in run.agent_snapshot["guardrails"]] == ["Everyone", "Own"]
    Guardrail.objects.update(enabled=False)  # a later edit does not rewrite the run's record
    assert len(Run.objects.get(pk=run.pk).agent_snapshot["guardrails"]) == 2


@pytest.mark.parametrize("fields, field", [
    ({"kind": "regex", "pattern": "a{99999}"}, "pattern"),
    ({"kind": "max_length"}, "limit"),
    ({"kind": "judge", "pattern": "policy"}, "judge_profile"),
])
def test_the_admin_refuses_a_guardrail_that_cannot_work(fields, field):
    with pytest.raises(ValidationError) as caught:
        guardrail(name="Broken", **fields)
    assert field in caught.value.message_dict


async def test_an_input_judge_reads_the_question_and_can_stop_the_run(agent, user, fake_llm):
    """Scripted model: the judge's verdict on the question comes first; the agent never runs."""
    judge = await ModelProfile.objects.acreate(name="Judge", base_url=fake_llm.base_url,
                                               model="judge-model", retries=0)
    await sync_to_async(guardrail)(name="No competitors", stage="input", kind="judge",
                                   action="block", judge_profile=judge,
                                   pattern="Refuse questions about competitors.",
                                   message="I cannot talk about other companies.")
    fake_llm.script(Reply(text="VIOLATION\nIt asks about a competitor."))
    run = await run_to_end(agent, user, "How does Acme price its plans?")
    assert json.dumps(fake_llm.requests[0]["messages"]).count("How does Acme price its plans?")
    assert (run.status, run.final_answer) == ("failed", "I cannot talk about other companies.")
    assert len(fake_llm.requests) == 1  # the agent's model was never asked
