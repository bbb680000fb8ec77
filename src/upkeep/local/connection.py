"""The local engine: a DB-API style connection over an in-process catalog (docs/design.md,
"Layers").

:class:`Connection` is a thin front that implements :class:`upkeep.engine.Engine` by
delegating each job to its module: :mod:`.statements` (what SQL statements do),
:mod:`.catalog` (tables, views, planning), :mod:`.staging` (a transaction's checked
changes), :mod:`.commit` (applying a batch to tables, views and subscribers) and
:mod:`.durability` (log, snapshots, recovery).
"""

from __future__ import annotations

import copy
import functools
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from sqlglot import exp

from .. import provenance_arguments as args
from ..bulk_progress import STEP, bulk_progress
from ..cursor import Cursor
from ..engine import Engine, Subscriber, WhatIf, check_subscriber
from ..engine import ViewHandle as ViewHandleContract
from ..errors import (
    DuplicateKeyError,
    Error,
    ProvenanceError,
    SchemaError,
    UnsupportedError,
    refusing_deep_nesting,
)
from ..expiry import due_changes
from ..gc_pause import PAUSE_ROWS, gc_paused
from ..recursive.provenance import ORDERINGS
from ..recursive.view import Explanation
from ..rows import arrow_columns, arrow_typed, as_arrow, iter_rows, row_parts
from ..sql import parse_one
from ..storage import Storage
from ..table import Table
from ..types import SqlType
from ..update_provenance.hyperplane import Insert
from ..update_provenance.structures import UpdateStructure
from ..views import ViewRuntime
from ..zset import Delta, net_by_table
from . import statements
from .bulk_insert import BulkInsert, add_part, placed, prepare
from .catalog import LocalCatalog, new_view_name
from .commit import Committer
from .durability import Durability
from .provenance import delete_queries, txn_name
from .staging import Staging


def open_local(database: str | os.PathLike | None = ":memory:", *, fsync: bool = True,
               snapshot_bytes: int = 64 << 20, bdd_ordering: str = "sifting",
               clock: Callable[[], float] | None = None,
               fixpoint_partitions: int = 1) -> Connection:
    """``upkeep.connect(engine="local")``: see :func:`upkeep.engine.connect`."""
    if bdd_ordering not in ORDERINGS:
        raise UnsupportedError(f"unknown bdd_ordering {bdd_ordering!r}; choose one of {ORDERINGS}")
    if not isinstance(fixpoint_partitions, int) or fixpoint_partitions < 1:
        raise UnsupportedError(f"fixpoint_partitions must be a positive integer, not "
                               f"{fixpoint_partitions!r}")
    if type(snapshot_bytes) is not int or snapshot_bytes < 1:
        raise UnsupportedError(f"snapshot_bytes must be a positive integer, not "
                               f"{snapshot_bytes!r}")
    if not isinstance(fsync, bool):
        raise UnsupportedError(f"fsync must be True or False, not {fsync!r}")
    if clock is not None and not callable(clock):
        raise UnsupportedError(f"clock must be a function returning seconds, not {clock!r}")
    storage = (None if database in (":memory:", "", None)
               else Storage(database, fsync=fsync, snapshot_bytes=snapshot_bytes))
    return Connection(storage, bdd_ordering=bdd_ordering,
                      clock=None if clock is None else _checked_clock(clock),
                      fixpoint_partitions=fixpoint_partitions)


def _checked_clock(clock: Callable[[], float]) -> Callable[[], float]:
    """A user's clock whose every reading is checked before it is used: seconds as a
    finite int or float.  A batch reads it before it changes anything, so a bad reading
    rejects the batch (it was logged with the batch, and expiry then failed after the
    commit and at every reopening)."""
    def now() -> float:
        value = clock()
        if type(value) not in (int, float) or not math.isfinite(value):
            raise UnsupportedError(f"clock() must return seconds as an int or float, not "
                                   f"{value!r}")
        return value

    return now


