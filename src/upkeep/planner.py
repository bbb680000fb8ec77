"""Choose a maintenance strategy for each view and build it (docs/design.md, "Layers").

Per query block, in order of preference:

1. ``dyn-aggregate``: GROUP BY with COUNT/SUM/AVG whose arguments each read one atom, over
   a free-connex acyclic join: Dynamic Yannakakis with aggregates in the weight ring.
2. ``dyn``: a free-connex acyclic join (with projection), enumerated from the
   (T,N)-representation; not free-connex but acyclic: the free-connex approximation of
   ``dynamic-yannakakis-iedyn.txt`` section 5 in push mode, with operators on top.
   Theta predicates (inequalities, BETWEEN, ``<>``, any expression over several atoms) go
   on the GJT's edges (IEDyn, section 4) when the join with them is still acyclic.
3. ``lftj``: a cyclic join by leapfrog triejoin, maintained through sensitivity indices and
   a change oracle (``lftj-incremental-maintenance.txt``); operators on top for projections
   (support counts), aggregates and theta predicates.
4. ``operators``: one relation under DISTINCT, MIN / MAX, set operations or subqueries: its
   filtered rows flow straight to the operators, which keep what they need (no join state).
5. ``general``: hash joins with materialized inputs (the baseline; forced only).
6. ``recompute``: DuckDB per batch, for SQL the binder cannot maintain (outer joins,
   subqueries, ORDER BY/LIMIT in a view, ...).

A forced strategy that does not apply raises :class:`StrategyError` saying why; under the
automatic choice any :class:`UnsupportedError` falls back to recomputation.  Each builder
returns its operators with the notes EXPLAIN shows about them, and the view carries the
choice made (:class:`upkeep.views.PlanChoice`: strategy, reasons, explanation).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from itertools import combinations
from operator import itemgetter
from typing import NamedTuple

import duckdb
from sqlglot import exp

from .aggregates import Finalizer, compile_aggregate, may_overflow
from .core import Core, needed_slots
from .duckdb_scratch import quote, scratch
from .dyn import Representation, key_function
from .errors import SchemaError, StrategyError, UnsupportedError
from .expressions import (
    AGGREGATE_TYPES,
    ExpressionCompiler,
    cast_value,
    column_refs,
    value_type,
)
from .gjt import (
    GJTPair,
    build_gjt_pair,
    free_connex_approximation,
    is_acyclic,
    is_hierarchical,
    why_not,
)
from .lftj import LeapfrogCore, LeapfrogJoin
from .operators import (
    Aggregate,
    BagSetOperation,
    Distinct,
    DynCore,
    Filter,
    HashJoin,
    Map,
    Operator,
    SemiJoin,
    Source,
    Union,
)
from .plan import (
    Block,
    Plan,
    SetOperation,
    SubqueryFilter,
    analyse_joins,
    atoms_of,
    bind_query,
    distinct_names_as_written,
)
from .recursive.program import recursive_with
from .recursive.view import STRATEGIES as RECURSIVE_STRATEGIES
from .recursive.view import RecursiveView, plan_recursive
from .sql import relations_read
from .theta import ThetaPredicate, analyse_predicate
from .types import SqlType, type_from_name
from .views import (
    DynAggregateView,
    DynView,
    EnumeratedView,
    GroupedView,
    OperatorView,
    RecomputeView,
    RingSource,
    ViewRuntime,
    reads_groups,
    run_duckdb,
)

STRATEGIES = ("dyn", "lftj", "general", "recompute", *RECURSIVE_STRATEGIES)


class Catalog:
    """What the planner needs from the connection."""

    def schema_of(self, name: str) -> list[tuple[str, SqlType]]:
        raise NotImplementedError

    def contents_of(self, name: str) -> tuple[list[tuple[str, SqlType]], list[tuple]]:
        raise NotImplementedError


def plan_view(name: str, query: exp.Expression, catalog: Catalog,
              strategy: str | None = None) -> ViewRuntime:
    """The maintained view of ``query``, with the choice of strategy it records."""
    if strategy not in (None, *STRATEGIES):
        raise StrategyError(f"unknown strategy {strategy!r}; choose one of {STRATEGIES}",
                            strategy)
    refuse_volatile(name, query)
    view = _plan(name, query, catalog, strategy)
    if view.reasons:  # a fallback to recomputation says why
        return view
    if strategy is not None:
        view.reasons = (f"strategy {strategy} was requested",)
    elif isinstance(view, RecursiveView):
        view.reasons = (f"WITH RECURSIVE: the default strategy {view.strategy}",)
    else:
        view.reasons = ("the first strategy that applies, in the order dyn-aggregate, dyn, "
                        "lftj, operators",)
    return view


def as_written(name: str, query: exp.Expression, catalog: Catalog,
               strategy: str | None = None) -> RecomputeView | None:
    """The view of a query only DuckDB evaluates as written (recomputed), taken before any
    rewrite reads it, which would read it as another query; None for any other query.
    Such are DuckDB's POSITIONAL and ASOF joins (a cross join and an inequality join to the
    rewrites), a parenthesized join (``r LEFT JOIN (s JOIN t ON ..) ON ..``, which the
    rewrites took for a derived table and wrote as malformed SQL) and a block with HAVING but neither GROUP BY nor an aggregate (DuckDB makes
    it one group: ``SELECT 1 FROM r HAVING false`` has no row, and ``HAVING true`` one)."""
    reason = _only_as_written(query)
    if reason is None:
        return None
    if strategy not in (None, "recompute"):
        raise StrategyError(f"strategy {strategy} cannot maintain view {name}: {reason}",
                            strategy)
    refuse_volatile(name, query)
    return _recompute(name, query, query.sql(dialect="duckdb"), catalog,
                      "recompute was requested" if strategy else f"not incremental: {reason}")


def _only_as_written(query: exp.Expression) -> str | None:
    for node in query.walk():
        if isinstance(node, exp.Join):
            method = (node.args.get("method") or "").upper()
            if method in ("POSITIONAL", "ASOF"):
                return f"{method} JOIN"
        if isinstance(node, exp.Subquery) and not isinstance(node.this, exp.Query):
            return f"a parenthesized join {node.sql(dialect='duckdb')[:60]}"
        if (isinstance(node, exp.Select) and node.args.get("having") is not None
                and node.args.get("group") is None and not any(
                    part.find(*AGGREGATE_TYPES) for part in (
                        *node.expressions, node.args["having"]))):
            return "HAVING without GROUP BY or an aggregate"
    return None


#: functions whose value is not a function of the tables: a view over them would be
#: frozen at its first evaluation, unlike DuckDB's answer to the same query
_VOLATILE = (exp.Rand, exp.Randn, exp.Uuid, exp.CurrentDate, exp.CurrentTime,
             exp.CurrentTimestamp, exp.CurrentDatetime, exp.TableSample)
_VOLATILE_NAMES = frozenset({"now", "random", "gen_random_uuid", "uuid", "setseed",
                             "get_current_timestamp", "transaction_timestamp",
                             "current_localtime", "current_localtimestamp"})


#: table functions a view may read: their rows are a function of their arguments; any
#: other (``read_csv``, ``read_parquet``, ``glob``, ...) reads outside the database
_TABLE_OF_VALUES = (exp.GenerateSeries, exp.Unnest)
_TABLE_OF_VALUES_NAMES = frozenset({"range", "generate_series", "unnest"})


#: of those, the ones DuckDB evaluates once per row (the clock is one value per statement)
_PER_ROW = (exp.Rand, exp.Randn, exp.Uuid)
_PER_ROW_NAMES = frozenset({"random", "gen_random_uuid", "uuid"})


def refuse_per_row_random(statement: exp.Expression) -> None:
    """Refuse DML whose new values or condition draw a random number or UUID: DuckDB draws
    one per row, upkeep's compiled expressions one per statement."""
    for node in statement.walk():
        if isinstance(node, _PER_ROW) or (
                isinstance(node, exp.Anonymous) and str(node.this).lower() in _PER_ROW_NAMES):
            raise UnsupportedError(f"{node.sql(dialect='duckdb')[:60]} in UPDATE or DELETE "
                                   "(it would be drawn once, not once per row): compute the "
                                   "values in the client and pass them as parameters")


