"""Reading payout slips back from a ledger, read-only (safe while the daemon writes).

Every slip is a ``slip_issued`` row; a ``slip_voided`` row names the serial it voids. What
``progressivectl slip show|list`` and ``slips`` print, the printer prints and the PDF
draws all come from here, so each is the stored record, with the hash of its row.
"""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from progressived.core.money import display
from progressived.ledger.errors import LedgerError
from progressived.ledger.readonly import connect_readonly
from progressived.slips.slip import ISSUED, VOIDED, Slip, Void


@dataclass(frozen=True, slots=True)
class StoredSlip:
    """A slip as journaled: its row (``seq``, ``at``, ``hash``) and its void, if any."""

    slip: Slip
    seq: int
    at: str
    hash: str
    void: Void | None = None
    void_seq: int | None = None
    void_at: str | None = None

    @property
    def status(self) -> str:
        return "void" if self.void is not None else "live"

    def to_dict(self) -> dict[str, Any]:
        out = {**self.slip.to_dict(), "status": self.status, "seq": self.seq, "at": self.at}
        out["hash"] = self.hash
        out["void"] = None
        if self.void is not None:
            out["void"] = {**self.void.to_dict(), "seq": self.void_seq, "at": self.void_at}
        return out


def read(
    conn: sqlite3.Connection,
    *,
    serial: str | None = None,
    since: str | None = None,
    until: str | None = None,
) -> list[StoredSlip]:
    """The slips issued in ``[since, until]`` (UTC times or dates: ``until`` a date takes the
    whole day), or the one with ``serial``, in issue order."""
    where, args = ["kind = ?"], [ISSUED]
    if serial is not None:
        where.append("json_extract(data, '$.serial') = ?")
        args.append(serial)
    if since is not None:
        where.append("at >= ?")
        args.append(since)
    if until is not None:
        where.append("substr(at, 1, length(?)) <= ?")
        args += [until, until]
    rows = conn.execute(
        f"SELECT seq, at, hash, data FROM journal WHERE {' AND '.join(where)} ORDER BY seq", args
    ).fetchall()
    voids: dict[str, tuple[int, str, dict[str, Any]]] = {}
    for seq, at, text in conn.execute(
        "SELECT seq, at, data FROM journal WHERE kind = ? ORDER BY seq", (VOIDED,)
    ):
        data = json.loads(text)
        voids.setdefault(data["serial"], (int(seq), str(at), data))
    out = []
    for seq, at, row_hash, text in rows:
        slip = Slip.from_dict(json.loads(text))
        void = voids.get(slip.serial)
        out.append(
            StoredSlip(
                slip,
                int(seq),
                str(at),
                str(row_hash),
                Void.from_dict(void[2]) if void is not None else None,
                void[0] if void is not None else None,
                void[1] if void is not None else None,
            )
        )
    return out


def slips(path: Path, *, since: str | None = None, until: str | None = None) -> list[StoredSlip]:
    """:func:`read` on a read-only connection, in one read transaction."""
    conn = connect_readonly(path)
    try:
        conn.execute("BEGIN")
        return read(conn, since=since, until=until)
    except (sqlite3.Error, KeyError, ValueError, TypeError) as exc:
        raise LedgerError(f"{path}: cannot read its slips: {exc}") from None
    finally:
        conn.close()


def one(path: Path, serial: str) -> StoredSlip | None:
    conn = connect_readonly(path)
    try:
        conn.execute("BEGIN")
        found = read(conn, serial=serial)
    except (sqlite3.Error, KeyError, ValueError, TypeError) as exc:
        raise LedgerError(f"{path}: cannot read its slips: {exc}") from None
    finally:
        conn.close()
    return found[0] if found else None


CSV_COLUMNS = (
    "serial",
    "status",
    "at",
    "table_id",
    "round",
    "seat",
    "hand",
    "source",
    "meter",
    "units",
    "taxable",
    "preparer",
    "award",
    "reissue_of",
    "void_reason",
    "void_by",
    "seq",
    "hash",
)


