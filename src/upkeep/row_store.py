"""A base table's rows as a bag (row -> multiplicity), each row kept as one compact key.

A row held as a Python tuple costs a tuple header plus one boxed object per value (a float
24 bytes, a date 32, a short string 50 and more): about 700 bytes for a TPC-H line item.
Here each row is one ``bytes`` object written by MessagePack from plain values (dates as
day numbers, decimals as integers at the column's scale), about 150 bytes for the same line
item; rows are decoded back to tuples only when they are read in bulk (a view's build, a
query, a snapshot).  MessagePack spends one byte on a small integer and on a short string's
header where :mod:`marshal` spends five, and it has no back-references, so equal rows
always encode equally: doubles are normalised (``-0.0`` is ``0.0``) and decimals hold their
column's scale, as :func:`upkeep.types.coerce_value` guarantees.  An integer outside
MessagePack's 64 bits (a HUGEINT, a DECIMAL of more than 18 digits) is stored as its decimal
text.  Keys live in memory only: snapshots and the log hold decoded rows.

Tables with a column type outside the encoded ones (TIMESTAMP) keep tuples as keys, with the
same interface.
"""

from __future__ import annotations

import datetime as dt
import math
from array import array
from collections.abc import Callable, Iterator
from decimal import Decimal
from itertools import islice

import msgpack

from .types import INTEGER_KINDS, WIDE_CONTEXT, SqlType

# a bulk read shares the objects of a column whose values repeat: in a sample of up to
# _SHARE_SAMPLE rows (of stores with _SHARE_MIN_ROWS rows or more), at most _SHARE_RATIO of
# the values are distinct
_SHARE_MIN_ROWS = 1_000
_SHARE_SAMPLE = 20_000
_SHARE_RATIO = 0.8

# the most keys a store keeps between a batch's check and its apply (``checked_count``)
_CHECKED_MAX = 1_000_000

# the most distinct values of one date or decimal column whose stored form an encoder
# remembers
_MEMO_MAX = 4_096

_PLAIN = (*INTEGER_KINDS, "VARCHAR", "BOOLEAN", "NULL")
_ENCODED = (*_PLAIN, "DOUBLE", "DATE", "DECIMAL")


# how RowEncoder.encode stores a column's value (RowEncoder.kinds), plus _STORE_WIDE
_STORE_AS_IS = 0
_STORE_DOUBLE = 1  # normalised: -0.0 as 0.0
_STORE_DATE = 2  # the day number
_STORE_DECIMAL = 3  # the integer count of the column's scale's units
_STORE_WIDE = 4  # an integer beyond MessagePack's 64 bits as its text


def _codec(columns: list[tuple[str, SqlType]]) -> tuple[Callable, Callable] | None:
    """``encode(row) -> bytes`` and ``decode(bytes) -> row``, or None when a column type is
    not encoded."""
    if any(t.kind not in _ENCODED for _, t in columns):
        return None
    encoder = RowEncoder(columns)
    return (encoder.encode if any(encoder.kinds) else _dumps), _decoder(columns)


class RowEncoder:
    """A row's stored values, packed: one loop over the columns by kind code (compiled, and
    ``row_store.pxd`` makes this an extension type; it replaced a generated lambda that
    ran in the interpreter).  A line item takes about 2.2k instructions here beside
    MessagePack's 5k for packing it."""

    def __init__(self, columns: list[tuple[str, SqlType]]):
        kinds = array("i")
        for _, t in columns:
            kind = {"DOUBLE": _STORE_DOUBLE, "DATE": _STORE_DATE,
                    "DECIMAL": _STORE_DECIMAL}.get(t.kind, _STORE_AS_IS)
            kinds.append(kind | (_STORE_WIDE if _wide(t) else 0))
        self.width = len(columns)
        self.kinds = kinds
        self.scales = tuple(t.scale for _, t in columns)
        # per DATE or DECIMAL column, the stored form of the values seen (_remember)
        self.memos = [{} for _ in columns]

    def encode(self, row: tuple) -> bytes:
        values = list(row)  # MessagePack packs a list as it packs a tuple
        for k in range(self.width):
            kind = self.kinds[k]
            if not kind:
                continue
            v = values[k]
            if v is None:
                continue
            stored = kind & 3
            if stored == _STORE_DOUBLE:
                if type(v) is float and v:  # only -0.0 (and an int) changes
                    continue
                v = v + 0.0
            elif stored:  # a day number, or a decimal's count of its column's scale's units
                memo = self.memos[k]
                known = memo.get(v)
                if known is not None:
                    v = known
                elif stored == _STORE_DATE:
                    v = _remember(memo, v, v.toordinal())
                else:  # quantized to the column's scale by coercion
                    v = _remember(memo, v, int(v.scaleb(self.scales[k], WIDE_CONTEXT)))
            if kind & _STORE_WIDE:
                v = _wide_int(v)
            values[k] = v
        return _dumps(values)