def refuse_volatile(name: str, query: exp.Expression) -> None:
    """Refuse a view whose rows would depend on when or how often it is evaluated
    (random numbers, UUIDs, the clock, sampling) or on what lies outside the database
    (table functions reading files): maintained, it could never equal the same query
    evaluated now.  Rows that expire are tables' ``ttl_seconds``."""
    for node in query.walk():
        if (isinstance(node, exp.Table) and isinstance(node.this, exp.Func)
                and not isinstance(node.this, _TABLE_OF_VALUES)
                and not (isinstance(node.this, exp.Anonymous)
                         and str(node.this.this).lower() in _TABLE_OF_VALUES_NAMES)):
            raise UnsupportedError(f"view {name}: {node.this.sql(dialect='duckdb')[:60]} reads "
                                   "from outside the database, which changes no view when it "
                                   "changes (and a database whose view cannot read it would "
                                   "not open): load it into a table and define the view on that")
        volatile = isinstance(node, _VOLATILE) or (
            isinstance(node, exp.Anonymous) and str(node.this).lower() in _VOLATILE_NAMES)
        if volatile:
            raise UnsupportedError(f"view {name}: {node.sql(dialect='duckdb')[:60]} is not a "
                                   f"function of the tables (it changes with time or at "
                                   f"random), so the view cannot be maintained")


def _plan(name: str, query: exp.Expression, catalog: Catalog,
          strategy: str | None) -> ViewRuntime:
    sql = query.sql(dialect="duckdb")
    if strategy == "recompute":
        return _recompute(name, query, sql, catalog, "recompute was requested")
    try:
        if recursive_with(query) is not None:
            return plan_recursive(name, query, sql, catalog, strategy, _outer_dataflow)
        if strategy in RECURSIVE_STRATEGIES:
            raise StrategyError(f"strategy {strategy} is for WITH RECURSIVE views", strategy)
        return _incremental(name, query, sql, catalog, strategy)
    except StrategyError:
        raise
    except UnsupportedError as exc:
        if strategy is None:
            return _recompute(name, query, sql, catalog, f"not incremental: {exc}")
        raise StrategyError(f"strategy {strategy} cannot maintain view {name}: {exc}",
                            strategy) from exc


