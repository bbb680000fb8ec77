"""Outer joins as maintainable SQL: ``L LEFT JOIN R ON c`` is the inner join of ``L`` and
``R`` on ``c``, plus the rows of ``L`` with no match in ``R``, padded with NULLs::

    SELECT L.*, R.* FROM L JOIN R ON c
    UNION ALL
    SELECT L.*, NULL, ... FROM L WHERE NOT EXISTS (SELECT 1 FROM R WHERE c)

Both branches are forms upkeep maintains incrementally (a join; an anti-join of the left rows
with ``R``'s key counts, so a left row changes only when its key's match count crosses zero),
so a padded row appears when a left row's last match goes and disappears when a match
arrives.  ``RIGHT`` swaps the sides and ``FULL`` adds the right side's unmatched rows.

:func:`rewrite_outer_joins` replaces a SELECT block's FROM clause, up to and including its
last outer join, by a derived table of that union, unless its outer joins are LEFT joins
that :mod:`upkeep.padded_joins` turns into inner joins (one join tree instead of a union) (which the catalog then maintains as a
hidden helper view), with every column renamed ``<alias>__<column>`` and the block's column
references rewritten to it.  It rewrites only what the anti-join can maintain: ``ON`` a
conjunction of equalities between the two sides, filters on either side alone (on the
preserved side, a row failing it is unmatched: a branch of its own) and at most one
comparison of the sides (``r.y > l.x``: the ``NOT EXISTS`` then compares with the
extremum of the matching rows, :mod:`upkeep.subquery_predicates`, so the union is always a
helper view, which those rewrites reach); each side of a ``FULL`` join and the right side
of a ``RIGHT`` join a single relation; ``*`` and ``t.*`` listed as their columns first.
Anything else is left as it is (and recomputed by DuckDB, as before).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from .expressions import FLIPPED_COMPARISON, conjuncts, unparen
from .padded_joins import padded_left_joins, qualified, relation_in_from
from .plan import distinct_names
from .scalar_subqueries import fresh_alias
from .types import SqlType

Schema = Callable[[str], list[tuple[str, SqlType]]]


class _Skip(Exception):
    """The block is not one this rewrite maintains: leave it to recomputation."""


def rewrite_outer_joins(select: exp.Select, schema_of: Schema, padded: bool = True
                        ) -> exp.Select:
    """``select`` with its outer joins as a derived table (see the module), or unchanged.
    ``padded``: LEFT joins as padded relations where they can be (not for ``lftj``, whose
    triejoin cannot join NULL keys)."""
    joins = list(select.args.get("joins") or [])
    if not any((j.args.get("side") or "").upper() in ("LEFT", "RIGHT", "FULL") for j in joins):
        return select
    try:
        select = _stars_listed(_using_as_on(select, schema_of), schema_of)
        if select.args.get("order"):  # an ORDER BY names outputs (kept for a top-k)
            names = [e.alias_or_name.lower() for e in select.expressions]
            if len(set(names)) != len(names):
                raise _Skip  # a repeated name: left whole to the top-k split, or DuckDB
        inner = padded_left_joins(select, schema_of) if padded else None
        if inner is not None:
            return inner
        return _rewrite(select, list(select.args.get("joins") or []), schema_of)
    except _Skip:
        return select


def _stars_listed(select: exp.Select, schema_of: Schema) -> exp.Select:
    """``*`` and ``t.*`` in the select list as the columns they stand for, each relation's
    in its order, relations in FROM order (as DuckDB lists them; repeated names are made
    distinct later, as for any select list), after :func:`_using_as_on`; a ``*`` with
    ``EXCLUDE`` / ``REPLACE`` is left to DuckDB."""
    if not any(_is_star(e) for e in select.expressions):
        return select
    joins = list(select.args.get("joins") or [])
    from_ = select.args.get("from_") or select.args.get("from")
    relations = [_relation(item, schema_of) for item in [from_.this, *(j.this for j in joins)]]
    listed: list[exp.Expression] = []
    for e in select.expressions:
        if not _is_star(e):
            listed.append(e)
            continue
        if _modified(e if isinstance(e, exp.Star) else e.this):
            raise _Skip
        table = "" if isinstance(e, exp.Star) else e.table.lower()
        chosen = [r for r in relations if not table or r[0] == table]
        if not chosen:
            raise _Skip  # t.* of no relation here: the binder says so
        listed += [exp.column(c, alias, quoted=True) for alias, _, columns in chosen
                   for c in columns]
    out = select.copy()
    out.set("expressions", listed)
    return out


def _is_star(e: exp.Expression) -> bool:
    return isinstance(e, exp.Star) or (isinstance(e, exp.Column) and e.is_star)


def _modified(star: exp.Star) -> bool:
    """Whether ``star`` has ``EXCLUDE``, ``REPLACE`` or ``RENAME``: left to DuckDB."""
    return any(star.args.get(k) for k in star.args)


def _using_as_on(select: exp.Select, schema_of: Schema) -> exp.Select:
    """``JOIN .. USING (c)`` and ``NATURAL JOIN`` as ``ON`` equalities, with DuckDB's rule
    for the one column ``c`` they leave: the left side's for inner and LEFT joins, the right
    side's for RIGHT joins, ``COALESCE(left, right)`` for FULL joins.  ``*`` lists that
    column once, where the left side's is, as DuckDB does (``t.*`` lists ``t``'s own)."""
    joins = list(select.args.get("joins") or [])
    if not any(j.args.get("using") or (j.args.get("method") or "").upper() == "NATURAL"
               for j in joins):
        return select
    from_ = select.args.get("from_") or select.args.get("from")
    seen = [_relation(from_.this, schema_of)]
    merged: dict[str, exp.Expression] = {}
    owner: dict[str, str] = {}  # a merged column's left relation, where ``*`` lists it
    dropped: dict[str, set[str]] = {}  # ... and the right relation whose copy it leaves
    out = select.copy()
    new_joins = []
    for join in out.args.get("joins") or []:
        right = _relation(join.this, schema_of)
        natural = (join.args.get("method") or "").upper() == "NATURAL"
        if natural:
            names = [c for c in right[2] if any(c in r[2] for r in seen)]
        else:
            names = [u.name.lower() for u in join.args.get("using") or []]
        if names:
            side = (join.args.get("side") or "").upper()
            equalities = []
            for name in names:
                owners = [r[0] for r in seen if name in r[2]]
                if len(owners) != 1 or name in merged or name not in right[2]:
                    raise _Skip  # merged twice, or ambiguous: left to DuckDB
                left = exp.column(name, owners[0], quoted=True)
                other = exp.column(name, right[0], quoted=True)
                equalities.append(exp.EQ(this=left, expression=other))
                merged[name] = (other.copy() if side == "RIGHT" else exp.Coalesce(
                    this=left.copy(), expressions=[other.copy()]) if side == "FULL"
                    else left.copy())
                owner[name] = owners[0]
                dropped.setdefault(name, set()).add(right[0])
            join = join.copy()
            join.set("using", None)
            join.set("method", None)
            join.set("on", exp.and_(*equalities))
        seen.append(right)
        new_joins.append(join)
    out.set("joins", new_joins)
    listed = []
    for e in out.expressions:
        if not isinstance(e, exp.Star):  # (``t.*``: :func:`_stars_listed`)
            listed.append(e)
            continue
        if _modified(e):
            raise _Skip
        # a merged column once, at its left relation's place; the right one's left out
        listed += [merged[c].copy().as_(c, quoted=True) if owner.get(c) == alias
                   else exp.column(c, alias, quoted=True)
                   for alias, _, columns in seen for c in columns
                   if c not in merged or alias not in dropped[c]]
    out.set("expressions", listed)

    def rename(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and not node.table and node.name.lower() in merged:
            return merged[node.name.lower()].copy()
        return node

    for key in ("where", "group", "having", "qualify", "order"):
        value = out.args.get(key)
        if value is not None:
            out.set(key, _rename_outer(value, rename, schema_of))
    out.set("expressions", [
        e if not (isinstance(e, exp.Column) and not e.table and e.name.lower() in merged)
        else _rename_outer(e, rename, schema_of).as_(e.name)
        for e in (_rename_outer(x, rename, schema_of) if not isinstance(x, exp.Column)
                  else x for x in out.expressions)])
    for j in out.args.get("joins") or []:
        if j.args.get("on") is not None:
            j.set("on", _rename_outer(j.args["on"], rename, schema_of))
    return out


def _relation(item: exp.Expression, schema_of: Schema) -> tuple[str, exp.Table, list[str]]:
    found = relation_in_from(item, schema_of)
    if found is None:
        raise _Skip
    alias, table, types = found
    return alias, table, list(types)


def _rewrite(select: exp.Select, joins: list[exp.Join], schema_of: Schema) -> exp.Select:
    if any(_is_star(e) for e in select.expressions):
        raise _Skip
    last = max(i for i, j in enumerate(joins)
               if (j.args.get("side") or "").upper() in ("LEFT", "RIGHT", "FULL"))
    from_ = select.args.get("from_") or select.args.get("from")
    first = _relation(from_.this, schema_of)
    relations = [first]  # (alias, table, columns) of the part rewritten so far
    types = {first[0]: dict(schema_of(first[1].name.lower()))}
    inner: list[exp.Expression] = []  # ON conditions of inner joins inside the part
    select, inner = _push_filters(select, joins, last, schema_of)
    branches: list[exp.Select] | None = None
    for join in joins[:last + 1]:
        if join.args.get("using") or (join.args.get("method") or "").upper() == "NATURAL":
            raise _Skip
        right = _relation(join.this, schema_of)
        if right[0] in types:
            raise _Skip
        types[right[0]] = dict(schema_of(right[1].name.lower()))
        side = (join.args.get("side") or "").upper()
        on = join.args.get("on")
        if not side:
            if (join.args.get("kind") or "").upper() not in ("", "INNER", "CROSS"):
                raise _Skip
            if branches is not None:  # an inner join after an outer one: every branch
                # (one whose NULL-padded column the condition compares matches nothing)
                branches = [_join(b, right, on) for b in branches
                            if not _padded_match_nothing(b, on)]
                if not branches:
                    raise _Skip
            else:
                inner.extend(conjuncts(on))
            relations.append(right)
            continue
        if on is None:
            raise _Skip
        on = _qualify(on, {a: types[a] for a in [*(r[0] for r in relations), right[0]]})
        if branches is None:
            branches = [_inner_part(relations, inner)]
        if side == "LEFT":
            out = []
            for b in branches:
                if _padded_match_nothing(b, on):  # every row is padded
                    out.append(_pad(b, [right], types))
                else:
                    out += [_join(b, right, on), *(_pad(u, [right], types)
                                                   for u in _unmatched(b, right, on))]
            branches = out
        else:
            if len(relations) != 1 or inner or len(branches) != 1:
                raise _Skip  # the other side must be one relation for its anti-join
            left = relations[0]
            unmatched = [_pad(u, [left], types)
                         for u in _unmatched(_inner_part([right], []), left, on)]
            joined = _join(branches[0], right, on)
            if side == "RIGHT":
                branches = [joined, *unmatched]
            else:  # FULL
                mine = [_pad(u, [right], types) for u in _unmatched(branches[0], right, on)]
                branches = [joined, *mine, *unmatched]
        relations.append(right)
    aliases = [r[0] for r in relations]
    # each relation's column flattened as <alias>__<column>, made distinct (alias x with
    # column y__z and alias x__y with column z would both be x__y__z)
    pairs = [(a, c) for a in aliases for c in types[a]]
    flat = dict(zip(pairs, distinct_names([f"{a}__{c}" for a, c in pairs]), strict=True))
    union: exp.Expression = branches[0]
    for b in branches[1:]:
        union = exp.Union(this=union, expression=b, distinct=False)
    name = fresh_alias("__outer", select)
    out = select.copy()
    out.set("from_" if "from_" in out.args or "from" not in out.args else "from",
            exp.From(this=exp.Subquery(this=union, alias=exp.TableAlias(
                this=exp.to_identifier(name)))))
    out.set("joins", [j.copy() for j in joins[last + 1:]] or None)

    def rename(node: exp.Expression) -> exp.Expression:
        if not isinstance(node, exp.Column) or isinstance(node.this, exp.Star):
            return node
        table = node.table.lower()
        column = node.name.lower()
        if table:
            if table not in types:
                return node
            if column not in types[table]:
                raise _Skip
            return exp.column(flat[table, column], name, quoted=True)
        owners = [a for a in aliases if column in types[a]]
        if len(owners) > 1:
            raise _Skip  # ambiguous: the binder would refuse it
        return exp.column(flat[owners[0], column], name, quoted=True) if owners else node

    outputs = {}  # an ORDER BY of an output column names the output (kept for a top-k)
    for e in select.expressions:
        if isinstance(e, exp.Column):
            outputs[e.sql().lower()] = e.name
        elif isinstance(e, exp.Alias) and isinstance(e.this, exp.Column):
            outputs[e.this.sql().lower()] = e.alias
    order = out.args.get("order")
    if order is not None:
        out.set("order", order.transform(
            lambda n: exp.column(outputs[n.sql().lower()], quoted=True) if isinstance(n, exp.Column)
            and n.sql().lower() in outputs else rename(n)))
    for key in ("expressions", "where", "group", "having", "qualify"):
        value = out.args.get(key)
        if isinstance(value, list):
            out.set(key, [_rename_outer(v, rename, schema_of) for v in value])
        elif value is not None:
            out.set(key, _rename_outer(value, rename, schema_of))
    for j in out.args.get("joins") or []:
        if j.args.get("on") is not None:
            j.set("on", j.args["on"].transform(rename))
    # an unaliased column keeps its own name, as it would have over the original FROM
    out.set("expressions", [
        e if isinstance(e, exp.Alias) or not isinstance(orig, exp.Column)
        else e.as_(exp.to_identifier(orig.name))  # quoted where the name needs it
        for e, orig in zip(out.expressions, select.expressions, strict=True)])
    def value(branch: exp.Select, a: str, c: str) -> exp.Expression:
        if _is_null(branch, a):
            return exp.Cast(this=exp.Null(), to=exp.DataType.build(types[a][c].sql()))
        return exp.column(c, a, quoted=True)

    source = {flat_name: pair for pair, flat_name in flat.items()}
    compared = any(b.args.get("compared") for b in branches)
    for branch in branches:
        branch.set("compared", None)
    if _projection_only(out, name) and not compared:  # the union is the block: one view
        outputs = [(e.alias, source[e.this.name]) for e in out.expressions]
        for branch in branches:
            branch.set("expressions", [value(branch, a, c).as_(alias)
                                       for alias, (a, c) in outputs])
            branch.set("padded", None)
        return union
    # the derived table carries only the columns the block reads (at least one)
    read = {c.name for c in out.find_all(exp.Column) if c.table == name}
    carried = [(a, c) for a, c in pairs if flat[a, c] in read] or [
        (aliases[0], next(iter(types[aliases[0]])))]
    for branch in branches:
        branch.set("expressions", [value(branch, a, c).as_(flat[a, c], quoted=True)
                                   for a, c in carried])
        branch.set("padded", None)
    return out


def _projection_only(select: exp.Select, name: str) -> bool:
    """Whether ``select`` only lists columns of ``name`` (no filter, grouping, DISTINCT,
    order or further join), so the derived table's branches can list them themselves."""
    return not any(select.args.get(k) for k in (
        "where", "group", "having", "distinct", "qualify", "order", "limit", "offset",
        "joins")) and all(isinstance(e, exp.Alias) and isinstance(e.this, exp.Column)
                          and e.this.table == name for e in select.expressions)


