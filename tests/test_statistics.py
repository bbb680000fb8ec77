"""Variances and standard deviations (``VAR_SAMP`` / ``VARIANCE``, ``VAR_POP``,
``STDDEV_SAMP`` / ``STDDEV``, ``STDDEV_POP``) and ``COUNT_IF`` maintained, not recomputed:
per group the count, exact sum and exact sum of squares of the values as doubles
(``aggregates.statistic_add``), so deletes leave no trace; each view equals DuckDB after
every batch of random changes (NULLs, infinities, NaN, duplicates, deletes)."""

from __future__ import annotations

import math
import random
from collections import Counter

import duckdb
import pytest
from oracle import assert_bag_equal, duckdb_query, random_change

import upkeep
from upkeep.aggregates import statistic_add, statistic_result

DDL = ["CREATE TABLE m (g INTEGER, x DOUBLE, d DECIMAL(8,2), n INTEGER)",
       "CREATE TABLE k (g INTEGER PRIMARY KEY, w INTEGER)"]
QUERIES = [
    "SELECT g, var_samp(x) AS vs, var_pop(x) AS vp, stddev_samp(x) AS ss, "
    "stddev_pop(x) AS sp FROM m GROUP BY g",
    "SELECT stddev(d) AS sd, variance(n) AS v, count(*) AS c FROM m",
    "SELECT m.g, k.w, stddev_pop(m.n * k.w) AS s FROM m JOIN k ON k.g = m.g GROUP BY m.g, k.w",
    "SELECT g, variance(d) FILTER (WHERE n > 1) AS v, count_if(x > 1) AS big FROM m GROUP BY g",
    "SELECT g FROM m GROUP BY g HAVING stddev_samp(n) > 1",
    "SELECT g, count_if(d > 0) AS pos, count_if(x IS NULL) AS missing FROM m GROUP BY g",
    # COUNT_IF is a SUM before the window and subquery rewrites read it
    "SELECT g, n, count_if(n > 1) OVER (PARTITION BY g) AS c FROM m",
    "SELECT k.g, (SELECT count_if(m.x > 1) FROM m WHERE m.g = k.g) AS c FROM k",
]


@pytest.mark.parametrize("sql", QUERIES)
def test_statistics_equal_duckdb_after_every_batch(sql) -> None:
    db = upkeep.connect()
    for ddl in DDL:
        db.execute(ddl)
    view = db.create_view("v", sql)
    assert "recompute" not in db.explain("v"), db.explain("v")
    rnd = random.Random(sql)
    tables: dict[str, Counter] = {"m": Counter(), "k": Counter()}
    xs = [None, 0.0, 1.5, -2.25, 1e6, 3.0, 0.1]
    step = 0

    def measure() -> tuple:
        special = step > 30 and rnd.random() < 0.2  # late: NaN comes and goes
        x = rnd.choice([math.inf, math.nan]) if special else rnd.choice(xs)
        return (rnd.randrange(4), x, rnd.choice([None, 1, 2.5, -7.25, 100]),
                rnd.choice([None, 0, 1, 2, 5]))

    for step in range(40):  # (``measure`` reads it)
        with db.transaction():
            for _ in range(rnd.randint(1, 5)):
                if rnd.random() < 0.75:
                    random_change(db, tables, rnd, "m", measure, duplicates=0.15)
                    continue
                g = rnd.randrange(6)  # k is keyed by g: a new key, or a delete
                keys = {r[0] for r in tables["k"]}
                if g not in keys or rnd.random() < 0.5:
                    random_change(db, tables, rnd, "k", lambda g=g: (g, rnd.choice(
                        [None, 1, 2, -3])), deletes=1.0 if g in keys else 0.0, duplicates=0)
        assert_bag_equal(duckdb_query(DDL, tables, sql), view.rows(), sql, f"step {step}")


def test_a_variance_is_the_exact_one_rounded_once() -> None:
    """Values far from their mean's scale: a running double sum of squares would lose the
    variance (1e9 + 1, 1e9 + 2, 1e9 + 3: variance 1); deleting a value restores it."""
    state = [0, 0, 0, 0]
    for v in (1e9 + 1, 1e9 + 2, 1e9 + 3, 1e17):
        statistic_add(state, v, 1)
    statistic_add(state, 1e17, -1)
    assert statistic_result("var_samp", state) == 1.0
    assert statistic_result("stddev_pop", state) == math.sqrt(2 / 3)
    con = duckdb.connect()
    want = con.execute("SELECT var_samp(x) FROM (VALUES (1e9 + 1), (1e9 + 2), (1e9 + 3)) "
                       "t(x)").fetchone()[0]
    assert want == 1.0


def test_statistics_on_no_or_one_value_are_null_as_in_duckdb() -> None:
    state = [0, 0, 0, 0]
    assert [statistic_result(k, state) for k in ("var_samp", "var_pop")] == [None, None]
    statistic_add(state, 5, 1)
    assert statistic_result("var_samp", state) is None
    assert statistic_result("var_pop", state) == 0.0
    statistic_add(state, math.inf, 1)
    assert math.isnan(statistic_result("stddev_samp", state))
    alone = [0, 0, 0, 0]
    statistic_add(alone, math.inf, 1)  # the population's of one value is 0, as DuckDB's
    assert [statistic_result(k, alone) for k in ("var_pop", "stddev_pop", "var_samp")] == [
        0.0, 0.0, None]


def test_a_state_holding_more_deletes_than_rows_gives_no_error() -> None:
    """A Spark micro-batch's aggregate step may see a delete of a row that is not there
    before the table step rejects the batch: its variance is no value, not an error."""
    state = [0, 0, 0, 0]
    for v, w in ((1.0, 1), (2.0, 1), (9.0, -1)):
        statistic_add(state, v, w)
    statistic_add(state, 5.0, 1)
    assert math.isnan(statistic_result("stddev_samp", state))
