"""Value hashes that every process agrees on, for placing rows in partitions and keys.

Compiled by Cython (setup.py): a bulk load into Spark's keyed state hashes every loaded
row's values (``key_hash``), a fifth of the load's Python time when interpreted.
"""

from __future__ import annotations

import datetime as dt
import zlib
from decimal import Decimal

MASK = 0x7FFFFFFFFFFFFFFF


def stable_hash(value: object) -> int:
    """A hash that is the same in every process (Python's str hash is salted per process)
    and equal for values SQL compares equal (1, 1.0 and Decimal('1.00'))."""
    kind = type(value)
    if kind is int:
        return hash(value) & MASK
    if kind is str:
        return zlib.crc32(value.encode())
    if value is None:
        return 0
    if isinstance(value, float) and value != value:
        return 1  # NaN: Python hashes NaNs by identity
    if isinstance(value, (bool, int, float, Decimal)):
        return hash(value) & MASK
    if isinstance(value, dt.datetime):
        return int(value.timestamp() * 1_000_000) & MASK
    if isinstance(value, dt.date):
        return value.toordinal()
    return zlib.crc32(repr(value).encode())


def key_hash(values: tuple) -> int:
    """One long for a tuple of values, equal in every process for values SQL calls equal,
    its low bits mixed (MurmurHash3's 64-bit finaliser): keys are taken modulo a power of
    two, and without the mix the parity of consecutive integers would fill half the keys."""
    h = 17
    for v in values:
        h = (h * 1_000_003 ^ stable_hash(v)) & MASK
    h = ((h ^ (h >> 33)) * 0xFF51AFD7ED558CCD) & 0xFFFFFFFFFFFFFFFF
    h = ((h ^ (h >> 33)) * 0xC4CEB9FE1A85EC53) & 0xFFFFFFFFFFFFFFFF
    return (h ^ (h >> 33)) & MASK
