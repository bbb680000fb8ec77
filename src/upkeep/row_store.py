# cython: boundscheck=False, wraparound=False
# (compiled without index checks: RowEncoder._write makes room for every byte it writes,
# and RowDecoder reads only keys that _write wrote)
"""A base table's rows as a bag (row -> multiplicity), each row kept as one compact key.

A row held as a Python tuple costs a tuple header plus one boxed object per value (a float
24 bytes, a date 32, a short string 50 and more): about 700 bytes for a TPC-H line item.
Here each row is one key, kept with its multiplicity in a
:class:`~upkeep.key_table.KeyTable` (one byte arena, no object per row) and written by
:class:`RowEncoder` in a format fixed by the table's column types (no type tag per value):
a bitmap of the NULL columns, then each other value in column order: integers, dates (day
numbers) and decimals (integers at the column's scale) as zigzag varints, doubles as their
8 bytes, booleans as one byte, strings as a code of the column's dictionary (its first
``_DICTIONARY_MAX`` distinct values) or as their length and UTF-8 bytes, and integers
beyond 64 bits (HUGEINT, a DECIMAL of more than 18 digits) as their decimal text. Equal
rows always encode equally: doubles are normalised (``-0.0`` is ``0.0``, one NaN), decimals
hold their column's scale (as :func:`upkeep.types.coerce_value` guarantees), and a string's
code is fixed when first seen. Rows are decoded back to tuples only when they are read in
bulk (a view's build, a query, a snapshot). Keys live in memory only: snapshots and the log
hold decoded rows (or a bulk insert's Arrow data). Typed Arrow data is written as keys a
column at a time, without Python rows (:meth:`RowStore.keys_of`, :mod:`upkeep.arrow_keys`).

Tables with a column type outside the encoded ones (TIMESTAMP) keep tuples as keys in a
dict (:class:`TupleStore`), with the same interface.
"""

from __future__ import annotations

import datetime as dt
import math
from array import array
from collections.abc import Iterator
from decimal import Decimal

from .arrow_keys import encode_part
from .key_table import KeyTable
from .types import INTEGER_KINDS, WIDE_CONTEXT, SqlType

# a bulk read shares the objects of a column whose values repeat: in a sample of up to
# _SHARE_SAMPLE rows (of stores with _SHARE_MIN_ROWS rows or more), at most _SHARE_RATIO of
# the values are distinct
_SHARE_MIN_ROWS = 1_000
_SHARE_SAMPLE = 20_000
_SHARE_RATIO = 0.8

# a bulk read decodes this many entries at a time (a list of their rows, then yielded)
_DECODE_CHUNK = 1_024

# the most keys a store keeps between a batch's check and its apply (``checked_count``)
_CHECKED_MAX = 1_000_000

# the most distinct values of one date or decimal column whose stored form an encoder
# remembers
_MEMO_MAX = 4_096

# the most distinct strings of one column that get a code (the column's dictionary); later
# ones are written out whole
_DICTIONARY_MAX = 1_024

_ENCODED = (*INTEGER_KINDS, "VARCHAR", "BOOLEAN", "NULL", "DOUBLE", "DATE", "TIMESTAMP",
            "DECIMAL")

# how RowEncoder writes a column's value (RowEncoder.kinds)
_STORE_INTEGER = 0  # a zigzag varint
_STORE_DOUBLE = 1  # its 8 bytes (IEEE 754, little-endian), -0.0 as 0.0
_STORE_DATE = 2  # the day number, as an integer
_STORE_DECIMAL = 3  # the integer count of the column's scale's units, as an integer
_STORE_STRING = 4  # a dictionary code or the UTF-8 bytes
_STORE_BOOLEAN = 5  # one byte
_STORE_WIDE = 6  # an integer beyond 64 bits: its decimal text (always, for the column)
_STORE_TIMESTAMP = 7  # microseconds since 1970-01-01 00:00, as an integer (Arrow's)

