"""The graph of a run (pure): agents, models, tools and search depths as nodes, calls as edges.

A step is seen through three sets of facts only, its own, its parent's and its grandparent's
(kind, role, name where it names a model or a tool, depth where it is a LATS node), so the
database can group a run of any length by them in one pass (traces/graph_query.py) and
`aggregate` does the same over steps in memory. `build` turns the groups into nodes and edges:

- an `llm` step is a call to the node `model:<name>`, a `tool` step one to `tool:<name>`, a
  LATS `node` step a visit to `search:depth <d>`; any other step is its role's own work
  (`agent:<role>`: a member's turn, a planner's plan, a judge's verdict);
- the caller is the node of the step's parent (the run's own agent, `agent:agent`, at the
  top); a step of the default role that is neither a call nor a turn (a framework's chain
  span, a thought) names no one: its children are called by its parent's node;
- a call made in another role than its caller's (an evaluator scoring a LATS node, a
  supervisor's routing call at the top) goes through that role's node: caller → role → call.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULT_ROLE = "agent"
ROOT = f"agent:{DEFAULT_ROLE}"
CALLS = ("llm", "tool")
MAX_NODES = 40  # beyond this many, the smallest of a type fold into one "other" node
NODE_TYPES = ("agent", "search", "model", "tool")


@dataclass(frozen=True)
class Facts:
    """What the graph reads of one step: its kind, role, and the name or depth that matter."""

    kind: str
    role: str = DEFAULT_ROLE
    name: str = ""  # a model's or a tool's name; empty for every other kind
    depth: int | None = None  # a LATS node's depth; None for every other kind

    @classmethod
    def of(cls, kind: str, role: str | None, name: str | None, depth: Any = None) -> Facts:
        """The facts that matter of a step's fields (what the SQL's CASEs also keep)."""
        return cls(kind=kind, role=role or DEFAULT_ROLE,
                   name=(name or "") if kind in CALLS else "",
                   depth=_int(depth) if kind == "node" else None)

    @property
    def key(self) -> str:
        if self.kind == "llm":
            return f"model:{self.name}"
        if self.kind == "tool":
            return f"tool:{self.name}"
        if self.kind == "node":
            return f"search:depth {self.depth if self.depth is not None else '?'}"
        return f"agent:{self.role}"

    @property
    def transparent(self) -> bool:
        """A step of the default role that is neither a call, a turn nor a search node."""
        return self.role == DEFAULT_ROLE and self.kind not in (*CALLS, "node", "message")


@dataclass
class Figures:
    """What a group of steps adds up to."""

    count: int = 0
    ms: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    errors: int = 0
    first: int | None = None  # the lowest seq among them

    def add(self, other: Figures) -> None:
        self.count += other.count
        self.ms += other.ms
        self.tokens_in += other.tokens_in
        self.tokens_out += other.tokens_out
        self.cost_usd += other.cost_usd
        self.errors += other.errors
        if other.first is not None:
            self.first = other.first if self.first is None else min(self.first, other.first)

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out


@dataclass(frozen=True)
class Group:
    """Steps that share their own, their parent's and their grandparent's facts."""

    step: Facts
    parent: Facts | None
    grandparent: Facts | None
    figures: Figures


@dataclass
class Node:
    key: str
    label: str
    figures: Figures = field(default_factory=Figures)
    folded: int = 0  # how many nodes an "other" node stands for

    @property
    def type(self) -> str:
        return self.key.split(":", 1)[0]


@dataclass
class Edge:
    source: str
    target: str
    figures: Figures = field(default_factory=Figures)


@dataclass
class Graph:
    nodes: dict[str, Node]
    edges: dict[tuple[str, str], Edge]
    steps: int = 0
    cut: bool = False  # the groups were cut: figures cover only the largest ones


def caller(parent: Facts | None, grandparent: Facts | None) -> str:
    """The node a step's parent stands for: who called it."""
    if parent is None:
        return ROOT
    if parent.transparent:
        return grandparent.key if grandparent is not None and not grandparent.transparent \
            else ROOT
    return parent.key


def locate(step: Facts, parent: Facts | None, grandparent: Facts | None
           ) -> tuple[str, list[tuple[str, str]]]:
    """A step's node and the edges it came by (none for an agent's own work)."""
    source = caller(parent, grandparent)
    if step.transparent:
        return source, []
    target = step.key
    if step.kind in (*CALLS, "node"):
        actor = f"agent:{step.role}"
        if step.role != DEFAULT_ROLE and actor != source:
            return target, [(source, actor), (actor, target)]
    return target, [] if source == target else [(source, target)]


def as_root(place: tuple[str, list[tuple[str, str]]], root_role: str
            ) -> tuple[str, list[tuple[str, str]]]:
    """A place with the role the run's own agent plays read as the root."""
    if not root_role:
        return place
    role = f"agent:{root_role}"
    node, path = place
    path = [(ROOT if a == role else a, ROOT if b == role else b) for a, b in path]
    return ROOT if node == role else node, [(a, b) for a, b in path if a != b]


