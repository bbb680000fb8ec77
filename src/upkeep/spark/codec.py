"""View rows as JSON text in the Spark delta stream, and upkeep types as Spark types.

All views of a streaming query share one output schema ``(view, row, weight)``; ``row`` is a
JSON object ``{"c0": ..., "c1": ...}`` that Spark's ``from_json`` reads into the view's own
typed columns (decimals as exact JSON numbers, dates as ISO strings) and that
:func:`decode_row` reads back into the values the local engine returns.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections import Counter
from collections.abc import Callable, Iterable
from decimal import Decimal

from ..types import SqlType, coerce_value

OUTPUT_SCHEMA = "view string, row string, weight long"


def _value(v: object) -> str:
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, Decimal):
        return str(v) if v.is_finite() else json.dumps(str(v))
    if isinstance(v, float):
        if math.isnan(v):
            return '"NaN"'
        if math.isinf(v):
            return '"Infinity"' if v > 0 else '"-Infinity"'
        return repr(v)
    if isinstance(v, (dt.date, dt.datetime)):
        return json.dumps(v.isoformat())
    return json.dumps(str(v))


def encode_row(row: tuple) -> str:
    """The row as ``{"c0": v0, ...}`` with exact numbers."""
    return "{" + ",".join(f'"c{i}":{_value(v)}' for i, v in enumerate(row)) + "}"


def decode_row(text: str, types: list[SqlType]) -> tuple:
    """The inverse of :func:`encode_row` for a view with column types ``types``."""
    data = json.loads(text, parse_float=Decimal)
    out = []
    for i, typ in enumerate(types):
        v = data.get(f"c{i}")
        if typ.kind == "DOUBLE" and v is not None:
            v = float(v)
        elif typ.kind == "TIMESTAMP" and isinstance(v, str):
            v = dt.datetime.fromisoformat(v)
        out.append(v if v is None or typ.kind == "NULL" else coerce_value(v, typ))
    return tuple(out)


def decode_deltas(rows: Iterable[tuple[str, str, int]],
                  schema_of: Callable[[str], list[tuple[str, SqlType]]],
                  dead_letter_view: str) -> tuple[dict[str, list[tuple[tuple, int]]], list[str]]:
    """A micro-batch's output rows ``(view, row, weight)`` as each view's consolidated
    ``(row, weight)`` changes, and the dead-letter lines (rows of ``dead_letter_view``)."""
    per_view: dict[str, Counter] = {}
    types: dict[str, list[SqlType]] = {}
    dead: list[str] = []
    for view, text, weight in rows:
        if view == dead_letter_view:
            dead.append(text)
            continue
        if view not in types:
            types[view] = [t for _, t in schema_of(view)]
        per_view.setdefault(view, Counter())[decode_row(text, types[view])] += weight
    changes = {v: [(r, w) for r, w in c.items() if w] for v, c in per_view.items()}
    return {v: c for v, c in changes.items() if c}, dead


def spark_type(typ: SqlType) -> str:
    """The Spark SQL type (DDL) of an upkeep column type."""
    if typ.kind == "DECIMAL":
        return f"decimal({typ.precision},{typ.scale})"
    return {
        "TINYINT": "tinyint", "SMALLINT": "smallint", "INTEGER": "int", "BIGINT": "bigint",
        "HUGEINT": "decimal(38,0)", "DOUBLE": "double", "VARCHAR": "string", "DATE": "date",
        "BOOLEAN": "boolean", "TIMESTAMP": "timestamp",
    }.get(typ.kind, "string")


def spark_schema(columns: list[tuple[str, SqlType]]) -> str:
    """The ``from_json`` schema of a view's encoded rows (positional field names)."""
    return ", ".join(f"c{i} {spark_type(t)}" for i, (_, t) in enumerate(columns))
