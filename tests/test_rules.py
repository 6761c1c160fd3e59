"""One example per rule clause the engine implements, named after the clause.

S.D. = S.D. Admin. R. 20:18:16 (15.02 Three Card Poker, 15.15 Ultimate Texas Hold'em);
PA = the Pennsylvania Three Card Poker rack card. Texts in ../shared/rules/.
"""

from __future__ import annotations

from progressived.board.lights import Light, lights
from progressived.engine import Lock, Sensors
from tests.helpers import CENT, DOLLAR, fresh, meter, pays, reserve, run, sim, table


def test_sd_15_02_4_lock_locks_in_the_bets_on_the_sensors_and_lights_them() -> None:
    params = table()
    state, _ = run(params, fresh(params), Sensors(present=frozenset({2, 4})), Lock())
    assert state.locked == {2, 4}
    shown = lights(state, params.seats)
    assert shown[2] is shown[4] is Light.LOCKED
    assert shown[1] is Light.IDLE


def test_sd_15_02_6_sensor_stays_lit_after_the_dealer_removes_the_wager() -> None:
    params = table()
    state, _ = run(
        params, fresh(params), Sensors(present=frozenset({3})), Lock(), Sensors(present=frozenset())
    )
    assert lights(state, params.seats)[3] is Light.LOCKED
    assert state.locked == {3}


def test_sd_15_02_6_progressive_wager_collected_before_cards_contributes_to_meter() -> None:
    s = sim(table(rate="0.15", reserve_rate="0.05"), "bet 1\nbet 2\nlock")
    assert meter(s.state) == 1000 * DOLLAR + 30 * CENT
    assert reserve(s.state) == 10 * CENT


def test_sd_15_02_16_paytable_1_straight_or_better_wins_for_1() -> None:
    s = sim(table("tcp-sd-1"), "bet 7\nlock\nkey 7 straight\nreconcile")
    assert pays(s, 1) == [(7, "straight", "tray", 600)]


def test_sd_15_02_16_paytable_2_a_straight_is_not_a_winner() -> None:
    s = sim(table("tcp-sd-2"), "bet 7\nlock\nkey 7 straight\nreconcile")
    assert s.rejected and "not in paytable tcp-sd-2" in s.rejected[0]["reason"]
    assert pays(s, 1) == []


def test_sd_15_02_16_original_wager_is_not_returned() -> None:
    # "500 for 1" on $1 is $500, not $501.
    s = sim(table("tcp-sd-1"), "bet 1\nlock\nkey 1 akq-suited\nreconcile")
    assert (1, "akq-suited", "tray", 50_000) in pays(s, 1)


def test_sd_15_02_16_meter_seeded_at_1000() -> None:
    assert meter(fresh(table())) == 1000 * DOLLAR


def test_sd_15_02_16_a_i_percentage_pays_come_from_the_meter() -> None:
    s = sim(
        table(start=4321 * DOLLAR + 99 * CENT), "bet 2\nlock\nkey 2 akq-spades\nconfirm\nreconcile"
    )
    assert pays(s, 1) == [(2, "akq-spades", "meter", 432_199)]


def test_sd_15_02_16_a_ii_other_hands_come_from_the_tray_not_the_meter() -> None:
    params = table(rate="0.1")
    s = sim(params, "bet 1\nlock\nkey 1 straight-flush")
    before = meter(s.state)
    s.run_script(["reconcile"])
    assert meter(s.state) == before
    assert pays(s, 1) == [(1, "straight-flush", "tray", 7000)]


def test_sd_15_02_16_a_iii_pressing_the_button_again_turns_it_off() -> None:
    s = sim(table(), "bet 1\nlock\nkey 1 akq-spades\nkey 1 akq-spades\nreconcile")
    assert pays(s, 1) == []
    assert meter(s.state) == 1000 * DOLLAR
    assert not s.rejected


def test_sd_15_02_16_a_iii_a_winner_waits_for_the_supervisor() -> None:
    s = sim(table(), "bet 1\nlock\nkey 1 akq-spades\nreconcile")
    assert s.rejected[-1]["reason"] == "the akq-spades award at seat 1 awaits the supervisor"
    assert s.report()["meters"]["main"]["state"] == "pending"


def test_sd_15_02_16_a_iv_several_meter_hands_follow_house_policy_sequential() -> None:
    # PMG: two straight flushes (10% each) in one round, sequential: 10% then 10% of the rest.
    s = sim(
        table("pmg-01", start=2000 * DOLLAR),
        "bet 6\nbet 2\nlock\nkey 6 straight-flush\n"
        "key 2 straight-flush\nconfirm\nconfirm\nreconcile",
    )
    meter_pays = [p for p in pays(s, 1) if p[2] == "meter"]
    assert meter_pays == [
        (6, "straight-flush", "meter", 20_000),
        (2, "straight-flush", "meter", 18_000),
    ]


