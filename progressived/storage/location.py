"""Where a ledger lives: a file path, or a PostgreSQL URL (a link ledger, docs/link.md).

The commands take either where they take a ledger (``--db``, ``--link-db``); a URL is kept
as text (``pathlib`` would fold its ``//``), and shown without a password.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit, urlunsplit

Location = Path | str
SCHEMES = ("postgresql://", "postgres://")


def is_url(location: Location) -> bool:
    """A PostgreSQL URL (``postgresql://`` or ``postgres://``), not a file."""
    return isinstance(location, str) and location.startswith(SCHEMES)


def parse(text: str) -> Location:
    """A command-line argument: a URL stays text, anything else is a path."""
    return text if text.startswith(SCHEMES) else Path(text)


def shown(location: Location) -> str:
    """For messages and reports: the path, or the URL without a password."""
    if not is_url(location):
        return str(location)
    parts = urlsplit(str(location))
    if parts.password is None:
        return str(location)
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0].split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[1]}"))


def has_password(url: str) -> bool:
    """Whether a URL carries a password (``user:secret@`` or ``?password=``)."""
    parts = urlsplit(url)
    return parts.password is not None or "password" in parse_qs(parts.query)
