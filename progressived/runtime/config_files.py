"""The one way each configuration file is read: TOML files, password files, strict models.

Every command reads files an operator wrote: the table's and the link's configuration,
paytables, sign files (TOML), and the secrets they name (password files). Each was read by
its own few lines before, and two password readers disagreed about what the file holds (one
took the whole file, one its first line). Here:

* :func:`read_toml`: a TOML file as a dict, floats as exact :class:`~decimal.Decimal` (money
  is never a binary float), an unreadable or malformed file one line naming it, raised as
  the caller's own error class (each command maps its error to its exit status).
* :func:`read_password_file`: the password of a password file, as docs/configuration.md
  ("Password files") defines it for every file the product reads.
* :class:`StrictModel`: the base of every configuration section's model: an unknown key is
  refused (a misspelt key must not be silently ignored) and a validated section is frozen.
"""

from __future__ import annotations

import tomllib
from decimal import Decimal
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ["ConfigFileError", "PasswordFileError", "StrictModel", "read_password_file", "read_toml"]


class ConfigFileError(ValueError):
    """A configuration file that cannot be read or parsed (one line naming it)."""


class PasswordFileError(ConfigFileError):
    """A password file that cannot be read or holds no password (one line naming it)."""


class StrictModel(BaseModel):
    """A configuration section: unknown keys refused, frozen once validated."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def read_toml(path: Path, error: type[Exception] = ConfigFileError) -> dict[str, Any]:
    """The TOML file at ``path`` (floats as Decimals); ``error`` (one line) if it cannot be
    read or is not valid TOML."""
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle, parse_float=Decimal)
    except OSError as exc:
        raise error(f"{path}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{path}: not valid TOML: {exc}") from None


def read_password_file(path: Path) -> str:
    """The password held by the file at ``path``: its first line, without the line end and
    the blanks around it (a file made by ``echo``, ``printf`` or ``openssl rand`` alike);
    what follows the first line is ignored. :class:`PasswordFileError` if the file cannot be
    read, is not UTF-8, or its first line is empty."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PasswordFileError(
            f"cannot read the password file {path}: {exc.strerror or exc}"
        ) from None
    except UnicodeDecodeError:
        raise PasswordFileError(f"the password file {path} is not UTF-8 text") from None
    lines = text.splitlines()
    password = lines[0].strip() if lines else ""
    if not password:
        raise PasswordFileError(f"the password file {path} holds no password on its first line")
    return password
