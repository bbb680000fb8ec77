"""Per-group top-k: ``ROW_NUMBER() / RANK() / DENSE_RANK() OVER (PARTITION BY .. ORDER BY
..)`` bounded by ``<= k`` in the enclosing query, as Materialize and Flink keep it (issue
22), instead of recomputing the window.

Two spellings are taken::

    SELECT .. FROM (SELECT .., ROW_NUMBER() OVER (PARTITION BY g ORDER BY x DESC) AS rn
                    FROM ..) AS s WHERE rn <= 3
    SELECT .. FROM .. QUALIFY ROW_NUMBER() OVER (PARTITION BY g ORDER BY x DESC) <= 3

The ranked select without its window column is a helper view, maintained by its own
strategy.  :class:`RankedView` keeps that view's rows in one sorted list per partition
(``topk.sort_key``: DuckDB's order, NULLs last unless ``NULLS FIRST``, NaN above numbers)
and lists the rows ranked ``1..k`` with their rank, so

* a change whose key sorts after its partition's window costs O(log n) and changes nothing
  (``DENSE_RANK``, whose window ends at the k-th distinct key, re-reads its window);
* a change inside the window, a deletion included, re-reads that partition's window only.

The rank is DuckDB's: ``ROW_NUMBER`` numbers the rows, ``RANK`` gives tied rows the
position of the first of them, ``DENSE_RANK`` counts distinct keys.  ``ROW_NUMBER``'s order
among tied rows is unspecified in DuckDB too; here it is the rows' own order
(:func:`.topk.row_order`), so the ranks are a function of the rows, not of their arrival.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from sortedcontainers import SortedKeyList
from sqlglot import exp

from .expressions import conjuncts
from .plan import output_order
from .topk import TopKError, sort_key, tie_broken
from .types import BIGINT
from .views import Batch, Columns, Delta, MaterializedView
from .windows import (
    RANKINGS,
    Windowing,
    by_partition,
    output_layout,
    partition_function,
    ranks,
    split_windows,
)


def qualify_as_derived(query: exp.Expression) -> exp.Expression:
    """``SELECT .. QUALIFY rank() OVER (..) <= k`` as the derived-table spelling, so one
    path keeps both; other queries unchanged.  The condition's columns outside its window
    that are no output column are hidden columns of the derived table; a block's ``ORDER BY
    .. LIMIT`` applies after the condition, so it moves to the outer query (over output
    columns: a block ordered by anything else is left unchanged)."""
    if not isinstance(query, exp.Select) or query.args.get("qualify") is None:
        return query
    condition = query.args["qualify"].this
    windows = list(condition.find_all(exp.Window))
    if len(windows) != 1 or any(isinstance(e, exp.Star) or (isinstance(e, exp.Column)
                                                           and e.is_star)
                                for e in query.expressions):
        return query
    inner = query.copy()
    for k in ("qualify", "order", "limit", "offset"):
        inner.set(k, None)
    names = []
    for i, e in enumerate(inner.expressions):
        name = e.alias_or_name if isinstance(e, (exp.Alias, exp.Column)) else f"__q{i}"
        names.append(name)
        if not isinstance(e, exp.Alias) and not isinstance(e, exp.Column):
            e.replace(e.copy().as_(name))
    limit, offset = query.args.get("limit"), query.args.get("offset")
    order = None
    if limit or offset:
        keys = query.args["order"].expressions if query.args.get("order") else []
        order = output_order(keys, query.expressions, names)
        if order is None:
            return query
    bound = condition.copy()
    bound.find(exp.Window).replace(exp.column("__rank", "__ranked"))
    columns = {n.lower(): e for n, e in zip(names, query.expressions, strict=True)}
    hidden: dict[str, str] = {}
    for col in list(bound.find_all(exp.Column)):
        if col.table == "__ranked":
            continue
        item = None if col.table else columns.get(col.name.lower())
        if item is not None and not isinstance(item, exp.Column):
            return query  # an output alias, or the column it may shadow: left as it is
        key = col.sql(dialect="duckdb")
        if key not in hidden:
            hidden[key] = f"__qualify_c{len(hidden)}"
            inner.append("expressions", col.copy().as_(hidden[key]))
        col.replace(exp.column(hidden[key], "__ranked"))
    inner.append("expressions", windows[0].copy().as_("__rank"))
    outer = exp.select(*[exp.column(n, "__ranked").as_(n) for n in names]).from_(
        exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier("__ranked"))))
    outer = outer.where(bound)
    if order is not None:
        outer.set("order", exp.Order(expressions=order))
        outer.set("limit", limit)
        outer.set("offset", offset)
    return outer


def rank_bound(select: exp.Select, alias: str, rank_name: str) -> int | None:
    """The ``k`` of a ``WHERE`` conjunct bounding ``alias.rank_name`` from above
    (``<= k``, ``< k + 1``, ``= 1``), or None."""
    bounds = []
    where = select.args.get("where")
    for cond in conjuncts(where.this if where is not None else None):
        if not isinstance(cond, (exp.LTE, exp.LT, exp.GTE, exp.GT, exp.EQ)):
            continue
        left, right = cond.this, cond.expression
        flipped = False
        if _names_rank(right, alias, rank_name):
            left, right, flipped = right, left, True
        if not _names_rank(left, alias, rank_name) or not (
                isinstance(right, exp.Literal) and right.is_int):
            continue
        k = int(right.this)
        kind = type(cond)
        if flipped:
            kind = {exp.GTE: exp.LTE, exp.GT: exp.LT, exp.LTE: exp.GTE, exp.LT: exp.GT,
                    exp.EQ: exp.EQ}[kind]
        if kind is exp.LTE or (kind is exp.EQ and k == 1):
            bounds.append(k)
        elif kind is exp.LT:
            bounds.append(k - 1)
    return min(bounds) if bounds else None


def _names_rank(node: exp.Expression, alias: str, rank_name: str) -> bool:
    return isinstance(node, exp.Column) and node.name.lower() == rank_name and (
        not node.table or node.table.lower() == alias)


def split_ranking(body: exp.Expression) -> Windowing | None:
    """The :class:`~upkeep.windows.Windowing` of a select with one ranking window with an
    ORDER BY in its select list (and no other window), or None."""
    windowing = split_windows(body)
    if windowing is None or len(windowing.functions) != 1:
        return None
    (function,) = windowing.functions
    if function.kind not in RANKINGS.values() or function.order is None or (
            function.frame is not None):
        return None
    return windowing


class RankedView(MaterializedView):
    """The rows of ``helper`` ranked ``1..limit`` within their partition, each with its
    rank at ``position`` (see the module)."""

    strategy = "ranked"

    def __init__(self, name: str, columns: Columns, helper: str, sql: str,
                 partition: Callable[[tuple], tuple], key: Callable[[tuple], tuple],
                 kind: str, limit: int, position: int, hidden: int) -> None:
        super().__init__(name, columns, {helper}, sql)
        self.helper = helper
        self.partition = partition
        self.key = key
        self.order_key = tie_broken(key)  # ties by the rows' values: a change and its
        # inverse leave the ranks as they were
        self.kind = kind
        self.limit = limit
        self.position = position
        self.hidden = hidden
        self.groups: dict[tuple, SortedKeyList] = {}
        self.ops = {"sorted_updates": 0, "window_rebuilds": 0}
        self.explanation = [
            f"per-group top-k: {kind}() <= {limit} within each partition of helper view "
            f"{helper}, kept in one sorted list per partition (a change after its "
            "partition's window costs O(log n); one inside it re-reads that window only)"]

    def fresh(self) -> RankedView:
        """An empty copy, to be built again from the helper's rows."""
        return RankedView(self.name, self.columns, self.helper, self.sql, self.partition,
                          self.key, self.kind, self.limit, self.position, self.hidden)

    def _window(self, rows: SortedKeyList) -> list[tuple]:
        """The partition's rows ranked ``1..limit``, as output rows."""
        out = []
        for row, rank in zip(rows, ranks(rows, self.key, self.kind), strict=True):
            if rank > self.limit:
                break
            visible = row[:len(row) - self.hidden] if self.hidden else row
            out.append((*visible[:self.position], rank, *visible[self.position:]))
        return out

    def step(self, batch: Batch, want_delta: bool) -> Delta | None:
        delta: Counter = Counter()
        for group, rows in by_partition(batch.get(self.helper), self.partition).items():
            members = self.groups.get(group)
            if members is None:
                members = self.groups[group] = SortedKeyList(key=self.order_key)
            before = self._window(members) if self._touches(members, rows) else None
            for row, weight in rows:
                self.ops["sorted_updates"] += abs(weight)
                for _ in range(weight):
                    members.add(row)
                for _ in range(-weight):
                    members.remove(row)
            if before is not None:
                self.ops["window_rebuilds"] += 1
                delta.update(self._window(members))
                delta.subtract(before)
            if not members:
                del self.groups[group]
        out = {r: w for r, w in delta.items() if w}
        self.record(out)
        return out

    def _touches(self, members: SortedKeyList, rows: list[tuple[tuple, int]]) -> bool:
        """Whether a change may enter, leave or move the partition's window: unless the
        window is full and every changed row sorts after its last row."""
        if len(members) < self.limit or self.kind == "dense_rank":
            return True  # a dense rank's window ends at its k-th distinct key, not row
        edge = self.key(members[self.limit - 1])  # a row after it ranks k + 1 or later
        return any(not edge < self.key(row) for row, _ in rows)

    def state_size(self) -> int:
        return sum(len(g) for g in self.groups.values())

    def counters(self) -> dict[str, int]:
        return dict(self.ops)


def ranked_view(name: str, ranking: Windowing, limit: int, helper: str,
                base_columns: Columns, sql: str) -> RankedView:
    """The :class:`RankedView` of ``ranking`` (from :func:`split_ranking`) over helper view
    ``helper`` (whose columns are ``base_columns``); TopKError if its order is not over
    them."""
    if limit < 1:
        raise TopKError(f"a rank bound of {limit} keeps no row")
    (function,) = ranking.functions
    partition = partition_function(ranking, base_columns)
    key = sort_key(function.order, base_columns)
    layout, columns = output_layout(ranking, base_columns, [BIGINT])
    return RankedView(name, columns, helper, sql, partition, key, function.kind, limit,
                      layout.index(("window", 0)), ranking.hidden)
