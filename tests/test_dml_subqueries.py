"""DELETE and UPDATE whose WHERE or SET holds subqueries (``IN (SELECT ..)``, ``EXISTS``,
scalar subqueries, correlated or not, over other tables, the target itself or a view) are
evaluated by DuckDB over the current contents (statements.matching_by_duckdb): the tables
and the views over them equal DuckDB running the same statements, inside transactions with
staged changes too, and a statement DuckDB cannot evaluate changes nothing."""

from __future__ import annotations

from decimal import Decimal

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import same_outcome_as_duckdb, view_follows_duckdb

import upkeep

SCHEMA = ["CREATE TABLE t (k BIGINT, s VARCHAR, x DOUBLE)",
          "CREATE TABLE u (k BIGINT, y DECIMAL(6,2))"]
VIEW = "SELECT t.k, COUNT(*) AS n, SUM(t.x * u.y) AS m FROM t, u WHERE t.k = u.k GROUP BY t.k"
KEYS = st.one_of(st.none(), st.integers(0, 3))
T_ROWS = st.tuples(KEYS, st.sampled_from(["a", "b", None]),
                   st.sampled_from([0.5, 1.0, 2.5, -1.0, None]))
U_ROWS = st.tuples(KEYS, st.sampled_from(["0.50", "1.25", "-2.00", None]))


def _literal(v: object) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    return repr(v)


NUMBER = st.sampled_from(["0", "1", "0.75", "-1"])
STATEMENTS = st.one_of(
    st.builds(lambda r: "INSERT INTO t VALUES (" + ", ".join(map(_literal, r)) + ")", T_ROWS),
    st.builds(lambda r: "INSERT INTO u VALUES (" + ", ".join(map(_literal, r)) + ")", U_ROWS),
    st.builds(lambda c: f"DELETE FROM t WHERE k IN (SELECT k FROM u WHERE y > {c})", NUMBER),
    st.just("DELETE FROM t WHERE k NOT IN (SELECT k FROM u)"),
    st.just("DELETE FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.k AND u.y < t.x)"),
    st.just("DELETE FROM t AS z WHERE z.x > (SELECT AVG(x) FROM t)"),
    st.just("DELETE FROM u WHERE NOT EXISTS (SELECT * FROM t WHERE t.k = u.k)"),
    st.builds(lambda k: f"UPDATE t SET x = (SELECT MAX(y) FROM u WHERE u.k = t.k) "
                        f"WHERE k = {k}", st.integers(0, 3)),
    st.just("UPDATE t SET k = k + 1, s = 'n' WHERE k IN (SELECT k FROM u) AND s IS NOT NULL"),
    st.just("UPDATE u SET y = (SELECT COUNT(*) FROM t WHERE t.k = u.k) + y"),
    st.builds(lambda c: f"UPDATE t SET s = CASE WHEN x > (SELECT MIN(y) FROM u) THEN 'hi' "
                        f"ELSE s END WHERE x <> {c}", NUMBER),
)


def _rows(cur) -> list:
    return sorted(map(repr, cur.fetchall()))


def _same(db, con) -> None:
    for table in ("t", "u"):
        assert _rows(db.execute(f"SELECT * FROM {table}")) == _rows(
            con.execute(f"SELECT * FROM {table}")), table
    assert _rows(db.execute("SELECT * FROM v")) == _rows(con.execute(VIEW))


@settings(max_examples=25, deadline=None)
@given(st.lists(T_ROWS, max_size=8), st.lists(U_ROWS, max_size=5),
       st.lists(st.lists(STATEMENTS, min_size=1, max_size=4), min_size=1, max_size=5))
def test_dml_with_subqueries_equals_duckdb(t_rows, u_rows, transactions):
    db, con = upkeep.connect(), duckdb.connect()
    for sql in SCHEMA:
        db.execute(sql)
        con.execute(sql)
    db.create_view("v", VIEW)
    for table, rows in (("t", t_rows), ("u", u_rows)):
        for row in rows:
            sql = f"INSERT INTO {table} VALUES (" + ", ".join(map(_literal, row)) + ")"
            db.execute(sql)
            con.execute(sql)
    for statements in transactions:
        with db.transaction():
            for sql in statements:
                assert db.execute(sql).rowcount == con.execute(sql).fetchone()[0], sql
        _same(db, con)


TWO_TABLES = ["CREATE TABLE t (k BIGINT PRIMARY KEY, x INTEGER)", "CREATE TABLE u (k BIGINT)",
              "INSERT INTO t VALUES (1, 10), (2, 20), (3, 30)", "INSERT INTO u VALUES (1), (3)"]


def _two_tables(target=None):
    """Tables t and u on upkeep (or on ``target``, a DuckDB connection)."""
    target = upkeep.connect() if target is None else target
    for statement in TWO_TABLES:
        target.execute(statement)
    return target


def test_a_subquery_may_read_a_view():
    db = _two_tables()
    db.create_view("big", "SELECT k FROM t WHERE x >= 20")
    assert db.execute("DELETE FROM u WHERE k IN (SELECT k FROM big)").rowcount == 1
    assert db.execute("SELECT * FROM u").fetchall() == [(1,)]