def _incremental(name: str, query: exp.Expression, sql: str, catalog: Catalog,
                 strategy: str | None) -> ViewRuntime:
    plan = bind_query(query, catalog.schema_of)
    inputs = _inputs(plan)
    if isinstance(plan, Block) and strategy in (None, "dyn") and not (
            plan.distinct or plan.subqueries):
        view = _dyn_view(name, plan, sql, inputs, strategy == "dyn")
        if view is not None:
            return view
    root, columns, kinds, notes = _dataflow(plan, strategy)
    label = ("lftj" if "lftj" in kinds else "dyn+operators" if "dyn" in kinds
             else "operators" if kinds == {"scan"} else "general")
    enumerated = _enumerable(root)
    if enumerated is not None:
        view = EnumeratedView(name, columns, inputs, sql, root, label, *enumerated)
    elif reads_groups(root):
        view = GroupedView(name, columns, inputs, sql, root, label)
    else:
        view = OperatorView(name, columns, inputs, sql, root, label)
    view.explanation = notes + ["dataflow:"] + ["  " + x for x in root.describe()]
    return view


def _inputs(plan: Plan) -> set[str]:
    if isinstance(plan, SetOperation):
        return _inputs(plan.left) | _inputs(plan.right)
    return {a.relation for a in plan.atoms} | {sub.relation for sub in plan.subqueries}


def _enumerable(root: Operator) -> tuple[SemiJoin, Callable | None] | None:
    """A root that is a semijoin / anti-join, or a projection right above one, is read from
    the semijoin's state instead of being stored a second time (which then keeps the
    ordered key sets that reading needs; a semijoin deeper in a dataflow does without)."""
    if isinstance(root, SemiJoin):
        semijoin, project = root, None
    elif isinstance(root, Map) and isinstance(root.child, SemiJoin):
        semijoin, project = root.child, root.fn
    else:
        return None
    semijoin.serve_reads()
    return semijoin, project



def describe(sql: str, inputs: set[str], schema_of: Callable[[str], Sequence]
             ) -> list[tuple[str, str]]:
    """DuckDB's names and types of ``sql``'s columns, over empty relations of the inputs'
    schemas (duckdb.Error if DuckDB cannot bind it)."""
    with scratch() as con:
        _empty_relations(con, inputs, schema_of)
        return [(row[0], row[1]) for row in con.execute(f"DESCRIBE {sql}").fetchall()]


def result_names(sql: str, inputs: set[str], schema_of: Callable[[str], Sequence]
                 ) -> list[str]:
    """The names DuckDB gives ``sql``'s columns when it runs it (over empty relations of
    the inputs' schemas; duckdb.Error if it cannot): its DESCRIBE names an alias that
    differs from its column only in case (``qty AS QTY``) by the column instead."""
    with scratch() as con:
        _empty_relations(con, inputs, schema_of)
        return [d[0] for d in con.execute(sql).description]


def _empty_relations(con, inputs: set[str], schema_of: Callable[[str], Sequence]) -> None:
    """Empty temporary tables of the inputs' schemas, for DuckDB to bind a query over."""
    for t in inputs:
        con.execute(f"CREATE TEMP TABLE {quote(t)} (" + ", ".join(
            f"{quote(n)} {typ.sql()}" for n, typ in schema_of(t)) + ")")


def duckdb_types(select: exp.Expression, schema_of: Callable[[str], Sequence]) -> list[str]:
    """DuckDB's types of ``select``'s columns over the relations it reads (duckdb.Error if
    it cannot bind it): what typing a rewrite's NULLs needs (``grouping_sets.py``)."""
    return [t for _, t in describe(select.sql(dialect="duckdb"), relations_read(select),
                                   schema_of)]


def _recompute(name, query, sql, catalog: Catalog, reason: str) -> RecomputeView:
    inputs = relations_read(query)
    for t in inputs:
        catalog.schema_of(t)  # unknown relations: SchemaError
    try:
        described = describe(sql, inputs, catalog.schema_of)
    except duckdb.Error as exc:  # its first line: the rest quotes the DESCRIBE upkeep ran
        raise UnsupportedError(f"view {name} can be neither maintained nor evaluated: "
                               f"{str(exc).strip().splitlines()[0]}") from exc
    for column, typ in described:
        if typ.endswith("]") or typ.startswith(("STRUCT", "MAP", "UNION")):
            raise UnsupportedError(f"view {name}: column {column} is {typ}; lists, structs "
                                   "and maps are not kept in views")
    # repeated names made distinct as every other strategy names them (``a, a_1``): a view
    # over this one reads its columns by name
    names = distinct_names_as_written([row[0] for row in described])
    columns = [(n, type_from_name(row[1])) for n, row in zip(names, described, strict=True)]
    view = RecomputeView(name, columns, inputs, sql, catalog.contents_of)
    view.explanation = [f"recomputed by DuckDB after every batch that changes an input ({reason})"]
    view.reasons = (reason,)
    return view


# ------------------------------------------------------------------ classification


def thetas_of(core: Core, analysis) -> list[ThetaPredicate]:
    """The block's theta predicates over the core's variables (IEDyn, section 4)."""
    type_of = ExpressionCompiler(core.block.scope).type_of
    return [analyse_predicate(c, core.vars_of, type_of) for c in analysis.residual]


def compiler_over(core: Core) -> Callable:
    """``compile(expression, layout)``: a function of tuples laid out as variables ``layout``
    (with ``condition``, whether a condition is TRUE, as DuckDB filters rows by it)."""
    def compile_(node, layout: list[int], condition: bool = False) -> Callable[[tuple], object]:
        compiler = ExpressionCompiler(core.scope_over(layout))
        return (compiler.compile_condition if condition else compiler.compile)(node).fn
    return compile_


