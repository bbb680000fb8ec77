"""Maintained views: how each strategy stores a view, updates it per batch, and serves it.

* :class:`DynView`: Dynamic Yannakakis in pull mode; the view is never materialized, reads
  enumerate the (T,N)-representation with constant delay, and deltas for subscribers come
  from delta enumeration (push mode) only when someone listens.
* :class:`DynAggregateView`: the same with aggregates carried in the weight ring
  (:class:`upkeep.aggregates.DualWeight`): one output row per tuple of the root.
* :class:`OperatorView`: a dataflow of general Z-set operators with a materialized output.
* :class:`GroupedView`: a dataflow ending in GROUP BY, its rows read from the groups.
* :class:`RecomputeView`: DuckDB re-evaluates the SQL after each batch that touches an
  input, and the difference to the previous result is the delta.  The fallback for SQL no
  incremental strategy covers; EXPLAIN says so.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import duckdb

from . import bag_recursion, zset
from . import exact as _exact
from .aggregates import AggregateSpec, DualWeight, Finalizer, average_of
from .codecs.arrow_values import to_arrow
from .duckdb_scratch import as_error, quote, scratch
from .dyn import Representation
from .errors import EvaluationError
from .exact import exact_to_float, float_to_exact
from .failed_values import FailedCount, FailedValue, LeafSalvage, raise_held_failure
from .gc_pause import StateDict
from .operators import Aggregate, Batch, Delta, Operator, Source, rows_read
from .types import VARCHAR, SqlType, type_from_name
from .zset import add_into, replace_row

Columns = list[tuple[str, SqlType]]


@dataclass(frozen=True)
class PlanChoice:
    """What the planner decided for a view: the strategy, why (a forced strategy, the
    automatic order, or what made it fall back to recomputation), and the plan in words."""

    strategy: str
    reasons: tuple[str, ...]
    explanation: tuple[str, ...]


class ViewRuntime:
    """Common interface of maintained views."""

    strategy = ""
    #: whether rows that tie in the view's order are told apart by when they arrived
    #: (DuckDB recomputing a query reads its tables in their rows' order): a change and its
    #: inverse then need not leave the view as it was, so a what-if cannot push a
    #: hypothetical batch through it and take it back (``Connection._hypothetical``)
    ties_by_arrival = False

    def __init__(self, name: str, columns: Columns, inputs: set[str], sql: str):
        self.name = name
        self.columns = columns
        self.inputs = inputs
        self.sql = sql
        self.explanation: list[str] = []
        self.reasons: tuple[str, ...] = ()  # why the planner chose this strategy

    @property
    def choice(self) -> PlanChoice:
        """The planner's decision: strategy, reasons and the plan in words."""
        return PlanChoice(self.strategy, self.reasons, tuple(self.explanation))

    def build(self, contents: Batch) -> None:
        """Initialise from the full contents of the inputs (UPDATE from the empty database)."""
        self.step(contents, want_delta=False)

    def step(self, batch: Batch, want_delta: bool) -> Delta | None:
        raise NotImplementedError

    def stepper(self) -> Callable[[Batch, bool], Delta | None]:
        """What a commit steps this view with, taken once per catalog shape (a commit's
        plan, ``commit._steps``): :meth:`step` itself, or the same step with the fields
        it reads bound in an extension type, read as C slots on every change."""
        return self.step

    def weighted_rows(self) -> Iterator[tuple[tuple, int]]:
        raise NotImplementedError

    def rows(self) -> list[tuple]:
        out = []
        for row, w in self.weighted_rows():
            out.extend([row] * w)
        return out

    def state_size(self) -> int:
        return 0

    def counters(self) -> dict[str, int]:
        return {}

    def multiplicity(self, row: tuple) -> int:
        """How many times ``row`` is in the view (a scan unless the strategy indexes rows)."""
        return sum(w for r, w in self.weighted_rows() if r == row)

    def explain(self) -> str:
        head = [f"view {self.name}: strategy {self.strategy}",
                "columns: " + ", ".join(f"{n} {t}" for n, t in self.columns)]
        return "\n".join(head + self.explanation)