def root_role(paradigm: str, snapshot: Any) -> str:
    """The role a run's own agent plays, where its paradigm says (a supervisor)."""
    params = snapshot.get("params") if isinstance(snapshot, dict) else None
    mode = params.get("mode") if isinstance(params, dict) else None
    return "supervisor" if paradigm == "multi_agent" and mode == "supervisor" else ""


def aggregate(steps: Iterable[Any]) -> list[Group]:
    """The groups of steps in memory (any objects with seq, parent, kind, role, name, status,
    duration_ms, tokens_in, tokens_out, cost_usd, meta), in one pass; parents come first."""
    facts: dict[int, tuple[Facts, int | None]] = {}
    groups: dict[tuple, Figures] = {}
    for s in steps:
        own = Facts.of(s.kind, s.role, s.name, (s.meta or {}).get("depth"))
        facts[s.seq] = (own, s.parent)
        parent, grand_seq = facts.get(s.parent, (None, None)) if s.parent else (None, None)
        grand = facts[grand_seq][0] if grand_seq in facts else None
        figures = groups.setdefault((own, parent, grand), Figures())
        figures.add(Figures(1, s.duration_ms or 0.0, s.tokens_in or 0, s.tokens_out or 0,
                            s.cost_usd or 0.0, int(s.status == "error"), s.seq))
    return [Group(*key, figures) for key, figures in groups.items()]


def build(groups: Iterable[Group], *, root_label: str = "", root_role: str = "",
          cut: bool = False) -> Graph:
    """Nodes and edges with their figures, the smallest folded past MAX_NODES. `root_role`
    names a role the run's own agent plays (a supervisor: the members' turns are its calls)."""
    nodes: dict[str, Node] = {ROOT: Node(ROOT, root_label or DEFAULT_ROLE)}
    edges: dict[tuple[str, str], Edge] = {}
    total = 0
    for group in groups:
        total += group.figures.count
        target, path = as_root(locate(group.step, group.parent, group.grandparent), root_role)
        _node(nodes, target).figures.add(group.figures)
        for source, to in path:
            _node(nodes, source)
            _node(nodes, to)
            edges.setdefault((source, to), Edge(source, to)).figures.add(group.figures)
    graph = Graph(nodes, edges, steps=total, cut=cut)
    return fold(graph) if len(nodes) > MAX_NODES else graph


def _node(nodes: dict[str, Node], key: str) -> Node:
    if key not in nodes:
        nodes[key] = Node(key, key.split(":", 1)[1])
    return nodes[key]


def fold(graph: Graph, keep: int = MAX_NODES) -> Graph:
    """The `keep` busiest nodes (the root always) and one "other" node per type for the rest."""
    ranked = sorted(graph.nodes.values(), key=lambda n: (n.key != ROOT, -n.figures.count, n.key))
    kept = {n.key for n in ranked[:keep - len(NODE_TYPES)]}
    rename = {n.key: n.key if n.key in kept else f"{n.type}:…other" for n in ranked}
    nodes: dict[str, Node] = {}
    for node in ranked:
        key = rename[node.key]
        if key not in nodes:
            nodes[key] = Node(key, node.label if key in kept else f"other {node.type}s")
        nodes[key].figures.add(node.figures)
        nodes[key].folded += key not in kept
    edges: dict[tuple[str, str], Edge] = {}
    for edge in graph.edges.values():
        pair = (rename[edge.source], rename[edge.target])
        edges.setdefault(pair, Edge(*pair)).figures.add(edge.figures)
    return Graph(nodes, edges, steps=graph.steps, cut=graph.cut)


def folded_key(graph: Graph, key: str) -> str:
    """The node a key is shown as (itself, or its type's "other" node)."""
    return key if key in graph.nodes else f"{key.split(':', 1)[0]}:…other"


@dataclass(frozen=True)
class Difference:
    """Two graphs compared: what only one has, and the counts that differ."""

    nodes_only_a: list[str]
    nodes_only_b: list[str]
    edges_only_a: list[tuple[str, str]]
    edges_only_b: list[tuple[str, str]]
    counts: list[tuple[str, int, int]]  # "a → b" or a node's key, count in A, count in B

    @property
    def same(self) -> bool:
        return not (self.nodes_only_a or self.nodes_only_b or self.edges_only_a
                    or self.edges_only_b or self.counts)


def compare(a: Graph, b: Graph) -> Difference:
    def counts(items: Mapping[Any, Any]) -> dict[Any, int]:
        return {k: v.figures.count for k, v in items.items()}

    na, nb, ea, eb = counts(a.nodes), counts(b.nodes), counts(a.edges), counts(b.edges)
    differ = [(f"{k[0]} → {k[1]}", ea[k], eb[k]) for k in sorted(ea.keys() & eb.keys())
              if ea[k] != eb[k]]
    differ += [(k, na[k], nb[k]) for k in sorted(na.keys() & nb.keys()) if na[k] != nb[k]]
    return Difference(sorted(na.keys() - nb.keys()), sorted(nb.keys() - na.keys()),
                      sorted(ea.keys() - eb.keys()), sorted(eb.keys() - ea.keys()), differ)


def _int(value: Any) -> int | None:
    try:
        return int(float(value)) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError, OverflowError):
        return None
