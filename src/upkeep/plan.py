"""From a parsed SELECT to the logical plan shared by every maintenance strategy.

A view is a tree of :class:`SetOperation` nodes over :class:`Block` leaves.  A block is one
SELECT: a conjunctive core (atoms joined by conditions, the ``Q = pi_y(r1 |x| ... |x| rn | theta)``
of ``dynamic-yannakakis-iedyn.txt`` section 2) with grouping, aggregates, HAVING and
DISTINCT on top.  :class:`JoinAnalysis` splits the conditions into per-atom filters,
equi-joins (which become shared variables) and residual predicates.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlglot import exp

from .duckdb_scratch import scratch
from .errors import SchemaError, UnsupportedError
from .expressions import (
    AGGREGATE_TYPES,
    Column,
    ExpressionCompiler,
    Scope,
    as_condition,
    column_refs,
    conjuncts,
    unparen,
)
from .scalar_subqueries import block_relations, spell_star
from .subquery_predicates import one_row
from .theta import split_between
from .types import SqlType


@dataclass
class Atom:
    """One FROM item: a base table or another view under an alias."""

    alias: str
    relation: str
    columns: list[tuple[str, SqlType]]
    offset: int  # position of the atom's first column in the block's wide row


@dataclass
class SubqueryFilter:
    """A conjunct ``[NOT] EXISTS (SELECT .. FROM r WHERE r.c = outer.x AND ..)`` or
    ``outer.x IN (SELECT r.c FROM r WHERE ..)``: a semijoin (negated: an anti-join) of the
    block's join with ``r`` on equality keys.  ``local`` is the filter on ``r`` alone."""

    negated: bool
    relation: str
    inner_keys: list[int]  # positions of the key columns in a row of ``relation``
    outer_keys: list[exp.Column]  # the block's columns they must equal
    local: list[exp.Expression]
    inner_scope: Scope = field(repr=False)
    sql: str = ""
    #: correlated by ``outer.x IS NULL`` (``NOT IN``'s rule for a NULL probe), and maybe
    #: by equalities: the last outer key is ``x``, every row of ``r`` has it NULL, and
    #: NULL matches NULL there (a row of ``r`` with a NULL equality key matches nothing)
    null_probe: bool = False


@dataclass
class Block:
    """One SELECT block over atoms."""

    atoms: list[Atom]
    conditions: list[exp.Expression]
    select: list[tuple[str, exp.Expression]]
    group_by: list[exp.Expression]
    having: exp.Expression | None
    distinct: bool
    aggregates: list[exp.Expression]
    scope: Scope = field(repr=False)
    subqueries: list[SubqueryFilter] = field(default_factory=list)

    @property
    def is_aggregate(self) -> bool:
        return bool(self.group_by or self.aggregates)


@dataclass
class SetOperation:
    """UNION, EXCEPT or INTERSECT (``kind``) of two sub-plans, DISTINCT or ALL."""

    distinct: bool
    left: Plan
    right: Plan
    kind: str = "union"


Plan = Block | SetOperation


def plan_columns(plan: Plan) -> list[str]:
    while isinstance(plan, SetOperation):
        plan = plan.left
    return [name for name, _ in plan.select]


def has_subqueries(plan: Plan) -> bool:
    if isinstance(plan, SetOperation):
        return has_subqueries(plan.left) or has_subqueries(plan.right)
    return bool(plan.subqueries)


def bind_query(node: exp.Expression, schema_of: Callable[[str], list[tuple[str, SqlType]]]) -> Plan:
    """Bind a parsed query against the catalog; raise UnsupportedError for what no strategy keeps."""
    if isinstance(node, (exp.Union, exp.Except, exp.Intersect)):
        kind = type(node).__name__.lower()
        if node.args.get("with") or node.args.get("with_"):
            raise UnsupportedError(f"WITH in a {kind.upper()} view")
        for key in ("order", "limit", "offset"):  # the top-k view keeps them, or DuckDB
            if node.args.get(key):
                raise UnsupportedError(f"{key.upper()} on a {kind.upper()} in a view "
                                       "definition")
        left = bind_query(node.this, schema_of)
        right = bind_query(node.expression, schema_of)
        if len(plan_columns(left)) != len(plan_columns(right)):
            raise SchemaError(f"{kind.upper()} sides have different numbers of columns")
        return SetOperation(bool(node.args.get("distinct")), left, right, kind)
    if isinstance(node, exp.Subquery):
        return bind_query(node.this, schema_of)
    if not isinstance(node, exp.Select):
        raise UnsupportedError(f"{type(node).__name__} is not a query")
    return _bind_select(node, schema_of)


def _qualified_in(cond: exp.Expression, atoms: list[Atom]) -> exp.Expression:
    """``cond`` with each unqualified column that one of ``atoms`` holds (and only one)
    qualified by it: an ON condition's names are read among the items it joins."""
    def qualify(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Column) and not n.table and not n.is_star and (
                n.find_ancestor(exp.Select) is None):  # (a subquery's names are its own)
            owners = [a.alias for a in atoms if any(c == n.name.lower() for c, _ in a.columns)]
            if len(owners) == 1:
                return exp.column(n.name.lower(), owners[0])
        return n

    return cond.transform(qualify)