def classify(core: Core, out: tuple[int, ...], pair: GJTPair | None,
             thetas: list[ThetaPredicate] = ()) -> list[str]:
    edges = core.edges()
    preds = [th.vars for th in thetas]
    acyclic = is_acyclic(edges, preds)
    hier, qh, reason = is_hierarchical(edges, set(out))
    reason = _name_vars(reason, core)

    def stuck(out_vars: set[int]) -> str:
        parts = ["{" + ", ".join(core.var_label(v) for v in sorted(e)) + "}"
                 for e in why_not(edges, out_vars, preds)]
        return "the GYO reduction gets stuck on " + ", ".join(parts)

    free_connex = build_gjt_pair(edges, out, preds) is not None
    lines = [
        "query class: " + ", ".join([
            "acyclic" if acyclic else f"cyclic ({stuck(set())})",
            "free-connex" if free_connex else
            "not free-connex" + (f" ({stuck(set(out))} with the output kept)" if acyclic else ""),
            ("theta-joined (sorted indexes per edge: constant delay and O(log n) updates per "
             "delta tuple with one inequality or one interval such as BETWEEN per edge, "
             "O(log n) delay with inequalities on two sides of an edge)") if thetas else
            "q-hierarchical" if qh else f"not q-hierarchical ({reason})",
        ])
    ]
    if pair is not None:
        lines.append("join tree: " + ("simple (updates in O(|u|))" if pair.is_simple()
                                      else "not simple (updates may probe siblings)"))
        if thetas:
            lines.append("theta predicates on GJT edges (IEDyn): " + "; ".join(
                f"[{k}] {th.sql}" for k, th in enumerate(thetas)))
        lines.append("GJT pair (T, N); * marks nodes in N, F the frontier"
                     + (", [k] the predicates on the edge to a node:" if thetas else ":"))
        frontier = {f.id for f in pair.frontier()}

        def walk(n, depth):
            mark = ("F" if n.id in frontier else "*") if n.id in pair.n_set else " "
            names = ", ".join(core.var_label(v) for v in n.vars)
            if n.is_leaf:
                atom = core.block.atoms[n.atom]
                label = f"{atom.relation} {atom.alias} ({names})"
            else:
                label = "{" + names + "}"
            if n.preds:
                label += " " + " ".join(f"[{k}]" for k in n.preds)
            lines.append("  " * (depth + 1) + f"{mark} {label}")
            for c in n.children:
                walk(c, depth + 1)

        walk(pair.root, 0)
    return lines


def _name_vars(text: str, core: Core) -> str:
    import re

    return re.sub(r"v(\d+)", lambda m: core.var_label(int(m.group(1))), text)


# ------------------------------------------------------------------ Dynamic Yannakakis


def _block_columns(block: Block, types: list[SqlType]) -> list[tuple[str, SqlType]]:
    return [(name, t) for (name, _), t in zip(block.select, types, strict=True)]


def _out_vars(core: Core, block: Block, analysis) -> tuple[int, ...]:
    nodes = [e for _, e in block.select] + list(block.group_by)
    nodes += [c for sub in block.subqueries for c in sub.outer_keys]
    if block.having is not None:
        nodes.append(block.having)
    vs: set[int] = set()
    for node in nodes:
        vs |= core.vars_of(node)
    return tuple(sorted(vs))


def _dyn_view(name, block: Block, sql, inputs, forced: bool) -> ViewRuntime | None:
    analysis = analyse_joins(block)
    if block.is_aggregate:
        return _dyn_aggregate_view(name, block, sql, inputs, analysis)
    core = Core(block, analysis, needed_slots(block, analysis))
    out = _out_vars(core, block, analysis)
    thetas = thetas_of(core, analysis)
    pair = build_gjt_pair(core.edges(), out, [th.vars for th in thetas])
    if pair is None:
        return None  # approximation or general: handled by the dataflow
    scope = core.scope_over(list(out))
    compiler = ExpressionCompiler(scope)
    select = compiler.compile_tuple([e for _, e in block.select])
    sources = [Source(a.relation, core.leaf_fns[i], a.alias, functools.partial(core.atom_reads, i))
               for i, a in enumerate(block.atoms)]
    types = [compiler.type_of(e) for _, e in block.select]
    view = DynView(name, _block_columns(block, types), inputs, sql,
                   Representation(pair, thetas, compiler_over(core), int_weights=True),
                   sources, select)
    view.positions = _select_positions(block, core, out)
    view.invert = _inverse_of_select(view.positions, len(out))
    view.eager = view.positions is None  # some select item computes a value
    view.explanation = classify(core, out, pair, thetas) + [
        "mode: push (delta enumeration) on every batch: the select list computes values, "
        "so a row it cannot compute rejects its batch" if view.eager else
        "mode: pull (enumerated on read, never materialized); push (delta enumeration) "
        "when subscribed or read by another view"]
    return view


