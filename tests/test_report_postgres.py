"""The liability report of a link ledger in PostgreSQL (a real server, the session's) is the
report of the same ledger in a file: the same rows, the same figures, the URL named without
its password."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from progressived.ledger.audit_copy import readable
from progressived.report import liability, period, source, tables
from progressived.storage.location import shown
from tests import report_data as rd
from tests.test_link_postgres import DatabaseRig


def test_a_link_ledger_in_postgresql_reports_as_its_file(postgres_url: str,
                                                          tmp_path: Path) -> None:
    q4 = period.quarter(rd.SITE, "2026-Q4")
    documents = []
    for name, where in (("file", tmp_path / "file" / "link.db"), ("db", postgres_url)):
        (tmp_path / name).mkdir()
        rig = DatabaseRig(tmp_path / name, where)
        rig.now_ms = int((rd.LINK_CREATED + timedelta(hours=3)).timestamp() * 1000)
        rig.play()
        rig.close()
        with readable(where) as path:
            read = source.read(path, shown(where), q4, liability.bucket_of(q4))
        report = liability.build([read], q4, created_at=datetime(2026, 12, 1, tzinfo=UTC))
        assert report.ok, report.variances
        document = tables.document(report)
        location = document["tables"]["sources"][0].pop("location")
        assert location == shown(where)
        documents.append(document)
    assert documents[0] == documents[1]
    assert documents[0]["tables"]["awards"][0]["hand"] == "royal-flush"
