"""A ``WITH RECURSIVE`` query as a program of rules, one per UNION branch.

``recursive-views-absorption-provenance.txt`` section II writes its views in SQL-99 and notes
that they could equally be datalog: each branch of a recursive CTE is a conjunctive rule
``head(cte) :- atom_1, ..., atom_n, conditions``.  The fixpoint engines (absorption
provenance and DRed) evaluate these rules; this module only binds the SQL to them.  Set
semantics (``UNION``) is what the paper assumes (section III-A); ``UNION ALL`` recursion
is bag semantics and is not maintained here (the view falls back to DuckDB).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import duckdb
from sqlglot import exp

from ..duckdb_scratch import scratch
from ..errors import UnsupportedError
from ..expressions import ExpressionCompiler, column_refs
from ..plan import Block, _bind_select, joins_as_key
from ..types import SqlType, type_from_name


@dataclass
class BodyAtom:
    """One relation in a rule body; its columns occupy ``offset .. offset+arity`` of the
    rule's wide row."""

    relation: str
    alias: str
    offset: int
    arity: int

    @property
    def slots(self) -> range:
        return range(self.offset, self.offset + self.arity)


@dataclass
class Rule:
    """``head :- atoms, conditions`` with the head's columns computed from the wide row."""

    head: str
    atoms: list[BodyAtom]
    width: int
    equalities: list[tuple[int, int]]  # column = column, as wide-row slots
    conditions: list[tuple[frozenset[int], Callable[[list], object]]]  # (slots read, test)
    head_exprs: list[Callable[[list], object]]
    head_slots: list[int | None]  # the slot a head column copies, when it is a plain column
    head_nodes: list[exp.Expression] = field(repr=False)
    block: Block = field(repr=False)
    text: str = ""

    def head_of(self, wide: list) -> tuple:
        return tuple(f(wide) for f in self.head_exprs)


@dataclass
class Program:
    """The rules of the CTEs one target CTE depends on, and the base relations they read."""

    target: str
    ctes: dict[str, list[tuple[str, SqlType]]]
    rules: list[Rule]
    base: dict[str, int]  # base relation -> arity
    recursive: set[str]  # CTEs on a cycle of references
    sql: str  # ``WITH RECURSIVE ... SELECT * FROM target``

    def rules_for(self, cte: str) -> list[Rule]:
        return [r for r in self.rules if r.head == cte]


def recursive_with(query: exp.Expression) -> exp.With | None:
    with_ = query.args.get("with_") or query.args.get("with")
    if with_ is not None and with_.args.get("recursive"):
        return with_
    return None


def bind_program(with_: exp.With, target: str, schema_of) -> Program:
    """Bind the CTEs that ``target`` depends on; raise UnsupportedError for what the
    fixpoint engines do not evaluate (so the view falls back to DuckDB)."""
    bodies = {c.alias_or_name.lower(): c for c in with_.expressions}
    needed = _dependencies(target, bodies)
    ordered = [c for c in bodies if c in needed]
    sql = _program_sql(with_, ordered, target)
    ctes = _cte_schemas(with_, ordered, bodies, schema_of)

    def schema(name: str) -> list[tuple[str, SqlType]]:
        return ctes[name] if name in ctes else schema_of(name)

    rules: list[Rule] = []
    base: dict[str, int] = {}
    for name in ordered:
        for branch in _branches(bodies[name].this, name):
            rule = _bind_rule(name, branch, ctes[name], schema)
            rules.append(rule)
            for a in rule.atoms:
                if a.relation not in ctes:
                    base[a.relation] = a.arity
    refs = {name: {a.relation for r in rules if r.head == name for a in r.atoms} & set(ctes)
            for name in ordered}
    recursive = {c for c in ordered if c in _reachable(refs, refs[c])}
    return Program(target, ctes, rules, base, recursive, sql)


def _dependencies(target: str, bodies: dict[str, exp.CTE]) -> list[str]:
    seen: list[str] = []
    stack = [target]
    while stack:
        name = stack.pop()
        if name in seen or name not in bodies:
            continue
        seen.append(name)
        stack.extend(t.name.lower() for t in bodies[name].this.find_all(exp.Table))
    return seen


def _reachable(refs: dict[str, set[str]], start: set[str]) -> set[str]:
    out: set[str] = set()
    stack = list(start)
    while stack:
        c = stack.pop()
        if c not in out:
            out.add(c)
            stack.extend(refs.get(c, ()))
    return out


def _program_sql(with_: exp.With, ordered: list[str], target: str) -> str:
    keep = [c.copy() for c in with_.expressions if c.alias_or_name.lower() in ordered]
    query = exp.select("*").from_(target)
    query.set("with_", exp.With(expressions=keep, recursive=True))
    return query.sql(dialect="duckdb")


