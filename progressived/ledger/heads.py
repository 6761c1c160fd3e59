"""Heads of the hash chain recorded outside the ledger: witnesses and the verified head.

A hash chain alone cannot catch someone who rewrites a ledger's whole tail consistently
(every later hash recomputed, ``meta`` too). Two things close that gap here:

* a **witnessed head** ``SEQ:HASH`` recorded somewhere the rewriter cannot reach (the
  table's retained MQTT status, a printed daily report): ``ledger verify --head SEQ:HASH``
  checks that row SEQ still has that hash and that the chain runs intact through it to
  the ledger's head;
* the **verified head**: after a check that found nothing, ``ledger verify`` records the
  head it verified (seq, hash, time, mode, the balances at that row) in a sidecar file
  ``LEDGER.verified`` next to the ledger, so ``--since-verified`` can check only the rows
  after it. The sidecar is a convenience, not a witness: whoever can rewrite the ledger
  can rewrite it too, which is why the full check stays the default and an audit pairs
  the quick one with ``--head``.

Verify opens the ledger read-only; the sidecar is the only file it writes.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from progressived.ledger.checks import Finding

SIDECAR_SUFFIX = ".verified"
SIDECAR_FORMAT = 1
HEAD_ORDER = 11  # after every other check of the same row (see checks.py)

_HEAD = re.compile(r"^([1-9][0-9]*):([0-9a-f]{64})$")


@dataclass(frozen=True, slots=True)
class WitnessedHead:
    """One row of the chain as recorded elsewhere: its ``seq`` and ``hash``."""

    seq: int
    hash: str

    def __str__(self) -> str:
        return f"{self.seq}:{self.hash}"


def parse_head(text: str) -> WitnessedHead:
    """``SEQ:HASH`` (a row number from 1, 64 lower-case hex digits); ``ValueError`` if not."""
    match = _HEAD.match(text.strip().lower())
    if match is None:
        raise ValueError(f"{text!r} is not SEQ:HASH (a row number and a 64-digit hex SHA-256)")
    return WitnessedHead(int(match.group(1)), match.group(2))


def witnessed(
    conn: sqlite3.Connection, heads: Iterable[WitnessedHead], head_seq: int
) -> list[Finding]:
    """Each witnessed head against the ledger's row: it must exist and have that hash.

    That the chain runs intact from the row to the ledger's head is the chain walk's part
    (from genesis in the full check, from the lowest head in ``--since-verified``).
    """
    found: list[Finding] = []
    for head in heads:
        row = conn.execute("SELECT hash FROM journal WHERE seq = ?", (head.seq,)).fetchone()
        if row is None:
            found.append(
                (
                    None if head.seq > head_seq else head.seq,
                    HEAD_ORDER,
                    f"witnessed head {head} does not match: the ledger has no row {head.seq} "
                    f"(its head is row {head_seq}; rows were cut off or rewritten)",
                )
            )
        elif row[0] != head.hash:
            found.append(
                (
                    head.seq,
                    HEAD_ORDER,
                    f"witnessed head {head} does not match: row {head.seq} has hash {row[0]} "
                    "(the ledger was rewritten at or before this row after the head was "
                    "recorded)",
                )
            )
    return found


# ------------------------------------------------------------------ the verified head


def sidecar_path(ledger: Path | str) -> Path:
    """``LEDGER.verified``, next to the ledger."""
    p = Path(ledger)
    return p.with_name(p.name + SIDECAR_SUFFIX)


@dataclass(frozen=True, slots=True)
class VerifiedHead:
    """The sidecar's content: the head a check found sound, and the balances at it."""

    head: WitnessedHead
    table_id: str
    at: str
    mode: str
    balances: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": SIDECAR_FORMAT,
            "table_id": self.table_id,
            "head_seq": self.head.seq,
            "head_hash": self.head.hash,
            "verified_at": self.at,
            "mode": self.mode,
            "balances": dict(sorted(self.balances.items())),
        }


class SidecarUnusable(Exception):
    """The sidecar is missing or cannot be trusted to mean anything: check in full."""


def read_verified(ledger: Path | str) -> VerifiedHead:
    """The recorded verified head; :class:`SidecarUnusable` (saying why) if there is none."""
    path = sidecar_path(ledger)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SidecarUnusable(f"no verified head is recorded ({path} is missing)") from None
    except OSError as exc:
        raise SidecarUnusable(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("format") != SIDECAR_FORMAT:
            raise ValueError(f"not format {SIDECAR_FORMAT}")
        head = parse_head(f"{data['head_seq']}:{data['head_hash']}")
        balances = data["balances"]
        if not isinstance(balances, dict) or not all(
            isinstance(k, str) and type(v) is int for k, v in balances.items()
        ):
            raise ValueError("balances are not account -> integer units")
        return VerifiedHead(
            head, str(data["table_id"]), str(data["verified_at"]), str(data["mode"]), balances
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise SidecarUnusable(f"{path} is garbled ({exc})") from None


def record_verified(ledger: Path | str, verified: VerifiedHead) -> Path:
    """Write the sidecar atomically (a temporary file, fsync, rename); ``OSError`` if not."""
    path = sidecar_path(ledger)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(verified.to_dict(), out, indent=1)
            out.write("\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return path


def verified_from(
    head_seq: int, head_hash: str, table_id: str, at: str, mode: str, balances: Mapping[str, int]
) -> VerifiedHead:
    return VerifiedHead(
        WitnessedHead(head_seq, head_hash),
        table_id,
        at,
        mode,
        {a: u for a, u in balances.items() if u},
    )
