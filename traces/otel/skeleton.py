"""The first pass of a big file's import (traces/otel/streamed.py): each trace's tree, kept in
a few numbers a span (about 50 bytes: arrays, not objects), from which every span's seq and
parent are worked out exactly as `run_from_trace` numbers a trace in hand (depth first,
children by start time, a root AGENT or CHAIN span the run itself) before the second pass
makes the steps. Also which llm steps calls.demote makes thoughts, and the trace's depth
checked against AGENTLAB_IMPORT_MAX_DEPTH before anything is written.

One difference from a trace in hand: a span id that comes again is an exporter's retry, and
only its first copy (in the file's order) is read, as the receiver does.
"""

from __future__ import annotations

import hashlib
import json
from array import array
from bisect import bisect_left
from typing import Any

from traces.otel import calls, frameworks
from traces.otel.decode import OTLPError, Span
from traces.otel.fields import Gathered
from traces.otel.steps import is_container, kind_of

# A span's flags
_LLM, _CALL, _CONTAINER, _AGAIN, _PARENT = 1, 2, 4, 8, 16


def span_key(span_id: str) -> int:
    """A span id as a 64-bit number: itself where it is the usual 8 bytes in hex."""
    if len(span_id) == 16:
        try:
            return int(span_id, 16)
        except ValueError:
            pass
    return int.from_bytes(hashlib.blake2b(span_id.encode(), digest_size=8).digest(), "big")


class Tree:
    """One trace's spans, by their place in the file's order of its spans (their index)."""

    def __init__(self, trace_id: str) -> None:
        self.trace_id = trace_id
        self.ids, self.parents, self.starts = array("Q"), array("Q"), array("Q")
        self.flags = bytearray()
        self.where = array("L")  # index into self.origins: the span's scope and resource
        self.origins: list[tuple[str, str, dict[str, Any]]] = []
        self._origin_at: dict[str, int] = {}
        self.scopes: dict[str, str] = {}
        self.langgraph = False
        self.gathered = Gathered()
        self.first_resource: dict[str, Any] | None = None
        # worked out by order()
        self.pidx = array("q")  # the parent's index, -1 for a root
        self.seq = array("q")  # 0: not a step (the run's own span, a retry, a cycle)
        self.notes: dict[int, str] = {}  # index -> calls.WRAPPER or calls.PREPARES
        self.container = self.first_root = self.last_root = -1

    def __len__(self) -> int:
        return len(self.flags)

    def add(self, span: Span) -> None:
        self.ids.append(span_key(span.span_id))
        has_parent = bool(span.parent_id) and span.parent_id != span.span_id
        self.parents.append(span_key(span.parent_id) if has_parent else 0)
        self.starts.append(min(max(span.start_ns, 0), 2**64 - 1))
        flags = _PARENT if has_parent else 0
        if kind_of(span) == "llm":
            flags |= _LLM | (_CALL if calls.records_call(span) else 0)
        if is_container(span):
            flags |= _CONTAINER
        self.flags.append(flags)
        self.where.append(self._origin(span))
        if span.scope:
            self.scopes[span.scope] = span.scope_version
        self.langgraph = self.langgraph or frameworks.is_langgraph(span)
        if self.first_resource is None:
            self.first_resource = span.resource
        self.gathered.add_span(span)

    def _origin(self, span: Span) -> int:
        key = json.dumps([span.scope, span.scope_version, span.resource], sort_keys=True,
                         default=str)
        at = self._origin_at.get(key)
        if at is None:
            at = self._origin_at[key] = len(self.origins)
            self.origins.append((span.scope, span.scope_version, span.resource))
        return at

    def order(self, max_depth: int) -> None:
        """Each span's seq and parent's index, the demoted llm steps; OTLPError when spans nest
        past `max_depth` (AGENTLAB_IMPORT_MAX_DEPTH)."""
        n, flags = len(self), self.flags
        by_id = sorted(range(n), key=self.ids.__getitem__)  # stable: a retry after its first
        ids = array("Q", (self.ids[i] for i in by_id))
        for k in range(1, n):
            if ids[k] == ids[k - 1]:
                flags[by_id[k]] |= _AGAIN
        pidx = self.pidx = array("q", [-1]) * n
        for i in range(n):
            if flags[i] & _PARENT and not flags[i] & _AGAIN:
                k = bisect_left(ids, self.parents[i])
                if k < n and ids[k] == self.parents[i]:
                    pidx[i] = by_id[k]
        del by_id, ids
        self.ids = self.parents = array("Q")  # not needed any more
        starts = self.starts
        kids = sorted((i for i in range(n) if not flags[i] & _AGAIN),
                      key=lambda i: ((pidx[i] + 1) << 64) | starts[i])
        first = array("q", [0]) * (n + 2)  # children of index p: kids[first[p + 1]:first[p + 2]]
        for i in kids:
            first[pidx[i] + 2] += 1
        for g in range(1, n + 2):
            first[g] += first[g - 1]
        roots = kids[first[0]:first[1]]
        if not roots:
            raise OTLPError(f"trace {self.trace_id}: no root span (its spans' parents form "
                            "a cycle)")
        self.first_root, self.last_root = roots[0], roots[-1]
        if len(roots) == 1 and flags[roots[0]] & _CONTAINER:
            self.container = roots[0]
        top = roots if self.container < 0 else kids[first[roots[0] + 1]:first[roots[0] + 2]]
        self._number(kids, first, top, max_depth)
        self._demoted()

    def _number(self, kids: list[int], first: array, top: list[int], max_depth: int) -> None:
        """Depth first, children by start time (a cycle is never reached from a root)."""
        seq, depth, pidx = array("q", [0]) * len(self), array("l", [0]) * len(self), self.pidx
        stack = top[::-1]
        made = 0
        while stack:
            i = stack.pop()
            p = pidx[i]
            level = depth[i] = depth[p] + 1 if p >= 0 and seq[p] else 0
            if level > max_depth:
                raise OTLPError(f"trace {self.trace_id}: spans nest {level:,} levels deep; at "
                                f"most {max_depth:,} are allowed (AGENTLAB_IMPORT_MAX_DEPTH)")
            made += 1
            seq[i] = made
            stack.extend(reversed(kids[first[i + 1]:first[i + 2]]))
        self.seq = seq

    def _demoted(self) -> None:
        """calls.demote's notes, from the flags: an llm step with an llm step below it wraps
        that call; one that records no call beside one that does prepares it."""
        flags, seq, pidx = self.flags, self.seq, self.pidx
        llm = [i for i in range(len(self)) if seq[i] and flags[i] & _LLM]
        calling = {self.parent_seq(i) for i in llm if flags[i] & _CALL}
        notes = {i: calls.PREPARES for i in llm
                 if not flags[i] & _CALL and self.parent_seq(i) in calling}
        for i in llm:
            p = pidx[i]
            while p >= 0 and seq[p]:
                if flags[p] & _LLM:
                    if notes.get(p) == calls.WRAPPER:
                        break  # its ancestors were marked when it was
                    notes[p] = calls.WRAPPER
                p = pidx[p]
        self.notes = notes

    def is_root(self, i: int) -> bool:
        return self.pidx[i] < 0 and not self.flags[i] & _AGAIN

    def parent_seq(self, i: int) -> int | None:
        p = self.pidx[i]
        return (self.seq[p] or None) if p >= 0 else None

    def main(self) -> tuple[str, str, dict[str, Any]]:
        """The scope and resource of the run's span (or first root): a step keeps its own
        only where they differ (kept.where)."""
        return self.origins[self.where[self.container if self.container >= 0
                                       else self.first_root]]
