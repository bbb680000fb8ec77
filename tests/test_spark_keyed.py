"""Views in Spark's keyed state (``connect(engine="spark", state="keyed")``,
``spark/keyed.py``): after every micro-batch of a random change stream each view equals
the same query recomputed by DuckDB on the current tables, and rejected batches (a delete
of a missing row, a duplicate key) leave every view as it was."""

from __future__ import annotations

import pickle
import random
from collections import Counter
from collections.abc import Callable
from decimal import Decimal

import duckdb
import pandas as pd
import pytest
from oracle import insert_rows

import upkeep
import upkeep.spark.keyed as keyed_state
from upkeep.codecs.spark_rows import encode_row
from upkeep.plan import analyse_joins, bind_query
from upkeep.spark import worker_heap
from upkeep.sql import parse_one
from upkeep.storage import StorageError

TABLES = """
CREATE TABLE nation (nk INTEGER PRIMARY KEY, region VARCHAR);
CREATE TABLE customer (ck INTEGER PRIMARY KEY, nk INTEGER, segment VARCHAR);
CREATE TABLE orders (ok INTEGER, ck INTEGER, price DECIMAL(10,2), qty INTEGER);
"""
TABLE_NAMES = ("nation", "customer", "orders")
VIEWS = {
    "per_segment": "SELECT c.segment, SUM(o.price) AS total, COUNT(*) AS n, AVG(o.qty) AS q "
                   "FROM orders o JOIN customer c ON o.ck = c.ck GROUP BY c.segment",
    "per_region": "SELECT n.region, MIN(o.price) AS lo, MAX(o.qty) AS hi, COUNT(o.qty) AS k "
                  "FROM orders o, customer c, nation n "
                  "WHERE o.ck = c.ck AND c.nk = n.nk AND o.qty > 1 GROUP BY n.region",
    "big_orders": "SELECT o.ok, c.segment FROM orders o JOIN customer c ON o.ck = c.ck "
                  "WHERE o.price > 50 AND o.qty + c.nk > 3",
    "everything": "SELECT COUNT(*) AS n, SUM(qty) AS q FROM orders",
    "segments": "SELECT DISTINCT c.segment, n.region FROM customer c JOIN nation n "
                "ON c.nk = n.nk",
    "pairs": "SELECT a.ok, b.ok AS other FROM orders a JOIN orders b "
             "ON a.ck = b.ck AND a.qty = b.qty WHERE a.ok < b.ok",
    "theta": "SELECT n.region, o.ok FROM nation n, orders o WHERE o.qty > n.nk",
    # views over views, in the same query: after the levels where their inputs emit
    "busy_segments": "SELECT segment, total FROM per_segment WHERE n > 2",
    "big_per_region": "SELECT s.region, COUNT(*) AS k FROM big_orders b "
                      "JOIN segments s ON b.segment = s.segment GROUP BY s.region",
    # set operations: keyed by the row, over chains of steps
    "all_keys": "SELECT ck FROM customer UNION ALL SELECT ck FROM orders WHERE qty > 1",
    "keys": "SELECT ck FROM customer UNION SELECT ck FROM orders",
    "idle": "SELECT ck FROM customer EXCEPT SELECT ck FROM orders",
    "bag_left": "SELECT ck FROM orders EXCEPT ALL SELECT ck FROM customer",
    "shared": "SELECT o.ck, c.segment FROM orders o JOIN customer c ON o.ck = c.ck "
              "INTERSECT ALL SELECT ck, segment FROM customer",
    "nested": "(SELECT ck FROM orders UNION ALL SELECT ck FROM customer) "
              "EXCEPT SELECT ck FROM orders WHERE qty = 5",
    "over_set": "SELECT COUNT(*) AS n FROM idle",
    # semijoins and anti-joins: keyed by the correlated values
    "buyers": "SELECT c.ck, c.segment FROM customer c "
              "WHERE EXISTS (SELECT 1 FROM orders o WHERE o.ck = c.ck AND o.qty > 1)",
    "idle_per_region": "SELECT n.region, COUNT(*) AS k FROM customer c JOIN nation n "
                       "ON c.nk = n.nk WHERE NOT EXISTS (SELECT 1 FROM orders o "
                       "WHERE o.ck = c.ck) GROUP BY n.region",
    "auto_orders": "SELECT o.ok, o.qty FROM orders o WHERE o.ck IN "
                   "(SELECT ck FROM customer WHERE segment = 'AUTO') "
                   "AND NOT EXISTS (SELECT 1 FROM nation n WHERE n.nk = o.qty)",
    "busy_pairs": "SELECT DISTINCT s.segment, s.region FROM segments s WHERE EXISTS "
                  "(SELECT 1 FROM per_segment p WHERE p.segment = s.segment AND p.n > 1)",
    "if_any_four": "SELECT COUNT(*) AS n FROM nation WHERE EXISTS "
                   "(SELECT 1 FROM orders WHERE qty = 4)",
    # NOT IN: three anti-joins, one of them NOT IN's NULL probe (a NULL qty passes only
    # while the subquery is empty; a NULL among the values passes nothing)
    "not_eu_qty": "SELECT o.ok, o.qty FROM orders o WHERE o.qty NOT IN "
                  "(SELECT n.nk FROM nation n WHERE n.region = 'EU')",
    "other_nk": "SELECT c.ck FROM customer c WHERE c.nk NOT IN "
                "(SELECT o.qty FROM orders o WHERE o.ck = c.ck)",
    # outer joins: the inner join UNION ALL each side's unmatched rows (an anti-join),
    # padded with NULLs; a NULL join value (qty) matches nothing
    "with_orders": "SELECT c.ck, c.segment, o.ok FROM customer c LEFT JOIN orders o "
                   "ON o.ck = c.ck AND o.qty > 1",
    "order_region": "SELECT o.ok, n.region FROM nation n RIGHT JOIN orders o ON n.nk = o.qty",
    "all_sides": "SELECT c.ck, o.ok FROM customer c FULL JOIN orders o ON o.ck = c.ck",
    "per_customer": "SELECT c.segment, COUNT(o.ok) AS n, SUM(o.qty) AS q FROM customer c "
                    "LEFT JOIN orders o ON o.ck = c.ck GROUP BY c.segment",
    # ON comparing the sides once: the unmatched rows by the extremum of the matches
    "bigger_orders": "SELECT c.ck, o.ok, o.qty FROM customer c LEFT JOIN orders o "
                     "ON o.ck = c.ck AND o.qty > c.nk",
    "every_column": "SELECT * FROM customer c LEFT JOIN orders o ON o.ck = c.ck",  # listed
    # ON filtering the preserved side: a customer failing it is padded
    "auto_orders_of": "SELECT c.ck, o.ok FROM customer c LEFT JOIN orders o "
                      "ON o.ck = c.ck AND c.segment = 'AUTO'",
    # derived tables in FROM: hidden helper roots, read as views are
    "busiest": "SELECT t.ck, t.n, c.segment FROM (SELECT ck, COUNT(*) AS n FROM orders "
               "GROUP BY ck) t JOIN customer c ON c.ck = t.ck WHERE t.n > 1",
    "renamed": "SELECT t.k, t.n FROM (SELECT ck, COUNT(*) FROM orders GROUP BY ck) "
               "AS t(k, n) WHERE t.n > 1",
    "nested_sub": "SELECT s.segment, MAX(s.n) AS most FROM (SELECT c.segment, t.n FROM "
                  "customer c JOIN (SELECT ck, COUNT(*) AS n FROM orders GROUP BY ck) t "
                  "ON t.ck = c.ck) s GROUP BY s.segment",
    # scalar subqueries: decorrelated into aggregate helpers joined back (by their
    # correlation values, LEFT JOINed where a missing group must read as COUNT 0)
    "pricey": "SELECT o.ok FROM orders o WHERE o.price > (SELECT MIN(price) * 2 FROM orders)",
    "order_count": "SELECT c.ck, (SELECT COUNT(*) FROM orders o WHERE o.ck = c.ck) AS n "
                   "FROM customer c",
    "under_max": "SELECT c.ck FROM customer c "
                 "WHERE c.nk < (SELECT MAX(o.qty) FROM orders o WHERE o.ck = c.ck)",
    "few_below": "SELECT c.ck FROM customer c "
                 "WHERE c.nk < (SELECT COUNT(*) FROM orders o WHERE o.qty < c.nk)",
    # SELECT DISTINCT over GROUP BY: a distinct step after the aggregate step
    "sizes": "SELECT DISTINCT COUNT(*) AS n, MAX(qty) AS most FROM orders GROUP BY ck",
    # a join by IS NOT DISTINCT FROM: a NULL qty joins a NULL qty
    "same_qty": "SELECT a.ok, b.ok AS other FROM orders a JOIN orders b "
                "ON a.qty IS NOT DISTINCT FROM b.qty AND a.ck = b.ck",
    # window functions, keyed by partition (or one key), over a helper of the rest
    "ranked": "SELECT ok, ck, RANK() OVER (PARTITION BY ck ORDER BY price) AS rk, "
              "SUM(price) OVER (PARTITION BY ck) AS tot FROM orders WHERE qty > 1",
    "running": "SELECT ok AS o, SUM(qty) OVER (ORDER BY o) AS r, "  # o: a select alias
               "LAG(qty) OVER (ORDER BY o) AS prev FROM orders",
    "firsts": "SELECT ck, COUNT(*) AS n FROM ranked WHERE rk = 1 GROUP BY ck",
    # ORDER BY .. LIMIT: each key's first rows, then one key merging them
    "top_orders": "SELECT ok, price FROM orders ORDER BY price DESC NULLS LAST, ok LIMIT 3",
    "top_hidden": "SELECT ok FROM orders ORDER BY qty NULLS FIRST, ok LIMIT 2 OFFSET 1",
    "top_segments": "SELECT segment, total FROM per_segment ORDER BY total DESC LIMIT 1",
    # views over views joining tables: the tables joined while the inner view's levels run
    "top_customers": "SELECT t.segment, c.ck FROM top_segments t JOIN customer c "
                     "ON c.segment = t.segment",
    "segment_regions": "SELECT n.region, p.total FROM customer c, nation n, per_segment p "
                       "WHERE c.nk = n.nk AND c.segment = p.segment",
    # QUALIFY, a window inside an expression, a top-k CTE: the same steps
    "latest": "SELECT ok, ck FROM orders "
              "QUALIFY ROW_NUMBER() OVER (PARTITION BY ck ORDER BY ok DESC) = 1",
    "rises": "SELECT ok, price - LAG(price) OVER (PARTITION BY ck ORDER BY ok) AS up "
             "FROM orders",
    "top_buyers": "WITH t AS (SELECT ck, COUNT(*) AS n FROM orders GROUP BY ck "
                  "ORDER BY n DESC, ck LIMIT 2) "
                  "SELECT c.segment, t.n FROM t JOIN customer c ON c.ck = t.ck",
    # grouping sets: the UNION ALL of one aggregate per set, as on one machine (a region
    # or segment of NULL is a group of its own, apart from a set's NULL)
    "rollup_regions": "SELECT n.region, c.segment, COUNT(*) AS k, SUM(o.qty) AS q, "
                      "GROUPING(n.region, c.segment) AS g FROM orders o, customer c, "
                      "nation n WHERE o.ck = c.ck AND c.nk = n.nk "
                      "GROUP BY ROLLUP (n.region, c.segment)",
    "cube_orders": "SELECT ck, qty, COUNT(*) AS n, MAX(price) AS hi FROM orders "
                   "GROUP BY CUBE (ck, qty)",
    "segment_sets": "SELECT segment, COUNT(*) AS n FROM customer "
                    "GROUP BY GROUPING SETS ((), (segment)) HAVING COUNT(*) > 1",
    # LATERAL: decorrelated, as on one machine (a top-k per outer row ranked per key)
    "two_dearest": "SELECT c.ck, s.ok, s.price FROM customer c, LATERAL (SELECT ok, price "
                   "FROM orders o WHERE o.ck = c.ck ORDER BY price DESC, ok LIMIT 2) s",
    "orders_over_nk": "SELECT c.ck, s.ok FROM customer c LEFT JOIN LATERAL (SELECT ok "
                      "FROM orders o WHERE o.ck = c.ck AND o.qty > c.nk) s ON true",
    "spent": "SELECT c.segment, s.n, s.total FROM customer c, LATERAL (SELECT COUNT(*) "
             "AS n, SUM(price) AS total FROM orders o WHERE o.ck = c.ck) s",
    # DISTINCT ON: each customer's dearest order, a window step numbering them per key
    "dearest": "SELECT DISTINCT ON (ck) ck, ok, price FROM orders "
               "ORDER BY ck, price DESC NULLS LAST, ok",
    # quantiles: each group's values in order
    "middle": "SELECT ck, MEDIAN(price) AS m, QUANTILE_DISC(qty, 0.25) AS q, "
              "ARG_MAX(price, ok) AS last_price FROM orders GROUP BY ck",
    # variances and standard deviations: exact sums of the values and their squares
    "spread": "SELECT ck, STDDEV_SAMP(price) AS sd, VAR_POP(qty) AS v, "
              "COUNT_IF(qty > 2) AS big FROM orders GROUP BY ck",
}


