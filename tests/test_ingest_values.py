"""Values on their way into tables, as DuckDB reads them or refused with an upkeep error:
DATE text, dates with a time zone, Arrow values Python cannot hold, subclasses of str and
int, whole-number decimals into INTEGER columns."""

from __future__ import annotations

import datetime as dt
import enum
from decimal import Decimal

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import upkeep
from upkeep.errors import EvaluationError, SchemaError

DATE_TEXTS = ["2020-01-31", "2020-1-5", " 2020-01-31 ", "2020/1/31", "2020-01-31 10:00",
              "2020-01-31T10:00:00", "2020-01-31 10:00:00.123456", "2020-01-31 10:00Z",
              "2020-01-31 10:00:00+05:30", "2020-01-31 10:00 UTC", "epoch", "99-01-01",
              # DuckDB refuses these (Python's fromisoformat read the first three)
              "2020-W01-1", "2020W011", "20200131", "2020-01/31", "2020.01.31",
              "2020-01-31 x", "2020-01-31 10", "2020-01-31 25:00", "2020-02-30", "+2020-01-31",
              # digits other than 0-9, which Python's int() reads
              "\u0662\u0660\u0662\u0664-01-02", "2024-\uff10\uff11-02"]


@pytest.mark.parametrize("text", DATE_TEXTS)
def test_date_text_is_read_as_duckdb_reads_it(text):
    try:
        with duckdb.connect() as oracle:
            expected = oracle.execute("SELECT ?::DATE", [text]).fetchone()[0]
    except duckdb.Error:
        expected = None
    db = upkeep.connect()
    db.execute("CREATE TABLE t (d DATE, s VARCHAR)")
    if expected is None:
        with pytest.raises(SchemaError, match="expected DATE"):
            db.insert("t", [(text, text)])
        with pytest.raises(SchemaError):
            db.execute("INSERT INTO t VALUES (?, 'x')", [text])
        assert db.execute("SELECT * FROM t").fetchall() == []
        return
    db.insert("t", [(text, text)])
    db.execute("INSERT INTO t VALUES (?, ?)", [text, text])
    view = db.create_view("v", "SELECT CAST(s AS DATE) AS c, d FROM t")
    assert view.rows() == [(expected, expected)] * 2


@pytest.mark.parametrize(("text", "why"), [
    ("infinity", "infinite"), ("-infinity", "infinite"), ("inf", "infinite"),
    ("-INF", "infinite"), (" -inf", "infinite"), ("-2024-01-01", "before Christ"),
    ("2024-01-01 (BC)", "before Christ")])
def test_an_infinite_or_bc_date_is_refused_not_held_as_9999_12_31(text, why):
    """DuckDB reads ``'inf'`` as infinity and ``'-2024-01-01'`` as a date BC, which have no
    Python date: refused, and a TRY_CAST of them raises (it was NULL, where DuckDB has a
    value), as it does for ``'infinity'``."""
    db = upkeep.connect()
    db.execute("CREATE TABLE t (d DATE, s VARCHAR)")
    with pytest.raises((EvaluationError, SchemaError)):  # folded by DuckDB
        db.execute(f"INSERT INTO t VALUES ('{text}'::DATE, 'x')")
    with pytest.raises(SchemaError, match=why):
        db.insert("t", [(text, "x")])
    db.insert("t", [(None, text)])
    with pytest.raises(EvaluationError, match=why):
        db.create_view("v", "SELECT TRY_CAST(s AS DATE) AS d FROM t")
    assert db.execute("SELECT * FROM t").fetchall() == [(None, text)]
    assert db.views() == []


def test_a_datetime_with_a_time_zone_is_refused_on_every_path():
    """It kept the day of its own zone where DuckDB takes the instant's day in its
    session's zone; ``execute`` already refused it."""
    zoned = dt.datetime(2020, 1, 1, 1, 0, tzinfo=dt.timezone(dt.timedelta(hours=5)))
    local = pd.to_datetime(["2020-01-01 01:00"]).tz_localize("Asia/Karachi")
    db = upkeep.connect()
    db.execute("CREATE TABLE t (s VARCHAR, d DATE)")
    attempts = [
        lambda: db.insert("t", [("insert", zoned)]),
        lambda: db.executemany("INSERT INTO t VALUES (?, ?)", [("many", zoned)]),
        lambda: db.execute("INSERT INTO t VALUES (?, ?)", ["one", zoned]),
        lambda: db.insert("t", pd.DataFrame({"s": ["pandas"], "d": local})),
        lambda: db.insert("t", pa.table({"s": ["arrow"], "d": pa.array(
            [dt.datetime(2020, 1, 1, 22)], pa.timestamp("us", tz="Asia/Karachi"))})),
    ]
    for attempt in attempts:
        with pytest.raises(SchemaError, match="time zone"):
            attempt()
    db.insert("t", pd.DataFrame({"s": ["naive"], "d": pd.to_datetime(["2020-01-01 23:00"])}))
    assert db.execute("SELECT * FROM t").fetchall() == [("naive", dt.date(2020, 1, 1))]


