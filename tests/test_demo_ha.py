"""``progressived demo --tables 3 --ha --headless`` (docs/ha.md, "The whole link on one
machine"): the whole HA link with real table daemons; mid-play the primary database, the
active link controller and the tables' broker are SIGKILLed, the linked meter keeps going
after each, and the reconciliation finds no difference. Without the Debian packages it says
which to install and exits 8. (The full run is in the reliability suite:
tests/reliability/test_demo_ha.py.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

DEMO = [sys.executable, "-m", "progressived.cli.daemon", "demo"]


def test_the_ha_demo_without_its_packages_says_which_and_exits_8(tmp_path: Path) -> None:
    bare = tmp_path / "bin"
    bare.mkdir()
    env = {**os.environ, "PATH": str(bare)}
    proc = subprocess.run(
        [*DEMO, "--tables", "3", "--ha", "--headless"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert proc.returncode == 8, proc.stdout + proc.stderr
    line = proc.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line
    assert "sudo apt-get install" in line
    for package in ("patroni", "etcd-server", "mosquitto"):
        assert package in line