def _rewrite_filter(node: exp.Expression) -> exp.Expression:
    """``AGG(x) FILTER (WHERE c)`` is ``AGG(CASE WHEN c THEN x END)`` (``COUNT(*)`` counts 1s)."""
    if not isinstance(node, exp.Filter) or not isinstance(node.this, AGGREGATE_TYPES):
        return node
    agg = node.this.copy()
    cond = node.expression.this
    arg = agg.this
    distinct = isinstance(arg, exp.Distinct)
    inner = arg.expressions[0] if distinct else arg
    value = exp.Literal.number(1) if inner is None or isinstance(inner, exp.Star) else inner
    case = exp.Case(ifs=[exp.If(this=cond, true=value)])
    agg.set("this", exp.Distinct(expressions=[case]) if distinct else case)
    return agg


def _rewrite_within_group(node: exp.Expression) -> exp.Expression:
    """``PERCENTILE_CONT(q) WITHIN GROUP (ORDER BY x)`` is ``QUANTILE_CONT(x, q)`` (and the
    discrete one); ordered descending it is left as it is, and recomputed."""
    if not (isinstance(node, exp.WithinGroup)
            and isinstance(node.this, (exp.PercentileCont, exp.PercentileDisc))):
        return node
    keys = node.expression.expressions if isinstance(node.expression, exp.Order) else []
    if len(keys) != 1 or keys[0].args.get("desc"):
        return node
    return type(node.this)(this=keys[0].this.copy(), expression=node.this.this.copy())


def count_if_as_sum(node: exp.Expression) -> exp.Expression:
    """``COUNT_IF(c)`` is DuckDB's ``SUM(CASE WHEN c THEN 1 WHEN NOT c THEN 0 END)`` (NULL
    where ``c`` is never true or false): a transform, applied before the rewrites that
    read aggregates (windows, scalar subqueries) and when a block is bound."""
    if isinstance(node, exp.CountIf):
        cond = node.this
        return exp.Sum(this=exp.Case(ifs=[
            exp.If(this=cond.copy(), true=exp.Literal.number(1)),
            exp.If(this=exp.Not(this=exp.paren(cond.copy())), true=exp.Literal.number(0))]))
    return node


def _rewrite_bool_aggregate(node: exp.Expression) -> exp.Expression:
    """``BOOL_OR(c)`` is ``MAX(c)`` and ``BOOL_AND(c)`` is ``MIN(c)`` over booleans (false
    sorts first, NULLs are skipped, no rows give NULL), as DuckDB computes them; and
    :func:`count_if_as_sum`."""
    if isinstance(node, exp.CountIf):
        return count_if_as_sum(node)
    if isinstance(node, (exp.LogicalOr, exp.LogicalAnd)):
        kept = (exp.Max if isinstance(node, exp.LogicalOr) else exp.Min)(this=node.this.copy())
        kept.meta["boolean"] = "bool_or" if isinstance(node, exp.LogicalOr) else "bool_and"
        return kept  # its argument checked to be a BOOLEAN (aggregates.compile_aggregate)
    return node


def _shared_columns(atoms: list[Atom], columns: list[Column],
                    shared: list[tuple[int, list[str] | None]]
                    ) -> tuple[dict[str, Column], set[tuple[str, str]], list[exp.Expression]]:
    """``JOIN ... USING (c)`` and ``NATURAL JOIN`` as DuckDB binds them: an equality per
    shared column, the column visible once (unqualified ``c`` is the left one, ``*`` lists it
    once), NATURAL sharing every column name both sides have.  Returns the merged names,
    the right-side copies ``*`` leaves out, and the equalities."""
    merged: dict[str, Column] = {}
    hidden: set[tuple[str, str]] = set()
    equalities: list[exp.Expression] = []
    by_atom: dict[str, dict[str, Column]] = {}
    for c in columns:
        by_atom.setdefault(c.qualifier, {})[c.name] = c
    for index, names in shared:
        right = atoms[index]
        left: dict[str, list[Column]] = {}
        for a in atoms[:index]:
            for name, c in by_atom[a.alias].items():
                if (a.alias, name) not in hidden:
                    left.setdefault(name, []).append(c)
        right_names = [n for n, _ in right.columns]
        if names is None:
            names = [n for n in right_names if n in left]
            if not names:  # as DuckDB's binder: a cross product must be asked for
                raise SchemaError(f"NATURAL JOIN with {right.alias}: no columns to join on "
                                  "(use CROSS JOIN for a cross product)")
        for name in names:
            if name not in right_names or name not in left:
                raise SchemaError(f"column {name} of JOIN ... USING is not on both sides "
                                  f"of the join with {right.alias}")
            if name not in merged and len(left[name]) > 1:
                raise SchemaError(f"column {name} in the join with {right.alias} is ambiguous")
            on_left = merged.get(name, left[name][0])
            equalities.append(exp.EQ(this=exp.column(name, on_left.qualifier),
                                     expression=exp.column(name, right.alias)))
            merged[name] = on_left
            hidden.add((right.alias, name))
    return merged, hidden, equalities


def output_name(item: exp.Expression) -> str:
    """The name of a select-list item's column: its alias or column name (lower case, as
    SQL folds them), else the expression's text."""
    if isinstance(item, exp.Alias):
        return item.alias.lower()
    if isinstance(item, exp.Column):
        return item.name.lower()
    return item.sql(dialect="duckdb")


