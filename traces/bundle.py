"""A run as one versioned JSON document: export, validate, import (schema: docs/BUNDLE.md)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from django.conf import settings
from django.utils import timezone
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from traces import bundle_store
from traces.bundle_values import (
    EARLIEST,
    LATEST,
    MAX_DEPTH,
    bad_value,
    parse_when,
    too_deep_at,
    too_deep_step,
)
from traces.bundle_values import where as _where
from traces.hooks import hook
from traces.models import Run
from traces.redact import redact_urls
from traces.schema import ACTIVE_STATUSES, RUN_STATUSES, RUN_TOTALS, STEP_KINDS, STEP_STATUSES
from traces.schema import Step as StepRecord

BUNDLE_FORMAT = "agentlab.run-bundle"
BUNDLE_VERSION = 1
# Snapshots hold key *variable names* (api_key_env); anything else named like a secret is dropped.
_SECRET_NAME = re.compile(r"(api_?key|secret|password|passwd|authorization|access_token)$", re.I)
# What an MCP server runs (agentlab.tool_rows.mcp_entry): the server's own, never exported.
_MCP_COMMAND = frozenset({"command", "args", "env", "env_names"})

_INT_MAX = 2**31 - 1  # PositiveIntegerField's range on every database
# Limits on what a bundle may hold (each refusal names the field). The web upload is capped at
# traces.views.runs.MAX_IMPORT_BYTES before any of this; `manage.py import_run` reads files of
# any size, so these hold there too.
MAX_STEPS = 100_000
MAX_HISTORY = 1_000  # chat turns
MAX_TEXT = 1_000_000  # characters of run.input, final_answer, error
MAX_STEP_TEXT = 5_000_000  # characters of a step's text
# Depth, finite numbers, 64-bit integers and date ranges: traces.bundle_values.
_COUNT = {"type": "integer", "minimum": 0, "maximum": _INT_MAX}
_AMOUNT = {"type": "number", "minimum": 0}  # costs: never negative
_DURATION = {"type": ["number", "null"], "minimum": 0}
_WHEN = {"type": ["string", "null"]}
_SOURCE = {"type": ["integer", "string", "null"], "maxLength": 100}
_STEP_SCHEMA = {
    "type": "object",
    "required": ["seq", "kind", "started_at"],
    "properties": {
        "seq": {"type": "integer", "minimum": 1, "maximum": _INT_MAX},
        "kind": {"enum": list(STEP_KINDS)},
        "role": {"type": "string", "maxLength": 100},
        "name": {"type": "string", "maxLength": 200},
        "parent": {"type": ["integer", "null"]},
        "input": {}, "output": {},
        "text": {"type": "string", "maxLength": MAX_STEP_TEXT},
        "status": {"enum": list(STEP_STATUSES)},
        "started_at": {"type": "number", "minimum": EARLIEST.timestamp(),
                       "maximum": LATEST.timestamp()},
        "duration_ms": _DURATION,
        "tokens_in": _COUNT, "tokens_out": _COUNT,
        "cost_usd": _AMOUNT,
        "meta": {"type": ["object", "null"]},
    },
    "additionalProperties": False,
}
SCHEMA = {
    "type": "object",
    "required": ["format", "version", "run", "steps"],
    "properties": {
        "format": {"const": BUNDLE_FORMAT},
        "version": {"const": BUNDLE_VERSION},
        "exported_at": _WHEN,
        "run": {
            "type": "object",
            "required": ["agent_name", "paradigm", "agent_snapshot", "input", "status"],
            "properties": {
                "source_id": _SOURCE,
                "parent_source_id": _SOURCE,
                "fork_seq": {"type": ["integer", "null"], "minimum": 1, "maximum": _INT_MAX},
                "agent_name": {"type": "string", "maxLength": 200},
                "paradigm": {"type": "string", "maxLength": 50},
                "agent_snapshot": {"type": "object"},
                "input": {"type": "string", "maxLength": MAX_TEXT},
                "history": {"type": "array", "maxItems": MAX_HISTORY},
                "status": {"enum": list(RUN_STATUSES)},
                "final_answer": {"type": "string", "maxLength": MAX_TEXT},
                "error": {"type": "string", "maxLength": MAX_TEXT},
                "totals": {
                    "type": "object",
                    "properties": {
                        **dict.fromkeys(RUN_TOTALS, _COUNT),
                        "cost_usd": _AMOUNT,
                        "wall_ms": _DURATION,
                    },
                },
                "created": _WHEN, "started_at": _WHEN, "finished_at": _WHEN,
            },
        },
        "steps": {"type": "array", "maxItems": MAX_STEPS, "items": _STEP_SCHEMA},
    },
}
# The envelope is checked whole; the steps (thousands) one by one, and only those that fail a
# quick exact-or-stricter check of the same rules go through jsonschema (for its message):
# jsonschema alone takes seconds on a 25,000-step bundle.
_ENVELOPE = Draft202012Validator(
    {**SCHEMA, "properties": {**SCHEMA["properties"],
                              "steps": {"type": "array", "maxItems": MAX_STEPS}}})
_STEP_VALIDATOR = Draft202012Validator(_STEP_SCHEMA)
_PY_TYPES: dict[str, type | tuple[type, ...]] = {
    "integer": int, "number": (int, float), "string": str, "object": dict, "array": list,
    "null": type(None),
}


class BundleError(ValueError):
    """A file that is not a valid bundle: `message` says why, `where` names the place."""

    def __init__(self, message: str, where: str = "") -> None:
        super().__init__(f"{where}: {message}" if where else message)
        self.message, self.where = message, where


@dataclass
class BundleData:
    version: int
    exported_at: str | None
    run: dict[str, Any]
    steps: list[StepRecord]
    sections: dict[str, Any] = field(default_factory=dict)  # name -> what its check() gave


class BundleSection(Protocol):
    """An optional top-level part of a bundle that an app above keeps (hook "bundle_sections";
    docs/BUNDLE.md "Sections"). It carries its own version, so adding one leaves the bundle's
    version as it is: an older bundle has no such key, an older reader ignores it."""

    def export(self, run: Run) -> Any | None:
        """The run's part (JSON-ready), or None to leave the key out."""

    def check(self, data: Any, seqs: set[int]) -> Any:
        """The part checked whole before anything is written; a BundleError names the place
        (`seqs`: the bundle's step seqs)."""

    def restore(self, run: Run, checked: Any, user: Any) -> None:
        """Write the checked part for the new run, which `user` imported."""


