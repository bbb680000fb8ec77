"""DELETE and UPDATE whose WHERE fixes a column read the rows through the table's column
index (statements.matching, Table.rows_with): same results as DuckDB, inside transactions
with staged changes too, and no scan of the table."""

from __future__ import annotations

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import upkeep

SCHEMA = "CREATE TABLE t (k BIGINT, s VARCHAR, b BOOLEAN, x DOUBLE)"
VALUES = st.tuples(st.integers(-3, 3), st.sampled_from(["a", "b", "it's", None]),
                   st.sampled_from([True, False, None]),
                   st.sampled_from([0.5, 1.0, 2.5, None]))


def _literal(v: object) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    return repr(v)


CONDITIONS = st.one_of(
    st.builds(lambda k: f"k = {_literal(k)}", st.integers(-3, 3)),
    st.builds(lambda k: f"{_literal(k)} = k", st.integers(-3, 3)),
    st.builds(lambda s: f"s = {_literal(s)}", st.sampled_from(["a", "b", "it's", "zz"])),
    st.builds(lambda b: f"b = {_literal(b)}", st.booleans()),
    st.builds(lambda k, s: f"k = {k} AND s <> {_literal(s)}", st.integers(-3, 3),
              st.sampled_from(["a", "b"])),
    st.builds(lambda k: f"t.k = {k} AND s IS NOT NULL", st.integers(-3, 3)),
    st.builds(lambda k: f"k = {k} OR k = {k + 1}", st.integers(-3, 3)),
    st.builds(lambda k: f"k = {k}.0", st.integers(-3, 3)),
)
STATEMENTS = st.one_of(
    st.builds(lambda r: "INSERT INTO t VALUES (" + ", ".join(map(_literal, r)) + ")", VALUES),
    st.builds(lambda c: f"DELETE FROM t WHERE {c}", CONDITIONS),
    st.builds(lambda c, s: f"UPDATE t SET s = {_literal(s)} WHERE {c}", CONDITIONS,
              st.sampled_from(["a", "c"])),
    st.builds(lambda c, k: f"UPDATE t SET k = {k} WHERE {c}", CONDITIONS, st.integers(-3, 3)),
)


def _rows(cur) -> list:
    return sorted(map(repr, cur.fetchall()))


def _run(db, con, statements: list[str], table: str) -> None:
    """The statements as one transaction in upkeep, one by one in DuckDB: equal tables."""
    with db.transaction():
        for sql in statements:
            db.execute(sql)
            con.execute(sql)
    assert _rows(db.execute(f"SELECT * FROM {table}")) == _rows(
        con.execute(f"SELECT * FROM {table}"))


@settings(max_examples=20, deadline=None)
@given(st.lists(VALUES, max_size=8),
       st.lists(st.lists(STATEMENTS, min_size=1, max_size=4), min_size=1, max_size=5))
def test_keyed_dml_equals_duckdb(initial, transactions):
    db = upkeep.connect()
    con = duckdb.connect()
    db.execute(SCHEMA)
    con.execute(SCHEMA)
    db.create_view("v", "SELECT k, s, COUNT(*) AS n FROM t GROUP BY k, s")
    for row in initial:
        sql = "INSERT INTO t VALUES (" + ", ".join(map(_literal, row)) + ")"
        db.execute(sql)
        con.execute(sql)
    for statements in transactions:
        _run(db, con, statements, "t")
        assert _rows(db.execute("SELECT * FROM v")) == _rows(
            con.execute("SELECT k, s, COUNT(*) AS n FROM t GROUP BY k, s"))


def test_keyed_delete_reads_only_matching_rows(monkeypatch):
    db = upkeep.connect()
    db.execute("CREATE TABLE t (k BIGINT, v VARCHAR)")
    db.insert("t", [(i, f"v{i % 7}") for i in range(5000)])
    db.execute("UPDATE t SET v = 'first' WHERE k = 1")  # builds the index on k

    def no_scan(*_):
        raise AssertionError("the keyed statement scanned the whole table")

    monkeypatch.setattr(db._catalog, "staged_rows", no_scan)
    with db.transaction():
        db.insert("t", [(10_000, "new")])
        assert db.execute("UPDATE t SET v = 'x' WHERE k = 10000").rowcount == 1
        assert db.execute("DELETE FROM t WHERE k = 7 AND v = 'v0'").rowcount == 1
        assert db.execute("DELETE FROM t WHERE k = 8 AND v = 'nope'").rowcount == 0
    monkeypatch.undo()
    rows = dict(db.execute("SELECT * FROM t").fetchall())
    assert rows[1] == "first" and rows[10_000] == "x" and 7 not in rows and rows[8] == "v1"
    assert len(rows) == 5000