def sources_by_relation(sources: list, rep: Representation
                        ) -> dict[str, list[tuple[int, object]]]:
    """A (T,N)-rep's atom sources by the relation they read: ``(leaf node id, source)``
    pairs, so that a batch visits the atoms of the relations it changes only, and their
    deltas come keyed as :meth:`Representation.update_leaves` takes them."""
    by_relation: dict[str, list[tuple[int, object]]] = {}
    for i, s in enumerate(sources):
        by_relation.setdefault(s.relation, []).append((rep.leaf_id(i), s))
    return by_relation


def leaf_deltas(by_relation: dict, batch: Batch) -> dict[int, Delta]:
    """The batch's changes of a (T,N)-rep's atoms, by leaf node id, for the relations it
    changes (``by_relation`` from :func:`sources_by_relation`); a leaf whose rows the
    batch leaves alone (filtered out) is left out."""
    out: dict[int, Delta] = {}
    for relation in batch:
        for i, s in by_relation.get(relation, ()):
            if type(s) is RingSource:  # (a direct call: views.pxd)
                ring = s
                d = ring.step(batch)
            else:
                d = s.step(batch)
            if d:
                out[i] = d
    return out


class DynView(ViewRuntime):
    """A free-connex block kept as a (T,N)-rep; rows are ``select(out tuple)`` with weights."""

    strategy = "dyn"

    def __init__(self, name, columns, inputs, sql, rep: Representation, sources: list[Source],
                 select: Callable[[tuple], tuple]):
        super().__init__(name, columns, inputs, sql)
        self.rep = rep
        rep.count_frontier_weights()  # before the build fills it: its rows read them
        self.by_relation = sources_by_relation(sources, rep)
        self.select = select
        # row -> output tuple, when the select list is a permutation-with-repeats of variables
        self.invert: Callable[[tuple], tuple | None] | None = None
        # a select list that computes values (which may fail: a cast, ``//``, an overflow)
        # runs in push mode always, so a row it cannot compute rejects its batch
        self.eager = False
        # the output-tuple position of each select item, when every one is a plain column:
        # push mode then builds rows straight from anchor tuples and contexts
        self.positions: tuple[int, ...] | None = None

    def step(self, batch: Batch, want_delta: bool) -> Delta | None:
        return self.stepper()(batch, want_delta)

    def stepper(self) -> Callable[[Batch, bool], Delta | None]:
        return RepStep(self.rep, self.by_relation, self.select, self.positions,
                       self.eager).step

    def weighted_rows(self) -> Iterator[tuple[tuple, int]]:
        """Each distinct row once with its multiplicity: streamed when the select list
        names output variables (one row per output tuple), summed when it computes values
        that may make two output tuples one row (``b * 0``), which a view over this one
        reads as one row of weight two, not two rows the second overwrites."""
        select = self.select
        if self.invert is not None:
            for t, w in self.rep.enumerate():
                yield select(t), w
            return
        out: Delta = {}
        for t, w in self.rep.enumerate():
            add_into(out, select(t), w)
        yield from out.items()

    def state_size(self) -> int:
        return self.rep.size()

    def counters(self) -> dict[str, int]:
        return self.rep.counters()

    def multiplicity(self, row: tuple) -> int:
        """O(|N|) membership (property P2) when the select list names each output variable."""
        if self.invert is None:
            return super().multiplicity(row)
        t = self.invert(row)
        if t is None:
            return 0
        return self.rep.weight(t) or 0


class RepStep:
    """A :class:`DynView`'s step, its fields bound (:meth:`ViewRuntime.stepper`): the leaf
    deltas into the representation, then, in push mode, the rows that change."""

    def __init__(self, rep: Representation, by_relation: dict, select: Callable[[tuple], tuple],
                 positions: tuple[int, ...] | None, eager: bool):
        self.rep = rep
        self.by_relation = by_relation
        self.select = select
        self.positions = positions
        self.eager = eager

    def step(self, batch: Batch, want_delta: bool) -> Delta | None:
        leaf = leaf_deltas(self.by_relation, batch)
        if not (want_delta or self.eager):  # pull mode: the rep alone
            if leaf:
                self.rep.update_leaves(leaf, False)
            return None
        return self.rep.difference_leaves(leaf, self.select, self.positions) if leaf else {}


