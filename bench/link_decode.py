"""The link's decoder alone: payload bytes in, a validated message (or its refusal) out.

Why a module of its own: the link controller decodes every table message it reads, and a
table every result, heartbeat and linked meter, so the decoder is on the hot path; but
``bench.run --only link`` measures the whole controller through a broker, where a few
microseconds per message vanish in the shared machine's noise. This measures
``decode_table``/``decode_link`` in one process, nothing else: the bounded wire decoder
(progressived/core/wirejson.py) and the message models behind it, per payload shape, the
best of ``repeat`` runs of ``number`` decodes (docs/performance.md, "The link's decoder").

    .venv/bin/python -m bench.link_decode [--number 20000] [--repeat 7] [--json]
"""

from __future__ import annotations

import argparse
import json
import timeit
from collections.abc import Callable, Sequence
from typing import Any

from progressived.core.money import UNITS_PER_DOLLAR
from progressived.link.core import messages as m

HEAD = m.LedgerHead(seq=48_213, hash="9f" * 32)
AT = "2026-11-23T17:00:00.123Z"


def payloads() -> dict[str, tuple[str, bytes]]:
    """Each measured payload: its name, which side decodes it and its canonical bytes."""
    wager = 5 * UNITS_PER_DOLLAR
    envelope: dict[str, Any] = {"table": "t-07", "seq": 9_120, "head": HEAD, "at": AT}
    contribution = m.Contribution(
        **envelope, id="t-07:9120", round=1_304,
        wagers=(m.MeterWagers(meter="pmg", count=7, units=7 * wager // 20),),
    )  # fmt: skip
    claim = m.Claim(
        **envelope, id="t-07:9121", claim="1304:3:royal-flush", round=1_304, seat=3,
        hand="royal-flush", meter="pmg",
    )  # fmt: skip
    award = m.Award(
        claim="1304:3:royal-flush", meter="pmg", hand="royal-flush",
        units=12_345 * UNITS_PER_DOLLAR, order=90_211, share_of=1, state="pending",
    )  # fmt: skip
    result = m.Result(
        link="link-a", table="t-07", seq=9_121, id="t-07:9121", status="applied", code="ok",
        reason="", resend_from=0, lseq=90_211, head=HEAD, awards=(award,),
    )  # fmt: skip
    meter = m.LinkedMeter(
        link="link-a", meter="pmg", units=1_000 * UNITS_PER_DOLLAR, epoch=412, lseq=90_212,
        head=HEAD,
        hit=m.Hit(table="t-07", seat=3, hand="royal-flush", units=12_345 * UNITS_PER_DOLLAR),
    )  # fmt: skip
    good = {
        "contribution": ("table", m.encode(contribution)),
        "claim": ("table", m.encode(claim)),
        "result": ("link", m.encode(result)),
        "meter": ("link", m.encode(meter)),
    }
    seat = m.encode(claim).replace(b'"seat":3', b'"seat":13')  # refused: out-of-range
    unknown = m.encode(contribution).replace(b'"round"', b'"rounds"')  # refused: bad-field
    return {
        **good,
        "claim, seat 13 (refused)": ("table", seat),
        "contribution, unknown key (refused)": ("table", unknown),
    }


def _decoder(side: str, raw: bytes) -> Callable[[], object]:
    decode = m.decode_table if side == "table" else m.decode_link

    def once() -> object:
        try:
            return decode(raw)
        except m.MessageError as exc:
            return exc.code

    return once


def measure(number: int = 20_000, repeat: int = 7) -> dict[str, dict[str, float]]:
    """Microseconds per decode (best run) and decodes per second, per payload."""
    out: dict[str, dict[str, float]] = {}
    for name, (side, raw) in payloads().items():
        once = _decoder(side, raw)
        best = min(timeit.repeat(once, number=number, repeat=repeat)) / number
        out[name] = {
            "bytes": len(raw),
            "us": round(best * 1e6, 2),
            "per_s": round(1 / best),
        }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.link_decode", description=__doc__)
    parser.add_argument("--number", type=int, default=20_000, help="decodes per run")
    parser.add_argument("--repeat", type=int, default=7, help="runs (the best is reported)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    figures = measure(args.number, args.repeat)
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(f"{'payload':<38} {'bytes':>6} {'us':>7} {'decodes/s':>10}")
    for name, row in figures.items():
        print(f"{name:<38} {row['bytes']:>6.0f} {row['us']:>7.2f} {row['per_s']:>10,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
