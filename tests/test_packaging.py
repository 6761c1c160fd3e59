"""Packaging a site can audit: aiohttp only for the web sign (the ``web`` extra), and what a
command that needs it says without it.

The commands run as real processes in which aiohttp cannot be imported (``sys.modules``
holds ``None`` for it, so ``import aiohttp`` raises ModuleNotFoundError as on a machine
without it).
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import sqlite_utils
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from progressived.ledger import Ledger, reports
from tests.conftest import ROOT
from tests.helpers import table as table_params

WITHOUT_AIOHTTP = "import sys\nsys.modules['aiohttp'] = None\n"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def without_aiohttp(code: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_AIOHTTP + code, *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )


def command(program: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return without_aiohttp(
        f"from progressived.cli.{program} import main\nsys.exit(main(sys.argv[1:]))\n", *argv
    )


def test_aiohttp_is_the_web_extra_and_no_core_dependency() -> None:
    project = PYPROJECT["project"]
    assert not [d for d in project["dependencies"] if d.lower().startswith("aiohttp")]
    assert project["optional-dependencies"]["web"] == ["aiohttp>=3.9,<4"]
    # The project's own test command installs it (the web sign's tests need it).
    assert "-e '.[test,broker,postgres,web]'" in (ROOT / ".ci" / "test").read_text()
    # The README's run command installs what the demo needs, the web sign included.
    readme = (ROOT / "README.md").read_text()
    assert ".venv/bin/pip install -q -e '.[broker,web]' && .venv/bin/progressived demo" in readme


def test_only_the_web_sign_server_imports_aiohttp() -> None:
    """Every module of the package imports without aiohttp but the web sign's server."""
    found = without_aiohttp(
        "import importlib, pkgutil, progressived\n"
        "failed = []\n"
        "for info in pkgutil.walk_packages(progressived.__path__, 'progressived.'):\n"
        "    try:\n"
        "        importlib.import_module(info.name)\n"
        "    except ModuleNotFoundError as exc:\n"
        "        failed.append(f'{info.name} {exc.name}')\n"
        "print('\\n'.join(failed))\n"
    )
    assert found.returncode == 0, found.stderr
    assert found.stdout.split("\n") == ["progressived.signs.web.server aiohttp", ""]


@pytest.mark.e2e
def test_sign_web_without_the_extra_says_which_to_install_exit_8(tmp_path: Path) -> None:
    result = command("ctl", "sign", "--web", "--listen", "127.0.0.1:0", "--port", "1")
    assert result.returncode == 8, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [
        "progressivectl sign --web needs the web extra, which is not installed here (no module "
        "'aiohttp'): pip install 'progressived[web]' (a site: pip install --require-hashes "
        "-r requirements/web.txt, docs/sign.md)"
    ]
    # The terminal sign needs no extra: it gets past the import to its own usage check.
    terminal = command("ctl", "sign", "--port", "1")
    assert terminal.returncode == 2, terminal.stderr
    assert "give --table once" in terminal.stderr


@pytest.mark.e2e
def test_the_demo_without_the_web_extra_says_so_and_starts_nothing(tmp_path: Path) -> None:
    work = tmp_path / "demo"
    for argv in (("demo", "--headless"), ("demo", "--tables", "2", "--headless")):
        result = command("daemon", *argv, "--workdir", str(work))
        assert result.returncode == 8, result.stderr
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(
            "progressived demo needs the web extra, which is not installed here"
        ), result.stderr
        assert not work.exists()


# ------------------------------------------------------------ the hashed requirements files

REQUIREMENTS = ROOT / "requirements"
FILES = ("progressived.txt", "web.txt", "postgres.txt")
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+?)(?: ; (.+?))? \\$")


def pins(path: Path) -> dict[str, tuple[str, str | None, list[str]]]:
    """name -> (version, marker, sha256 hashes) of a `--generate-hashes` requirements file."""
    found: dict[str, tuple[str, str | None, list[str]]] = {}
    name = ""
    for line in path.read_text().splitlines():
        if match := PIN.match(line):
            name = canonicalize_name(match[1])
            assert name not in found, f"{path.name}: {name} twice"
            found[name] = (match[2], match[3], [])
        elif line.strip().startswith("--hash=sha256:"):
            digest = line.strip().removeprefix("--hash=sha256:").rstrip(" \\")
            assert re.fullmatch(r"[0-9a-f]{64}", digest), line
            found[name][2].append(digest)
        else:
            assert line.startswith("#") or line.strip().startswith("#") or not line.strip(), line
    return found