def recomputed(tables: dict[str, Counter]) -> Callable[[str], Counter]:
    """DuckDB over the test's own model of the base tables, with every view declared:
    returns a function from a query to its rows (one database for all views' checks)."""
    con = duckdb.connect()
    con.execute(TABLES.replace("PRIMARY KEY", ""))
    for name, rows in tables.items():
        data = list(rows.elements())
        if data:
            insert_rows(con, name, data)
    for name, definition in VIEWS.items():
        con.execute(f"CREATE VIEW {name} AS {definition}")
    return lambda sql: Counter(con.execute(sql).fetchall())


def normal(rows) -> Counter:
    return Counter(tuple(round(v, 9) if isinstance(v, float) else v for v in r) for r in rows)


@pytest.fixture(scope="module", autouse=True)
def few_keys():
    """Every test here over 4 keys per step (unless it sets its own): every step's keys
    then hold several join values, groups and rows, which the steps must tell apart."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(keyed_state, "MIN_BUCKETS", 4)
        yield


@pytest.fixture(scope="class")
def keyed(spark, tmp_path_factory):
    """Every view of VIEWS in one keyed query, and a view of each table's rows (read on
    the driver, where a SELECT of a table is a Spark job)."""
    db = upkeep.connect(engine="spark", spark=spark, shards=2, state="keyed",
                        database=tmp_path_factory.mktemp("keyed") / "db")
    db.execute(TABLES)
    for name, sql in VIEWS.items():
        db.create_view(name, sql)
    for table in TABLE_NAMES:
        db.create_view(f"{table}_rows", f"SELECT * FROM {table}")
    yield db
    db.close()


#: how EXPLAIN ends for some views: their steps, levels and helper roots
EXPLAIN_ENDINGS = {
    "busy_segments": "per_segment",  # after its level 1
    "idle": "(customer) EXCEPT (orders) -> except by row (level 0)",
    "over_set": "idle -> aggregate by group key (level 1)",
    "idle_per_region": "join nation by (n.nk) (level 0) -> anti-join with orders by (c.ck) "
                       "(level 1) -> aggregate by group key (level 2)",
    "per_customer": "per_customer__sub1 -> aggregate by group key (level 1); "
                    "per_customer__sub1 = (customer -> join orders by (o.ck) (level 0)) "
                    "UNION ALL (customer -> anti-join with orders by (c.ck) (level 0))",
    "pricey": "orders -> cross product with pricey__sub1, one key (level 1); "
              "pricey__sub1 = orders -> aggregate by group key (level 0)",
    "nested_sub": "nested_sub__sub1 -> aggregate by group key (level 2); nested_sub__sub2 = "
                  "orders -> aggregate by group key (level 0); nested_sub__sub1 = customer "
                  "-> join nested_sub__sub2 by (t.ck) (level 1)",
    "ranked": "ranked__base -> window functions by partition (ck) (level 0); "
              "ranked__base = orders",
    "top_hidden": "top_hidden__topk -> first 3 rows per key (level 0) -> rows 2..3 of "
                  "them, one key (level 1); top_hidden__topk = orders",
    "firsts": "ranked -> aggregate by group key (level 1)",
    "sizes": "orders -> aggregate by group key (level 0) -> distinct by row (level 1)",
    "if_any_four": "nation -> semijoin with orders, one key (level 0) -> aggregate by group "
                   "key (level 1)",
    "segment_sets": "(customer -> aggregate by group key (level 0)) UNION ALL (customer -> "
                    "aggregate by group key (level 0))",
}


class TestEveryViewInOneQuery:
    """The views of VIEWS in one keyed query (the class's ``keyed`` fixture, closed when
    its tests end: an open query polls its change files, about a sixth of a core, while
    the module's other tests run)."""

    def test_every_view_runs_in_keyed_state(self, keyed) -> None:
        for name in VIEWS:
            text = keyed.explain(name)
            assert "Spark keyed state" in text, (name, text)
        for name, ending in EXPLAIN_ENDINGS.items():
            assert keyed.explain(name).endswith(ending), (name, keyed.explain(name))
        assert "customer -> join nation by (n.nk) (level 0) -> join orders by (o.ck) (level 1) " \
            "-> aggregate by group key (level 2)" in keyed.explain("per_region")
        assert "cross product with orders, one key" in keyed.explain("theta")
        assert "big_orders -> join segments by (s.segment) (level 2) -> aggregate by group key " \
            "(level 3)" in keyed.explain("big_per_region")
        assert "(orders) UNION ALL (customer)) EXCEPT (orders) -> except by row (level 0)" in \
            keyed.explain("nested")
        assert "semijoin with customer by (o.ck) (level 0) -> anti-join with nation by (o.qty) " \
            "(level 1)" in keyed.explain("auto_orders")
        assert "anti-join with nation by (o.qty) (level 2)" in keyed.explain("not_eu_qty")
        assert "anti-join with orders by (c.ck, c.nk) (level 2)" in keyed.explain("other_nk")


    def test_random_changes_match_duckdb(self, keyed) -> None:
        rnd = random.Random(7)
        tables = {name: Counter() for name in TABLE_NAMES}
        nations = [(k, rnd.choice(["EU", "ASIA", None])) for k in range(4)]
        customers = [(k, rnd.randrange(5), rnd.choice(["AUTO", "HOUSE"])) for k in range(12)]
        with keyed.transaction():
            keyed.insert("nation", nations)
            keyed.insert("customer", customers[:8])
        tables["nation"].update(nations)
        tables["customer"].update(customers[:8])
        ok = 0
        for step in range(6):
            inserts = [(ok + i, rnd.randrange(13), rnd.randrange(1, 12000) / 100,
                        rnd.choice([None, 1, 2, 3, 4])) for i in range(rnd.randrange(1, 12))]
            ok += len(inserts)
            live = list(tables["orders"].elements())
            deletes = rnd.sample(live, min(len(live), rnd.randrange(0, 5)))
            with keyed.transaction():
                keyed.insert("orders", inserts)
                keyed.delete("orders", deletes)
                if step == 3:
                    keyed.insert("customer", customers[8:])
                    keyed.delete("customer", [customers[0]])
            tables["orders"].update(inserts)
            tables["orders"].subtract(deletes)
            if step == 3:
                tables["customer"].update(customers[8:])
                tables["customer"].subtract([customers[0]])
            tables = {n: +c for n, c in tables.items()}
            expected = recomputed(tables)
            for name, sql in VIEWS.items():
                assert normal(keyed.view(name).rows()) == normal(expected(sql).elements()), \
                    (step, name)


    def test_rejected_batches_change_nothing(self, keyed) -> None:
        keyed.insert("nation", [(98, "EUROPE")])  # a key held whatever tests ran before
        before = {name: Counter(keyed.view(name).rows()) for name in VIEWS}
        with pytest.raises(upkeep.ConstraintError):
            keyed.delete("orders", [(10_000, 1, 1.00, 1)])
        for rows in ([(98, "AFRICA")], [(99, "AFRICA"), (99, "ASIA")]):  # held, in one batch
            with pytest.raises(upkeep.ConstraintError,
                               match=r"duplicate primary key \(\d+\) in table nation") as info:
                keyed.insert("nation", rows)
            assert info.value.row == (rows[0][0],)  # the key, as the local engine names it
        assert {name: Counter(keyed.view(name).rows()) for name in VIEWS} == before
        # the query goes on from the state before the rejected batches
        keyed.insert("nation", [(99, "AFRICA")])
        tables = {name: Counter(keyed.view(f"{name}_rows").rows()) for name in TABLE_NAMES}
        assert tables["nation"][(99, "AFRICA")] == 1 and tables["nation"][(98, "EUROPE")] == 1
        expected = recomputed(tables)
        for name, sql in VIEWS.items():
            assert normal(keyed.view(name).rows()) == normal(expected(sql).elements()), name


def test_a_view_read_by_a_view_in_shards_stays_in_shards(spark, tmp_path) -> None:
    """Views in shards read only views in shards (and keyed views only keyed ones): a view
    that another view in shards reads is kept out of keyed state, and EXPLAIN says why."""
    db = upkeep.connect(engine="spark", spark=spark, shards=2, state="keyed",
                        database=tmp_path / "db")
    db.execute(TABLES)
    db.create_view("per_segment", VIEWS["per_segment"])
    db.create_view("labels", "WITH RECURSIVE t(segment, d) AS (SELECT segment, 0 FROM "
                             "per_segment UNION SELECT segment, d + 1 FROM t WHERE d < 2) "
                             "SELECT segment, d FROM t")
    db.create_view("alone", VIEWS["everything"])
    assert "not in keyed state: view labels reads it and runs in shards" in \
        db.explain("per_segment")
    assert "not in keyed state: a recursive CTE" in db.explain("labels")
    assert "Spark keyed state" in db.explain("alone")
    db.close()


def test_bulk_load_builds_keyed_state(spark, tmp_path, monkeypatch) -> None:
    """``db.load`` fills keyed state by Spark jobs running the steps' own code; the views
    then follow changes, and a reopened directory starts from the loaded rows too.  One
    view of each kind of step (and the views they read).  The build runs in more tasks
    than the state has partitions (as a big load does, to bound each task's memory)."""
    monkeypatch.setattr(keyed_state, "BUILD_ROWS", 20_000)  # 1,024 keys: 6 build tasks
    views = {name: VIEWS[name] for name in (
        "per_segment", "per_region", "everything", "segments", "big_orders", "big_per_region",
        "idle", "idle_per_region", "auto_orders", "per_customer", "nested_sub", "same_qty",
        "ranked", "top_orders", "sizes")}
    rnd = random.Random(11)
    nations = [(k, ["EU", "ASIA", None][k % 3]) for k in range(5)]
    customers = [(k, k % 6, ["AUTO", "HOUSE"][k % 2]) for k in range(40)]
    orders = [(k, rnd.randrange(45), Decimal(rnd.randrange(1, 9000)) / 100,
               rnd.choice([None, 1, 2, 5]))
              for k in range(600)]
    schemas = {"nation": "nk int, region string", "customer": "ck int, nk int, segment string",
               "orders": "ok int, ck int, price decimal(10,2), qty int"}
    data = {"nation": nations, "customer": customers, "orders": orders}

    def opened():
        db = upkeep.connect(engine="spark", spark=spark, shards=2, state="keyed",
                            database=tmp_path / "db")
        db.execute(TABLES)
        for name, sql in views.items():
            db.create_view(name, sql)
        return db

    db = opened()
    for table, rows in data.items():
        db.load(table, spark.createDataFrame(rows, schemas[table]))
    tables = {t: Counter(rows) for t, rows in data.items()}
    seen: list = []
    db.view("per_segment").subscribe(seen.extend)
    expected = recomputed(tables)
    for name, sql in views.items():
        assert normal(db.view(name).rows()) == normal(expected(sql).elements()), name
    assert Counter(r for r, w in seen for _ in range(w)) == Counter(db.view("per_segment").rows())
    # the joins ordered by the loads' sizes: the 600 orders keyed by customer, not nation
    by_sizes = "customer -> join nation by (n.nk) (level 0) -> join orders by (o.ck) (level 1)"
    assert by_sizes in db.explain("per_region")
    gone, new = orders[:7], [(1000 + k, k, 12.5, 2) for k in range(5)]
    with db.transaction():
        db.delete("orders", gone)
        db.insert("orders", new)
    tables["orders"].subtract(gone)
    tables["orders"].update(new)
    expected = recomputed(tables)
    for name, sql in views.items():
        assert normal(db.view(name).rows()) == normal(expected(sql).elements()), name
    db.stop()
    again = opened()
    for name, sql in views.items():
        assert normal(again.view(name).rows()) == normal(expected(sql).elements()), name
    assert by_sizes in again.explain("per_region")
    again.close()


def test_timestamp_tables_load_change_and_update_in_keyed_state(spark, tmp_path) -> None:
    """A TIMESTAMP column (microseconds, no zone: Spark's ``timestamp_ntz``) bulk-loaded,
    changed, updated by a statement and read back through keyed views equal to DuckDB; a
    zoned ``timestamp`` column is refused by the load, naming the cast to make."""
    import datetime as dt

    ddl = "CREATE TABLE ev (id INT, k INT, ts TIMESTAMP)"
    views = {"per_day": "SELECT date_trunc('day', ts) AS day, COUNT(*) AS n, MAX(ts) AS last "
                        "FROM ev GROUP BY 1",
             "pairs": "SELECT a.id, b.id AS other FROM ev a JOIN ev b ON a.ts = b.ts "
                      "AND a.id < b.id",
             "late": "SELECT id, hour(ts) AS h, date_diff('minute', TIMESTAMP "
                     "'2024-01-01 00:00:00', ts) AS m FROM ev WHERE ts >= DATE '2024-01-03'"}
    rows = [(i, i % 3, dt.datetime(2024, 1, 1 + i % 5, i % 24, 30, 0, 250_000 * (i % 4)))
            for i in range(60)]
    db = upkeep.connect(engine="spark", spark=spark, state="keyed", database=tmp_path / "db")
    db.execute(ddl)
    with pytest.raises(upkeep.SchemaError, match="timestamp_ntz"):
        db.load("ev", spark.createDataFrame(rows[:2], "id int, k int, ts timestamp"))
    db.load("ev", spark.createDataFrame(rows, "id int, k int, ts timestamp_ntz"))
    for name, sql in views.items():
        db.create_view(name, sql)
    new = [(100, 1, dt.datetime(2024, 1, 3, 0, 0, 0, 1)), (101, 2, rows[7][2])]
    with db.transaction():
        db.delete("ev", rows[:4])
        db.insert("ev", new)
    db.execute("UPDATE ev SET ts = ts + INTERVAL 90 MINUTE WHERE k = 1")
    con = duckdb.connect()
    con.execute(ddl)
    con.executemany("INSERT INTO ev VALUES (?, ?, ?)", rows[4:] + new)
    con.execute("UPDATE ev SET ts = ts + INTERVAL 90 MINUTE WHERE k = 1")
    for name, sql in views.items():
        assert normal(db.view(name).rows()) == normal(con.execute(sql).fetchall()), name
    db.close()


def test_bulk_load_with_a_duplicate_key_is_rejected(spark, tmp_path) -> None:
    db = upkeep.connect(engine="spark", spark=spark, shards=2, state="keyed",
                        database=tmp_path / "db")
    db.execute(TABLES)
    db.create_view("regions", VIEWS["segments"])
    db.load("nation", spark.createDataFrame([(1, "EU"), (1, "ASIA")], "nk int, region string"))
    with pytest.raises(upkeep.ConstraintError, match=r"duplicate primary key \(1\)"):
        db.view("regions").rows()
    db.close()


def _state_read_by_one_row(spark, tmp_path, orders: int) -> dict[str, int]:
    db = upkeep.connect(engine="spark", spark=spark, shards=2, state="keyed",
                        database=tmp_path / f"db{orders}")
    db.execute(TABLES)
    db.create_view("per_segment", VIEWS["per_segment"])
    assert "Spark keyed state" in db.explain("per_segment")  # planned before the load
    db.load("customer", spark.createDataFrame(
        [(k, k % 6, ["AUTO", "HOUSE"][k % 2]) for k in range(50)],
        "ck int, nk int, segment string"))
    db.load("orders", spark.createDataFrame(
        [(k, k % 50, Decimal("1.50"), 1) for k in range(orders)],
        "ok int, ck int, price decimal(10,2), qty int"))
    db.view("per_segment").rows()  # the loaded state's own micro-batch
    # the least of a few 1-row batches: an append to a join side reads that side first
    # by chance (one in COMPACT_ODDS, so that it is compacted), which is not this cost
    runs = []
    for extra in range(4):
        db.insert("orders", [(orders + extra, 7, Decimal("2.50"), 2)])
        runs.append(db.last_batch_metrics())
    db.close()
    return {name: min(run[name] for run in runs) for name in ("bytes_read", "gets")}


def test_one_row_batch_reads_what_its_keys_hold(spark, tmp_path, monkeypatch) -> None:
    """A 1-row micro-batch reads the state of the keys it touches (Spark's own RocksDB
    metrics), not the state a view holds: about the same bytes at 10x the loaded rows,
    since the keys a step hashes into grow with the load (scaled down here: 8 rows per
    key instead of 128, so that 500 and 5,000 rows get different key counts), also when
    the view was explained before the load."""
    monkeypatch.setattr(keyed_state, "ROWS_PER_KEY", 8)
    monkeypatch.setattr(keyed_state, "MIN_BUCKETS", 16)
    small = _state_read_by_one_row(spark, tmp_path, 500)
    large = _state_read_by_one_row(spark, tmp_path, 5_000)
    assert 0 < large["bytes_read"] <= 1.5 * small["bytes_read"], (small, large)
    assert large["gets"] <= small["gets"] + 2, (small, large)


def test_delete_and_update_where_read_the_keyed_tables(spark, tmp_path) -> None:
    """``DELETE ... WHERE`` / ``UPDATE ... WHERE`` find their rows by a Spark job over the
    tables' keyed state, also inside a transaction over rows staged before them; views and
    the tables (seen through a view of each) equal DuckDB running the same statements."""
    db = upkeep.connect(engine="spark", spark=spark, shards=2, state="keyed",
                        database=tmp_path / "db")
    con = duckdb.connect()
    con.execute(TABLES.replace("PRIMARY KEY", ""))
    for name, definition in VIEWS.items():
        con.execute(f"CREATE VIEW {name} AS {definition}")
    db.execute(TABLES)
    # one view of each kind of step (the random stream above runs them all), the tables
    # seen through views, and a view in shards: its operator's state is not a table
    # step's (it once failed the statements' read of the keyed state with a raw Spark error)
    kinds = ("per_segment", "per_region", "big_orders", "busy_segments", "keys", "idle",
             "buyers", "not_eu_qty", "with_orders", "all_sides", "ranked", "top_orders")
    views = {**{name: VIEWS[name] for name in kinds},
             "all_orders": "SELECT * FROM orders", "all_nations": "SELECT * FROM nation",
             "reached": "WITH RECURSIVE t(ok, d) AS (SELECT ok, 0 FROM orders UNION "
                        "SELECT ok, d + 1 FROM t WHERE d < 1) SELECT ok, d FROM t"}
    for name, sql in views.items():
        db.create_view(name, sql)
    statements = [
        "INSERT INTO nation VALUES (1, 'EU'), (2, 'ASIA'), (3, NULL)",
        "INSERT INTO customer VALUES (1, 1, 'AUTO'), (2, 2, 'HOUSE'), (3, 3, 'AUTO')",
        "INSERT INTO orders VALUES (1, 1, 10.00, 2), (2, 1, 60.00, 3), (3, 2, 70.00, 4), "
        "(4, 3, 5.00, NULL), (5, 2, 80.00, 2)",
        "DELETE FROM orders WHERE price > 65 AND qty >= 3",
        "UPDATE orders SET price = price * 2, qty = 7 WHERE ck = 1",
        "UPDATE nation SET region = 'AFRICA' WHERE region IS NULL",
        "DELETE FROM orders WHERE qty IS NULL",
    ]
    assert "not in keyed state: a recursive CTE" in db.explain("reached")
    with db.transaction():  # the three inserts in one micro-batch
        for sql in statements[:3]:
            db.execute(sql)
    for sql in statements[3:]:
        db.execute(sql)
    for sql in statements:
        con.execute(sql)
    with db.transaction():
        db.execute("INSERT INTO orders VALUES (9, 3, 99.00, 9)")
        assert db.execute("DELETE FROM orders WHERE qty = 9 OR ok = 5").rowcount == 2
    con.execute("DELETE FROM orders WHERE ok = 5")
    for name, sql in views.items():
        assert normal(db.view(name).rows()) == normal(con.execute(sql).fetchall()), name
    with pytest.raises(upkeep.ConstraintError, match=r"duplicate primary key \(1\)"):
        db.execute("UPDATE nation SET nk = 1")
    # a primary key's columns are NOT NULL, as on the local engine: refused on the driver
    with pytest.raises(upkeep.ConstraintError, match="NULL in NOT NULL column nk"):
        db.execute("UPDATE nation SET nk = NULL WHERE nk = 2")
    with pytest.raises(upkeep.ConstraintError, match="NULL in NOT NULL column ck"):
        db.insert("customer", [(None, 1, "AUTO")])
    assert normal(db.view("all_nations").rows()) == normal(
        con.execute("SELECT * FROM nation").fetchall())
    with pytest.raises(upkeep.SchemaError):
        db.execute("DELETE FROM orders WHERE nope = 1")
    db.close()


def test_bad_statements_loads_and_closes_are_upkeep_errors_and_change_nothing(
        spark, tmp_path) -> None:
    """A WHERE that cannot evaluate a stored row, a load that is not Parquet, has a column
    the table lacks or a decimal too wide for its column, a key inserted twice in one
    transaction (then deleted again), and a transaction closed under it: each was a raw
    Spark error, a silent drop or a commit; now the local engine's error, nothing kept."""
    db = upkeep.connect(engine="spark", spark=spark, shards=2, state="keyed",
                        database=tmp_path / "db")
    db.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, s VARCHAR, d DECIMAL(6, 2))")
    db.create_view("all_t", "SELECT * FROM t")
    (tmp_path / "text").mkdir()
    (tmp_path / "text" / "x.parquet").write_text("k,s,d\n1,a,1.00\n")
    loads = {
        str(tmp_path / "text"): "bulk load of table t",
        spark.createDataFrame([(1, "a", Decimal("1.00"), 5)], "k int, s string, "
                              "d decimal(6,2), extra int"): "extra, which the table lacks",
        spark.createDataFrame([(1, "a", Decimal("123456.50"))], "k int, s string, "
                              "d decimal(20,2)"): r"does not fit DECIMAL\(6,2\)",
        "a pandas frame": "extra, which the table lacks",
    }
    frame = pd.DataFrame({"k": [1], "s": ["a"], "d": [Decimal("1.00")], "extra": [5]})
    for data, message in loads.items():
        with pytest.raises(upkeep.SchemaError, match=message):
            db.load("t", frame if data == "a pandas frame" else data)
    db.insert("t", [(1, "abc", Decimal("1.00")), (2, "7", Decimal("2.00"))])
    for sql in ("DELETE FROM t WHERE CAST(s AS INTEGER) = 7",
                "UPDATE t SET s = 'x' WHERE CAST(s AS INTEGER) = 7"):
        with pytest.raises(upkeep.EvaluationError, match="could not cast 'abc'"):
            db.execute(sql)
    with pytest.raises(upkeep.ConstraintError, match=r"duplicate primary key \(5\)"):
        with db.transaction():
            db.execute("INSERT INTO t VALUES (5, 'a', 1.00)")
            db.execute("INSERT INTO t VALUES (5, 'b', 1.00)")
            db.execute("DELETE FROM t WHERE k = 5")
    expected = [(1, "abc", Decimal("1.00")), (2, "7", Decimal("2.00"))]
    assert sorted(db.view("all_t").rows()) == expected
    with pytest.raises(StorageError, match="closed"):
        with db.transaction():
            db.insert("t", [(3, "c", Decimal("3.00"))])
            db.close()
    assert not [q for q in spark.streams.active if str(tmp_path) in str(q.name)]
    again = upkeep.connect(engine="spark", spark=spark, shards=2, state="keyed",
                           database=tmp_path / "db")
    again.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, s VARCHAR, d DECIMAL(6, 2))")
    again.create_view("all_t", "SELECT * FROM t")
    assert sorted(again.view("all_t").rows()) == expected
    again.close()


