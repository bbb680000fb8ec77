"""Exact accumulation of floating-point sums.

A maintained ``SUM`` over doubles sees ``+x`` and later ``-x`` for the same value; adding
them to a float accumulator drifts.  Every finite double is ``m * 2**e`` with
``e >= -1074``, so scaling by a power of two maps doubles to integers exactly and integer
addition never rounds.  Converting back divides two Python ints, which is correctly
rounded.  (The LFTJ paper, section 2.3.4, asks for the same property: exact floating sums.)

Two scales keep the integers small, since a maintained view stores one per group and
channel:

* a sum of doubles that are all multiples of ``2**-64`` (every double of magnitude at least
  ``2**-12``, and many smaller ones) is a plain ``int`` counting ``2**-64`` units: a price
  sum takes three 30-bit digits instead of the 37 a scale of ``2**1074`` needs;
* any other sum is a :class:`FineSum`, an int counting ``2**-1074`` units.  Arithmetic
  mixing the two scales moves to the fine one, and a result the coarse scale can hold goes
  back to it, so every value has one representation (equal sums compare and hash equal).

Non-finite values are counted in digits above the finite part (base ``2**2200`` at the
coarse scale, ``2**3300`` at the fine one: the finite part stays below half a digit for any
sum of fewer than ``2**100`` doubles): ``+inf`` is one unit of the first digit, ``-inf`` of
the second, NaN of the third.  The encoding is still plain integer addition (and scaling by
join multiplicities), so a NaN that is deleted again leaves no trace; the value follows
IEEE / DuckDB: any NaN, or both infinities, is NaN; otherwise an infinity wins; a finite sum
beyond the double range is an infinity.
"""

from __future__ import annotations

import math

_COARSE_SHIFT = 64
_FINE_SHIFT = 1074
_MOVE = _FINE_SHIFT - _COARSE_SHIFT
_COARSE_BASE = 1 << 2200
_FINE_BASE = 1 << 3300
_LOW_FINE_BITS = (1 << _MOVE) - 1
_POS_INF, _NEG_INF, _NAN = _COARSE_BASE, _COARSE_BASE**2, _COARSE_BASE**3
_COARSE_HALF = _COARSE_BASE >> 1  # a coarse sum within +-this is finite
_COARSE_NEG_HALF = -_COARSE_HALF
_COARSE_ONE = 1 << _COARSE_SHIFT
_COARSE_ONE_FLOAT = float(_COARSE_ONE)
_COARSE_UNIT_FLOAT = 1.0 / _COARSE_ONE_FLOAT  # 2**-64, exactly
_SCALED_LIMIT = 2.0**1000  # a scaled double below this is finite, and so is its sum
_WHOLE_FROM = 2.0**52  # every double of this magnitude or more is a whole number


def _split(n: int, base: int) -> tuple[int, int, int, int]:
    """An encoded sum's finite part and its counts of +inf, -inf and NaN."""
    half = base >> 1
    if -half <= n < half:
        return n, 0, 0, 0
    digits = []
    for _ in range(3):
        digit = n % base
        if digit >= half:
            digit -= base
        digits.append(digit)
        n = (n - digit) // base
    return digits[0], digits[1], digits[2], n


def _join(finite: int, pos: int, neg: int, nan: int, base: int) -> int:
    return finite + base * (pos + base * (neg + base * nan))


def _to_fine(n: int) -> int:
    """A coarse encoded sum at the fine scale."""
    finite, pos, neg, nan = _split(n, _COARSE_BASE)
    return _join(finite << _MOVE, pos, neg, nan, _FINE_BASE)


def _normal(n: int) -> int | FineSum:
    """A fine encoded sum as a coarse int when the coarse scale holds it exactly."""
    finite, pos, neg, nan = _split(n, _FINE_BASE)
    if finite & _LOW_FINE_BITS:
        return FineSum(n)
    return _join(finite >> _MOVE, pos, neg, nan, _COARSE_BASE)


def _fine(x: int | FineSum) -> int:
    return x.n if type(x) is FineSum else _to_fine(x)