def _bind_select(node: exp.Select, schema_of) -> Block:
    node = node.transform(_rewrite_bool_aggregate).transform(_rewrite_within_group).transform(
        _rewrite_filter)
    if distinct_on(node):
        raise UnsupportedError("DISTINCT ON")
    for key in ("with", "with_", "order", "limit", "offset", "windows", "qualify"):
        if node.args.get(key):
            raise UnsupportedError(f"{key.upper()} in a view definition")
    group = node.args.get("group")
    if group is not None and (
            any(group.args.get(k) for k in ("grouping_sets", "rollup", "cube"))
            or any(isinstance(e, (exp.GroupingSets, exp.Rollup, exp.Cube))
                   for e in group.expressions)):
        raise UnsupportedError("GROUPING SETS / ROLLUP / CUBE")
    from_ = node.args.get("from_") or node.args.get("from")
    if from_ is None:
        raise UnsupportedError("SELECT without FROM")
    items = [from_.this]
    conditions: list[exp.Expression] = []
    shared: list[tuple[int, list[str] | None]] = []  # USING columns (None: NATURAL), per item
    # each ON's conditions and the items it sees: those before it, from the last comma
    # (which binds loosest: the ON of ``a, b JOIN c ON ..`` sees b and c only)
    on_scopes: list[tuple[int, int, int, int]] = []  # conditions lo, hi; items first, last
    seen_from = 0
    for join in node.args.get("joins") or []:
        kind = (join.args.get("kind") or "").upper()
        side = (join.args.get("side") or "").upper()
        if side or kind not in ("", "INNER", "CROSS"):
            raise UnsupportedError(f"{(side + ' ' + kind).strip()} JOIN")
        if not any(join.args.get(k) for k in ("kind", "on", "using", "method")):
            seen_from = len(items)  # a comma
        items.append(join.this)
        if (join.args.get("method") or "").upper() == "NATURAL":
            shared.append((len(items) - 1, None))
        elif join.args.get("using"):
            shared.append((len(items) - 1, [u.name.lower() for u in join.args["using"]]))
        on = conjuncts(join.args.get("on"))
        on_scopes.append((len(conditions), len(conditions) + len(on), seen_from,
                          len(items) - 1))
        conditions.extend(on)
    on_conditions = len(conditions)
    conditions.extend(conjuncts(node.args.get("where").this if node.args.get("where") else None))

    atoms: list[Atom] = []
    offset = 0
    for item in items:
        if not isinstance(item, exp.Table) or item.args.get("db") or not isinstance(
                item.this, exp.Identifier):  # a table function: recomputed
            raise UnsupportedError(f"FROM item {item.sql()} (only tables and views)")
        name = item.name.lower()
        alias = (item.alias or name).lower()
        if any(a.alias == alias for a in atoms):
            raise SchemaError(f"table alias {alias} is used twice")
        columns = schema_of(name)
        atoms.append(Atom(alias, name, columns, offset))
        offset += len(columns)
    for lo, hi, first, last in on_scopes:
        if first or last < len(atoms) - 1:  # some item out of its sight
            conditions[lo:hi] = [_qualified_in(c, atoms[first:last + 1]) for c in
                                 conditions[lo:hi]]
    scope_columns = [Column(a.alias, cname, ctype, a.offset + i)
                     for a in atoms for i, (cname, ctype) in enumerate(a.columns)]
    merged, hidden, equalities = _shared_columns(atoms, scope_columns, shared)
    conditions[on_conditions:] = _unaliased_where(node, Scope(scope_columns),
                                                  conditions[on_conditions:])
    if merged:  # an unqualified shared column is the left side's
        def qualify(n: exp.Expression) -> exp.Expression:
            if isinstance(n, exp.Column) and not n.table and n.name.lower() in merged:
                return exp.column(n.name.lower(), merged[n.name.lower()].qualifier)
            return n

        conditions = [c.transform(qualify) for c in conditions]
        node = node.transform(qualify)
    conditions.extend(equalities)
    scope = Scope(scope_columns)
    subqueries: list[SubqueryFilter] = []
    plain: list[exp.Expression] = []
    for cond in conditions:
        sub = _subquery_filter(cond, scope, schema_of)
        if sub is not None:
            subqueries.append(sub)
            continue
        _reject_subqueries(cond)
        scope_check(cond, scope)
        plain.append(as_condition(cond, ExpressionCompiler(scope).type_of(cond)))
    conditions = plain

    select: list[tuple[str, exp.Expression]] = []
    for proj in node.expressions:
        if isinstance(proj, exp.Star):  # USING / NATURAL columns once, from the left
            select.extend(_star_items(proj, [c for c in scope.columns
                                             if (c.qualifier, c.name) not in hidden]))
            continue
        if isinstance(proj, exp.Column) and isinstance(proj.this, exp.Star):
            q = proj.table.lower()
            cols = [c for c in scope.columns if c.qualifier == q]
            if not cols:
                raise SchemaError(f"unknown table {q} in {proj.sql()}")
            select.extend(_star_items(proj.this, cols))
            continue
        expr = proj.this if isinstance(proj, exp.Alias) else proj
        _reject_subqueries(expr)
        select.append((output_name(proj), expr))
    select = _dedupe_names(select)

    group = node.args.get("group")
    group_by = list(group.expressions) if group else []
    if group is not None and group.args.get("all"):  # DuckDB's: every item no aggregate
        group_by = [e for _, e in select if not any(True for _ in e.find_all(*AGGREGATE_TYPES))]
    # GROUP BY may name a select alias or position, as in DuckDB.
    aliases = {name: e for name, e in select}
    resolved_group = []
    for g in group_by:
        number = g.this if isinstance(g, exp.Neg) else g
        if isinstance(number, exp.Literal) and not number.is_string:
            # a position in the select list, from 1, as in DuckDB
            if g is not number or not g.this.isdigit() or not 1 <= int(g.this) <= len(select):
                raise SchemaError(f"GROUP BY {g.sql()}: no item at that position (the "
                                  f"select list has {len(select)})")
            resolved_group.append(select[int(g.this) - 1][1])
        elif isinstance(g, exp.Column) and not g.table and g.name.lower() in aliases and not _is_column(scope, g):
            resolved_group.append(aliases[g.name.lower()])
        else:
            resolved_group.append(_as_spelled_in(g, [e for _, e in select]))
    having = node.args.get("having").this if node.args.get("having") else None
    if having is not None:  # HAVING may name a select alias that is no column, as in DuckDB
        having = _unaliased(having, aliases, scope)
    aggregates: list[exp.Expression] = []
    for _, e in select:
        _collect_aggregates(e, aggregates)
    if having is not None:
        _reject_subqueries(having)
        _collect_aggregates(having, aggregates)
    for g in resolved_group:
        if any(True for _ in g.find_all(*AGGREGATE_TYPES)):
            raise UnsupportedError("aggregate inside GROUP BY")
    distinct = bool(node.args.get("distinct"))
    block = Block(atoms, conditions, select, resolved_group, having, distinct, aggregates, scope,
                  subqueries)
    if block.is_aggregate:
        _check_grouping(block)
    return block


