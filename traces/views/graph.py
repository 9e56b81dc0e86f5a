"""The graph of a run (who called whom), the step it is at, a node's steps, and two runs'
graphs side by side. Built from the database's aggregate (traces/graph_query.py), never from
every step."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from traces.graph import Graph, compare, folded_key
from traces.graph_layout import draw
from traces.graph_query import node_steps, run_graph, step_place
from traces.models import Run
from traces.views import steps as loader
from traces.views.diff import _pair
from traces.views.run import _int, visible_run

NODE_STEPS = 50  # a node's steps are listed this many at a time


def graph_view(graph: Graph, place: dict[str, Any] | None = None) -> dict[str, Any]:
    """What _graph_svg.html draws: the placed nodes and edges, and where step N is."""
    drawing = draw(graph)
    node = folded_key(graph, place["node"]) if place else None
    edges = {(folded_key(graph, a), folded_key(graph, b)) for a, b in place["edges"]} \
        if place else set()
    return {"graph": graph, "drawing": drawing, "at_node": node,
            "at_edges": [e.index for e in drawing.edges
                         if (e.edge.source, e.edge.target) in edges],
            "busiest": [{"from": graph.nodes[e.source], "to": graph.nodes[e.target],
                         "figures": e.figures}
                        for e in sorted(graph.edges.values(), key=lambda e: -e.figures.count)]}


def run_graph_page(request: HttpRequest, pk: int) -> HttpResponse:
    run = visible_run(request, pk)
    last = loader.last_seq(run)
    current = _int(request.GET.get("step"))
    current = min(max(current, 1), last) if current is not None and last else None
    graph = run_graph(run)
    place = step_place(run, current) if current else None
    key = request.GET.get("node", "")[:300]
    listed = _node_list(run, key, _int(request.GET.get("after")) or 0) if key else None
    return render(request, "traces/graph.html", {
        "run": run, "last_seq": last, "current": current, "graph": graph,
        "gv": graph_view(graph, place),
        "node_key": key, "listed": listed,
        "node_label": graph.nodes[key].label if key in graph.nodes else key.partition(":")[2],
    })


def _node_list(run: Run, key: str, after: int) -> dict[str, Any]:
    steps = list(node_steps(run, key).filter(seq__gt=after).order_by("seq")
                 .values("seq", "kind", "role", "name", "status", "duration_ms")[:NODE_STEPS + 1])
    return {"steps": steps[:NODE_STEPS],
            "next_after": steps[NODE_STEPS - 1]["seq"] if len(steps) > NODE_STEPS else None}


def run_graph_step(request: HttpRequest, pk: int, seq: int) -> JsonResponse:
    """Where step `seq` is on the graph: its node and the edges it came by (the scrubber)."""
    run = visible_run(request, pk)
    place = step_place(run, seq)
    if place is None:
        raise Http404("no such step")
    return JsonResponse(place)


def run_graphs(request: HttpRequest) -> HttpResponse:
    """Two runs' graphs side by side (from the diff page), and what differs between them."""
    pk_a, pk_b = _pair(request)
    run_a, run_b = visible_run(request, pk_a), visible_run(request, pk_b)
    graph_a, graph_b = run_graph(run_a), run_graph(run_b)
    return render(request, "traces/graphs.html", {
        "a": run_a, "b": run_b, "view_a": graph_view(graph_a), "view_b": graph_view(graph_b),
        "difference": compare(graph_a, graph_b),
    })
