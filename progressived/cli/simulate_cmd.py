"""``progressivectl simulate``: scripted rounds through the engine."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from progressived import __version__
from progressived.cli.common import progress
from progressived.config.paytables import PaytableError, find_paytable
from progressived.config.slips import SlipsSection, slip_rules
from progressived.config.table import ConfigError, load_table_params, with_overrides
from progressived.core.money import MoneyError, dollars
from progressived.core.params import (
    MeterParams,
    ParamsError,
    Policy,
    TableParams,
    sub_cent,
    validate,
)
from progressived.engine.simulate import (
    SCRIPT_HELP,
    ScriptError,
    Simulation,
    read_script,
    render_text,
)
from progressived.ledger import Ledger, LedgerError, LedgerMismatch
from progressived.ledger.identity import ledger_identity
from progressived.ledger.sink import LedgerSink
from progressived.ledger.slips import SlipIssuer

PROGRESS_EVERY = 500  # script lines between two progress updates


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "simulate",
        help="play scripted rounds through the round engine",
        description="Play a script of table commands through the round engine.\n\nScript lines:\n"
        + SCRIPT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--paytable", required=True, metavar="ID", help="paytable id, e.g. tcp-sd-1")
    p.add_argument("--paytables", type=Path, metavar="DIR", help="directory of paytable files")
    p.add_argument("--config", type=Path, metavar="FILE", help="controller configuration (TOML)")
    p.add_argument("--table", default="sim", metavar="ID", help="table id (without --config)")
    p.add_argument("--seats", type=int, default=7, help="seats at the table (without --config)")
    p.add_argument("--wager", metavar="AMOUNT", help="progressive wager, e.g. 1.00")
    p.add_argument("--seed", metavar="AMOUNT", help="seed/reset amount (default $1,000)")
    p.add_argument("--meter-start", metavar="AMOUNT", help="meter amount at the start")
    p.add_argument("--meter-rate", metavar="R", help="share of each wager to the meter, e.g. 0.15")
    p.add_argument("--reserve-rate", metavar="R", help="share of each wager to the reserve")
    p.add_argument("--policy", choices=[x.value for x in Policy], help="several meter awards")
    p.add_argument(
        "--script", required=True, type=Path, metavar="FILE", help="script ('-' = stdin)"
    )
    p.add_argument("--ledger", type=Path, metavar="PATH", help="record the rounds in this ledger")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=run)


def _params(args: argparse.Namespace) -> TableParams:
    if args.config is not None:
        params = load_table_params(args.config)
        if params.paytable.id != args.paytable:
            params = TableParams(
                table_id=params.table_id,
                paytable=find_paytable(args.paytable, args.paytables),
                meters=params.meters,
                seats=params.seats,
                wager=params.wager,
                policy=params.policy,
                award_order=params.award_order,
            )
    else:
        params = TableParams(
            table_id=args.table,
            paytable=find_paytable(args.paytable, args.paytables),
            meters=(MeterParams(),),
            seats=args.seats,
        )
    validate(params)
    amount = {
        name: (dollars(value) if value is not None else None)
        for name, value in (("wager", args.wager), ("seed", args.seed), ("start", args.meter_start))
    }
    if amount["wager"] is not None and (problem := sub_cent(amount["wager"])):
        raise ConfigError(f"--wager: {problem}")
    return with_overrides(
        params,
        wager=amount["wager"],
        seed=amount["seed"],
        meter_start=amount["start"],
        meter_rate=args.meter_rate,
        reserve_rate=args.reserve_rate,
        policy=Policy(args.policy) if args.policy else None,
    )


def _check_identity(path: Path, params: TableParams) -> None:
    """Refuse to mix a simulation into a ledger written for another table or paytable."""
    if not path.exists():
        return  # simulate starts a new ledger of its own
    table, paytable = ledger_identity(path)
    if table != params.table_id:
        raise LedgerMismatch(
            f"ledger {path} was written for table {table!r}, not {params.table_id!r} "
            "(--table or the configuration's [table] id): refusing to use it"
        )
    if paytable and paytable != params.paytable.id:
        raise LedgerMismatch(
            f"ledger {path} was written for paytable {paytable!r}, not "
            f"{params.paytable.id!r}: refusing to use it"
        )


def _play(sim: Simulation, lines: list[str], each: Callable[[int], None]) -> None:
    """Every line through the simulation (one script, so line numbers count from the
    first), calling ``each(number)`` after each line, with a progress bar on a terminal."""

    def feed(show: Callable[[int, int], None]) -> Iterator[str]:
        for number, line in enumerate(lines, start=1):
            yield line
            each(number)  # the simulation asks for the next line only after this one
            if number % PROGRESS_EVERY == 0:
                show(number, len(lines))

    with progress("simulate", " lines") as show:
        sim.run_script(feed(show))


def _run_with_ledger(path: Path, params: TableParams, text: str, script: str) -> dict[str, Any]:
    """Run the script against the ledger's state, journaling as the daemon would.

    The ledger's recovered state is the starting point (a second run continues the
    first), and a refused line is journaled as ``command_rejected``.
    """
    _check_identity(path, params)
    with Ledger.open(path, params, at=utc_now(), software=f"progressivectl {__version__}") as led:
        start = {"source": "simulate", "script": script}
        led.record("start", start, at=utc_now(), actor="simulate")
        sim = Simulation(params, clock=utc_now)
        sim.restore(led.state)
        sim.sink = LedgerSink(led, utc_now)
        # Payout slips with the awards, as the daemon journals them (default [slips] rules).
        led.issue_slips(SlipIssuer(slip_rules(SlipsSection(), params.table_id), lambda: params))
        done = len(sim.rejected)

        def journal_rejections(number: int) -> None:
            nonlocal done
            for rejection in sim.rejected[done:]:
                rejection["line"] = number
                led.record(
                    "command_rejected",
                    {"line": number, "text": rejection["text"], "reason": rejection["reason"]},
                    at=utc_now(),
                    actor="simulate",
                    round=sim.state.round,
                )
            done = len(sim.rejected)

        _play(sim, text.splitlines(), journal_rejections)
        led.record("stop", {"source": "simulate"}, at=utc_now(), actor="simulate")
        return sim.report()


def run(args: argparse.Namespace) -> int:
    try:
        params = _params(args)
        if str(args.script) == "-":
            text = read_script(sys.stdin.buffer)
        else:
            with args.script.open("rb") as stream:
                text = read_script(stream)
    except (ConfigError, PaytableError, ParamsError, MoneyError, ScriptError) as exc:
        print(f"progressivectl simulate: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"progressivectl simulate: {args.script}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    if args.ledger is not None:
        try:
            report = _run_with_ledger(args.ledger, params, text, str(args.script))
        except LedgerError as exc:
            print(f"progressivectl simulate: {exc}", file=sys.stderr)
            return 2
    else:
        sim = Simulation(params, clock=utc_now)
        _play(sim, text.splitlines(), lambda _number: None)
        report = sim.report()
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(render_text(report))
    return 0
