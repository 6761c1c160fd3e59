"""``progressived archive --config FILE [--init]``: the archive process (docs/archive.md).

Expected faults end with one line and the exit codes of docs/operations.md: a bad file 2,
no archive in the database 3 (``--init`` first), a database holding something else 4, the
lease lost while serving 5 (systemd starts it again, as a standby), ``--init`` over an
archive 6.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from progressived.cli.common import Exit, ledger_status, print_config_error
from progressived.config.table import ConfigError
from progressived.ledger import LedgerError
from progressived.runtime import logs
from progressived.runtime.clock import utc_now
from progressived.runtime.listen import ListenError


def run(path: Path, *, init: bool = False) -> int:
    from progressived.archive.service.config import load_archive_config  # noqa: PLC0415

    try:
        config = load_archive_config(path)
    except ConfigError as exc:
        print_config_error("progressived", exc)
        return Exit.USAGE
    if init:
        return _init(config.database.url, config.archive.id, config.database.password())
    from progressived.archive.service.service import ArchiveService  # noqa: PLC0415 - heavy

    logs.configure(config.log.format, config.log.level)
    service = ArchiveService(config)
    try:
        status = asyncio.run(service.run())
    except LedgerError as exc:
        print(f"progressived archive: {exc}", file=sys.stderr)
        return int(ledger_status(exc))
    except ListenError as exc:  # the metrics port is taken: nothing started
        print(f"progressived archive: {exc}", file=sys.stderr)
        return Exit.CANNOT_LISTEN
    if status == Exit.INTERRUPTED:
        print("progressived: interrupted", file=sys.stderr)
    return status


def is_archive_file(path: Path) -> bool:
    """An archive's configuration: ``[archive]`` and ``[database]``, no ``[table]`` (False if
    unreadable: the caller's loader says why)."""
    from progressived.config.table import read_toml  # noqa: PLC0415

    try:
        data = read_toml(path)
    except ConfigError:
        return False
    return "archive" in data and "database" in data and "table" not in data


def check_config(path: Path) -> int:
    """``progressived check-config ARCHIVE.toml``: the file alone (the database is checked
    when the archive starts)."""
    from progressived.archive.service.config import load_archive_config  # noqa: PLC0415

    try:
        config = load_archive_config(path)
    except ConfigError as exc:
        print_config_error("progressived", exc)
        return Exit.USAGE
    tables = len(config.archive.tables)
    print(f"{config.source}: ok (archive {config.archive.id}, {tables} tables)")
    return Exit.OK


def _init(url: str, archive_id: str, password: str | None) -> int:
    from progressived.archive.store.database import ArchiveStore  # noqa: PLC0415
    from progressived.storage.location import shown  # noqa: PLC0415

    try:
        store = ArchiveStore.open_archive(url, "new", archive_id, utc_now(), password=password)
    except LedgerError as exc:
        print(f"progressived archive --init: {exc}", file=sys.stderr)
        return int(ledger_status(exc))
    store.close()
    print(f"progressived archive --init: made archive {archive_id} in {shown(url)}")
    return Exit.OK
