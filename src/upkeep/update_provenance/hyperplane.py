"""Hyperplane update queries: the DML fragment update provenance is defined for.

``papers/update-provenance-hyperplane-transactions.txt`` section 2 (the "Note" after
Example 2.4): INSERT of constant rows; ``DELETE FROM R WHERE s1 AND ... AND sm`` and
``UPDATE R SET A1 = c1, ... WHERE s1 AND ... AND sm`` with each ``si`` of the form
``A = c`` or ``A <> c``.  Only on this fragment is provenance equivalence-invariant
(Proposition 3.5), so anything else on a provenance table is refused with the construct and
its position, and changes nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal

from sqlglot import exp

from ..errors import EvaluationError, SchemaError, UnsupportedError
from ..expressions import _where, cast_value
from ..sql import assigned, constant, insert_target, is_parameter, located
from ..types import INT_RANGES, SqlType, coerce_value

EQ, NE, IS = "=", "<>", "is"


@dataclass(frozen=True)
class Pattern:
    """A conjunction of ``column op constant`` (the paper's pattern ``u``; spec U.1).
    ``=`` and ``<>`` follow SQL: a NULL on either side never matches.  ``is`` (used by
    ``db.delete`` of given rows) matches NULL to NULL."""

    conditions: tuple[tuple[int, str, object], ...] = ()

    def matches(self, row: tuple) -> bool:
        for col, op, value in self.conditions:
            v = row[col]
            if op == IS:
                if not _same(v, value) or (v is None) != (value is None):
                    return False
            elif v is None or value is None or _same(v, value) != (op == EQ):
                return False
        return True

    def equalities(self) -> list[tuple[int, object]]:
        """The ``column = constant`` conditions (an index can answer them)."""
        return [(c, v) for c, op, v in self.conditions if op in (EQ, IS)]

    @staticmethod
    def of_row(row: tuple) -> Pattern:
        return Pattern(tuple((i, IS, v) for i, v in enumerate(row)))


def _same(v: object, value: object) -> bool:
    """SQL equality of two non-NULL values as DuckDB compares them: a NaN equals a NaN."""
    return v == value or (v != v and value != value)


@dataclass(frozen=True)
class Insert:
    row: tuple


@dataclass(frozen=True)
class Delete:
    pattern: Pattern


@dataclass(frozen=True)
class Modify:
    """``UPDATE ... SET`` (the paper's ``R^M(u1, u2)``): every tuple matching ``pattern``
    moves to the tuple with the ``sets`` (column, constant) applied."""

    pattern: Pattern
    sets: tuple[tuple[int, object], ...]

    def image(self, row: tuple) -> tuple:
        out = list(row)
        for col, value in self.sets:
            out[col] = value
        return tuple(out)


Query = Insert | Delete | Modify


def _compared_number(value: int | float | Decimal, typ: SqlType) -> object:
    """A number in a WHERE condition on an INTEGER or DECIMAL column, as the engine
    compares it: by value (``k = 1.0`` is ``k = 1``; a DOUBLE constant compares as a
    DOUBLE, where it equals one value of the column at most: :func:`_one_value_as_double`).  If no value of the column equals it, the number itself: ``=`` then holds for
    no row and ``<>`` for every row (:class:`Pattern` compares with ``==``)."""
    candidates = [value]
    if not isinstance(value, int) and math.isfinite(value):
        candidates.append(int(value))
    for candidate in candidates:
        try:
            coerced = coerce_value(candidate, typ)
        except ValueError:
            continue
        if (float(coerced) == value) if isinstance(value, float) else (coerced == value):
            return coerced
    return value


def _one_value_as_double(value: float, typ: SqlType) -> bool:
    """Whether at most one value of an integer or DECIMAL column equals DOUBLE ``value``
    compared as DOUBLEs (as DuckDB compares them): integers below 2**53 and decimals of at
    most 15 digits each have a DOUBLE of their own; past them, several share one, and
    ``col = value`` is no hyperplane (a value past the column's range equals none)."""
    if typ.kind == "DECIMAL":
        return (typ.precision or 18) <= 15
    return not math.isfinite(value) or abs(value) < 2.0**53 or abs(value) > INT_RANGES[typ.kind]


def _refuse(what: str, node: exp.Expression, table: str) -> UnsupportedError:
    return UnsupportedError(
        f"{what} on provenance table {table}: update provenance covers INSERT of constant "
        f"rows and DELETE / UPDATE ... SET col = constant whose WHERE is a conjunction of "
        f"col = constant / col <> constant{located(node)}")


class HyperplaneParser:
    """Turns DML on one provenance table into hyperplane queries, or refuses it."""

    def __init__(self, table: str, columns: list[tuple[str, SqlType]]):
        self.table = table
        self.columns = columns
        self.names = [n for n, _ in columns]

    def _column(self, node: exp.Expression) -> int | None:
        if isinstance(node, exp.Column) and (not node.table or node.table.lower() == self.table):
            name = node.name.lower()
            if name not in self.names:
                raise SchemaError(f"table {self.table} has no column {name}{_where(node)}")
            return self.names.index(name)
        return None

    def _constant(self, node: exp.Expression, col: int, context: exp.Expression,
                  compared: bool = False) -> object:
        """The value of constant ``node`` for column ``col``: a value of the column's type
        (cast as a SET or an INSERT into any table casts it, :func:`upkeep.sql.assigned`),
        or, ``compared`` (a WHERE condition), a number compared by value as the engine
        compares it, any other value strictly of the column's type."""
        if any(True for _ in node.find_all(exp.Column)) or any(
                True for _ in node.find_all(exp.Subquery, exp.Select)):
            raise _refuse(f"a non-constant value {node.sql()!r}", context, self.table)
        value, typ = constant(node), self.columns[col][1]
        if compared and isinstance(node, exp.Literal) and node.is_string and (
                typ.is_numeric or typ.kind in ("BOOLEAN", "TIMESTAMP")):
            try:  # text compared with the column is cast to its type, as DuckDB binds it
                return coerce_value(cast_value(value, typ), typ)
            except (ValueError, EvaluationError):
                raise SchemaError(f"{node.sql()} cannot be cast to {typ.sql()} for column "
                                  f"{self.names[col]} of {self.table}{located(context)}"
                                  ) from None
        if compared and typ.is_numeric and typ.kind != "DOUBLE" and \
                isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
            if isinstance(value, float) and not _one_value_as_double(value, typ):
                raise _refuse(f"{node.sql()} (a DOUBLE, which several values of "
                              f"{self.names[col]} {typ.sql()} equal as DOUBLEs)", context,
                              self.table)
            return _compared_number(value, typ)
        try:
            return coerce_value(value if compared else assigned(value, typ, is_parameter(node)), typ)
        except (ValueError, EvaluationError) as exc:
            raise SchemaError(f"{node.sql()} for column {self.names[col]} of {self.table}: "
                              f"{exc}{located(context)}") from None

    def pattern(self, where: exp.Expression | None) -> Pattern:
        if where is None:
            return Pattern()
        conditions = []
        todo = [where.this if isinstance(where, exp.Where) else where]
        while todo:
            node = todo.pop()
            if isinstance(node, exp.Paren):
                todo.append(node.this)
            elif isinstance(node, exp.And):
                todo.extend((node.right, node.left))
            elif isinstance(node, (exp.EQ, exp.NEQ)):
                op = EQ if isinstance(node, exp.EQ) else NE
                left, right = node.this, node.expression
                col = self._column(left)
                value_node = right
                if col is None:
                    col, value_node = self._column(right), left
                if col is None or self._column(value_node) is not None:
                    raise _refuse(f"the condition {node.sql()!r}", node, self.table)
                conditions.append((col, op, self._constant(value_node, col, node,
                                                           compared=True)))
            else:
                raise _refuse(f"the condition {node.sql()!r}", node, self.table)
        return Pattern(tuple(conditions))

    def delete(self, stmt: exp.Delete) -> Delete:
        for key in ("using", "returning", "limit", "order"):
            if stmt.args.get(key):
                raise _refuse(f"DELETE with {key.upper()}", stmt, self.table)
        return Delete(self.pattern(stmt.args.get("where")))

    def update(self, stmt: exp.Update) -> Modify:
        for key in ("from", "joins", "returning", "limit", "order"):
            if stmt.args.get(key):
                raise _refuse(f"UPDATE with {key.upper()}", stmt, self.table)
        sets = []
        for assignment in stmt.expressions:
            col = self._column(assignment.this)
            if col is None:
                raise _refuse(f"the assignment {assignment.sql()!r}", assignment, self.table)
            sets.append((col, self._constant(assignment.expression, col, assignment)))
        return Modify(self.pattern(stmt.args.get("where")), tuple(sets))

    def insert_values(self, stmt: exp.Insert) -> None:
        """Refuse an INSERT whose rows are not constants (INSERT ... SELECT, a VALUES row
        holding a subquery: its value depends on the contents, which a what-if changes)."""
        if not isinstance(stmt.expression, exp.Values):
            raise _refuse("INSERT ... SELECT", stmt, insert_target(stmt))
        subquery = stmt.expression.find(exp.Select)
        if subquery is not None:
            raise _refuse("a subquery in VALUES", subquery, insert_target(stmt))
