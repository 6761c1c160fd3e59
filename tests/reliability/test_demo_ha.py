"""``progressived demo --tables 3 --ha --headless`` (docs/ha.md, "The whole link on one
machine"): the whole HA link with real table daemons; mid-play the primary database, the
active link controller and the tables' broker are SIGKILLed, the linked meter keeps going
after each, and the reconciliation finds no difference. A few minutes of a whole cluster:
the reliability suite's (the default suite checks the demo without its packages)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from progressived.testing.ha import rig_available
from tests.test_demo_ha import DEMO

pytestmark = pytest.mark.reliability


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


