"""Recursive views: a fixpoint engine per CTE the query reads, general operators on top.

A view ``WITH RECURSIVE c AS (...) SELECT ... FROM c ...`` becomes one fixpoint engine per
CTE its outer query reads (absorption provenance by default, DRed on request), whose
changes feed the outer query's dataflow (joins, GROUP BY, MIN/MAX/COUNT/SUM) as if the CTE
were a table.  When the outer query only reads the CTE through MIN/MAX per group, the
aggregate selection of section VII is pushed into the fixpoint (:func:`selection_for`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from sqlglot import exp

from ..errors import ProvenanceError, StrategyError, UnsupportedError
from ..expressions import ExpressionCompiler, column_refs
from ..operators import Batch, Delta, Operator
from ..plan import Block, bind_query, has_subqueries, rename_tables
from ..types import format_row
from ..views import MaterializedView, sum_counters
from .absorption import AbsorptionFixpoint
from .aggsel import SelectionSpec
from .dred import DRedFixpoint
from .dred_partition import DRedPartition
from .partitioned import (
    Layout,
    PartitionBase,
    PartitionedFixpoint,
    PartitionFixpoint,
    partition_plan,
)
from .program import Program, bind_program, recursive_with
from .provenance import PosBool

STRATEGIES = ("absorption", "absorption-eager", "dred")
DEFAULT_STRATEGY = "absorption"


@dataclass
class Explanation:
    """Why a row is in a view: its provenance as a sum of products of input rows (minimal,
    from a BDD, for recursive views; every derivation, from the witness view, for views
    created ``WITH (provenance = 'why')``: :mod:`upkeep.why`).  ``annotations``: the UP[X]
    annotation of each input row of a provenance table (which transactions made it)."""

    view: str
    row: tuple
    products: list[list[tuple[str, tuple]]]
    bdd_nodes: int | None
    truncated: bool
    annotations: dict = field(default_factory=dict)

    def __str__(self) -> str:
        kind = ("minimal derivation(s), BDD of " f"{self.bdd_nodes} nodes"
                if self.bdd_nodes is not None else "derivation(s)")
        lines = [f"{self.view} row {self.row}: {len(self.products)} {kind}"
                 + (" (list truncated)" if self.truncated else "")]
        for p in self.products:
            lines.append("  " + " AND ".join(f"{rel}{row}" for rel, row in p))
        for (rel, row), annotation in self.annotations.items():
            lines.append(f"  {rel}{row} made by: {annotation}")
        return "\n".join(lines)


def internal_name(cte: str) -> str:
    """The relation name the outer query reads a CTE's result under (never a table name)."""
    return f"{cte}#recursive"


