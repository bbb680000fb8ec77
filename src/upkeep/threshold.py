"""A comparison with an uncorrelated scalar subquery, ``WHERE x > (SELECT 2 * avg(x) FROM
t)`` or ``HAVING sum(v) > (SELECT sum(v) * 0.0001 FROM ..)`` (TPC-H Q11, Q15, Q22), kept as a
moving threshold over sorted rows (issue 22).

Decorrelated as a cross join (``scalar_subqueries.py``), every change of the aggregate
replaces its one row, and the join re-derives every row of the block: a change to the table
the average is over costs O(n).  Here the block without that comparison is a helper view
whose rows carry the compared value ``x`` as a trailing column (or, when the block is one
relation's filter and select list, a function the view applies to that relation's rows
itself), the subquery is another (one row), and :class:`ThresholdView` keeps the block's
rows sorted by ``x``, reading the passing ones as a range of them rather than storing them:

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
from collections.abc import Callable, Iterator

from sortedcontainers import SortedKeyList
from sqlglot import exp

from .errors import Error
from .expressions import (
    FLIPPED_COMPARISON,
    ExpressionCompiler,
    conjuncts,
    nan_order,
    unparen,
)
from .plan import Block, bind_query
from .types import SqlType
from .views import Batch, Columns, Delta, ViewRuntime
from .zset import add_into

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


def scalar_strategy(scalar: exp.Select) -> str | None:
    """A threshold's one-row aggregate over one relation is kept by the operators'
    aggregate (a join tree brings nothing to one group of one relation, and costs a third
    more per change); over joins the planner chooses."""
    from_ = scalar.args.get("from_") or scalar.args.get("from")
    one = (from_ is not None and isinstance(from_.this, exp.Table)
           and not scalar.args.get("joins"))
    return "general" if one else None


def one_relation_block(block: exp.Select, schema_of: Schema
                       ) -> tuple[str, Columns, Callable[[tuple], tuple | None]] | None:
    """For a block over one relation without aggregates, DISTINCT or subqueries: the
    relation, the block's columns and its filter and select list as one function of the
    relation's row (None for a row it drops).  The threshold view then reads the relation's
    changes itself, instead of through a helper view that would store every row again."""
    try:
        plan = bind_query(block, schema_of)
    except Error:
        return None
    if not isinstance(plan, Block) or len(plan.atoms) != 1 or plan.is_aggregate or (
            plan.distinct or plan.subqueries):
        return None
    compiler = ExpressionCompiler(plan.scope)
    nodes = [e for _, e in plan.select]
    try:
        rows = compiler.compile_filtered_tuple(
            nodes, [exp.and_(*plan.conditions)] if plan.conditions else [])
        columns = [(name, compiler.type_of(e)) for name, e in plan.select]
    except Error:
        return None
    return plan.atoms[0].relation, columns, rows


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


class ThresholdView(ViewRuntime):
    """The rows of ``block`` whose trailing value passes ``OP`` against the one value of
    ``scalar`` (see the module), without that trailing column.  The passing rows are a
    range of the sorted ones (and maybe the NaN rows): read from there, not stored again."""

    strategy = "threshold"

    def __init__(self, name: str, columns: Columns, block: str, scalar: str, op: str,
                 sql: str, rows: Callable[[tuple], tuple | None] | None = None) -> None:
        super().__init__(name, columns[:-1], {block, scalar}, sql)
        self.block, self.scalar, self.op = block, scalar, op
        self.block_row = rows  # a relation's row -> the block's row (one_relation_block)
        self.compare = _COMPARE[op]  # once, not per row
        # rows sorted by their compared value; NaN (above every number, equal to itself,
        # as in DuckDB) is kept apart so the sort compares plain values
        self.sorted = SortedKeyList(key=operator.itemgetter(-1))
        self.nans: dict[tuple, int] = {}
        self.value: object = None
        #: a one-sided comparison's cut for ``value`` (its bisection), kept up to date as
        #: rows come and go below it, so a move of the value bisects once, not twice
        self.cut: int | None = None
        self.right = _ONE_SIDED.get(op, (False, False))[0]
        self.sorted_updates = self.rows_flipped = 0
        source = (f"relation {block} through the block's filter and select list"
                  if rows is not None else f"helper view {block}")
        self.explanation = [
            f"threshold: rows of {source} whose {COLUMN} {op} the one value of "
            f"helper view {scalar}, kept sorted by it (a row's change costs O(log n); a "
            "change of the value emits only the rows between the old and the new value)"]

    def fresh(self) -> ThresholdView:
        """An empty copy, to be built again from the helpers' rows."""
        return ThresholdView(self.name, [*self.columns, (COLUMN, None)], self.block,
                             self.scalar, self.op, self.sql, self.block_row)

    def step(self, batch: Batch, want_delta: bool) -> Delta | None:
        delta: Delta = {}
        rows, value, cut, right = self.block_row, self.value, self.cut, self.right
        compare = self.compare
        for row, weight in (batch.get(self.block) or {}).items():
            if rows is not None:
                row = rows(row)
                if row is None:
                    continue
            self.sorted_updates += abs(weight)
            x = row[-1]
            if x != x:
                add_into(self.nans, row, weight)
            elif x is not None:
                for _ in range(weight):
                    self.sorted.add(row)
                for _ in range(-weight):
                    self.sorted.remove(row)
                if cut is not None and (value != value or (x <= value if right
                                                           else x < value)):
                    cut += weight  # the row is below the cut
                if value is not None and (compare(x, value) if value == value
                                          else self._passes(x, value)):
                    add_into(delta, row[:-1], weight)
                continue
            if self._passes(x, value):
                add_into(delta, row[:-1], weight)
        self.cut = cut
        scalar = batch.get(self.scalar)
        if scalar:
            added = [row[0] for row, weight in scalar.items() if weight > 0]
            new = added[0] if added else None  # the one row went: no value
            if new != value or (new is None) != (value is None):
                self._move(value, new, delta)
                self.value = new
        return delta

    def weighted_rows(self) -> Iterator[tuple[tuple, int]]:
        out: dict[tuple, int] = {}
        for lo, hi in self._ranges(self.value):
            for row in self.sorted.islice(lo, hi):
                add_into(out, row[:-1], 1)
        if self._passes(math.nan, self.value):
            for row, weight in self.nans.items():
                add_into(out, row[:-1], weight)
        return iter(list(out.items()))

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

    def _move(self, old: object, new: object, delta: Delta) -> None:
        """Emit the rows that pass against one of ``old`` and ``new`` and not the other.

        For a one-sided comparison between two values this is the rows between the two
        cuts (one bisection for the new value: the old one's cut is kept); otherwise the
        ranges of each side are compared.  The NaN rows flip together."""
        one_sided = self.op in _ONE_SIDED
        new_cut = self._cut(new, self.right) if one_sided and new is not None else None
        if old is not None and new is not None and one_sided:
            old_cut = self.cut if self.cut is not None else self._cut(old, self.right)
            if old_cut != new_cut:  # rows in [min, max) pass against exactly one value
                gained = (new_cut < old_cut) == _ONE_SIDED[self.op][1]
                self._flip(min(old_cut, new_cut), max(old_cut, new_cut),
                           1 if gained else -1, delta)
        else:
            before, after = self._ranges(old), self._ranges(new)
            cuts = sorted({i for r in before + after for i in r})
            for lo, hi in zip(cuts, cuts[1:], strict=False):
                was = any(a <= lo and hi <= b for a, b in before)
                now = any(a <= lo and hi <= b for a, b in after)
                if was != now:
                    self._flip(lo, hi, 1 if now else -1, delta)
        self.cut = new_cut
        if self.nans:
            was, now = self._passes(math.nan, old), self._passes(math.nan, new)
            if was != now:
                for row, weight in self.nans.items():
                    add_into(delta, row[:-1], weight if now else -weight)
                self.rows_flipped += sum(self.nans.values())

    def _flip(self, lo: int, hi: int, sign: int, delta: Delta) -> None:
        for row in self.sorted.islice(lo, hi):
            add_into(delta, row[:-1], sign)
        self.rows_flipped += hi - lo

    def state_size(self) -> int:
        return len(self.sorted) + len(self.nans)

    def counters(self) -> dict[str, int]:
        return {"sorted_updates": self.sorted_updates, "rows_flipped": self.rows_flipped}
