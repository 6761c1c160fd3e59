"""A fenced standby link controller (docs/link.md, "The standby controller and two brokers"),
as processes: two ``progressived link`` with the same link over one PostgreSQL and a real
Mosquitto with docs/link.md's ACL.

* The active one is SIGKILLed while a table streams messages: the standby takes over within
  ``lease_s`` plus a bound, every message is applied exactly once, and a repeat of a message
  the dead controller answered gets the very same result from the ledger.
* The active one is SIGSTOPped past its lease and woken: it commits nothing after waking
  (rows counted by the writer's holder and token), never takes the link's broker session
  back, and stands by; status and metrics say which controller is active and its lease.
* ``--no-standby`` keeps the old contract: a lease held by another is exit 5.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from progressived.testing.ha.process import signal_all, tree
from progressived.testing.postgres import Server
from tests.link_harness import TableClient, until
from tests.link_standby_rig import LEASE_S, PROGRESSIVECTL, PROGRESSIVED, Outbox, Pair
from tests.test_link_acl import PASSWORDS, LinkBroker

pytestmark = pytest.mark.e2e  # two link controllers as processes (pyproject.toml's markers)

# Takeover bound beyond lease_s: a standby polls every lease_s / 4 (at most 1 s), rebuilds
# the book and connects; this machine is loaded by other test runs, hence the margin.
TAKEOVER_BOUND_S = 5.0


@pytest.fixture
async def pair(postgres_server: Server, postgres_url: str, tmp_path: Path) -> AsyncIterator[Pair]:
    broker = LinkBroker().start()
    pair = Pair(tmp_path, postgres_server, postgres_url, [broker])
    pair.broker = broker
    try:
        yield pair
    finally:
        pair.stop()
        broker.stop()


def metrics_of(pair: Pair, which: str) -> str:
    """The Prometheus text of controller ``which`` (its port from its log)."""
    c = getattr(pair, which)
    port = next(line["port"] for line in c.log_lines() if line.get("event") == "metrics")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as page:
        return str(page.read().decode())


async def test_the_standby_takes_over_a_sigkilled_controller_mid_stream(pair: Pair) -> None:
    broker: LinkBroker = pair.broker
    pair.a.start()
    await pair.wait_role(pair.a, "active", 30)
    pair.b.start()
    await pair.wait_role(pair.b, "standby", 30)
    standby = pair.b.status()
    assert standby is not None and standby["lease"]["holder"] == "ctl-a"
    assert standby["lease"]["token"] == 1 and standby["meters"] == {}
    assert not standby["broker"]["connected"]  # a standby is connected to no broker
    shown = subprocess.run(
        [*PROGRESSIVECTL, "status", "--socket", str(pair.b.folder / "link.sock")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert "role: STANDBY since " in shown.stdout
    assert "lease held by ctl-a (token 1, expires " in shown.stdout
    assert "this controller is ctl-b" in shown.stdout and "head none read" in shown.stdout
    text = metrics_of(pair, "b")
    assert 'progressive_link_active{link="link-a"} 0.0' in text
    assert 'progressive_link_lease_token{holder="ctl-a",link="link-a",me="ctl-b"} 1.0' in text
    assert "progressive_link_meter_display_cents" not in text  # no book on a standby
    assert 'progressive_link_active{link="link-a"} 1.0' in metrics_of(pair, "a")

    async with TableClient(broker, "t1", PASSWORDS["t1"]) as t1, Outbox(t1) as outbox:
        await until(lambda: bool(t1.of_type("heartbeat")), 20)
        for seq in range(1, 21):
            await outbox.send(seq)
            await asyncio.sleep(0.02)
        await outbox.all_answered(range(1, 11), 20)
        before = outbox.answered()[5][0]
        pair.a.send(signal.SIGKILL)  # mid-stream: later messages are still unanswered
        killed = time.monotonic()
        pair.a.proc.wait(10)
        for seq in range(21, 41):
            await outbox.send(seq)
            await asyncio.sleep(0.02)
        taken = await pair.wait_role(pair.b, "active", LEASE_S + TAKEOVER_BOUND_S + 10)
        await outbox.all_answered(range(1, 41), 30)
        answered_at = time.monotonic()
        assert taken - killed <= LEASE_S + TAKEOVER_BOUND_S, taken - killed
        # a repeat of a message the dead controller answered: the stored result, unchanged
        heard = len(outbox.answered()[5])
        await outbox.send(5)
        await until(lambda: len(outbox.answered()[5]) > heard, 10)
        assert outbox.answered()[5][-1] == before
    assert answered_at - killed <= LEASE_S + TAKEOVER_BOUND_S + 5
    assert sorted(pair.applied()) == list(range(1, 41))  # every message once
    status = pair.b.status()
    assert status is not None and status["role"] == "active"
    assert status["lease"] == {**status["lease"], "holder": "ctl-b", "me": "ctl-b", "token": 2}
    assert status["tables"]["t1"]["hwm"] == 40
    writers = set(pair.writers().values())
    assert writers <= {"progressived ctl-a token 1", "progressived ctl-b token 2"}
    verify = subprocess.run(
        [*PROGRESSIVECTL, "ledger", "verify", "--db", pair.url],
        capture_output=True,
        text=True,
        check=False,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert pair.b.stop() == 0


async def test_a_controller_paused_past_its_lease_commits_nothing_after_waking(
    pair: Pair,
) -> None:
    broker: LinkBroker = pair.broker
    pair.a.start()
    await pair.wait_role(pair.a, "active", 30)
    pair.b.start()
    await pair.wait_role(pair.b, "standby", 30)
    async with TableClient(broker, "t1", PASSWORDS["t1"]) as t1, Outbox(t1) as outbox:
        await until(lambda: bool(t1.of_type("heartbeat")), 20)
        for seq in range(1, 4):
            await outbox.send(seq)
        await outbox.all_answered(range(1, 4), 20)
        pair.a.send(signal.SIGSTOP)
        for seq in range(4, 6):  # delivered toward the paused controller first
            await outbox.send(seq)
        await pair.wait_role(pair.b, "active", LEASE_S + TAKEOVER_BOUND_S + 10)
        status = pair.b.status()
        assert status is not None
        takeover_head = int(status["ledger"]["head_seq"])
        await outbox.all_answered(range(4, 6), 30)
        pair.a.send(signal.SIGCONT)
        await pair.wait_role(pair.a, "standby", 30)
        for seq in range(6, 11):
            await outbox.send(seq)
        await outbox.all_answered(range(6, 11), 30)
        await asyncio.sleep(LEASE_S)  # the woken one had time to do anything it would
    writers = pair.writers()
    old = {seq for seq, app in writers.items() if app == "progressived ctl-a token 1"}
    new = {seq for seq, app in writers.items() if app == "progressived ctl-b token 2"}
    assert old and new and old | new == set(writers)
    assert max(old) <= takeover_head < min(new)  # nothing of the old holder after the new
    assert sorted(pair.applied()) == list(range(1, 11))
    woken = pair.a.status()
    assert woken is not None and woken["role"] == "standby" and woken["lease"]["token"] == 2
    assert not woken["broker"]["connected"]
    active = pair.b.status()
    assert active is not None and active["role"] == "active"
    # the woken controller never took the link's client id back from the active one
    assert [b["connections"] for b in active["brokers"]] == [1]
    assert any(
        line.get("event", "").startswith("link ledger lease lost") for line in pair.a.log_lines()
    )
    assert pair.a.stop() == 0 and pair.b.stop() == 0


async def test_no_standby_keeps_exit_5_for_a_lease_held_by_another(pair: Pair) -> None:
    pair.a.start()
    await pair.wait_role(pair.a, "active", 30)
    done = subprocess.run(
        [*PROGRESSIVED, "link", "--config", str(pair.b.config), "--no-standby"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 5, done.stderr
    assert "is leased to 'ctl-a'" in done.stderr and done.stderr.count("\n") == 1
    assert pair.a.stop() == 0


def freeze(server: Server, how: signal.Signals) -> None:
    """SIGSTOP / SIGCONT the whole PostgreSQL server (postmaster and every backend): a
    machine frozen, its sockets open and answering nothing."""
    signal_all(tree(server.postmaster_pid()), how)


async def test_a_controller_whose_database_freezes_stands_down_within_its_lease(
    pair: Pair, postgres_server: Server
) -> None:
    """A frozen primary never answers: the active controller's ledger thread waits in its
    renewal (or a commit) for as long as the freeze lasts. It must stand down when its term
    ends, not when the database wakes (before, its stand-down waited on that thread, and a
    standby that had reached the same frozen server left the link unserved)."""
    pair.a.start()
    await pair.wait_role(pair.a, "active", 30)
    freeze(postgres_server, signal.SIGSTOP)
    try:

        def stood_down() -> bool:
            events = [line.get("event", "") for line in pair.a.log_lines()]
            return "standby: this controller no longer serves the link" in events

        await until(stood_down, LEASE_S + 15)
        assert pair.a.status() is not None  # still running, as a standby, still answering
    finally:
        freeze(postgres_server, signal.SIGCONT)
    await pair.wait_role(pair.a, "active", 60)  # the database back: it takes the lease again
    assert pair.a.stop() == 0