def test_an_evaluation_error_names_its_view_as_on_one_machine(spark, tmp_path) -> None:
    """A batch a view cannot evaluate is rejected with the view named (``view`` and the
    message), in a view's filter and in its later steps, as the local engine names it (it
    was ``view=None``)."""
    views = {"ratio": "SELECT k, 100 // (q - 5) AS r FROM t",
             "picky": "SELECT k FROM t WHERE 10 // (q - 6) > 0",
             "per_q": "SELECT q, SUM(100 // (k - 3)) AS s FROM t GROUP BY q"}
    db = upkeep.connect(engine="spark", spark=spark, shards=2, state="keyed",
                        database=tmp_path / "db")
    local = upkeep.connect()
    for con in (db, local):
        con.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, q INTEGER)")
        for name, sql in views.items():
            con.create_view(name, sql)
        con.insert("t", [(1, 1)])
    for row, view in [((2, 5), "ratio"), ((2, 6), "picky"), ((3, 1), "per_q")]:
        for con in (db, local):
            with pytest.raises(upkeep.EvaluationError, match=f"^view {view}: division") as err:
                con.insert("t", [row])
            assert err.value.view == view
    assert db.view("ratio").rows() == [(1, -25)]
    db.close()


@pytest.mark.parametrize("state", ["keyed", "shards"])
def test_a_failing_argument_fails_its_view_only_while_its_row_joins(spark, tmp_path,
                                                                     state) -> None:
    """An aggregate's argument is computed over the join's rows (docs/sql.md): a row whose
    cast fails and that joins nothing is accepted, and the batch that makes it join is
    rejected naming the view, on Spark as on one machine (where dyn keeps the failure
    until the row joins: ``failed_values``)."""
    sql = ("SELECT o.name, SUM(CAST(l.s AS INTEGER)) AS t FROM o JOIN l ON o.k = l.k "
           "GROUP BY o.name")
    db = upkeep.connect(engine="spark", spark=spark, shards=2, state=state,
                        database=tmp_path / "db")
    local = upkeep.connect()
    for con in (db, local):
        con.execute("CREATE TABLE o (k INTEGER, name VARCHAR)")
        con.execute("CREATE TABLE l (k INTEGER, s VARCHAR)")
        con.insert("o", [(1, "a")])
        con.insert("l", [(1, "5")])
        con.create_view("v", sql)
        con.insert("l", [(2, "y")])  # joins no order: accepted
        with pytest.raises(upkeep.EvaluationError, match="^view v: could not cast 'y'"):
            con.insert("o", [(2, "b")])
        assert con.view("v").rows() == [("a", 5)]
        assert sorted(con.execute("SELECT * FROM l").fetchall()) == [(1, "5"), (2, "y")]
    db.close()


