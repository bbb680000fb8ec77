"""The queries of ``engine_style_queries.py`` (our own, in the style of pg_ivm's, DBToaster's
and Materialize's test suites; issue 22): each view equals DuckDB after every batch of
random changes with NULLs, duplicates and deletes, whether maintained or recomputed; at
least 95% of them are maintained without any recomputation, and exactly the ones listed as
recomputed are."""

from __future__ import annotations

import datetime as dt
import math
import random
from collections import Counter

import pytest
from engine_style_queries import DDL, QUERIES, RECOMPUTED_STYLE, TOTAL_ORDER
from oracle import assert_bag_equal, duckdb_loaded, duckdb_query, random_change
from test_topk import check_top_k

import upkeep

DAYS = [dt.date(2023, 12, 30), dt.date(2024, 1, 1), dt.date(2024, 2, 29), dt.date(2024, 3, 1)]


def _row(rnd: random.Random, table: str, next_id: int) -> tuple:
    small = [None, 0, 1, 2, 3]
    if table == "u":
        return (next_id, rnd.choice(["ann", "al", "bob", None]),
                rnd.choice([None, 0.1, 0.5, 0.9, 0.9, math.nan]), rnd.choice([None, *DAYS]))
    return (rnd.choice(small), rnd.choice(small))


def _database():
    db = upkeep.connect()
    for ddl in DDL:
        db.execute(ddl)
    return db


@pytest.mark.parametrize("sql", QUERIES)
def test_engine_style_query_equals_duckdb_after_every_batch(sql) -> None:
    db = _database()
    view = db.create_view("v", sql)
    columns = [c for c, _ in view.schema]
    rnd = random.Random(sql)
    tables: dict[str, Counter] = {"r": Counter(), "s": Counter(), "t": Counter(),
                                  "u": Counter()}
    next_id = iter(range(1, 10**6))
    for step in range(25):
        with db.transaction():
            for _ in range(rnd.randint(1, 5)):
                table = rnd.choice(["r", "r", "s", "s", "t", "u"])
                random_change(db, tables, rnd, table,
                              lambda table=table: _row(rnd, table, next(next_id)),
                              duplicates=0.0 if table == "u" else 0.2)
        if "LIMIT" in sql and sql not in TOTAL_ORDER:  # ties at the edge: anyone's choice
            with duckdb_loaded(DDL, tables) as con:
                check_top_k(view.rows(), columns, con, sql)
        else:
            assert_bag_equal(duckdb_query(DDL, tables, sql), view.rows(), sql,
                             f"step {step}")


def test_at_least_95_percent_are_maintained_and_the_rest_are_known() -> None:
    db = _database()
    recomputed = []
    for i, sql in enumerate(QUERIES):
        db.create_view(f"q{i}", sql)
        if "recompute" in db.explain(f"q{i}"):
            recomputed.append(sql)
    assert recomputed == RECOMPUTED_STYLE
    assert (len(QUERIES) - len(recomputed)) / len(QUERIES) >= 0.95