def test_sd_15_02_16_a_iv_several_meter_hands_follow_house_policy_split() -> None:
    from progressived.core.params import Policy

    s = sim(
        table("pmg-01", start=2000 * DOLLAR + 1 * CENT, policy=Policy.SPLIT),
        "bet 6\nbet 2\nlock\nkey 2 straight-flush\nkey 6 straight-flush\nconfirm\nconfirm\nreconcile",
    )
    meter_pays = [p for p in pays(s, 1) if p[2] == "meter"]
    # one award would receive $200.00 (10% of $2,000.01, truncated); shared equally.
    assert meter_pays == [
        (6, "straight-flush", "meter", 10_000),
        (2, "straight-flush", "meter", 10_000),
    ]


def test_sd_15_02_16_a_v_a_100_percent_award_resets_to_seed_plus_reserve() -> None:
    s = sim(table(rate="0.15", reserve_rate="0.05"), "bet 1\nbet 2\nlock\nkey 2 akq-spades")
    # meter $1,000.30, reserve $0.10: the award takes $1,000.30; the meter is reset at once.
    assert meter(s.state) == 1000 * DOLLAR + 10 * CENT
    assert reserve(s.state) == 0


def test_sd_15_02_16_a_v_awards_are_handled_counter_clockwise() -> None:
    s = sim(
        table("tcp-sd-1"), "bet 1\nbet 5\nlock\nkey 1 straight\nkey 5 three-of-a-kind\nreconcile"
    )
    assert [p[0] for p in pays(s, 1)] == [5, 1]


def test_sd_15_02_16_a_vi_reconcile_resets_the_system_for_the_next_hand() -> None:
    s = sim(table(), "bet 1\nlock\nreconcile")
    assert s.state.round == 2
    assert s.state.locked == frozenset()
    assert lights(s.state, 7)[1] is Light.IDLE


def test_sd_15_02_16_b_envy_paid_to_every_other_bettor_not_to_the_winner() -> None:
    s = sim(table(), "bet 1\nbet 3\nbet 6\nlock\nkey 3 akq-suited\nreconcile")
    envy = [p for p in pays(s, 1) if p[2] == "envy"]
    assert envy == [(6, "akq-suited", "envy", 2500), (1, "akq-suited", "envy", 2500)]


def test_sd_15_02_16_b_the_trigger_must_have_made_the_progressive_bet() -> None:
    s = sim(table("tcp-sd-1"), "bet 1\nlock\nkey 4 akq-suited\nreconcile")
    assert "has no locked progressive wager" in s.rejected[0]["reason"]
    assert pays(s, 1) == []


def test_sd_15_02_16_b_several_envy_hands_pay_multiple_envy_payouts() -> None:
    s = sim(table(), "bet 1\nbet 2\nbet 3\nlock\nkey 2 akq-suited\nkey 3 akq-suited\nreconcile")
    envy = [p for p in pays(s, 1) if p[2] == "envy"]
    assert envy == [
        (3, "akq-suited", "envy", 2500),
        (2, "akq-suited", "envy", 2500),
        (1, "akq-suited", "envy", 2500),
        (1, "akq-suited", "envy", 2500),
    ]
    assert sorted(p[3] for p in envy if p[0] == 1) == [2500, 2500]


def test_sd_15_02_1_two_hands_per_player_do_not_envy_each_other() -> None:
    s = sim(table(), "bet 1\nbet 2\nbet 5\nlock\nsame 1 2\nkey 1 akq-suited\nreconcile")
    envy = [p for p in pays(s, 1) if p[2] == "envy"]
    assert envy == [(5, "akq-suited", "envy", 2500)]


def test_sd_15_02_5_misdeal_voids_the_round_and_reverses_contributions() -> None:
    s = sim(table(rate="0.2", reserve_rate="0.03"), "bet 1\nbet 2\nlock\nkey 1 akq-spades\nvoid")
    assert meter(s.state) == 1000 * DOLLAR and reserve(s.state) == 0
    assert s.report()["rounds"][0]["state"] == "voided"


def test_pa_progressive_4_envy_does_not_require_the_trigger_to_wager() -> None:
    s = sim(table("tcp-pa-5"), "bet 1\nbet 2\nlock\nkey 5 akq-spades\nreconcile")
    assert pays(s, 1) == [(2, "akq-spades", "envy", 50_000), (1, "akq-spades", "envy", 50_000)]
    assert meter(s.state) == 1000 * DOLLAR  # the non-bettor's hand pays nothing from the meter


def test_pa_progressive_3_fixed_pays_reflect_a_5_dollar_wager() -> None:
    s = sim(table("tcp-pa-5"), "bet 1\nlock\nkey 1 akq-suited\nreconcile")
    assert pays(s, 1) == [(1, "akq-suited", "tray", 250_000)]


