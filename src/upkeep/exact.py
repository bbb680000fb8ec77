"""Exact accumulation of floating-point sums.

A maintained ``SUM`` over doubles sees ``+x`` and later ``-x`` for the same value; adding
them to a float accumulator drifts.  Every finite double is ``m * 2**e`` with
``e >= -1074``, so scaling by ``2**1074`` maps doubles to integers exactly and integer
addition never rounds.  Converting back divides two Python ints, which is correctly
rounded.  (The LFTJ paper, section 2.3.4, asks for the same property: exact floating sums.)
"""

from __future__ import annotations

from .errors import Error

_SHIFT = 1074
_SCALE = 1 << _SHIFT


def float_to_exact(x: float) -> int:
    """The double ``x`` as an integer count of ``2**-1074`` units (exact)."""
    try:
        num, den = x.as_integer_ratio()
    except (OverflowError, ValueError) as exc:
        raise Error(f"cannot maintain a sum over the non-finite value {x!r}") from exc
    return num * (_SCALE // den)


def exact_to_float(n: int) -> float:
    """Inverse of :func:`float_to_exact`, correctly rounded."""
    return n / _SCALE
