"""Why-provenance of ordinary views: the combinations of input rows that derive a row.

A view created ``WITH (provenance = 'why')`` gets a hidden *witness view* beside it: the
same FROM and WHERE, no grouping or projection, selecting every column of every relation
it reads, prefixed by the view's output key (its GROUP BY columns, or its whole row for a
projection).  The witness view is maintained like any other (Dynamic Yannakakis keeps a
join compactly, ``papers/dynamic-yannakakis-iedyn.txt``), so the provenance is kept
incrementally with the view.  ``db.why(view, row)`` reads the witnesses whose key is the
row's: each is one derivation, a product of one row of each relation (the why-provenance of
Buneman, Khanna and Tan; the recursive views' minimal sums of products,
``papers/recursive-views-absorption-provenance.txt``, answer the same question for
``WITH RECURSIVE``).  A UNION [ALL] of such blocks gets a witness view per block.  Over
provenance tables each input row's UP[X] annotation says which
transactions made it (``papers/update-provenance-hyperplane-transactions.txt``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from .errors import UnsupportedError
from .expressions import conjuncts
from .types import SqlType


@dataclass(frozen=True)
class WitnessLayout:
    """How a witness row splits: the output key's width, then each relation's columns."""

    relations: tuple[tuple[str, int], ...]  # (relation, number of columns) in FROM order
    key_positions: tuple[int, ...]  # positions of the view's row that form the key

    def split(self, witness: tuple) -> tuple[tuple, list[tuple[str, tuple]]]:
        """The witness's key and its rows, one per relation."""
        k = len(self.key_positions)
        key, rest, rows = witness[:k], witness[k:], []
        for relation, width in self.relations:
            rows.append((relation, tuple(rest[:width])))
            rest = rest[width:]
        return key, rows


def witness_name(view: str) -> str:
    return f"{view}__why"


def _refuse(view: str, what: str) -> UnsupportedError:
    return UnsupportedError(f"why-provenance of view {view}: {what} is not supported (one "
                            "SELECT block joining tables or views, with WHERE, GROUP BY, "
                            "HAVING and DISTINCT, or a UNION [ALL] of such blocks without "
                            "aggregates)")


def witness_queries(view: str, query: exp.Expression,
                    schema_of: Callable[[str], list[tuple[str, SqlType]]]
                    ) -> list[tuple[str, exp.Select, WitnessLayout]]:
    """The witness views of ``view``: (hidden name, query, layout) for its SELECT block, or
    one per block of a UNION [ALL] (a row's derivations are those of every block that
    yields it; a block's key is its whole row, so blocks may not aggregate)."""
    if not isinstance(query, exp.Union):
        witness, layout = witness_query(view, query, schema_of)
        return [(witness_name(view), witness, layout)]
    blocks: list[exp.Expression] = []

    def flatten(node: exp.Expression) -> None:
        while isinstance(node, exp.Subquery):
            node = node.this
        if isinstance(node, exp.Union):
            if node.args.get("with") or node.args.get("with_"):
                raise _refuse(view, "WITH")
            flatten(node.this)
            flatten(node.expression)
        else:
            blocks.append(node)
    flatten(query)
    out = []
    for i, block in enumerate(blocks):
        if isinstance(block, exp.Select) and (block.args.get("group") is not None or any(
                e.find(exp.AggFunc) for e in block.expressions)):
            raise _refuse(view, f"an aggregate in the UNION block {block.sql()[:60]!r}")
        witness, layout = witness_query(view, block, schema_of)
        out.append((f"{witness_name(view)}{i}", witness, layout))
    return out