class GroupStep:
    """A :class:`DynAggregateView`'s step, its fields bound (:meth:`ViewRuntime.stepper`)."""

    def __init__(self, rep: Representation, by_relation: dict, rows: GroupRows, eager: bool):
        self.rep = rep
        self.by_relation = by_relation
        self.rows = rows
        self.eager = eager

    def step(self, batch: Batch, want_delta: bool) -> Delta | None:
        return step_groups(self.rep, self.by_relation, batch, want_delta or self.eager,
                           self.rows)


class RingSource:
    """Leaf deltas lifted into :class:`DualWeight`: count plus this atom's sum channels.

    ``lift``, when given (:meth:`~upkeep.core.Core.lifted_leaf`), is the leaf and this
    atom's channel arguments in one function, ``row -> (leaf tuple's width values...,
    arguments...)``: the channels then read their arguments off its result."""

    def __init__(self, source: Source, channels: list[tuple[Callable | None, Callable]],
                 lift: Callable[[tuple], tuple | None] | None = None, width: int = 0,
                 salvage: LeafSalvage | None = None):
        self.source = source
        self.relation = source.relation
        self.leaf = source.leaf  # a C slot here, read once per batch
        # channels[k] = (argument function if the k-th channel belongs to this atom, exact)
        self.channels = channels
        self.lift = lift
        self.width = width
        # for a row whose leaf or an argument raised: the leaf and this atom's arguments
        # laid out as ``lift``'s, each failure kept (``failed_values``)
        self.salvage = salvage
        # an atom carrying no sum channel lifts a row of weight w to the same (immutable)
        # DualWeight(w, zeros) every time: one shared object, not one per stored tuple
        self.plain = None if any(fn for fn, _ in channels) else {}
        self.zeros = (0, 0) * len(channels)

    def step(self, batch: Batch) -> dict[tuple, DualWeight]:
        delta = dict.get(batch, self.relation)
        out: dict[tuple, DualWeight] = {}
        if not delta:
            return out
        if type(delta) is not dict:  # a table's store, handed to a build
            delta = rows_read(delta, self.source.reads)
        leaf = self.leaf
        lift = self.lift
        width = self.width
        channels = self.channels
        plain = self.plain
        for row, w in delta.items():
            try:
                if lift is None:
                    t = leaf(row)
                    if t is None:
                        continue
                    got = row
                else:  # the leaf tuple and the arguments the channels read off ``row``
                    lifted = lift(row)
                    if lifted is None:
                        continue
                    got = lifted
                    t = lifted[:width]
                if plain is not None:
                    dw = dict.get(plain, w)
                    if dw is None:
                        dw = plain[w] = DualWeight(w, self.zeros)
                else:
                    if len(channels) == 1:  # one SUM, AVG or COUNT(x): its pair alone
                        fn, exact = channels[0]
                        pair = _channel_pair(fn, exact, got, w)
                    else:
                        pair = ()
                        for fn, exact in channels:
                            pair += _channel_pair(fn, exact, got, w)
                    # DualWeight(w, pair) without the call of __init__, as aggregates._dual
                    # makes one: that is a C function, which this module cannot import by
                    # name both when compiled and when run as Python
                    dw = DualWeight.__new__(DualWeight)
                    dw.c = w
                    dw.v = pair
            except EvaluationError:
                if self.salvage is None:
                    raise
                salvaged = self._salvaged(row, w)
                if salvaged is None:
                    continue
                t, dw = salvaged
            old = out.get(t)
            # ``plus``: a C call, where ``+`` went through the type's Python-level __add__
            out[t] = dw if old is None else old.plus(dw)
        return out

    def _salvaged(self, row: tuple, w: int) -> tuple[tuple, DualWeight] | None:
        """The leaf tuple and weight of a row whose leaf or an argument raised: a failed
        argument's channel counts a :class:`FailedCount` (``failed_values``)."""
        values = self.salvage(row, w)
        if values is None:
            return None
        pair: tuple = ()
        at = self.width  # this atom's arguments follow its leaf values
        for fn, exact in self.channels:
            if fn is None:
                pair += (0, 0)
                continue
            v = values[at]
            at += 1
            if type(v) is FailedValue:
                pair += (FailedCount(0, w, v.message), 0)
            else:
                pair += _value_pair(v, exact, w)
        return values[:self.width], DualWeight(w, pair)


