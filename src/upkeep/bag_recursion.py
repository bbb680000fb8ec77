"""A bound on the ``WITH RECURSIVE ... UNION ALL`` (bag) recursion DuckDB evaluates.

upkeep's fixpoint engines keep set-semantic (``UNION``) recursion and stop one that does not
converge (:class:`~upkeep.errors.RecursionLimit`).  Bag recursion is evaluated by DuckDB (a
recomputed view, an ad-hoc query, a statement's subquery), which iterates as long as the
recursive branch yields rows: a path counter over a cycle never ends, and DuckDB's memory
and temporary files grow until the process is killed.  A view's later batch can do that
too (an edge that closes a cycle), holding the connection for good.

:func:`bounded_sql`, which :func:`upkeep.views.query_duckdb` applies to every query with a
recursive CTE (so no caller can forget it), rewrites each such CTE it can to count its iterations in a hidden column
and call DuckDB's ``error()`` once a row would be derived at iteration
:data:`MAX_ITERATIONS` + 1; :func:`recursion_limit` turns that error into
:class:`~upkeep.errors.RecursionLimit`, so the query, or the batch, is refused whole.  Bag
semantics is unchanged below the bound: each derived row gets its parent's count plus one,
and the count is projected away (``* EXCLUDE``) before anything else reads the CTE.  A CTE
of another shape (a ``UNION`` recursion, ``SELECT *`` or aggregates in a recursive branch,
the CTE read twice or inside a subquery of a branch) is left as it is.
"""

from __future__ import annotations

import functools

from sqlglot import exp, parse_one

from .errors import RecursionLimit

#: the most iterations a bag-recursive CTE evaluated by DuckDB may take (each ~20 us when
#: it derives a few rows, so a runaway recursion is stopped within about 2 s)
MAX_ITERATIONS = 100_000

_DEPTH = "__upkeep_depth"
_SUFFIX = "__upkeep_bounded"
_MARKER = "upkeep recursion limit: "


@functools.lru_cache(maxsize=256)
def bounded_sql(sql: str, limit: int) -> str:
    """DuckDB SQL ``sql`` with its bag recursion bounded to ``limit`` iterations (cached: a
    recomputed view runs the same text every batch, and parsing it costs ~2.6 ms)."""
    query = parse_one(sql, dialect="duckdb")
    limited = bounded(query, limit)
    return sql if limited is query else limited.sql(dialect="duckdb")


def bounded(query: exp.Expression, limit: int) -> exp.Expression:
    """``query`` with every bag-recursive CTE of a shape this handles bounded to ``limit``
    iterations (a copy, or ``query`` itself when it has no recursive CTE)."""
    if not any(w.args.get("recursive") for w in query.find_all(exp.With)):
        return query
    query = query.copy()
    for with_ in list(query.find_all(exp.With)):
        if not with_.args.get("recursive"):
            continue
        ctes = []
        for cte in with_.expressions:
            guarded = _bounded_cte(cte, limit)
            ctes += [cte] if guarded is None else guarded
        with_.set("expressions", ctes)
    return query


def recursion_limit(message: str) -> RecursionLimit | None:
    """The :class:`RecursionLimit` a DuckDB error message carries, if it is the bound's."""
    at = message.find(_MARKER)
    return None if at < 0 else RecursionLimit(message[at + len(_MARKER):].strip())


def _bounded_cte(cte: exp.CTE, limit: int) -> list[exp.CTE] | None:
    """The counting CTE and the CTE of the original name over it, or None to leave it."""
    name = cte.alias_or_name
    body = cte.this
    if not name or not isinstance(body, exp.Union) or body.args.get("distinct"):
        return None
    leaves = _union_all_leaves(body)
    if leaves is None:
        return None
    refs = {id(leaf): _direct_reference(leaf, name) for leaf in leaves
            if _references(leaf, name)}
    if not refs or id(leaves[0]) in refs or any(r is None for r in refs.values()):
        return None  # no recursion; DuckDB's anchor is the first branch; an odd reference
    recursive = [leaf for leaf in leaves if id(leaf) in refs]
    if any(_aggregated(leaf) for leaf in recursive) or any(
            leaf.find(exp.Star) is not None for leaf in leaves):
        return None
    alias = cte.args.get("alias")
    if alias is not None and alias.columns and len(alias.columns) != len(leaves[0].expressions):
        return None  # a shorter list names the first columns: the count would take a name
    inner = f"{name}{_SUFFIX}"
    message = (f"{_MARKER}the recursion of CTE {name} did not end within {limit:,} "
               f"iterations; the query may derive unboundedly many rows (for example a "
               f"path length or a path string over a cycle): bound it in the WHERE clause")
    for leaf in leaves:
        ref = refs.get(id(leaf))
        if ref is None:
            leaf.append("expressions", exp.alias_(exp.Literal.number(0), _DEPTH))
            continue
        qualifier = ref.alias_or_name
        ref.replace(exp.alias_(exp.to_table(inner), qualifier, table=True))
        depth = exp.column(_DEPTH, table=qualifier)
        step = exp.case().when(depth < limit, depth.copy() + 1).else_(
            exp.Anonymous(this="error", expressions=[exp.Literal.string(message)]))
        leaf.append("expressions", exp.alias_(step, _DEPTH))
    counting_alias = exp.TableAlias(this=exp.to_identifier(inner))
    if alias is not None and alias.columns:
        counting_alias.set("columns", [c.copy() for c in alias.columns]
                           + [exp.to_identifier(_DEPTH)])
    counting = exp.CTE(this=body, alias=counting_alias)
    outer_alias = alias.copy() if alias is not None else exp.TableAlias(
        this=exp.to_identifier(name))
    outer_alias.set("columns", None)  # the counting CTE named the columns already
    over = exp.select(exp.Star(except_=[exp.column(_DEPTH)])).from_(inner)
    return [counting, exp.CTE(this=over, alias=outer_alias)]


def _union_all_leaves(node: exp.Expression) -> list[exp.Select] | None:
    """The SELECT blocks of a chain of ``UNION ALL``, left to right (None: another shape)."""
    if isinstance(node, exp.Union):
        if node.args.get("distinct"):
            return None
        left, right = _union_all_leaves(node.this), _union_all_leaves(node.expression)
        return None if left is None or right is None else left + right
    return [node] if isinstance(node, exp.Select) and not node.args.get("with_") else None


def _references(select: exp.Select, name: str) -> list[exp.Table]:
    """The block's table references to ``name``, subqueries included."""
    return [t for t in select.find_all(exp.Table) if t.name.lower() == name.lower() and not t.db]


def _direct_reference(select: exp.Select, name: str) -> exp.Table | None:
    """The one table reference to ``name`` in the block's own FROM / JOINs (None if it is
    read twice or from inside a subquery)."""
    tables = _references(select, name)
    if len(tables) != 1:
        return None
    own = [select.args.get("from_").this] if select.args.get("from_") else []
    own += [j.this for j in select.args.get("joins") or ()]
    return tables[0] if any(t is tables[0] for t in own) else None


def _aggregated(select: exp.Select) -> bool:
    return bool(select.args.get("group") or select.args.get("distinct")
                or select.args.get("having") or select.args.get("limit")
                or select.args.get("qualify")
                or any(e.find(exp.AggFunc, exp.Window) for e in select.expressions))
