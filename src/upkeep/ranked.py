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
among tied rows is unspecified in DuckDB too; here it is the order they arrived in.
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from sortedcontainers import SortedKeyList
from sqlglot import exp

from .expressions import conjuncts
from .topk import TopKError, sort_key
from .types import BIGINT
from .views import Batch, Columns, Delta, MaterializedView

RANKINGS = {exp.RowNumber: "row_number", exp.Rank: "rank", exp.DenseRank: "dense_rank"}
EVERY_RANK = sys.maxsize  # the bound of a view that keeps every rank


@dataclass
class Ranking:
    """A ranking select split for :class:`RankedView`: ``base`` is the select without its
    window column (plus hidden columns for partition and order items it does not output),
    ``position`` where the rank goes in the output, ``hidden`` how many columns to drop."""

    base: exp.Select
    kind: str
    partition: list[str]  # names of base columns
    order: exp.Order  # over names of base columns
    position: int  # -1: after every column (``SELECT *, rank() OVER (..)``)
    rank_name: str
    hidden: int


UNBOUNDED = "__unbounded"  # the alias a ranking select with no bound is kept under


def unbounded_as_derived(query: exp.Expression) -> exp.Expression:
    """A view that ranks every row (``SELECT .., rank() OVER (..) FROM ..``, no bound) as
    ``SELECT * FROM (it) AS __unbounded``, which :class:`RankedView` keeps with every rank
    (a change re-reads its partition, whose ranks after it may all move); other queries
    unchanged."""
    if split_ranking(query) is None:
        return query
    return exp.select("*").from_(exp.Subquery(this=query.copy(), alias=exp.TableAlias(
        this=exp.to_identifier(UNBOUNDED))))


def qualify_as_derived(query: exp.Expression) -> exp.Expression:
    """``SELECT .. QUALIFY rank() OVER (..) <= k`` as the derived-table spelling, so one
    path keeps both; other queries unchanged."""
    if not isinstance(query, exp.Select) or query.args.get("qualify") is None:
        return query
    condition = query.args["qualify"].this
    windows = list(condition.find_all(exp.Window))
    if len(windows) != 1 or any(isinstance(e, exp.Star) or (isinstance(e, exp.Column)
                                                           and e.is_star)
                                for e in query.expressions):
        return query
    inner = query.copy()
    inner.set("qualify", None)
    names = []
    for i, e in enumerate(inner.expressions):
        name = e.alias_or_name if isinstance(e, (exp.Alias, exp.Column)) else f"__q{i}"
        names.append(name)
        if not isinstance(e, exp.Alias) and not isinstance(e, exp.Column):
            e.replace(e.copy().as_(name))
    inner.append("expressions", windows[0].copy().as_("__rank"))
    bound = condition.copy()
    bound.find(exp.Window).replace(exp.column("__rank", "__ranked"))
    outer = exp.select(*[exp.column(n, "__ranked").as_(n) for n in names]).from_(
        exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier("__ranked"))))
    return outer.where(bound)


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


def split_ranking(body: exp.Expression) -> Ranking | None:
    """The :class:`Ranking` of a select with one ranking window in its select list (and no
    other window), or None."""
    if not isinstance(body, exp.Select) or any(body.args.get(k) for k in (
            "qualify", "windows", "limit", "offset")):
        return None
    found = [(i, e) for i, e in enumerate(body.expressions) if e.find(exp.Window)]
    if len(found) != 1:
        return None
    position, item = found[0]
    window = item.this if isinstance(item, exp.Alias) else None
    if not isinstance(window, exp.Window) or type(window.this) not in RANKINGS or (
            window.args.get("spec") is not None or window.args.get("order") is None):
        return None
    if any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and e.is_star)
           for e in body.expressions) and not _star_only(body, position):
        return None
    base = body.copy()
    del base.expressions[position]
    outputs = [e.alias_or_name.lower() for e in base.expressions]
    hidden = 0

    star = isinstance(base.expressions[0], exp.Star)

    def name_of(node: exp.Expression) -> str:
        """An output of ``base`` that is ``node``, added as a hidden column if none is."""
        nonlocal hidden
        if star and isinstance(node, exp.Column):
            return node.name.lower()  # the star passes input names through
        for e, name in zip(base.expressions, outputs, strict=True):
            e = e.this if isinstance(e, exp.Alias) else e
            if e == node or (isinstance(e, exp.Column) and isinstance(node, exp.Column) and (
                    e.name.lower() == node.name.lower()) and (
                    not e.table or not node.table or e.table.lower() == node.table.lower())):
                return name
        name = f"__w{hidden}"
        hidden += 1
        base.append("expressions", node.copy().as_(name))
        outputs.append(name)
        return name

    partition = [name_of(p) for p in window.args.get("partition_by") or []]
    order = window.args["order"].copy()
    for ordered in order.expressions:
        ordered.set("this", exp.column(name_of(ordered.this)))
    return Ranking(base, RANKINGS[type(window.this)], partition, order,
                   -1 if star else position, item.alias.lower(), hidden)


