"""Progress bars on long bulk work: a big load and a build over many rows show one on
standard error; small work and UPKEEP_PROGRESS=0 show nothing."""

import pyarrow as pa
import pytest

import upkeep
from upkeep import bulk_progress


@pytest.fixture
def small_threshold(monkeypatch):
    monkeypatch.setattr(bulk_progress, "BULK_ROWS", 1_000)


def _load(rows: int) -> upkeep.Connection:
    db = upkeep.connect()
    db.execute("CREATE TABLE t (k INTEGER, v INTEGER)")
    with db.transaction():
        db.insert("t", pa.table({"k": list(range(rows)), "v": [i % 7 for i in range(rows)]}))
    db.create_view("s", "SELECT v, COUNT(*) AS n FROM t GROUP BY v")
    return db


def test_big_load_and_build_show_a_bar(small_threshold, monkeypatch, capfd):
    monkeypatch.setenv("UPKEEP_PROGRESS", "1")
    db = _load(5_000)
    err = capfd.readouterr().err
    assert "loading rows into t" in err
    assert "building view s" in err
    assert sorted(db.view("s").rows()) == [(v, sum(1 for i in range(5_000) if i % 7 == v))
                                           for v in range(7)]


def test_small_work_and_silenced_work_show_nothing(small_threshold, monkeypatch, capfd):
    monkeypatch.setenv("UPKEEP_PROGRESS", "1")
    _load(500)
    assert capfd.readouterr().err == ""
    monkeypatch.setenv("UPKEEP_PROGRESS", "0")
    _load(5_000)
    assert capfd.readouterr().err == ""