def test_a_helper_never_takes_a_views_name() -> None:
    """A derived table's helper root is named ``<view>__sub<i>``; where a view already has
    that name, the view reading the derived table stays out of keyed state and says why
    (the helper would have replaced the other view's steps)."""
    local = upkeep.connect()
    local.execute(TABLES)
    schema = keyed_state._schema_of(keyed_state.freeze(local._catalog.describe()))
    views = [("v__sub1", "SELECT ck FROM orders"),
             ("v", "SELECT t.ck FROM (SELECT ck FROM orders WHERE qty > 1) t"),
             ("w", "SELECT t.ck FROM (SELECT ck FROM orders WHERE qty > 1) t")]
    compiled, refused = keyed_state._compile_all(views, schema, ("nation", "customer", "orders"),
                                                 4, {})
    assert compiled.views == ["v__sub1", "w"]
    assert refused == {"v": "its helper's name v__sub1 is a view's"}
    assert compiled.roots["w__sub1"].hidden and not compiled.roots["v__sub1"].hidden


def test_joins_are_ordered_so_no_big_side_is_keyed_by_few_values() -> None:
    """With the tables' loaded sizes, a join chain keys the fact rows by the customer and
    only the customers by the nation: in the atoms' own order (orders, customer, nation)
    every orders-customer row lands under one of the 25 nation keys (at TPC-H SF 10, 600k
    rows per key, which ran Spark out of memory when handed to it as initial state).
    Without loads (tables fed by changes alone) the PRIMARY KEYs the joins reach give the
    same order: orders reference customers, customers nations.  Where no order is better
    (equal loads; no loads and no keys) the atoms' own order stays."""
    def chains(tables: str, loaded: dict[str, int] | None) -> list[str]:
        local = upkeep.connect()
        local.execute(tables)
        views = {"by_region": VIEWS["per_region"], "per_segment": VIEWS["per_segment"]}
        for name, sql in views.items():
            local.create_view(name, sql)
        catalog = local._catalog.describe()
        layout, refused = keyed_state.plan_keyed(catalog, views, loaded)
        assert not refused
        return [layout.describe(v, catalog).split("partitions: ", 1)[1] for v in views]

    own = ["orders -> join customer by (c.ck) (level 0) -> join nation by (n.nk) (level 1) "
           "-> aggregate by group key (level 2)",
           "orders -> join customer by (c.ck) (level 0) -> aggregate by group key (level 1)"]
    dimensions_first = ["customer -> join nation by (n.nk) (level 0) -> join orders by (o.ck) "
                        "(level 1) -> aggregate by group key (level 2)", own[1]]
    keyless = TABLES.replace("PRIMARY KEY", "")
    assert chains(keyless, None) == own
    assert chains(TABLES, None) == dimensions_first
    assert chains(TABLES, {"orders": 100, "customer": 100, "nation": 100}) == own
    sized = {"orders": 15_000_000, "customer": 1_500_000, "nation": 25}
    assert chains(TABLES, sized) == chains(keyless, sized) == dimensions_first


