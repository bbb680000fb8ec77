"""Durable state: kill -9 at random points, recover, and find every acknowledged batch
exactly once, the source offset right, and every view equal to DuckDB's evaluation."""

import datetime as dt
import signal
import subprocess
import sys
from collections import Counter
from zoneinfo import ZoneInfo

import duckdb
import pytest
from killing import kill_and_reopen

import upkeep

WORKER = r"""
import sys, upkeep
path, snapshot_bytes = sys.argv[1], int(sys.argv[2])
db = upkeep.connect(path, snapshot_bytes=snapshot_bytes)
if "a" not in db.tables():
    db.execute("CREATE TABLE a (i INTEGER, j INTEGER, v DOUBLE)")
    db.execute("CREATE TABLE b (j INTEGER, name VARCHAR)")
    db.insert("b", [(0, "zero"), (1, "one"), (2, "two")])
    db.execute("CREATE MATERIALIZED VIEW per_name AS SELECT b.name, SUM(a.v) AS total, "
               "COUNT(*) AS n FROM a JOIN b ON a.j = b.j GROUP BY b.name")
    db.execute("CREATE MATERIALIZED VIEW pairs AS SELECT a.i, b.name FROM a, b WHERE a.j = b.j")
i = db.metadata().get("next", 0)
print("start", i, flush=True)
while True:
    with db.transaction(metadata={"next": i + 1}):
        db.insert("a", BATCH(i))
        if i >= 2:
            db.delete("a", [BATCH(i - 2)[0]])
    print("ack", i, flush=True)
    i += 1
"""

BATCH_DEF = "def BATCH(i):\n    return [(i, (i + k) % 3, (i * 7 + k) / 8) for k in range(3)]\n"


def batch(i: int) -> list[tuple]:
    return [(i, (i + k) % 3, (i * 7 + k) / 8) for k in range(3)]


def model_of(upto: int) -> Counter:
    rows: Counter = Counter()
    for i in range(upto):
        rows.update(batch(i))
        if i >= 2:
            rows[batch(i - 2)[0]] -= 1
    return +rows


def duck_views(a_rows: list[tuple], b_rows: list[tuple]) -> dict[str, Counter]:
    con = duckdb.connect()
    con.execute("CREATE TABLE a (i INTEGER, j INTEGER, v DOUBLE)")
    con.execute("CREATE TABLE b (j INTEGER, name VARCHAR)")
    if a_rows:
        con.executemany("INSERT INTO a VALUES (?, ?, ?)", a_rows)
    con.executemany("INSERT INTO b VALUES (?, ?)", b_rows)
    return {
        "per_name": Counter(con.execute("SELECT b.name, SUM(a.v), COUNT(*) FROM a JOIN b "
                                        "ON a.j = b.j GROUP BY b.name").fetchall()),
        "pairs": Counter(con.execute("SELECT a.i, b.name FROM a, b WHERE a.j = b.j").fetchall()),
    }


@pytest.mark.parametrize("snapshot_bytes", [1 << 30, 4_000])
def test_kill_nine_at_random_points_loses_and_repeats_nothing(tmp_path, snapshot_bytes):
    script = tmp_path / "worker.py"
    script.write_text(BATCH_DEF + WORKER)
    path = tmp_path / "db"

    def check(db, committed: int) -> None:
        a_rows = Counter(db.execute("SELECT * FROM a").fetchall())
        assert a_rows == model_of(committed)
        b_rows = db.execute("SELECT * FROM b").fetchall()
        expected = duck_views(list(a_rows.elements()), b_rows)
        assert Counter(db.view("pairs").rows()) == expected["pairs"]
        got = {name: (total, n) for name, total, n in db.view("per_name").rows()}
        want = {name: (total, n) for name, total, n in expected["per_name"]}
        assert got.keys() == want.keys()
        for name, (total, n) in want.items():
            assert got[name][1] == n and got[name][0] == pytest.approx(total, rel=1e-9)

    kill_and_reopen(script, path, snapshot_bytes, 6, (0.0, 0.4), check)
    if snapshot_bytes < 1 << 20:
        assert any(p.name.startswith("snapshot-") for p in path.iterdir())
        assert max(p.stat().st_size for p in path.glob("wal-*.log")) < 4 * snapshot_bytes


def test_torn_log_tail_is_discarded(tmp_path):
    path = tmp_path / "db"
    db = upkeep.connect(path)
    db.execute("CREATE TABLE t (x INTEGER)")
    db.insert("t", [(1,)])
    db.insert("t", [(2,)])
    db.close()
    wal = next(path.glob("wal-*.log"))
    data = wal.read_bytes()
    wal.write_bytes(data[:-5])  # the last record was cut mid-write
    db = upkeep.connect(path)
    assert db.execute("SELECT * FROM t").fetchall() == [(1,)]
    db.insert("t", [(3,)])  # appends after the cut, not after the garbage
    db.close()
    db = upkeep.connect(path)
    assert sorted(db.execute("SELECT * FROM t").fetchall()) == [(1,), (3,)]
    db.close()


