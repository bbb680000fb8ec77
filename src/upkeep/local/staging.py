"""Changes staged inside an open transaction, checked as they arrive.

Each statement's change is checked against the committed table plus what is staged
before it (a delete must find its row, a key must stay unique, NOT NULL holds) and then
merged in, touching only the rows and keys that change: staging n rows costs O(n)
whatever the number of calls that bring them (``rows_examined`` counts the work).
A change that fails its check stages nothing.
"""

from __future__ import annotations

from ..table import Table
from ..zset import Delta
from .bulk_insert import BulkInsert


class Staging:
    """The open transaction's net change per table, and per keyed table its key counts."""

    def __init__(self) -> None:
        self.deltas: dict[str, Delta] = {}
        # a table's bulk inserts staged as keys (bulk_insert.py), while it has no other change
        self.bulk: dict[str, BulkInsert] = {}
        self._keys: dict[str, dict[tuple, int]] = {}
        self.rows_examined = 0

    def of(self, table: str) -> Delta | None:
        """What is staged for ``table``, as rows (a bulk insert's are made now)."""
        self._as_rows(table)
        return self.deltas.get(table)

    def all_rows(self) -> dict[str, Delta]:
        """Everything staged, as rows."""
        for table in list(self.bulk):
            self._as_rows(table)
        return self.deltas

    def _as_rows(self, table: str) -> None:
        """A bulk insert staged for ``table`` made into the rows it inserts (its checks were
        made when it was staged)."""
        bulk = self.bulk.get(table)
        if bulk is not None:  # (staged until its rows are made: an interrupt keeps it)
            self.deltas[table] = bulk.delta()
            del self.bulk[table]

    def stage_keys(self, table: Table, bulk: BulkInsert) -> None:
        """Check a bulk insert's PRIMARY KEY values against the table as staged so far,
        then stage it as keys, or, when the table has other changes staged, as rows."""
        if self.deltas.get(table.name):
            self.stage(table, bulk.delta())
            return
        if table.key is not None:
            keys = self._keys.setdefault(table.name, {})
            touched = {k: keys.get(k, 0) + n for k, n in bulk.key_counts.items()}
            table.check_new_keys(touched, bulk.key_parts)
            keys.update(touched)
        self.rows_examined += len(bulk)
        staged = self.bulk.get(table.name)
        if staged is None:
            self.bulk[table.name] = bulk
        else:
            staged.extend(bulk)

    def stage(self, table: Table, delta: Delta) -> None:
        """Check ``delta`` against the table as staged so far, then merge it in.

        A row tuple's hash is not cached, and hashing a wide row is a good part of staging
        it: the first change of a table in the transaction is checked and copied whole
        (the copy reuses the stored hashes).  A later one touching none of the staged rows
        (an insert after the deletes of an update) is checked whole too, after one hash of
        each row (``isdisjoint``), and merged in by ``dict.update``, which reuses its
        stored hashes; one touching staged rows hashes each of its rows twice (a lookup in
        what is staged, a store in the merged change)."""
        if self.bulk:
            self._as_rows(table.name)
        pending = self.deltas.get(table.name)
        if pending and not pending.keys().isdisjoint(delta):
            merged: Delta = {}
            get = pending.get
            for row, w in delta.items():
                old = get(row)
                merged[row] = w if old is None else old + w
        else:
            merged = delta
        self.rows_examined += len(delta)
        table.check_rows(merged)
        keys = None
        if table.key is not None:
            keys = self._keys.setdefault(table.name, {})
            touched: dict[tuple, int] = {}
            for row, w in delta.items():
                k = tuple(row[i] for i in table.key)
                touched[k] = touched.get(k, keys.get(k, 0)) + w
            table.check_keys(touched)
            keys.update(touched)
        if not pending:
            pending = self.deltas[table.name] = dict(delta)
        else:
            pending.update(merged)
        if merged is not delta and 0 in merged.values():  # rows staged, then taken back
            for row in [row for row, w in merged.items() if not w]:
                del pending[row]