def test_arrow_values_python_cannot_hold_are_schema_errors_naming_the_column():
    db = upkeep.connect()
    db.execute("CREATE TABLE t (k INTEGER, d DATE, s VARCHAR)")
    db.create_view("n", "SELECT COUNT(*) AS n FROM t")
    far = pa.array([3_000_000], pa.int32()).view(pa.date32())  # past year 9999
    bad = pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(np.array([0, 3], np.int32)
                                                                    .tobytes()),
                                                 pa.py_buffer(b"a\xff\xfe")])
    ok_d, ok_s = pa.array([dt.date(2020, 1, 1)]), pa.array(["x"])
    for d, s, column in ((far, ok_s, "d"), (ok_d, bad, "s")):
        with pytest.raises(SchemaError, match=f"Arrow column {column} "):
            db.insert("t", pa.table({"k": [1], "d": d, "s": s}))
    assert db.execute("SELECT * FROM t").fetchall() == [] and db.view("n").rows() == [(0,)]


class Colour(enum.IntEnum):
    RED = 1


class Size(enum.StrEnum):
    BIG = "big"


def test_subclasses_of_int_and_str_are_stored_as_their_values(tmp_path):
    """They were kept as the objects given (a view handed them back), and a durable
    database refused them with an error naming no row."""
    for db in (upkeep.connect(), upkeep.connect(tmp_path / "db")):
        db.execute("CREATE TABLE t (i INTEGER, s VARCHAR)")
        db.insert("t", [(Colour.RED, np.str_("b")), (2, Size.BIG)])
        rows = db.execute("SELECT * FROM t").fetchall()
        assert sorted(rows) == [(1, "b"), (2, "big")]
        assert all(type(i) is int and type(s) is str for i, s in rows)
        db.close()


def test_whole_number_decimals_go_into_integer_columns_and_fractions_do_not():
    db, duck = upkeep.connect(), duckdb.connect()
    for con in (db, duck):
        con.execute("CREATE TABLE t (i INTEGER)")
        con.execute("INSERT INTO t VALUES (1.0), (2.0::DECIMAL(3, 1))")
    db.insert("t", [(Decimal("3"),), (3.0,)])
    duck.execute("INSERT INTO t VALUES (3), (3)")
    assert sorted(db.execute("SELECT * FROM t").fetchall()) == sorted(
        duck.execute("SELECT * FROM t").fetchall())
    for value in (Decimal("1.5"), 1.5, Decimal("NaN")):
        with pytest.raises(SchemaError, match="expected INTEGER"):
            db.insert("t", [(value,)])


@pytest.mark.parametrize("value", ["'infinity'::DATE", "CAST('-infinity' AS DATE)",
                                   "TRY_CAST('-infinity' AS TIMESTAMP)",
                                   "'infinity'::TIMESTAMP + INTERVAL 1 DAY"])
def test_an_infinite_date_duckdb_computes_is_refused_not_held_as_9999_12_31(value):
    """A query DuckDB evaluates (an INSERT .. SELECT, an ad hoc SELECT) may compute an
    infinite date, which DuckDB's Python client hands over as 9999-12-31 or 0001-01-01:
    refused as an infinite date is from text (it was stored as that made-up date)."""
    db = upkeep.connect()
    db.execute("CREATE TABLE t (k INTEGER, d DATE)")
    with pytest.raises(EvaluationError, match="infinite"):
        db.execute(f"INSERT INTO t SELECT 1, {value}")
    with pytest.raises(EvaluationError, match="infinite"):
        db.execute(f"SELECT {value}")
    assert db.execute("SELECT * FROM t").fetchall() == []
    db.execute("INSERT INTO t SELECT 2, '9999-12-31'::DATE")
    assert db.execute("SELECT k, d, '0001-01-01'::TIMESTAMP FROM t").fetchall() == [
        (2, dt.date(9999, 12, 31), dt.datetime(1, 1, 1))]


