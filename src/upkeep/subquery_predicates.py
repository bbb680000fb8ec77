"""``[NOT] EXISTS`` and ``[NOT] IN`` subqueries the binder cannot take as a semijoin, turned
into forms that are maintained (issue 22: TPC-H Q16, Q18, Q20, Q21).

The binder (``plan._subquery_filter``) keeps a semijoin or anti-join for a subquery over one
relation correlated by equalities.  Two rewrites bring the other common forms to that or to
scalar subqueries (``scalar_subqueries.py``):

* :func:`isolate_subquery_bodies`: a subquery whose body is more than one relation (joins,
  ``GROUP BY .. HAVING``, nested subqueries, set operations) becomes a semijoin over a derived
  table holding the body, which the catalog maintains as a helper view.  An uncorrelated body
  is kept whole (``x IN (SELECT l_orderkey FROM lineitem GROUP BY .. HAVING ..)``); a body
  correlated by equalities of columns in its ``WHERE`` gives those inner columns as the
  derived table's columns, and the equalities move to the semijoin.
* :func:`rewrite_subquery_predicates`:

  - ``x NOT IN (SELECT c FROM r WHERE ..)`` (uncorrelated or correlated by equalities, a
    top-level conjunct of ``WHERE``) keeps a row when the subquery is empty, or when ``x``
    is not NULL, no ``c``
    is NULL and none equals ``x``: SQL's three-valued ``NOT IN``, where one anti-join would
    keep rows the NULLs exclude.  It is three anti-joins: ``NOT EXISTS (.. c IS NULL)``,
    ``NOT EXISTS (.. c = x)`` and ``NOT EXISTS (.. x IS NULL)`` (the binder's NULL probe:
    a NULL ``x`` matches any row of ``r``), each changing a row only when its count crosses
    zero.  Correlated by one inequality too (``r.d < o.d``), each of the three is an
    extremum comparison, as for ``EXISTS`` below.
  - ``[NOT] EXISTS (SELECT .. FROM r WHERE r.k = o.k AND r.c < o.v ..)``, correlated by one
    inequality besides equalities (Q21's ``l2.l_suppkey <> l1.l_suppkey``), compares ``o.v``
    with an extremum of the group: some ``c < v`` exactly when ``MIN(c) < v`` (``>``:
    ``MAX``), and some ``c <> v`` exactly when ``MIN(c) <> v OR MAX(c) <> v``.  A missing
    group or a NULL gives NULL, read as false.

  - ``x OP ANY (SELECT c ..)`` is ``EXISTS (.. x OP c ..)`` (``= ANY``: ``IN``), and
    ``x OP ALL (SELECT c ..)`` is ``NOT EXISTS`` of a NULL ``c``, of a ``c`` failing
    ``x OP c``, and of a NULL ``x`` beside a non-empty body: SQL's rule, as ``NOT IN``.

Anything else is left as it is, for the binder to refuse and DuckDB to recompute.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from .expressions import FLIPPED_COMPARISON, conjuncts, unparen
from .scalar_subqueries import block_relations
from .types import SqlType

Schema = Callable[[str], list[tuple[str, SqlType]]]

_BODY_CLAUSES = ("group", "having", "order", "limit", "offset", "with", "with_", "distinct",
                 "windows", "qualify")


class _Skip(Exception):
    """Not a subquery these rewrites take."""


def exists_of_one_row(node: exp.Expression) -> exp.Expression:
    """``EXISTS (SELECT agg(..) FROM .. WHERE ..)`` without GROUP BY is TRUE: an aggregate
    over no rows is still one row (``COUNT`` 0, ``MAX`` NULL), so the body never is empty,
    where a semijoin over the rows its WHERE keeps would be (``NOT EXISTS`` kept the rows
    no inner row matched). A transform, applied before the binder reads subqueries."""
    if isinstance(node, exp.Exists) and one_row(node.this):
        return exp.true()
    return node


def one_row(query: exp.Expression) -> bool:
    """Whether ``query`` is a select that aggregates without GROUP BY (nor HAVING, LIMIT
    or OFFSET, which may leave it empty): exactly one row, whatever its WHERE keeps."""
    query = query.this if isinstance(query, exp.Subquery) else query
    if not isinstance(query, exp.Select) or any(query.args.get(k) for k in (
            "group", "having", "limit", "offset", "qualify", "windows")):
        return False
    return any(isinstance(n, exp.AggFunc) for e in query.expressions for n in e.walk(
        prune=lambda n: isinstance(n, (exp.Window, exp.Subquery, exp.Select))))


def _predicate(cond: exp.Expression) -> tuple[bool, exp.Expression, exp.Expression | None] | None:
    """``(negated, body, probe)`` of a conjunct ``[NOT] EXISTS (body)`` or
    ``probe [NOT] IN (body)``; None for any other conjunct."""
    cond = unparen(cond)
    negated = isinstance(cond, exp.Not)
    node = unparen(cond.this) if negated else cond
    if isinstance(node, exp.Exists):
        body, probe = node.this, None
    elif isinstance(node, exp.In) and node.args.get("query") is not None:
        body, probe = node.args["query"], node.this
    else:
        return None
    while isinstance(body, exp.Subquery):
        body = body.this
    return negated, body, probe


def _where(select: exp.Select) -> list[exp.Expression]:
    where = select.args.get("where")
    return conjuncts(where.this if where is not None else None)


def _rewrite_where(select: exp.Select, rewrite: Callable[[exp.Expression], exp.Expression],
                   ) -> exp.Select:
    """``select`` with each WHERE conjunct replaced by ``rewrite(conjunct)`` (a copy if any
    changed)."""
    parts = _where(select)
    new = [rewrite(c) for c in parts]
    if all(a is b for a, b in zip(parts, new, strict=True)):
        return select
    out = select.copy()
    out.set("where", exp.Where(this=exp.and_(*[c.copy() for c in new])))
    return out


class _Sides:
    """Which block a column of a subquery's body names: the body's own relations (``inner``,
    whose names shadow the outer ones, as in SQL) or the enclosing block's (``outer``)."""

    def __init__(self, inner: dict[str, list[str]], outer: dict[str, list[str]]) -> None:
        self.inner, self.outer = inner, outer

    def __call__(self, col: exp.Column) -> str:
        table, name = col.table.lower(), col.name.lower()
        if table:
            if table in self.inner:
                return "inner"
            if table in self.outer:
                return "outer"
            raise _Skip
        if any(name in cols for cols in self.inner.values()):
            return "inner"
        owners = [a for a, cols in self.outer.items() if name in cols]
        if len(owners) == 1:
            return "outer"
        raise _Skip

    def qualified(self, col: exp.Column) -> exp.Column:
        """An outer column with its relation named, so no inner name can shadow it."""
        if col.table:
            return col.copy()
        owner = next(a for a, cols in self.outer.items() if col.name.lower() in cols)
        return exp.column(col.name, owner)


