"""Comparisons with an uncorrelated scalar subquery kept as a moving threshold (issue 22;
``threshold.py``): each view equals DuckDB after every batch of random changes (NULLs, NaN,
duplicates, deletes of the rows the aggregate is over), under each comparison, in WHERE and
in HAVING; and a change of the threshold touches only the rows between its old and new
value (operation counts), where a cross join re-derives every row."""

from __future__ import annotations

import datetime
import math
import random
from collections import Counter

import pytest
from oracle import assert_bag_equal, duckdb_query, random_change, view_equals_duckdb

import upkeep

DDL = ["CREATE TABLE o (k INTEGER, g INTEGER, p DOUBLE)", "CREATE TABLE w (v DOUBLE)"]
QUERIES = [
    "SELECT k, p FROM o WHERE p > (SELECT 1.5 * avg(p) FROM o)",
    "SELECT k FROM o WHERE (SELECT max(v) FROM w) <= p AND k > 1",
    "SELECT k, p FROM o WHERE p < (SELECT avg(v) FROM w WHERE v > 0)",
    "SELECT k FROM o WHERE p = (SELECT max(p) FROM o)",  # TPC-H Q15's shape
    "SELECT k FROM o WHERE p <> (SELECT min(v) FROM w)",
    "SELECT k, p FROM o WHERE p >= (SELECT count(*) FROM w)",
    "SELECT g, sum(p) AS total FROM o GROUP BY g "
    "HAVING sum(p) > (SELECT sum(p) * 0.3 FROM o)",  # TPC-H Q11's shape
    "SELECT * FROM o WHERE k + 1 > (SELECT count(*) FROM o WHERE p > 1)",
]


def _row(rnd: random.Random, table: str) -> tuple:
    value = rnd.choice([None, math.nan, -1.0, 0.0, 1.0, 2.0, 2.0, 3.5, 8.0])
    return (rnd.randrange(8), rnd.choice([None, 0, 1]), value) if table == "o" else (value,)


@pytest.mark.parametrize("sql", QUERIES)
def test_thresholds_equal_duckdb_after_every_batch(sql) -> None:
    db = upkeep.connect()
    for ddl in DDL:
        db.execute(ddl)
    view = db.create_view("v", sql)
    assert db.explain("v").startswith("view v: strategy threshold"), db.explain("v")
    # the view reads its rows from the sorted ones; its deltas (which move the kept cut)
    # must add up to the same rows
    sent = Counter(view.rows())
    view.subscribe(lambda changes: sent.update(dict(changes)))
    rnd = random.Random(sql)
    tables: dict[str, Counter] = {"o": Counter(), "w": Counter()}
    for step in range(50):
        with db.transaction():
            for _ in range(rnd.randint(1, 4)):
                table = rnd.choice(["o", "o", "o", "w"])
                random_change(db, tables, rnd, table,
                              lambda table=table: _row(rnd, table), deletes=0.4,
                              duplicates=0.0)
        expected = duckdb_query(DDL, tables, sql)
        assert_bag_equal(expected, view.rows(), sql, f"step {step}")
        assert min(sent.values(), default=0) >= 0, sent
        assert_bag_equal(expected, list(sent.elements()), sql, f"deltas to step {step}")


def test_a_moved_threshold_touches_only_the_rows_between() -> None:
    db = upkeep.connect()
    for ddl in DDL:
        db.execute(ddl)
    db.insert("o", [(k, 0, float(k)) for k in range(10_000)])
    db.insert("w", [(5000.5,)])
    view = db.create_view("v", "SELECT k FROM o WHERE p > (SELECT max(v) FROM w)")
    # one relation's block: the view reads o's changes itself, with no helper view of it
    assert "rows of relation o through the block's filter" in db.explain("v")
    assert not any(name.endswith("__block") for name in db._catalog.views)
    assert len(view.rows()) == 4999
    before = db.view("v").counters()
    db.insert("w", [(5010.5,)])  # the threshold moves past 10 rows
    after = db.view("v").counters()
    assert after["rows_flipped"] - before["rows_flipped"] == 10
    assert len(view.rows()) == 4989
    db.insert("o", [(20_000, 0, 1.0)])  # below the threshold: sorted in, nothing emitted
    assert db.view("v").counters()["rows_flipped"] == after["rows_flipped"]
    assert len(view.rows()) == 4989


DATED = ["CREATE TABLE d (id INTEGER, dt DATE, s VARCHAR, i INTEGER)"]


@pytest.mark.parametrize("sql", [
    "SELECT id FROM d WHERE dt >= (SELECT median(dt) FROM d)",
    "SELECT id FROM d WHERE dt < (SELECT max(dt) + INTERVAL 1 HOUR FROM d)",
    "SELECT i, count(*) AS n FROM d GROUP BY i HAVING max(dt) > (SELECT median(dt) FROM d)",
])
def test_a_date_against_a_timestamp_threshold_compares_at_midnight(sql) -> None:
    """A DATE against a TIMESTAMP threshold (a median of dates, a date plus an interval)
    compares the DATE's midnight, as DuckDB does; the view compared the two values as
    they were, and raised Python's TypeError on its build and on every later change to
    the table (found by a fuzzer)."""
    rnd = random.Random(sql)
    days = [datetime.date(2020, 1, d) for d in (1, 2, 4, 9)]
    tables = {"d": Counter((k, rnd.choice([None, *days]), None, rnd.choice([1, 2]))
                           for k in range(6))}
    db = view_equals_duckdb(DATED, tables, sql)
    for step in range(20):
        random_change(db, tables, rnd, "d",
                      lambda: (rnd.randrange(9), rnd.choice([None, *days]), None,
                               rnd.choice([1, 2])))
        assert_bag_equal(duckdb_query(DATED, tables, sql), db.view("v").rows(), sql,
                         f"step {step}")


@pytest.mark.parametrize("sql", [
    "SELECT id FROM d WHERE s = (SELECT median(i) FROM d)",
    "SELECT id FROM d WHERE i <> (SELECT max(s) FROM d)",
])
def test_a_threshold_of_a_type_that_does_not_compare_is_refused(sql) -> None:
    """Text against a number under ``=`` / ``<>`` (DuckDB binds it and fails on the first
    value it cannot cast) was taken as a threshold view that raised Python's TypeError
    on every change; refused when the view is made, as ``<`` of the same types is."""
    db = upkeep.connect()
    db.execute(DATED[0])
    db.insert("d", [(1, None, "a", 1)])
    with pytest.raises(upkeep.SchemaError, match="cannot compare"):
        db.create_view("v", sql)
    assert db.views() == []
    db.insert("d", [(2, None, "b", 2)])  # the table takes changes as before
