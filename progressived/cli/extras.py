"""The package's optional parts (pyproject.toml's extras) and the line said when one is missing.

A table or link controller installs only the core dependencies (requirements/progressived.txt);
the web sign's server (aiohttp) is the ``web`` extra (requirements/web.txt), so a command
that needs it on a machine without it ends with one line naming the extra and how to install
it, and exit status 8 (docs/operations.md, "Exit codes"), not an ImportError's traceback.
"""

from __future__ import annotations

import importlib

WEB_SERVER = "progressived.signs.web.server"
INSTALL_WEB = (
    "pip install 'progressived[web]' (a site: pip install --require-hashes "
    "-r requirements/web.txt, docs/sign.md)"
)


def web_missing(what: str) -> str | None:
    """Why ``what`` cannot run here (the ``web`` extra is missing), or None when it can.

    Imports the web sign's server module, so whatever it needs (aiohttp and its own
    dependencies) is found now or named.
    """
    try:
        importlib.import_module(WEB_SERVER)
    except ModuleNotFoundError as exc:
        return (
            f"{what} needs the web extra, which is not installed here (no module "
            f"{exc.name!r}): {INSTALL_WEB}"
        )
    return None
