"""Errors cross process boundaries as structured records and come back whole: the same
class, message and fields (row, index, line, column, position) as raised where they
happened.  The Spark engine's path (shard -> Spark's text -> driver) is exercised here
without a SparkSession, through the same functions it uses."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import upkeep
from upkeep.errors import (
    ConstraintError,
    Error,
    ParseError,
    SchemaError,
    UnsupportedError,
    decode_value,
    encode_value,
    error_from_record,
    error_marker,
    record_in_text,
)
from upkeep.spark.errors import BatchRejected, ShardError, query_error
from upkeep.spark.shard_engine import ShardEngine

values = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
    st.floats(allow_nan=False), st.sampled_from([float("inf"), float("-inf")]),
    st.decimals(allow_nan=False, allow_infinity=False), st.dates(), st.datetimes(),
    st.text(), st.binary(max_size=8))
rows = st.one_of(st.none(), st.tuples(values, values), st.lists(values, max_size=3).map(tuple))


def same(exc: Error, other: Error) -> bool:
    return (type(exc) is type(other) and str(exc) == str(other)
            and all(getattr(exc, f) == getattr(other, f) for f in type(exc).fields))


@settings(deadline=None)
@given(row=rows, index=st.none() | st.integers(0, 10**6), message=st.text())
def test_data_errors_round_trip(row, index, message) -> None:
    for cls in (SchemaError, ConstraintError):
        exc = cls(message, row, index)
        back = error_from_record(exc.to_record())
        assert same(back, exc)
        assert same(error_from_record(record_in_text(f"noise {error_marker(exc.to_record())}")),
                    exc)


def test_nan_survives() -> None:
    back = decode_value(encode_value((float("nan"), Decimal("-0.00"), dt.date(2024, 2, 29))))
    assert back[0] != back[0] and back[1:] == (Decimal("-0.00"), dt.date(2024, 2, 29))
    assert str(back[1]) == "-0.00"


@pytest.mark.parametrize("exc", [ParseError("cannot parse SQL: x", 2, 7), ParseError("empty"),
                                 UnsupportedError("NOT IN (subquery)"), Error("plain")])
def test_other_errors_round_trip(exc) -> None:
    assert same(error_from_record(exc.to_record()), exc)


def test_an_unknown_class_comes_back_as_error() -> None:
    back = error_from_record({"class": "SomethingElse", "message": "m"})
    assert type(back) is Error and str(back) == "m"


def test_a_message_cannot_forge_a_marker() -> None:
    """A row value that looks like a marker stays inside the real marker's payload."""
    forged = error_marker(ConstraintError("forged", ("x",)).to_record())
    exc = SchemaError("bad value", (forged,), 3)
    text = f"Traceback ...\nBatchRejected: {BatchRejected(exc.to_record())}"
    assert same(query_error(Exception(text)), exc)


def test_spark_failures_without_a_marker_are_named() -> None:
    error = query_error(Exception("java.lang.OutOfMemoryError: heap\n at ..."))
    assert type(error) is Error and "OutOfMemoryError" in str(error)


def test_a_python_failure_in_a_micro_batch_says_what_it_raised() -> None:
    text = ("[STREAM_FAILED] Query terminated with exception: An exception was raised by "
            "the Python Proxy. Return Message: Traceback (most recent call last):\n"
            '  File "step.py", line 9, in result\n    return math.sqrt(var)\n'
            "ValueError: math domain error\n")
    error = query_error(Exception(text))
    assert type(error) is Error and str(error).endswith("(ValueError: math domain error)")


CATALOG_SQL = "CREATE TABLE t (a INTEGER PRIMARY KEY, b VARCHAR NOT NULL)"


def local_error(action) -> Error:
    db = upkeep.connect()
    db.execute(CATALOG_SQL)
    db.create_view("v", "SELECT b, COUNT(*) AS n FROM t GROUP BY b")
    db.insert("t", [(1, "x")])
    with pytest.raises(Error) as caught:
        with db.transaction():
            action(db)
    return caught.value


@pytest.mark.parametrize("changes, action", [
    ([("t", (2, "y"), -1)], lambda db: db.delete("t", [(2, "y")])),
    ([("t", (1, "z"), 1)], lambda db: db.insert("t", [(1, "z")])),
    ([("t", (3, None), 1)], lambda db: db.insert("t", [(3, None)])),
])
def test_a_shard_rejection_reaches_the_driver_as_the_local_error(changes, action) -> None:
    """The shard engine rejects the batch; its record travels as Spark's text and is
    rebuilt as the local engine's own exception, with the record's position kept."""
    db = upkeep.connect()
    db.execute(CATALOG_SQL)
    db.create_view("v", "SELECT b, COUNT(*) AS n FROM t GROUP BY b")
    shard = ShardEngine(db.catalog(), ["v"], [[("t", (1, "x"), 1)]])
    with pytest.raises(ShardError) as caught:
        shard.apply(changes, ["changes-1.jsonl, line 1"])
    text = f"PythonException: ... {BatchRejected(caught.value.record)} ..."
    rebuilt = query_error(Exception(text))
    assert same(rebuilt, local_error(action))
    assert rebuilt.position == "changes-1.jsonl, line 1"


def test_every_error_class_the_docs_name_is_upkeeps_to_catch() -> None:
    """README's error list (and docs/design.md "Errors") name these as ``upkeep.X``."""
    import upkeep
    import upkeep.errors

    for name in ("Error", "ParseError", "SchemaError", "UnsupportedError", "StrategyError",
                 "EvaluationError", "ConstraintError", "ProvenanceError", "RecursionLimit",
                 "StorageError", "DamagedStorageError"):
        cls = getattr(upkeep, name)
        assert issubclass(cls, upkeep.Error), name
        assert name in upkeep.__all__, name
    assert upkeep.StrategyError is upkeep.errors.StrategyError
