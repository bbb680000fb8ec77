"""The value layer (:mod:`upkeep.codecs`): every SQL type round-trips exactly through each
format, and every public path that writes a format spells a value the same way."""

from __future__ import annotations

import datetime as dt
import json
import math
from decimal import Decimal

import duckdb
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import same_outcome_as_duckdb, view_follows_duckdb

import upkeep
from upkeep.codecs.arrow_values import from_arrow, to_arrow
from upkeep.codecs.json_values import dumps, from_json, row_object, to_json
from upkeep.codecs.spark_rows import decode_row, encode_row
from upkeep.codecs.sqlite_values import to_sqlite
from upkeep.io.sinks.jsonl import encode_row as jsonl_row
from upkeep.types import SqlType, coerce_value, type_from_name

TYPES = {
    "TINYINT": st.integers(-128, 127), "SMALLINT": st.integers(-2**15, 2**15 - 1),
    "INTEGER": st.integers(-2**31, 2**31 - 1), "BIGINT": st.integers(-2**63, 2**63 - 1),
    "HUGEINT": st.integers(-10**37, 10**37),
    "DECIMAL(18,4)": st.decimals(min_value=-10**13, max_value=10**13, places=4,
                                 allow_nan=False, allow_infinity=False),
    "DECIMAL(38,10)": st.decimals(min_value=-10**27, max_value=10**27, places=10,
                                  allow_nan=False, allow_infinity=False),
    "DOUBLE": st.floats(allow_nan=True, allow_infinity=True),
    "VARCHAR": st.text(),
    "BOOLEAN": st.booleans(),
    "DATE": st.dates(),
    "TIMESTAMP": st.datetimes(),
}


def typed(name: str) -> SqlType:
    return type_from_name(name)


def equal(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, float) and a == 0.0:
        return b == 0.0 and math.copysign(1, a) == math.copysign(1, b)
    return type(a) is type(b) and a == b and str(a) == str(b)


columns_and_rows = st.lists(st.sampled_from(sorted(TYPES)), min_size=1, max_size=4, unique=True
                            ).flatmap(lambda names: st.tuples(
                                st.just([(f"c_{i}", typed(n)) for i, n in enumerate(names)]),
                                st.lists(st.tuples(*[st.none() | TYPES[n] for n in names]),
                                         max_size=4)))


def normal(rows, columns):
    """Values as the engine holds them (coerce_value, e.g. a DECIMAL at its scale)."""
    return [tuple(None if v is None else coerce_value(v, t) for v, (_, t) in zip(r, columns, strict=True))
            for r in rows]


@settings(deadline=None)
@given(columns_and_rows)
def test_json_round_trip(data) -> None:
    columns, rows = data
    for row in normal(rows, columns):
        text = dumps([to_json(v) for v in row])  # valid JSON: NaN never written bare
        back = tuple(from_json(v, t) for v, (_, t) in zip(json.loads(text), columns, strict=True))
        assert all(equal(a, b) for a, b in zip(row, back, strict=True)), (row, back)
        decoded = decode_row(encode_row(row), [t for _, t in columns])
        assert all(equal(a, b) for a, b in zip(row, decoded, strict=True))


@settings(deadline=None, max_examples=40)
@given(columns_and_rows)
def test_arrow_and_parquet_round_trip(tmp_path_factory, data) -> None:
    columns, rows = data
    rows = normal(rows, columns)
    table = to_arrow(columns, rows)
    path = tmp_path_factory.mktemp("pq") / "t.parquet"
    pq.write_table(table, path)
    for back in (from_arrow(table, columns), from_arrow(pq.read_table(path), columns)):
        assert all(equal(a, b) for r, s in zip(rows, back, strict=True) for a, b in zip(r, s, strict=True)), (rows, back)


def test_one_spelling_per_format() -> None:
    """The JSON sink, the Spark rows and the change files spell a Decimal, a date and a
    NaN alike; SQLite keeps the exact digits; the Arrow cursor keeps the decimal type."""
    row = (Decimal("12345678901234567890.1234"), dt.date(2024, 2, 29), math.nan, None)
    names = ["d", "day", "x", "n"]
    sink = json.loads(jsonl_row(names, row))
    spark = json.loads(encode_row(row))
    assert sink == row_object(names, row)
    assert list(sink.values()) == [spark[f"c{i}"] for i in range(4)]
    assert sink["d"] == "12345678901234567890.1234" and sink["x"] == "NaN"
    assert to_sqlite(row[0]) == sink["d"] and to_sqlite(row[1]) == "2024-02-29"
    db = upkeep.connect()
    db.execute("CREATE TABLE t (d DECIMAL(38,4), day DATE, x DOUBLE, n INTEGER)")
    db.insert("t", [row])
    arrow = db.execute("SELECT * FROM t").arrow()
    assert str(arrow.schema.field("d").type) == "decimal128(38, 4)"
    assert arrow.column("d").to_pylist() == [row[0]]


NEGATIVES = ["-5", "-2147483648", "-2147483649", "-9223372036854775808", "-0", "-0.5",
             "-0.0", "-00.50", "-5.", "-1e3", "-0e0",
             "-1234567890123456789012345678901234567.8", "-0.00000000000000000000000000000000000001"]


def test_negative_numbers_are_valued_and_typed_as_duckdb_does_without_asking_it(monkeypatch):
    """A negated literal in a view or a statement is folded from the literal itself, to
    the value and type DuckDB gives it (a decimal's width counts every digit written; past
    38 digits it is a DOUBLE), and no constant opens a DuckDB connection of its
    own (one costs ~30 ms)."""
    con = duckdb.connect()
    expected = [(con.execute(f"SELECT {n}").fetchone()[0],
                 con.execute(f"SELECT typeof({n})").fetchone()[0]) for n in NEGATIVES]
    db = upkeep.connect()
    db.execute("CREATE TABLE t (k INTEGER)")
    db.execute("INSERT INTO t VALUES (1)")
    # what upkeep opens once (its parser check and constant folding connections)
    db.create_view("warm", "SELECT k FROM t WHERE k < ABS(-2) + 1", strategy="general")
    monkeypatch.setattr(duckdb, "connect", lambda *_, **__: pytest.fail("DuckDB connected"))
    select = ", ".join(f"{n} AS c{i}" for i, n in enumerate(NEGATIVES))
    db.create_view("v", f"SELECT {select} FROM t", strategy="general")
    (row,) = db.view("v").rows()
    types = [t for _, t in db.schema_of("v")]
    for n, value, typ, (want, want_type) in zip(NEGATIVES, row, types, expected, strict=True):
        assert equal(value, want), n
        assert typ.sql() == want_type, n
    db.execute("UPDATE t SET k = -7 WHERE k = -(-1)")  # a statement: the same fold
    assert db.execute("SELECT k FROM t").fetchall() == [(-7,)]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.decimals(min_value=-999, max_value=999, places=4, allow_nan=False),
                min_size=1, max_size=8))
