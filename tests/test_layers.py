"""The package's layering: no import cycle among sim modules, C constants read from C.

The import graph is built from the source with ``ast`` and counts every import statement:
module level, inside functions, and under ``if TYPE_CHECKING`` (a cycle hidden in a function
or a type-only import is still a cycle between the two modules' concepts).  An import of a
package's own submodule through ``from . import name`` is an edge to that submodule.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SIM = ROOT / "sim"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(SIM.rglob("*.py"))}


def _targets(node: ast.AST, module: str, is_package: bool, known) -> list[str]:
    """The sim modules one import statement names (the longest known prefix of each)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            pkg = module.split(".") if is_package else module.split(".")[:-1]
            pkg = pkg[:len(pkg) - node.level + 1]
            base = ".".join(pkg + ([node.module] if node.module else []))
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
    found = []
    for name in names:
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name:
            found.append(name)
    return found


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        edges = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                edges.update(_targets(node, name, path.name == "__init__.py", modules))
        graph[name] = edges - {name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path [a, b, ..., a], or None (iterative depth-first search)."""
    state: dict[str, int] = {}          # 1 = on the current path, 2 = finished
    for root in sorted(graph):
        if root in state:
            continue
        path, stack = [root], [iter(sorted(graph[root]))]
        state[root] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None


def test_cycle_finder_finds_a_function_level_cycle(tmp_path):
    pkg = tmp_path / "sim"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import x\n")
    (pkg / "b.py").write_text("def f():\n    from . import a\n")
    (pkg / "c.py").write_text("import sim.a\n")
    mods = {f"sim.{p.stem}" if p.stem != "__init__" else "sim": p for p in pkg.glob("*.py")}
    graph = import_graph(mods)
    assert graph["sim.c"] == {"sim.a"}
    assert find_cycle(graph) in (["sim.a", "sim.b", "sim.a"], ["sim.b", "sim.a", "sim.b"])
    assert find_cycle({"x": {"y"}, "y": set()}) is None


def test_sim_modules_import_each_other_without_cycles():
    graph = import_graph(_modules())
    assert "sim.presets" in graph["sim.sweep.spec"]     # the graph does see function-level imports
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_only_native_imports_the_compiled_module():
    users = [n for n, p in _modules().items() if "_sk_native" in p.read_text() and n != "sim._native"]
    assert users == []


def _c_enum(header: str) -> dict[str, int]:
    text = (ROOT / "csrc" / header).read_text()
    return {m[1]: int(m[2]) for m in re.finditer(r"\b(SK_[A-Z0-9_]+)\s*=\s*(-?\d+)", text)}


@pytest.mark.parametrize("header", ["sk_engine.h", "sk_entropy.h"])
def test_python_reads_c_constants_from_the_compiled_module(header):
    from sim._native import lib

    consts = _c_enum(header)
    assert consts and all(getattr(lib, k) == v for k, v in consts.items())
    from sim import state

    assert (state.ARRIVAL, state.COMPLETION, state.ROUND, state.TIMER) == tuple(
        _c_enum("sk_engine.h")[f"SK_WHY_{w}"] for w in ("ARRIVAL", "COMPLETION", "ROUND", "TIMER"))
