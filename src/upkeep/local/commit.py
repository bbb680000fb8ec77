"""Committing one batch: tables, then every affected view, then the log, then subscribers.

A batch is a Z-set per table (``papers/dynamic-yannakakis-iedyn.txt`` section 2: a change
is a GMR).  It is applied to the tables, then pushed through the views that depend on it
in definition order (a view's delta feeds the views over it), then logged.  If anything
fails before the log record is written, the tables are restored and the views rebuilt,
so a failed batch leaves every table and view exactly as it was.  Subscribers are called
last, with the committed deltas.
"""

from __future__ import annotations

from collections.abc import Callable

from ..engine import deliver
from ..gc_pause import gc_paused
from ..zset import Delta
from .catalog import LocalCatalog
from .durability import Durability


class Committer:
    """Applies batches to one catalog; counts them and keeps the latest metadata."""

    def __init__(self, catalog: LocalCatalog, durability: Durability,
                 clock: Callable[[], float]) -> None:
        self.catalog = catalog
        self.durability = durability
        self.clock = clock
        self.batches = 0
        self.metadata: dict = {}

    def commit(self, deltas: dict[str, Delta], checked: bool = False,
               metadata: dict | None = None, expiring: bool = False) -> None:
        """Apply one batch to the tables and every affected view, or to nothing at all.

        ``checked``: the constraints were checked while staging.  ``expiring``: the batch
        deletes expired rows (their timers are consumed by the caller, not re-recorded)."""
        with gc_paused():
            changed = self._commit(deltas, checked, metadata, expiring)
        if changed:  # subscribers run with the collector as the caller keeps it
            subscribers = self.catalog.subscribers
            deliver(subscribers, {name: list(d.items()) for name, d in changed.items()
                                  if subscribers.get(name)})

    def _commit(self, deltas: dict[str, Delta], checked: bool, metadata: dict | None,
                expiring: bool) -> dict[str, Delta]:
        """Apply the batch; returns the views' changes for the subscribers."""
        catalog = self.catalog
        deltas = {t: d for t, d in deltas.items() if d}
        now = self.clock()
        if not deltas:
            if metadata is not None:
                self.durability.log(("batch", self.batches + 1, {}, metadata, now))
                self.batches += 1
                self.metadata = dict(metadata)
            return {}
        tables = catalog.tables
        if not checked:
            for name, d in deltas.items():
                tables[name].check_constraints(d)
        for name, d in deltas.items():
            tables[name].apply(d)
        batch: dict[str, Delta] = dict(deltas)
        listening = catalog.listening()
        changed: dict[str, Delta] = {}
        views = catalog.views
        try:
            for name in catalog.affected(frozenset(deltas)):
                view = views[name]
                if view.inputs.isdisjoint(batch):
                    continue
                d = view.step(batch, want_delta=name in listening)
                if d:
                    batch[name] = d
                    changed[name] = d
            self.durability.log(("batch", self.batches + 1, deltas, metadata, now))
        except BaseException:
            for name, d in deltas.items():
                tables[name].apply({r: -w for r, w in d.items()})
            catalog.rebuild_views()
            raise
        self.batches += 1
        if metadata is not None:
            self.metadata = dict(metadata)
        if not expiring and catalog.expiring:
            for name, d in deltas.items():
                expiry = tables[name].expiry
                if expiry is not None:
                    expiry.committed(d, now)
        if self.durability.wants_snapshot():
            self.durability.snapshot(self.catalog, self.batches, self.metadata,
                                     after_commit=True)
        return changed

    def snapshot(self) -> None:
        self.durability.snapshot(self.catalog, self.batches, self.metadata)