def _channel_pair(fn: Callable | None, exact: Callable, row: tuple, w: int) -> tuple:
    """One sum channel's (non-NULL count, exact sum) for ``row`` of weight ``w``: ``fn``
    reads the argument (None: the channel is another atom's), ``exact`` converts it."""
    if fn is None:
        return (0, 0)
    return _value_pair(fn(row), exact, w)


def _value_pair(v: object, exact: Callable, w: int) -> tuple:
    """A channel's (non-NULL count, exact sum) for argument ``v`` of a row of weight
    ``w``."""
    if v is None:
        return (0, 0)
    if exact is _FLOAT_TO_EXACT:  # a double's: the C function called directly
        v = float_to_exact(v)
    else:
        v = exact(v)
    # a change's weight is 1 or -1 but for repeated rows: a big sum's product costs more
    # than its copy or negation
    return (w, v if w == 1 else -v if w == -1 else v * w)


#: the converter of a double into a sum channel (:func:`_value_pair` calls it directly):
#: the module's Python function, which a channel holds, where ``float_to_exact`` compiled
#: names the C function (``views.pxd``); ``exact_to_float`` the same
_FLOAT_TO_EXACT = _exact.float_to_exact

#: how :class:`GroupRows` reads an aggregate off a group's weight: COUNT(*) is the count
#: itself, COUNT(col) its channel's non-NULL count, SUM a function of the channel's exact
#: sum, AVG of the sum and the count (C integers in the compiled module: ``views.pxd``)
_READ_COUNT_STAR, _READ_COUNT, _READ_SUM, _READ_AVERAGE, _READ_DOUBLE_SUM = 0, 1, 2, 3, 4


def _channel_reader(a: AggregateSpec) -> tuple[int, object]:
    """How aggregate ``a``'s value is read off its channel pair ``(non-NULL count, exact
    sum)``: ``(kind, what)``, ``what`` the SUM's reader of the exact sum or the AVG's
    argument type (None for the counts), applied in :meth:`GroupRows.row` without a call
    through a closure per aggregate."""
    if a.kind == "count_star":
        return (_READ_COUNT_STAR, None)
    if a.kind == "count":
        return (_READ_COUNT, None)
    if a.kind == "sum":
        if a.sum_value is _exact.exact_to_float:  # a SUM of doubles: called directly
            return (_READ_DOUBLE_SUM, None)
        return (_READ_SUM, a.sum_value)
    return (_READ_AVERAGE, a.arg.type)


