"""The run page's links between an agent's gateway run and its received run (hook
`linked_runs`): where the agent both calls its model through the gateway and sends OTLP to the
receiver, the two runs share the trace id of its `traceparent` header."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from agentlab.receiver.models import ReceivedTrace
from traces.models import Run

# The two runs of one trace begin within moments of each other; looking only this far around
# the run keeps the search on the (user, -created) index, not on every run of the user.
NEAR = timedelta(days=1)
MAX_LINKS = 5


def linked_runs(run: Run) -> list[dict[str, Any]]:
    """The runs of the same trace as `run`, of its user: {"pk", "what"} each (the caller
    shows only those its visitor may see)."""
    snapshot = run.agent_snapshot if isinstance(run.agent_snapshot, dict) else {}
    gateway = snapshot.get("gateway")
    if isinstance(gateway, dict) and gateway.get("trace_id"):
        found = (ReceivedTrace.objects.filter(user_id=run.user_id, trace_id=gateway["trace_id"])
                 .values_list("run_id", flat=True)[:MAX_LINKS])
        return [{"pk": pk, "what": "the spans it sent over OTLP (received run)"} for pk in found]
    received = snapshot.get("imported_from")
    if isinstance(received, dict) and received.get("received") and received.get("trace_id"):
        found = (Run.objects.filter(user_id=run.user_id,
                                    created__range=(run.created - NEAR, run.created + NEAR),
                                    agent_snapshot__gateway__trace_id=received["trace_id"])
                 .exclude(pk=run.pk).order_by("pk").values_list("pk", flat=True)[:MAX_LINKS])
        return [{"pk": pk, "what": "its model calls through the gateway (gateway run)"}
                for pk in found]
    return []
