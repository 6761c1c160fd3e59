"""Runs the board conformance cases and reports them (``progressivectl board-test``).

The cases are in ``board_test_cases`` (docs/protocol.md, "Conformance test"); here they run
in order, each timed, a failed hello or a lost port ending the run, and the report is
rendered as text or JSON.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass, field
from typing import Any

from progressived_drivers.board_test_cases import BoardCases, CaseFailed


@dataclass
class CaseResult:
    name: str
    passed: bool
    detail: str
    seconds: float


@dataclass
class Report:
    port: str
    cases: list[CaseResult] = field(default_factory=list)
    board: dict[str, Any] = field(default_factory=dict)
    line: dict[str, int] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return bool(self.cases) and all(c.passed for c in self.cases)

    def as_json(self) -> dict[str, Any]:
        return {
            "port": self.port,
            "passed": self.passed,
            "board": self.board,
            "line": self.line,
            "cases": [asdict(c) for c in self.cases],
        }

    def text(self) -> str:
        lines = [f"board-test {self.port}"]
        if self.board:
            lines.append("board " + " ".join(f"{k}={v}" for k, v in self.board.items()))
        for case in self.cases:
            mark = "PASS" if case.passed else "FAIL"
            lines.append(f"{mark}  {case.name:<28} {case.detail}")
        failed = sum(not c.passed for c in self.cases)
        lines.append(
            f"{len(self.cases) - failed} passed, {failed} failed"
            + ("" if failed else ": the board follows the protocol")
        )
        return "\n".join(lines)


class BoardTester(BoardCases):
    """Runs the conformance cases against the board on ``link`` and reports them."""

    async def run(self) -> Report:
        """Every case in order, timed; a failed hello or a lost port ends the run."""
        report = Report(port=self.link.port)
        beats = asyncio.get_running_loop().create_task(self._heartbeats())
        loop = asyncio.get_running_loop()
        try:
            for name in self.CASES:
                start = loop.time()
                try:
                    outcome = getattr(self, f"case_{name}")()
                    detail = await outcome if asyncio.iscoroutine(outcome) else outcome
                    passed = True
                except CaseFailed as exc:
                    detail, passed = str(exc), False
                if self.link.lost:
                    detail, passed = detail + " (port lost)", False
                report.cases.append(
                    CaseResult(name, passed, str(detail), round(loop.time() - start, 3))
                )
                if name == "hello" and not passed:
                    break  # nothing else can be judged without a hello
                if self.link.lost:
                    break
        finally:
            beats.cancel()
        report.board = dict(self.board)
        report.line = dict(self.link.decoder.counters)
        return report
