"""Key -> sign, stage by stage: the budget read from the daemon's JSON log of a bench run.

Why a module of its own: the daemon logs its own spans (``key journaled``: waiting,
engine, plan, commit; ``outbox sent``: outbox read, publish to PUBACK, acknowledgement);
this joins them by ledger ``seq`` and, given the bench's press times (wall clock), adds the
stages the daemon cannot see: the pty read and frame decode before the press reaches the
journal, and the hand-off from the commit to the publisher (docs/performance.md,
"Key -> sign: where the time goes").

``python -m bench.latency_budget DAEMON.log`` prints the daemon's stages of a saved log.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.measure import summary_ms

# In the order a press goes through them.
STAGES = (
    "pty_read_decode",  # the board's frame written -> the daemon's KeyPressed handled
    "wait",  # keypad and the journal's lock
    "engine",  # decide()
    "plan",  # the rows and the link's messages
    "commit",  # the ledger thread: queue, transaction, fsync
    "observers",  # event log lines, listeners, the redraw that wakes the publisher
    "handoff",  # the publisher woken -> it reads the outbox
    "outbox_read",  # the outbox rows read on the ledger thread
    "publish",  # publish -> the broker's PUBACK (the sign has it by then)
)


IN_JOURNAL = ("wait", "engine", "plan", "commit", "observers")  # ``key journaled`` fields


def _lines(log_text: str, message: str) -> list[dict[str, Any]]:
    out = []
    for line in log_text.splitlines():
        if f'"{message}"' not in line:
            continue
        try:
            obj = json.loads(line[line.find("{"):])  # after a journald ``<6>`` prefix
        except ValueError:
            continue
        if isinstance(obj, dict) and obj.get("event") == message:
            out.append(obj)
    return out


def _wall(entry: dict[str, Any]) -> float:
    return datetime.fromisoformat(str(entry["timestamp"])).timestamp()


def spans(log_text: str, press_walls: Sequence[float] = ()) -> dict[str, list[float]]:
    """Each stage's samples (seconds). ``press_walls``: the bench's measured presses, in
    order, one per ``key journaled`` line (ignored if the counts differ)."""
    keys = _lines(log_text, "key journaled")
    sent = _lines(log_text, "outbox sent")
    out: dict[str, list[float]] = {stage: [] for stage in STAGES}
    for key in keys:
        last = int(key.get("last_seq", key["seq"]))
        for stage in IN_JOURNAL:
            out[stage].append(float(key[f"{stage}_ms"]) / 1e3)
        batch = next(
            (b for b in sent if key["seq"] <= b["seq"] + b["rows"] - 1 and b["seq"] <= last),
            None,
        )  # the first batch carrying one of the press's rows
        if batch is None:
            continue
        out["outbox_read"].append(float(batch["read_ms"]) / 1e3)
        out["publish"].append(float(batch["puback_ms"]) / 1e3)
        read_began = _wall(batch) - (
            float(batch["read_ms"]) + float(batch["puback_ms"]) + float(batch.get("ack_ms", 0.0))
        ) / 1e3
        out["handoff"].append(max(0.0, read_began - _wall(key)))
    if len(press_walls) == len(keys):
        for key, pressed in zip(keys, press_walls, strict=True):
            in_daemon = sum(float(key[f"{s}_ms"]) for s in IN_JOURNAL)
            out["pty_read_decode"].append(max(0.0, _wall(key) - in_daemon / 1e3 - pressed))
    return out


def budget(log_text: str, press_walls: Sequence[float] = ()) -> dict[str, dict[str, float]]:
    """p50/p99 per stage (ms), for the stages with samples."""
    return {stage: summary_ms(values) for stage, values in spans(log_text, press_walls).items()
            if values}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path, help="the daemon's JSON log of a bench run")
    args = parser.parse_args(argv)
    try:
        text = args.log.read_text()
    except OSError as exc:
        print(f"latency_budget: {exc}", file=sys.stderr)
        return 2
    for stage, s in budget(text).items():
        print(f"  {stage:16} p50 {s['p50_ms']:7.3f} ms  p99 {s['p99_ms']:7.3f} ms  (n={s['n']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
