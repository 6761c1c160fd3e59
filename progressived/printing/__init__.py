"""The receipt printer where the supervisor stands: payout slips as ESC/POS, through
python-escpos (docs/slips.md, "Printing"). The queue that makes printing durable lives in
the ledger and the daemon (:mod:`progressived.daemon.slip_printer`)."""
