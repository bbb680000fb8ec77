"""LATERAL subqueries as maintainable SQL: each ``JOIN LATERAL (body) AS s`` becomes a
plain derived table (or scalar subqueries) that the other rewrites and the strategies keep.

A lateral body is evaluated once per row of the FROM items before it; the standard
decorrelation (as for scalar subqueries, :mod:`upkeep.scalar_subqueries`) takes the
correlation out of the body, so the body is one relation computed once and joined back:

* **Rows** (``SELECT cols FROM t WHERE t.k = g.k AND t.x > 2``, also grouped or DISTINCT):
  the body without its correlated conjuncts is a derived table that also selects the inner
  columns they read (hidden columns ``__lateral_c0``, ..); the conjuncts join it back,
  in the block's ``WHERE`` (or, for ``LEFT JOIN LATERAL``, in the join's ``ON``).  A body
  that groups or is DISTINCT must be correlated by equalities of its own columns to outer
  values (``t.k = g.k``): it is then grouped by those columns too, one group per outer value.
* **Top-k per outer row** (Materialize's idiom: ``SELECT .. FROM (SELECT DISTINCT k ..) grp,
  LATERAL (SELECT .. FROM t WHERE t.k = grp.k ORDER BY x DESC LIMIT 3)``), correlated by
  equalities: the body numbers its rows ``ROW_NUMBER() OVER (PARTITION BY t.k ORDER BY x
  DESC)`` and keeps those with ``__lateral_rn <= 3`` (``> offset`` too), the per-group
  top-k of :mod:`upkeep.ranked`, joined back by the correlation.
* **One row per outer row** (an aggregate without GROUP BY, or a body with no FROM): each
  reference to ``s.col`` becomes the scalar subquery of that column (or, with no FROM, the
  expression itself), which :mod:`upkeep.scalar_subqueries` decorrelates; the lateral join
  is dropped (it neither adds nor removes rows).
* **Uncorrelated**: a plain derived table.

Anything else (a table function, a set operation, ``RIGHT`` / ``FULL`` laterals, outer
columns outside the body's ``WHERE``, correlations the grouped forms cannot key, columns
that cannot be named) is left as it is and recomputed by DuckDB.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from .expressions import conjuncts
from .plan import distinct_on
from .scalar_subqueries import ancestors, block_relations, from_items, spell_star
from .types import SqlType

Schema = Callable[[str], list[tuple[str, SqlType]]]

_HIDDEN = "__lateral_"
_RANKED = "__lateral_ranked"  # a top-k body's rows with their row numbers
_SET_RETURNING = (exp.Unnest, exp.Explode, exp.GenerateSeries)
_SET_RETURNING_NAMES = {"unnest", "generate_series", "range", "generate_subscripts"}


class _Skip(Exception):
    """A lateral this rewrite does not maintain: the block is left as it is."""


def rewrite_laterals(select: exp.Select, schema_of: Schema) -> exp.Select:
    """``select`` with its LATERAL subqueries decorrelated (see the module), or unchanged."""
    if not isinstance(select, exp.Select) or not any(
            isinstance(j.this, exp.Lateral) for j in select.args.get("joins") or []):
        return select
    out = select.copy()
    try:
        for join in list(out.args["joins"]):
            if isinstance(join.this, exp.Lateral):
                _rewrite(out, join, schema_of)
    except _Skip:
        return select
    return out


def _rewrite(select: exp.Select, join: exp.Join, schema_of: Schema) -> None:
    lateral: exp.Lateral = join.this
    sub = lateral.this
    if not isinstance(sub, exp.Subquery) or not isinstance(sub.this, exp.Select):
        raise _Skip  # a table function (unnest, generate_series) or a set operation
    alias = lateral.args.get("alias")
    if alias is None or not alias.name or alias.columns or join.args.get("using"):
        raise _Skip
    side = (join.args.get("side") or "").upper()
    if side not in ("", "LEFT") or (join.args.get("kind") or "").upper() not in (
            "", "CROSS", "INNER"):
        raise _Skip
    name = alias.name.lower()
    body: exp.Select = sub.this.copy()
    if any(body.args.get(k) for k in ("with", "with_", "windows", "qualify")) or distinct_on(
            body) or any(
            isinstance(n, (exp.Subquery, exp.Select, exp.Window, *_SET_RETURNING))
            or (isinstance(n, exp.Anonymous) and n.name.lower() in _SET_RETURNING_NAMES)
            for n in body.walk() if n is not body):
        raise _Skip  # a nested query, a window, rows made from one (unnest), DISTINCT ON
    others = _other_columns(select, join, schema_of)
    before = _preceding(select, join, others)  # what the body's outer columns may name
    if not (body.args.get("from_") or body.args.get("from")):
        _one_row(select, join, name, body, others, _sides({}, before), left=side == "LEFT",
                 scalar=False)
        return
    inner = block_relations(body, schema_of)
    if inner is None:
        raise _Skip
    if not spell_star(body, inner):
        raise _Skip  # a star over USING / NATURAL joins, or with EXCLUDE and the like
    outer_of = _sides(inner, before)
    having = body.args.get("having")
    aggregated = any(isinstance(n, exp.AggFunc) for e in [*body.expressions, having]
                     if e is not None for n in e.walk())
    if aggregated and not body.args.get("group"):
        _one_row(select, join, name, body, others, outer_of, left=side == "LEFT",
                 scalar=True)
        return
    where = body.args.get("where")
    kept, correlated = [], []
    for cond in conjuncts(where.this if where is not None else None):
        (correlated if any(outer_of(c) for c in cond.find_all(exp.Column)) else kept
         ).append(cond)
    outside = sum(1 for c in body.find_all(exp.Column) if outer_of(c))
    if outside != sum(1 for cond in correlated for c in cond.find_all(exp.Column)
                      if outer_of(c)):
        raise _Skip  # an outer column outside the WHERE
    names = _output_names(body, lower=False)
    body.set("where", exp.Where(this=exp.and_(*kept)) if kept else None)
    if not correlated:  # uncorrelated: an ordinary derived table
        join.set("this", exp.Subquery(this=body, alias=alias.copy()))
        return
    limit, offset = body.args.get("limit"), body.args.get("offset")
    grouped = bool(body.args.get("group")) or bool(body.args.get("distinct"))
    if limit is not None or offset is not None or grouped:
        keys = _keys(correlated, outer_of)
        conditions = [exp.EQ(this=exp.column(f"{_HIDDEN}k{i}", name), expression=o.copy())
                      for i, (_, o) in enumerate(keys)]
        hidden = [k.copy().as_(f"{_HIDDEN}k{i}") for i, (k, _) in enumerate(keys)]
        if limit is not None or offset is not None:
            if grouped or aggregated or not body.args.get("order"):
                raise _Skip  # a grouped top-k, or LIMIT without an order (any rows)
            rank, bounds = _ranked(body, [k for k, _ in keys], _RANKED)
            body.set("expressions", [*body.expressions, *hidden, rank])
            body = exp.select(*[exp.column(n, _RANKED, quoted=True) for n in
                                [*names, *(h.alias for h in hidden)]]).from_(
                exp.Subquery(this=body, alias=exp.TableAlias(
                    this=exp.to_identifier(_RANKED)))).where(exp.and_(*bounds))
        else:
            if body.args.get("group"):
                body.set("group", exp.Group(expressions=[
                    *body.args["group"].expressions, *(k.copy() for k, _ in keys)]))
            body.set("order", None)
            body.set("expressions", [*body.expressions, *hidden])
    else:
        body.set("order", None)  # no LIMIT: the order is not the rows'
        conditions, hidden = _moved(correlated, outer_of, name)
        body.set("expressions", [*body.expressions, *hidden])
    if any(n.lower().startswith(_HIDDEN) for n in names):
        raise _Skip
    _spell_outer_stars(select, join, names, others)
    join.set("this", exp.Subquery(this=body, alias=alias.copy()))
    _join_on(select, join, conditions, left=side == "LEFT")


def _other_columns(select: exp.Select, join: exp.Join, schema_of: Schema
                   ) -> dict[str, list[str] | None]:
    """The block's other FROM items: alias -> column names (None where not known)."""
    items = [item for item in from_items(select) if item is not join.this]
    out: dict[str, list[str] | None] = {}
    for item in items:
        key = (item.alias_or_name or "").lower()
        if isinstance(item, exp.Table) and not item.args.get("db"):
            try:
                out[key] = [c for c, _ in schema_of(item.name.lower())]
            except Exception:  # noqa: BLE001 - unknown: left to the binder
                out[key] = None
            if item.alias and item.args["alias"].columns:
                out[key] = None
        elif isinstance(item, exp.Subquery) and isinstance(item.this, exp.Select) and not (
                item.args.get("alias") is not None and item.args["alias"].columns):
            out[key] = _output_names(item.this, strict=False)
        elif isinstance(item, exp.Lateral) and isinstance(item.this, exp.Subquery) and \
                isinstance(item.this.this, exp.Select):
            out[key] = _output_names(item.this.this, strict=False)
        else:
            out[key] = None
    return out


