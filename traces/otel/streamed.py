"""A big OTLP file imported as it is read: memory grows with its spans by a few dozen bytes
each, not with its text, spans or steps (`import_path`, what `manage.py import_run` calls).

A JSON-lines file (traces/otel/lines.py) of AGENTLAB_IMPORT_STREAM_FROM_BYTES or more is read
twice, a line at a time. The first pass checks every line and the limits (the file's bytes
first, then spans and traces as they are counted, each line's items, the depth) and keeps
each trace's tree (traces/otel/skeleton.py): nothing is written before all of that passed.
The second makes each span's step with its final seq and parent as its line is read, and
writes the steps in chunks (traces.bundle_store.Staged: under the staging account, so nobody
sees a half-imported run); each run is handed to its owner at the end with the fields that
`run_from_trace` would give it (traces/otel/fields.py). If anything fails on the way, every
run of the file is removed: a file comes in whole or not at all. Smaller files and other
formats are read whole (traces.otel.importer.import_file).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings

from traces import bundle_store
from traces.bundle_values import bad_value
from traces.models import Run
from traces.otel import calls, frameworks, kept, lines
from traces.otel.decode import Limits, OTLPError, Span
from traces.otel.fields import dated, root_error, run_fields
from traces.otel.importer import MAX_TRACES, import_file, limits
from traces.otel.skeleton import Tree
from traces.otel.steps import step_from_span
from traces.schema import Step

FLUSH = 2_000  # spans read before their steps are written (in bundle_store's chunks)
MAX_ASKED = 1_000  # model calls' tool calls kept for frameworks.restore_arguments
PROTOBUF_MOST = 2 * 1024**3  # protobuf's parser reads no message past 2 GiB


def import_path(path: Path, *, user: Any) -> list[Run]:
    """The runs made of the file at `path` (a bundle or OTLP traces; a big JSON-lines OTLP
    file streams). BundleError or OTLPError says why it was refused."""
    size = path.stat().st_size
    most = settings.AGENTLAB_IMPORT_MAX_FILE_BYTES
    if size > most:
        raise OTLPError(f"the file is {size:,} bytes, over the {most:,} an import may read "
                        "(AGENTLAB_IMPORT_MAX_FILE_BYTES)")
    if size >= settings.AGENTLAB_IMPORT_STREAM_FROM_BYTES and lines.is_json_lines(path):
        return import_lines(path, user=user)
    if size >= PROTOBUF_MOST and not _starts_json(path):
        raise OTLPError(f"a protobuf file of {size / 2**30:.1f} GiB cannot be read (protobuf "
                        "reads no message over 2 GiB): write it as OTLP JSON lines, one "
                        "request a line, as the OpenTelemetry file exporters do")
    return import_file(path.read_bytes(), user=user)


def import_lines(path: Path, *, user: Any) -> list[Run]:
    """The runs made of a JSON-lines OTLP file, read twice a line at a time (the module's
    docstring); all of them or none."""
    checked = limits()
    staged: list[bundle_store.Staged] = []
    try:
        trees = _first_pass(path, checked)
        for tree in trees.values():
            tree.order(settings.AGENTLAB_IMPORT_MAX_DEPTH)
        writers: dict[str, _Writer] = {}
        for trace_id, tree in trees.items():
            staged.append(bundle_store.Staged({"agent_snapshot": {"imported_from": {
                "format": "otlp", "trace_id": trace_id}}}))
            writers[trace_id] = _Writer(tree, staged[-1])
        held = 0  # spans read since the last write, of all traces (a file may hold 1,000)
        for _number, spans in lines.requests(path, None):  # counted in the first pass
            for span in spans:
                writer = writers.get(span.trace_id)
                if writer is None:
                    raise OTLPError("the file changed while it was read")
                writer.add(span)
            held += len(spans)
            if held >= FLUSH:
                for writer in writers.values():
                    writer.flush()
                held = 0
        runs = [writer.finish(user) for writer in writers.values()]
    except BaseException as exc:
        for run in staged:
            bundle_store.discard(run.pk)
        if isinstance(exc, RecursionError):  # JSON in a JSON attribute nested past Python's
            raise OTLPError("nested too deep to read") from None
        raise
    for run in runs:
        bundle_store.summarize(run)
    return runs


def _first_pass(path: Path, checked: Limits) -> dict[str, Tree]:
    """Each trace's tree; OTLPError at the first line or limit that fails."""
    trees: dict[str, Tree] = {}
    most, count = settings.AGENTLAB_IMPORT_MAX_SPANS, 0
    for number, spans in lines.requests(path, checked):
        count += len(spans)
        if count > most:
            raise OTLPError(f"line {number:,}: the file holds more than {most:,} spans, the "
                            "most one import may hold (AGENTLAB_IMPORT_MAX_SPANS); nothing "
                            "was imported")
        for span in spans:
            tree = trees.get(span.trace_id)
            if tree is None:
                if len(trees) >= MAX_TRACES:
                    raise OTLPError(f"line {number:,}: more than {MAX_TRACES:,} traces, the "
                                    "most one upload may hold")
                tree = trees[span.trace_id] = Tree(span.trace_id)
            tree.add(span)
    if not trees:
        raise OTLPError("it holds no spans")
    return trees