# ------------------------------------------------------------------ isolating bodies


def isolate_subquery_bodies(select: exp.Select, schema_of: Schema) -> exp.Select:
    """``select`` with each ``[NOT] EXISTS`` / ``[NOT] IN`` conjunct whose body is more
    than one relation rewritten over a derived table of that body (see the module)."""
    if not isinstance(select, exp.Select):
        return select
    outer = block_relations(select, schema_of)
    if outer is None:
        return select
    count = 0

    def rewrite(cond: exp.Expression) -> exp.Expression:
        nonlocal count
        found = _predicate(cond)
        if found is None:
            return cond
        negated, body, probe = found
        if _single_relation(body):
            return cond
        try:
            derived, keys, column = _isolated(body, probe is not None, outer, schema_of)
        except _Skip:
            return cond
        count += 1
        name = f"__in{count}"
        inner = exp.select(exp.column(column, name) if column else exp.Literal.number(1)
                           ).from_(exp.Subquery(this=derived, alias=exp.TableAlias(
                               this=exp.to_identifier(name))))
        if keys:
            inner = inner.where(exp.and_(*[exp.EQ(this=exp.column(k, name), expression=o)
                                           for k, o in keys]))
        new = _in(probe.copy(), inner) if probe is not None else exp.Exists(
            this=inner)
        return exp.Not(this=new) if negated else new

    return _rewrite_where(select, rewrite)


