"""The one snapshot codec (progressived/core/snapshot_codec.py): both ledgers' snapshots are
read strictly (a value of the wrong JSON type or an unknown key is refused, naming the
field), and the ledgers written before it (tests/data/ledgers-0.x) still open."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.stress import demo_params
from progressived.core import snapshot_codec as codec
from progressived.engine.state import Phase
from progressived.ledger import Ledger, LedgerError, snapshot
from progressived.ledger.verify import verify
from progressived.link.core import snapshot as link_snapshot
from progressived.link.store import audit
from progressived.link.store.ledger import LinkLedger
from tests.link_sim import link_params

OLD = Path(__file__).parent / "data" / "ledgers-0.x"
AT = "2026-11-29T03:00:00.000000Z"


def copy(name: str, tmp_path: Path) -> Path:
    path = tmp_path / name
    shutil.copyfile(OLD / name, path)
    return path


def snapshots(path: Path) -> list[tuple[int, str]]:
    conn = sqlite3.connect(path)
    try:
        return [(int(s), str(t)) for s, t in conn.execute("SELECT seq, state FROM snapshots")]
    finally:
        conn.close()


def latest(path: Path) -> str:
    return snapshots(path)[-1][1]


# -- the codec ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("read", "value", "words"),
    [
        (codec.boolean, "false", "x: expected true or false, got 'false'"),
        (codec.boolean, 0, "x: expected true or false, got 0"),
        (codec.integer, True, "x: expected an integer, got True"),
        (codec.integer, "1", "x: expected an integer, got '1'"),
        (codec.string, 1, "x: expected a string, got 1"),
        (codec.array, {}, "x: expected an array, got an object"),
    ],
)
def test_a_value_of_another_json_type_is_refused_naming_it(
    read: Callable[[object, str], object], value: object, words: str
) -> None:
    with pytest.raises(codec.SnapshotError) as caught:
        read(value, "x")
    assert str(caught.value) == words


def test_an_object_needs_its_keys_and_no_other() -> None:
    assert codec.fields({"a": 1}, "o", ("a",), ("b",)) == {"a": 1}
    with pytest.raises(codec.SnapshotError, match=r"^o: missing a$"):
        codec.fields({"b": 1}, "o", ("a",), ("b",))
    with pytest.raises(codec.SnapshotError, match=r"^o: unknown key 'c'$"):
        codec.fields({"a": 1, "c": 2}, "o", ("a",))


def test_floats_nan_and_other_formats_are_refused() -> None:
    with pytest.raises(codec.SnapshotError, match=r"1\.5 is not an integer"):
        codec.parse('{"format":1,"x":1.5}', format=1)
    with pytest.raises(codec.SnapshotError, match="NaN is not a JSON number"):
        codec.parse('{"format":1,"x":NaN}', format=1)
    with pytest.raises(codec.SnapshotError, match=r"not a link snapshot of format 1"):
        codec.parse('{"format":1,"kind":"table"}', format=1, kind="link")
    with pytest.raises(codec.SnapshotError, match="not JSON"):
        codec.parse("{", format=1)


# -- the table's snapshots -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "words"),
    [
        ('"confirmed":false', '"confirmed":"false"', "awards[].confirmed: expected true or false"),
        ('"confirmed":false', '"confirmed":0', "awards[].confirmed: expected true or false"),
        ('"round":13', '"round":true', "round: expected an integer, got True"),
        ('"share_of":1', '"share_of":"1"', "awards[].share_of: expected an integer"),
        ('"phase":"locked"', '"phase":"dealt"', "phase: not a phase: 'dealt'"),
        ('"format":1', '"format":1,"extra":0', "snapshot: unknown key 'extra'"),
        ('"confirmed":false', '"confirmed":false,"paid":true', "awards[]: unknown key 'paid'"),
        ('"locked":[1,4,6]', '"locked":[1,"4",6]', "locked[]: expected an integer, got '4'"),
        ('"linked_off"', '"linked_off"', ""),  # absent: nothing to replace, reads as before
    ],
)
def test_the_table_snapshot_refuses_a_wrong_type_naming_the_field(
    old: str, new: str, words: str
) -> None:
    text = latest(OLD / "table.db")
    assert '"confirmed":false' in text and '"phase":"locked"' in text
    doctored = text.replace(old, new, 1)
    if not words:
        assert snapshot.loads(doctored).linked_off is False
        return
    assert doctored != text
    with pytest.raises(snapshot.SnapshotError) as caught:
        snapshot.loads(doctored)
    assert words in str(caught.value)


def test_a_linked_tables_optional_keys_are_read_strictly() -> None:
    text = latest(OLD / "table.db")
    assert snapshot.loads(text.replace('"format":1', '"format":1,"linked_off":true')).linked_off
    with pytest.raises(snapshot.SnapshotError, match="linked_off: expected true or false"):
        snapshot.loads(text.replace('"format":1', '"format":1,"linked_off":"false"'))
    bad = '"awaiting":[{"type":"contribute","round":1,"seat":2,"units":3,"count":true}],'
    with pytest.raises(snapshot.SnapshotError, match=r"awaiting\[\]\(contribute\).count"):
        snapshot.loads(text.replace('"balances"', f'{bad}"balances"', 1))
    bad = '"awaiting":[{"type":"pay","round":1}],'
    with pytest.raises(snapshot.SnapshotError, match="not a meter request type: 'pay'"):
        snapshot.loads(text.replace('"balances"', f'{bad}"balances"', 1))


def test_a_table_ledger_written_before_the_codec_opens_and_verifies(tmp_path: Path) -> None:
    path = copy("table.db", tmp_path)
    stored = snapshots(path)
    assert len(stored) == 8
    for _, text in stored:  # every stored snapshot reads, and writes back byte for byte
        assert snapshot.dumps(snapshot.loads(text)) == text
    with Ledger.open(path, demo_params("t-1"), at=AT, create=False) as ledger:
        assert ledger.recovery.snapshot_seq == 146  # from its latest snapshot
        assert ledger.recovery.replayed == 1
        assert ledger.state.phase is Phase.LOCKED
        assert [(a.seat, a.hand, a.confirmed) for a in ledger.state.awards] == [
            (6, "akq-spades", False)
        ]
    report = verify(path)
    assert report.ok, report.problems


def test_a_table_ledger_with_a_doctored_snapshot_refuses_to_open_in_one_line(
    tmp_path: Path,
) -> None:
    path = copy("table.db", tmp_path)
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER snapshots_no_update")
    conn.execute(
        'UPDATE snapshots SET state = replace(state, \'"confirmed":false\', \'"confirmed":"false"\')'
        " WHERE seq = 146"
    )
    conn.commit()
    conn.close()
    with pytest.raises(LedgerError) as caught:
        Ledger.open(path, demo_params("t-1"), at=AT, create=False)
    words = str(caught.value)
    assert "the snapshot at row 146 cannot be read" in words
    assert "awards[].confirmed: expected true or false, got 'false'" in words
    assert "\n" not in words
    report = verify(path, replay=True)
    assert any("cannot be read" in p.message for p in report.problems), report.problems


# -- the link's snapshots ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "words"),
    [
        ('"final":true', '"final":"true"', "groups[].final: expected true or false"),
        ('"lseq":', '"lseq":true,"x":', "snapshot: unknown key 'x'"),
        ('"hwm":', '"hwm":"1","x":', "tables[]: unknown key 'x'"),
        ('"seat":2,"state":"paid"', '"seat":true,"state":"paid"', "claims[].seat: expected an"),
        ('"state":"paid","table"', '"state":"gone","table"', "claims[].state: not a claim's"),
        ('"kind":"link"', '"kind":"link","new":1', "snapshot: unknown key 'new'"),
    ],
)
def test_the_link_snapshot_refuses_a_wrong_type_naming_the_field(
    old: str, new: str, words: str
) -> None:
    text = latest(OLD / "link.db")
    doctored = text.replace(old, new, 1)
    assert doctored != text
    with pytest.raises(link_snapshot.SnapshotError) as caught:
        link_snapshot.loads(doctored)
    assert words in str(caught.value)


def test_a_link_ledger_written_before_the_codec_opens_and_verifies(tmp_path: Path) -> None:
    path = copy("link.db", tmp_path)
    stored = snapshots(path)
    assert [seq for seq, _ in stored] == [5, 10, 23]
    for _, text in stored:
        recorded, state = link_snapshot.loads(text)
        assert link_snapshot.dumps(recorded, state) == text
        assert link_snapshot.balances_of(text) == state.balances
    with LinkLedger.open(path, link_params(2), at=AT) as ledger:
        assert ledger.recovery.snapshot_seq == 23
        assert ledger.book.claims
    report = audit.verify(path)
    assert report.ok, report.problems
