"""Window functions kept per partition (issue 22): ``f(..) OVER (PARTITION BY p ORDER BY o
[frame])`` in a view's select list, instead of recomputing the whole view.

A select whose select list holds window functions is split (:func:`split_windows`) into a
helper view, the select without its windows plus hidden columns for the partition, order
and argument expressions, maintained by its own strategy, and a :class:`WindowView` over
it.  The view keeps the helper's rows per partition (the columns every window partitions
by; a window with more is evaluated per part) in the order they arrived and, when a batch
changes a partition, computes that partition's window values again and emits the
difference.  A rank, a running total or a partition total can move for every row of the
partition, so the work per change is the size of the partitions it touches, as
Materialize keeps window functions; other partitions cost nothing.  Functions that read
a bounded number of rows around their own (``lag`` / ``lead``, ``ROWS`` frames with
constant offsets) keep their partitions sorted instead, and a change re-reads only the
rows near it.  A bounded rank (``rn <= k``) is kept more cheaply by :mod:`upkeep.ranked`.  Windows inside expressions
(``x - LAG(x) OVER (..)``) are first columns of a derived table
(:func:`windows_as_derived`), the expressions computed over them.

Functions and their DuckDB meaning:

* ``row_number``, ``rank``, ``dense_rank``, ``percent_rank``, ``cume_dist``, ``ntile(n)``;
* ``lag`` / ``lead`` (constant offset and default), ``first_value`` / ``last_value``, also
  ``IGNORE NULLS`` (the nearest rows with a value);
* ``sum``, ``count``, ``count(*)``, ``avg``, ``min``, ``max`` over a frame: the whole
  partition without ``ORDER BY``, else ``RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT
  ROW`` (peers included) unless given.  Frames are ``ROWS`` with constant offsets, or
  ``RANGE`` bounded by ``UNBOUNDED`` / ``CURRENT ROW`` or by constant distances from a
  numeric order column's value.  Sums are exact (:mod:`upkeep.exact`).

Rows that tie on the order (and all rows, without an ORDER BY) are taken in the order of
their own values (:func:`.topk.row_order`), so a view's rows are a function of its input's,
not of when they arrived; DuckDB's order among peers is unspecified (``row_number`` or
``lag`` over ties can differ from DuckDB's choice).
Anything else (``GROUPS`` frames, ``RANGE`` offsets over dates or several order columns,
named windows, ``DISTINCT`` arguments) leaves the view to be recomputed.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from operator import itemgetter

from sortedcontainers import SortedKeyList
from sqlglot import exp

from .aggregates import average_of, exact_converter, fitted_sum, from_exact, may_overflow
from .errors import EvaluationError, SchemaError
from .expressions import ExpressionCompiler, integer_literal_type, nan_order, table_scope
from .plan import output_name, unordered
from .topk import TopKError, row_order, sort_key, tie_broken
from .types import BIGINT, DOUBLE, HUGEINT, INT_RANGES, SqlType, coerce_value, common_numeric
from .views import Batch, Columns, Delta, MaterializedView
from .zset import add_into

RANKINGS = {exp.RowNumber: "row_number", exp.Rank: "rank", exp.DenseRank: "dense_rank"}
_DISTRIBUTIONS = {exp.PercentRank: "percent_rank", exp.CumeDist: "cume_dist",
                  exp.Ntile: "ntile"}
_VALUES = {exp.Lag: "lag", exp.Lead: "lead", exp.FirstValue: "first_value",
           exp.LastValue: "last_value"}
_AGGREGATES = {exp.Sum: "sum", exp.Count: "count", exp.Avg: "avg", exp.Min: "min",
               exp.Max: "max"}
_FRAMED = ("first_value", "last_value", "sum", "count", "count_star", "avg", "min", "max")

WINDOWED = "__windowed"  # the alias a select with windows is kept under (catalog)

#: ("unbounded" | "preceding" | "current" | "following", offset): rows (int) or, in a RANGE
#: frame, the order value's distance (Decimal)
Bound = tuple[str, int | Decimal]


@dataclass
class WindowFunction:
    """One window call: its kind, argument columns (names in the helper view), order,
    frame and the constant parameters of ``lag`` / ``lead`` / ``ntile``."""

    kind: str
    args: list[str]
    order: exp.Order | None
    frame: tuple[str, Bound, Bound] | None  # (ROWS | RANGE, start, end); None: the default
    partition: list[str] = field(default_factory=list)
    offset: int = 1
    ignore_nulls: bool = False  # lag / lead / first_value / last_value skip NULL values
    default: object = None


@dataclass
class Windowing:
    """A select split for :class:`WindowView`: ``base`` is the select without its windows
    (plus ``hidden`` columns at its end), ``items`` the output in order: ``("base", i)``
    for the i-th item of ``base`` or ``("window", j)`` for ``functions[j]``."""

    base: exp.Select
    partition: list[str]
    functions: list[WindowFunction]
    names: list[str]  # the output names of the functions
    items: list[tuple[str, int]] = field(default_factory=list)
    hidden: int = 0


def split_windows(body: exp.Expression) -> Windowing | None:
    """The :class:`Windowing` of a select whose select list holds window functions the view
    keeps (see the module), or None."""
    if not isinstance(body, exp.Select) or any(body.args.get(k) for k in (
            "qualify", "windows", "limit", "offset", "distinct")):
        return None
    windows = [i for i, e in enumerate(body.expressions) if e.find(exp.Window)]
    if not windows or any(not isinstance(body.expressions[i].unalias(), exp.Window)
                          for i in windows):
        return None  # a window inside an expression
    stars = [e for e in body.expressions
             if isinstance(e, exp.Star) or (isinstance(e, exp.Column) and e.is_star)]
    if len(stars) > 1 or (stars and not isinstance(stars[0], exp.Star)):
        return None
    base = body.copy()
    base.set("expressions", [e.copy() for i, e in enumerate(body.expressions)
                             if i not in windows])
    star = bool(stars)
    outputs = [output_name(e) for e in base.expressions]
    hidden = 0

    def name_of(node: exp.Expression) -> str:
        """An output of ``base`` that is ``node``, added as a hidden column if none is."""
        nonlocal hidden
        if star and isinstance(node, exp.Column):
            return node.name.lower()  # the star passes input names through
        for item, name in zip(base.expressions, outputs, strict=False):
            e = item.unalias()
            # else DuckDB names it; a name two outputs share (t.a, r.a) picks neither
            named = isinstance(item, (exp.Alias, exp.Column)) and outputs.count(name) == 1
            if not named:
                continue
            if e == node or (
                    isinstance(e, exp.Column) and isinstance(node, exp.Column) and (
                        e.name.lower() == node.name.lower()) and (
                        not e.table or not node.table or e.table.lower() == node.table.lower())):
                return name
        name = f"__w{hidden}"
        hidden += 1
        base.append("expressions", node.copy().as_(name))
        outputs.append(name)
        return name

    functions, names, items = [], [], []
    visible = 0
    for i, e in enumerate(body.expressions):
        if i not in windows:
            items.append(("base", visible))
            visible += 1
            continue
        function = _function(e.unalias(), name_of)
        if function is None:
            return None
        items.append(("window", len(functions)))
        functions.append(function)
        names.append(e.alias.lower() if isinstance(e, exp.Alias) else e.sql(dialect="duckdb"))
    partition = [p for p in functions[0].partition if all(p in f.partition for f in functions)]
    return Windowing(base, partition, functions, names, items, hidden)


def _function(window: exp.Window, name_of: Callable[[exp.Expression], str]
              ) -> WindowFunction | None:
    """The :class:`WindowFunction` of one window, or None if the view cannot keep it."""
    call = window.this
    ignore_nulls = isinstance(call, exp.IgnoreNulls)
    if ignore_nulls:
        call = call.this
    kind = (RANKINGS.get(type(call)) or _DISTRIBUTIONS.get(type(call))
            or _VALUES.get(type(call)) or _AGGREGATES.get(type(call)))
    if kind is None or isinstance(call.this, exp.Distinct) or (
            ignore_nulls and kind not in _VALUES.values()):
        return None
    order = window.args.get("order")
    if any(item.find(exp.Collate) for item in [
            *(order.expressions if order is not None else ()),
            *(window.args.get("partition_by") or ())]):
        return None  # a collation orders (groups) values as the stored ones do not
    if order is not None:
        order = order.copy()
        for ordered in order.expressions:
            ordered.set("this", exp.column(name_of(ordered.this)))
    if order is None and (kind in RANKINGS.values() or kind in _DISTRIBUTIONS.values()
                          or kind in ("lag", "lead")):
        return None  # they would read an order DuckDB leaves unspecified
    frame = _frame(window.args.get("spec"), order is not None)
    if frame is False or (frame is not None and kind not in _FRAMED):
        return None
    if frame is not None and any(isinstance(b[1], Decimal) for b in frame[1:]) and len(
            order.expressions) != 1:
        return None  # RANGE offsets measure one order column
    partition = [name_of(p) for p in window.args.get("partition_by") or []]
    function = WindowFunction(kind, [], order, frame, partition)
    if kind == "count" and (call.this is None or isinstance(call.this, exp.Star)):
        function.kind = "count_star"
    elif kind == "ntile":
        if not (isinstance(call.this, exp.Literal) and call.this.is_int) or int(
                call.this.this) < 1:
            return None
        function.offset = int(call.this.this)
    elif kind in _VALUES.values() or kind in _AGGREGATES.values():
        if call.this is None or call.args.get("expressions"):
            return None
        function.args = [name_of(call.this)]
        if kind in ("lag", "lead"):
            offset, default = call.args.get("offset"), call.args.get("default")
            if offset is not None:
                if not (isinstance(offset, exp.Literal) and offset.is_int):
                    return None
                function.offset = int(offset.this)
            if default is not None:
                if not isinstance(default, (exp.Literal, exp.Null, exp.Neg)):
                    return None
                function.default = default
    if ignore_nulls:
        if function.offset < 1:
            return None
        function.ignore_nulls = True
    return function


def _frame(spec: exp.WindowSpec | None, ordered: bool
           ) -> tuple[str, Bound, Bound] | None | bool:
    """A frame as (``ROWS`` | ``RANGE``, start, end); None for the default; False for one
    the view does not keep."""
    if spec is None:
        return None
    kind = (spec.args.get("kind") or "").upper()
    if kind not in ("ROWS", "RANGE") or spec.args.get("exclude"):
        return False

    def bound(value, side, default: Bound) -> Bound | None:
        if value is None:
            return default
        if isinstance(value, str):
            value = value.upper()
            if value == "UNBOUNDED":
                return ("unbounded", 0)
            if value == "CURRENT ROW":
                return ("current", 0)
            return None
        if isinstance(value, exp.Literal) and value.is_int and kind == "ROWS":
            return ((side or "").lower(), int(value.this))
        if isinstance(value, exp.Literal) and value.is_number and kind == "RANGE":
            number = Decimal(value.this)  # by value: the order column's distance
            return ((side or "").lower(), number)
        return None

    start = bound(spec.args.get("start"), spec.args.get("start_side"), ("unbounded", 0))
    end = bound(spec.args.get("end"), spec.args.get("end_side"), ("current", 0))
    if start is None or end is None or (not ordered and (start, end) != (
            ("unbounded", 0), ("unbounded", 0))):
        return False
    if start[0] == "unbounded" and (spec.args.get("start_side") or "").upper() == "FOLLOWING":
        return False
    if end[0] == "unbounded" and (spec.args.get("end_side") or "").upper() == "PRECEDING":
        return False
    return (kind, start, end)


def ranks(rows: Iterable[tuple], key: Callable[[tuple], tuple], kind: str) -> Iterator[int]:
    """``row_number`` / ``rank`` / ``dense_rank`` of ``rows``, which are in order, one by
    one (a caller that needs the first k stops early)."""
    rank = 0
    previous = None
    for i, row in enumerate(rows):
        if kind == "row_number":  # no key needed: the position is the rank
            rank = i + 1
        else:
            k = key(row)
            if i == 0 or k != previous:
                rank = i + 1 if kind == "rank" else rank + 1
            previous = k
        yield rank


def _same(key: tuple) -> tuple:
    return key


def _peer_ranges(keys: list[tuple]) -> tuple[list[int], list[int]]:
    """Per position, the first and last position of its peer group (equal keys)."""
    n = len(keys)
    starts, ends = [0] * n, [0] * n
    i = 0
    while i < n:
        j = i
        while j + 1 < n and keys[j + 1] == keys[i]:
            j += 1
        for p in range(i, j + 1):
            starts[p], ends[p] = i, j
        i = j + 1
    return starts, ends


def _ntile(n: int, buckets: int) -> list[int]:
    """DuckDB's ``ntile``: the first ``n % buckets`` tiles take one row more."""
    size, large = divmod(n, buckets)
    small_start = large * (size + 1)
    return [1 + (i // (size + 1) if i < small_start else large + (i - small_start) // size)
            for i in range(n)]


def by_partition(changes: Delta | None, partition: Callable[[tuple], tuple]
                 ) -> dict[tuple, list[tuple[tuple, int]]]:
    """A helper view's changed rows with their weights, by partition."""
    out: dict[tuple, list[tuple[tuple, int]]] = defaultdict(list)
    for row, weight in (changes or {}).items():
        out[partition(row)].append((row, weight))
    return out


class WindowView(MaterializedView):
    """The rows of ``helper`` with window values computed per partition (see the module).

    With ``reach`` (every function reads at most that many rows before and after its row
    in one shared order: ``lag`` / ``lead`` and ``ROWS`` frames with constant offsets), a
    partition is kept sorted and a change re-reads only the rows within ``2 * reach`` of
    the rows it changes: a time series' ``x - LAG(x)`` costs the same with ten rows per
    partition or a million.  Otherwise a change re-reads its whole partition."""

    strategy = "window"

    def __init__(self, name: str, columns: Columns, helper: str, sql: str,
                 partition: Callable[[tuple], tuple], evaluators: list[Callable],
                 project: Callable[[tuple], tuple], order: Callable[[tuple], tuple] | None,
                 reach: int | None) -> None:
        super().__init__(name, columns, {helper}, sql)
        self.helper = helper
        self.partition = partition
        self.evaluators = evaluators
        self.project = project  # a helper row followed by its window values -> output row
        self.order = order
        # a partition's rows in reach mode: by the ORDER BY, ties by the rows' values
        self.order_key = None if order is None else tie_broken(order)
        self.reach = reach
        self.groups: dict[tuple, dict[tuple, int]] = {}
        self.outputs: dict[tuple, list[tuple]] = {}  # per partition, its output rows now
        self.sorted: dict[tuple, SortedKeyList] = {}  # per partition, with a reach
        self.ops = {"partition_rereads": 0, "rows_reread": 0}
        self.explanation = [
            f"window functions over helper view {helper}, its rows kept per partition " + (
                f"in order (a change re-reads the rows within {2 * reach} of it)"
                if reach is not None else
                "(a change re-reads the partitions it touches: every row's value may move)")]

    def fresh(self) -> WindowView:
        """An empty copy, to be built again from the helper's rows."""
        return WindowView(self.name, self.columns, self.helper, self.sql, self.partition,
                          self.evaluators, self.project, self.order, self.reach)

    def evaluate(self, rows: list[tuple]) -> list[tuple]:
        """The output rows of a partition's rows (or of a run of them in order); Spark's
        keyed window step evaluates its partitions with it too."""
        values = [evaluate(rows) for evaluate in self.evaluators]
        project = self.project
        extras = zip(*values, strict=True)  # each row's window values
        return [project(row + extra) for row, extra in zip(rows, extras, strict=True)]

    def step(self, batch: Batch, want_delta: bool) -> Delta | None:
        delta: Delta = {}
        reread = self._reread if self.reach is None else self._reread_near
        for group, rows in by_partition(batch.get(self.helper), self.partition).items():
            reread(group, rows, delta)
        self.record(delta)
        return delta

    def _reread(self, group: tuple, rows: list[tuple[tuple, int]], delta: Delta) -> None:
        """Apply a partition's changes; its outputs before and after into ``delta``."""
        members = self.groups.get(group)
        if members is None:
            members = self.groups[group] = {}
        for row in self.outputs.pop(group, ()):
            add_into(delta, row, -1)
        for row, weight in rows:
            n = members.get(row, 0) + weight
            if n > 0:
                members[row] = n
            else:
                members.pop(row, None)
        self.ops["partition_rereads"] += 1
        if not members:
            del self.groups[group]
            return
        listed = [row for row, n in members.items() for _ in range(n)]
        self.ops["rows_reread"] += len(listed)
        outputs = self.outputs[group] = self.evaluate(listed)
        for row in outputs:
            add_into(delta, row, 1)

    def _reread_near(self, group: tuple, rows: list[tuple[tuple, int]],
                     delta: Delta) -> None:
        """Apply a partition's changes to its sorted rows; the outputs of the rows within
        ``reach`` of a change, before and after, into ``delta``.  Rows more than ``reach``
        before the first change or after the last keep their outputs; each output read
        needs ``reach`` rows of context on either side."""
        members = self.sorted.get(group)
        if members is None:
            members = self.sorted[group] = SortedKeyList(key=self.order_key)
        n = len(members)
        before, after = n, n  # unchanged rows before the first change, after the last
        for row, weight in rows:
            if weight < 0:  # its -weight copies are rows p .. p - weight - 1
                p = members.index(row)
                before, after = min(before, p), min(after, n - p + weight)
            else:
                p = members.bisect_right(row)  # an insert lands after its equals
                before, after = min(before, p), min(after, n - p)
        first, kept = max(before - self.reach, 0), max(after - self.reach, 0)
        for row in self._segment(members, first, kept):
            add_into(delta, row, -1)
        for row, w in rows:
            for _ in range(abs(w)):
                (members.add if w > 0 else members.remove)(row)
        for row in self._segment(members, first, kept):
            add_into(delta, row, 1)
        if not members:
            del self.sorted[group]

    def _segment(self, members: SortedKeyList, first: int, kept: int) -> list[tuple]:
        """The outputs of rows ``first`` .. ``len - 1 - kept``, read with ``reach`` rows of
        context on each side (or the partition's edge)."""
        last = len(members) - 1 - kept
        if last < first:
            return []
        start, end = max(first - self.reach, 0), min(last + self.reach, len(members) - 1)
        context = members[start:end + 1]
        self.ops["rows_reread"] += len(context)
        return self.evaluate(context)[first - start:last - start + 1]

    def state_size(self) -> int:
        return (sum(len(g) for g in self.groups.values())
                + sum(len(g) for g in self.sorted.values()) + 2 * len(self.output))

    def counters(self) -> dict[str, int]:
        return dict(self.ops)


def window_view(name: str, windowing: Windowing, helper: str, base_columns: Columns,
                sql: str, outer: list[exp.Expression] | None = None) -> WindowView:
    """The :class:`WindowView` of ``windowing`` over helper view ``helper`` (whose columns
    are ``base_columns``); TopKError if a partition, order or argument is not one of them.
    ``outer``: expressions over the windowed rows (:func:`windows_apart`) that the view
    outputs instead of them (upkeep.Error if one cannot be compiled)."""
    partition = partition_function(windowing, base_columns)
    evaluators, types = [], []
    for f in windowing.functions:
        args = [_column_index(a, base_columns, "window argument") for a in f.args]
        arg_type = base_columns[args[0]][1] if args else None
        key = sort_key(f.order, base_columns) if f.order is not None else None
        by_value = None  # RANGE offsets: (order column, descending, its integer type)
        if f.frame is not None and any(isinstance(b[1], Decimal) for b in f.frame[1:]):
            item = f.order.expressions[0]
            column = _column_index(item.this.name, base_columns, "ORDER BY")
            if not base_columns[column][1].is_numeric:
                raise TopKError(f"RANGE offsets over {base_columns[column][1]}")
            typ = base_columns[column][1]
            by_value = (column, bool(item.args.get("desc")),
                        typ.kind if typ.is_integer else None)
        evaluate = _evaluator(f, key, args[0] if args else None, arg_type, by_value)
        if set(f.partition) != set(windowing.partition):  # finer than the view's
            evaluate = _per_partition(evaluate, [
                _column_index(p, base_columns, "PARTITION BY") for p in f.partition])
        evaluators.append(evaluate)
        types.append(_result_type(f.kind, arg_type))
    layout, columns = output_layout(windowing, base_columns, types)
    width = len(base_columns)
    project = itemgetter(*[i if kind == "base" else width + i for kind, i in layout])
    if len(layout) == 1:
        project = _one(project)
    if outer is not None:
        compiler = ExpressionCompiler(table_scope(WINDOWED, columns))
        expressions = compiler.compile_tuple([e.unalias() for e in outer])
        columns = [(e.alias_or_name if isinstance(e, exp.Alias) else e.sql(dialect="duckdb"),
                    compiler.type_of(e.unalias())) for e in outer]
        windowed = project

        def project(row: tuple) -> tuple:
            return expressions(windowed(row))
    functions = windowing.functions
    reaches = [_reach(f) for f in functions]
    local = None not in reaches and len({f.order.sql() for f in functions}) == 1 and all(
        set(f.partition) == set(windowing.partition) for f in functions)
    order = sort_key(functions[0].order, base_columns) if local else None
    return WindowView(name, columns, helper, sql, partition, evaluators, project, order,
                      max(reaches) if local else None)


def _reach(f: WindowFunction) -> int | None:
    """How many rows before and after its own a function's value reads, in its order;
    None when it reads the whole partition, or its peers, or has no order."""
    if f.order is None:
        return None
    if f.kind in ("lag", "lead"):
        return None if f.ignore_nulls else abs(f.offset)
    if f.frame is None or f.frame[0] != "ROWS":
        return None
    _, start, end = f.frame
    if "unbounded" in (start[0], end[0]):
        return None
    return max(start[1], end[1])


def _one(get: Callable[[tuple], object]) -> Callable[[tuple], tuple]:
    """``itemgetter`` of one index as a function returning a 1-tuple."""
    def project(row: tuple) -> tuple:
        return (get(row),)

    return project


def _column_index(name: str, columns: Columns, what: str) -> int:
    """The position of the one column called ``name``; TopKError if none or several."""
    names = [n.lower() for n, _ in columns]
    if names.count(name.lower()) != 1:
        raise TopKError(f"{what} {name}")
    return names.index(name.lower())


def partition_function(windowing: Windowing, base_columns: Columns
                       ) -> Callable[[tuple], tuple]:
    """``partition(row)``: a helper row's PARTITION BY values."""
    indexes = [_column_index(p, base_columns, "PARTITION BY") for p in windowing.partition]

    def partition(row: tuple) -> tuple:
        return tuple(row[i] for i in indexes)

    return partition


def output_layout(windowing: Windowing, base_columns: Columns, types: list[SqlType]
                  ) -> tuple[list[tuple[str, int]], Columns]:
    """Where each output column comes from, ``("base", column of the helper view)`` or
    ``("window", function)``, and the output columns (a ``*`` stands for the helper's
    columns it expands to)."""
    visible = len(base_columns) - windowing.hidden
    base_items = sum(1 for kind, _ in windowing.items if kind == "base")
    star = next((i for i, e in enumerate(windowing.base.expressions[:base_items])
                 if isinstance(e, exp.Star)), None)
    layout, columns = [], []
    column = 0
    for kind, i in windowing.items:
        if kind == "window":
            layout.append(("window", i))
            columns.append((windowing.names[i], types[i]))
            continue
        width = visible - (base_items - 1) if i == star else 1
        for c in range(column, column + width):
            layout.append(("base", c))
            columns.append(base_columns[c])
        column += width
    return layout, columns


def windowing_of(query: exp.Expression
                 ) -> tuple[Windowing, list[exp.Expression] | None] | None:
    """The :class:`Windowing` of a select with window functions in its select list, or
    inside expressions there (then also those expressions over the windowed rows,
    :func:`windows_apart`), ORDER BY without LIMIT dropped; None when it has neither."""
    body, outer = query.transform(unordered), None
    windowing = split_windows(body)
    if windowing is None:  # windows inside expressions: computed over the windows
        body, outer = windows_apart(body) or (None, None)
        windowing = split_windows(body) if body is not None else None
    return None if windowing is None else (windowing, outer)


def windows_as_derived(query: exp.Expression) -> exp.Expression:
    """A select with window functions the view keeps as ``SELECT * FROM (it) AS
    __windowed``, which the catalog keeps as a :class:`WindowView` (or, for a bounded
    rank in an enclosing query, :mod:`upkeep.ranked`).  Windows inside expressions
    (``b - LAG(b) OVER (..)``) are computed as columns of that derived table first, the
    expressions over them outside.  Other queries unchanged."""
    if split_windows(query) is not None:
        inner, outer = query.copy(), [exp.Star()]
    else:
        inner, outer = windows_apart(query) or (None, None)
        if inner is None:
            return query
    return exp.select(*outer).from_(exp.Subquery(this=inner, alias=exp.TableAlias(
        this=exp.to_identifier(WINDOWED))))


def windows_apart(query: exp.Expression) -> tuple[exp.Select, list[exp.Expression]] | None:
    """For a select with windows inside expressions: the select computing each window,
    aggregate and column those expressions read as a column of its own, and the select
    list over them; None if the windows still cannot be kept."""
    if not isinstance(query, exp.Select) or any(query.args.get(k) for k in (
            "qualify", "windows", "limit", "offset", "distinct")):
        return None
    items = query.expressions
    if not any(w.find_ancestor(exp.Select) is query for e in items
               for w in e.find_all(exp.Window)) or any(
            isinstance(e, exp.Star) or (isinstance(e, exp.Column) and e.is_star)
            for e in items):
        return None
    lifted: list[exp.Expression] = []
    names: dict[str, str] = {}  # an inner expression's SQL -> its column

    def lift(node: exp.Expression) -> exp.Expression:
        if not isinstance(node, (exp.Window, exp.AggFunc, exp.Column)) or node.find_ancestor(
                exp.Select) is not None:  # (the item is a copy: a select above is a subquery)
            return node
        name = names.get(node.sql())
        if name is None:
            name = names[node.sql()] = f"__x{len(names)}"
            lifted.append(node.copy().as_(name))
        return exp.column(name, WINDOWED)

    outer = []
    for item in items:
        new = item.transform(lift)
        if isinstance(item, exp.Column):
            new = new.as_(item.name)
        outer.append(new)
    inner = query.copy()
    inner.set("expressions", lifted)
    if split_windows(inner) is None:
        return None
    return inner, outer


def _result_type(kind: str, arg_type: SqlType | None) -> SqlType:
    """DuckDB's type of a window function's value."""
    if kind in ("row_number", "rank", "dense_rank", "ntile", "count", "count_star"):
        return BIGINT
    if kind in ("percent_rank", "cume_dist", "avg"):
        return DOUBLE
    if kind == "sum":
        return HUGEINT if arg_type.is_integer else (
            SqlType("DECIMAL", 38, arg_type.scale) if arg_type.kind == "DECIMAL" else DOUBLE)
    return arg_type


def _per_partition(evaluate: Callable[[list[tuple]], list], indexes: list[int]
                   ) -> Callable[[list[tuple]], list]:
    """``evaluate`` applied to each part of the rows with equal ``indexes`` columns: a
    function whose PARTITION BY is finer than the partitions the view keeps."""

    def per_part(rows: list[tuple]) -> list:
        parts: dict[tuple, list[int]] = defaultdict(list)
        for p, row in enumerate(rows):
            parts[tuple(row[i] for i in indexes)].append(p)
        values = [None] * len(rows)
        for positions in parts.values():
            for p, value in zip(positions, evaluate([rows[p] for p in positions]),
                                strict=True):
                values[p] = value
        return values

    return per_part


def _evaluator(f: WindowFunction, key: Callable | None, arg: int | None,
               arg_type: SqlType | None, by_value: tuple[int, bool, str | None] | None = None
               ) -> Callable[[list[tuple]], list]:
    """``evaluate(rows) -> values``: the function's value for each of a partition's rows
    (in the order given), computed over the rows sorted by its ORDER BY, rows that tie
    (or all, without an ORDER BY) in the order of their own values (:func:`.topk.row_order`):
    the values are a function of the partition's rows, not of the order they arrived in."""
    compute = _computation(f, arg, arg_type, by_value)

    def evaluate(rows: list[tuple]) -> list:
        n = len(rows)
        ties = [row_order(r) for r in rows]
        if key is None:
            keys = [()] * n
            order = sorted(range(n), key=ties.__getitem__)
        else:
            keys = [key(r) for r in rows]
            order = sorted(range(n), key=lambda p: (keys[p], ties[p]))
        sorted_values = compute([rows[p] for p in order], [keys[p] for p in order])
        values = [None] * n
        for p, value in zip(order, sorted_values, strict=True):
            values[p] = value
        return values

    return evaluate


def _computation(f: WindowFunction, arg: int | None, arg_type: SqlType | None,
                 by_value: tuple[int, bool, str | None] | None = None
                 ) -> Callable[[list[tuple], list[tuple]], list]:
    """The function's values over rows in window order (with their order keys)."""
    kind = f.kind
    if kind in RANKINGS.values():
        return lambda rows, keys: list(ranks(keys, _same, kind))
    if kind == "percent_rank":
        def percent_rank(rows, keys):
            n = len(rows)
            return [(r - 1) / (n - 1) if n > 1 else 0.0 for r in ranks(keys, _same, "rank")]
        return percent_rank
    if kind == "cume_dist":
        def cume_dist(rows, keys):
            _, ends = _peer_ranges(keys)
            return [(e + 1) / len(rows) for e in ends]
        return cume_dist
    if kind == "ntile":
        return lambda rows, keys: _ntile(len(rows), f.offset)
    if kind in ("lag", "lead"):
        step = -f.offset if kind == "lag" else f.offset
        try:
            default = None if f.default is None else coerce_value(
                _literal(f.default), arg_type)
        except ValueError as exc:  # not of the argument's type: left to DuckDB
            raise TopKError(f"{kind} default {f.default.sql()}: {exc}") from None

        def shifted(rows, keys):
            n = len(rows)
            if not f.ignore_nulls:
                return [rows[p + step][arg] if 0 <= p + step < n else default
                        for p in range(n)]
            present = [p for p in range(n) if rows[p][arg] is not None]
            out = []
            for p in range(n):  # the offset-th row before (after) p with a value
                i = (bisect_left(present, p) - f.offset if kind == "lag"
                     else bisect_right(present, p) + f.offset - 1)
                out.append(rows[present[i]][arg] if 0 <= i < len(present) else default)
            return out
        return shifted
    frame = f.frame or (("RANGE", ("unbounded", 0), ("current", 0)) if f.order is not None
                        else ("ROWS", ("unbounded", 0), ("unbounded", 0)))

    def framed(rows, keys):
        lo, hi = _frame_bounds(frame, keys, rows, by_value)
        values = [r[arg] for r in rows] if arg is not None else [1] * len(rows)
        if f.ignore_nulls:  # first_value / last_value: the first (last) value in the frame
            present = [p for p, v in enumerate(values) if v is not None]
            picks = ([bisect_left(present, a) for a in lo] if kind == "first_value"
                     else [bisect_right(present, b) - 1 for b in hi])
            return [values[present[i]] if 0 <= i < len(present)
                    and a <= present[i] <= b else None
                    for i, a, b in zip(picks, lo, hi, strict=True)]
        return _aggregate(kind, values, lo, hi, arg_type)
    return framed


def _literal(node: exp.Expression) -> object:
    """The value of a constant ``lag`` / ``lead`` default."""
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Neg):
        value = _literal(node.this)
        return -value
    if node.is_string:
        return node.this
    return int(node.this) if node.is_int else float(node.this)


