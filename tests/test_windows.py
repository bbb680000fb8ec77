"""Window functions kept per partition (issue 22; ``windows.py``): ranks, distributions,
``lag`` / ``lead``, ``first_value`` / ``last_value`` and framed aggregates, several in one
view.  After every batch of random changes (NULL and NaN values, NULL partitions, ties,
duplicates, deletes) each view equals DuckDB's answer.  Where the order can tie rows that
differ, it ends with the key, since DuckDB's order among peers is unspecified.  Operation
counts show that a change re-reads its own partition only."""

from __future__ import annotations

from collections import Counter

import duckdb
import pytest
from oracle import (
    WINDOW_DDL,
    assert_bag_equal,
    check_window_stream,
    duckdb_query,
    view_follows_duckdb,
)

import upkeep

DDL = WINDOW_DDL
QUERIES = [
    # every rank, no bound (a change re-reads its partition)
    "SELECT k, g, rank() OVER (PARTITION BY g ORDER BY x) AS r FROM t",
    "SELECT k, row_number() OVER (PARTITION BY s ORDER BY x DESC, k) AS rn, x FROM t "
    "WHERE k > 1",
    "SELECT *, dense_rank() OVER (ORDER BY v DESC NULLS FIRST) AS d FROM b",
    # lag / lead with offsets and defaults
    "SELECT k, g, x, lag(x) OVER (PARTITION BY g ORDER BY k) AS p FROM t",
    "SELECT k, lead(x, 2, -1.5) OVER (PARTITION BY g ORDER BY x, k) AS nx FROM t",
    "SELECT g, v, lag(v, 1, 0) OVER (PARTITION BY g ORDER BY v) AS p, "
    "lead(v) OVER (PARTITION BY g ORDER BY v) AS n FROM b",
    # a rank beside a partition total (the oracle list's x_window)
    "SELECT k, g, rank() OVER (PARTITION BY g ORDER BY x) AS r, "
    "sum(x) OVER (PARTITION BY g) AS tot FROM t",
    # running and framed aggregates
    "SELECT k, g, sum(x) OVER (PARTITION BY g ORDER BY k) AS running, "
    "count(*) OVER (PARTITION BY g) AS n, avg(x) OVER (PARTITION BY g ORDER BY k) AS a FROM t",
    "SELECT g, v, avg(v) OVER (PARTITION BY g ORDER BY v ROWS BETWEEN 1 PRECEDING AND "
    "1 FOLLOWING) AS a, sum(v) OVER (PARTITION BY g ORDER BY v) AS s FROM b",
    "SELECT g, v, min(v) OVER (PARTITION BY g ORDER BY v DESC ROWS BETWEEN 2 PRECEDING "
    "AND CURRENT ROW) AS lo, max(v) OVER (PARTITION BY g ORDER BY v DESC ROWS BETWEEN "
    "CURRENT ROW AND UNBOUNDED FOLLOWING) AS hi FROM b",
    "SELECT k, max(x) OVER (PARTITION BY g ORDER BY k ROWS 1 PRECEDING) AS m, "
    "min(x) OVER (PARTITION BY g) AS least FROM t",
    "SELECT k, first_value(s) OVER (PARTITION BY g ORDER BY k) AS f, last_value(s) OVER "
    "(PARTITION BY g ORDER BY k ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) "
    "AS l, count(s) OVER (PARTITION BY g ORDER BY s RANGE BETWEEN CURRENT ROW AND "
    "UNBOUNDED FOLLOWING) AS c FROM t",
    # IGNORE NULLS: the nearest rows with a value
    "SELECT k, x, lag(x IGNORE NULLS) OVER (PARTITION BY g ORDER BY k) AS p, "
    "lead(x, 2, 0.5 IGNORE NULLS) OVER (PARTITION BY g ORDER BY k) AS n, "
    "last_value(s IGNORE NULLS) OVER (PARTITION BY g ORDER BY k) AS l, "
    "first_value(x IGNORE NULLS) OVER (PARTITION BY g ORDER BY k ROWS BETWEEN 1 FOLLOWING "
    "AND 2 FOLLOWING) AS f FROM t",
    # RANGE frames by the order value's distance (NULL and NaN values frame their peers)
    "SELECT k, x, sum(x) OVER (PARTITION BY g ORDER BY x RANGE BETWEEN 1.5 PRECEDING AND "
    "CURRENT ROW) AS s, count(*) OVER (ORDER BY x DESC RANGE BETWEEN 1 PRECEDING AND "
    "2 FOLLOWING) AS c FROM t",
    "SELECT g, v, sum(v) OVER (PARTITION BY g ORDER BY v RANGE BETWEEN 1 FOLLOWING AND "
    "3 FOLLOWING) AS s, max(v) OVER (ORDER BY v NULLS FIRST RANGE BETWEEN 2 PRECEDING AND "
    "1 PRECEDING) AS m FROM b",
    # distributions
    "SELECT *, cume_dist() OVER (ORDER BY v) AS cd, percent_rank() OVER (ORDER BY v) AS pr, "
    "ntile(3) OVER (ORDER BY v, g) AS t3 FROM b",
    # over a grouped select, in a derived table, over a join
    "SELECT g, sum(v) AS total, sum(sum(v)) OVER (ORDER BY g) AS running FROM b GROUP BY g",
    # the same with nothing aliased (DuckDB names the columns; their case is kept)
    "SELECT g, sum(v), sum(sum(v)) OVER (ORDER BY g) FROM b GROUP BY g",
    "SELECT g, SUM(v), RANK() OVER (ORDER BY SUM(v)) FROM b GROUP BY g",
    "SELECT k, x + 1, sum(x + 1) OVER (PARTITION BY g) FROM t",
    "SELECT k, p FROM (SELECT k, x - 1 AS y, lag(k) OVER (ORDER BY k) AS p FROM t) w "
    "WHERE p IS NOT NULL",
    "SELECT t.k, b.v, row_number() OVER (PARTITION BY t.g ORDER BY t.k, b.v) AS rn "
    "FROM t JOIN b ON t.g = b.g",
    # a select alias that is no input column, named in a window as DuckDB reads it (an
    # input column of that name wins: ``g AS k`` leaves t's own k in the order)
    "SELECT k, x * 2 AS y, rank() OVER (PARTITION BY g ORDER BY y DESC, k) AS r, "
    "sum(y) OVER (PARTITION BY g) AS s FROM t",
    "SELECT g AS k, k AS g, x, row_number() OVER (ORDER BY g, k) AS rn, lag(s) OVER "
    "(PARTITION BY k ORDER BY g) AS p FROM t",
    "SELECT g AS h, v, row_number() OVER (PARTITION BY h ORDER BY v, g) FROM b",
    "SELECT k, x * 2 AS y FROM t QUALIFY sum(y) OVER (PARTITION BY g ORDER BY k) > 1",
    # QUALIFY on one window function that is not a rank (docs/sql.md: maintained)
    "SELECT k, x FROM t QUALIFY sum(x) OVER (PARTITION BY g) > 1",
    "SELECT g, v FROM b QUALIFY count(*) OVER (PARTITION BY g) >= 2",
    # QUALIFY reading a column it does not select (it was refused: unknown column), and
    # QUALIFY before ORDER BY .. LIMIT (the limit was taken first: rows missing)
    "SELECT k FROM t QUALIFY x - lag(x) OVER (PARTITION BY g ORDER BY k) < 3",
    "SELECT k, x FROM t QUALIFY sum(x) OVER (PARTITION BY g) > 1 "
    "ORDER BY x DESC NULLS LAST, k LIMIT 2",
]


