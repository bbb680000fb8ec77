"""Which shard each change goes to: views grouped by how their inputs can be partitioned.

A view is kept in every shard of its *group* by the local engine, over the part of the data
the shard receives.  For a single SELECT block over base tables we look for an equivalence
class of join columns (the variables of ``dynamic-yannakakis-iedyn.txt`` section 2): every
table with a column in the class is hash-partitioned on it, every other table is copied to
all shards (as in a broadcast join).  Each output tuple then has exactly one shard that holds
all of its witnesses, so the union of the shards' views is the view.  Aggregates and DISTINCT
additionally need the class to contain a grouping (or selected) column, so that no group is
split between shards.  Anything else (set operations, views over views, derived tables,
outer joins, global aggregates) goes to a group of one shard, which is still correct.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from ..core import Core
from ..errors import Error
from ..hashing import stable_hash
from ..local.catalog import LocalCatalog
from ..plan import Block, analyse_joins, atom_of_slot, bind_query
from ..sql import parse_one, relations_read
from .fixpoint import FixpointSpec, fixpoint_layout

SINGLE = "single"


@dataclass
class Group:
    """Views kept together: ``routes`` maps each partitioned table to the column index its
    rows are hashed on; tables not in ``routes`` are copied to every shard."""

    name: str
    shards: int
    views: list[str] = field(default_factory=list)
    routes: dict[str, int] = field(default_factory=dict)
    tables: set[str] = field(default_factory=set)
    fixpoint: FixpointSpec | None = None  # a recursive view's partitioned fixpoint

    def shards_of(self, table: str, row: tuple) -> range | tuple[int]:
        """The shards a row of ``table`` goes to."""
        column = self.routes.get(table)
        if column is None:
            return range(self.shards)
        return (stable_hash(row[column]) % self.shards,)

    def describe(self) -> str:
        if self.fixpoint is not None:
            return (f"recursive fixpoint over {self.shards} partitions (Spark tasks), base "
                    f"tables by first attribute: {', '.join(sorted(self.routes))}")
        if self.shards == 1:
            return "one shard"
        parts = [f"{t} by column {c}" for t, c in sorted(self.routes.items())]
        copied = sorted(self.tables - self.routes.keys())
        text = f"{self.shards} shards, {', '.join(parts)}"
        return text + (f"; copied to every shard: {', '.join(copied)}" if copied else "")


TABLES_GROUP = "tables"


def tables_group(db: LocalCatalog, names: list[str], shards: int) -> Group:
    """A group of no views holding the tables ``names`` that no view reads, so that their
    changes are checked as everywhere else (a delete must find its row, a key stays unique)
    and their rows are kept in the shards' logs, where statements and queries read them.
    Each is partitioned on its first PRIMARY KEY column, else its first column: equal rows
    and equal keys meet in one shard."""
    routes = {name: (db.tables[name].key or (0,))[0] for name in names}
    return Group(TABLES_GROUP, shards, [], routes if shards > 1 else {}, set(names))


def partition_columns(db: LocalCatalog, name: str, sql: str) -> dict[str, int] | None:
    """``{table: column index}`` to partition view ``name`` on, or None if it cannot be."""
    try:  # a single SELECT over base tables (WITH and derived tables do not bind here)
        plan = bind_query(parse_one(sql), db.schema_of)
        if not isinstance(plan, Block) or any(a.relation not in db.tables for a in plan.atoms):
            return None
        # the join variables: classes of equi-joined columns (DYN section 2)
        core = Core(plan, analyse_joins(plan), {c.slot for c in plan.scope.columns})
    except Error:
        return None
    if plan.aggregates and not plan.group_by:
        return None
    classes = {v.id: set(v.slots) for v in core.vars if v.slots}
    if plan.is_aggregate or plan.distinct:
        keys = plan.group_by if plan.is_aggregate else [e for _, e in plan.select]
        anchor = {core.var_of_slot[plan.scope.resolve(k).slot]
                  for k in keys if isinstance(k, exp.Column)}
        classes = {v: slots for v, slots in classes.items() if v in anchor}
    keys = {name: key for name, _columns, _not_null, key in db.describe()["tables"] if key}
    best: dict[str, int] | None = None
    for slots in classes.values():
        routes: dict[str, int] = {}
        conflicts: set[str] = set()
        for slot in sorted(slots):
            atom = plan.atoms[atom_of_slot(plan, slot)]
            column = slot - atom.offset
            if routes.get(atom.relation, column) != column:
                conflicts.add(atom.relation)
            routes[atom.relation] = column
        # A table under several aliases must be hashed on one column for all of them, and
        # be partitioned for every alias or for none.
        for i, atom in enumerate(plan.atoms):
            covered = any(atom_of_slot(plan, s) == i for s in slots)
            if not covered and atom.relation in routes:
                conflicts.add(atom.relation)
        # A PRIMARY KEY is checked where the rows are: only a table partitioned on its
        # (one-column) key, or copied whole, sees every row a duplicate could clash with.
        for table, column in routes.items():
            key = keys.get(table)
            if key is not None and tuple(key) != (column,):
                conflicts.add(table)
        # A subquery (EXISTS, IN) must see all of its relation in every shard.
        conflicts |= {sub.relation for sub in plan.subqueries}
        for table in conflicts:
            routes.pop(table, None)
        if routes and (best is None or len(routes) > len(best)):
            best = routes
    return best


def view_inputs(views: dict) -> dict[str, set[str]]:
    """Per user view (``{name: (sql, strategy)}``), the tables and views its SQL reads."""
    reads: dict[str, set[str]] = {}
    for name, (sql, _strategy) in views.items():
        reads[name] = relations_read(parse_one(sql))
    return reads


def _together(views: dict) -> tuple[set[str], dict[str, set[str]]]:
    reads = view_inputs(views)
    together = {n for n, r in reads.items() if r & views.keys()}
    changed = True
    while changed:  # views over views, and what they read, are kept in one shard together
        changed = False
        for name in list(together):
            for dep in reads[name] & views.keys():
                if dep not in together:
                    together.add(dep)
                    changed = True
    return together, reads


def plan_groups(db: LocalCatalog, shards: int, fixpoints: bool = False,
                skip: frozenset[str] = frozenset()) -> list[Group]:
    """Group the user views of ``db`` (its catalog) for ``shards`` shards; with
    ``fixpoints``, a recursive view that can run partitioned gets a fixpoint group of its
    own (:mod:`upkeep.spark.fixpoint`).  Views in ``skip`` are kept elsewhere."""
    views = db.describe()["views"]
    together, reads = _together(views)
    groups: dict[tuple, Group] = {}
    for name, (sql, _strategy) in views.items():
        if name in skip:
            continue
        if fixpoints and name not in together and shards > 1:
            layout = fixpoint_layout(db, name, shards)
            if layout is not None:
                (engine,) = db.runtime(name).engines.values()
                base = sorted(engine.program.base)
                groups[("fixpoint", name)] = Group(
                    f"fx{len(groups)}", shards, [name], dict.fromkeys(base, 0), set(base),
                    FixpointSpec(name, shards))
                continue
        routes = None if name in together or shards == 1 else partition_columns(db, name, sql)
        key = tuple(sorted(routes.items())) if routes else (SINGLE,)
        group = groups.get(key)
        if group is None:
            label = SINGLE if routes is None else f"g{len(groups)}"
            group = groups[key] = Group(label, shards if routes else 1, routes=routes or {})
        group.views.append(name)
    tables = set(db.tables)
    for group in groups.values():
        if group.fixpoint is not None:
            continue
        closure = set(group.views)
        frontier = list(group.views)
        while frontier:
            for dep in reads[frontier.pop()]:
                if dep in views and dep not in closure:
                    closure.add(dep)
                    frontier.append(dep)
        group.tables = {t for v in closure for t in reads[v] if t in tables}
    return list(groups.values())
