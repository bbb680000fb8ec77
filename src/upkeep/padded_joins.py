"""LEFT joins as inner joins with a padded relation, so one join tree keeps the whole view.

``T LEFT JOIN R ON R.a = T.x AND <filters on R>`` equals the inner join of ``T`` with

    R' = SELECT R.a AS __pad_key0, R.* FROM R WHERE R.a IS NOT NULL AND <filters>
         UNION ALL
         SELECT DISTINCT T.x, NULL, ... FROM T
         WHERE NOT EXISTS (SELECT 1 FROM R WHERE R.a = T.x AND <filters>)

on ``T.x IS NOT DISTINCT FROM R'.__pad_key0``: a row of ``T`` meets its matches in ``R``,
or, when it has none (``T.x`` NULL included), the one all-NULL row of its key.  ``R'`` is
an ordinary maintained view (a union of a filter and a DISTINCT anti-join: a pad appears
when its key's last match goes and disappears when a match arrives), and the view itself
is an inner join, so Dynamic Yannakakis keeps it in one join tree, with its aggregates,
constant-delay enumeration and compact representation ("the join tree allows it":
``dynamic-yannakakis-iedyn.txt`` section 3 over the padded relation).  The alias of ``R``
is kept, so the rest of the block (select list, WHERE, GROUP BY, later joins) reads ``R``'s
columns as before: NULL in a pad, as the outer join gives.

:func:`padded_left_joins` rewrites a block whose outer joins are all LEFT joins (or a
first ``RIGHT`` join of two relations, swapped), each of a relation ``R`` by equalities
with the columns of one earlier relation ``T``, plus filters on ``R``.  When a LEFT join
pads ``T`` too (a chain), the keys to pad are those of ``T``'s padded relation, NULL
included.  Anything else returns None, and :mod:`upkeep.outer_joins` maintains it as a union.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from .expressions import conjuncts
from .types import SqlType

Schema = Callable[[str], list[tuple[str, SqlType]]]

#: the padded relation's join key columns (one per equality of the ON condition)
PAD_KEY = "__pad_key"


def is_pad(columns: list[tuple[str, SqlType]], row: tuple) -> bool:
    """Whether ``row`` of a relation with ``columns`` is a padded relation's NULL row (a
    real row has its key columns of ``R`` set, the pad only its ``__pad_key`` ones)."""
    return bool(columns) and columns[0][0] == f"{PAD_KEY}0" and all(
        v is None for (name, _), v in zip(columns, row, strict=True)
        if not name.startswith(PAD_KEY))


def padded_left_joins(select: exp.Select, schema_of: Schema) -> exp.Select | None:
    """``select`` with each LEFT join an inner join of a padded relation, or None."""
    if any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and e.is_star)
           for e in select.expressions):
        return None  # the padded relation has a key column more than R
    from_ = select.args.get("from_") or select.args.get("from")
    joins = [j.copy() for j in select.args.get("joins") or []]
    if from_ is None or not joins:
        return None
    first = from_.this.copy()
    if _side(joins[0]) == "RIGHT":  # A RIGHT JOIN B is B LEFT JOIN A
        first, joins[0] = joins[0].this.copy(), joins[0].copy()
        joins[0].set("this", from_.this.copy())
        joins[0].set("side", "LEFT")
    relations = {}
    start = relation_in_from(first, schema_of)
    if start is None:
        return None
    relations[start[0]] = start[1:]
    padded: dict[str, exp.Subquery] = {}  # alias -> its padded relation
    out_joins = []
    for join in joins:
        right = relation_in_from(join.this, schema_of)
        if right is None or right[0] in relations or join.args.get("using") or (
                join.args.get("method") or "").upper() == "NATURAL":
            return None
        relations[right[0]] = right[1:]
        side = _side(join)
        kind = (join.args.get("kind") or "").upper()
        if not side:
            if kind not in ("", "INNER", "CROSS"):
                return None
            out_joins.append(join)
            continue
        if side != "LEFT" or kind not in ("", "OUTER") or join.args.get("on") is None:
            return None
        padded_join = _padded(join, right, relations, padded)
        if padded_join is None:
            return None
        out_joins.append(padded_join)
        padded[right[0]] = padded_join.this
    if not padded:
        return None
    out = select.copy()
    out.set("from_" if "from_" in out.args or "from" not in out.args else "from",
            exp.From(this=first))
    out.set("joins", out_joins)
    return out


def _side(join: exp.Join) -> str:
    return (join.args.get("side") or "").upper()


def relation_in_from(item: exp.Expression, schema_of: Schema
                     ) -> tuple[str, exp.Table, dict[str, SqlType]] | None:
    """(alias, table, column types) of a named relation in FROM, or None (also for
    ``outer_joins.py``)."""
    if not isinstance(item, exp.Table) or item.args.get("db"):
        return None
    try:
        columns = dict(schema_of(item.name.lower()))
    except Exception:  # noqa: BLE001 - an unknown relation: the binder says so
        return None
    return (item.alias or item.name).lower(), item, columns


def _padded(join: exp.Join, right: tuple, relations: dict, padded: dict[str, exp.Subquery]
            ) -> exp.Join | None:
    """The LEFT ``join`` of ``right`` as an inner join of its padded relation, or None."""
    alias, table, types = right
    keys: list[tuple[exp.Column, exp.Column]] = []  # (column of R, column of T)
    filters: list[exp.Expression] = []
    owner = None
    for cond in conjuncts(join.args["on"]):
        cond = qualified(cond, {a: types for a, (_, types) in relations.items()})
        if cond is None or cond.find(exp.Subquery, exp.Exists, exp.AggFunc):
            return None
        tables = {c.table.lower() for c in cond.find_all(exp.Column)}
        if tables == {alias}:
            filters.append(cond)
            continue
        if not (isinstance(cond, exp.EQ) and isinstance(cond.this, exp.Column)
                and isinstance(cond.expression, exp.Column) and alias in tables
                and len(tables) == 2):
            return None
        mine, other = ((cond.this, cond.expression) if cond.this.table.lower() == alias
                       else (cond.expression, cond.this))
        t = other.table.lower()
        if owner not in (None, t):
            return None  # keys of two relations
        if relations[t][1][other.name.lower()] != types[mine.name.lower()]:
            return None
        owner = t
        keys.append((mine, other))
    if not keys:
        return None
    key_names = [f"{PAD_KEY}{i}" for i in range(len(keys))]
    matched = exp.select(
        *[r.copy().as_(k, quoted=True) for (r, _), k in zip(keys, key_names, strict=True)],
        *[exp.column(c, alias, quoted=True).as_(c, quoted=True) for c in types]).from_(table.copy()).where(
        exp.and_(*[exp.Not(this=exp.Is(this=r.copy(), expression=exp.Null()))
                   for r, _ in keys], *[f.copy() for f in filters]))
    # the keys to pad: the owner's values, of its padded relation when a LEFT join pads it
    # too (whose NULL rows need this relation's NULL row: a chain of LEFT joins)
    owner_table = padded.get(owner, relations[owner][0])
    probe = exp.select("1").from_(table.copy()).where(exp.and_(
        *[exp.EQ(this=r.copy(), expression=t.copy()) for r, t in keys],
        *[f.copy() for f in filters]))
    pads = exp.select(
        *[t.copy().as_(k, quoted=True) for (_, t), k in zip(keys, key_names, strict=True)],
        *[exp.Cast(this=exp.Null(), to=exp.DataType.build(typ.sql())).as_(c, quoted=True)
          for c, typ in types.items()]).from_(owner_table.copy()).where(
        exp.Not(this=exp.Exists(this=probe))).distinct()
    union = exp.Union(this=matched, expression=pads, distinct=False)
    out = join.copy()
    out.set("this", exp.Subquery(this=union, alias=exp.TableAlias(
        this=exp.to_identifier(alias))))
    out.set("side", None)
    out.set("kind", None)
    out.set("on", exp.and_(*[exp.NullSafeEQ(this=t.copy(), expression=exp.column(
        k, alias, quoted=True)) for (_, t), k in zip(keys, key_names, strict=True)]))
    return out


def _in_subquery(node: exp.Expression, root: exp.Expression) -> bool:
    """Whether ``node`` lies in a query nested in ``root`` (a subquery's own scope)."""
    parent = node.parent
    while parent is not None and parent is not root:
        if isinstance(parent, exp.Query):
            return True
        parent = parent.parent
    return False


def qualified(cond: exp.Expression, types: dict[str, dict]) -> exp.Expression | None:
    """``cond`` with every column named by the alias of the one relation (of ``types``:
    alias -> column types) that has it, or None if one is unknown or ambiguous.  A column
    inside a subquery of ``cond`` is left as written: the subquery's own relations come
    first when its name is looked up (``s.e IN (SELECT e FROM t)`` reads t's ``e``)."""
    out = cond.copy()
    for col in list(out.find_all(exp.Column)):
        if _in_subquery(col, out):
            continue
        name, table = col.name.lower(), col.table.lower()
        if table:
            if table not in types or name not in types[table]:
                return None
            continue
        owners = [a for a, columns in types.items() if name in columns]
        if len(owners) != 1:
            return None
        new = exp.column(col.name, owners[0], quoted=True)
        if col is out:
            return new
        col.replace(new)
    return out
