"""The local engine's durable state: what is logged, what a snapshot holds, and recovery.

Every catalog change and committed batch is one log record (:class:`upkeep.storage.Storage`
frames, checksums and fsyncs it); a snapshot holds the catalog, every table's rows and
timers, the last batch id and its metadata.  Recovery loads the latest snapshot, replays
the log after it, and rebuilds the views from the recovered tables (views are derived
state, never stored).
"""

from __future__ import annotations

from ..errors import Error
from ..expiry import Expiry
from ..storage import Storage
from ..table import Table
from .catalog import LocalCatalog


class Durability:
    """Log records and snapshots of one database directory (or nothing, in memory)."""

    def __init__(self, storage: Storage | None) -> None:
        self.storage = storage

    def log(self, record: tuple) -> None:
        """Append one record; it is on disk (fsynced) when this returns."""
        if self.storage is None:
            return
        try:
            self.storage.append(record)
        except OSError as exc:
            raise Error(f"could not write the log of {self.storage.path}: {exc}") from exc

    def wants_snapshot(self) -> bool:
        return self.storage is not None and self.storage.wants_snapshot()

    def snapshot(self, catalog: LocalCatalog, batches: int, metadata: dict) -> None:
        """Write the tables and catalog, so that recovery replays only what follows."""
        if self.storage is None:
            return
        self.storage.snapshot({
            "tables": [(t.name, t.columns, t.not_null, t.key, t.rows.as_dict(),
                        t.expiry.state() if t.expiry else None)
                       for t in catalog.tables.values()],
            "views": list(catalog.user_views.items()),
            "batches": batches,
            "metadata": metadata,
        })

    def recover(self, catalog: LocalCatalog) -> tuple[int, dict]:
        """Fill ``catalog`` from the snapshot and the log; the last batch id and metadata."""
        if self.storage is None:
            return 0, {}
        snapshot, records = self.storage.load()
        tables = catalog.tables
        views: dict[str, tuple[str, str | None]] = {}
        batches, metadata = 0, {}
        if snapshot is not None:
            for name, columns, not_null, key, rows, expiry in snapshot["tables"]:
                table = tables[name] = Table(name, columns, not_null, key)
                table.apply(rows)
                table.expiry = Expiry.restore(expiry) if expiry else None
            views.update(snapshot["views"])
            batches = snapshot["batches"]
            metadata = snapshot["metadata"]
        for record in records:
            kind = record[0]
            if kind == "table":
                _, name, columns, not_null, key, ttl = record
                tables[name] = Table(name, columns, not_null, key)
                tables[name].expiry = Expiry(ttl) if ttl else None
            elif kind == "view":
                _, name, sql, strategy = record
                views.pop(name, None)
                views[name] = (sql, strategy)
            elif kind == "drop":
                _, what, name = record
                (tables if what == "table" else views).pop(name, None)
            elif kind == "batch":
                _, batch_id, deltas, batch_metadata, at = record
                for name, delta in deltas.items():
                    tables[name].apply(delta)
                    if tables[name].expiry is not None:
                        tables[name].expiry.committed(delta, at)
                batches = batch_id
                if batch_metadata is not None:
                    metadata = batch_metadata
        catalog.restore_views(views)
        catalog.changed()
        return batches, metadata

    def close(self) -> None:
        if self.storage is not None:
            self.storage.close()
            self.storage = None