def test_negative_zero_in_arrow_of_the_tables_own_types_reaches_views_as_zero():
    """-0.0 is stored as 0.0; Arrow columns of the table's own types skip the per-row
    check, which makes it so: a view was given -0.0 from Arrow and 0.0 from a tuple."""
    db = upkeep.connect()
    db.execute("CREATE TABLE t (k INTEGER, v DOUBLE)")
    sql = "SELECT k, CAST(v AS VARCHAR) AS s, MIN(v) AS m FROM t GROUP BY k, v"
    db.create_view("w", sql)
    db.insert("t", pa.table({"k": pa.array([1, 3], pa.int32()), "v": pa.array([-0.0, 2.5])}))
    db.insert("t", [(2, -0.0)])
    got = sorted(db.view("w").rows())
    assert got == [(1, "0.0", 0.0), (2, "0.0", 0.0), (3, "2.5", 2.5)]
    assert got == sorted(db.execute(sql).fetchall())


def test_nan_in_a_nullable_pandas_float_column_is_null_as_duckdb_reads_it():
    """On both of a DataFrame's paths: through Arrow, and row by row (a datetime64
    column keeps it off Arrow)."""
    a = pd.array([0.0, 1.0, None], dtype="Float64")
    days = pd.to_datetime(["2020-01-01"] * 3)
    frame = pd.DataFrame({"k": [1, 2, 3], "v": a / a, "d": days})  # 0/0: NaN, not NA
    db, con = upkeep.connect(), duckdb.connect()
    for target in (db, con):
        target.execute("CREATE TABLE t (k INTEGER, v DOUBLE)")
        target.execute("CREATE TABLE u (k INTEGER, v DOUBLE, d DATE)")
    db.insert("t", frame[["k", "v"]])
    db.insert("u", frame)
    con.execute("INSERT INTO t SELECT k, v FROM frame")
    con.execute("INSERT INTO u SELECT * FROM frame")
    for table in ("t", "u"):
        expected = con.execute(f"SELECT k, v FROM {table} ORDER BY k").fetchall()
        assert expected == [(1, None), (2, 1.0), (3, None)]
        assert db.execute(f"SELECT k, v FROM {table} ORDER BY k").fetchall() == expected


@pytest.mark.parametrize("day", ["10000-01-01", "-0005-01-01"])
def test_a_pandas_datetime_outside_years_1_to_9999_is_a_schema_error(day):
    db = upkeep.connect()
    db.execute("CREATE TABLE t (k INTEGER, d DATE)")
    db.create_view("n", "SELECT COUNT(*) AS n FROM t")
    frame = pd.DataFrame({"k": [1, 2], "d": np.array(["2020-01-01", day], "datetime64[s]")})
    with pytest.raises(SchemaError, match=r"row 1.*column d|column d.*row 1"):
        db.insert("t", frame)
    assert db.execute("SELECT * FROM t").fetchall() == [] and db.view("n").rows() == [(0,)]


def test_arrow_readers_and_datasets_load_and_other_arrow_or_pandas_objects_are_refused():
    import pyarrow.dataset as ds

    db = upkeep.connect()
    db.execute("CREATE TABLE t (g INTEGER, v INTEGER)")
    table = pa.table({"g": pa.array([1, 2], pa.int32()), "v": pa.array([10, 20], pa.int32())})
    db.insert("t", pa.RecordBatchReader.from_batches(table.schema, table.to_batches()))
    db.insert("t", ds.dataset(table))
    assert sorted(db.execute("SELECT * FROM t").fetchall()) == [(1, 10), (1, 10), (2, 20),
                                                               (2, 20)]
    db.delete("t", pa.RecordBatchReader.from_batches(table.schema, table.to_batches()))
    assert sorted(db.execute("SELECT * FROM t").fetchall()) == [(1, 10), (2, 20)]
    for wrong in (pa.array([1, 2]), pa.chunked_array([[1]]), pa.scalar(1), table.schema,
                  pd.Series({"g": 1, "v": 2}), pd.Index([1, 2])):
        with pytest.raises(SchemaError, match="rows for table t"):
            db.insert("t", wrong)
    assert sorted(db.execute("SELECT * FROM t").fetchall()) == [(1, 10), (2, 20)]