def from_catalog(catalog: dict, views: Iterable[str] | None = None,
                 changes: Iterable[tuple[str, tuple, int]] = ()) -> Connection:
    """An in-memory database with the tables of ``catalog`` (from :meth:`Connection.catalog`)
    and the given user views (all if None), in definition order.

    ``changes`` (``(table, row, weight)``, e.g. a log of committed batches) fill the tables
    first, as one checked batch of their net rows, so the views are then built from the
    contents in bulk instead of being pushed every change.
    """
    db = Connection(bdd_ordering=catalog.get("bdd_ordering", "sifting"), description=catalog)
    net = net_by_table(changes)
    if net:
        with db.transaction():
            for table, rows in net.items():
                db.insert(table, [r for r, n in rows.items() for _ in range(n)])
    wanted = None if views is None else set(views)
    db._catalog.restore_views({name: definition for name, definition in catalog["views"].items()
                               if wanted is None or name in wanted})
    return db


def _serialized(lock_of: Callable[[object], threading.RLock],
                holding_it: frozenset[str] = frozenset()):
    """A class decorator: each public method of the class (not properties) runs holding
    the connection's lock ``lock_of(self)``.  One thread at a time uses the connection,
    and a thread's open transaction holds the lock until it ends (``_begin``), so another
    thread's change waits for it instead of landing in it (and being rolled back with it).
    The methods named in ``holding_it`` take the lock themselves (the per-row entry points,
    where a wrapper's extra call cost a single-row change 6%)."""
    def decorate(cls):
        for name, member in list(vars(cls).items()):
            if (name.startswith("_") or name in holding_it or not callable(member)
                    or isinstance(member, type)):
                continue
            setattr(cls, name, _holding(member, lock_of))
        return cls

    return decorate


#: how long a call waits for another thread's transaction or operation to end, as
#: SQLite's busy timeout (a thread that waits, inside its transaction, for a thread that
#: waits for the connection would otherwise wait for ever)
BUSY_SECONDS = 30.0


def _acquire(lock: threading.RLock) -> None:
    if not lock.acquire(timeout=BUSY_SECONDS):
        raise Error(f"the database is busy: another thread has held it for {BUSY_SECONDS:g} "
                    f"s (a transaction keeps it until it ends); nothing was done")


def _holding(method: Callable, lock_of: Callable[[object], threading.RLock]) -> Callable:
    @functools.wraps(method)
    def locked(self, *args, **kwargs):
        lock = lock_of(self)
        if not lock.acquire(False):  # free (the common case) or held: wait
            _acquire(lock)
        try:  # without keywords (most calls), no dict is built for them
            return method(self, *args, **kwargs) if kwargs else method(self, *args)
        finally:
            lock.release()

    return locked


def _rows_changed(db: Connection, table: str, rows, weight: int) -> int:
    """``db.insert`` (``weight`` 1) or ``db.delete`` (-1), holding the lock as the other
    public methods hold it (``_serialized``): a module function, called without the
    wrapper's extra call or a method lookup (each cost a single-row change 1-2%)."""
    lock = db._lock
    if not lock.acquire(False):
        _acquire(lock)
    try:
        catalog = db._catalog
        t = catalog.table(table)
        if t.provenance is None:
            return _change_rows(db, t, rows, weight)
        if weight > 0:
            return db._hyperplane(t, [Insert(r) for r in db._rows(t, rows)], input_rows=True)
        return db._hyperplane(t, delete_queries(db._rows(t, rows)), present=True)
    finally:
        lock.release()


def _change_rows(db: Connection, t: Table, rows, weight: int) -> int:
    """``db._change``: stage or commit the rows, one row straight to :func:`_stage_delta`,
    Arrow data of the table's types into a table no view reads as keys, the others row
    by row with a progress bar."""
    if type(rows) is list and len(rows) == 1:  # one row: the common single-row change
        _stage_delta(db, t, {t.coerce(rows[0], 0): weight})
        return 1
    size = len(rows) if hasattr(rows, "__len__") else None
    rows = as_arrow(rows, t.columns, t.name)
    try:
        return _change_many(db, t, rows, weight, size)
    except DuplicateKeyError as exc:  # named by the rows holding the key
        raise placed(exc, t, rows) from None