class FineSum:
    """An exact sum at the fine scale (a count of ``2**-1074`` units); never zero, and
    never a value the coarse scale holds (those are plain ints)."""

    __slots__ = ("n",)

    def __init__(self, n: int):
        self.n = n

    def __add__(self, other: int | FineSum) -> int | FineSum:
        return _normal(self.n + _fine(other))

    __radd__ = __add__

    def __sub__(self, other: int | FineSum) -> int | FineSum:
        return _normal(self.n - _fine(other))

    def __rsub__(self, other: int) -> int | FineSum:
        return _normal(_fine(other) - self.n)

    def __neg__(self) -> FineSum:
        return FineSum(-self.n)

    def __mul__(self, k: int) -> int | FineSum:
        return FineSum(self.n * k) if k else 0

    __rmul__ = __mul__

    def __bool__(self) -> bool:
        return True

    def __eq__(self, other: object) -> bool:
        return type(other) is FineSum and other.n == self.n

    def __hash__(self) -> int:
        return hash(("FineSum", self.n))

    def __repr__(self) -> str:
        return f"FineSum({self.n})"


def float_to_exact(x: float) -> int | FineSum:
    """The double ``x`` as an exact sum of one term.

    A double scaled by ``2**64`` is exact (a power of two), so when the scaled value is an
    integer (``x`` a multiple of ``2**-64``: every price, quantity or rate) it is the coarse
    sum itself, found with one multiplication instead of ``as_integer_ratio`` and a shift
    (3k instructions a value on a maintained SUM)."""
    x = float(x)  # compiled, a C double already: as interpreted, an int argument too
    scaled = x * _COARSE_ONE_FLOAT
    # finite, far from overflowing, and a whole number of units: a double of magnitude
    # 2**52 or more is one (its last mantissa bit weighs at least 1), which spares the
    # remainder (glibc's fmod of a price scaled to 2**77 took 390 instructions)
    if -_SCALED_LIMIT < scaled < _SCALED_LIMIT and (
            scaled >= _WHOLE_FROM or scaled <= -_WHOLE_FROM or scaled % 1.0 == 0.0):
        return int(scaled)
    try:
        num, den = x.as_integer_ratio()
    except (OverflowError, ValueError):  # inf or NaN: counted in their own digit
        return _NAN if math.isnan(x) else _POS_INF if x > 0 else _NEG_INF
    shift = den.bit_length() - 1  # den is a power of two
    if shift <= _COARSE_SHIFT:
        return num << (_COARSE_SHIFT - shift)
    return FineSum(num << (_FINE_SHIFT - shift))


def _finite_and_special(total: int | FineSum) -> tuple[int, int, float | None]:
    """An exact sum's finite part, its scale (bits), and its value if a non-finite term
    decides it (else None)."""
    if type(total) is FineSum:
        finite, pos, neg, nan = _split(total.n, _FINE_BASE)
        shift = _FINE_SHIFT
    else:
        finite, pos, neg, nan = _split(total, _COARSE_BASE)
        shift = _COARSE_SHIFT
    if nan or (pos and neg):
        return finite, shift, math.nan
    return finite, shift, math.inf if pos else -math.inf if neg else None


def exact_to_float(total: int | FineSum) -> float:
    """Inverse of :func:`float_to_exact` for a sum, correctly rounded."""
    if type(total) is int and _COARSE_NEG_HALF <= total < _COARSE_HALF:
        try:  # a finite sum at the coarse scale: the common case, without splitting digits
            # rounded to a double once (float() rounds correctly), then scaled exactly:
            # a nonzero sum is at least 2**-64, far from the subnormals
            return float(total) * _COARSE_UNIT_FLOAT
        except OverflowError:  # beyond 2**1024 units: the division rounds it
            try:
                return total / _COARSE_ONE
            except OverflowError:
                return math.inf if total > 0 else -math.inf
    finite, shift, special = _finite_and_special(total)
    if special is not None:
        return special
    try:
        return finite / (1 << shift)
    except OverflowError:  # beyond the largest double, as DuckDB's SUM gives
        return math.inf if finite > 0 else -math.inf


def exact_mean(total: int | FineSum, count: int) -> float:
    """An exact sum divided by ``count``, correctly rounded."""
    finite, shift, special = _finite_and_special(total)
    return special if special is not None else finite / (count << shift)
