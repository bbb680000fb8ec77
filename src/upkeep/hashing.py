"""A value hash that every process agrees on, for placing rows in partitions."""

from __future__ import annotations

import datetime as dt
import zlib
from decimal import Decimal


def stable_hash(value: object) -> int:
    """A hash that is the same in every process (Python's str hash is salted per process)
    and equal for values SQL compares equal (1, 1.0 and Decimal('1.00'))."""
    if value is None:
        return 0
    if isinstance(value, str):
        return zlib.crc32(value.encode())
    if isinstance(value, float) and value != value:
        return 1  # NaN: Python hashes NaNs by identity
    if isinstance(value, (bool, int, float, Decimal)):
        return hash(value) & 0x7FFFFFFFFFFFFFFF
    if isinstance(value, dt.datetime):
        return int(value.timestamp() * 1_000_000) & 0x7FFFFFFFFFFFFFFF
    if isinstance(value, dt.date):
        return value.toordinal()
    return zlib.crc32(repr(value).encode())