class GroupRows:
    """A dyn-aggregate view's output rows from its groups: a group's key and weight (its
    count and sum channels, section 6's aggregates in the weight ring) give the row's
    values, which the finalizer turns into the select list's row (HAVING may drop it).
    An extension type (``views.pxd``): a single-row change reads two groups' rows."""

    def __init__(self, aggs: list[AggregateSpec], finalizer: Finalizer, global_group: bool,
                 zero: DualWeight | int):
        # per aggregate, read once here, not per row from the aggregates' attributes
        self.reads = tuple(_channel_reader(a) for a in aggs)
        self.finish = None if finalizer.identity else finalizer.finish
        self.global_group = global_group
        self.zero = zero
        # the view's sources' salvages of rows whose leaf raised (``failed_values``), and
        # whether one holds such a row: a group holding it then raises when read
        self.salvages: tuple[LeafSalvage, ...] = ()
        self.checked = False

    def row(self, key: tuple, w: DualWeight | int | None) -> tuple | None:
        """The group's output row (None: no row, an empty group or one HAVING drops)."""
        if w is None:
            if not self.global_group:
                return None
            w = self.zero
        if type(w) is int:
            count, channels = w, ()
        else:
            dw = w
            count, channels = dw.c, dw.v
        if self.checked:
            raise_held_failure(key, channels, self.salvages)
        vals = list(key)
        j = 0
        for kind, what in self.reads:
            if kind == _READ_COUNT_STAR:
                vals.append(count)
                continue
            nn = channels[j]
            if kind == _READ_COUNT:
                vals.append(nn)
            elif not nn:  # no non-NULL value: SUM and AVG are NULL
                vals.append(None)
            elif kind == _READ_DOUBLE_SUM:
                vals.append(exact_to_float(channels[j + 1]))
            elif kind == _READ_SUM:
                vals.append(what(channels[j + 1]))
            else:
                vals.append(average_of(channels[j + 1], nn, what))
            j += 2
        finish = self.finish
        return tuple(vals) if finish is None else finish(tuple(vals))

    def delta(self, changes: dict) -> Delta:
        """The rows' delta of groups changed ``{key: (old weight, new weight)}``."""
        out: Delta = {}
        for key, (old, new) in changes.items():
            replace_row(out, self.row(key, old), self.row(key, new))
        return out


def step_groups(rep: Representation, by_relation: dict, batch: Batch, want_delta: bool,
                rows: GroupRows) -> Delta | None:
    """A dyn-aggregate view's step: its (T,N)-rep fed the batch's leaf deltas, and the rows
    of the groups that changed (None in pull mode).  While a leaf holds a row that failed
    to compute a value, every group a batch changes is read (push mode), and one holding
    the failure raises (``failed_values``)."""
    leaf = leaf_deltas(by_relation, batch)
    failing = False
    for salvage in rows.salvages:
        if salvage.messages:
            failing = True
            break
    push = want_delta or failing
    if not leaf:
        return {} if push else None
    changes = rep.update_leaves(leaf, push)
    if changes is None:
        return None
    rows.checked = failing  # a committed state holds no failing group: reads skip the test
    try:
        return rows.delta(changes)
    finally:
        rows.checked = False


class DynAggregateView(ViewRuntime):
    """GROUP BY over a free-connex join with COUNT/SUM/AVG carried in the weights."""

    strategy = "dyn-aggregate"

    def __init__(self, name, columns, inputs, sql, rep: Representation,
                 sources: list[RingSource | Source], aggs: list[AggregateSpec], finalizer: Finalizer,
                 global_group: bool):
        super().__init__(name, columns, inputs, sql)
        self.rep = rep
        self.by_relation = sources_by_relation(sources, rep)
        self.aggs = aggs
        self.finalizer = finalizer
        self.global_group = global_group
        channels = sum(1 for a in aggs if a.channel)
        # with no sum channels the weights are plain integer counts (faster)
        zero = DualWeight(0, (0,) * (2 * channels)) if channels else 0
        self.eager = False  # as DynView.eager, for a select list over the groups
        self.group_rows = GroupRows(aggs, finalizer, global_group, zero)
        self.group_rows.salvages = tuple(s.salvage for s in sources if s.salvage is not None)
        self._row = self.group_rows.row

    def step(self, batch: Batch, want_delta: bool) -> Delta | None:
        return self.stepper()(batch, want_delta)

    def stepper(self) -> Callable[[Batch, bool], Delta | None]:
        return GroupStep(self.rep, self.by_relation, self.group_rows, self.eager).step

    def weighted_rows(self) -> Iterator[tuple[tuple, int]]:
        """Each distinct row once with its multiplicity: one row per group when the select
        list names every GROUP BY item, else summed, since groups may give one row (``SELECT
        COUNT(*) .. GROUP BY c``: two groups of two rows are the row 2 twice, which a view
        over this one read as one)."""
        if self.finalizer.key_positions:
            for row in self._group_rows():
                yield row, 1
            return
        out: Delta = {}
        for row in self._group_rows():
            add_into(out, row, 1)
        yield from out.items()

    def _group_rows(self) -> Iterator[tuple]:
        seen = False
        for key, w in self.rep.enumerate():
            seen = True
            row = self._row(key, w)
            if row is not None:
                yield row
        if not seen and self.global_group:
            row = self._row((), None)
            if row is not None:
                yield row

    def state_size(self) -> int:
        return self.rep.size()

    def counters(self) -> dict[str, int]:
        return self.rep.counters()

    def multiplicity(self, row: tuple) -> int:
        """Membership by one group's lookup (property P2) when the select list names every
        GROUP BY item: the row's group is read off the row, its aggregates recomputed from
        the group's weight and compared (a scan of every group otherwise)."""
        positions = self.finalizer.key_positions
        if positions is None or self.global_group or not positions:
            return super().multiplicity(row)
        try:
            key = tuple(row[p] for p in positions)
            w = self.rep.weight(key)
        except (IndexError, TypeError):  # not a row of this view's shape
            return 0
        return 1 if w is not None and self._row(key, w) == tuple(row) else 0