def render_csv(found: list[StoredSlip]) -> str:
    """One row per slip (amounts in units, as the ledger keeps them)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for s in found:
        d = s.to_dict()
        void = d["void"] or {}
        d["void_reason"], d["void_by"] = void.get("reason", ""), void.get("by", "")
        writer.writerow(["" if d[c] is None else d[c] for c in CSV_COLUMNS])
    return buf.getvalue()


def render_list(found: list[StoredSlip]) -> str:
    """One line per slip for a person: serial, status, time, seat, hand, amount."""
    if not found:
        return "no slips"
    lines = []
    for s in found:
        slip = s.slip
        void = f"  VOID ({s.void.reason})" if s.void is not None else ""
        tax = " taxable" if slip.taxable else ""
        lines.append(
            f"{slip.serial}  {s.at}  round {slip.round} seat {slip.seat}  "
            f"{slip.hand_name} ({slip.source.value})  {display(slip.units)}{tax}{void}"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------- the print queue

PRINTED = "slip_printed"
REPRINTED = "slip_reprint"
VOID_COPY = "VOIDED SLIP"
QUEUE_SQL = "SELECT seq, kind, at, hash, data FROM journal WHERE kind IN (?, ?, ?, ?) ORDER BY seq"
QUEUE_ARGS = (ISSUED, VOIDED, REPRINTED, PRINTED)


@dataclass(frozen=True, slots=True)
class PrintJob:
    """One copy to print: ``job`` is ``SERIAL/LABEL`` (``T1-000001/ORIGINAL``), the id its
    ``slip_printed`` row names."""

    job: str
    label: str
    stored: StoredSlip


def pending_jobs(rows: list[tuple[Any, ...]]) -> list[PrintJob]:
    """The copies the ledger's slip rows (``QUEUE_SQL``'s, in journal order) ask for that no
    ``slip_printed`` row has printed: each slip's ``copies`` when it was issued, a VOID copy
    of a voided slip that was to be printed, each reprint asked for."""
    issued: dict[str, StoredSlip] = {}
    jobs: dict[str, PrintJob] = {}
    done: set[str] = set()
    for seq, kind, at, row_hash, text in rows:
        data = json.loads(text)
        if kind == ISSUED:
            stored = StoredSlip(Slip.from_dict(data), int(seq), str(at), str(row_hash))
            issued[stored.slip.serial] = stored
            for label in data.get("copies", ()):
                job = f"{stored.slip.serial}/{label}"
                jobs[job] = PrintJob(job, str(label), stored)
        elif kind == VOIDED and data["serial"] in issued:
            first = issued[data["serial"]]
            voided = StoredSlip(
                first.slip, first.seq, first.at, first.hash, Void.from_dict(data), int(seq), str(at)
            )
            issued[data["serial"]] = voided
            if first.slip.copies:  # it was to be printed: its VOID is printed too
                job = f"{first.slip.serial}/{VOID_COPY}"
                jobs[job] = PrintJob(job, VOID_COPY, voided)
        elif kind == REPRINTED and data["serial"] in issued:
            label = f"REPRINT {int(data['n'])}"
            job = f"{data['serial']}/{label}"
            jobs[job] = PrintJob(job, label, issued[data["serial"]])
        elif kind == PRINTED:
            done.add(str(data["job"]))
    return [j for name, j in jobs.items() if name not in done]


# ---------------------------------------------------------------- reads on the writer's connection
# The daemon's printer queue and operator desk ask through these (``Ledger`` methods), never in
# SQL of their own.

_SLIP_HEAD = "SELECT max(seq) FROM journal WHERE kind IN (?, ?, ?, ?)"
_COPIES = (
    "SELECT kind, count(*) FROM journal WHERE kind IN ('slip_issued', 'slip_reprint') "
    "AND json_extract(data, '$.serial') = ? GROUP BY kind"
)


def print_queue(conn: sqlite3.Connection) -> list[PrintJob]:
    """The copies waiting to print (:func:`pending_jobs` over the slip rows)."""
    return pending_jobs(conn.execute(QUEUE_SQL, QUEUE_ARGS).fetchall())


def slip_rows_head(conn: sqlite3.Connection) -> int:
    """The last slip row's ``seq`` (issued, voided, reprint, printed), 0 when none."""
    return int(conn.execute(_SLIP_HEAD, QUEUE_ARGS).fetchone()[0] or 0)


def slip_copies(conn: sqlite3.Connection, serial: str) -> dict[str, int]:
    """How many ``slip_issued`` and ``slip_reprint`` rows name ``serial``, by kind."""
    return {str(kind): int(n) for kind, n in conn.execute(_COPIES, (serial,)).fetchall()}
