"""Scripted rounds through ``progressivectl simulate``: the engine's scriptable front door."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from progressived.cli.ctl import main

JACKPOT_SCRIPT = """\
# a 100% jackpot with supervisor confirmation, envy, and a tray pay
bet 1
bet 3
bet 5
lock
key 5 straight
key 3 akq-spades
confirm
reconcile
# round 2: a keying mistake, corrected, and a misdeal
bet 2
lock
key 2 akq-suited
key 2 akq-suited
void
bogus line
key 9 straight
"""


def simulate(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str, script: str) -> dict[str, Any]:
    path = tmp_path / "script.txt"
    path.write_text(script)
    code = main(["simulate", "--script", str(path), "--json", *args])
    out = capsys.readouterr().out
    assert code == 0
    found: dict[str, Any] = json.loads(out)
    return found


def test_json_report_has_the_contracted_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = simulate(
        tmp_path,
        capsys,
        "--paytable",
        "tcp-sd-1",
        "--meter-rate",
        "0.15",
        "--reserve-rate",
        "0.05",
        script=JACKPOT_SCRIPT,
    )
    first, second = report["rounds"]
    assert first["round"] == 1 and first["state"] == "reconciled"
    assert first["pays"] == [
        {"seat": 5, "hand": "straight", "source": "tray", "cents": 600},
        {"seat": 3, "hand": "akq-spades", "source": "meter", "cents": 100_045},
        {"seat": 5, "hand": "akq-spades", "source": "envy", "cents": 10_000, "from_seat": 3},
        {"seat": 1, "hand": "akq-spades", "source": "envy", "cents": 10_000, "from_seat": 3},
    ]
    assert second == {"round": 2, "state": "voided", "pays": []}
    # After the reset ($1,000 + reserve $0.15) round 2's contribution was voided.
    assert report["meters"]["main"]["cents"] == 100_015
    assert report["meters"]["main"]["reserve_cents"] == 0
    assert [r["line"] for r in report["rejected"]] == [16, 17]
    assert "unknown command 'bogus'" in report["rejected"][0]["reason"]
    assert report["totals"]["identity_gap_units"] == 0


def test_overrides_and_split_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = simulate(
        tmp_path,
        capsys,
        "--paytable",
        "pmg-01",
        "--meter-start",
        "$3,000.03",
        "--seed",
        "2000",
        "--policy",
        "split",
        "--wager",
        "2",
        script="bet 1\nbet 4\nlock\nkey 1 straight-flush\nkey 4 straight-flush\nconfirm\nconfirm\nreconcile\n",
    )
    meter_pays = [p for p in report["rounds"][0]["pays"] if p["source"] == "meter"]
    # 10% of $3,000.03 = $300.00 (truncated); two share it; the odd cent goes to the first.
    assert [(p["seat"], p["cents"]) for p in meter_pays] == [(4, 15_000), (1, 15_000)]
    envy = [p for p in report["rounds"][0]["pays"] if p["source"] == "envy"]
    assert {p["cents"] for p in envy} == {60_000}  # $300 envy scaled to a $2 wager
    assert report["wager_cents"] == 200


def test_split_gives_the_indivisible_cent_to_the_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = simulate(
        tmp_path,
        capsys,
        "--paytable",
        "pmg-01",
        "--meter-start",
        "3000.10",
        "--policy",
        "split",
        script="bet 1\nbet 4\nlock\nkey 1 straight-flush\nkey 4 straight-flush\nconfirm\nconfirm\nreconcile\n",
    )
    meter_pays = [p for p in report["rounds"][0]["pays"] if p["source"] == "meter"]
    assert [(p["seat"], p["cents"]) for p in meter_pays] == [(4, 15_001), (1, 15_000)]


def test_text_output_is_a_readable_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.txt"
    path.write_text(JACKPOT_SCRIPT)
    assert main(["simulate", "--paytable", "tcp-sd-1", "--script", str(path)]) == 0
    out = capsys.readouterr().out
    assert "round 1: reconciled" in out
    assert "akq-spades" in out and "$1,000.00" in out
    assert "rejected line 16" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--paytable", "nope"], "unknown paytable 'nope'"),
        (["--paytable", "tcp-sd-1", "--meter-rate", "2"], "between 0 and 1"),
        (["--paytable", "tcp-sd-1", "--seed", "ten"], "not an amount"),
        (["--paytable", "tcp-sd-1", "--meter-rate", "0.7", "--reserve-rate", "0.4"], "above 1"),
        (["--paytable", "tcp-sd-1", "--wager", "1.005"], "--wager: $1.005000 is finer than a cent"),
        (["--paytable", "tcp-sd-1", "--wager", "0.001"], "finer than a cent"),
        (["--paytable", "pmg-02", "--seed", "1000"], "--seed: $1,000.00 differs from $5,000.00"),
        (["--paytable", "pmg-01", "--wager", "2", "--seed", "1000"], "differs from $2,000.00"),
    ],
)
def test_bad_arguments_exit_2_with_a_clear_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    path = tmp_path / "s.txt"
    path.write_text("lock\n")
    assert main(["simulate", "--script", str(path), *args]) == 2
    assert message in capsys.readouterr().err


def test_config_file_drives_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "p.toml"
    config.write_text(
        '[table]\nid = "tcp-07"\nseats = 6\npaytable = "tcp-pa-5"\n'
        '[progressive]\npolicy = "sequential"\n'
        '[[progressive.meters]]\nid = "main"\nseed = 2000.00\nrate = 0.1\nreserve_rate = "2%"\n'
    )
    report = simulate(
        tmp_path, capsys, "--paytable", "tcp-pa-5", "--config", str(config), script="bet 6\nlock\n"
    )
    assert report["meters"]["main"]["cents"] == 200_050
    assert report["meters"]["main"]["reserve_cents"] == 10


def test_console_script_runs_from_stdin() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "progressived.cli.ctl",
            "simulate",
            "--paytable",
            "tcp-sd-2",
            "--script",
            "-",
            "--json",
        ],
        input="bet 1\nlock\nkey 1 three-of-a-kind\nreconcile\n",
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    report = json.loads(proc.stdout)
    assert report["rounds"][0]["pays"] == [
        {"seat": 1, "hand": "three-of-a-kind", "source": "tray", "cents": 9000}
    ]


def test_unbet_of_a_seat_the_table_does_not_have_is_refused_like_bet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = simulate(
        tmp_path,
        capsys,
        "--paytable",
        "tcp-sd-1",
        script="bet 3\nunbet 9\nbet 9\nunbet 0\nunbet 3\nlock\n",
    )
    assert [(r["line"], r["reason"]) for r in report["rejected"]] == [
        (2, "seat 9 is not on this table (seats 1-7)"),
        (3, "seat 9 is not on this table (seats 1-7)"),
        (4, "seat 0 is not on this table (seats 1-7)"),
    ]
    assert report["totals"]["wagers_cents"] == 0  # unbet 3 still took seat 3's wager away
