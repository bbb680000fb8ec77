"""An order-independent fingerprint of a bag of integer rows: ``(rows, checksum)``.

``rows`` counts every row with its multiplicity; ``checksum`` sums, over the same
rows, ``h(row) = (sum_i x_i * P_i mod M)^2 mod M`` with one prime ``P_i`` per column
position and ``M = 2^31 - 1``.  The square makes ``h`` non-linear, so rows that
trade values between columns or between each other do not cancel out the way they
would in plain column sums.  The same number is computed three ways, which must
agree exactly:

* :func:`sql_select` - a DuckDB select list over a query's output columns;
* :func:`accumulator` - Python over ``(row, weight)`` pairs (upkeep's
  ``weighted_rows``);
* ``bench/theta/pathway_queries.py`` builds the same expression in Pathway.

Values must be non-negative integers below 2^31 (so every engine's ``%`` agrees and
``sum_i x_i * P_i`` fits in a signed 64-bit integer for up to 2^11 columns).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

PRIMES = (
    1000003, 1000033, 1000037, 1000039, 1000081, 1000099,
    1000117, 1000121, 1000133, 1000151, 1000159, 1000171,
)
MODULUS = 2**31 - 1

Fingerprint = dict[str, int]


def sql_select(columns: list[str]) -> str:
    """``count(*) AS rows, sum(h(row)) AS checksum`` over ``columns`` (DuckDB SQL)."""
    terms = " + ".join(f"CAST({c} AS BIGINT) * {p}" for c, p in zip(columns, PRIMES, strict=False))
    return (
        f"count(*) AS rows, "
        f"coalesce(sum((({terms}) % {MODULUS}) * (({terms}) % {MODULUS}) % {MODULUS}), 0) "
        f"AS checksum"
    )


def accumulator(width: int) -> Callable[[Iterable[tuple[tuple, int]]], Fingerprint]:
    """A function folding ``(row, weight)`` pairs of ``width`` columns into a fingerprint.

    The row hash is generated as straight-line code (about 1 microsecond per row).
    """
    if width > len(PRIMES):
        raise ValueError(f"at most {len(PRIMES)} columns")
    terms = " + ".join(f"r[{i}] * {PRIMES[i]}" for i in range(width)) or "0"
    src = (
        "def fold(pairs):\n"
        "    n = 0\n"
        "    cs = 0\n"
        "    for r, w in pairs:\n"
        f"        v = ({terms}) % {MODULUS}\n"
        f"        cs += w * (v * v % {MODULUS})\n"
        "        n += w\n"
        "    return {'rows': n, 'checksum': cs}\n"
    )
    namespace: dict = {}
    exec(compile(src, "<fingerprint>", "exec"), namespace)
    return namespace["fold"]


def row_hash(row: tuple) -> int:
    """``h(row)`` for one row (used by the Pathway runner's incremental fold)."""
    v = sum(x * p for x, p in zip(row, PRIMES, strict=False)) % MODULUS
    return v * v % MODULUS
