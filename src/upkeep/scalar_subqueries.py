"""Scalar subqueries as maintainable SQL: the standard decorrelation (a scalar subquery
becomes an aggregate view joined back by its correlation keys), so that each part is an
ordinary maintained view (issue 22: TPC-H Q2, Q11, Q17, Q20, Q22; DBToaster's nested
aggregates are the case where each change touches few groups).

* Uncorrelated, ``WHERE x > (SELECT SUM(v) * 0.001 FROM t WHERE ..)``: the subquery is a
  one-row aggregate; it is cross-joined as a derived table and the expression refers to its
  column.  A change to ``t`` changes that one row, and the comparison is re-evaluated for the
  rows it decides (the inequality join of ``dyn``).
* Correlated by equalities, ``(SELECT SUM(r2.b) FROM r r2 WHERE r2.a = r1.b AND ..)``: the
  derived table groups the subquery by its inner correlation columns and is LEFT JOINed on
  them (``outer_joins.py`` maintains that join).
* Correlated otherwise (``r2.d < r1.d``, ``r2.k <> r1.k``, any condition naming an outer
  column) when the outer columns are of one relation: the subquery is evaluated once per
  distinct combination of those columns, the outer relation's *domain* (``SELECT DISTINCT``
  of them, a helper view), joined to the subquery's relations by the correlation (an
  inequality join of ``dyn``) and grouped by the domain's columns; the result is LEFT JOINed
  back on them by equality.  A change of the inner relations moves the groups whose domain
  values it satisfies.  The derived table carries each aggregate
  as a column and the subquery's expression is evaluated over them in the outer block, with
  ``COUNT(..)`` read as ``COALESCE(count, 0)``: an outer row with no group then sees exactly
  what the subquery returns on no rows (NULL for SUM, AVG, MIN, MAX; 0 for COUNT).

Subqueries of one block over the same relations, filter and correlation share one derived
table (``MIN`` and ``MAX`` of the same group are one helper view).  Subqueries in ``WHERE``
and in the SELECT list of a block without aggregates are rewritten; uncorrelated ones also in
``HAVING`` and aggregated SELECT lists (as ``MAX`` of the single value).  Anything else
(correlations over several outer relations other than by equalities, subqueries over
several levels, LIMIT / ORDER BY inside) is left as it is, and recomputed as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from sqlglot import exp

from .expressions import AGGREGATE_TYPES, conjuncts
from .types import SqlType

Schema = Callable[[str], list[tuple[str, SqlType]]]

class _Skip(Exception):
    """Not a subquery this rewrite maintains."""


def rewrite_scalar_subqueries(select: exp.Select, schema_of: Schema) -> exp.Select:
    """``select`` with its scalar subqueries joined in as derived tables, or unchanged."""
    if not any(_scalar(s) for s in select.find_all(exp.Subquery)):
        return select
    out = select.copy()
    outer = block_relations(out, schema_of)
    if outer is None:
        return select
    tables = _relation_tables(out)
    padded = _padded_aliases(out)
    aggregated = bool(out.args.get("group")) or any(_aggregates(e) for e in out.expressions)
    # a global aggregate has its one row over no input, where a cross-joined subquery's
    # MAX would read no row (NULL, not the subquery's value): left to recomputation
    single_row = aggregated and not out.args.get("group")
    shared: dict[str, _Derived] = {}
    for key in ("where", "expressions", "having"):
        value = out.args.get(key)
        parts = value if isinstance(value, list) else [value] if value is not None else []
        for part in parts:
            for sub in list(part.find_all(exp.Subquery)):
                if not _scalar(sub) or _nested_in_subquery(sub, part):
                    continue
                try:
                    derived, value_of = _decorrelate(sub, outer, schema_of, tables, padded)
                except _Skip:
                    continue
                if (derived.keys or single_row) and (
                        key == "having" or (key == "expressions" and aggregated)):
                    continue
                derived = shared.setdefault(derived.signature, derived)
                if derived.name is None:
                    derived.name = fresh_alias("__scalar", out)
                    out.append("joins", derived.join())
                reference = value_of(derived)
                if not derived.keys and (key == "having" or (key == "expressions"
                                                             and aggregated)) and not any(
                        isinstance(a, exp.AggFunc) for a in ancestors(sub, part)):
                    reference = exp.Max(this=reference)  # the one value, inside a group
                sub.replace(reference)
    for derived in shared.values():
        if derived.keys and derived.name and _rejected_when_missing(out, derived.name):
            for join in out.args.get("joins") or []:
                if join.alias_or_name == derived.name:
                    join.set("side", None)  # no outer row survives a missing group
    if not shared or not spell_star(out, outer):  # nothing joined in, or * unspellable
        return select
    _qualify_own_columns(out, outer)
    return out


def _qualify_own_columns(select: exp.Select, outer: dict[str, list[str]]) -> None:
    """Name the relation of each unqualified column of the block's own relations, so that
    none is read as a joined-in derived table's column of the same name (``a0``, ``k0``)."""
    owners: dict[str, list[str]] = {}
    for alias, columns in outer.items():
        for c in columns:
            owners.setdefault(c, []).append(alias)
    # ORDER BY reads a select alias before a column, as DuckDB does (``-b AS b .. ORDER BY b``)
    order = select.args.get("order")
    aliases = {e.alias.lower() for e in select.expressions if isinstance(e, exp.Alias)}
    for col in list(select.find_all(exp.Column)):
        found = owners.get(col.name.lower())
        if (not col.table and not col.is_star and found is not None and len(found) == 1
                and col.find_ancestor(exp.Select) is select and not (
                    order is not None and col.find_ancestor(exp.Order) is order
                    and col.name.lower() in aliases)):
            col.set("table", exp.to_identifier(found[0]))


