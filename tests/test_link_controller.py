"""The link controller over a real Mosquitto (the ledger is the in-memory stand-in).

Tables speak MQTT to it: results come back after the batch's one commit, repeats get the
stored result, a gap gets "resend", heartbeats carry ``expect``, the retained meter carries
epoch, lseq and the hit, a forged message is refused and changes nothing, a broker restart
republishes the meters, and a failed commit answers nothing.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from progressived.link.core.messages import Contribution, MeterWagers, encode
from progressived.runtime.control import request
from progressived.testing.broker import Mosquitto
from progressived.testing.waits import until
from tests.link_harness import TableClient, link_config, running
from tests.link_sim import SimTable, head_of


async def test_contribution_is_applied_after_one_commit_and_the_meter_is_published(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    config = link_config(mosquitto, tmp_path)
    async with running(config) as (controller, journal), TableClient(mosquitto, "t1") as t1:
        sim = SimTable("t1")
        await t1.send(sim.contribute(3))
        result = await t1.wait("result", lambda r: r.seq == 1)
        assert (result.status, result.code, result.lseq) == ("applied", "ok", 1)
        assert journal.kinds() == ["link_applied"]
        meter = await t1.wait("meter", lambda m: m.lseq == 1)
        assert meter.units == 1_000_000_000 + 90_000  # seed + 3% of $3
        assert meter.epoch == 0 and meter.hit is None
        # claim, then confirm: the award, a new epoch, the hit on the common sign
        await t1.send(sim.claim(seat=5))
        claimed = await t1.wait("result", lambda r: r.seq == 2)
        assert claimed.status == "applied" and claimed.awards[0].state == "pending"
        assert claimed.awards[0].units == meter.units  # royal flush: 100% of the meter shown
        hit = await t1.wait("meter", lambda m: m.epoch == 1)
        assert hit.hit is not None and (hit.hit.table, hit.hit.seat) == ("t1", 5)
        assert hit.hit.units == claimed.awards[0].units
        await t1.send(sim.confirm(sim.claims[0]))
        paid = await t1.wait("result", lambda r: r.seq == 3)
        assert paid.awards[0].state == "paid"
        status = await asyncio.to_thread(request, config.control.socket, {"action": "status"})
        assert status["ok"] and status["status"]["tables"]["t1"]["hwm"] == 3
        assert status["status"]["messages"]["applied"] == 3


async def test_a_repeat_gets_the_stored_result_and_a_gap_gets_resend(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    async with (
        running(link_config(mosquitto, tmp_path)) as (_, journal),
        TableClient(mosquitto, "t2") as t2,
    ):
        if True:
            sim = SimTable("t2")
            first = sim.contribute(1)
            await t2.send(first)
            applied = await t2.wait("result", lambda r: r.seq == 1)
            rows = len(journal.rows)
            await t2.send(first)
            await until(lambda: len([r for r in t2.of_type("result") if r.seq == 1]) == 2)
            again = [r for r in t2.of_type("result") if r.seq == 1]
            assert encode(again[0]) == encode(again[1]) == encode(applied)
            assert len(journal.rows) == rows  # a repeat journals nothing
            _second, third = sim.contribute(1), sim.contribute(1)
            await t2.send(third)  # 2 was lost
            resend = await t2.wait("result", lambda r: r.seq == 3)
            assert (resend.status, resend.resend_from) == ("resend", 2)
            for msg in sim.on_reply(resend):
                await t2.send(msg)
            await t2.wait("result", lambda r: r.seq == 3 and r.status == "applied")
            assert [r.seq for r in t2.of_type("result") if r.status == "applied"] == [1, 1, 2, 3]


async def test_heartbeats_carry_the_next_expected_sequence(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    async with running(link_config(mosquitto, tmp_path)), TableClient(mosquitto, "t3") as t3:
        beat = await t3.wait("heartbeat", lambda h: True)
        assert (beat.table, beat.expect) == ("t3", 1)
        sim = SimTable("t3")
        await t3.send(sim.contribute(2))
        await t3.send(sim.contribute(2))
        later = await t3.wait("heartbeat", lambda h: h.expect == 3)
        assert later.lseq == 2 and later.head.seq == 2


async def test_a_forged_message_is_refused_counted_and_changes_nothing(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    """A refusal that consumed no sequence is counted per table and code, not journaled
    (docs/link.md, "Fair share")."""
    async with (
        running(link_config(mosquitto, tmp_path)) as (controller, journal),
        TableClient(mosquitto, "t1") as t1,
    ):
        before = journal.book
        forged = Contribution(
            table="t2",
            seq=1,
            id="t2-1",
            head=head_of("t2", 1),
            at="2026-11-23T17:00:00Z",
            round=1,
            wagers=(MeterWagers("pmg", 1, 1_000_000),),
        )
        await t1.send(forged)  # t2's message on t1's topic
        refused = await t1.wait("result", lambda r: r.code == "forged")
        assert refused.status == "refused" and refused.lseq == 0
        await t1.send(b"{not json")
        await t1.wait("result", lambda r: r.code == "bad-json")
        assert journal.book == before
        assert journal.kinds() == []
        assert controller.status()["refusals"] == {"t1": {"bad-json": 1, "forged": 1}}


async def test_a_table_the_link_does_not_list_is_told_so_on_its_own_reply_topic(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    """``unknown-table`` reaches the table that sent on its own topic (it cannot fix it by
    resending: docs/link.md, "Refusal codes"); a forgery for a stranger is answered to no one."""
    async with (
        running(link_config(mosquitto, tmp_path)) as (controller, journal),
        TableClient(mosquitto, "t9") as t9,
        TableClient(mosquitto, "t1") as t1,
    ):
        before = journal.book
        await t9.send(SimTable("t9").contribute(2))
        refused = await t9.wait("result", lambda r: r.code == "unknown-table")
        assert (refused.status, refused.seq, refused.id, refused.lseq) == ("refused", 1, "t9-1", 0)
        assert refused.table == "t9" and "not a member of link link-a" in refused.reason
        assert journal.book == before and journal.kinds() == []
        assert controller.status()["refusals"] == {"(not a member)": {"unknown-table": 1}}
        assert not t9.of_type("heartbeat")  # heartbeats are for members only
        stranger = SimTable("t8").contribute(1)
        await t1.send(stranger)  # t8's message on t1's topic: forged, answered to t1
        await t1.wait("result", lambda r: r.code == "forged")
        assert [r.code for r in t9.of_type("result")] == ["unknown-table"]


async def test_many_messages_are_committed_in_few_batches(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    async with (
        running(link_config(mosquitto, tmp_path)) as (controller, journal),
        TableClient(mosquitto, "t1") as t1,
    ):
        sim = SimTable("t1")
        await asyncio.gather(*(t1.send(sim.contribute(1, round_no=i)) for i in range(300)))
        await t1.wait("result", lambda r: r.seq == 300, timeout=20)
        applied = [r.seq for r in t1.of_type("result") if r.status == "applied"]
        assert sorted(set(applied)) == list(range(1, 301))
        assert journal.book.tables["t1"].hwm == 300
        assert journal.commits < 300  # group commit
        assert controller.status()["messages"]["applied"] == 300


async def test_a_broker_restart_republishes_the_retained_meter(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    async with running(link_config(mosquitto, tmp_path)) as (controller, _):
        async with TableClient(mosquitto, "t1") as t1:
            await t1.send(SimTable("t1").contribute(5))
            await t1.wait("meter", lambda m: m.lseq == 1)
        mosquitto.stop()
        await until(lambda: not controller.mqtt.connected)
        mosquitto.start()  # persistence off: the retained meter is gone with it
        await until(lambda: controller.mqtt.connected, timeout=15)
        async with TableClient(mosquitto, "t2") as t2:
            await t2.wait("meter", lambda m: m.lseq == 1)
            assert next(r for _, m, r in t2.got if m.type == "meter") is True  # retained


async def test_a_failed_commit_answers_nothing_and_the_resend_is_applied(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    config = link_config(mosquitto, tmp_path)
    config = replace(config, ledger=config.ledger.model_copy(update={"retry_s": 0.1}))
    async with running(config) as (controller, journal), TableClient(mosquitto, "t1") as t1:
        sim = SimTable("t1")
        journal.fail = True
        msg = sim.contribute(1)
        await t1.send(msg)
        await until(lambda: controller.status()["ledger"]["ok"] is False)
        await asyncio.sleep(0.3)
        assert t1.of_type("result") == [] and journal.book.lseq == 0
        assert controller.status()["ledger"]["ok"] is False
        journal.fail = False
        await t1.send(msg)  # the table's outbox sends it again
        result = await t1.wait("result", lambda r: r.seq == 1)
        assert result.status == "applied" and controller.status()["ledger"]["ok"] is True


async def test_progressivectl_status_renders_a_link(mosquitto: Mosquitto, tmp_path: Path) -> None:
    from progressived.cli.control_cmd import render_answer

    config = link_config(mosquitto, tmp_path)
    async with running(config):
        answer = await asyncio.to_thread(request, config.control.socket, {"action": "status"})
        text = render_answer("status", answer)
        assert "link link-a" in text and "meter pmg: $1,000.00" in text
        assert "table t1: high-water 0, heard never" in text
        refused = await asyncio.to_thread(request, config.control.socket, {"action": "close"})
        assert refused == {"ok": False, "error": "the link controller answers `status` only"}