def sections() -> dict[str, BundleSection]:
    answer = hook("bundle_sections")
    return answer() if answer is not None else {}


# ---------------------------------------------------------------------------- export


def export_bundle(run: Run) -> dict[str, Any]:
    """The run and every step, as one JSON-ready document; no credentials in it: keys named
    like secrets are dropped and URLs lose their user-info and key-like query parameters
    (traces.redact), wherever they appear."""
    steps = [redact_urls(row.to_record().to_dict())
             for row in run.steps.order_by("seq").iterator(2000)]
    document = {
        "format": BUNDLE_FORMAT,
        "version": BUNDLE_VERSION,
        "exported_at": timezone.now().isoformat(),
        "run": {
            "source_id": run.pk,
            "parent_source_id": run.parent_run_id,
            "fork_seq": run.fork_seq,
            "agent_name": run.agent_name,
            "paradigm": run.paradigm,
            "agent_snapshot": redact_urls(strip_secrets(run.agent_snapshot)),
            "input": redact_urls(run.input),
            "history": redact_urls(run.history),
            "status": run.status,
            "final_answer": redact_urls(run.final_answer),
            "error": redact_urls(run.error),
            "totals": {k: getattr(run, k) for k in RUN_TOTALS},
            "created": _iso(run.created),
            "started_at": _iso(run.started_at),
            "finished_at": _iso(run.finished_at),
        },
        "steps": steps,
    }
    for name, section in sections().items():
        if (part := section.export(run)) is not None:
            document[name] = part
    return document


def strip_secrets(value: Any) -> Any:
    """A copy without keys named like secrets (names ending in `_env` are variable names),
    and without what an MCP server runs (its command, arguments and handed-on variables:
    a token often sits among the arguments) wherever a tool's `mcp` entry names its server."""
    if isinstance(value, dict):
        out = {k: strip_secrets(v) for k, v in value.items()
               if not (isinstance(k, str) and _SECRET_NAME.search(k))}
        mcp = out.get("mcp")
        if isinstance(mcp, dict) and isinstance(mcp.get("server"), dict):
            mcp["server"] = {k: v for k, v in mcp["server"].items() if k not in _MCP_COMMAND}
        return out
    if isinstance(value, list):
        return [strip_secrets(v) for v in value]
    return value


