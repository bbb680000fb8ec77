# cython: boundscheck=False, wraparound=False
# (compiled without index checks: encode_part sizes each row's room for its widest key)
"""Rows of typed Arrow data written as a row store's keys a column at a time.

A bulk insert of Arrow data (``db.insert(table, arrow_table)``, the way tables are loaded)
took each row through Python: a tuple of boxed values, a hash of that tuple for the batch's
dict, then :class:`~upkeep.row_store.RowEncoder` writing the key value by value (about 3.7
us a TPC-H line item, where DuckDB loads one in about 0.4). When the data already has
the table's column types (:func:`upkeep.rows.arrow_typed`) every value is valid as it is,
so :func:`encode_part` writes the keys straight from the Arrow columns: one compiled loop
per column over its values as C integers, doubles or dictionary indexes, into a buffer
holding every row's key, byte for byte the key ``RowEncoder`` writes for the same row
(string codes included: a column's distinct strings get their codes in the order of their
first row, as row by row). :meth:`upkeep.row_store.RowStore.keys_of` calls it with the
store's encoder's kinds and dictionaries, and :meth:`~upkeep.row_store.RowStore.add_keys`
adds the keys.

Only a table no view reads takes this path (the commit makes the batch's rows as tuples
otherwise: a view's step reads them), and only columns of the kinds written here: integers
up to 64 bits, DOUBLE, DATE, TIMESTAMP, DECIMAL of up to 18 digits, VARCHAR, BOOLEAN.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: the day number (``datetime.date.toordinal``) of 1970-01-01, Arrow's day 0
_EPOCH_DAY = 719_163
#: the day numbers Python's dates reach (years 1 to 9999): a value outside has no Python
#: date, and the row-by-row path names its column (``rows._python_values``)
_FIRST_DAY, _LAST_DAY = 1, 3_652_059
#: the microseconds since 1970 of the first and last instants of those years
_FIRST_MICROS = (_FIRST_DAY - _EPOCH_DAY) * 86_400_000_000
_LAST_MICROS = (_LAST_DAY - _EPOCH_DAY + 1) * 86_400_000_000 - 1
#: the rows of a string column's first window of new strings (_string_column)
_WINDOW = 4_096


class EncodedKeys:
    """The keys of a part's rows, one after another in ``data``: row i's key is
    ``data[starts[i]:ends[i]]``."""

    __slots__ = ("data", "starts", "ends")

    def __init__(self, data: memoryview, starts: memoryview, ends: memoryview):
        self.data = data
        self.starts = starts
        self.ends = ends

    def __len__(self) -> int:
        return len(self.starts)


def encode_part(part: pa.Table, kinds: list[str], strings: list[list[str]],
                new_code: Callable[[int, str], bool]) -> EncodedKeys | None:
    """The keys of ``part``'s rows, whose columns are a row store's, in order, of their
    own Arrow types: each column's kind ("integer", "double", "date", "timestamp",
    "decimal", "string" or "boolean", as :class:`upkeep.row_store.RowEncoder` stores it), and for a string column its coded
    strings, in code order (``strings[k]``), and ``new_code(k, s)`` giving the new string
    s the next code, False when the column's dictionary is full.  None when a value has
    no Python form (a date past year 9999, a string that is not UTF-8): the row-by-row
    path then names it."""
    n = part.num_rows
    width = len(kinds)
    nulls = (width + 7) >> 3
    part = part.combine_chunks()
    columns: list[tuple] = []
    room = np.full(n, nulls + 10 * width, dtype=np.longlong)  # a varint's most, per column
    for k in range(width):
        column = part.column(k)
        if column.num_chunks > 1:  # strings past 2 GB, which Arrow keeps in several chunks
            return None
        array = column.chunk(0) if column.num_chunks else pa.array([], column.type)
        valid = (np.ones(n, dtype=np.uint8) if not array.null_count
                 else array.is_valid().to_numpy(zero_copy_only=False).astype(np.uint8))
        kind = kinds[k]
        if kind == "string":
            got = _string_column(array, strings[k], lambda value, k=k: new_code(k, value))
            if got is None:
                return None
            room += got[2]
            columns.append((kind, valid, *got))
        else:
            values = _number_column(kind, array)
            if values is None:
                return None
            columns.append((kind, valid, values))
    starts = np.zeros(n, dtype=np.longlong)
    if n:
        np.cumsum(room[:n - 1], out=starts[1:])
    # the writers read and write through memoryviews: typed memoryviews compiled, and
    # Python integers interpreted (numpy's own integers would overflow a varint's shifts)
    data = memoryview(np.zeros(int(room.sum()), dtype=np.uint8))
    ends = memoryview(starts + nulls)
    starts = memoryview(starts)
    for k, column in enumerate(columns):
        kind, valid, *values = column
        values = [memoryview(v) for v in values]
        if kind == "string":
            _write_strings(data, starts, ends, memoryview(valid), k, *values)
        elif kind == "double":
            _write_doubles(data, starts, ends, memoryview(valid), k, *values)
        elif kind == "boolean":
            _write_booleans(data, starts, ends, memoryview(valid), k, *values)
        else:
            _write_integers(data, starts, ends, memoryview(valid), k, *values)
    return EncodedKeys(data, starts, ends)


def _number_column(kind: str, array: pa.Array) -> np.ndarray | None:
    """A non-string column's values as the key stores them (a NULL's slot as 0): int64
    for integers, day numbers and a decimal's units, the IEEE 754 bits of doubles as
    uint64, booleans as uint8."""
    if kind == "double":
        values = pc.fill_null(array, 0.0).to_numpy(zero_copy_only=False) + 0.0  # -0.0 -> 0.0
        values[np.isnan(values)] = math.nan  # every NaN as the one the encoder writes
        return values.view(np.ulonglong)
    if kind == "boolean":
        return pc.fill_null(array, False).to_numpy(zero_copy_only=False).astype(np.uint8)
    if kind == "date":
        days = pc.fill_null(array.cast(pa.int32()), 0).to_numpy().astype(np.longlong) + _EPOCH_DAY
        valid = array.is_valid().to_numpy(zero_copy_only=False)
        if len(days) and ((days[valid] < _FIRST_DAY).any() or (days[valid] > _LAST_DAY).any()):
            return None
        return days
    if kind == "timestamp":  # microseconds since 1970, as the encoder writes them
        micros = pc.fill_null(array.cast(pa.int64()), 0).to_numpy().astype(np.longlong)
        valid = array.is_valid().to_numpy(zero_copy_only=False)
        if len(micros) and ((micros[valid] < _FIRST_MICROS).any()
                            or (micros[valid] > _LAST_MICROS).any()):
            return None
        return micros
    if kind == "decimal":  # a decimal128's low 64 bits: its units (18 digits fit)
        words = np.frombuffer(array.buffers()[1], dtype=np.longlong)[
            2 * array.offset:2 * (array.offset + len(array))]
        units, high = words[0::2].copy(), words[1::2]
        valid = array.is_valid().to_numpy(zero_copy_only=False)
        if (high[valid] != (units[valid] >> 63)).any():  # more than 64 bits: malformed
            return None
        units[~valid] = 0
        return units
    return pc.fill_null(array, 0).to_numpy().astype(np.longlong)


def _string_column(array: pa.Array, strings: list[str],
                   new_code: Callable[[str], bool]) -> tuple | None:
    """A string column as (each row's code or -1, and where the UTF-8 bytes of a row
    without a code lie in ``text``: offsets and lengths).  Codes go to new strings, in the
    order of the rows that first hold them, while the column's dictionary has room, as
    :meth:`upkeep.row_store.RowEncoder._write_into` gives them row by row; then every row
    is looked up among the coded strings in one vectorised pass, and the others are
    written out from the Arrow buffers, with no Python string made.  None for bytes that
    are not UTF-8."""
    try:
        array.validate(full=True)  # UTF-8, as the row-by-row path's str needs
    except pa.ArrowInvalid:
        return None
    coded = set(strings)
    start, size, room = 0, _WINDOW, True
    while room and start < len(array):
        # the strings new to the dictionary, in the order of their first row, from windows
        # of rows twice as long each time: a column of many distinct strings fills the
        # dictionary in its first window, one of few is read in a few passes of Arrow's
        for value in pc.unique(array.slice(start, size)).to_pylist():
            if value is not None and value not in coded:
                room = new_code(value)
                if not room:
                    break
                coded.add(value)
        start += size
        size *= 2
    codes = _codes(array, strings)
    bounds = np.frombuffer(array.buffers()[1], dtype=np.int32)[
        array.offset:array.offset + len(array) + 1].astype(np.longlong)
    offsets = bounds[:len(bounds) - 1]
    lengths = bounds[1:] - offsets
    lengths[codes >= 0] = 0
    data = array.buffers()[2]
    text = (np.frombuffer(data, dtype=np.uint8) if data is not None and data.size
            else np.zeros(1, dtype=np.uint8))
    return codes, offsets, lengths, text


def _codes(array: pa.Array, strings: list[str]) -> np.ndarray:
    """Each row's code among ``strings`` (a string's code is its place there), or -1."""
    found = pc.index_in(array, value_set=pa.array(strings, pa.string()))
    return pc.fill_null(found, -1).to_numpy().astype(np.longlong)


def _write_integers(data: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                    valid: np.ndarray, k: int, values: np.ndarray) -> None:
    """Column k's integers (day numbers, a decimal's units) as zigzag varints (7 bits a
    byte, the low ones first), or its bit in the NULL bitmap."""
    for i in range(len(starts)):
        if not valid[i]:
            data[starts[i] + (k >> 3)] |= 1 << (k & 7)
            continue
        n = values[i]
        if n < 0:  # zigzag: 0, -1, 1, -2 ... as 0, 1, 2, 3 ...
            u = -(n + 1)
            u = (u << 1) | 1
        else:
            u = n
            u = u << 1
        pos = ends[i]
        while u >= 128:
            data[pos] = (u & 127) | 128
            pos += 1
            u >>= 7
        data[pos] = u
        ends[i] = pos + 1


def _write_doubles(data: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                   valid: np.ndarray, k: int, bits: np.ndarray) -> None:
    """Column k's doubles as their 8 bytes, little-endian."""
    for i in range(len(starts)):
        if not valid[i]:
            data[starts[i] + (k >> 3)] |= 1 << (k & 7)
            continue
        u = bits[i]
        pos = ends[i]
        for j in range(8):
            data[pos + j] = u & 255
            u >>= 8
        ends[i] = pos + 8


def _write_booleans(data: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                    valid: np.ndarray, k: int, values: np.ndarray) -> None:
    """Column k's booleans, a byte each."""
    for i in range(len(starts)):
        if not valid[i]:
            data[starts[i] + (k >> 3)] |= 1 << (k & 7)
            continue
        data[ends[i]] = 1 if values[i] else 0
        ends[i] += 1


def _write_strings(data: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                   valid: np.ndarray, k: int, codes: np.ndarray, offsets: np.ndarray,
                   lengths: np.ndarray, text: np.ndarray) -> None:
    """Column k's strings: a code as an odd varint, or the UTF-8 length as an even one
    and the bytes."""
    for i in range(len(starts)):
        if not valid[i]:
            data[starts[i] + (k >> 3)] |= 1 << (k & 7)
            continue
        code = codes[i]
        n = 0
        if code >= 0:
            u = code
            u = (u << 1) | 1
        else:
            n = lengths[i]
            u = n
            u = u << 1
        pos = ends[i]
        while u >= 128:
            data[pos] = (u & 127) | 128
            pos += 1
            u >>= 7
        data[pos] = u
        pos += 1
        first = offsets[i]
        for b in range(n):
            data[pos + b] = text[first + b]
        ends[i] = pos + n
