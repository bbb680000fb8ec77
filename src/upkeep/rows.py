"""Rows handed to ``db.insert`` / ``db.delete``: iterables of tuples or dicts, pandas
DataFrames or Arrow tables, turned into plain tuples in the table's column order.

Engine-neutral: both engines read user rows through :func:`iter_rows`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from numbers import Integral

import pyarrow.compute as pc

from .codecs.arrow_values import column_values
from .errors import SchemaError
from .types import SqlType, plain_datetime

ARROW_SLICE = 65_536  # rows converted from Arrow to Python objects at a time


def iter_rows(rows, table: str, columns: list[tuple[str, SqlType]]) -> Iterator:
    """The rows of ``rows`` for ``table`` (whose columns are ``columns``); each is then
    checked and coerced by the table's own rules."""
    rows = as_arrow(rows, columns, table)
    module = type(rows).__module__
    if module.startswith("pandas"):
        import pandas as pd

        frame = rows.astype(object).where(pd.notna(rows), None)
        for i, r in enumerate(frame.itertuples(index=False, name=None)):
            yield tuple(_pandas_value(v, i, j, table, columns) for j, v in enumerate(r))
        return
    if module.startswith("pyarrow"):
        picked = arrow_columns(rows, table, [n for n, _ in columns])
        # a slice at a time: Python objects for a few thousand rows, never a whole table's
        for start in range(0, picked.num_rows, ARROW_SLICE):
            part = picked.slice(start, ARROW_SLICE)
            yield from zip(*map(_python_values, part.columns, columns), strict=True)
        return
    if isinstance(rows, (str, bytes)) or not isinstance(rows, Iterable):
        raise _not_rows(rows, table)
    yield from rows


def row_parts(rows, table: str, columns: list[tuple[str, SqlType]], size: int
              ) -> Iterator[list]:
    """The rows of :func:`iter_rows` as lists of at most ``size`` rows, for work done a list
    at a time (``Connection._change``): a list's slices, an Arrow table's slices as Python
    rows, anything else cut from :func:`iter_rows`."""
    if type(rows) is list:
        for start in range(0, len(rows), size):
            yield rows[start:start + size]
        return
    rows = as_arrow(rows, columns, table)
    if type(rows).__module__.startswith("pyarrow"):
        picked = arrow_columns(rows, table, [n for n, _ in columns])
        for start in range(0, picked.num_rows, size):
            part = picked.slice(start, size)
            yield list(zip(*map(_python_values, part.columns, columns), strict=True))
        return
    source = iter_rows(rows, table, columns)
    while part := list(islice(source, size)):
        yield part


def _not_rows(rows, table: str) -> SchemaError:
    return SchemaError(f"rows for table {table} must be an iterable of rows, a pandas "
                       f"DataFrame or Arrow data (a table, record batch, record batch reader "
                       f"or dataset), not {type(rows).__module__}.{type(rows).__name__}")


def _pandas_value(v: object, i: int, j: int, table: str, columns: list[tuple[str, SqlType]]):
    """A DataFrame cell as the row-by-row path reads it: NaN (also a nullable float
    column's, which is not NA) as NULL, as DuckDB reads a DataFrame; a naive timestamp as
    itself in a TIMESTAMP column (to the microsecond, as DuckDB reads it) and as its day
    in any other (a zoned one stays, and is refused by the column's check); NaT as NULL."""
    if v.__class__ is float and v != v:
        return None
    if getattr(v, "tzinfo", 0) is None and hasattr(v, "to_pydatetime"):  # pd.Timestamp
        if v != v:  # NaT
            return None
        try:
            if columns[j][1].kind == "TIMESTAMP":
                return plain_datetime(v)
            return v.date()
        except (ValueError, OverflowError, NotImplementedError):
            raise SchemaError(f"row {i} for table {table}, column {columns[j][0]}: {v} is "
                              f"outside years 1 to 9999", None, i) from None
    return v


def _arrow_data(rows, table: str):
    """Arrow data as a table or record batch: a record batch reader read whole, a dataset
    as its table; any other Arrow object (an array, a scalar, a schema) is refused."""
    import pyarrow as pa

    if isinstance(rows, (pa.Table, pa.RecordBatch)):
        return rows
    if isinstance(rows, pa.RecordBatchReader):
        return rows.read_all()
    import pyarrow.dataset as ds

    if isinstance(rows, ds.Dataset):
        return rows.to_table()
    raise _not_rows(rows, table)


def _nan_as_null(table):
    """A table read from pandas with its float columns' NaN as NULL: Arrow makes a plain
    float column's NaN NULL, a nullable one's (NaN, not NA) it keeps."""
    import pyarrow as pa

    for i, column in enumerate(table.columns):
        if pa.types.is_floating(column.type) and pc.any(pc.is_nan(column)).as_py():
            table = table.set_column(i, table.field(i), pc.if_else(
                pc.is_nan(column), pa.scalar(None, column.type), column))
    return table


def _python_values(column, named: tuple[str, SqlType]) -> list:
    """An Arrow column's values as Python objects for the table column ``named``; one
    Python cannot hold (a date past year 9999, bytes that are not UTF-8 in a string
    column) is a :class:`SchemaError` naming the column."""
    name, typ = named
    try:
        return column_values(column, typ)
    except (OverflowError, ValueError, UnicodeDecodeError) as exc:
        raise SchemaError(f"Arrow column {name} ({column.type}) holds a value that "
                          f"{typ.sql()} cannot: {exc}") from None