def _in(probe: exp.Expression, body: exp.Expression) -> exp.In:
    """``probe IN (body)`` as the parser builds it: the body in a Subquery, so that the
    SQL it renders (which a recomputed view hands DuckDB) keeps the parentheses."""
    return exp.In(this=probe, query=exp.Subquery(this=body))


def _single_relation(body: exp.Expression) -> bool:
    """A body the binder takes: ``SELECT .. FROM r WHERE ..`` with no nested subquery."""
    if not isinstance(body, exp.Select) or body.args.get("joins") or any(
            body.args.get(k) for k in _BODY_CLAUSES):
        return False
    from_ = body.args.get("from_") or body.args.get("from")
    return (from_ is not None and isinstance(from_.this, exp.Table)
            and not any(isinstance(n, (exp.Subquery, exp.Exists)) or (
                isinstance(n, exp.Select) and n is not body) for n in body.walk()))


def _isolated(body: exp.Expression, picks: bool, outer: dict[str, list[str]],
              schema_of: Schema) -> tuple[exp.Expression, list[tuple[str, exp.Column]], str]:
    """The derived table for ``body``, the (derived column, outer column) pairs it is
    correlated by, and the derived column an ``IN`` compares with ('' for EXISTS)."""
    sides = _Sides(_tables_in(body, schema_of), outer)
    correlated = [c for c in _where(body) if _outer_columns(c, sides)] if isinstance(
        body, exp.Select) else []
    if not correlated:
        if _outer_columns(body, sides):
            raise _Skip
        names = [exp.to_identifier(f"__c{i}") for i in range(_width(body))]
        if picks and len(names) != 1:
            raise _Skip
        whole = exp.select(*[exp.column(n.name, "__body") for n in names]).from_(
            exp.Subquery(this=body.copy(), alias=exp.TableAlias(
                this=exp.to_identifier("__body"), columns=names)))
        return whole, [], "__c0" if picks else ""
    assert isinstance(body, exp.Select)
    if any(body.args.get(k) for k in _BODY_CLAUSES):
        raise _Skip  # the correlation filters before grouping: it cannot move out
    keys: list[tuple[exp.Column, exp.Column]] = []
    for cond in correlated:
        cond = unparen(cond)
        if not (isinstance(cond, exp.EQ) and isinstance(cond.this, exp.Column)
                and isinstance(cond.expression, exp.Column)):
            raise _Skip
        pair = {sides(cond.this): cond.this, sides(cond.expression): cond.expression}
        if set(pair) != {"inner", "outer"}:
            raise _Skip
        keys.append((pair["inner"], sides.qualified(pair["outer"])))
    derived = body.copy()
    kept = [c.copy() for c in _where(body) if not any(c is d for d in correlated)]
    derived.set("where", exp.Where(this=exp.and_(*kept)) if kept else None)
    selected = [k.copy().as_(f"__k{i}") for i, (k, _) in enumerate(keys)]
    if picks:
        if len(body.expressions) != 1 or isinstance(body.expressions[0], exp.Star):
            raise _Skip
        pick = body.expressions[0]
        selected.append((pick.this if isinstance(pick, exp.Alias) else pick).copy().as_("__c0"))
    derived.set("expressions", selected)
    if _outer_columns(derived, sides):
        raise _Skip
    return derived, [(f"__k{i}", o) for i, (_, o) in enumerate(keys)], "__c0" if picks else ""


