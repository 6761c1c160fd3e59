"""No import cycle among progressived's (and drivers') modules, found statically with ast.

A cycle means two modules cannot be understood, tested or replaced apart; issue 12 asks for
parts that only look downward. Every import counts, also those under ``TYPE_CHECKING`` or
inside a function: they are dependencies all the same.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

PACKAGES = ("progressived", "drivers/progressived_drivers")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def imported(path: Path, name: str, known: set[str]) -> set[str]:
    """The project modules ``name`` (at ``path``) imports: ``from a import b`` counts as
    importing ``a.b`` when that is a module, else ``a``."""
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                if sub in known:
                    found.add(sub)
                elif module in known:
                    found.add(module)
    found.discard(name)
    return found


def graph() -> dict[str, set[str]]:
    modules = all_modules()
    known = set(modules)
    return {name: imported(path, name, known) for name, path in modules.items()}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path ``[a, b, ..., a]``, or None (depth-first search, colouring)."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)) is not None:
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)) is not None:
            return cycle
    return None


def test_the_cycle_finder_names_a_cycle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(edges) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_graph_sees_imports_under_type_checking_and_relative_ones(tmp_path: Path) -> None:
    source = tmp_path / "mod.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from progressived.daemon.service import Controller\n"
        "from ..core import money\n"
        "def f():\n    import progressived.runtime.clock\n"
    )
    known = {"progressived.daemon.service", "progressived.core.money", "progressived.runtime.clock"}
    got = imported(source, "progressived.daemon.operator", known)
    assert got == known


def test_no_import_cycle_among_project_modules() -> None:
    edges = graph()
    assert "progressived.daemon.service" in edges and "progressived.daemon.journal" in edges
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])