def _window_view(db) -> str:
    """The name of the view's window view (itself or a helper)."""
    explained = db.explain("v")
    if explained.startswith("view v: strategy window"):
        return "v"
    (hidden,) = [line.split()[2].rstrip(":") for line in explained.splitlines()
                 if line.startswith("helper view") and "strategy window" in line]
    return hidden


@pytest.mark.parametrize("sql", QUERIES)
def test_window_views_equal_duckdb_after_every_batch(sql) -> None:
    check_window_stream(sql, "strategy window", steps=30)


def test_a_change_rereads_its_own_partition_only() -> None:
    db = upkeep.connect()
    for ddl in DDL:
        db.execute(ddl)
    db.insert("t", [(k, k % 10, float(k), "a") for k in range(100)])
    view = db.create_view("v", QUERIES[0])  # every rank: the whole partition may move
    counters = db.view(_window_view(db)).counters
    before = counters()
    db.insert("t", [(500, 3, 0.5, "b")])  # partition 3: its 10 rows and the new one
    after = counters()
    assert after["partition_rereads"] == before["partition_rereads"] + 1
    assert after["rows_reread"] == before["rows_reread"] + 11
    assert (500, 3, 1) in view.rows() and (93, 3, 11) in view.rows()


# functions that read a bounded number of rows around their own, in one order: a change
# re-reads the rows near it, not its partition
NEAR = [
    "SELECT g, v, sum(v) OVER (PARTITION BY g ORDER BY v ROWS BETWEEN 1 PRECEDING AND "
    "2 FOLLOWING) AS s, min(v) OVER (PARTITION BY g ORDER BY v ROWS BETWEEN 2 PRECEDING "
    "AND 1 PRECEDING) AS m, first_value(v) OVER (PARTITION BY g ORDER BY v ROWS BETWEEN "
    "1 FOLLOWING AND 3 FOLLOWING) AS f, lag(v, 3) OVER (PARTITION BY g ORDER BY v) AS l "
    "FROM b",
    "SELECT k, x, lead(x) OVER (ORDER BY k) AS n, avg(x) OVER (ORDER BY k ROWS 2 PRECEDING) "
    "AS a, count(s) OVER (ORDER BY k ROWS BETWEEN CURRENT ROW AND 1 FOLLOWING) AS c FROM t",
]