def ancestors(node: exp.Expression, top: exp.Expression) -> Iterator[exp.Expression]:
    """The nodes from ``node``'s parent up to ``top``."""
    while node is not top and node.parent is not None:
        node = node.parent
        yield node


def fresh_alias(base: str, select: exp.Expression) -> str:
    """``base`` numbered from 1 (``__scalar1``), past every alias and relation name
    ``select`` already holds anywhere: a rewrite's alias never meets a user's or an earlier
    rewrite's."""
    taken = {n.alias_or_name.lower() for n in select.find_all(exp.Table, exp.Subquery)}
    k = 1
    while f"{base}{k}" in taken:
        k += 1
    return f"{base}{k}"


def spell_star(select: exp.Select, outer: dict[str, list[str]]) -> bool:
    """Spell ``*`` and ``t.*`` of the select list as the block's own FROM items' columns,
    so that they do not take the derived tables the rewrite joined in; False where that
    cannot be said in columns (USING / NATURAL joins, ``* EXCLUDE``), left unrewritten."""
    if not any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and e.is_star)
               for e in select.expressions):
        return True
    if any(j.args.get("using") or j.args.get("method") for j in select.args.get("joins") or []):
        return False
    spelled: list[exp.Expression] = []
    for e in select.expressions:
        star = e if isinstance(e, exp.Star) else e.this if (
            isinstance(e, exp.Column) and e.is_star) else None
        if star is None:
            spelled.append(e)
        elif any(star.args.get(k) for k in ("except", "replace", "rename")):
            return False
        else:
            owners = list(outer) if isinstance(e, exp.Star) else [e.table.lower()]
            if any(o not in outer for o in owners):
                return False
            spelled.extend(exp.column(c, o) for o in owners for c in outer[o])
    select.set("expressions", spelled)
    return True


def _rejected_when_missing(select: exp.Select, name: str) -> bool:
    """Whether every reference to derived table ``name`` lies in a ``WHERE`` conjunct that
    is NULL or false when they are all NULL: then an outer row with no group is dropped
    anyway, and an inner join keeps the same rows as the LEFT JOIN (without the anti-join
    that pads the unmatched rows)."""
    where = select.args.get("where")
    parts = conjuncts(where.this if where is not None else None)
    rejecting = [p for p in parts if _rejects(p, name)]
    inside = sum(1 for p in rejecting for c in p.find_all(exp.Column) if c.table == name)
    everywhere = sum(1 for c in select.find_all(exp.Column) if c.table == name and not (
        c.find_ancestor(exp.Join) and c.find_ancestor(exp.Join).alias_or_name == name))
    return bool(rejecting) and inside == everywhere


