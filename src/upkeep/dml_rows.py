"""The rows a DELETE or UPDATE changes, found the same way on both engines.

A statement whose WHERE or SET reads a subquery (``IN (SELECT ..)``, ``EXISTS``, a scalar
subquery, correlated or not) is evaluated by DuckDB: the target's candidate rows are
handed to it numbered, under the target's name or alias, with every other relation the
statement reads, so the rows it finds are the stored ones, not copies read back.  The
local engine reads the candidates through a column index, the spark engine by a Spark job
over the tables' keyed state; both narrow them first by the WHERE's ``col = literal``
conjuncts (:func:`fixed_columns`).  An UPDATE's new rows are made from the values found
(:func:`updated_rows`) as DuckDB's UPDATE casts them.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from .errors import EvaluationError, SchemaError, UnsupportedError
from .expressions import literal_value
from .sql import assigned, constant, is_parameter, relations_read
from .table import Table
from .types import BIGINT, SqlType, coerce_value, format_row
from .views import query_duckdb
from .zset import Delta

#: the name the target's candidate rows take in DuckDB, with the hidden column numbering them
_TARGET, _ROW_ID = "upkeep_dml_target__", "upkeep_dml_row__"

#: a relation's columns and rows (duplicates repeated), as :func:`query_duckdb` reads them
Contents = Callable[[str], tuple[list[tuple[str, SqlType]], list[tuple]]]

_PROBE_TYPES = {"VARCHAR": str, "BOOLEAN": bool}


def fixed_columns(table: Table, condition: exp.Expression, alias: str
                  ) -> list[tuple[int, object]]:
    """The conjuncts ``col = literal`` of ``condition`` (the column unqualified or
    qualified by the target's ``alias``) whose literal is already a value of the column's
    Python type (integers, strings, booleans), as (column index, value).  Only such values
    narrow the candidates: SQL equality on them is Python equality, so a row without the
    value cannot be accepted (no casts, no NaN), and testing it cannot fail."""
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
    """The Python value of a plain literal (``5``, ``-5``, ``'x'``, ``TRUE``), as
    :func:`~upkeep.expressions.literal_value` reads it; None for anything else."""
    if isinstance(node, exp.Boolean):
        return node.this
    negative = isinstance(node, exp.Neg)
    if negative:
        node = node.this
    if not isinstance(node, exp.Literal) or (negative and node.is_string):
        return None
    try:
        value = literal_value(node)[0]
    except UnsupportedError:  # an integer beyond HUGEINT: no column's index holds it
        return None
    return -value if negative else value


def matches_by_duckdb(table: Table, stmt: exp.Delete | exp.Update, targets: list[int],
                      candidates: list[tuple[tuple, int]], contents_of: Contents,
                      check_relation: Callable[[str], object]) -> list[tuple[tuple, int, list]]:
    """The ``candidates`` (the target's rows with multiplicities, a superset of those the
    WHERE accepts) that a DELETE's or UPDATE's WHERE accepts, with the values its SET gives
    the columns ``targets`` (cast to their types as DuckDB's UPDATE casts them; a bound
    parameter as given), evaluated by DuckDB over ``contents_of`` the relations the
    statement reads (the target included, as it is before the statement).
    ``check_relation(name)`` raises for a relation that does not exist."""
    alias = stmt.this.alias_or_name.lower()
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
        check_relation(name)
    schema = table.columns + [(_ROW_ID, BIGINT)]
    numbered = [row + (i,) for i, (row, _) in enumerate(candidates)]

    def contents(name: str) -> tuple[list, list[tuple]]:
        return (schema, numbered) if name == _TARGET else contents_of(name)

    try:
        _, found = query_duckdb(query.sql(dialect="duckdb"), relations | {_TARGET}, contents)
    except (SchemaError, EvaluationError) as exc:  # said of the statement, not the rewrite
        reason = str(exc).split("\n")[0].split(": ", 1)[-1]
        raise type(exc)(f"{stmt.key.upper()} of {table.name}: DuckDB could not evaluate "
                        f"it: {reason}") from None
    changed = []
    for hit in sorted(found):
        computed = iter(hit[1:])
        values = [given[k] if k in given else next(computed) for k in range(len(targets))]
        changed.append((*candidates[hit[0]], values))
    return changed


def updated_rows(table: Table, changed: list[tuple[tuple, int, list]], targets: list[int],
                 parameters: list[bool]) -> Delta:
    """An UPDATE's net change of ``table``: each changed row (with its multiplicity) out,
    the row with the SET's values at ``targets`` in, each value cast to its column as
    DuckDB's UPDATE casts a SQL value (a bound parameter, ``parameters[k]``, stays as
    strict as ``db.insert``); a value that does not fit is a SchemaError naming the row."""
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
    return {r: w for r, w in delta.items() if w}