@pytest.mark.parametrize("sql", NEAR + [QUERIES[3], QUERIES[4], QUERIES[5]])
def test_bounded_windows_reread_only_near_rows(sql) -> None:
    db = upkeep.connect()
    for ddl in DDL:
        db.execute(ddl)
    db.create_view("v", sql)
    assert "re-reads the rows within" in db.explain("v"), db.explain("v")
    check_window_stream(sql, "strategy window", steps=30)


def test_a_change_in_a_long_series_rereads_a_few_rows() -> None:
    db = upkeep.connect()
    for ddl in DDL:
        db.execute(ddl)
    db.insert("t", [(k, 0, float(k * k), "a") for k in range(0, 2000, 2)])
    view = db.create_view("v", QUERIES[3])  # lag(x) by k in partition g
    counters = db.view(_window_view(db)).counters
    before = counters()["rows_reread"]
    db.insert("t", [(1001, 0, -1.0, "b")])  # in the middle of 1,000 rows
    db.delete("t", [(500, 0, 250000.0, "a")])
    assert counters()["rows_reread"] - before <= 2 * 10
    rows = set(view.rows())
    assert (1001, 0, -1.0, 1000.0 ** 2) in rows and (1002, 0, 1002.0 ** 2, -1.0) in rows
    assert (502, 0, 502.0 ** 2, 498.0 ** 2) in rows


# a batch removing every copy of a duplicated row: the rows after all its copies move up
DUPLICATES_REMOVED = [
    ("SELECT g, v, lag(v) OVER (ORDER BY v) AS l FROM b", [(0, 5), (0, 5), (0, 7)],
     [(0, 5), (0, 5)], {}),
    ("SELECT g, v, sum(v) OVER (ORDER BY v ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS s "
     "FROM b", [(0, 5), (0, 5), (0, 7), (0, 9)], [(0, 5), (0, 5)], {}),
    ("SELECT t.k, b.v, lag(b.v) OVER (PARTITION BY t.g ORDER BY t.k, b.v) AS l "
     "FROM t JOIN b ON t.g = b.g", [(3, 0), (3, 1)], [(3, 0)],
     {"t": [(1, 3, 0.0, "a"), (1, 3, 0.0, "a")]}),
]


@pytest.mark.parametrize(("sql", "rows", "removed", "others"), DUPLICATES_REMOVED)
def test_removing_every_copy_of_a_row_rereads_the_rows_after_them(sql, rows, removed,
                                                                    others) -> None:
    db = upkeep.connect()
    db.execute("CREATE TABLE t (k INTEGER, g INTEGER, x DOUBLE, s VARCHAR)")
    db.execute(DDL[1])
    view = db.create_view("v", sql)
    assert "re-reads the rows within" in db.explain(_window_view(db)), db.explain("v")
    for table, given in others.items():
        db.insert(table, given)
    for row in rows:  # one at a time: equal join rows come from distinct inserts
        db.insert("b", [row])
    db.delete("b", removed)  # every copy of the join's or the table's row, in one batch
    tables = {"t": Counter(others.get("t", [])), "b": Counter(rows) - Counter(removed)}
    ddl = ["CREATE TABLE t (k INTEGER, g INTEGER, x DOUBLE, s VARCHAR)", DDL[1]]
    assert_bag_equal(duckdb_query(ddl, tables, sql), view.rows(), sql)


