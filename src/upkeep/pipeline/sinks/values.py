"""Python values of view rows as JSON and SQLite values (lossless where the format allows)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pyarrow as pa

from ...types import SqlType
from ..errors import PipelineError


def json_value(value: Any) -> Any:
    """DECIMAL as a string (exact), DATE as an ISO string, everything else as is."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    return value


_SQLITE_TYPES = {"DOUBLE": "REAL", "VARCHAR": "TEXT", "DATE": "TEXT", "DECIMAL": "TEXT",
                 "BOOLEAN": "INTEGER"}


def sqlite_type(typ: SqlType) -> str:
    """The SQLite column type: integers INTEGER, DOUBLE REAL, the rest TEXT (exact).

    HUGEINT (e.g. ``SUM`` of integers) gets no declared type, so that a value beyond 64 bits,
    stored as text, is not turned into a REAL by SQLite's type affinity.
    """
    if typ.kind == "HUGEINT":
        return ""
    return "INTEGER" if typ.is_integer else _SQLITE_TYPES.get(typ.kind, "TEXT")


def sqlite_value(value: Any) -> Any:
    """DECIMAL and DATE as text, BOOLEAN as 0/1, integers beyond 64 bits as text."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int) and not -(2**63) <= value < 2**63:
        return str(value)
    if isinstance(value, (Decimal, dt.date)):
        return json_value(value)
    return value


def arrow_table(columns: list[tuple[str, SqlType]], rows: list[tuple], where: str,
                extra: dict[str, list[int]] | None = None) -> pa.Table:
    """Rows as an Arrow table with the view's column types (plus int64 ``extra`` columns).

    Values that do not fit their column's declared type raise :class:`PipelineError` naming
    the column, instead of a bare Arrow error.
    """
    values = list(zip(*rows, strict=True)) if rows else [()] * len(columns)
    arrays = []
    for (name, typ), column in zip(columns, values, strict=True):
        try:
            arrays.append(pa.array(list(column), type=typ.arrow()))
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
            raise PipelineError(f"{where}: a value of column {name} does not fit its type "
                                f"{typ.sql()} as the engine reports it: {exc}") from None
    names = [n for n, _ in columns]
    for name, ints in (extra or {}).items():
        arrays.append(pa.array(ints, type=pa.int64()))
        names.append(name)
    return pa.Table.from_arrays(arrays, names=names)