def witness_query(view: str, query: exp.Expression,
                  schema_of: Callable[[str], list[tuple[str, SqlType]]]
                  ) -> tuple[exp.Select, WitnessLayout]:
    """The witness view's query and the layout of its rows, or UnsupportedError."""
    if not isinstance(query, exp.Select):
        kind = {exp.Intersect: "INTERSECT", exp.Except: "EXCEPT"}.get(type(query))
        raise _refuse(view, kind or f"a {type(query).__name__.upper()} query")
    query, negated = _subqueries_as_joins(view, query, schema_of)
    for node in query.find_all(exp.Subquery, exp.Exists, exp.Window):
        if not any(node is n or _inside(node, n) for n in negated):
            raise _refuse(view, f"{node.sql()[:60]!r}")
    for node in query.find_all(exp.In):
        if node.args.get("query") is not None and not any(
                node is n or _inside(node, n) for n in negated):
            raise _refuse(view, f"{node.sql()[:60]!r}")
    if query.args.get("with") or query.args.get("with_"):
        raise _refuse(view, "WITH")
    from_ = query.args.get("from_") or query.args.get("from")
    if from_ is None:
        raise _refuse(view, "a SELECT without FROM")
    holders = [from_, *(query.args.get("joins") or [])]
    relations, columns = [], []
    for i, holder in enumerate(holders):
        source = holder.this
        if not isinstance(source, exp.Table):
            raise _refuse(view, f"the FROM item {source.sql()[:60]!r}")
        if i and (holder.args.get("side") or holder.args.get("kind") in ("ANTI", "SEMI")
                  or holder.args.get("using")):
            raise _refuse(view, f"{holder.sql()[:60]!r}")
        name = source.name.lower()
        schema = schema_of(name)
        relations.append((name, len(schema)))
        alias = source.alias_or_name
        columns += [exp.alias_(exp.column(c, table=alias, quoted=True), f"w{i}_{j}", quoted=True)
                    for j, (c, _) in enumerate(schema)]
    outputs = query.expressions
    if any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and e.is_star)
           for e in outputs):
        raise _refuse(view, "SELECT *")
    grouped = query.args.get("group") is not None
    aggregated = grouped or any(e.find(exp.AggFunc) for e in outputs)
    key_positions = tuple(p for p, e in enumerate(outputs)
                          if not (aggregated and e.find(exp.AggFunc)))
    if aggregated and not grouped:
        key_positions = ()
    hidden = _group_not_shown(query, [outputs[p] for p in key_positions])
    if hidden is not None:
        raise UnsupportedError(
            f"why-provenance of view {view}: the GROUP BY expression {hidden.sql()[:60]!r} "
            "is not in the select list, so a row's group cannot be told from the row (two "
            "groups may show the same columns); select every GROUP BY expression")
    keys = [exp.alias_(outputs[p].unalias().copy(), f"k{p}", quoted=True)
            for p in key_positions]
    witness = query.copy()
    for arg in ("group", "having", "order", "limit", "offset", "distinct"):
        witness.set(arg, None)
    witness.set("expressions", keys + columns)
    return witness, WitnessLayout(tuple(relations), key_positions)


def _group_not_shown(query: exp.Select, shown: list[exp.Expression]) -> exp.Expression | None:
    """A GROUP BY expression that none of the ``shown`` outputs (the view row's key)
    holds, or None: a why-answer finds a row's group by the key, so the key must hold
    the whole GROUP BY (by ordinal, output name or the same expression)."""
    group = query.args.get("group")
    if group is None or group.args.get("all"):
        return None
    for g in group.expressions:
        if any(_same_output(g, position, output) for position, output in
               ((query.expressions.index(o), o) for o in shown)):
            continue
        return g
    return None


def _same_output(g: exp.Expression, position: int, output: exp.Expression) -> bool:
    """Whether the GROUP BY item ``g`` names the select list's ``output`` (at ``position``)."""
    if isinstance(g, exp.Literal) and not g.is_string:
        return g.this == str(position + 1)
    value = output.unalias()
    if isinstance(g, exp.Column) and not g.table and output.alias_or_name.lower() == g.name.lower():
        return True
    if isinstance(g, exp.Column) and isinstance(value, exp.Column):
        return g.name.lower() == value.name.lower() and (
            not g.table or not value.table or g.table.lower() == value.table.lower())
    return g == value


def _inside(node: exp.Expression, ancestor: exp.Expression) -> bool:
    parent = node.parent
    while parent is not None:
        if parent is ancestor:
            return True
        parent = parent.parent
    return False