def _decoder(columns: list[tuple[str, SqlType]], shared: frozenset[int] = frozenset()
             ) -> Callable[[bytes], tuple]:
    """Generated ``decode(bytes) -> row``.  The values of the ``shared`` columns are memoized
    for this decoder's life: rows decoded by one decoder hold one object per distinct value
    of such a column (a view built over the table keeps one date object per day, not one per
    row)."""
    dec = []
    namespace: dict[str, object] = {"unpackb": msgpack.unpackb, "fromordinal": dt.date.fromordinal,
                                    "Decimal": Decimal, "WIDE": WIDE_CONTEXT, "nan": math.nan}
    for i, (_, t) in enumerate(columns):
        v = f"r[{i}]"
        if t.kind == "HUGEINT":
            made = f"(int({v}) if {v}.__class__ is str else {v})"
        elif t.kind in _PLAIN or t.kind == "DOUBLE":
            made = v
        elif t.kind == "DATE":
            made = f"fromordinal({v})"
        else:  # a wide DECIMAL's text makes the same Decimal as its integer
            made = f"Decimal({v}).scaleb({-t.scale}, WIDE)"
        if i in shared:  # the first object made for a stored value serves every row
            namespace[f"S{i}"] = {}
            made = (f"S{i}.setdefault({v}, {v})" if made == v
                    else f"(S{i}[{v}] if {v} in S{i} else S{i}.setdefault({v}, {made}))")
        if t.kind == "DOUBLE":  # NaN decodes to the one math.nan (types.canonical_float)
            dec.append(f"({made} if {v} == {v} else nan)")
        elif t.kind in _PLAIN and t.kind != "HUGEINT":
            dec.append(made)
        else:
            dec.append(f"(None if {v} is None else {made})")
    if dec == [f"r[{i}]" for i in range(len(columns))]:
        return _loads
    return eval("lambda b: (lambda r: (" + "".join(f"{d}, " for d in dec)  # noqa: S307
                + "))(unpackb(b, use_list=False, unicode_errors='surrogatepass'))", namespace)


_pack = msgpack.Packer().pack
_pack_surrogates = msgpack.Packer(unicode_errors="surrogatepass").pack


def _dumps(values: tuple) -> bytes:
    """A row's bytes (MessagePack).  Strings with lone surrogates round-trip, as in a str:
    a row holding one is packed with ``surrogatepass``, which encodes every other string
    to the same bytes, so equal rows still get equal keys.  Packing without it first reads
    an ASCII string's bytes in place instead of encoding a copy (a line item: 1.6 -> 1.1
    us)."""
    try:
        return _pack(values)
    except UnicodeEncodeError:
        return _pack_surrogates(values)


def _loads(data: bytes) -> tuple:
    return msgpack.unpackb(data, use_list=False, unicode_errors="surrogatepass")


def _remember(memo: dict, value: object, stored: object) -> object:
    """``stored``, remembered as the stored form of ``value`` in a column's memo (at most
    ``_MEMO_MAX`` values, then it starts again): most date and decimal columns repeat a few
    values (days, quantities, rates, prices), and converting one (``toordinal``,
    ``scaleb``) costs more than looking it up."""
    if len(memo) >= _MEMO_MAX:
        memo.clear()
    memo[value] = stored
    return stored


def _wide(t: SqlType) -> bool:
    """Whether a column's stored integers may exceed MessagePack's 64 bits."""
    return t.kind == "HUGEINT" or (t.kind == "DECIMAL" and (t.precision or 38) > 18)


def _wide_int(v: int) -> int | str:
    """An integer as MessagePack can hold it: as itself within 64 bits, else as its text
    (always the same form for the same value, so equal rows keep equal keys)."""
    return v if -(1 << 63) <= v < (1 << 64) else str(v)


def _same(x):
    return x


