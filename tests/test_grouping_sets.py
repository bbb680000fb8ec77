"""``GROUPING SETS`` / ``ROLLUP`` / ``CUBE`` maintained as a ``UNION ALL`` of grouped blocks
(issue 22; ``grouping_sets.py``).  After every batch of random changes (NULL keys, which a
grouping set's NULL must not be confused with, duplicates, deletes down to an empty table)
each view equals DuckDB's answer, and none is recomputed."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from oracle import assert_bag_equal, duckdb_query, random_change

import upkeep

DDL = ["CREATE TABLE t (a INTEGER, b VARCHAR, x DOUBLE)",
       "CREATE TABLE u (b VARCHAR, w INTEGER)"]
QUERIES = [
    "SELECT a, b, count(*) AS n, sum(x) AS s, grouping(a, b) AS g FROM t GROUP BY ROLLUP (a, b)",
    "SELECT a, b, count(*) AS n, grouping_id(a, b) AS g FROM t GROUP BY CUBE (a, b)",
    "SELECT a, b, max(x) AS m FROM t GROUP BY GROUPING SETS ((a, b), (b), ())",
    "SELECT a, count(*) AS n FROM t GROUP BY GROUPING SETS ((), (a)) HAVING count(*) > 1",
    "SELECT a, b, count(*) AS n FROM t GROUP BY a, ROLLUP (b)",
    "SELECT coalesce(b, 'all') AS label, a + 1 AS next, avg(x) AS mean FROM t "
    "GROUP BY CUBE (a, b)",
    "SELECT t.b, sum(u.w) AS total, count(*) AS n FROM t JOIN u ON t.b = u.b "
    "GROUP BY ROLLUP (t.b)",
    "SELECT a % 2 AS odd, b, count(*) AS n FROM t GROUP BY ROLLUP (odd, b)",  # by an alias
    # a FILTER reads its own columns, not the set's NULLs (it did)
    "SELECT a, sum(x) FILTER (WHERE a = 1) AS s, count(*) FILTER (WHERE a IS NOT NULL) AS c, "
    "bool_or(x > 0) FILTER (WHERE a > 1) AS p FROM t GROUP BY ROLLUP (a)",
    # found by a review: GROUPING of an alias of an expression was 1 in every set
    "SELECT a + 1 AS up, count(*) AS n, grouping(up) AS g FROM t GROUP BY ROLLUP (up)",
    # a set's expression over a column outside the set was computed as NULL (or refused)
    "SELECT a + 1 AS up, a, count(*) AS n FROM t GROUP BY GROUPING SETS ((a + 1), (a))",
    "SELECT a + 1 AS up, a, count(*) AS n FROM t GROUP BY ROLLUP (a + 1, a)",
    "SELECT b, concat(b, a) AS ba, count(*) AS n FROM t GROUP BY GROUPING SETS ((b), "
    "(concat(b, a)))",
    # the empty set without aggregates is one row, not one per input row
    "SELECT a FROM t GROUP BY ROLLUP (a)",
    "SELECT a, b, grouping(a, b) AS g FROM t GROUP BY CUBE (a, b)",
    # positions inside the sets, and an alias of a constant (read as a position: refused)
    "SELECT a, b, count(*) AS n FROM t GROUP BY ROLLUP (1, 2)",
    "SELECT a, b, count(*) AS n FROM t GROUP BY GROUPING SETS ((1), (2), ())",
    "SELECT 0 AS zero, a, count(*) AS n FROM t GROUP BY CUBE (zero, a)",
]
RECOMPUTED = [
    # a subquery reads its own columns, not the set's NULLs (it did); the empty set's block
    # is a global aggregate, whose select-list subquery is recomputed
    "SELECT b, count(*) AS n, (SELECT count(*) FROM u WHERE u.b = 'x') AS xs FROM t "
    "GROUP BY ROLLUP (b)",
    # these apply to the whole result, not to each set's block (they were split)
    "SELECT DISTINCT a FROM t GROUP BY ROLLUP (a, b)",
    "SELECT DISTINCT count(*) > 0 AS p FROM t GROUP BY CUBE (a)",
    "SELECT a, b, count(*) AS n FROM t GROUP BY CUBE (a, b) ORDER BY n DESC, a NULLS FIRST, "
    "b NULLS FIRST LIMIT 3",
    "SELECT a, count(*) AS n FROM t GROUP BY ROLLUP (a) ORDER BY n DESC, a NULLS FIRST "
    "LIMIT 1 OFFSET 1",
    "SELECT a, sum(x) AS s FROM t GROUP BY ROLLUP (a) "
    "QUALIFY row_number() OVER (ORDER BY count(*) DESC, a NULLS FIRST) <= 1",
]


def _change(rnd: random.Random, tables: dict[str, Counter], db) -> None:
    table = rnd.choice(["t", "t", "u"])
    if table == "t":
        def new_row() -> tuple:
            return (rnd.choice([None, 1, 2]), rnd.choice([None, "x", "y"]),
                    rnd.choice([None, 1.0, 2.5, -3.0]))
    else:
        def new_row() -> tuple:
            return (rnd.choice([None, "x", "y"]), rnd.choice([None, 1, 5]))
    random_change(db, tables, rnd, table, new_row, deletes=0.45)


@pytest.mark.parametrize("sql", QUERIES)
def test_grouping_sets_equal_duckdb_after_every_batch(sql) -> None:
    db = upkeep.connect()
    for ddl in DDL:
        db.execute(ddl)
    view = db.create_view("v", sql)
    assert "recompute" not in db.explain("v"), db.explain("v")
    _check_batches(db, view, sql, 40)


def _check_batches(db, view, sql: str, steps: int) -> None:
    """``view`` equals DuckDB running ``sql`` while empty and after each of ``steps``
    transactions of random changes."""
    rnd = random.Random(sql)
    tables: dict[str, Counter] = {"t": Counter(), "u": Counter()}
    assert_bag_equal(duckdb_query(DDL, tables, sql), view.rows(), sql, "empty")
    for step in range(steps):
        with db.transaction():
            for _ in range(rnd.randint(1, 4)):
                _change(rnd, tables, db)
        assert_bag_equal(duckdb_query(DDL, tables, sql), view.rows(), sql, f"step {step}")


def test_the_view_keeps_duckdbs_column_names_and_types() -> None:
    import duckdb

    sql = "SELECT a, b, count(*), grouping(a, b) FROM t GROUP BY ROLLUP (a, b)"
    db = upkeep.connect()
    con = duckdb.connect()
    for ddl in DDL:
        db.execute(ddl)
        con.execute(ddl)
    db.create_view("v", sql)
    expected = [(name, typ) for name, typ, *_ in con.execute(f"DESCRIBE {sql}").fetchall()]
    assert [(name, typ.sql()) for name, typ in db.schema_of("v")] == expected


@pytest.mark.parametrize("sql", RECOMPUTED)
def test_what_applies_to_the_whole_result_is_not_split_by_set(sql) -> None:
    db = upkeep.connect()
    for ddl in DDL:
        db.execute(ddl)
    _check_batches(db, db.create_view("v", sql), sql, 15)


@pytest.mark.parametrize(("sql", "says"), [
    ("SELECT a AS x, grouping(x) AS g FROM t GROUP BY ROLLUP (a)", "GROUPING argument x"),
    ("SELECT a, grouping(b) AS g FROM t GROUP BY ROLLUP (a)", "GROUPING argument b"),
    ("SELECT bool_and(a) AS p FROM t", "bool_and.. needs a BOOLEAN, not INTEGER"),
    ("SELECT b, bool_or(x) AS p FROM t GROUP BY b", "bool_or.. needs a BOOLEAN, not DOUBLE"),
])
def test_what_duckdb_refuses_to_bind_is_refused(sql, says) -> None:
    """GROUPING of what is not grouped by, BOOL_AND / BOOL_OR of a number: DuckDB's
    binder refuses them; upkeep answered (GROUPING always 1, BOOL_AND as MIN; found by a
    review). A SchemaError, nothing created."""
    db = upkeep.connect()
    for statement in DDL:
        db.execute(statement)
    with pytest.raises(upkeep.SchemaError, match=says):
        db.create_view("v", sql)
    assert db.views() == []


@pytest.mark.parametrize("strategy", [None, "recompute"])
@pytest.mark.parametrize("op", ["EXCEPT", "INTERSECT", "UNION ALL"])
def test_grouping_sets_stay_one_operand_of_a_set_operation(op, strategy) -> None:
    """The union of groupings an operand's GROUPING SETS is rewritten into stays one
    operand: a recomputed view's SQL read ``a EXCEPT (g1 UNION ALL g2)`` as
    ``(a EXCEPT g1) UNION ALL g2`` (found reviewing the same defect of FULL JOINs)."""
    sql = f"SELECT b FROM u {op} SELECT b FROM t GROUP BY GROUPING SETS ((b), ())"
    db = upkeep.connect()
    for ddl in DDL:
        db.execute(ddl)
    view = db.create_view("v", sql, strategy=strategy)
    tables: dict[str, Counter] = {"t": Counter(), "u": Counter()}
    rnd = random.Random(op)
    for step in range(12):
        _change(rnd, tables, db)
        assert_bag_equal(duckdb_query(DDL, tables, sql), view.rows(), sql, f"step {step}")
