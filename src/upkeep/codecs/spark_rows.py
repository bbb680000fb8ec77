"""View rows in Spark's delta stream: the JSON spelling (:mod:`.json_values`) under
positional names ``{"c0": ..., "c1": ...}``, which Spark's ``from_json`` reads into the
view's own types (:func:`spark_schema`) and :func:`decode_row` reads back into the values
the local engine returns.  Needs no pyspark: the types are Spark SQL DDL text."""

from __future__ import annotations

import json

from ..types import SqlType
from .json_values import dumps, from_json, to_json


def encode_row(row: tuple) -> str:
    """The row as ``{"c0": v0, ...}``."""
    return dumps({f"c{i}": to_json(v) for i, v in enumerate(row)})


def decode_row(text: str, types: list[SqlType]) -> tuple:
    """The inverse of :func:`encode_row` for a view with column types ``types``."""
    data = json.loads(text)
    return tuple(from_json(data.get(f"c{i}"), typ) for i, typ in enumerate(types))


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
