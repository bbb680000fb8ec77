"""``GROUP BY GROUPING SETS / ROLLUP / CUBE`` as a ``UNION ALL`` of plain grouped blocks
(issue 22), each maintained by its own strategy, instead of recomputing the view.

A select grouped by several grouping sets is the bag union of one block per set: the same
``FROM``, ``WHERE`` and ``HAVING``, grouped by the set's expressions, with every grouping
expression outside the set read as a NULL of its type, and ``GROUPING(..)`` /
``GROUPING_ID(..)`` as the set's constant bit mask (a bit is 1 where its argument is not in
the set, the first argument the highest bit, as DuckDB computes it).  The empty set is a
block without ``GROUP BY``: one row even over no input, as DuckDB gives.  ``ROLLUP (a, b)``
is the sets ``(a, b), (a), ()``; ``CUBE (a, b)`` every subset; plain ``GROUP BY`` items
beside them are in every set.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import combinations, product

from sqlglot import exp

from .errors import SchemaError

#: at most this many blocks (``CUBE`` of n expressions makes 2**n)
MAX_SETS = 64


def expand_grouping_sets(select: exp.Expression,
                         types_of: Callable[[exp.Select], list[str]]) -> exp.Expression:
    """``select`` as a ``UNION ALL`` of one grouped block per grouping set; any other node
    unchanged, and so is a select whose DISTINCT, LIMIT, OFFSET or QUALIFY applies to the
    whole result.  ``types_of(probe)`` gives the DuckDB types of a select's columns (the
    grouping expressions' types, for their NULLs); None-returning or failing callers leave
    the select as it is."""
    if not isinstance(select, exp.Select):
        return select
    group = select.args.get("group")
    if group is None or not any(isinstance(e, (exp.GroupingSets, exp.Rollup, exp.Cube))
                                for e in group.expressions):
        return select
    if any(select.args.get(k) for k in ("distinct", "limit", "offset", "qualify")):
        return select  # they apply to the whole result, not per set: DuckDB recomputes it
    aliases = {e.alias.lower(): e.this for e in select.expressions
               if isinstance(e, exp.Alias) and not isinstance(e.this, exp.Column)}

    def unaliased(node: exp.Expression) -> exp.Expression:
        """A select-list alias grouped by (``GROUP BY ROLLUP (odd)``) as its expression (a
        constant in brackets: a bare number would read as a position)."""
        if isinstance(node, exp.Column) and not node.table and node.name.lower() in aliases:
            found = aliases[node.name.lower()].copy()
            return exp.Paren(this=found) if isinstance(found, exp.Literal) else found
        return node

    def positioned(item: exp.Expression) -> exp.Expression:
        """A grouping item that is a select-list position (``ROLLUP (1, 2)``) as the
        expression there, as DuckDB reads it."""
        if isinstance(item, (exp.GroupingSets, exp.Rollup, exp.Cube, exp.Tuple, exp.Paren)):
            item = item.copy()
            key = "this" if isinstance(item, exp.Paren) else "expressions"
            parts = item.args.get(key)
            if isinstance(parts, list):
                item.set(key, [positioned(p) for p in parts])
            elif parts is not None:
                item.set(key, positioned(parts))
            return item
        if isinstance(item, exp.Literal) and item.is_int and 1 <= int(item.this) <= len(
                select.expressions):
            chosen = select.expressions[int(item.this) - 1]
            return (chosen.this if isinstance(chosen, exp.Alias) else chosen).copy()
        return item

    sets = _grouping_sets([positioned(e).transform(unaliased) for e in group.expressions])
    if sets is None or len(sets) > MAX_SETS:
        return select
    universe: list[exp.Expression] = []
    for s in sets:
        for e in s:
            if not any(_same(e, u) for u in universe):
                universe.append(e)
    probe = select.copy()
    for key in ("group", "having", "order", "limit", "offset", "qualify"):
        probe.set(key, None)
    probe.set("expressions", [e.copy() for e in universe])
    try:
        types = types_of(probe)
    except Exception:  # noqa: BLE001 - DuckDB cannot bind it: left to recomputation
        return select
    if types is None or len(types) != len(universe):
        return select
    for part in (*select.expressions, select.args.get("having")):
        for grouping in part.find_all(exp.Grouping, exp.GroupingId) if part else ():
            for arg in grouping.expressions:
                if not any(_same(arg.transform(unaliased), u) for u in universe):
                    raise SchemaError(f"GROUPING argument {arg.sql()} is not a grouping "
                                      "expression (as DuckDB binds it)")
    # the CTEs (a WITH RECURSIVE too) go before the whole union, not into each block
    key = "with_" if "with_" in select.args else "with"  # the name by sqlglot's version
    ctes = select.args.get(key)
    bare = select.copy()
    bare.set(key, None)
    blocks = [_block(bare, s, universe, types, unaliased) for s in sets]
    union = blocks[0]
    for block in blocks[1:]:
        union = exp.Union(this=union, expression=block, distinct=False)
    if ctes is not None:
        union.set(key, ctes.copy())
    return union


def _grouping_sets(items: list[exp.Expression]) -> list[list[exp.Expression]] | None:
    """The grouping sets of a ``GROUP BY`` list, in DuckDB's order."""
    choices: list[list[list[exp.Expression]]] = []
    for item in items:
        if isinstance(item, exp.GroupingSets):
            options = []
            for s in item.expressions:
                if isinstance(s, exp.Tuple):
                    options.append(list(s.expressions))
                elif isinstance(s, exp.Paren):
                    options.append([s.this])
                elif isinstance(s, (exp.Rollup, exp.Cube, exp.GroupingSets)):
                    return None  # nested grouping constructs
                else:
                    options.append([s])
            choices.append(options)
        elif isinstance(item, exp.Rollup):
            exprs = list(item.expressions)
            choices.append([exprs[:n] for n in range(len(exprs), -1, -1)])
        elif isinstance(item, exp.Cube):
            exprs = list(item.expressions)
            choices.append([list(c) for n in range(len(exprs), -1, -1)
                            for c in combinations(exprs, n)])
        else:
            choices.append([[item]])
    return [[e for part in combination for e in part] for combination in product(*choices)]


