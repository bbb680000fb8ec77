"""GCQ1-GCQ8 in Pathway's Table API, and why they are cross joins there.

Pathway's ``join`` accepts equality conditions only (``left.x == right.y``).  An
inequality ``a < d`` can therefore only be written as a join on no condition (a cross
join) followed by ``filter``; every inserted tuple is paired with every tuple of the
other side before the filter drops about half of the pairs, so the work per insert grows
with the other relation's size rather than with the number of output rows it produces,
and the intermediate result of a three-way query is materialized.  GCQ4/6/8 keep their
equality ``s.k = t.k`` as a real equi-join (S ⋈ T first, then the cross join with R).

``pw.temporal.interval_join`` is not a way around this: it assigns times to buckets of
the interval's width and equi-joins neighbouring buckets, so for an unbounded interval
(``d - a`` in ``[1, 10^6)``, the whole value range) it is the same cross join plus a
filter.  The queries below are what a Pathway user can write; they are correct but not
incremental in the sense of IEDyn.  ``NOTE`` is printed with every Pathway result.
"""

from __future__ import annotations

from collections.abc import Callable

import pathway as pw

from bench.theta.fingerprint import MODULUS, PRIMES
from bench.theta.queries import QUERIES

Tables = dict[str, pw.Table]

NOTE = (
    "Pathway joins on equality only: each a < d / e < g / d < g is a cross join "
    "(join with no condition) followed by filter, so each insert is compared with "
    "every tuple of the other side (pw.temporal.interval_join over the whole value range "
    "degenerates to the same cross join)."
)


def _cross(left: pw.Table, right: pw.Table) -> pw.Table:
    """All pairs of rows, keeping every column of both sides."""
    return left.join(right).select(*pw.left, *pw.right)


def _rs(t: Tables) -> pw.Table:
    return _cross(t["r"], t["s"]).filter(pw.this.a < pw.this.d)


def _rst(t: Tables) -> pw.Table:
    """GCQ3's join: (R × S | a < d) × T | d < g."""
    return _cross(_rs(t), t["t"]).filter(pw.this.d < pw.this.g)


def _rstk(t: Tables) -> pw.Table:
    """GCQ4's join: R × (S ⋈_k T | d < g) | a < d."""
    s, tt = t["s"], t["t"]
    st = s.join(tt, s.k == tt.k).select(
        pw.left.d, pw.left.e, pw.left.f, pw.left.k, pw.right.g, pw.right.h, pw.right.i
    )
    st = st.filter(pw.this.d < pw.this.g)
    return _cross(t["r"], st).filter(pw.this.a < pw.this.d)


def _gcq2(t: Tables) -> pw.Table:
    return _cross(_rs(t), t["t"]).filter(pw.this.e < pw.this.g)


JOINS: dict[str, Callable[[Tables], pw.Table]] = {
    "GCQ1": _rs,
    "GCQ2": _gcq2,
    "GCQ3": _rst,
    "GCQ4": _rstk,
    "GCQ5": _rst,
    "GCQ6": _rstk,
    "GCQ7": _rst,
    "GCQ8": _rstk,
}


def view(query: str, tables: Tables) -> pw.Table:
    """The query's output rows (bag semantics: one Pathway row per derivation)."""
    joined = JOINS[query](tables)
    return joined.select(*(joined[c] for c in QUERIES[query].columns))


def fingerprint(table: pw.Table, columns: tuple[str, ...]) -> pw.Table:
    """One row ``(rows, checksum)`` maintained inside Pathway (bench/theta/fingerprint.py).

    The join output is folded into the two numbers in the dataflow itself, so the
    measurement is Pathway's and not that of a Python callback per output row.
    """
    terms = [table[c] * p for c, p in zip(columns, PRIMES, strict=False)]
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    hashed = table.select(v=total % MODULUS).select(h=pw.this.v * pw.this.v % MODULUS)
    return hashed.reduce(rows=pw.reducers.count(), checksum=pw.reducers.sum(pw.this.h))