def test_decimal_values_round_as_duckdb_casts_them(values) -> None:
    """Stored in a DECIMAL(10,2) (and a DECIMAL(10,0)), by a literal, a parameter or
    arithmetic in an UPDATE, values round ties away from zero as DuckDB does."""
    up, duck = upkeep.connect(), duckdb.connect()
    for con in (up, duck):
        con.execute("CREATE TABLE t (k INTEGER, a DECIMAL(10,2), d DECIMAL(10,0))")
        for k, v in enumerate(values):
            con.execute(f"INSERT INTO t VALUES ({k}, {v}, ?)", [v])
        con.execute("UPDATE t SET a = a / 8 WHERE k % 2 = 0")
    assert sorted(up.execute("SELECT * FROM t").fetchall()) == sorted(
        duck.execute("SELECT * FROM t").fetchall())


def test_upper_and_lower_map_every_character_as_duckdb_does() -> None:
    """UPPER / LOWER in views: one character for one, as DuckDB (Python's str.upper gives
    'SS' for 'ß'), checked on every character of the first three planes."""
    chars = "".join(chr(i) for i in range(0x30000) if not 0xD800 <= i <= 0xDFFF)
    words = [chars[i:i + 512] for i in range(0, len(chars), 512)] + ["Straße", "İstanbul"]
    db, duck = upkeep.connect(), duckdb.connect()
    for con in (db, duck):
        con.execute("CREATE TABLE w (k INTEGER, s VARCHAR)")
    db.insert("w", list(enumerate(words)))
    duck.executemany("INSERT INTO w VALUES (?, ?)", list(enumerate(words)))
    query = "SELECT k, upper(s) AS u, lower(s) AS l FROM w"
    db.execute(f"CREATE MATERIALIZED VIEW v AS {query}")
    assert sorted(db.execute("SELECT * FROM v").fetchall()) == sorted(
        duck.execute(query).fetchall())


def test_a_dataframe_holds_every_hugeint_exactly() -> None:
    """``df()``: HUGEINT columns as Python ints, also beyond Arrow's 38 digits (Arrow
    output refuses those; DuckDB's df() would give floats), in their place among the
    other columns."""
    db = upkeep.connect()
    db.execute("CREATE TABLE t (x INTEGER, h HUGEINT, s VARCHAR)")
    big = 2**127 - 1
    db.execute(f"INSERT INTO t VALUES (1, {big}, 'a'), (2, NULL, 'b'), (3, -{big}, NULL)")
    for sql in ("SELECT * FROM t ORDER BY x", "SELECT h, x, h AS g FROM t ORDER BY x",
                "SELECT h FROM t ORDER BY x"):
        frame = db.execute(sql).df()
        assert [tuple(r) for r in frame.itertuples(index=False)] == db.execute(sql).fetchall()
        assert list(frame.columns) == [d[0] for d in db.execute(sql).description]


def test_a_dataframe_types_columns_with_nulls_as_duckdb_does() -> None:
    """``df()``: an integer or BOOLEAN column holding a NULL is of pandas' nullable type,
    so a BIGINT beyond 2**53 stays exact and the frame loads back into its table."""
    ddl = ("CREATE TABLE t (i INTEGER, b BIGINT, s SMALLINT, t TINYINT, f BOOLEAN, "
           "d DOUBLE, v VARCHAR)")
    rows = "(1, 9007199254740993, 1, 1, true, 1.5, 'a'), (2, NULL, NULL, NULL, NULL, NULL, NULL)"
    db, duck = upkeep.connect(), duckdb.connect()
    for con in (db, duck):
        con.execute(ddl)
        con.execute(f"INSERT INTO t VALUES {rows}")
    for sql in ("SELECT * FROM t ORDER BY i", "SELECT * FROM t WHERE i = 1"):
        mine, theirs = db.execute(sql).df(), duck.execute(sql).df()
        assert [str(t) for t in mine.dtypes] == [str(t) for t in theirs.dtypes], sql
        assert mine.equals(theirs), sql
    db.execute(ddl.replace("TABLE t", "TABLE u"))
    db.insert("u", db.execute("SELECT * FROM t").df())
    assert sorted(db.execute("SELECT * FROM u").fetchall(), key=repr) == sorted(
        db.execute("SELECT * FROM t").fetchall(), key=repr)


def test_arrow_columns_become_python_values_once_per_distinct_value() -> None:
    """Dates, timestamps and decimals are made once per distinct value of a chunk (and
    shared); every type gives what ``to_pylist`` gives, nulls and chunks included."""
    import pyarrow as pa

    from upkeep.codecs.arrow_values import column_values

    days = [dt.date(2024, 1, 1), None, dt.date(2024, 1, 2), dt.date(2024, 1, 1)]
    columns = [
        pa.chunked_array([pa.array(days), pa.array(days[::-1]), pa.array([], pa.date32())]),
        pa.array([dt.datetime(2024, 1, 1, 5), None] * 3, pa.timestamp("us", tz="UTC")),
        pa.array([Decimal("1.50"), None, Decimal("-0.25")] * 2, pa.decimal128(9, 2)),
        pa.array([dt.time(1, 2), None], pa.time64("us")),
        pa.array(["a", None, "a"]),
        pa.array([None, None], pa.date32()),
    ]
    for column in columns:
        assert column_values(column) == column.to_pylist(), column.type
    values = column_values(columns[0])
    assert values[0] is values[3] and values[4] is values[7]  # one object per day