def _as_spelled_in(g: exp.Expression, select: list[exp.Expression]) -> exp.Expression:
    """GROUP BY expression ``g`` as the select list spells it where it differs only in the
    case of its column names (``SELECT qty + 1 .. GROUP BY QTY + 1``): grouping keys are
    matched by their SQL text, and DuckDB matches names regardless of case."""
    if isinstance(g, exp.Column):
        return g
    key = _case_folded(g)
    for e in select:
        for node in e.find_all(type(g)):
            if node.sql() != g.sql() and _case_folded(node) == key:
                return node
    return g


def _case_folded(node: exp.Expression) -> str:
    """``node``'s SQL with its column names in lower case."""
    return node.transform(lambda n: exp.column(n.name.lower(), n.table.lower() or None)
                          if isinstance(n, exp.Column) and not isinstance(n.this, exp.Star)
                          else n).sql()


def _unaliased_where(node: exp.Select, scope: Scope, where: list[exp.Expression]
                     ) -> list[exp.Expression]:
    """WHERE's conjuncts with each name of a select alias that is no column replaced by the
    aliased expression, as DuckDB reads ``SELECT length(s) AS l FROM t WHERE l > 1`` (not
    an alias of an aggregate or window, which WHERE cannot hold: left for the error)."""
    aliases = {p.alias.lower(): p.this for p in node.expressions
               if isinstance(p, exp.Alias) and not any(
                   True for _ in p.this.find_all(*AGGREGATE_TYPES, exp.Window))}
    return [_unaliased(c, aliases, scope) for c in where] if aliases else where


def _unaliased(node: exp.Expression, aliases: dict[str, exp.Expression], scope: Scope
               ) -> exp.Expression:
    """``node`` with each unqualified name of a select alias that is no column of
    ``scope`` replaced by the aliased expression (WHERE and HAVING, as DuckDB reads them)."""

    def unaliased(n: exp.Expression) -> exp.Expression:
        if (isinstance(n, exp.Column) and not n.table and n.name.lower() in aliases
                and not _is_column(scope, n)):
            return aliases[n.name.lower()].copy()
        return n

    return node.transform(unaliased)


def _is_column(scope: Scope, col: exp.Column) -> bool:
    try:
        scope.resolve(col)
        return True
    except SchemaError:
        return False


def _dedupe_names(select: list[tuple[str, exp.Expression]]) -> list[tuple[str, exp.Expression]]:
    names = distinct_names([name for name, _ in select])
    return [(name, e) for name, (_, e) in zip(names, select, strict=True)]


def distinct_names(names: list[str]) -> list[str]:
    """Column names made distinct as DuckDB's CREATE TABLE AS makes them: a repeated name
    gets ``_1``, ``_2``, ... (``id, id`` -> ``id, id_1``), skipping a suffixed name already
    taken by an earlier column (``a_1, a, a`` -> ``a_1, a, a_2``)."""
    used: set[str] = set()
    suffixes: dict[str, int] = {}
    out = []
    for name in names:
        if name in used:
            k = suffixes.get(name, 0) + 1
            while f"{name}_{k}" in used:
                k += 1
            suffixes[name] = k
            name = f"{name}_{k}"
        used.add(name)
        out.append(name)
    return out


