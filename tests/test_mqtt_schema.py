"""Payloads and docs/mqtt.md agree: every kind the code publishes is documented, and every
message validates against the JSON Schemas parsed out of the doc.

Real publishing is checked by tests/daemon_harness.py (every message the integration tests'
independent sign receives is validated); here the kinds are enumerated from the code: the
engine's event types, driven through ``decide`` and the payload builder, and the system
kinds the daemon journals with an outbox message (found in the source).
"""

from __future__ import annotations

import ast
import fnmatch
import re
from dataclasses import replace
from fractions import Fraction

from progressived.core.params import MeterParams, Policy, TableParams
from progressived.daemon.board_input import BOARD_OFFLINE
from progressived.engine import (
    AdjustMeter,
    Command,
    Confirm,
    KeyHand,
    LinkedWagers,
    Lock,
    Reconcile,
    Reject,
    SamePlayer,
    Sensors,
    SetClosed,
    TableState,
    TransferMeter,
    Void,
    decide,
    initial_state,
)
from progressived.engine.events import EVENT_TYPES, Event
from progressived.engine.meter_port import ClaimRefused, MeterAnswered
from progressived.engine.meterbook.linked_port import LINKED_PORT
from progressived.mqtt.payloads import (
    EVENT_KEYS,
    closures,
    event_payload,
    meter_payload,
    meter_state,
    pending_awards,
    status_payload,
)
from tests.conftest import ROOT
from tests.helpers import DOLLAR, table
from tests.mqtt_schemas import MQTT_DOC, doc_schemas, documented_event_kinds, problems

TOPIC = "progressive/table/t1/event"


def undocumented_not_published() -> set[str]:
    """The doc's list of ledger kinds that are not published."""
    text = MQTT_DOC.read_text()
    para = text[text.index("are **not** published") :].split("\n\n")[0]
    return set(re.findall(r"`([a-z_]+)`", para))


def play(
    params: TableParams, state: TableState, *commands: Command
) -> tuple[TableState, list[Event]]:
    events: list[Event] = []
    for command in commands:
        decision = decide(params, state, command)
        assert decision.accepted, decision
        events.extend(decision.events)
        state = decision.state
    return state, events


def engine_events() -> list[Event]:
    """Rounds that make every kind of engine event (the keying mistakes too)."""
    mini = MeterParams(id="mini", seed=100 * DOLLAR, rate=Fraction("0.01"))
    params = table(rate="0.1", reserve_rate="0.02", extra_meters=(mini,))
    start = initial_state(params)
    state, events = start.state, list(start.events)
    state, more = play(
        params,
        state,
        SetClosed(reason="operator", closed=True),
        SetClosed(reason="operator", closed=False),
        Sensors(present=frozenset({1, 2, 3})),
        Lock(),
        Sensors(present=frozenset({1, 2, 3, 4})),  # a late bet
        KeyHand(seat=1, hand="akq-spades"),
        KeyHand(seat=1, hand="akq-spades"),  # award turned off again
        KeyHand(seat=1, hand="akq-spades"),
        Reject(),
        KeyHand(seat=2, hand="straight"),
        KeyHand(seat=2, hand="straight"),  # hand turned off again
        KeyHand(seat=2, hand="straight"),
        KeyHand(seat=3, hand="akq-spades"),
        Confirm(),
        Reconcile(),
        AdjustMeter(meter="main", units=10_000, reason="test", approved_by="sup", actor="ops"),
        TransferMeter(
            from_meter="main", to_meter="mini", units=10_000, reason="t", approved_by="s", actor="o"
        ),
        Sensors(present=frozenset({5, 6})),
        Lock(),
        SamePlayer(seats=frozenset({5, 6})),
        LinkedWagers(source_table="t2", count=3, contribution_id="t2-1"),
        KeyHand(seat=5, hand="akq-suited"),
        Void(),
    )
    events += more
    # Repricing: an award keyed ahead of another in the award order (pmg-01).
    pmg = table("pmg-01", rate="0.1")
    state = initial_state(pmg).state
    _, more = play(
        pmg,
        state,
        Sensors(present=frozenset({2, 4})),
        Lock(),
        KeyHand(seat=2, hand="straight-flush"),
        KeyHand(seat=4, hand="straight-flush"),
    )
    events += more
    # Under the split policy CONFIRM approves (award_approved); RECONCILE pays.
    split = table("pmg-01", rate="0.1", policy=Policy.SPLIT)
    state = initial_state(split).state
    _, more = play(
        split,
        state,
        Sensors(present=frozenset({2, 4})),
        Lock(),
        KeyHand(seat=2, hand="straight-flush"),
        Confirm(),
        KeyHand(seat=4, hand="straight-flush"),
        Confirm(),
        Reconcile(),
    )
    return events + more + linked_events()


