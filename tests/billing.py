"""A billing agent whose tool and model reply carry PII and secrets, for the guardrail tests
(tests/test_guardrail_runs.py, tests/browser/test_guardrail_pages.py): the secrets, the
scripted model's two replies (CALL, then ANSWER), the agent, a guardrail row, a run to its end."""

from __future__ import annotations

from asgiref.sync import sync_to_async

from agentlab.models import Agent, Guardrail, Tool
from agentlab.runs.execution import execute_run
from agentlab.runs.snapshot import create_run
from agentlab.tools.decorator import tool
from agentlab.tools.registry import all_tools
from tests.factories import scripted_profile
from tests.fake_openai import Reply
from traces.models import Run

CARD, IBAN = "4111 1111 1111 1111", "DE89 3704 0044 0532 0130 00"
EMAIL, KEY = "jane.doe@example.com", "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv"
REPLY_CARD, REPLY_EMAIL = "5500-0000-0000-0004", "j.doe@billing.example.org"
SECRETS = (CARD, IBAN, EMAIL, KEY, REPLY_CARD, REPLY_EMAIL, "4111111111111111",
           "DE89370400440532013000", "5500000000000004")
CALL = Reply(tool_calls=[("customer_record", '{"customer": "Jane Doe"}')])
ANSWER = Reply(text=f"Jane Doe pays with card {REPLY_CARD}.\nWrite to {REPLY_EMAIL}.")


@tool
def customer_record(customer: str) -> str:
    """Look up a customer's billing record."""
    return (f"Customer {customer}: card {CARD}, IBAN {IBAN}, e-mail {EMAIL}, "
            f"billing API key {KEY}, balance 1299.00 EUR, customer since 2019-04-01")


def billing_agent(base_url: str, monkeypatch) -> Agent:
    """A function-calling ReAct agent with the billing tool, on the model server at `base_url`
    (`monkeypatch` adds the tool to the registry runs are built from)."""
    registry = {**all_tools(), "customer_record": customer_record}
    monkeypatch.setattr("agentlab.runs.build.all_tools", lambda: registry)
    agent = Agent(name="Billing", paradigm="react", model_profile=scripted_profile(base_url),
                  params={"mode": "function_calling"})
    agent.full_clean()
    agent.save()
    agent.tools.set([Tool.objects.create(name="customer_record")])
    return agent


def guardrail(name="No PII", **fields) -> Guardrail:
    row = Guardrail(name=name, **{"stage": "output", "kind": "pii", "action": "redact",
                                  "applies_to_all": True, **fields})
    row.full_clean()
    row.save()
    return row


async def run_to_end(agent, user, question="What card does Jane Doe pay with?") -> Run:
    run = await sync_to_async(create_run)(agent, user, question)
    await execute_run(await Run.objects.select_related("user").aget(pk=run.pk))
    return await Run.objects.aget(pk=run.pk)
