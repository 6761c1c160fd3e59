"""``--csv DIR``: every table of the report as its own CSV file, ``DIR/<table>.csv``.

The columns are the JSON's (:mod:`progressived.report.tables`), money in integer units, a
header row even when a table is empty; the directory is made if missing. Plain
:mod:`csv` is enough: the rows are already made, and a spreadsheet reads them as they are.
"""

from __future__ import annotations

import csv
from pathlib import Path

from progressived.report.liability import Report
from progressived.report.tables import COLUMNS, Tables, tables


def write(report: Report, folder: Path, data: Tables | None = None) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, rows in (tables(report) if data is None else data.items()):
        path = folder / f"{name}.csv"
        with path.open("w", encoding="utf-8", newline="") as out:
            writer = csv.DictWriter(out, fieldnames=COLUMNS[name], lineterminator="\n")
            writer.writeheader()
            for row in rows:
                writer.writerow({k: "" if v is None else v for k, v in row.items()})
        written.append(path)
    return written