def test_pa_progressive_4_a_folded_player_still_wins_envy() -> None:
    # Folding is not an input: a locked wager qualifies, folded or not.
    s = sim(
        table("tcp-pa-5"),
        "bet 1\nbet 2\nlock\nkey 2 straight-flush\nkey 2 straight-flush\n"
        "key 2 akq-suited\nreconcile",
    )
    assert (1, "akq-suited", "envy", 12_500) in pays(s, 1)


def test_sd_15_15_18_uthp_01_royal_first_seven_pays_5_percent() -> None:
    s = sim(
        table("uth-01", start=3000 * DOLLAR), "bet 4\nlock\nkey 4 royal-flush\nconfirm\nreconcile"
    )
    assert pays(s, 1) == [(4, "royal-flush", "meter", 15_000)]
    assert meter(s.state) == 2850 * DOLLAR  # not a reset: only 100% resets


def test_sd_15_15_18_uthp_01_community_royal_pays_to_1() -> None:
    s = sim(table("uth-01"), "bet 4\nlock\nkey 4 community-royal\nreconcile")
    assert pays(s, 1) == [(4, "community-royal", "tray", 300_100)]


def test_sd_15_15_18_b_i_pmg_envy_from_a_non_bettor_and_scaled_with_the_wager() -> None:
    s = sim(table("pmg-02"), "bet 1\nlock\nkey 3 straight-flush\nreconcile")
    assert pays(s, 1) == [(1, "straight-flush", "envy", 150_000)]
    s2 = sim(table("pmg-02", wager=10 * DOLLAR), "bet 1\nlock\nkey 3 straight-flush\nreconcile")
    assert pays(s2, 1) == [(1, "straight-flush", "envy", 300_000)]


def test_sd_15_15_18_a_vi_a_royal_and_a_straight_flush_in_one_round() -> None:
    # Royal at seat 6 (100%) is handled before the straight flush at seat 2 (10% of the
    # reset meter), whatever order they were keyed in.
    s = sim(
        table("pmg-01", start=5000 * DOLLAR),
        "bet 6\nbet 2\nlock\nkey 2 straight-flush\nkey 6 royal-flush\nconfirm\nconfirm\nreconcile",
    )
    meter_pays = [p for p in pays(s, 1) if p[2] == "meter"]
    assert meter_pays == [
        (6, "royal-flush", "meter", 500_000),
        (2, "straight-flush", "meter", 10_000),
    ]
    assert meter(s.state) == 900 * DOLLAR


def test_sd_15_02_1_each_player_may_play_up_to_two_hands() -> None:
    """20:18:16:15.02(1): a `same` chain may not give one player a third spot."""
    script = (
        "bet 1\nbet 2\nbet 3\nbet 5\nlock\nsame 1 2\nsame 2 3\nsame 1 2 3\n"
        "key 3 akq-suited\nreconcile"
    )
    s = sim(table("tcp-sd-1"), script)
    assert [r["line"] for r in s.rejected] == [7, 8]
    assert all("at most 2 hands" in r["reason"] and "15.02(1)" in r["reason"] for r in s.rejected)
    envy = sorted((p[0], p[3]) for p in pays(s, 1) if p[2] == "envy")
    assert envy == [(1, 2500), (2, 2500), (5, 2500)]  # seats 1 and 2 are not seat 3's player
    # The PA rack card says nothing of it: no limit there.
    pa = sim(table("tcp-pa-5"), "bet 1\nbet 2\nbet 3\nlock\nsame 1 2 3")
    assert pa.rejected == []
    assert pa.state.same_player == (frozenset({1, 2, 3}),)


def test_sd_15_15_18_pmg_the_seed_adjusts_with_the_wager() -> None:
    """PMG schedule: 'the envy and seed amounts adjust up or down ... with the wager amount'."""
    script = "bet 1\nlock\nkey 1 royal-flush\nconfirm\nreconcile"
    for paytable, wager, seed in (
        ("pmg-01", None, 1000),
        ("pmg-01", 2 * DOLLAR, 2000),
        ("pmg-02", None, 5000),
        ("pmg-02", 10 * DOLLAR, 10_000),
        ("pmg-02", 3 * DOLLAR, 3000),
    ):
        s = sim(table(paytable, wager=wager), script)
        assert pays(s, 1) == [(1, "royal-flush", "meter", seed * 100)], (paytable, wager)
        assert meter(s.state) == seed * DOLLAR  # reset to the scaled seed
    # Paytables that do not say so keep the configured seed whatever the wager.
    s = sim(table("tcp-sd-1", wager=5 * DOLLAR), "bet 1\nlock\nkey 1 akq-spades\nconfirm")
    assert meter(s.state) == 1000 * DOLLAR
