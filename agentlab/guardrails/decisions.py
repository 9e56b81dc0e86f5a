"""A guardrail's decision as the trace keeps it: which guardrail, which check, what it did, and
the spans it acted on (where, offsets, what kind of thing), never the text it found (pure).

One decision per guardrail per checked thing (the question, a step); its step has kind
"guardrail" and the decision as meta: {guardrail, check, stage, action, spans, step, ...}."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentlab.guardrails.checks import Check, Hit, scan_text
from traces.schema import Step

ACTED = {"block": "blocked", "redact": "redacted", "flag": "flagged"}
MAX_SPANS = 50  # a decision lists at most this many spans (and says how many there were)


def is_subject(path: str) -> bool:
    """A hit in a step's own text or output (the reply, the observation), not in its input."""
    return path.split(".")[0].split("[")[0] in ("text", "output", "question")


def decide(hits: Sequence[Hit], *, may_block: bool) -> list[dict[str, Any]]:
    """The decisions for one checked thing, a guardrail each. A block check's hit outside
    what may be blocked (a prompt that quotes it, a closing step) was masked: it reads
    "redact"."""
    by_check: dict[str, tuple[Check, list[Hit]]] = {}
    for hit in hits:
        by_check.setdefault(hit.check.name, (hit.check, []))[1].append(hit)
    out = []
    for check, found in by_check.values():
        blocks = check.action == "block" and may_block and any(is_subject(h.path) for h in found)
        action = "block" if blocks else "redact" if check.action == "block" else check.action
        out.append({
            "guardrail": check.name, "check": check.kind, "stage": check.stage,
            "action": action, "spans": [h.as_dict() for h in found[:MAX_SPANS]],
            "span_count": len(found),
            **({"message": check.block_message} if blocks else {}),
        })
    return out


def judged(check: Check, *, violation: bool, reason: str, model: str,
           error: str = "") -> dict[str, Any]:
    """A judge's decision: it blocks or flags the whole text, or lets it pass."""
    action = ("block" if check.action == "block" else "flag") if violation else "pass"
    return {"guardrail": check.name, "check": "judge", "stage": check.stage, "action": action,
            "spans": [], "span_count": 0, "verdict": "violation" if violation else "ok",
            "reason": reason, "judge_model": model, **({"error": error} if error else {}),
            **({"message": check.block_message} if action == "block" else {})}


def _where(target: Step | None) -> str:
    if target is None:
        return "the question"
    if target.kind == "tool":
        return f"tool {target.name} (step {target.seq})"
    return f"the {target.kind} step {target.seq}"


def decision_step(decision: dict[str, Any], target: Step | None = None) -> Step:
    """The `guardrail` step recording `decision` about `target` (None: the question)."""
    meta = {**decision, "step": target.seq if target is not None else None}
    labels = sorted({s["label"] for s in decision["spans"]})
    what = ", ".join(labels) if labels else decision["check"]
    count = decision.get("span_count", 0)
    places = f" ({count} places)" if count > 1 else ""
    verb = ACTED.get(decision["action"], "passed")
    text = f"{decision['guardrail']}: {verb} {what} in {_where(target)}{places}"
    if decision.get("reason"):
        text += f" — {decision['reason']}"
    return Step(kind="guardrail", role="guardrail", name=decision["guardrail"],
                parent=target.parent if target is not None else None, text=text,
                output={k: meta[k] for k in ("action", "check", "spans")}, meta=meta)


def check_question(question: str, checks: Sequence[Check],
                   history: Sequence[Any] = ()) -> tuple[str, dict[str, Any]]:
    """The question as it may be stored (redacted and blocked spans masked) and what the
    guardrails decided, for the run's snapshot ("guardrail_input"). The input checks read the
    question; the output checks ("everything recorded") mask what they find in it too, as in
    a prompt that quotes it. With `history` (earlier turns the run is sent and stores), the
    same checks mask its messages (the input checks the user's): `decided["history"]` is it
    as it may be stored. Judges are asked when the run starts (agentlab.runtime.guard)."""
    spans = [c for c in checks if c.stage == "input" and c.kind != "judge"]
    recorded = [c for c in checks if c.stage == "output" and c.kind != "judge"]
    text, hits = scan_text(question, spans, subject=True, path="question")
    decisions = decide(hits, may_block=True)
    text, more = scan_text(text, recorded, subject=False, path="question")
    clean, elsewhere = _history(history, spans, recorded)
    decisions += decide(more + elsewhere, may_block=False)
    blocked = next((d for d in decisions if d["action"] == "block"), None)
    return text, {"decisions": decisions, "history": clean,
                  "blocked": ({"guardrail": blocked["guardrail"], "message": blocked["message"]}
                              if blocked else None)}


def _history(history: Sequence[Any], spans: Sequence[Check],
             recorded: Sequence[Check]) -> tuple[list[Any], list[Hit]]:
    out: list[Any] = []
    hits: list[Hit] = []
    for i, message in enumerate(history):
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            out.append(message)
            continue
        path = f"history[{i}].content"
        checks = [*spans, *recorded] if message.get("role") == "user" else recorded
        content, found = scan_text(content, checks, subject=False, path=path)
        hits += found
        out.append({**message, "content": content} if found else message)
    return out, hits