def _change_many(db: Connection, t: Table, rows, weight: int, size: int | None) -> int:
    """:func:`_change_rows` of rows other than one in a list (``rows`` made Arrow data
    where they were a DataFrame)."""
    delta: Delta = {}
    n = 0
    typed = arrow_typed(rows, t.name, t.columns)
    if typed and weight > 0 and db._takes_keys(t):
        with bulk_progress(f"loading rows into {t.name}", size) as advance:
            bulk = prepare(t, arrow_columns(rows, t.name, t.column_names), advance,
                           db._durability.storage is not None)
        if bulk is not None:
            db._stage_keys(t, bulk)
            return len(bulk)
    verb = "loading rows into" if weight > 0 else "deleting rows from"
    # coercion pauses the collector; the commit that follows promotes bulk work once
    with (gc_paused(PAUSE_ROWS), bulk_progress(f"{verb} {t.name}", size) as advance):
        for part in row_parts(rows, t.name, t.columns, STEP):
            add_part(delta, part, n, weight, t, typed)
            n += len(part)
            advance(len(part))
    _stage_delta(db, t, delta)  # every weight has the sign of ``weight``: none is zero
    return n


def _stage_delta(db: Connection, table: Table, delta: Delta) -> None:
    """``db._stage``: a module function whose table, committer and durable state are typed
    C objects (``connection.pxd``), so a single-row change checks and commits through
    direct calls, not attribute lookups on Python objects."""
    if not delta:
        return
    staging = db._staging
    if staging is None:
        committer = db._committer  # (its durable state and catalog are the connection's)
        durability = committer.durability
        durability.check_open()  # (a transaction checked it when it began)
        catalog = committer.catalog
        if catalog.expiring:
            db.expire()
        if len(delta) < PAUSE_ROWS:  # (a pause would leave the collector as it is)
            table.check_constraints(delta)
        else:
            with gc_paused(len(delta)):
                table.check_constraints(delta)
        committer.commit({table.name: delta}, True)  # checked
        return
    if len(delta) < PAUSE_ROWS:
        staging.stage(table, delta)
    else:
        with gc_paused(len(delta)):
            staging.stage(table, delta)


@_serialized(lambda handle: handle._db._lock)
class ViewHandle(ViewHandleContract):
    """``db.view(name)`` on the local engine."""

    def __init__(self, db: Connection, name: str):
        super().__init__(name)
        self._db = db

    def _runtime(self) -> ViewRuntime:
        return self._db._catalog.runtime(self.name)

    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        check_subscriber(fn)
        self._runtime()
        return self._db._catalog.subscribe(self.name, fn)

    def rows(self) -> list[tuple]:
        self._db.expire()
        return self._runtime().rows()

    def count(self, row: tuple) -> int:
        """Multiplicity of ``row`` in the view; O(1) for Dynamic Yannakakis views over columns."""
        row = self.looked_up(row)
        self._db.expire()
        return self._runtime().multiplicity(row)

    def explain(self) -> str:
        return self._db.explain(self.name)

    def why(self, row) -> Explanation:
        """See :meth:`Connection.why`."""
        return self._db.why(self.name, row)

    def counters(self) -> dict[str, int]:
        """For leapfrog triejoin cores the iterator operations (opens, seeks, nexts),
        change-oracle regions and tree surgeries; for recursive views the rule derivations,
        tuples shipped into fixpoint relations, removals and (absorption provenance) BDD
        nodes; empty for strategies that keep none."""
        return self._runtime().counters()

    @property
    def columns(self) -> list[str]:
        self._runtime()
        return [n for n, _ in self._db._catalog.display_schema_of(self.name)]

    @property
    def schema(self) -> list[tuple[str, str]]:
        self._runtime()
        return [(n, t.sql()) for n, t in self._db._catalog.display_schema_of(self.name)]


