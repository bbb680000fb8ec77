"""Z-sets (the GMRs of ``dynamic-yannakakis-iedyn.txt`` section 2, Figure 2).

A Z-set maps tuples to non-zero weights in a ring (integers by default).  Union and minus
add and subtract weights, join multiplies them, projection sums them, selection keeps
them; an insert is weight +1, a delete -1.  The incremental operators and the Dynamic
Yannakakis representation are built from these same rules.
"""

from __future__ import annotations

from collections.abc import Callable

ZSet = dict[tuple, object]
Delta = dict[tuple, int]  # one relation's change: row -> weight
Changes = list[tuple[tuple, int]]  # a view's committed change, as subscribers get it
TableChanges = list[tuple[str, tuple, int]]  # (table or view, row, weight) of several relations


def add_into(target: ZSet, row: tuple, w) -> None:
    """``target += {row: w}``, dropping the row when its weight becomes zero.

    A row new to ``target`` (the common case: a delta of distinct rows) is hashed once:
    ``setdefault`` inserts it, and only a row already there is looked up again.  Hashing a
    wide row costs about half a microsecond (CPython caches no tuple hash), so this
    halves the hashing a ``get`` then a store did on the single-row path."""
    n = len(target)
    old = dict.setdefault(target, row, w)  # (a dict's own method: a direct call)
    if len(target) != n:  # inserted
        if not w:
            del target[row]
        return
    new = old + w
    if new:
        target[row] = new
    else:
        del target[row]


def net_by_table(changes) -> dict[str, ZSet]:
    """The net change per table of ``(table, row, weight)`` triples (rows whose weights
    cancel left out)."""
    net: dict[str, ZSet] = {}
    for table, row, weight in changes:
        add_into(net.setdefault(table, {}), row, weight)
    return net


def clamp(counts: dict[tuple, int], delta: ZSet) -> dict[tuple, int]:
    """Add ``delta`` into the multiplicities ``counts`` and return the set-semantics change:
    +1 for a tuple whose count became positive, -1 for one whose count fell to zero or
    below (DISTINCT's weight clamp)."""
    out: dict[tuple, int] = {}
    for t, w in delta.items():
        old = counts.get(t, 0)
        new = old + w
        if new:
            counts[t] = new
        else:
            counts.pop(t, None)
        if old <= 0 < new:
            out[t] = 1
        elif new <= 0 < old:
            out[t] = -1
    return out


def replace_row(delta: ZSet, old: tuple | None, new: tuple | None) -> None:
    """Record that a derived row changed from ``old`` to ``new`` (None: absent)."""
    if old != new:
        if old is not None:
            add_into(delta, old, -1)
        if new is not None:
            add_into(delta, new, 1)


def plus(r: ZSet, s: ZSet) -> ZSet:
    out = dict(r)
    for t, w in s.items():
        add_into(out, t, w)
    return out


def negate(r: ZSet) -> ZSet:
    return {t: -w for t, w in r.items()}


def minus(r: ZSet, s: ZSet) -> ZSet:
    return plus(r, negate(s))


def project(r: ZSet, columns: list[str], onto: list[str]) -> ZSet:
    """``pi_onto(r)`` for a Z-set whose tuples are laid out as ``columns``."""
    pos = [columns.index(c) for c in onto]
    out: ZSet = {}
    for t, w in r.items():
        add_into(out, tuple(t[p] for p in pos), w)
    return out


def select(r: ZSet, pred: Callable[[tuple], bool]) -> ZSet:
    return {t: w for t, w in r.items() if pred(t)}


def join(r: ZSet, r_cols: list[str], s: ZSet, s_cols: list[str]) -> tuple[ZSet, list[str]]:
    """Natural join; weights multiply.  Returns the result and its column layout."""
    shared = [c for c in r_cols if c in s_cols]
    extra = [c for c in s_cols if c not in r_cols]
    rk = [r_cols.index(c) for c in shared]
    sk = [s_cols.index(c) for c in shared]
    se = [s_cols.index(c) for c in extra]
    index: dict[tuple, list[tuple[tuple, object]]] = {}
    for t, w in s.items():
        index.setdefault(tuple(t[p] for p in sk), []).append((t, w))
    out: ZSet = {}
    for t, w in r.items():
        for u, v in index.get(tuple(t[p] for p in rk), ()):
            add_into(out, t + tuple(u[p] for p in se), w * v)
    return out, r_cols + extra