def _frame_bounds(frame: tuple[str, Bound, Bound], keys: list[tuple],
                  rows: list[tuple] | None = None,
                  by_value: tuple[int, bool, str | None] | None = None
                  ) -> tuple[list[int], list[int]]:
    """Per position, the first and last position of its frame (last < first: empty).
    ``RANGE`` offsets (``by_value``: the order column, whether it descends, and its type
    if an integer one) bound the frame by the order value's distance, DuckDB's way: rows
    whose value is NULL or NaN frame their peers, and a bound past an integer column's
    type is an overflow (:func:`_check_range_bounds`)."""
    kind, start, end = frame
    n = len(keys)
    starts, ends = _peer_ranges(keys) if kind == "RANGE" else (None, None)
    if by_value is not None:
        column, descending, integer = by_value
        if integer is not None:
            _check_range_bounds(rows, column, descending, integer, (start, end))
        numbers = [p for p, r in enumerate(rows) if r[column] is not None
                   and r[column] == r[column]]  # a contiguous run in the order
        first_number = numbers[0] if numbers else 0
        # ascending in u, whichever way the order goes: PRECEDING is u - offset
        u = [(-1 if descending else 1) * rows[p][column] for p in numbers]

    def position(bound: Bound, p: int, first: bool) -> int:
        side, offset = bound
        if side == "unbounded":
            return 0 if first else n - 1
        if side == "current":
            if starts is None:
                return p
            return starts[p] if first else ends[p]
        if by_value is None:
            return p - offset if side == "preceding" else p + offset
        value = rows[p][column]
        if value is None or value != value:
            return starts[p] if first else ends[p]
        here = (-1 if descending else 1) * value
        target = _shifted(here, -offset if side == "preceding" else offset)
        return first_number + (bisect_left(u, target) if first
                               else bisect_right(u, target) - 1)

    lo = [max(position(start, p, True), 0) for p in range(n)]
    hi = [min(position(end, p, False), n - 1) for p in range(n)]
    return lo, hi