def _star_only(body: exp.Select, position: int) -> bool:
    """``SELECT *, rank() OVER (..) AS rn``: the star first, then the window."""
    return len(body.expressions) == 2 and position == 1 and isinstance(
        body.expressions[0], exp.Star)


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
        self.kind = kind
        self.limit = limit
        self.position = position
        self.hidden = hidden
        self.groups: dict[tuple, SortedKeyList] = {}
        self.ops = {"sorted_updates": 0, "window_rebuilds": 0}
        self.explanation = [
            f"per-group top-k: {kind}() <= {limit} within each partition of helper view "
            f"{helper}, kept in one sorted list per partition (a change after its "
            "partition's window costs O(log n); one inside it re-reads that window only)"
            if limit < EVERY_RANK else
            f"every {kind}() within each partition of helper view {helper}, kept in one "
            "sorted list per partition (a change re-reads its partition: the ranks after "
            "it may all move)"]

    def fresh(self) -> RankedView:
        """An empty copy, to be built again from the helper's rows."""
        return RankedView(self.name, self.columns, self.helper, self.sql, self.partition,
                          self.key, self.kind, self.limit, self.position, self.hidden)

    def _window(self, rows: SortedKeyList) -> list[tuple]:
        """The partition's rows ranked ``1..limit``, as output rows."""
        out = []
        rank = 0
        previous = None
        for i, row in enumerate(rows):
            if self.kind == "row_number":  # no key needed: the position is the rank
                rank = i + 1
            else:
                key = self.key(row)
                if i == 0 or key != previous:
                    rank = i + 1 if self.kind == "rank" else rank + 1
                previous = key
            if rank > self.limit:
                break
            visible = row[:len(row) - self.hidden] if self.hidden else row
            out.append((*visible[:self.position], rank, *visible[self.position:]))
        return out

    def step(self, batch: Batch, want_delta: bool) -> Delta | None:
        changes = batch.get(self.helper)
        if not changes:
            return {}
        by_group: dict[tuple, list[tuple[tuple, int]]] = defaultdict(list)
        for row, weight in changes.items():
            by_group[self.partition(row)].append((row, weight))
        delta: Counter = Counter()
        for group, rows in by_group.items():
            members = self.groups.get(group)
            if members is None:
                members = self.groups[group] = SortedKeyList(key=self.key)
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


def ranked_view(name: str, ranking: Ranking, limit: int, helper: str, base_columns: Columns,
                sql: str) -> RankedView:
    """The :class:`RankedView` of ``ranking`` over helper view ``helper`` (whose columns
    are ``base_columns``); TopKError if its order is not over them."""
    if limit < 1:
        raise TopKError(f"a rank bound of {limit} keeps no row")
    names = [n.lower() for n, _ in base_columns]
    indexes = []
    for p in ranking.partition:
        if names.count(p) != 1:
            raise TopKError(f"PARTITION BY {p}")
        indexes.append(names.index(p))
    key = sort_key(ranking.order, base_columns)

    def partition(row: tuple) -> tuple:
        return tuple(row[i] for i in indexes)

    visible = list(base_columns[:len(base_columns) - ranking.hidden])
    position = len(visible) if ranking.position < 0 else ranking.position
    columns = [*visible[:position], (ranking.rank_name, BIGINT), *visible[position:]]
    return RankedView(name, columns, helper, sql, partition, key, ranking.kind, limit,
                      position, ranking.hidden)