def _iso(when: datetime | None) -> str | None:
    return when.isoformat() if when else None


# ---------------------------------------------------------------------------- validation


def parse_json(text: str | bytes) -> Any:
    """JSON text -> data; broken JSON is a BundleError naming the line and column."""
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise BundleError(f"not valid JSON: {exc.msg}",
                          f"line {exc.lineno}, column {exc.colno}") from None
    except UnicodeDecodeError as exc:
        raise BundleError(f"not UTF-8 text: {exc.reason}", f"byte {exc.start}") from None
    except BundleError:  # NaN or Infinity (_refuse_constant): already says what it is
        raise
    except RecursionError:  # Python's parser gives up near 1,000 levels; say where it was
        raise BundleError(f"nested more than {MAX_DEPTH} levels deep",
                          too_deep_at(text)) from None
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        raise BundleError(f"not a usable JSON value: {exc}") from None


def _refuse_constant(name: str) -> Any:
    raise BundleError(f"{name} is not a JSON number")



def load_bundle(data: Any) -> BundleData:
    """Check everything about a parsed bundle; the first problem is raised as a BundleError."""
    if not isinstance(data, dict):
        raise BundleError(f"a bundle must be a JSON object, got {_json_type(data)}")
    if (found := bad_value(data)) is not None:
        raise BundleError(found[1], found[0])
    if data.get("format") != BUNDLE_FORMAT:
        raise BundleError(f"expected {BUNDLE_FORMAT!r}, got {data.get('format')!r}", "format")
    version = data.get("version")
    if version != BUNDLE_VERSION or isinstance(version, bool):
        raise BundleError(f"unknown bundle version {version!r} (this installation reads "
                          f"version {BUNDLE_VERSION})", "version")
    error = next(iter(sorted(_ENVELOPE.iter_errors(data), key=_error_order)), None)
    if error is not None:
        raise _describe(error)
    for i, item in enumerate(data["steps"]):
        if not _quick_step_ok(item):
            error = next(iter(sorted(_STEP_VALIDATOR.iter_errors(item), key=_error_order)), None)
            if error is not None:
                raise _describe(error, ["steps", i])
    run = data["run"]
    for key in ("created", "started_at", "finished_at"):
        if run.get(key) is not None:
            _parse_when(run[key], f"run.{key}")
    if data.get("exported_at") is not None:
        _parse_when(data["exported_at"], "exported_at")
    steps = _steps(data["steps"])
    seqs = {s.seq for s in steps}
    parts = {name: section.check(data[name], seqs) for name, section in sections().items()
             if data.get(name) is not None}
    return BundleData(version=version, exported_at=data.get("exported_at"), run=run,
                      steps=steps, sections=parts)


def _steps(items: list[dict[str, Any]]) -> list[StepRecord]:
    steps: list[StepRecord] = []
    first_at: dict[int, int] = {}
    for i, item in enumerate(items):
        try:
            step = StepRecord.from_dict(item)
        except (ValueError, TypeError) as exc:
            raise BundleError(str(exc), f"steps[{i}]") from None
        if step.seq in first_at:
            first = first_at[step.seq]
            raise BundleError(f"seq {step.seq} appears twice (first at steps[{first}])",
                              f"steps[{i}].seq")
        first_at[step.seq] = i
        steps.append(step)
    for i, step in enumerate(steps):
        if step.parent is not None and step.parent not in first_at:
            raise BundleError(f"no step has seq {step.parent}", f"steps[{i}].parent")
    limit = settings.AGENTLAB_IMPORT_MAX_DEPTH
    if (deep := too_deep_step({s.seq: s.parent for s in steps}, limit)) is not None:
        raise BundleError(f"steps nest {deep[1]:,} levels deep; at most {limit:,} are allowed "
                          "(AGENTLAB_IMPORT_MAX_DEPTH)", f"steps[{first_at[deep[0]]}].parent")
    return steps


def _quick_step_ok(item: Any) -> bool:
    """True only if `item` certainly passes _STEP_SCHEMA (may say False for a valid step)."""
    if type(item) is not dict or not all(k in item for k in _STEP_SCHEMA["required"]):
        return False
    rules = _STEP_SCHEMA["properties"]
    return all(key in rules and _quick_value_ok(value, rules[key]) for key, value in item.items())


