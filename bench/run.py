"""The benchmark harness: ``.venv/bin/python -m bench.run [--quick] [--out FILE]``.

Measures, on this machine, in one run (see docs/performance.md for definitions/targets):

* floor       — a bare SQLite WAL + synchronous=FULL commit plus a bare MQTT QoS 1 round
                trip (publish -> a second client receives), per sample;
* latency     — key-to-sign: a key-press frame written to the board pty -> the award / event
                message received by an independent MQTT subscriber (the daemon journals and
                fsyncs before its outbox publishes); p50/p99/max, and the ratio to the floor;
                and key-to-meter: LOCK -> the meter message (the topic signs read), with
                LOCK pressed 20 ms, 0.35 s and 1.2 s after the last bet change;
* throughput  — durable linked contributions per second (``LinkedWagers`` decided by the
                engine, journaled with ``Ledger.append_many``) against a bare sqlite3 insert
                of the same rows into the same schema under the same pragmas; the ledger's
                own cost is the time inside ``append_many`` (``append_ratio``);
* memory      — RSS of the engine+ledger loop after start and every 10,000 rounds up to
                100,000 rounds (a child process); also the daemon's RSS around the latency run;
* startup     — daemon start -> READY on a ledger of >= 1,000,000 events (the memory loop's
                ledger), and ``progressivectl ledger verify`` on it against its floor (one
                pass reading every journal row and hashing it; bench/verify.py);
* idle        — the daemon's CPU time over a 60 s idle window (board heartbeats only);
* websign     — the web sign (bench/websign_pixels.py): MQTT message -> the painted frame
                in headless Chromium (p99, motion reduced); and the sign server's RSS with
                50 pages (bench/websign.py);
* link        — the link controller (bench/link.py): contributions from 50 simulated tables
                through the broker, durable and acknowledged (wagers/s over a minute); claim
                -> every sign showing the hit (p99); the controller's RSS; and its ledger's
                group commit against bare SQLite inserting the same rows (bench/link_ledger.py),
                and in PostgreSQL against a bare psycopg insert of the same rows;
* link-ha     — the HA link (bench/link_ha.py: 3 etcd, 3 Patroni/PostgreSQL synchronous and
                strict, two brokers, two controllers): wagers/s from 50 tables, the ledger's
                write against a bare psycopg insert, claim -> a sign on each broker, each
                controller's RSS. Only where Patroni and etcd are installed; minutes.

``--quick`` uses tiny counts (a smoke run, well under a minute); the figures are then not
comparable with the targets. ``--only a,b`` runs some sections. ``--compare
bench/results/LAST.json`` then names every figure more than 15% worse than that run's and
exits 1 (bench/compare.py; docs/performance.md says when to run it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.compare import load as load_result
from bench.compare import report as compare_report
from bench.floor import bench_floor
from bench.latency import bench_latency
from bench.measure import ROOT, machine
from bench.memory import bench_memory
from bench.report import print_table, verdicts
from bench.startup import bench_startup_idle
from bench.throughput import bench_throughput
from progressived.testing.broker import Mosquitto

# This module is the runner (sections, counts, the command line); each section is measured by
# its own module (bench/floor.py, latency.py, throughput.py, memory.py, startup.py), summarised
# with bench/measure.py and judged against its target by bench/report.py.
SECTIONS = (
    "floor", "latency", "throughput", "memory", "startup", "idle", "link", "link-ha", "websign"
)


@dataclass(frozen=True)
class Counts:
    floor: int = 1000
    presses: int = 1000
    wagers: int = 100_000
    group: int = 1000
    rounds: int = 100_000
    every: int = 10_000
    events: int = 1_000_000
    idle_s: float = 60.0
    link_tables: int = 50
    link_seconds: float = 60.0
    link_claims: int = 200
    ha_tables: int = 50
    ha_seconds: float = 20.0
    ha_claims: int = 20
    sign_updates: int = 200
    sign_pages: int = 50


QUICK = Counts(
    floor=50, presses=36, wagers=5000, group=500, rounds=300, every=100, events=5000, idle_s=2.0,
    link_tables=5, link_seconds=3.0, link_claims=10, ha_tables=5, ha_seconds=3.0, ha_claims=3,
    sign_updates=20, sign_pages=3,
)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    counts = QUICK if args.quick else Counts()
    only = set(args.only.split(",")) if args.only else set(SECTIONS)
    unknown = only - set(SECTIONS)
    if unknown:
        raise SystemExit(f"unknown sections: {sorted(unknown)} (choose from {SECTIONS})")
    result: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "mode": "quick" if args.quick else "full",
        "counts": counts.__dict__,
        "machine": machine(),
    }
    with tempfile.TemporaryDirectory(prefix="bench-", dir=args.workdir) as work:
        tmp = Path(work)

        def section(name: str) -> Path:
            print(f"== {name}", flush=True)
            path = tmp / name
            path.mkdir()
            return path

        if "floor" in only:
            result["floor"] = await bench_floor(section("floor"), counts.floor)
        if "latency" in only:
            result["latency"] = await bench_latency(
                section("latency"), counts.presses, args.profile
            )
        if "throughput" in only:
            result["throughput"] = bench_throughput(
                section("throughput"), counts.wagers, counts.group
            )
        big: Path | None = None
        if "memory" in only or "startup" in only:
            d = section("memory")
            big = d / "big.db"
            # A config for the memory loop naming the ledger the daemon will open later.
            cfg = d / "memloop.toml"
            with Mosquitto() as broker:  # only to fill the config's [mqtt]; not used
                from bench.table import write_config

                write_config(d, broker, d / "board", big)
            (d / "progressived.toml").rename(cfg)
            result["memory"] = bench_memory(
                d, cfg, counts.rounds if "memory" in only else 0, counts.every, counts.events
            )
            if "memory" not in only:
                result.pop("memory")
        if "startup" in only or "idle" in only:
            result["startup"] = await bench_startup_idle(
                section("startup"), big, counts.idle_s, "startup" in only, "idle" in only,
                repeat=1 if args.quick else 3,
            )
        if "link" in only:
            from bench.link import bench_link
            from bench.link_ledger import bench_link_ledger

            result["link"] = await bench_link(
                section("link"), tables=counts.link_tables, seconds=counts.link_seconds,
                claims=counts.link_claims, floor=result.get("floor"),
            )
            result["link"]["ledger"] = bench_link_ledger(
                section("link-ledger"), messages=counts.wagers // 10, group=counts.group // 10
            )
            from progressived.testing.postgres import available

            if available():  # the link ledger in PostgreSQL (bench/link_ledger.py)
                from bench.link_ledger import bench_link_ledger_postgres

                result["link"]["ledger_postgres"] = bench_link_ledger_postgres(
                    messages=counts.wagers // 10, group=counts.group // 10
                )
        if "link-ha" in only:
            from progressived.testing.ha import rig_available

            if rig_available():
                from bench.link_ha import measure as link_ha

                section("link-ha")
                result["link_ha"] = await link_ha(
                    counts.ha_tables, counts.ha_seconds, counts.ha_claims, window=8
                )
            else:
                print("link-ha: skipped (needs postgresql-15, patroni, etcd-server)")
        if "websign" in only:
            from bench.websign import measure as sign_memory
            from bench.websign_pixels import measure as sign_pixels

            result["websign"] = {
                "pixels": await sign_pixels(counts.sign_updates, section("websign")),
                "memory": await sign_memory(counts.sign_pages, counts.sign_updates * 4, True),
            }
    rows = verdicts(result)
    result["targets"] = [
        {"measure": n, "result": v, "target": t, "met": ok} for n, v, t, ok in rows
    ]
    print_table(result, rows)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.run", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="tiny counts: a smoke run")
    parser.add_argument("--out", type=Path, help="write the JSON here "
                        "(default bench/results/<date>[-quick].json)")
    parser.add_argument("--only", help=f"comma-separated sections of {','.join(SECTIONS)}")
    parser.add_argument("--profile", type=Path, help="run the latency section's daemon under "
                        "cProfile and write its stats here (its figures then include the "
                        "profiler's overhead: not for the record)")
    parser.add_argument("--workdir", help="where the temporary ledgers go (default: $TMPDIR)")
    parser.add_argument("--compare", type=Path, metavar="BASELINE",
                        help="then compare with this saved run (bench/results/LAST.json): "
                        "exit 1 naming every figure more than 15%% worse (bench/compare.py)")
    args = parser.parse_args(argv)
    baseline = None
    if args.compare is not None:
        try:
            baseline = load_result(args.compare)  # before the run: fail in a second, not an hour
        except SystemExit as exc:
            print(exc, file=sys.stderr)
            return 2
    result = asyncio.run(run(args))
    out = args.out
    if out is None:
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H%M")
        out = ROOT / "bench" / "results" / f"{stamp}{'-quick' if args.quick else ''}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwrote {out}")
    if baseline is not None:
        print(f"\ncompared with {args.compare}:")
        return compare_report(baseline, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