def _rename_outer(node: exp.Expression, rename: Callable[[exp.Expression], exp.Expression],
                  schema_of: Schema) -> exp.Expression:
    """``node`` with ``rename`` applied to the columns of the block, not to those a
    subquery in it reads from its own relations (``k IN (SELECT k FROM t)``)."""
    node = node.copy()
    root = node
    for col in list(node.find_all(exp.Column)):
        if isinstance(col.this, exp.Star) or _shadowed(col, root, schema_of):
            continue
        new = rename(col)
        if new is not col:
            if col is root:
                return new
            col.replace(new)
    return root


def _shadowed(col: exp.Column, root: exp.Expression, schema_of: Schema) -> bool:
    """Whether a subquery between ``col`` and ``root`` has a relation ``col`` names."""
    table, name = col.table.lower(), col.name.lower()
    scope = col.parent
    while scope is not None and scope is not root.parent:
        if isinstance(scope, exp.Select):
            from_ = scope.args.get("from_") or scope.args.get("from")
            items = [from_.this] if from_ is not None else []
            for item in items + [j.this for j in scope.args.get("joins") or []]:
                alias = (item.alias_or_name or "").lower()
                if table:
                    if table == alias:
                        return True
                    continue
                if not isinstance(item, exp.Table):
                    raise _Skip  # a derived table's columns are not known here
                try:
                    if name in (c for c, _ in schema_of(item.name.lower())):
                        return True
                except Exception as exc:  # noqa: BLE001 - unknown: leave the block
                    raise _Skip from exc
        scope = scope.parent
    return False