@pytest.mark.parametrize("value", ["(SELECT AVG(k) FROM u) + 0.5", "(SELECT AVG(k) FROM u) + 1.5",
                                   "(SELECT CAST(MAX(k) AS VARCHAR) FROM u) || '7'",
                                   "(SELECT MAX(k) FROM u) + 0.5"])
def test_update_casts_the_subquery_value_as_duckdb(value):
    db, con = _two_tables(), _two_tables(duckdb.connect())
    sql = f"UPDATE t SET x = {value} WHERE k = 2"
    db.execute(sql)
    con.execute(sql)
    assert db.execute("SELECT x FROM t WHERE k = 2").fetchall() == con.execute(
        "SELECT x FROM t WHERE k = 2").fetchall()


@pytest.mark.parametrize("sql, error", [
    ("UPDATE t SET x = (SELECT k FROM u)", upkeep.Error),  # more than one row
    ("UPDATE t SET x = (SELECT k FROM u, t)", upkeep.SchemaError),  # ambiguous k
    ("DELETE FROM t WHERE k IN (SELECT k FROM nosuch)", upkeep.SchemaError),
    ("UPDATE t SET k = (SELECT MIN(k) FROM u)", upkeep.ConstraintError),  # duplicate key
    ("UPDATE t SET x = (SELECT k FROM u LIMIT 1) // 0", upkeep.EvaluationError),
])
def test_a_failed_statement_changes_nothing(sql, error):
    db = _two_tables()
    db.create_view("v", "SELECT SUM(x) AS s FROM t")
    with pytest.raises(error) as caught:
        db.execute(sql)
    assert "upkeep_dml" not in str(caught.value)  # said of the statement, not the rewrite
    assert sorted(db.execute("SELECT * FROM t").fetchall()) == [(1, 10), (2, 20), (3, 30)]
    assert db.execute("SELECT * FROM v").fetchall() == [(60,)]


def test_provenance_tables_still_take_hyperplane_statements_only():
    db = upkeep.connect()
    db.execute("CREATE TABLE p (k BIGINT, x INTEGER) WITH (provenance = 'update')")
    db.execute("CREATE TABLE u (k BIGINT)")
    db.execute("INSERT INTO p VALUES (1, 1)")
    with pytest.raises(upkeep.UnsupportedError):
        db.execute("DELETE FROM p WHERE k IN (SELECT k FROM u)")
    assert db.execute("SELECT * FROM p").fetchall() == [(1, 1)]


@pytest.mark.parametrize("sql", [
    "DELETE FROM t AS s WHERE EXISTS (SELECT 1 FROM t AS s WHERE s.x > 10)",
    "DELETE FROM t AS u WHERE u.k IN (SELECT u.k FROM u)",
    "DELETE FROM t AS z WHERE EXISTS (SELECT 1 FROM u WHERE u.k = z.k)",
    "UPDATE t AS z SET x = (SELECT COUNT(*) FROM t WHERE t.x < z.x)",
    "DELETE FROM t AS z WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.k)",  # no t here
])
def test_an_alias_of_the_target_is_shadowed_inside_subqueries_as_in_duckdb(sql):
    """Inside a subquery an alias names the subquery's own relation when it declares one
    (the target's columns were renamed everywhere, changing the wrong rows)."""
    db, con = _two_tables(), _two_tables(duckdb.connect())
    same_outcome_as_duckdb(db, con, sql, upkeep.SchemaError, "not found")
    assert sorted(db.execute("SELECT * FROM t").fetchall()) == sorted(
        con.execute("SELECT * FROM t").fetchall())


def test_a_bound_parameter_beside_a_subquery_is_the_python_value_given():
    """A ``?`` in SET is checked as db.insert checks it, with or without a subquery in the
    statement (DuckDB read 2**100 back as text and stored it in a VARCHAR column); one past
    HUGEINT's range is refused, as DuckDB refuses it."""
    db = upkeep.connect()
    db.execute("CREATE TABLE t (k INTEGER, s VARCHAR, d DOUBLE)")
    db.execute("INSERT INTO t VALUES (1, NULL, NULL)")
    for where in ("k = 1", "k IN (SELECT 1)"):
        with pytest.raises(upkeep.SchemaError, match="expected VARCHAR"):
            db.execute(f"UPDATE t SET s = ? WHERE {where}", [2**100])
        with pytest.raises(upkeep.SchemaError, match="outside HUGEINT's range"):
            db.execute(f"UPDATE t SET d = ? WHERE {where}", [2**130])
        db.execute(f"UPDATE t SET d = ?, s = ? WHERE {where}", [2**100, "x"])
        assert db.execute("SELECT * FROM t").fetchall() == [(1, "x", float(2**100))]
        db.execute("UPDATE t SET s = NULL, d = NULL")
    # a Decimal NaN binds as a floating-point NaN, as DuckDB binds it: it deletes NaN rows
    db.execute("INSERT INTO t VALUES (2, 'n', 'nan'::DOUBLE)")
    assert db.execute("DELETE FROM t WHERE d = ?", [Decimal("NaN")]).rowcount == 1
    assert db.execute("SELECT k FROM t").fetchall() == [(1,)]


