"""The search tree of LATS (package-private, pure): nodes, UCT selection, back-propagation."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

SCALE = 10.0  # evaluator scores are 0..10; UCT works on 0..1 so `exploration` means what it
#               does in the paper (c = 1 balances a full-scale value difference).


@dataclass(eq=False)
class Node:
    """One state of the search: the trajectory from the root plus this node's action."""

    parent: Node | None = None
    depth: int = 0
    thought: str = ""
    action: str = ""  # a tool name or "final_answer"; "" for the root
    action_input: Any = None
    observation: str = ""
    answer: str | None = None  # set on a final_answer node
    terminal: bool = False  # a final answer, or a candidate that could not be read
    solved: bool = False
    score: float | None = None  # the evaluator's own score for this node (None: none/unusable)
    value: float = 0.0  # running mean of the scores back-propagated through this node
    visits: int = 0
    children: list[Node] = field(default_factory=list)
    step: Any = None  # the node's recorded Step, kept by lats.py to re-emit on updates

    def add(self, **fields: Any) -> Node:
        child = Node(parent=self, depth=self.depth + 1, **fields)
        self.children.append(child)
        return child

    def path(self) -> list[Node]:
        """The nodes from the root to this one, both included."""
        node, out = self, []
        while node is not None:
            out.append(node)
            node = node.parent
        return out[::-1]


def uct(node: Node, exploration: float) -> float:
    """Upper confidence bound of `node` under its parent; unvisited nodes come first."""
    if node.visits == 0:
        return math.inf
    parent_visits = node.parent.visits if node.parent is not None else node.visits
    bonus = exploration * math.sqrt(math.log(max(parent_visits, 1)) / node.visits)
    return node.value / SCALE + bonus


def is_open(node: Node, max_depth: int) -> bool:
    """True when the subtree still has a leaf that may be expanded."""
    if not node.children:
        return not node.terminal and node.depth < max_depth
    return any(is_open(child, max_depth) for child in node.children)


def select(root: Node, exploration: float, max_depth: int) -> Node | None:
    """Walk down by the best UCT among open children to a leaf; None when nothing is left."""
    if not is_open(root, max_depth):
        return None
    node = root
    while node.children:
        # max() keeps the first of equal scores: earlier candidates win ties, deterministically.
        node = max((c for c in node.children if is_open(c, max_depth)),
                   key=lambda c: uct(c, exploration))
    return node


def backpropagate(node: Node, value: float) -> list[Node]:
    """Add one visit with `value` to `node` and each ancestor (running mean); returns them."""
    path = node.path()
    for each in path:
        each.visits += 1
        each.value += (value - each.value) / each.visits
    return path


def best_terminal(root: Node) -> Node | None:
    """The answered node with the highest score (the earliest among equals), if any."""
    answered = [n for n in walk(root) if n.answer is not None]
    return max(answered, key=lambda n: n.score or 0.0, default=None)


def best_node(root: Node) -> Node | None:
    """The highest-scored node below the root (the earliest among equals), if any."""
    return max((n for n in walk(root) if n is not root and n.score is not None),
               key=lambda n: n.score or 0.0, default=None)


def walk(root: Node) -> list[Node]:
    """All nodes breadth first (parents before children, siblings in creation order)."""
    out, stack = [], [root]
    while stack:
        node = stack.pop(0)
        out.append(node)
        stack.extend(node.children)
    return out


def trajectory_text(node: Node, task: str) -> str:
    """The trajectory as text for the evaluator, the reflector and the solver."""
    lines = [f"Question: {task}"]
    for each in node.path()[1:]:
        if each.thought:
            lines.append(f"Thought: {each.thought}")
        if each.action == "final_answer":
            lines.append(f"Final answer: {each.answer}")
            continue
        if each.action:
            lines.append(f"Action: {each.action} {_show(each.action_input)}")
        if each.observation:
            lines.append(f"Observation: {each.observation}")
    return "\n".join(lines)


def _show(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                           default=str)