class RowStore:
    """row -> multiplicity for one table; rows go in and come out as tuples."""

    __slots__ = ("_counts", "_encode", "_decode", "_columns", "_last_row", "_last_key",
                 "_zeros", "_checked")

    def __init__(self, columns: list[tuple[str, SqlType]]):
        self._counts: dict = {}
        self._columns = columns
        codec = _codec(columns)
        self._encode, self._decode = codec if codec is not None else (_same, _same)
        # the last row encoded and its key: a single-row delete encodes its row when it is
        # checked and again when it is applied, the same tuple object both times
        self._last_row: tuple | None = None
        self._last_key: object = None
        # rows held at multiplicity 0 to keep their place (``add(..., keep_place=True)``)
        self._zeros = 0
        # id(row) -> (row, key) of the rows a batch's check read (``checked_count``), for
        # the ``add`` that applies them: a batch's deletes are encoded once, not twice
        self._checked: dict[int, tuple[tuple, object]] = {}

    def _key_of(self, row: tuple) -> object:
        if row is self._last_row:
            return self._last_key
        key = self._encode(row)
        self._last_row, self._last_key = row, key
        return key

    def __len__(self) -> int:
        return len(self._counts) - self._zeros

    def get(self, row: tuple, default: int = 0) -> int:
        """How many times the table holds ``row``."""
        return self._counts.get(self._key_of(row), default)

    def checked_count(self, row: tuple) -> int:
        """:meth:`get`, keeping the row's key for the :meth:`add` of this same tuple that
        applies it (until :meth:`forget`): a batch is checked when staged and applied at
        commit, and its rows' encoding is most of either."""
        key = self._encode(row)
        if len(self._checked) < _CHECKED_MAX:
            self._checked[id(row)] = (row, key)
        return self._counts.get(key, 0)

    def forget(self) -> None:
        """Drop the keys :meth:`checked_count` kept (``Table.apply`` calls it: a rejected
        batch's keys, at most ``_CHECKED_MAX``, go with the next batch applied)."""
        self._checked.clear()

    def key(self, row: tuple) -> object:
        """The stored form of ``row``: equal rows give equal keys (also with NaN)."""
        return self._key_of(row)

    def count(self, key: object) -> int:
        """How many times the table holds the row stored as ``key``."""
        return self._counts.get(key, 0)

    def row(self, key: object) -> tuple:
        """The row of a stored key."""
        return self._decode(key)

    def keys(self) -> Iterator[object]:
        if self._zeros:
            return (key for key, n in self._counts.items() if n)
        return iter(self._counts)

    def add(self, row: tuple, weight: int, keep_place: bool = False) -> None:
        """Change the multiplicity of ``row`` by ``weight`` (the caller checked it stays >= 0).

        ``keep_place``: a row this takes to 0 stays where it is, at multiplicity 0 (read as
        absent), so that adding it back puts it where it was, not last.  A what-if deletes
        rows and adds them back (``Committer.hypothetical``), and DuckDB reads a table in
        the order it holds its rows: a row that moved would change which of two tied rows a
        query or a view made later picks."""
        counts = self._counts
        if self._checked:
            hit = self._checked.pop(id(row), None)
            key = hit[1] if hit is not None and hit[0] is row else self._key_of(row)
        else:
            key = self._key_of(row)
        old = counts.get(key)
        n = (old or 0) + weight
        if n:
            counts[key] = n
            if self._zeros and old == 0:  # it was held at 0 to keep its place
                self._zeros -= 1
        elif keep_place:
            if old is not None:
                counts[key] = 0
                self._zeros += 1
        elif counts.pop(key, None) == 0 and self._zeros:
            self._zeros -= 1

    def copy(self) -> RowStore:
        """Another store holding the same rows (their stored keys shared, not encoded
        again): a scratch table as it is now (what-if, ``Connection._hypothetical``)."""
        other = RowStore(self._columns)
        other._counts = ({k: n for k, n in self._counts.items() if n} if self._zeros
                         else dict(self._counts))
        return other

    def items(self) -> Iterator[tuple[tuple, int]]:
        """Every distinct row with its multiplicity, decoded (repeated values shared)."""
        decode = self._bulk_decoder()
        for key, n in self._counts.items():
            if n:
                yield decode(key), n

    def __iter__(self) -> Iterator[tuple]:
        decode = self._bulk_decoder()
        return (decode(key) for key in self.keys())

    def _bulk_decoder(self) -> Callable[[object], tuple]:
        """A decoder for reading the whole store, sharing one object per value in columns
        whose values repeat (in a sample of the rows: the dates, flags and categories of a
        fact table), so that what reads every row (a view's build) keeps a value once, not
        once per row: a TPC-H line item's tuple in a view shrinks by ~300 bytes."""
        counts = self._counts
        if self._decode is _same or len(counts) < _SHARE_MIN_ROWS:
            return self._decode
        step = max(1, len(counts) // _SHARE_SAMPLE)
        sample = [_loads(k) for k in islice(counts, 0, None, step)]
        shared = frozenset(i for i in range(len(self._columns))
                           if len({r[i] for r in sample}) <= _SHARE_RATIO * len(sample))
        return _decoder(self._columns, shared) if shared else self._decode

    def as_dict(self) -> dict[tuple, int]:
        """The rows as a plain Z-set (a copy)."""
        return dict(self.items())
