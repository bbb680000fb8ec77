"""Committing one batch: tables, then every affected view, then the log, then subscribers.

A batch is a Z-set per table (``papers/dynamic-yannakakis-iedyn.txt`` section 2: a change
is a GMR).  It is applied to the tables, then pushed through the views that depend on it
in definition order (a view's delta feeds the views over it), then logged.  If anything
fails before the log record is written, the tables are restored and the views rebuilt,
so a failed batch leaves every table and view exactly as it was.  Subscribers are called
last, with the committed deltas, in commit order: a subscriber that commits (an audit
row, a reaction) has its batch delivered after the batch it is being told of, to every
subscriber, never before.
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Callable

from ..engine import deliver
from ..errors import EvaluationError, SchemaError
from ..gc_pause import PAUSE_ROWS, gc_paused
from ..zset import Delta
from .bulk_insert import BulkInsert
from .catalog import LocalCatalog
from .durability import Durability


def _steps(catalog: LocalCatalog, names: list[str]
           ) -> list[tuple[str, tuple, Callable, bool]]:
    """The views ``names``, in order, as a commit steps them: each view's name, the
    relations it reads, its step (``ViewRuntime.stepper``) and whether a later one of
    them reads it, found once per catalog shape (a commit's plan, ``LocalCatalog.plans``)
    instead of looked up by name on every commit."""
    views = catalog.views
    inputs = [tuple(views[name].inputs) for name in names]
    return [(name, inputs[i], views[name].stepper(),
             any(name in later for later in inputs[i + 1:]))
            for i, name in enumerate(names)]


def _copied(metadata: dict | None) -> dict | None:
    """A batch's metadata as the committer keeps it: a copy (the caller's dict may change
    later), made before the batch changes anything, so metadata it cannot copy (nested
    too deeply) rejects the batch instead of failing it after the commit."""
    if metadata is None:
        return None
    try:
        return copy.deepcopy(metadata)
    except RecursionError:
        raise SchemaError("transaction metadata is nested too deeply") from None


def _rows(deltas: dict[str, Delta]) -> int:
    """A batch's size, as the collector's pause counts it (``gc_pause.py``)."""
    n = 0
    for d in deltas.values():
        n += len(d)
    return n


def _pairs(delta: Delta) -> list[tuple]:
    """A view's changes as its subscribers get them, ``(row, weight)`` pairs: a loop over
    the dict, which costs a single-row commit less than ``list(delta.items())``."""
    out = []
    for row, w in delta.items():
        out.append((row, w))
    return out


def _batch_record(batch: int, deltas: dict, metadata: dict | None, now: float,
                  provenance: tuple | None) -> tuple:
    """A batch's log record: its id, changes, metadata and time, and its provenance
    transaction if it has one (``local/provenance.py``; recovery reads either length)."""
    if provenance is None:
        return ("batch", batch, deltas, metadata, now)
    return ("batch", batch, deltas, metadata, now, provenance)


class Committer:
    """Applies batches to one catalog; counts them and keeps the latest metadata."""

    def __init__(self, catalog: LocalCatalog, durability: Durability,
                 clock: Callable[[], float]) -> None:
        self.catalog = catalog
        self.durability = durability
        self.clock = clock
        self.batches = 0
        catalog.last_batch = lambda: self.batches  # what a new subscriber's rows hold
        self.metadata: dict = {}
        #: called with (batch id, the views' changes) after the views are stepped and before
        #: the batch is logged; returns a function that takes its record back if the log
        #: write then fails (the service's subscription feed, ``service/feed.py``)
        self.journal: Callable[[int, dict[str, Delta]], Callable[[], None]] | None = None
        # committed batches' changes not yet delivered, oldest first, and whether a
        # delivery is running (a subscriber's own commit only queues its changes)
        self._outbox: deque[tuple[int, dict[str, list]]] = deque()  # (batch, its changes)
        self._delivering = False

    def commit(self, deltas: dict[str, Delta], checked: bool = False,
               metadata: dict | None = None, expiring: bool = False,
               applied: Callable[[], None] | None = None,
               bulk: dict[str, BulkInsert] | None = None) -> None:
        """Apply one batch to the tables and every affected view, or to nothing at all.

        ``checked``: the constraints were checked while staging.  ``expiring``: the batch
        deletes expired rows (their timers are consumed by ``applied``, not re-recorded).
        ``applied`` runs once the batch is committed, before a snapshot is taken and before
        any subscriber is called (both must find the batch's bookkeeping done).  The open
        provenance transaction (``catalog.provenance``), if any, is logged with the batch
        and becomes the provenance tables' annotations when it commits.  ``bulk``: tables'
        bulk inserts staged as keys (``bulk_insert.py``), added as keys to tables no view
        reads, and made into rows for the others."""
        rows = _rows(deltas)
        if bulk:  # (made into rows if a view reads them)
            for staged in bulk.values():
                rows += len(staged)
        if rows < PAUSE_ROWS:  # the pause would leave the collector as it is: not entered
            changed = self._apply_batch(deltas, checked, metadata, expiring, applied, bulk)
        else:
            with gc_paused(rows):
                changed = self._apply_batch(deltas, checked, metadata, expiring, applied,
                                            bulk)
        if changed:  # subscribers run with the collector as the caller keeps it
            subscribers = self.catalog.subscribers
            told = {name: _pairs(d) for name, d in changed.items() if subscribers.get(name)}
            if told:  # a batch no subscriber hears of is not queued
                if self._delivering or self._outbox:  # after the batches before it
                    self._outbox.append((self.batches, told))
                    self._deliver()
                else:  # nothing before it: told at once, not queued first
                    self._deliver(self.batches, told)

    def _apply_batch(self, deltas: dict[str, Delta], checked: bool, metadata: dict | None,
                     expiring: bool, applied: Callable[[], None] | None,
                     bulk: dict[str, BulkInsert] | None = None) -> dict[str, Delta]:
        """:meth:`commit` up to the subscribers: the batch committed with its provenance
        transaction, ``applied`` run, a snapshot taken if one is due; the views' changes."""
        provenance = self.catalog.provenance
        # most batches touch no provenance table: no open transaction to log or commit
        tracked = provenance.open is not None
        try:
            changed = self._commit(deltas, checked, metadata, expiring,
                                   provenance.pending() if tracked else None, bulk)
        except BaseException:
            if tracked:
                provenance.discard()
            raise
        if tracked:
            provenance.committed(metadata)
        if applied is not None:
            applied()
        # a snapshot replaces the log, so it is taken once the batch is wholly committed:
        # with its provenance transaction in the tracker's history and its bookkeeping
        # done (an expiry's timers consumed, or they would fire again)
        if self.durability.wants_snapshot():  # (a direct call: commit.pxd)
            self.durability.snapshot(self.catalog, self.batches, self.metadata,
                                     after_commit=True)
        return changed

    def _deliver(self, batch: int = -1, told: dict[str, list] | None = None) -> None:
        """Call the subscribers with ``told``, batch ``batch``'s changes, if given (when
        nothing is queued), then with every queued batch, oldest first; a commit made by a
        subscriber while this runs is queued behind the batch being delivered."""
        if self._delivering:
            return
        self._delivering = True
        try:
            if told is not None:
                deliver(self.catalog.subscribers, told, batch)
            while self._outbox:
                batch, told = self._outbox.popleft()
                deliver(self.catalog.subscribers, told, batch)
        finally:
            self._delivering = False

    def _commit(self, deltas: dict[str, Delta], checked: bool, metadata: dict | None,
                expiring: bool, provenance: tuple | None = None,
                bulk: dict[str, BulkInsert] | None = None) -> dict[str, Delta]:
        """Apply the batch; returns the views' changes for the subscribers."""
        catalog = self.catalog
        if bulk:  # (a copy: the bulk inserts that become rows are added to it)
            deltas = {t: d for t, d in deltas.items() if d}
            bulk = self._keys_or_rows(deltas, bulk)
        else:
            for d in deltas.values():  # (a single-row commit's one delta is never empty)
                if not d:
                    deltas = {t: d for t, d in deltas.items() if d}
                    break
        now = self.clock()
        kept = _copied(metadata)  # before anything changes: it may fail
        if not deltas and not bulk:
            if metadata is not None or provenance is not None:
                self._log_batch(_batch_record(self.batches + 1, {}, metadata, now, provenance),
                                {})
                self.batches += 1
                if kept is not None:
                    self.metadata = kept
            return {}
        tables = catalog.tables
        if not checked:
            for name, d in deltas.items():
                tables[name].check_constraints(d)
        logged = deltas
        if bulk and self.durability.storage is not None:  # the log holds their rows
            logged = {**deltas, **{name: staged.arrow() for name, staged in bulk.items()}}
        plans = catalog.plans  # (emptied whenever the catalog changes)
        key = next(iter(deltas)) if len(deltas) == 1 else frozenset(deltas)
        plan = plans.get(key)
        if plan is None:
            plan = plans[key] = (_steps(catalog, catalog.affected(frozenset(deltas))),
                                 catalog.listening())
        changed = self._push(deltas, plan[0], plan[1], True,
                             _batch_record(self.batches + 1, logged, metadata, now, provenance),
                             False, bulk)
        self.batches += 1
        if kept is not None:
            self.metadata = kept
        if not expiring and catalog.expiring:  # a batch counts by its net change (docs/sql.md)
            for name, d in deltas.items():
                expiry = tables[name].expiry
                if expiry is not None:
                    expiry.committed(d, now)
        return changed

    def _keys_or_rows(self, deltas: dict[str, Delta], bulk: dict[str, BulkInsert]
                      ) -> dict[str, BulkInsert]:
        """The bulk inserts that go in as keys: into tables no view reads (a view created
        since one was staged reads rows) whose rows are kept as keys.  The others become
        rows in ``deltas``."""
        tables, keyed = self.catalog.tables, {}
        for name, staged in bulk.items():
            if not len(staged):
                continue
            if (not tables[name].takes_keys()
                    or self.catalog.affected(frozenset((name,)))):
                deltas[name] = staged.delta()
            else:
                keyed[name] = staged
        return keyed

    def _log_batch(self, record: tuple, changed: dict[str, Delta]) -> None:
        """Log batch ``record``, after the journal (if any) took the views' ``changed``;
        if the log write fails, the journal's record is taken back."""
        if self.journal is None:
            self.durability.log(record)
            return
        take_back = self.journal(record[1], changed)
        try:
            self.durability.log(record)
        except BaseException:
            take_back()
            raise

    def hypothetical(self, deltas: dict[str, Delta], name: str) -> Delta:
        """How table or view ``name`` would change under the table ``deltas``: the batch is
        pushed through the views ``name`` depends on with their own maintenance code, then
        its inverse through the same views, so every table and view ends as it began
        (Z-set maintenance is linear in the batch).  Nothing is logged, no subscriber
        called; if a step fails, tables are restored and views rebuilt as for a failed
        commit.  What-if over update provenance (``local/provenance.py``) uses it."""
        deltas = {t: d for t, d in deltas.items() if d}
        if name in self.catalog.tables or not deltas:
            return dict(deltas.get(name, {}))
        catalog = self.catalog
        needed = catalog.reads(name)
        order = [v for v in catalog.affected(frozenset(deltas)) if v in needed]
        inverse = {t: {r: -w for r, w in d.items()} for t, d in deltas.items()}
        with gc_paused(_rows(deltas)):
            # the rows the batch deletes keep their places in their tables, so the
            # inverse puts them back where they were (``RowStore.add``)
            steps = _steps(catalog, order)
            forward = self._push(deltas, steps, None, True, None, True)  # keeping places
            self._push(inverse, steps, None, False)
        return forward.get(name, {})

    def _push(self, deltas: dict[str, Delta], steps: list[tuple], want: set[str] | None,
              undo: bool, record: tuple | None = None,
              keep_places: bool = False,
              bulk: dict[str, BulkInsert] | None = None) -> dict[str, Delta]:
        """Apply ``deltas`` to the tables and step the views of ``steps`` (:func:`_steps`,
        in order) that a change reaches, computing the delta of those in ``want`` (of all
        if None); a commit's log ``record`` is logged with the views' changes before the batch counts as applied.  If
        anything fails, the tables are taken back if ``undo`` and the views rebuilt from
        them.  Returns the views' changes: of a commit, for the subscribers; of a what-if,
        the answer.  ``keep_places``: rows deleted keep their places in their tables
        (``Table.apply``).  ``bulk``: inserts into tables no view reads, added as keys."""
        catalog, tables = self.catalog, self.catalog.tables
        for table, d in deltas.items():
            target = tables[table]  # (typed: a direct call, commit.pxd)
            target.apply(d, keep_places)
        if bulk:
            for table, staged in bulk.items():
                tables[table].apply_keys(staged.keys, staged.key_counts, staged.key_parts)
        # the relations' changes the steps read: the tables', and a view's once a later
        # step reads it (the tables' dict copied then, not on every commit)
        batch: dict[str, Delta] = deltas
        changed: dict[str, Delta] = {}
        try:
            for name, inputs, step, read_later in steps:
                for table in inputs:
                    if table in batch:
                        break
                else:
                    continue
                try:  # (batch, want_delta): positional, no dict of keywords built
                    d = step(batch, want is None or name in want)
                except EvaluationError as exc:
                    raise exc.in_view(name) from exc.__cause__
                if d:
                    changed[name] = d
                    if read_later:
                        if batch is deltas:
                            batch = dict(deltas)
                        batch[name] = d
            if record is not None:
                self._log_batch(record, changed)
        except BaseException:
            if undo:
                for table, d in deltas.items():
                    tables[table].apply({r: -w for r, w in d.items()})
                if bulk:
                    for table, staged in bulk.items():
                        tables[table].apply_keys(staged.keys, staged.key_counts,
                                                 staged.key_parts, -1)
            catalog.rebuild_views()
            raise
        return changed

    def snapshot(self) -> None:
        self.durability.snapshot(self.catalog, self.batches, self.metadata)