def _null_when_missing(node: exp.Expression, name: str) -> bool:
    """Whether ``node`` is NULL when every column of ``name`` is."""
    if isinstance(node, exp.Column):
        return node.table == name
    if isinstance(node, (exp.Paren, exp.Neg, exp.Cast)):
        return _null_when_missing(node.this, name)
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod)):
        return _null_when_missing(node.this, name) or _null_when_missing(node.expression, name)
    return False


def _rejects(cond: exp.Expression, name: str) -> bool:
    """Whether the condition ``cond`` is NULL or false when every column of ``name`` is
    NULL."""
    if isinstance(cond, exp.Paren):
        return _rejects(cond.this, name)
    if isinstance(cond, (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)):
        return _null_when_missing(cond.this, name) or _null_when_missing(cond.expression,
                                                                          name)
    if isinstance(cond, exp.Between):
        return any(_null_when_missing(cond.args[k], name) for k in ("this", "low", "high"))
    if isinstance(cond, exp.And):
        return _rejects(cond.this, name) or _rejects(cond.expression, name)
    if isinstance(cond, exp.Or):
        return _rejects(cond.this, name) and _rejects(cond.expression, name)
    if isinstance(cond, exp.Coalesce) and len(cond.expressions) == 1 and isinstance(
            cond.expressions[0], exp.Boolean) and not cond.expressions[0].this:
        return _rejects(cond.this, name)  # COALESCE(c, FALSE)
    return False


class _Derived:
    """The derived table that brings in the aggregates of one subquery body: grouped by the
    inner correlation columns (``k0``, ``k1``, ..), one column per distinct aggregate
    (``a0``, ``a1``, ..)."""

    def __init__(self, body: exp.Select, keys: list[tuple[exp.Column, exp.Column]],
                 null_safe: bool = False) -> None:
        self.body = body
        self.keys = keys  # (inner, outer)
        # keys over the outer domain under a correlation that NULL can satisfy: a NULL
        # outer value finds its own group (IS NOT DISTINCT FROM); otherwise a NULL outer
        # value matches no group, as its subquery matches no row
        self.null_safe = null_safe
        self.aggregates: list[exp.Expression] = []
        self.name: str | None = None
        self.signature = repr((body.sql(), [(i.sql(), o.sql()) for i, o in keys],
                              null_safe))

    def column(self, aggregate: exp.Expression) -> exp.Expression:
        """The outer block's reference to ``aggregate`` (COUNT: 0 where the group is
        missing, as COUNT of no rows)."""
        if aggregate not in self.aggregates:
            self.aggregates.append(aggregate)
            self.body.append("expressions", aggregate.copy().as_(
                f"a{len(self.aggregates) - 1}", quoted=True))
        ref = exp.column(f"a{self.aggregates.index(aggregate)}", self.name, quoted=True)
        if self.keys and isinstance(aggregate, exp.Count):
            return exp.Coalesce(this=ref, expressions=[exp.Literal.number(0)])
        return ref

    def join(self) -> exp.Join:
        derived = exp.Subquery(this=self.body,
                               alias=exp.TableAlias(this=exp.to_identifier(self.name)))
        if not self.keys:
            return exp.Join(this=derived, kind="CROSS")
        match = exp.NullSafeEQ if self.null_safe else exp.EQ
        on = exp.and_(*[match(this=exp.column(f"k{i}", self.name, quoted=True),
                              expression=o.copy()) for i, (_, o) in enumerate(self.keys)])
        return exp.Join(this=derived, on=on, side="LEFT")


_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)
_NULL_PROPAGATING = (exp.Column, exp.Literal, exp.Identifier, exp.Add, exp.Sub, exp.Mul,
                     exp.Div, exp.IntDiv, exp.Mod, exp.Neg, exp.Paren, exp.Cast, exp.DataType)


def _null_rejecting(cond: exp.Expression) -> bool:
    """Whether a correlation is never true where an outer column in it is NULL (a
    comparison of columns, constants and arithmetic): then an outer row with a NULL there
    sees the subquery's value on no rows, which the equality join back gives it.  Others
    (``IS [NOT] DISTINCT FROM``, ``COALESCE``, ``IS NULL``) join back null-safely."""
    return isinstance(cond, _COMPARISONS) and all(
        isinstance(n, _NULL_PROPAGATING) for side in (cond.this, cond.expression)
        for n in side.walk())


