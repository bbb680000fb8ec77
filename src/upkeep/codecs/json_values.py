"""SQL values as JSON (the table in :mod:`upkeep.codecs`): exact, and valid JSON always
(DECIMAL as a string of its digits, non-finite DOUBLEs as the strings ``"NaN"``,
``"Infinity"`` and ``"-Infinity"``, dates and timestamps in ISO 8601)."""

from __future__ import annotations

import datetime as dt
import json
import math
from decimal import Decimal
from typing import Any

from ..types import SqlType, coerce_value

_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def to_json(value: Any) -> Any:
    """A value of any SQL type as a JSON-ready Python value."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
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
    if typ.kind == "NULL":
        return value
    return coerce_value(value, typ)


def dumps(value: Any) -> str:
    """JSON text of a structure whose leaves are already JSON-ready (no NaN slips through)."""
    return json.dumps(value, allow_nan=False)


def row_object(names: list[str], row: tuple) -> dict[str, Any]:
    """A row as the JSON object ``{column: value}``."""
    return {n: to_json(v) for n, v in zip(names, row, strict=True)}