def test_failed_keyed_update_changes_nothing():
    db = upkeep.connect()
    db.execute("CREATE TABLE t (k BIGINT PRIMARY KEY, v BIGINT)")
    db.insert("t", [(1, 1), (2, 2)])
    db.execute("DELETE FROM t WHERE k = 2")  # index on k
    with pytest.raises(upkeep.Error):
        db.execute("UPDATE t SET k = 1 WHERE k = 1 OR v = 1 OR k = 3")  # fine: same key
        db.insert("t", [(3, 3)])
        db.execute("UPDATE t SET k = 1 WHERE k = 3")  # duplicate primary key
    assert sorted(db.execute("SELECT * FROM t").fetchall()) == [(1, 1), (3, 3)]
    db.execute("DELETE FROM t WHERE k = 3")
    assert db.execute("SELECT * FROM t").fetchall() == [(1, 1)]


COMPOSITE = "CREATE TABLE c (a INTEGER, b VARCHAR, n INTEGER, PRIMARY KEY (a, b))"
KEYS = st.tuples(st.integers(0, 3), st.sampled_from(["x", "y", "z"]))
COMPOSITE_STATEMENTS = st.one_of(
    st.builds(lambda k: f"DELETE FROM c WHERE a = {k[0]} AND b = '{k[1]}'", KEYS),
    st.builds(lambda k, n: f"DELETE FROM c WHERE b = '{k[1]}' AND a = {k[0]} AND n > {n}",
              KEYS, st.integers(0, 5)),
    st.builds(lambda k, n: f"UPDATE c SET n = {n} WHERE a = {k[0]} AND b = '{k[1]}'",
              KEYS, st.integers(0, 5)),
    st.builds(lambda k: f"UPDATE c SET n = n + 1 WHERE c.b = '{k[1]}' AND c.a = {k[0]}", KEYS),
    st.builds(lambda a: f"UPDATE c SET n = 0 WHERE a = {a}", st.integers(0, 3)),
)


@settings(max_examples=20, deadline=None)
@given(st.lists(st.tuples(KEYS, st.integers(0, 5)), max_size=12, unique_by=lambda r: r[0]),
       st.lists(st.lists(COMPOSITE_STATEMENTS, min_size=1, max_size=4), min_size=1,
                max_size=5))
def test_statements_fixing_a_composite_key_equal_duckdb(initial, transactions):
    """DELETE / UPDATE whose WHERE fixes every column of a composite PRIMARY KEY go
    through an index on the key's columns together, also over staged changes."""
    db, con = upkeep.connect(), duckdb.connect()
    for target in (db, con):
        target.execute(COMPOSITE)
    rows = [(a, b, n) for (a, b), n in initial]
    db.insert("c", rows)
    if rows:
        con.executemany("INSERT INTO c VALUES (?, ?, ?)", rows)
    for statements in transactions:
        _run(db, con, statements, "c")


def test_a_statement_fixing_a_composite_key_reads_only_its_row(monkeypatch):
    db = upkeep.connect()
    db.execute(COMPOSITE)
    db.insert("c", [(a, f"b{i}", 0) for a in range(3) for i in range(2000)])
    read: list[int] = []
    staged_rows_with = db._catalog.staged_rows_with

    def counted(*args):
        got = staged_rows_with(*args)
        read.append(len(got))
        return got

    monkeypatch.setattr(db._catalog, "staged_rows_with", counted)
    with db.transaction():
        db.insert("c", [(1, "new", 0)])
        assert db.execute("UPDATE c SET n = 7 WHERE a = 1 AND b = 'new'").rowcount == 1
        assert db.execute("UPDATE c SET n = 5 WHERE b = 'b17' AND a = 2").rowcount == 1
        assert db.execute("DELETE FROM c WHERE a = 0 AND b = 'b3' AND n = 1").rowcount == 0
    assert read == [1, 1, 1]
    monkeypatch.undo()
    assert db.execute("SELECT n FROM c WHERE a = 1 AND b = 'new'").fetchall() == [(7,)]
    assert db.execute("SELECT n FROM c WHERE a = 2 AND b = 'b17'").fetchall() == [(5,)]
    assert db.execute("SELECT COUNT(*) FROM c").fetchall() == [(6001,)]