def distinct_names_as_written(names: list[str]) -> list[str]:
    """:func:`distinct_names` of names as written: repeats found regardless of case, as
    DuckDB finds them (``id, ID`` -> ``id, ID_1``), each name keeping its case."""
    lowered = distinct_names([n.lower() for n in names])
    return [n + d[len(n):] for n, d in zip(names, lowered, strict=True)]


def _subquery_filter(cond: exp.Expression, outer: Scope, schema_of) -> SubqueryFilter | None:
    """Bind ``[NOT] EXISTS (..)`` or ``x IN (..)``; None if ``cond`` is no such conjunct."""
    cond = unparen(cond)  # AND (EXISTS (..))
    negated = isinstance(cond, exp.Not)
    node = unparen(cond.this) if negated else cond
    if isinstance(node, exp.Exists):
        query, probe = node.this, None
    elif isinstance(node, exp.In) and node.args.get("query") is not None:
        if negated:
            raise UnsupportedError(f"NOT IN (subquery) (it is NULL-sensitive; write NOT EXISTS)"
                                   f": {cond.sql()[:60]}")
        query, probe = node.args["query"], node.this
    else:
        return None
    query = query.this if isinstance(query, exp.Subquery) else query
    from_ = (query.args.get("from_") or query.args.get("from")
             if isinstance(query, exp.Select) else None)
    table = from_.this if from_ is not None else None
    if not isinstance(table, exp.Table) or table.args.get("db") or query.args.get("joins") or any(
            query.args.get(k) for k in ("with", "with_", "group", "having", "order", "limit",
                                        "offset", "windows", "qualify")) or one_row(query):
        raise UnsupportedError(f"subquery {query.sql()[:60]} (only SELECT .. FROM one relation "
                               "WHERE ..)")
    relation = table.name.lower()
    alias = (table.alias or relation).lower()
    inner = Scope([Column(alias, n, t, i) for i, (n, t) in enumerate(schema_of(relation))])

    def side(col: exp.Column) -> str:
        """Inner names shadow outer ones, as in SQL."""
        try:
            inner.resolve(col)
            return "inner"
        except SchemaError:
            outer.resolve(col)
            return "outer"

    inner_keys: list[int] = []
    outer_keys: list[exp.Column] = []
    local: list[exp.Expression] = []
    if probe is not None:
        picked = query.expressions[0] if len(query.expressions) == 1 else None
        picked = picked.this if isinstance(picked, exp.Alias) else picked
        if not isinstance(picked, exp.Column) or not isinstance(probe, exp.Column) or (
                side(picked) != "inner"):
            raise UnsupportedError(f"{cond.sql()[:60]} (only column IN (SELECT column ..))")
        probe_type = outer.resolve(probe).type  # outside the subquery: no inner shadowing
        picked_column = inner.resolve(picked)
        _refuse_unmatched_key(cond, picked_column.type, probe_type)
        inner_keys.append(picked_column.slot)
        outer_keys.append(probe)
    null_probe: exp.Column | None = None  # ``outer.x IS NULL``: see SubqueryFilter
    where = query.args.get("where")
    for part in conjuncts(where.this if where else None):
        _reject_subqueries(part)
        sides = {side(c) for c in column_refs(part)}
        if sides <= {"inner"}:  # a bare number is a condition here too (``WHERE y``)
            local.append(as_condition(part, ExpressionCompiler(inner).type_of(part)))
            continue
        if isinstance(part, exp.EQ) and all(
                isinstance(x, exp.Column) for x in (part.this, part.expression)) and sides == {
                "inner", "outer"}:
            a, b = part.this, part.expression
            if side(a) == "outer":
                a, b = b, a
            inner_column = inner.resolve(a)
            _refuse_unmatched_key(part, inner_column.type, outer.resolve(b).type)
            inner_keys.append(inner_column.slot)
            outer_keys.append(b)
            continue
        if isinstance(part, exp.Is) and isinstance(part.this, exp.Column) and isinstance(
                part.expression, exp.Null) and sides == {"outer"} and null_probe is None:
            null_probe = part.this
            continue
        raise UnsupportedError(f"correlated condition {part.sql()[:60]} (only equalities "
                               "between a column of the subquery and an outer column)")
    if null_probe is not None:
        outer_keys.append(null_probe)  # last, after the equalities' keys
    return SubqueryFilter(negated, relation, inner_keys, outer_keys, local, inner,
                          cond.sql(dialect="duckdb"), null_probe is not None)


def _refuse_unmatched_key(cond: exp.Expression, a: SqlType, b: SqlType) -> None:
    """A subquery's key equality whose values do not meet by Python's equality as DuckDB's
    do (:func:`matches_as_duckdb`)."""
    if not matches_as_duckdb(a, b):
        raise UnsupportedError(f"{cond.sql()[:60]} compares {a.sql()} with {b.sql()}, which "
                               "DuckDB casts and no semijoin key does")


def _reject_subqueries(node: exp.Expression) -> None:
    for sub in node.find_all(exp.Subquery, exp.Select, exp.Exists):
        raise UnsupportedError(f"subquery {sub.sql()[:60]}")
    for w in node.find_all(exp.Window):
        raise UnsupportedError(f"window function {w.sql()[:60]}")


def scope_check(node: exp.Expression, scope: Scope) -> None:
    for col in column_refs(node):
        scope.resolve(col)