def _qualify(on: exp.Expression, types: dict[str, dict]) -> exp.Expression:
    """``on`` with each unqualified column named by the one relation that has it."""
    out = qualified(on, types)
    if out is None:
        raise _Skip
    return out


def _push_filters(select: exp.Select, joins: list[exp.Join], last: int, schema_of: Schema
                  ) -> tuple[exp.Select, list[exp.Expression]]:
    """The WHERE conjuncts that read only the relations before the first outer join, moved
    into the inner part (so it is not a cross product of them), when every outer join is a
    LEFT one (a filter on the preserved side commutes with a LEFT join; on a side that a
    RIGHT or FULL join pads, it does not).  Returns the block without them, and them."""
    where = select.args.get("where")
    sides = [(j.args.get("side") or "").upper() for j in joins[:last + 1]]
    if where is None or any(side in ("RIGHT", "FULL") for side in sides):
        return select, []
    first_outer = sides.index("LEFT")
    from_ = select.args.get("from_") or select.args.get("from")
    before = [from_.this, *(j.this for j in joins[:first_outer])]
    columns = {_relation(t, schema_of)[0]: set(_relation(t, schema_of)[2]) for t in before}
    later = [_relation(j.this, schema_of) for j in joins[first_outer:last + 1]]
    later_columns = {c for _, _, cols in later for c in cols}

    def movable(cond: exp.Expression) -> bool:
        if cond.find(exp.Subquery):
            return False
        for c in cond.find_all(exp.Column):
            table, name = c.table.lower(), c.name.lower()
            if table and (table not in columns or name not in columns[table]):
                return False
            if not table and (name in later_columns or sum(
                    name in cols for cols in columns.values()) != 1):
                return False
        return True

    moved, kept = [], []
    for cond in conjuncts(where.this):
        (moved if movable(cond) else kept).append(cond)
    if not moved:
        return select, []
    out = select.copy()
    out.set("where", exp.Where(this=exp.and_(*[c.copy() for c in kept])) if kept else None)
    return out, [c.copy() for c in moved]



