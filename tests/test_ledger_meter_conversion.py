"""A local meter's money is never abandoned by a configuration that links or drops it.

A ledger whose local meter holds money (above or below its seed, a reserve, an overflow,
an award awaiting the supervisor, a round not yet reconciled) continued with a
configuration that makes the meter linked, or drops it, is refused before anything is
journaled: by ``Ledger.open`` (the daemon's path), by ``check-config`` and ``run`` (exit
4, one line naming the meter, the amounts and the procedure) and by ``params-reload``. A
settled meter converts, and the ``parameter_changed`` row then records the keys it lost.
Real ledger files; the commands as real processes.
"""

from __future__ import annotations

import grp
import json
import os
import re
import sqlite3
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from progressived.config.daemon import load_daemon_config
from progressived.config.paytables import find_paytable
from progressived.core.money import UNITS_PER_DOLLAR
from progressived.core.params import MeterParams, TableParams
from progressived.daemon.operator import plan_reload
from progressived.engine import (
    Command,
    Lock,
    Reconcile,
    Sensors,
    TransferMeter,
    accounts,
    decide,
    initial_state,
)
from progressived.engine.events import Posting
from progressived.engine.state import Phase
from progressived.ledger import Ledger, LedgerMismatch, parameters
from progressived.ledger.conversion import Change, ConversionRefused, held
from progressived.ledger.verify import verify
from progressived.runtime.clock import utc_now
from tests.test_cli_faults import DAEMON, one_line, run

AT = "2026-11-29T02:00:00.000000Z"
LATER = "2026-11-30T02:00:00.000000Z"
ROOT = Path(__file__).resolve().parent.parent
SEED = 1000 * UNITS_PER_DOLLAR
OPERATIONS = (ROOT / "docs" / "operations.md").read_text()


def local_params(*, reserve: str = "1/20", mini: bool = False) -> TableParams:
    """tcp-sd-1 with a contributing local meter ``main`` (15%, and a reserve), and ``mini``."""
    main = MeterParams(id="main", rate=Fraction(15, 100), reserve_rate=Fraction(reserve))
    extra = (MeterParams(id="mini", rate=Fraction(1, 100)),) if mini else ()
    return TableParams(table_id="t-1", paytable=find_paytable("tcp-sd-1"), meters=(main, *extra))


def linked(params: TableParams, meter_id: str = "main") -> TableParams:
    meters = tuple(
        MeterParams(id=m.id, link="link-a") if m.id == meter_id else m for m in params.meters
    )
    return replace(params, meters=meters)


def dropped(params: TableParams, meter_id: str) -> TableParams:
    return replace(params, meters=tuple(m for m in params.meters if m.id != meter_id))


def play(ledger: Ledger, params: TableParams, *commands: Command, at: str = AT) -> None:
    state = ledger.state
    for command in commands:
        decision = decide(params, state, replace(command, at=at))
        assert decision.accepted, getattr(decision, "reason", "")
        state = decision.state
        if decision.events:
            ledger.append(decision.events, state, at=at, actor=command.actor)


ROUND = (Sensors(present=frozenset({1, 2, 3})), Lock(), Sensors(present=frozenset()), Reconcile())


def journal(db: Path) -> list[tuple[int, str, str]]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return [(int(s), str(k), str(d)) for s, k, d in conn.execute(
            "SELECT seq, kind, data FROM journal ORDER BY seq"
        )]


def test_a_meter_holding_money_made_linked_is_refused_and_nothing_is_journaled(
    tmp_path: Path,
) -> None:
    db = tmp_path / "ledger.db"
    params = local_params()
    with Ledger.open(db, params, at=AT) as ledger:
        play(ledger, params, *ROUND)
        meter = ledger.state.balance(accounts.meter("main"))
        reserve = ledger.state.balance(accounts.reserve("main"))
    assert meter > SEED and reserve > 0  # three wagers: 15% each to the meter, 5% to the reserve
    before = journal(db)

    with pytest.raises(ConversionRefused) as refused:
        Ledger.open(db, linked(params), at=LATER, create=False)
    assert isinstance(refused.value, LedgerMismatch)  # exit status 4
    line = str(refused.value)
    assert "\n" not in line
    assert "makes meter main linked (link link-a)" in line
    assert "$1,000.45 on the meter ($0.45 above its seed $1,000.00)" in line  # 3 x 15% of $1
    assert "$0.15 reserve" in line
    assert "nothing was journaled" in line and "Turning a table into a linked one" in line
    assert journal(db) == before  # no parameter_changed, no daemon row: nothing
    Ledger.open(db, params, at=LATER, create=False).close()  # the configuration as it was opens
    assert journal(db) == before


