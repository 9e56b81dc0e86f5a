"""Live control of a gateway run: the run's RunControl (pause, step, breakpoints, edits), with
what a held gateway call can take instead of an Agent Lab run's: at an LLM call, the request's
fields or the whole response (`{"response": {"text": …, "tool_calls": […]}}`, the person
answers for the model); at a tool result the agent sent, `{"observation": "…"}`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings

from agentlab.gateway.protocol import GatewayError
from agentlab.runs.control import LLM_REQUEST_KEYS, ControlError, RunControl
from traces.schema import Step


class GatewayControl(RunControl):
    # How many calls its user has held now (the gateway's table): a hold past
    # AGENTLAB_GATEWAY_MAX_HELD is refused, not queued.
    held_now: Callable[[], int] | None = None

    def _why_pause(self, step: Step) -> str | None:
        reason = super()._why_pause(step)
        limit = settings.AGENTLAB_GATEWAY_MAX_HELD
        if reason is not None and self.held_now is not None and self.held_now() > limit:
            raise GatewayError(429, f"{limit} calls of this account are held at breakpoints "
                                    "already (AGENTLAB_GATEWAY_MAX_HELD): step or resume them "
                                    "first.", type="rate_limit_error", code="too_many_held",
                               retry=False)
        return reason
    def check_edit(self, step: Step, new: dict[str, Any]) -> None:
        if step.kind == "tool":
            if set(new) != {"observation"} or not isinstance(new["observation"], str):
                raise ControlError('edit a tool result the agent sent as {"observation": "…"}: '
                                   "the agent ran the tool itself")
            return
        if step.kind == "llm" and "response" in new:
            if set(new) != {"response"}:
                raise ControlError('"response" replaces the whole call: send it alone')
            check_response(new["response"])
            return
        if unknown := sorted(set(new) - set(LLM_REQUEST_KEYS)):
            raise ControlError(f"an LLM request has no field {', '.join(unknown)} "
                               '(or send {"response": …} to answer for the model)')
        super().check_edit(step, new)


def check_response(response: Any) -> None:
    """A response written by a person: text and/or tool calls ({name, arguments})."""
    if not isinstance(response, dict):
        raise ControlError('"response" must be an object: {"text": "…"} or '
                           '{"tool_calls": [{"name": "…", "arguments": {…}}]}')
    if unknown := sorted(set(response) - {"text", "tool_calls", "finish_reason"}):
        raise ControlError(f"a response has no field {', '.join(unknown)}")
    if not isinstance(response.get("text", ""), str):
        raise ControlError('"text" must be text')
    calls = response.get("tool_calls", [])
    if not isinstance(calls, list) or not all(
            isinstance(c, dict) and isinstance(c.get("name"), str) and c["name"]
            and isinstance(c.get("arguments", {}), dict | str) for c in calls):
        raise ControlError('"tool_calls" must be a list of {"name": "…", "arguments": {…}}')