@functools.cache
def duckdb_aggregate_names() -> frozenset[str]:
    """DuckDB's aggregate functions, for those sqlglot parses as plain calls (PRODUCT,
    FSUM): such a call is an aggregate the view is recomputed for, not a column outside
    GROUP BY."""
    with scratch() as con:
        return frozenset(name for (name,) in con.execute(
            "SELECT DISTINCT function_name FROM duckdb_functions() "
            "WHERE function_type = 'aggregate'").fetchall())


def _collect_aggregates(node: exp.Expression, out: list[exp.Expression]) -> None:
    for other in node.find_all(exp.AggFunc, exp.Anonymous, exp.WithinGroup):
        if isinstance(other, exp.WithinGroup):
            raise UnsupportedError(f"aggregate {other.sql()} is not maintained incrementally")
        if isinstance(other, exp.Anonymous) and (
                str(other.this).lower() not in duckdb_aggregate_names()):
            continue  # a scalar function
        if not isinstance(other, AGGREGATE_TYPES):
            raise UnsupportedError(f"aggregate {other.sql()} is not maintained incrementally")
    for agg in node.find_all(*AGGREGATE_TYPES):
        if any(inner is not agg for inner in agg.find_all(*AGGREGATE_TYPES)):
            raise UnsupportedError(f"nested aggregate {agg.sql()}")
        if not any(agg == seen for seen in out):
            out.append(agg)


def _check_grouping(block: Block) -> None:
    """Every column outside an aggregate must be a grouping expression (as in DuckDB)."""
    keys = {g.sql() for g in block.group_by}

    def check(node: exp.Expression) -> None:
        if node.sql() in keys or isinstance(node, AGGREGATE_TYPES):
            return
        if isinstance(node, exp.Column):
            col = block.scope.resolve(node)
            for g in block.group_by:
                if isinstance(g, exp.Column) and block.scope.resolve(g) == col:
                    return
            raise SchemaError(f"column {node.sql()} must appear in GROUP BY or in an aggregate")
        for child in node.iter_expressions():
            check(child)

    for _, e in block.select:
        check(e)
    if block.having is not None:
        check(block.having)


def atoms_of(node: exp.Expression, block: Block) -> set[int]:
    """Indexes of the atoms an expression reads."""
    out = set()
    for col in column_refs(node):
        c = block.scope.resolve(col)
        out.add(atom_of_slot(block, c.slot))
    return out


def atom_of_slot(block: Block, slot: int) -> int:
    for i, a in enumerate(block.atoms):
        if a.offset <= slot < a.offset + len(a.columns):
            return i
    raise AssertionError(slot)


@dataclass
class JoinAnalysis:
    """The conjunctive core of a block.

    ``local[i]``: conditions on atom i alone; ``equalities``: pairs of wide-row slots joined by
    ``=`` or ``IS NOT DISTINCT FROM`` (those pairs also in ``null_safe``: NULL joins NULL);
    ``residual``: multi-atom conditions that are not equalities (theta predicates).
    """

    local: list[list[exp.Expression]]
    equalities: list[tuple[int, int]]
    residual: list[exp.Expression]
    null_safe: set[tuple[int, int]] = field(default_factory=set)

    def nonnull_slots(self) -> set[int]:
        """The joined slots whose NULLs join nothing: those in an ``=`` equality."""
        return {s for pair in self.equalities if pair not in self.null_safe for s in pair}


def compared_as_doubles(a: SqlType, b: SqlType) -> bool:
    """Whether DuckDB compares values of types ``a`` and ``b`` as DOUBLEs although one is
    not: a DECIMAL or an integer against a DOUBLE (``0.10 = 0.1`` holds, and so does
    ``2**53 + 1 = 2.0**53``).  Such an equality cannot key a join or a semijoin, whose
    keys meet by Python's exact equality; the compiled comparison casts as DuckDB does."""
    return (a.kind == "DOUBLE") != (b.kind == "DOUBLE") and a.is_numeric and b.is_numeric


def _star_items(star: exp.Star, columns: list) -> list[tuple[str, exp.Expression]]:
    """The select items a ``*`` stands for over ``columns`` (the scope's, in order), with
    DuckDB's ``EXCLUDE (..)``, ``REPLACE (expr AS col, ..)`` and ``RENAME (col AS name,
    ..)``: a name without a table names every column of that name the star covers (both
    ``b`` of a join), and REPLACE names its column by the alias, whatever the expression; a
    column they name that the star does not cover is a :class:`SchemaError`, as in DuckDB."""
    def picked(column: exp.Column, clause: str) -> list[int]:
        found = [id(c) for c in columns if c.name == column.name.lower() and (
            not column.table or c.qualifier == column.table.lower())]
        if not found:
            raise SchemaError(f"column {column.sql()} in the * {clause} list is not among "
                              "the columns the * stands for")
        return found

    excluded = {i for ref in star.args.get("except_") or () for i in picked(ref, "EXCLUDE")}
    replaced = {i: alias.this for alias in star.args.get("replace") or ()
                for i in picked(exp.column(alias.alias), "REPLACE")}
    for expression in replaced.values():
        _reject_subqueries(expression)
    renamed = {i: alias.alias for alias in star.args.get("rename") or ()
               for i in picked(alias.this, "RENAME")}
    return [(renamed.get(id(c), c.name),
             replaced[id(c)].copy() if id(c) in replaced else exp.column(c.name, c.qualifier))
            for c in columns if id(c) not in excluded]


