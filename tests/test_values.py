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
