"""Python values of view rows as JSON and SQLite values (lossless where the format allows)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from ...types import SqlType


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
