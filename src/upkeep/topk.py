"""Top-k views: ``SELECT .. ORDER BY .. LIMIT k [OFFSET m]`` kept with ordered state
(issue 22; as Materialize and Flink keep a top-k), instead of recomputing the query.

The query without its ORDER BY / LIMIT / OFFSET is a hidden helper view, maintained by its
own strategy.  :class:`TopKView` reads that view's changes and keeps every row of it in a
sorted list by the ORDER BY key, so

* a change whose key sorts after the window's last row costs O(log n) and changes nothing;
* a change inside the window, a deletion included, rebuilds only the window (``k + m`` rows
  read from the sorted list), never the whole result.

The order is DuckDB's: ascending unless ``DESC``, NULLs last unless ``NULLS FIRST``, NaN
above every number.  Rows whose keys tie at the window's edge are cut by the rows' own values
(:func:`row_order`), where DuckDB's choice is unspecified: the window is a function of the
rows, not of when they arrived, so a change and its inverse leave it as it was (what-if
pushes a hypothetical batch through the view and takes it back, ``Committer.hypothetical``);
the keys in the window are DuckDB's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from sortedcontainers import SortedKeyList
from sqlglot import exp

from .expressions import Descending, nan_order
from .plan import distinct_on
from .views import Batch, Columns, Delta, MaterializedView


class TopKError(Exception):
    """The query is not a top-k this view keeps (the caller recomputes it instead)."""


def sort_key(order: exp.Order, columns: Columns) -> Callable[[tuple], tuple]:
    """The key of an ORDER BY over output ``columns``: each item must name an output
    column (or its position)."""
    names = [n.lower() for n, _ in columns]
    parts: list[tuple[int, bool, bool]] = []  # (column, descending, nulls first)
    for item in order.expressions:
        node = item.this
        if isinstance(node, exp.Literal) and node.is_int:
            index = int(node.this) - 1
        elif isinstance(node, exp.Column) and node.name.lower() in names \
                and names.count(node.name.lower()) == 1:
            index = names.index(node.name.lower())
        else:
            raise TopKError(f"ORDER BY {node.sql()} (only output columns are kept in order)")
        if not 0 <= index < len(names):
            raise TopKError(f"ORDER BY position {index + 1}")
        descending = bool(item.args.get("desc"))
        parts.append((index, descending, bool(item.args.get("nulls_first"))))
    floats = {i for i, (_, t) in enumerate(columns) if t.kind == "DOUBLE"}

    def key(row: tuple) -> tuple:
        out = []
        for index, descending, nulls_first in parts:
            v = row[index]
            if v is None:
                out.append((0 if nulls_first else 2,))
                continue
            if index in floats:
                v = nan_order(v)
            out.append((1, Descending(v) if descending else v))
        return tuple(out)

    return key


class _Last:
    """A value that sorts after every value of a column: NaN after every number, NULL
    after every value and after NaN (``rank``); equal to itself only, by rank, so it
    survives pickling (Spark's keyed top-k)."""

    __slots__ = ("rank",)

    def __init__(self, rank: int) -> None:
        self.rank = rank

    def __eq__(self, other: object) -> bool:
        return type(other) is _Last and other.rank == self.rank

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((_Last, self.rank))

    def __lt__(self, other: object) -> bool:
        return type(other) is _Last and self.rank < other.rank

    def __gt__(self, other: object) -> bool:
        return type(other) is not _Last or self.rank > other.rank

    def __le__(self, other: object) -> bool:
        return self == other or self < other

    def __ge__(self, other: object) -> bool:
        return self == other or self > other

    def __reduce__(self) -> tuple:
        return _Last, (self.rank,)


NAN_LAST, NULL_LAST = _Last(0), _Last(1)


def row_order(row: tuple) -> tuple:
    """A total order of a view's rows (each column holds one type): NULL after every
    value, NaN after every number; what breaks ties in the ORDER BY key.

    A row without NULL or NaN is its own order, the row itself: a sorted list keyed by
    it shares the row instead of holding a tuple per value beside it (350 bytes less per
    row of four columns)."""
    for v in row:
        if v is None or (type(v) is float and v != v):
            return tuple(NULL_LAST if x is None else
                         NAN_LAST if type(x) is float and x != x else x for x in row)
    return row


def tie_broken(key: Callable[[tuple], tuple]) -> Callable[[tuple], tuple]:
    """A row's position: by ``key`` (an ORDER BY), ties by :func:`row_order`, so what is
    kept in order is a function of the rows, not of when they arrived (top-k, ranked and
    window views, and Spark's keyed top-k, all order rows so)."""
    return lambda row: (key(row), row_order(row))


class TopKView(MaterializedView):
    """Rows ``offset .. offset + limit`` of ``helper`` in ``key`` order, ties in
    :func:`row_order`."""

    strategy = "topk"

    def __init__(self, name: str, columns: Columns, helper: str, sql: str,
                 key: Callable[[tuple], tuple], limit: int, offset: int, hidden: int = 0
                 ) -> None:
        super().__init__(name, columns[:len(columns) - hidden], {helper}, sql)
        self.hidden = hidden  # trailing helper columns kept only to order by
        self.helper = helper
        self.key = key
        self.limit = limit
        self.offset = offset
        self.order_key = tie_broken(key)
        self.sorted = SortedKeyList(key=self.order_key)
        self.ops = {"sorted_updates": 0, "window_rebuilds": 0}
        self.explanation = [
            f"top-k: rows {offset + 1}..{offset + limit} of helper view {helper} in ORDER BY "
            "order, kept in a sorted list (a change after the window costs O(log n); one "
            "inside it re-reads the window only)"]

    def fresh(self) -> TopKView:
        """An empty copy, to be built again from the helper's rows."""
        view = TopKView(self.name, self.columns, self.helper, self.sql, self.key, self.limit,
                        self.offset)
        view.hidden = self.hidden
        return view

    def _window(self) -> list[tuple]:
        end = self.offset + self.limit
        rows = self.sorted.islice(self.offset, min(end, len(self.sorted)))
        if self.hidden:
            return [row[:len(row) - self.hidden] for row in rows]
        return list(rows)

    def _edge(self) -> tuple | None:
        """The position of the window's last row (None: the window is not full)."""
        end = self.offset + self.limit
        return self.order_key(self.sorted[end - 1]) if len(self.sorted) >= end else None

    def step(self, batch: Batch, want_delta: bool) -> Delta | None:
        changes = batch.get(self.helper)
        if not changes or not self.limit:  # LIMIT 0: always empty, nothing to keep
            return {}
        edge = self._edge()
        touches = edge is None or any(not edge < self.order_key(row) for row in changes)
        before = self._window() if touches else None
        for row, weight in changes.items():
            self.ops["sorted_updates"] += abs(weight)
            for _ in range(weight):
                self.sorted.add(row)
            for _ in range(-weight):
                self.sorted.remove(row)
        if not touches:
            return {}
        self.ops["window_rebuilds"] += 1
        delta = Counter(self._window())
        delta.subtract(before)
        out = {r: w for r, w in delta.items() if w}
        self.record(out)
        return out

    def state_size(self) -> int:
        return len(self.sorted)

    def counters(self) -> dict[str, int]:
        return dict(self.ops)


def split_top_k(query: exp.Expression
                ) -> tuple[exp.Expression, exp.Order, int, int, int] | None:
    """``(the query without ORDER BY / LIMIT / OFFSET, its ORDER BY, k, m, hidden)`` for a
    top-k query with constant integer LIMIT and OFFSET, else None.  ORDER BY items that are
    not output columns are added to the query as ``hidden`` trailing columns (``__o0``, ..),
    which the top-k view does not output."""
    if not isinstance(query, (exp.Select, exp.Union, exp.Intersect, exp.Except)):
        return None
    limit = query.args.get("limit")
    order = query.args.get("order")
    if limit is None or order is None:
        return None
    count = limit.expression if isinstance(limit, exp.Limit) else None
    options = limit.args.get("limit_options")
    if options is not None and (options.args.get("percent") or options.args.get("with_ties")):
        return None  # LIMIT n PERCENT / WITH TIES: not n rows (DuckDB recomputes them)
    if distinct_on(query):
        return None  # the ORDER BY also picks each DISTINCT ON group's row
    offset_node = query.args.get("offset")
    offset = offset_node.expression if isinstance(offset_node, exp.Offset) else None
    if not (isinstance(count, exp.Literal) and count.is_int) or (
            offset is not None and not (isinstance(offset, exp.Literal) and offset.is_int)):
        return None
    if order.find(exp.Collate):
        return None  # a collation orders values as the stored ones do not
    order = all_expanded(query, order.copy())
    if order is None:
        return None
    body = query.copy()
    for key in ("order", "limit", "offset"):
        body.set(key, None)
    hidden = _hide_order_items(body, order)
    return body, order, int(count.this), int(offset.this) if offset is not None else 0, hidden


def all_expanded(query: exp.Expression, order: exp.Order) -> exp.Order | None:
    """``order`` with DuckDB's ``ORDER BY ALL`` spelled as every output column's position,
    left to right (the same direction and NULLS place for each); None when the output
    columns are not known here (``*``)."""
    items = order.expressions
    if not any(isinstance(i.this, exp.Var) and i.this.name.upper() == "ALL" for i in items):
        return order
    selects = query.selects
    if len(items) != 1 or any(isinstance(e, exp.Star) or (
            isinstance(e, exp.Column) and e.is_star) for e in selects):
        return None
    (item,) = items
    order.set("expressions", [
        exp.Ordered(this=exp.Literal.number(i + 1), desc=item.args.get("desc"),
                    nulls_first=item.args.get("nulls_first"))
        for i in range(len(selects))])
    return order


def _hide_order_items(body: exp.Expression, order: exp.Order) -> int:
    """Point each ORDER BY item that is no output column of ``body`` at a hidden column
    added for it; how many were added (0 when the body cannot take one: a set operation,
    DISTINCT, or ``*``, where the helper's columns tell)."""
    if not isinstance(body, exp.Select) or body.args.get("distinct") or any(
            isinstance(e, exp.Star) or (isinstance(e, exp.Column) and e.is_star)
            for e in body.expressions):
        return 0
    names = [e.alias_or_name.lower() for e in body.expressions]
    hidden = 0
    for item in order.expressions:
        node = item.this
        if (isinstance(node, exp.Literal) and node.is_int) or (
                isinstance(node, exp.Column) and not node.table
                and names.count(node.name.lower()) == 1):
            continue
        same = [i for i, e in enumerate(body.expressions)
                if (e.this if isinstance(e, exp.Alias) else e) == node]
        if len(same) == 1:  # the expression of an output column
            item.set("this", exp.Literal.number(same[0] + 1))
            continue
        name = f"__o{hidden}"
        hidden += 1
        body.append("expressions", node.copy().as_(name))
        item.set("this", exp.column(name))
    return hidden