def test_top_k_ties_are_cut_as_the_local_engine_cuts_them() -> None:
    """Rows that tie in a top-k's ORDER BY are ordered by their own values on both
    engines (not by arrival, nor by hash), so both keep the same rows."""
    sql = "SELECT a, b FROM r ORDER BY b LIMIT 3"
    local = upkeep.connect()
    local.execute("CREATE TABLE r (a INTEGER, b INTEGER)")
    local.create_view("top", sql)
    rows = [(a, 5) for a in (9, 5, 1, 7, 3, 0, 2, 8, 6, 4)] + [(0, 4)]
    for row in rows:
        local.insert("r", [row])
    catalog = local._catalog.describe()
    layout, refused = keyed_state.plan_keyed(catalog, {"top": sql})
    step = keyed_state.compile_views(layout, keyed_state.freeze(catalog)).roots["top"]
    kept = step.first(dict.fromkeys(rows, 1), 3)
    assert sorted(kept) == sorted(local.view("top").rows()) == [(0, 4), (0, 5), (1, 5)]


def test_join_sizes_without_loads_follow_the_primary_keys_the_joins_reach() -> None:
    """An atom whose equalities cover another's whole PRIMARY KEY references it (many rows
    to one) and is estimated KEY_FANOUT times bigger; a key joined to a key both ways is
    one to one; a join on part of a composite key references nothing."""
    db = upkeep.connect()
    db.execute(TABLES + "CREATE TABLE line (ok INTEGER, n INTEGER, ck INTEGER, "
               "PRIMARY KEY (ok, n)); CREATE TABLE note (ok INTEGER, n INTEGER, txt VARCHAR);")
    catalog = db._catalog.describe()
    facts = keyed_state.TableFacts.of(catalog, {})
    schema = {name: cols for name, cols, *_ in catalog["tables"]}.__getitem__

    def sizes(sql: str) -> list[int]:
        block = bind_query(parse_one(sql), schema)
        return keyed_state._sizes_by_keys(block, analyse_joins(block).equalities, facts.primary)

    fan = keyed_state.KEY_FANOUT
    assert sizes("SELECT * FROM orders o, customer c, nation n "
                 "WHERE o.ck = c.ck AND c.nk = n.nk") == [fan * fan, fan, 1]
    assert sizes("SELECT * FROM customer a, customer b WHERE a.ck = b.ck") == [1, 1]
    assert sizes("SELECT * FROM note t, line l WHERE t.ok = l.ok") == [1, 1]
    assert sizes("SELECT * FROM note t, line l, customer c "
                 "WHERE t.ok = l.ok AND t.n = l.n AND l.ck = c.ck") == [fan * fan, fan, 1]


def test_a_view_over_a_view_joins_its_tables_while_the_inner_views_levels_run() -> None:
    """A join step runs at the level after the previous one, or later when it joins a
    view whose rows come later: the tables of a view over a view are joined while the
    inner view's levels run (they waited for it: one level more per table joined), and,
    with the loads' sizes (or, without loads, the keys'), the inner view is joined last
    where the sizes leave the choice."""
    over = ("SELECT n.region, p.total FROM {} WHERE c.nk = n.nk AND c.segment = p.segment")
    views = {"per_segment": VIEWS["per_segment"],
             "tables_first": over.format("customer c, nation n, per_segment p"),
             "view_first": over.format("per_segment p, customer c, nation n")}

    def chain(tables: str, view: str, loaded: dict[str, int] | None) -> str:
        local = upkeep.connect()
        local.execute(tables)
        for name, sql in views.items():
            local.create_view(name, sql)
        catalog = local._catalog.describe()
        catalog["view_columns"] = {name: local._catalog.schema_of(name) for name in views}
        layout, refused = keyed_state.plan_keyed(catalog, views, loaded)
        assert not refused
        return layout.describe(view, catalog).split("partitions: ", 1)[1]

    early = ("customer -> join nation by (n.nk) (level 0) -> join per_segment by "
             "(p.segment) (level 2)")
    keyless = TABLES.replace("PRIMARY KEY", "")
    assert chain(keyless, "tables_first", None) == early
    assert chain(keyless, "view_first", None) == ("per_segment -> join customer by "
                                                  "(c.segment) (level 2) -> join nation by "
                                                  "(n.nk) (level 3)")
    assert chain(keyless, "view_first", {"orders": 600, "customer": 40, "nation": 5}) == early
    assert chain(TABLES, "view_first", None) == early