def _dyn_aggregate_view(name, block: Block, sql, inputs, analysis) -> ViewRuntime | None:
    """COUNT/SUM/AVG over a free-connex join, carried in DualWeight (aggregates.py)."""
    scope = block.scope
    aggs_nodes = block.aggregates
    if any(not isinstance(a, (exp.Count, exp.Sum, exp.Avg)) for a in aggs_nodes):
        return None
    if any(isinstance(a.this, exp.Distinct) for a in aggs_nodes):
        return None
    group_slots: set[int] = set()
    derived = []
    for g in block.group_by:
        atoms = atoms_of(g, block)
        if len(atoms) != 1:
            return None
        if isinstance(g, exp.Column):
            group_slots.add(scope.resolve(g).slot)
        else:
            derived.append((next(iter(atoms)), g))
    arg_atoms = []
    for a in aggs_nodes:
        arg = a.this
        if arg is None or isinstance(arg, exp.Star):
            arg_atoms.append(None)
            continue
        atoms = atoms_of(arg, block)
        if len(atoms) > 1:
            return None
        arg_atoms.append(next(iter(atoms)) if atoms else 0)
    residual_slots = {scope.resolve(c).slot for cond in analysis.residual
                      for c in column_refs(cond)}
    core = Core(block, analysis, group_slots | residual_slots, derived)
    thetas = thetas_of(core, analysis)
    out = []
    for g in block.group_by:
        v = (core.var_of_slot[scope.resolve(g).slot] if isinstance(g, exp.Column)
             else core.derived_var[g.sql()])
        out.append(v)
    if len(set(out)) != len(out):
        return None
    out_t = tuple(out)
    pair = build_gjt_pair(core.edges(), out_t, [th.vars for th in thetas])
    if pair is None:
        return None
    atom_compilers = [ExpressionCompiler(core.atom_scope(i)) for i in range(len(block.atoms))]
    specs = []
    channel_atoms = []
    for node, atom in zip(aggs_nodes, arg_atoms, strict=True):
        spec = compile_aggregate(node, atom_compilers[atom if atom is not None else 0])
        specs.append(spec)
        if spec.channel:
            channel_atoms.append((atom, spec))
    sources: list = []
    for i, a in enumerate(block.atoms):
        source = Source(a.relation, core.leaf_fns[i], a.alias, functools.partial(core.atom_reads, i))
        # this atom's channel arguments, read off its rows alone (COUNT(x), SUM(x), AVG(x))
        own = [spec.node.this for atom, spec in channel_atoms if atom == i]
        # a derived GROUP BY value or an argument that fails is kept until its row joins
        salvage = core.salvaging_leaf(i, own)
        if not channel_atoms:  # COUNT(*) only: integer weights suffice
            source.salvage = salvage
            sources.append(source)
            continue
        lift = core.lifted_leaf(i, own)
        width = len(core.atom_vars[i])
        picks = iter(range(width, width + len(own)))  # lifted, the arguments follow the leaf
        chans = [(None if atom != i else spec.arg.fn if lift is None
                  else itemgetter(next(picks)), spec.exact) for atom, spec in channel_atoms]
        sources.append(RingSource(source, chans, lift, width, salvage))
    group_types = [core.vars[v].type for v in out]
    finalizer = Finalizer([e for _, e in block.select], block.having, block.group_by,
                          group_types, specs, scope)
    # COUNT(*) alone keeps integer weights: its indexes count their totals (dyn.Index)
    rep = Representation(pair, thetas, compiler_over(core), int_weights=not channel_atoms)
    view = DynAggregateView(name, _block_columns(block, finalizer.types), inputs, sql, rep,
                            sources, specs, finalizer, global_group=not block.group_by)
    # a select list that computes over the groups (a cast, arithmetic) or a HAVING can fail,
    # and so can a SUM or AVG whose sum may not fit (its result type, DuckDB's HUGEINT)
    view.eager = block.having is not None or any(
        not isinstance(e, (exp.Column, *AGGREGATE_TYPES)) for _, e in block.select) or any(
        s.kind in ("sum", "avg") and may_overflow(s.arg.type) for s in specs)
    view.explanation = classify(core, out_t, pair, thetas) + [
        "aggregates: " + ", ".join(s.node.sql() for s in specs)
        + " carried in the weight ring (count and exact sums per tuple)",
        "mode: push on every batch: the select list computes over the groups (or a SUM or "
        "AVG may overflow), so a group it cannot compute rejects its batch" if view.eager else
        "mode: pull (groups enumerated on read); push when subscribed or read by another view"]
    if view.group_rows.salvages:
        view.explanation.append(
            "a row whose aggregate argument or computed GROUP BY value fails is kept until "
            "it joins (SQL computes them over the join's rows), then rejects that batch; "
            "while one is kept, every batch runs in push mode")
    return view


def _select_positions(block: Block, core: Core, out: tuple[int, ...]
                      ) -> tuple[int, ...] | None:
    """Each select item's position in the output tuple, when every item is a plain column
    (the select list then only picks values: :class:`DynView`'s ``positions``)."""
    if not all(isinstance(e, exp.Column) for _, e in block.select):
        return None
    return tuple(out.index(core.var_of_slot[block.scope.resolve(e).slot])
                 for _, e in block.select)


def _inverse_of_select(positions: tuple[int, ...] | None, width: int
                       ) -> Callable[[tuple], tuple | None] | None:
    """Map a view row back to its output tuple (of ``width`` variables) when every select
    item is a plain column (``positions``, :func:`_select_positions`) and every output
    variable is selected (then membership is a lookup, not a scan)."""
    if positions is None or set(positions) != set(range(width)):
        return None
    first: dict[int, int] = {}  # output position -> the first select item holding it
    checks: list[tuple[int, int]] = []  # select items that must hold equal values
    for k, p in enumerate(positions):
        if p in first:
            checks.append((first[p], k))
        else:
            first[p] = k
    back = [first[p] for p in range(width)]
    items = len(positions)

    def invert(row: tuple) -> tuple | None:
        if len(row) != items or any(row[a] != row[b] for a, b in checks):
            return None
        return tuple(row[p] for p in back)

    return invert


