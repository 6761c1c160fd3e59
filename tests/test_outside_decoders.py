"""Every decoder of bytes from outside the process, fed hostile payloads (hypothesis).

The link's messages (and the link book around them), the table's link messages, the
terminal signs (a table's and a link's), the web sign's model, the control socket (the
daemon reading a request, the client reading the answer), the testing subscriber and the
simulate script reader each get generated JSON (nested lists and objects, text, huge
integers, NaN and huge floats), raw deep nesting (1,500 and 100,000 deep), oversized
payloads, random bytes and invalid UTF-8. Each either returns a value or refuses with its
documented code, never anything else, and a refused payload changes nothing.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from progressived.core import wirejson
from progressived.engine.simulate import (
    MAX_LINE,
    MAX_SCRIPT_BYTES,
    ScriptError,
    Simulation,
    read_script,
)
from progressived.link.core import batch as lb
from progressived.link.core import book
from progressived.link.core import messages as m
from progressived.link.core.state import LinkRefused
from progressived.runtime import control
from progressived.signs.link import LinkSignView
from progressived.signs.terminal import SignView
from progressived.signs.web.model import Floor
from progressived.testing.subscriber import Subscriber
from tests import helpers
from tests.budget import examples
from tests.link_sim import LINK_HEAD, link_params

# The codes each decoder documents (docs/link.md "Refusal codes", docs/operations.md "The
# control socket", docs/mqtt.md "Malformed messages").
LINK_DECODE_CODES = {"bad-json", "bad-field", "bad-type", "out-of-range", "too-large", "too-deep"}
LINK_REFUSAL_CODES = LINK_DECODE_CODES | {"forged", "unknown-table"}
CONTROL_CODES = {*wirejson.CODES, "timeout"}

DEEP_1500 = b"[" * 1500 + b"]" * 1500
DEEP_100K = b"[" * 100_000 + b"]" * 100_000
DEEP_OBJECT = b'{"a":' * 1500 + b"1" + b"}" * 1500

VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(10**19, 10**40)
    | st.floats()  # NaN and infinities included: json.dumps writes them as NaN, Infinity
    | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=30,
)


def nested(levels: int, opener: bytes = b"[") -> bytes:
    closer = b"]" if opener == b"[" else b"}"
    inner = b"[" * levels if opener == b"[" else b'{"k":' * levels
    return inner + b"1" + closer * levels


GOOD_METER = {
    "cents": 100_045, "display": "$1,000.45", "meter": "main", "seq": 5, "state": "open",
    "table": "t1", "closed": [], "pending": [],
}  # fmt: skip
GOOD_LINKED = {
    "type": "meter", "link": "link-a", "meter": "pmg", "units": 1_000_000_000, "epoch": 1,
    "lseq": 5, "head": {"seq": 5, "hash": "0" * 64}, "hit": None,
}  # fmt: skip
GOOD_CONTRIBUTION = json.loads(
    m.encode(
        m.Contribution(
            table="t1", seq=1, id="t1:1", head=m.LedgerHead(0, "0" * 64), at="2026-11-23T17:00:00Z",
            round=1, wagers=(m.MeterWagers("pmg", 1, 1_000_000),),
        )
    )
)  # fmt: skip


@st.composite
def poisoned(draw: st.DrawFn) -> bytes:
    """A message of the protocol with one key's value replaced by something hostile."""
    base = dict(draw(st.sampled_from([GOOD_METER, GOOD_LINKED, GOOD_CONTRIBUTION])))
    key = draw(st.sampled_from(sorted(base)))
    base[key] = draw(VALUES | st.integers(2, 60).map(lambda n: json.loads("[" * n + "]" * n)))
    return json.dumps(base).encode()


HOSTILE = st.one_of(
    VALUES.map(lambda v: json.dumps(v).encode()),
    poisoned(),
    st.integers(1, 3000).map(nested),
    st.integers(1, 3000).map(lambda n: nested(n, b"{")),
    st.integers(20, 3000).map(lambda n: b"[" * n),  # never closed
    st.integers(4301, 6000).map(lambda n: b'{"cents": ' + b"9" * n + b"}"),
    st.integers(17_000, 140_000).map(lambda n: b'{"cents": 1, "pad": "' + b"x" * n + b'"}'),
    st.binary(max_size=500),
    st.binary(min_size=1, max_size=50).map(lambda b: b'{"state": "' + b + b'\xff"}'),
    st.sampled_from([b"", b"\xef\xbb\xbf{}", b"[NaN]", b'{"a":1,"a":2}', b'"\\ud800"']),
)


def refusal(call: Callable[[], object], kind: type[Exception]) -> Any:
    """The exception of type ``kind`` that ``call`` raised, or None; anything else fails."""
    try:
        call()
    except kind as exc:
        return exc
    return None


def hostile(test: Callable[..., None]) -> Callable[..., None]:
    """Run ``test`` on generated hostile payloads and the issue's own examples."""
    for raw in (DEEP_1500, DEEP_100K, DEEP_OBJECT, b"\xff\xfe\xfd", b"x" * 200_000):
        test = example(raw)(test)
    return settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])(
        given(HOSTILE)(test)
    )


# -- the link ---------------------------------------------------------------------------