def _preceding(select: exp.Select, join: exp.Join, others: dict[str, list[str] | None]
               ) -> dict[str, list[str] | None]:
    """The FROM items before the lateral (the ones its body may read), of ``others``."""
    from_ = select.args.get("from_") or select.args.get("from")
    items = [from_.this] if from_ is not None else []
    for j in select.args.get("joins") or []:
        if j is join:
            break
        items.append(j.this)
    keys = {(item.alias_or_name or "").lower() for item in items}
    return {k: v for k, v in others.items() if k in keys}


def _output_names(body: exp.Select, strict: bool = True, lower: bool = True
                  ) -> list[str] | None:
    """The names of ``body``'s columns (as written unless ``lower``); a column without a
    name (or a star, or a repeated name) raises :class:`_Skip`, or gives None when not
    ``strict``."""
    names = []
    for e in body.expressions:
        if isinstance(e, exp.Alias):
            names.append(e.alias)
        elif isinstance(e, exp.Column) and not e.is_star:
            names.append(e.name)
        elif strict:
            raise _Skip
        else:
            return None
    if lower:
        names = [n.lower() for n in names]
    if len({n.lower() for n in names}) != len(names):
        if strict:
            raise _Skip
        return None
    return names


def _sides(inner: dict[str, list[str]], others: dict[str, list[str] | None]
           ) -> Callable[[exp.Column], bool]:
    """Whether a column of the body is an outer one, qualifying it with its relation if so
    (the body's own relations shadow the outer ones, as in SQL)."""
    def outer_of(col: exp.Column) -> bool:
        table, column = col.table.lower(), col.name.lower()
        if table:
            if table in inner:
                return False
            if table in others:
                return True
            raise _Skip
        if any(column in cols for cols in inner.values()):
            return False
        owners = [a for a, cols in others.items() if cols is None or column in cols]
        if len(owners) != 1 or others[owners[0]] is None:
            raise _Skip
        col.set("table", exp.to_identifier(owners[0]))
        return True

    return outer_of


