"""Payout slips (pure): what a slip says, decided from the engine's events and the site's
rules; the ledger journals them (docs/slips.md). No I/O, no clock: printing and PDFs are
adapters (:mod:`progressived.printing`)."""