def test_workers_freeze_their_heap_once_and_the_driver_never(spark) -> None:
    """PySpark's daemon collects garbage after every task: a worker moves what its first
    task loaded out of the collector's reach (:func:`worker_heap.freeze_worker_heap`),
    the driver's process is left alone."""
    import gc

    def frozen(frames):
        for frame in frames:
            worker_heap.freeze_worker_heap()
            first = gc.get_freeze_count()
            worker_heap.freeze_worker_heap()
            yield pd.DataFrame({"first": [first] * len(frame),
                                "again": [gc.get_freeze_count()] * len(frame)})

    before = gc.get_freeze_count()
    worker_heap.freeze_worker_heap()
    assert gc.get_freeze_count() == before
    counts = spark.range(4).mapInPandas(frozen, "first long, again long").collect()
    assert counts and all(r.first > 1000 and r.again == r.first for r in counts), counts


def test_a_worker_that_froze_its_heap_exits_without_leak_reports() -> None:
    """Frozen objects are not collected at exit: DuckDB's bindings would report each of
    theirs as leaked on the worker's stderr, unless the heap is unfrozen first."""
    import subprocess
    import sys

    script = (
        "import upkeep\n"
        "from upkeep.spark import worker_heap\n"
        "worker_heap.TaskContext = type('Task', (), {'get': staticmethod(lambda: 1)})\n"
        "db = upkeep.connect()\n"
        "db.execute('CREATE TABLE t (a INTEGER)')\n"
        "db.execute('INSERT INTO t VALUES (1)')\n"
        "assert db.execute('SELECT a, count(*) FROM t GROUP BY a').fetchall() == [(1, 1)]\n"
        "worker_heap.freeze_worker_heap()\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "leaked" not in done.stderr, done.stderr[-2000:]


def test_loads_and_views_out_of_turn_are_refused_and_a_stopped_query_restarts_whole(
        spark, tmp_path) -> None:
    """A bulk load of columns that cannot hold the table's values (their type, a value
    out of range, a NULL in a NOT NULL column), of a path that is not
    there, after changes have flowed (also once the query was stopped) or after close, is
    refused and keeps nothing; a view created after ``stop()`` starts from all the data
    (it restarted the old checkpoint with the new plan: the views lost their rows); a view
    created after close is refused."""
    db = upkeep.connect(engine="spark", spark=spark, shards=2, state="keyed",
                        database=tmp_path / "db")
    db.execute("CREATE TABLE t (a INTEGER NOT NULL, b VARCHAR)")
    db.create_view("v", "SELECT a, b FROM t")
    with pytest.raises(upkeep.SchemaError, match="holds 1099511627776, out of range"):
        db.load("t", spark.createDataFrame([(2**40, "big"), (1, "x")], "a long, b string"))
    with pytest.raises(upkeep.ConstraintError, match="NULL in NOT NULL column a"):
        db.load("t", spark.createDataFrame([(None, "null")], "a long, b string"))
    with pytest.raises(upkeep.SchemaError, match="column a is string"):
        db.load("t", spark.createDataFrame([("x", "y")], "a string, b string"))
    with pytest.raises(upkeep.SchemaError, match="bulk load of table t"):
        db.load("t", str(tmp_path / "nowhere.parquet"))
    with pytest.raises(upkeep.SchemaError, match="bulk load of table t"):
        db.load("t", spark.createDataFrame([(1, "y")], "c int, b string"))
    db.load("t", spark.createDataFrame([(1, "one"), (2, "two")], "a long, b string"))
    # the refused loads left nothing behind: no part, no temporary copy
    assert [p.name for p in (tmp_path / "db" / "loads" / "t").iterdir()] == ["00000000"]
    assert sorted(db.view("v").rows()) == [(1, "one"), (2, "two")]
    db.stop()
    with pytest.raises(upkeep.UnsupportedError, match="before the first change"):
        db.load("t", spark.createDataFrame([(9, "nine")], "a int, b string"))
    db.create_view("w", "SELECT a FROM t")
    db.insert("t", [(3, "three")])
    assert sorted(db.view("v").rows()) == [(1, "one"), (2, "two"), (3, "three")]
    assert sorted(db.view("w").rows()) == [(1,), (2,), (3,)]
    db.close()
    with pytest.raises(upkeep.StorageError, match="closed"):
        db.create_view("x", "SELECT b FROM t")
    with pytest.raises(upkeep.StorageError, match="closed"):
        db.load("t", spark.createDataFrame([(9, "nine")], "a int, b string"))
    again = upkeep.connect(engine="spark", spark=spark, shards=2, state="keyed",
                           database=tmp_path / "db")
    again.execute("CREATE TABLE t (a INTEGER NOT NULL, b VARCHAR)")
    again.create_view("v", "SELECT a, b FROM t")
    assert sorted(again.view("v").rows()) == [(1, "one"), (2, "two"), (3, "three")]
    again.close()


def test_keyed_dml_drawing_random_values_is_refused_as_on_the_local_engine(
        spark, tmp_path) -> None:
    db = upkeep.connect(engine="spark", spark=spark, shards=2, state="keyed",
                        database=tmp_path / "db")
    db.execute("CREATE TABLE t (a INTEGER, b DOUBLE)")
    for statement in ("UPDATE t SET b = random()", "DELETE FROM t WHERE random() < 0.5"):
        with pytest.raises(upkeep.UnsupportedError, match="once per row"):
            db.execute(statement)
    db.close()


#: statements that read tables: INSERT .. SELECT, DELETE / UPDATE with subqueries
#: (correlated, over the target itself, over a view, under a CTE), each run on both sides
READING_STATEMENTS = [
    "INSERT INTO orders SELECT ok + 100, ck, price / 2, qty FROM orders WHERE qty > 2",
    "INSERT INTO orders (ok, ck) SELECT ck, nk FROM customer",
    "DELETE FROM orders WHERE ck IN (SELECT ck FROM customer WHERE segment = 'HOUSE')",
    "UPDATE orders SET qty = (SELECT COUNT(*) FROM orders o2 WHERE o2.ck = orders.ck) "
    "WHERE ok = {k}",
    "DELETE FROM orders AS o WHERE ok = {k} AND EXISTS (SELECT 1 FROM customer c "
    "WHERE c.ck = o.ck AND c.nk = {n})",
    "UPDATE customer SET segment = 'BIG' WHERE ck IN (SELECT ck FROM per_segment_ck)",
    "DELETE FROM orders WHERE qty NOT IN (SELECT nk FROM nation WHERE nk IS NOT NULL) "
    "AND ok > {k}",
    "WITH cheap AS (SELECT ok FROM orders WHERE price < {p}) "
    "DELETE FROM orders WHERE ok IN (SELECT ok FROM cheap)",
    "UPDATE nation SET region = (SELECT MIN(segment) FROM customer c WHERE c.nk = nation.nk)",
    "INSERT INTO orders SELECT {k}, ck, 1.25, {n} FROM customer WHERE ck = {n}",
]
#: queries over tables (and views with them) whose answers are compared with DuckDB's
READING_QUERIES = [
    "SELECT * FROM orders",
    "SELECT ck, COUNT(*), SUM(price) FROM orders GROUP BY ck",
    "SELECT c.segment, o.ok FROM customer c LEFT JOIN orders o ON o.ck = c.ck",
    "SELECT p.ck, n.region FROM per_segment_ck p JOIN customer c ON c.ck = p.ck "
    "JOIN nation n ON n.nk = c.nk",
    "SELECT * FROM lonely",
    "SELECT * FROM orders WHERE ck = 2",
    "SELECT o.ok, o.price FROM orders AS o WHERE o.ck = 1 AND qty = 3",
    "SELECT COUNT(*) FROM lonely WHERE x = 7",
]


@pytest.mark.parametrize("state", ["keyed", "shards"])
def test_statements_and_queries_reading_tables_match_duckdb(spark, tmp_path, monkeypatch,
                                                             state) -> None:
    """Statements and queries that read tables run on the spark engine: DuckDB on the
    driver evaluates them over the tables read by Spark jobs (from the keyed state, or,
    with views in shards, from the shards' logs; with shards they were refused) with the
    transaction's staged rows, and the views' copies.  Random instances of each kind, then
    every table, view and query, equal DuckDB running the same statements; a DELETE fixing
    ``ok`` hands DuckDB only the rows holding it, and a SELECT over one table fixing
    columns reads only the rows holding them.  In shards, ``nation`` is read from a group
    that copies it to both its shards (from one of them), the others from groups that
    partition them, and ``lonely`` (no view reads it) from a group of its own, which
    checks its records (a delete of a row it does not hold was accepted in shards)."""
    import upkeep.spark.connection as spark_connection
    handed: list[int] = []
    real = spark_connection.matches_by_duckdb

    def counting(table, stmt, targets, candidates, *rest):
        handed.append(len(candidates))
        return real(table, stmt, targets, candidates, *rest)

    monkeypatch.setattr(spark_connection, "matches_by_duckdb", counting)
    reads: list[tuple[str, str | None]] = []  # (table, the WHERE its rows were read by)
    import upkeep.spark.dml as spark_dml
    real_rows = spark_dml.committed_rows
    real_shard_rows = spark_dml.committed_shard_rows

    def reading(session, checkpoint, wanted):
        reads.extend((name, where) for name, _, where in wanted.values())
        return real_rows(session, checkpoint, wanted)

    def reading_shards(session, checkpoint, wanted):
        reads.extend((name, where) for name, (_, _, _, where) in wanted.items())
        return real_shard_rows(session, checkpoint, wanted)

    monkeypatch.setattr(spark_dml, "committed_rows", reading)
    monkeypatch.setattr(spark_dml, "committed_shard_rows", reading_shards)
    db = upkeep.connect(engine="spark", spark=spark, shards=2, state=state,
                        database=tmp_path / "db")
    con = duckdb.connect()
    setup = [TABLES, "CREATE TABLE lonely (x INTEGER)",  # a table no view reads
             "INSERT INTO nation VALUES (1, 'EU'), (2, 'ASIA'), (3, NULL)",
             "INSERT INTO customer VALUES (1, 1, 'AUTO'), (2, 2, 'HOUSE'), (3, 3, 'AUTO'), "
             "(4, 1, NULL)",
             "INSERT INTO orders VALUES (1, 1, 10.00, 2), (2, 1, 60.00, 3), "
             "(3, 2, 70.00, 4), (4, 3, 5.00, NULL), (5, 2, 80.00, 2), (6, 4, 1.50, 1)",
             "INSERT INTO lonely VALUES (7), (7), (NULL)"]
    views = {"order_regions": "SELECT o.ok, n.region FROM orders o JOIN customer c "
                              "ON o.ck = c.ck JOIN nation n ON n.nk = c.nk",
             "per_segment_ck": "SELECT ck FROM orders GROUP BY ck HAVING COUNT(*) > 1",
             "all_orders": "SELECT * FROM orders", "all_customers": "SELECT * FROM customer",
             "all_nations": "SELECT * FROM nation"}
    for sql in setup:
        con.execute(sql.replace("PRIMARY KEY", ""))
    db.execute(setup[0])
    db.execute(setup[1])
    with db.transaction():  # the inserts in one micro-batch
        for sql in setup[2:]:
            db.execute(sql)
    for name, sql in views.items():
        con.execute(f"CREATE VIEW {name} AS {sql}")
        db.create_view(name, sql)
    # no view reads lonely, and its records are checked all the same (in shards they were
    # not: a group of no views holds it now, routing.tables_group)
    with pytest.raises(upkeep.ConstraintError, match="not present"):
        db.delete("lonely", [(99,)])
    rng = random.Random(7)
    holding = every = None
    for template in READING_STATEMENTS:
        k = rng.randint(1, 6)
        sql = template.format(k=k, n=rng.randint(1, 4), p=rng.choice([5, 20, 75]))
        if "ok = {k} AND EXISTS" in template:
            holding = set(con.execute(f"SELECT * FROM orders WHERE ok = {k}").fetchall())
        if "ck IN (SELECT ck FROM customer" in template:
            every = set(con.execute("SELECT * FROM orders").fetchall())
        expected = con.execute(sql).fetchall()
        assert db.execute(sql).rowcount == expected[0][0], sql
    # DuckDB got the distinct rows holding ok = k for `ok = k AND EXISTS (..)` (the third
    # statement with a subquery), every row for `ck IN (..)` (the first), which fixes none
    assert handed[2] == len(holding) and handed[0] == len(every) > len(holding)
    with db.transaction():  # tables as the transaction staged them
        db.execute("INSERT INTO lonely VALUES (100)")
        assert db.execute("SELECT COUNT(*) FROM lonely WHERE x = 100").fetchall() == [(1,)]
        assert db.execute("INSERT INTO lonely SELECT x + 1 FROM lonely "
                          "WHERE x = 100").rowcount == 1
        assert db.execute("DELETE FROM lonely WHERE x IN (SELECT x - 1 FROM lonely "
                          "WHERE x > 100)").rowcount == 1
        assert normal(db.execute("SELECT * FROM lonely").fetchall()) == normal(
            [(7,), (7,), (None,), (101,)])
    con.execute("INSERT INTO lonely VALUES (101)")
    del reads[:]
    for sql in READING_QUERIES:
        assert normal(db.execute(sql).fetchall()) == normal(con.execute(sql).fetchall()), sql
    # a query over one table fixing columns brings only the rows holding them to the driver
    assert ("orders", None) in reads and ("orders", '"ck" = 2') in reads
    assert ("orders", '"ck" = 1 AND "qty" = 3') in reads and ("lonely", '"x" = 7') in reads
    for name, sql in views.items():
        assert normal(db.view(name).rows()) == normal(con.execute(sql).fetchall()), name
    db.close()


class CountedMap(keyed_state.MapInMemory):
    """A MapState over a dict that counts the state calls a step makes."""

    def __init__(self):
        super().__init__()
        self.calls = Counter()

    def getValue(self, key):  # noqa: N802 - Spark's MapState API
        self.calls["getValue"] += 1
        return super().getValue(key)

    def iterator(self):
        self.calls["iterator"] += 1
        return super().iterator()


def planned(spark, tmp_path, view: str) -> tuple:
    """The keyed layout, catalog and compiled chains of ``view`` alone over TABLES: what
    a test needs to run the steps' own code over in-memory state."""
    db = upkeep.connect(engine="spark", spark=spark, shards=2, state="keyed",
                        database=tmp_path / "db")
    db.execute(TABLES)
    db.create_view(view, VIEWS[view])
    plan = db._plan_now()
    db.close()
    layout, catalog = plan.keyed, plan.catalog
    return layout, catalog, keyed_state.compile_views(layout, keyed_state.freeze(catalog)).chains


def test_a_batch_touching_most_keys_of_a_group_reads_its_map_at_once(spark, tmp_path,
                                                                     monkeypatch) -> None:
    """A table step's group holds many keys' MapState entries: a batch touching a quarter
    of them or more reads the group's map in one paged call (``iterator``), not a call per
    key; a batch touching one key reads that key alone (a 1-row batch's bytes stay those
    of its keys)."""
    monkeypatch.setattr(keyed_state, "MIN_BUCKETS", 1024)  # the module's fixture sets 4
    layout, catalog, chains = planned(spark, tmp_path, "everything")
    table = layout.tables.index("orders")
    rows = [(k, k % 7, Decimal("1.50"), k % 3) for k in range(4000)]
    records = [r for r in keyed_state.route_changes(
        layout, catalog, chains, [("orders", row, 1) for row in rows]) if r[0] == table]
    group = records[0][1]
    mine = [pyspark_row(*r) for r in records if r[1] == group]
    per_group = layout.buckets // keyed_state.SPARK_GROUPS
    touched = len({r.key for r in mine})
    assert touched > 1 and touched * keyed_state.PREFETCH_SHARE >= per_group
    for batch, reads in ((mine, {"iterator": 1}), (mine[:1], {"getValue": 1})):
        step = keyed_state.KeyedStep(layout, catalog, 0)
        step.compile()
        values = CountedMap()
        step.setup([keyed_state.ListInMemory(), keyed_state.ListInMemory()], values)
        list(step.handleInputRows((table, group), iter(batch), None))
        assert values.calls == reads
        assert len(values.data) == len({r.key for r in batch})  # every key's rows kept


def pyspark_row(step, group, key, side, row, weight):
    from pyspark.sql import Row
    return Row(step=step, group=group, key=key, side=side, row=row, weight=weight)


def test_a_join_side_only_appended_to_stays_compact(spark, tmp_path, monkeypatch) -> None:
    """A join step appends a side's changes without reading it and reads a side only when
    the other side changes: an order inserted and deleted 1,000 times under a customer
    that never changes left 2,000 entries in the orders log (Spark keeps every one; the
    customer's next change reads them all).  One append in ``COMPACT_ODDS`` reads the log
    first and writes it back consolidated when more than half of it is cancelled, so it
    stays within a constant of its live rows; and the join still emits what it holds."""
    monkeypatch.setattr(keyed_state, "compaction_draws", random.Random(5))
    layout, catalog, chains = planned(spark, tmp_path, "big_orders")
    view = next(c for c in chains if c.name == "big_orders")
    assert [view.block.atoms[i].relation for i in view.order] == ["orders", "customer"]
    step = keyed_state.KeyedStep(layout, catalog, 0)
    step.compile()
    sides = [keyed_state.ListInMemory(), keyed_state.ListInMemory()]
    step.setup(sides, keyed_state.MapInMemory())

    def run(table: str, row: tuple, weight: int) -> list[tuple]:
        records = [r for r in keyed_state.route_changes(layout, catalog, chains,
                                                        [(table, row, weight)])
                   if r[0] == view.first_step]
        return list(step.handleInputRows(records[0][:2], iter([pyspark_row(*r)
                                                               for r in records]), None))

    def entries(side: int) -> int:
        return sum(len(keyed_state._unpacked(r, w)) for r, w in sides[side].entries)

    run("customer", (1, 4, "AUTO"), 1)
    order = (7, 1, Decimal("60.00"), 3)
    for _ in range(1000):
        run("orders", order, 1)
        run("orders", order, -1)
    assert entries(keyed_state.LEFT) <= 100
    run("orders", order, 1)
    out = run("customer", (1, 4, "AUTO"), -1)  # reads the orders log: the one live order
    assert [(pickle.loads(r.row), r.weight) for r in out if r.step == keyed_state.OUTPUT_STEP
            ] == [(("big_orders", encode_row((7, "AUTO"))), -1)]

    # a side of many rows (one key's 4,000 orders) is read before fewer appends: about
    # COMPACT_READ rows per append, not a sixteenth of the side
    reads = Counter()

    class CountedList(keyed_state.ListInMemory):
        def get(self):
            reads[self] += 1
            return super().get()

    sides[:] = [CountedList(), CountedList()]
    run("customer", (1, 4, "AUTO"), 1)
    many = [(k, 1, Decimal("60.00"), 3) for k in range(100, 4100)]
    for k in range(0, len(many), 500):
        for row in many[k:k + 500]:
            run("orders", row, 1)
    reads.clear()
    for _ in range(500):
        run("orders", order, 1)
        run("orders", order, -1)
    assert reads[sides[keyed_state.LEFT]] <= 20  # a sixteenth: about 62


def test_big_batches_read_a_groups_map_at_once_and_match_duckdb(spark, tmp_path) -> None:
    """Batches touching most keys of the table steps' Spark groups (which read each
    group's map at once): the views equal DuckDB after inserts, deletes and updates."""
    db = upkeep.connect(engine="spark", spark=spark, shards=2, state="keyed",
                        database=tmp_path / "db")
    db.execute(TABLES)
    for name in ("per_segment", "big_orders", "everything"):
        db.create_view(name, VIEWS[name])
    customers = [(k, k % 6, ["AUTO", "HOUSE", None][k % 3]) for k in range(300)]
    orders = [(k, k % 310, Decimal(k % 97) + Decimal("0.25"), k % 5) for k in range(3000)]
    db.insert("customer", customers)
    tables = {"nation": Counter(), "customer": Counter(customers), "orders": Counter()}
    rnd = random.Random(3)
    for step in range(3):
        with db.transaction():
            if step == 0:
                db.insert("orders", orders)
                tables["orders"].update(orders)
            else:
                gone = rnd.sample(sorted(tables["orders"]), 1200)
                new = [(ok + 10_000 * step, ck, price * 2, qty) for ok, ck, price, qty in gone]
                db.delete("orders", gone)
                db.insert("orders", new)
                tables["orders"].subtract(gone)
                tables["orders"].update(new)
        tables = {n: +c for n, c in tables.items()}
        expected = recomputed(tables)
        for name in ("per_segment", "big_orders", "everything"):
            assert normal(db.view(name).rows()) == normal(expected(VIEWS[name]).elements()), \
                (step, name)
    db.close()


def test_a_table_dropped_and_made_again_starts_empty(spark, tmp_path) -> None:
    """A table dropped and created again holds none of the dropped table's rows, whatever
    its new columns, also after a reopen: every change file is replayed into a new
    checkpoint when the catalog changes, and the dropped table's rows in them came back
    (same columns) or failed the query with a raw Spark error (other columns).  (Keyed
    state only: the replay leaves a dropped table's records out as it reads the change
    files, ``processor.file_records``, for shards the same way.)"""
    db = upkeep.connect(engine="spark", spark=spark, database=tmp_path / "db")
    db.execute("CREATE TABLE t (x INTEGER)")
    db.execute("INSERT INTO t VALUES (7), (8)")
    db.execute("DROP TABLE t")
    db.execute("CREATE TABLE t (x INTEGER)")
    db.create_view("v", "SELECT x FROM t")
    assert db.view("v").rows() == []
    db.execute("INSERT INTO t VALUES (9)")
    db.execute("DROP VIEW v")
    db.execute("DROP TABLE t")
    db.execute("CREATE TABLE t (s VARCHAR, y INTEGER)")
    db.execute("INSERT INTO t VALUES ('q', 1)")
    db.create_view("v", "SELECT s, y FROM t")
    assert db.view("v").rows() == [("q", 1)]
    db.close()
    again = upkeep.connect(engine="spark", spark=spark, database=tmp_path / "db")
    again.execute("CREATE TABLE t (s VARCHAR, y INTEGER)")
    again.create_view("v", "SELECT s, y FROM t")
    assert again.view("v").rows() == [("q", 1)]
    assert again.execute("SELECT * FROM t").fetchall() == [("q", 1)]
    # dropped and not made again: the replays that follow skip its rows too
    again.execute("DROP VIEW v")
    again.execute("DROP TABLE t")
    again.execute("CREATE TABLE u (a INTEGER)")
    again.execute("INSERT INTO u VALUES (1)")
    again.create_view("w", "SELECT a FROM u")
    assert again.view("w").rows() == [(1,)]
    again.close()


def test_insert_select_reads_and_writes_under_one_hold(spark, tmp_path) -> None:
    """Two threads each adding ``MAX(a) + 1`` three times: an autocommitted
    ``INSERT ... SELECT`` reads and commits under one hold of the query, as the local
    engine's, so no two statements read the same maximum (it read, let go, then joined a
    group commit)."""
    import threading

    db = upkeep.connect(engine="spark", spark=spark, shards=2, state="keyed",
                        database=tmp_path / "db", commit_window=0.05)
    db.execute("CREATE TABLE t (a INTEGER)")
    db.create_view("v", "SELECT a FROM t")
    db.execute("INSERT INTO t VALUES (0)")
    errors: list = []

    def add() -> None:
        try:
            for _ in range(3):
                db.execute("INSERT INTO t SELECT MAX(a) + 1 FROM t")
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=add) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert sorted(db.view("v").rows()) == [(k,) for k in range(7)]
    db.close()


