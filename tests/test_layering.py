"""The architecture as a test: the pure core does no I/O, and progressived never imports drivers.

Data flows one way, board -> engine -> ledger -> outbox -> signs; the engine, money,
paytable models and parameters are pure, and drivers are plugins found through entry points.
The engine's purity is checked on its TRANSITIVE imports: every ``progressived`` module an
engine module imports (with the packages that contain it) is followed, statically, so an I/O
module reached through a helper (engine.core -> paytable -> tomllib) fails with that chain.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT

PURE = [
    "progressived/engine",
    "progressived/core/money.py",
    "progressived/core/params.py",
    "progressived/core/paytable.py",
    "progressived/board/keypad.py",
    "progressived/core/wirejson.py",
]
IO_MODULES = {
    "asyncio",
    "socket",
    "sqlite3",
    "sqlite_utils",
    "serial",
    "serial_asyncio_fast",
    "aiomqtt",
    "paho",
    "subprocess",
    "time",
    "datetime",
    "random",
    "secrets",
    "os",
    "prometheus_client",
    "structlog",
    "threading",
}
# Reading files and validating them is the loaders' job, never the engine's.
ENGINE_FORBIDDEN = IO_MODULES | {"tomllib", "pathlib", "io", "pydantic", "shutil", "tempfile"}
ALLOWED_IN_PURE = {"progressived.board.keypad": {"datetime"}}  # parses the command's own timestamp


def _module_path(module: str) -> Path | None:
    """The source file of a ``progressived`` module (a package's ``__init__.py``)."""
    base = ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """Every node of ``node`` except the bodies of ``if TYPE_CHECKING:`` blocks."""
    yield node
    if isinstance(node, ast.If) and _is_type_checking(node.test):
        children: list[ast.AST] = [node.test, *node.orelse]
    else:
        children = list(ast.iter_child_nodes(node))
    for child in children:
        yield from _runtime_nodes(child)


def imports(path: Path) -> set[str]:
    """Every module ``path`` imports (absolute names; relative imports resolved).

    ``from package import name`` also yields ``package.name`` when that is a module.
    Imports under ``if TYPE_CHECKING:`` never run, so they are not followed.
    """
    tree = ast.parse(path.read_text(), str(path))
    package = _module_name(path)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    found: set[str] = set()
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{node.module}" if node.module else anchor
            elif node.module:
                base = node.module
            else:
                continue
            found.add(base)
            for alias in node.names:
                if _module_path(f"{base}.{alias.name}") is not None:
                    found.add(f"{base}.{alias.name}")
    return found


def _with_parents(module: str) -> Iterator[str]:
    """Importing ``a.b.c`` runs ``a``, ``a.b`` and ``a.b.c``."""
    parts = module.split(".")
    for end in range(1, len(parts) + 1):
        yield ".".join(parts[:end])


def import_chains(start: str) -> dict[str, tuple[str, ...]]:
    """Every module ``start`` imports, directly or not, with one chain that leads to it."""
    chains: dict[str, tuple[str, ...]] = {start: (start,)}
    queue = [start]
    while queue:
        current = queue.pop(0)
        path = _module_path(current)
        if path is None:
            continue
        for imported in sorted(imports(path)):
            for module in _with_parents(imported):
                if module in chains:
                    continue
                chains[module] = (*chains[current], module)
                if module.split(".")[0] == "progressived":
                    queue.append(module)
    return chains


def forbidden_chains(start: str, forbidden: set[str]) -> list[str]:
    """The import chains from ``start`` that reach a forbidden module, readably."""

    def short(name: str) -> str:
        return name.removeprefix("progressived.")

    return [
        " -> ".join(short(m) for m in chain)
        for module, chain in import_chains(start).items()
        if module.split(".")[0] in forbidden
    ]


def files(spec: str) -> list[Path]:
    path = ROOT / spec
    return sorted(path.rglob("*.py")) if path.is_dir() else [path]


def engine_modules() -> list[str]:
    return [_module_name(path) for path in files("progressived/engine")]


@pytest.mark.parametrize("module", engine_modules())
def test_the_engine_imports_no_io_even_indirectly(module: str) -> None:
    bad = forbidden_chains(module, ENGINE_FORBIDDEN)
    assert not bad, f"{module} reaches I/O: {'; '.join(sorted(bad))}"


@pytest.mark.parametrize(
    "module",
    [
        "progressived.core.money",
        "progressived.core.params",
        "progressived.core.paytable",
        "progressived.board.keypad",
    ],
)
def test_the_rest_of_the_pure_core_imports_no_io_even_indirectly(module: str) -> None:
    """The models the engine and the keypad interpreter use, apart from their file loaders
    (``paytable``, ``keypad_map``)."""
    allowed = ALLOWED_IN_PURE.get(module, set())
    bad = forbidden_chains(module, ENGINE_FORBIDDEN - allowed)
    assert not bad, f"{module} reaches I/O: {'; '.join(sorted(bad))}"


def test_the_transitive_check_names_the_chain_that_breaks_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checker itself: a module importing a helper that reads TOML is reported with the
    chain. (The engine is checked on the real tree above; here a scratch package proves the
    walk goes through helpers, relative imports and ``from package import module``.)"""
    pkg = tmp_path / "progressived"
    (pkg / "engine").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "engine" / "__init__.py").write_text("")
    (pkg / "engine" / "core.py").write_text(
        "from typing import TYPE_CHECKING\nfrom . import helper\n"
        "if TYPE_CHECKING:\n    import sqlite3\n"
    )
    (pkg / "engine" / "helper.py").write_text("from progressived import loader\n")
    (pkg / "loader.py").write_text("import tomllib\n")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    bad = forbidden_chains("progressived.engine.core", ENGINE_FORBIDDEN)
    assert bad == ["engine.core -> engine.helper -> loader -> tomllib"]


def test_the_pure_core_imports_no_io_clock_or_randomness() -> None:
    for spec in PURE:
        for path in files(spec):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            allowed = ALLOWED_IN_PURE.get(module, set())
            bad = {m for m in imports(path) if m.split(".")[0] in IO_MODULES - allowed}
            assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_the_engine_depends_on_nothing_outside_the_core() -> None:
    core = {
        "progressived",
        "progressived.engine",
        "progressived.core.money",
        "progressived.core.params",
        "progressived.core.paytable",
    }
    for module in engine_modules():
        for reached, chain in import_chains(module).items():
            if reached.split(".")[0] == "progressived":
                assert any(reached == c or reached.startswith(c + ".") for c in core), chain


def test_progressived_never_imports_drivers() -> None:
    for path in files("progressived"):
        bad = {m for m in imports(path) if m == "progressived_drivers" or m.startswith("progressived_drivers.")}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"