def _same(a: exp.Expression, b: exp.Expression) -> bool:
    """Whether two grouping expressions are the same (a column with or without its table;
    brackets aside)."""
    while isinstance(a, exp.Paren):
        a = a.this
    while isinstance(b, exp.Paren):
        b = b.this
    if isinstance(a, exp.Column) and isinstance(b, exp.Column):
        return a.name.lower() == b.name.lower() and (
            not a.table or not b.table or a.table.lower() == b.table.lower())
    return a == b


def _block(select: exp.Select, grouping_set: list[exp.Expression],
           universe: list[exp.Expression], types: list[str],
           unaliased: Callable[[exp.Expression], exp.Expression]) -> exp.Select:
    """The select of one grouping set: its expressions kept whole (``s.a + 1`` stays
    itself where the set holds it, though ``s.a`` is outside the set), every other
    grouping expression a NULL, ``GROUPING(..)`` of an expression or of its select-list
    alias the set's mask; the empty set's block one row (:func:`_one_row`)."""
    absent = [(u, t) for u, t in zip(universe, types, strict=True)
              if not any(_same(u, e) for e in grouping_set)]

    def in_set(e: exp.Expression) -> bool:
        return any(_same(e, g) for g in grouping_set)

    def rewrite(node: exp.Expression) -> exp.Expression:
        if isinstance(node, (exp.Grouping, exp.GroupingId)):
            mask = 0
            for arg in node.expressions:
                mask = 2 * mask + (0 if in_set(arg.transform(unaliased)) else 1)
            return exp.cast(exp.Literal.number(mask), "BIGINT")
        if isinstance(node, (exp.AggFunc, exp.Filter, exp.Subquery)) or (
                in_set(node) and not isinstance(node, exp.Column)):
            # a new node: transform does not descend into the rows an aggregate (or its
            # FILTER) reads, into a subquery, whose columns are its own, nor into a
            # grouping expression of the set, whose columns may lie outside it
            return node.copy()
        for expression, typ in absent:
            if _same(node, expression):
                return exp.Cast(this=exp.Null(), to=exp.DataType.build(typ, dialect="duckdb"))
        return node

    block = select.copy()
    items = []
    for item in block.expressions:
        new = item.transform(rewrite)
        if isinstance(item, exp.Column) and new is not item:
            new = new.as_(item.name)
        items.append(new)
    block.set("expressions", items)
    having = block.args.get("having")
    if having is not None:
        block.set("having", exp.Having(this=having.this.transform(rewrite)))
    block.set("group", exp.Group(expressions=[e.copy() for e in grouping_set])
              if grouping_set else None)
    if not grouping_set and not any(
            part.find(exp.AggFunc) for part in (*block.expressions, block.args.get("having"))
            if part is not None):
        return _one_row(block)
    return block


def _one_row(block: exp.Select) -> exp.Select:
    """The empty grouping set's block when it holds no aggregate: one row, even over no
    input rows (as DuckDB gives), not one per row: its select list over a one-row
    ``COUNT(*)`` of its ``FROM`` and ``WHERE`` (the list holds no column: each grouping
    expression is a NULL there, and any other column DuckDB would have refused)."""
    inner = block.copy()
    for key in ("group", "having", "order", "limit", "offset"):
        inner.set(key, None)
    inner.set("expressions", [exp.alias_(exp.Count(this=exp.Star()), "__rows")])
    outer = exp.Select(expressions=[e.copy() for e in block.expressions])
    outer.set("from_" if "from_" in block.args else "from", exp.From(
        this=exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier("__all")))))
    having = block.args.get("having")
    if having is not None:
        outer.set("where", exp.Where(this=having.this.copy()))
    return outer
