"""Every hot-path module names its micro-benchmark, and the micro-benchmark exists.

bench/README.md ("Micro-benchmarks, next to the code they measure") maps each hot path's
module to the ``python -m bench.X`` that measures it; the module's docstring must name the
same command, so whoever changes the module sees what to run before and after.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _table() -> list[tuple[list[str], str]]:
    text = (ROOT / "bench" / "README.md").read_text()
    section = text.split("## Micro-benchmarks, next to the code they measure", 1)[1]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[1].startswith("`progressived/"):
            continue
        modules = re.findall(r"`(progressived/[^`]+\.py)`", cells[1])
        bench = re.search(r"python -m (bench\.\w+)", cells[2])
        assert bench is not None, line
        rows.append((modules, bench.group(1)))
    return rows


def test_the_table_lists_the_hot_paths() -> None:
    benches = {b for _, b in _table()}
    assert {"bench.link_decode", "bench.ledger_plan", "bench.ledger_commit"} <= benches


def test_each_module_names_its_micro_benchmark_which_exists() -> None:
    for modules, bench in _table():
        assert (ROOT / (bench.replace(".", "/") + ".py")).is_file(), bench
        for module in modules:
            doc = ast.get_docstring(ast.parse((ROOT / module).read_text())) or ""
            assert f"python -m {bench}" in doc, f"{module} does not name {bench}"
