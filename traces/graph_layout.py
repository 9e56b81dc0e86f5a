"""Where a graph's nodes and edges are drawn (pure): layered left to right by call depth.

A node's layer is its distance from the run's own agent along the edges (breadth first); in a
layer, nodes stand in the order of their first step. The same graph is always drawn the same
way, so two runs' drawings can be read side by side. The SVG itself is the template's
(templates/traces/_graph_svg.html): every label goes through the template engine, escaped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from traces.graph import ROOT, Edge, Graph, Node

NODE_W, NODE_H = 160, 50
GAP_X, GAP_Y = 64, 20
PAD = 12
LABEL_CHARS = 21


@dataclass(frozen=True)
class PlacedNode:
    node: Node
    index: int  # its DOM id is "g-n<index>"
    x: float
    y: float
    layer: int

    @property
    def short(self) -> str:
        label = self.node.label
        return label if len(label) <= LABEL_CHARS else label[:LABEL_CHARS - 1] + "…"


@dataclass(frozen=True)
class PlacedEdge:
    edge: Edge
    index: int
    path: str
    label_x: float
    label_y: float
    width: float
    back: bool  # drawn backwards or within a layer (a loop between agents)


@dataclass(frozen=True)
class Drawing:
    nodes: list[PlacedNode]
    edges: list[PlacedEdge]
    width: float
    height: float


def layers(graph: Graph) -> dict[str, int]:
    """Each node's layer: the longest path to it from the root, loops left out (an edge back
    to a node still being walked), so a callee stands right of every one of its callers."""
    out: dict[str, list[str]] = {}
    for source, target in sorted(graph.edges, key=lambda e: _first(graph, e[1])):
        out.setdefault(source, []).append(target)
    order: list[str] = []  # finished last first: a topological order of the loop-free edges
    forward: dict[str, list[str]] = {}
    state: dict[str, int] = {}  # 1 being walked, 2 done
    starts = [ROOT] + sorted((k for k in graph.nodes if k != ROOT), key=lambda k: _first(graph, k))
    for start in starts:
        if start in state:
            continue
        stack = [(start, iter(out.get(start, [])))]
        state[start] = 1
        while stack:
            key, rest = stack[-1]
            target = next(rest, None)
            if target is None:
                state[key] = 2
                order.append(key)
                stack.pop()
            elif state.get(target) != 1:  # not a loop back
                forward.setdefault(key, []).append(target)
                if target not in state:
                    state[target] = 1
                    stack.append((target, iter(out.get(target, []))))
    depth = {key: 0 if key == ROOT else 1 for key in graph.nodes}
    for key in reversed(order):
        for target in forward.get(key, []):
            depth[target] = max(depth[target], depth[key] + 1)
    return depth


def _first(graph: Graph, key: str) -> tuple[float, str]:
    node = graph.nodes.get(key)
    first = node.figures.first if node is not None else None
    return (first if first is not None else math.inf, key)


def draw(graph: Graph) -> Drawing:
    layer_of = layers(graph)
    columns: dict[int, list[str]] = {}
    for key in sorted(graph.nodes, key=lambda k: (k != ROOT, *_first(graph, k))):
        columns.setdefault(layer_of[key], []).append(key)
    placed: dict[str, PlacedNode] = {}
    for layer, keys in sorted(columns.items()):
        for row, key in enumerate(keys):
            placed[key] = PlacedNode(graph.nodes[key], len(placed), PAD + layer * (NODE_W + GAP_X),
                                     PAD + row * (NODE_H + GAP_Y), layer)
    most = max((e.figures.count for e in graph.edges.values()), default=1)
    fan_in: dict[str, int] = {}
    fan_out: dict[str, int] = {}
    for source, target in graph.edges:
        fan_out[source] = fan_out.get(source, 0) + 1
        fan_in[target] = fan_in.get(target, 0) + 1
    # a count stands where its edge has parted from the others: near the end that fans out
    edges = [_edge(e, i, placed[e.source], placed[e.target], most,
                   0.32 if fan_in[e.target] > fan_out[e.source] else 0.68)
             for i, e in enumerate(sorted(graph.edges.values(),
                                          key=lambda e: (placed[e.source].index,
                                                         placed[e.target].index)))]
    width = max((n.x for n in placed.values()), default=0) + NODE_W + PAD
    height = max((n.y for n in placed.values()), default=0) + NODE_H + PAD + GAP_Y * 2
    return Drawing(sorted(placed.values(), key=lambda n: n.index), edges, width, height)


def _edge(edge: Edge, index: int, a: PlacedNode, b: PlacedNode, most: int,
          t: float) -> PlacedEdge:
    width = 1.5 + 4.5 * math.log1p(edge.figures.count) / math.log1p(max(most, 1))
    back = b.layer <= a.layer
    if not back:
        x1, y1, x2, y2 = a.x + NODE_W, a.y + NODE_H / 2, b.x, b.y + NODE_H / 2
        c1, c2 = (x1 + GAP_X / 2, y1), (x2 - GAP_X / 2, y2)
    else:  # out of the bottom of one, into the bottom of the other, bowed below both
        x1, y1, x2, y2 = a.x + NODE_W * 0.6, a.y + NODE_H, b.x + NODE_W * 0.4, b.y + NODE_H
        low = max(y1, y2) + GAP_Y * 1.6
        c1, c2 = (x1, low), (x2, low)
    t = t if not back else 0.5
    mid_x, mid_y = _bezier(t, x1, c1[0], c2[0], x2), _bezier(t, y1, c1[1], c2[1], y2)
    path = (f"M{x1:.1f},{y1:.1f} C{c1[0]:.1f},{c1[1]:.1f} {c2[0]:.1f},{c2[1]:.1f} "
            f"{x2:.1f},{y2:.1f}")
    return PlacedEdge(edge, index, path, round(mid_x, 1), round(mid_y - 4, 1), round(width, 2),
                      back)


def _bezier(t: float, p0: float, p1: float, p2: float, p3: float) -> float:
    u = 1 - t
    return u * u * u * p0 + 3 * u * u * t * p1 + 3 * u * t * t * p2 + t * t * t * p3