def test_dml_predicate_takes_a_number_as_a_condition_as_duckdb_does() -> None:
    """The executors' WHERE of a keyed DELETE / UPDATE: a number is true when not zero
    (as on the local engine and in DuckDB; it once matched no row)."""
    from upkeep.spark.dml import predicate
    from upkeep.types import type_from_name

    columns = [("k", type_from_name("INTEGER")), ("x", type_from_name("DOUBLE"))]
    rows = [(0, 0.0), (2, 1.5), (None, 2.0), (-1, 0.0)]
    con = duckdb.connect()
    con.execute("CREATE TABLE t (k INTEGER, x DOUBLE)")
    con.executemany("INSERT INTO t VALUES (?, ?)", rows)
    for where in ("k", "x", "k AND x", "k - 2 OR x"):
        test = predicate("t", columns, where)
        assert sorted((r for r in rows if test(r) is True), key=repr) == sorted(
            con.execute(f"SELECT * FROM t WHERE {where}").fetchall(), key=repr), where


def test_distinct_counts_zero_and_negative_zero_as_one_row(spark, tmp_path) -> None:
    """A distinct step counted rows by their pickled bytes, and ``0.0`` / ``-0.0`` pickle
    differently: ``SELECT DISTINCT ROUND(f)`` over -0.4 and 0.3 kept two rows."""
    sql = "SELECT DISTINCT ROUND(f) AS r FROM t"
    db = upkeep.connect(engine="spark", spark=spark, state="keyed", database=tmp_path / "db")
    db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, f DOUBLE)")
    db.create_view("d", sql)
    con = duckdb.connect()
    con.execute("CREATE TABLE t (id INTEGER, f DOUBLE)")
    for change in ([(1, -0.4), (2, 0.3), (3, 1.4)], [(1, -0.4)], [(2, 0.3)]):
        if len(change) > 1:
            db.insert("t", change)
            con.executemany("INSERT INTO t VALUES (?, ?)", change)
        else:
            db.delete("t", change)
            con.execute("DELETE FROM t WHERE id = ?", [change[0][0]])
        assert Counter(db.view("d").rows()) == Counter(con.execute(sql).fetchall()), change
    db.close()


