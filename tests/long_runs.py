"""Long runs for the diff's tests: plans with steps under them (the subtrees a reader folds),
as make_run's step dicts or as schema Steps (pure tests)."""

from __future__ import annotations

from typing import Any

from traces.schema import Step


def planned(plans: int, inside: int, *, changed: frozenset[int] = frozenset()) -> list[dict]:
    """`plans` plan steps, each with `inside` steps under it (an llm call, then a tool call
    with arguments of its own, a thought...), and a final answer. In the plans numbered in
    `changed` the first tool is called with other arguments. Steps are numbered from 1 in order
    (make_run's seq), so a step's parent is its plan's number."""
    steps: list[dict[str, Any]] = []
    for p in range(plans):
        plan_seq = len(steps) + 1
        steps.append({"kind": "plan", "name": f"plan {p}", "text": f"Plan {p}: look it up."})
        for k in range(inside):
            if k % 3 == 0:
                step = {"kind": "llm", "text": "calling a tool", "input": {"messages": []}}
            elif k % 3 == 1:
                city = "Lyon" if p in changed and k == 1 else f"city {p}.{k}"
                step = {"kind": "tool", "name": "get_weather", "input": {"city": city},
                        "text": f"weather {p}.{k}", "output": {"ok": True}}
            else:
                step = {"kind": "thought", "text": f"thought {p}.{k}"}
            steps.append({**step, "parent": plan_seq})
    steps.append({"kind": "final", "text": "done", "output": "done"})
    return steps


def records(steps: list[dict]) -> list[Step]:
    """make_run's numbering, as schema Steps."""
    return [Step(seq=i, **s) for i, s in enumerate(steps, start=1)]
