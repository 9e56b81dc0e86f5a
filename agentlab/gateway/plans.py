"""A replay or fork session's plan, read from its source run's record (in a thread).

A replay serves every recorded LLM call while the program's requests match them; a fork
serves the calls before its step, applies the edit at it — a reply written in place of step
SEQ's, or a tool result substituted in every later request — and goes live after. Matching is
by position and a normalised request hash (agentlab.gateway.grouping.normal_request): what a
client re-sends differently without meaning anything else compares equal.
"""

from __future__ import annotations

from typing import Any

from agentlab.gateway.control import check_response
from agentlab.gateway.grouping import normal_request
from agentlab.gateway.models import GatewaySession
from agentlab.gateway.session import Plan
from agentlab.llm.replay import RecordedCall, Recording
from agentlab.runs.control import ControlError
from traces.models import Step


class PlanError(ValueError):
    """A replay or fork that cannot follow its source (the message says why)."""


def plan_for(row: GatewaySession) -> Plan | None:
    if row.mode == "record":
        return None
    if row.source_id is None:
        raise PlanError("the run this session follows was deleted")
    steps = Step.objects.filter(run_id=row.source_id, kind__in=("llm", "tool")).order_by("seq")
    calls = [RecordedCall(s.seq, normal_request(s.input or {}), s.output or {})
             for s in steps.filter(kind="llm", status="ok").only("seq", "input", "output")]
    if row.mode == "replay":
        return Plan(Recording(calls), stop_on_divergence=row.on_divergence == "stop")
    at = steps.filter(seq=row.fork_seq).only("seq", "kind", "meta").first()
    if at is None:
        raise PlanError(f"run {row.source_id} has no LLM call or tool result at step "
                        f"{row.fork_seq} to fork from")
    edit: dict[str, Any] = row.edit or {}
    if at.kind == "tool":
        call_id = (at.meta or {}).get("call_id")
        observation = edit.get("observation")
        if not call_id:
            raise PlanError(f"step {at.seq} is a tool of Agent Lab's own run, not one the "
                            "program ran: fork it from its run page")
        if observation is not None and not isinstance(observation, str):
            raise PlanError('the edited tool result must be text: {"observation": "…"}')
        subs = {call_id: observation} if observation is not None else {}
        return Plan(Recording(calls, fork_at=at.seq), substitutions=subs,
                    stop_on_divergence=row.on_divergence == "stop")
    response = edit.get("response")
    if response is not None:
        try:
            check_response(response)
        except ControlError as exc:
            raise PlanError(str(exc)) from None
        response = {"text": response.get("text", ""), "finish_reason": None,
                    "tool_calls": response.get("tool_calls", [])}
    return Plan(Recording(calls, fork_at=at.seq, edited_reply=response),
                stop_on_divergence=row.on_divergence == "stop")
