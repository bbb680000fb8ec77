"""SQL values in SQLite columns (the table in :mod:`upkeep.codecs`): integers, REAL and
TEXT, with every value SQLite cannot hold exactly (DECIMAL, HUGEINT beyond 64 bits) as text."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from ..types import SqlType
from .json_values import to_json

_SQLITE_TYPES = {"DOUBLE": "REAL", "VARCHAR": "TEXT", "DATE": "TEXT", "DECIMAL": "TEXT",
                 "BOOLEAN": "INTEGER", "TIMESTAMP": "TEXT"}


def sqlite_type(typ: SqlType) -> str:
    """The SQLite column type: integers INTEGER, DOUBLE REAL, the rest TEXT (exact).

    HUGEINT (e.g. ``SUM`` of integers) gets no declared type, so that a value beyond 64 bits,
    stored as text, is not turned into a REAL by SQLite's type affinity.
    """
    if typ.kind == "HUGEINT":
        return ""
    return "INTEGER" if typ.is_integer else _SQLITE_TYPES.get(typ.kind, "TEXT")


def to_sqlite(value: Any) -> Any:
    """DECIMAL, DATE and TIMESTAMP as their JSON text, BOOLEAN as 0/1, integers beyond 64
    bits as text, a DOUBLE NaN as the text ``'NaN'`` (SQLite stores a NaN REAL as NULL),
    the rest as is."""
    if type(value) is float and value != value:
        return "NaN"
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int) and not -(2**63) <= value < 2**63:
        return str(value)
    if isinstance(value, Decimal) or hasattr(value, "isoformat"):
        return to_json(value)
    return value