def _check_range_bounds(rows: list[tuple], column: int, descending: bool, kind: str,
                        bounds: tuple[Bound, Bound]) -> None:
    """DuckDB computes a RANGE frame's bounds as ``value -/+ offset`` in the type of the
    order column and the offset (the column's where the offset fits it, as an integer
    literal beside it is typed): a bound past that type is an overflow there, an
    EvaluationError here (``2147483647 + 1`` of ``RANGE 1 FOLLOWING`` on an INTEGER)."""
    for side, offset in bounds:
        if side not in ("preceding", "following"):
            continue
        typ = common_numeric(SqlType(kind), integer_literal_type(int(offset), SqlType(kind)))
        limit = INT_RANGES[typ.kind]
        adds = (side == "following") != descending  # DESC: PRECEDING is value + offset
        for r in rows:
            value = r[column]
            if value is None:
                continue
            got = value + int(offset) if adds else value - int(offset)
            if not -limit <= got < limit:
                raise EvaluationError(
                    f"overflow in {'addition' if adds else 'subtraction'} of RANGE frame "
                    f"bound ({value} {'+' if adds else '-'} {int(offset)}) past {typ.sql()}")


def _shifted(value: object, offset: Decimal) -> object:
    """``value + offset`` in the value's own arithmetic."""
    if isinstance(value, Decimal):
        return value + offset
    if isinstance(value, int) and offset == offset.to_integral_value():
        return value + int(offset)
    return float(value) + float(offset)


