"""``SELECT DISTINCT ON`` maintained as a per-group top-1 (``distinct_on.py``): each view
equals DuckDB after every batch of random changes (NULLs, duplicates, deletes) and is kept
by the ranked view, not recomputed; forms the rewrite leaves alone are recomputed, still
equal to DuckDB."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from oracle import (
    connected,
    duckdb_query,
    random_change,
    stream_follows_duckdb,
    view_equals_duckdb,
)

DDL = ["CREATE TABLE t (k INTEGER, x INTEGER, y VARCHAR, d DECIMAL(6, 2))",
       "CREATE TABLE g (k INTEGER, name VARCHAR)"]

#: queries whose ORDER BY decides every output column (tied rows are equal in the output),
#: so a view must hold exactly DuckDB's rows
MAINTAINED = [
    "SELECT DISTINCT ON (k) k, x, y FROM t ORDER BY k, x DESC NULLS LAST, y NULLS FIRST",
    # the ORDER BY need not start with the DISTINCT ON keys; output names and positions
    "SELECT DISTINCT ON (y) y AS label, x FROM t ORDER BY x NULLS FIRST, label",
    "SELECT DISTINCT ON (2) x + 1 AS x1, k FROM t ORDER BY 2, 1 DESC",
    # expressions as keys, columns outside the select list, a star
    "SELECT DISTINCT ON (k % 2) y, d FROM t WHERE x IS NOT NULL ORDER BY k % 2, d, y",
    "SELECT DISTINCT ON (t.k) * FROM t ORDER BY t.k, x, y, d",
    # over a join and over groups
    "SELECT DISTINCT ON (g.name) g.name, t.x FROM g JOIN t ON g.k = t.k "
    "ORDER BY g.name, t.x DESC",
    "SELECT DISTINCT ON (k) k, y, count(*) AS n FROM t GROUP BY k, y ORDER BY k, n DESC, y",
    # no ORDER BY: any row of each group; here the groups' rows are equal in the output
    "SELECT DISTINCT ON (k) k FROM t",
    # ORDER BY ALL: every output column, left to right
    "SELECT DISTINCT ON (k) k, x FROM t ORDER BY ALL DESC",
    # LIMIT over the first rows: a top-k of the ranked rows
    "SELECT DISTINCT ON (k) k, x FROM t ORDER BY k NULLS FIRST, x LIMIT 2 OFFSET 1",
]
#: forms the rewrite leaves to DuckDB
RECOMPUTED = [
    # a window function beside DISTINCT ON
    "SELECT DISTINCT ON (k) k, x, ROW_NUMBER() OVER (ORDER BY x, y, k) AS r FROM t "
    "ORDER BY k, x, y",
    # LIMIT ordered by a column the output does not hold
    "SELECT DISTINCT ON (k) k FROM t ORDER BY k, x LIMIT 2",
]


def _new_rows(rnd: random.Random) -> dict:
    return {
        "t": lambda: (rnd.choice([None, *range(4)]), rnd.choice([None, *range(5)]),
                      rnd.choice(["a", "b", "c", None]),
                      rnd.choice([None, 1, 2.5, -3.25])),
        "g": lambda: (rnd.choice([None, *range(4)]), rnd.choice(["p", "q", None])),
    }


@pytest.mark.parametrize("sql", MAINTAINED + RECOMPUTED)
def test_distinct_on_equals_duckdb_after_every_batch(sql) -> None:
    rnd = random.Random(sql)
    stream_follows_duckdb(DDL, sql, _new_rows(rnd), rnd, recomputed=sql in RECOMPUTED,
                          drawn=["t", "t", "g"])


def test_first_rows_are_kept_per_group_by_the_ranked_view() -> None:
    db = connected(DDL)
    db.create_view("v", MAINTAINED[0])
    assert "per-group top-k" in db.explain("v"), db.explain("v")


def test_an_order_that_ties_keeps_one_first_row_per_group() -> None:
    """``ORDER BY k, x`` leaves rows of equal ``x`` tied: DuckDB keeps any one of them,
    so the view must hold, per ``k``, one row of the least ``x`` (the orderly columns
    equal DuckDB's, the row one the table holds)."""
    sql = "SELECT DISTINCT ON (k) k, x, y FROM t ORDER BY k, x"
    db = connected(DDL)
    view = db.create_view("v", sql)
    rnd = random.Random(7)
    tables: dict[str, Counter] = {"t": Counter(), "g": Counter()}
    new_rows = _new_rows(rnd)
    for step in range(40):
        random_change(db, tables, rnd, "t", new_rows["t"], duplicates=0.15)
        rows = view.rows()
        want = duckdb_query(DDL, tables, sql)
        assert Counter((k, x) for k, x, _ in rows) == Counter(
            (k, x) for k, x, _ in want), f"step {step}"
        held = {(k, x, y) for k, x, y, _ in tables["t"]}
        assert all(r in held for r in rows), f"step {step}: {rows}"


def test_a_lateral_body_with_distinct_on_is_not_a_plain_distinct() -> None:
    """A LATERAL body's DISTINCT ON was read as DISTINCT (grouped by every column): the
    view held a row per distinct (b, c), not the first c of each b."""
    view_equals_duckdb(
        ["CREATE TABLE g (k INTEGER)", "CREATE TABLE t (k INTEGER, b INTEGER, c INTEGER)"],
        {"g": Counter([(1,), (2,)]), "t": Counter([(1, 1, 5), (1, 2, 6), (1, 2, 7), (2, 3, 1)])},
        "SELECT g.k, s.b, s.c FROM g, LATERAL (SELECT DISTINCT ON (t.b) t.b, t.c FROM t "
        "WHERE t.k = g.k ORDER BY t.b, t.c DESC) s")


def test_columns_are_named_as_duckdb_names_them() -> None:
    db = connected(DDL)
    db.insert("t", [(1, 2, "a", None), (1, 3, "b", 2)])
    db.create_view("v", "SELECT DISTINCT ON (k) k, x + 1, y AS label FROM t ORDER BY k, x")
    assert db.view("v").columns == ["k", "(x + 1)", "label"]
    assert db.view("v").rows() == [(1, 3, "a")]
