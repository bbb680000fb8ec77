"""Exact accumulation of floating-point sums.

A maintained ``SUM`` over doubles sees ``+x`` and later ``-x`` for the same value; adding
them to a float accumulator drifts.  Every finite double is ``m * 2**e`` with
``e >= -1074``, so scaling by ``2**1074`` maps doubles to integers exactly and integer
addition never rounds.  Converting back divides two Python ints, which is correctly
rounded.  (The LFTJ paper, section 2.3.4, asks for the same property: exact floating sums.)

Non-finite values are counted in digits of base ``2**2200`` above the finite part (which
stays below half a digit for any sum of fewer than ``2**100`` doubles): ``+inf`` is one
unit of the first digit, ``-inf`` of the second, NaN of the third.  The encoding is still
plain integer addition (and scaling by join multiplicities), so a NaN that is deleted again
leaves no trace; the value follows IEEE / DuckDB: any NaN, or both infinities, is NaN;
otherwise an infinity wins; a finite sum beyond the double range is an infinity.
"""

from __future__ import annotations

import math

_SHIFT = 1074
_SCALE = 1 << _SHIFT
_BASE = 1 << 2200
_HALF = _BASE >> 1
_POS_INF, _NEG_INF, _NAN = _BASE, _BASE**2, _BASE**3


def float_to_exact(x: float) -> int:
    """The double ``x`` as an integer count of ``2**-1074`` units (exact)."""
    try:
        num, den = x.as_integer_ratio()
    except (OverflowError, ValueError):  # inf or NaN: counted in their own digit
        return _NAN if math.isnan(x) else _POS_INF if x > 0 else _NEG_INF
    return num * (_SCALE // den)


def _finite_and_special(n: int) -> tuple[int, float | None]:
    """An exact sum's finite part, and its value if a non-finite term decides it (else
    None).  Sums without one (the common case) take one range check."""
    if -_HALF <= n < _HALF:
        return n, None
    digits = []
    for _ in range(3):  # the finite part, then the counts of +inf and -inf; NaN is the rest
        digit = n % _BASE
        if digit >= _HALF:
            digit -= _BASE
        digits.append(digit)
        n = (n - digit) // _BASE
    finite, pos, neg = digits
    if n or (pos and neg):
        return finite, math.nan
    return finite, math.inf if pos else -math.inf if neg else None


def exact_to_float(n: int) -> float:
    """Inverse of :func:`float_to_exact` for a sum, correctly rounded."""
    finite, special = _finite_and_special(n)
    if special is not None:
        return special
    try:
        return finite / _SCALE
    except OverflowError:  # beyond the largest double, as DuckDB's SUM gives
        return math.copysign(math.inf, finite)


def exact_mean(n: int, count: int) -> float:
    """An exact sum divided by ``count``, correctly rounded."""
    finite, special = _finite_and_special(n)
    return special if special is not None else finite / (count << _SHIFT)
