"""How a step looks live: the trace viewer's step partial, fed from a step dict (no queries)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from traces.render import step_view
from traces.step_html import step_html


class StepRenderer:
    """Renders the steps of one run; remembers parents so nested steps get their depth."""

    def __init__(self, run_id: int, *, run_start: Any = None,
                 parents: dict[int, int | None] | None = None) -> None:
        self.run = SimpleNamespace(pk=run_id)
        self.run_start = run_start
        self.parents = dict(parents or {})

    def depth(self, seq: int) -> int:
        level, node, seen = 0, self.parents.get(seq), {seq}
        while node is not None and node not in seen:
            seen.add(node)
            level += 1
            node = self.parents.get(node)
        return level

    def place(self, step: dict[str, Any]) -> int:
        """Remember the step's parent; its depth in the tree."""
        self.parents[step["seq"]] = step.get("parent")
        return self.depth(step["seq"])

    def html(self, step: dict[str, Any], depth: int | None = None) -> str:
        """The step's partial (`depth`: when the caller has placed it already)."""
        depth = self.place(step) if depth is None else depth
        return step_html(step_view(step, run_start=self.run_start, depth=depth), self.run)

    def frame(self, step: dict[str, Any], html: str | None = None) -> dict[str, Any]:
        """A "step" frame of the protocol: the partial (rendered here unless given) plus the
        step itself."""
        return {"type": "step", "seq": step["seq"], "parent": step.get("parent"),
                "kind": step["kind"], "status": step["status"],
                "html": self.html(step) if html is None else html, "step": step}

