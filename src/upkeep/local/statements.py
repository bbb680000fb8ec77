"""The local engine's SQL statements: what each statement kind does to the database.

``execute`` parses (:mod:`upkeep.sql`) and hands each statement here: DDL changes the
catalog and is logged; INSERT / DELETE / UPDATE turn into a Z-set for one table and are
staged (or committed at once outside a transaction); queries are served from a relation
directly (``SELECT * FROM r``) or evaluated by DuckDB over the current contents.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sqlglot import exp

from ..cursor import Cursor
from ..ddl import check_table_column, created_name, refuse_replace, with_properties
from ..dml_rows import fixed_columns, matches_by_duckdb, updated_rows
from ..errors import ParseError, SchemaError, UnsupportedError
from ..expressions import AGGREGATE_TYPES, ExpressionCompiler, table_scope
from ..plan import distinct_names, distinct_names_as_written
from ..planner import refuse_per_row_random
from ..sql import (
    insert_rows,
    insert_target,
    is_parameter,
    is_query,
    reads_subquery,
    relations_read,
    simple_scan,
    single_table_select,
    unsupported,
)
from ..table import Table
from ..topk import row_order
from ..update_provenance.hyperplane import HyperplaneParser, Insert
from ..views import query_duckdb
from .catalog import display_record, table_record

if TYPE_CHECKING:
    from .connection import Connection


def run_statement(db: Connection, stmt: exp.Expression) -> Cursor:
    """Run one parsed statement against ``db``."""
    if is_query(stmt):
        return select(db, stmt)
    if isinstance(stmt, exp.Create):
        return create(db, stmt)
    if isinstance(stmt, exp.Drop):
        return drop(db, stmt)
    if isinstance(stmt, exp.Insert):
        return insert(db, stmt)
    if isinstance(stmt, exp.Delete):
        return delete(db, stmt)
    if isinstance(stmt, exp.Update):
        return update(db, stmt)
    if isinstance(stmt, (exp.Alias, exp.Column, exp.Identifier, exp.Literal)):
        raise ParseError(f"not a statement: {stmt.sql()[:60]}", 1, 1)
    raise unsupported(stmt)


def create(db: Connection, stmt: exp.Create) -> Cursor:
    if db.in_transaction():
        kind = (stmt.args.get("kind") or "").upper()
        raise UnsupportedError(f"CREATE {kind} inside a transaction")
    if (stmt.args.get("kind") or "").upper() == "TABLE" and stmt.expression is not None:
        return create_table_as(db, stmt)
    db._catalog.execute_ddl(stmt, log=db._durability.log)
    return Cursor()


def create_table_as(db: Connection, stmt: exp.Create) -> Cursor:
    """``CREATE TABLE name AS SELECT ...``: a new table filled with the query's rows."""
    name = created_name(stmt)
    refuse_replace(stmt, name)
    if name in db._catalog.tables or name in db._catalog.views:
        if stmt.args.get("exists") and name in db._catalog.tables | db._catalog.user_views:
            return Cursor()
        db._catalog.check_name_free(name)
    cur = select(db, stmt.expression)
    names = distinct_names([n.lower() for n, _ in cur._columns])
    for column, (_, typ) in zip(names, cur._columns, strict=True):
        check_table_column(name, column, typ)
    table = with_properties(Table(name, [(n, t) for n, (_, t) in zip(
        names, cur._columns, strict=True)]), stmt)
    # the table, its rows' batch, then "filled": recovery drops a table whose statement
    # never returned (a kill between the records), so the statement is all or nothing;
    # no snapshot comes between them (it would drop the record that marks it unfinished)
    with db._durability.holding_snapshots():
        db._durability.log(("table_as", *table_record(table)[1:]))
        display = distinct_names_as_written([n for n, _ in cur._columns])
        if (record := display_record(table, display)) is not None:
            db._durability.log(record)
        db._catalog.add_table(table, display)
        try:
            db.insert(name, cur.fetchall())
            db._durability.log(("filled", name))
        except BaseException:  # nothing half-applied: the new table goes again
            db._catalog.drop_table(name)
            db._durability.log(("drop", "table", name))
            raise
    return Cursor()


def define_view(db: Connection, name: str, query: exp.Expression, strategy: str | None,
                why: bool = False) -> None:
    """Create a user view and record its definition in the log."""
    if db.in_transaction():
        raise UnsupportedError("CREATE VIEW inside a transaction")
    db._catalog.define_view(name, query, strategy, log=db._durability.log, why=why)


def drop(db: Connection, stmt: exp.Drop) -> Cursor:
    if db.in_transaction():
        raise UnsupportedError("DROP inside a transaction")
    db._catalog.execute_ddl(stmt, log=db._durability.log)
    return Cursor()


