"""The architecture as a test: the pure core does no I/O, and progressived never imports drivers.

Data flows one way, board -> engine -> ledger -> outbox -> signs; the engine, money,
paytables and parameters are pure, and drivers are plugins found through entry points.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

PURE = [
    "progressived/engine",
    "progressived/money.py",
    "progressived/params.py",
    "progressived/paytable.py",
    "progressived/keypad.py",
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
ALLOWED_IN_PURE = {"progressived.keypad": {"datetime"}}  # parses the command's own timestamp


def imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def files(spec: str) -> list[Path]:
    path = ROOT / spec
    return sorted(path.rglob("*.py")) if path.is_dir() else [path]


def test_the_pure_core_imports_no_io_clock_or_randomness() -> None:
    for spec in PURE:
        for path in files(spec):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            allowed = ALLOWED_IN_PURE.get(module, set())
            bad = {m for m in imports(path) if m.split(".")[0] in IO_MODULES - allowed}
            assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_the_engine_depends_on_nothing_outside_the_core() -> None:
    core = {
        "progressived.engine",
        "progressived.money",
        "progressived.params",
        "progressived.paytable",
    }
    for path in files("progressived/engine"):
        for module in imports(path):
            if module.startswith("progressived"):
                assert any(module == c or module.startswith(c + ".") for c in core), (path, module)


def test_progressived_never_imports_drivers() -> None:
    for path in files("progressived"):
        bad = {m for m in imports(path) if m == "drivers" or m.startswith("drivers.")}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"