def test_a_where_of_a_thousand_terms_runs_in_views_and_statements():
    """A generated ``k = 0 OR k = 1 OR ...`` nests one level a term: its operands were
    gathered recursively (RecursionError from ``CREATE VIEW``), and a DELETE or UPDATE
    whose WHERE or SET is deeper than Python compiles was refused although DuckDB
    evaluates it (as views too fall back to).  Views, tables and row counts equal DuckDB's."""
    terms = 1_200
    any_of = " OR ".join(f"k = {i}" for i in range(0, 2 * terms, 2))
    none_of = " AND ".join(f"k <> {i}" for i in range(0, 2 * terms, 2))
    views = {"hits": f"SELECT k, s FROM t WHERE {any_of}",
             "misses": f"SELECT k, s FROM t WHERE {none_of}"}
    db, con = upkeep.connect(), duckdb.connect()
    for target in (db, con):
        target.execute(SCHEMA)
    for name, sql in views.items():
        db.create_view(name, sql)
    rows = [(k, "a" if k % 3 else "b", k % 2 == 0, 0.5) for k in range(-10, 30)]
    db.insert("t", rows)
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", rows)
    statements = [f"DELETE FROM t WHERE s = 'b' AND ({any_of})",
                  f"UPDATE t SET x = 2.5 WHERE {none_of}",
                  f"UPDATE t SET k = k + 1 WHERE ({any_of}) AND k > 10"]
    for sql in statements:
        assert db.execute(sql).rowcount == con.execute(sql).fetchone()[0], sql
        for name, query in views.items():
            assert sorted(db.view(name).rows()) == sorted(con.execute(query).fetchall())
        assert sorted(db.execute("SELECT * FROM t").fetchall()) == sorted(
            con.execute("SELECT * FROM t").fetchall())


def test_a_dml_expression_the_compiler_does_not_evaluate_is_evaluated_by_duckdb():
    """``LIKE ... ESCAPE`` works in views (recomputed) but a DELETE or UPDATE using it was
    refused: statements too hand what the expression compiler does not evaluate to DuckDB."""
    db, con = upkeep.connect(), duckdb.connect()
    for target in (db, con):
        target.execute("CREATE TABLE t (s VARCHAR, k INTEGER)")
        target.execute("INSERT INTO t VALUES ('a_b', 1), ('axb', 2), ('a!_b', 3), (NULL, 4)")
    for sql in ("DELETE FROM t WHERE s LIKE 'a!_b' ESCAPE '!'",
                "UPDATE t SET k = 7 WHERE s NOT LIKE 'a#%' ESCAPE '#' AND k > 2"):
        assert db.execute(sql).rowcount == con.execute(sql).fetchone()[0] == 1, sql
        assert sorted(db.execute("SELECT * FROM t").fetchall(), key=repr) == sorted(
            con.execute("SELECT * FROM t").fetchall(), key=repr)


def test_a_where_fixing_a_column_to_a_literal_beyond_hugeint_matches_as_duckdb():
    """``col = <integer beyond HUGEINT>`` (which DuckDB types UHUGEINT or BIGNUM): the
    column index's probe cannot hold it, and the statement is DuckDB's to evaluate (it
    was refused); HUGEINT's least value, written negated, is a HUGEINT."""
    huge, least = 2**127 + 1, -(2**127)
    db, con = upkeep.connect(), duckdb.connect()
    for target in (db, con):
        target.execute("CREATE TABLE t (k INTEGER, d DOUBLE, h HUGEINT)")
        target.execute(f"INSERT INTO t VALUES (1, 2.0, {least}), (2, {float(huge)}, 0)")
    for sql in (f"DELETE FROM t WHERE d = {huge} AND k = 1",
                f"UPDATE t SET k = 7 WHERE d = {huge}",
                f"UPDATE t SET k = 3 WHERE h = {least}"):
        assert db.execute(sql).rowcount == con.execute(sql).fetchone()[0], sql
    assert sorted(db.execute("SELECT * FROM t").fetchall()) == sorted(
        con.execute("SELECT * FROM t").fetchall())


def test_dml_expressions_nested_deeper_than_python_recurses_are_evaluated_by_duckdb():
    """``x + (x + (x + ...)))`` 400 deep: the compiler recurses past Python's limit, and
    the statement was refused where DuckDB (and a SELECT) evaluates it."""
    nested = "k" + " + (k" * 400 + ")" * 400
    db, con = upkeep.connect(), duckdb.connect()
    for target in (db, con):
        target.execute("CREATE TABLE t (k BIGINT, g INTEGER)")
        target.execute("INSERT INTO t VALUES (1, 1), (2, 2), (3, 2)")
    for sql in (f"UPDATE t SET k = {nested} WHERE g = 1", f"DELETE FROM t WHERE {nested} > 1000"):
        assert db.execute(sql).rowcount == con.execute(sql).fetchone()[0], sql
        assert sorted(db.execute("SELECT * FROM t").fetchall()) == sorted(
            con.execute("SELECT * FROM t").fetchall())