class RecursiveView(MaterializedView):
    """A recursive view: fixpoint engines for its CTEs, and the outer query's operators
    (``outer`` is None when the view is the CTE itself)."""

    def __init__(self, name, columns, inputs, sql, engines: dict[str, object],
                 outer: Operator | None, outer_block: Block | None, strategy: str):
        super().__init__(name, columns, inputs, sql)
        self.engines = engines
        self.outer = outer
        self.outer_block = outer_block
        self.strategy = strategy

    def step(self, batch: Batch, want_delta: bool) -> Delta | None:
        inner: Batch = dict(batch)
        for cte, engine in self.engines.items():
            deltas = {r: batch[r] for r in engine.program.base if r in batch}
            if deltas:
                inner[internal_name(cte)] = engine.apply(deltas)
        if self.outer is None:
            (cte,) = self.engines
            delta = inner.get(internal_name(cte), {})
        else:
            delta = self.outer.step(inner)
        self.record(delta)
        return delta

    def state_size(self) -> int:
        inner = sum(e.state_size() for e in self.engines.values())
        return len(self.output) + inner + (self.outer.state_size() if self.outer else 0)

    def counters(self) -> dict[str, int]:
        return sum_counters(e.counters() for e in self.engines.values())

    # ------------------------------------------------------------ provenance
    def why(self, row: tuple, limit: int = 1000) -> Explanation:
        """The provenance of ``row`` (section IV): for a view that is the CTE, the tuple's
        absorption provenance; through a projection or filter, the disjunction over the
        CTE tuples that give the row (Figure 6); through MIN/MAX, over the tuples that
        attain the row's first MIN/MAX value."""
        if self.strategy == "dred":
            raise UnsupportedError(
                f"view {self.name} is maintained by DRed, which keeps no provenance; "
                "create it with strategy 'absorption' to ask why")
        if self.output.get(row, 0) <= 0:
            raise ProvenanceError(f"row {format_row(row)} is not in view {self.name}", row)
        if len(self.engines) != 1:
            raise UnsupportedError(f"why over view {self.name}: its query reads several CTEs")
        (engine,) = self.engines.values()
        engine.complete_provenance()
        pb = engine.pb
        pv = pb.false
        for t in self._contributing(engine, row):
            pv = pv | engine.provenance(t)
        products, truncated = pb.products(pv, limit)
        return Explanation(self.name, row, products, pb.nodes([pv]), truncated)

    def _contributing(self, engine, row: tuple) -> Iterator[tuple]:
        rows = engine.rows()
        block = self.outer_block
        if self.outer is None:
            yield row
            return
        if block is None or len(block.atoms) != 1:
            raise UnsupportedError(
                f"why over view {self.name}: its outer query is not over the CTE alone")
        compiler = ExpressionCompiler(block.scope)
        conds = [compiler.compile_condition(c).fn for c in block.conditions]
        if not block.is_aggregate:
            selects = [compiler.compile(e).fn for _, e in block.select]
            for t in rows:
                if all(c(t) for c in conds) and tuple(f(t) for f in selects) == row:
                    yield t
            return
        keys = {}
        witness = None
        for i, (_, e) in enumerate(block.select):
            if isinstance(e, (exp.Min, exp.Max)) and witness is None:
                witness = (compiler.compile(e.this).fn, row[i])
            elif not any(True for _ in e.find_all(exp.AggFunc)):
                keys[i] = compiler.compile(e).fn
        if witness is None:
            raise UnsupportedError(
                f"why over view {self.name}: only MIN/MAX rows of an aggregate have witnesses")
        fn, value = witness
        for t in rows:
            if (all(c(t) for c in conds) and fn(t) == value
                    and all(f(t) == row[i] for i, f in keys.items())):
                yield t


def plan_recursive(name: str, query: exp.Expression, sql: str, catalog, strategy: str | None,
                   dataflow) -> RecursiveView:
    """Build the view; ``dataflow(plan)`` plans the outer query's operators (returning
    its root, columns and notes for EXPLAIN)."""
    strategy = strategy or DEFAULT_STRATEGY
    if strategy not in STRATEGIES:
        raise StrategyError(f"strategy {strategy} does not maintain recursive views; "
                            f"choose one of {STRATEGIES}", strategy)
    with_ = recursive_with(query)
    outer = query.copy()
    outer.set("with_" if "with_" in outer.args else "with", None)
    ctes = [c.alias_or_name.lower() for c in with_.expressions]
    read = [c for c in ctes if any(t.name.lower() == c for t in outer.find_all(exp.Table))]
    if not read:
        raise UnsupportedError("the query reads none of its recursive CTEs")
    programs = {c: bind_program(with_, c, catalog.schema_of) for c in read}
    inputs = set().union(*(p.base for p in programs.values()))
    for t in inputs:
        catalog.schema_of(t)
    if _is_star_of(outer, read):
        program = programs[read[0]]
        engine = _engine(program, strategy, None, catalog)
        view = RecursiveView(name, program.ctes[program.target], inputs, sql,
                             {program.target: engine}, None, None, strategy)
        view.explanation = _describe(programs, {program.target: engine}, strategy)
        return view
    renamed = rename_tables(outer, {c: internal_name(c) for c in read})

    def schema_of(rel: str):
        for c in read:
            if rel == internal_name(c):
                return programs[c].ctes[c]
        return catalog.schema_of(rel)

    # the outer query's other relations are inputs too (a table joined to the CTE's rows)
    inputs |= {t.name.lower() for t in renamed.find_all(exp.Table)} - {
        internal_name(c) for c in read}
    plan = bind_query(renamed, schema_of)
    if has_subqueries(plan):
        raise UnsupportedError("EXISTS / IN subqueries in the outer query of a recursive view")
    engines = {}
    for c in read:
        engines[c] = _engine(programs[c], strategy, selection_for(plan, programs[c]), catalog)
    root, columns, notes = dataflow(plan)
    view = RecursiveView(name, columns, inputs, sql, engines, root,
                         plan if isinstance(plan, Block) else None, strategy)
    view.explanation = (_describe(programs, engines, strategy) + notes
                        + ["outer query:"] + ["  " + x for x in root.describe()])
    return view


