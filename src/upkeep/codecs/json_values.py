"""SQL values as JSON (the table in :mod:`upkeep.codecs`): exact, and valid JSON always
(DECIMAL as a string of its digits, non-finite DOUBLEs as the strings ``"NaN"``,
``"Infinity"`` and ``"-Infinity"``, dates, times and timestamps in ISO 8601).  Values an
ad hoc query can produce beyond the types of tables (``SELECT`` over DuckDB) are spelled
too: an INTERVAL as an ISO 8601 duration, a BLOB in base64, a UUID as its text, lists
and structs as JSON arrays and objects."""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
import uuid
from decimal import Decimal
from typing import Any

from ..types import INTEGER_KINDS, SqlType, coerce_value

_TABLE_KINDS = frozenset({*INTEGER_KINDS, "DOUBLE", "DECIMAL", "VARCHAR", "DATE", "TIMESTAMP",
                          "BOOLEAN"})
_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def to_json(value: Any) -> Any:
    """A value of any SQL type as a JSON-ready Python value."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, Decimal):  # as DuckDB spells it: '-0.0000000001', not '-1E-10'
        return format(value, "f")
    if isinstance(value, (dt.date, dt.datetime, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        seconds = Decimal(value.microseconds).scaleb(-6) + value.seconds
        return f"P{value.days}DT{seconds.normalize():f}S"
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    raise TypeError(f"no JSON spelling for {type(value).__name__} value {value!r}")


def from_json(value: Any, typ: SqlType) -> Any:
    """The value of SQL type ``typ`` that :func:`to_json` wrote as ``value``."""
    if value is None:
        return None
    if typ.kind == "DOUBLE" and isinstance(value, str) and value in _NON_FINITE:
        return _NON_FINITE[value]
    if typ.kind == "DOUBLE" and isinstance(value, (int, Decimal)) and not isinstance(value, bool):
        return float(value)
    if typ.kind == "TIMESTAMP" and isinstance(value, str):
        return dt.datetime.fromisoformat(value)
    if typ.kind not in _TABLE_KINDS:  # NULL too
        return value  # a query's value of a type no table holds: as to_json spelled it
    if typ.kind == "DECIMAL" and isinstance(value, str):  # its digits (to_json)
        try:
            value = Decimal(value)
        except ArithmeticError:
            raise ValueError(f"expected {typ.sql()}, got {value!r}") from None
    return coerce_value(value, typ)


def dumps(value: Any) -> str:
    """JSON text of a structure whose leaves are already JSON-ready (no NaN slips through)."""
    return json.dumps(value, allow_nan=False)


def row_object(names: list[str], row: tuple) -> dict[str, Any]:
    """A row as the JSON object ``{column: value}``."""
    return {n: to_json(v) for n, v in zip(names, row, strict=True)}