def test_catalog_changes_survive_restart(tmp_path):
    path = tmp_path / "db"
    db = upkeep.connect(path)
    db.execute("CREATE TABLE t (x INTEGER, y INTEGER)")
    db.execute("CREATE MATERIALIZED VIEW v AS SELECT x, SUM(y) AS s FROM t GROUP BY x")
    db.execute("CREATE MATERIALIZED VIEW w AS SELECT x FROM v WHERE s > 1")
    db.insert("t", [(1, 1), (1, 2), (2, 1)])
    db.execute("DROP VIEW w")
    db.execute("CREATE OR REPLACE VIEW v AS SELECT x, COUNT(*) AS s FROM t GROUP BY x")
    db.close()
    db = upkeep.connect(path)
    assert db.views() == ["v"]
    assert sorted(db.view("v").rows()) == [(1, 2), (2, 1)]
    db.close()


def test_metadata_commits_even_when_the_batch_is_empty(tmp_path):
    db = upkeep.connect(tmp_path / "db")
    db.execute("CREATE TABLE t (x INTEGER)")
    with db.transaction(metadata={"offset": 10}):
        pass
    db.close()
    db = upkeep.connect(tmp_path / "db")
    assert db.metadata() == {"offset": 10}
    db.close()


def test_metadata_reads_back_after_reopening_as_it_was_committed(tmp_path):
    """A frozenset came back a set, a datetime in a named zone with a fixed offset, and a
    datetime's fold (the second 02:30 of a night the clocks go back) was lost."""
    paris = ZoneInfo("Europe/Paris")
    metadata = {"keys": frozenset({1, 2}), "set": {3}, "tuple": (1, "a"),
                "zoned": dt.datetime(2024, 10, 27, 2, 30, fold=1, tzinfo=paris),
                "fold": dt.datetime(2024, 10, 27, 2, 30, fold=1),
                "fixed": dt.datetime(2024, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=-3))),
                "nested": [{"at": dt.datetime(2020, 3, 29, 1, 59, tzinfo=paris)}]}
    db = upkeep.connect(tmp_path / "db")
    with db.transaction(metadata=metadata):
        pass
    db.close()
    db = upkeep.connect(tmp_path / "db")
    back = db.metadata()
    assert back == metadata
    assert {k: type(v) for k, v in back.items()} == {k: type(v) for k, v in metadata.items()}
    assert back["zoned"].tzinfo is paris and back["zoned"].fold == 1
    assert back["fold"].fold == 1 and back["zoned"].utcoffset() == metadata["zoned"].utcoffset()
    assert back["nested"][0]["at"].tzinfo is paris
    db.close()


def test_a_second_process_cannot_open_the_same_database(tmp_path):
    db = upkeep.connect(tmp_path / "db")
    with pytest.raises(upkeep.Error, match="open in another process"):
        upkeep.connect(tmp_path / "db")
    db.close()


KILLED_AFTER = r"""
import os, signal, sys, upkeep
from upkeep.storage import Storage
path, kind, statement, snapshot_bytes = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
db = upkeep.connect(path, snapshot_bytes=int(snapshot_bytes))
db.execute("CREATE TABLE r (a INTEGER, b INTEGER)")
db.insert("r", [(i, i % 7) for i in range(50)])
append = Storage.append
def append_then_die(self, record):
    if "before " + record[0] == kind:
        os.kill(os.getpid(), signal.SIGKILL)
    append(self, record)
    if record[0] == kind:
        os.kill(os.getpid(), signal.SIGKILL)
Storage.append = append_then_die
db.execute(statement)
print("returned", flush=True)
"""


@pytest.mark.parametrize("kind, statement, snapshot_bytes", [
    ("table_as", "CREATE TABLE copy AS SELECT * FROM r", 1 << 30),
    ("batch", "CREATE TABLE copy AS SELECT * FROM r", 1 << 30),
    ("before filled", "CREATE TABLE copy AS SELECT * FROM r", 400),
    ("view", "CREATE MATERIALIZED VIEW copy WITH (provenance = 'why') AS SELECT a FROM r "
             "WHERE b = 1", 1 << 30),
])
def test_a_statement_killed_between_its_log_records_is_all_or_nothing(
        tmp_path, kind, statement, snapshot_bytes) -> None:
    """kill -9 right after one of a statement's log records, or before its last (it never
    returned): the table of a CREATE TABLE AS is gone, not left empty or half-filled (also
    when its rows' batch made the log long enough for a snapshot: taken then, it replaced
    the record that marks the table unfinished), and a view WITH (provenance = 'why') is
    whole, its why-provenance with it."""
    script = tmp_path / "worker.py"
    script.write_text(KILLED_AFTER)
    path = tmp_path / "db"
    done = subprocess.run([sys.executable, str(script), str(path), kind, statement,
                           str(snapshot_bytes)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr
    db = upkeep.connect(path)
    if kind == "view":
        assert db.views() == ["copy"]
        assert sorted(db.view("copy").rows()) == [(1,), (8,), (15,), (22,), (29,), (36,),
                                                 (43,)]
        assert db.why("copy", (8,)).products == [[("r", (8, 1))]]
    else:
        assert db.tables() == ["r"]
        db.execute(statement)  # and the name is free again
        assert db.execute("SELECT count(*) FROM copy").fetchall() == [(50,)]
    db.close()
    db = upkeep.connect(path)  # the recovery's own record replays
    assert sorted(db.tables()) == (["r"] if kind == "view" else ["copy", "r"])
    db.close()
