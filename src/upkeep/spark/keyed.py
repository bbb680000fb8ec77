"""Views kept in Spark's own keyed state: a view compiles to a chain of keyed steps.

Instead of a whole local engine per shard, a view that is one SELECT block over base tables
and other keyed views (or a set operation of such blocks) becomes a left-deep chain of
stateful steps, each a group of Spark's ``transformWithState`` (the Row API) keyed by a join
value or a group key (the variables of ``dynamic-yannakakis-iedyn.txt`` section 2), hashed
into the layout's buckets (about 128 loaded rows per key, :func:`bucket_count`):

* a **table step** per base table, keyed by the row's PRIMARY KEY (or the whole row):
  Spark-managed state holds every table's rows there, with their counts, one ``MapState``
  entry per key (the tables' state of record: ``DELETE/UPDATE ... WHERE`` read it, :mod:`.dml`), so deleting
  a row that is not present and a duplicate key reject the micro-batch, as on the local
  engine;
* a **join step** per further atom, keyed by the equality values between the atoms joined
  so far and the next one; it keeps both sides' rows of its key as logs of Z-set weights
  (``ListState``: appended to without reading, compacted when read half cancelled, and
  read before some appends so that no side grows with its history) and
  emits ``dL x (R + dR) + L x dR`` (deletes included), matching exact join values;
* a **subquery step** per ``[NOT] EXISTS`` / ``IN`` conjunct after the joins, keyed by
  the correlated values: a semijoin (anti-join) of the joined rows with the subquery's
  relation, whose key values it counts; a row moves only when its key's count crosses
  zero (:class:`SubqueryStep`);
* an **aggregate step** keyed by the GROUP BY values (per group: counts, exact sums and an
  ordered multiset for MIN/MAX, :class:`upkeep.aggregates.GroupState`), emitting the old
  row with weight -1 and the new one with +1, in two phases: the tasks that send it rows
  fold them into one partial state per group (:func:`partial_aggregates`), which it
  merges; or a **distinct step** keyed by the row;
* a **set step** per UNION / EXCEPT / INTERSECT (DISTINCT or ALL) of a view's blocks, each
  block its own chain, keyed by the row: each row's multiplicity on either side, the
  output's a function of both (:class:`SetStep`; UNION ALL keeps no state);
* an **ordering step** for window functions (keyed by the PARTITION BY values) or
  ``ORDER BY .. LIMIT`` (a step keyed by the row passing on each key's first rows, then
  one key merging them) over a hidden helper root of the rest of the query
  (:class:`OrderedStep`).

Steps run in levels: a change goes at once to its table step and (past its table's
filters) into the view step joining it; over base tables a view's ``j``-th join step is
level ``j - 1``, its subquery steps the levels after its last join, its aggregate /
distinct step the level after those.  A join step that joins another keyed view runs at
the first level that view's rows reach (:func:`_levels`), and their changed rows enter
its steps as a table's changes do (:func:`emit`).  A table step
that rejects a row fails the whole micro-batch, so nothing the row reached is committed.
Every view's steps of one level share one stateful operator grouped by ``(step, group)``
(:func:`record`), and Spark repartitions by it between levels, so a micro-batch reads and writes only the
state of the keys its changes touch.  Rows that go to a later level, and view deltas,
pass through the levels in between unchanged.  Compiled expressions are rebuilt on each
executor from the view's SQL (:func:`compile_views`), the same code the local engine runs.
"""

from __future__ import annotations

import heapq
import itertools
import math
import pickle
import random
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache

import pandas as pd
from pyspark import StorageLevel
from pyspark.sql import DataFrame, Row
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from sqlglot import exp

from ..aggregates import Finalizer, GroupState, compile_aggregate
from ..codecs.spark_rows import encode_row
from ..distinct_on import rewrite_distinct_on
from ..errors import ConstraintError, DuplicateKeyError, Error, EvaluationError, SchemaError
from ..expressions import ExpressionCompiler
from ..grouping_sets import expand_grouping_sets
from ..hashing import key_hash
from ..lateral import rewrite_laterals
from ..outer_joins import rewrite_outer_joins
from ..plan import (
    Block,
    SetOperation,
    analyse_joins,
    atom_of_slot,
    bind_query,
    count_if_as_sum,
    ctes_as_relations,
    derived_table_body,
    derived_tables,
    read_relation,
)
from ..planner import cast_row, duckdb_types, set_operation_casts, set_operation_columns
from ..ranked import qualify_as_derived
from ..recursive.program import recursive_with
from ..scalar_subqueries import rewrite_scalar_subqueries
from ..sql import parse_one
from ..subquery_predicates import exists_of_one_row, rewrite_subquery_predicates
from ..topk import TopKError, sort_key, split_top_k, tie_broken
from ..types import SqlType, format_row
from ..windows import (
    WindowView,
    by_partition,
    window_aliases_resolved,
    window_view,
    windowing_of,
)
from ..zset import add_into
from .errors import BatchRejected
from .worker_heap import freeze_worker_heap

KEYED_SCHEMA = "step int, group long, key long, side int, row binary, weight long"
OUTPUT_STEP = -1  # a view delta on its way out: row = pickle((view, encoded row))
LEFT, RIGHT = 0, 1
PARTIAL = 2  # a side: a partial aggregate ``(group key, GroupState)`` for an aggregate step
PACKED = 0  # a log entry's weight: its row is a pickled list of entries (a whole log, one
# state call; real entries never weigh 0)


@dataclass(frozen=True)
class KeyedLayout:
    """What the driver decides and ships: which views are keyed, and their steps' ids."""

    tables: tuple[str, ...]  # table step i keeps tables[i]
    views: tuple[str, ...]  # in definition order: a view after the views it reads
    levels: int  # table steps and first join steps are level 0; the last ``levels - 1``
    buckets: int = 1024  # every step's key: a hash of its values modulo this
    #: rows loaded in bulk per table, sorted by name: what orders a view's joins
    #: (:func:`_join_order`), so the driver and the executors compile the same steps
    loaded: tuple[tuple[str, int], ...] = ()

    def describe(self, view: str, catalog: dict) -> str:
        roots = compile_views(self, freeze(catalog)).roots
        helpers = "".join(f"; {name} = {_describe(root)}" for name, root in roots.items()
                          if root.hidden and name.startswith(f"{view}__"))
        return ("spark: Spark keyed state, partitioned by key across all partitions: "
                + _describe(roots[view]) + helpers)


def keyable(block: object, tables: set[str], keyed_views: set[str]) -> str | None:
    """Why a bound view cannot run as keyed steps, or None if it can."""
    if isinstance(block, SetOperation):
        return (keyable(block.left, tables, keyed_views)
                or keyable(block.right, tables, keyed_views))
    for relation in [a.relation for a in block.atoms] + [s.relation for s in block.subqueries]:
        if relation not in tables and relation not in keyed_views:
            return f"it reads view {relation}, which is not in keyed state"
    return None