def matches_as_duckdb(a: SqlType, b: SqlType) -> bool:
    """Whether values of types ``a`` and ``b`` are equal in Python exactly when DuckDB's
    ``=`` holds, so the equality can match a semijoin's keys: integers and DECIMALs of any
    scale (``Decimal('2.00') == 2``), or two values of one kind; not a DOUBLE against
    another number (:func:`compared_as_doubles`), a DATE against a TIMESTAMP (DuckDB takes
    the date at midnight) or text against a number (DuckDB casts the text)."""
    if a.is_numeric and b.is_numeric:
        return not compared_as_doubles(a, b)
    return a.kind == b.kind


def joins_as_key(a: SqlType, b: SqlType) -> bool:
    """Whether an equality of columns of types ``a`` and ``b`` can key a join, whose two
    columns become one value: they must match as DuckDB's ``=`` does and either value
    stand for both, so of one type but for the width (integers of any width, DECIMALs of
    one scale: a padded side or a SUM is a DECIMAL(38, s)): an INTEGER joined to a
    DECIMAL(6,2) would read ``2.00`` for the INTEGER."""
    if a.is_integer and b.is_integer:
        return True
    if a.kind == "DECIMAL" and b.kind == "DECIMAL":
        return a.scale == b.scale
    return a == b


def analyse_joins(block: Block) -> JoinAnalysis:
    local: list[list[exp.Expression]] = [[] for _ in block.atoms]
    equalities: list[tuple[int, int]] = []
    null_safe: set[tuple[int, int]] = set()
    plain: set[tuple[int, int]] = set()  # pairs joined by ``=``, both ways
    residual: list[exp.Expression] = []
    for cond in block.conditions:
        used = atoms_of(cond, block)
        if isinstance(cond, (exp.EQ, exp.NullSafeEQ)) and isinstance(
                cond.this, exp.Column) and isinstance(cond.expression, exp.Column):
            a = block.scope.resolve(cond.this)
            b = block.scope.resolve(cond.expression)
            if atom_of_slot(block, a.slot) != atom_of_slot(block, b.slot) and joins_as_key(
                    a.type, b.type):
                equalities.append((a.slot, b.slot))
                if isinstance(cond, exp.NullSafeEQ):
                    null_safe.add((a.slot, b.slot))
                else:
                    plain.update(((a.slot, b.slot), (b.slot, a.slot)))
                continue
        if len(used) <= 1:
            local[next(iter(used)) if used else 0].append(cond)
        else:
            residual.extend(split_between([cond]))
    null_safe -= plain  # ``a = b AND a IS NOT DISTINCT FROM b`` joins no NULL
    return JoinAnalysis(local, equalities, residual, null_safe)


def distinct_on(node: exp.Expression) -> bool:
    """Whether ``node`` is a ``SELECT DISTINCT ON (..)`` (a set operation's ``distinct``
    is a flag, not a clause)."""
    distinct = node.args.get("distinct")
    return isinstance(distinct, exp.Distinct) and bool(distinct.args.get("on"))


def output_order(keys: list[exp.Ordered], items: list[exp.Expression],
                 names: list[str | None]) -> list[exp.Ordered] | None:
    """A block's ORDER BY ``keys`` over its output columns, for a query that reads the
    block as a derived table whose columns are ``names`` (one per select item of ``items``;
    None for an item the outer query does not name): each key a position, an output name or
    an item's own expression, as DuckDB binds them; None where a key is none of these."""
    values = [(e.this if isinstance(e, exp.Alias) else e).sql(dialect="duckdb") for e in items]
    lowered = [n.lower() if n else None for n in names]
    ordered = []
    for o in keys:
        key = o.this
        if isinstance(key, exp.Literal) and key.is_int:
            at = int(key.this) - 1
        elif isinstance(key, exp.Column) and not key.table and key.name.lower() in lowered:
            at = lowered.index(key.name.lower())
        elif key.sql(dialect="duckdb") in values:
            at = values.index(key.sql(dialect="duckdb"))
        else:
            return None  # ordered by what the output does not hold
        if not 0 <= at < len(names) or names[at] is None:
            return None
        ordered.append(exp.Ordered(this=exp.column(names[at]), desc=o.args.get("desc"),
                                   nulls_first=o.args.get("nulls_first")))
    return ordered


def unordered(node: exp.Expression) -> exp.Expression:
    """A block's ``ORDER BY`` without ``LIMIT`` / ``OFFSET`` dropped: a view's rows are a
    bag, so the order is presentation only (as Materialize and PostgreSQL views treat it).
    Kept under ``DISTINCT ON``, where it decides which row of each group stays."""
    if (isinstance(node, (exp.Select, exp.Union)) and node.args.get("order")
            and not node.args.get("limit") and not node.args.get("offset")
            and not distinct_on(node)):
        node = node.copy()
        node.set("order", None)
    return node