_fromordinal = dt.date.fromordinal
_EPOCH = dt.datetime(1970, 1, 1)
_MICROSECOND = dt.timedelta(microseconds=1)

#: the kinds :mod:`upkeep.arrow_keys` writes from Arrow columns, by their names there
_ARROW_KINDS = {_STORE_INTEGER: "integer", _STORE_DOUBLE: "double", _STORE_DATE: "date",
                _STORE_TIMESTAMP: "timestamp", _STORE_DECIMAL: "decimal",
                _STORE_STRING: "string", _STORE_BOOLEAN: "boolean"}


def _store_kind(t: SqlType) -> int:
    if _wide(t):
        return _STORE_WIDE
    return {"DOUBLE": _STORE_DOUBLE, "DATE": _STORE_DATE, "DECIMAL": _STORE_DECIMAL,
            "VARCHAR": _STORE_STRING, "BOOLEAN": _STORE_BOOLEAN,
            "TIMESTAMP": _STORE_TIMESTAMP}.get(t.kind, _STORE_INTEGER)


class RowEncoder:
    """A row's key and back: one loop over the columns by kind code (compiled, and
    ``row_store.pxd`` makes this an extension type with C locals), writing each value as
    its column's type allows, where a general packer (MessagePack, used until 2026-12-03)
    tests each value's type and tags it: a line item's key took about 7k instructions
    there.  The dictionaries of string codes grow only: a string keeps its code for the
    encoder's life, so a copy of a store shares its encoder (:meth:`RowStore.copy`)."""

    def __init__(self, columns: list[tuple[str, SqlType]]):
        self.width = len(columns)
        self.kinds = array("i", [_store_kind(t) for _, t in columns])
        self.scales = tuple(t.scale for _, t in columns)
        # per DATE or DECIMAL column, the stored form of the values seen (_remember)
        self.memos = [{} for _ in columns]
        # per VARCHAR column, string -> code and code -> string
        self.codes = [{} for _ in columns]
        self.strings = [[] for _ in columns]
        # a key is written byte by byte into ``scratch`` (through ``view``), then copied out:
        # room for the NULL bitmap and 10 bytes a column (a varint's most, a double takes 8),
        # a written-out string making room for itself, so ``_write`` needs no bounds checks;
        # a double's bits are read through ``double_bits``
        self._make_room((self.width + 7) // 8 + 10 * self.width)
        double = array("d", [0.0])
        self.double_slot = double
        self.double_bits = memoryview(double).cast("B").cast("Q")
        self.busy = False

    def _make_room(self, size: int) -> None:
        """A scratch buffer of at least ``size`` bytes, holding what the old one held."""
        old = getattr(self, "scratch", None)
        scratch = array("B", bytes(size))
        if old is not None:
            scratch[:len(old)] = old
        self.scratch = scratch
        self.view = memoryview(scratch)

    def encode(self, row: tuple) -> bytes:
        if self.busy:  # entered again before it returned (by another thread): a twin
            return self._twin().encode(row)
        self.busy = True
        try:
            return self._write(row)
        finally:
            self.busy = False

    def _twin(self) -> RowEncoder:
        """An encoder sharing this one's memos and dictionaries, with its own scratch."""
        twin = RowEncoder([])
        twin.width, twin.kinds, twin.scales = self.width, self.kinds, self.scales
        twin.memos, twin.codes, twin.strings = self.memos, self.codes, self.strings
        twin._make_room(len(self.scratch))
        return twin

    def _write(self, row: tuple) -> bytes:
        return self.scratch[:self._write_into(row)].tobytes()

    def _write_into(self, row: tuple) -> int:
        """Write ``row``'s key at the start of ``scratch`` (``view``); its length."""
        width = self.width
        if len(row) != width:
            raise ValueError(f"a row of {len(row)} values where the table has {width} columns")
        view = self.view
        nulls = (width + 7) >> 3  # the NULL bitmap first, then the values
        for k in range(nulls):
            view[k] = 0
        pos = nulls
        for k in range(width):
            v = row[k]
            if v is None:
                view[k >> 3] |= 1 << (k & 7)
                continue
            kind = self.kinds[k]
            if kind == _STORE_DOUBLE:
                d = v
                if d == 0.0:  # -0.0 (and 0) as 0.0
                    d = 0.0
                elif d != d:
                    d = math.nan
                self.double_slot[0] = d
                u = self.double_bits[0]  # its IEEE 754 bits, written little-endian
                for j in range(8):
                    view[pos + j] = u & 255
                    u >>= 8
                pos += 8
                continue
            if kind == _STORE_BOOLEAN:
                view[pos] = 1 if v else 0
                pos += 1
                continue
            data = None
            if kind == _STORE_STRING:
                codes = self.codes[k]
                code = codes.get(v)
                if code is not None:
                    u = code
                    u = (u << 1) | 1
                elif len(codes) < _DICTIONARY_MAX:
                    u = _new_code(codes, self.strings[k], v)
                    u = (u << 1) | 1
                else:
                    text = v
                    try:
                        data = text.encode("utf-8")
                    except UnicodeEncodeError:  # a lone surrogate, which a str may hold
                        data = text.encode("utf-8", "surrogatepass")
                    u = len(data)
                    u = u << 1
            elif kind == _STORE_WIDE:
                if type(v) is not int:  # a wide DECIMAL's units
                    v = int(v.scaleb(self.scales[k], WIDE_CONTEXT))
                data = str(v).encode("ascii")
                u = len(data)
            else:
                if kind != _STORE_INTEGER:  # a day number, microseconds, a decimal's units
                    memo = self.memos[k]
                    known = memo.get(v)
                    if known is not None:
                        v = known
                    elif kind == _STORE_DATE:
                        v = _remember(memo, v, v.toordinal())
                    elif kind == _STORE_TIMESTAMP:
                        v = _remember(memo, v, (v - _EPOCH) // _MICROSECOND)
                    else:  # quantized to the column's scale by coercion
                        v = _remember(memo, v, int(v.scaleb(self.scales[k], WIDE_CONTEXT)))
                n = v
                if n < 0:  # zigzag: 0, -1, 1, -2 ... as 0, 1, 2, 3 ...
                    u = -(n + 1)
                    u = (u << 1) | 1
                else:
                    u = n
                    u = u << 1
            while u >= 128:
                view[pos] = (u & 127) | 128
                pos += 1
                u >>= 7
            view[pos] = u
            pos += 1
            if data is not None:
                n = len(data)
                if pos + n + 10 * (width - k) > len(self.scratch):
                    self._make_room(2 * (pos + n + 10 * (width - k)))
                    view = self.view
                for j in range(n):
                    view[pos + j] = data[j]
                pos += n
        return pos


def _new_code(codes: dict, strings: list, value: str) -> int:
    """The next code of a column's dictionary, given to ``value``: the list first, so that
    a key holding the code is never read before its string is there."""
    code = len(strings)
    strings.append(value)
    codes[value] = code
    return code


# how RowDecoder makes a column's value from its stored form
_MAKE_STORED = 0  # the stored value itself: an integer, double, string or boolean
_MAKE_DATE = 1  # a date from its day number
_MAKE_DECIMAL = 2  # a Decimal from its units at the column's scale (or, wide, their text)
_MAKE_HUGEINT = 3  # an int from its decimal text
_MAKE_TIMESTAMP = 4  # a datetime from its microseconds since 1970


def _make_of(t: SqlType) -> int:
    if t.kind == "DATE":
        return _MAKE_DATE
    if t.kind == "DECIMAL":
        return _MAKE_DECIMAL
    if t.kind == "HUGEINT":
        return _MAKE_HUGEINT
    if t.kind == "TIMESTAMP":
        return _MAKE_TIMESTAMP
    return _MAKE_STORED


class RowDecoder:
    """Stored keys back into rows, one compiled pass over a key's bytes where they lie (a
    store's arena: no copy of the key first) that reads each value as its column's type
    wrote it (:class:`RowEncoder`) and makes it the column's Python value at once.  In
    the ``shared`` columns each value is replaced by the first equal one this decoder
    made, so that rows read in bulk hold one object per distinct value of such a column (a
    view built over a table keeps one date object per day, not one per row).  Reading a
    TPC-H line item took about 31k instructions when the key was copied out, unpacked
    into a list of stored values and converted by a generated lambda (git 1834dda)."""

    def __init__(self, encoder: RowEncoder, columns: list[tuple[str, SqlType]],
                 shared: frozenset[int] = frozenset(), read: frozenset[int] | None = None):
        self.width = len(columns)
        self.kinds = encoder.kinds
        self.strings = encoder.strings  # the dictionaries grow with the encoder's
        self.makes = array("i", [_make_of(t) for _, t in columns])
        self.scales = tuple(t.scale for _, t in columns)
        self.shares = [{} if i in shared else None for i in range(len(columns))]
        # columns whose values are stepped over, not made (None in the row): a reader that
        # reads only the others (``RowStore.reading``)
        self.skips = array("B", [read is not None and i not in read
                                 for i in range(len(columns))])
        # a double's 8 bytes become its value through these two views of one slot (no
        # struct call); compiled, nothing else runs between the write and the read
        double = array("d", [0.0])
        self.double_slot = double
        self.double_bits = memoryview(double).cast("B").cast("Q")

    def decode(self, key: bytes) -> tuple:
        """The row stored as ``key``."""
        return self.decode_at(key, 0)

    def decode_at(self, data, pos: int) -> tuple:
        """The row whose key starts at ``data[pos]`` (``data``: a key, or an arena)."""
        width = self.width
        values = [None] * width
        nulls = pos
        pos += (width + 7) >> 3
        for k in range(width):
            if data[nulls + (k >> 3)] & (1 << (k & 7)):
                continue
            kind = self.kinds[k]
            skip = self.skips[k]
            if kind == _STORE_DOUBLE:
                if skip:
                    pos += 8
                    continue
                u = 0
                for j in range(8):  # little-endian
                    part = data[pos + j]  # a 64-bit integer before it is shifted
                    u |= part << (8 * j)
                pos += 8
                self.double_bits[0] = u
                d = self.double_slot[0]
                value = d if d == d else math.nan  # one NaN (types.canonical_float)
            elif kind == _STORE_BOOLEAN:
                value = data[pos] != 0
                pos += 1
                if skip:
                    continue
            else:
                # a varint, read as KeyTable._start reads a key's length: written out in
                # both loops, as a function returning the value and the position after it
                # would be a tuple per value here
                u = 0
                shift = 0
                part = data[pos]
                pos += 1
                while part >= 128:
                    u |= (part & 127) << shift
                    shift += 7
                    part = data[pos]
                    pos += 1
                u |= part << shift
                if kind == _STORE_STRING:
                    if u & 1:  # a code of the column's dictionary: one object already
                        if not skip:
                            values[k] = self.strings[k][u >> 1]
                        continue
                    else:
                        n = u >> 1
                        if skip:
                            pos += n
                            continue
                        value = bytes(data[pos:pos + n]).decode("utf-8", "surrogatepass")
                        pos += n
                elif kind == _STORE_WIDE:
                    n = u
                    if skip:
                        pos += n
                        continue
                    value = bytes(data[pos:pos + n]).decode("ascii")
                    pos += n
                elif skip:
                    continue
                else:
                    n = u >> 1
                    value = -n - 1 if u & 1 else n
            share = self.shares[k]
            if share is not None:
                known = share.get(value)
                if known is not None:
                    values[k] = known
                    continue
                key = value
            make = self.makes[k]
            if make == _MAKE_DATE:
                value = _fromordinal(value)
            elif make == _MAKE_DECIMAL:
                value = Decimal(value).scaleb(-self.scales[k], WIDE_CONTEXT)
            elif make == _MAKE_HUGEINT:
                value = int(value)
            elif make == _MAKE_TIMESTAMP:
                value = _EPOCH + value * _MICROSECOND
            if share is not None:
                share[key] = value
            values[k] = value
        return tuple(values)


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
    """Whether a column's stored integers may exceed 64 bits."""
    return t.kind == "HUGEINT" or (t.kind == "DECIMAL" and (t.precision or 38) > 18)


class RowStore:
    """row -> multiplicity for one table; rows go in and come out as tuples.

    The keys are held by a :class:`~upkeep.key_table.KeyTable` (one arena, no object per
    row).  A row is looked up by writing its key into the encoder's scratch buffer and
    finding it there; the entry a check found is remembered (the last row looked up, and a
    batch's deletes by ``checked_count``) for the change that applies it, so a delete is
    encoded once for its check and its apply."""

    def __init__(self, columns: list[tuple[str, SqlType]], encoder: RowEncoder | None = None,
                 table: KeyTable | None = None):
        """``encoder``, ``table``: another store's encoder, and a table of keys it wrote
        (:meth:`copy`)."""
        self._columns = columns
        self._encoder = encoder if encoder is not None else RowEncoder(columns)
        self._table = table if table is not None else KeyTable()
        self._encode = self._encoder.encode
        self._decode = RowDecoder(self._encoder, columns).decode
        # the last row looked up and found, its entry and the table's epoch then
        self._last_row: tuple | None = None
        self._last_entry = -1
        self._last_epoch = 0
        # id(row) -> (row, entry, epoch) of the rows a batch's check found
        # (``checked_count``), for the ``add`` that applies them
        self._checked: dict[int, tuple[tuple, int, int]] = {}
        self.encodes = 0  # rows encoded so far (an operation count, for tests)

    def _writer(self) -> RowEncoder:
        """The encoder, or a twin of it if it is busy (entered by another thread)."""
        encoder = self._encoder
        return encoder._twin() if encoder.busy else encoder

    def _find(self, row: tuple) -> int:
        """The entry holding ``row``, or -1."""
        encoder = self._writer()
        encoder.busy = True
        try:
            n = encoder._write_into(row)
            self.encodes += 1
            return self._table.find(encoder.view[:n])
        finally:
            encoder.busy = False

    def _remembered(self, row: tuple) -> int:
        """The entry a check found for this very tuple, if it still holds that row; else
        -1."""
        table = self._table
        if row is self._last_row:
            e = self._last_entry
            epoch = self._last_epoch
        elif self._checked:
            hit = self._checked.pop(id(row), None)
            if hit is None or hit[0] is not row:
                return -1
            e = hit[1]
            epoch = hit[2]
        else:
            return -1
        if epoch != table.epoch or table.weight_at(e) < 0:  # compacted, or since removed
            return -1
        return e

    def __len__(self) -> int:
        return self._table.live - self._table.zeros

    def get(self, row: tuple, default: int = 0) -> int:
        """How many times the table holds ``row``."""
        e = self._find(row)
        if e < 0:
            return default
        self._last_row, self._last_entry, self._last_epoch = row, e, self._table.epoch
        return self._table.weight_at(e)

    def checked_count(self, row: tuple) -> int:
        """:meth:`get`, keeping the entry found for the :meth:`add` of this same tuple that
        applies it (until :meth:`forget`): a batch is checked when staged and applied at
        commit, and its rows' encoding is most of either."""
        e = self._find(row)
        if e < 0:
            return 0
        if len(self._checked) < _CHECKED_MAX:
            self._checked[id(row)] = (row, e, self._table.epoch)
        return self._table.weight_at(e)

    def forget(self) -> None:
        """Drop the entries :meth:`checked_count` kept (``Table.apply`` calls it: a rejected
        batch's, at most ``_CHECKED_MAX``, go with the next batch applied)."""
        self._checked.clear()
        self._last_row = None

    def key(self, row: tuple) -> object:
        """The stored form of ``row``: equal rows give equal keys (also with NaN)."""
        self.encodes += 1
        return self._encode(row)

    def count(self, key: object) -> int:
        """How many times the table holds the row stored as ``key``."""
        return self._table.get(key, 0)

    def row(self, key: object) -> tuple:
        """The row of a stored key."""
        return self._decode(key)

    def keys(self) -> Iterator[object]:
        table = self._table
        return (table.key_at(e) for e in table.entries() if table.weight_at(e))

    def add(self, row: tuple, weight: int, keep_place: bool = False) -> None:
        """Change the multiplicity of ``row`` by ``weight`` (the caller checked it stays >= 0).

        ``keep_place``: a row this takes to 0 stays where it is, at multiplicity 0 (read as
        absent), so that adding it back puts it where it was, not last.  A what-if deletes
        rows and adds them back (``Committer.hypothetical``), and DuckDB reads a table in
        the order it holds its rows: a row that moved would change which of two tied rows a
        query or a view made later picks."""
        table = self._table
        e = self._remembered(row)
        if e >= 0:
            table.change(e, weight, keep_place)
            return
        encoder = self._writer()
        encoder.busy = True
        try:
            n = encoder._write_into(row)
            self.encodes += 1
            table.add(encoder.view[:n], weight, keep_place)
        finally:
            encoder.busy = False

    def takes_arrow(self) -> bool:
        """Whether :meth:`keys_of` writes this store's rows: every column of a kind
        :mod:`upkeep.arrow_keys` writes."""
        encoder = self._encoder
        return all(encoder.kinds[k] in _ARROW_KINDS for k in range(encoder.width))

    def keys_of(self, part):
        """The keys of ``part``'s rows (Arrow data of this table's columns, in order, of
        their own types), written straight from its columns with this store's encoder's
        dictionaries (:func:`upkeep.arrow_keys.encode_part`); None when a value has no
        Python form."""
        encoder = self._encoder
        kinds = [_ARROW_KINDS[encoder.kinds[k]] for k in range(encoder.width)]
        codes, strings = encoder.codes, encoder.strings

        def new_code(k: int, value: str) -> bool:
            if len(codes[k]) >= _DICTIONARY_MAX:
                return False
            _new_code(codes[k], strings[k], value)
            return True

        return encode_part(part, kinds, strings, new_code)

    def first_held(self, keys) -> int:
        """The place in ``keys`` (an :class:`upkeep.arrow_keys.EncodedKeys` this store's
        encoder's dictionaries wrote) of the first key this store holds, or -1: a bulk
        insert's PRIMARY KEY values checked against the table's (``Table.check_new_keys``)
        without a tuple encoded per row."""
        table = self._table
        data, starts, ends = keys.data, keys.starts, keys.ends
        for i in range(len(starts)):
            e = table.find(data[starts[i]:ends[i]])
            if e >= 0 and table.weight_at(e) > 0:
                return i
        return -1

    def row_at(self, keys, i: int) -> tuple:
        """The row of the key at place ``i`` of ``keys`` (as :meth:`first_held`)."""
        return self._decode(bytes(keys.data[keys.starts[i]:keys.ends[i]]))

    def rows_of(self, keys) -> list[tuple]:
        """The rows of ``keys`` (an :class:`upkeep.arrow_keys.EncodedKeys` this store's
        encoder's dictionaries wrote), in order: a staged bulk insert's rows, for a later
        reader of its transaction."""
        decoder = RowDecoder(self._encoder, self._columns)
        data, starts = keys.data, keys.starts
        return [decoder.decode_at(data, starts[i]) for i in range(len(starts))]

    def reserve_keys(self, parts: list) -> None:
        """Room for the keys of ``parts`` (:class:`upkeep.arrow_keys.EncodedKeys`) in the
        key table, made once before they are added (:meth:`KeyTable.reserve`)."""
        count = size = 0
        for keys in parts:
            starts, ends = keys.starts, keys.ends
            count += len(starts)
            for i in range(len(starts)):  # (keys lie apart in their buffer: each row has
                size += ends[i] - starts[i]  # room for the widest, so each is counted)
        self._table.reserve(count, size)

    def add_parts(self, parts: list, weight: int) -> None:
        """Add ``weight`` to the multiplicity of each key of ``parts`` (a bulk insert's
        :class:`upkeep.arrow_keys.EncodedKeys`, in order).  Added (``weight`` above 0), the
        room for them is made at once first and what they did not take (repeated rows) is
        given back after (:meth:`KeyTable.reserve`, :meth:`KeyTable.settle`)."""
        if weight <= 0:
            for keys in parts:
                self.add_keys(keys, weight)
            return
        self.reserve_keys(parts)
        try:
            for keys in parts:
                self.add_keys(keys, weight)
        finally:  # also when adding fails part way: the unused room is not kept
            self._table.settle()

    def add_keys(self, keys, weight: int) -> None:
        """Add ``weight`` to the multiplicity of each key of ``keys`` (an
        :class:`upkeep.arrow_keys.EncodedKeys` this store's encoder's dictionaries wrote),
        in order: a bulk insert's rows, written straight from Arrow columns."""
        table = self._table
        data, starts, ends = keys.data, keys.starts, keys.ends
        for i in range(len(starts)):
            table.add(data[starts[i]:ends[i]], weight)

    def copy(self) -> RowStore:
        """Another store holding the same rows (their keys copied, not encoded again): a
        scratch table as it is now (what-if, ``Connection._hypothetical``)."""
        return type(self)(self._columns, self._encoder, self._table.copy(drop_zeros=True))

    def items(self, read: frozenset[int] | None = None) -> Iterator[tuple[tuple, int]]:
        """Every distinct row with its multiplicity, decoded (repeated values shared), a
        chunk of entries at a time; with ``read``, only the columns at those positions are
        made, the others are None."""
        decoder = self._bulk_decoder(read)
        table = self._table
        e, end, epoch = 0, table.used, table.epoch
        while e < end:
            if table.epoch != epoch:  # compacted since: entries moved, the arena shrank
                raise RuntimeError("a table's rows changed while they were being read")
            rows, e = self._decoded(decoder, e, end, 1, _DECODE_CHUNK)
            yield from rows

    def _decoded(self, decoder: RowDecoder, start: int, end: int, step: int, limit: int
                 ) -> tuple[list[tuple[tuple, int]], int]:
        """The rows of every ``step``-th of ``limit`` entries from entry ``start`` (before
        the arena offset ``end``) held at least once, with their multiplicities, decoded
        where their keys lie in the arena; and the entry after the last looked at."""
        table = self._table
        out = []
        e = start
        seen = 0
        while e < end and seen < limit:
            following = table.next_entry(e)
            if seen % step == 0:
                n = table.weight_at(e)
                if n > 0:  # not removed (-1), not kept in place at 0
                    out.append((decoder.decode_at(table.arena_view, table._start(e)), n))
            seen += 1
            e = following
        return out, e

    def __iter__(self) -> Iterator[tuple]:
        return (row for row, _ in self.items())

    def _bulk_decoder(self, read: frozenset[int] | None = None) -> RowDecoder:
        """A decoder for reading the whole store (the columns at ``read``, or all), sharing
        one object per value in columns whose values repeat (in a sample of the rows: the
        dates, flags and categories of a fact table), so that what reads every row (a
        view's build) keeps a value once, not once per row: a TPC-H line item's tuple in a
        view shrinks by ~300 bytes."""
        size = len(self)
        if size < _SHARE_MIN_ROWS:
            return RowDecoder(self._encoder, self._columns, read=read)
        table = self._table
        entries = table.count  # removed ones and ones kept at 0 included
        step = max(1, entries // _SHARE_SAMPLE) | 1  # odd: not in step with every other
        sample = [row for row, _ in self._decoded(
            RowDecoder(self._encoder, self._columns, read=read), 0, table.used, step,
            entries)[0]]
        shared = frozenset(i for i in range(len(self._columns))
                           if (read is None or i in read)
                           and len({r[i] for r in sample}) <= _SHARE_RATIO * len(sample))
        return RowDecoder(self._encoder, self._columns, shared if sample else frozenset(),
                          read)

    def reading(self, read: frozenset[int]) -> RowStore | PartialRows:
        """The rows as a reader of the columns at ``read`` alone sees them (the others
        None), or the store itself when that is all of them."""
        if read >= frozenset(range(len(self._columns))):
            return self
        return PartialRows(self, read)

    def as_dict(self) -> dict[tuple, int]:
        """The rows as a plain Z-set (a copy)."""
        return dict(self.items())


class PartialRows:
    """A store's rows for a reader that reads only some of their columns: an atom's source
    in a view's build, whose leaf reads a few columns of each row and keeps nothing else
    (``Core.atom_reads``, ``operators.rows_read``).  The other columns are stepped over in the keys, not made
    into values, and are None in the rows: building QH over TPC-H's line items made 16
    values a row where it reads 2."""

    def __init__(self, store: RowStore, read: frozenset[int]):
        self.store = store
        self.read = read

    def __len__(self) -> int:
        return len(self.store)

    def items(self) -> Iterator[tuple[tuple, int]]:
        return self.store.items(self.read)


class TupleStore(RowStore):
    """The store of a table with a column type the encoder does not write (TIMESTAMP):
    rows are their own keys, in a dict, behind the same interface."""

    def __init__(self, columns: list[tuple[str, SqlType]], counts: dict | None = None):
        self._columns = columns
        self._counts: dict[tuple, int] = counts if counts is not None else {}
        self._zeros = sum(1 for n in self._counts.values() if not n)
        self._checked = {}
        self.encodes = 0

    def __len__(self) -> int:
        return len(self._counts) - self._zeros

    def get(self, row: tuple, default: int = 0) -> int:
        return self._counts.get(row, default)

    def checked_count(self, row: tuple) -> int:
        return self._counts.get(row, 0)

    def forget(self) -> None:
        pass

    def key(self, row: tuple) -> object:
        return row

    def count(self, key: object) -> int:
        return self._counts.get(key, 0)

    def row(self, key: object) -> tuple:
        return key

    def keys(self) -> Iterator[object]:
        return (row for row, n in self._counts.items() if n)

    def add(self, row: tuple, weight: int, keep_place: bool = False) -> None:
        counts = self._counts
        old = counts.get(row)
        n = (old or 0) + weight
        if n:
            counts[row] = n
            if old == 0:
                self._zeros -= 1
        elif keep_place:
            if old:
                counts[row] = 0
                self._zeros += 1
        elif counts.pop(row, None) == 0:
            self._zeros -= 1

    def takes_arrow(self) -> bool:
        return False

    def copy(self) -> RowStore:
        return TupleStore(self._columns, {k: n for k, n in self._counts.items() if n})

    def items(self, read: frozenset[int] | None = None) -> Iterator[tuple[tuple, int]]:
        return ((row, n) for row, n in self._counts.items() if n)  # rows as they are

    def reading(self, read: frozenset[int]) -> RowStore:
        return self  # its rows are made already

    def __iter__(self) -> Iterator[tuple]:
        return self.keys()


def row_store(columns: list[tuple[str, SqlType]]) -> RowStore:
    """The store of a table of these columns: keys in a :class:`KeyTable` when the encoder
    writes every column's type, else the rows themselves in a dict."""
    if any(t.kind not in _ENCODED for _, t in columns):
        return TupleStore(columns)
    return RowStore(columns)