def _is_star_of(outer: exp.Expression, read: list[str]) -> bool:
    if not isinstance(outer, exp.Select) or len(read) != 1:
        return False
    if len(outer.expressions) != 1 or not isinstance(outer.expressions[0], exp.Star):
        return False
    if any(outer.args.get(k) for k in ("joins", "where", "group", "having", "distinct",
                                       "order", "limit", "offset", "qualify")):
        return False
    from_ = outer.args.get("from_") or outer.args.get("from")
    return isinstance(from_.this, exp.Table) and from_.this.name.lower() == read[0]


def _engine(program: Program, strategy: str, selection: SelectionSpec | None, catalog):
    partitions = getattr(catalog, "fixpoint_partitions", 1)
    ordering = getattr(catalog, "bdd_ordering", "sifting")
    dred = strategy == "dred"
    if dred:
        selection = None  # DRed keeps no aggregate selection
    unpartitioned = None
    if partitions > 1:
        plan = partition_plan(program, partitions, selection)
        if not isinstance(plan, str):
            parts = [new_partition(strategy, *plan, i, ordering, selection)
                     for i in range(partitions)]
            # the partitions keep the ordering policy; the manager that gathers their
            # provenance for why-answers only rebuilds short-lived diagrams, and CUDD's
            # dynamic reordering there corrupted its reference counts (an abort in
            # cuddGarbageCollect after a few why-answers)
            return PartitionedFixpoint(*plan, parts, None if dred else PosBool("arrival"),
                                       strategy == "absorption")
        unpartitioned = plan
    engine = DRedFixpoint(program) if dred else AbsorptionFixpoint(
        program, ordering=ordering, lazy=strategy == "absorption", selection=selection)
    engine.unpartitioned = unpartitioned
    return engine


def partition_class(strategy: str) -> type[PartitionBase]:
    """The engine of one partition of a fixpoint maintained by ``strategy``."""
    return DRedPartition if strategy == "dred" else PartitionFixpoint


def new_partition(strategy: str, program: Program, layout: Layout, index: int, ordering: str,
                  selection: SelectionSpec | None) -> PartitionBase:
    """Partition ``index`` of a fixpoint under ``strategy`` (in this process or on a Spark
    shard alike)."""
    if strategy == "dred":
        return DRedPartition(program, layout, index)
    return PartitionFixpoint(program, layout, index, ordering, strategy == "absorption",
                             selection)


def _describe(programs: dict[str, Program], engines: dict[str, object], strategy: str
              ) -> list[str]:
    lines = []
    for cte, program in programs.items():
        engine = engines[cte]
        # partitions keep the chosen order (the manager gathering them keeps arrival order)
        pb = getattr(engine.parts[0], "pb", engine.pb) if isinstance(
            engine, PartitionedFixpoint) else getattr(engine, "pb", None)
        kind = ("DRed (over-delete, re-derive)" if strategy == "dred" else
                "absorption provenance (BDDs), "
                + ("lazy" if strategy == "absorption" else "eager") + " MinShip propagation, "
                + f"BDD variable order: {pb.ordering}")
        lines.append(f"recursive CTE {cte}: fixpoint by {kind}")
        if isinstance(engine, PartitionedFixpoint):
            lines.append(f"  partitioned: {engine.layout.describe()}")
            for rule in engine.program.rules:
                if rule not in program.rules:
                    body = ", ".join(a.relation for a in rule.atoms)
                    lines.append(f"  split into joins of two: {rule.head} <- {body}")
        elif getattr(engine, "unpartitioned", None):
            lines.append(f"  not partitioned: {engine.unpartitioned}")
        for rule in program.rules:
            body = ", ".join(a.relation for a in rule.atoms)
            rec = " (recursive)" if any(a.relation in program.recursive for a in rule.atoms) else ""
            lines.append(f"  rule {rule.head} <- {body}{rec}")
        selection = getattr(engine, "selection", None)
        if selection is not None:
            lines.append("  " + selection.spec.describe([n for n, _ in program.ctes[cte]]))
    return lines