@hostile
def test_the_link_message_decoders_refuse_with_a_documented_code(raw: bytes) -> None:
    for decode in (m.decode_table, m.decode_link):
        exc = refusal(lambda: decode(raw), m.MessageError)  # noqa: B023 (called at once)
        if exc is not None:
            assert exc.code in LINK_DECODE_CODES, exc.code
            assert len(exc.reason) <= 2 * m.MAX_REASON


PARAMS = link_params(2)
STATE = book.open_book(PARAMS)


@hostile
def test_the_link_book_refuses_on_a_members_and_a_strangers_topic(raw: bytes) -> None:
    batch = [
        lb.Incoming(m.from_table_topic("progressive", "link-a", who), raw, 1_700_000_000_000)
        for who in ("t1", "sign-lobby")
    ]
    out = lb.run_batch(PARAMS, STATE, LINK_HEAD, batch, "progressive")  # never raises
    if refusal(lambda: m.decode_table(raw), m.MessageError) is None:
        return  # a message of the protocol after all (a poisoned key it does not check)
    assert out.state.balances == STATE.balances  # nothing applied
    for step, _ in out.steps:
        for event in step.events:
            assert isinstance(event, LinkRefused) and event.code in LINK_REFUSAL_CODES
            assert len(event.reason) <= m.MAX_REASON
    # The member is answered (seq 0, id none); the stranger is not (no reply topic).
    assert all(r.topic.endswith("/to/t1") for r in out.replies)
    for reply in out.replies:
        result = m.decode_link(reply.payload)
        assert isinstance(result, m.Result) and result.status == "refused"
        assert (result.seq, result.id, result.lseq) == (0, "none", 0)


# -- the signs --------------------------------------------------------------------------


def _good(**data: Any) -> bytes:
    return json.dumps(data).encode()


@hostile
def test_the_terminal_sign_keeps_the_last_good_value(raw: bytes) -> None:
    view = SignView("progressive", "main", "t1")
    assert view.receive("progressive/table/t1/meter/main", _good(**GOOD_METER))
    for topic in ("status", "meter/main", "event"):
        before = (view.display, view.state, view.seq, view.banner)
        if not view.receive(f"progressive/table/t1/{topic}", raw):
            assert (view.display, view.state, view.seq, view.banner) == before


@hostile
def test_the_linked_terminal_sign_keeps_the_last_good_value(raw: bytes) -> None:
    view = LinkSignView("progressive", "link-a", "pmg")
    assert view.receive(view.meter_topic, _good(**GOOD_LINKED))
    before = (view.display, view.order, view.banner)
    if not view.receive(view.meter_topic, raw):
        assert (view.display, view.order, view.banner) == before


@hostile
def test_the_web_sign_model_keeps_the_last_good_value(raw: bytes) -> None:
    floor = Floor()
    assert floor.receive("progressive/table/t1/meter/main", _good(**GOOD_METER), 0.0)
    assert floor.receive("progressive/link/link-a/meter/pmg", _good(**GOOD_LINKED), 0.0)
    for topic in (
        "table/t1/status",
        "table/t1/meter/main",
        "table/t1/event",
        "link/link-a/meter/pmg",
    ):
        before = json.dumps([s.as_json(0.0) for s in floor.sources.values()])
        if floor.receive(f"progressive/{topic}", raw, 0.0) is None:
            assert json.dumps([s.as_json(0.0) for s in floor.sources.values()]) == before


@hostile
def test_the_testing_subscriber_records_what_it_cannot_read(raw: bytes) -> None:
    sub = Subscriber("127.0.0.1", 1)
    sub._take("progressive/table/t1/event", raw, False)
    assert len(sub.messages) + len(sub.unreadable) == 1
    assert all(code in wirejson.CODES for _, code in sub.unreadable)


# -- the control socket -----------------------------------------------------------------


def _request(raw: bytes) -> dict[str, Any]:
    async def read() -> dict[str, Any]:
        reader = asyncio.StreamReader(limit=control.MAX_REQUEST)
        reader.feed_data(raw + b"\n")
        reader.feed_eof()
        return await control.read_request(reader)

    return asyncio.run(read())


@hostile
def test_the_control_socket_reads_a_request_or_refuses_it_with_a_code(raw: bytes) -> None:
    for side in (_request, control.read_answer):
        exc = refusal(lambda: side(raw), wirejson.WireError)  # noqa: B023 (called at once)
        assert exc is None or exc.code in CONTROL_CODES


# -- simulate ---------------------------------------------------------------------------


@hostile
def test_a_simulate_script_is_read_and_played_or_refused(raw: bytes) -> None:
    exc = refusal(lambda: read_script(io.BytesIO(raw)), ScriptError)
    if exc is not None:
        assert "not UTF-8" in str(exc)
        return
    text = read_script(io.BytesIO(raw))
    sim = Simulation(helpers.table())
    sim.run_script(text.splitlines())
    report = sim.report()
    assert report["totals"]["identity_gap_units"] == 0
    assert all(len(r["text"]) <= MAX_LINE for r in report["rejected"])  # a longer one is cut


def test_a_script_over_the_bound_is_refused_unread() -> None:
    with pytest.raises(ScriptError, match="over"):
        read_script(io.BytesIO(b"#" * (MAX_SCRIPT_BYTES + 1)))
