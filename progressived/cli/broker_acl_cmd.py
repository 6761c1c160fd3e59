"""``progressivectl broker-acl``: the floor broker's ACL (or its accounts) from the files.

Reads the link controllers' files (each link's id, controller user name and member tables)
and, to check them, the tables' files (each table must log in with its table id as user
name, on the same topic prefix, and a linked table must be listed by its link). Prints the
Mosquitto ACL, or with ``--passwd`` the ``mosquitto_passwd`` commands for every account
(docs/mqtt.md, "The broker"). Exit 0; 2 a file that cannot be read or does not fit.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from progressived.cli.common import Exit


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "broker-acl",
        help="the floor broker's Mosquitto ACL (or its accounts) from the configuration",
        description="Print the Mosquitto ACL of the floor's broker from the link controllers' "
        "files: each table writes only under its own table and only its own messages to its "
        "link, each link controller answers only its tables, signs only read. The tables' "
        "files are checked against it (user name = table id, the same prefix, listed by "
        "their link). --passwd prints the mosquitto_passwd commands for every account "
        "instead. Exit 0; 2 a file that cannot be read or does not fit.",
    )
    p.add_argument(
        "--link-config",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="a link controller's file (repeat for each link)",
    )
    p.add_argument(
        "--table-config",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="a table's file, checked against the links (repeat for each table)",
    )
    p.add_argument(
        "--sign",
        action="append",
        default=[],
        metavar="USER",
        help="a sign's user name, read only (repeat for each sign)",
    )
    p.add_argument(
        "--archive",
        metavar="USER",
        help="the archive's user name (docs/archive.md): its account, and the tables' rows "
        "and head topics",
    )
    p.add_argument(
        "--passwd",
        action="store_true",
        help="print the mosquitto_passwd commands for every account instead of the ACL",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from progressived.config.daemon import load_daemon_config  # noqa: PLC0415
    from progressived.config.table import ConfigError  # noqa: PLC0415
    from progressived.link.runtime.config import load_link_config  # noqa: PLC0415
    from progressived.mqtt.acl import AclError, LinkAccounts, floor_acl, passwd_steps  # noqa: PLC0415

    def refuse(line: str) -> int:
        print(f"progressivectl broker-acl: {line}", file=sys.stderr)
        return Exit.USAGE

    if not args.link_config and not args.table_config and not args.sign and not args.archive:
        return refuse("name the link controllers' files (--link-config), tables or signs")
    try:
        link_files = [load_link_config(path) for path in args.link_config]
        table_files = [load_daemon_config(path) for path in args.table_config]
    except ConfigError as exc:
        return refuse(str(exc))
    prefixes = {c.mqtt.prefix for c in link_files} | {c.mqtt.prefix for c in table_files}
    if len(prefixes) > 1:
        return refuse(f"the files use different MQTT prefixes: {', '.join(sorted(prefixes))}")
    links = [
        LinkAccounts(
            c.params.link_id, c.mqtt.username or c.params.link_id, tuple(sorted(c.params.tables))
        )
        for c in link_files
    ]
    members = {table: link for link in links for table in link.tables}
    for config in table_files:
        table = config.params.table_id
        where = f"{config.source}: mqtt.username"
        if config.mqtt.username != table:
            given = "not set" if config.mqtt.username is None else repr(config.mqtt.username)
            return refuse(
                f"{where}: {given}; it must be the table id {table!r} (the ACL's user name)"
            )
        if config.link is not None and members.get(table) is None:
            return refuse(
                f"{config.source}: link.id: table {table!r} joins link {config.link.id!r}, "
                "which no --link-config lists it in"
            )
        if config.link is not None and members[table].link_id != config.link.id:
            return refuse(
                f"{config.source}: link.id: table {table!r} joins {config.link.id!r} but is "
                f"listed by {members[table].link_id!r}"
            )
    singles = list(
        dict.fromkeys(c.params.table_id for c in table_files if c.params.table_id not in members)
    )
    try:
        acl = floor_acl(
            prefixes.pop() if prefixes else "progressive",
            links,
            args.sign,
            tables=singles,
            archive=args.archive,
        )
    except AclError as exc:
        return refuse(str(exc))
    if args.passwd:
        accounts = [*members, *singles, *(link.username for link in links)]
        archive = [] if args.archive is None else [args.archive]
        print(passwd_steps([*accounts, *args.sign, *archive]), end="")
    else:
        print(acl, end="")
    return Exit.OK
