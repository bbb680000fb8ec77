"""A comparison with an uncorrelated scalar subquery, ``WHERE x > (SELECT 2 * avg(x) FROM
t)`` or ``HAVING sum(v) > (SELECT sum(v) * 0.0001 FROM ..)`` (TPC-H Q11, Q15, Q22), kept as a
moving threshold over sorted rows (issue 22).

Decorrelated as a cross join (``scalar_subqueries.py``), every change of the aggregate
replaces its one row, and the join re-derives every row of the block: a change to the table
the average is over costs O(n).  Here the block without that comparison is a helper view
whose rows carry the compared value ``x`` as a trailing column, the subquery is another
(one row), and :class:`ThresholdView` keeps the block's rows sorted by ``x``:

* a change to the block's rows is compared with the current threshold: O(log n);
* a change of the threshold from ``v`` to ``v'`` emits only the rows between them (those
  that pass on one side and not the other): O(log n + rows that flip).

Comparisons follow DuckDB: NULL on either side passes nothing, NaN sorts above every number
and equals itself.  A block with ``DISTINCT``, ``LIMIT`` or the comparison in ``WHERE`` under
aggregation is left to the other strategies.
"""

from __future__ import annotations

import math
import operator
from collections import Counter
from collections.abc import Callable

from sortedcontainers import SortedKeyList
from sqlglot import exp

from .expressions import FLIPPED_COMPARISON, conjuncts, nan_order, unparen
from .types import SqlType
from .views import Batch, Columns, Delta, MaterializedView

Schema = Callable[[str], list[tuple[str, SqlType]]]

_COMPARE = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le,
            "=": operator.eq, "<>": operator.ne}