def _inner_part(relations: list, inner: list[exp.Expression]) -> exp.Select:
    """SELECT ... FROM the relations joined by ``inner``."""
    out = exp.select("1").from_(relations[0][1].copy())
    for _, table, _ in relations[1:]:
        out = out.join(table.copy(), join_type="CROSS")
    if inner:
        out = out.where(exp.and_(*[c.copy() for c in inner]))
    return out


def _join(branch: exp.Select, right, on: exp.Expression | None) -> exp.Select:
    out = branch.copy()
    if _is_null(out, right[0]):
        raise _Skip  # a join on a padded side: NULLs match nothing (not maintained here)
    return out.join(right[1].copy(), on=on.copy() if on is not None else None,
                    join_type="INNER" if on is not None else "CROSS")


def _unmatched(branch: exp.Select, other, on: exp.Expression) -> list[exp.Select]:
    """``branch`` rows with no match in ``other`` on ``on``, as branches.  A conjunct that
    reads only the branch's own relations (a filter on the preserved side, ``ON l.a = r.b
    AND l.x > 1``) matches nothing where it does not hold: those rows are unmatched
    whatever ``other`` holds, and the rest are unmatched when the anti-join on the other
    conjuncts finds nothing (two disjoint branches)."""
    alias = other[0]
    own, rest = [], []
    for cond in conjuncts(on):
        tables = {c.table.lower() for c in cond.find_all(exp.Column)}
        mine = tables and alias not in tables and "" not in tables
        (own if mine and not cond.find(exp.Subquery, exp.Exists) else rest).append(cond)
    if not own:
        return [_anti(branch, other, on)]
    if not rest:
        raise _Skip  # nothing of ``other`` in ON: a cross product, left to DuckDB
    # each as a condition (a number holds when not 0, as DuckDB reads it), NULL as false
    holds = exp.Coalesce(this=exp.and_(*[exp.Cast(this=exp.paren(c.copy()),
                                                  to=exp.DataType.build("BOOLEAN"))
                                         for c in own]), expressions=[exp.false()])
    return [branch.copy().where(exp.Not(this=holds)),
            _anti(branch.copy().where(holds.copy()), other,
                  exp.and_(*[c.copy() for c in rest]))]