@pytest.mark.parametrize("sql", [
    "SELECT DISTINCT x FROM t",
    "SELECT x, COUNT(*) AS n FROM t GROUP BY x",
    "SELECT COUNT(DISTINCT x) AS d, MIN(x) AS lo, MAX(x) AS hi FROM t",
    "SELECT x FROM t UNION SELECT x FROM t WHERE id > 1",
    "SELECT id, x, RANK() OVER (PARTITION BY x ORDER BY id) AS r FROM t",
    "SELECT a.id, b.id AS other FROM t a JOIN t b ON a.x = b.x",
])
def test_nan_rows_are_one_value_in_keyed_steps(spark, tmp_path, sql) -> None:
    """Unpickling makes a new NaN object each time, and Python's NaNs are unequal: a step
    counting rows (or keying groups) by value never met a NaN row's earlier copy, so its
    delete was never retracted (as on the local engine, NaN is one value: tests/test_nan.py)."""
    nan = float("nan")
    db = upkeep.connect(engine="spark", spark=spark, state="keyed", database=tmp_path / "db")
    db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, x DOUBLE)")
    db.create_view("v", sql)
    con = duckdb.connect()
    con.execute("CREATE TABLE t (id INTEGER, x DOUBLE)")

    def same() -> bool:
        mine = Counter(tuple("nan" if v != v else v for v in r) for r in db.view("v").rows())
        theirs = Counter(tuple("nan" if v != v else v for v in r)
                         for r in con.execute(sql).fetchall())
        return mine == theirs

    db.insert("t", [(1, nan), (2, nan), (3, 1.0)])
    con.executemany("INSERT INTO t VALUES (?, ?)", [(1, nan), (2, nan), (3, 1.0)])
    assert same()
    db.delete("t", [(1, nan)])
    con.execute("DELETE FROM t WHERE id = 1")
    assert same()
    db.delete("t", [(2, nan)])
    con.execute("DELETE FROM t WHERE id = 2")
    assert same()
    db.close()