def _quick_value_ok(value: Any, rule: dict[str, Any]) -> bool:
    if "enum" in rule:
        return type(value) is str and value in rule["enum"]
    if "type" in rule:
        types = [rule["type"]] if isinstance(rule["type"], str) else rule["type"]
        if type(value) is bool or not any(isinstance(value, _PY_TYPES[t]) for t in types):
            return False
    if type(value) in (int, float) and not (rule.get("minimum", value) <= value
                                             <= rule.get("maximum", value)):
        return False
    return not (type(value) is str and len(value) > rule.get("maxLength", len(value)))


def _error_order(error: ValidationError) -> tuple[int, list[str]]:
    # Report the earliest place: depth first, then position (indexes compare as numbers).
    return (len(error.absolute_path), [f"{p:09d}" if isinstance(p, int) else p
                                       for p in error.absolute_path])


def _describe(error: ValidationError, prefix: list[Any] | None = None) -> BundleError:
    where = _where([*(prefix or []), *error.absolute_path])
    if error.validator == "required":
        missing = next(p for p in error.validator_value if p not in error.instance)
        return BundleError("missing", f"{where}.{missing}" if where else missing)
    if error.validator == "type":
        expected = error.validator_value
        expected = " or ".join(expected) if isinstance(expected, list) else expected
        return BundleError(f"expected {expected}, got {_json_type(error.instance)}", where)
    if error.validator == "enum":
        return BundleError(f"{error.instance!r} is not one of "
                           f"{', '.join(map(str, error.validator_value))}", where)
    if error.validator in ("minimum", "maximum") and where.endswith("started_at"):
        return BundleError(f"{error.instance!r} is not a date between {EARLIEST:%Y-%m-%d} and "
                           f"{LATEST:%Y-%m-%d} (epoch seconds)", where)
    if error.validator == "minimum":
        return BundleError(f"{error.instance!r} is negative; it must be at least "
                           f"{error.validator_value:g}" if error.instance < 0 else
                           f"{error.instance!r} is less than {error.validator_value:g}", where)
    if error.validator == "maxLength":
        return BundleError(f"a text of {len(error.instance):,} characters; at most "
                           f"{error.validator_value:,} are allowed", where)
    if error.validator == "maxItems":
        return BundleError(f"{len(error.instance):,} items; at most "
                           f"{error.validator_value:,} are allowed", where)
    if error.validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        return BundleError(f"unknown field(s): {', '.join(extra)}", where)
    return BundleError(error.message, where)


def _json_type(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer",
             float: "number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


# ---------------------------------------------------------------------------- import


def import_bundle(data: Any, *, user: Any) -> Run:
    """Validate the whole bundle first, then write the run and its steps without holding the
    database for long, all or nothing (traces.bundle_store)."""
    if isinstance(data, str | bytes | bytearray):
        data = parse_json(data)
    bundle = load_bundle(data)
    run, totals = bundle.run, bundle.run.get("totals", {})
    snapshot = redact_urls(strip_secrets(run["agent_snapshot"]))
    snapshot["imported_from"] = {"source_id": run.get("source_id"),
                                 "parent_source_id": run.get("parent_source_id"),
                                 "fork_seq": run.get("fork_seq"),
                                 "exported_at": bundle.exported_at}
    status = run["status"]
    when = {k: _parse_when(run[k], f"run.{k}") if run.get(k) else None
            for k in ("started_at", "finished_at")}
    error = run.get("error", "")
    if status in ACTIVE_STATUSES:  # nothing executes it here: it stopped where it was exported
        status = "interrupted"
        error = error or "Imported while it was still running; resume it as a fork."
    fields = dict(
        agent=None, agent_name=run["agent_name"], paradigm=run["paradigm"],
        agent_snapshot=snapshot, input=run["input"], history=run.get("history", []),
        status=status, final_answer=run.get("final_answer", ""), error=error, **when,
        **{k: totals[k] for k in RUN_TOTALS if k in totals},
    )
    written = bundle_store.write_run(fields, bundle.steps, user=user)
    try:
        for name, part in bundle.sections.items():
            sections()[name].restore(written, part, user)
    except BaseException:
        bundle_store.discard(written.pk)  # all or nothing, as the steps
        raise
    return written


def _parse_when(text: Any, where: str) -> datetime:
    try:
        return parse_when(text)
    except ValueError as exc:
        raise BundleError(str(exc), where) from None
