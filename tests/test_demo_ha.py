"""``progressived demo --tables 3 --ha --headless`` (docs/ha.md, "The whole link on one
machine"): the whole HA link with real table daemons; mid-play the primary database, the
active link controller and the tables' broker are SIGKILLed, the linked meter keeps going
after each, and the reconciliation finds no difference. Without the Debian packages it says
which to install and exits 8."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from progressived.testing.ha import rig_available

DEMO = [sys.executable, "-m", "progressived.cli.daemon", "demo"]


@pytest.mark.e2e
@pytest.mark.timeout(600)
@pytest.mark.skipif(not rig_available(), reason="needs postgresql-15, patroni, etcd-server")
def test_the_ha_demo_survives_its_faults_and_reconciles_with_no_difference(
    tmp_path: Path,
) -> None:
    proc = subprocess.run(
        [*DEMO, "--tables", "3", "--ha", "--headless", "--workdir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    out = proc.stdout
    assert proc.returncode == 0, out[-6000:] + proc.stderr[-4000:]
    acts = [
        "database primary db",
        "link controller ctl-a SIGKILLed; ctl-b took the lease",
        "SIGKILLed; the tables move to",
    ]
    at = [out.index(act) for act in acts]
    assert at == sorted(at)
    kept_going = out.count("   the meter keeps going: $")
    assert kept_going == 3, out
    for line in out.splitlines():
        if "the meter keeps going" in line:
            seconds = float(line.rsplit(", ", 1)[1].split(" s ")[0])
            assert 0 < seconds < 120, line
    report = json.loads(out[out.index("{\n") : out.rindex("}") + 1])
    assert report["differences"] == [] and report["in_flight"] == []
    assert set(report["tables"]) == {"pmg-01", "pmg-02", "pmg-03"}
    for table in report["tables"].values():  # every round's contribution applied at the link
        assert table["messages"] == table["results"] == table["applied_at_link"] >= 5
    assert out.rstrip().endswith("no differences")


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