def _anti(branch: exp.Select, right, on: exp.Expression) -> exp.Select:
    """``branch`` rows without a match in ``right`` on ``on``: what the anti-join
    maintains (:mod:`upkeep.subquery_predicates`), equalities of a column of each side,
    filters on ``right`` alone, and at most one comparison (``<``, ``<=``, ``>``, ``>=``,
    ``<>``) of an expression of ``right``'s columns with one of the other side's, kept as
    that comparison with the extremum of the matching rows."""
    alias = right[0]
    compared = False
    for cond in conjuncts(on):
        cond = unparen(cond)
        tables = {c.table.lower() for c in cond.find_all(exp.Column)}
        if "" in tables:
            raise _Skip  # unqualified: which side is not known here
        if tables == {alias}:
            continue
        if (isinstance(cond, exp.EQ) and alias in tables and len(tables) == 2
                and isinstance(cond.this, exp.Column) and isinstance(cond.expression,
                                                                     exp.Column)):
            continue
        if compared or not _compares_sides(cond, alias):
            raise _Skip
        compared = True
    sub = exp.select("1").from_(right[1].copy()).where(on.copy())
    out = branch.copy().where(exp.Not(this=exp.Exists(this=sub)))
    if compared:  # kept as a helper view, whose rewrites turn it into the extremum's
        out.set("compared", exp.true())
    return out


