"""``SELECT DISTINCT ON (e, ..)`` as maintainable SQL: the first row of each ``e`` value.

DuckDB keeps, for each distinct value of the ``DISTINCT ON`` expressions, the first row in
the block's ``ORDER BY`` (any one of them when the order does not decide). That is the row
numbered 1 by ``ROW_NUMBER() OVER (PARTITION BY e, .. ORDER BY <the ORDER BY>)`` over the
rest of the block, so the block becomes::

    SELECT __distinct_on.__distinct_on_1 AS a, ..
    FROM (SELECT <item 1> AS __distinct_on_1, ..,
                 ROW_NUMBER() OVER (PARTITION BY e, .. ORDER BY ..) AS __distinct_on_rn
          FROM .. WHERE .. GROUP BY .. HAVING ..) AS __distinct_on
    WHERE __distinct_on.__distinct_on_rn <= 1

which the per-group top-k of :mod:`upkeep.ranked` keeps in a sorted list per partition
(Materialize writes a top-1 per group this way; it recomputes nothing per batch here
either). Ties in the order are broken by the rows' values (``ranked.py``), where DuckDB
takes whichever tied row it reads first. A ``LIMIT`` / ``OFFSET`` of the block stays on
the outer query, ordered by the output columns the ``ORDER BY`` names, a top-k over the
ranked rows (``topk.py``). Positions and output names in ``DISTINCT ON`` and ``ORDER BY``
read the select list, as DuckDB reads them; ``*`` is spelled as its tables' columns.

Left as they are (DuckDB recomputes them): a block with window functions or ``QUALIFY``,
a star over derived tables or ``USING`` joins, and a ``LIMIT`` whose ``ORDER BY`` names
something that is not an output column.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from .plan import distinct_on, output_order
from .scalar_subqueries import block_relations, spell_star
from .topk import all_expanded
from .types import SqlType

Schema = Callable[[str], list[tuple[str, SqlType]]]

_NAME = "__distinct_on"  # the derived table of numbered rows, and its columns' prefix


class _Skip(Exception):
    """A DISTINCT ON this rewrite leaves to DuckDB: the block stays as it is."""


def rewrite_distinct_on(select: exp.Expression, schema_of: Schema) -> exp.Expression:
    """``select`` with its ``DISTINCT ON`` as a ranked derived table (see the module), or
    unchanged."""
    if not isinstance(select, exp.Select) or not distinct_on(select):
        return select
    try:
        return _numbered(select.copy(), schema_of)
    except _Skip:
        return select


def _numbered(block: exp.Select, schema_of: Schema) -> exp.Select:
    if block.args.get("qualify") or block.args.get("windows") or any(
            isinstance(n, exp.Window) for e in block.expressions for n in e.walk()):
        raise _Skip  # windows beside the row number: the window views' business
    if any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and e.is_star)
           for e in block.expressions):
        relations = block_relations(block, schema_of)
        if relations is None or not spell_star(block, relations):
            raise _Skip
    items = block.expressions
    names = [e.alias if isinstance(e, exp.Alias) else e.name if isinstance(e, exp.Column)
             else None for e in items]
    values = [e.this if isinstance(e, exp.Alias) else e for e in items]
    by_alias = {e.alias.lower(): e.this for e in items if isinstance(e, exp.Alias)}

    def value_of(key: exp.Expression) -> exp.Expression:
        """What a DISTINCT ON or ORDER BY key reads: a position or an output name is the
        select item's value, as DuckDB binds them."""
        if isinstance(key, exp.Literal) and key.is_int:
            position = int(key.this)
            if not 1 <= position <= len(values):
                raise _Skip  # DuckDB's binder says so
            return values[position - 1]
        if isinstance(key, exp.Column) and not key.table and key.name.lower() in by_alias:
            return by_alias[key.name.lower()]
        return key

    partition = [value_of(k).copy() for k in block.args["distinct"].args["on"].expressions]
    order = block.args.get("order")
    if order is not None:
        order = all_expanded(block, order.copy())  # ORDER BY ALL: each output column
        if order is None:
            raise _Skip
    keys = order.expressions if order is not None else []
    window = exp.Window(
        this=exp.RowNumber(), partition_by=partition,
        order=exp.Order(expressions=[
            exp.Ordered(this=value_of(o.this).copy(), desc=o.args.get("desc"),
                        nulls_first=o.args.get("nulls_first")) for o in keys]
            # no ORDER BY: any row of each group will do; the items decide one
            or [exp.Ordered(this=v.copy()) for v in values]))
    limit, offset = block.args.get("limit"), block.args.get("offset")
    outer_order = output_order(keys, items, names) if limit or offset else None
    if (limit or offset) and outer_order is None:
        raise _Skip

    inner = block.copy()
    for k in ("distinct", "order", "limit", "offset"):
        inner.set(k, None)
    inner.set("expressions", [exp.alias_(v.copy(), f"{_NAME}_{i}")
                              for i, v in enumerate(values, 1)]
              + [exp.alias_(window, f"{_NAME}_rn")])
    outer = exp.select(*(
        exp.alias_(exp.column(f"{_NAME}_{i}", _NAME), name if name else f"{_NAME}_{i}")
        for i, name in enumerate(names, 1))).from_(
        exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(_NAME)))).where(
        exp.LTE(this=exp.column(f"{_NAME}_rn", _NAME), expression=exp.Literal.number(1)))
    if outer_order is not None:
        outer.set("order", exp.Order(expressions=outer_order))
        outer.set("limit", limit)
        outer.set("offset", offset)
    return outer