def test_a_meter_holding_money_dropped_from_the_configuration_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    params = local_params(mini=True)
    with Ledger.open(db, params, at=AT) as ledger:
        play(ledger, params, *ROUND)
    before = journal(db)
    with pytest.raises(ConversionRefused, match="no longer has meter mini, but this ledger holds"):
        Ledger.open(db, dropped(params, "mini"), at=LATER, create=False)
    assert journal(db) == before


def test_a_settled_meter_converts_and_the_change_records_the_keys_it_lost(tmp_path: Path) -> None:
    """Money above the seed moved to a meter the table keeps (no reserve): main holds only
    its seed, so it may become linked; parameter_changed says which keys are gone."""
    db = tmp_path / "ledger.db"
    params = local_params(reserve="0", mini=True)
    with Ledger.open(db, params, at=AT) as ledger:
        play(ledger, params, *ROUND)
        above = ledger.state.balance(accounts.meter("main")) - SEED
    with pytest.raises(ConversionRefused):  # not yet settled
        Ledger.open(db, linked(params), at=LATER, create=False)
    settle = TransferMeter(
        from_meter="main",
        to_meter="mini",
        units=above,
        reason="joining link-a",
        approved_by="sup-2",
        actor="ops-7",
    )
    with Ledger.open(db, params, at=AT, create=False) as ledger:
        play(ledger, params, settle)
        assert ledger.state.balance(accounts.meter("main")) == SEED
        head = ledger.head_seq

    with Ledger.open(db, linked(params), at=LATER, create=False) as ledger:
        assert ledger.head_seq == head + 1  # the parameter change, and nothing else
    seq, kind, data = journal(db)[-1]
    assert kind == "parameter_changed"
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        recorded = parameters.last_recorded(conn)
    assert recorded is not None
    assert recorded["meters.main.link"] == "link-a"
    assert not any(k.startswith("meters.main.") and k != "meters.main.link" for k in recorded)
    changes: dict[str, Any] = json.loads(data)["changes"]
    assert changes["meters.main.link"] == {"old": None, "new": "link-a"}
    assert changes["meters.main.seed_units"] == {"old": SEED, "new": None, "removed": True}
    assert changes["meters.main.rate"] == {"old": "3/20", "new": None, "removed": True}
    Ledger.open(db, linked(params), at=LATER, create=False).close()  # recorded: nothing more
    assert journal(db)[-1][0] == seq
    assert verify(db).ok


def test_a_removed_key_is_told_from_one_set_to_null() -> None:
    """limit_units null means no limit; a removed key is marked, and folding drops it."""
    before = {"meters.main.limit_units": 5, "meters.mini.rate": "1/100"}
    after = {"meters.main.limit_units": None}
    assert parameters.changes(before, after) == {
        "meters.main.limit_units": {"old": 5, "new": None},
        "meters.mini.rate": {"old": "1/100", "new": None, "removed": True},
    }