class MaterializedView(ViewRuntime):
    """A view whose rows are kept in ``self.output`` (row -> multiplicity)."""

    def __init__(self, name, columns, inputs, sql):
        super().__init__(name, columns, inputs, sql)
        self.output: dict[tuple, int] = StateDict()

    def weighted_rows(self) -> Iterator[tuple[tuple, int]]:
        return iter(list(self.output.items()))

    def record(self, delta: Delta) -> None:
        """Apply a step's output delta to the materialized rows."""
        output = self.output
        for row, w in delta.items():
            add_into(output, row, w)

    def multiplicity(self, row: tuple) -> int:
        return self.output.get(row, 0)

    def state_size(self) -> int:
        return len(self.output)


class OperatorView(MaterializedView):
    """A dataflow of general operators whose output is materialized."""

    def __init__(self, name, columns, inputs, sql, root: Operator, strategy: str):
        super().__init__(name, columns, inputs, sql)
        self.root = root
        self.strategy = strategy

    def step(self, batch: Batch, want_delta: bool) -> Delta | None:
        delta = self.root.step(batch)
        self.record(delta)
        return delta

    def state_size(self) -> int:
        return len(self.output) + self.root.state_size()

    def counters(self) -> dict[str, int]:
        return sum_counters(op.counters() for op in self.root.walk())


class GroupedView(ViewRuntime):
    """A dataflow whose root is a GROUP BY (:class:`upkeep.operators.Aggregate`): its rows
    are the groups' output rows, which each group keeps (``GroupState.output``), read from
    there instead of being stored a second time in a dict of rows (docs/design.md, "State
    layout").  Only for a global aggregate or a select list naming every GROUP BY item
    (:func:`reads_groups`): each group then has its own row, and a row's membership is its
    group's lookup."""

    def __init__(self, name, columns, inputs, sql, root: Aggregate, strategy: str):
        super().__init__(name, columns, inputs, sql)
        self.root = root
        self.strategy = strategy

    def step(self, batch: Batch, want_delta: bool) -> Delta | None:
        return self.root.step(batch)

    def weighted_rows(self) -> Iterator[tuple[tuple, int]]:
        return iter([(state.output, 1) for state in self.root.groups.values()
                     if state.output is not None])

    def multiplicity(self, row: tuple) -> int:
        root = self.root
        if root.global_group:
            return super().multiplicity(row)  # one group
        try:
            state = root.groups.get(tuple(row[p] for p in root.finalizer.key_positions))
        except (IndexError, TypeError):  # not a row of this view's shape
            return 0
        return 1 if state is not None and state.output == tuple(row) else 0

    def state_size(self) -> int:
        return self.root.state_size()

    def counters(self) -> dict[str, int]:
        return sum_counters(op.counters() for op in self.root.walk())


