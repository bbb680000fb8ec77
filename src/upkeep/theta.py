"""Theta predicates on GJT edges and the sorted indexes that serve them (IEDyn).

``dynamic-yannakakis-iedyn.txt`` section 4: a GJT edge may carry predicates; the parent and
sibling indexes must then enumerate ``sigma_theta(rho_n |x t)`` with constant delay.  For an
inequality ``side_n OP side_t`` (one side over the indexed node's variables, the other over
the probing tuple's), the hash bucket of ``rho_n`` for the equi-join key is kept sorted on
``side_n``: the matching tuples are a contiguous run, enumerated in order until the bound is
crossed (constant delay with one inequality per edge), and their total weight is a range sum
(the semijoin of UPDATE, Algorithm 1 line 21, in O(log n) per delta tuple).  A lower and
an upper bound on the same indexed side (``BETWEEN``, a band join ``s.ts BETWEEN t.ts AND
t.ts + 60``) are one interval of the run, so band joins keep constant delay too.  Further
Two inequalities on different indexed sides of one edge (``s.a < t.x AND s.b > t.y``) use a
:class:`BoxIndex`: each bucket sorted on the first side with a max/min tree over the second,
so every next match is found in O(log n) (the logarithmic delay of Theorem 4.1 for edges
with several inequalities; the bucket's tree is rebuilt after it changes, within the
theorem's O(M^2 log M) update bound).  Further predicates on the same edge, ``<>`` and
arbitrary expressions are checked on each candidate (correct, but the delay is then bounded
by the run, not constant).

Sorting needs a total order: NULL never satisfies a comparison, so tuples whose indexed side
is NULL are simply left out of the sorted run; DOUBLE sides (NaN) are only checked, not indexed.
"""

from __future__ import annotations

import operator
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from sqlglot import exp

from .types import SqlType

