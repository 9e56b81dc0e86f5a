"""Tolerant parsers for LLM output, shared by the paradigms. Pure Python, no Django.

Every parser returns typed values or raises :class:`ParseError`, whose message is meant for the
model: it says what was wrong and restates the expected format, so the paradigm can send it back
as the next observation instead of failing the run.

Choices that callers rely on:

* ``parse_react``: the first decision wins (an Action before a Final Answer is an action; the
  model must see the observation first). A hallucinated ``Observation:`` and everything after it
  is ignored; an ``Observation:`` before any decision (an echo of the last one) is skipped.
  ``Answer:`` counts as final only when there is no action. ``Action: None`` / ``N/A`` is no
  action. A tool with no input gets ``""``; the tool executor validates arguments, not the parser.
  ``<think>`` blocks are never parsed for actions (only used as the thought when nothing else is).
* ``parse_react`` and ``parse_self_ask`` take ``markers`` (other names for their labels, e.g.
  another language; MARKERS_SCHEMA is the agent parameter's schema), read full-width colons
  ("Thought：") as colons and drop a stop word cut off at the end ("…\\nObs").
* ``coerce_input`` (an Action Input) reads JSON followed by prose, JSON with comments and an
  input wrapped in call syntax (``SomeTool({...})``).
* ``parse_rewoo_plan``: duplicate and forward ``#E`` references are kept (the worker reports
  them); inputs balance their brackets, else run to the last closing bracket on the line.
* ``parse_self_ask``: the latest of "unanswered Follow up" and "final answer" wins. A bare answer
  after "Are follow up questions needed here: No." is an error, so the caller spends one more
  call asking for the ``So the final answer is:`` line rather than guessing which text is the
  answer.
* ``parse_score``: explicit forms first ([[7]], "Score: 7/10", "9 out of 10", **8**), then the
  last plain number; numbers in labels like "Step 2" or ranges like "(1-10)" are never scores.
  "x/y" with y != high is rescaled to the caller's scale ("4/5" -> 8.0 on 0..10).
"""

from __future__ import annotations

from agentlab.paradigms.parsing.common import (
    ParseError,
    call_args,
    coerce_input,
    iter_json_objects,
    split_think,
    strip_quotes,
    unwrap_fence,
)
from agentlab.paradigms.parsing.markers import (
    MARKERS_SCHEMA,
    REACT_LABELS,
    SELF_ASK_LABELS,
    label_alternatives,
    stop_words,
)
from agentlab.paradigms.parsing.plans import (
    REWOO_FORMAT,
    PlanStep,
    parse_numbered_plan,
    parse_rewoo_plan,
    resolve_refs,
)
from agentlab.paradigms.parsing.react import ReactAction, ReactFinal, parse_react
from agentlab.paradigms.parsing.scores import parse_score
from agentlab.paradigms.parsing.self_ask import (
    SELF_ASK_FORMAT,
    FollowUp,
    SelfAskFinal,
    parse_self_ask,
)

__all__ = [
    "MARKERS_SCHEMA",
    "REACT_LABELS",
    "REWOO_FORMAT",
    "SELF_ASK_LABELS",
    "SELF_ASK_FORMAT",
    "FollowUp",
    "ParseError",
    "PlanStep",
    "ReactAction",
    "ReactFinal",
    "SelfAskFinal",
    "call_args",
    "coerce_input",
    "iter_json_objects",
    "label_alternatives",
    "parse_numbered_plan",
    "parse_react",
    "parse_rewoo_plan",
    "parse_score",
    "parse_self_ask",
    "resolve_refs",
    "split_think",
    "stop_words",
    "strip_quotes",
    "unwrap_fence",
]