# ------------------------------------------------------------------ general dataflow


class Dataflow(NamedTuple):
    """A plan's operators: the root, its columns, the kinds of join cores it uses, and
    what EXPLAIN says about the choices made."""

    root: Operator
    columns: list[tuple[str, SqlType]]
    kinds: set[str]
    notes: list[str]


def _outer_dataflow(plan: Plan) -> tuple[Operator, list[tuple[str, SqlType]], list[str]]:
    """The operators of a recursive view's outer query (its strategy is the planner's)."""
    flow = _dataflow(plan, None)
    return flow.root, flow.columns, flow.notes


def set_operation_columns(kind: str, left: list[tuple[str, SqlType]],
                           right: list[tuple[str, SqlType]]) -> list[tuple[str, SqlType]]:
    """A set operation's columns: the left side's names, each with the type both sides'
    values share (INTEGER UNION DOUBLE is DOUBLE, as in DuckDB); SchemaError where they
    share none (INTEGER UNION VARCHAR: DuckDB would cast implicitly, upkeep only where
    written)."""
    out = []
    for i, ((name, a), (_, b)) in enumerate(zip(left, right, strict=True)):
        try:
            out.append((name, value_type([a, b])))
        except SchemaError:
            raise SchemaError(f"{kind.upper()} column {i + 1} ({name}) is {a.sql()} on one "
                              f"side and {b.sql()} on the other: CAST one side") from None
    return out


def set_operation_casts(have: list[tuple[str, SqlType]], want: list[tuple[str, SqlType]]
                        ) -> tuple[tuple[int, SqlType], ...]:
    """The columns of one side of a set operation whose values must be cast to the
    operation's column types (:func:`set_operation_columns`): 1 is 1.0 in a DOUBLE column,
    so that it meets the other side's 1.0."""
    return tuple((i, t) for i, ((_, h), (_, t)) in enumerate(zip(have, want, strict=True))
                 if h != t and h.kind != "NULL")


def cast_row(row: tuple, casts: tuple[tuple[int, SqlType], ...]) -> tuple:
    """``row`` with the columns of ``casts`` cast to their types."""
    out = list(row)
    for i, t in casts:
        out[i] = cast_value(out[i], t)
    return tuple(out)


def _cast_to(op: Operator, have: list[tuple[str, SqlType]],
             want: list[tuple[str, SqlType]]) -> Operator:
    """``op`` with its values cast to the types of ``want`` where they differ."""
    casts = set_operation_casts(have, want)
    if not casts:
        return op
    return Map(op, functools.partial(cast_row, casts=casts),
               label="cast " + ", ".join(f"{want[i][0]} to {t.sql()}" for i, t in casts))


def _dataflow(plan: Plan, strategy: str | None) -> Dataflow:
    """The operators of a plan, its columns, the kinds of join cores it uses, and notes."""
    if isinstance(plan, SetOperation):
        left, lcols_in, lkinds, lnotes = _dataflow(plan.left, strategy)
        right, rcols, rkinds, rnotes = _dataflow(plan.right, strategy)
        notes = lnotes + rnotes
        lcols = set_operation_columns(plan.kind, lcols_in, rcols)
        left, right = _cast_to(left, lcols_in, lcols), _cast_to(right, rcols, lcols)
        op: Operator
        if plan.kind == "union":
            op = Union([left, right])
            if plan.distinct:
                op = Distinct(op)
        elif plan.distinct:
            op = SemiJoin(Distinct(left), Distinct(right), tuple(range(len(lcols))),
                          negated=plan.kind == "except", nulls_match=True, label="on all columns")
            notes.append(f"{plan.kind}: {'anti-join' if plan.kind == 'except' else 'semijoin'} "
                         "of the distinct left rows with the right rows on all columns")
        else:
            op = BagSetOperation(left, right, plan.kind)
            notes.append(f"{plan.kind} all: multiplicities of both sides kept per row")
        return Dataflow(op, lcols, lkinds | rkinds, notes)
    block = plan
    analysis = analyse_joins(block)
    core = Core(block, analysis, needed_slots(block, analysis))
    out = _out_vars(core, block, analysis)
    child, kind, notes = _core_operator(block, analysis, core, out, strategy)
    for sub in block.subqueries:
        child, note = _subquery_operator(child, sub, block, core, out)
        notes.append(note)
    scope = core.scope_over(list(out))
    compiler = ExpressionCompiler(scope)
    if block.is_aggregate:
        keys = [compiler.compile(g) for g in block.group_by]
        specs = [compile_aggregate(a, compiler) for a in block.aggregates]
        finalizer = Finalizer([e for _, e in block.select], block.having, block.group_by,
                              [k.type for k in keys], specs, scope)
        op = Aggregate(child, compiler.compile_tuple(block.group_by),
                       specs, finalizer, global_group=not keys)
        types = finalizer.types
    else:
        op = Map(child, compiler.compile_tuple([e for _, e in block.select]),
                 "project " + ", ".join(n for n, _ in block.select))
        types = [compiler.type_of(e) for _, e in block.select]
    if block.distinct:
        op = Distinct(op)
    return Dataflow(op, _block_columns(block, types), {kind}, notes)


