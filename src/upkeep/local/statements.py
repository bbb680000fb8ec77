"""The local engine's SQL statements: what each statement kind does to the database.

``execute`` parses (:mod:`upkeep.sql`) and hands each statement here: DDL changes the
catalog and is logged; INSERT / DELETE / UPDATE turn into a Z-set for one table and are
staged (or committed at once outside a transaction); queries are served from a relation
directly (``SELECT * FROM r``) or evaluated by DuckDB over the current contents.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from ..cursor import Cursor
from ..ddl import check_table_column, created_name, refuse_replace, with_properties
from ..errors import EvaluationError, ParseError, SchemaError, UnsupportedError
from ..expressions import ExpressionCompiler, table_scope
from ..plan import distinct_names
from ..planner import refuse_per_row_random
from ..sql import (
    assigned,
    constant,
    insert_rows,
    insert_target,
    is_parameter,
    is_query,
    reads_subquery,
    relations_read,
    simple_scan,
    unsupported,
)
from ..table import Table
from ..types import BIGINT, coerce_value, format_row
from ..update_provenance.hyperplane import HyperplaneParser, Insert
from ..views import query_duckdb
from ..zset import Delta
from .catalog import table_record

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
    # never returned (a kill between the records), so the statement is all or nothing
    db._durability.log(("table_as", *table_record(table)[1:]))
    db._catalog.add_table(table)
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


def matching(db: Connection, table: Table, where: exp.Expression | None
             ) -> list[tuple[tuple, int]]:
    """The table's rows (as staged) that satisfy ``where``, with multiplicities, read
    through :func:`candidates`; the whole predicate is checked on each."""
    if where is None:
        return list(db._catalog.staged_rows(table).items())
    pred = ExpressionCompiler(table_scope(table.name, table.columns)).compile(where.this).fn
    return [(r, w) for r, w in candidates(db, table, where, table.name).items()
            if pred(r) is True]


def candidates(db: Connection, table: Table, where: exp.Expression | None, alias: str
               ) -> dict[tuple, int]:
    """The table's rows (as staged) ``where`` may accept. A WHERE that fixes a column
    (``col = literal`` among its conjuncts, the column qualified by the table's ``alias``
    or not at all) reads only the rows holding that value, through the table's column
    index (of the fixed column with the most distinct values in a sample; of the PRIMARY
    KEY's columns together when it fixes them all); else every row."""
    probes = [] if where is None else _equality_probes(table, where.this, alias)
    fixed = dict(probes)
    if not probes:
        return db._catalog.staged_rows(table)
    if table.key is not None and len(table.key) > 1 and all(c in fixed for c in table.key):
        return db._catalog.staged_rows_with(table, tuple(table.key),
                                            tuple(fixed[c] for c in table.key))
    # the column whose values are most varied in a sample: one index, not one each
    col, value = max(probes, key=lambda probe: table.distinct_in_sample(probe[0]))
    return db._catalog.staged_rows_with(table, col, value)


_PROBE_TYPES = {"VARCHAR": str, "BOOLEAN": bool}


def _equality_probes(table: Table, condition: exp.Expression, alias: str
                     ) -> list[tuple[int, object]]:
    """The conjuncts ``col = literal`` of ``condition`` whose literal is already a value of
    the column's Python type (integers, strings, booleans), as (column index, value). Only
    such values are looked up: SQL equality on them is Python equality, so an index finds
    every row the predicate accepts (no casts, no NaN)."""
    probes = []
    for conjunct in condition.flatten() if isinstance(condition, exp.And) else (condition,):
        if not isinstance(conjunct, exp.EQ):
            continue
        column, literal = conjunct.this, conjunct.expression
        if isinstance(literal, exp.Column):
            column, literal = literal, column
        if not isinstance(column, exp.Column) or column.table.lower() not in ("", alias):
            continue
        value = _literal_value(literal)
        name = column.name.lower()
        for i, (col, sql_type) in enumerate(table.columns):
            if col != name:
                continue
            wanted = int if sql_type.is_integer else _PROBE_TYPES.get(sql_type.kind)
            if wanted is not None and type(value) is wanted:
                probes.append((i, value))
    return probes


def _literal_value(node: exp.Expression) -> object:
    """The Python value of a plain literal (``5``, ``-5``, ``'x'``, ``TRUE``), else None."""
    if isinstance(node, exp.Boolean):
        return node.this
    negative = isinstance(node, exp.Neg)
    if negative:
        node = node.this
    if not isinstance(node, exp.Literal):
        return None
    if node.is_string:
        return None if negative else node.this
    try:
        value = int(node.this)
    except ValueError:
        return None
    return -value if negative else value


def delete(db: Connection, stmt: exp.Delete) -> Cursor:
    table = db._catalog.table(stmt.this.name)
    refuse_per_row_random(stmt)  # provenance tables' constants are folded once too
    if table.provenance is not None:
        return Cursor(rowcount=db._hyperplane(
            table, [HyperplaneParser(table.name, table.columns).delete(stmt)]))
    db.expire()  # the rows matched are the rows left once the due ones expired
    if reads_subquery(stmt):
        hits = [(r, w) for r, w, _ in matching_by_duckdb(db, table, stmt, [])]
    else:
        hits = matching(db, table, stmt.args.get("where"))
    db._stage(table, {r: -w for r, w in hits})
    return Cursor(rowcount=sum(w for _, w in hits))


def update(db: Connection, stmt: exp.Update) -> Cursor:
    table = db._catalog.table(stmt.this.name)
    refuse_per_row_random(stmt)  # provenance tables' constants are folded once too
    if table.provenance is not None:
        return Cursor(rowcount=db._hyperplane(
            table, [HyperplaneParser(table.name, table.columns).update(stmt)]))
    targets = [table.column_index(a.this.name.lower()) for a in stmt.expressions]
    parameters = [is_parameter(a.expression) for a in stmt.expressions]
    by_duckdb = reads_subquery(stmt)
    if not by_duckdb:  # compiled first: an expression refused leaves the table as it is
        compiler = ExpressionCompiler(table_scope(table.name, table.columns))
        sets = [compiler.compile(a.expression).fn for a in stmt.expressions]
    db.expire()  # the rows matched are the rows left once the due ones expired
    if by_duckdb:
        changed = matching_by_duckdb(db, table, stmt, targets)
    else:
        changed = [(row, w, [fn(row) for fn in sets])
                   for row, w in matching(db, table, stmt.args.get("where"))]
    delta: Delta = {}
    for i, (row, w, values) in enumerate(changed):
        new = list(row)
        for col, value, parameter in zip(targets, values, parameters, strict=True):
            typ = table.columns[col][1]
            try:
                new[col] = coerce_value(assigned(value, typ, parameter), typ)
            except (ValueError, EvaluationError) as exc:  # a value of the wrong type
                raise SchemaError(f"UPDATE of row {format_row(row)} in {table.name}: {exc}",
                                  row, i) from None
        delta[row] = delta.get(row, 0) - w
        new_row = tuple(new)
        delta[new_row] = delta.get(new_row, 0) + w
    db._stage(table, {r: w for r, w in delta.items() if w})
    return Cursor(rowcount=sum(w for _, w, _ in changed))


#: the name the target table's rows take in DuckDB for :func:`matching_by_duckdb`, with
#: the hidden column numbering them
_TARGET, _ROW_ID = "upkeep_dml_target__", "upkeep_dml_row__"


def matching_by_duckdb(db: Connection, table: Table, stmt: exp.Delete | exp.Update,
                       targets: list[int]) -> list[tuple[tuple, int, list]]:
    """The table's rows (as staged) that a DELETE's or UPDATE's WHERE accepts, with their
    multiplicities and the values its SET gives the columns ``targets`` (cast to their
    types as DuckDB's UPDATE casts them), evaluated by DuckDB over the current contents:
    a WHERE or SET with subqueries, correlated or not, reading any table or view (the target
    too, as it is before the statement), as a ``SELECT`` in the same place reads them.
    Each distinct row the WHERE may accept (:func:`candidates`: those holding the values
    its ``col = literal`` conjuncts fix, through an index) is given to DuckDB once,
    numbered, under the target's name or alias, so the rows found are the stored ones, not
    copies read back; a subquery reading the target reads all of it."""
    alias = stmt.this.alias_or_name.lower()
    staged = list(candidates(db, table, stmt.args.get("where"), alias).items())
    query = exp.select(exp.column(_ROW_ID, table=alias)).from_(
        exp.Table(this=exp.to_identifier(_TARGET), alias=exp.TableAlias(
            this=exp.to_identifier(alias))))
    given: dict[int, object] = {}  # SET position -> a bound parameter's Python value
    for k, (col, assignment) in enumerate(zip(targets, stmt.expressions, strict=True)):
        if is_parameter(assignment.expression):  # as given (see assigned), not DuckDB's
            given[k] = constant(assignment.expression)
        else:
            query = query.select(exp.Cast(this=assignment.expression.copy(),
                                          to=exp.DataType.build(table.columns[col][1].sql())))
    where = stmt.args.get("where")
    if where is not None:
        query = query.where(where.this.copy())
    ctes = stmt.args.get("with_")
    if ctes is not None:  # WITH .. DELETE / UPDATE: the subqueries read its CTEs
        query.set("with_", ctes.copy())
    relations = relations_read(query) - {_TARGET}
    for name in relations:
        db._catalog.schema_of(name)
    schema = table.columns + [(_ROW_ID, BIGINT)]
    numbered = [row + (i,) for i, (row, _) in enumerate(staged)]

    def contents_of(name: str) -> tuple[list, list[tuple]]:
        return (schema, numbered) if name == _TARGET else db._catalog.contents_of(name)

    try:
        _, found = query_duckdb(query.sql(dialect="duckdb"), relations | {_TARGET},
                                contents_of)
    except (SchemaError, EvaluationError) as exc:  # said of the statement, not the rewrite
        reason = str(exc).split("\n")[0].split(": ", 1)[-1]
        raise type(exc)(f"{stmt.key.upper()} of {table.name}: DuckDB could not evaluate "
                        f"it: {reason}") from None
    changed = []
    for hit in sorted(found):
        computed = iter(hit[1:])
        values = [given[k] if k in given else next(computed) for k in range(len(targets))]
        changed.append((*staged[hit[0]], values))
    return changed


def select(db: Connection, stmt: exp.Expression) -> Cursor:
    """A query's result: ``SELECT * FROM r [LIMIT n]`` enumerates ``r``; anything else is
    evaluated by DuckDB over the current contents of the relations it reads."""
    db.expire()
    catalog = db._catalog
    simple = simple_scan(stmt)
    if simple is not None:
        name, limit = simple
        columns = catalog.schema_of(name)
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
    columns, rows = query_duckdb(stmt.sql(dialect="duckdb"), relations, catalog.contents_of)
    return Cursor(columns, rows)