def _compares_sides(cond: exp.Expression, alias: str) -> bool:
    """Whether ``cond`` compares (not ``=``) an expression reading only ``alias`` with one
    reading only the other side's relations."""
    if type(cond) not in FLIPPED_COMPARISON or isinstance(cond, exp.EQ):
        return False
    sides = set()
    for operand in (cond.this, cond.expression):
        tables = {c.table.lower() for c in operand.find_all(exp.Column)}
        if not tables or operand.find(exp.Subquery) or (alias in tables and len(tables) > 1):
            return False  # a constant, a subquery, or both sides in one operand
        sides.add(alias in tables)
    return sides == {True, False}


def _pad(branch: exp.Select, relations: list, types: dict) -> exp.Select:
    """Mark ``relations``' columns NULL in ``branch`` (set when its SELECT list is made)."""
    out = branch.copy()
    out.set("padded", exp.Tuple(expressions=[exp.to_identifier(a) for a, _, _ in relations]
                                + (out.args["padded"].expressions
                                   if out.args.get("padded") else [])))
    return out


def _padded_match_nothing(branch: exp.Select, on: exp.Expression | None) -> bool:
    """Whether ``on`` reads ``branch``'s NULL-padded relations, and then holds on none of
    its rows: some conjunct compares a padded column itself (NULL: never true).  One that
    reads them otherwise (``r.id IS NULL``, ``s.z > COALESCE(r.y, 0)``) may hold on NULLs,
    which this rewrite does not follow: left to DuckDB."""
    if not _reads_padded(branch, on):
        return False
    for cond in conjuncts(on):
        cond = unparen(cond)
        if type(cond) in FLIPPED_COMPARISON and any(
                isinstance(side, exp.Column) and _is_null(branch, side.table.lower())
                for side in (unparen(cond.this), unparen(cond.expression))):
            return True
    raise _Skip


def _reads_padded(branch: exp.Select, on: exp.Expression | None) -> bool:
    return on is not None and any(_is_null(branch, c.table.lower())
                                  for c in on.find_all(exp.Column))


def _is_null(branch: exp.Select, alias: str) -> bool:
    padded = branch.args.get("padded")
    return padded is not None and any(i.name == alias for i in padded.expressions)
