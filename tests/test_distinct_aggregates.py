"""SUM / AVG(DISTINCT x) kept by the aggregate operator's per-group value counts
(``aggregates.GroupState``): equal to DuckDB under random inserts and deletes (duplicates,
NULLs, NaN), and partial states merged (Spark's two-phase aggregates) equal to one state
over all the rows."""

from __future__ import annotations

import math
from collections import Counter

import duckdb
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st

import upkeep
from upkeep.aggregates import GroupState, compile_aggregate
from upkeep.expressions import ExpressionCompiler, table_scope
from upkeep.types import DOUBLE, INTEGER

VALUES = st.one_of(st.none(), st.integers(0, 4))
PRICES = st.sampled_from([None, 0.5, 1.5, 2.25, math.nan])
ROW = st.tuples(st.integers(0, 2), VALUES, PRICES)
QUERY = ("SELECT g, SUM(DISTINCT v) AS sv, AVG(DISTINCT v) AS av, SUM(DISTINCT p) AS sp, "
         "AVG(DISTINCT p) AS ap, COUNT(*) AS n FROM t GROUP BY g")


def duckdb_rows(rows: Counter) -> Counter:
    con = duckdb.connect()
    con.execute("CREATE TABLE t (g INTEGER, v INTEGER, p DOUBLE)")
    if rows:
        con.executemany("INSERT INTO t VALUES (?, ?, ?)", list(rows.elements()))
    return Counter(con.execute(QUERY).fetchall())


def same(a: Counter, b: Counter) -> bool:
    def key(row):
        return tuple("nan" if isinstance(x, float) and math.isnan(x) else
                     round(x, 9) if isinstance(x, float) else x for x in row)
    return Counter({key(r): n for r, n in a.items()}) == Counter({key(r): n for r, n in b.items()})


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.booleans(), ROW), min_size=1, max_size=30))
def test_distinct_sums_equal_duckdb_after_every_change(changes) -> None:
    db = upkeep.connect()
    db.execute("CREATE TABLE t (g INTEGER, v INTEGER, p DOUBLE)")
    view = db.create_view("v", QUERY)
    assert "recompute" not in db.explain("v")
    held: Counter = Counter()
    for insert, row in changes:
        if insert or not held[row]:
            db.insert("t", [row])
            held[row] += 1
        else:
            db.delete("t", [row])
            held[row] -= 1
        assert same(Counter(view.rows()), duckdb_rows(+held))


@settings(max_examples=25, deadline=None)
@given(st.lists(ROW, max_size=20), st.lists(ROW, max_size=20), st.data())
def test_merged_partial_states_equal_one_state(first, second, data) -> None:
    compiler = ExpressionCompiler(table_scope("t", [("g", INTEGER), ("v", INTEGER),
                                                    ("p", DOUBLE)]))
    aggs = [compile_aggregate(sqlglot.parse_one(sql), compiler)
            for sql in ("SUM(DISTINCT v)", "AVG(DISTINCT v)", "SUM(DISTINCT p)",
                        "AVG(DISTINCT p)", "COUNT(DISTINCT v)")]
    gone = data.draw(st.lists(st.sampled_from(first), max_size=len(first), unique_by=id)
                     if first else st.just([]))
    whole, a, b = GroupState(aggs), GroupState(aggs), GroupState(aggs)
    for row in first:
        whole.add(aggs, row, 1)
        a.add(aggs, row, 1)
    for row in second:
        whole.add(aggs, row, 1)
        b.add(aggs, row, 1)
    for row in gone:  # a partial state may hold deletes of rows another one inserted
        whole.add(aggs, row, -1)
        b.add(aggs, row, -1)
    a.merge(b, aggs)
    assert same(Counter([a.result(aggs)]), Counter([whole.result(aggs)]))
