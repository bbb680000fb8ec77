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
    for node in query.find_all(exp.Subquery, exp.Exists, exp.Window):
        raise _refuse(view, f"{node.sql()[:60]!r}")
    for node in query.find_all(exp.In):
        if node.args.get("query") is not None:
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
    keys = [exp.alias_(outputs[p].unalias().copy(), f"k{p}", quoted=True)
            for p in key_positions]
    witness = query.copy()
    for arg in ("group", "having", "order", "limit", "offset", "distinct"):
        witness.set(arg, None)
    witness.set("expressions", keys + columns)
    return witness, WitnessLayout(tuple(relations), key_positions)
