"""OTLP traces -> runs: each trace of the upload becomes one run (an imported run: no agent,
its origin in agent_snapshot["imported_from"]), viewable, replayable and diffable like any
other. Everything is read and checked before anything is written; each run is then written
in short chunks (traces.bundle_store), and if one fails the runs written before it are
removed too: an upload comes in whole or not at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings

from traces import bundle_store
from traces.bundle_values import bad_value, too_deep_step
from traces.models import Run
from traces.otel.decode import Limits, OTLPError, Span, traces
from traces.otel.fields import dated
from traces.otel.steps import run_from_trace
from traces.schema import Step

MAX_TRACES = 1_000


def import_otlp(data: bytes | str, *, user: Any) -> list[Run]:
    """The runs made of `data`'s traces, in the order the traces came; OTLPError if it is
    not OTLP trace data or holds something that cannot be stored."""
    drafts = read_otlp(data)
    runs: list[Run] = []
    try:
        for fields, steps in drafts:
            runs.append(bundle_store.write_run(fields, steps, user=user))
    except BaseException:
        for run in runs:
            bundle_store.discard(run.pk)
        raise
    return runs


def read_otlp(data: bytes | str) -> list[tuple[dict[str, Any], list[Step]]]:
    """Each trace's run fields and steps, everything read and checked, nothing written;
    OTLPError if it is not OTLP trace data or holds something that cannot be stored."""
    try:
        return _read(data)
    except RecursionError:  # JSON in a JSON attribute nested past Python's parser
        raise OTLPError("nested too deep to read") from None


def _read(data: bytes | str) -> list[tuple[dict[str, Any], list[Step]]]:
    groups = traces(data, limits())
    if len(groups) > MAX_TRACES:
        raise OTLPError(f"{len(groups):,} traces, over the {MAX_TRACES:,} one upload may hold")
    return [draft(trace, spans) for trace, spans in groups.items()]


def draft(trace: str, spans: list[Span], known: Mapping[str, Step] | None = None,
          ) -> tuple[dict[str, Any], list[Step]]:
    """One trace's run fields and steps, checked (OTLPError says what cannot be stored);
    `known`: see run_from_trace."""
    fields, steps = run_from_trace(spans, known)
    depth = settings.AGENTLAB_IMPORT_MAX_DEPTH
    if (deep := too_deep_step({s.seq: s.parent for s in steps}, depth)) is not None:
        raise OTLPError(f"trace {trace}: spans nest {deep[1]:,} levels deep; at most "
                        f"{depth:,} are allowed (AGENTLAB_IMPORT_MAX_DEPTH)")
    for step in steps:
        if known and step.meta.get("otel.span_id") in known:
            continue  # checked when it was made; reading whole adds only text to it
        if (bad := bad_value([step.input, step.output, step.meta])) is not None:
            raise OTLPError(f"trace {trace}, span {step.meta.get('otel.span_id')}: {bad[1]}")
    return dated(fields), steps


def limits() -> Limits:
    """What one upload may hold, from settings (AGENTLAB_OTLP_MAX_*)."""
    return Limits(attributes=settings.AGENTLAB_OTLP_MAX_ATTRIBUTES,
                  events=settings.AGENTLAB_OTLP_MAX_EVENTS,
                  links=settings.AGENTLAB_OTLP_MAX_LINKS,
                  values=settings.AGENTLAB_OTLP_MAX_VALUES,
                  total=settings.AGENTLAB_OTLP_MAX_ITEMS)


def _plain_text(data: bytes, shown: int = 40) -> str | None:
    """The first words of `data` when it is plain text (UTF-8, no control characters but
    line breaks and tabs), else None: OTLP protobuf is binary (ids are random bytes)."""
    try:
        text = data[:4096].decode("utf-8")
    except UnicodeDecodeError:
        return None
    if any(not (c.isprintable() or c in "\n\r\t") for c in text):
        return None
    words = " ".join(text.split())
    return words if len(words) <= shown else words[: shown - 1] + "…"


def import_file(data: bytes, *, user: Any) -> list[Run]:
    """A run bundle (docs/BUNDLE.md) or OTLP trace data, whichever `data` is: the runs made.
    BundleError or OTLPError says why it was refused."""
    from traces.bundle import BundleError, import_bundle, parse_json

    if not data.strip():
        raise OTLPError("the file is empty" if not data else "the file holds only blank space")
    if data.lstrip()[:1] not in (b"{", b"[") and (text := _plain_text(data)) is not None:
        raise OTLPError(f"this is not an OTLP or bundle file: it is text that is not JSON "
                        f"(it begins “{text}”). Import a run bundle (.json, Export → bundle) "
                        "or OTLP trace data (JSON or protobuf)")
    doc: Any = None
    if data.lstrip()[:1] == b"{":
        try:
            doc = parse_json(data)
        except BundleError:
            if b"resourceSpans" not in data and b"resource_spans" not in data:
                raise  # a broken bundle: its error names the line and column
            doc = None  # JSON lines of OTLP documents: the OTLP reader reads them
    if isinstance(doc, dict) and "format" in doc and not {"resourceSpans",
                                                          "resource_spans"} & set(doc):
        return [import_bundle(doc, user=user)]
    return import_otlp(data, user=user)