def _aggregate(kind: str, values: list, lo: list[int], hi: list[int],
               arg_type: SqlType | None) -> list:
    """An aggregate over each position's frame ``values[lo:hi + 1]``; both bounds never
    decrease along the positions, so sums come from prefix sums and MIN / MAX from a
    monotonic queue, in linear time."""
    n = len(values)
    if kind == "first_value":
        return [values[a] if a <= b else None for a, b in zip(lo, hi, strict=True)]
    if kind == "last_value":
        return [values[b] if a <= b else None for a, b in zip(lo, hi, strict=True)]
    if kind in ("min", "max"):
        return _extremes(kind, values, lo, hi)
    counts, sums = [0] * (n + 1), [0] * (n + 1)
    summed = kind in ("sum", "avg")
    exact = exact_converter(arg_type) if summed else int
    for p, v in enumerate(values):
        present = v is not None
        counts[p + 1] = counts[p] + present
        sums[p + 1] = sums[p] + exact(v) if present and summed else sums[p]
    result_type = _result_type("sum", arg_type) if kind == "sum" else None
    # past the result type's range (HUGEINT, DECIMAL(38, s)): an EvaluationError, as a
    # GROUP BY's SUM and DuckDB's window SUM are
    fit = fitted_sum if summed and may_overflow(arg_type) else from_exact
    out = []
    for a, b in zip(lo, hi, strict=True):
        if a > b:
            out.append(0 if kind in ("count", "count_star") else None)
            continue
        count = counts[b + 1] - counts[a]
        if kind in ("count", "count_star"):
            out.append(count)
        elif count == 0:
            out.append(None)
        elif kind == "sum":
            out.append(fit(sums[b + 1] - sums[a], result_type))
        else:
            out.append(average_of(sums[b + 1] - sums[a], count, arg_type))
    return out