def _cte_schemas(with_: exp.With, ordered: list[str], bodies: dict[str, exp.CTE],
                 schema_of) -> dict[str, list[tuple[str, SqlType]]]:
    """Column names and types of each CTE as DuckDB types them (the oracle's own typing)."""
    read = [t for c in ordered for t in bodies[c].this.find_all(exp.Table)]
    for t in read:
        if not isinstance(t.this, exp.Identifier):  # generate_series(1, 2), range(3)
            raise UnsupportedError(f"table function {t.this.sql(dialect='duckdb')[:60]} in "
                                   "a recursive CTE")
    tables = {t.name.lower() for t in read}
    nested = {n.alias_or_name.lower() for c in ordered for n in bodies[c].this.find_all(exp.CTE)}
    tables -= set(bodies) | nested  # a WITH inside a CTE's body names no table
    with scratch() as con:
        try:
            for t in tables:
                cols = schema_of(t)
                con.execute(f"CREATE TEMP TABLE {t} "
                            f"({', '.join(f'{n} {typ.sql()}' for n, typ in cols)})")
            out = {}
            for name in ordered:
                described = con.execute(
                    f"DESCRIBE {_program_sql(with_, ordered, name)}").fetchall()
                out[name] = [(row[0].lower(), type_from_name(row[1])) for row in described]
            return out
        except duckdb.Error:
            # DuckDB rejects mutual recursion, so type the CTEs ourselves
            return _infer_schemas(ordered, bodies, schema_of)


def _infer_schemas(ordered: list[str], bodies: dict[str, exp.CTE], schema_of
                   ) -> dict[str, list[tuple[str, SqlType]]]:
    """Type each CTE by its first branch that reads only typed relations, repeatedly."""
    out: dict[str, list[tuple[str, SqlType]]] = {}

    def schema(name: str) -> list[tuple[str, SqlType]]:
        if name in out:
            return out[name]
        if name in bodies:
            raise _Untyped(name)
        return schema_of(name)

    progress = True
    while progress and len(out) < len(ordered):
        progress = False
        for name in ordered:
            if name in out:
                continue
            for branch in _branches(bodies[name].this, name):
                try:
                    block = _bind_select(branch, schema)
                except _Untyped:
                    continue
                compiler = ExpressionCompiler(block.scope)
                names = [c.name.lower() for c in bodies[name].args["alias"].columns] or [
                    n for n, _ in block.select]
                types = [compiler.type_of(e) for _, e in block.select]
                out[name] = list(zip(names, types, strict=True))
                progress = True
                break
    missing = [c for c in ordered if c not in out]
    if missing:
        raise UnsupportedError(f"CTEs {missing} have no branch that starts the recursion")
    return out


class _Untyped(Exception):
    """A branch reads a CTE that is not typed yet."""


def _branches(node: exp.Expression, name: str) -> list[exp.Select]:
    if isinstance(node, exp.Subquery):
        return _branches(node.this, name)
    if isinstance(node, exp.Union):
        if not node.args.get("distinct"):
            raise UnsupportedError(
                f"CTE {name} uses UNION ALL: recursion is maintained with set semantics (UNION)")
        return _branches(node.this, name) + _branches(node.expression, name)
    if isinstance(node, exp.Select):
        return [node]
    raise UnsupportedError(f"CTE {name}: {type(node).__name__} in a recursive query")


def _bind_rule(head: str, branch: exp.Select, columns: list[tuple[str, SqlType]],
               schema) -> Rule:
    block = _bind_select(branch, schema)
    if block.subqueries:
        raise UnsupportedError(f"CTE {head}: EXISTS / IN subqueries inside the recursion "
                               "(negation is not monotone)")
    if block.is_aggregate:
        raise UnsupportedError(f"CTE {head}: aggregates inside the recursion (aggregate the "
                               "recursive result in the outer query instead)")
    if len(block.select) != len(columns):
        raise UnsupportedError(f"CTE {head}: a branch has {len(block.select)} columns, "
                               f"the CTE {len(columns)}")
    atoms = [BodyAtom(a.relation, a.alias, a.offset, len(a.columns)) for a in block.atoms]
    width = sum(a.arity for a in atoms)
    compiler = ExpressionCompiler(block.scope)
    equalities: list[tuple[int, int]] = []
    conditions = []
    for cond in block.conditions:
        if (isinstance(cond, exp.EQ) and isinstance(cond.this, exp.Column)
                and isinstance(cond.expression, exp.Column)):
            a = block.scope.resolve(cond.this)
            b = block.scope.resolve(cond.expression)
            # a key where Python's exact equality is DuckDB's and one value serves both
            if joins_as_key(a.type, b.type):
                equalities.append((a.slot, b.slot))
                continue
        slots = frozenset(block.scope.resolve(c).slot for c in column_refs(cond))
        conditions.append((slots, compiler.compile_condition(cond).fn))
    head_exprs = []
    head_slots: list[int | None] = []
    head_nodes = []
    for (_, node), (_, typ) in zip(block.select, columns, strict=True):
        compiled = compiler.compile(node)
        if compiled.type != typ and compiled.type.kind != "NULL":
            compiled = compiler.compile(exp.Cast(this=node.copy(), to=exp.DataType.build(typ.sql())))
        head_exprs.append(compiled.fn)
        head_nodes.append(node)
        head_slots.append(block.scope.resolve(node).slot
                          if isinstance(node, exp.Column) and compiled.type == typ else None)
    return Rule(head, atoms, width, equalities, conditions, head_exprs, head_slots, head_nodes,
                block, branch.sql(dialect="duckdb"))
