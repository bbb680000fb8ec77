"""Turning change records into table changes, and applying a batch of them.

:meth:`Applier.prepare` checks one record against the table schemas (table, operation,
columns, types) and coerces its row images.  :meth:`Applier.apply` stages a whole batch
inside an open transaction as one net change per table: rows deleted first (each as many
times as the batch's running count of that row dips below zero, so a delete must find its
row in the table or inserted earlier in the batch), then the rows inserted.
:meth:`Applier.find_bad` replays a failed batch one record at a time inside a transaction
that is always rolled back, to name the records the engine rejects.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from ..connection import Connection
from ..errors import Error
from ..types import SqlType, coerce_value
from .records import ChangeRecord

Schema = list[tuple[str, SqlType]]


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

    def __init__(self, db: Connection):
        self.db = db
        self.schemas: dict[str, Schema] = {t: list(db.schema_of(t)) for t in db.tables()}

    # ------------------------------------------------------------ records
    def prepare(self, record: ChangeRecord) -> Change:
        """The record's weighted rows; raises :class:`BadRecord` saying what is wrong."""
        if record.error is not None:
            raise BadRecord(record.error)
        schema = self.schemas.get(record.table or "")
        if schema is None:
            known = ", ".join(sorted(self.schemas)) or "none"
            raise BadRecord(f"unknown table {record.table!r} (tables: {known})")
        if record.op == "update":
            rows = [(self._coerce(record.before, schema, record.table, "before"), -1),
                    (self._coerce(record.after, schema, record.table, "after"), 1)]
        else:
            weight = 1 if record.op == "insert" else -1
            rows = [(self._coerce(record.row, schema, record.table, "row"), weight)]
        return Change(record, record.table or "", rows)

    @staticmethod
    def _coerce(image: Any, schema: Schema, table: str | None, key: str) -> tuple:
        names = [n for n, _ in schema]
        if isinstance(image, dict):
            lowered = {str(k).lower(): v for k, v in image.items()}
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
        out = []
        for value, (name, typ) in zip(values, schema, strict=True):
            try:
                out.append(coerce_value(value, typ))
            except ValueError as exc:
                raise BadRecord(f"'{key}' column {name} of table {table}: {exc}") from None
        return tuple(out)

    # ------------------------------------------------------------ batches
    def apply(self, changes: list[Change]) -> None:
        """Stage the batch's net change per table (call inside ``db.transaction()``)."""
        running: dict[str, dict[tuple, int]] = defaultdict(dict)
        lowest: dict[str, dict[tuple, int]] = defaultdict(dict)
        for change in changes:
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

    def find_bad(self, changes: list[Change]) -> list[tuple[Change, str]]:
        """Replay ``changes`` one by one in a transaction that is rolled back; the records
        the engine rejects (given the good ones before them), with the reason."""
        bad: list[tuple[Change, str]] = []
        try:
            with self.db.transaction():
                for change in changes:
                    try:
                        self.apply_one(change)
                    except Error as exc:
                        bad.append((change, str(exc)))
                raise _Rollback
        except _Rollback:
            pass
        return bad
