"""A posting: one leg of a double-entry movement of money between named accounts.

A module of its own so that both the events (:mod:`progressived.engine.events`) and the
meter requests (:mod:`progressived.engine.meter_requests`, whose awards and refunds carry the
postings that made them) can name it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Posting:
    """One leg of a double-entry posting: ``units`` added to ``account`` (may be negative)."""

    account: str
    units: int


Postings = tuple[Posting, ...]
