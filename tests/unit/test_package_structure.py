"""The shape of the layer package: no import cycle, modules small enough to read in one
sitting, services that reach storage only through the ports, an engine with no I/O."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "layers" / "agent_harness" / "agent_harness"
MAX_LINES = 500


def _module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package: Path) -> dict[str, set[str]]:
    """Module -> the package modules it imports, counting every import: top-level,
    inside functions and under ``TYPE_CHECKING`` (a cycle through any of them is still a
    knot a reader has to untie)."""
    modules = {_module_name(p, package): p for p in package.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = name.split(".")
                    parent = parent if is_package else parent[:-1]
                    parent = parent[: len(parent) - node.level + 1]
                    base = ".".join([*parent, *([node.module] if node.module else [])])
                targets = [base, *(f"{base}.{a.name}" for a in node.names)]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle_through_a_function_level_import(tmp_path) -> None:
    pkg = tmp_path / "agent_harness"
    (pkg / "memory").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "memory" / "__init__.py").write_text("")
    (pkg / "memory" / "a.py").write_text("from agent_harness.memory import b\n")
    (pkg / "memory" / "b.py").write_text("def f():\n    from . import c\n")
    (pkg / "memory" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import x\n"
    )
    graph = import_graph(pkg)
    assert cycles(graph) == [
        ["agent_harness.memory.a", "agent_harness.memory.b", "agent_harness.memory.c"]
    ]


def test_the_package_has_no_import_cycle() -> None:
    graph = import_graph(PACKAGE)
    assert len(graph) > 50 and sum(map(len, graph.values())) > 200  # the graph is real
    assert cycles(graph) == []


def test_no_module_is_longer_than_a_sitting() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in [*PACKAGE.rglob("*.py"), *(ROOT / "functions").rglob("*.py")]
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


#: modules that do pure computation: no AWS client, no Runtime, no network
PURE = [
    "memory/engine/index.py",
    "memory/recall.py",
    "memory/facts/ledger.py",
    "memory/engine/segments.py",
    "paths.py",
    "keys.py",
]


@pytest.mark.parametrize("module", PURE)
def test_pure_modules_import_no_aws_runtime_or_adapter(module: str) -> None:
    graph = import_graph(PACKAGE)
    name = _module_name(PACKAGE / module)
    reach, todo = set(), [name]
    while todo:  # everything the module loads, directly or not
        for dep in graph[todo.pop()] - reach:
            reach.add(dep)
            todo.append(dep)
    assert not {m for m in reach if m.startswith(("agent_harness.aws", "agent_harness.runtime"))}
    source = (PACKAGE / module).read_text(encoding="utf-8")
    assert "boto" not in source and "httpx" not in source


def test_services_reach_storage_only_through_the_ports() -> None:
    """No service imports an AWS adapter: only the composition root (runtime), the
    operator CLI's dead-letter commands and the adapters themselves do."""
    graph = import_graph(PACKAGE)
    allowed = {"agent_harness.runtime", "agent_harness.cli"}
    offenders = {
        m: sorted(d for d in deps if d.startswith("agent_harness.aws"))
        for m, deps in graph.items()
        if not m.startswith("agent_harness.aws") and m not in allowed
    }
    assert {m: d for m, d in offenders.items() if d} == {}