def insert(db: Connection, stmt: exp.Insert) -> Cursor:
    table = db._catalog.table(insert_target(stmt))
    if table.provenance is not None:
        HyperplaneParser(table.name, table.columns).insert_values(stmt)
    rows = insert_rows(stmt, table.columns,
                       lambda query: select(db, query).fetchall())
    if table.provenance is not None:
        coerce = table.coerce
        return Cursor(rowcount=db._hyperplane(
            table, [Insert(coerce(r, i)) for i, r in enumerate(rows)]))
    return Cursor(rowcount=db._change(table, rows, 1))


def matching(db: Connection, table: Table, where: exp.Expression | None,
             pred: Callable[[tuple], object] | None) -> list[tuple[tuple, int]]:
    """The table's rows (as staged) that satisfy ``where`` (compiled: ``pred``), with
    multiplicities, read through :func:`candidates`; the whole predicate is checked on
    each."""
    if pred is None:
        return list(db._catalog.staged_rows(table).items())
    return [(r, w) for r, w in candidates(db, table, where, table.name).items()
            if pred(r) is True]


def compiled_where(compiler: ExpressionCompiler, where: exp.Expression | None
                   ) -> Callable[[tuple], object] | None:
    """``where`` as a function of the table's rows (None without a WHERE)."""
    return None if where is None else compiler.compile_condition(where.this).fn


#: what the expression compiler does not evaluate, and DuckDB does: an unsupported
#: construct (``LIKE ... ESCAPE``), an expression nested deeper than Python recurses
NOT_COMPILED = (UnsupportedError, RecursionError)


def candidates(db: Connection, table: Table, where: exp.Expression | None, alias: str
               ) -> dict[tuple, int]:
    """The table's rows (as staged) ``where`` may accept. A WHERE that fixes a column
    (:func:`~upkeep.dml_rows.fixed_columns`) reads only the rows holding that value,
    through the table's column index (of the fixed column with the most distinct values in
    a sample; of the PRIMARY KEY's columns together when it fixes them all); else every
    row."""
    probes = [] if where is None else fixed_columns(table, where.this, alias)
    fixed = dict(probes)
    if not probes:
        return db._catalog.staged_rows(table)
    if table.key is not None and len(table.key) > 1 and all(c in fixed for c in table.key):
        return db._catalog.staged_rows_with(table, tuple(table.key),
                                            tuple(fixed[c] for c in table.key))
    # the column whose values are most varied in a sample: one index, not one each
    col, value = max(probes, key=lambda probe: table.distinct_in_sample(probe[0]))
    return db._catalog.staged_rows_with(table, col, value)


def refuse_windows_and_aggregates(stmt: exp.Delete | exp.Update) -> None:
    """Refuse a window function or an aggregate in a DELETE's or UPDATE's WHERE or SET
    (outside a subquery), as DuckDB's binder refuses them: a row's condition and new
    values are its own, not its group's."""
    verb = "DELETE" if isinstance(stmt, exp.Delete) else "UPDATE"
    where = stmt.args.get("where")
    parts = [where.this] if where is not None else []
    if isinstance(stmt, exp.Update):
        parts += [a.expression for a in stmt.expressions]
    for part in parts:
        for node in part.walk(prune=lambda n: isinstance(n, exp.Query)):
            if isinstance(node, exp.Window) or isinstance(node, AGGREGATE_TYPES):
                kind = "window function" if isinstance(node, exp.Window) else "aggregate"
                raise SchemaError(f"{verb} cannot hold the {kind} {node.sql(dialect='duckdb')} "
                                  "outside a subquery (as in DuckDB)")


def delete(db: Connection, stmt: exp.Delete) -> Cursor:
    table = db._catalog.table(stmt.this.name)
    refuse_per_row_random(stmt)  # provenance tables' constants are folded once too
    refuse_windows_and_aggregates(stmt)
    if table.provenance is not None:
        return Cursor(rowcount=db._hyperplane(
            table, [HyperplaneParser(table.name, table.columns).delete(stmt)]))
    where = stmt.args.get("where")
    by_duckdb = reads_subquery(stmt)
    if not by_duckdb:
        try:
            pred = compiled_where(ExpressionCompiler(table_scope(table.name, table.columns)),
                                  where)
        except NOT_COMPILED:
            by_duckdb = True
    db.expire()  # the rows matched are the rows left once the due ones expired
    if by_duckdb:
        hits = [(r, w) for r, w, _ in matching_by_duckdb(db, table, stmt, [])]
    else:
        hits = matching(db, table, where, pred)
    db._stage(table, {r: -w for r, w in hits})
    return Cursor(rowcount=sum(w for _, w in hits))