def _subquery_body(cond: exp.Expression) -> tuple[exp.Select, exp.Expression | None] | None:
    """The body of a top-level ``EXISTS (..)`` / ``x IN (SELECT c ..)`` conjunct and, for
    ``IN``, the equality it asks (``x = c``); None for any other conjunct."""
    if isinstance(cond, exp.Exists) and isinstance(cond.this, exp.Select):
        return cond.this, None
    if isinstance(cond, exp.In) and cond.args.get("query") is not None:
        body = cond.args["query"]
        body = body.this if isinstance(body, exp.Subquery) else body
        if isinstance(body, exp.Select) and len(body.expressions) == 1:
            return body, exp.EQ(this=cond.this.copy(), expression=body.expressions[0].unalias(
                ).copy())
    return None


def _qualified(node: exp.Expression, tables: list[tuple[str, set[str]]]) -> exp.Expression:
    """``node`` with each unqualified column named by the first of ``tables`` (alias,
    column names) that has it, so it stays unambiguous once more relations are joined."""
    def qualify(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Column) and not n.table and not n.is_star:
            for alias, names in tables:
                if n.name.lower() in names:
                    return exp.column(n.name, table=alias)
        return n

    return node.transform(qualify)


def _subqueries_as_joins(view: str, query: exp.Select,
                         schema_of: Callable[[str], list[tuple[str, SqlType]]]
                         ) -> tuple[exp.Select, list[exp.Expression]]:
    """``query`` with each top-level ``EXISTS`` / ``IN`` subquery over one relation joined
    instead (each matching row of it is part of a derivation), and the top-level ``NOT
    EXISTS`` / ``NOT IN`` conjuncts, which stay filters: a negated subquery derives
    nothing, it only lets a row through."""
    where = query.args.get("where")
    if where is None or not where.find(exp.Exists, exp.In):
        return query, []
    outer_tables = [(h.this.alias_or_name, {c.lower() for c, _ in schema_of(h.this.name)})
                    for h in [query.args.get("from_") or query.args.get("from"),
                              *(query.args.get("joins") or [])]
                    if h is not None and isinstance(h.this, exp.Table)]
    outer = {alias.lower() for alias, _ in outer_tables}
    kept, joins, negated = [], [], []
    for cond in conjuncts(where.this):
        inner = cond.this if isinstance(cond, exp.Not) else None
        if inner is not None and _subquery_body(inner) is not None:
            kept.append(cond)
            negated.append(cond)
            continue
        found = _subquery_body(cond)
        if found is None:
            kept.append(cond)
            continue
        body, equality = found
        source = body.args.get("from_") or body.args.get("from")
        if source is None or not isinstance(source.this, exp.Table) or any(
                body.args.get(k) for k in ("joins", "group", "having", "limit", "offset",
                                           "distinct", "with", "with_")):
            raise _refuse(view, f"{cond.sql()[:60]!r}")
        table = source.this
        if table.alias_or_name.lower() in outer:
            raise _refuse(view, f"{cond.sql()[:60]!r} (its relation's name is the outer one's)")
        outer.add(table.alias_or_name.lower())
        joins.append(exp.Join(this=table.copy()))
        inner = [(table.alias_or_name, {c.lower() for c, _ in schema_of(table.name)})]
        body_where = body.args.get("where")
        for part in conjuncts(body_where.this) if body_where is not None else []:
            kept.append(_qualified(part.copy(), inner + outer_tables))
        if equality is not None:
            kept.append(exp.EQ(this=_qualified(equality.this, outer_tables),
                               expression=_qualified(equality.expression, inner)))
    if not joins:
        return query, negated
    out = query.copy()
    out.set("expressions", [_qualified(e, outer_tables) for e in out.expressions])
    kept = [c if any(c is k for k in negated) or c.parent is None else
            _qualified(c, outer_tables) for c in kept]
    out.set("joins", [*(out.args.get("joins") or []), *joins])
    condition = kept[0].copy() if kept else None
    for part in kept[1:]:
        condition = exp.and_(condition, part.copy())
    out.set("where", exp.Where(this=condition) if condition is not None else None)
    negated = [c for c in conjuncts(condition)
               if isinstance(c, exp.Not) and _subquery_body(c.this) is not None]
    return out, negated
