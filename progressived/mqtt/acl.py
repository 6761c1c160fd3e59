"""The floor's Mosquitto ACL and accounts, written from the controllers' configuration.

Why it must be written per floor: a table may publish on its link's request topic
(``<prefix>/link/<link>/from/<table>``) and nothing else may. A Mosquitto ``pattern`` line
applies to every account — signs and link controllers included — so that rule cannot be a
pattern; each member table gets a ``user`` block naming its link, and so the ACL changes
whenever a link's ``tables`` change. ``progressivectl broker-acl`` writes it (and the
``mosquitto_passwd`` steps for every account) from the link controllers' files, checking
the tables' files against them (docs/mqtt.md, "The broker").

The table topics stay one ``pattern`` (``<prefix>/table/%u/#``): a table on no link needs
nothing beyond its password entry. No pattern without ``%u``: Mosquitto warns at every
start about one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

PASSWD = "/etc/mosquitto/passwd"


class AclError(ValueError):
    """The accounts cannot make one ACL (one line for the operator)."""


@dataclass(frozen=True, slots=True)
class LinkAccounts:
    """One link as the ACL sees it: its controller's user name and its member tables."""

    link_id: str
    username: str
    tables: tuple[str, ...]


def floor_acl(
    prefix: str,
    links: Sequence[LinkAccounts],
    signs: Sequence[str],
    tables: Sequence[str] = (),
    archive: str | None = None,
) -> str:
    """The ACL file: tables, each link with its member tables, the archive, signs (read
    only). ``tables``: tables on no link (nothing of their own in the file; checked only);
    ``archive``: the archive's user name (docs/archive.md), if there is one."""
    check_accounts(links, signs, tables, archive)
    p = prefix
    out = [
        "# Controllers: user name = table id. Each writes only under its own table.",
        f"pattern write {p}/table/%u/#",
    ]
    for link in links:
        lid = link.link_id
        out += [
            "",
            f"# The link controller of {lid} (user name = link id): reads its tables' "
            "messages,",
            "# answers each table, and is the only writer of the linked meter.",
            f"user {link.username}",
            f"topic read  {p}/link/{lid}/from/+",
            f"topic write {p}/link/{lid}/to/#",
            f"topic write {p}/link/{lid}/meter/#",
            "",
            f"# The tables of {lid} (user name = table id): each writes only its own messages "
            "to",
            "# the link, and reads only the link's replies to it and the linked meters.",
        ]
        for index, table in enumerate(link.tables):
            out += [] if index == 0 else [""]
            out += [
                f"user {table}",
                f"topic write {p}/link/{lid}/from/{table}",
                f"topic read  {p}/link/{lid}/to/{table}",
                f"topic read  {p}/link/{lid}/meter/#",
            ]
    if archive is not None:
        out += [
            "",
            "# Tables archive their ledgers: each writes only its own rows and reads only its "
            "own head.",
            f"pattern write {p}/archive/%u/rows",
            f"pattern read  {p}/archive/%u/head",
            "",
            "# The archive (user name = [archive] id): reads every table's rows, answers every "
            "table.",
            f"user {archive}",
            f"topic read  {p}/archive/+/rows",
            f"topic write {p}/archive/+/head",
        ]
    if signs:
        out += ["", "# Signs (user names sign-*): read only."]
    for index, sign in enumerate(signs):
        out += [] if index == 0 else [""]
        out += [f"user {sign}", f"topic read {p}/table/#", f"topic read {p}/link/+/meter/#"]
    return "\n".join(out) + "\n"


def check_accounts(
    links: Sequence[LinkAccounts],
    signs: Sequence[str],
    tables: Sequence[str] = (),
    archive: str | None = None,
) -> None:
    """Every account once: a table on one link only, no name shared by two roles."""
    owner: dict[str, str] = {}

    def claim(name: str, role: str) -> None:
        if not name or any(c.isspace() for c in name) or name.startswith("#"):
            raise AclError(f"{role}: {name!r} cannot be a Mosquitto user name")
        if name in owner:
            raise AclError(f"{name!r} is both {owner[name]} and {role}: one account, one role")
        owner[name] = role

    for link in links:
        claim(link.username, f"the link controller of {link.link_id}")
    for link in links:
        for table in link.tables:
            claim(table, f"a table of {link.link_id}")
    for table in dict.fromkeys(tables):
        claim(table, "a table")
    for sign in signs:
        claim(sign, "a sign")
    if archive is not None:
        claim(archive, "the archive")


def passwd_steps(accounts: Sequence[str], path: str = PASSWD) -> str:
    """The commands that create or update every account: each ``mosquitto_passwd`` prompts
    for its password (the file is created empty first if missing; an existing one keeps its
    other accounts), then the file's owner and mode (Mosquitto's user only)."""
    lines = [f"touch {path}"]
    lines += [f"mosquitto_passwd {path} {user}" for user in accounts]
    lines.append(f"chown mosquitto: {path} && chmod 0600 {path}")
    return "\n".join(lines) + "\n"
