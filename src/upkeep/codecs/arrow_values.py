"""SQL values as Arrow arrays (and through Arrow, Parquet): the table in :mod:`upkeep.codecs`.

The Arrow type of each SQL type is :meth:`upkeep.types.SqlType.arrow`; HUGEINT, which has no
Arrow integer, is a ``decimal128(38, 0)`` and comes back as ``int``.
"""

from __future__ import annotations

from decimal import Decimal
from functools import lru_cache

import numpy as np
import pyarrow as pa

from ..duckdb_scratch import scratch
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
        elif typ.kind == "UUID":
            values = [None if v is None else str(v) for v in values]
        arrow_type = typ.arrow()
        # Arrow infers a dict as a struct; a STRUCT's field names lost their case in
        # ``kind``, so a MAP inside one is left to that inference (a SchemaError)
        if arrow_type is None and "MAP(" in typ.kind and "STRUCT(" not in typ.kind:
            arrow_type = _duckdb_arrow_type(typ.kind)
            values = [_map_pairs(v, arrow_type) for v in values]
        try:
            arrays.append(pa.array(values, type=arrow_type))  # None: as Arrow infers it
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError) as exc:
            wide = [v for v in values if typ.kind == "HUGEINT" and v is not None
                    and abs(v) >= 10 ** 38]
            if wide:
                raise SchemaError(
                    f"column {name} holds the HUGEINT {wide[0]:f}, of 39 digits, where Arrow "
                    f"and Parquet hold 38 (decimal128(38, 0)): cast it to VARCHAR or DOUBLE "
                    f"where it is computed, or read it without Arrow (JSON results; a "
                    f"duckdb, sqlite or jsonl sink)") from None
            raise SchemaError(f"a value of column {name} does not fit its type {typ.sql()}: "
                              f"{exc}") from None
    names = [n for n, _ in columns]
    for name, ints in (extra or {}).items():
        arrays.append(pa.array(ints, type=pa.int64()))
        names.append(name)
    return pa.Table.from_arrays(arrays, names=names)


@lru_cache(maxsize=256)
def _duckdb_arrow_type(kind: str) -> pa.DataType:
    """The Arrow type DuckDB exports a column of SQL type ``kind`` as."""
    with scratch() as con:
        return con.sql(f"SELECT NULL::{kind} AS v").to_arrow_table().schema.field(0).type


def _map_pairs(value: object, data_type: pa.DataType) -> object:
    """``value`` with each MAP (a dict, as DuckDB gives it) as its (key, value) pairs:
    Arrow reads a dict as a MAP only when its keys are strings (``MAP {1: 'a'}`` failed)."""
    if value is None:
        return None
    if pa.types.is_map(data_type):
        items = value.items() if isinstance(value, dict) else value
        return [(_map_pairs(k, data_type.key_type), _map_pairs(v, data_type.item_type))
                for k, v in items]
    if (pa.types.is_list(data_type) or pa.types.is_large_list(data_type)
            or pa.types.is_fixed_size_list(data_type)) and isinstance(value, (list, tuple)):
        return [_map_pairs(v, data_type.value_type) for v in value]
    return value


def _through_distinct(data_type: pa.DataType) -> bool:
    """Whether a column of this type is turned into Python objects through its distinct
    values: each date, timestamp, time or decimal object costs about a microsecond to make
    (``to_pylist`` of a TPC-H line item's three date columns: 2 s of a 600,000-row load),
    and such columns repeat their values (days, prices)."""
    return pa.types.is_temporal(data_type) or pa.types.is_decimal(data_type)


def column_values(column: pa.ChunkedArray | pa.Array, typ: SqlType | None = None) -> list:
    """The Python values of an Arrow column, as ``to_pylist`` gives them, or as the
    engine holds a value of ``typ`` (a HUGEINT's ``decimal128(38, 0)`` as ``int``).
    Dates, timestamps, times and decimals are made once per distinct value of each chunk
    and shared by the rows holding it (20x faster for a date column, and what keeps those
    rows keeps one object per day)."""
    if not _through_distinct(column.type):
        return column.to_pylist()
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    out: list = []
    for chunk in chunks:
        try:
            encoded = chunk.dictionary_encode()
        except pa.ArrowNotImplementedError:
            out.extend(chunk.to_pylist())
            continue
        values = encoded.dictionary.to_pylist()
        indices = encoded.indices
        if indices.null_count:
            values.append(None)
            indices = indices.fill_null(len(values) - 1)
        if (typ is not None and typ.kind == "HUGEINT" and pa.types.is_decimal(chunk.type)
                and chunk.type.scale == 0):
            values = [None if v is None else int(v) for v in values]
        shared = np.empty(len(values), dtype=object)
        shared[:] = values
        out.extend(shared[indices.to_numpy()].tolist())
    return out


def from_arrow(table: pa.Table, columns: Columns) -> list[tuple]:
    """The rows of an Arrow table written by :func:`to_arrow`, as the engine's values."""
    data = [column_values(table.column(name), typ) for name, typ in columns]
    return list(zip(*data, strict=True)) if data else [()] * table.num_rows
