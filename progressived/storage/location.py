"""Where a ledger lives: a file path, or a PostgreSQL URL (a link ledger, docs/link.md).

The commands take either where they take a ledger (``--db``, ``--link-db``); a URL is kept
as text (``pathlib`` would fold its ``//``), and shown without a password.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, unquote_plus, urlsplit, urlunsplit

Location = Path | str
SCHEMES = ("postgresql://", "postgres://")


def is_url(location: Location) -> bool:
    """A PostgreSQL URL (``postgresql://`` or ``postgres://``), not a file."""
    return isinstance(location, str) and location.startswith(SCHEMES)


def parse(text: str) -> Location:
    """A command-line argument: a URL stays text, anything else is a path."""
    return text if text.startswith(SCHEMES) else Path(text)


SECRET_PARAMETERS = frozenset({"password", "sslpassword"})  # libpq's parameters that are secrets


def shown(location: Location) -> str:
    """For messages and reports: the path, or the URL without a password.

    libpq takes a password in the URL's user part (``user:secret@``) or as a query parameter
    (``?password=secret``; ``sslpassword`` is the client key's): each is shown as ``***``,
    every other part as given.
    """
    if not is_url(location):
        return str(location)
    parts = urlsplit(str(location))
    if parts.password is not None:
        netloc = parts.netloc.rsplit("@", 1)
        user = netloc[0].split(":", 1)[0]
        parts = parts._replace(netloc=f"{user}:***@{netloc[1]}")
    if parts.query:
        fields = []
        for field in parts.query.split("&"):
            key, sep, _ = field.partition("=")
            secret = unquote_plus(key).strip().lower() in SECRET_PARAMETERS
            fields.append(f"{key}{sep or '='}***" if secret else field)
        parts = parts._replace(query="&".join(fields))
    return urlunsplit(parts)


def has_password(url: str) -> bool:
    """Whether a URL carries a password (``user:secret@`` or ``?password=``)."""
    parts = urlsplit(url)
    return parts.password is not None or "password" in parse_qs(parts.query)