def _aggregates(node: exp.Expression) -> bool:
    """Whether ``node`` aggregates (outside any subquery in it)."""
    if isinstance(node, exp.AggFunc):
        return True
    if isinstance(node, exp.Subquery):
        return False
    return any(_aggregates(c) for c in node.iter_expressions())


def _scalar(sub: exp.Subquery) -> bool:
    """A subquery used as a value (not a derived table, EXISTS, IN, ANY or ALL)."""
    parent = sub.parent
    return isinstance(sub.this, exp.Select) and not isinstance(
        parent, (exp.From, exp.Join, exp.Exists, exp.In, exp.Lateral, exp.Any, exp.All))


def _nested_in_subquery(sub: exp.Subquery, root: exp.Expression) -> bool:
    node = sub.parent
    while node is not None and node is not root:
        if isinstance(node, exp.Subquery):
            return True
        node = node.parent
    return False


def from_items(select: exp.Select) -> list[exp.Expression]:
    """The block's FROM items, the FROM's and each join's, in order."""
    from_ = select.args.get("from_") or select.args.get("from")
    return [] if from_ is None else [from_.this, *(j.this for j in select.args.get("joins")
                                                  or [])]


def block_relations(select: exp.Select, schema_of: Schema) -> dict[str, list[str]] | None:
    """The block's FROM items: alias -> column names (None unless all are known relations)."""
    items = from_items(select)
    if not items:
        return None
    out = {}
    for item in items:
        if not isinstance(item, exp.Table) or item.args.get("db"):
            return None
        try:
            out[(item.alias or item.name).lower()] = [c for c, _ in schema_of(item.name.lower())]
        except Exception:  # noqa: BLE001 - unknown: the binder will say so
            return None
    return out


def _over_domain(body: exp.Select, correlations: list[exp.Expression],
                 kept: list[exp.Expression], side: Callable[[exp.Column], str],
                 qualified: Callable[[exp.Column], exp.Column],
                 tables: dict[str, str]) -> list[tuple[exp.Column, exp.Column]]:
    """Make ``body`` range over the outer relation's domain: the distinct values of the
    outer columns its correlations name (one relation's), joined in as ``__dom`` and put
    in their place; returns the keys ``(__dom.__dN, outer column)`` to group and join by."""
    columns: list[exp.Column] = []
    for cond in correlations:
        for c in cond.find_all(exp.Column):
            if side(c) == "outer" and qualified(c) not in columns:
                columns.append(qualified(c))
    owners = {c.table for c in columns}
    if len(owners) != 1:
        raise _Skip  # the domain of one relation only
    (owner,) = owners
    domain = exp.select(*[c.copy().as_(f"__d{j}", quoted=True) for j, c in
                          enumerate(columns)]).distinct().from_(
        exp.Table(this=exp.to_identifier(tables[owner]), alias=exp.TableAlias(
            this=exp.to_identifier(owner))))
    dom = fresh_alias("__dom", body)
    slot = {c.sql(): exp.column(f"__d{j}", dom, quoted=True)
            for j, c in enumerate(columns)}
    moved = [cond.copy().transform(
        lambda n: slot[qualified(n).sql()].copy()
        if isinstance(n, exp.Column) and side(n) == "outer" else n) for cond in correlations]
    body.append("joins", exp.Join(this=exp.Subquery(
        this=domain, alias=exp.TableAlias(this=exp.to_identifier(dom))), kind="CROSS"))
    body.set("where", exp.Where(this=exp.and_(*[c.copy() for c in kept], *moved)))
    return [(slot[c.sql()].copy(), c) for c in columns]


def _relation_tables(select: exp.Select) -> dict[str, str]:
    """The block's FROM items: alias -> table name (after :func:`block_relations`)."""
    return {(t.alias or t.name).lower(): t.name.lower() for t in from_items(select)}


def _padded_aliases(select: exp.Select) -> set[str]:
    """The block's relations an outer join may pad with NULLs."""
    from_ = select.args.get("from_") or select.args.get("from")
    seen = [(from_.this.alias_or_name or "").lower()] if from_ is not None else []
    padded: set[str] = set()
    for j in select.args.get("joins") or []:
        alias = (j.this.alias_or_name or "").lower()
        side = (j.args.get("side") or "").upper()
        if side in ("LEFT", "FULL"):
            padded.add(alias)
        if side in ("RIGHT", "FULL"):
            padded.update(seen)
        seen.append(alias)
    return padded