# ------------------------------------------------------------------ aggregate selection

def selection_for(plan, program: Program) -> SelectionSpec | None:
    """Section VII's aggregate selection, when it cannot change the outer query's result:
    the outer query is ``SELECT keys, MIN/MAX(cols) FROM cte GROUP BY keys`` with every CTE
    column a key or an aggregated column, and each recursive rule computes an aggregated
    column by a non-decreasing function of the same column (``c``, ``c + e``, ``c - e``,
    ``LEAST(c, e)``, ``GREATEST(c, e)``), reading no aggregated column anywhere else."""
    target = program.target
    if not isinstance(plan, Block) or len(plan.atoms) != 1 or plan.conditions:
        return None
    if plan.atoms[0].relation != internal_name(target) or plan.having is not None:
        return None
    if not plan.is_aggregate or plan.distinct:
        return None
    slot_of = {}
    for g in plan.group_by:
        if not isinstance(g, exp.Column):
            return None
        slot_of[plan.scope.resolve(g).slot] = "key"
    aggregates: list[tuple[int, str]] = []
    for a in plan.aggregates:
        if not isinstance(a, (exp.Min, exp.Max)):
            return None
        arg = a.this.expressions[0] if isinstance(a.this, exp.Distinct) else a.this
        if not isinstance(arg, exp.Column):
            return None
        slot = plan.scope.resolve(arg).slot
        if slot_of.get(slot) == "key":
            return None
        kind = "min" if isinstance(a, exp.Min) else "max"
        if (slot, kind) not in aggregates:
            aggregates.append((slot, kind))
    aggregated = {s for s, _ in aggregates}
    if len(aggregated) != len(aggregates):
        return None  # MIN and MAX of the same column
    if set(slot_of) | aggregated != set(range(len(program.ctes[target]))):
        return None
    for rule in program.rules:
        occurrences = [a for a in rule.atoms if a.relation == target]
        if rule.head != target:
            if occurrences:
                return None
            continue
        if not occurrences:
            continue
        if len(occurrences) > 1 or any(a.relation in program.recursive and a.relation != target
                                       for a in rule.atoms):
            return None
        atom = occurrences[0]
        agg_slots = {atom.offset + c for c in aggregated}
        if any(a in agg_slots or b in agg_slots for a, b in rule.equalities):
            return None
        if any(slots & agg_slots for slots, _ in rule.conditions):
            return None
        for pos, node in enumerate(rule.head_nodes):
            reads = {rule.block.scope.resolve(c).slot for c in column_refs(node)} & agg_slots
            if pos in aggregated:
                if not _non_decreasing(node, atom.offset + pos, rule):
                    return None
            elif reads:
                return None
    return SelectionSpec(tuple(sorted(slot_of)), tuple(aggregates))


def _non_decreasing(node: exp.Expression, slot: int, rule) -> bool:
    """``node`` is the column at ``slot``, or a sum / difference / LEAST / GREATEST of it
    with expressions that do not read it."""
    scope = rule.block.scope

    def reads(e: exp.Expression) -> bool:
        return any(scope.resolve(c).slot == slot for c in column_refs(e))

    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Column):
        return scope.resolve(node).slot == slot
    if isinstance(node, exp.Add):
        left, right = node.this, node.expression
        if reads(left) and not reads(right):
            return _non_decreasing(left, slot, rule)
        if reads(right) and not reads(left):
            return _non_decreasing(right, slot, rule)
        return False
    if isinstance(node, exp.Sub):
        return reads(node.this) and not reads(node.expression) and _non_decreasing(
            node.this, slot, rule)
    if isinstance(node, (exp.Least, exp.Greatest)):
        args = [node.this, *node.expressions]
        readers = [a for a in args if reads(a)]
        return len(readers) == 1 and _non_decreasing(readers[0], slot, rule)
    if isinstance(node, exp.Cast):
        return node.to.is_type(*exp.DataType.NUMERIC_TYPES) and _non_decreasing(
            node.this, slot, rule)
    return False
