"""The local engine's durable state: what is logged, what a snapshot holds, and recovery.

Every catalog change and committed batch is one log record (:class:`upkeep.storage.Storage`
frames, checksums and fsyncs it); a snapshot holds the catalog, every table's rows and
timers, the last batch id and its metadata.  Recovery loads the latest snapshot, replays
the log after it, and rebuilds the views from the recovered tables (views are derived
state, never stored).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow as pa

from ..expiry import Expiry
from ..storage import Storage, StorageError, StorageWarning
from ..table import Table
from .bulk_insert import replay
from .catalog import LocalCatalog

_CHUNK_ROWS = 65_536  # rows per snapshot frame: memory stays bounded on big tables


class Durability:
    """Log records and snapshots of one database directory (or nothing, in memory)."""

    def __init__(self, storage: Storage | None) -> None:
        self.storage = storage
        self.closed = False
        self.holding = 0  # statements under way whose records a snapshot must not split

    @contextmanager
    def holding_snapshots(self) -> Iterator[None]:
        """No snapshot while a statement that spans several log records runs (a CREATE
        TABLE AS: its table, its rows' batch, "filled"): a snapshot taken by its batch
        would replace the record that tells recovery the table is unfinished."""
        self.holding += 1
        try:
            yield
        finally:
            self.holding -= 1

    def check_open(self) -> None:
        """Refuse a change to a closed database: it could not be logged, and a change
        acknowledged but not logged would be lost at the next open."""
        if self.closed:
            raise StorageError("the database is closed: open it again to change it")

    def log(self, record: tuple) -> None:
        """Append one record; it is on disk (fsynced) when this returns, and when this
        raises (:class:`~upkeep.storage.StorageError`) the log is as it was."""
        self.check_open()
        if self.storage is not None:
            self.storage.append(record)

    def wants_snapshot(self) -> bool:
        return (self.storage is not None and not self.holding
                and self.storage.wants_snapshot())

    def snapshot(self, catalog: LocalCatalog, batches: int, metadata: dict,
                 after_commit: bool = False) -> bool:
        """Write the tables and catalog, so that recovery replays only what follows.

        ``after_commit``: taken because the log grew, after a commit was acknowledged, so
        it must not raise: a snapshot that cannot be written (a full disk) becomes a
        warning, the log keeps every record, and a later commit tries again.  Otherwise
        (``db.checkpoint()``) the :class:`~upkeep.storage.StorageError` is raised; nothing
        changed either way.  Returns whether the snapshot was written."""
        if self.storage is None:
            return False
        tables = list(catalog.tables.values())
        manifest = {
            "tables": [(t.name, t.columns, t.not_null, t.key,
                        t.expiry.state() if t.expiry else None, t.provenance) for t in tables],
            "provenance": catalog.provenance.history,
            "views": [(name, sql, strategy)
                      for name, (sql, strategy) in catalog.user_views.items()],
            # the user's views; their hidden helpers get theirs again with them
            "why": sorted(v for v in catalog.witnesses if v in catalog.user_views),
            # tables' column names as written (views name theirs again when re-created)
            "display": {t.name: list(catalog.display_names[t.name]) for t in tables
                        if t.name in catalog.display_names},
            "batches": batches,
            "metadata": metadata,
        }
        try:
            self.storage.snapshot(manifest, _row_chunks(tables))
        except StorageError as exc:
            if not after_commit:
                raise
            warnings.warn(str(exc), StorageWarning, stacklevel=2)
            return False
        return True

    def recover(self, catalog: LocalCatalog) -> tuple[int, dict]:
        """Fill ``catalog`` from the snapshot and the log; the last batch id and metadata."""
        if self.storage is None:
            return 0, {}
        snapshot, records = self.storage.load()
        tables = catalog.tables
        views: dict[str, tuple[str, str | None]] = {}
        why: set[str] = set()  # views WITH (provenance = 'why')
        batches, metadata = 0, {}
        if snapshot is not None:
            manifest, chunks = snapshot
            order = []
            for name, columns, not_null, key, expiry, *provenance in manifest["tables"]:
                table = Table(name, list(columns), not_null, key)
                table.expiry = Expiry.restore(expiry) if expiry else None
                table.provenance = provenance[0] if provenance else None
                catalog.add_table(table, manifest.get("display", {}).get(name))
                order.append(table)
            for index, rows in chunks:
                order[index].apply(rows)
            for txn, txn_metadata, ops in manifest.get("provenance", ()):
                catalog.provenance.replay(txn, txn_metadata, ops)
            views.update((name, (sql, strategy)) for name, sql, strategy in manifest["views"])
            why.update(manifest.get("why", ()))
            batches = manifest["batches"]
            metadata = manifest["metadata"]
        unfilled: set[str] = set()  # tables of a CREATE TABLE AS that did not return
        for record in records:
            kind = record[0]
            if kind in ("table", "table_as"):
                _, name, columns, not_null, key, ttl, *provenance = record
                if name in unfilled:  # its statement raised, and its drop was not logged
                    catalog.drop_table(name)
                    unfilled.discard(name)
                table = Table(name, columns, not_null, key)
                table.expiry = Expiry(ttl) if ttl else None
                table.provenance = provenance[0] if provenance else None
                catalog.add_table(table)
                if kind == "table_as":
                    unfilled.add(name)
            elif kind == "display":  # (display, table, its column names as written)
                catalog.set_display(record[1], record[2])
            elif kind == "filled":
                unfilled.discard(record[1])
            elif kind == "view":  # (view, name, sql, strategy[, keeps why-provenance])
                _, name, sql, strategy, *keeps_why = record
                views.pop(name, None)
                views[name] = (sql, strategy)
                why.discard(name)
                if keeps_why and keeps_why[0]:
                    why.add(name)
            elif kind == "why":  # written after its view record by earlier versions
                why.add(record[1])
            elif kind == "drop":
                _, what, name = record
                if what == "table":
                    catalog.drop_table(name)
                    unfilled.discard(name)
                else:
                    views.pop(name, None)
                    why.discard(name)
            elif kind == "batch":
                _, batch_id, deltas, batch_metadata, at, *provenance = record
                if provenance:
                    txn, ops = provenance[0]
                    catalog.provenance.replay(txn, batch_metadata, ops)
                for name, delta in deltas.items():
                    if isinstance(delta, pa.Table):  # a bulk insert, as keys (no expiry)
                        replay(tables[name], delta)
                        continue
                    tables[name].apply(delta)
                    if tables[name].expiry is not None:
                        tables[name].expiry.committed(delta, at)
                batches = batch_id
                if batch_metadata is not None:
                    metadata = batch_metadata
        for name in unfilled:  # all or nothing: the statement never returned
            catalog.drop_table(name)
            self.log(("drop", "table", name))
        catalog.restore_views(views)
        for name in sorted(why):
            if name not in catalog.witnesses:  # (older checkpoints list helpers too)
                catalog.add_witnesses(name, strict=False)
        catalog.changed()
        return batches, metadata

    def close(self) -> None:
        self.closed = True
        if self.storage is not None:
            self.storage.close()
            self.storage = None


def _row_chunks(tables: list[Table]) -> Iterator[tuple[int, dict[tuple, int]]]:
    """Every table's rows as (table index, {row: copies}) chunks for a snapshot."""
    for index, table in enumerate(tables):
        chunk: dict[tuple, int] = {}
        for row, weight in table.rows.items():
            chunk[row] = weight
            if len(chunk) == _CHUNK_ROWS:
                yield index, chunk
                chunk = {}
        if chunk:
            yield index, chunk