@pytest.mark.parametrize("money", ["meter below seed", "overflow", "pending award", "open round"])
def test_every_kind_of_money_a_meter_holds_counts(money: str) -> None:
    params = local_params()
    recorded = parameters.describe(params)
    state = initial_state(params).state
    balances = dict(state.balances)
    if money == "meter below seed":
        balances[accounts.meter("main")] = SEED - 1
    elif money == "overflow":
        balances[accounts.overflow("main")] = 7
    elif money == "pending award":
        balances[accounts.pending("main")] = 7
    else:  # the rule alone (a locked round's contributions are in the balances too)
        contributed = (Posting(accounts.WAGERS, -150_000), Posting(accounts.meter("main"), 150_000))
        state = replace(state, phase=Phase.LOCKED, wager_postings=((1, contributed),))
    state = replace(state, balances=balances)
    found = held(state, recorded, linked(params))
    assert [(f.meter, f.change) for f in found] == [("main", Change.LINKED)]
    assert held(state, recorded, params) == ()  # still local: nothing is abandoned
    settled = initial_state(params).state
    assert held(settled, recorded, linked(params)) == ()  # only the house's seed: converts


def test_a_ledger_that_never_recorded_its_parameters_counts_every_funded_meter() -> None:
    params = local_params()
    state = initial_state(params).state  # $1,000.00 on main, no seed recorded to compare with
    found = held(state, None, linked(params))
    assert [f.seed_units for f in found] == [None]
    assert "no seed recorded" in found[0].describe()


def test_params_reload_refuses_it_in_the_words_a_restart_would_meet(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, linked_meter=False)
    current = load_daemon_config(cfg)
    with Ledger.open(current.ledger.path, current.params, at=AT) as ledger:
        play(ledger, current.params, *ROUND)
        state = ledger.state
    write_config(tmp_path, linked_meter=True)
    who = {"operator": "ops-7", "approver": "sup-2", "reason": "join", "uid": 0}
    answer = plan_reload(state, current, who)
    assert isinstance(answer, str)
    assert "makes meter main linked (link link-a), but this ledger holds its money" in answer


def write_config(tmp: Path, *, linked_meter: bool) -> Path:
    """The table t-1 on tcp-sd-1: ``main`` local (15%, 5% to the reserve), or linked."""
    meter = (
        'id = "main"\nlink = "link-a"\n\n[link]\nid = "link-a"\n'
        if linked_meter
        else 'id = "main"\nrate = 0.15\nreserve_rate = 0.05\n'
    )
    path = tmp / "t-1.toml"
    path.write_text(
        f"""
[table]
id = "t-1"
paytable = "tcp-sd-1"

[[progressive.meters]]
{meter}
[board]
driver = "serial"
port = "{tmp / "no-board"}"

[mqtt]
host = "127.0.0.1"
port = 1

[ledger]
path = "{tmp / "ledger.db"}"

[metrics]
enabled = false

[control]
socket = "{tmp / "control.sock"}"
group = "{grp.getgrgid(os.getgid()).gr_name}"
"""
    )
    return path


def listing(folder: Path) -> list[tuple[str, int, int]]:
    return sorted(
        (str(p.relative_to(folder)), p.lstat().st_size, p.lstat().st_mtime_ns)
        for p in folder.rglob("*")
    )


@pytest.mark.e2e
def test_check_config_and_run_refuse_it_with_4_and_one_line(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, linked_meter=False)
    made = run(*DAEMON, "init", "--config", str(cfg), "--operator", "ops-7")
    assert made.returncode == 0, made.stderr
    local = load_daemon_config(cfg).params
    now = utc_now()  # after init's row: a ledger's times never go back
    with Ledger.open(tmp_path / "ledger.db", local, at=now, create=False) as ledger:
        play(ledger, local, *ROUND, at=now)
    write_config(tmp_path, linked_meter=True)
    before = listing(tmp_path)

    checked = run(*DAEMON, "check-config", str(cfg))
    started = run(*DAEMON, "run", "--config", str(cfg))
    (documented,) = re.findall(
        r"^progressived: \S+: progressive\.meters: .*$", OPERATIONS, flags=re.MULTILINE
    )
    for result, expected in ((checked, documented.removeprefix("progressived: ")), (started, documented)):
        assert result.returncode == 4, result.stderr
        line = one_line(result)
        line = line.replace(str(cfg), "/etc/progressived/progressived.toml")
        line = line.replace(str(tmp_path / "ledger.db"), "/var/lib/progressived/ledger.db")
        assert line == expected  # the line docs/operations.md shows
    assert listing(tmp_path) == before  # nothing journaled, no file made beside the ledger