# windows over different partitions: kept per the columns they share, each per its own
DIFFERENT_PARTITIONS = [
    "SELECT k, g, s, rank() OVER (PARTITION BY g ORDER BY x) AS r, "
    "count(*) OVER (PARTITION BY g, s) AS n, row_number() OVER (ORDER BY k) AS rn FROM t",
    "SELECT g, v, sum(v) OVER (PARTITION BY g) AS per_g, sum(v) OVER () AS everything FROM b",
]


@pytest.mark.parametrize("sql", DIFFERENT_PARTITIONS)
def test_windows_over_different_partitions_equal_duckdb(sql) -> None:
    check_window_stream(sql, "strategy window", steps=30)


# windows inside expressions: computed as columns of a derived table, the expressions outside
NESTED = [
    "SELECT k, x - lag(x) OVER (PARTITION BY g ORDER BY k) AS step FROM t",
    "SELECT g, v, v * 2 + lead(v, 1, 0) OVER (PARTITION BY g ORDER BY v) FROM b",
    "SELECT g, sum(v) - lag(sum(v)) OVER (ORDER BY g) AS change, count(*) AS n FROM b "
    "GROUP BY g",
]


@pytest.mark.parametrize("sql", NESTED)
def test_windows_inside_expressions_equal_duckdb(sql) -> None:
    check_window_stream(sql, "strategy window", steps=30)


def test_windows_the_view_cannot_keep_are_computed_by_duckdb() -> None:
    """A ``lag`` default that is not of its argument's type is DuckDB's to cast: the window
    falls back to DuckDB (once, not by re-wrapping itself); a default DuckDB cannot cast
    is its error."""
    db = upkeep.connect()
    for ddl in DDL:
        db.execute(ddl)
    db.insert("t", [(1, 0, 1.0, "a"), (2, 0, 3.0, "b")])
    sql = "SELECT k, lag(k, 1, 2.5) OVER (ORDER BY k) AS p FROM t"
    view = db.create_view("v", sql)
    assert "strategy recompute" in db.explain("v")
    tables = {"t": Counter(r for r, n in db.weighted_rows("t") for _ in range(n)),
              "b": Counter()}
    assert_bag_equal(duckdb_query(DDL, tables, sql), view.rows(), sql)
    with pytest.raises(upkeep.Error, match="Could not convert"):
        db.create_view("w", "SELECT k, lag(x, 1, 'abc') OVER (ORDER BY k) FROM t")
    assert "w" not in db.views()


@pytest.mark.parametrize("sql", [
    "SELECT t.a, r.a, SUM(r.a) OVER () AS w FROM t RIGHT JOIN r ON t.a = r.a",
    "SELECT t.a, r.a, ROW_NUMBER() OVER (PARTITION BY r.a ORDER BY r.b) AS n "
    "FROM t RIGHT JOIN r ON t.a = r.a"])
def test_a_window_reads_the_column_it_names_when_two_outputs_share_a_name(sql) -> None:
    """``t.a, r.a`` are both output ``a``: a window over ``r.a`` read ``t.a`` (NULL where
    the right join has no match)."""
    view_follows_duckdb(["CREATE TABLE t (a INTEGER)", "CREATE TABLE r (a INTEGER, b INTEGER)",
                         "INSERT INTO r VALUES (1, 1), (1, 2), (2, 5)",
                         "INSERT INTO t VALUES (2)", f"CREATE VIEW v AS {sql}"],
                        ["INSERT INTO t VALUES (1)", "DELETE FROM r WHERE b = 1"])


COLLATED = ["CREATE TABLE c (id INTEGER, s VARCHAR)",
            "INSERT INTO c VALUES (1, 'a'), (2, 'B'), (3, 'c'), (4, 'A'), (6, 'b')"]
COLLATED_CHANGES = ["INSERT INTO c VALUES (0, 'C'), (5, 'a')", "DELETE FROM c WHERE id = 1",
                    "INSERT INTO c VALUES (7, 'b')"]


