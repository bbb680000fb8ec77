"""The conjunctive core of a block as variables: what Dynamic Yannakakis and the general
join both maintain.

Columns joined by ``=`` share one variable (a union-find over the block's wide-row slots).
Each atom becomes a hyperedge of variables; its *leaf function* applies the atom's own
filters, drops rows with NULL join keys (NULL never joins, except by ``IS NOT DISTINCT
FROM``), and projects a base row onto
the atom's variables, optionally adding *derived variables*: expressions over that atom
alone (e.g. ``EXTRACT(YEAR FROM o_orderdate)`` as a grouping key), computed once per row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from operator import itemgetter

from sqlglot import exp

from .expressions import Column, ExpressionCompiler, Scope, column_refs, unparen
from .failed_values import LeafSalvage
from .operators import ColumnLeaf
from .plan import Block, JoinAnalysis, atom_of_slot
from .types import SqlType


@dataclass
class Variable:
    id: int
    name: str  # e.g. "o.ok" for display
    type: SqlType
    slots: list[int]  # wide-row slots bound to this variable (empty for derived ones)
    derived: exp.Expression | None = None


class Core:
    """Variables, per-atom hyperedges and leaf functions of a block's conjunctive core."""

    def __init__(self, block: Block, analysis: JoinAnalysis, needed: set[int],
                 derived: list[tuple[int, exp.Expression]] = ()):
        self.block = block
        self.analysis = analysis
        # per atom, the scope every function over its relation's rows is compiled in, and
        # the positions its leaf reads without one (``atom_reads``)
        self._atom_scopes: dict[int, Scope] = {}
        self._leaf_positions: list[set[int]] = [set() for _ in block.atoms]
        # per atom, what its leaf is made of: (values, conditions, NULL-tested and equal
        # positions, whether it is the row itself), for ``lifted_leaf``
        self._leaf_parts: list[tuple] = [()] * len(block.atoms)
        parent = {}

        def find(x: int) -> int:
            while parent.get(x, x) != x:
                x = parent[x]
            return x

        for a, b in analysis.equalities:
            ra, rb = find(a), find(b)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
        join_slots = {s for pair in analysis.equalities for s in pair}
        slots = sorted(needed | join_slots)
        classes: dict[int, list[int]] = {}
        for s in slots:
            classes.setdefault(find(s), []).append(s)
        columns = {c.slot: c for c in block.scope.columns}
        self.vars: list[Variable] = []
        self.var_of_slot: dict[int, int] = {}
        for root in sorted(classes):
            members = classes[root]
            col = columns[members[0]]
            v = Variable(len(self.vars), f"{col.qualifier}.{col.name}", col.type, members)
            self.vars.append(v)
            for s in members:
                self.var_of_slot[s] = v.id
        self.atom_vars: list[list[int]] = [[] for _ in block.atoms]
        for s in slots:
            i = atom_of_slot(block, s)
            v = self.var_of_slot[s]
            if v not in self.atom_vars[i]:
                self.atom_vars[i].append(v)
        self.derived_var: dict[str, int] = {}
        for i, node in derived:
            key = node.sql()
            if key in self.derived_var:
                continue
            scope = self.atom_scope(i)
            typ = ExpressionCompiler(scope).type_of(node)
            v = Variable(len(self.vars), key, typ, [], node)
            self.vars.append(v)
            self.derived_var[key] = v.id
            self.atom_vars[i].append(v.id)
        nonnull = analysis.nonnull_slots()
        self.leaf_fns = [self._leaf(i, nonnull) for i in range(len(block.atoms))]

    def atom_scope(self, i: int) -> Scope:
        """The scope of atom ``i``'s relation rows, one per atom, recording the columns
        resolved in it."""
        scope = self._atom_scopes.get(i)
        if scope is None:
            atom = self.block.atoms[i]
            scope = self._atom_scopes[i] = Scope(
                [Column(atom.alias, name, typ, k) for k, (name, typ) in enumerate(atom.columns)],
                record=True)
        return scope

    def atom_reads(self, i: int) -> frozenset[int]:
        """The positions of the columns of atom ``i``'s relation rows that its leaf, and
        every function compiled in its scope (an aggregate's argument), can read: its
        source's build needs no others (``operators.rows_read``).  Asked once the view is
        planned, when nothing more is compiled over the atom's rows."""
        scope = self._atom_scopes.get(i)
        return frozenset(self._leaf_positions[i] | (scope.resolved if scope else set()))

    def _leaf(self, i: int, nonnull: set[int]) -> Callable[[tuple], tuple | None]:
        """Atom ``i``'s filter-and-project: a relation's row to the tuple of the atom's
        variables, or None where a join column is NULL, two columns of one variable differ,
        or a condition of the atom's own fails."""
        atom = self.block.atoms[i]
        nulls: list[int] = []  # columns that must not be NULL
        equal: list[tuple[int, int]] = []  # (column, first column of the same variable)
        first_pos: dict[int, int] = {}
        for k in range(len(atom.columns)):
            slot = atom.offset + k
            if slot in nonnull:
                nulls.append(k)
            v = self.var_of_slot.get(slot)
            if v is None:
                continue
            if v in first_pos:
                equal.append((k, first_pos[v]))
            else:
                first_pos[v] = k
        conditions = self.analysis.local[i]
        values = [first_pos[v] if self.vars[v].derived is None else self.vars[v].derived
                  for v in self.atom_vars[i]]
        whole = values == list(range(len(atom.columns)))  # share the table's tuple
        self._leaf_positions[i] = ({k for k in values if isinstance(k, int)} | set(nulls)
                                   | {k for pair in equal for k in pair})
        self._leaf_parts[i] = (values, conditions, nulls, equal, whole)
        if not conditions and all(isinstance(v, int) for v in values):
            # columns only: compiled, no interpreter frame per row
            return ColumnLeaf(values, nulls, equal, whole).project
        return ExpressionCompiler(self.atom_scope(i)).compile_filtered_tuple(
            None if whole else values, conditions, nulls, equal)

    def lifted_leaf(self, i: int, extra: list[exp.Expression]
                    ) -> Callable[[tuple], tuple | None] | None:
        """Atom ``i``'s leaf with ``extra`` values (expressions over its relation's rows, an
        aggregate's arguments) after the leaf tuple's: ``row -> (leaf values..., extra
        values...)``, or None where the leaf drops the row.  One generated function where
        the leaf and an argument would each run an interpreter frame per row (about 1k
        instructions each: TPC-H Q3's line items, filtered by date and summing
        ``l_extendedprice * (1 - l_discount)``).  None when that gains nothing: the leaf is
        the relation's row itself (kept, not copied: the table's tuple is shared), or the
        leaf and every extra value are C already (:class:`ColumnLeaf`, a bare column)."""
        values, conditions, nulls, equal, whole = self._leaf_parts[i]
        if whole or not extra:
            return None
        plain = not conditions and all(isinstance(v, int) for v in values)
        if plain and all(isinstance(unparen(e), exp.Column) for e in extra):
            return None
        return ExpressionCompiler(self.atom_scope(i)).compile_filtered_tuple(
            [*values, *extra], conditions, nulls, equal)

    def salvaging_leaf(self, i: int, extra: list[exp.Expression]) -> LeafSalvage | None:
        """Atom ``i``'s leaf and ``extra`` values, as :meth:`lifted_leaf` lays them out,
        for a row whose leaf raised: each value computed on its own, a failure kept as a
        :class:`~upkeep.failed_values.FailedValue` (SQL computes derived GROUP BY values
        and aggregate arguments over the join's rows: the row fails the view only while it
        joins).  None when no value can fail: every one is a column."""
        values, conditions, nulls, equal, _ = self._leaf_parts[i]
        computed = [v for v in [*values, *extra] if not isinstance(v, int)]
        if all(isinstance(unparen(e), exp.Column) for e in computed):
            return None
        compiler = ExpressionCompiler(self.atom_scope(i))
        keep = compiler.compile_filtered_tuple(None, conditions, nulls, equal)
        return LeafSalvage(keep, [itemgetter(v) if isinstance(v, int) else compiler.compile(v).fn
                                  for v in [*values, *extra]])

    def vars_of(self, node: exp.Expression) -> set[int]:
        out = set()
        for col in column_refs(node):
            out.add(self.var_of_slot[self.block.scope.resolve(col).slot])
        return out

    def scope_over(self, layout: list[int]) -> Scope:
        """Columns of the block visible in tuples laid out as the variables ``layout``."""
        pos = {v: k for k, v in enumerate(layout)}
        cols = []
        for c in self.block.scope.columns:
            v = self.var_of_slot.get(c.slot)
            if v is not None and v in pos:
                cols.append(Column(c.qualifier, c.name, c.type, pos[v]))
        return Scope(cols)

    def edges(self) -> list[tuple[int, ...]]:
        return [tuple(vs) for vs in self.atom_vars]

    def var_label(self, v: int) -> str:
        return self.vars[v].name


def needed_slots(block: Block, analysis: JoinAnalysis) -> set[int]:
    """Wide-row slots read above the join: select, grouping, aggregates, residual predicates,
    and the outer keys of EXISTS / IN subqueries."""
    nodes = [e for _, e in block.select] + list(block.group_by) + list(analysis.residual)
    nodes += [c for sub in block.subqueries for c in sub.outer_keys]
    if block.having is not None:
        nodes.append(block.having)
    out = set()
    for node in nodes:
        for col in column_refs(node):
            out.add(block.scope.resolve(col).slot)
    return out
