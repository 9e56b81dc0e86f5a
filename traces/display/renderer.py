"""One step's look for every page and socket: the trace page, the live socket, chat and compare
all render a step through a `StepRenderer` (pure but for `first_steps_html`, which reads rows).

It places each step in the run's tree (the one depth rule), builds its view model
(`view.step_view`) and its partial (`html.step_html`), and wraps it as a live "step" frame. The
live socket's frames come from a process-wide cache: a compare page or several tabs watching
one run render each recorded version of a step once, not once per socket.
"""

from __future__ import annotations

from collections import OrderedDict
from types import SimpleNamespace
from typing import Any

from django.utils.safestring import SafeString

from traces.display.html import step_html
from traces.display.view import StepView, step_view

# What a "step" frame carries of the step besides its partial: what its readers read
# (static/agentlab/live.js `track`, the "now" line: name, role, started_at, and from the meta
# waiting_for_model: a call waiting for a busy model's turn; agentlab/bench/watch.py's fallback
# clock: started_at, duration_ms). The partial shows the rest, its payloads loaded on demand;
# docs/LIVE_PROTOCOL.md "The step frame, field by field" says who reads what.
FRAME_STEP_FIELDS = ("name", "role", "started_at", "duration_ms", "waiting_for_model")
FRAME_META_FIELDS = frozenset({"waiting_for_model"})  # of FRAME_STEP_FIELDS: read from meta
# (run, seq, version, run start, depth) -> the step's partial, for every socket of this process.
_RENDERED: OrderedDict[tuple[Any, ...], str] = OrderedDict()
RENDER_CACHE_SIZE = 512


class StepRenderer:
    """Renders the steps of one run; remembers parents so nested steps get their depth.

    `run`: the Run (its `is_active` hides "Fork from here" while it runs) or only its id."""

    def __init__(self, run: Any, *, run_start: Any = None,
                 parents: dict[int, int | None] | None = None) -> None:
        self.run = run if hasattr(run, "pk") else SimpleNamespace(pk=run)
        self.run_start = run_start
        self.parents = dict(parents or {})

    def depth(self, seq: int) -> int:
        """How deep `seq` sits in the tree of parents known so far (a cycle ends the walk)."""
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

    def view(self, step: dict[str, Any], depth: int | None = None) -> StepView:
        """The step's view model (`depth`: when the caller has placed it already)."""
        depth = self.place(step) if depth is None else depth
        return step_view(step, run_start=self.run_start, depth=depth)

    def html(self, step: dict[str, Any], depth: int | None = None) -> SafeString:
        """The step's partial."""
        return step_html(self.view(step, depth), self.run)

    def frame(self, step: dict[str, Any], html: str | None = None) -> dict[str, Any]:
        """A "step" frame of the protocol: the partial (rendered here unless given) plus what
        the browser reads of the step (FRAME_STEP_FIELDS), not all of it: an llm step's
        messages would travel, and be encoded once per socket, with every version."""
        return {"type": "step", "seq": step["seq"], "parent": step.get("parent"),
                "kind": step["kind"], "status": step["status"],
                "html": self.html(step) if html is None else html,
                "step": {field: (step.get("meta") or {}).get(field)
                         if field in FRAME_META_FIELDS else step.get(field)
                         for field in FRAME_STEP_FIELDS}}

    def live_frame(self, event: dict[str, Any]) -> dict[str, Any]:
        """The "step" frame of a published step, its HTML from the cache when another socket of
        this process already rendered the same version with the same run start and depth."""
        step, version = event["step"], event.get("version")
        if version is None:
            return self.frame(step)
        depth = self.place(step)
        key = (self.run.pk, step["seq"], version, self.run_start, depth)
        html = _RENDERED.get(key)
        if html is None:
            html = _RENDERED[key] = self.html(step, depth)
            if len(_RENDERED) > RENDER_CACHE_SIZE:
                _RENDERED.popitem(last=False)
        return self.frame(step, html)


def first_steps_html(run: Any, limit: int) -> list[str]:
    """The partials of a run's first `limit` steps, as the live stream renders them (a live
    panel's steps so far; its socket then sends only later ones)."""
    rows = [s.to_record().to_dict() for s in run.steps.all()[:limit]]
    renderer = StepRenderer(run.pk, run_start=run.started_at or run.created,
                            parents={r["seq"]: r["parent"] for r in rows})
    return [renderer.html(row) for row in rows]
