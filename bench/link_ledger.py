"""The link controller's ledger against bare SQLite inserting the same rows.

Why a module of its own: it measures the link's ledger in-process (no broker), the way the
controller uses it — the book decides a group of contributions from many tables, then
``LinkLedger.commit`` journals the group in one transaction — and after each group inserts
the very rows that commit wrote (read back, untimed) into a fresh database with the same
schema under the same pragmas, in one transaction: the journal rows, their postings and
idempotency keys, the balances they move and the recorded head — what the ledger writes,
without computing it. Interleaved group by group so the
machine's load drifts over both alike; the ratio is the ledger's own cost
(docs/performance.md, "The link").
"""

from __future__ import annotations

import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.stress import utc_now
from bench.throughput import _JOURNAL_COLUMNS, _bare_copy
from progressived.core.money import UNITS_PER_DOLLAR
from progressived.link.core import book
from progressived.link.core.messages import Contribution, LedgerHead, MeterWagers
from progressived.link.runtime.config import load_link_config
from progressived.link.store.ledger import LinkLedger

TABLES = 50
SEATS = 7


def bench_link_ledger(tmp: Path, messages: int, group: int) -> dict[str, Any]:
    from bench.link import write_link_config

    ids = [f"t-{i:02d}" for i in range(TABLES)]
    config = write_link_config(tmp, 1883, ids)
    params = load_link_config(config).params
    db = tmp / "link.db"
    LinkLedger.create(db, params, at=utc_now(), software="bench")
    ledger = LinkLedger.open(db, params)
    bare = _bare_copy(db, tmp / "bare.db")
    src = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    seqs = dict.fromkeys(ids, 0)
    decide_s = commit_s = bare_s = 0.0
    rows = legs_n = 0
    try:
        done = 0
        while done < messages:
            state = ledger.book
            steps = []
            started = time.perf_counter()
            for _ in range(min(group, messages - done)):
                table = ids[done % TABLES]
                seqs[table] += 1
                seq = seqs[table]
                msg = Contribution(
                    table=table,
                    seq=seq,
                    id=f"{table}:{seq}",
                    head=LedgerHead(seq, f"{seq:064x}"),
                    at="2026-11-23T00:00:00Z",
                    round=seq,
                    wagers=(book_wagers(),),
                )
                step = book.receive(
                    params, state, msg, topic_table=table, at_ms=done, head=ledger.head
                )
                state = step.state
                steps.append((step, done))
                done += 1
            decide_s += time.perf_counter() - started
            after = int(src.execute("SELECT coalesce(max(seq), 0) FROM journal").fetchone()[0])
            started = time.perf_counter()
            ledger.commit(steps)
            commit_s += time.perf_counter() - started
            journal = src.execute(
                f"SELECT {_JOURNAL_COLUMNS} FROM journal WHERE seq > ? ORDER BY seq", (after,)
            ).fetchall()
            legs = src.execute(
                "SELECT seq, leg, account, units FROM postings WHERE seq > ? ORDER BY seq, leg",
                (after,),
            ).fetchall()
            keys = src.execute(
                "SELECT key, first_seq, last_seq FROM idempotency WHERE first_seq > ?", (after,)
            ).fetchall()
            sums = src.execute(
                "SELECT account, units, seq FROM balances WHERE seq > ?", (after,)
            ).fetchall()
            last = src.execute("SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1").fetchone()
            rows, legs_n = rows + len(journal), legs_n + len(legs)
            started = time.perf_counter()
            bare.execute("BEGIN IMMEDIATE")
            bare.executemany(
                f"INSERT INTO journal ({_JOURNAL_COLUMNS}) VALUES "
                "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                journal,
            )
            bare.executemany(
                "INSERT INTO postings (seq, leg, account, units) VALUES (?, ?, ?, ?)", legs
            )
            bare.executemany(
                "INSERT INTO idempotency (key, first_seq, last_seq) VALUES (?, ?, ?)", keys
            )
            # The balances and the recorded head: rows the ledger writes too, the same way.
            bare.executemany(
                "INSERT INTO balances (account, units, seq) VALUES (?, ?, ?) ON CONFLICT "
                "(account) DO UPDATE SET units = excluded.units, seq = excluded.seq",
                sums,
            )
            bare.executemany(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) "
                "DO UPDATE SET value = excluded.value",
                (("head_seq", str(last[0])), ("head_hash", last[1])),
            )
            bare.execute("COMMIT")
            bare_s += time.perf_counter() - started
    finally:
        src.close()
        bare.close()
        ledger.close()
    return {
        "messages": messages,
        "wagers": messages * SEATS,
        "group": group,
        "journal_rows": rows,
        "posting_rows": legs_n,
        "book_s": round(decide_s, 3),
        "commit_s": round(commit_s, 3),
        "commit_messages_per_s": round(messages / commit_s),
        "bare_sqlite_s": round(bare_s, 3),
        "ratio": round(commit_s / bare_s, 2),
    }


