"""The receipt printer where the supervisor stands: payout slips as ESC/POS, through
python-escpos (docs/slips.md, "Printing"). The queue that makes printing durable lives in
the ledger and the daemon (:mod:`progressived.daemon.slip_printer`)."""

import logging


def _import_escpos_without_its_log_handler() -> None:
    """python-escpos calls ``logging.basicConfig()`` when imported (escpos/capabilities.py):
    before the daemon configures its logs, that puts a plain-text handler on the root logger,
    and every library line then reaches the journal twice, once not as JSON. Import it here,
    first, and take back any handler the import added."""
    root = logging.getLogger()
    before = list(root.handlers)
    import escpos.capabilities  # noqa: F401, PLC0415 - imported for its side effect, undone

    for handler in [h for h in root.handlers if h not in before]:
        root.removeHandler(handler)


_import_escpos_without_its_log_handler()