@settings(deadline=None, max_examples=60)
@given(columns_and_rows, st.integers(1, 3))
def test_an_arrow_load_equals_the_same_rows_as_tuples(data, chunks) -> None:
    """Rows given as an Arrow table of the columns' own types skip the per-row check
    (``rows.arrow_typed``): they must land exactly as the same rows given as tuples, with
    NaN made canonical (so a row holding one can be deleted again), duplicates counted."""
    import pyarrow as pa

    columns, rows = data
    rows = normal(rows, columns) * 2  # every row twice: a duplicate in each load
    table = to_arrow(columns, rows)
    if rows:  # several chunks, as a Parquet file or a concatenation gives
        step = max(1, len(rows) // chunks)
        table = pa.concat_tables([table.slice(i, step) for i in range(0, len(rows), step)])
    schema = ", ".join(f"{n} {t.sql()}" for n, t in columns)
    dbs = []
    for given_rows in (rows, table):
        db = upkeep.connect()
        db.execute(f"CREATE TABLE t ({schema})")
        with db.transaction():
            db.insert("t", given_rows)
        dbs.append(db)
    as_tuples, as_arrow = (sorted(map(repr, db.execute("SELECT * FROM t").fetchall()))
                           for db in dbs)
    assert as_arrow == as_tuples
    dbs[1].delete("t", rows)  # every row found by its tuple: equal keys, canonical NaN
    assert dbs[1].execute("SELECT count(*) FROM t").fetchall() == [(0,)]


def test_arrow_data_of_other_types_is_checked_row_by_row() -> None:
    """Arrow columns that are not the columns' own types go through the per-row check: a
    value that does not fit is named with its row."""
    import pyarrow as pa

    from upkeep.errors import SchemaError
    from upkeep.rows import arrow_typed

    db = upkeep.connect()
    db.execute("CREATE TABLE t (k INTEGER, x DOUBLE)")
    columns = db.schema_of("t")
    fits = pa.table({"k": pa.array([1, 2], pa.int32()), "x": [0.5, 0.0]})
    wide = pa.table({"k": pa.array([1, 2**40], pa.int64()), "x": [0.5, 1.0]})
    nan = pa.table({"k": pa.array([1], pa.int32()), "x": [math.nan]})
    negative_zero = pa.table({"k": pa.array([3], pa.int32()), "x": [-0.0]})
    assert arrow_typed(fits, "t", columns)
    assert not arrow_typed(wide, "t", columns) and not arrow_typed(nan, "t", columns)
    assert not arrow_typed(negative_zero, "t", columns)  # the check makes it 0.0
    assert not arrow_typed([(1, 0.5)], "t", columns)
    with pytest.raises(SchemaError, match="row 1"):
        db.insert("t", wide)
    assert db.execute("SELECT count(*) FROM t").fetchall() == [(0,)]
    db.insert("t", fits)
    db.insert("t", negative_zero)
    db.delete("t", [(2, 0.0), (3, 0.0)])  # -0.0 is stored as 0.0, as from a tuple
    assert db.execute("SELECT k, x FROM t").fetchall() == [(1, 0.5)]


def test_a_hugeint_column_reads_arrow_integers_and_refuses_fractions() -> None:
    """What upkeep's own Arrow results hold for a HUGEINT (``decimal128(38, 0)``) loads
    back as integers; a fraction or a date for it is refused with its row."""
    import pyarrow as pa

    from upkeep.errors import SchemaError

    db = upkeep.connect()
    db.execute("CREATE TABLE t (h HUGEINT)")
    db.insert("t", [(10**30,), (None,), (-7,)])
    out = db.execute("SELECT h FROM t").arrow()
    assert pa.types.is_decimal(out.schema.field("h").type)
    db.insert("t", out)
    assert sorted(db.execute("SELECT h FROM t WHERE h IS NOT NULL").fetchall()) == [
        (-7,), (-7,), (10**30,), (10**30,)]
    for bad in (pa.array([Decimal("1.50")], pa.decimal128(5, 2)),
                pa.array([dt.date(2024, 1, 1)], pa.date32())):
        with pytest.raises(SchemaError, match="row 0"):
            db.insert("t", pa.table({"h": bad}))
    assert db.execute("SELECT count(*) FROM t").fetchall() == [(6,)]



def test_queries_duckdb_evaluates_see_every_hugeint() -> None:
    """HUGEINT spans +-1.7e38, beyond Arrow's decimal128(38, 0): ad-hoc SELECTs and views
    DuckDB recomputes see such values whole, typed HUGEINT (checked against DuckDB holding
    the same rows in a HUGEINT column)."""
    big = [2**127 - 1, -2**127, 10**38, -(10**38) - 5, 3, None]
    db = upkeep.connect()
    db.execute("CREATE TABLE t (h HUGEINT, g INTEGER)")
    db.insert("t", [(h, i % 2) for i, h in enumerate(big)])
    duck = duckdb.connect()
    duck.execute("CREATE TABLE t (h HUGEINT, g INTEGER)")
    duck.executemany("INSERT INTO t VALUES (?, ?)", [(h, i % 2) for i, h in enumerate(big)])
    for sql in ("SELECT h, count(*) FROM t GROUP BY h", "SELECT max(h), min(h) FROM t",
                "SELECT g, max(h) FROM t GROUP BY g", "SELECT typeof(h) FROM t LIMIT 1",
                "SELECT h FROM t WHERE h > 10"):
        assert sorted(db.execute(sql).fetchall(), key=repr) == sorted(
            duck.execute(sql).fetchall(), key=repr), sql
    db.create_view("v", "SELECT g, max(h) AS m FROM t GROUP BY g", strategy="recompute")
    db.insert("t", [(-(2**126), 1)])
    duck.execute("INSERT INTO t VALUES (?, ?)", [-(2**126), 1])
    assert sorted(db.view("v").rows()) == sorted(
        duck.execute("SELECT g, max(h) FROM t GROUP BY g").fetchall())


def _contents_after_insert(columns, data):
    """The table's rows after inserting ``data`` (sorted reprs), or the error's type."""
    db = upkeep.connect()
    db.execute(f"CREATE TABLE t ({', '.join(f'{n} {t.sql()}' for n, t in columns)})")
    try:
        db.insert("t", data)
    except upkeep.Error as exc:
        return type(exc)
    return sorted(map(repr, db.execute("SELECT * FROM t").fetchall()))


@settings(deadline=None, max_examples=60)
@given(columns_and_rows)
def test_a_pandas_load_through_arrow_equals_the_row_by_row_path(data) -> None:
    """A DataFrame whose columns Arrow reads as pandas does goes through Arrow
    (``rows.as_arrow``); it must land exactly as the row-by-row path lands it, or fail
    alike."""
    import pandas as pd

    import upkeep.local.connection as local
    import upkeep.rows as rows_module

    columns, rows = data
    frame = pd.DataFrame(normal(rows, columns), columns=[n for n, _ in columns])
    through_arrow = _contents_after_insert(columns, frame)
    with pytest.MonkeyPatch.context() as patch:
        for module in (local, rows_module):
            patch.setattr(module, "as_arrow", lambda rows, _columns, _table="": rows)
        row_by_row = _contents_after_insert(columns, frame)
    assert through_arrow == row_by_row


STRATEGIES = [None, "dyn", "lftj", "general"]


def _view_or_error(ddl: str, rows: list[tuple], query: str, strategy: str | None):
    """The view's rows after inserting ``rows`` (sorted), or the error's class family."""
    db = upkeep.connect()
    db.execute(ddl)
    db.create_view("v", query, strategy=strategy)
    try:
        db.insert("e", rows)
    except upkeep.EvaluationError:
        return "error"
    return sorted(db.view("v").rows(), key=repr)


def _duckdb_or_error(ddl: str, rows: list[tuple], query: str):
    duck = duckdb.connect()
    duck.execute(ddl)
    duck.executemany(f"INSERT INTO e VALUES ({', '.join('?' * len(rows[0]))})", rows)
    try:
        return sorted(duck.execute(query).fetchall(), key=repr)
    except duckdb.Error:
        return "error"


def _views_equal_duckdb(ddl: str, rows: list[tuple], query: str,
                        strategies=STRATEGIES, spelled=lambda rows: rows) -> None:
    """DuckDB computes ``query`` over ``rows`` without an error, and a view of it holds the
    same rows under each of ``strategies`` (compared as ``spelled`` writes them)."""
    want = _duckdb_or_error(ddl, rows, query)
    assert want != "error"
    for strategy in strategies:
        assert spelled(_view_or_error(ddl, rows, query, strategy)) == spelled(want), strategy


@pytest.mark.parametrize("expression", [
    "TRIM(s)", "LTRIM(s)", "RTRIM(s)", "TRIM(s, 'a ')", "TRIM(BOTH 'a' FROM s)",
    "TRIM(LEADING 'a' FROM s)", "TRIM(TRAILING 'a' FROM s)", "LTRIM(s, 'a')",
    "CONCAT_WS('-', s, i)", "CONCAT_WS('-', s, NULL, i)", "CONCAT(s, i, b)", "s || b",
    "TRY_CAST(s AS INTEGER)", "TRY_CAST(i AS TINYINT)", "TRY_CAST(s AS DECIMAL(4,1))"])
def test_string_functions_and_try_cast_in_views_equal_duckdb(expression) -> None:
    """TRIM takes spaces only unless told which characters, from the ends it names;
    CONCAT_WS puts its separator between the non-NULL values; TRY_CAST is NULL where CAST
    fails (each was wrong or an error before)."""
    ddl = "CREATE TABLE e (s VARCHAR, i INTEGER, b BOOLEAN)"
    rows = [("\t x \n ", 1, True), ("aaxa", None, False), ("  y  ", 300, None),
            ("12", 7, True), ("a", 2, False), (None, 5, True), ("123456", -1, True)]
    query = f"SELECT {expression} AS r FROM e"
    want = _duckdb_or_error(ddl, rows, query)
    for strategy in STRATEGIES:
        assert _view_or_error(ddl, rows, query, strategy) == want, strategy


@pytest.mark.parametrize("expression", [
    "CAST(d + INTERVAL 36 HOUR AS DATE)", "CAST(d + INTERVAL 36 HOUR AS VARCHAR)",
    "CAST(d + INTERVAL 1 MICROSECOND AS VARCHAR)", "CAST(d + INTERVAL 500 MILLISECOND AS VARCHAR)",
    "CAST(d + INTERVAL 36 HOUR AS DATE) - DATE '2000-01-01'", "CAST(x AS VARCHAR)",
    "x || '|'", "CONCAT(x, d + INTERVAL 90 MINUTE)", "CAST(y AS VARCHAR)"])
def test_timestamps_and_decimals_become_text_and_dates_as_duckdb_casts_them(expression) -> None:
    """A TIMESTAMP cast to DATE is its day (it stayed a timestamp), to text it has a space
    and no trailing zeros (it had Python's ``T``); a DECIMAL is text in fixed point at its
    scale (``0E-10`` before)."""
    ddl = "CREATE TABLE e (d DATE, x DECIMAL(38,10), y DECIMAL(5,2))"
    rows = [(dt.date(2000, 1, 1), Decimal("0"), Decimal("-12.50")),
            (dt.date(1999, 12, 31), Decimal("0.0000000001"), Decimal("0")),
            (dt.date(2024, 2, 29), Decimal("-0.0000001"), Decimal("100"))]
    query = f"SELECT {expression} AS r FROM e"
    _views_equal_duckdb(ddl, rows, query)


@pytest.mark.parametrize("kind, least", [("INTEGER", -2**31), ("BIGINT", -2**63)])
@pytest.mark.parametrize("expression", ["ABS(b)", "b // -1", "b % -1", "-b", "b * -1"])
def test_integer_overflow_at_the_least_value_is_an_error_as_in_duckdb(kind, least,
                                                                       expression) -> None:
    ddl = f"CREATE TABLE e (b {kind})"
    query = f"SELECT {expression} AS r FROM e"
    assert _duckdb_or_error(ddl, [(least,)], query) == "error"
    for strategy in STRATEGIES:
        assert _view_or_error(ddl, [(least,)], query, strategy) == "error", strategy
        assert _view_or_error(ddl, [(least + 1,)], query, strategy) == _duckdb_or_error(
            ddl, [(least + 1,)], query)


@pytest.mark.parametrize("column, value", [
    ("DOUBLE", 12345.0), ("DOUBLE", 999.96), ("DOUBLE", 999.94), ("DOUBLE", math.nan),
    ("INTEGER", 12345), ("INTEGER", -999), ("DECIMAL(9,2)", Decimal("12345.67")),
    ("DECIMAL(9,2)", Decimal("-999.94"))])
def test_a_cast_to_decimal_checks_its_precision_as_duckdb_does(column, value) -> None:
    ddl = f"CREATE TABLE e (x {column})"
    query = "SELECT CAST(x AS DECIMAL(4,1)) AS r FROM e"
    want = _duckdb_or_error(ddl, [(value,)], query)
    for strategy in STRATEGIES:
        assert _view_or_error(ddl, [(value,)], query, strategy) == want, strategy


@pytest.mark.parametrize("spelling", ["DECIMAL(4)", "NUMERIC(10)", "DECIMAL(2)", "DECIMAL",
                                      "NUMERIC"])
def test_a_decimal_without_a_scale_is_typed_as_duckdb_types_it(spelling) -> None:
    """DECIMAL(p) has scale 0 and a bare DECIMAL is DECIMAL(18,3), in tables and casts."""
    duck = duckdb.connect()
    duck.execute(f"CREATE TABLE d (x {spelling})")
    duck.execute("INSERT INTO d VALUES (12)")
    db = upkeep.connect()
    db.execute(f"CREATE TABLE d (x {spelling})")
    db.execute("INSERT INTO d VALUES (12)")
    assert str(db.schema_of("d")[0][1]) == duck.execute("SELECT * FROM d").description[0][1]
    assert db.execute("SELECT * FROM d").fetchall() == duck.execute("SELECT * FROM d").fetchall()
    query = f"SELECT CAST(x AS {spelling}) AS c FROM d"
    db.create_view("v", query)
    assert db.view("v").rows() == duck.execute(query).fetchall()


@pytest.mark.parametrize("left, right, values, other", [
    ("INTEGER", "DECIMAL(6,2)", ["1", "2", "2.50"], "s"),
    ("DECIMAL(5,1)", "DECIMAL(6,2)", ["1.0", "2.5", "2.50"], "s"),
    ("INTEGER", "BIGINT", ["1", "2", "3"], "s"),
    # TIMESTAMPs at midnight (d even) and at ten (d odd) of the DATEs
    ("DATE", "DATE", ["DATE '2020-01-02'", "DATE '2020-01-03'", "DATE '2020-01-02'"],
     "(SELECT CAST(g AS TIMESTAMP) + d % 2 * INTERVAL 10 HOUR AS g, d FROM s)"),
])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_join_of_columns_of_two_types_keeps_each_sides_value(left, right, values, other,
                                                                strategy) -> None:
    """An equality between columns of two types joins as DuckDB's ``=`` compares them, and
    each side keeps its own value: the two columns were made one value (an INTEGER read
    ``2.00`` from the DECIMAL it joined), and a DATE never met a TIMESTAMP at midnight.
    Such an equality is no join key: a forced strategy that needs one refuses the view."""
    ddl = [f"CREATE TABLE r (a {left}, c INTEGER)", f"CREATE TABLE s (g {right}, d INTEGER)"]
    queries = [f"SELECT r.a, s.g, c, d FROM r JOIN {other} s ON r.a = s.g",
               f"SELECT s.g, r.a, CAST(r.a AS VARCHAR) AS t FROM {other} s JOIN r ON r.a = s.g",
               f"SELECT r.a, s.g FROM r LEFT JOIN {other} s ON r.a = s.g",
               f"SELECT c FROM r WHERE a IN (SELECT g FROM {other} s)",
               f"SELECT c FROM r WHERE NOT EXISTS (SELECT 1 FROM {other} s WHERE s.g = r.a)"]
    duck, db = duckdb.connect(), upkeep.connect()
    for con in (duck, db):
        for statement in ddl:
            con.execute(statement)
    views = []
    for i, query in enumerate(queries):
        try:
            db.create_view(f"v{i}", query, strategy=strategy)
            views.append((f"v{i}", query))
        except upkeep.StrategyError:
            assert strategy is not None
    assert strategy is not None or len(views) == len(queries)
    batches = [[f"INSERT INTO r VALUES ({v}, {i})" for i, v in enumerate(values)],
               [f"INSERT INTO s VALUES ({v}, {i})" for i, v in enumerate(values)],
               ["DELETE FROM r WHERE c = 1", f"INSERT INTO s VALUES ({values[0]}, 8)"]]
    for batch in batches:
        for con in (duck, db):
            for statement in batch:
                con.execute(statement)
        for name, query in views:
            assert sorted(map(repr, db.view(name).rows())) == sorted(
                map(repr, duck.execute(query).fetchall())), (name, query)


def test_decimals_of_one_scale_join_by_key_whatever_their_width() -> None:
    """A LEFT JOIN's padded side and a SUM are DECIMAL(38, s): joined to a DECIMAL(10, s)
    column they are still keyed (they became a residual predicate, so not free-connex)."""
    db = upkeep.connect()
    db.execute("CREATE TABLE a (x DECIMAL(10,2), p INTEGER)")
    db.execute("CREATE TABLE b (y DECIMAL(10,2), q INTEGER)")
    db.create_view("s", "SELECT p, SUM(x) AS total FROM a GROUP BY p")
    for name, sql in [("l", "SELECT a.p, b.q FROM a LEFT JOIN b ON a.x = b.y"),
                      ("j", "SELECT s.p, b.q, s.total FROM s JOIN b ON s.total = b.y")]:
        db.create_view(name, sql, strategy="dyn")
        assert "free-connex" in db.explain(name), name


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_decimal_38_arithmetic_and_sums_keep_every_digit(strategy) -> None:
    """DECIMAL(38, s) values have more digits than Python's default decimal context (28):
    sums, AVG and arithmetic are exact as in DuckDB, also after the big value is deleted,
    and a result beyond 38 digits is an overflow."""
    ddl = "CREATE TABLE r (g INTEGER, d DECIMAL(38,2))"
    queries = ["SELECT g, SUM(d) AS s, AVG(d) AS a FROM r GROUP BY g",
               "SELECT SUM(d) AS s, COUNT(*) AS n FROM r",
               "SELECT d + 0.01 AS e, d - 1 AS f, -d AS n, ABS(d) AS a, ROUND(d, 1) AS r "
               "FROM r"]
    steps = ["INSERT INTO r VALUES (1, 100000000000000000000000000000000000), (1, 0.01), "
             "(2, -123456789012345678901234567890123.45)",
             "DELETE FROM r WHERE d = 100000000000000000000000000000000000",
             "UPDATE r SET d = d * 2 WHERE g = 2"]
    db, duck = upkeep.connect(), duckdb.connect()
    for con in (db, duck):
        con.execute(ddl)
    for i, query in enumerate(queries):
        db.create_view(f"v{i}", query, strategy=strategy)
    for step in steps:
        db.execute(step)
        duck.execute(step)
        for i, query in enumerate(queries):
            assert sorted(db.view(f"v{i}").rows(), key=repr) == sorted(
                duck.execute(query).fetchall(), key=repr), (step, query)
    big = "9" * 36 + ".99"  # DECIMAL(38,2) holds 36 digits before the point
    with pytest.raises(upkeep.EvaluationError, match="overflow"):
        db.execute(f"INSERT INTO r VALUES (3, {big}), (3, {big})")  # SUM beyond 38 digits
    with pytest.raises(duckdb.Error, match="[Oo]verflow|[Oo]ut of [Rr]ange"):
        duck.execute(f"SELECT SUM(x) FROM (VALUES ({big}::DECIMAL(38,2)), "
                     f"({big}::DECIMAL(38,2))) t(x)")


@pytest.mark.parametrize("column, value", [
    ("DECIMAL(38,38)", 0.285), ("DECIMAL(38,10)", 1.2345678901234567e20),
    ("DECIMAL(38,38)", 1.0), ("DECIMAL(38,38)", -0.5), ("DECIMAL(4,2)", -0.001)])
def test_a_double_becomes_a_wide_decimal_with_all_of_duckdbs_digits(column, value) -> None:
    """Written to a DECIMAL column and cast in a view, a DOUBLE keeps all 38 digits (the
    default decimal context kept 28) and is refused outside the type's range (1.0 in
    DECIMAL(38,38) was stored as 0.99999999999999997748...)."""
    ddl = f"CREATE TABLE e (x DOUBLE, d {column})"
    duck = duckdb.connect()
    duck.execute(ddl)
    try:
        duck.execute("INSERT INTO e VALUES (?, ?)", [value, value])
        want: object = duck.execute("SELECT d FROM e").fetchall()
    except duckdb.Error:
        want = "error"
    db = upkeep.connect()
    db.execute(ddl)
    try:
        db.insert("e", [(value, value)])
        got: object = db.execute("SELECT d FROM e").fetchall()
    except upkeep.Error:
        got = "error"
    assert got == want
    query = f"SELECT CAST(x AS {column}) AS c FROM e"
    want = _duckdb_or_error(ddl, [(value, None)], query)
    for strategy in STRATEGIES:
        assert _view_or_error(ddl, [(value, None)], query, strategy) == want, strategy


def test_a_decimal_zero_has_no_sign_anywhere() -> None:
    """-0.0, Decimal('-0') and Decimal('-0.00') are stored, maintained and sent as 0.00,
    and arithmetic that gives a DECIMAL zero gives it unsigned, as DuckDB does."""
    db = upkeep.connect()
    db.execute("CREATE TABLE t (k INTEGER, v DECIMAL(4,2))")
    db.execute("CREATE MATERIALIZED VIEW plain AS SELECT k, v FROM t")
    db.execute("CREATE MATERIALIZED VIEW computed AS SELECT k, v * -1 AS a, "
               "ROUND(v - 0.001, 2) AS b FROM t")
    sent = []
    db.view("plain").subscribe(sent.extend)
    db.insert("t", [(1, -0.0), (2, Decimal("-0"))])
    db.execute("INSERT INTO t VALUES (3, ?)", [Decimal("-0.00")])
    values = [v for _, v in db.view("plain").rows()] + [v for (_, v), _ in sent]
    values += [v for _, a, b in db.view("computed").rows() for v in (a, b)]
    assert len(values) == 12
    assert all(v == 0 and not v.is_signed() and str(v) == "0.00" for v in values), values


@pytest.mark.parametrize("column, value", [("DOUBLE", True), ("DOUBLE", False),
                                           ("DECIMAL(4,2)", "7"), ("DECIMAL(4,2)", True)])
def test_a_value_of_another_type_is_refused_by_every_write(column, value) -> None:
    """A BOOLEAN is no DOUBLE (it was stored as 1.0) and text no DECIMAL ('7' was parsed),
    as INTEGER columns already refused them: docs/sql.md, "'7' is not a number"."""
    db = upkeep.connect()
    db.execute(f"CREATE TABLE t (k INTEGER, x {column})")
    db.insert("t", [(1, None)])
    for write in (lambda: db.insert("t", [(2, value)]),
                  lambda: db.execute("INSERT INTO t VALUES (2, ?)", [value]),
                  lambda: db.execute("UPDATE t SET x = ? WHERE k = 1", [value])):
        with pytest.raises(upkeep.SchemaError, match="expected"):
            write()
    assert db.execute("SELECT * FROM t").fetchall() == [(1, None)]


@pytest.mark.parametrize("column, value", [
    ("INTEGER", "'1'"), ("INTEGER", "2.5"), ("INTEGER", "3.5"), ("INTEGER", "' 7 '"),
    ("INTEGER", "TRUE"), ("INTEGER", "'1e3'"), ("INTEGER", "2.5::DOUBLE"),
    ("BIGINT", "'0x10'"), ("DECIMAL(6,2)", "'0.505'"), ("DECIMAL(6,2)", "-2.345"),
    ("DOUBLE", "'1.5'"), ("DOUBLE", "'nan'"), ("DOUBLE", "TRUE"), ("BOOLEAN", "'t'"),
    ("BOOLEAN", "1"), ("VARCHAR", "2.5"), ("VARCHAR", "TRUE"), ("VARCHAR", "DATE '2020-01-31'"),
    ("VARCHAR", "1.50"), ("DATE", "'2020-1-31'"), ("INTEGER", "'x'"), ("INTEGER", "'1.5x'"),
    ("DECIMAL(3,2)", "'12.5'"), ("BOOLEAN", "'maybe'"), ("INTEGER", "DATE '2024-01-02'"),
    ("DOUBLE", "DATE '2024-01-02'"), ("BOOLEAN", "DATE '2024-01-02'"),
    ("DECIMAL(5,2)", "TRUE"), ("DECIMAL(5,2)", "FALSE"),
    ("VARCHAR", "0.123456789012345678901234567890123456789"),
    ("HUGEINT", "99999999999999999999999999999.9999999999")])
def test_sql_values_are_cast_to_the_column_as_duckdb_casts_them(column, value) -> None:
    """A SQL literal or computed value in INSERT's VALUES, an INSERT's query and an UPDATE's
    SET takes the column's type as DuckDB's INSERT and UPDATE cast it (a bound parameter,
    a Python value, is checked as db.insert checks it: the test above)."""
    db, con = upkeep.connect(), duckdb.connect()
    for target in (db, con):
        target.execute(f"CREATE TABLE t (k INTEGER, x {column})")
        target.execute("INSERT INTO t VALUES (1, NULL)")
    for sql in (f"INSERT INTO t VALUES (2, {value})", f"INSERT INTO t SELECT 3, {value}",
                f"UPDATE t SET x = {value} WHERE k = 1"):
        same_outcome_as_duckdb(db, con, sql, upkeep.SchemaError, "column x|UPDATE of row")
    assert sorted(map(repr, db.execute("SELECT * FROM t").fetchall())) == sorted(
        map(repr, con.execute("SELECT * FROM t").fetchall()))


@pytest.mark.parametrize("expression", [
    "LEAST(d, 1.0)", "GREATEST(1.0, d)", "LEAST(1.0, d)", "GREATEST(d, 1.0)",
    "NULLIF(d, d)", "NULLIF(m, CAST(m AS DOUBLE))", "d IS NOT DISTINCT FROM d",
    "m IS NOT DISTINCT FROM CAST(m AS DOUBLE)", "i IS DISTINCT FROM NULL",
    "b = CAST(b AS DOUBLE)", "b < CAST(b AS DOUBLE)", "m IN (0.01::DOUBLE, 1.25::DOUBLE)",
    "b IN (9.223372036854776e18)", "b IN (CAST(b AS DOUBLE), 1)", "m // -1", "d // -1",
    "m % -1", "TRY_CAST(s AS BOOLEAN)", "CASE WHEN i > 100 THEN 1 // 0 ELSE 1 END",
    "COALESCE(s, CAST(CAST('x' AS INTEGER) AS VARCHAR))"])
def test_nan_mixed_numbers_and_unevaluated_constants_as_duckdb(expression) -> None:
    """GREATEST / LEAST put NaN above numbers whatever the argument order; NULLIF and IS
    [NOT] DISTINCT FROM compare as ``=`` does (NaN = NaN, a DECIMAL against a DOUBLE);
    a BIGINT meets a DOUBLE as a DOUBLE, in ``=`` and IN; ``// -1`` of a zero DECIMAL or
    DOUBLE is no overflow; '1' / 'yes' / 'n' are booleans; a constant DuckDB cannot
    compute fails only where a row evaluates it (each differed from DuckDB before)."""
    ddl = "CREATE TABLE e (d DOUBLE, m DECIMAL(10,2), b BIGINT, i INTEGER, s VARCHAR)"
    rows = [(0.0, Decimal("0.00"), 2**63 - 1, 0, "1"), (math.nan, Decimal("0.01"), 2**53 + 1, 1, "yes"),
            (2.5, Decimal("1.25"), -7, None, "n"), (None, None, None, 5, "on")]
    query = f"SELECT {expression} AS r FROM e"
    _views_equal_duckdb(ddl, rows, query, spelled=repr)  # NaN and -0.0 as DuckDB gives them


@pytest.mark.parametrize("expression", ["SUBSTRING(s, 9223372036854775807)",
                                        "SUBSTRING(s, 1, 4294967296)"])
def test_a_substring_beyond_duckdbs_range_is_an_error_as_there(expression) -> None:
    ddl = "CREATE TABLE e (s VARCHAR)"
    query = f"SELECT {expression} AS r FROM e"
    assert _duckdb_or_error(ddl, [("abc",)], query) == "error"
    for strategy in STRATEGIES:
        assert _view_or_error(ddl, [("abc",)], query, strategy) == "error", strategy


def test_an_error_on_the_right_of_a_null_is_still_an_error() -> None:
    """``NULL + 10 // i`` with ``i = 0`` is a division by zero in DuckDB, which evaluates
    both operands (a NULL on the left hid it)."""
    ddl = "CREATE TABLE e (n INTEGER, i INTEGER)"
    query = "SELECT n + 10 // i AS r FROM e"
    assert _duckdb_or_error(ddl, [(None, 0)], query) == "error"
    for strategy in STRATEGIES:
        assert _view_or_error(ddl, [(None, 0)], query, strategy) == "error", strategy
        assert _view_or_error(ddl, [(None, 2)], query, strategy) == [(None,)]


@pytest.mark.parametrize("expression", [
    "COALESCE(d, d + INTERVAL 1 HOUR)", "COALESCE(d + INTERVAL 1 HOUR, d)",
    "GREATEST(d, d + INTERVAL 1 HOUR)", "LEAST(d, TIMESTAMP '2020-02-01 00:00')",
    "CASE WHEN n = 1 THEN d ELSE d + INTERVAL 2 HOUR END", "CAST(d AS TIMESTAMP)",
    "d FROM e UNION SELECT d + INTERVAL 1 HOUR",
    "d FROM e UNION ALL SELECT d + INTERVAL 0 HOUR",
    "d + INTERVAL 0 HOUR FROM e EXCEPT SELECT d FROM e WHERE n = 1 UNION SELECT d",
    "d FROM e INTERSECT SELECT d + INTERVAL 0 HOUR"])
def test_a_date_among_timestamps_is_a_timestamp_at_midnight(expression) -> None:
    """CASE / COALESCE / GREATEST / LEAST and set operations over a DATE and a TIMESTAMP
    are TIMESTAMPs, the DATE at 00:00, as DuckDB casts it (refused as incompatible types
    before)."""
    ddl = "CREATE TABLE e (d DATE, n INTEGER)"
    rows = [(dt.date(2020, 1, 31), 1), (None, 2), (dt.date(2020, 2, 29), 3)]
    query = f"SELECT {expression} AS r FROM e"
    _views_equal_duckdb(ddl, rows, query, strategies=[None])  # TIMESTAMP views: recomputed


@pytest.mark.parametrize("expression", [
    "i > 100 AND b * 2 > 0", "i < 100 OR b * 2 > 0", "NOT (i > 100 AND b * 2 > 0)",
    "m BETWEEN 99999999.99000000000001 AND CAST(1e9 AS DOUBLE)",
    "ROUND(d)", "ROUND(4503599627370497.0 + d)", "1 / ROUND(d * 0.01, 1)", "ROUND(m, 5)",
    "ROUND(COALESCE(m, 1), -40)", "ROUND(i, -2000000)", "LOWER(s)", "s ILIKE 's'",
    "s ILIKE '%Σ'", "TRY_CAST('١٢' || i AS INTEGER)", "TRY_CAST('١.5' AS DOUBLE)",
    "TRY_CAST('0x1F' AS INTEGER)", "TRY_CAST('-0b101' AS BIGINT)"])
def test_connectives_rounding_case_and_text_numbers_as_duckdb(expression) -> None:
    """AND / OR stop at the part that decides them (an overflow right of a false AND was
    an error); BETWEEN of numbers compares in the type all three share; ROUND of a DOUBLE
    by its exact fraction keeping -0.0, of a DECIMAL never past its scale, of a far digit
    at once; LOWER('ΑΣ') is 'ασ'; ILIKE lowers both sides ('ſ' is no 's'); text is a number
    in ASCII digits only, and 0x / 0b integers are read (each differed before)."""
    ddl = "CREATE TABLE e (d DOUBLE, m DECIMAL(10,2), b BIGINT, i INTEGER, s VARCHAR)"
    rows = [(0.49999999999999994, Decimal("99999999.99"), 2**62, 1, "ΑΣ"),
            (-2.5, Decimal("-1.25"), 3, 200, "ſ"), (-0.4, Decimal("0.00"), None, None, None),
            (1.0, None, -7, 50, "s")]
    query = f"SELECT {expression} AS r FROM e"
    _views_equal_duckdb(ddl, rows, query, spelled=lambda rows: sorted(  # Decimal scales,
        repr(row).replace("-0.0,", "0.0,") for row in rows))  # types; -0.0 as stored


@pytest.mark.parametrize("query", [
    "SELECT i FROM t WHERE (d + INTERVAL 1 DAY) - (d + INTERVAL 1 HOUR) > INTERVAL 2 HOUR",
    "SELECT d + i * INTERVAL 1 DAY AS x FROM t",
    "SELECT i, INTERVAL 1 DAY * i + d AS x FROM t",
    "SELECT LENGTH(s) AS l, i FROM t WHERE l > 1",
    "SELECT i + 1 AS j FROM t WHERE j > 0 AND s IS NOT NULL",
    "SELECT i AS s FROM t WHERE s = 'ab'",  # a column takes precedence over an alias
    "SELECT LENGTH(s) AS l, COUNT(*) AS n FROM t WHERE l >= 1 GROUP BY l",
])
def test_forms_duckdb_reads_are_maintained_or_recomputed_not_refused(query) -> None:
    """TIMESTAMP - TIMESTAMP and an integer times an INTERVAL are left to DuckDB (they were
    refused as 'cannot apply'); a select alias named in WHERE is the aliased expression,
    as DuckDB reads it (it was an unknown column)."""
    view_follows_duckdb(
        ["CREATE TABLE t (i INTEGER, d DATE, s VARCHAR)",
         "INSERT INTO t VALUES (1, DATE '2020-01-31', 'ab'), (-3, DATE '2021-03-01', 'x')",
         f"CREATE VIEW v AS {query}"],
        ["INSERT INTO t VALUES (5, DATE '2020-02-29', 'xyz'), (0, NULL, NULL)",
         "DELETE FROM t WHERE i = 1", "UPDATE t SET s = 'ab' WHERE i = -3"])


FILTERED = ["CREATE TABLE f (k INTEGER, a INTEGER, b INTEGER)",
            "CREATE TABLE g (k INTEGER, b INTEGER)",
            "INSERT INTO f VALUES (1, NULL, 0), (2, 5, 1), (3, -1, 0)",
            "INSERT INTO g VALUES (1, 0), (2, 2), (3, 0)"]


@pytest.mark.parametrize("query", [
    "SELECT k FROM f WHERE a > 0 AND 10 % b = 0",
    "SELECT k FROM f WHERE (a > 0 AND 10 % b = 0) OR k = 5",
    "SELECT k, CASE WHEN a > 0 AND 10 % b = 0 THEN 'y' ELSE 'n' END AS c FROM f",
    "SELECT f.k, g.k AS j FROM f JOIN g ON f.k = g.k WHERE (f.a > 0 AND 10 % g.b = 0) OR f.k = 5",
    "SELECT f.k, g.k AS j FROM f JOIN g ON f.k < g.k WHERE (f.a > g.b AND 10 % f.b = 0) OR g.k = 9",
    "SELECT k, COUNT(*) AS n FROM f GROUP BY k HAVING MIN(a) > 0 AND 10 % MIN(b) = 0"])
def test_a_filter_goes_no_further_than_a_null_part_of_an_and(query):
    """DuckDB filters by an AND's parts in turn, dropping a row at its first part that is
    not TRUE: with ``a`` NULL it never computes ``10 % b``. upkeep went on past the NULL (as a
    value, ``NULL AND FALSE`` is FALSE) and refused the batch: division by zero."""
    view_follows_duckdb(FILTERED, [
        "INSERT INTO f VALUES (4, NULL, 0), (5, NULL, 0)",
        "UPDATE f SET k = k + 10 WHERE a > 0 AND 10 % b = 0",
        "DELETE FROM f WHERE (a > 0 AND 10 % b = 0) OR k = 5"], query=query)


def test_a_signed_hexadecimal_text_is_no_integer_as_in_duckdb():
    """DuckDB reads ``0x`` / ``0b`` text unsigned, with no space after it: ``'-0x10'`` was
    -16 here (and ``DELETE .. WHERE TRY_CAST(s AS INTEGER) < 0`` deleted it), NULL there."""
    texts = ["0x10", "-0x10", "+0x10", " 0x10", "0x10 ", "-0X80000000", "0b101", "-0b1"]
    rows = ", ".join(f"({i}, '{t}')" for i, t in enumerate(texts))
    view_follows_duckdb(
        ["CREATE TABLE x (k INTEGER, s VARCHAR)", f"INSERT INTO x VALUES {rows}"],
        ["DELETE FROM x WHERE TRY_CAST(s AS INTEGER) = 16 AND k > 0"],
        query="SELECT k, TRY_CAST(s AS INTEGER) AS i, TRY_CAST(s AS BIGINT) AS b FROM x")


def test_a_product_of_two_narrow_decimals_overflows_at_18_digits_as_in_duckdb():
    """DuckDB keeps ``DECIMAL(18,4) * DECIMAL(3,2)`` in 18 digits (``DECIMAL(18,6)``) and
    raises past them; upkeep held the 20-digit product. ``DECIMAL(10,9) * DECIMAL(10,9)``
    (a scale of 18) and a BIGINT operand keep 38 digits in both."""
    ddl = "CREATE TABLE p (e DECIMAL(18,4), n DECIMAL(10,9), b BIGINT)"
    query = "SELECT e * 0.25 AS x, n * n AS y, e * b AS z FROM p"
    db, con = upkeep.connect(), duckdb.connect()
    for target in (db, con):
        target.execute(ddl)
        target.execute("INSERT INTO p VALUES (1.5, 9.5, 10)")
    db.create_view("v", query)
    assert db.view("v").rows() == con.execute(query).fetchall()
    big = "INSERT INTO p VALUES (12345678901234.5678, 9.123456789, 4000000000000000000)"
    with pytest.raises(duckdb.Error, match="Overflow in multiplication"):
        con.execute(big)
        con.execute(query).fetchall()
    with pytest.raises(upkeep.EvaluationError, match="multiplication of DECIMAL.18,6"):
        db.execute(big)
    assert db.view("v").rows() == con.execute(query.replace("FROM p", "FROM p WHERE e < 2"
                                                            )).fetchall()


@pytest.mark.parametrize("text", ["-0.0000000001", "0.0000000000", "1.50", "-12345678.9",
                                  "0.0000001000"])
def test_a_decimal_is_spelled_in_json_as_duckdb_spells_it(text):
    """A small DECIMAL came out of the service's JSON and the jsonl sink as ``-1E-10``."""
    with duckdb.connect() as oracle:
        (value, spelled), = oracle.execute(
            f"SELECT CAST({text} AS DECIMAL(20,10)) AS d, d::VARCHAR").fetchall()
    assert to_json(value) == spelled