_SYMBOL = {exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<=", exp.EQ: "=", exp.NEQ: "<>"}
COLUMN = "__threshold"
#: a one-sided comparison: (whether its cut is a right bisection, whether rows above pass)
_ONE_SIDED = {">": (True, True), ">=": (False, True), "<": (False, False),
              "<=": (True, False)}


def split_threshold(query: exp.Expression, schema_of: Schema
                    ) -> tuple[exp.Select, exp.Select, str] | None:
    """``(the block without the comparison, with the compared value as a trailing column
    COLUMN; the subquery; the comparison's operator as the block's value OP subquery)``, or
    None when ``query`` has no such comparison."""
    if not isinstance(query, exp.Select) or any(query.args.get(k) for k in (
            "distinct", "limit", "offset", "order", "qualify", "windows", "with", "with_")):
        return None
    aggregated = bool(query.args.get("group")) or any(
        e.find(exp.AggFunc) for e in query.expressions)
    key = "having" if aggregated else "where"
    clause = query.args.get(key)
    parts = conjuncts(clause.this if clause is not None else None)
    for i, cond in enumerate(parts):
        found = _comparison(cond, schema_of)
        if found is None:
            continue
        value, sub, op = found
        base = query.copy()
        rest = [p.copy() for j, p in enumerate(parts) if j != i]
        node = exp.Having if key == "having" else exp.Where
        base.set(key, node(this=exp.and_(*rest)) if rest else None)
        base.append("expressions", value.copy().as_(COLUMN))
        return base, sub.copy(), op
    return None


def _comparison(cond: exp.Expression, schema_of: Schema
                ) -> tuple[exp.Expression, exp.Select, str] | None:
    cond = unparen(cond)
    if type(cond) not in FLIPPED_COMPARISON:
        return None
    left, right, kind = cond.this, cond.expression, type(cond)
    if isinstance(unparen(left), exp.Subquery):
        left, right, kind = right, left, FLIPPED_COMPARISON[kind]
    right = unparen(right)
    if not isinstance(right, exp.Subquery) or left.find(exp.Subquery, exp.Exists):
        return None
    sub = right.this
    if not isinstance(sub, exp.Select) or len(sub.expressions) != 1 or not _uncorrelated(
            sub, schema_of) or not sub.expressions[0].find(exp.AggFunc) or any(
            sub.args.get(k) for k in ("group", "having", "limit", "offset", "distinct")):
        return None  # one aggregate row, whatever the tables hold
    return left, sub, _SYMBOL[kind]


def _uncorrelated(sub: exp.Select, schema_of: Schema) -> bool:
    """Whether every column of ``sub`` names one of its own relations (at any depth)."""
    own: dict[str, list[str]] = {}
    for table in sub.find_all(exp.Table):
        try:
            own[(table.alias or table.name).lower()] = [c for c, _ in schema_of(
                table.name.lower())]
        except Exception:  # noqa: BLE001 - a derived table or unknown: not taken
            return False
    if any(isinstance(n, exp.Subquery) and isinstance(n.parent, (exp.From, exp.Join))
           for n in sub.walk()):
        return False
    for col in sub.find_all(exp.Column):
        table, name = col.table.lower(), col.name.lower()
        if table and table not in own:
            return False
        if not table and not any(name in cols for cols in own.values()):
            return False
    return True


class ThresholdView(MaterializedView):
    """The rows of ``block`` whose trailing value passes ``OP`` against the one value of
    ``scalar`` (see the module), without that trailing column."""

    strategy = "threshold"

    def __init__(self, name: str, columns: Columns, block: str, scalar: str, op: str,
                 sql: str) -> None:
        super().__init__(name, columns[:-1], {block, scalar}, sql)
        self.block, self.scalar, self.op = block, scalar, op
        self.compare = _COMPARE[op]  # once, not per row
        # rows sorted by their compared value; NaN (above every number, equal to itself,
        # as in DuckDB) is kept apart so the sort compares plain values
        self.sorted = SortedKeyList(key=operator.itemgetter(-1))
        self.nans: Counter = Counter()
        self.value: object = None
        self.ops = {"sorted_updates": 0, "rows_flipped": 0}
        self.explanation = [
            f"threshold: rows of helper view {block} whose {COLUMN} {op} the one value of "
            f"helper view {scalar}, kept sorted by it (a row's change costs O(log n); a "
            "change of the value emits only the rows between the old and the new value)"]

    def fresh(self) -> ThresholdView:
        """An empty copy, to be built again from the helpers' rows."""
        return ThresholdView(self.name, [*self.columns, (COLUMN, None)], self.block,
                             self.scalar, self.op, self.sql)

    def step(self, batch: Batch, want_delta: bool) -> Delta | None:
        delta: Counter = Counter()
        for row, weight in (batch.get(self.block) or {}).items():
            self.ops["sorted_updates"] += abs(weight)
            x = row[-1]
            if x != x:
                self.nans[row] += weight
                if not self.nans[row]:
                    del self.nans[row]
            elif x is not None:
                for _ in range(weight):
                    self.sorted.add(row)
                for _ in range(-weight):
                    self.sorted.remove(row)
            if self._passes(row[-1], self.value):
                delta[row[:-1]] += weight
        scalar = batch.get(self.scalar)
        if scalar:
            added = [row[0] for row, weight in scalar.items() if weight > 0]
            value = added[0] if added else None  # the one row went: no value
            if value != self.value or (value is None) != (self.value is None):
                self._move(self.value, value, delta)
                self.value = value
        out = {r: w for r, w in delta.items() if w}
        self.record(out)
        return out

    def _passes(self, x: object, v: object) -> bool:
        if x is None or v is None:
            return False
        return self.compare(nan_order(x), nan_order(v))

    def _cut(self, v: object, right: bool) -> int:
        """Where ``v`` falls among the sorted (non-NaN) values: a NaN after all of them."""
        if v != v:
            return len(self.sorted)
        return (self.sorted.bisect_key_right if right else self.sorted.bisect_key_left)(v)

    def _ranges(self, v: object) -> list[tuple[int, int]]:
        """The index ranges of the sorted rows that pass against ``v``."""
        if v is None:
            return []
        n, op = len(self.sorted), self.op
        if op in _ONE_SIDED:
            cut = self._cut(v, _ONE_SIDED[op][0])
            return [(cut, n)] if _ONE_SIDED[op][1] else [(0, cut)]
        lo, hi = self._cut(v, False), self._cut(v, True)
        return [(lo, hi)] if op == "=" else [(0, lo), (hi, n)]

    def _move(self, old: object, new: object, delta: Counter) -> None:
        """Emit the rows that pass against one of ``old`` and ``new`` and not the other.

        For a one-sided comparison between two values this is the rows between the two
        cuts (one bisection each); otherwise the ranges of each side are compared.  The NaN
        rows flip together."""
        if old is not None and new is not None and self.op in _ONE_SIDED:
            right, above = _ONE_SIDED[self.op]
            a, b = self._cut(old, right), self._cut(new, right)
            if a != b:  # rows in [min, max) pass against exactly one of the values
                gained = (b < a) == above
                self._flip(min(a, b), max(a, b), 1 if gained else -1, delta)
        else:
            before, after = self._ranges(old), self._ranges(new)
            cuts = sorted({i for r in before + after for i in r})
            for lo, hi in zip(cuts, cuts[1:], strict=False):
                was = any(a <= lo and hi <= b for a, b in before)
                now = any(a <= lo and hi <= b for a, b in after)
                if was != now:
                    self._flip(lo, hi, 1 if now else -1, delta)
        if self.nans:
            was, now = self._passes(math.nan, old), self._passes(math.nan, new)
            if was != now:
                for row, weight in self.nans.items():
                    delta[row[:-1]] += weight if now else -weight
                self.ops["rows_flipped"] += sum(self.nans.values())

    def _flip(self, lo: int, hi: int, sign: int, delta: Counter) -> None:
        for row in self.sorted.islice(lo, hi):
            delta[row[:-1]] += sign
        self.ops["rows_flipped"] += hi - lo

    def state_size(self) -> int:
        return len(self.sorted) + len(self.nans)

    def counters(self) -> dict[str, int]:
        return dict(self.ops)
