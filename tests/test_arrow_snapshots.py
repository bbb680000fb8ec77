"""Ad-hoc SELECTs reuse a table's Arrow copy while the table does not change: every answer
must still be DuckDB's over the current rows (staged ones inside a transaction), whatever
changed the table in between, and an unchanged table is converted once."""

from __future__ import annotations

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import upkeep
from upkeep.errors import Error
from upkeep.local.arrow_snapshots import ArrowSnapshots

CREATE = "CREATE TABLE t (k INTEGER, s VARCHAR, x DOUBLE)"
QUERY = "SELECT s, count(*), sum(k), min(x) FROM t GROUP BY s"
VIEWS = {"per_s": "SELECT s, count(*) AS c, sum(k) AS total FROM t GROUP BY s",
         "big": "SELECT k, x FROM t WHERE k > 1"}
VIEW_QUERIES = ["SELECT * FROM per_s WHERE c > 0", "SELECT count(*), sum(k), max(x) FROM big"]

row = st.tuples(st.integers(0, 4), st.sampled_from(["a", "b", None]),
                st.sampled_from([0.5, 1.5, None]))
operation = st.one_of(
    st.tuples(st.just("insert"), st.lists(row, min_size=1, max_size=3)),
    st.tuples(st.just("delete where"), st.integers(0, 4)),
    st.tuples(st.just("update"), st.integers(0, 4)),
    st.tuples(st.just("select"), st.none()),
    st.tuples(st.just("staged insert"), st.lists(row, min_size=1, max_size=2)),
    st.tuples(st.just("failed transaction"), st.lists(row, min_size=1, max_size=2)),
    st.tuples(st.just("recreate"), st.lists(row, max_size=2)),
)


def answer(rows: list[tuple]) -> list[str]:
    return sorted(map(repr, rows))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(operation, max_size=12))
def test_every_select_reads_the_current_rows(operations):
    db, con = upkeep.connect(), duckdb.connect()

    def create() -> None:
        for c in (db, con):
            c.execute(CREATE)
            for name, sql in VIEWS.items():
                c.execute(f"CREATE VIEW {name} AS {sql}")

    create()

    def check(where: str, views: bool = True) -> None:
        for sql in [QUERY, *VIEW_QUERIES] if views else [QUERY]:
            got, want = db.execute(sql).fetchall(), con.execute(sql).fetchall()
            assert answer(got) == answer(want), (where, sql)

    for kind, arg in operations:
        if kind == "insert":
            db.insert("t", arg)
            con.executemany("INSERT INTO t VALUES (?, ?, ?)", arg)
        elif kind in ("delete where", "update"):
            sql = (f"DELETE FROM t WHERE k = {arg}" if kind == "delete where"
                   else f"UPDATE t SET x = 9.5 WHERE k = {arg}")
            db.execute(sql)
            con.execute(sql)
        elif kind == "staged insert":  # read inside the transaction, then committed
            with db.transaction():
                db.insert("t", arg)
                con.executemany("INSERT INTO t VALUES (?, ?, ?)", arg)
                check(kind, views=False)  # upkeep's views are as last committed
        elif kind == "failed transaction":  # nothing of it stays
            with pytest.raises(Error), db.transaction():
                db.insert("t", arg)
                db.execute("SELECT nope FROM t")
        elif kind == "recreate":
            for c in (db, con):
                for name in VIEWS:
                    c.execute(f"DROP VIEW {name}")
                c.execute("DROP TABLE t")
            create()
            if arg:
                db.insert("t", arg)
                con.executemany("INSERT INTO t VALUES (?, ?, ?)", arg)
        check(kind)


def test_an_unchanged_table_is_converted_once():
    db = upkeep.connect()
    db.execute(CREATE)
    db.insert("t", [(i, "a", 1.0) for i in range(100)])
    snapshots = db._catalog.snapshots
    built = snapshots.built
    for _ in range(3):
        assert db.execute(QUERY).fetchall() == [("a", 100, 4950, 1.0)]
    assert snapshots.built == built + 1
    db.insert("t", [(100, "a", 0.5)])
    assert db.execute(QUERY).fetchall() == [("a", 101, 5050, 0.5)]
    assert snapshots.built == built + 2
    with db.transaction():  # staged rows are read from the table and its changes
        db.insert("t", [(1, "b", 2.0)])
        assert sorted(db.execute(QUERY).fetchall()) == [("a", 101, 5050, 0.5),
                                                        ("b", 1, 1, 2.0)]
    assert snapshots.built == built + 2


def test_copies_kept_stay_within_the_budget():
    db = upkeep.connect()
    db.execute(CREATE)
    db.execute("CREATE TABLE u (k INTEGER, s VARCHAR, x DOUBLE)")
    for name in ("t", "u"):
        db.insert(name, [(i, "a" * 20, 1.0) for i in range(1000)])
    small = ArrowSnapshots(budget=0)
    big = ArrowSnapshots()
    for name in ("t", "u"):
        table = db._catalog.tables[name]
        assert small.of(table)[1].num_rows == big.of(table)[1].num_rows == 1000
    assert not small._kept and list(big._kept) == ["t", "u"]
    one = ArrowSnapshots(budget=big._kept["t"][2].nbytes)
    for name in ("t", "u"):
        one.of(db._catalog.tables[name])
    assert list(one._kept) == ["u"]  # the least recently used went first


def test_an_unchanged_view_is_converted_once():
    db = upkeep.connect()
    db.execute(CREATE)
    db.create_view("per_s", VIEWS["per_s"])
    db.insert("t", [(i, "a" if i % 2 else "b", 1.0) for i in range(100)])
    snapshots = db._catalog.snapshots
    built = snapshots.built
    for _ in range(3):
        assert sorted(db.execute(VIEW_QUERIES[0]).fetchall()) == [("a", 50, 2500),
                                                                   ("b", 50, 2450)]
    assert snapshots.built == built + 1
    with db.transaction():  # a view reads as last committed, staged changes or not
        db.insert("t", [(100, "b", 1.0)])
        assert sorted(db.execute(VIEW_QUERIES[0]).fetchall()) == [("a", 50, 2500),
                                                                   ("b", 50, 2450)]
    assert snapshots.built == built + 1
    assert sorted(db.execute(VIEW_QUERIES[0]).fetchall()) == [("a", 50, 2500),
                                                               ("b", 51, 2550)]
    assert snapshots.built == built + 2
