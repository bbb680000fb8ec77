"""Rows handed to ``db.insert`` / ``db.delete``: iterables of tuples or dicts, pandas
DataFrames or Arrow tables, turned into plain tuples in the table's column order.

Engine-neutral: both engines read user rows through :func:`iter_rows`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from .errors import SchemaError

ARROW_SLICE = 65_536  # rows converted from Arrow to Python objects at a time


def iter_rows(rows, table: str, column_names: list[str]) -> Iterator:
    """The rows of ``rows`` for ``table`` (whose columns are ``column_names``); each is
    then checked and coerced by the table's own rules."""
    module = type(rows).__module__
    if module.startswith("pandas"):
        import pandas as pd

        frame = rows.astype(object).where(pd.notna(rows), None)
        for r in frame.itertuples(index=False, name=None):
            yield tuple(v.date() if isinstance(v, pd.Timestamp) else v for v in r)
        return
    if module.startswith("pyarrow"):
        lowered = {k.lower(): i for i, k in enumerate(rows.column_names)}
        missing = [n for n in column_names if n not in lowered]
        if missing:
            raise SchemaError(f"Arrow data for table {table} lacks columns {missing}")
        picked = rows.select([lowered[n] for n in column_names])
        # a slice at a time: Python objects for a few thousand rows, never a whole table's
        for start in range(0, picked.num_rows, ARROW_SLICE):
            part = picked.slice(start, ARROW_SLICE)
            yield from zip(*(column.to_pylist() for column in part.columns), strict=True)
        return
    if isinstance(rows, (str, bytes)) or not isinstance(rows, Iterable):
        raise SchemaError(f"rows for table {table} must be an iterable of rows, not "
                          f"{type(rows).__name__}")
    yield from rows
