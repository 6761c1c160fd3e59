"""The ``throughput`` section: durable linked contributions per second against bare sqlite3.

Why a module of its own: it runs the engine and the ledger in-process (no daemon), group by
group interleaved with a bare insert of the same rows into the same schema, so the ratio
measures the ledger's own cost (docs/performance.md, "Throughput").
"""

from __future__ import annotations

import sqlite3
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

from bench.stress import utc_now
from progressived.config.paytables import find_paytable
from progressived.core.params import MeterParams, TableParams
from progressived.engine import LinkedWagers, decide
from progressived.ledger import Batch, Ledger


def linked_params() -> TableParams:
    """The linked meter's controller: same meter rates as the bench table."""
    return TableParams(
        table_id="bench-linked",
        paytable=find_paytable("tcp-sd-1"),
        meters=(MeterParams(rate=Fraction(15, 100), reserve_rate=Fraction(5, 100)),),
    )


_JOURNAL_COLUMNS = (
    "seq, at, table_id, round, seat, kind, category, actor, idem_key, data, hash, prev_hash"
)


def _bare_copy(ledger_db: Path, bare_db: Path) -> sqlite3.Connection:
    """A fresh database with the ledger's tables and indexes, under the same pragmas."""
    src = sqlite3.connect(f"file:{ledger_db}?mode=ro", uri=True)
    ddl = [
        sql
        for (sql,) in src.execute(
            "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' "
            "ORDER BY CASE type WHEN 'table' THEN 0 ELSE 1 END, rowid"
        )
    ]
    src.close()
    conn = sqlite3.connect(bare_db, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA foreign_keys = ON")
    for sql in ddl:
        if "TRIGGER" in sql.upper().split("(")[0]:
            continue  # append-only guards fire on UPDATE/DELETE only; keep inserts bare
        conn.execute(sql)
    return conn


def bench_throughput(tmp: Path, wagers: int, group: int) -> dict[str, Any]:
    """Each group of wagers is journaled by the ledger, then its rows (read back from the
    ledger, untimed) are inserted bare in one transaction: ledger and floor run
    interleaved, group by group, so that the machine's load drifts over both alike."""
    db = tmp / "linked.db"
    params = linked_params()
    at = utc_now()
    decide_s = append_s = bare_s = 0.0
    rows = postings_n = 0
    with Ledger.open(db, params, at=at, software="bench") as ledger:
        first_seq = ledger.head_seq + 1
        bare = _bare_copy(db, tmp / "bare.db")
        src = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        state = ledger.state
        batches: list[Batch] = []

        def flush() -> None:
            nonlocal append_s, bare_s, rows, postings_n
            after = ledger.head_seq
            started = time.perf_counter()
            ledger.append_many(batches)
            append_s += time.perf_counter() - started
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
            rows, postings_n = rows + len(journal), postings_n + len(legs)
            started = time.perf_counter()
            bare.execute("BEGIN IMMEDIATE")
            bare.executemany(
                f"INSERT INTO journal ({_JOURNAL_COLUMNS}) VALUES "
                "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                journal,
            )
            bare.executemany("INSERT INTO postings (seq, leg, account, units) VALUES (?, ?, ?, ?)",
                             legs)
            bare.executemany("INSERT INTO idempotency (key, first_seq, last_seq) VALUES (?, ?, ?)",
                             keys)
            bare.execute("COMMIT")
            bare_s += time.perf_counter() - started
            batches.clear()

        for i in range(wagers):
            cid = f"bench-2:{i}"
            started = time.perf_counter()
            decision = decide(
                params, state, LinkedWagers(source_table="bench-2", count=1, contribution_id=cid,
                                            at=at, actor="link")
            )
            if not decision.accepted:
                raise RuntimeError(decision.reason)
            state = decision.state
            batches.append(Batch(decision.events, state, at, "link", cid))
            decide_s += time.perf_counter() - started
            if len(batches) >= group:
                flush()
        if batches:
            flush()
        last_seq = ledger.head_seq
        src.close()
        bare.close()
    assert last_seq - first_seq + 1 == wagers == rows
    ledger_s = decide_s + append_s
    return {
        "wagers": wagers,
        "group": group,
        "journal_rows": rows,
        "posting_rows": postings_n,
        "decide_s": round(decide_s, 3),
        "ledger_s": round(ledger_s, 3),
        "ledger_per_s": round(wagers / ledger_s),
        "bare_sqlite_s": round(bare_s, 3),
        "bare_sqlite_per_s": round(wagers / bare_s),
        "ratio": round(ledger_s / bare_s, 2),
        "append_s": round(append_s, 3),
        "append_ratio": round(append_s / bare_s, 2),
    }