def _decorrelate(sub: exp.Subquery, outer: dict[str, list[str]], schema_of: Schema,
                 tables: dict[str, str], padded: frozenset[str] | set[str] = frozenset()
                 ) -> tuple[_Derived, Callable[[_Derived], exp.Expression]]:
    """The derived table ``sub``'s aggregates come from, and a function giving the
    expression that stands for ``sub`` once that table is joined in (under its name).
    ``padded``: the outer relations an outer join pads with NULLs, whose values the
    domain of a relation's own rows lacks."""
    query: exp.Select = sub.this
    if len(query.expressions) != 1 or any(query.args.get(k) for k in (
            "group", "having", "order", "limit", "offset", "with", "with_", "distinct",
            "windows", "qualify")):
        raise _Skip
    value = query.expressions[0]
    value = value.this if isinstance(value, exp.Alias) else value
    if not value.find(exp.AggFunc) or any(isinstance(n, exp.Subquery)
                                          for n in query.walk() if n is not query):
        raise _Skip
    if any(not isinstance(n, AGGREGATE_TYPES) for n in value.find_all(exp.AggFunc)) or any(
            isinstance(n, exp.Column) and not n.find_ancestor(exp.AggFunc)
            for n in value.walk()):
        raise _Skip  # an aggregate with no known value on no rows, or a bare column
    inner = block_relations(query, schema_of)
    if inner is None:
        raise _Skip

    def side(col: exp.Column) -> str:
        table, column = col.table.lower(), col.name.lower()
        if table:
            if table in inner:
                return "inner"
            if table in outer:
                return "outer"
            raise _Skip
        if any(column in cols for cols in inner.values()):
            return "inner"  # inner names shadow outer ones
        if any(column in cols for cols in outer.values()):
            return "outer"
        raise _Skip

    def qualified(o: exp.Column) -> exp.Column:
        """An outer column with its relation's alias (the join's ON names both sides)."""
        if o.table:
            return exp.column(o.name, o.table.lower())
        owners = [a for a, cols in outer.items() if o.name.lower() in cols]
        if len(owners) != 1:
            raise _Skip
        return exp.column(o.name, owners[0])

    where = query.args.get("where")
    kept: list[exp.Expression] = []
    correlations: list[exp.Expression] = []
    keys: list[tuple[exp.Column, exp.Column]] = []  # (inner, outer)
    for cond in conjuncts(where.this if where is not None else None):
        sides = {side(c) for c in cond.find_all(exp.Column)}
        if "outer" not in sides:
            kept.append(cond)
            continue
        correlations.append(cond)
        if isinstance(cond, exp.EQ) and isinstance(cond.this, exp.Column) and isinstance(
                cond.expression, exp.Column):
            a, b = cond.this, cond.expression
            pair = {side(a): a, side(b): b}
            if set(pair) == {"inner", "outer"}:
                keys.append((pair["inner"], qualified(pair["outer"])))
    if any(side(c) == "outer" for c in value.find_all(exp.Column)):
        raise _Skip
    body = query.copy()
    null_safe = False
    if len(keys) < len(correlations):  # not all equalities: over the outer domain
        keys = _over_domain(body, correlations, kept, side, qualified, tables)
        null_safe = not all(_null_rejecting(c) for c in correlations)
        if null_safe and any(o.table in padded for _, o in keys):
            raise _Skip  # a padded NULL, which the correlation may hold for, has no group
    else:
        body.set("where", exp.Where(this=exp.and_(*[c.copy() for c in kept]))
                 if kept else None)
    body.set("expressions", [k.copy().as_(f"k{i}", quoted=True) for i, (k, _) in
                             enumerate(keys)])
    if keys:
        body.set("group", exp.Group(expressions=[k.copy() for k, _ in keys]))

    def value_of(derived: _Derived) -> exp.Expression:
        return exp.paren(value.copy().transform(
            lambda n: derived.column(n) if isinstance(n, AGGREGATE_TYPES) else n), copy=False)

    return _Derived(body, keys, null_safe), value_of
