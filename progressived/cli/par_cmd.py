"""``progressivectl par``: the exact PAR sheet of one paytable, on demand."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from progressived.config.paytables import PaytableError, find_paytable
from progressived.core.money import MoneyError, dollars, rate
from progressived.core.params import DEFAULT_SEED
from progressived.par.sheet import ParError, ParInputs, build_sheet, render_text, to_json


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "par",
        help="exact PAR sheet of a paytable: probabilities, return, break-even, envy, hold",
        description="Exact hand probabilities (counted from the deck), return per unit wagered "
        "at a meter, the break-even meter, envy per round and, with contribution rates, the "
        "long-run hold and the average meter at a hit. See docs/par.md.",
    )
    p.add_argument("paytable", metavar="PAYTABLE", help="paytable id, e.g. tcp-sd-1")
    p.add_argument("--paytables", type=Path, metavar="DIR", help="directory of paytable files")
    p.add_argument("--meter", metavar="AMOUNT", help="meter amount (default: the seed)")
    p.add_argument(
        "--envy-players", type=int, default=0, metavar="N", help="other bettors at the table"
    )
    p.add_argument(
        "--non-bettors",
        type=int,
        default=0,
        metavar="K",
        help="other players without the side bet (their hands pay envy only on paytables "
        "where the trigger need not wager)",
    )
    p.add_argument("--meter-rate", metavar="R", help="share of each wager to the meter")
    p.add_argument("--reserve-rate", metavar="R", help="share of each wager to the reserve")
    p.add_argument("--seed", metavar="AMOUNT", help="seed/reset amount (default $1,000)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=run)


def _inputs(args: argparse.Namespace) -> ParInputs:
    return ParInputs(
        meter=None if args.meter is None else dollars(args.meter),
        envy_players=args.envy_players,
        non_bettors=args.non_bettors,
        meter_rate=None if args.meter_rate is None else rate(args.meter_rate),
        reserve_rate=None if args.reserve_rate is None else rate(args.reserve_rate),
        seed=DEFAULT_SEED if args.seed is None else dollars(args.seed),
    )


def run(args: argparse.Namespace) -> int:
    try:
        paytable = find_paytable(args.paytable, args.paytables)
        sheet = build_sheet(paytable, _inputs(args))
    except (PaytableError, MoneyError, ParError) as exc:
        print(f"progressivectl par: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(to_json(sheet), indent=2))
    else:
        print(render_text(sheet))
    return 0