def _extremes(kind: str, values: list, lo: list[int], hi: list[int]) -> list:
    """MIN / MAX over sliding frames (NULLs skipped, NaN above every number)."""
    keyed = [None if v is None else (nan_order(v) if isinstance(v, float) else v)
             for v in values]
    better = (lambda a, b: a <= b) if kind == "min" else (lambda a, b: a >= b)
    window: deque[int] = deque()  # positions whose values may still be the extreme
    out = []
    added = 0
    for a, b in zip(lo, hi, strict=True):
        while added <= b:
            if keyed[added] is not None:
                while window and better(keyed[added], keyed[window[-1]]):
                    window.pop()
                window.append(added)
            added += 1
        while window and window[0] < a:
            window.popleft()
        out.append(values[window[0]] if window and a <= b else None)
    return out


def window_aliases_resolved(query: exp.Expression,
                            schema_of: Callable[[str], list[tuple[str, SqlType]]]
                            ) -> exp.Expression:
    """``query`` with each unqualified name in a window's (in the select list or QUALIFY)
    PARTITION BY, ORDER BY or arguments that is a select alias and no column of the select's inputs replaced by
    the aliased expression, as DuckDB reads ``SELECT b AS r, row_number() OVER (ORDER BY
    r) FROM t`` (an input column of that name wins, as in DuckDB).  A select whose input
    names are unknown (a table function, a star in a derived table) is left alone."""

    ctes: dict[str, exp.CTE | None] = {}  # their names shadow tables (None: named twice)
    for cte in query.find_all(exp.CTE):
        ctes[cte.alias.lower()] = None if cte.alias.lower() in ctes else cte

    def resolved(node: exp.Expression) -> exp.Expression:
        if not isinstance(node, exp.Select):
            return node
        aliases = {item.alias.lower(): item.this for item in node.expressions
                   if isinstance(item, exp.Alias) and not item.this.find(exp.Window)}
        qualify = node.args.get("qualify")
        windows = [w for item in [*node.expressions, *([qualify] if qualify else [])]
                   for w in item.find_all(exp.Window) if w.find_ancestor(exp.Select) is node]
        if not aliases or not windows:
            return node
        inputs = _input_names(node, schema_of, ctes)
        if inputs is None:
            return node

        for window in windows:
            for column in list(window.find_all(exp.Column)):
                name = column.name.lower()  # (a subquery's columns are its own inputs')
                if not column.table and name in aliases and name not in inputs and (
                        column.find_ancestor(exp.Select) is node):
                    column.replace(aliases[name].copy())
        return node

    return query.transform(resolved)