@pytest.mark.parametrize("sql", [
    "SELECT id, s FROM c ORDER BY s COLLATE NOCASE, id LIMIT 2",
    "SELECT id, s, ROW_NUMBER() OVER (ORDER BY s COLLATE NOCASE, id) AS rn FROM c",
    "SELECT id, s, LAG(id) OVER (ORDER BY s COLLATE NOCASE, id) AS prev FROM c",
    "SELECT id, s, COUNT(*) OVER (PARTITION BY s COLLATE NOCASE) AS n FROM c",
    "SELECT id, s FROM c QUALIFY ROW_NUMBER() OVER (PARTITION BY s COLLATE NOCASE "
    "ORDER BY id) = 1",
    "SELECT * FROM (SELECT id, s, ROW_NUMBER() OVER (ORDER BY s COLLATE NOCASE, id) AS rn "
    "FROM c) WHERE rn <= 2"])
def test_a_collation_in_a_window_or_top_k_orders_as_duckdb_does(sql) -> None:
    """A ``COLLATE`` in an ORDER BY or PARTITION BY was dropped: rows were ordered and
    partitioned by their code points (``'B'`` before ``'a'``)."""
    view_follows_duckdb(COLLATED, COLLATED_CHANGES, query=sql)


@pytest.mark.parametrize("sql", ["SELECT id, s FROM c ORDER BY ALL LIMIT 3",
                                 "SELECT s, id FROM c ORDER BY ALL DESC LIMIT 2 OFFSET 1"])
def test_order_by_all_with_a_limit_is_a_top_k(sql) -> None:
    """``ORDER BY ALL .. LIMIT`` orders by every output column, left to right, and is
    kept as a top-k (it was a ParseError: "cannot evaluate constant ALL")."""
    view_follows_duckdb(COLLATED, COLLATED_CHANGES, query=sql)
    db = upkeep.connect()
    db.execute(COLLATED[0])
    db.create_view("v", sql)
    assert "strategy topk" in db.explain("v")


@pytest.mark.parametrize("column", ["DECIMAL(38, 0)", "HUGEINT"])
def test_a_window_sum_past_its_type_is_an_evaluation_error(column) -> None:
    """A window SUM past HUGEINT or DECIMAL(38) is an EvaluationError that rejects the
    batch, as a GROUP BY's SUM and DuckDB's are (the view held a 39-digit DECIMAL(38, 0))."""
    import duckdb

    big = "99999999999999999999999999999999999999" if column.startswith("DECIMAL") else \
        str(2**127 - 1)
    sql = "SELECT g, k, SUM(v) OVER (PARTITION BY g ORDER BY k) AS s FROM w"
    setup = [f"CREATE TABLE w (g INTEGER, k INTEGER, v {column})",
             f"INSERT INTO w VALUES (1, 0, {big})"]
    db, con = upkeep.connect(), duckdb.connect()
    for statement in setup:
        db.execute(statement)
        con.execute(statement)
    view = db.create_view("v", sql)
    before = view.rows()
    with pytest.raises(duckdb.OutOfRangeException):
        con.execute(f"INSERT INTO w VALUES (1, 1, 2); {sql}").fetchall()
    with pytest.raises(upkeep.EvaluationError, match="overflow in SUM"):
        db.execute("INSERT INTO w VALUES (1, 1, 2)")
    assert view.rows() == before and db.execute("SELECT COUNT(*) FROM w").fetchall() == [(1,)]
    db.execute("INSERT INTO w VALUES (2, 1, 2)")  # another partition: fits
    assert sorted(view.rows()) == [(1, 0, before[0][2]), (2, 1, 2)]


@pytest.mark.parametrize("predicate", [
    "s = 'a' COLLATE NOCASE", "'a' COLLATE NOCASE = s", "s < 'B' COLLATE NOCASE",
    "s = ('a' COLLATE NOCASE)"])
def test_a_collation_on_the_constant_side_compares_as_duckdb_compares(predicate):
    """``'a' COLLATE NOCASE`` was folded to plain ``'a'``: ``s = 'a' COLLATE NOCASE`` kept
    'a' and not 'A' in a view, and DELETE / UPDATE with it left 'A' untouched."""
    view_follows_duckdb(
        [*COLLATED, "CREATE TABLE k (id INTEGER, s VARCHAR)",
         "INSERT INTO k VALUES (1, 'A'), (2, 'a'), (3, 'b'), (4, 'C')"],
        [f"UPDATE c SET id = id + 10 WHERE {predicate}",
         "INSERT INTO c VALUES (7, 'A'), (8, 'b')",
         f"DELETE FROM c WHERE {predicate}"],
        query=f"SELECT c.id, c.s, k.id AS kid FROM c JOIN k ON c.s = k.s WHERE {predicate.replace('s', 'c.s')}")


