"""Refusing a configuration that would abandon a local meter's money.

A local meter's money is held in the table's own ledger: the part of its amount above (or
below) its seed, its reserve, its overflow, its awards awaiting the supervisor and the
contributions of a round not yet reconciled (``meter:M``, ``reserve:M``, ``overflow:M``,
``award_pending:M``; docs/ledger.md, "Accounts and the identity"). A linked meter's money
is the link's (docs/link.md, "Accounting"), and a meter the configuration no longer names
is played, shown and paid by nobody. So a ledger continued with a configuration that makes
such a meter linked, or drops it, would keep that money where nothing shows or pays it:
the daemon would record the change and play on. That is refused before anything is
journaled, with one line naming the meter, the amounts and what to do (docs/operations.md,
"Turning a table into a linked one"); the exit status is 4, as for a ledger that is not
this configuration's. A settled meter (its amount exactly its seed, nothing else) may be
converted: the seed was the house's (``seed_funding:M`` balances it) and stays recorded.

Which meters were local is the ledger's own record (the parameters in force:
``ledger_created``'s, then each ``parameter_changed``; :mod:`progressived.ledger.parameters`),
so a meter already linked or dropped by an earlier, accepted change is not judged again.
:func:`held` is pure; :func:`check` reads the recorded parameters on the writer's connection
(``Ledger.open``), :func:`check_file` a file read-only (``check-config``, and ``run`` before
it starts anything).
"""

from __future__ import annotations

import enum
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from progressived.core.money import UNITS_PER_CENT, display, display_exact
from progressived.core.params import TableParams
from progressived.engine import accounts
from progressived.engine.state import Phase, TableState
from progressived.ledger import parameters
from progressived.ledger.commit import translate
from progressived.ledger.errors import LedgerError, LedgerMismatch
from progressived.ledger.readonly import connect_untouched
from progressived.ledger.recovery import recover

# Where the procedure is written down, named in the refusal.
PROCEDURE = 'docs/operations.md, "Turning a table into a linked one"'
# "meter:", "reserve:", "overflow:", "award_pending:": the accounts that hold a meter's money
_HOLDER_PREFIXES = accounts.holders("")


class ConversionRefused(LedgerMismatch):
    """The configuration would link or drop a local meter that holds money in this ledger.

    A :class:`LedgerMismatch` (exit status 4): this ledger and this configuration do not go
    together, and nothing was written.
    """


class Change(enum.StrEnum):
    """What the configuration does to a meter the ledger records as local."""

    LINKED = "linked"  # the meter is a linked meter now (its money would be the link's)
    DROPPED = "dropped"  # the configuration names no such meter any more


@dataclass(frozen=True, slots=True)
class HeldMoney:
    """A local meter the configuration links or drops, and the money the ledger holds on it."""

    meter: str
    change: Change
    link: str | None  # the link it would belong to (LINKED)
    meter_units: int
    seed_units: int | None  # the recorded seed; None when the ledger never recorded one
    reserve_units: int
    overflow_units: int
    pending_units: int  # awards keyed on it, awaiting the supervisor
    round_open: bool  # a locked round contributed to it or claims it

    @property
    def above_seed(self) -> int:
        """The meter's amount less its seed (all of it when no seed was recorded)."""
        return self.meter_units - (self.seed_units or 0)

    @property
    def holds_money(self) -> bool:
        return bool(
            self.above_seed
            or self.reserve_units
            or self.overflow_units
            or self.pending_units
            or self.round_open
        )

    def describe(self) -> str:
        """``meter main, linked to link-a, holds $1,234.56 ($234.56 above its seed ...)``."""
        what = (
            f"the configuration makes meter {self.meter} linked (link {self.link})"
            if self.change is Change.LINKED
            else f"the configuration no longer has meter {self.meter}"
        )
        if self.seed_units is None:
            amount = f"{_money(self.meter_units)} on the meter (no seed recorded)"
        else:
            above = self.above_seed
            side = "above" if above >= 0 else "below"
            amount = (
                f"{_money(self.meter_units)} on the meter ({_money(abs(above))} {side} its "
                f"seed {_money(self.seed_units)})"
            )
        parts = [amount]
        for name, units in (
            ("reserve", self.reserve_units),
            ("overflow", self.overflow_units),
            ("awaiting the supervisor", self.pending_units),
        ):
            if units:
                parts.append(f"{_money(units)} {name}")
        if self.round_open:
            parts.append("a round not yet reconciled")
        return f"{what}, but this ledger holds its money: {', '.join(parts)}"