def _keys(correlated: list[exp.Expression], outer_of: Callable[[exp.Column], bool]
          ) -> list[tuple[exp.Column, exp.Expression]]:
    """The correlation as ``(inner column, outer expression)`` equalities, or _Skip."""
    keys = []
    for cond in correlated:
        if not isinstance(cond, exp.EQ):
            raise _Skip
        for a, b in ((cond.this, cond.expression), (cond.expression, cond.this)):
            if isinstance(a, exp.Column) and not outer_of(a) and all(
                    outer_of(c) for c in b.find_all(exp.Column)):
                keys.append((a, b))
                break
        else:
            raise _Skip
    return keys


def _moved(correlated: list[exp.Expression], outer_of: Callable[[exp.Column], bool],
           name: str) -> tuple[list[exp.Expression], list[exp.Expression]]:
    """The correlated conjuncts over the derived table ``name`` (its inner columns read as
    hidden columns), and those hidden columns' select items."""
    hidden: dict[str, exp.Expression] = {}

    def swap(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and not outer_of(node):
            key = node.sql()
            if key not in hidden:
                hidden[key] = node.copy().as_(f"{_HIDDEN}c{len(hidden)}")
            return exp.column(hidden[key].alias, name)
        return node

    moved = [cond.copy().transform(swap) for cond in correlated]
    return moved, list(hidden.values())


def _ranked(body: exp.Select, partition: list[exp.Column], name: str
            ) -> tuple[exp.Expression, list[exp.Expression]]:
    """``body``'s ORDER BY .. LIMIT .. OFFSET as a row number per partition: the select
    item numbering the rows (``body`` loses its order, limit and offset), and the
    conditions on the numbered rows under ``name`` that keep the rows they kept (bounds
    in the enclosing WHERE: a ranked view, ``ranked.py``)."""
    limit, offset = body.args.get("limit"), body.args.get("offset")
    n = _integer(limit.expression) if limit is not None else None
    skip = _integer(offset.expression) if offset is not None else 0
    if (limit is not None and n is None) or skip is None:
        raise _Skip  # not integer literals
    by_alias = {a.alias.lower(): a.this for a in body.expressions if isinstance(a, exp.Alias)}
    ordered = []
    for o in body.args["order"].expressions:
        key = o.this
        if isinstance(key, exp.Literal) and key.is_int:  # ORDER BY 2
            position = int(key.this)
            if not 1 <= position <= len(body.expressions):
                raise _Skip
            item = body.expressions[position - 1]
            key = item.this if isinstance(item, exp.Alias) else item
        elif isinstance(key, exp.Column) and not key.table and key.name.lower() in by_alias:
            key = by_alias[key.name.lower()]  # an output name reads the select's item
        ordered.append(exp.Ordered(this=key.copy(), desc=o.args.get("desc"),
                                   nulls_first=o.args.get("nulls_first")))
    window = exp.Window(this=exp.RowNumber(), partition_by=[c.copy() for c in partition],
                        order=exp.Order(expressions=ordered))
    for k in ("order", "limit", "offset"):
        body.set(k, None)
    rank = exp.column(f"{_HIDDEN}rn", name)
    conditions: list[exp.Expression] = []
    if n is not None:
        conditions.append(exp.LTE(this=rank, expression=exp.Literal.number(skip + n)))
    if skip:
        conditions.append(exp.GT(this=rank.copy(), expression=exp.Literal.number(skip)))
    return exp.alias_(window, f"{_HIDDEN}rn"), conditions


def _one_row(select: exp.Select, join: exp.Join, name: str, body: exp.Select,
             others: dict[str, list[str] | None], outer_of: Callable[[exp.Column], bool],
             left: bool, scalar: bool) -> None:
    """Drop a lateral that gives one row per outer row (an aggregate without GROUP BY,
    ``scalar``, or a select without FROM), reading each of its columns as the scalar
    subquery of that column (or, with no FROM, as the expression); its outer columns
    qualified by ``outer_of`` first (a scalar subquery in the block could read a later
    FROM item's column of the same name)."""
    on = join.args.get("on")
    if left and on is not None and on != exp.true():
        raise _Skip  # a LEFT JOIN's ON decides whether the row is NULL
    names = _output_names(body, lower=False)
    for c in list(body.find_all(exp.Column)):
        outer_of(c)  # an outer one qualified with its relation, or _Skip
    if scalar:
        if any(body.args.get(k) for k in ("having", "limit", "offset", "distinct")):
            raise _Skip
        body.set("order", None)
        values = {}
        for n, e in zip(names, body.expressions, strict=True):
            one = body.copy()
            one.set("expressions", [e.this.copy() if isinstance(e, exp.Alias) else e.copy()])
            values[n.lower()] = exp.Subquery(this=one)
    else:
        if any(body.args.get(k) for k in ("where", "group", "having", "limit", "offset",
                                           "order", "distinct", "joins")) or body.find(
                exp.AggFunc):
            raise _Skip  # not one row, or an aggregate of the one row
        values = {n.lower(): exp.paren((e.this if isinstance(e, exp.Alias) else e).copy())
                  for n, e in zip(names, body.expressions, strict=True)}
    if on is not None:
        on = _qualified_among(on.copy(), _joined_by(select, join, others))
    inserted = _spell_outer_stars(select, join, names, others, values)
    for e in select.expressions:  # an unaliased column keeps its name
        if isinstance(e, exp.Column) and e.table.lower() in ("", name) and (
                e.name.lower() in values):
            e.replace(exp.Alias(this=e.copy(), alias=exp.to_identifier(e.name)))
    join.pop()
    if not select.args.get("joins"):
        select.set("joins", None)
    if on is not None and not left and on != exp.true():  # its names read where it was
        select.set("where", exp.Where(this=exp.and_(*_where_parts(select), on)))
    aliases = {e.alias.lower() for e in select.expressions if isinstance(e, exp.Alias)}
    known = all(cols is not None for cols in others.values())
    for col in list(select.find_all(exp.Column)):
        table, column = col.table.lower(), col.name.lower()
        scopes = [a for a in ancestors(col, select) if isinstance(a, exp.Select)
                  and a is not select]  # the nested queries it lies in
        if (table and table != name) or any(
                id(a) in inserted for a in ancestors(col, select)):
            continue
        if table and any(name in _aliases(s) for s in scopes):
            continue  # a nested query's own relation of that name
        if not table and scopes and column in values:
            raise _Skip  # may be a nested query's own column
        if not table:
            if column not in values:
                continue
            if not known:
                raise _Skip  # it may be another relation's column
            if any(column in cols for cols in others.values()):
                continue
            order = col.find_ancestor(exp.Order)
            if order is not None and order.parent is select and column in aliases:
                continue  # ORDER BY an output name
        if column not in values:
            raise _Skip
        col.replace(values[column].copy())


def _aliases(select: exp.Select) -> set[str]:
    """The names ``select``'s FROM items go by."""
    return {(item.alias_or_name or "").lower() for item in from_items(select)}


def _joined_by(select: exp.Select, join: exp.Join, others: dict[str, list[str] | None]
               ) -> dict[str, list[str] | None]:
    """The other items ``join``'s ON reads names among: those from the last comma before
    it (a comma binds loosest) up to it."""
    from_ = select.args.get("from_") or select.args.get("from")
    seen = [(from_.this.alias_or_name or "").lower()] if from_ is not None else []
    for j in select.args.get("joins") or []:
        if j is join:
            break
        if not any(j.args.get(k) for k in ("kind", "side", "on", "using", "method")):
            seen = []  # a comma
        seen.append((j.this.alias_or_name or "").lower())
    return {k: others.get(k) for k in seen}


def _qualified_among(cond: exp.Expression, items: dict[str, list[str] | None]
                     ) -> exp.Expression:
    """``cond`` with each unqualified column one of ``items`` holds (and only one)
    qualified by it, outside nested queries; _Skip where an item's columns are unknown."""
    for col in list(cond.find_all(exp.Column)):
        if col.table or col.is_star or any(
                isinstance(a, exp.Select) for a in ancestors(col, cond)):
            continue
        if any(cols is None for cols in items.values()):
            raise _Skip
        owners = [a for a, cols in items.items() if col.name.lower() in cols]
        if len(owners) == 1:
            col.set("table", exp.to_identifier(owners[0]))
    return cond


def _where_parts(select: exp.Select) -> list[exp.Expression]:
    where = select.args.get("where")
    return [where.this] if where is not None else []


def _spell_outer_stars(select: exp.Select, join: exp.Join, names: list[str],
                       others: dict[str, list[str] | None],
                       values: dict[str, exp.Expression] | None = None) -> set[int]:
    """Spell the block's ``*`` and ``s.*`` as columns, so that they take the lateral's
    columns ``names`` (by ``values``, keyed by lower-case name, where it is dropped) and
    not the hidden ones; the ids of the values put in."""
    inserted: set[int] = set()
    name = join.this.args["alias"].name.lower()

    def columns_of(item: exp.Expression, alias: str) -> list[exp.Expression]:
        if item is join.this:
            if values is not None:
                put = [values[n.lower()].copy() for n in names]
                inserted.update(id(v) for v in put)
                return [exp.Alias(this=v, alias=exp.to_identifier(n, quoted=True))
                        for v, n in zip(put, names, strict=True)]
            return [exp.column(n, alias, quoted=True) for n in names]
        cols = others.get(alias)
        if cols is None:
            raise _Skip
        return [exp.column(c, alias, quoted=True) for c in cols]

    items = from_items(select)
    spelled: list[exp.Expression] = []
    for e in select.expressions:
        star = e if isinstance(e, exp.Star) else e.this if (
            isinstance(e, exp.Column) and e.is_star) else None
        if star is None or (isinstance(e, exp.Column) and e.table.lower() != name):
            spelled.append(e)
            continue
        if any(star.args.get(k) for k in ("except", "replace", "rename")) or any(
                j.args.get("using") or j.args.get("method")
                for j in select.args.get("joins") or []):
            raise _Skip
        if isinstance(e, exp.Star):
            for item in items:
                spelled.extend(columns_of(item, (item.alias_or_name or "").lower()))
        else:
            spelled.extend(columns_of(join.this, name))
    select.set("expressions", spelled)
    return inserted


def _join_on(select: exp.Select, join: exp.Join, conditions: list[exp.Expression],
             left: bool) -> None:
    """Join the decorrelated lateral back by ``conditions``: in a LEFT join's ON, else in
    the block's WHERE."""
    on = join.args.get("on")
    if left:
        parts = conditions if on is None or on == exp.true() else [on.copy(), *conditions]
        join.set("on", exp.and_(*parts) if parts else exp.true())
        return
    parts = [*_where_parts(select), *conditions]  # (its own ON stays: it reads its names
    if on is None:                                 # among the items it joins)
        join.set("kind", "CROSS")
    if parts:
        select.set("where", exp.Where(this=exp.and_(*parts)))


def _integer(node: exp.Expression | None) -> int | None:
    if isinstance(node, exp.Literal) and node.is_int:
        return int(node.this)
    return None
