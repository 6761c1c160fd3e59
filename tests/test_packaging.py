"""Packaging a site can audit: aiohttp only for the web sign (the ``web`` extra), and what a
command that needs it says without it.

The commands run as real processes in which aiohttp cannot be imported (``sys.modules``
holds ``None`` for it, so ``import aiohttp`` raises ModuleNotFoundError as on a machine
without it).
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from tests.conftest import ROOT

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
