"""``executemany`` of an ``INSERT .. VALUES`` of placeholders and literals builds its rows
directly and inserts them in one call: it must give what running the statement once per
parameter tuple gives (the same rows, or the same error and nothing changed)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import upkeep
from upkeep.errors import Error, SchemaError

COLUMNS = [("i", "INTEGER"), ("s", "VARCHAR"), ("f", "DOUBLE"), ("d", "DATE"),
           ("b", "BOOLEAN"), ("m", "DECIMAL(10,2)")]
CREATE = f"CREATE TABLE t ({', '.join(f'{n} {t}' for n, t in COLUMNS)})"
LITERALS = ["1", "-2", "2.5", "-0.5", "'x'", "'7'", "'2024-02-29'", "NULL", "TRUE",
            "1e400", "'2024-13-01'"]

values = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-2**40, max_value=2**40),
    st.sampled_from([2**31, -2**31 - 1, 2**70]),
    st.floats(allow_nan=True, width=64), st.text(max_size=3),
    st.sampled_from(["1", "2024-01-02", "abc"]),
    st.dates(min_value=dt.date(1, 1, 1)),
    st.sampled_from([Decimal("1.25"), Decimal("123456789.5"), Decimal("NaN")]))


@st.composite
def statements(draw):
    """An INSERT naming some columns (or none) and its parameter tuples."""
    named = draw(st.one_of(st.none(), st.permutations([n for n, _ in COLUMNS]).flatmap(
        lambda cols: st.integers(1, len(cols)).map(lambda k: cols[:k]))))
    width = len(COLUMNS) if named is None else len(named)
    items = [draw(st.one_of(st.just("?"), st.sampled_from(LITERALS))) for _ in range(width)]
    target = "t" if named is None else f"t ({', '.join(named)})"
    sql = f"INSERT INTO {target} VALUES ({', '.join(items)})"
    holes = items.count("?")
    tuples = draw(st.lists(st.lists(values, min_size=holes, max_size=holes).map(tuple),
                           max_size=4))
    return sql, tuples


def run(fn):
    """The rows of t after ``fn`` on a fresh database, or the class of error it raised
    (with t unchanged)."""
    db = upkeep.connect()
    db.execute(CREATE)
    db.execute("INSERT INTO t (i) VALUES (0)")
    before = sorted(db.execute("SELECT * FROM t").fetchall(), key=repr)
    try:
        fn(db)
    except Error as exc:
        after = sorted(db.execute("SELECT * FROM t").fetchall(), key=repr)
        assert after == before, "a refused executemany changed the table"
        return type(exc)
    return sorted(db.execute("SELECT * FROM t").fetchall(), key=repr)


def one_statement_per_tuple(sql, tuples):
    def fn(db):
        with db.transaction():
            for params in tuples:
                db.execute(sql, list(params))
    return fn


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(statements())
def test_executemany_inserts_what_one_statement_per_tuple_inserts(case):
    sql, tuples = case
    got = run(lambda db: db.executemany(sql, tuples))
    assert got == run(one_statement_per_tuple(sql, tuples)), (sql, tuples)


def test_a_parameter_tuple_of_the_wrong_length_is_named():
    db = upkeep.connect()
    db.execute(CREATE)
    with pytest.raises(SchemaError, match="parameter tuple 1: the statement has 2") as info:
        db.executemany("INSERT INTO t (s, i) VALUES (?, ?)", [("a", 1), ("b",)])
    assert info.value.index == 1
    assert db.execute("SELECT count(*) FROM t").fetchall() == [(0,)]


def test_a_function_in_values_is_evaluated_per_row():
    """``random()`` is not a literal: each tuple's row gets its own value."""
    db = upkeep.connect()
    db.execute(CREATE)
    db.executemany("INSERT INTO t (i, f) VALUES (?, random())", [(k,) for k in range(20)])
    assert db.execute("SELECT count(DISTINCT f) FROM t").fetchall() == [(20,)]


def test_a_decimal_nan_or_infinity_parameter_binds_as_duckdb_binds_it():
    """DuckDB binds ``Decimal('NaN')`` as a floating-point NaN (a DOUBLE column takes it,
    as ``db.insert`` does); a DECIMAL column cannot hold it."""
    import duckdb

    db, con = upkeep.connect(), duckdb.connect()
    for c in (db, con):
        c.execute(CREATE)
    values = [Decimal("NaN"), Decimal("Infinity"), Decimal("-Infinity")]
    for v in values:
        db.execute("INSERT INTO t (i, f) VALUES (1, ?)", [v])
        con.execute("INSERT INTO t (i, f) VALUES (1, ?)", [v])
    assert repr(sorted(db.execute("SELECT f FROM t").fetchall())) == repr(
        sorted(con.execute("SELECT f FROM t").fetchall()))
    with pytest.raises(SchemaError):
        db.execute("INSERT INTO t (m) VALUES (?)", [Decimal("NaN")])
    with pytest.raises(SchemaError):
        db.execute("INSERT INTO t (f) VALUES (?)", [Decimal("sNaN")])


def test_numpy_scalars_bind_as_their_python_values_on_every_path():
    """A pandas frame's rows hold numpy scalars: db.insert takes them, and so do ``?``
    parameters, through execute and executemany alike (execute refused np.int64, and a
    np.float64 bound as the text 'np.float64(8.0)')."""
    import numpy as np

    db = upkeep.connect()
    db.execute("CREATE TABLE n (k BIGINT, f DOUBLE, s VARCHAR)")
    db.execute("INSERT INTO n (k, f, s) VALUES (?, ?, 'a')", (np.int64(5), np.float64(8.0)))
    db.executemany("INSERT INTO n (k, f, s) VALUES (?, ?, 'b')",
                   [(np.int32(6), np.float32(0.5))])
    db.insert("n", [(np.int64(7), np.float64(1.5), "c")])
    assert sorted(db.execute("SELECT * FROM n").fetchall()) == [
        (5, 8.0, "a"), (6, 0.5, "b"), (7, 1.5, "c")]
    assert db.execute("SELECT s FROM n WHERE k = ?", [np.int64(6)]).fetchall() == [("b",)]


@pytest.mark.parametrize("sql, params", [
    ("INSERT INTO t (i, d) SELECT ?, ?", [(1, "2020-01-01"), (2, "2020-01-02"), (3, "x")]),
    ("UPDATE t SET d = ? WHERE i = ?", [("2021-01-01", 7), ("2021-01-02", 8), ("x", 9)]),
    ("INSERT INTO t (i, d) SELECT ?, ?", [(1, "2020-01-01"), (2, "2020-01-02"), (3,)]),
])
def test_a_statement_run_per_tuple_names_the_tuple_at_fault(sql, params):
    """A statement executemany runs once per tuple (not an INSERT .. VALUES) named the
    row of that one statement, row 0 whichever tuple failed; nothing is applied."""
    db = upkeep.connect()
    db.execute(CREATE)
    db.insert("t", [(i, "a", None, None, None, None) for i in (7, 8, 9)])
    before = sorted(db.execute("SELECT * FROM t").fetchall())
    with pytest.raises(Error, match="executemany parameter tuple 2: ") as caught:
        db.executemany(sql, params)
    assert getattr(caught.value, "index", 2) == 2
    assert sorted(db.execute("SELECT * FROM t").fetchall()) == before
