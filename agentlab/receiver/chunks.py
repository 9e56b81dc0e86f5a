"""A request's spans in the pieces the store takes one transaction each
(agentlab/receiver/views.py), so that the first of a big request are stored, published and
on a watching page while the rest are still being stored: an exporter's batch of 512 spans
in one transaction kept every one of them waiting for the last (`manage.py bench_ingest`,
the latency figure).

Only for a request that holds a trace of more than AGENTLAB_RECEIVER_CHUNK_SPANS spans, while
a run may have a watcher (in this process, or another one a channel layer reaches): a batch
of many short runs (most of them come whole, and are read whole: nobody can be watching them)
or a request nobody watches gains nothing from it, and a piece costs a transaction (a tenth
more CPU for 1,000 traces of 10 spans, measured). A piece holds at most that many spans, but
a trace no bigger is never cut (a trace that comes whole in one request is read whole from
the spans in hand, the cheap way). A bigger trace is cut as an exporter with smaller batches
would have sent it, its root (if it came) in its last piece: each piece is then one
request's worth of the same trace, which the store takes the same way, retries and
placeholders included.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from agentlab.receiver.rows import is_root
from agentlab.runs import fanout
from traces.otel.decode import Span

Groups = dict[str, list[Span]]


def admitted(groups: Groups, receipt: Any) -> Groups:
    """The request's traces up to AGENTLAB_RECEIVER_MAX_TRACES_PER_REQUEST; the others
    refused in the receipt."""
    most = settings.AGENTLAB_RECEIVER_MAX_TRACES_PER_REQUEST
    out: Groups = {}
    for n, (trace_id, spans) in enumerate(groups.items()):
        if n >= most:
            receipt.refuse(len(spans), f"a request may hold the spans of {most:,} traces "
                                       "(AGENTLAB_RECEIVER_MAX_TRACES_PER_REQUEST)")
            continue
        out[trace_id] = spans
    return out


def pieces(groups: Groups, size: int | None = None) -> list[Groups]:
    """`groups` in pieces of at most `size` spans (see the module's docstring)."""
    size = max(1, size or settings.AGENTLAB_RECEIVER_CHUNK_SPANS)
    if not fanout.anyone_watching() or all(len(spans) <= size for spans in groups.values()):
        return [groups] if groups else []
    out: list[Groups] = []
    piece: Groups = {}
    room = size
    for trace_id, spans in groups.items():
        if len(spans) > size:  # cut: the root (if any) last, as it ends last
            ordered = sorted(spans, key=is_root)
            for start in range(0, len(ordered), size):
                part = ordered[start:start + size]
                if len(part) > room and piece:
                    out.append(piece)
                    piece, room = {}, size
                piece.setdefault(trace_id, []).extend(part)
                room -= len(part)
            continue
        if len(spans) > room and piece:
            out.append(piece)
            piece, room = {}, size
        piece[trace_id] = spans
        room -= len(spans)
    if piece:
        out.append(piece)
    return out
