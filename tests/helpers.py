"""Small builders shared by the engine tests."""

from __future__ import annotations

from fractions import Fraction

from progressived.config.paytables import find_paytable
from progressived.core.money import UNITS_PER_CENT, UNITS_PER_DOLLAR
from progressived.core.params import AboveLimit, MeterParams, Policy, TableParams
from progressived.engine import Command, Decision, TableState, accounts, decide, initial_state
from progressived.engine.simulate import Simulation
from tests.conftest import PAYTABLES

DOLLAR = UNITS_PER_DOLLAR
CENT = UNITS_PER_CENT


def table(
    paytable: str = "tcp-sd-1",
    *,
    rate: str = "0",
    reserve_rate: str = "0",
    seed: int = 1000 * DOLLAR,
    start: int | None = None,
    limit: int | None = None,
    above_limit: AboveLimit = AboveLimit.RESERVE,
    policy: Policy = Policy.SEQUENTIAL,
    seats: int = 7,
    wager: int | None = None,
    extra_meters: tuple[MeterParams, ...] = (),
) -> TableParams:
    main = MeterParams(
        id="main",
        seed=seed,
        rate=Fraction(rate),
        reserve_rate=Fraction(reserve_rate),
        limit=limit,
        above_limit=above_limit,
        start=start,
    )
    return TableParams(
        table_id="t1",
        paytable=find_paytable(paytable, PAYTABLES),
        meters=(main, *extra_meters),
        seats=seats,
        wager=wager,
        policy=policy,
    )


def sim(params: TableParams, script: str) -> Simulation:
    s = Simulation(params)
    s.run_script(script.strip().splitlines())
    return s


def meter(state: TableState, meter_id: str = "main") -> int:
    return state.balance(accounts.meter(meter_id))


def reserve(state: TableState, meter_id: str = "main") -> int:
    return state.balance(accounts.reserve(meter_id))


def fresh(params: TableParams) -> TableState:
    return initial_state(params).state


def run(
    params: TableParams, state: TableState, *commands: Command
) -> tuple[TableState, list[Decision]]:
    decisions = []
    for command in commands:
        decision = decide(params, state, command)
        decisions.append(decision)
        state = decision.state
    return state, decisions


def pays(s: Simulation, round_no: int) -> list[tuple[int, str, str, int]]:
    for rnd in s.report()["rounds"]:
        if rnd["round"] == round_no:
            return [(p["seat"], p["hand"], p["source"], p["cents"]) for p in rnd["pays"]]
    raise AssertionError(f"no round {round_no}")