def test_every_dependency_is_pinned_with_hashes_and_aiohttp_only_for_the_web_sign() -> None:
    project = PYPROJECT["project"]
    files = {"progressived.txt": [], "web.txt": ["web"], "postgres.txt": ["postgres"]}
    core = pins(REQUIREMENTS / "progressived.txt")
    for name, extras in files.items():
        found = pins(REQUIREMENTS / name)
        wanted = [*project["dependencies"]]
        for extra in extras:
            wanted += project["optional-dependencies"][extra]
        for text in wanted:
            req = Requirement(text)
            dist = canonicalize_name(req.name)
            assert dist in found, f"{name} does not pin {dist}"
            version, _, _ = found[dist]
            assert req.specifier.contains(version), f"{name}: {dist}=={version} is not {req}"
        assert all(hashes for _, _, hashes in found.values()), f"{name}: a pin without a hash"
        # One virtualenv holds the core and an extra: the core's pins are the same in each.
        assert {dist: found[dist] for dist in core} == core, name
    assert "aiohttp" not in core and "aiohttp" in pins(REQUIREMENTS / "web.txt")
    assert "psycopg" not in core and "psycopg" in pins(REQUIREMENTS / "postgres.txt")


@pytest.mark.e2e  # uv resolves against the package index (network), twice
def test_the_requirements_files_are_what_requirements_compile_makes(tmp_path: Path) -> None:
    """Rerun on a copy: an unchanged pyproject.toml gives byte-identical files, so a
    dependency added, dropped or re-specified without regenerating them fails here."""
    copy = tmp_path / "checkout"
    (copy / "requirements").mkdir(parents=True)
    shutil.copy(ROOT / "pyproject.toml", copy)
    for name in ("compile", *FILES):
        shutil.copy2(REQUIREMENTS / name, copy / "requirements" / name)
    uv = Path(sys.executable).with_name("uv")
    done = subprocess.run(
        [str(copy / "requirements" / "compile")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "UV": str(uv)},
    )
    assert done.returncode == 0, done.stderr
    for name in FILES:
        assert (copy / "requirements" / name).read_text() == (REQUIREMENTS / name).read_text()
    # ... and it notices: a new dependency is pinned, with its hashes.
    project = copy / "pyproject.toml"
    project.write_text(project.read_text().replace('"tqdm>=4.66",', '"tqdm>=4.66", "tomli-w",'))
    done = subprocess.run(
        [str(copy / "requirements" / "compile")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "UV": str(uv)},
    )
    assert done.returncode == 0, done.stderr
    assert "tomli-w" in pins(copy / "requirements" / "progressived.txt")
    assert "tomli-w" not in pins(REQUIREMENTS / "progressived.txt")


# ---------------------------------------------------------------- sqlite-utils, truthfully


@pytest.mark.e2e
def test_sqlite_utils_is_used_where_the_readme_says_and_nowhere_else() -> None:
    using = sorted(
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "progressived").rglob("*.py")
        if re.search(r"^\s*import sqlite_utils\b|^\s*from sqlite_utils\b", path.read_text(), re.M)
    )
    assert using == ["progressived/ledger/reports.py", "progressived/ledger/schema.py"]
    readme = " ".join((ROOT / "README.md").read_text().split())
    for claim in (
        "it reads the journal rows `progressivectl ledger export` writes "
        "(`progressived/ledger/reports.py`)",
        "inspects a file that is not a current ledger (its tables) before the ledger decides "
        "whether it is one at all (`progressived/ledger/schema.py`)",
        "both with its plugins off",
    ):
        assert claim in readme
    # Plugins off: nothing installed beside the package hooks a connection to a ledger.
    for module in using:
        for call in re.findall(r"sqlite_utils\.Database\(([^)]*)\)", (ROOT / module).read_text()):
            assert "execute_plugins=False" in call, module


def test_ledger_export_reads_its_rows_through_sqlite_utils(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The export's rows come from sqlite-utils' query (its tracer sees the SELECT)."""
    db = tmp_path / "ledger.db"
    with Ledger.open(db, table_params(), at="2026-11-21T00:00:00Z") as ledger:
        ledger.record("note", {"n": 1}, at="2026-11-21T00:00:01Z")
    seen: list[str] = []
    original = sqlite_utils.Database.__init__

    def traced(self: sqlite_utils.Database, *args: Any, **kwargs: Any) -> None:
        original(self, *args, tracer=lambda sql, params: seen.append(sql), **kwargs)

    monkeypatch.setattr(sqlite_utils.Database, "__init__", traced)
    out = io.StringIO()
    assert reports.export(db, out, "json") >= 2
    assert '"kind": "note"' in out.getvalue()
    assert any(sql.startswith("SELECT seq, at, table_id") for sql in seen), seen
