"""A base table's rows as a bag (row -> multiplicity), each row kept as one compact key.

A row held as a Python tuple costs a tuple header plus one boxed object per value (a float
24 bytes, a date 32, a short string 50 and more): about 700 bytes for a TPC-H line item.
Here each row is one ``bytes`` object written by :mod:`marshal` from plain values (dates as
day numbers, decimals as integers at the column's scale), about 170 bytes for the same line
item; rows are decoded back to tuples only when they are read in bulk (a view's build, a
query, a snapshot).  Equal rows encode equally: doubles are normalised (``-0.0`` is ``0.0``)
and decimals hold their column's scale, as :func:`upkeep.types.coerce_value` guarantees.

Tables with a column type outside the encoded ones (TIMESTAMP) keep tuples as keys, with the
same interface.
"""

from __future__ import annotations

import datetime as dt
import marshal
import math
from collections.abc import Callable, Iterator
from decimal import Decimal

from .types import INTEGER_KINDS, WIDE_CONTEXT, SqlType

_PLAIN = (*INTEGER_KINDS, "VARCHAR", "BOOLEAN", "NULL")
_ENCODED = (*_PLAIN, "DOUBLE", "DATE", "DECIMAL")


def _codec(columns: list[tuple[str, SqlType]]) -> tuple[Callable, Callable] | None:
    """Generated ``encode(row) -> bytes`` and ``decode(bytes) -> row``, or None when a column
    type is not encoded."""
    if any(t.kind not in _ENCODED for _, t in columns):
        return None
    enc, dec = [], []
    for i, (_, t) in enumerate(columns):
        v = f"r[{i}]"
        if t.kind in _PLAIN:
            enc.append(v)
            dec.append(v)
        elif t.kind == "DOUBLE":  # NaN decodes to the one math.nan (types.canonical_float)
            enc.append(f"(None if {v} is None else {v} + 0.0)")
            dec.append(f"({v} if {v} == {v} else nan)")
        elif t.kind == "DATE":
            enc.append(f"(None if {v} is None else {v}.toordinal())")
            dec.append(f"(None if {v} is None else fromordinal({v}))")
        else:  # DECIMAL, quantized to the column's scale by coercion
            enc.append(f"(None if {v} is None else int({v}.scaleb({t.scale}, WIDE)))")
            dec.append(f"(None if {v} is None else Decimal({v}).scaleb({-t.scale}, WIDE))")
    namespace = {"dumps": _dumps, "loads": marshal.loads,
                 "fromordinal": dt.date.fromordinal, "Decimal": Decimal,
                 "WIDE": WIDE_CONTEXT, "nan": math.nan}
    if enc == [f"r[{i}]" for i in range(len(columns))]:
        encode = "dumps"
        decode = "loads"
    else:
        encode = "lambda r: dumps((" + "".join(f"{e}, " for e in enc) + "))"
        decode = "lambda b: (lambda r: (" + "".join(f"{d}, " for d in dec) + "))(loads(b))"
    return (eval(encode, namespace), eval(decode, namespace))  # noqa: S307 - from types only


def _dumps(value: tuple) -> bytes:
    """marshal version 2: no back-references, whose use depends on objects' reference
    counts, so equal rows always give equal bytes."""
    return marshal.dumps(value, 2)


def _same(x):
    return x


class RowStore:
    """row -> multiplicity for one table; rows go in and come out as tuples."""

    __slots__ = ("_counts", "_encode", "_decode")

    def __init__(self, columns: list[tuple[str, SqlType]]):
        self._counts: dict = {}
        codec = _codec(columns)
        self._encode, self._decode = codec if codec is not None else (_same, _same)

    def __len__(self) -> int:
        return len(self._counts)

    def get(self, row: tuple, default: int = 0) -> int:
        """How many times the table holds ``row``."""
        return self._counts.get(self._encode(row), default)

    def key(self, row: tuple) -> object:
        """The stored form of ``row``: equal rows give equal keys (also with NaN)."""
        return self._encode(row)

    def count(self, key: object) -> int:
        """How many times the table holds the row stored as ``key``."""
        return self._counts.get(key, 0)

    def row(self, key: object) -> tuple:
        """The row of a stored key."""
        return self._decode(key)

    def keys(self) -> Iterator[object]:
        return iter(self._counts)

    def add(self, row: tuple, weight: int) -> None:
        """Change the multiplicity of ``row`` by ``weight`` (the caller checked it stays >= 0)."""
        counts = self._counts
        key = self._encode(row)
        n = counts.get(key, 0) + weight
        if n:
            counts[key] = n
        else:
            counts.pop(key, None)

    def items(self) -> Iterator[tuple[tuple, int]]:
        """Every distinct row with its multiplicity, decoded."""
        decode = self._decode
        for key, n in self._counts.items():
            yield decode(key), n

    def __iter__(self) -> Iterator[tuple]:
        decode = self._decode
        return (decode(key) for key in self._counts)

    def as_dict(self) -> dict[tuple, int]:
        """The rows as a plain Z-set (a copy)."""
        return dict(self.items())