def linked_events() -> list[Event]:
    """A linked meter's own kinds: the request the link answers later, and its refusal."""
    linked = replace(table("pmg-01"), meters=(MeterParams(id="main", link="link-a"),))
    state = TableState()
    events: list[Event] = []
    for command in (Sensors(present=frozenset({3})), Lock(), KeyHand(seat=3, hand="royal-flush")):
        decision = decide(linked, state, command, LINKED_PORT)
        assert decision.accepted, decision
        state, events = decision.state, events + list(decision.events)
    refused = ClaimRefused(
        at="t", round=1, seat=3, hand="royal-flush", meter="main", code="x", reason="refused"
    )
    answered = decide(linked, state, MeterAnswered(events=(refused,)), LINKED_PORT)
    assert answered.accepted, answered
    return events + list(answered.events)


def test_the_doc_has_the_three_schemas() -> None:
    assert set(doc_schemas()) == {"meter", "status", "event"}


def test_every_engine_event_kind_is_published_as_documented_or_listed_as_not_published() -> None:
    events = engine_events()
    assert {e.kind for e in events} == set(EVENT_TYPES)  # every engine event type was made
    published: set[str] = set()
    silent: set[str] = set()
    for seq, event in enumerate(events, start=1):
        payload = event_payload("t1", seq, event)
        if payload is None:
            silent.add(event.kind)
            continue
        published.add(payload["kind"])
        assert problems(TOPIC, payload) == []
    documented = documented_event_kinds()
    assert published <= documented, published - documented
    assert silent <= undocumented_not_published(), silent - undocumented_not_published()
    for kind in ("hand_unkeyed", "award_unkeyed", "award_rejected", "award_reversed", "envy"):
        assert kind in published, kind


def test_hand_unkeyed_carries_the_source_and_cents_of_the_hand_turned_off() -> None:
    events = engine_events()
    keyed = next(e for e in events if e.kind == "hand_keyed")
    unkeyed = next(e for e in events if e.kind == "hand_unkeyed")
    payload = event_payload("t1", 9, unkeyed)
    assert payload is not None
    assert payload["source"] == keyed.source == "tray"
    assert payload["cents"] == keyed.units // 10_000 > 0
    # The schema is strict enough to catch the old payload (a known kind without its keys).
    old = {k: v for k, v in payload.items() if k not in ("source", "cents")}
    assert problems(TOPIC, old)


def test_an_unknown_kind_validates_against_the_generic_event_and_known_kinds_stay_strict() -> None:
    """A subscriber ignores a kind it does not know (kinds are only added), so the schema must
    not refuse one; a known kind still needs its own keys."""
    future = {"kind": "something_new", "table": "t1", "seq": 9, "ts": "2026-11-21T19:05:01Z"}
    assert problems(TOPIC, future) == []
    assert problems(TOPIC, {**future, "extra": {"any": "shape"}}) == []
    assert problems(TOPIC, {k: v for k, v in future.items() if k != "seq"})  # generic keys stay
    assert problems(TOPIC, {**future, "kind": ""})
    for kind in ("award_keyed", "award_confirmed", "envy", "table_closed", "round_locked"):
        assert problems(TOPIC, {**future, "kind": kind, "round": 1, "seat": 0}), kind
    confirmed = {
        **future,
        "kind": "award_confirmed",
        "round": 1,
        "seat": 3,
        "hand": "akq",
        "meter": "main",
        "cents": 5,
        "by": "sup",
    }
    assert problems(TOPIC, confirmed) == []
    assert problems(TOPIC, {k: v for k, v in confirmed.items() if k != "by"})


