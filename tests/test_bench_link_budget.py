"""bench/link_budget.py and the controller's ``link batch`` spans: each answer finds its batch
by lseq, the stages the controller cannot see are derived from the tables' times, and the
stages add up to the message's whole time."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from bench.link import write_link_config
from bench.link_budget import budget, main, spans
from progressived.link.core import batch as lb
from progressived.link.core import book
from progressived.link.core.messages import Contribution, LedgerHead, MeterWagers, encode
from progressived.link.runtime import spans as link_spans
from progressived.link.runtime.config import load_link_config

BATCH = {  # lseq 5-8, its spans 4 ms in all, written at .020
    "event": "link batch", "level": "debug", "messages": 4, "lseq": 5, "last_lseq": 8,
    "inbox_ms": 1.5, "inbox_max_ms": 3.0, "decode_ms": 0.5, "book_ms": 1.0, "commit_ms": 2.0,
    "queue_ms": 0.5, "timestamp": "2026-11-29T00:00:00.020000Z",
}
EARLIER = {**BATCH, "lseq": 1, "last_lseq": 4, "timestamp": "2026-11-29T00:00:00.010000Z"}
T0 = datetime.fromisoformat("2026-11-29T00:00:00+00:00").timestamp()


def _log() -> str:
    return "".join(f"<7>{json.dumps(e)}\n" for e in (EARLIER, BATCH)) + "not json\n"


def test_each_answer_finds_its_batch_and_the_stages_add_up() -> None:
    answers = [(T0 + 0.010, T0 + 0.025, 6)]  # sent at .010, answered at .025, lseq 6
    got = {k: [round(v * 1e3, 3) for v in vs] for k, vs in spans(_log(), answers).items()}
    assert got["receive"] == [6.0]  # the batch began at .016
    assert got["commit"] == [2.0] and got["decode"] == [0.5]
    assert got["answer"] == [5.0]  # .020 -> .025
    assert got["total"] == [15.0]
    assert sum(got[s][0] for s in ("receive", "decode", "book", "commit", "queue", "answer")) == 15.0


def test_floors_stand_beside_their_stages_and_an_answer_of_no_batch_is_left_out() -> None:
    out = budget(_log(), [(T0, T0 + 0.03, 99)], {"commit": {"p50_ms": 0.5, "p99_ms": 1.0}})
    assert "receive" not in out  # lseq 99 is in no batch
    out = budget(_log(), [(T0 + 0.010, T0 + 0.025, 6)], {"commit": {"p50_ms": 0.5, "p99_ms": 1.0},
                                                         "decode": 0.0001})
    assert out["commit"]["ratio_p50"] == 4.0
    assert out["decode"]["floor_p50_ms"] == 0.1 and out["decode"]["ratio_p50"] == 5.0
    assert out["batch"]["p50"] == 4


def test_the_command_prints_the_controller_stages(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "link.log"
    log.write_text(_log())
    assert main([str(log)]) == 0
    assert "commit" in capsys.readouterr().out
    assert main([str(tmp_path / "missing.log")]) == 2


@pytest.fixture
def structlog_at(request: pytest.FixtureRequest) -> Iterator[None]:
    saved = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(request.param))
    yield
    structlog.configure(**saved)


def _batch(tmp_path: Path) -> tuple[list[lb.Incoming], lb.Outcome]:
    params = load_link_config(write_link_config(tmp_path, 1883, ["t-01"])).params
    items = [
        lb.Incoming(
            "progressive/link/link-a/from/t-01",
            encode(Contribution(table="t-01", seq=seq, id=f"t-01:{seq}", head=LedgerHead(seq, "a" * 64),
                                at="2026-11-29T00:00:00Z", round=seq,
                                wagers=(MeterWagers("main", 7, 7_000_000),))),
            1_000 + seq,
        )
        for seq in (1, 2)
    ]
    state = book.open_book(params)
    return items, lb.run_batch(params, state, LedgerHead(0, "0" * 64), items, "progressive")


@pytest.mark.parametrize("structlog_at", [logging.DEBUG], indirect=True)
def test_the_controller_logs_a_batch_with_its_lseq_range_at_debug(
    tmp_path: Path, structlog_at: None
) -> None:
    items, outcome = _batch(tmp_path)
    marks = link_spans.BatchMarks(wall_ms=1_010.0)
    marks.decode_done()
    marks.book_done()
    with capture_logs() as logs:
        link_spans.log_batch(items, outcome, marks)
    line: dict[str, Any] = logs[0]
    assert line["event"] == "link batch" and line["messages"] == 2
    assert (line["lseq"], line["last_lseq"]) == (1, 2)
    assert line["inbox_ms"] == 8.5 and line["inbox_max_ms"] == 9.0  # 1,010 - 1,001 / 1,002
    assert line["commit_ms"] == 0.0  # nothing committed between the book and the line


@pytest.mark.parametrize("structlog_at", [logging.INFO], indirect=True)
def test_at_info_the_controller_writes_no_span(tmp_path: Path, structlog_at: None) -> None:
    items, outcome = _batch(tmp_path)
    with capture_logs() as logs:
        link_spans.log_batch(items, outcome, link_spans.BatchMarks())
    assert logs == []
