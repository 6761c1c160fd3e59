"""Importing the printer's library leaves the daemon's logs alone.

python-escpos calls ``logging.basicConfig()`` when imported: a plain-text handler on the
root logger, and every library line in the journal twice, once not as JSON (seen as
``WARNING:mqtt:There are 11 pending publish calls.`` beside its JSON line)."""

from __future__ import annotations

import subprocess
import sys

CHECK = (
    "import logging, progressived.daemon.assembly, progressived.printing.network; "
    "print(len(logging.getLogger().handlers))"
)


def test_importing_the_printer_adds_no_root_log_handler() -> None:
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0", out
