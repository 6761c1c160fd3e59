"""The architecture's contracts (pyproject.toml, ``[tool.importlinter]``) hold and bite.

``lint-imports`` checks the layers (a module imports only from layers below its own,
siblings marked independent never import each other, indirect chains included, so a
package cycle breaks them), the pure folders (no I/O, clock or randomness, even through a
helper), that no import cycle exists (type-only imports included), the ledger's pure plan,
the operator desk's one way into the daemon (its port) and that ``progressived`` never
imports a driver. .ci/test runs it on the tree; these
tests run it on a copy with one import added, to show that each kind of break is caught and
named with its chain.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

LINT = Path(sys.executable).with_name("lint-imports")


def _lint(root: Path, *contracts: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{root / 'drivers'}"}
    args = [str(LINT), "--no-cache", *(a for c in contracts for a in ("--contract", c))]
    return subprocess.run(
        args, cwd=root, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "progressived", root / "progressived", ignore=ignore)
    shutil.copytree(ROOT / "drivers", root / "drivers", ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


def _append(path: Path, line: str) -> None:
    path.write_text(path.read_text() + f"\n{line}\n")


def test_the_tree_keeps_every_contract() -> None:
    done = _lint(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_a_lower_layer_importing_a_higher_one_is_named_with_its_chain(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    _append(root / "progressived" / "ledger" / "chain.py", "import progressived.link.store.audit")
    done = _lint(root, "layers")
    assert done.returncode == 1, done.stdout
    assert "progressived.ledger is not allowed to import progressived.link.store" in done.stdout
    assert "progressived.ledger.chain -> progressived.link.store.audit" in done.stdout


def test_io_reached_through_a_helper_breaks_the_pure_folders(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    _append(root / "progressived" / "core" / "money.py", "import time")
    done = _lint(root, "pure")
    assert done.returncode == 1, done.stdout
    # the engine reaches it through money: the chain is named
    assert "is not allowed to import time" in done.stdout
    assert "progressived.core.money -> time" in done.stdout


def test_independent_siblings_may_not_import_each_other(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    _append(root / "progressived" / "signs" / "screen.py", "import progressived.daemon.health")
    done = _lint(root, "layers")
    assert done.returncode == 1, done.stdout
    assert "progressived.signs is not allowed to import progressived.daemon" in done.stdout


def test_a_module_cycle_through_a_type_only_import_is_refused(tmp_path: Path) -> None:
    """The cycle the link controller had: hidden under TYPE_CHECKING, inside one folder."""
    root = _copy(tmp_path)
    views = root / "progressived" / "link" / "runtime" / "views.py"
    _append(views, "if TYPE_CHECKING:\n    from progressived.link.runtime.controller import X")
    text = views.read_text().replace("from typing import ", "from typing import TYPE_CHECKING, ", 1)
    views.write_text(text)
    assert _lint(root, "layers").returncode == 0  # one folder: layers cannot see it
    done = _lint(root, "acyclic")
    assert done.returncode == 1, done.stdout
    assert "No cycles are allowed in progressived.link.runtime" in done.stdout


def test_progressived_importing_a_driver_is_refused(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    _append(root / "progressived" / "daemon" / "health.py", "import progressived_drivers.base")
    done = _lint(root, "drivers-outside")
    assert done.returncode == 1, done.stdout


def test_the_plan_doing_io_or_the_desk_reaching_past_its_port_is_refused(tmp_path: Path) -> None:
    """The ledger's plan stays pure (``ledger-plan``) and the operator desk talks to the
    daemon through its port alone (``desk-port``): one run, both contracts broken."""
    root = _copy(tmp_path)
    _append(root / "progressived" / "ledger" / "plan.py", "import os")
    _append(root / "progressived" / "daemon" / "operator.py", "import progressived.daemon.journal")
    done = _lint(root, "ledger-plan", "desk-port")
    assert done.returncode == 1, done.stdout
    said = " ".join(done.stdout.split())  # lint-imports wraps its lines at the terminal's width
    assert "progressived.ledger.plan is not allowed to import os" in said
    assert "progressived.daemon.operator is not allowed to import progressived.daemon.journal" in said
    assert "2 broken" in said


def test_the_folders_table_of_architecture_md_is_the_layers_contract() -> None:
    """docs/architecture.md's folder table says which layer each folder is in; it must be
    the order the ``layers`` contract enforces, and every package folder must be in it."""
    import re
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if c["id"] == "layers")
    enforced: dict[str, int] = {}
    for depth, layer in enumerate(reversed(contract["layers"]), start=1):
        for module in layer.split("|"):
            enforced[module.strip().replace(".", "/") + "/"] = depth
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text[text.index("## The folders") : text.index("## The data flow")]
    documented = {
        folder: int(layer)
        for layer, folder in re.findall(r"^\| (\d+) \| `([^`]+)` \|", section, flags=re.M)
    }
    assert documented == enforced
    packages = {
        f"progressived/{p.name}/"
        for p in (ROOT / "progressived").iterdir()
        if (p / "__init__.py").exists() and p.name not in ("link", "archive")
    } | {
        f"progressived/{parent}/{p.name}/"
        for parent in ("link", "archive")
        for p in (ROOT / "progressived" / parent).iterdir()
        if (p / "__init__.py").exists()
    }
    assert packages <= set(documented), sorted(packages - set(documented))