def _subquery_operator(child: Operator, sub: SubqueryFilter, block: Block, core: Core,
                       out: tuple[int, ...]) -> tuple[Operator, str]:
    """``[NOT] EXISTS`` / ``IN``: a semijoin or anti-join of the join's output (laid out as
    ``out``) with the subquery's relation, filtered by its own conditions, on the keys;
    and EXPLAIN's note on it."""
    positions = tuple(out.index(core.var_of_slot[block.scope.resolve(c).slot])
                      for c in sub.outer_keys)
    compiler = ExpressionCompiler(sub.inner_scope)
    filters = [compiler.compile_condition(c).fn for c in sub.local]
    project = key_function(tuple(sub.inner_keys))
    if sub.null_probe:  # the equalities' keys (none NULL), then the probe's NULL
        keys = project

        def project(row: tuple) -> tuple | None:
            k = keys(row)
            return None if None in k else (*k, None)

    def leaf(row: tuple) -> tuple | None:
        return project(row) if all(f(row) is True for f in filters) else None

    kind = "anti-join" if sub.negated else "semijoin"
    note = (f"{kind}: {sub.sql} (keys " + ", ".join(c.sql() for c in sub.outer_keys)
            + "; the result is listed from the left rows by key"
            + (", the complement of the matched keys by counting" if sub.negated else "")
            + ")")
    return SemiJoin(child, Source(sub.relation, leaf, sub.relation), positions,
                    negated=sub.negated, nulls_match=sub.null_probe, label=sub.sql), note


def _core_operator(block: Block, analysis, core: Core, out: tuple[int, ...],
                   strategy: str | None) -> tuple[Operator, str, list[str]]:
    """The operator maintaining a block's join, which kind it is (dyn, lftj, general;
    scan for one relation, which needs no join state), and EXPLAIN's notes on it."""
    sources = [Source(a.relation, core.leaf_fns[i], a.alias, functools.partial(core.atom_reads, i))
               for i, a in enumerate(block.atoms)]
    thetas = thetas_of(core, analysis)
    if strategy is None and len(sources) == 1:
        return (_project(sources[0], core.edges()[0], out, "project"), "scan",
                ["join: none (one relation; its filtered rows flow to the operators above, "
                 "which keep what they need)"])
    if strategy in (None, "dyn"):
        built = _dyn_core(core, out, thetas, sources)
        if built is not None:
            return built[0], "dyn", built[1]
    if strategy == "dyn":
        why = ("the join with its theta predicates is cyclic" if analysis.residual
               else "the join is cyclic")
        raise StrategyError(f"strategy dyn cannot maintain this query: {why}", "dyn")
    if strategy == "lftj" and analysis.null_safe:
        raise StrategyError("strategy lftj cannot maintain this query: a join by IS NOT "
                            "DISTINCT FROM (the triejoin orders join values; NULL has no "
                            "order among them)", "lftj")
    doubles = _double_join_keys(block, analysis)
    if strategy == "lftj" and doubles:
        raise StrategyError("strategy lftj cannot maintain this query: a join on the DOUBLE "
                            f"column {doubles} (the triejoin orders join values; NaN, which "
                            "joins NaN, has no order among them)", "lftj")
    if strategy == "lftj" or (strategy is None and not analysis.null_safe and not doubles):
        op, notes = _lftj_core(block, analysis, core, out, thetas, sources)
        return op, "lftj", notes
    notes = classify(core, out, None) + ["join: general materializing hash joins"]
    return _general_join(block, analysis, core, out, sources), "general", notes


def _double_join_keys(block: Block, analysis) -> str | None:
    """A DOUBLE column joined by equality, if any: a sorted trie cannot hold NaN."""
    doubles = {c.slot: f"{c.qualifier}.{c.name}" for c in block.scope.columns
               if c.type.kind == "DOUBLE"}
    return next((doubles[s] for pair in analysis.equalities for s in pair if s in doubles),
                None)


def _project(op: Operator, layout: Sequence[int], out: tuple[int, ...], label: str) -> Operator:
    """Tuples laid out as the variables ``layout`` cut to ``out`` (a no-op when equal)."""
    if tuple(layout) == out:
        return op
    return Map(op, key_function(tuple(list(layout).index(v) for v in out)), label)


def _relaxations(thetas: list[ThetaPredicate]):
    """Subsets of the theta predicates to leave out of the join tree, fewest first, keeping
    the sortable (range) predicates in the tree as long as possible."""
    order = sorted(range(len(thetas)), key=lambda k: (thetas[k].sortable, k))
    for size in range(len(thetas) + 1):
        yield from combinations(order, size)


