"""The layout keeps its layers (docs/ARCHITECTURE.md "Layout"): imports point downwards only,
no module or package imports itself back in a circle, the pure core needs no database, and
nobody reaches into another package's `_`-modules.

Every import statement counts, also one inside a function or under TYPE_CHECKING: an import
circle hidden that way is still a circle a reader has to untangle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("agentlab", "traces")

# Bottom first; a module may import its own layer or a lower one. The first matching prefix wins
# (longest prefixes are listed before shorter ones where they overlap).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("traces", "agentlab.paths")),
    ("llm and tools", ("agentlab.llm", "agentlab.tools", "agentlab.guardrails")),
    ("runtime", ("agentlab.runtime",)),
    ("paradigms", ("agentlab.paradigms",)),
    ("configuration", ("agentlab.models", "agentlab.profiles", "agentlab.tool_rows",
                       "agentlab.guardrail_rows", "agentlab.mail", "agentlab.secrets")),
    # A run's one home in a process: create, start, execute, control, record, publish.
    ("runs", ("agentlab.runs",)),
    ("features", ("agentlab.chat", "agentlab.compare", "agentlab.evals", "agentlab.dashboard",
                  "agentlab.forks", "agentlab.live", "agentlab.bench", "agentlab.code_agents",
                  "agentlab.workers", "agentlab.tokens", "agentlab.receiver", "agentlab.gateway",
                  "agentlab.controls",
                  "agentlab.feedback", "agentlab.review", "agentlab.monitors")),
    ("project", ("agentlab",)),
)
# The pure core: unit-tested without a database.
PURE = ("agentlab.llm", "agentlab.tools", "agentlab.guardrails", "agentlab.runtime",
        "agentlab.paradigms", "traces.schema", "traces.diff", "traces.volatile",
        "agentlab.feedback.values", "traces.diff_pages", "agentlab.review.sampling",
        "agentlab.review.agreement", "agentlab.review.pairing", "agentlab.monitors.rules",
        "traces.graph", "traces.graph_layout")
PURE_MAY_USE = ("traces.schema", "traces.owners", "traces.diff", "traces.redact",
                "agentlab.paths")
NOT_PURE = ("django.db", "django.contrib", "channels")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" not in path.parts:
                found[_module_name(path)] = path
    return found


def _is_package(name: str) -> bool:
    return modules()[name].name == "__init__.py"


def imports_of(name: str) -> Iterator[tuple[str, int]]:
    """(imported module, line) for every import in module `name`, relative ones resolved;
    `from package import sub` counts as importing the submodule."""
    tree = ast.parse(modules()[name].read_text(encoding="utf-8"))
    here = name if _is_package(name) else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.split(".")[: len(here.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                yield (sub if sub in modules() else base), node.lineno


def _ours(name: str) -> bool:
    return name.split(".")[0] in PACKAGES


def layer(name: str) -> int:
    best, index = -1, -1
    for i, (_label, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and len(prefix) > best:
                best, index = len(prefix), i
    assert index >= 0, f"{name} belongs to no layer; add it to LAYERS"
    return index


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def edges() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in modules()}
    for name in modules():
        for target, _line in imports_of(name):
            if _ours(target) and target != name and target in modules():
                graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one member (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _unit(name: str) -> str:
    """A feature-sized unit: agentlab.chat, agentlab.runtime, traces.display, agentlab.models…"""
    return ".".join(name.split(".")[:2])


def test_every_module_is_in_a_layer():
    for name in modules():
        layer(name)


def test_imports_point_downwards_only():
    upward = []
    for name in modules():
        for target, line in imports_of(name):
            if _ours(target) and layer(target) > layer(name):
                upward.append(f"{name}:{line} imports {target} "
                              f"({LAYERS[layer(name)][0]} -> {LAYERS[layer(target)][0]})")
    assert not upward, "\n".join(upward)


def test_no_module_imports_itself_back():
    assert not cycles(edges()), cycles(edges())


def test_no_package_imports_itself_back():
    graph: dict[str, set[str]] = {}
    for name, targets in edges().items():
        graph.setdefault(_unit(name), set()).update(
            _unit(t) for t in targets if _unit(t) != _unit(name))
    assert not cycles(graph), cycles(graph)


def test_the_pure_core_needs_no_database():
    impure = []
    for name in modules():
        if not _within(name, PURE):
            continue
        for target, line in imports_of(name):
            ours_but_not_pure = _ours(target) and not _within(target, PURE + PURE_MAY_USE)
            if _within(target, NOT_PURE) or ours_but_not_pure:
                impure.append(f"{name}:{line} imports {target}")
    assert not impure, "\n".join(impure)


def test_nobody_reaches_into_another_packages_private_modules():
    reaches = []
    for name in modules():
        for target, line in imports_of(name):
            package, _, last = target.rpartition(".")
            private = _ours(target) and last.startswith("_") and not last.startswith("__")
            if private and not (name == package or name.startswith(package + ".")):
                reaches.append(f"{name}:{line} imports {target}")
    assert not reaches, "\n".join(reaches)


@pytest.mark.parametrize("graph, expected", [
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ({"a": {"b"}, "b": set()}, []),
])
def test_the_cycle_finder_finds_circles(graph, expected):
    assert cycles(graph) == expected


def test_the_layer_check_sees_an_upward_import_inside_a_function(tmp_path, monkeypatch):
    # A runtime module that looks a paradigm up by importing it, the way scopes.py once did.
    fake = tmp_path / "agentlab" / "runtime"
    fake.mkdir(parents=True)
    (fake / "lookup.py").write_text(
        "def find():\n    from agentlab.paradigms.registry import get_paradigm\n")
    real = modules()
    monkeypatch.setattr("tests.test_layers.modules",
                        lambda: {**real, "agentlab.runtime.lookup": fake / "lookup.py"})
    found = [t for t, _line in imports_of("agentlab.runtime.lookup")]
    assert found == ["agentlab.paradigms.registry"]
    assert layer("agentlab.paradigms.registry") > layer("agentlab.runtime.lookup")


def test_the_socket_package_holds_sockets_only():
    """agentlab/live/ is the sockets: each of its modules is a consumer or the frame base they
    share (it speaks Channels), and only the routing and other consumers import it; a run's
    life (start, control, recording) lives in agentlab.runs."""
    live = [name for name in modules() if _within(name, ("agentlab.live",))
            and not _is_package(name)]
    speaks_channels = [name for name in live
                       if any(_within(t, ("channels",)) for t, _line in imports_of(name))]
    assert live and sorted(speaks_channels) == sorted(live)
    importers = sorted({name for name in modules() if not _within(name, ("agentlab.live",))
                        for target, _line in imports_of(name)
                        if _within(target, ("agentlab.live",))})
    assert all(n == "agentlab.routing" or n.endswith(".consumers") for n in importers), importers


def _is_test_module(name: str) -> bool:
    """tests.test_x, tests.security.test_x, tests.browser.test_x (and any deeper test_x)."""
    return name.split(".")[0] == "tests" and name.rpartition(".")[2].startswith("test_")


def imports_of_test_modules(path: Path, name: str) -> Iterator[tuple[str, int]]:
    """(imported module, line) for each import of a test_* module under tests/ in the file at
    `path`, module `name`; relative imports resolved, `from tests import test_x` counted."""
    here = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.split(".")[: len(here.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        for target in targets:
            if _is_test_module(target):
                yield target, node.lineno
                break


def test_no_test_module_imports_another():
    """Shared helpers live in helper modules (tests/sockets.py, tests/factories.py, …) and
    shared fixtures in plugins that conftest.py loads: a test module is never imported by
    another, so each can be moved, renamed or deleted on its own."""
    reaches = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for target, line in imports_of_test_modules(path, _module_name(path)):
            reaches.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not reaches, "\n".join(reaches)


@pytest.mark.parametrize("source, expected", [
    ("from tests.test_consumers import headers\n", ["tests.test_consumers"]),
    ("def f():\n    from tests.security.test_limits import X\n", ["tests.security.test_limits"]),
    ("import tests.browser.test_tour as tour\n", ["tests.browser.test_tour"]),
    ("from tests import test_runs\n", ["tests.test_runs"]),
    ("from .test_chat import agent\n", ["tests.browser.test_chat"]),
    ("from tests.sockets import connect\nfrom tests import factories\n", []),
])
def test_the_test_import_check_sees_each_way_of_importing(tmp_path, source, expected):
    path = tmp_path / "test_new.py"
    path.write_text(source)
    found = [t for t, _line in imports_of_test_modules(path, "tests.browser.test_new")]
    assert found == expected