@dataclass(frozen=True)
class TableFacts:
    """What orders a view's joins (:func:`_join_order`): rows loaded in bulk per table,
    and each table's PRIMARY KEY (column positions), from the catalog the driver and the
    executors share, so both compile the same steps."""

    loaded: dict[str, int] = field(default_factory=dict)
    primary: dict[str, tuple[int, ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, catalog: dict, loaded: dict[str, int]) -> TableFacts:
        return cls(loaded, {entry[0]: tuple(entry[3] or ()) for entry in catalog["tables"]})


def _join_order(block: Block, facts: TableFacts | None = None,
                ready: list[int] | None = None) -> list[int]:
    """A left-deep order of the atoms, each equi-joined to an earlier one where the join
    graph allows; an atom joined to none of them (a cross product) comes next with an empty
    join key: its join step holds all its rows under one key (correct, not parallel).

    The atoms' sizes are the rows loaded in bulk (``facts.loaded``) or, with none loaded,
    estimated from the PRIMARY KEYs the join's equalities reach (:func:`_sizes_by_keys`).
    The order whose join steps hold the fewest rows under one key
    (:func:`_rows_per_key`), then that takes the fewest levels (``ready``: the level
    where each atom's rows arrive; a view read by this one is best joined last, while its
    own levels run), is taken, among all orders of up to :data:`ORDERED_ATOMS` atoms;
    when no order is better (the sizes all equal: no loads and no keys), the atoms' own
    order.  A join key of few values on a big side is what this avoids: in
    ``orders, customer, nation`` joined in that order, the orders-customer rows are
    keyed by the nation (25 keys for all of them), while joining customer to nation
    first keys only the customers by it, and the orders by customer."""
    facts = facts or TableFacts()
    analysis = analyse_joins(block)
    edges = {(atom_of_slot(block, a), atom_of_slot(block, b)) for a, b in analysis.equalities}
    edges |= {(b, a) for a, b in edges}

    def connected(order: list[int]) -> list[int]:
        while len(order) < len(block.atoms):
            rest = [j for j in range(len(block.atoms)) if j not in order]
            order.append(next((j for j in rest if _joins(order, j, edges)), rest[0]))
        return order

    order = connected([0])
    if len(block.atoms) > ORDERED_ATOMS:
        return order
    if any(facts.loaded.get(a.relation) for a in block.atoms):
        sizes = [facts.loaded.get(a.relation) for a in block.atoms]
        known = max(n for n in sizes if n is not None)
        sizes = [known if n is None else max(n, 1) for n in sizes]  # a view, or none loaded
    else:
        sizes = _sizes_by_keys(block, analysis.equalities, facts.primary)
        if len(set(sizes)) == 1:
            return order
    ready = ready or [0] * len(block.atoms)

    def cost(order: list[int]) -> tuple:
        worst, total = _rows_per_key(order, edges, sizes)
        return worst, _levels(order, ready, [])[1], total

    best, best_cost = order, cost(order)
    for candidate in itertools.permutations(range(len(block.atoms))):
        if all(_joins(candidate[:k], j, edges) or not any(
                _joins(candidate[:k], r, edges) for r in candidate[k:])
               for k, j in enumerate(candidate) if k):  # no cross product before a join
            candidate_cost = cost(list(candidate))
            if candidate_cost < best_cost:
                best, best_cost = list(candidate), candidate_cost
    return best


KEY_FANOUT = 10  # rows per row of a table referenced by PRIMARY KEY, estimated (no loads)


def _sizes_by_keys(block: Block, equalities: list[tuple[int, int]],
                   primary: dict[str, tuple[int, ...]]) -> list[int]:
    """The atoms' sizes as estimated without loads: an atom whose equalities with another
    cover that one's whole PRIMARY KEY (and not the other way round) references it, many
    rows to one, as a fact table references a dimension; it is estimated
    :data:`KEY_FANOUT` times as big as the biggest atom it references (an atom that
    references none: 1).  In ``orders, customer, nation`` (joined on customer's and
    nation's keys): 100, 10 and 1."""
    atoms = block.atoms
    covered: dict[tuple[int, int], set[int]] = {}  # (i, j): columns of j equated to i's
    for a, b in equalities:
        i, j = atom_of_slot(block, a), atom_of_slot(block, b)
        if i != j:
            covered.setdefault((i, j), set()).add(b - atoms[j].offset)
            covered.setdefault((j, i), set()).add(a - atoms[i].offset)

    def keyed(i: int, j: int) -> bool:  # i's equalities cover j's PRIMARY KEY
        key = primary.get(atoms[j].relation, ())
        return bool(key) and set(key) <= covered.get((i, j), set())

    references = {i: [j for j in range(len(atoms))
                      if j != i and keyed(i, j) and not keyed(j, i)]
                  for i in range(len(atoms))}
    sizes: dict[int, int] = {}

    def size(i: int, seen: frozenset[int]) -> int:
        if i not in sizes:
            below = [size(j, seen | {i}) for j in references[i] if j not in seen]
            sizes[i] = KEY_FANOUT * max(below) if below else 1
        return sizes[i]

    return [size(i, frozenset()) for i in range(len(atoms))]


def _levels(order: list[int], ready: list[int], subqueries: list[int]
            ) -> tuple[tuple[int, ...], int]:
    """The levels of a chain's join steps in ``order``, and of its first step after them,
    given the level where each atom's rows arrive (``ready``: 0 for a table, for a view
    the level after it emits them) and each subquery relation's.  A join step runs the
    level after the previous one, or later when it joins a view whose rows come later:
    joining the tables first and a view last lets the tables' joins run while the view's
    own levels do, so a view over a view takes fewer levels."""
    levels: list[int] = []
    for j in range(1, len(order)):
        previous = levels[-1] + 1 if levels else ready[order[0]]
        levels.append(max(previous, ready[order[j]]))
    after = levels[-1] + 1 if levels else ready[order[0]]
    return tuple(levels), max([after, *subqueries])


def _joins(prefix: Sequence[int], atom: int, edges: set[tuple[int, int]]) -> bool:
    """Whether ``atom`` is equi-joined to one of the atoms ``prefix``."""
    return any((i, atom) in edges for i in prefix)


ORDERED_ATOMS = 6  # a view joining more atoms keeps their own (greedy) order


def _rows_per_key(order: list[int], edges: set[tuple[int, int]], sizes: list[int]
                  ) -> tuple[float, float]:
    """An order's estimated rows under one key of its join steps: the largest, then the
    sum.  A step's stored sides are the rows joined so far (estimated as the biggest atom
    among them: joins along keys) and the next atom's; its key takes at most as many
    values as the smaller atom of any equality it joins on (one, for a cross product)."""
    worst = total = 0.0
    for j in range(1, len(order)):
        prefix = order[:j]
        values = max((min(sizes[i], sizes[order[j]]) for i in prefix
                      if (i, order[j]) in edges), default=1)
        rows = max(max(sizes[i] for i in prefix), sizes[order[j]]) / values
        worst, total = max(worst, rows), total + rows
    return worst, total


def plan_keyed(catalog: dict, views: dict[str, str], loaded: dict[str, int] | None = None
               ) -> tuple[KeyedLayout, dict[str, str]]:
    """The keyed layout of the views that fit it (its keys sized for the rows loaded in
    bulk, ``loaded`` per table, and its joins ordered by them), and for the others why
    not."""
    tables = tuple(name for name, *_ in catalog["tables"])
    loaded = {t: n for t, n in (loaded or {}).items() if n}
    buckets = bucket_count(sum(loaded.values()))
    compiled, refused = _compile_all(list(views.items()), _schema_of(freeze(catalog)), tables,
                                     buckets, TableFacts.of(catalog, loaded))
    return KeyedLayout(tables, tuple(compiled.views), compiled.levels, buckets,
                       tuple(sorted(loaded.items()))), refused


# ---------------------------------------------------------------- compiled on executors
def freeze(catalog: dict) -> str:
    """The catalog as a hashable text (compiled views are cached by it per process)."""
    return pickle.dumps(catalog, protocol=5).hex()


def _schema_of(frozen: str):
    """Columns of the catalog's tables and (``view_columns``) views, by name."""
    catalog = pickle.loads(bytes.fromhex(frozen))
    columns = {name: cols for name, cols, *_ in catalog["tables"]}
    columns.update(catalog.get("view_columns", {}))

    def schema_of(name: str):
        return columns[name.lower()]
    return schema_of


@dataclass
class CompiledView:
    """One keyed view's step functions over the block's wide row (``plan.Block``)."""

    name: str
    block: Block
    order: list[int]
    first_step: int  # the id of its join step 1 (join step j is first_step + j - 1)
    final_step: int  # its aggregate / distinct step (unused for "project"); its
    # subquery steps come just before it
    kind: str  # "project", "aggregate" or "distinct"
    local: list  # per atom: conditions on it alone
    left_keys: list  # per join step j (1-based): wide row -> key values on the prefix side
    right_keys: list  # ... on atom order[j]'s side
    key_names: list
    strict: list  # per join step j: the key positions joined by ``=`` (NULL joins
    # nothing there; the others are ``IS NOT DISTINCT FROM``: NULL joins NULL)
    residual: list
    project: object = None
    group_key: object = None
    aggs: list | None = None
    finalizer: Finalizer | None = None
    buckets: int = 1024  # the layout's: a step's key is a hash of its values modulo this
    #: the level of each join step ``j`` (at ``j - 1``): the level after the previous one,
    #: or, joining a view, the first level its rows reach (:func:`_levels`)
    join_levels: tuple[int, ...] = ()
    after: int = 0  # the level of its first step after the joins
    readers: list = field(default_factory=list)  # (keyed view, atom) or (set step, side)
    hidden: bool = False  # an input of a set operation: its rows go only to its readers
    subqueries: list = field(default_factory=list)  # its SubqueryStep per EXISTS / IN
    distinct_after: bool = False  # SELECT DISTINCT .. GROUP BY: a distinct step follows

    @property
    def last_step(self) -> int:
        return self.final_step + self.distinct_after

    @property
    def ready(self) -> int:
        """The first level its rows can reach (they are emitted the level before)."""
        return self.step_level(len(self.order) + len(self.subqueries)) + (
            0 if self.kind == "project" else 1) + self.distinct_after

    def step_level(self, j: int) -> int:
        """The level of its ``j``-th step: join steps ``1 .. len(order) - 1``, then its
        subquery steps, then its aggregate / distinct step."""
        if j < len(self.order):
            return self.join_levels[j - 1]
        return self.after + j - len(self.order)

    def bucket(self, values: tuple) -> int:
        return key_hash(values) % self.buckets

    def width(self) -> int:
        return len(self.block.scope.columns)

    def atom_row(self, atom: int, row: tuple) -> tuple:
        a = self.block.atoms[atom]
        wide = [None] * self.width()
        wide[a.offset:a.offset + len(a.columns)] = row
        return tuple(wide)

    def merge(self, left: tuple, right: tuple, atom: int) -> tuple:
        a = self.block.atoms[atom]
        lo, hi = a.offset, a.offset + len(a.columns)
        return left[:lo] + right[lo:hi] + left[hi:]


@dataclass
class SubqueryStep:
    """A ``[NOT] EXISTS`` / ``IN`` conjunct of a keyed view (``plan.SubqueryFilter``): a
    semijoin (``negated``: an anti-join) of the view's joined rows with the subquery's
    relation, keyed by the correlated key values.  Its left log holds the joined rows, its
    right log the relation's key values (past the subquery's own filters) with counts; a
    joined row passes while its key has a right row (anti-join: has none), so a right
    change moves only the rows of a key whose count crosses zero.  A key with a NULL
    matches nothing, as for ``=``."""

    view: CompiledView = field(repr=False, compare=False)
    index: int  # its place among the view's subquery steps
    step: int
    negated: bool
    relation: str
    outer_key: object  # wide row -> key values
    inner_key: object  # relation's row -> key values
    local: list  # conditions on the relation's row alone
    key_names: str  # the view's key columns, for EXPLAIN
    #: NOT IN's NULL probe (``plan.SubqueryFilter.null_probe``): the last outer key is
    #: matched only by NULL, which every row of the relation has there
    null_probe: bool = False

    def enter(self, row: tuple, w: int, side: int) -> list[tuple]:
        """A change of the relation's row: its key values to this step's right log."""
        if not all(f(row) is True for f in self.local):
            return []
        key = self.inner_key(row)
        if None in key:
            return []
        if self.null_probe:
            key = (*key, None)
        return [record(self.step, self.view.bucket(key), RIGHT, pickle.dumps(key, protocol=5),
                       w, join=True)]


    def probe_key(self, wide: tuple) -> tuple | None:
        """The key a joined row looks up, or None when it can match no row (a NULL
        equality key; with a NULL probe, a probe that is not NULL)."""
        key = self.outer_key(wide)
        if self.null_probe:
            return key if key[-1] is None and None not in key[:-1] else None
        return None if None in key else key


@dataclass
class SetStep:
    """A keyed view's UNION, EXCEPT or INTERSECT (``kind``, DISTINCT or ALL) of two inputs,
    keyed by the row: per row its multiplicity on either side, the output's a function of
    both (bag semantics for ALL).  UNION ALL keeps no state: its inputs' rows pass on."""

    name: str
    step: int
    kind: str
    distinct: bool
    inputs: tuple  # the left and right input (CompiledView or SetStep)
    level: int  # its step's level (a UNION ALL: where its rows pass)
    buckets: int
    hidden: bool = False
    readers: list = field(default_factory=list)
    #: per side, the columns cast to the operation's types (INTEGER UNION DOUBLE: DOUBLE)
    casts: tuple = ((), ())

    def bucket(self, values: tuple) -> int:
        return key_hash(values) % self.buckets

    @property
    def last_step(self) -> int:
        return self.step

    def level_of(self, j: int) -> int:
        return self.level

    @property
    def passes(self) -> bool:
        return self.kind == "union" and not self.distinct

    @property
    def ready(self) -> int:
        return self.level if self.passes else self.level + 1

    def multiplicity(self, left: int, right: int) -> int:
        left, right = max(left, 0), max(right, 0)
        if self.kind == "union":
            return 1 if left + right > 0 else 0
        if self.kind == "intersect":
            return (1 if left and right else 0) if self.distinct else min(left, right)
        return (1 if left and not right else 0) if self.distinct else max(left - right, 0)

    def enter(self, row: tuple, w: int, side: int) -> list[tuple]:
        """A change of an input's row: its set step, or (UNION ALL) straight on."""
        if self.casts[side]:
            row = cast_row(row, self.casts[side])
        if self.passes:
            return emit(self, row, w)
        return [record(self.step, self.bucket(row), side,
                       pickle.dumps(row, protocol=5), w, join=False)]


@dataclass
class OrderedStep:
    """A keyed view whose rows depend on their order among others, over the rows of a
    hidden helper root (the rest of its query), as the local engine keeps it over a helper
    view:

    * ``window``: window functions (``windows.py``), one step keyed by the PARTITION BY
      values; each key holds its partitions' rows with counts, and a change re-evaluates
      the partitions it touches with :meth:`WindowView.evaluate` (no PARTITION BY: one key);
    * ``top-k``: ``ORDER BY .. LIMIT`` (``topk.py``), two steps: keyed by the row, each key
      holds its rows and passes on its first ``offset + limit`` in order; then one key
      holds those candidates and outputs rows ``offset + 1 .. offset + limit`` of them.
      Every row of the result is among its own key's first ``offset + limit``, so the
      merge reads at most ``offset + limit`` rows per key of the first step.  Rows that
      tie in the ORDER BY are ordered by their own values (:func:`upkeep.topk.row_order`),
      in every process, as the local engine's top-k orders them."""

    name: str
    kind: str  # "window" or "top-k"
    source: str  # the helper root's name
    columns: list  # the output columns ``(name, SqlType)``
    window: WindowView | None = None
    partition: tuple[str, ...] = ()  # windows: the PARTITION BY columns
    order: Callable[[tuple], tuple] | None = None  # top-k: a helper row's ORDER BY key
    limit: int = 0
    offset: int = 0
    step: int = 0
    level: int = 0
    buckets: int = 1024
    hidden: bool = False
    readers: list = field(default_factory=list)

    @property
    def last_step(self) -> int:
        return self.step + (self.kind == "top-k")

    def level_of(self, j: int) -> int:
        return self.level + j

    @property
    def ready(self) -> int:
        return self.last_step - self.step + self.level + 1

    def bucket(self, values: tuple) -> int:
        return key_hash(values) % self.buckets

    def enter(self, row: tuple, w: int, side: int) -> list[tuple]:
        """A change of the helper's row: to the key of its partition, or of itself."""
        key = self.window.partition(row) if self.kind == "window" else row
        return [record(self.step, self.bucket(key), LEFT, pickle.dumps(row, protocol=5), w,
                       join=False)]

    def first(self, rows: dict[tuple, int], n: int) -> list[tuple]:
        """The first ``n`` of ``rows`` (row -> count) in ORDER BY order, ties by the rows'
        values."""
        out: list[tuple] = []
        for row in heapq.nsmallest(n, rows, key=tie_broken(self.order)):
            out += [row] * min(rows[row], n - len(out))
        return out

    def describe(self) -> str:
        if self.kind == "window":
            by = ", ".join(self.partition)
            return (f"{self.source} -> window functions by partition"
                    f"{f' ({by})' if by else ', one key'} (level {self.level})")
        first = self.offset + self.limit
        return (f"{self.source} -> first {first} rows per key (level {self.level}) -> rows "
                f"{self.offset + 1}..{first} of them, one key (level {self.level + 1})")


@dataclass
class Compiled:
    """The keyed views compiled: each view's root (a chain of steps, or a set or ordering
    step over others), every chain (set operations' inputs too), every set and ordering
    step (``nodes``), and the levels."""

    roots: dict[str, CompiledView | SetStep | OrderedStep] = field(default_factory=dict)
    chains: list[CompiledView] = field(default_factory=list)
    nodes: list[SetStep | OrderedStep] = field(default_factory=list)
    levels: int = 1

    @property
    def views(self) -> list[str]:
        """The roots that are views (not a view's hidden helpers), in definition order."""
        return [name for name, root in self.roots.items() if not root.hidden]

    @cached_property
    def finals(self) -> dict[int, CompiledView]:
        """The aggregate steps, by step id (for :func:`partial_aggregates`)."""
        return {v.final_step: v for v in self.chains if v.kind == "aggregate"}


@lru_cache(maxsize=8)
def compile_views(layout: KeyedLayout, frozen: str) -> Compiled:
    """The keyed views of ``layout`` compiled against the catalog (cached per process)."""
    catalog = pickle.loads(bytes.fromhex(frozen))
    compiled, refused = _compile_all([(n, catalog["views"][n][0]) for n in layout.views],
                                     _schema_of(frozen), layout.tables, layout.buckets,
                                     TableFacts.of(catalog, dict(layout.loaded)))
    assert not refused and compiled.levels == layout.levels, refused
    return compiled


def _compile_all(views: list[tuple[str, str]], schema, tables: tuple[str, ...], buckets: int,
                 facts: TableFacts) -> tuple[Compiled, dict[str, str]]:
    """Views in definition order as keyed steps numbered after the table steps, each after
    the levels where the keyed views it reads emit their rows; and why the others cannot.
    A view with CTEs, derived tables, outer joins or scalar subqueries reads hidden
    helper roots (:func:`_bind_parts`)."""
    compiled, refused = Compiled(), {}
    step = len(tables)
    helper_columns: dict[str, list] = {}
    names = {name for name, _ in views}

    def schema_of(name: str):
        columns = helper_columns.get(name.lower())
        if columns is not None:
            return columns
        try:
            return schema(name)
        except KeyError:
            raise SchemaError(f"unknown table or view {name}") from None

    for name, sql in views:
        parts: list[tuple[str, object]] = []

        def bind(part: str, node, name=name, parts=parts) -> None:
            if part != name and (part in compiled.roots or part in names):
                raise _NotKeyed(f"its helper's name {part} is a view's")
            if isinstance(node, OrderedStep):  # over a helper bound just before
                plan, columns = node, node.columns
            else:
                plan = bind_query(node, schema_of)
                why = keyable(plan, set(tables), set(compiled.roots) | {p for p, _ in parts})
                if why is not None:
                    raise _NotKeyed(why)
                columns = None
            if part != name:
                helper_columns[part] = columns or _plan_columns(plan)
            parts.append((part, plan))

        try:
            _bind_parts(name, sql, schema_of, bind)
            built, after = _compile_parts(parts, name, step, buckets, compiled, facts)
        except (Error, _NotKeyed) as exc:
            refused[name] = str(exc)
            for part, _ in parts:
                helper_columns.pop(part, None)
            continue
        _wire(compiled, built)
        step = after
    return compiled, refused


class _NotKeyed(Exception):
    """Why a view (or one of its parts) cannot run as keyed steps."""


def _compile_parts(parts: list[tuple[str, object]], name: str, step: int, buckets: int,
                   compiled: Compiled, facts: TableFacts) -> tuple[list[tuple], int]:
    """A view's bound parts (its helpers, then itself) as steps numbered from ``step``, each
    ``(part, root, chains, nodes)``, and the next free step; ``compiled`` is left as it is
    (a part that fails to compile leaves nothing of the view behind)."""
    scratch = Compiled(roots=dict(compiled.roots))
    built = []
    for part, plan in parts:
        chains, nodes = [], []
        if isinstance(plan, OrderedStep):
            root = replace(plan, step=step, level=scratch.roots[plan.source].ready,
                           buckets=buckets, readers=[])
            nodes.append(root)
        else:
            root = _compile_plan(part, plan, step, buckets, scratch, chains, nodes, facts)
        root.hidden = part != name
        scratch.roots[part] = root
        built.append((part, root, chains, nodes))
        step = _after(step, chains, nodes)
    return built, step


def _wire(compiled: Compiled, built: list[tuple]) -> None:
    """Add a view's compiled parts to ``compiled``, each after the roots it reads, which
    then hand it their rows."""
    for part, root, chains, nodes in built:
        if isinstance(root, OrderedStep):
            compiled.roots[root.source].readers.append((root, LEFT))
        for chain in chains:
            for i, atom in enumerate(chain.block.atoms):
                if atom.relation in compiled.roots:
                    compiled.roots[atom.relation].readers.append((chain, i))
            for sub in chain.subqueries:
                if sub.relation in compiled.roots:
                    compiled.roots[sub.relation].readers.append((sub, RIGHT))
        compiled.roots[part] = root
        compiled.chains += chains
        compiled.nodes += nodes
        compiled.levels = max(compiled.levels, root.ready)


def _bind_parts(name: str, sql: str, schema_of, bind) -> None:
    """Bind a view's parts, ``bind(part, query)`` each: first its hidden helpers, then the
    view itself.  A view is rewritten as the local engine rewrites it: each non-recursive
    CTE a helper named ``<view>__cte_<cte>``; ``[NOT] IN`` / ``[NOT] EXISTS`` as subquery
    predicates; scalar subqueries joined in as derived tables
    (:mod:`upkeep.scalar_subqueries`); outer joins as the inner join UNION ALL each outer
    side's unmatched rows, found by an anti-join and padded with NULLs
    (:mod:`upkeep.outer_joins`, unpadded); and each derived table in a FROM clause a helper
    named ``<view>__sub<i>`` (its own derived tables first, each rewritten whole as a view
    is: an outer join's union may hold a ``NOT EXISTS`` to rewrite), which the block reads as it
    reads a view."""
    helpers = 0

    def types_of(select: exp.Select) -> list[str]:  # DuckDB's, as the catalog types them
        return duckdb_types(select, schema_of)

    def rewritten(query):
        query = query.transform(qualify_as_derived).transform(
            lambda n: rewrite_subquery_predicates(n, schema_of))
        return prepared(query.transform(lambda n: rewrite_scalar_subqueries(n, schema_of)
                                        if isinstance(n, exp.Select) else n))

    def prepared(query):
        hoist(query)  # the outer-join rewrite reads the helpers' columns
        query = query.transform(lambda n: rewrite_outer_joins(n, schema_of, padded=False)
                                if isinstance(n, exp.Select) else n)
        hoist(query)
        return query

    def hoist(node) -> None:
        nonlocal helpers
        if isinstance(node, exp.Subquery):
            hoist(node.this)
        elif isinstance(node, (exp.Union, exp.Except, exp.Intersect)):
            hoist(node.this)
            hoist(node.expression)
        elif isinstance(node, exp.Select):
            for holder in derived_tables(node):
                helpers += 1
                helper = f"{name}__sub{helpers}"
                ordered(helper, derived_table_body(holder.this))
                read_relation(holder, helper)

    def ordered(part: str, query, prepare=rewritten) -> None:
        """``part`` as an :class:`OrderedStep` over a helper of the rest of ``query`` when
        it is a top-k or has window functions in its select list (or in expressions there,
        which the step then computes), else as ``prepare(query)``.  Grouping sets first
        become the ``UNION ALL`` of one grouped block per set, as on one machine."""
        query = query.transform(count_if_as_sum).transform(exists_of_one_row).transform(
            lambda n: expand_grouping_sets(n, types_of)).transform(
            lambda n: rewrite_laterals(n, schema_of)).transform(
            lambda n: rewrite_distinct_on(n, schema_of))
        query = window_aliases_resolved(query, schema_of)
        top = split_top_k(query)
        if top is not None:
            body, order, limit, offset, hidden = top
            ordered(f"{part}__topk", body, prepare)
            columns = schema_of(f"{part}__topk")
            try:
                key = sort_key(order, columns)
            except TopKError as exc:
                raise _NotKeyed(f"top-k by {exc}") from None
            bind(part, OrderedStep(part, "top-k", f"{part}__topk",
                                   columns[:len(columns) - hidden], order=key, limit=limit,
                                   offset=offset))
            return
        split = windowing_of(query)
        if split is None:
            bind(part, prepare(query))
            return
        windowing, outer = split
        bind(f"{part}__base", prepare(windowing.base))
        try:
            window = window_view(part, windowing, f"{part}__base", schema_of(f"{part}__base"),
                                 query.sql(dialect="duckdb"), outer)
        except (TopKError, Error) as exc:
            raise _NotKeyed(f"window functions: {exc}") from None
        bind(part, OrderedStep(part, "window", f"{part}__base", window.columns,
                               window=window, partition=tuple(windowing.partition)))

    tree = parse_one(sql)
    if recursive_with(tree) is not None:
        raise _NotKeyed("a recursive CTE (WITH RECURSIVE)")
    bodies, query = ctes_as_relations(tree, name)
    for helper, body in bodies:
        ordered(helper, body)
    ordered(name, query)


def _plan_columns(plan) -> list[tuple[str, SqlType]]:
    """A bound plan's output columns with their types (of a set operation: the types its
    sides share, as the local engine types them)."""
    if isinstance(plan, SetOperation):
        return set_operation_columns(plan.kind, _plan_columns(plan.left),
                                     _plan_columns(plan.right))
    if plan.is_aggregate:  # typed as the aggregate step's finalizer types its rows
        types = _compile_view("", plan, 0, TableFacts()).finalizer.types
    else:
        compiler = ExpressionCompiler(plan.scope)
        types = [compiler.compile(e).type for _, e in plan.select]
    return [(column, t) for (column, _), t in zip(plan.select, types, strict=True)]


def _after(step: int, chains: list, nodes: list) -> int:
    """The first step id after ``step`` and the steps of ``chains`` and ``nodes``."""
    return max([step, *(c.last_step + 1 for c in chains),
                *(t.last_step + 1 for t in nodes)])


def _compile_plan(name: str, plan, step: int, buckets: int, compiled: Compiled,
                  chains: list, nodes: list, facts: TableFacts):
    """A bound view (or one input of its set operations) as steps numbered from ``step``;
    its chains and set steps are appended to ``chains`` and ``nodes``."""
    if isinstance(plan, Block):
        def ready(relation: str) -> int:  # a base table's rows enter at level 0
            root = compiled.roots.get(relation)
            return 0 if root is None else root.ready

        atoms = [ready(a.relation) for a in plan.atoms]
        chain = _compile_view(name, plan, step, facts, atoms)
        chain.buckets, chain.hidden = buckets, True
        chain.join_levels, chain.after = _levels(chain.order, atoms,
                                                 [ready(s.relation) for s in plan.subqueries])
        chains.append(chain)
        return chain
    left = _compile_plan(f"{name}.left", plan.left, step, buckets, compiled, chains, nodes,
                         facts)
    right = _compile_plan(f"{name}.right", plan.right, _after(step, chains, nodes), buckets,
                          compiled, chains, nodes, facts)
    step = _after(step, chains, nodes)
    columns = _plan_columns(plan)
    node = SetStep(name, step, plan.kind, plan.distinct, (left, right),
                   max(left.ready, right.ready), buckets, hidden=True,
                   casts=(set_operation_casts(_plan_columns(plan.left), columns),
                          set_operation_casts(_plan_columns(plan.right), columns)))
    left.readers.append((node, LEFT))
    right.readers.append((node, RIGHT))
    nodes.append(node)
    return node


def _describe(root) -> str:
    """A keyed view's steps in words, with their levels."""
    if isinstance(root, OrderedStep):
        return root.describe()
    if isinstance(root, SetStep):
        op = root.kind.upper() + ("" if root.distinct else " ALL")
        inner = f"({_describe(root.inputs[0])}) {op} ({_describe(root.inputs[1])})"
        return inner if root.passes else f"{inner} -> {op.lower()} by row (level {root.level})"
    parts = [root.block.atoms[root.order[0]].relation]
    for j in range(1, len(root.order)):
        atom = root.block.atoms[root.order[j]]
        key = ", ".join(root.key_names[j])
        parts.append(f"join {atom.relation} by ({key}) (level {root.step_level(j)})" if key else
                     f"cross product with {atom.relation}, one key (level {root.step_level(j)})")
    for sub in root.subqueries:
        kind = "anti-join" if sub.negated else "semijoin"
        how = f" by ({sub.key_names})" if sub.key_names else ", one key"
        parts.append(f"{kind} with {sub.relation}{how} "
                     f"(level {root.step_level(len(root.order) + sub.index)})")
    if root.kind != "project":
        parts.append(f"{root.kind} by group key "
                     f"(level {root.step_level(len(root.order) + len(root.subqueries))})")
    if root.distinct_after:
        parts.append("distinct by row "
                     f"(level {root.step_level(len(root.order) + len(root.subqueries) + 1)})")
    return " -> ".join(parts)


def _compile_view(name: str, block: Block, step: int, facts: TableFacts,
                  ready: list[int] | None = None) -> CompiledView:
    """One SELECT block's chain of steps, numbered from ``step``, its joins ordered by the
    tables' sizes or keys (``facts``) and the levels ``ready`` where each atom's rows
    arrive (:func:`_join_order`)."""
    order = _join_order(block, facts, ready)
    analysis = analyse_joins(block)
    compiler = ExpressionCompiler(block.scope)
    local = [[compiler.compile_condition(c).fn for c in conds] for conds in analysis.local]
    left_keys, right_keys, key_names, strict = [None], [None], [[]], [()]
    for j in range(1, len(order)):
        prefix = set(order[:j])
        pairs = []
        for a, b in analysis.equalities:
            ia, ib = atom_of_slot(block, a), atom_of_slot(block, b)
            safe = (a, b) in analysis.null_safe
            if ia in prefix and ib == order[j]:
                pairs.append((a, b, safe))
            elif ib in prefix and ia == order[j]:
                pairs.append((b, a, safe))
        lslots = tuple(p for p, _, _ in pairs)
        rslots = tuple(q for _, q, _ in pairs)
        left_keys.append(_getter(lslots))
        right_keys.append(_getter(rslots))
        strict.append(tuple(i for i, (_, _, safe) in enumerate(pairs) if not safe))
        names = {c.slot: f"{c.qualifier}.{c.name}" for c in block.scope.columns}
        key_names.append([names[q] for q in rslots])
    residual = [compiler.compile_condition(c).fn for c in analysis.residual]
    kind = "aggregate" if block.is_aggregate else "distinct" if block.distinct else "project"
    subs = block.subqueries
    view = CompiledView(name, block, order, step, step + len(order) - 1 + len(subs), kind,
                        local, left_keys, right_keys, key_names, strict, residual)
    for i, sub in enumerate(subs):
        inner = ExpressionCompiler(sub.inner_scope)
        view.subqueries.append(SubqueryStep(
            view, i, step + len(order) - 1 + i, sub.negated, sub.relation,
            _getter(tuple(block.scope.resolve(c).slot for c in sub.outer_keys)),
            _getter(tuple(sub.inner_keys)), [inner.compile_condition(c).fn for c in sub.local],
            ", ".join(c.sql() for c in sub.outer_keys), sub.null_probe))
    if kind == "aggregate":
        view.distinct_after = block.distinct
        keys = [compiler.compile(g) for g in block.group_by]
        view.aggs = [compile_aggregate(a, compiler) for a in block.aggregates]
        view.finalizer = Finalizer([e for _, e in block.select], block.having,
                                   block.group_by, [k.type for k in keys], view.aggs,
                                   block.scope)
        view.group_key = compiler.compile_tuple(block.group_by)
    else:
        view.project = compiler.compile_tuple([e for _, e in block.select])
    return view


def _getter(slots: tuple[int, ...]):
    return lambda row: tuple(row[s] for s in slots)


# ---------------------------------------------------------------- routing
OUTPUT_KEYS = 64  # view deltas pass later levels under few keys: Spark calls a step per key
SPARK_GROUPS = 64  # per table / aggregate / distinct step: keys Spark groups it by
ROWS_PER_KEY = 128  # loaded rows per key of a step (:func:`bucket_count`)
MIN_BUCKETS = 1024  # keys per step however little is loaded
PREFETCH_SHARE = 4  # a batch touching a quarter of a group's keys reads its map at once
#: loaded rows per task of the bulk build, whose task holds its keys' records and state
#: as Python objects while it builds them (SF 10 in 2 tasks took over 5 GB each)
BUILD_ROWS = 500_000


def bucket_count(loaded_rows: int) -> int:
    """How many keys each step's values hash into: about 128 loaded rows per key (a power
    of two, at least 1024).  A key's state is read whole when a batch touches it, so keys
    stay small as the loaded state grows; fewer keys make a bulk build and a big batch
    cheaper, since Spark's state calls are made per key (:class:`KeyedStep`)."""
    buckets = MIN_BUCKETS
    while buckets < loaded_rows // ROWS_PER_KEY and buckets < 1 << 22:
        buckets *= 2
    return buckets


def record(step: int, key: int, side: int, row: bytes, weight: int, *, join: bool
           ) -> tuple:
    """A record ``(step, group, key, side, row, weight)`` for a step's ``key``.  Spark
    groups records by ``(step, group)``: a join step's group is its key (its logs are
    ``ListState`` of that key); a table, aggregate or distinct step keeps each key's state
    as one ``MapState`` entry, so many of its keys share a group, and Spark's fixed cost
    per group (a state-server round trip, an Arrow batch) is paid once for them."""
    return (step, key if join else key % SPARK_GROUPS, key, side, row, weight)


def table_key(catalog: dict, table_index: int, row: tuple, buckets: int) -> int:
    """A row's key in its table step: a bucket of its PRIMARY KEY's values (every row
    with that key lands in it, so a duplicate is seen), else of the whole row."""
    key = catalog["tables"][table_index][3]
    return key_hash(tuple(row[i] for i in key) if key else row) % buckets


def route_changes(layout: KeyedLayout, catalog: dict, views: list[CompiledView],
                  changes: list[tuple[str, tuple, int]]) -> list[tuple]:
    """A decoded batch's changes as level-0 records: each row to its table step, and, past
    its atom's filters, into every view that reads it.  Both go at once: a row the table
    step rejects fails the whole micro-batch, so nothing it reached is committed."""
    index = {t: i for i, t in enumerate(layout.tables)}
    readers: dict[str, list[tuple]] = {}
    for v in views:
        for i, atom in enumerate(v.block.atoms):
            readers.setdefault(atom.relation, []).append((v, i, v.name))
        for sub in v.subqueries:
            readers.setdefault(sub.relation, []).append((sub, RIGHT, v.name))
    out = []
    try:
        for table, row, weight in changes:
            i = index[table]
            out.append(record(i, table_key(catalog, i, row, layout.buckets), LEFT,
                              pickle.dumps(row, protocol=5), weight, join=False))
            for reader, slot, view in readers.get(table, ()):
                try:
                    out += reach(reader, slot, row, weight)
                except EvaluationError as exc:  # a filter of ``view``: said of it
                    raise exc.in_view(view) from None
    except Error as exc:
        raise BatchRejected(exc.to_record()) from None
    return out


def enter(view: CompiledView, atom: int, wide: tuple, w: int) -> list[tuple]:
    """Where a filtered base row goes: its view's join step, or straight on."""
    j = view.order.index(atom)
    if j == 0:
        if len(view.order) == 1:
            return joined(view, wide, w)
        return [record(view.first_step, view.bucket(view.left_keys[1](wide)), LEFT,
                       pickle.dumps(wide, protocol=5), w, join=True)]
    return [record(view.first_step + j - 1, view.bucket(view.right_keys[j](wide)), RIGHT,
                   pickle.dumps(wide, protocol=5), w, join=True)]


def joined(view: CompiledView, wide: tuple, w: int) -> list[tuple]:
    """A row of the whole join: residual conditions, then its subquery steps (if any)."""
    if not all(f(wide) is True for f in view.residual):
        return []
    return filtered(view, wide, w, 0)


def filtered(view: CompiledView, wide: tuple, w: int, passed: int) -> list[tuple]:
    """A joined row past the first ``passed`` subquery steps: the next one, else the
    view's last step."""
    if passed < len(view.subqueries):
        sub = view.subqueries[passed]
        return [record(sub.step, view.bucket(sub.outer_key(wide)), LEFT,
                       pickle.dumps(wide, protocol=5), w, join=True)]
    if view.kind == "aggregate":
        return [record(view.final_step, view.bucket(view.group_key(wide)), LEFT,
                       pickle.dumps(wide, protocol=5), w, join=False)]
    row = view.project(wide)
    if view.kind == "distinct":
        return [record(view.final_step, view.bucket(row), LEFT, pickle.dumps(row, protocol=5),
                       w, join=False)]
    return emit(view, row, w)


def emit(source: CompiledView | SetStep, row: tuple, w: int) -> list[tuple]:
    """A change of a view's row: out to the driver (unless it is a set operation's input),
    into each keyed view reading it (past that atom's filters) as a base table's change
    enters its readers, and into the set operation it is an input of."""
    out = [] if source.hidden else [_output(source.name, row, w)]
    for reader, slot in source.readers:
        out += reach(reader, slot, row, w)
    return out


def reach(reader, slot: int, row: tuple, w: int) -> list[tuple]:
    """A changed row of a table or view into one step reading it: a view's atom ``slot``
    (past that atom's filters), a set step's side, or a subquery step's right side."""
    if isinstance(reader, (SetStep, SubqueryStep, OrderedStep)):
        return reader.enter(row, w, slot)
    wide = reader.atom_row(slot, row)
    if all(f(wide) is True for f in reader.local[slot]):
        return enter(reader, slot, wide, w)
    return []


def partial_aggregates(records: list[tuple], finals: dict[int, CompiledView]) -> list[tuple]:
    """The first phase of a two-phase aggregate: the rows a task sends to an aggregate
    step, folded per group into one partial :class:`GroupState` record (a group with one
    row keeps its row), so a hot group (a dimension attribute, a global aggregate) costs
    the keyed final step one record per task instead of one per row."""
    if not finals:
        return records
    out: list[tuple] = []
    groups: dict[tuple, list] = {}  # (step, group key) -> [first record, its row, state]
    for r in records:
        view = finals.get(r[0])
        if view is None or r[3] != LEFT or not r[4]:
            out.append(r)
            continue
        wide = _loads(r[4])
        group = (r[0], view.group_key(wide))
        entry = groups.get(group)
        if entry is None:
            groups[group] = [r, wide, None]
            continue
        if entry[2] is None:
            entry[2] = GroupState(view.aggs)
            entry[2].add(view.aggs, entry[1], entry[0][5])
        entry[2].add(view.aggs, wide, r[5])
    for (step, g), (first, _, state) in groups.items():
        out.append(first if state is None else
                   (step, first[1], first[2], PARTIAL, pickle.dumps((g, state), protocol=5), 1))
    return out


def start_records(layout: KeyedLayout, frozen: str) -> list[tuple]:
    """The fresh query's first records: a global aggregate's row exists before any input
    (COUNT(*) = 0), so its aggregate step is woken once with no rows."""
    return [record(v.final_step, v.bucket(()), LEFT, b"", 0, join=False)
            for v in compile_views(layout, frozen).chains
            if v.kind == "aggregate" and not v.block.group_by]


# ---------------------------------------------------------------- the processor
class KeyedStep(StatefulProcessor):
    """The steps of one level, grouped by ``(step, group)``; see the module docstring.

    Every call on Spark's state is a round trip between the Python worker and the JVM's
    state server, so a step makes one read and at most one write per key it touches: a
    table, aggregate or distinct step's key is one ``MapState`` entry (its rows with
    counts, its groups); a join step's sides are ``ListState`` logs appended to without
    reading, read only when the other side changes, and compacted when read."""

    def __init__(self, layout: KeyedLayout, catalog: dict, level: int):
        self.layout = layout
        self.frozen = freeze(catalog)
        self.catalog = catalog
        self.level = level
        self.by_step: dict[int, tuple[CompiledView, int]] = {}
        self.finals: dict[int, CompiledView] = {}
        self.compiled = False
        self.prefetched: dict[int, tuple] | None = None  # this group's map, read at once
        self.current = (0, 0)  # the step and key being stepped

    def init(self, handle: StatefulProcessorHandle) -> None:
        """Declare the state; the views compile at the first rows (:meth:`handleInputRows`),
        since Spark also calls ``init`` in a Python process of its own when the query
        starts, only to learn the state's schemas (about 0.8 s per level saved there)."""
        self.setup([handle.getListState(name, "row binary, weight long")
                    for name in ("lefts", "rights")],
                   handle.getMapState("values", "key long", "value binary"))

    def compile(self) -> None:
        """Each step's chain and place in it, or its set step (compiled once per process)."""
        compiled = compile_views(self.layout, self.frozen)
        self.finals = compiled.finals
        for v in compiled.chains:  # j: join steps, then subquery steps, then the last
            for j in range(1, len(v.order) + len(v.subqueries)):
                self.by_step[v.first_step + j - 1] = (v, j)
            if v.kind != "project":
                self.by_step[v.final_step] = (v, len(v.order) + len(v.subqueries))
            if v.distinct_after:
                self.by_step[v.last_step] = (v, len(v.order) + len(v.subqueries) + 1)
        for node in compiled.nodes:
            for j in range(node.last_step - node.step + 1):
                self.by_step[node.step + j] = (node, j)
        self.compiled = True
        freeze_worker_heap()

    def setup(self, sides, values) -> None:
        """The state of the current group: Spark's, or the in-memory stand-ins of a bulk
        build.  ``sides``: a join step's two logs of ``(row, weight)``; ``values``: per key
        of a table step its rows with counts, of an aggregate step its groups, of a
        distinct step its rows with counts, pickled."""
        self.sides, self.values = sides, values

    def level_of(self, step: int) -> int:
        """Table steps are level 0; a view's steps are at :meth:`CompiledView.step_level`
        (after the levels where the views it reads emit their rows, :func:`_levels`)."""
        if step == OUTPUT_STEP:
            return self.layout.levels
        if step < len(self.layout.tables):
            return 0
        view, j = self.by_step[step]
        if isinstance(view, (SetStep, OrderedStep)):
            return view.level_of(j)
        return view.step_level(j)

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        """Spark's Row API (``transformWithState``): one call per group costs far less
        than a pandas frame per group, and most groups hold a few rows."""
        if not self.compiled:
            self.compile()
        step = int(key[0])
        if self.level_of(step) != self.level:
            yield from rows
            return
        keys: dict[int, dict[str, list]] = {}
        for r in rows:
            columns = keys.get(r.key)
            if columns is None:
                columns = keys[r.key] = {"side": [], "row": [], "weight": []}
            columns["side"].append(r.side)
            columns["row"].append(r.row)
            columns["weight"].append(r.weight)
        if len(keys) > 1 and len(keys) * PREFETCH_SHARE >= self.layout.buckets // SPARK_GROUPS:
            # a big batch touches most keys of this group: one paged read of its map, not
            # a state call per key (a 1-row batch still reads its one key alone)
            self.prefetched = {k[0]: v for k, v in self.values.iterator()}
        try:
            out = [o for k, columns in keys.items() for o in self._step(step, k, columns)]
        except Error as exc:
            raise self.rejected(exc, step) from None
        finally:
            self.prefetched = None
        for r in partial_aggregates(out, self.finals):
            yield Row(step=r[0], group=r[1], key=r[2], side=r[3], row=r[4], weight=r[5])

    def rejected(self, exc: Error, step: int) -> BatchRejected:
        """A step's error as its micro-batch's rejection; an evaluation error said of the
        view it arose in (``view`` set, the message starting with it), as the local
        engine says it."""
        if isinstance(exc, EvaluationError) and step in self.by_step:
            exc = exc.in_view(self.by_step[step][0].name)
        return BatchRejected(exc.to_record())

    def _step(self, step: int, key: int, frame: dict[str, list]) -> list[tuple]:
        self.current = (step, key)
        if step < len(self.layout.tables):
            return self._table(step, key, frame)
        view, j = self.by_step[step]
        if isinstance(view, SetStep):
            return self._set(view, key, frame)
        if isinstance(view, OrderedStep):
            return self._ordered(view, j, key, frame)
        sides = [Counter(), Counter()]
        partials = []
        for side, row, weight in zip(frame["side"], frame["row"], frame["weight"],
                                     strict=True):
            if side == PARTIAL:
                partials.append(bytes(row))
            elif row:
                sides[int(side)][bytes(row)] += int(weight)
        if j < len(view.order):
            return self._join(view, j, sides[LEFT], sides[RIGHT])
        if j < len(view.order) + len(view.subqueries):
            return self._semi(view.subqueries[j - len(view.order)], sides[LEFT], sides[RIGHT])
        delta = {r: w for r, w in sides[LEFT].items() if w}
        if view.kind == "aggregate" and step == view.final_step:
            return self._aggregate(view, key, delta, partials)
        return self._distinct(view, key, delta)

    def _load(self, key: int):
        if self.prefetched is not None:
            held = self.prefetched.get(key)
        else:
            held = self.values.getValue((key,))
        return None if held is None else pickle.loads(held[0])

    def _keep(self, key: int, value: dict) -> None:
        if value:
            self.values.updateValue((key,), (pickle.dumps(value, protocol=5),))
        else:
            self.values.removeKey((key,))

    # -- table step: the table's rows, checked like the local engine's
    def _table(self, step: int, key: int, frame: dict[str, list]) -> list[tuple]:
        table = self.layout.tables[step]
        net = Counter()
        for row, weight in zip(frame["row"], frame["weight"], strict=True):
            net[bytes(row)] += int(weight)
        changes = {r: w for r, w in net.items() if w}
        if not changes:
            return []
        held: dict[bytes, int] = self._load(key) or {}
        for r, w in changes.items():
            n = held.get(r, 0) + w
            if n < 0:
                row = pickle.loads(r)
                raise ConstraintError(
                    f"cannot delete row {format_row(row)} from table {table}: it is not "
                    f"present (present {held.get(r, 0)} time(s), deleting {-w})", row)
            if n:
                held[r] = n
            else:
                del held[r]
        primary = self.catalog["tables"][step][3]
        if primary:  # at most one row per PRIMARY KEY value (its rows all hash to this key)
            per_key: Counter = Counter()
            for r, n in held.items():
                row = pickle.loads(r)
                pk = tuple(row[i] for i in primary)
                per_key[pk] += n
                if per_key[pk] > 1:  # as the local engine says it (``Table.check_keys``)
                    raise DuplicateKeyError(f"duplicate primary key {format_row(pk)} in "
                                            f"table {table}", pk)
        self._keep(key, held)
        return []

    # -- join step j: dL x (R + dR) + L x dR
    def _join(self, view: CompiledView, j: int, d_left: Counter, d_right: Counter
              ) -> list[tuple]:
        d_left = {r: w for r, w in d_left.items() if w}
        d_right = {r: w for r, w in d_right.items() if w}
        read_left = bool(d_right) or (bool(d_left) and self._compact_now(LEFT))
        read_right = bool(d_left) or (bool(d_right) and self._compact_now(RIGHT))
        old_left, left_length = self._side(LEFT) if read_left else ({}, 0)
        old_right, right_length = self._side(RIGHT) if read_right else ({}, 0)
        lkey, rkey, atom = view.left_keys[j], view.right_keys[j], view.order[j]
        strict = view.strict[j]
        new_right = Counter(old_right)
        for r, w in d_right.items():
            new_right[r] += w
        out: list[tuple] = []

        def emit(left: dict, right: dict) -> None:
            # a key holds every join value of its bucket: hash-join within it
            if not left:
                return
            by_value: dict[tuple, list[tuple[tuple, int]]] = {}
            for rb, rw in right.items():
                if rw:
                    rt = _loads(rb)  # NaN joins NaN, as in DuckDB: the one NaN
                    by_value.setdefault(rkey(rt), []).append((rt, rw))
            if not by_value:
                return
            for lb, lw in left.items():
                lt = _loads(lb)
                k = lkey(lt)
                if any(k[i] is None for i in strict):
                    continue
                for rt, rw in by_value.get(k, ()):
                    out.extend(self._next(view, j, view.merge(lt, rt, atom), lw * rw))

        emit(d_left, new_right)
        emit(old_left, d_right)
        self._store(LEFT, d_left, old_left if read_left else None, left_length)
        self._store(RIGHT, d_right, old_right if read_right else None, right_length)
        return out

    # -- subquery step: joined rows pass while their key has a right row (or, negated, none)
    def _semi(self, sub: SubqueryStep, d_left: Counter, d_right: Counter) -> list[tuple]:
        d_left = {r: w for r, w in d_left.items() if w}
        d_right = {r: w for r, w in d_right.items() if w}
        held, right_length = self._side(RIGHT)  # the keys' counts: read on any change
        before: Counter = Counter()
        for kb, n in held.items():
            before[_loads(kb)] += n
        after = Counter(before)
        changed = set()
        for kb, w in d_right.items():
            k = _loads(kb)
            after[k] += w
            changed.add(k)
        flipped = {k: after[k] > 0 for k in changed if (before[k] > 0) != (after[k] > 0)}
        out: list[tuple] = []
        read_left = bool(flipped) or (bool(d_left) and self._compact_now(LEFT))
        old_left, left_length = self._side(LEFT) if read_left else ({}, 0)
        for lb, lw in old_left.items():  # rows of a key whose count crossed zero
            wide = pickle.loads(lb)
            now = flipped.get(sub.probe_key(wide))
            if now is not None:
                sign = 1 if now != sub.negated else -1
                out += filtered(sub.view, wide, sign * lw, sub.index + 1)
        for lb, lw in d_left.items():  # new rows against the new counts
            wide = pickle.loads(lb)
            key = sub.probe_key(wide)
            if (key is not None and after[key] > 0) != sub.negated:
                out += filtered(sub.view, wide, lw, sub.index + 1)
        self._store(LEFT, d_left, old_left if read_left else None, left_length)
        self._store(RIGHT, d_right, held, right_length)
        return out

    def _side(self, side: int) -> tuple[dict[bytes, int], int]:
        """A log's rows and weights (consolidated), and how many entries it holds."""
        rows: Counter = Counter()
        length = 0
        for row, weight in self.sides[side].get():  # one call: no exists() round trip
            if weight != PACKED:
                rows[bytes(row)] += int(weight)
                length += 1
                continue
            for r, w in _unpacked(row, weight):
                rows[r] += w
                length += 1
        held = {r: w for r, w in rows.items() if w}
        big = (*self.current, side)
        if len(held) > COMPACT_ODDS * COMPACT_READ:
            _big_sides[big] = len(held)
        else:
            _big_sides.pop(big, None)
        return held, length

    def _compact_now(self, side: int) -> bool:
        """Whether this append to a side the batch does not read reads it first (and may
        compact it, :meth:`_store`): one append in :data:`COMPACT_ODDS`, or, on a side
        this worker read big, one in so many that the read costs about
        :data:`COMPACT_READ` rows per append.  By chance, so that no pattern of keys and
        batches escapes it: compaction never changes what a side holds, only how many
        entries hold it, so a retried batch may draw otherwise."""
        size = _big_sides.get((*self.current, side), 0)
        return compaction_draws.randrange(max(COMPACT_ODDS, size // COMPACT_READ)) == 0

    def _store(self, side: int, delta: dict[bytes, int], held: dict[bytes, int] | None = None,
               length: int = 0) -> None:
        """A batch's rows into a log: appended without reading it, or, when the log was
        read (``held``, ``length``) and more than half of it is cancelled entries,
        written back consolidated (each entry is read O(1) times amortised).  A side
        only ever appended to (orders churning under a customer that never changes) is
        read before some appends (:meth:`_compact_now`), so it too stays within a
        constant of its live rows instead of growing with its history."""
        log = self.sides[side]
        if held is not None and length > 2 * len(held) + 16:
            rows = Counter(held)
            for r, w in delta.items():
                rows[r] += w
            kept = [(r, w) for r, w in rows.items() if w]
            if kept:
                log.put([(pickle.dumps(kept, protocol=5), PACKED)])
            else:
                log.clear()
        elif delta:
            log.appendList(list(delta.items()))

    def _next(self, view: CompiledView, j: int, merged: tuple, w: int) -> list[tuple]:
        if j + 1 < len(view.order):
            return [record(view.first_step + j, view.bucket(view.left_keys[j + 1](merged)),
                           LEFT, pickle.dumps(merged, protocol=5), w, join=True)]
        return joined(view, merged, w)

    # -- aggregate step: per group key, GroupState and the output row
    def _aggregate(self, view: CompiledView, key: int, delta: dict[bytes, int],
                   partials: list[bytes]) -> list[tuple]:
        """The final phase: rows and partial states (:func:`partial_aggregates`) into
        their groups' states; each touched group's old row out, its new row in."""
        held = self._load(key)
        fresh = held is None
        groups: dict[tuple, list] = {} if fresh else {
            _valued(g): [_valued_group(state), None if row is None else _valued(row)]
            for g, (state, row) in held.items()}
        global_group = not view.block.group_by
        if fresh and global_group:
            groups[()] = [GroupState(view.aggs), None]
        touched = set()
        for rb, w in delta.items():
            wide = _loads(rb)
            g = view.group_key(wide)
            entry = groups.get(g)
            if entry is None:
                entry = groups[g] = [GroupState(view.aggs), None]
            entry[0].add(view.aggs, wide, w)
            touched.add(g)
        for pb in partials:
            g, part = pickle.loads(pb)
            g, part = _valued(g), _valued_group(part)
            entry = groups.get(g)
            if entry is None:
                entry = groups[g] = [GroupState(view.aggs), None]
            entry[0].merge(part, view.aggs)
            touched.add(g)
        if fresh and global_group:
            touched.add(())
        out = []
        for g in touched:
            state, old = groups[g]
            if state.rows == 0 and not global_group:
                del groups[g]
                new = None
            else:
                new = view.finalizer.finish((*g, *state.result(view.aggs)))
                groups[g][1] = new
            if old != new:
                if old is not None:
                    out += self._grouped_row(view, old, -1)
                if new is not None:
                    out += self._grouped_row(view, new, 1)
        self._keep(key, groups)
        return out

    @staticmethod
    def _grouped_row(view: CompiledView, row: tuple, w: int) -> list[tuple]:
        """An aggregate's changed row: on, or (SELECT DISTINCT) to its distinct step."""
        if view.distinct_after:
            return [record(view.last_step, view.bucket(row), LEFT,
                           pickle.dumps(row, protocol=5), w, join=False)]
        return emit(view, row, w)

    # -- distinct step: a row's count crossing zero
    def _distinct(self, view: CompiledView, key: int, delta: dict[bytes, int]) -> list[tuple]:
        """Rows counted as tuples, as the local engine counts them: ``0.0`` and ``-0.0``
        pickle differently but are one row (a key's state written while rows were counted
        by their pickled bytes is read as tuples too)."""
        counts: dict[tuple, int] = {}
        for row, n in (self._load(key) or {}).items():
            row = _loads(row) if isinstance(row, bytes) else _valued(row)
            counts[row] = counts.get(row, 0) + n
        changes: dict[tuple, int] = {}
        for rb, w in delta.items():
            row = _loads(rb)
            changes[row] = changes.get(row, 0) + w
        out = []
        for row, w in changes.items():
            old = counts.get(row, 0)
            new = old + w
            if new:
                counts[row] = new
            else:
                counts.pop(row, None)
            if (old > 0) != (new > 0):
                out += emit(view, row, 1 if new > 0 else -1)
        self._keep(key, counts)
        return out

    # -- set step: a row's multiplicity on either side, and the output's
    def _set(self, node: SetStep, key: int, frame: dict[str, list]) -> list[tuple]:
        counts: dict[tuple, list[int]] = _valued_keys(self._load(key) or {})
        before: dict[tuple, int] = {}
        for side, row, weight in zip(frame["side"], frame["row"], frame["weight"],
                                     strict=True):
            t = _loads(row)  # a tuple: 1 and 1.0 are one row, as on the local engine
            held = counts.get(t)
            if held is None:
                held = counts[t] = [0, 0]
            if t not in before:
                before[t] = node.multiplicity(*held)
            held[int(side)] += int(weight)
        out = []
        for t, old in before.items():
            new = node.multiplicity(*counts[t])
            if counts[t] == [0, 0]:
                del counts[t]
            if new != old:
                out += emit(node, t, new - old)
        self._keep(key, counts)
        return out

    # -- ordering steps: a key's rows with counts, and the outputs they order
    def _ordered(self, node: OrderedStep, j: int, key: int, frame: dict[str, list]
                 ) -> list[tuple]:
        delta: Counter = Counter()
        for row, weight in zip(frame["row"], frame["weight"], strict=True):
            delta[_loads(row)] += int(weight)  # tuples: 1 and 1.0 are one row
        delta = Counter({r: w for r, w in delta.items() if w})
        held = _valued_keys(self._load(key) or {})
        if node.kind == "window":  # partition -> its rows with counts
            held = {part: _valued_keys(rows) for part, rows in held.items()}
        out: list[tuple] = []
        if node.kind == "window":
            view = node.window
            for part, rows in by_partition(delta, view.partition).items():
                members = held.setdefault(part, {})
                before = view.evaluate(_listed(members))
                for r, w in rows:
                    add_into(members, r, w)
                change = Counter(view.evaluate(_listed(members)))
                change.subtract(before)
                if not members:
                    del held[part]
                for r, w in change.items():
                    if w:
                        out += emit(node, r, w)
        else:
            n = node.offset + node.limit
            before = node.first(held, n)
            for r, w in delta.items():
                add_into(held, r, w)
            after = node.first(held, n)
            if j == 0:  # a key's first rows, to the merge
                change = Counter(after)
                change.subtract(before)
                out = [record(node.step + 1, 0, LEFT, pickle.dumps(r, protocol=5), w,
                              join=False) for r, w in change.items() if w]
            else:  # the candidates: rows offset + 1 .. offset + limit of them
                width = len(node.columns)
                change = Counter(r[:width] for r in after[node.offset:])
                change.subtract(r[:width] for r in before[node.offset:])
                for r, w in change.items():
                    if w:
                        out += emit(node, r, w)
        self._keep(key, held)
        return out

    def handleInitialState(self, key, initialState: Row, timerValues) -> None:
        """The bulk build's state of this group (:func:`bulk_build`): a join side's log,
        whole, as one pickled list; or every key's value of the group, as a pickled dict."""
        kind, value = initialState.kind, bytes(initialState.row)
        if kind == VALUES_STATE:
            for k, v in pickle.loads(value).items():
                self.values.updateValue((k,), (v,))
        else:  # the log whole, as one packed entry: one state call, no rows to convert
            self.sides[kind - LEFT_STATE].put([(value, PACKED)])

    def close(self) -> None:
        pass


#: one append in this many to a join side the batch would not read reads it first, so
#: that a side whose other side never changes is compacted too (:meth:`KeyedStep._store`)
COMPACT_ODDS = 16
#: rows a compaction read may cost an append, amortised, on a side known to be big (a
#: side keyed by a value of few distinct values: all the orders of a nation)
COMPACT_READ = 8
compaction_draws = random.Random()
#: live rows of the big join sides this worker read, by (step, key, side): a heuristic
#: (lost with the worker, then learnt again), kept only for sides of over
#: COMPACT_ODDS * COMPACT_READ rows, so at most one entry per that many rows of state
_big_sides: dict[tuple[int, int, int], int] = {}


def _listed(rows: dict[tuple, int]) -> list[tuple]:
    """Rows with counts as a list, each row as often as it counts."""
    return [row for row, n in rows.items() for _ in range(n)]


def _valued(row: tuple) -> tuple:
    """``row`` with every NaN the one ``math.nan`` (as :func:`upkeep.types.canonical_float`
    makes them): unpickling makes a new NaN object each time, and Python's NaNs are
    unequal, so a row holding one, counted by value, never met its earlier copies."""
    for v in row:
        if v != v:
            return tuple(math.nan if x != x else x for x in row)
    return row


def _loads(data: bytes) -> tuple:
    """A pickled row, its NaNs the one NaN (:func:`_valued`)."""
    return _valued(pickle.loads(data))


def _valued_group(state: GroupState) -> GroupState:
    """A loaded group's state with every NaN among its distinct values the one NaN (its
    copies summed), as :func:`_valued` rows: COUNT(DISTINCT) counted each NaN apart."""
    for i, counts in enumerate(state.values or ()):
        if type(counts) is dict and any(v != v for v in counts):
            merged: dict = {}
            for v, n in counts.items():
                v = math.nan if v != v else v
                merged[v] = merged.get(v, 0) + n
            state.values[i] = merged
    return state


def _valued_keys(held: dict) -> dict:
    """A loaded state's map from rows (or group, partition keys) to counts, keyed by
    :func:`_valued` rows."""
    return {_valued(k): v for k, v in held.items()}


def _unpacked(row: bytes, weight: int) -> list[tuple[bytes, int]]:
    """A log entry's rows and weights: itself, or a packed entry's (:data:`PACKED`)."""
    if weight != PACKED:
        return [(bytes(row), int(weight))]
    return [e for r, w in pickle.loads(row) for e in _unpacked(r, w)]


# ---------------------------------------------------------------- bulk build
RECORD, LEFT_STATE, RIGHT_STATE, VALUES_STATE = 0, 1, 2, 3
BUILD_SCHEMA = "kind int, step int, group long, key long, side int, row binary, weight long"


class MapInMemory:
    """The MapState calls the steps make, over a dict: a bulk build runs the very same
    step code on all the loaded rows of a key at once, then hands Spark the state."""

    def __init__(self):
        self.data: dict[int, bytes] = {}

    def getValue(self, key: tuple) -> tuple | None:  # noqa: N802 - Spark's MapState API
        value = self.data.get(key[0])
        return None if value is None else (value,)

    def updateValue(self, key: tuple, value: tuple) -> None:  # noqa: N802
        self.data[key[0]] = value[0]

    def removeKey(self, key: tuple) -> None:  # noqa: N802
        self.data.pop(key[0], None)

    def iterator(self) -> Iterator[tuple[tuple, tuple]]:
        return iter([((k,), (v,)) for k, v in self.data.items()])


class ListInMemory:
    """The ListState calls of a join step's side, over a list."""

    def __init__(self):
        self.entries: list[tuple[bytes, int]] = []

    def get(self) -> Iterator[tuple[bytes, int]]:
        return iter(list(self.entries))

    def appendList(self, entries: list[tuple[bytes, int]]) -> None:  # noqa: N802
        self.entries.extend(entries)

    def put(self, entries: list[tuple[bytes, int]]) -> None:
        self.entries = list(entries)

    def clear(self) -> None:
        self.entries = []


_builders: dict[tuple, KeyedStep] = {}


def build_partition(layout: KeyedLayout, catalog: dict, level: int,
                    frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """``mapInPandas`` of one level of the bulk build over a partition hashed by
    ``(step, group)``: each key's records through its step over empty state; yields the
    records for later levels and the groups' state, one entry per join side and per
    group of map entries (Spark then makes one state call per entry, not per row).
    (One Python call per partition, not per key as ``applyInPandas`` would make.)"""
    step = _builders.get((layout, level))
    if step is None:
        step = _builders[(layout, level)] = KeyedStep(layout, catalog, level)
        step.compile()
    keys: dict[tuple[int, int, int], dict[str, list]] = {}
    for frame in frames:
        for s, g, k, side, row, w in zip(frame["step"], frame["group"], frame["key"],
                                         frame["side"], frame["row"], frame["weight"],
                                         strict=True):
            rows = keys.get((s, g, k))
            if rows is None:
                rows = keys[(s, g, k)] = {"side": [], "row": [], "weight": []}
            rows["side"].append(side)
            rows["row"].append(row)
            rows["weight"].append(w)
    out: list[tuple] = []
    values: dict[tuple[int, int], dict[int, bytes]] = {}
    for (s, g, k), rows in keys.items():
        s, g, k = int(s), int(g), int(k)
        if step.level_of(s) != level:
            out += [(RECORD, s, g, k, *r) for r in zip(rows["side"], rows["row"],
                                                       rows["weight"], strict=True)]
            continue
        sides, mapped = [ListInMemory(), ListInMemory()], MapInMemory()
        step.setup(sides, mapped)
        try:
            produced = step._step(s, k, rows)
        except Error as exc:
            raise step.rejected(exc, s) from None
        out += [(RECORD, *r) for r in partial_aggregates(produced, step.finals)]
        for kind, log in ((LEFT_STATE, sides[LEFT]), (RIGHT_STATE, sides[RIGHT])):
            if log.entries:
                out.append((kind, s, g, k, 0, pickle.dumps(log.entries, protocol=5), 0))
        values.setdefault((s, g), {}).update(mapped.data)
        if len(out) >= 50_000:
            yield _build_frame(out)
            out = []
    out += [(VALUES_STATE, s, g, 0, 0, pickle.dumps(v, protocol=5), 0)
            for (s, g), v in values.items() if v]
    if out:
        yield _build_frame(out)


def _build_frame(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["kind", "step", "group", "key", "side", "row",
                                       "weight"])


def bulk_build(plan, records: DataFrame | None
               ) -> tuple[list[DataFrame | None], list[tuple[str, str, int]]]:
    """The keyed state of the loaded tables (``records``: their rows as level-0 records),
    built level by level by Spark jobs running the steps' own code (so state and checks
    are exactly those of a batch of inserts): each level's state (for ``initialState``),
    and the views' initial deltas."""
    from functools import partial

    layout = plan.keyed
    if records is None:
        return [None] * layout.levels, []
    states: list[DataFrame | None] = []
    # a key's records meet in one task whatever the tasks' count, and Spark hands the
    # built state to the keyed steps' own partitions: tasks of about BUILD_ROWS rows
    partitions = max(int(records.sparkSession.conf.get("spark.sql.shuffle.partitions", "4")),
                     layout.buckets * ROWS_PER_KEY // BUILD_ROWS)
    for level in range(layout.levels):
        # on disk, not in the executors' heap (in local mode the driver's): a level of
        # TPC-H SF 10 is gigabytes, and the next level and the initial state read it once
        built = records.repartition(partitions, "step", "group").mapInPandas(
            partial(build_partition, layout, plan.catalog, level), BUILD_SCHEMA
        ).localCheckpoint(eager=True, storageLevel=StorageLevel.DISK_ONLY)
        states.append(built.where(f"kind != {RECORD}"))
        records = built.where(f"kind = {RECORD}").drop("kind")
    outputs = [pickle.loads(r["row"]) + (int(r["weight"]),)
               for r in records.where(f"step = {OUTPUT_STEP}").collect()]
    return states, outputs


def _output(view: str, row: tuple, weight: int) -> tuple:
    key = key_hash(row) % OUTPUT_KEYS
    return (OUTPUT_STEP, key, key, LEFT, pickle.dumps((view, encode_row(row)), protocol=5),
            weight)


def unwrap_outputs(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """``mapInPandas`` after the last level: view deltas as ``(view, row, weight)``."""
    for frame in frames:
        pairs = [pickle.loads(r) for r in frame["row"]]
        yield pd.DataFrame({"view": [v for v, _ in pairs], "row": [t for _, t in pairs],
                            "weight": frame["weight"].astype("int64")})


def keyed_stream(routed: DataFrame, layout: KeyedLayout, catalog: dict,
                 initial: list[DataFrame | None] | None = None) -> DataFrame:
    """The levels of keyed steps over ``routed`` (:data:`KEYED_SCHEMA` records at level 0),
    ending in view deltas ``(view, row, weight)``; ``initial``: each level's state from
    :func:`bulk_build`."""
    from .codec import OUTPUT_SCHEMA

    stream = routed
    for level in range(layout.levels):
        state = initial[level] if initial else None
        stream = stream.groupBy("step", "group").transformWithState(
            KeyedStep(layout, catalog, level), KEYED_SCHEMA, "Append", "None",
            initialState=None if state is None else state.groupBy("step", "group"))
    return stream.mapInPandas(unwrap_outputs, OUTPUT_SCHEMA)
