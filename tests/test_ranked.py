"""Per-group top-k (issue 22; ``ranked.py``): ``ROW_NUMBER() / RANK() / DENSE_RANK() OVER
(PARTITION BY .. ORDER BY ..)`` bounded in the enclosing query or by ``QUALIFY``, kept in
one sorted list per partition (an unbounded rank is a window view: ``test_windows.py``).
After every batch of random changes (NULL and NaN keys, NULL partitions, ties, duplicates,
deletes inside the windows) each view equals DuckDB's answer; the orders make tied rows
identical, so ``ROW_NUMBER``'s choice among ties cannot differ.  Operation counts show
that a change after its partition's window does not re-read it."""

from __future__ import annotations

import pytest
from oracle import WINDOW_DDL, check_window_stream

import upkeep

DDL = WINDOW_DDL
QUERIES = [
    "SELECT k, g, x, rn FROM (SELECT *, row_number() OVER (PARTITION BY g ORDER BY x DESC, k)"
    " AS rn FROM t) s WHERE rn <= 2",
    "SELECT * FROM (SELECT g, s, x, rank() OVER (PARTITION BY g ORDER BY x) AS r FROM t "
    "WHERE k > 2) WHERE r <= 2",
    "SELECT * FROM (SELECT g, s, dense_rank() OVER (PARTITION BY g ORDER BY s NULLS FIRST) "
    "AS d FROM t) q WHERE d < 3",
    "SELECT k, s FROM t QUALIFY row_number() OVER (PARTITION BY s ORDER BY k DESC) = 1",
    "SELECT * FROM (SELECT g, s, count(*) AS n, rank() OVER (PARTITION BY g "
    "ORDER BY count(*) DESC) AS r FROM t GROUP BY g, s) WHERE r <= 1",
    # partition and order columns that are not output: kept as hidden columns
    "SELECT k, rn FROM (SELECT k, row_number() OVER (PARTITION BY g ORDER BY x, k) AS rn "
    "FROM t) z WHERE 3 >= rn",
    "SELECT * FROM (SELECT g, v, row_number() OVER (PARTITION BY g ORDER BY v DESC) AS rn "
    "FROM b) WHERE rn <= 2 AND v > 0",
    "SELECT g, v FROM b QUALIFY rank() OVER (ORDER BY v) < 3",  # one partition
    # a select alias that is no input column, in the ranked window (as DuckDB reads it)
    "SELECT k, x * 2 AS y FROM t QUALIFY row_number() OVER (PARTITION BY g ORDER BY y, k) "
    "<= 2",
    "SELECT g AS h, count(*) AS n FROM b GROUP BY g QUALIFY rank() OVER (ORDER BY n DESC) = 1",
    # ORDER BY .. LIMIT after QUALIFY (the limit was taken before the rank's bound)
    "SELECT k, s FROM t QUALIFY row_number() OVER (PARTITION BY s ORDER BY k DESC) = 1 "
    "ORDER BY k LIMIT 2",
]


@pytest.mark.parametrize("sql", QUERIES)
def test_ranked_views_equal_duckdb_after_every_batch(sql) -> None:
    check_window_stream(sql, "strategy ranked")


def _ranked_counters(db) -> dict[str, int]:
    (hidden,) = [line.split()[2].rstrip(":") for line in db.explain("v").splitlines()
                 if line.startswith("helper view") and "strategy ranked" in line]
    return db.runtime(hidden).counters()  # a helper view: inspected through its runtime


def test_a_change_after_its_partitions_window_does_not_reread_it() -> None:
    db = upkeep.connect()
    for ddl in DDL:
        db.execute(ddl)
    db.insert("t", [(k, k % 2, float(k), "a") for k in range(100)])
    view = db.create_view("v", QUERIES[5].replace("3 >= rn", "2 >= rn"))
    before = _ranked_counters(db)
    db.insert("t", [(500, 0, 50.5, "a")])  # after partition 0's window
    db.delete("t", [(91, 1, 91.0, "a")])  # after partition 1's
    after = _ranked_counters(db)
    assert after["window_rebuilds"] == before["window_rebuilds"]
    assert after["sorted_updates"] == before["sorted_updates"] + 2
    db.delete("t", [(1, 1, 1.0, "a")])  # inside partition 1's window: it is re-read
    assert _ranked_counters(db)["window_rebuilds"] == after["window_rebuilds"] + 1
    assert sorted(view.rows()) == [(0, 1), (2, 2), (3, 1), (5, 2)]


def test_a_failed_batch_rebuilds_the_ranked_view_as_it_was() -> None:
    db = upkeep.connect()
    for ddl in DDL:
        db.execute(ddl)
    view = db.create_view("v", QUERIES[0])
    db.insert("t", [(1, 0, 1.0, "a"), (2, 0, 2.0, "b"), (3, 0, 3.0, "c")])
    before = sorted(view.rows())
    with pytest.raises(upkeep.Error):
        with db.transaction():
            db.insert("t", [(4, 0, 9.0, "d")])
            db.insert("t", [(1, 0, 0.0, "dup")])  # a second row with key 1
    assert sorted(view.rows()) == before
    db.insert("t", [(4, 0, 9.0, "d")])
    assert sorted(view.rows()) == [(3, 0, 3.0, 2), (4, 0, 9.0, 1)]