def _tables_in(body: exp.Expression, schema_of: Schema) -> dict[str, list[str]]:
    """Every relation ``body`` reads, at any depth: alias -> column names."""
    out: dict[str, list[str]] = {}
    for table in body.find_all(exp.Table):
        if table.args.get("db"):
            raise _Skip
        try:
            columns = [c for c, _ in schema_of(table.name.lower())]
        except Exception as exc:  # noqa: BLE001 - a CTE's name or unknown: leave it
            raise _Skip from exc
        out.setdefault((table.alias or table.name).lower(), []).extend(columns)
    if any(isinstance(n, exp.Subquery) and isinstance(n.parent, (exp.From, exp.Join))
           for n in body.walk()):
        raise _Skip  # a derived table left in place: its columns are not known here
    return out


def _outer_columns(node: exp.Expression, sides: _Sides) -> list[exp.Column]:
    """The columns of ``node`` that name the enclosing block's relations."""
    out = []
    for col in node.find_all(exp.Column):
        if col.is_star:
            continue
        table, name = col.table.lower(), col.name.lower()
        if table:
            if table not in sides.inner:
                if table not in sides.outer:
                    raise _Skip
                out.append(col)
        elif not any(name in cols for cols in sides.inner.values()) and any(
                name in cols for cols in sides.outer.values()):
            out.append(col)
    return out


def _width(body: exp.Expression) -> int:
    while isinstance(body, (exp.Union, exp.Except, exp.Intersect)):
        body = body.this
    if not isinstance(body, exp.Select) or any(
            isinstance(e, exp.Star) or (isinstance(e, exp.Column) and e.is_star)
            for e in body.expressions):
        raise _Skip
    return len(body.expressions)


# ------------------------------------------------------------------ NOT IN and inequalities


def rewrite_subquery_predicates(select: exp.Select, schema_of: Schema) -> exp.Select:
    """``select`` with its uncorrelated ``NOT IN`` conjuncts as anti-joins and its
    ``EXISTS`` conjuncts correlated by one inequality as extrema, scalar subqueries that
    ``scalar_subqueries.py`` decorrelates (see the module)."""
    if not isinstance(select, exp.Select):
        return select
    outer = block_relations(select, schema_of)
    if outer is None:
        return select
    count = 0

    def rewrite(cond: exp.Expression) -> exp.Expression:
        nonlocal count
        found = _predicate(cond)
        if found is None:
            try:
                new = _quantified(cond, outer, schema_of, f"__p{count + 1}")
            except _Skip:
                return cond
            count += new is not cond
            return new
        negated, body, probe = found
        if not _single_relation(body):
            return cond
        try:
            inner = block_relations(body, schema_of)
            if inner is None:
                raise _Skip
            sides = _Sides(inner, outer)
            alias = f"__p{count + 1}"
            if probe is not None:
                if not negated:
                    return cond
                new = _not_in(probe, body, sides, alias)
            else:
                new = _inequality_exists(body, sides, alias)
                new = exp.Not(this=new) if negated else new
        except _Skip:
            return cond
        count += 1
        return new

    return _rewrite_where(select, rewrite)


_NEGATED = {exp.LT: exp.GTE, exp.LTE: exp.GT, exp.GT: exp.LTE, exp.GTE: exp.LT, exp.EQ: exp.NEQ,
            exp.NEQ: exp.EQ}