@pytest.mark.parametrize("sql", [
    # a CTE named as a table gives the names: its k is an input column, not the alias
    "WITH t AS (SELECT a, b AS k FROM t) SELECT a, -a AS k, row_number() OVER (ORDER BY k) "
    "AS n FROM t",
    "WITH c(p, q) AS (SELECT a, b FROM t) SELECT p, -p AS k, row_number() OVER (ORDER BY k) "
    "AS n FROM c",
    # a subquery's columns are its own inputs', not the enclosing select's aliases
    "SELECT a, b AS z, sum(a) OVER (ORDER BY (SELECT z FROM u WHERE u.k = t.a)) AS n FROM t",
    "SELECT a, b AS z, sum((SELECT z FROM u WHERE u.k = t.a)) OVER () AS n FROM t",
    # and the alias itself, beside them
    "SELECT a, b AS z, sum(a) OVER (ORDER BY z, a) AS n FROM t",
])
def test_window_names_resolve_as_duckdb_resolves_them(sql) -> None:
    setup = ["CREATE TABLE t (a INTEGER PRIMARY KEY, b INTEGER)",
             "CREATE TABLE u (k INTEGER PRIMARY KEY, z INTEGER)",
             "INSERT INTO t VALUES (1, 10), (2, 5), (3, 7), (4, 6)",
             "INSERT INTO u VALUES (1, 3), (2, 1), (3, 2), (4, 0)"]
    view_follows_duckdb(setup, ["INSERT INTO t VALUES (5, 1)", "UPDATE u SET z = 9 WHERE k = 2",
                                "DELETE FROM t WHERE a = 1"], query=sql)


@pytest.mark.parametrize(("typ", "values", "frame", "order"), [
    ("INTEGER", [2147483647, 1], "1 PRECEDING AND 1 FOLLOWING", ""),
    ("INTEGER", [2147483647, 1], "1 PRECEDING AND CURRENT ROW", ""),
    ("INTEGER", [-2147483648, 1], "1 PRECEDING AND CURRENT ROW", ""),
    ("INTEGER", [-2147483648, 1], "1 PRECEDING AND CURRENT ROW", "DESC"),
    ("INTEGER", [2147483647, 1], "1 PRECEDING AND CURRENT ROW", "DESC"),
    ("TINYINT", [100, 1], "100 PRECEDING AND 100 FOLLOWING", ""),
    ("TINYINT", [1, 2], "1000 PRECEDING AND CURRENT ROW", ""),
    ("BIGINT", [9223372036854775807, 1], "UNBOUNDED PRECEDING AND 1 FOLLOWING", ""),
    ("INTEGER", [2147483647, None], "1 PRECEDING AND 1 FOLLOWING", ""),
])
def test_a_range_frame_bound_past_the_order_type_overflows_as_in_duckdb(typ, values, frame,
                                                                       order) -> None:
    """DuckDB computes a RANGE bound as ``value -/+ offset`` in the order column's type
    (the offset's where it does not fit it) and raises past it; the view rejects that
    batch with an EvaluationError (it answered; found by a review), and frames within
    the type are counted as DuckDB counts them."""
    sql = (f"SELECT o, COUNT(*) OVER (ORDER BY o {order} RANGE BETWEEN {frame}) AS n "
           "FROM t")
    con, db = duckdb.connect(), upkeep.connect()
    for c in (con, db):
        c.execute(f"CREATE TABLE t (o {typ})")
    con.executemany("INSERT INTO t VALUES (?)", [(v,) for v in values])
    db.create_view("w", sql)
    try:
        expected = Counter(con.execute(sql).fetchall())
    except duckdb.Error:
        with pytest.raises(upkeep.EvaluationError, match="overflow"):
            db.insert("t", [(v,) for v in values])
        assert db.view("w").rows() == []  # the batch was rejected whole
        return
    db.insert("t", [(v,) for v in values])
    assert Counter(db.view("w").rows()) == expected