def test_a_statement_fixing_a_column_gives_duckdb_only_the_rows_holding_it(monkeypatch):
    """``UPDATE t SET x = (SELECT ..) WHERE k = 2``: the rows of ``t`` go to DuckDB through
    the column index on ``k`` (one row), not the whole table; a subquery reading ``t``
    itself still reads all of it."""
    db = _two_tables()
    db.insert("t", [(k, k) for k in range(10, 2000)])
    read: list[str] = []
    staged_rows = db._catalog.staged_rows

    def counted(table):
        read.append(table.name)
        return staged_rows(table)

    monkeypatch.setattr(db._catalog, "staged_rows", counted)
    assert db.execute("UPDATE t AS z SET x = (SELECT MAX(k) FROM u) WHERE z.k = 2").rowcount == 1
    assert read == ["u"]
    db.execute("UPDATE t SET x = (SELECT COUNT(*) FROM t) WHERE k = 3")
    assert db.execute("SELECT x FROM t WHERE k IN (2, 3) ORDER BY k").fetchall() == [
        (3,), (1993,)]


@pytest.mark.parametrize("sql", [
    "WITH u AS (SELECT 3 AS k) DELETE FROM t WHERE k IN (SELECT k FROM u)",
    "WITH q AS (SELECT k FROM u WHERE k > 1) UPDATE t SET x = 0 WHERE k IN (SELECT k FROM q)",
])
def test_a_dml_statements_ctes_are_read_by_its_subqueries(sql):
    """``WITH .. DELETE / UPDATE``: the subqueries read the statement's CTEs (a CTE named
    as a table read the table: the wrong row was deleted)."""
    db, con = _two_tables(), _two_tables(duckdb.connect())
    db.execute(sql)
    con.execute(sql)
    assert sorted(db.execute("SELECT * FROM t").fetchall()) == sorted(
        con.execute("SELECT * FROM t").fetchall())


@pytest.mark.parametrize("sql", [
    "UPDATE t AS z SET x = t.x + 1", "DELETE FROM t AS z WHERE t.k = 1",
    "DELETE FROM t WHERE other.t.k = 1", "DELETE FROM t AS z WHERE main.z.k = 1",
    "DELETE FROM t WHERE u.k = 1",
    # the forms DuckDB binds run
    "DELETE FROM t WHERE main.t.k = 1", "DELETE FROM main.t WHERE t.k = 1",
    "UPDATE t AS z SET x = z.x + 1 WHERE z.k = 1", "DELETE FROM t WHERE T.K = 2"])
def test_a_column_qualified_by_a_table_the_statement_does_not_name_is_refused(sql):
    """Under an alias only the alias names the table, and a schema part must be the
    table's: DuckDB refuses ``DELETE FROM t AS z WHERE t.k = 1``; upkeep ran it."""
    db, con = _two_tables(), _two_tables(duckdb.connect())
    same_outcome_as_duckdb(db, con, sql, upkeep.SchemaError, "unknown table")
    assert sorted(db.execute("SELECT * FROM t").fetchall()) == sorted(
        con.execute("SELECT * FROM t").fetchall())


def test_values_subqueries_default_and_column_lists_run_as_in_duckdb():
    """Valid DML refused with misleading errors: a VALUES row whose subquery reads a table
    ("VALUES may not reference columns"), DEFAULT in VALUES or SET ("cannot evaluate
    constant DEFAULT", "unknown column default") and ``SET (a, b) = (..)`` ("table t has no
    column ''"). Tables hold no DEFAULT, so DEFAULT is NULL, as in DuckDB."""
    view_follows_duckdb(
        [*TWO_TABLES, "CREATE TABLE w (k BIGINT, x INTEGER, y VARCHAR)",
         "INSERT INTO w VALUES (1, 2, 'a')"],
        ["INSERT INTO w VALUES ((SELECT max(k) FROM t) + 1, (SELECT x FROM t WHERE k = 2), 'b')",
         "INSERT INTO w VALUES (7, DEFAULT, 'c'), (DEFAULT, 8, DEFAULT)",
         "INSERT INTO w (k) VALUES (DEFAULT)",
         "UPDATE w SET (x, y) = (k * 2, 'd') WHERE k = 1",
         "UPDATE w SET (x) = (x + 1)",
         "UPDATE w SET y = DEFAULT WHERE k = 7"],
        query="SELECT k, x, y, COUNT(*) AS n FROM w GROUP BY ALL")


def test_a_column_list_set_from_a_subquery_is_refused_as_in_duckdb():
    """(A list of values of another length is DuckDB's parser error, a ParseError.)"""
    db, con = _two_tables(), _two_tables(duckdb.connect())
    same_outcome_as_duckdb(db, con, "UPDATE t SET (k, x) = (SELECT 1, 2)", upkeep.SchemaError,
                           "needs a list of 2 values")
    assert db.execute("SELECT * FROM t ORDER BY k").fetchall() == [(1, 10), (2, 20), (3, 30)]