class _Writer:
    """One trace's second pass: its spans become steps as they come, written in chunks."""

    def __init__(self, tree: Tree, staged: bundle_store.Staged) -> None:
        self.tree, self.staged = tree, staged
        scope, version, resource = tree.main()
        self.main = Span(trace_id=tree.trace_id, span_id="", parent_id="", name="",
                         start_ns=0, end_ns=0, attributes={}, resource=resource, scope=scope,
                         scope_version=version)
        self.at = self.written = 0  # the next span's index in the trace; steps written
        self.pending: list[Step] = []
        self.asked: list[tuple[str, dict[str, Any]]] = []
        self.roots: dict[int, Span] = {}  # the run's span, the first and last roots
        self.failed: tuple[int, int, str] | None = None  # the first failed root's error

    def add(self, span: Span) -> None:
        tree, i = self.tree, self.at
        self.at += 1
        if i in (tree.container, tree.first_root, tree.last_root):
            self.roots[i] = span
        if tree.is_root(i) and (error := root_error(span)):
            place = (tree.starts[i], i)  # roots by start time, as run_from_trace sorts them
            if self.failed is None or place < self.failed[:2]:
                self.failed = (*place, error)
        if not tree.seq[i]:
            return  # the run's own span, a retry, or out of the tree (a cycle)
        step = step_from_span(span, tree.seq[i], tree.parent_seq(i))
        kept.where(step, span, self.main)
        if note := tree.notes.get(i):
            calls.note(step, note)
        self.pending.append(step)

    def flush(self) -> None:
        """The steps held, in seq order, written (each checked as importer.draft does)."""
        if not self.pending:
            return
        steps = sorted(self.pending, key=lambda s: s.seq)
        self.pending = []
        frameworks.restore_arguments(steps, self.asked)
        del self.asked[:-MAX_ASKED]
        for step in steps:
            if (bad := bad_value([step.input, step.output, step.meta])) is not None:
                raise OTLPError(f"trace {self.tree.trace_id}, span "
                                f"{step.meta.get('otel.span_id')}: {bad[1]}")
            self.tree.gathered.add_step(step)
        self.staged.write(steps)
        self.written += len(steps)

    def finish(self, user: Any) -> Run:
        """The run handed to `user` with its fields."""
        self.flush()
        tree = self.tree
        if self.at != len(tree):
            raise OTLPError("the file changed while it was read")
        tree.gathered.framework = frameworks.framework_of(tree.scopes, tree.first_resource or {},
                                                          tree.langgraph)
        fields = run_fields(self.roots.get(tree.container), self.roots[tree.first_root],
                            self.roots[tree.last_root], self.failed[2] if self.failed else "",
                            tree.gathered)
        fields.pop("agent")
        return self.staged.hand({**dated(fields), "step_count": self.written}, user=user)


def _starts_json(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(4096).lstrip()[:1] in (b"{", b"[")