def reads_groups(root: Operator) -> bool:
    """Whether a dataflow's rows can be read from its root's groups (:class:`GroupedView`):
    a GROUP BY that is global or whose select list names every GROUP BY item.  Other
    grouped views keep a dict of their rows (:class:`OperatorView`), where a row's
    membership is one lookup too."""
    return isinstance(root, Aggregate) and (
        root.global_group or bool(root.finalizer.key_positions))


class EnumeratedView(ViewRuntime):
    """A dataflow whose root is a semijoin or anti-join (or a projection right above one):
    its rows are listed from the semijoin's state on read (``SemiJoin.current``, counting-
    based complement iteration for anti-joins) rather than stored a second time."""

    def __init__(self, name, columns, inputs, sql, root: Operator, strategy: str,
                 semijoin, project: Callable[[tuple], tuple] | None):
        super().__init__(name, columns, inputs, sql)
        self.root = root
        self.strategy = strategy
        self.semijoin = semijoin
        self.project = project

    def step(self, batch: Batch, want_delta: bool) -> Delta | None:
        return self.root.step(batch)

    def weighted_rows(self) -> Iterator[tuple[tuple, int]]:
        if self.project is None:
            return iter(list(self.semijoin.current()))
        out: Delta = {}
        project = self.project
        for t, w in self.semijoin.current():
            add_into(out, project(t), w)
        return iter(list(out.items()))

    def state_size(self) -> int:
        return self.root.state_size()

    def counters(self) -> dict[str, int]:
        return sum_counters(op.counters() for op in self.root.walk())


class RecomputeView(MaterializedView):
    """DuckDB recomputes the view per batch; the delta is new result minus old."""

    strategy = "recompute"
    ties_by_arrival = True

    def __init__(self, name, columns, inputs, sql, contents_of: Callable[[str], tuple]):
        super().__init__(name, columns, inputs, sql)
        self.contents_of = contents_of

    def step(self, batch: Batch, want_delta: bool) -> Delta | None:
        new = StateDict(Counter(run_duckdb(self.sql, self.inputs, self.contents_of)))
        delta = zset.minus(new, self.output)
        self.output = new
        return delta


def sum_counters(parts: Iterable[dict[str, int]]) -> dict[str, int]:
    """Work counters of several operators or engines, summed per name."""
    total: dict[str, int] = {}
    for part in parts:
        for k, v in part.items():
            total[k] = total.get(k, 0) + v
    return total


def query_duckdb(sql: str, relations: set[str], contents_of: Callable[[str], tuple],
                 arrow_of: Callable[[str], tuple | None] | None = None
                 ) -> tuple[Columns, list[tuple]]:
    """Evaluate ``sql`` in DuckDB over the current contents of ``relations``
    (``arrow_of``: a relation's columns and :func:`duckdb_arrow` table, kept from an
    earlier query, or None where it has none)."""
    # a query with a recursive CTE: its bag recursion bounded (``bag_recursion.py``), and
    # its relations copied into DuckDB tables, which every iteration scans (an Arrow table
    # registered with DuckDB costs ~0.16 ms a scan more: a UNION ALL recursion of 10,000
    # iterations takes 0.19 s instead of 1.8 s)
    copied = "RECURSIVE" in sql.upper()
    if copied:
        sql = bag_recursion.bounded_sql(sql, bag_recursion.MAX_ITERATIONS)
    with scratch() as con:
        try:
            for name in relations:
                kept = None if arrow_of is None else arrow_of(name)
                if kept is None:
                    columns, rows = contents_of(name)
                    kept = columns, duckdb_arrow(columns, rows)
                if copied:
                    register_arrow(con, f"{name}__arrow", *kept)
                    con.execute(f"CREATE TEMP TABLE {quote(name)} AS SELECT * FROM "
                                f"{quote(name + '__arrow')}")
                else:
                    register_arrow(con, name, *kept)
            result = con.execute(sql)
            # each column's type as DuckDB's DESCRIBE prints it (the same text), without a
            # second planning of the query (about 0.4 ms of an ad-hoc SELECT's 2 ms)
            columns = [(d[0], type_from_name(str(d[1]))) for d in result.description]
            rows = [tuple(r) for r in result.fetchall()]
            if any(t.kind == "DOUBLE" for _, t in columns):  # each NaN a new object
                rows = [tuple(math.nan if v != v else v for v in r) for r in rows]
            _check_dates(con, sql, columns, rows)
            return columns, rows
        except duckdb.Error as exc:
            raise as_error(exc, "DuckDB could not evaluate the query") from exc