def _quantified(cond: exp.Expression, outer: dict[str, list[str]], schema_of: Schema,
                alias: str) -> exp.Expression:
    """``x OP ANY (SELECT c FROM r ..)`` as ``EXISTS (.. x OP c)``, and ``x OP ALL (..)``
    as SQL's rule in anti-joins: no ``c`` is NULL, none fails ``x OP c``, and ``x`` is not
    NULL unless the body is empty; ``cond`` itself if it is no such conjunct."""
    cond = unparen(cond)
    quantifier = cond.expression if type(cond) in _NEGATED else None
    if not isinstance(quantifier, (exp.All, exp.Any)):
        return cond
    body = quantifier.this
    while isinstance(body, exp.Subquery):
        body = body.this
    x = cond.this
    if not _single_relation(body) or len(body.expressions) != 1 or x.find(
            exp.Subquery, exp.Exists, exp.Select):
        raise _Skip
    inner = block_relations(body, schema_of)
    if inner is None:
        raise _Skip
    sides = _Sides(inner, outer)
    if any(sides(c) == "outer" for c in body.find_all(exp.Column) if not c.is_star):
        raise _Skip  # correlated: left to recomputation
    x = x.transform(lambda n: sides.qualified(n) if isinstance(n, exp.Column) else n)
    if isinstance(quantifier, exp.All) and isinstance(cond, exp.NEQ):
        return _not_in(x, body, sides, alias)  # <> ALL is NOT IN
    body = _renamed(body, sides, alias)
    c = body.expressions[0]
    c = c.this if isinstance(c, exp.Alias) else c
    if c.find(exp.AggFunc):
        raise _Skip

    def where(extra: exp.Expression) -> exp.Select:
        out = body.copy()
        out.set("expressions", [exp.Literal.number(1)])
        out.set("where", exp.Where(this=exp.and_(*(p.copy() for p in _where(body)), extra)))
        return out

    def some(kind: type) -> exp.Expression:
        """EXISTS (a row with ``x kind c``)."""
        test = kind(this=x.copy(), expression=c.copy())
        if kind is exp.EQ:
            if not isinstance(x, exp.Column) or not isinstance(c, exp.Column):
                raise _Skip
            return _in(x.copy(), body.copy())
        return _inequality_exists(where(test), sides, alias, renamed=True)

    if isinstance(quantifier, exp.Any):
        return some(type(cond))
    none_null = exp.Not(this=exp.Exists(this=where(exp.Is(this=c.copy(),
                                                              expression=exp.Null()))))
    probe_null = exp.Not(this=exp.Exists(this=where(exp.Is(this=x.copy(),
                                                               expression=exp.Null()))))
    if not isinstance(x, exp.Column):
        raise _Skip  # the NULL probe is keyed on a column
    return exp.and_(none_null, exp.Not(this=some(_NEGATED[type(cond)])), probe_null)


def _renamed(body: exp.Select, sides: _Sides, alias: str) -> exp.Select:
    """``body`` (over one relation) with that relation under ``alias`` and every column of
    it qualified so, so an outer column of the same name or alias cannot be confused."""
    def rename(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Column) and not n.is_star:
            return exp.column(n.name, alias) if sides(n) == "inner" else sides.qualified(n)
        return n

    out = body.copy().transform(rename)
    from_ = out.args.get("from_") or out.args.get("from")
    from_.this.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
    return out


def _scalar(body: exp.Select, value: exp.Expression, extra: list[exp.Expression]
            ) -> exp.Subquery:
    """``(SELECT value FROM body's relation WHERE body's filter AND extra)``."""
    out = body.copy()
    out.set("expressions", [value])
    conditions = [*(c.copy() for c in _where(body)), *extra]
    out.set("where", exp.Where(this=exp.and_(*conditions)) if conditions else None)
    return exp.Subquery(this=out)


