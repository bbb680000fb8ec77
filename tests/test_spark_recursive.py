"""Recursive views on the Spark engine: partitioned absorption and DRed fixpoints (relations
split by first attribute across Spark tasks), against DuckDB after every
micro-batch of a random insert / delete / expiry stream (links expire 4 seconds after
insertion, by a clock the test drives); a rejected batch leaves every view as it was and the
next one rebuilds; expiry timers survive reopening the directory."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from oracle import Subscription, assert_bag_equal, duckdb_loaded
from test_recursive import N_NODES, QUERIES, TABLES, Clock

import upkeep

BATCHES = 2
TTL = 4
# One query per kind of fixpoint the partitioned engine runs (every query of test_recursive
# runs on the local engine): linear and non-linear absorption, an outer aggregate, an outer
# join that keeps the fixpoint unpartitioned, aggregate selection, and three-atom rules.
# Each partitioned view costs Spark jobs per superstep and batch, so the list stays short.
SPARK_QUERIES = {name: QUERIES[name] for name in (
    "reachable", "reachable_nonlinear", "reach_counts", "reach_join", "cheapest",
    "same_generation", "active_regions")}


@pytest.fixture(scope="module")
def remote(spark):
    clock = Clock()
    db = upkeep.connect(engine="spark", spark=spark, shards=3, clock=clock)
    for name, ddl in TABLES.items():
        db.execute(ddl + (f" WITH (ttl_seconds = {TTL})" if name == "link" else ""))
    db.execute("CREATE TABLE hop(src INTEGER PRIMARY KEY, dst INTEGER)")
    subs = {}
    views = {}
    for name, (sql, oracle_sql, needs_selection) in SPARK_QUERIES.items():
        views[name] = (sql, oracle_sql)
        db.create_view(name, sql, strategy="absorption")
        if not needs_selection and name in ("reachable", "active_regions"):
            views[f"{name}_dred"] = (sql, oracle_sql)
            db.create_view(f"{name}_dred", sql, strategy="dred")
    views["hops"] = ("WITH RECURSIVE hops(src, dst) AS (SELECT src, dst FROM hop UNION "
                     "SELECT hop.src, hops.dst FROM hop, hops WHERE hop.dst = hops.src) "
                     "SELECT * FROM hops", None)  # a CTE named like its view
    db.create_view("hops", views["hops"][0])
    for name in views:
        subs[name] = Subscription([])
        db.view(name).subscribe(subs[name])
    yield db, views, subs, clock
    db.close()


def _check(db, views, subs, tables: dict[str, Counter], label: str) -> None:
    with duckdb_loaded(TABLES.values(), tables) as con:
        for name, (sql, oracle_sql) in views.items():
            if name == "hops":
                continue
            expected = con.execute(oracle_sql or sql).fetchall()
            assert_bag_equal(expected, db.view(name).rows(), f"spark view {name}", label)
            assert_bag_equal(expected, subs[name].bag(), f"spark view {name} deltas", label)


def test_recursive_views_on_spark_match_duckdb(remote) -> None:
    db, views, subs, clock = remote
    for name in SPARK_QUERIES:  # three-atom rules (same generation, sensor regions) too
        partitioned = "recursive fixpoint over 3 partitions" in db.explain(name)
        assert partitioned == (name != "reach_join"), name  # its outer query joins a table
    assert "recursive fixpoint over 3 partitions" in db.explain("reachable_dred")
    rnd = random.Random(6)
    tables = {t: Counter() for t in TABLES}
    links: list[tuple[float, tuple]] = []  # the link copies and their insertion times
    first = {"sensor": [(i, i % 3, i // 3) for i in range(9)], "seed": [(1, 0), (2, 8)],
             "triggered": [(0,), (8,)]}
    with db.transaction():
        for t, rows in first.items():
            db.insert(t, rows)
            tables[t].update(rows)
    _check(db, views, subs, tables, "after the sensors")
    for step in range(BATCHES):
        present = sorted(tables["link"].elements())
        gone = rnd.sample(present, min(len(present), rnd.randint(0, 2)))
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
        net = Counter(new)
        net.subtract(gone)  # a batch is its net change; a net delete takes the oldest copy
        for row, w in net.items():
            for _ in range(-w):
                links.remove(next(c for c in links if c[1] == row))
            links += [(clock.now, row)] * max(w, 0)
        tables["link"] = Counter(row for _, row in links)
        tables["triggered"].subtract(untrigger)
        tables["triggered"].update(trigger)
        label = f"after batch {step} at {clock.now}: -{gone} +{new}"
        _check(db, views, subs, tables, label)
        clock.now += rnd.choice([1, 2, 3])
        links = [(at, row) for at, row in links if at + TTL > clock.now]
        tables["link"] = Counter(row for _, row in links)
        _check(db, views, subs, tables, f"{label}, then expiry at {clock.now}")
    counters = db.view("reachable").counters()
    assert counters["shipped_tuples"] > 0 and counters["shipped_bytes"] > 0
    assert counters["supersteps"] >= BATCHES
    dred = db.view("reachable_dred").counters()  # every deleted link over-deletes its reach
    assert dred["overdeleted"] > 0 and dred["shipped_tuples"] > 0


def test_rejected_batch_leaves_partitioned_views_and_the_next_rebuilds(remote) -> None:
    db, _, subs, _ = remote
    assert "recursive fixpoint over 3 partitions" in db.explain("hops")
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


def test_expiry_timers_survive_reopening_the_directory(spark, tmp_path) -> None:
    """Change files carry their commit times, so a new connection on the directory expires
    the rows on time (a row inserted before the restart, one after)."""
    clock = Clock()
    ddl = ("CREATE TABLE t(a INTEGER) WITH (ttl_seconds = 10)",
           "CREATE VIEW v AS SELECT a, COUNT(*) AS n FROM t GROUP BY a")

    def opened():
        db = upkeep.connect(engine="spark", spark=spark, shards=2, clock=clock,
                            database=tmp_path / "db")
        for sql in ddl:
            db.execute(sql)
        return db

    db = opened()
    with pytest.raises(upkeep.UnsupportedError, match="expire"):
        db.load("t", spark.createDataFrame([(4,)], "a INT"))
    db.insert("t", [(1,), (2,)])
    clock.now = 5
    db.insert("t", [(2,)])
    db.delete("t", [(1,)])
    assert sorted(db.view("v").rows()) == [(2, 2)]
    db.close()
    db = opened()
    assert sorted(db.view("v").rows()) == [(2, 2)]
    clock.now = 12
    assert sorted(db.view("v").rows()) == [(2, 1)]
    db.insert("t", [(3,)])
    clock.now = 16
    assert sorted(db.view("v").rows()) == [(3, 1)]
    db.close()


def test_the_bdd_ordering_reaches_the_spark_catalog(spark) -> None:
    with upkeep.connect(engine="spark", spark=spark, bdd_ordering="dfs") as db:
        assert db._catalog.describe()["bdd_ordering"] == "dfs"
