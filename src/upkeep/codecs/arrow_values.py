"""SQL values as Arrow arrays (and through Arrow, Parquet): the table in :mod:`upkeep.codecs`.

The Arrow type of each SQL type is :meth:`upkeep.types.SqlType.arrow`; HUGEINT, which has no
Arrow integer, is a ``decimal128(38, 0)`` and comes back as ``int``.
"""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa

from ..errors import SchemaError
from ..types import SqlType

Columns = list[tuple[str, SqlType]]


def to_arrow(columns: Columns, rows: list[tuple],
             extra: dict[str, list[int]] | None = None) -> pa.Table:
    """Rows as an Arrow table with the columns' types (plus int64 ``extra`` columns, e.g. a
    delta's weights).  A value that does not fit its column's type raises
    :class:`SchemaError` naming the column."""
    arrays = []
    for k, (name, typ) in enumerate(columns):
        values = [r[k] for r in rows]
        if typ.kind == "HUGEINT":
            values = [None if v is None else Decimal(v) for v in values]
        try:
            arrays.append(pa.array(values, type=typ.arrow() or pa.string()))
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError) as exc:
            raise SchemaError(f"a value of column {name} does not fit its type {typ.sql()}: "
                              f"{exc}") from None
    names = [n for n, _ in columns]
    for name, ints in (extra or {}).items():
        arrays.append(pa.array(ints, type=pa.int64()))
        names.append(name)
    return pa.Table.from_arrays(arrays, names=names)


def from_arrow(table: pa.Table, columns: Columns) -> list[tuple]:
    """The rows of an Arrow table written by :func:`to_arrow`, as the engine's values."""
    data = []
    for name, typ in columns:
        values = table.column(name).to_pylist()
        if typ.kind == "HUGEINT":
            values = [None if v is None else int(v) for v in values]
        data.append(values)
    return list(zip(*data, strict=True)) if data else [()] * table.num_rows