def _input_names(select: exp.Select, schema_of: Callable[[str], list[tuple[str, SqlType]]],
                 ctes: dict[str, exp.CTE | None]) -> set[str] | None:
    """The column names ``select``'s FROM and JOIN items give it, or None if one is not
    known here (a table function, a star, a CTE name two CTEs take)."""
    from_ = select.args.get("from_") or select.args.get("from")
    if from_ is None:
        return set()
    names: set[str] = set()
    for item in [from_.this, *(j.this for j in select.args.get("joins") or [])]:
        alias = item.args.get("alias")
        if isinstance(alias, exp.TableAlias) and alias.columns:
            names.update(c.name.lower() for c in alias.columns)
        elif isinstance(item, exp.Table) and isinstance(item.this, exp.Identifier):
            if item.name.lower() in ctes:
                cte = ctes[item.name.lower()]
                names_of = _output_names(cte.this, cte.args.get("alias")) if cte else None
                if names_of is None:
                    return None
                names.update(names_of)
                continue
            try:
                names.update(c for c, _ in schema_of(item.name))
            except SchemaError:  # a CTE or an unknown name: planning says which
                return None
        elif isinstance(item, exp.Subquery) and (
                given := _output_names(item.this, None)) is not None:
            names.update(given)
        else:
            return None
    return names


def _output_names(body: exp.Expression, alias: exp.TableAlias | None) -> list[str] | None:
    """The column names of a derived table or CTE ``body`` (named by ``alias``'s column
    list if it has one), or None when a star leaves them unknown here."""
    if isinstance(alias, exp.TableAlias) and alias.columns:
        return [c.name.lower() for c in alias.columns]
    while isinstance(body, (exp.Union, exp.Except, exp.Intersect)):
        body = body.this  # a set operation's columns are named by its first block
    if not isinstance(body, exp.Select) or any(
            isinstance(e, exp.Star) or (isinstance(e, exp.Column) and e.is_star)
            for e in body.expressions):
        return None
    return [output_name(e) for e in body.expressions]
