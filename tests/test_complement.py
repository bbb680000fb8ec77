"""Counting-based complement iteration (``lftj-incremental-maintenance.txt`` section 3.1.2)
and the anti-join views read through it."""

from __future__ import annotations

import math

import duckdb
from hypothesis import given, settings
from hypothesis import strategies as st

import upkeep
from upkeep.complement import ComplementScan, CountedKeys, sort_key
from upkeep.operators import SemiJoin

KEY = st.tuples(st.one_of(st.none(), st.integers(-5, 40)), st.integers(0, 3))


def _keys(items) -> CountedKeys:
    keys = CountedKeys()
    for k in items:
        keys.add(k)
    return keys


@settings(max_examples=200, deadline=None)
@given(st.sets(KEY, max_size=60), st.data())
def test_complement_scan_lists_the_difference_in_key_order(universe, data) -> None:
    subset = data.draw(st.sets(st.sampled_from(sorted(universe, key=sort_key)))
                       if universe else st.just(set()))
    removed = data.draw(st.sets(st.sampled_from(sorted(universe, key=sort_key)))
                        if universe else st.just(set()))
    t, s = _keys(universe), _keys(subset)
    for k in removed:  # keys leave both sets, as when a left key disappears
        t.remove(k)
        if k in subset:
            s.remove(k)
    expected = sorted(universe - removed - subset, key=sort_key)
    assert list(ComplementScan(t, s)) == expected
    assert len(t) == len(universe - removed)


@given(st.sets(KEY, max_size=40), KEY, KEY)
def test_interval_counts(keys, low, high) -> None:
    counted = _keys(keys)
    lo, hi = sort_key(low), sort_key(high)
    assert counted.count_between(low, high) == sum(lo <= sort_key(k) <= hi for k in keys)


def test_sparse_complement_costs_log_n_count_queries_per_key() -> None:
    """4 keys missing out of 4096: the scan makes O(4 log n) count queries, not 4096 probes."""
    n, missing = 4096, {17, 1000, 1001, 4095}
    universe = _keys((i,) for i in range(n))
    subset = _keys((i,) for i in range(n) if i not in missing)
    scan = ComplementScan(universe, subset)
    assert [k for (k,) in scan] == sorted(missing)
    bound = len(missing) * 2 * (math.log2(n) + 1)
    assert scan.count_queries <= bound, (scan.count_queries, bound)


def test_anti_join_view_is_read_by_complement_iteration_without_storing_its_rows() -> None:
    """Orders that were never shipped: the view keeps no rows of its own; a read lists the few
    unshipped orders with a number of count queries logarithmic in the orders per row."""
    db = upkeep.connect()
    db.execute("CREATE TABLE orders (id INTEGER, customer INTEGER)")
    db.execute("CREATE TABLE shipments (order_id INTEGER, carrier VARCHAR)")
    n = 3000
    db.insert("orders", [(i, i % 97) for i in range(n)])
    unshipped = {5, 1234, 2999}
    db.insert("shipments", [(i, "post") for i in range(n) if i not in unshipped])
    db.create_view("open_orders", """SELECT id, customer FROM orders o WHERE NOT EXISTS
                                     (SELECT 1 FROM shipments s WHERE s.order_id = o.id)""")
    view = db.runtime("open_orders")
    assert "complement of the matched keys by counting" in db.explain("open_orders")
    assert not hasattr(view, "output")  # rows live only in the anti-join's left index
    before = view.counters()["complement_count_queries"]
    assert sorted(db.view("open_orders").rows()) == [(i, i % 97) for i in sorted(unshipped)]
    spent = view.counters()["complement_count_queries"] - before
    assert 0 < spent <= len(unshipped) * 2 * (math.log2(n) + 1)
    # a shipment arrives, another is cancelled: the deltas and the next read follow
    seen = []
    db.view("open_orders").subscribe(lambda delta: seen.append(delta))
    with db.transaction():
        db.insert("shipments", [(1234, "air")])
        db.delete("shipments", [(7, "post")])
    con = duckdb.connect()
    con.execute("CREATE TABLE orders AS SELECT * FROM (VALUES "
                + ",".join(f"({i}, {i % 97})" for i in range(n)) + ") t(id, customer)")
    shipped = [i for i in range(n) if i not in unshipped | {7}] + [1234]
    con.execute("CREATE TABLE shipments AS SELECT * FROM (VALUES "
                + ",".join(f"({i})" for i in shipped) + ") t(order_id)")
    expected = con.execute("SELECT id, customer FROM orders o WHERE NOT EXISTS "
                           "(SELECT 1 FROM shipments s WHERE s.order_id = o.id)").fetchall()
    assert sorted(db.view("open_orders").rows()) == sorted(expected)
    assert seen, "the subscriber got no delta"


def test_dense_complement_is_read_by_probing_every_key() -> None:
    """Half the keys unmatched: counting would cost more than probing, so the read probes."""
    db = upkeep.connect()
    db.execute("CREATE TABLE a (k INTEGER)")
    db.execute("CREATE TABLE b (k INTEGER)")
    db.insert("a", [(i,) for i in range(1000)])
    db.insert("b", [(i,) for i in range(0, 1000, 2)])
    db.create_view("odd", "SELECT k FROM a EXCEPT SELECT k FROM b")
    assert sorted(db.view("odd").rows()) == [(i,) for i in range(1, 1000, 2)]
    counters = db.runtime("odd").counters()
    assert counters["complement_probed_keys"] == 1000
    assert counters["complement_count_queries"] == 0


def test_anti_join_inside_a_dataflow_keeps_no_ordered_key_sets() -> None:
    """Only a view read through the anti-join needs its key sets; under an aggregate the
    per-update path skips them, and the counts still match DuckDB."""
    db = upkeep.connect()
    db.execute("CREATE TABLE a (k INTEGER, g INTEGER)")
    db.execute("CREATE TABLE b (k INTEGER)")
    db.insert("a", [(i, i % 3) for i in range(30)])
    db.insert("b", [(i,) for i in range(0, 30, 4)])
    sql = ("SELECT g, COUNT(*) AS n FROM a WHERE NOT EXISTS (SELECT 1 FROM b WHERE b.k = a.k) "
           "GROUP BY g")
    db.create_view("idle", sql)
    (semijoin,) = [op for op in db.runtime("idle").root.walk() if isinstance(op, SemiJoin)]
    assert semijoin.left_keys is None and semijoin.matched_keys is None
    db.delete("b", [(8,)])
    con = duckdb.connect()
    con.execute("CREATE TABLE a AS SELECT range AS k, range % 3 AS g FROM range(30)")
    con.execute("CREATE TABLE b AS SELECT range AS k FROM range(0, 30, 4) WHERE range <> 8")
    assert sorted(db.view("idle").rows()) == sorted(con.execute(sql).fetchall())
