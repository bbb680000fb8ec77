"""Turning change records into table changes, and applying a batch of them.

:meth:`Applier.prepare` checks one record against the table schemas (table, operation,
columns, types) and coerces its row images.  :meth:`Applier.apply` stages a whole batch
inside an open transaction as one net change per table: rows deleted first (each as many
times as the batch's running count of that row dips below zero, so a delete must find its
row in the table or inserted earlier in the batch), then the rows inserted.
:meth:`Applier.find_bad` locates the records of a failed batch that the engine rejects, by
staging prefixes of the batch in transactions that are always rolled back.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from ..engine import Engine
from ..errors import Error
from ..types import WIDE_CONTEXT, SqlType, coerce_value
from .records import ChangeRecord

Schema = list[tuple[str, SqlType]]
_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
BISECT_LIMIT = 8  # bad records located by bisection per batch before going one by one


def converter(typ: SqlType) -> Callable[[Any], Any]:
    """:func:`upkeep.types.coerce_value` for ``typ``, with a shortcut for values that are
    already right (most JSON values); raises ValueError for a bad value."""
    if typ.is_integer:
        bound = 2 ** {"TINYINT": 7, "SMALLINT": 15, "INTEGER": 31}.get(typ.kind, 63)
        if typ.kind == "HUGEINT":
            bound = 2**127
        return lambda v: v if type(v) is int and -bound <= v < bound else coerce_value(v, typ)
    if typ.kind == "VARCHAR":
        return lambda v: v if type(v) is str else coerce_value(v, typ)
    if typ.kind == "DOUBLE":  # "NaN", "Infinity", "-Infinity": as sinks and dead letters write them
        return lambda v: v if type(v) is float else coerce_value(
            _NON_FINITE.get(v, v) if type(v) is str else v, typ)
    if typ.kind == "DATE":
        def date(v: Any) -> Any:
            if type(v) is str and len(v) == 10 and v[4] == v[7] == "-" and v[5] != "W":
                try:
                    return dt.date.fromisoformat(v)
                except ValueError:
                    pass
            return coerce_value(v, typ)
        return date
    if typ.kind == "DECIMAL":
        quantum = Decimal(1).scaleb(-typ.scale)
        limit = Decimal(10) ** (typ.precision - typ.scale)

        def decimal(v: Any) -> Any:
            kind = type(v)
            if kind is float or kind is int or (kind is str and v.isascii()):  # not '١٢'
                try:
                    # by its text: a JSON number is the decimal written in the record,
                    # not a DOUBLE (types.double_to_decimal is for DOUBLE values)
                    d = Decimal(str(v)).quantize(quantum, rounding=ROUND_HALF_UP,
                                                 context=WIDE_CONTEXT)  # all 38 digits
                except InvalidOperation:
                    d = None
                if d is not None and d.is_finite() and -limit < d < limit:
                    return d if d else d.copy_abs()  # "-0.00" is 0.00
            return coerce_value(v, typ)  # the engine's rules (and its error message)
        return decimal
    return lambda v: coerce_value(v, typ)


@dataclass
class Change:
    """A record turned into weighted rows of one table: ``(row, +1)`` / ``(row, -1)``."""

    record: ChangeRecord
    table: str
    rows: list[tuple[tuple, int]]


class BadRecord(Exception):
    """Why one record cannot be applied (internal; the runner names its position)."""


class _Rollback(Exception):
    pass


class Applier:
    """Applies change records to the tables of ``db``."""

    def __init__(self, db: Engine):
        self.db = db
        self.schemas: dict[str, Schema] = {t: list(db.schema_of(t)) for t in db.tables()}
        self.converters = {t: [converter(typ) for _, typ in schema]
                           for t, schema in self.schemas.items()}

    # ------------------------------------------------------------ records
    def prepare(self, record: ChangeRecord) -> Change:
        """The record's weighted rows; raises :class:`BadRecord` saying what is wrong."""
        if record.error is not None:
            raise BadRecord(record.error)
        schema = self.schemas.get(record.table or "")
        if schema is None:
            known = ", ".join(sorted(self.schemas)) or "none"
            raise BadRecord(f"unknown table {record.table!r} (tables: {known})")
        table = record.table or ""
        if record.op == "update":
            rows = [(self._coerce(record.before, table, "before"), -1),
                    (self._coerce(record.after, table, "after"), 1)]
        else:
            weight = 1 if record.op == "insert" else -1
            rows = [(self._coerce(record.row, table, "row"), weight)]
        return Change(record, table, rows)

    def _coerce(self, image: Any, table: str, key: str) -> tuple:
        schema = self.schemas[table]
        names = [n for n, _ in schema]
        if isinstance(image, dict):
            lowered = {str(k).lower(): v for k, v in image.items()}
            if len(lowered) < len(image):  # names are case-insensitive: one would be lost
                twice = sorted(k for k in image if sum(str(j).lower() == str(k).lower()
                                                        for j in image) > 1)
                raise BadRecord(f"'{key}' names column {str(twice[0]).lower()!r} twice "
                                f"({', '.join(map(repr, twice))}; names are case-insensitive)")
            unknown = [k for k in lowered if k not in names]
            if unknown:
                raise BadRecord(f"'{key}' has unknown column {unknown[0]!r} for table {table} "
                                f"(columns: {', '.join(names)})")
            missing = [n for n in names if n not in lowered]
            if missing:
                raise BadRecord(f"'{key}' lacks column(s) {', '.join(missing)} of table {table}")
            values = [lowered[n] for n in names]
        else:
            if len(image) != len(names):
                raise BadRecord(f"'{key}' has {len(image)} values, table {table} has "
                                f"{len(names)} columns ({', '.join(names)})")
            values = list(image)
        try:
            return tuple([f(v) for f, v in zip(self.converters[table], values, strict=True)])
        except ValueError:
            pass
        for convert, value, (name, _) in zip(self.converters[table], values, schema,
                                             strict=True):  # name the bad column
            try:
                convert(value)
            except ValueError as exc:
                raise BadRecord(f"'{key}' column {name} of table {table}: {exc}") from None
        raise AssertionError("unreachable")

    # ------------------------------------------------------------ batches
    def apply(self, changes: list[Change]) -> None:
        """Stage the batch's net change per table (call inside ``db.transaction()``); a
        table with update provenance takes the records one by one, in order, as the
        history its annotations record (a row inserted and deleted again is part of it:
        a what-if that aborts the delete brings it back)."""
        running: dict[str, dict[tuple, int]] = defaultdict(dict)
        lowest: dict[str, dict[tuple, int]] = defaultdict(dict)
        tracks = getattr(self.db, "has_update_provenance", lambda table: False)
        tracked = {t for t in {c.table for c in changes} if tracks(t)}  # once per table
        for change in changes:
            if change.table in tracked:
                for row, w in change.rows:
                    (self.db.insert if w > 0 else self.db.delete)(change.table, [row])
                continue
            run, low = running[change.table], lowest[change.table]
            for row, w in change.rows:
                n = run.get(row, 0) + w
                run[row] = n
                if n < low.get(row, 0):
                    low[row] = n
        for table, run in running.items():
            low = lowest[table]
            deletes = [row for row, n in low.items() for _ in range(-n)]
            inserts = [row for row, n in run.items() for _ in range(n - low.get(row, 0))]
            if deletes:
                self.db.delete(table, deletes)
            if inserts:
                self.db.insert(table, inserts)

    def apply_one(self, change: Change) -> None:
        """Stage one record; if a later part of an update fails, undo its earlier part."""
        done: list[tuple[tuple, int]] = []
        try:
            for row, w in change.rows:
                if w > 0:
                    self.db.insert(change.table, [row])
                else:
                    self.db.delete(change.table, [row])
                done.append((row, w))
        except Error:
            for row, w in reversed(done):
                if w > 0:
                    self.db.delete(change.table, [row])
                else:
                    self.db.insert(change.table, [row])
            raise

    def find_bad(self, changes: list[Change]) -> list[tuple[Change, Error]]:
        """The records the engine rejects, each given the good records before it, with the
        engine's error; nothing is applied (every trial is rolled back).

        The first failing prefix is found by bisection (a few bad records in a big batch
        cost a few dozen trials); past :data:`BISECT_LIMIT` bad records the rest is replayed
        one record at a time.
        """
        bad: list[tuple[Change, Error]] = []
        good: list[Change] = []
        i, n = 0, len(changes)
        while i < n:
            if len(bad) >= BISECT_LIMIT:
                bad += self._one_by_one(good, changes[i:])
                break
            error = self._try(good + changes[i:])
            if error is None:
                break
            lo, hi = 0, n - i  # prefixes of changes[i:]: lo records apply, hi records fail
            while hi - lo > 1:
                mid = (lo + hi) // 2
                failed = self._try(good + changes[i:i + mid])
                if failed is None:
                    lo = mid
                else:
                    hi, error = mid, failed
            good += changes[i:i + hi - 1]
            bad.append((changes[i + hi - 1], error))
            i += hi
        return bad

    def _try(self, changes: list[Change]) -> Error | None:
        """Why staging ``changes`` fails (None if it does not); always rolled back."""
        try:
            with self.db.transaction():
                self.apply(changes)
                raise _Rollback
        except _Rollback:
            return None
        except Error as exc:
            return exc

    def _one_by_one(self, good: list[Change], rest: list[Change]
                    ) -> list[tuple[Change, Error]]:
        bad: list[tuple[Change, Error]] = []
        try:
            with self.db.transaction():
                self.apply(good)
                for change in rest:
                    try:
                        self.apply_one(change)
                    except Error as exc:
                        bad.append((change, exc))
                raise _Rollback
        except _Rollback:
            pass
        return bad