def update(db: Connection, stmt: exp.Update) -> Cursor:
    table = db._catalog.table(stmt.this.name)
    refuse_per_row_random(stmt)  # provenance tables' constants are folded once too
    refuse_windows_and_aggregates(stmt)
    if table.provenance is not None:
        return Cursor(rowcount=db._hyperplane(
            table, [HyperplaneParser(table.name, table.columns).update(stmt)]))
    targets = [table.column_index(a.this.name.lower()) for a in stmt.expressions]
    parameters = [is_parameter(a.expression) for a in stmt.expressions]
    where = stmt.args.get("where")
    by_duckdb = reads_subquery(stmt)
    if not by_duckdb:  # compiled first: an expression refused leaves the table as it is
        compiler = ExpressionCompiler(table_scope(table.name, table.columns))
        try:
            sets = [compiler.compile(a.expression).fn for a in stmt.expressions]
            pred = compiled_where(compiler, where)
        except NOT_COMPILED:
            by_duckdb = True
    db.expire()  # the rows matched are the rows left once the due ones expired
    if by_duckdb:
        changed = matching_by_duckdb(db, table, stmt, targets)
    else:
        changed = [(row, w, [fn(row) for fn in sets])
                   for row, w in matching(db, table, where, pred)]
    delta = updated_rows(table, changed, targets, parameters)
    db._stage(table, delta)
    return Cursor(rowcount=sum(w for _, w, _ in changed))


def matching_by_duckdb(db: Connection, table: Table, stmt: exp.Delete | exp.Update,
                       targets: list[int]) -> list[tuple[tuple, int, list]]:
    """The table's rows (as staged) that a DELETE's or UPDATE's WHERE with subqueries
    accepts, and the values its SET gives ``targets``, evaluated by DuckDB over the current
    contents (:func:`~upkeep.dml_rows.matches_by_duckdb`); the candidates are read through
    :func:`candidates`, and a subquery reading the target reads all of it."""
    alias = stmt.this.alias_or_name.lower()
    staged = list(candidates(db, table, stmt.args.get("where"), alias).items())
    return matches_by_duckdb(table, stmt, targets, staged, db._catalog.contents_of,
                             db._catalog.schema_of)


def select(db: Connection, stmt: exp.Expression) -> Cursor:
    """A query's result: ``SELECT * FROM r [LIMIT n]`` enumerates ``r``; anything else is
    evaluated by DuckDB over the current contents of the relations it reads."""
    db.expire()
    catalog = db._catalog
    simple = simple_scan(stmt)
    if simple is not None:
        name, limit = simple
        columns = catalog.display_schema_of(name)
        rows = []
        for row, w in catalog.weighted_rows(name):
            rows.extend([row] * w)
            if limit is not None and len(rows) >= limit:
                rows = rows[:limit]
                break
        return Cursor(columns, rows)
    relations = relations_read(stmt)
    for r in relations:
        catalog.schema_of(r)
    narrowed = _narrowed(db, stmt)
    name = narrowed[0] if narrowed is not None else None

    # DuckDB reads the relations under their column names as written, so it names the
    # result's columns as it would (``SELECT iD FROM t`` of ``t (Id ..)`` gives ``Id``)
    def contents_of(relation: str):
        rows = narrowed[1] if relation == name else catalog.contents_of(relation)[1]
        return catalog.display_schema_of(relation), rows

    def arrow_of(relation: str):
        kept = None if relation == name else catalog.arrow_of(relation, db.batches)
        if kept is None or relation not in catalog.display_names:
            return kept
        columns = catalog.display_schema_of(relation)
        return columns, kept[1].rename_columns([n for n, _ in columns])
    columns, rows = query_duckdb(stmt.sql(dialect="duckdb"), relations, contents_of,
                                 arrow_of)
    return Cursor(columns, rows)


def _narrowed(db: Connection, stmt: exp.Expression) -> tuple[str, list[tuple]] | None:
    """For a SELECT over one table (:func:`~upkeep.sql.single_table_select`) whose WHERE
    fixes columns (``col = literal`` conjuncts, :func:`candidates`): the table and the rows
    that may pass the WHERE, read through the table's index, so that DuckDB is handed those
    rows and not the whole table (a key lookup on a 100,000-row table took ~100 ms)."""
    found = single_table_select(stmt)
    if found is None:
        return None
    source, where = found
    name = source.name.lower()
    if name not in db._catalog.tables:
        return None
    table = db._catalog.table(name)
    alias = (source.alias or name).lower()
    if not fixed_columns(table, where.this, alias):
        return None
    found = candidates(db, table, where, alias)  # an index's rows come in hash order:
    return name, [r for r in sorted(found, key=row_order) for _ in range(found[r])]  # sorted