def _dyn_core(core: Core, out: tuple[int, ...], thetas: list[ThetaPredicate],
              sources: list[Source]) -> tuple[Operator, list[str]] | None:
    """Dynamic Yannakakis in push mode, on the free-connex approximation if needed; theta
    predicates that would make the join tree cyclic are checked on its output instead.
    With EXPLAIN's notes; None if the join is cyclic."""
    if not is_acyclic(core.edges()):
        return None  # no subset of the predicates helps a cyclic join
    for dropped in _relaxations(thetas):
        kept = [th for k, th in enumerate(thetas) if k not in dropped]
        preds = [th.vars for th in kept]
        need = tuple(sorted(set(out).union(*(thetas[k].vars for k in dropped))))
        pair = build_gjt_pair(core.edges(), need, preds)
        approx = need
        if pair is None:
            approx = free_connex_approximation(core.edges(), need, preds)
            pair = build_gjt_pair(core.edges(), approx, preds) if approx is not None else None
        if pair is None:
            continue
        notes = classify(core, out, pair, kept)
        if approx != out:
            notes.append("free-connex approximation: output extended with "
                         + ", ".join(core.var_label(v) for v in approx if v not in out))
        op: Operator = DynCore(Representation(pair, kept, compiler_over(core), int_weights=True),
                               sources)
        for k in dropped:
            notes.append(f"theta predicate {thetas[k].sql} checked on the join's output "
                         "(in the join tree it would close a cycle)")
            op = Filter(op, compiler_over(core)(thetas[k].node, list(approx), condition=True),
                        thetas[k].sql)
        return _project(op, approx, out, "project approximation"), notes
    return None


def _trie_signature(block: Block, analysis, core: Core, i: int) -> tuple:
    """Atoms with equal signatures produce equal tuples from equal rows: one trie serves them."""
    atom = block.atoms[i]
    nonnull_slots = analysis.nonnull_slots()
    columns = []
    for v in core.atom_vars[i]:
        columns.append(min(s - atom.offset for s in core.vars[v].slots
                           if atom.offset <= s < atom.offset + len(atom.columns)))
    nonnull = tuple(k for k in range(len(atom.columns)) if atom.offset + k in nonnull_slots)
    local = tuple(c.sql() for c in analysis.local[i])
    return (atom.relation, local, tuple(columns), nonnull)


def _lftj_core(block: Block, analysis, core: Core, out: tuple[int, ...],
               thetas: list[ThetaPredicate], sources: list[Source]
               ) -> tuple[Operator, list[str]]:
    """Leapfrog triejoin with sensitivity indices; theta predicates filter its output.
    With EXPLAIN's notes."""
    need = tuple(sorted(set(out).union(*(th.vars for th in thetas))))
    edges = core.edges()
    labels = [f"{a.relation} {a.alias}" for a in block.atoms]
    signatures = [_trie_signature(block, analysis, core, i) for i in range(len(block.atoms))]
    join = LeapfrogJoin(edges, labels, need, signatures)
    order = [core.var_label(v) for v in join.order]
    notes = classify(core, out, None) + [
        "join: leapfrog triejoin maintained by sensitivity indices and a change "
        "oracle (trace edit distance)",
        "variable order: " + ", ".join(order) + " (rule: the join variable in the "
        "most atoms first, then the one sharing an atom with the most chosen ones)"]
    op: Operator = LeapfrogCore(join, sources, order)
    for th in thetas:
        op = Filter(op, compiler_over(core)(th.node, list(need), condition=True), th.sql)
    return _project(op, need, out, "project output (support counts)"), notes


def _general_join(block: Block, analysis, core: Core, out: tuple[int, ...],
                  sources: list[Source]) -> Operator:
    """Left-deep hash joins in a connected order; residual predicates as early as possible."""
    edges = [list(e) for e in core.edges()]
    remaining = list(range(len(edges)))
    first = remaining.pop(0)
    order = [first]
    acc = list(edges[first])
    while remaining:
        nxt = next((i for i in remaining if set(edges[i]) & set(acc)), remaining[0])
        remaining.remove(nxt)
        order.append(nxt)
        acc += [v for v in edges[nxt] if v not in acc]
    pending = [(cond, core.vars_of(cond)) for cond in analysis.residual]
    op: Operator = sources[order[0]]
    layout = list(edges[order[0]])
    op, pending = _apply_residuals(op, layout, pending, core)
    for k, i in enumerate(order[1:], start=1):
        right = edges[i]
        shared = [v for v in right if v in layout]
        new_layout = layout + [v for v in right if v not in layout]
        src = [("t", layout.index(v)) if v in layout else ("s", right.index(v)) for v in new_layout]
        combine = eval("lambda t, s: (" + "".join(f"{a}[{b}], " for a, b in src) + ")")  # noqa: S307
        op = HashJoin(op, sources[i], tuple(layout.index(v) for v in shared),
                      tuple(right.index(v) for v in shared), combine,
                      "on " + ", ".join(core.var_label(v) for v in shared) if shared else "(cross)",
                      len(right))
        layout = new_layout
        op, pending = _apply_residuals(op, layout, pending, core)
        later = set(out).union(*[set(edges[j]) for j in order[k + 1:]], *[vs for _, vs in pending])
        keep = [v for v in layout if v in later]
        if len(keep) < len(layout):
            op = Map(op, key_function(tuple(layout.index(v) for v in keep)), "project")
            layout = keep
    if pending:
        raise SchemaError("internal: residual predicate left unapplied")
    return _project(op, layout, out, "project output")


def _apply_residuals(op: Operator, layout: list[int], pending, core: Core):
    rest = []
    for cond, vs in pending:
        if vs <= set(layout):
            pred = ExpressionCompiler(core.scope_over(layout)).compile_condition(cond).fn
            op = Filter(op, pred, cond.sql())
        else:
            rest.append((cond, vs))
    return op, rest


__all__ = ["Catalog", "STRATEGIES", "plan_view", "run_duckdb"]