def book_wagers() -> MeterWagers:
    return MeterWagers("main", SEATS, SEATS * UNITS_PER_DOLLAR)


def bench_link_ledger_postgres(messages: int, group: int) -> dict[str, Any]:
    """The same, with the link ledger in PostgreSQL (a real server on a loopback port,
    progressived/testing/postgres.py): ``LinkLedger.commit`` (under its lease) against a
    bare psycopg insert of the very rows it wrote, in one pipelined transaction, into a
    second database with the same tables. Interleaved group by group, as above."""
    import psycopg

    from bench.link import write_link_config
    from progressived.storage import postgres_schema as ddl
    from progressived.testing.postgres import server

    ids = [f"t-{i:02d}" for i in range(TABLES)]
    with tempfile.TemporaryDirectory(prefix="bench-link-pg-") as folder, server() as srv:
        params = load_link_config(write_link_config(Path(folder), 1883, ids)).params
        url, bare_url = srv.database(), srv.database()
        LinkLedger.create(url, params, at=utc_now(), software="bench")
        ledger = LinkLedger.open(url, params, holder="bench", lease_s=60)
        src = psycopg.connect(url, autocommit=True)
        bare = psycopg.connect(bare_url, autocommit=True)
        bare.execute(ddl.DDL)
        seqs = dict.fromkeys(ids, 0)
        decide_s = commit_s = bare_s = 0.0
        rows = legs_n = done = 0
        try:
            while done < messages:
                state, steps = ledger.book, []
                started = time.perf_counter()
                for _ in range(min(group, messages - done)):
                    table = ids[done % TABLES]
                    seqs[table] += 1
                    step = book.receive(
                        params, state, _contribution(table, seqs[table]),
                        topic_table=table, at_ms=done, head=ledger.head,
                    )
                    state = step.state
                    steps.append((step, done))
                    done += 1
                decide_s += time.perf_counter() - started
                after = ledger.head.seq
                started = time.perf_counter()
                ledger.commit(steps)
                commit_s += time.perf_counter() - started
                journal = src.execute(
                    f"SELECT {_JOURNAL_COLUMNS} FROM journal WHERE seq > %s ORDER BY seq",
                    (after,),
                ).fetchall()
                legs = src.execute(
                    "SELECT seq, leg, account, units FROM postings WHERE seq > %s", (after,)
                ).fetchall()
                keys = src.execute(
                    "SELECT key, first_seq, last_seq FROM idempotency WHERE first_seq > %s",
                    (after,),
                ).fetchall()
                sums = src.execute(
                    "SELECT account, units, seq FROM balances WHERE seq > %s", (after,)
                ).fetchall()
                rows, legs_n = rows + len(journal), legs_n + len(legs)
                head = (("head_seq", str(ledger.head.seq)), ("head_hash", ledger.head.hash))
                started = time.perf_counter()
                with bare.transaction(), bare.pipeline():
                    cur = bare.cursor()
                    cur.executemany(
                        f"INSERT INTO journal ({_JOURNAL_COLUMNS}) VALUES "
                        f"({', '.join(['%s'] * 12)})",
                        journal,
                    )
                    cur.executemany(ddl.INSERT_POSTINGS, legs)
                    cur.executemany(ddl.INSERT_KEYS, keys)
                    cur.executemany(ddl.UPSERT_BALANCES, sums)
                    cur.executemany(ddl.SET_META, head)
                bare_s += time.perf_counter() - started
        finally:
            src.close()
            bare.close()
            ledger.close()
    return {
        "messages": messages,
        "wagers": messages * SEATS,
        "group": group,
        "journal_rows": rows,
        "posting_rows": legs_n,
        "book_s": round(decide_s, 3),
        "commit_s": round(commit_s, 3),
        "commit_messages_per_s": round(messages / commit_s),
        "commit_wagers_per_s": round(messages * SEATS / commit_s),
        "bare_psycopg_s": round(bare_s, 3),
        "ratio": round(commit_s / bare_s, 2),
    }


def _contribution(table: str, seq: int) -> Contribution:
    return Contribution(
        table=table,
        seq=seq,
        id=f"{table}:{seq}",
        head=LedgerHead(seq, f"{seq:064x}"),
        at="2026-11-23T00:00:00Z",
        round=seq,
        wagers=(book_wagers(),),
    )


if __name__ == "__main__":
    # python -m bench.link_ledger [MESSAGES] [GROUP]: the PostgreSQL one;
    # python -m bench.link_ledger --sqlite [MESSAGES] [GROUP]: the SQLite one (bench.run's)
    import json
    import sys

    sqlite = "--sqlite" in sys.argv
    counts = [int(a) for a in sys.argv[1:] if a != "--sqlite"][:2] or [20_000, 200]
    if sqlite:
        with tempfile.TemporaryDirectory(prefix="bench-link-ledger-") as folder:
            print(json.dumps(bench_link_ledger(Path(folder), *counts), indent=2))
    else:
        print(json.dumps(bench_link_ledger_postgres(*counts), indent=2))
