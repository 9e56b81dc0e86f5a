"""How a lower layer asks a higher one without importing it: by name, through a setting.

`settings.AGENTLAB_HOOKS` maps each hook's name to the dotted path of the function that
answers it, the way Django names its middleware and Channels its layer; the path is imported
the first time the hook is asked. So `traces` (the record) and `agentlab.runs` reach the
paradigm registry, the evaluation app or the forks without an import that runs upward, and an
imported trace still opens where no hook answers (a process without agentlab, a test).

The hooks (agentlab/hooks.py answers them; docs/ARCHITECTURE.md "Hooks"):
- `paradigm_name(key) -> str | None`: "ReAct" for "react" (traces.display.labels);
- `run_scores(run_id) -> list[dict]`: how a run's answer scored (the run page's header);
- `sweep() -> dict[str, int]`: what a starting process closes besides runs and imports
  (traces.startup; today the experiments of processes that are gone);
- `prepare_run(run) -> Prepare | None`: how a replay, fork or resume is prepared where it
  executes, from its rows (agentlab.runs.engine);
- `run_feedback(request, run) -> str` and `step_feedback(request, run, seqs) -> {seq: str}`:
  the feedback shown on the run page, on the run and beside each step (safe HTML);
- `feedback_filter(text) -> Q` (ValueError: not a filter) and `feedback_filter_choices() ->
  [(value, label)]`: the runs list's "Feedback" filter (traces.views.filters);
- `bundle_sections() -> {name: BundleSection}`: optional sections of a run bundle
  (traces.bundle; today "feedback").
- `run_cases(user, run_id) -> list[dict]`: the evaluation cases made from a run, in suites the
  user may see (the run page);
- `case_form(user) -> dict`: the suites the user may add cases to, the scorers, the limits
  ("Add to suite" on the run page and the runs list).
- `linked_runs(run) -> list[{"pk", "what"}]`: runs of the same agent run seen another way (a
  gateway run and the received run of its trace id); the run page links those it may show.
- `phoenix_anchor(sizes) -> dict`: traces of those sizes opened in Arize Phoenix on this
  machine, and their OTLP (`bench_traces --phoenix`; agentlab/bench/phoenix_trace.py).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string


@cache
def load(path: str) -> Any:
    """The object at dotted `path` (imported once per process)."""
    return import_string(path)


def hook(name: str) -> Callable[..., Any] | None:
    """The function that answers hook `name`, or None when no one does."""
    path = getattr(settings, "AGENTLAB_HOOKS", {}).get(name)
    return load(path) if path else None