def as_arrow(rows, columns: list[tuple[str, SqlType]], table: str = ""):
    """A pandas DataFrame as Arrow, when Arrow reads it as the row-by-row path would (its
    columns, found by name, of numbers, booleans, strings, dates in object columns or
    nullable types; NaN and NA become NULL): its rows then take the Arrow path, about
    twice as fast.  Anything else (datetime64 columns, which that path makes into dates,
    mixed objects) comes back as a DataFrame of the table's columns in order.  Arrow data
    comes back as a table or record batch (:func:`_arrow_data`); any other pandas object
    than a DataFrame is refused."""
    module = type(rows).__module__
    if module.startswith("pyarrow"):
        return _arrow_data(rows, table)
    if not module.startswith("pandas"):
        return rows
    import pandas as pd

    if not isinstance(rows, pd.DataFrame):
        raise _not_rows(rows, table)
    rows = frame_columns(rows, table, [n for n, _ in columns])
    if [str(c).lower() for c in rows.columns] != [n for n, _ in columns]:
        return rows
    if not all(_plain_dtype(dtype) for dtype in rows.dtypes):
        return rows
    import pyarrow as pa

    try:
        return _nan_as_null(pa.Table.from_pandas(rows, preserve_index=False))
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return rows


def frame_columns(frame, table: str, column_names: list[str]):
    """A DataFrame's columns of ``table`` in its order, found by name whatever their case,
    as Arrow tables' are.  A frame with unnamed columns (``pd.DataFrame(list_of_tuples)``
    labels them 0, 1, ...) is taken by position."""
    labels = list(frame.columns)
    if all(isinstance(c, Integral) for c in labels):
        return frame
    lowered = {str(c).lower(): c for c in labels}
    if len(lowered) != len(labels) or set(lowered) != set(column_names):
        raise SchemaError(f"a DataFrame for table {table} has columns "
                          f"{[str(c) for c in labels]}; the table's are {column_names}")
    if list(lowered) == column_names:
        return frame
    return frame[[lowered[n] for n in column_names]]


# pandas' nullable types, which Arrow reads with NA as NULL
_NULLABLE = ("Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64",
             "Float32", "Float64", "boolean", "string")


def _plain_dtype(dtype) -> bool:
    """A column of numbers, booleans or Python objects, or of a nullable type of those."""
    if str(dtype) in _NULLABLE:
        return True
    return type(dtype).__module__.startswith("numpy") and dtype.kind in "iufbO"


def arrow_columns(rows, table: str, column_names: list[str]):
    """An Arrow table's (or record batch's) columns of ``table``, in its order, found by
    name whatever their case; a column the table lacks, or one named twice, is refused as a
    DataFrame's is (:func:`frame_columns`)."""
    lowered = {k.lower(): i for i, k in enumerate(rows.column_names)}
    if len(lowered) != len(rows.column_names) or set(lowered) != set(column_names):
        missing = [n for n in column_names if n not in lowered]
        raise SchemaError(f"Arrow data for table {table} has columns {rows.column_names}; "
                          f"the table's are {column_names}"
                          + (f" (it lacks {missing})" if missing else ""))
    return rows.select([lowered[n] for n in column_names])


# the kinds whose values an Arrow column of the kind's own type always holds valid
_ARROW_VALID = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "DOUBLE", "DECIMAL", "VARCHAR",
                "DATE", "TIMESTAMP", "BOOLEAN")


def arrow_typed(rows, table: str, columns: list[tuple[str, SqlType]]) -> bool:
    """Whether ``rows`` is Arrow data whose columns for ``table`` already have the
    columns' own Arrow types (:meth:`SqlType.arrow`) and hold no NaN or -0.0 and no
    decimal past its precision: then every row :func:`iter_rows` yields is valid as it
    is, and a bulk load skips the per-row check (a line item: ~0.8 us).  A NaN or -0.0 is left to that check, which makes it
    the one NaN value equal rows need, or 0.0."""
    if not type(rows).__module__.startswith("pyarrow") or not hasattr(rows, "column_names"):
        return False
    picked = arrow_columns(rows, table, [n for n, _ in columns])
    for column, (_, typ) in zip(picked.columns, columns, strict=True):
        if typ.kind not in _ARROW_VALID or column.type != typ.arrow():
            return False
        if typ.kind == "DOUBLE" and (pc.any(pc.is_nan(column)).as_py()
                                     or _negative_zero(column)):
            return False
        if typ.kind == "DECIMAL" and not _within_precision(column):
            return False
    return True


def _within_precision(column) -> bool:
    """Whether a decimal column's values fit its precision (Arrow lets an unsafe cast
    make one that does not; the row-by-row check then refuses it by name)."""
    import pyarrow as pa

    try:
        column.validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


def _negative_zero(column) -> bool:
    """Whether a float column holds -0.0 (equal to 0.0, told apart by its sign bit)."""
    import numpy as np

    zeros = pc.filter(column, pc.equal(column, 0.0))
    return len(zeros) > 0 and bool(np.signbit(zeros.to_numpy()).any())
