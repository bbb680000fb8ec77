"""The value format of durable state: log records and snapshot chunks as msgpack.

Reading a database directory must not run code (issue 18: pickle would run whatever a
changed file asks for), so records are msgpack (a well-kept C codec) with extension types
for what it lacks: tuples (rows, table keys), sets and frozensets, big integers (HUGEINT),
decimals, dates, times, timestamps (with their fold and their zone: a fixed offset, or an
IANA zone by its name), column types, and Arrow tables (a bulk insert's rows, as an Arrow
IPC stream, which reading does not run either).  Lists stay lists, so a record reads back as the
same Python value.  A value of any other type cannot be written: :func:`encode` raises
:class:`EncodingError` before anything reaches the disk.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from zoneinfo import ZoneInfo

import msgpack
import pyarrow as pa

from .errors import Error
from .types import SqlType

_TUPLE, _SET, _BIGINT, _DECIMAL, _DATE, _DATETIME, _TIME, _SQLTYPE, _FROZENSET = range(1, 10)
_ZONED = 10  # a datetime with a fold or an IANA zone: [iso text, fold, zone name or None]
_ARROW = 11  # an Arrow table (a bulk insert's rows, local/bulk_insert.py): an IPC stream


class EncodingError(Error):
    """A value that durable state cannot hold (e.g. an object in transaction metadata)."""


def _default(value: object) -> msgpack.ExtType:
    if isinstance(value, tuple):
        return msgpack.ExtType(_TUPLE, _pack(list(value)))
    if isinstance(value, frozenset):
        return msgpack.ExtType(_FROZENSET, _pack(list(value)))
    if isinstance(value, set):
        return msgpack.ExtType(_SET, _pack(list(value)))
    if type(value) is int:  # beyond 64 bits (msgpack's own ints end there)
        return msgpack.ExtType(_BIGINT, str(value).encode())
    if isinstance(value, Decimal):
        return msgpack.ExtType(_DECIMAL, str(value).encode())
    if isinstance(value, dt.datetime):
        return _datetime(value)
    if isinstance(value, dt.date):
        return msgpack.ExtType(_DATE, value.toordinal().to_bytes(4, "big"))
    if isinstance(value, dt.time):
        return msgpack.ExtType(_TIME, value.isoformat().encode())
    if isinstance(value, SqlType):
        return msgpack.ExtType(_SQLTYPE, _pack([value.kind, value.precision, value.scale]))
    if isinstance(value, pa.Table):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, value.schema) as writer:
            writer.write_table(value)
        return msgpack.ExtType(_ARROW, sink.getvalue().to_pybytes())
    raise EncodingError(f"a value of type {type(value).__name__} cannot be stored "
                        f"durably: {value!r:.80}")


def _datetime(value: dt.datetime) -> msgpack.ExtType:
    """A timestamp as ISO text, which holds a fixed offset; one with a fold or an IANA
    zone keeps them too (the zone by its name), any other zone cannot be stored."""
    zone = value.tzinfo
    if zone is None or type(zone) is dt.timezone:
        if not value.fold:
            return msgpack.ExtType(_DATETIME, value.isoformat().encode())
        name = None
    elif isinstance(zone, ZoneInfo) and zone.key is not None:
        name, value = zone.key, value.replace(tzinfo=None)
    else:
        raise EncodingError(f"a timestamp in time zone {zone!r:.60} cannot be stored "
                            f"durably: give it in a fixed offset or an IANA zone")
    return msgpack.ExtType(_ZONED, _pack([value.isoformat(), value.fold, name]))


def _pack(value: object) -> bytes:
    return msgpack.packb(value, default=_default, strict_types=True, use_bin_type=True)


def _ext(code: int, data: bytes) -> object:
    if code == _TUPLE:
        return tuple(_unpack(data))
    if code == _SET:
        return set(_unpack(data))
    if code == _FROZENSET:
        return frozenset(_unpack(data))
    if code == _BIGINT:
        return int(data)
    if code == _DECIMAL:
        return Decimal(data.decode())
    if code == _DATE:
        return dt.date.fromordinal(int.from_bytes(data, "big"))
    if code == _DATETIME:
        return dt.datetime.fromisoformat(data.decode())
    if code == _ZONED:
        text, fold, name = _unpack(data)
        value = dt.datetime.fromisoformat(text).replace(fold=fold)
        return value if name is None else value.replace(tzinfo=ZoneInfo(name))
    if code == _TIME:
        return dt.time.fromisoformat(data.decode())
    if code == _SQLTYPE:
        return SqlType(*_unpack(data))
    if code == _ARROW:
        try:
            return pa.ipc.open_stream(data).read_all()
        except pa.ArrowException as exc:
            raise ValueError(f"not an Arrow stream: {exc}") from None
    raise ValueError(f"unknown extension type {code}")


def _unpack(data: bytes) -> object:
    return msgpack.unpackb(data, ext_hook=_ext, strict_map_key=False, raw=False)


def encode(value: object) -> bytes:
    """``value`` as bytes; :class:`EncodingError` for what cannot be stored."""
    try:
        return _pack(value)
    except EncodingError:
        raise
    except (TypeError, ValueError, OverflowError) as exc:  # e.g. a lone surrogate in a str
        raise EncodingError(f"a value cannot be stored durably: {exc}") from None


def decode(data: bytes) -> object:
    """The value :func:`encode` wrote; ``ValueError`` for bytes it did not write."""
    try:
        return _unpack(data)
    except (ValueError, TypeError, KeyError, IndexError, OverflowError,
            msgpack.UnpackException) as exc:
        raise ValueError(f"not a record: {exc}") from None