def _not_in(probe: exp.Expression, body: exp.Select, sides: _Sides, alias: str
            ) -> exp.Expression:
    """``probe NOT IN (body)`` as three anti-joins: no value is NULL, none equals the
    probe, and the probe is not NULL unless the body is empty.  A body correlated by one
    inequality besides equalities makes each of them an extremum comparison
    (:func:`_inequality_exists`)."""
    if not isinstance(probe, exp.Column) or len(body.expressions) != 1 or any(
            sides(c) == "outer" for c in body.expressions[0].find_all(exp.Column)
            if not c.is_star):
        raise _Skip
    by_inequality = any(
        any(sides(c) == "outer" for c in cond.find_all(exp.Column) if not c.is_star) and not (
            isinstance(cond, exp.EQ) and all(isinstance(x, exp.Column) for x in (
                cond.this, cond.expression)) and {sides(cond.this), sides(
                cond.expression)} == {"inner", "outer"})
        for cond in _where(body))
    probe = sides.qualified(probe)
    renamed = _renamed(body, sides, alias)
    picked = renamed.expressions[0]
    picked = picked.this if isinstance(picked, exp.Alias) else picked
    if not isinstance(picked, exp.Column):
        raise _Skip

    def body_where(extra: exp.Expression | None) -> exp.Select:
        out = renamed.copy()
        out.set("expressions", [exp.Literal.number(1)])
        conditions = [*(c.copy() for c in _where(renamed)), *([extra] if extra else [])]
        out.set("where", exp.Where(this=exp.and_(*conditions)) if conditions else None)
        return out

    def none_where(extra: exp.Expression) -> exp.Expression:
        if by_inequality:
            return exp.Not(this=_inequality_exists(body_where(extra), sides, alias, True))
        return exp.Not(this=exp.Exists(this=body_where(extra)))

    probe_is_null = exp.Is(this=probe.copy(), expression=exp.Null())
    # a NULL probe passes only an empty body: the binder's NULL probe, or with an
    # inequality, ``probe IS NOT NULL OR NOT EXISTS (body)`` by the extremum
    probe_rule = (exp.or_(exp.Not(this=probe_is_null.copy()), exp.Not(
        this=_inequality_exists(body_where(None), sides, alias, True)))
        if by_inequality else none_where(probe_is_null))
    return exp.and_(
        none_where(exp.Is(this=picked.copy(), expression=exp.Null())),
        none_where(exp.EQ(this=picked.copy(), expression=probe.copy())),
        probe_rule)


def _inequality_exists(body: exp.Select, sides: _Sides, alias: str, renamed: bool = False
                       ) -> exp.Expression:
    """``EXISTS (body)`` for a body correlated by equalities and one comparison
    ``inner OP outer``, as that comparison of the group's extremum with the outer value
    (``renamed``: the body is already :func:`_renamed`)."""
    renamed = body if renamed else _renamed(body, sides, alias)
    inequality = None
    rest = []
    for cond in _where(renamed):
        cond = unparen(cond)
        columns = [c for c in cond.find_all(exp.Column) if not c.is_star]
        where = {_sides_of(c, alias) for c in columns}
        if where <= {"inner"} or (isinstance(cond, exp.EQ) and where == {"inner", "outer"}
                                   and isinstance(cond.this, exp.Column)
                                   and isinstance(cond.expression, exp.Column)):
            rest.append(cond)
            continue
        if type(cond) not in FLIPPED_COMPARISON or isinstance(cond, exp.EQ) or (
                inequality is not None):
            raise _Skip
        left = {_sides_of(c, alias) for c in cond.this.find_all(exp.Column)}
        right = {_sides_of(c, alias) for c in cond.expression.find_all(exp.Column)}
        if left == {"inner"} and right == {"outer"}:
            inequality = (type(cond), cond.this, cond.expression)
        elif left == {"outer"} and right == {"inner"}:
            inequality = (FLIPPED_COMPARISON[type(cond)], cond.expression, cond.this)
        else:
            raise _Skip
    if inequality is None:
        raise _Skip  # equalities only: the binder's semijoin
    op, inner, outer_value = inequality
    shell = renamed.copy()
    shell.set("where", exp.Where(this=exp.and_(*[c.copy() for c in rest])) if rest else None)

    def extremum(kind: type) -> exp.Subquery:
        return _scalar(shell, kind(this=inner.copy()), [])

    def compare(kind: type, agg: type) -> exp.Expression:
        return kind(this=extremum(agg), expression=outer_value.copy())

    if op is exp.NEQ:
        test = exp.or_(compare(exp.NEQ, exp.Min), compare(exp.NEQ, exp.Max))
    else:
        test = compare(op, exp.Min if op in (exp.LT, exp.LTE) else exp.Max)
    return exp.Coalesce(this=exp.paren(test), expressions=[exp.false()])


def _sides_of(col: exp.Column, alias: str) -> str:
    """After :func:`_renamed`, the body's own columns are the ones under ``alias``."""
    return "inner" if col.table.lower() == alias else "outer"