_DATE_ENDS = (dt.date.min, dt.date.max, dt.datetime.min, dt.datetime.max)


def _check_dates(con: duckdb.DuckDBPyConnection, sql: str, columns: Columns,
                 rows: list[tuple]) -> None:
    """Dates and timestamps upkeep cannot hold are an EvaluationError (docs/sql.md), in one
    pass over the rows: DuckDB's Python client gives one outside years 1 to 9999 as text,
    and an infinite one as the first or last day of those years, which are real days too,
    so where a result holds one DuckDB is asked whether the column holds an infinity."""
    dated = [k for k, (_, t) in enumerate(columns) if t.kind in ("DATE", "TIMESTAMP")]
    suspect: set[int] = set()
    for row in rows if dated else ():
        for k in dated:
            value = row[k]
            if value.__class__ is str:
                raise EvaluationError(
                    f"column {columns[k][0]}: {columns[k][1].kind.lower()} {value} is "
                    f"outside the years 1 to 9999 that upkeep's dates hold")
            if value in _DATE_ENDS:
                suspect.add(k)
    if not suspect:
        return
    ordered = sorted(suspect)
    names = ", ".join(f"c{k}" for k in range(len(columns)))
    tests = ", ".join(f"bool_or(isinf(c{k}))" for k in ordered)
    found = con.execute(f"SELECT {tests} FROM ({sql}) AS q({names})").fetchone()
    for k, infinite in zip(ordered, found, strict=True):
        if infinite:
            raise EvaluationError(f"column {columns[k][0]}: an infinite "
                                  f"{columns[k][1].kind.lower()} has no value here")


def duckdb_arrow(columns: Columns, rows: list[tuple]):
    """Rows as the Arrow table :func:`register_arrow` hands DuckDB.  A HUGEINT column goes
    as text, to be cast back: Arrow's widest decimal DuckDB reads, decimal128(38, 0), holds
    less than HUGEINT's +-1.7e38, and DuckDB would type it DECIMAL, not HUGEINT."""
    huge = {k for k, (_, typ) in enumerate(columns) if typ.kind == "HUGEINT"}
    if not huge:
        return to_arrow(columns, rows)
    text = [(n, VARCHAR) if k in huge else (n, typ) for k, (n, typ) in enumerate(columns)]
    return to_arrow(text, [tuple(str(v) if k in huge and v is not None else v
                                 for k, v in enumerate(r)) for r in rows])


def register_arrow(con: duckdb.DuckDBPyConnection, name: str, columns: Columns, table
                   ) -> None:
    """:func:`duckdb_arrow`'s table as DuckDB relation ``name`` (HUGEINT text cast back by
    a view over it)."""
    if not any(typ.kind == "HUGEINT" for _, typ in columns):
        con.register(name, table)
        return
    raw = f"{name}__hugeint_text"
    con.register(raw, table)
    select = ", ".join(f"CAST({quote(n)} AS HUGEINT) AS {quote(n)}" if typ.kind == "HUGEINT"
                       else quote(n) for n, typ in columns)
    con.execute(f"CREATE TEMP VIEW {quote(name)} AS SELECT {select} FROM {quote(raw)}")


def run_duckdb(sql: str, relations: set[str], contents_of: Callable[[str], tuple]) -> list[tuple]:
    return query_duckdb(sql, relations, contents_of)[1]