@_serialized(lambda db: db._lock, holding_it=frozenset({"insert", "delete"}))
class Connection(Engine):
    """An upkeep database in this process: in memory, or durable in a directory.

    Threads may share it: one uses it at a time, and a transaction keeps it for its
    thread until it ends (other threads' calls wait)."""

    name = "local"

    def __init__(self, storage: Storage | None = None, bdd_ordering: str = "sifting",
                 clock: Callable[[], float] | None = None, fixpoint_partitions: int = 1,
                 description: dict | None = None) -> None:
        """``description``: a :meth:`catalog` whose tables (not its views) to start with."""
        self.bdd_ordering = bdd_ordering
        self.fixpoint_partitions = fixpoint_partitions
        self._clock = clock or time.time
        self._lock = threading.RLock()  # see _serialized; held by an open transaction
        self._owner: int | None = None  # the thread whose transaction is open
        self._staging: Staging | None = None
        self._closed = False
        self._durability = Durability(storage)
        try:
            self._catalog = (LocalCatalog(bdd_ordering, fixpoint_partitions, self._staged_of)
                             if description is None else
                             LocalCatalog.from_description(description,
                                                           overlay=self._staged_of))
            self._committer = Committer(self._catalog, self._durability, self._clock)
            self._committer.batches, self._committer.metadata = self._durability.recover(
                self._catalog)
        except BaseException:  # a failed open keeps no lock: `upkeep repair` can run now
            self._durability.close()
            raise

    def _staged_of(self, table: str) -> Delta | None:
        return self._staging.of(table) if self._staging is not None else None

    # ------------------------------------------------------------ catalog
    def schema_of(self, name: str) -> list[tuple[str, SqlType]]:
        return self._catalog.schema_of(name)

    def display_schema_of(self, name: str) -> list[tuple[str, SqlType]]:
        """:meth:`schema_of` with the column names as written (``LocalCatalog.display_schema_of``)."""
        return self._catalog.display_schema_of(name)

    def contents_of(self, name: str) -> tuple[list[tuple[str, SqlType]], list[tuple]]:
        """A table's (as staged) or view's columns and rows."""
        return self._catalog.contents_of(name)

    def weighted_rows(self, name: str) -> Iterator[tuple[tuple, int]]:
        """A table's or view's distinct rows with their multiplicities."""
        return self._catalog.weighted_rows(name)

    def distinct_rows(self, table: str) -> int:
        """How many distinct rows a table holds (O(1))."""
        return len(self._catalog.table(table).rows)

    def tables(self) -> list[str]:
        return list(self._catalog.tables)

    def views(self) -> list[str]:
        return self._catalog.view_names()

    def catalog(self) -> dict:
        """The schema without rows: tables (columns, NOT NULL, key), user views (SQL,
        strategy) and the BDD variable order of recursive views.  :func:`from_catalog`
        rebuilds it elsewhere, e.g. in each Spark shard."""
        return self._catalog.describe()

    @property
    def local_catalog(self) -> LocalCatalog:
        """The catalog itself (tables, views, their plans), for planners that partition it,
        such as the Spark engine's."""
        return self._catalog

    @property
    def directory(self) -> Path | None:
        """The database directory, or None in memory."""
        storage = self._durability.storage
        return None if storage is None else storage.path

    def set_journal(self, journal: Callable[[int, dict[str, Delta]], Callable[[], None]]
                    | None) -> None:
        """Install the hook the committer calls with each batch's view changes before the
        batch is logged (``local/commit.py``; the service's feed), or remove it."""
        self._committer.journal = journal

    def ttl_of(self, table: str) -> float | None:
        """The table's ``ttl_seconds``, or None if its rows do not expire."""
        return self._catalog.ttl_of(table)

    def view(self, name: str) -> ViewHandle:
        self._catalog.runtime(self._catalog.user_named(name))
        return ViewHandle(self, name.lower())

    def runtime(self, name: str) -> ViewRuntime:
        """The view's maintenance object (strategy internals, for inspection and tests)."""
        return self._catalog.runtime(name)

    def state_size(self) -> int:
        """Tuples kept by the maintenance state of every view, hidden helpers included."""
        return sum(view.state_size() for view in self._catalog.views.values())

    def why(self, view: str, row) -> Explanation:
        """Why ``row`` is in ``view``: for a recursive view its provenance as a minimal sum
        of products of base rows and the size of its BDD (absorption provenance); for a
        view created ``WITH (provenance = 'why')`` every derivation (:mod:`upkeep.why`)."""
        self.expire()  # a row that expired is explained by nothing
        return self._catalog.why(self._catalog.user_named(view), row)

    def explain(self, name: str) -> str:
        """The view's strategy, query class and join tree, in words (with its helper views)."""
        return self._catalog.explain(self._catalog.user_named(name))

    def create_view(self, name: str, sql: str, strategy: str | None = None,
                    provenance: str | None = None) -> ViewHandle:
        """``CREATE MATERIALIZED VIEW name AS sql``, optionally forcing a strategy
        ("dyn", "lftj", "general", "recompute" or a recursive one); ``provenance="why"``
        keeps its why-provenance (as ``WITH (provenance = 'why')``)."""
        name = new_view_name(name, sql)
        if provenance not in (None, "why"):
            raise SchemaError(f"provenance of view {name} must be 'why', not {provenance!r}")
        with refusing_deep_nesting():
            statements.define_view(self, name, parse_one(sql), strategy,
                                   why=provenance == "why")
        return ViewHandle(self, name)

    # ------------------------------------------------------------ statements
    def execute_parsed(self, stmt: exp.Expression) -> Cursor:
        """Run one statement sqlglot has parsed already."""
        return statements.run_statement(self, stmt)

    # ------------------------------------------------------------ rows
    def insert(self, table: str, rows) -> int:
        """Insert rows (iterable of tuples/dicts, pandas DataFrame or Arrow table); returns count.
        Into a provenance table, each row is an input row with a variable of its own."""
        return _rows_changed(self, table, rows, 1)

    def delete(self, table: str, rows) -> int:
        """Delete one occurrence of each given row; a row not present raises ConstraintError."""
        return _rows_changed(self, table, rows, -1)

    @staticmethod
    def _rows(t: Table, rows) -> list[tuple]:
        coerce = t.coerce
        return [coerce(row, i) for i, row in enumerate(iter_rows(rows, t.name, t.columns))]

    def _hyperplane(self, t: Table, queries: list, **options) -> int:
        """Run hyperplane queries on a provenance table as one statement (in its own
        transaction outside one): annotations and rows change together or not at all."""
        def run() -> int:
            return self._catalog.provenance.run(t.name, queries, lambda d: self._stage(t, d),
                                                **options)

        if self._staging is not None:
            return run()
        with self.transaction():
            return run()

    def _change(self, t: Table, rows, weight: int) -> int:
        """Insert (``weight`` 1) or delete (-1) rows of a table without update provenance
        (:func:`_change_rows`); returns their count."""
        return _change_rows(self, t, rows, weight)

    def _takes_keys(self, t: Table) -> bool:
        """Whether an insert into ``t`` may be staged as keys (``bulk_insert.py``): its
        rows kept as keys the encoder writes, and no view reads it (a view's step reads
        rows)."""
        return t.takes_keys() and not self._catalog.affected(frozenset((t.name,)))

    def _stage_keys(self, table: Table, bulk: BulkInsert) -> None:
        """:meth:`_stage` for a bulk insert staged as keys."""
        if not len(bulk):
            return
        if self._staging is None:
            self._durability.check_open()
            if self._catalog.expiring:
                self.expire()
            if table.key is not None:
                table.check_new_keys(bulk.key_counts, bulk.key_parts)
            self._committer.commit({}, True, bulk={table.name: bulk})
            return
        self._staging.stage_keys(table, bulk)

    def _stage(self, table: Table, delta: Delta) -> None:
        """Check a statement's change (no zero weights) against the staged state, then
        commit or stage it (:func:`_stage_delta`)."""
        _stage_delta(self, table, delta)

    # ------------------------------------------------------------ batches
    def in_transaction(self) -> bool:
        """Whether the calling thread has a transaction open."""
        return self._staging is not None and self._owner == threading.get_ident()

    def _begin(self) -> None:
        _acquire(self._lock)  # released when the transaction ends: see _serialized
        try:
            self._durability.check_open()
        except BaseException:
            self._lock.release()
            raise
        self._staging, self._owner = Staging(), threading.get_ident()

    def _discard(self) -> None:
        try:
            self._staging = self._owner = None
            self._catalog.provenance.discard()
        finally:
            self._lock.release()

    def _finish(self, metadata: dict | None) -> None:
        staging, self._staging, self._owner = self._staging, None, None
        try:  # staging checked every change against the table as staged (staging.py)
            self._committer.commit(staging.deltas, checked=True, metadata=metadata,
                                   bulk=staging.bulk)
        finally:
            self._lock.release()

    def staged(self) -> dict[str, Delta]:
        """The changes staged so far in the open transaction (table -> row -> weight)."""
        deltas = self._staging.all_rows() if self._staging is not None else {}
        return {name: dict(delta) for name, delta in deltas.items() if delta}

    @property
    def batches(self) -> int:
        """How many batches have committed."""
        return self._committer.batches

    def metadata(self) -> dict:
        return copy.deepcopy(self._committer.metadata)

    def expire(self) -> int:
        """Delete the rows whose time-to-live has passed, as one batch (with all their
        consequences in every view); returns how many rows expired.  Runs on its own
        before every commit and read, so calling it is only needed to push deltas out."""
        if self._staging is not None or self._closed:
            return 0
        expiries = self._catalog.expiring
        if not expiries:  # every read and statement asks: no table's rows expire
            return 0
        deltas, consumed = due_changes(expiries, self._clock())

        def consume() -> None:  # before any subscriber runs: one that reads or writes
            for name, n in consumed.items():  # calls expire again, which must find
                expiries[name].expired(n)  # these rows gone, not delete them twice
        if deltas:
            self._committer.commit(deltas, checked=True, expiring=True, applied=consume)
        else:
            consume()
        return -sum(w for d in deltas.values() for w in d.values())

    # ------------------------------------------------------------ update provenance
    def has_update_provenance(self, table: str) -> bool:
        return self._catalog.provenance.tracks(table.lower())

    def provenance(self, table: str, row: tuple):
        table = args.name_of(table, "table").lower()
        if self._staging is not None:
            raise UnsupportedError("provenance inside a transaction: a row's annotation is "
                                   "made when its transaction commits")
        if table in self._catalog.views:
            raise ProvenanceError(f"{table} is a view: update provenance is kept by tables "
                                  f"(db.why(view, row) explains a view's rows)")
        t = self._catalog.table(table)
        return self._catalog.provenance.annotation(t.name, t.coerce(args.row_of(row), 0))

    def transactions(self) -> dict[int, dict]:
        return copy.deepcopy(self._catalog.provenance.transactions)

    def what_if(self, name: str, abort: Iterable[int] = (),
                without: Iterable[tuple[str, tuple]] = ()) -> WhatIf:
        tracker = self._catalog.provenance
        name = args.name_of(name)
        false_vars = {txn_name(t) for t in tracker.check_txns(args.transaction_ids(abort))}
        for table, row in args.input_rows(without):
            if table.lower() in self._catalog.views:
                raise ProvenanceError(f"without: {table} is a view; input rows are rows "
                                      f"given to db.insert of a provenance table")
            t = self._catalog.table(table)
            false_vars.update(tracker.input_variables(t.name, t.coerce(row, 0)))
        return self._world(name, lambda: tracker.boolean_delta(false_vars))

    def visible(self, name: str, principal: str,
                grants: dict[str, Iterable[str]] | None = None) -> WhatIf:
        tracker = self._catalog.provenance
        name, principal = args.name_of(name), args.name_of(principal, "principal")
        given = {k: args.principals(v, f"grants[{k!r}]")
                 for k, v in args.overrides(grants, "grants").items()}
        structure, valuation = tracker.access_control(principal, given)
        return self._world(name, lambda: tracker.structure_delta(structure, valuation))

    def trusted(self, name: str, threshold: float,
                scores: dict[str, float] | None = None) -> WhatIf:
        tracker = self._catalog.provenance
        name, threshold = args.name_of(name), args.fraction(threshold, "the trust threshold")
        given = {k: args.fraction(v, f"scores[{k!r}]")
                 for k, v in args.overrides(scores, "scores").items()}
        structure, valuation = tracker.trust(threshold, given)
        return self._world(name, lambda: tracker.structure_delta(structure, valuation))

    def specialise(self, name: str, structure, valuation: Callable[[str], object]) -> WhatIf:
        tracker = self._catalog.provenance
        if not isinstance(structure, UpdateStructure) or not callable(valuation):
            raise SchemaError("specialise takes an UpdateStructure and a valuation (a "
                              "function of a variable's name)")
        return self._world(args.name_of(name), lambda: tracker.structure_delta(structure,
                                                                                valuation))

    def _world(self, name: str, deltas: Callable[[], dict[str, Delta]]) -> WhatIf:
        """``name`` with the provenance tables changed by ``deltas()``
        (:meth:`_hypothetical`)."""
        if self._staging is not None:
            raise UnsupportedError("what-if inside a transaction")
        self.expire()
        name = self._catalog.user_named(name)
        self._catalog.schema_of(name)
        changes = self._hypothetical(deltas(), name)
        batches = self._committer.batches
        source = self._relation(name)

        def real() -> dict[tuple, int]:
            """The real contents, read as every call reads them: holding the connection
            (a what-if of another thread changes them while it runs); refused after a
            commit or after ``name`` was dropped or made again."""
            _acquire(self._lock)
            try:
                if self._committer.batches != batches or self._relation(name) is not source:
                    raise Error(f"the database changed after this what-if on {name}; its "
                                "rows are those of the state it was asked in: ask again")
                return dict(self._catalog.weighted_rows(name))
            finally:
                self._lock.release()

        return WhatIf(name, list(changes.items()), real)

    def _hypothetical(self, deltas: dict[str, Delta], name: str) -> Delta:
        """How ``name`` changes when the tables change by ``deltas``: pushed through the
        views' own maintenance code and taken back (:meth:`Committer.hypothetical`), or,
        when a view over those tables tells tied rows apart by arrival
        (``ties_by_arrival``: the push and its inverse could leave it holding the other
        one of two tied rows, with no subscriber told; and a table's rows deleted and
        added back come after the others, which is what DuckDB recomputing a view reads
        next, even for a view the what-if does not ask about), computed on a scratch
        database holding the tables ``name`` reads as they would be and its views built
        over them: the real state is not touched."""
        catalog = self._catalog
        deltas = {t: d for t, d in deltas.items() if d}
        if name in catalog.tables or not any(
                catalog.views[v].ties_by_arrival for v in catalog.affected(frozenset(deltas))):
            return self._committer.hypothetical(deltas, name)
        needed = catalog.reads(name)
        described = catalog.describe()  # constraints do not hold in hypothetical worlds
        described["tables"] = [(t, columns, set(), None)
                               for t, columns, *_ in described["tables"]]
        scratch = from_catalog(described, [])
        for t in needed:
            if t in catalog.tables:  # its rows' stored keys copied, not decoded and encoded
                table = scratch._catalog.tables[t]
                table.rows = catalog.tables[t].rows.copy()
                table.apply(deltas.get(t, {}))
        scratch._catalog.restore_views({v: definition for v, definition
                                        in described["views"].items() if v in needed})
        world = dict(scratch._catalog.weighted_rows(name))
        real = dict(catalog.weighted_rows(name))
        return {r: world.get(r, 0) - real.get(r, 0) for r in world.keys() | real.keys()
                if world.get(r, 0) != real.get(r, 0)}

    def _relation(self, name: str) -> object | None:
        """The table or view object ``name`` names now (a new one once dropped and made
        again)."""
        found = self._catalog.views.get(name)
        return found if found is not None else self._catalog.tables.get(name)

    def checkpoint(self) -> None:
        """Snapshot the tables now, so that recovery replays only what follows."""
        if self._staging is not None:
            raise UnsupportedError("checkpoint inside a transaction")
        self._durability.check_open()
        self._committer.snapshot()

    def close(self) -> None:
        """Release the database (a durable one: its directory lock and log file)."""
        self._closed = True
        self._durability.close()