def system_kinds_in_the_source() -> tuple[set[str], set[str], set[str]]:
    """(published kinds, published kind patterns from f-strings, journal-only kinds)."""
    published: set[str] = set()
    patterns: set[str] = set()
    silent: set[str] = set()
    for path in sorted((ROOT / "progressived").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            if isinstance(node.func, ast.Name) and node.func.id == "Note":
                # Note(kind, detail, actor): journaled with a command's events, published
                name, owner, args, has_outbox = "Note", node.func, node.args, True
            elif not isinstance(node.func, ast.Attribute):
                continue
            else:
                name = node.func.attr
                owner = node.func.value
                args = node.args
            if name == "Note":
                pass
            elif name == "commit" and args and isinstance(args[0], ast.Attribute):
                # c.commit(c.ledger.record, "kind", ..., outbox=...)
                if args[0].attr != "record":
                    continue
                has_outbox = any(k.arg == "outbox" for k in node.keywords)
                args = args[1:]
            elif (
                name == "record"
                and not (isinstance(owner, ast.Attribute) and owner.attr == "ledger")
                and not (isinstance(owner, ast.Name) and owner.id in ("led", "ledger"))
            ):
                has_outbox = not any(
                    k.arg == "publish"
                    and isinstance(k.value, ast.Constant)
                    and k.value.value is False
                    for k in node.keywords
                )
            elif name == "system_outbox":
                has_outbox = True
            else:
                continue
            if not args:
                continue
            first = args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                (published if has_outbox else silent).add(first.value)
            elif isinstance(first, ast.JoinedStr) and has_outbox:
                patterns.add(
                    "".join(v.value if isinstance(v, ast.Constant) else "*" for v in first.values)
                )
    return published, patterns, silent


def test_every_system_kind_the_daemon_publishes_is_documented() -> None:
    published, patterns, silent = system_kinds_in_the_source()
    documented = documented_event_kinds()
    # The scan finds what the issue named (so it is not vacuous).
    assert {"self_check", "control_refused", "parameter_changed", "daemon_started"} <= published
    assert "operator_*" in patterns
    assert published <= documented, published - documented
    for pattern in patterns:
        assert fnmatch.filter(documented, pattern), pattern
    assert silent <= undocumented_not_published(), silent - undocumented_not_published()
    # No documented kind that nothing publishes.
    engine = {
        event_payload("t1", 1, e)["kind"] for e in engine_events() if event_payload("t1", 1, e)
    }
    from_patterns = {k for p in patterns for k in fnmatch.filter(documented, p)}
    assert documented == engine | published | from_patterns


def test_meter_and_status_payloads_match_their_schemas() -> None:
    meter = meter_payload(
        table_id="t1",
        meter_id="main",
        units=1_000_450_000,
        seq=57,
        state="open",
        ts="2026-11-21T19:05:01.123456Z",
    )
    assert problems("progressive/table/t1/meter/main", meter) == []
    online = status_payload(
        table_id="t1", online=True, ts="2026-11-21T19:05:01Z", version="0.1.0", boot="b1"
    )
    assert problems("progressive/table/t1/status", online) == []
    # An online status without its boot id would not let a sign restart its seq.
    assert problems("progressive/table/t1/status", {k: v for k, v in online.items() if k != "boot"})
    will = status_payload(table_id="t1", online=False, boot="b1")
    assert problems("progressive/table/t1/status", will) == []
    # The ledger's head, a witness for `ledger verify --head SEQ:HASH`.
    head = (57, "ab" * 32)
    for online_ in (True, False):
        with_head = status_payload(
            table_id="t1", online=online_, ts="x", version="v", boot="b1", head=head
        )
        assert (with_head["head_seq"], with_head["head_hash"]) == head
        assert problems("progressive/table/t1/status", with_head) == []
    assert problems("progressive/table/t1/status", {**with_head, "head_hash": "AB" * 32})
    assert problems("progressive/table/t1/status", {**with_head, "head_seq": "57"})


def test_the_doc_lists_no_kind_both_published_and_not() -> None:
    assert not (documented_event_kinds() & undocumented_not_published())


def test_the_meter_names_its_pending_awards_and_open_closures_for_a_late_sign() -> None:
    """A sign that connects during a pending award or a closure has only the retained meter:
    it carries the awards awaiting the supervisor and the reasons the progressive is closed."""
    params = table(rate="0.1")
    state = initial_state(params).state
    state, events = play(
        params,
        state,
        SetClosed(reason="operator", closed=True),
        SetClosed(reason="operator", closed=False),
        Sensors(present=frozenset({1, 3})),
        Lock(),
        KeyHand(seat=3, hand="akq-spades"),
    )
    keyed = next(event_payload("t1", 1, e) for e in events if e.kind == "award_keyed")
    assert keyed is not None
    assert meter_state(state, "main") == "pending"
    assert pending_awards(state, "main") == [
        {"seat": 3, "hand": "akq-spades", "cents": keyed["cents"]}
    ]
    assert pending_awards(state, "other") == []
    assert closures(state) == []  # the operator's closure was ended by its table_opened
    assert closures(state, board_online=False, ledger_ok=False) == [
        BOARD_OFFLINE,
        "ledger unavailable",
    ]
    closed, _ = play(params, state, SetClosed(reason="operator", closed=True))
    assert closures(closed) == ["operator"]
    meter = meter_payload(
        table_id="t1",
        meter_id="main",
        units=state.balance("meter:main"),
        seq=9,
        state="pending",
        ts="2026-11-21T19:05:01Z",
        pending=pending_awards(state, "main"),
        closed=closures(closed),
    )
    assert problems("progressive/table/t1/meter/main", meter) == []
    assert problems("progressive/table/t1/meter/main", {**meter, "pending": [{"seat": 3}]})
    assert problems("progressive/table/t1/meter/main", {**meter, "closed": "operator"})
    state, _ = play(params, state, Confirm())
    assert meter_state(state, "main") == "open" and pending_awards(state, "main") == []


def test_the_signs_required_keys_per_kind_are_the_docs() -> None:
    """The terminal sign ignores a known kind without its keys (docs/mqtt.md, "Malformed
    messages") by ``EVENT_KEYS``: the same keys the doc's schema requires, kind by kind."""
    schema = doc_schemas()["event"].schema
    required: dict[str, set[str]] = {k: set() for k in documented_event_kinds()}
    for clause in schema["allOf"]:
        match = clause["if"]["properties"]["kind"]
        for kind in match.get("enum", [match.get("const")]):
            required[kind] |= set(clause["then"]["required"])
    assert {k: set(v) for k, v in EVENT_KEYS.items()} == required