def _money(units: int) -> str:
    """Whole cents as a sign shows them; a sub-cent amount exactly (money is never rounded)."""
    return display(units) if units % UNITS_PER_CENT == 0 else display_exact(units)


def recorded_local(recorded: Mapping[str, Any]) -> frozenset[str]:
    """The meters the recorded parameters have as local: those with a seed or a rate."""
    return frozenset(
        key.removeprefix("meters.").rsplit(".", 1)[0]
        for key in recorded
        if key.startswith("meters.") and key.endswith((".seed_units", ".rate"))
    )


def held(
    state: TableState, recorded: Mapping[str, Any] | None, params: TableParams
) -> tuple[HeldMoney, ...]:
    """Every meter the ledger records as local that ``params`` links or drops and that holds
    money, by meter id. A meter an earlier change already linked or dropped (recorded) is
    not judged again. Pure."""
    local = _funded(state) if recorded is None else recorded_local(recorded)
    found: list[HeldMoney] = []
    for meter_id in sorted(local):
        if meter_id not in params.meter_ids:
            change, link = Change.DROPPED, None
        elif params.is_linked(meter_id):
            change, link = Change.LINKED, params.meter(meter_id).link
        else:
            continue  # still local: its money is still shown and paid
        seed = None if recorded is None else recorded.get(f"meters.{meter_id}.seed_units")
        money = HeldMoney(
            meter=meter_id,
            change=change,
            link=link,
            meter_units=state.balance(accounts.meter(meter_id)),
            seed_units=seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
            reserve_units=state.balance(accounts.reserve(meter_id)),
            overflow_units=state.balance(accounts.overflow(meter_id)),
            pending_units=state.balance(accounts.pending(meter_id)),
            round_open=_in_open_round(state, meter_id),
        )
        if money.holds_money:
            found.append(money)
    return tuple(found)


def _funded(state: TableState) -> frozenset[str]:
    """Meters the ledger funded, or that any holder account names (for a ledger that never
    recorded its parameters: every such meter was local, a linked one holds nothing)."""
    named = {
        account.split(":", 1)[1]
        for account, units in state.balances.items()
        if units and account.startswith(_HOLDER_PREFIXES)
    }
    return state.opened | frozenset(named)


def _in_open_round(state: TableState, meter_id: str) -> bool:
    """A locked round whose wagers contributed to the meter, or that has an award on it."""
    if state.phase is not Phase.LOCKED:
        return False
    mine = set(accounts.holders(meter_id))
    contributed = any(
        posting.account in mine for _seat, postings in state.wager_postings for posting in postings
    )
    return contributed or any(award.meter == meter_id for award in state.awards)


def refusal(found: tuple[HeldMoney, ...]) -> str:
    """The one line that says what would be lost and what to do."""
    meters = "; ".join(money.describe() for money in found)
    names = ", ".join(money.meter for money in found)
    return (
        f"{meters}; nothing was journaled. Put {names} back in the configuration as it was "
        f"and settle the money in this ledger first (progressivectl meter-transfer, "
        f"meter-adjust), or keep this ledger as the record and start the new configuration "
        f"on a new ledger ({PROCEDURE})"
    )


def check(conn: sqlite3.Connection, path: Path, state: TableState, params: TableParams) -> None:
    """Raise :class:`ConversionRefused` when continuing the ledger on ``conn`` (its
    committed ``state``) with ``params`` would abandon a local meter's money."""
    try:
        recorded = parameters.last_recorded(conn)
    except (sqlite3.Error, ValueError) as exc:
        raise LedgerError(f"ledger {path}: cannot read its recorded parameters: {exc}") from None
    if found := held(state, recorded, params):
        raise ConversionRefused(f"ledger {path}: {refusal(found)}")


def check_file(path: Path, params: TableParams) -> None:
    """:func:`check` on the ledger file at ``path`` read as ``check-config`` reads it: the
    committed state recovered read-only, with no file made beside it
    (:func:`~progressived.ledger.readonly.connect_untouched`). :class:`ConversionRefused`,
    or the :class:`LedgerError` opening it would raise (a damaged chain, say)."""
    try:
        conn = connect_untouched(path)
    except sqlite3.Error as exc:
        raise translate(exc, path) from None
    try:
        head, _ = recover(conn, path)
        check(conn, path, head.state, params)
    finally:
        conn.close()
