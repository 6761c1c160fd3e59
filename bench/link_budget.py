"""The link's message -> answer, stage by stage: the budget read from the controller's log.

Why a module of its own: the link controller logs its own spans of every batch (``link
batch``, at debug level: progressived/link/runtime/spans.py: the inbox wait, decode, book,
commit and the queueing of the answers); this joins them with the bench's own send and
answer times (wall clock, one machine), each answer finding its batch by the ``lseq`` its
result carries, and derives the two stages the controller cannot see: **receive** (the
table's publish -> the batch's start: client, broker, the controller's intake and its inbox)
and **answer** (the answers queued -> the result read by the table: publish, broker, the
table's client). Each stage's floor sits beside it (docs/performance.md, "The link's message
-> answer"): one message decoded and booked alone (measured here, in process), a bare SQLite
commit and a bare MQTT QoS 1 delivery (the ``floor`` section of the same run).

``python -m bench.link_budget LINK.log`` prints the controller's stages of a saved log;
``--floors`` measures the decode and book floors (the micro-benchmark of the link's book).
"""

from __future__ import annotations

import argparse
import bisect
import json
import sys
import timeit
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.measure import summary_ms

# In the order a message goes through them; together they make ``total``.
STAGES = ("receive", "decode", "book", "commit", "queue", "answer")
IN_CONTROLLER = ("decode", "book", "commit", "queue")  # ``link batch`` fields (``_ms``)
Answer = tuple[float, float, int]  # (sent, answered: wall clock s, the result's lseq)


def batches(log_text: str) -> list[dict[str, Any]]:
    """The ``link batch`` lines of a controller's JSON log, in the order written."""
    out = []
    for line in log_text.splitlines():
        if '"link batch"' not in line:
            continue
        try:
            obj = json.loads(line[line.find("{") :])  # after a journald ``<7>`` prefix
        except ValueError:
            continue
        if isinstance(obj, dict) and obj.get("event") == "link batch":
            out.append(obj)
    return out


def _wall(entry: dict[str, Any]) -> float:
    return datetime.fromisoformat(str(entry["timestamp"])).timestamp()


def spans(log_text: str, answers: Sequence[Answer] = ()) -> dict[str, list[float]]:
    """Each stage's samples, in seconds: per answered message when ``answers`` are given
    (each message has its batch's decode, book, commit and queue), otherwise per batch for
    the controller's stages only. ``inbox`` (part of ``receive``) and ``batch`` (messages)
    come per batch."""
    found = [b for b in batches(log_text) if int(b.get("lseq", 0)) > 0]
    found.sort(key=lambda b: int(b["lseq"]))
    firsts = [int(b["lseq"]) for b in found]
    out: dict[str, list[float]] = {s: [] for s in (*STAGES, "total", "inbox", "batch")}
    for b in found:
        out["inbox"].append(float(b["inbox_ms"]) / 1e3)
        out["batch"].append(float(b["messages"]) / 1e3)  # summary_ms shows it as a count
    if not answers:
        for b in found:
            for stage in IN_CONTROLLER:
                out[stage].append(float(b[f"{stage}_ms"]) / 1e3)
        return {k: v for k, v in out.items() if v}
    for sent, answered, lseq in answers:
        at = bisect.bisect_right(firsts, lseq) - 1
        if at < 0 or lseq > int(found[at]["last_lseq"]):
            continue
        b = found[at]
        end = _wall(b)
        start = end - sum(float(b[f"{s}_ms"]) for s in IN_CONTROLLER) / 1e3
        for stage in IN_CONTROLLER:
            out[stage].append(float(b[f"{stage}_ms"]) / 1e3)
        out["receive"].append(max(0.0, start - sent))
        out["answer"].append(max(0.0, answered - end))
        out["total"].append(answered - sent)
    return {k: v for k, v in out.items() if v}


def micro_floors(number: int = 2000, repeat: int = 5) -> dict[str, float]:
    """Seconds for one contribution decoded, and booked, alone (best of ``repeat``): the
    floors of the decode and book stages (a batch of one)."""
    import tempfile

    from bench.link import write_link_config
    from bench.link_ledger import TABLES, _contribution
    from progressived.link.core import book as link_book
    from progressived.link.core.messages import LedgerHead, decode_table, encode
    from progressived.link.runtime.config import load_link_config

    ids = [f"t-{i:02d}" for i in range(TABLES)]
    with tempfile.TemporaryDirectory(prefix="bench-link-floors-") as folder:
        params = load_link_config(write_link_config(Path(folder), 1883, ids)).params
    state = link_book.open_book(params)
    head = LedgerHead(0, "0" * 64)
    payload = encode(_contribution(ids[0], 1))
    decode_s = min(timeit.repeat(lambda: decode_table(payload), number=number, repeat=repeat))
    msg = decode_table(payload)
    book_s = min(timeit.repeat(
        lambda: link_book.receive(params, state, msg, topic_table=ids[0], at_ms=0, head=head),
        number=number, repeat=repeat,
    ))
    return {"decode": decode_s / number, "book": book_s / number}


def budget(
    log_text: str, answers: Sequence[Answer] = (), floors: dict[str, Any] | None = None
) -> dict[str, dict[str, float]]:
    """p50/p99 per stage (ms), each with its floor (``floor_p50_ms``, ``floor_p99_ms``) and
    ``ratio_p50`` where ``floors`` has one (seconds, or a ``summary_ms`` dict)."""
    out: dict[str, dict[str, float]] = {}
    for stage, values in spans(log_text, answers).items():
        s = summary_ms(values)
        if stage == "batch":  # messages, not a time (sampled as count / 1000 s)
            s = {k.removesuffix("_ms"): v for k, v in s.items()}
        floor = (floors or {}).get(stage)
        if isinstance(floor, dict) and floor.get("p50_ms"):
            s["floor_p50_ms"], s["floor_p99_ms"] = floor["p50_ms"], floor["p99_ms"]
        elif isinstance(floor, float) and floor > 0:
            s["floor_p50_ms"] = s["floor_p99_ms"] = round(floor * 1e3, 4)
        if s.get("floor_p50_ms"):
            s["ratio_p50"] = round(s["p50_ms"] / s["floor_p50_ms"], 1)
        out[stage] = s
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path, nargs="?",
                        help="the link controller's JSON log (debug level)")
    parser.add_argument("--floors", action="store_true",
                        help="measure one contribution decoded, and booked, alone (the floors)")
    args = parser.parse_args(argv)
    if args.floors:
        for stage, seconds in micro_floors().items():
            print(f"  {stage:8} {seconds * 1e6:8.2f} us per message (best of 5 runs of 2,000)")
    if args.log is None:
        return 0 if args.floors else 2
    try:
        text = args.log.read_text()
    except OSError as exc:
        print(f"link_budget: {exc}", file=sys.stderr)
        return 2
    for stage, s in budget(text).items():
        if stage == "batch":
            print(f"  {stage:8} p50 {s['p50']:8.0f}  p99 {s['p99']:8.0f}  messages")
            continue
        print(f"  {stage:8} p50 {s['p50_ms']:8.3f}  p99 {s['p99_ms']:8.3f}  (n={s['n']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
