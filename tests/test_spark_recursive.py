"""Recursive views on the Spark engine: partitioned absorption fixpoints (relations split by
first attribute across Spark tasks) and DRed in one shard, against DuckDB after every
micro-batch; a rejected batch leaves every view as it was and the next one rebuilds."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from oracle import Subscription, assert_bag_equal
from test_recursive import N_NODES, QUERIES, TABLES, duck_expected

import upkeep

PARTITIONED = ("reachable", "reachable_nonlinear", "cheapest", "widest", "even_paths",
               "hop_bounded", "reach_counts")
BATCHES = 6


@pytest.fixture(scope="module")
def remote(spark):
    db = upkeep.connect(engine="spark", spark=spark, shards=3)
    for ddl in TABLES.values():
        db.execute(ddl)
    db.execute("CREATE TABLE hop(src INTEGER PRIMARY KEY, dst INTEGER)")
    subs = {}
    views = {}
    for name, (sql, oracle_sql, needs_selection) in QUERIES.items():
        views[name] = (sql, oracle_sql)
        db.create_view(name, sql, strategy="absorption")
        if not needs_selection and name in ("reachable", "even_paths", "active_regions"):
            views[f"{name}_dred"] = (sql, oracle_sql)
            db.create_view(f"{name}_dred", sql, strategy="dred")
    views["hops"] = ("WITH RECURSIVE r(src, dst) AS (SELECT src, dst FROM hop UNION "
                     "SELECT hop.src, r.dst FROM hop, r WHERE hop.dst = r.src) "
                     "SELECT * FROM r", None)
    db.create_view("hops", views["hops"][0])
    for name in views:
        subs[name] = Subscription([])
        db.view(name).subscribe(subs[name])
    yield db, views, subs
    db.close()


def _check(db, views, subs, tables: dict[str, Counter], label: str) -> None:
    for name, (sql, oracle_sql) in views.items():
        if name == "hops":
            continue
        expected = duck_expected(tables, oracle_sql or sql)
        assert_bag_equal(expected, db.view(name).rows(), f"spark view {name}", label)
        assert_bag_equal(expected, subs[name].bag(), f"spark view {name} deltas", label)


def test_recursive_views_on_spark_match_duckdb(remote) -> None:
    db, views, subs = remote
    for name in PARTITIONED:
        assert "recursive fixpoint over 3 partitions" in db.explain(name), name
    assert "recursive fixpoint" not in db.explain("reachable_dred")
    assert "recursive fixpoint" not in db.explain("same_generation")  # three-atom rule
    rnd = random.Random(6)
    tables = {t: Counter() for t in TABLES}
    first = {"sensor": [(i, i % 3, i // 3) for i in range(9)], "seed": [(1, 0), (2, 8)],
             "triggered": [(0,), (8,)]}
    with db.transaction():
        for t, rows in first.items():
            db.insert(t, rows)
            tables[t].update(rows)
    _check(db, views, subs, tables, "after the sensors")
    for step in range(BATCHES):
        links = sorted(tables["link"].elements())
        gone = rnd.sample(links, min(len(links), rnd.randint(0, 2)))
        new = [(rnd.randrange(N_NODES), rnd.randrange(N_NODES), rnd.randint(1, 3),
                rnd.randint(1, 3)) for _ in range(rnd.randint(1, 4))]
        triggered = sorted(tables["triggered"].elements())
        untrigger = rnd.sample(triggered, 1) if triggered and rnd.random() < 0.5 else []
        trigger = [(rnd.randrange(9),)]
        with db.transaction():
            if gone:
                db.delete("link", gone)
            if untrigger:
                db.delete("triggered", untrigger)
            db.insert("link", new)
            db.insert("triggered", trigger)
        tables["link"].subtract(gone)
        tables["link"].update(new)
        tables["triggered"].subtract(untrigger)
        tables["triggered"].update(trigger)
        _check(db, views, subs, tables, f"after batch {step}: -{gone} +{new}")
    counters = db.view("reachable").counters()
    assert counters["shipped_tuples"] > 0 and counters["shipped_bytes"] > 0
    assert counters["supersteps"] >= BATCHES
    with pytest.raises(upkeep.UnsupportedError):
        db.view("reachable_dred").counters()


def test_rejected_batch_leaves_partitioned_views_and_the_next_rebuilds(remote) -> None:
    db, _, subs = remote
    db.insert("hop", [(1, 2), (2, 3)])
    before = sorted(db.view("hops").rows())
    assert before == [(1, 2), (1, 3), (2, 3)]
    with pytest.raises(upkeep.Error, match="(?i)key"):
        db.insert("hop", [(5, 6), (6, 1), (7, 5), (1, 9)])  # (1, 9): a duplicate key
    assert sorted(db.view("hops").rows()) == before
    db.insert("hop", [(3, 1)])
    expected = {(a, b) for a in (1, 2, 3) for b in (1, 2, 3)}
    assert set(db.view("hops").rows()) == expected
    assert Counter(subs["hops"].bag()) == Counter(expected)
