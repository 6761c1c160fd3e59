"""Named ledger accounts and the accounting identity.

Balances are signed: sources of money (wagers collected, seed funding, the tray) go
negative as they give, holders (meter, reserve, overflow, pending awards, paid totals) go
positive. Every event's postings sum to zero, so all balances always sum to zero.

The identity the controller holds in every state, per meter, to the last unit::

    seed funding + adjustments + contributions = meter + reserve + overflow + pending + paid

where contributions = wagers collected (here and at linked tables) - the house's retained
part, summed over the table's meters (a wager may contribute to several levels).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from progressived.engine.events import Posting, Postings

WAGERS = "wagers"  # wagers collected at this table (source)
LINKED_WAGERS = "linked_wagers"  # wagers collected at linked tables for this meter (source)
HOUSE_RETAINED = "house_retained"  # the part of each wager not contributed
TRAY = "tray"  # the table's tray (source of fixed pays and envy)
PAID_TRAY = "paid_tray"  # fixed pays from the tray
PAID_ENVY = "paid_envy"  # envy bonuses


def meter(meter_id: str) -> str:
    return f"meter:{meter_id}"


def reserve(meter_id: str) -> str:
    return f"reserve:{meter_id}"


def overflow(meter_id: str) -> str:
    return f"overflow:{meter_id}"


def seed_funding(meter_id: str) -> str:
    return f"seed_funding:{meter_id}"


def adjustments(meter_id: str) -> str:
    """Documented corrections of the meter (source): an increase is funded from here."""
    return f"adjustments:{meter_id}"


def pending(meter_id: str) -> str:
    """Meter awards keyed and awaiting the supervisor."""
    return f"award_pending:{meter_id}"


def paid_attendant(meter_id: str) -> str:
    """Meter awards confirmed and paid by an attendant."""
    return f"paid_attendant:{meter_id}"


def holders(meter_id: str) -> tuple[str, ...]:
    """Accounts that hold money owed to players for this meter: never negative."""
    return (meter(meter_id), reserve(meter_id), overflow(meter_id), pending(meter_id))


def identity_gap(balances: Mapping[str, int], meter_ids: Iterable[str]) -> int:
    """Left side minus right side of the identity over all of a table's meters (0 when it holds).

    Contributions are the wagers collected less the house's retained part; sources are
    negative balances, so the left side is their negation.
    """
    ids = tuple(meter_ids)
    funded = -sum(balances.get(seed_funding(m), 0) + balances.get(adjustments(m), 0) for m in ids)
    contributed = -(
        balances.get(WAGERS, 0) + balances.get(LINKED_WAGERS, 0) + balances.get(HOUSE_RETAINED, 0)
    )
    held = sum(balances.get(account, 0) for m in ids for account in holders(m))
    paid = sum(balances.get(paid_attendant(m), 0) for m in ids)
    return funded + contributed - held - paid


_COPYABLE = (dict, MappingProxyType)


def post(balances: Mapping[str, int], postings: Iterable[Posting]) -> Mapping[str, int]:
    """``balances`` with ``postings`` added (a new read-only mapping; the input is unchanged)."""
    postings = tuple(postings)
    if not postings:
        return balances
    # A MappingProxyType's copy() is its dict's, in C; dict() of a proxy walks its keys.
    out = balances.copy() if type(balances) in _COPYABLE else dict(balances)  # type: ignore[attr-defined]
    for posting in postings:
        out[posting.account] = out.get(posting.account, 0) + posting.units
    return MappingProxyType(out)


def reverse(postings: Postings) -> Postings:
    """The exact reverse of ``postings`` (last leg first)."""
    return tuple(Posting(p.account, -p.units) for p in reversed(postings))
