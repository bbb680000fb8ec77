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
  them (``outer_joins.py`` maintains that join), so an outer row with no group sees NULL,
  as the subquery would return on no rows.  This holds only for expressions that are NULL
  on no rows (SUM, AVG, MIN, MAX and arithmetic over them); a ``COUNT`` is 0 there, so such
  subqueries are left alone.

Subqueries in ``WHERE`` and in the SELECT list of a block without aggregates are rewritten;
uncorrelated ones also in ``HAVING`` and aggregated SELECT lists (as ``MAX`` of the single
value).  Anything else (correlations that are not equalities, subqueries over several
levels, LIMIT / ORDER BY inside) is left as it is, and recomputed as before.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from .expressions import conjuncts
from .types import SqlType

Schema = Callable[[str], list[tuple[str, SqlType]]]

_NULL_ON_EMPTY = (exp.Sum, exp.Avg, exp.Min, exp.Max, exp.Literal, exp.Column, exp.Add,
                  exp.Sub, exp.Mul, exp.Div, exp.Paren, exp.Cast, exp.Neg, exp.Identifier,
                  exp.DataType, exp.Alias, exp.Star)


class _Skip(Exception):
    """Not a subquery this rewrite maintains."""


def rewrite_scalar_subqueries(select: exp.Select, schema_of: Schema) -> exp.Select:
    """``select`` with its scalar subqueries joined in as derived tables, or unchanged."""
    if not any(_scalar(s) for s in select.find_all(exp.Subquery)):
        return select
    out = select.copy()
    outer = _aliases(out, schema_of)
    if outer is None:
        return select
    aggregated = bool(out.args.get("group")) or any(_aggregates(e) for e in out.expressions)
    count = 0
    for key in ("where", "expressions", "having"):
        value = out.args.get(key)
        parts = value if isinstance(value, list) else [value] if value is not None else []
        for part in parts:
            for sub in list(part.find_all(exp.Subquery)):
                if not _scalar(sub) or _nested_in_subquery(sub, part):
                    continue
                try:
                    joined, reference, correlated = _decorrelate(sub, outer, schema_of,
                                                                 f"__scalar{count + 1}")
                except _Skip:
                    continue
                if correlated and (key == "having" or (key == "expressions" and aggregated)):
                    continue
                if not correlated and (key == "having" or (key == "expressions"
                                                           and aggregated)):
                    reference = exp.Max(this=reference)  # the one value, inside a group
                count += 1
                out.append("joins", joined)
                sub.replace(reference)
    return out if count else select


def _aggregates(node: exp.Expression) -> bool:
    """Whether ``node`` aggregates (outside any subquery in it)."""
    if isinstance(node, exp.AggFunc):
        return True
    if isinstance(node, exp.Subquery):
        return False
    return any(_aggregates(c) for c in node.iter_expressions())


def _scalar(sub: exp.Subquery) -> bool:
    """A subquery used as a value (not a derived table, EXISTS or IN)."""
    parent = sub.parent
    return isinstance(sub.this, exp.Select) and not isinstance(
        parent, (exp.From, exp.Join, exp.Exists, exp.In, exp.Lateral))


def _nested_in_subquery(sub: exp.Subquery, root: exp.Expression) -> bool:
    node = sub.parent
    while node is not None and node is not root:
        if isinstance(node, exp.Subquery):
            return True
        node = node.parent
    return False


def _aliases(select: exp.Select, schema_of: Schema) -> dict[str, list[str]] | None:
    """The block's relations: alias -> columns (None if one is not a plain relation)."""
    from_ = select.args.get("from_") or select.args.get("from")
    if from_ is None:
        return None
    out = {}
    for item in [from_.this, *(j.this for j in select.args.get("joins") or [])]:
        if not isinstance(item, exp.Table) or item.args.get("db"):
            return None
        try:
            out[(item.alias or item.name).lower()] = [c for c, _ in schema_of(item.name.lower())]
        except Exception:  # noqa: BLE001 - unknown: the binder will say so
            return None
    return out


def _decorrelate(sub: exp.Subquery, outer: dict[str, list[str]], schema_of: Schema,
                 name: str) -> tuple[exp.Join, exp.Expression, bool]:
    """The join that brings ``sub``'s value in, the expression standing for it, and
    whether it is correlated."""
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
    inner = _aliases(query, schema_of)
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

    where = query.args.get("where")
    kept: list[exp.Expression] = []
    keys: list[tuple[exp.Column, exp.Column]] = []  # (inner, outer)
    for cond in conjuncts(where.this if where is not None else None):
        sides = {side(c) for c in cond.find_all(exp.Column)}
        if "outer" not in sides:
            kept.append(cond)
            continue
        if not (isinstance(cond, exp.EQ) and isinstance(cond.this, exp.Column)
                and isinstance(cond.expression, exp.Column)):
            raise _Skip  # a correlation other than an equality of columns
        a, b = cond.this, cond.expression
        pair = {side(a): a, side(b): b}
        if set(pair) != {"inner", "outer"}:
            raise _Skip
        o = pair["outer"]
        if not o.table:  # qualified, so the join's ON names both sides
            owners = [a for a, cols in outer.items() if o.name.lower() in cols]
            if len(owners) != 1:
                raise _Skip
            o = exp.column(o.name, owners[0])
        keys.append((pair["inner"], o))
    if any(side(c) == "outer" for c in value.find_all(exp.Column)):
        raise _Skip
    if keys and not all(isinstance(n, _NULL_ON_EMPTY) for n in value.walk()):
        raise _Skip  # COUNT and the like are not NULL on no rows: a LEFT JOIN would differ
    body = query.copy()
    body.set("where", exp.Where(this=exp.and_(*[c.copy() for c in kept])) if kept else None)
    body.set("expressions", [
        *(k.copy().as_(f"k{i}", quoted=True) for i, (k, _) in enumerate(keys)),
        value.copy().as_("v", quoted=True)])
    if keys:
        body.set("group", exp.Group(expressions=[k.copy() for k, _ in keys]))
    derived = exp.Subquery(this=body, alias=exp.TableAlias(this=exp.to_identifier(name)))
    if keys:
        on = exp.and_(*[exp.EQ(this=exp.column(f"k{i}", name, quoted=True),
                               expression=o.copy()) for i, (_, o) in enumerate(keys)])
        join = exp.Join(this=derived, on=on, side="LEFT")
    else:
        join = exp.Join(this=derived, kind="CROSS")
    return join, exp.column("v", name, quoted=True), bool(keys)
