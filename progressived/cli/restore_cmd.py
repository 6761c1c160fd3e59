"""``progressivectl ledger restore --from URL --table T --out FILE``: a dead board's ledger
made again from the archive (docs/archive.md, "Restoring a table"; docs/operations.md,
"A dead board").

It writes the archived rows into a new ledger file (:mod:`progressived.archive.store.restore`),
runs ``ledger verify`` on it, and says what may be missing after the archived head: the
table's head as its witnesses last saw it -- the link ledger (``--link-db``) and the table's
retained MQTT status (``--broker``), which the signs read. Exit status: 0 restored, no
witness beyond the archived head; 1 restored, but a witness shows rows after it (they were
only on the dead board), or the restored file fails ``ledger verify``; 2 bad usage or an
unreadable password file; 3 the archive holds no row of the table, or no archive is there;
4 the database is not an archive; 5 the archive's database cannot be reached; 6 a file is
already at ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

from progressived.cli.common import Exit, ledger_status
from progressived.ledger import LedgerError
from progressived.storage.location import parse, shown

STATUS_WAIT_S = 3.0  # how long the retained status is waited for


def register(lsub: Any) -> None:
    r: argparse.ArgumentParser = lsub.add_parser(
        "restore",
        help="make a table's ledger file again from the archive (a dead board)",
        description="Write the archive's rows of one table into a new ledger file (rows and "
        "chain exactly the archived ones), verify it, and report what may be missing after "
        "the archived head, from the link's ledger and the table's retained MQTT status.",
    )
    r.add_argument("--from", dest="source", required=True, metavar="URL",
                   help="the archive's database (postgresql://...)")
    r.add_argument("--table", required=True, metavar="T", help="the table's id")
    r.add_argument("--out", required=True, type=Path, metavar="FILE",
                   help="the new ledger file (must not exist)")
    r.add_argument("--password-file", type=Path, metavar="FILE",
                   help="the archive database's password (else PGPASSFILE / ~/.pgpass)")
    r.add_argument("--prefix", default="progressive", help="the MQTT prefix (default progressive)")
    r.add_argument("--link-db", type=parse, metavar="PATH|URL",
                   help="the link's ledger: the table's head it witnessed")
    r.add_argument("--broker", metavar="HOST:PORT",
                   help="read the table's retained status (its last head) from this broker")
    r.add_argument("--username", help="the broker account (a sign's is enough)")
    r.add_argument("--mqtt-password-file", type=Path, metavar="FILE")
    r.add_argument("--json", action="store_true", help="print the report as JSON")
    r.set_defaults(handler=run_restore)


def _secret(path: Path | None) -> str | None:
    if path is None:
        return None
    lines = path.read_text(encoding="utf-8").splitlines()
    return lines[0].strip() if lines else ""


async def _retained_status(args: argparse.Namespace, password: str | None) -> dict[str, Any] | None:
    """The table's retained status from ``--broker`` (None: none within a few seconds)."""
    import aiomqtt  # noqa: PLC0415 - only this option needs it

    from progressived.core import wirejson  # noqa: PLC0415
    from progressived.mqtt.client import broker_address  # noqa: PLC0415

    host, port = broker_address(args.broker, 1883)
    topic = f"{args.prefix}/table/{args.table}/status"
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(STATUS_WAIT_S), aiomqtt.Client(
            host, port, username=args.username, password=password
        ) as client:
            await client.subscribe(topic, qos=1)
            async for message in client.messages:
                try:
                    found = wirejson.loads_object(bytes(message.payload), max_bytes=65536)
                except wirejson.WireError:
                    return None
                return found
    return None


def run_restore(args: argparse.Namespace) -> int:
    from progressived.archive.store.database import ArchiveStore  # noqa: PLC0415
    from progressived.archive.store.restore import restore  # noqa: PLC0415
    from progressived.archive.store.witness import link_witness  # noqa: PLC0415
    from progressived.ledger.verify import verify  # noqa: PLC0415

    prog = "progressivectl ledger restore"
    try:
        password, mqtt_password = _secret(args.password_file), _secret(args.mqtt_password_file)
    except (OSError, UnicodeDecodeError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return Exit.USAGE
    if not str(args.source).startswith(("postgresql://", "postgres://")):
        print(f"{prog}: --from must be the archive's postgresql:// URL", file=sys.stderr)
        return Exit.USAGE
    try:
        store = ArchiveStore.open_archive(args.source, "existing", "", "", password=password)
        try:
            archived = store.heads().get(args.table)
            done = restore(store.table_rows(args.table), args.table, args.out, prefix=args.prefix)
        finally:
            store.close()
        report = verify(args.out)
        witness = None if args.link_db is None else link_witness(args.link_db, args.table)
    except LedgerError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return int(ledger_status(exc))
    status = None
    if args.broker is not None:
        import aiomqtt  # noqa: PLC0415 - only this option needs it

        try:
            status = asyncio.run(_retained_status(args, mqtt_password))
        except (aiomqtt.MqttError, OSError, ValueError) as exc:  # reported, not fatal
            print(f"{prog}: broker {args.broker}: {exc}", file=sys.stderr)
    missing: list[str] = []
    if witness is not None and witness.head_seq > done.head.seq:
        missing.append(f"the link witnessed the table's row {witness.head_seq}")
    if witness is not None and witness.message_seq > done.link_seq:
        missing.append(
            f"the link applied the table's message {witness.message_seq}, the restored ledger "
            f"journaled sending up to {done.link_seq}"
        )
    if status is not None and int(status.get("head_seq", 0)) > done.head.seq:
        missing.append(f"the table's retained status says row {status['head_seq']}")
    out = {
        "table": args.table,
        "out": str(args.out),
        "archive": shown(args.source),
        "rows": done.rows,
        "head_seq": done.head.seq,
        "head_hash": done.head.hash,
        "archive_head_seq": None if archived is None else archived.seq,
        "verify_ok": report.ok,
        "link_outbox": done.link_outbox,
        "link_witness": None if witness is None else {
            "head_seq": witness.head_seq, "head_hash": witness.head_hash,
            "message_seq": witness.message_seq,
        },
        "status_head_seq": None if status is None else status.get("head_seq"),
        "may_be_missing": missing,
    }
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(
            f"restored table {args.table}: {done.rows} rows to {args.out}, head "
            f"{done.head.seq}:{done.head.hash} (the archive's); ledger verify: "
            f"{'ok' if report.ok else 'FAILED'}"
        )
        if done.link_outbox:
            print(f"  {done.link_outbox} link message(s) unanswered: back in the link outbox")
        for line in missing:
            print(f"  MAY BE MISSING: rows after {done.head.seq} ({line}): they were only on "
                  "the dead board; reconcile before opening (docs/operations.md)")
        if not missing:
            print("  no witness shows a row after the archived head")
    return Exit.OK if report.ok and not missing else Exit.FAILED