def derived_tables(select: exp.Select) -> list[exp.Expression]:
    """The items of ``select``'s FROM and JOINs that are derived tables (not LATERAL): each
    one's ``this`` is the subquery, which :func:`read_relation` replaces."""
    items = [select.args.get("from_") or select.args.get("from"),
             *(select.args.get("joins") or [])]
    return [item for item in items if item is not None and isinstance(item.this, exp.Subquery)
            and not item.this.args.get("lateral")]


def derived_table_body(sub: exp.Subquery, schema_of=None) -> exp.Expression:
    """A derived table's body with the names of its column list, ``(SELECT ..) AS t(a, b)``
    (:func:`named_columns`)."""
    return named_columns(sub.this, column_list(sub), f"derived table {sub.alias_or_name}",
                         schema_of)


def column_list(node: exp.Expression) -> list[exp.Identifier]:
    """The column list of a derived table or CTE (``AS t(a, b)``), else ``[]``."""
    alias = node.args.get("alias")
    return list(alias.columns) if alias is not None else []


def named_columns(body: exp.Expression, names: list[exp.Identifier], what: str,
                  schema_of=None, wrap: bool = False) -> exp.Expression:
    """``body`` with its first columns named ``names``, as DuckDB reads a column list
    (``AS t(a, b)``, ``WITH q(a, b) AS``, ``CREATE VIEW v(a, b)``): a shorter list names
    the first columns; in a set operation the first block names them; a ``*`` is spelled
    as its relations' columns first (with ``schema_of``).  A ``*`` it cannot spell (over a
    derived table, a USING join) leaves the list to the catalog, which names the helper
    view's columns once it is made: with ``wrap``, ``body`` becomes such a derived table
    (``SELECT * FROM (body) AS __named(names)``), else it is returned as it is."""
    body = body.copy()
    first = body
    while isinstance(first, (exp.Union, exp.Except, exp.Intersect)):
        first = first.this
    if not names or not isinstance(first, exp.Select):
        return body
    if any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and e.is_star)
           for e in first.expressions):
        relations = block_relations(first, schema_of) if schema_of is not None else None
        if relations is None or not spell_star(first, relations):
            return exp.select("*").from_(exp.Subquery(this=body, alias=exp.TableAlias(
                this=exp.to_identifier("__named"), columns=[n.copy() for n in names]))
            ) if wrap else body
    if len(names) > len(first.expressions):
        raise SchemaError(f"{what} has {len(first.expressions)} columns, but {len(names)} "
                          f"names are given for them")
    first.set("expressions", [(e.this if isinstance(e, exp.Alias) else e).as_(n.name)
                              for e, n in zip(first.expressions, names, strict=False)]
              + first.expressions[len(names):])
    return body


def table_alias_list_as_derived(node: exp.Expression) -> exp.Expression:
    """``FROM t AS x(p, q)`` as ``FROM (SELECT * FROM t) AS x(p, q)``: a derived table,
    whose helper view takes the column list (:func:`named_columns`)."""
    alias = node.args.get("alias") if isinstance(node, exp.Table) else None
    if alias is None or not alias.columns:
        return node
    table = node.copy()
    table.set("alias", None)
    return exp.Subquery(this=exp.select("*").from_(table), alias=alias.copy())


def read_relation(item: exp.Expression, relation: str) -> None:
    """Make a FROM / JOIN item that holds a derived table read ``relation`` instead, under
    the derived table's alias (or the relation's name)."""
    alias = item.this.alias or relation
    item.set("this", exp.Table(this=exp.to_identifier(relation),
                               alias=exp.TableAlias(this=exp.to_identifier(alias))))


def ctes_as_relations(query: exp.Expression, name: str, schema_of=None
                      ) -> tuple[list[tuple[str, exp.Expression]], exp.Expression]:
    """A query's non-recursive CTEs as relations named ``<name>__cte_<cte>``: their bodies
    in order (each reading the earlier ones by those names) and the query without its WITH,
    reading them.  No bodies and the query as it is when it has no WITH or a recursive one.
    (The ``cte_`` keeps them apart from the view's other helpers: a CTE named ``sub2`` or
    ``topk`` took the name of a derived table's or a top-k's helper.)"""
    with_key = "with_" if "with_" in query.args else "with"
    with_ = query.args.get(with_key)
    if with_ is None or with_.args.get("recursive"):
        return [], query
    bodies: list[tuple[str, exp.Expression]] = []
    mapping: dict[str, str] = {}
    for cte in with_.expressions:
        relation = f"{name}__cte_{cte.alias_or_name.lower()}"
        body = named_columns(cte.this, column_list(cte), f"CTE {cte.alias_or_name}",
                             schema_of, wrap=True)  # WITH q(a, b) AS (..)
        bodies.append((relation, rename_tables(body, mapping)))
        mapping[cte.alias_or_name.lower()] = relation
    query = query.copy()
    query.set(with_key, None)
    return bodies, rename_tables(query, mapping)


def rename_tables(node: exp.Expression, mapping: dict[str, str]) -> exp.Expression:
    """Point references to the named relations at other names, keeping the visible alias."""
    if not mapping:
        return node

    def swap(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Table) and n.name.lower() in mapping and not n.args.get("db"):
            alias = n.alias or n.name
            return exp.Table(this=exp.to_identifier(mapping[n.name.lower()]),
                             alias=exp.TableAlias(this=exp.to_identifier(alias)))
        return n

    return node.copy().transform(swap)