RANGE_OPS = {exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


@dataclass
class ThetaPredicate:
    """One conjunct of the join condition that is not an equi-join."""

    node: exp.Expression
    vars: frozenset[int]
    # for comparisons: (left expression, op, right expression) and each side's variables
    op: str | None = None
    left: exp.Expression | None = None
    right: exp.Expression | None = None
    left_vars: frozenset[int] = frozenset()
    right_vars: frozenset[int] = frozenset()
    sortable: bool = False

    @property
    def sql(self) -> str:
        return self.node.sql(dialect="duckdb")


def split_between(conditions: list[exp.Expression]) -> list[exp.Expression]:
    """``x BETWEEN lo AND hi`` is ``x >= lo AND x <= hi``: two range predicates."""
    out = []
    for c in conditions:
        if isinstance(c, exp.Between):
            out.append(exp.GTE(this=c.this.copy(), expression=c.args["low"].copy()))
            out.append(exp.LTE(this=c.this.copy(), expression=c.args["high"].copy()))
        else:
            out.append(c)
    return out


def _orderable(a: SqlType, b: SqlType) -> bool:
    """Both sides compare in Python exactly as in SQL (no NaN, no mixed kinds)."""
    if a.kind == "DOUBLE" or b.kind == "DOUBLE":
        return False
    if a.is_numeric and b.is_numeric:
        return True
    return a.kind == b.kind and a.kind in ("VARCHAR", "DATE", "TIMESTAMP")


def analyse_predicate(node: exp.Expression, vars_of: Callable[[exp.Expression], set[int]],
                      type_of: Callable[[exp.Expression], SqlType]) -> ThetaPredicate:
    pred = ThetaPredicate(node, frozenset(vars_of(node)))
    op = RANGE_OPS.get(type(node))
    if op is None:
        return pred
    left, right = node.this, node.expression
    pred.op, pred.left, pred.right = op, left, right
    pred.left_vars, pred.right_vars = frozenset(vars_of(left)), frozenset(vars_of(right))
    pred.sortable = _orderable(type_of(left), type_of(right))
    return pred


@dataclass
class RangeAccess:
    """How one predicate narrows the tuples of an indexed node: ``indexed OP probe``."""

    indexed: exp.Expression  # side over the indexed node's variables
    probe: exp.Expression  # side over the probing (bound) variables
    op: str
    other: tuple[str, exp.Expression] | None = None  # the opposite bound: (op, probe)
    cross: RangeAccess | None = None  # a bound on a second indexed side (a BoxIndex)

    def closes(self, bound: RangeAccess) -> bool:
        """``bound`` limits the same indexed side from the other direction."""
        return (self.other is None and bound.indexed.sql() == self.indexed.sql()
                and (self.op in ("<", "<=")) != (bound.op in ("<", "<=")))


def range_access(pred: ThetaPredicate, node_vars: set[int], bound: set[int]
                 ) -> RangeAccess | None:
    """The predicate as a range on a node's sorted run, if one side reads only the node and
    something not bound yet, and the other reads only bound variables."""
    if not pred.sortable:
        return None
    for mine, other, m_vars, o_vars, op in (
            (pred.left, pred.right, pred.left_vars, pred.right_vars, pred.op),
            (pred.right, pred.left, pred.right_vars, pred.left_vars, FLIP[pred.op])):
        if m_vars and m_vars <= node_vars and not m_vars <= bound and o_vars <= bound:
            return RangeAccess(*_unshifted(mine, other), op)
    return None


def _unshifted(mine: exp.Expression, other: exp.Expression
               ) -> tuple[exp.Expression, exp.Expression]:
    """``x + c OP p`` as ``x OP p - c`` (and ``x - c`` as ``x OP p + c``), so bounds that
    differ by a constant offset index the same side: ``t.ts <= s.ts + 5`` and
    ``t.ts >= s.ts`` are one interval of a run sorted on ``s.ts``."""
    while True:
        mine = mine.unnest()
        if isinstance(mine, (exp.Add, exp.Sub)) and _is_number(mine.expression):
            flip = exp.Sub if isinstance(mine, exp.Add) else exp.Add
            mine, other = mine.this, flip(this=exp.Paren(this=other.copy()),
                                          expression=mine.expression.copy())
        elif isinstance(mine, exp.Add) and _is_number(mine.this):
            mine, other = mine.expression, exp.Sub(this=exp.Paren(this=other.copy()),
                                                   expression=mine.this.copy())
        else:
            return mine, other


def _is_number(node: exp.Expression) -> bool:
    return isinstance(node, exp.Literal) and not node.is_string


# How ``value OP probe`` cuts a sorted run: (whether it bounds the start rather than the
# end, whether the cut falls after the entries equal to ``probe``).
_CUTS: dict[str, tuple[bool, bool]] = {
    "<": (False, False), "<=": (False, True), ">": (True, True), ">=": (True, False)}


class SortedRun:
    """A multiset of ``(value, tuple)`` sorted by value, with a weight per tuple and block
    sums for O(log n + n/B) range sums (a two-level scan tree, ``lftj`` paper 3.1)."""

    __slots__ = ("vals", "tups", "wts", "maxes", "sums")
    BLOCK = 512

    def __init__(self) -> None:
        self.vals: list[list] = []
        self.tups: list[list] = []
        self.wts: list[list] = []
        self.maxes: list = []
        self.sums: list = []

    def _find(self, v: object, t: tuple) -> tuple[int, int]:
        b = bisect_left(self.maxes, v)
        while b < len(self.vals):
            vals, tups = self.vals[b], self.tups[b]
            i = bisect_left(vals, v)
            while i < len(vals) and vals[i] == v:
                if tups[i] == t:
                    return b, i
                i += 1
            if i < len(vals):
                break
            b += 1
        raise KeyError(t)

    def insert(self, v: object, t: tuple, w: object) -> None:
        if not self.vals:
            self.vals.append([v])
            self.tups.append([t])
            self.wts.append([w])
            self.maxes.append(v)
            self.sums.append(w)
            return
        b = min(bisect_left(self.maxes, v), len(self.vals) - 1)
        vals = self.vals[b]
        i = bisect_right(vals, v)
        vals.insert(i, v)
        self.tups[b].insert(i, t)
        self.wts[b].insert(i, w)
        self.maxes[b] = vals[-1]
        self.sums[b] = self.sums[b] + w
        if len(vals) > 2 * self.BLOCK:
            half = len(vals) // 2
            for lists in (self.vals, self.tups, self.wts):
                lst = lists[b]
                lists[b:b + 1] = [lst[:half], lst[half:]]
            self.maxes[b:b + 1] = [self.vals[b][-1], self.vals[b + 1][-1]]
            self.sums[b:b + 1] = [_total(self.wts[b]), _total(self.wts[b + 1])]

    def reweight(self, v: object, t: tuple, dw: object) -> None:
        b, i = self._find(v, t)
        self.wts[b][i] = self.wts[b][i] + dw
        self.sums[b] = self.sums[b] + dw

    def remove(self, v: object, t: tuple) -> None:
        b, i = self._find(v, t)
        w = self.wts[b].pop(i)
        self.vals[b].pop(i)
        self.tups[b].pop(i)
        if not self.vals[b]:
            for lists in (self.vals, self.tups, self.wts, self.maxes, self.sums):
                del lists[b]
            return
        self.maxes[b] = self.vals[b][-1]
        self.sums[b] = self.sums[b] - w

    def _position(self, v: object, after: bool) -> tuple[int, int]:
        """Block and offset of the first entry with value > v (after) or >= v (not after)."""
        maxes = self.maxes
        b = bisect_right(maxes, v) if after else bisect_left(maxes, v)
        if b == len(maxes):
            return b, 0
        vals = self.vals[b]
        return b, (bisect_right(vals, v) if after else bisect_left(vals, v))

    def bounds(self, op: str, probe: object, op2: str | None = None, probe2: object = None
               ) -> tuple[tuple[int, int], tuple[int, int]]:
        """Start and end positions of the entries with ``value OP probe`` (and ``value OP2
        probe2``: an interval); start >= end when there are none."""
        start, end = self._bounds(op, probe)
        if op2 is not None:
            start2, end2 = self._bounds(op2, probe2)
            start, end = max(start, start2), min(end, end2)
        return start, end

    def _bounds(self, op: str, probe: object) -> tuple[tuple[int, int], tuple[int, int]]:
        lower, after = _CUTS[op]
        at = self._position(probe, after)
        return (at, (len(self.vals), 0)) if lower else ((0, 0), at)

    def scan(self, op: str, probe: object, op2: str | None = None, probe2: object = None
             ) -> Iterator[tuple]:
        """The tuples with ``value OP probe`` (and ``value OP2 probe2``), in value order,
        each in O(1) after an O(log n) seek."""
        (b, i), (eb, ei) = self.bounds(op, probe, op2, probe2)
        if (b, i) >= (eb, ei):
            return
        tups = self.tups
        while b < eb:
            yield from tups[b][i:]
            b, i = b + 1, 0
        if b < len(tups) and i < ei:
            yield from tups[b][i:ei]

    def total(self, op: str, probe: object, op2: str | None = None, probe2: object = None
              ) -> object | None:
        """The summed weight of the entries with ``value OP probe`` (and ``value OP2
        probe2``); None when there are none."""
        (b, i), (eb, ei) = self.bounds(op, probe, op2, probe2)
        if (b, i) >= (eb, ei):
            return None
        wts, sums = self.wts, self.sums
        if b == eb:
            return _total(wts[b][i:ei]) if b < len(wts) else None
        total = _total(wts[b][i:])
        for s in sums[b + 1:eb]:
            total = s if total is None else total + s
        if eb < len(wts):
            rest = _total(wts[eb][:ei])
            if rest is not None:
                total = rest if total is None else total + rest
        return total


def _total(weights: list) -> object | None:
    """Sum of ring elements (ints or DualWeights), None for none."""
    if not weights:
        return None
    if type(weights[0]) is int:
        return sum(weights)
    total = weights[0]
    for w in weights[1:]:
        total = total + w
    return total


class RangeIndex:
    """A hash index on the equi-join key whose buckets are :class:`SortedRun` s on one side of
    an inequality: the parent/sibling index of ``dynamic-yannakakis-iedyn.txt`` section 4."""

    __slots__ = ("key", "value", "buckets")
    weighted = True  # its runs keep weights for range sums

    def __init__(self, key: Callable[[tuple], tuple], value: Callable[[tuple], object]):
        self.key = key
        self.value = value
        self.buckets: dict[tuple, SortedRun] = {}

    def insert(self, t: tuple, w: object) -> None:
        v = self.value(t)
        if v is None:
            return
        k = self.key(t)
        run = self.buckets.get(k)
        if run is None:
            run = self.buckets[k] = SortedRun()
        run.insert(v, t, w)

    def remove(self, t: tuple, w: object) -> None:
        v = self.value(t)
        if v is None:
            return
        k = self.key(t)
        run = self.buckets[k]
        run.remove(v, t)
        if not run.vals:
            del self.buckets[k]

    def reweight(self, t: tuple, w: object) -> None:
        v = self.value(t)
        if v is not None:
            self.buckets[self.key(t)].reweight(v, t, w)

    def scan(self, k: tuple, op: str, probe: object, op2: str | None = None,
             probe2: object = None) -> Iterator[tuple]:
        run = self.buckets.get(k)
        if run is None or probe is None or (op2 is not None and probe2 is None):
            return iter(())
        return run.scan(op, probe, op2, probe2)

    def total(self, k: tuple, op: str, probe: object, op2: str | None = None,
              probe2: object = None) -> object | None:
        run = self.buckets.get(k)
        if run is None or probe is None or (op2 is not None and probe2 is None):
            return None
        return run.total(op, probe, op2, probe2)


class BoxIndex:
    """Hash buckets on the equi-join key whose tuples are sorted on one indexed side, with a
    max/min tree over a second: enumerates ``first OP bounds AND second OP2 probe2`` with
    O(log n) delay (``dynamic-yannakakis-iedyn.txt`` Theorem 4.1, several inequalities on
    one edge).  Keeps no weights; a changed bucket is rebuilt when next scanned."""

    __slots__ = ("key", "first", "second", "buckets")
    weighted = False

    def __init__(self, key: Callable[[tuple], tuple], first: Callable[[tuple], object],
                 second: Callable[[tuple], object]):
        self.key = key
        self.first = first
        self.second = second
        self.buckets: dict[tuple, _Box] = {}

    def insert(self, t: tuple, w: object) -> None:
        v, u = self.first(t), self.second(t)
        if v is None or u is None:  # NULL satisfies no comparison
            return
        k = self.key(t)
        box = self.buckets.get(k)
        if box is None:
            box = self.buckets[k] = _Box()
        box.members[t] = (v, u)
        box.tree = None

    def remove(self, t: tuple, w: object) -> None:
        if self.first(t) is None or self.second(t) is None:
            return
        k = self.key(t)
        box = self.buckets[k]
        del box.members[t]
        box.tree = None
        if not box.members:
            del self.buckets[k]

    def scan(self, k: tuple, bounds: list[tuple[str, object]], op2: str, probe2: object
             ) -> Iterator[tuple]:
        box = self.buckets.get(k)
        if box is None or probe2 is None or any(p is None for _, p in bounds):
            return iter(())
        return box.scan(bounds, op2, probe2)


class _Box:
    """One bucket of a :class:`BoxIndex`: its members, and (once built) their first values
    in order, the tuples in that order and a segment tree of (max, min) second values."""

    __slots__ = ("members", "tree")

    def __init__(self) -> None:
        self.members: dict[tuple, tuple[object, object]] = {}
        self.tree: tuple[list, list, list, list, int] | None = None

    def _build(self) -> tuple[list, list, list, list, int]:
        items = sorted(self.members.items(), key=lambda item: item[1][0])
        size = 1 << max(0, (len(items) - 1).bit_length())
        high: list = [None] * (2 * size)
        low: list = [None] * (2 * size)
        for i, (_, (_, u)) in enumerate(items):
            high[size + i] = low[size + i] = u
        for i in range(size - 1, 0, -1):
            a, b = high[2 * i], high[2 * i + 1]
            high[i] = a if b is None else b if a is None else max(a, b)
            a, b = low[2 * i], low[2 * i + 1]
            low[i] = a if b is None else b if a is None else min(a, b)
        self.tree = ([v for _, (v, _) in items], [t for t, _ in items], high, low, size)
        return self.tree

    def scan(self, bounds: list[tuple[str, object]], op2: str, probe2: object
             ) -> Iterator[tuple]:
        vals, tups, high, low, size = self.tree or self._build()
        start, end = 0, len(vals)
        for op, probe in bounds:
            lower, after = _CUTS[op]
            at = (bisect_right if after else bisect_left)(vals, probe)
            start, end = (max(start, at), end) if lower else (start, min(end, at))
        if start >= end:
            return
        # a subtree can hold a match only if its max (for > / >=) or min (for < / <=)
        # second value passes: each next match costs one O(log n) descent
        tree, passes = (high if op2 in (">", ">=") else low), _PASSES[op2]
        stack = [(1, 0, size)]
        while stack:
            node, a, b = stack.pop()
            if b <= start or a >= end:
                continue
            extreme = tree[node]
            if extreme is None or not passes(extreme, probe2):
                continue
            if b - a == 1:
                yield tups[a]
                continue
            mid = (a + b) // 2
            stack.append((2 * node + 1, mid, b))
            stack.append((2 * node, a, mid))


_PASSES: dict[str, Callable[[object, object], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
