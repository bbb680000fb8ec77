"""The embedded engine's entry point: a DB-API style connection (DESIGN.md, "Interfaces").

Every change, whether one statement, ``db.insert``/``db.delete`` or a ``with
db.transaction()`` block, is one batch: a Z-set per table, checked whole before anything
is applied, then applied to the tables and pushed through the views in dependency order.
If anything fails while views are updated, the tables are restored and the views rebuilt,
so a failed batch leaves every table and view exactly as it was.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from decimal import Decimal

import duckdb
import sqlglot
from sqlglot import exp

from . import zset
from .cursor import Cursor
from .errors import ConstraintError, Error, ParseError, SchemaError, UnsupportedError
from .expiry import Expiry
from .expressions import Column, ExpressionCompiler, Scope
from .plan import rename_tables
from .planner import Catalog, plan_view
from .recursive.provenance import ORDERINGS
from .recursive.view import Explanation, RecursiveView
from .storage import Storage
from .table import Table
from .types import SqlType, coerce_row, coerce_value, format_row, type_from_sqlglot
from .views import ViewRuntime, query_duckdb

Delta = dict[tuple, int]


def connect(database: str | os.PathLike = ":memory:", *, fsync: bool = True,
            snapshot_bytes: int = 64 << 20, engine: str = "local", spark=None,
            master: str | None = None, shards: int | None = None,
            bdd_ordering: str = "sifting", clock: Callable[[], float] | None = None,
            fixpoint_partitions: int = 1):
    """Open an engine: in memory (the default), or durable in the directory ``database``.

    A durable database logs every committed batch (fsynced before the commit returns, unless
    ``fsync=False``) and snapshots its tables when the log passes ``snapshot_bytes``; opening
    it again recovers every acknowledged batch exactly once and rebuilds the views.

    ``engine="spark"`` maintains the views on Apache Spark instead (``spark``: a SparkSession,
    or ``master``, default ``local[2]``; ``database``: the working directory for change files
    and checkpoints; ``shards``: partitions per view); see docs/spark.md.

    ``bdd_ordering`` is the variable order of recursive views' provenance BDDs: "sifting"
    (CUDD's dynamic reordering), "dfs" (depth-first over the edge relation) or "arrival".

    ``fixpoint_partitions`` > 1 runs recursive views' fixpoints (absorption or DRed) over
    that many partitions in this process, relations split by their first attribute as in the
    paper's distributed execution (counters then report tuples and bytes shipped between them);
    on the spark engine the partitions are the ``shards`` and run as Spark tasks.

    ``clock`` (seconds, default ``time.time``) times the expiry of rows of tables declared
    ``WITH (ttl_seconds = N)``; tests pass a clock they can advance.
    """
    if bdd_ordering not in ORDERINGS:
        raise UnsupportedError(f"unknown bdd_ordering {bdd_ordering!r}; choose one of {ORDERINGS}")
    if not isinstance(fixpoint_partitions, int) or fixpoint_partitions < 1:
        raise UnsupportedError(f"fixpoint_partitions must be a positive integer, not "
                               f"{fixpoint_partitions!r}")
    if engine == "spark":
        from .spark import SparkConnection
        directory = None if database in (":memory:", "", None) else database
        return SparkConnection(spark=spark, master=master, directory=directory, shards=shards,
                               clock=clock, bdd_ordering=bdd_ordering)
    if engine != "local":
        raise UnsupportedError(f"unknown engine {engine!r} (local or spark)")
    if database in (":memory:", "", None):
        return Connection(bdd_ordering=bdd_ordering, clock=clock,
                          fixpoint_partitions=fixpoint_partitions)
    return Connection(Storage(database, fsync=fsync, snapshot_bytes=snapshot_bytes),
                      bdd_ordering=bdd_ordering, clock=clock,
                      fixpoint_partitions=fixpoint_partitions)


def from_catalog(catalog: dict, views: Iterable[str] | None = None,
                 changes: Iterable[tuple[str, tuple, int]] = ()) -> Connection:
    """An in-memory database with the tables of ``catalog`` (from :meth:`Connection.catalog`)
    and the given user views (all if None), in definition order.

    ``changes`` (``(table, row, weight)``, e.g. a log of committed batches) fill the tables
    first, as one checked batch of their net rows, so the views are then built from the
    contents in bulk instead of being pushed every change.
    """
    db = Connection(bdd_ordering=catalog.get("bdd_ordering", "sifting"))
    for name, columns, not_null, key in catalog["tables"]:
        db._tables[name] = Table(name, columns, not_null, key)
    net = zset.net_by_table(changes)
    if net:
        with db.transaction():
            for table, rows in net.items():
                db.insert(table, [r for r, n in rows.items() for _ in range(n)])
    wanted = None if views is None else set(views)
    for name, (sql, strategy) in catalog["views"].items():
        if wanted is None or name in wanted:
            db._create_view(name, _parse_one(sql), strategy)
            db._user_views[name] = (sql, strategy)
    return db


class ViewHandle:
    """``db.view(name)``: subscribe to a view's deltas and read its rows."""

    def __init__(self, db: Connection, name: str):
        self._db = db
        self.name = name

    def subscribe(self, fn: Callable[[list[tuple[tuple, int]]], object]) -> Callable[[], None]:
        """Call ``fn(changes)`` after every committed batch that changes the view.

        ``changes`` is a list of ``(row, weight)``: positive weights are insertions,
        negative ones deletions.  Returns a function that unsubscribes.
        """
        subs = self._db._subscribers.setdefault(self.name, [])
        subs.append(fn)
        self._db._catalog_changed()

        def unsubscribe() -> None:
            if fn in subs:
                subs.remove(fn)
                self._db._catalog_changed()

        return unsubscribe

    def rows(self) -> list[tuple]:
        self._db.expire()
        return self._db._view(self.name).rows()

    def __contains__(self, row: tuple) -> bool:
        return self.count(row) > 0

    def count(self, row: tuple) -> int:
        """Multiplicity of ``row`` in the view; O(1) for Dynamic Yannakakis views over columns."""
        self._db.expire()
        return self._db._view(self.name).multiplicity(tuple(row))

    def explain(self) -> str:
        return self._db.explain(self.name)

    def why(self, row) -> Explanation:
        """See :meth:`Connection.why`."""
        return self._db.why(self.name, row)

    def counters(self) -> dict[str, int]:
        """Cumulative work counters of the view's maintenance: for leapfrog triejoin cores the
        iterator operations (opens, seeks, nexts), change-oracle regions and tree surgeries;
        for recursive views the rule derivations, tuples shipped into fixpoint relations,
        removals and (absorption provenance) BDD nodes; empty for strategies that keep none."""
        return self._db._view(self.name).counters()

    @property
    def columns(self) -> list[str]:
        return [n for n, _ in self._db._view(self.name).columns]

    @property
    def schema(self) -> list[tuple[str, str]]:
        """Column names with their SQL types."""
        return [(n, t.sql()) for n, t in self._db._view(self.name).columns]


class Connection(Catalog):
    """An in-memory upkeep database."""

    def __init__(self, storage: Storage | None = None, bdd_ordering: str = "sifting",
                 clock: Callable[[], float] | None = None, fixpoint_partitions: int = 1) -> None:
        self.bdd_ordering = bdd_ordering
        self.fixpoint_partitions = fixpoint_partitions
        self._clock = clock or time.time
        self._tables: dict[str, Table] = {}
        self._views: dict[str, ViewRuntime] = {}
        self._view_defs: dict[str, tuple[exp.Expression, str | None]] = {}
        self._subscribers: dict[str, list[Callable]] = {}
        self._pending: dict[str, Delta] | None = None
        self._helpers: dict[str, list[str]] = {}  # view -> hidden views of its subqueries
        self._listening_cache: set[str] | None = None
        self._affected_cache: dict[frozenset[str], list[str]] = {}
        self._closed = False
        self.batches = 0
        self._metadata: dict = {}
        self._pending_metadata: dict | None = None
        self._user_views: dict[str, tuple[str, str | None]] = {}  # name -> (sql, strategy)
        self._storage = storage
        if storage is not None:
            self._recover(*storage.load())

    # ------------------------------------------------------------ catalog
    def schema_of(self, name: str) -> list[tuple[str, SqlType]]:
        name = name.lower()
        if name in self._tables:
            return self._tables[name].columns
        if name in self._views:
            return self._views[name].columns
        raise SchemaError(f"unknown table or view {name}")

    def contents_of(self, name: str) -> tuple[list[tuple[str, SqlType]], list[tuple]]:
        name = name.lower()
        rows = []
        for row, w in self._weighted(name):
            rows.extend([row] * w)
        return self.schema_of(name), rows

    def weighted_rows(self, name: str) -> Iterator[tuple[tuple, int]]:
        """A table's or view's distinct rows with their multiplicities."""
        return self._weighted(name.lower())

    def distinct_rows(self, table: str) -> int:
        """How many distinct rows a table holds (O(1))."""
        return len(self._table(table).rows)

    def _weighted(self, name: str) -> Iterator[tuple[tuple, int]]:
        if name in self._tables:
            return iter(self._staged_rows(self._tables[name]).items())
        if name in self._views:
            return self._views[name].weighted_rows()
        raise SchemaError(f"unknown table or view {name}")

    def _staged_rows(self, table: Table) -> dict[tuple, int]:
        pending = (self._pending or {}).get(table.name)
        if not pending:
            return table.rows
        return zset.plus(table.rows, pending)

    def tables(self) -> list[str]:
        return list(self._tables)

    def catalog(self) -> dict:
        """The schema without rows: tables (columns, NOT NULL, key), user views (SQL,
        strategy) and the BDD variable order of recursive views.  :func:`from_catalog`
        rebuilds it elsewhere, e.g. in each Spark shard."""
        return {"tables": [(t.name, t.columns, t.not_null, t.key) for t in self._tables.values()],
                "views": dict(self._user_views), "bdd_ordering": self.bdd_ordering}

    def ttl_of(self, table: str) -> float | None:
        """The table's ``ttl_seconds``, or None if its rows do not expire."""
        expiry = self._tables[table].expiry
        return expiry.ttl if expiry is not None else None

    def views(self) -> list[str]:
        hidden = {h for hs in self._helpers.values() for h in hs}
        return [v for v in self._views if v not in hidden]

    def view(self, name: str) -> ViewHandle:
        self._view(name)
        return ViewHandle(self, name.lower())

    def _view(self, name: str) -> ViewRuntime:
        view = self._views.get(name.lower())
        if view is None:
            raise SchemaError(f"unknown view {name}")
        return view

    def _table(self, name: str) -> Table:
        table = self._tables.get(name.lower())
        if table is None:
            if name.lower() in self._views:
                raise UnsupportedError(f"{name} is a view; views cannot be changed directly")
            raise SchemaError(f"unknown table {name}")
        return table

    def why(self, view: str, row) -> Explanation:
        """Why ``row`` is in ``view``: its provenance as a minimal sum of products of base
        rows, and the size of its BDD (recursive views kept with absorption provenance)."""
        runtime = self._view(view)
        if not isinstance(runtime, RecursiveView):
            raise UnsupportedError(
                f"why is answered for recursive views kept with absorption provenance; view "
                f"{view} uses strategy {runtime.strategy}")
        return runtime.why(coerce_row(row, runtime.columns, view, 0))

    def explain(self, name: str) -> str:
        """The view's strategy, query class and join tree, in words (with its helper views)."""
        parts = [self._view(name).explain()]
        for hidden in self._helpers.get(name.lower(), []):
            parts.append("helper " + self.explain(hidden))
        return "\n\n".join(parts)

    def close(self) -> None:
        """Release the database (a durable one: its directory lock and log file)."""
        self._closed = True
        if self._storage is not None:
            self._storage.close()
            self._storage = None

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------ batches
    @contextmanager
    def transaction(self, metadata: dict | None = None):
        """All changes inside commit as one atomic batch; an exception discards them all.

        ``metadata`` (e.g. source offsets) is committed with the batch, atomically, even if
        the batch is empty; :meth:`metadata` returns the latest committed one.
        """
        if self._pending is not None:
            raise Error("transactions do not nest")
        self.expire()
        self._pending = {}
        try:
            yield self
        except BaseException:
            self._pending = None
            raise
        pending, self._pending = self._pending, None
        self._commit(pending, metadata=metadata)

    def staged(self) -> dict[str, Delta]:
        """The changes staged so far in the open transaction (table -> row -> weight)."""
        return {name: dict(delta) for name, delta in (self._pending or {}).items()}

    def metadata(self) -> dict:
        """The metadata committed with the latest batch that carried some ({} if none)."""
        return dict(self._metadata)

    def _stage(self, table: Table, delta: Delta) -> None:
        """Check a statement's delta against the staged state, then commit or queue it."""
        delta = {r: w for r, w in delta.items() if w}
        if not delta:
            return
        if self._pending is None:
            self.expire()
            table.check_constraints(delta)
            self._commit({table.name: delta}, checked=True)
            return
        pending = self._pending.setdefault(table.name, {})
        merged = dict(pending)
        for row, w in delta.items():
            merged[row] = merged.get(row, 0) + w
        table.check_constraints({r: w for r, w in merged.items() if w})
        self._pending[table.name] = {r: w for r, w in merged.items() if w}

    def _commit(self, deltas: dict[str, Delta], checked: bool = False,
                metadata: dict | None = None, expiring: dict[str, int] | None = None) -> None:
        """Apply one batch to the tables and every affected view, or to nothing at all.

        ``expiring`` marks an expiry batch: table -> timers it consumes (see expiry.py)."""
        deltas = {t: d for t, d in deltas.items() if d}
        now = self._clock()
        if not deltas:
            if metadata is not None:
                self._log(("batch", self.batches + 1, {}, metadata, now))
                self.batches += 1
                self._metadata = dict(metadata)
            return
        if not checked:
            for name, d in deltas.items():
                self._tables[name].check_constraints(d)
        for name, d in deltas.items():
            self._tables[name].apply(d)
        batch: dict[str, Delta] = dict(deltas)
        listening = self._listening()
        changed: dict[str, Delta] = {}
        views = self._views
        try:
            for name in self._affected(frozenset(deltas)):
                view = views[name]
                if view.inputs.isdisjoint(batch):
                    continue
                d = view.step(batch, want_delta=name in listening)
                if d:
                    batch[name] = d
                    changed[name] = d
            self._log(("batch", self.batches + 1, deltas, metadata, now))
        except BaseException:
            for name, d in deltas.items():
                self._tables[name].apply({r: -w for r, w in d.items()})
            self._rebuild_views()
            raise
        self.batches += 1
        if metadata is not None:
            self._metadata = dict(metadata)
        for name, d in deltas.items():
            expiry = self._tables[name].expiry
            if expiry is not None:
                if expiring is not None:
                    expiry.expired(expiring.get(name, 0))
                else:
                    expiry.committed(d, now)
        if self._storage is not None and self._storage.wants_snapshot():
            self.checkpoint()
        for name, d in changed.items():
            for fn in list(self._subscribers.get(name, ())):
                try:
                    fn(list(d.items()))
                except Exception as exc:  # the batch is committed; report, do not undo
                    warnings.warn(f"subscriber of view {name} raised {exc!r}", stacklevel=2)

    def expire(self) -> int:
        """Delete the rows whose time-to-live has passed, as one batch (with all their
        consequences in every view); returns how many rows expired.  Runs on its own
        before every commit and read, so calling it is only needed to push deltas out."""
        if self._pending is not None or self._closed:
            return 0
        now = self._clock()
        deltas: dict[str, Delta] = {}
        consumed: dict[str, int] = {}
        for name, table in self._tables.items():
            expiry = table.expiry
            due = expiry.next_due() if expiry is not None else None
            if due is None or due > now:
                continue
            delta, n = expiry.due(now)
            consumed[name] = n
            if delta:
                deltas[name] = delta
            else:
                expiry.expired(n)
        if not deltas:
            return 0
        self._commit(deltas, checked=True, expiring=consumed)
        return -sum(w for d in deltas.values() for w in d.values())

    # ------------------------------------------------------------ durability
    def _log(self, record: tuple) -> None:
        if self._storage is None:
            return
        try:
            self._storage.append(record)
        except OSError as exc:
            raise Error(f"could not write the log of {self._storage.path}: {exc}") from exc

    def checkpoint(self) -> None:
        """Snapshot the tables now, so that recovery replays only what follows."""
        if self._storage is None:
            return
        if self._pending is not None:
            raise Error("checkpoint inside a transaction")
        self._storage.snapshot({
            "tables": [(t.name, t.columns, t.not_null, t.key, dict(t.rows),
                        t.expiry.state() if t.expiry else None)
                       for t in self._tables.values()],
            "views": list(self._user_views.items()),
            "batches": self.batches,
            "metadata": self._metadata,
        })

    def _recover(self, snapshot: dict | None, records: list[tuple]) -> None:
        """Rebuild tables from the snapshot and the log, then the views from the tables."""
        views: dict[str, tuple[str, str | None]] = {}
        if snapshot is not None:
            for name, columns, not_null, key, rows, expiry in snapshot["tables"]:
                table = self._tables[name] = Table(name, columns, not_null, key)
                table.apply(rows)
                table.expiry = Expiry.restore(expiry) if expiry else None
            views.update(snapshot["views"])
            self.batches = snapshot["batches"]
            self._metadata = snapshot["metadata"]
        for record in records:
            kind = record[0]
            if kind == "table":
                _, name, columns, not_null, key, ttl = record
                self._tables[name] = Table(name, columns, not_null, key)
                self._tables[name].expiry = Expiry(ttl) if ttl else None
            elif kind == "view":
                _, name, sql, strategy = record
                views.pop(name, None)
                views[name] = (sql, strategy)
            elif kind == "drop":
                _, what, name = record
                (self._tables if what == "table" else views).pop(name, None)
            elif kind == "batch":
                _, batch_id, deltas, metadata, at = record
                for name, delta in deltas.items():
                    self._tables[name].apply(delta)
                    if self._tables[name].expiry is not None:
                        self._tables[name].expiry.committed(delta, at)
                self.batches = batch_id
                if metadata is not None:
                    self._metadata = metadata
        for name, (sql, strategy) in views.items():
            self._create_view(name, _parse_one(sql), strategy)
            self._user_views[name] = (sql, strategy)

    def _listening(self) -> set[str]:
        """Views whose deltas someone needs: subscribers or views reading them (cached)."""
        if self._listening_cache is None:
            out = {n for n, subs in self._subscribers.items() if subs}
            for view in self._views.values():
                out |= view.inputs & self._views.keys()
            self._listening_cache = out
        return self._listening_cache

    def _affected(self, tables: frozenset[str]) -> list[str]:
        """Views that depend, directly or through other views, on these tables, in order."""
        hit = self._affected_cache.get(tables)
        if hit is None:
            reached = set(tables)
            hit = []
            for name, view in self._views.items():
                if not view.inputs.isdisjoint(reached):
                    hit.append(name)
                    reached.add(name)
            self._affected_cache[tables] = hit
        return hit

    def _catalog_changed(self) -> None:
        self._listening_cache = None
        self._affected_cache = {}

    def _rebuild_views(self) -> None:
        self._catalog_changed()
        rebuilt: dict[str, ViewRuntime] = {}
        old = self._views
        self._views = rebuilt
        for name in old:
            query, strategy = self._view_defs[name]
            view = plan_view(name, query, self, strategy)
            view.build(self._contents_batch(view.inputs))
            rebuilt[name] = view

    def _contents_batch(self, names: set[str]) -> dict[str, Delta]:
        out = {}
        for n in names:
            out[n] = self._tables[n].rows if n in self._tables else dict(self._views[n].weighted_rows())
        return out

    # ------------------------------------------------------------ bulk API
    def insert(self, table: str, rows) -> int:
        """Insert rows (iterable of tuples/dicts, pandas DataFrame or Arrow table); returns count."""
        return self._change(table, rows, 1)

    def delete(self, table: str, rows) -> int:
        """Delete one occurrence of each given row; a row not present raises ConstraintError."""
        return self._change(table, rows, -1)

    def _change(self, table: str, rows, weight: int) -> int:
        t = self._table(table)
        delta: Delta = {}
        n = 0
        coerce = t.coerce
        for i, row in enumerate(_iter_rows(rows, t)):
            r = coerce(row, i)
            delta[r] = delta.get(r, 0) + weight
            n += 1
        self._stage(t, delta)
        return n

    def create_view(self, name: str, sql: str, strategy: str | None = None) -> ViewHandle:
        """``CREATE MATERIALIZED VIEW name AS sql``, optionally forcing a strategy
        ("dyn", "general" or "recompute")."""
        query = _parse_one(sql)
        self._define_view(name.lower(), query, strategy)
        return ViewHandle(self, name.lower())

    def _define_view(self, name: str, query: exp.Expression, strategy: str | None,
                     replace: bool = False) -> None:
        """Create a user-visible view and record its definition in the log."""
        self._create_view(name, query, strategy, replace)
        sql = query.sql(dialect="duckdb")
        self._user_views.pop(name, None)
        self._user_views[name] = (sql, strategy)
        self._log(("view", name, sql, strategy))

    def _create_view(self, name: str, query: exp.Expression, strategy: str | None,
                     replace: bool = False) -> None:
        if self._pending is not None:
            raise UnsupportedError("CREATE VIEW inside a transaction")
        if name in self._tables or (name in self._views and not replace):
            raise SchemaError(f"a table or view named {name} already exists")
        if replace and name in self._views:
            dependents = [v for v, rt in self._views.items() if name in rt.inputs]
            if dependents:
                raise ConstraintError(f"cannot replace view {name}: {dependents} depend on it")
            self._drop_view(name)
        created: list[str] = []
        try:
            query = self._hoist_subqueries(name, query, strategy, created)
            view = plan_view(name, query, self, strategy)
            view.build(self._contents_batch(view.inputs))
        except BaseException:
            for hidden in reversed(created):
                self._drop_view(hidden)
            raise
        self._views[name] = view
        self._view_defs[name] = (query, strategy)
        self._helpers[name] = created
        self._catalog_changed()

    def _hoist_subqueries(self, name: str, query: exp.Expression, strategy: str | None,
                          created: list[str]) -> exp.Expression:
        """Maintain each derived table and non-recursive CTE as a hidden helper view, so the
        outer block sees it as an ordinary relation (and each part gets its own strategy)."""
        query = query.copy()
        with_key = "with_" if "with_" in query.args else "with"
        with_ = query.args.get(with_key)
        if with_ is not None and not with_.args.get("recursive"):
            mapping: dict[str, str] = {}
            for cte in with_.expressions:
                hidden = f"{name}__{cte.alias_or_name.lower()}"
                body = rename_tables(cte.this, mapping)
                self._create_view(hidden, body, strategy)
                created.append(hidden)
                mapping[cte.alias_or_name.lower()] = hidden
            query.set(with_key, None)
            query = rename_tables(query, mapping)

        def hoist(node: exp.Expression) -> None:
            if isinstance(node, exp.Union):
                hoist(node.this)
                hoist(node.expression)
                return
            if not isinstance(node, exp.Select):
                return
            from_ = node.args.get("from_") or node.args.get("from")
            items = ([from_] if from_ is not None else []) + list(node.args.get("joins") or [])
            for holder in items:
                sub = holder.this
                if isinstance(sub, exp.Subquery) and not sub.args.get("lateral"):
                    hidden = f"{name}__sub{len(created) + 1}"
                    self._create_view(hidden, sub.this, strategy)
                    created.append(hidden)
                    alias = sub.alias or hidden
                    holder.set("this", exp.Table(this=exp.to_identifier(hidden),
                                                 alias=exp.TableAlias(this=exp.to_identifier(alias))))

        hoist(query)
        return query

    def _drop_view(self, name: str) -> None:
        self._catalog_changed()
        del self._views[name]
        self._view_defs.pop(name, None)
        self._subscribers.pop(name, None)
        for hidden in reversed(self._helpers.pop(name, [])):
            self._drop_view(hidden)

    # ------------------------------------------------------------ SQL
    def execute(self, sql: str, parameters: Iterable | None = None) -> Cursor:
        """Run one or more SQL statements; returns a cursor over the last one's result."""
        statements = _parse(sql)
        if parameters is not None:
            if len(statements) != 1:
                raise UnsupportedError("parameters with several statements")
            statements = [_bind_parameters(statements[0], list(parameters))]
        cursor = Cursor()
        for stmt in statements:
            cursor = self._run(stmt)
        return cursor

    def execute_parsed(self, stmt: exp.Expression) -> Cursor:
        """Run one statement sqlglot has parsed already (as the Spark engine's catalog does:
        printing it back to SQL would drop properties such as ``ttl_seconds``)."""
        return self._run(stmt)

    def executemany(self, sql: str, seq_of_parameters: Iterable[Iterable]) -> Cursor:
        """Run a statement once per parameter tuple, all in one atomic batch."""
        statements = _parse(sql)
        if len(statements) != 1:
            raise UnsupportedError("executemany takes exactly one statement")
        (stmt,) = statements
        fast = _simple_insert(stmt)
        if fast is not None:
            return Cursor(rowcount=self.insert(fast, [tuple(p) for p in seq_of_parameters]))
        own = self._pending is None
        total = 0
        if own:
            with self.transaction():
                for params in seq_of_parameters:
                    total += max(self._run(_bind_parameters(stmt, list(params))).rowcount, 0)
        else:
            for params in seq_of_parameters:
                total += max(self._run(_bind_parameters(stmt, list(params))).rowcount, 0)
        return Cursor(rowcount=total)

    def _run(self, stmt: exp.Expression) -> Cursor:
        if isinstance(stmt, (exp.Select, exp.Union, exp.Intersect, exp.Except, exp.Subquery)):
            return self._select(stmt)
        if isinstance(stmt, exp.Create):
            return self._create(stmt)
        if isinstance(stmt, exp.Drop):
            return self._drop(stmt)
        if isinstance(stmt, exp.Insert):
            return self._insert(stmt)
        if isinstance(stmt, exp.Delete):
            return self._delete(stmt)
        if isinstance(stmt, exp.Update):
            return self._update(stmt)
        if isinstance(stmt, (exp.Alias, exp.Column, exp.Identifier, exp.Literal)):
            raise ParseError(f"not a statement: {stmt.sql()[:60]}", 1, 1)
        raise UnsupportedError(f"statement {type(stmt).__name__.upper()} is not supported")

    def _create(self, stmt: exp.Create) -> Cursor:
        kind = (stmt.args.get("kind") or "").upper()
        target = stmt.this
        if kind == "TABLE":
            if isinstance(target, exp.Schema):
                name = target.this.name.lower()
            else:
                name = target.name.lower()
            if name in self._tables or name in self._views:
                if stmt.args.get("exists"):
                    return Cursor()
                raise SchemaError(f"a table or view named {name} already exists")
            if self._pending is not None:
                raise UnsupportedError("CREATE TABLE inside a transaction")
            if stmt.expression is not None:  # CREATE TABLE ... AS SELECT
                cur = self._select(stmt.expression)
                columns = [(n.lower(), t) for n, t in cur._columns]
                self._add_table(Table(name, columns))
                self.insert(name, cur.fetchall())
                return Cursor()
            table = _table_from_schema(name, target)
            ttl = _ttl_property(stmt, name)
            table.expiry = Expiry(ttl) if ttl else None
            self._add_table(table)
            return Cursor()
        if kind == "VIEW":
            name = target.name.lower()
            if name in self._views and stmt.args.get("exists"):
                return Cursor()
            self._define_view(name, stmt.expression, None, replace=bool(stmt.args.get("replace")))
            return Cursor()
        raise UnsupportedError(f"CREATE {kind}")

    def _add_table(self, table: Table) -> None:
        self._log(("table", table.name, table.columns, table.not_null, table.key,
                   table.expiry.ttl if table.expiry else None))
        self._tables[table.name] = table
        self._catalog_changed()

    def _drop(self, stmt: exp.Drop) -> Cursor:
        kind = (stmt.args.get("kind") or "").upper()
        if self._pending is not None:
            raise UnsupportedError("DROP inside a transaction")
        for t in stmt.args.get("tables") or [stmt.this]:
            name = t.name.lower()
            store = self._tables if kind == "TABLE" else self._views if kind == "VIEW" else None
            if store is None:
                raise UnsupportedError(f"DROP {kind}")
            if name not in store:
                if stmt.args.get("exists"):
                    continue
                raise SchemaError(f"unknown {kind.lower()} {name}")
            dependents = [v for v, rt in self._views.items() if name in rt.inputs]
            if dependents:
                raise ConstraintError(f"cannot drop {name}: views {dependents} depend on it")
            self._log(("drop", kind.lower(), name))
            if kind == "VIEW":
                self._drop_view(name)
                self._user_views.pop(name, None)
            else:
                del store[name]
                self._catalog_changed()
        return Cursor()

    def _insert(self, stmt: exp.Insert) -> Cursor:
        target = stmt.this
        table = self._table(target.this.name if isinstance(target, exp.Schema) else target.name)
        positions = None
        if isinstance(target, exp.Schema) and target.expressions:
            positions = [table.column_index(i.name.lower()) for i in target.expressions]
        source = stmt.expression
        if isinstance(source, exp.Values):
            rows = [tuple(_constant(v) for v in tup.expressions) if isinstance(tup, exp.Tuple)
                    else (_constant(tup),) for tup in source.expressions]
        else:
            rows = self._select(source).fetchall()
        if positions is not None:
            full = []
            for i, r in enumerate(rows):
                if len(r) != len(positions):
                    raise SchemaError(f"row {i} has {len(r)} values for {len(positions)} columns",
                                      r, i)
                out = [None] * len(table.columns)
                for p, v in zip(positions, r, strict=True):
                    out[p] = v
                full.append(tuple(out))
            rows = full
        return Cursor(rowcount=self.insert(table.name, rows))

    def _matching(self, table: Table, where: exp.Expression | None) -> list[tuple[tuple, int]]:
        rows = list(self._staged_rows(table).items())
        if where is None:
            return rows
        pred = ExpressionCompiler(_table_scope(table)).compile(where.this).fn
        return [(r, w) for r, w in rows if pred(r) is True]

    def _delete(self, stmt: exp.Delete) -> Cursor:
        table = self._table(stmt.this.name)
        hits = self._matching(table, stmt.args.get("where"))
        self._stage(table, {r: -w for r, w in hits})
        return Cursor(rowcount=sum(w for _, w in hits))

    def _update(self, stmt: exp.Update) -> Cursor:
        table = self._table(stmt.this.name)
        scope = _table_scope(table)
        compiler = ExpressionCompiler(scope)
        sets = []
        for assignment in stmt.expressions:
            col = table.column_index(assignment.this.name.lower())
            sets.append((col, compiler.compile(assignment.expression).fn))
        hits = self._matching(table, stmt.args.get("where"))
        delta: Delta = {}
        for i, (row, w) in enumerate(hits):
            new = list(row)
            for col, fn in sets:
                try:
                    new[col] = coerce_value(fn(row), table.columns[col][1])
                except ValueError as exc:
                    raise SchemaError(f"UPDATE of row {format_row(row)} in {table.name}: {exc}",
                                      row, i) from None
            delta[row] = delta.get(row, 0) - w
            new_row = tuple(new)
            delta[new_row] = delta.get(new_row, 0) + w
        self._stage(table, delta)
        return Cursor(rowcount=sum(w for _, w in hits))

    def _select(self, stmt: exp.Expression) -> Cursor:
        self.expire()
        simple = _simple_scan(stmt)
        if simple is not None:
            name, limit = simple
            columns = self.schema_of(name)
            rows = []
            for row, w in self._weighted(name):
                rows.extend([row] * w)
                if limit is not None and len(rows) >= limit:
                    rows = rows[:limit]
                    break
            return Cursor(columns, rows)
        relations = {t.name.lower() for t in stmt.find_all(exp.Table)}
        ctes = {c.alias_or_name.lower() for c in stmt.find_all(exp.CTE)}
        for r in relations - ctes:
            self.schema_of(r)
        columns, rows = query_duckdb(stmt.sql(dialect="duckdb"), relations - ctes,
                                     self.contents_of)
        return Cursor(columns, rows)


# ---------------------------------------------------------------- helpers


_MATERIALIZED = re.compile(r"\bMATERIALIZED\s+VIEW\b", re.IGNORECASE)


def _check_syntax(sql: str) -> None:
    """Reject what DuckDB's own parser rejects (sqlglot alone is lenient), with a position."""
    try:
        duckdb.extract_statements(_MATERIALIZED.sub("VIEW", sql))
    except duckdb.ParserException as exc:
        text = str(exc)
        first = text.split("\n", 1)[0].replace("Parser Error: ", "")
        line = col = None
        m = re.search(r"LINE (\d+): (.*)\n(\s*)\^", text)
        if m:
            line = int(m.group(1))
            col = len(m.group(3)) - len(f"LINE {m.group(1)}: ") + 1
        raise ParseError(f"cannot parse SQL: {first}", line, col) from None


def _parse(sql: str) -> list[exp.Expression]:
    if not isinstance(sql, str):
        raise ParseError(f"SQL must be a string, got {type(sql).__name__}")
    _check_syntax(sql)
    try:
        statements = [s for s in sqlglot.parse(sql, read="duckdb") if s is not None]
    except sqlglot.errors.ParseError as exc:
        err = exc.errors[0] if exc.errors else {}
        raise ParseError(f"cannot parse SQL: {err.get('description', exc)}",
                         err.get("line"), err.get("col")) from None
    except sqlglot.errors.TokenError as exc:
        raise ParseError(f"cannot tokenize SQL: {exc}") from None
    if not statements:
        raise ParseError("empty SQL statement")
    return statements


def _parse_one(sql: str) -> exp.Expression:
    statements = _parse(sql)
    if len(statements) != 1:
        raise ParseError("expected exactly one query")
    return statements[0]


def _table_scope(table: Table) -> Scope:
    return Scope([Column(table.name, n, t, i) for i, (n, t) in enumerate(table.columns)])


def _table_from_schema(name: str, schema: exp.Schema) -> Table:
    columns: list[tuple[str, SqlType]] = []
    not_null: set[int] = set()
    key: tuple[int, ...] | None = None
    pk_names: list[str] = []
    for item in schema.expressions:
        if isinstance(item, exp.ColumnDef):
            cname = item.this.name.lower()
            if any(cname == c for c, _ in columns):
                raise SchemaError(f"column {cname} is defined twice in table {name}")
            if item.args.get("kind") is None:
                raise SchemaError(f"column {cname} of table {name} has no type")
            columns.append((cname, type_from_sqlglot(item.args["kind"])))
            for c in item.args.get("constraints") or []:
                kind = c.args.get("kind")
                if isinstance(kind, exp.NotNullColumnConstraint) and not kind.args.get("allow_null"):
                    not_null.add(len(columns) - 1)
                elif isinstance(kind, exp.PrimaryKeyColumnConstraint):
                    pk_names = [cname]
        elif isinstance(item, exp.PrimaryKey):
            pk_names = [e.name.lower() for e in item.expressions]
        else:
            raise UnsupportedError(f"table element {item.sql()}")
    if pk_names:
        names = [c for c, _ in columns]
        key = tuple(names.index(n) for n in pk_names)
        not_null |= set(key)
    return Table(name, columns, not_null, key)


def _ttl_property(stmt: exp.Create, table: str) -> float | None:
    """``WITH (ttl_seconds = N)``: the table's rows expire N seconds after insertion."""
    props = stmt.args.get("properties")
    ttl = None
    for prop in props.expressions if props is not None else []:
        name = prop.name.lower() if isinstance(prop, exp.Property) else ""
        if name != "ttl_seconds":
            raise UnsupportedError(f"table property {prop.sql()} of table {table} "
                                   "(only ttl_seconds is known)")
        value = prop.args.get("value")
        try:
            ttl = float(value.this) if isinstance(value, exp.Literal) and not value.is_string else -1
        except ValueError:
            ttl = -1
        if ttl <= 0:
            raise SchemaError(f"ttl_seconds of table {table} must be a positive number, "
                              f"not {value.sql() if value is not None else 'nothing'}")
    return ttl


def _constant(node: exp.Expression) -> object:
    """The value of a constant expression in VALUES (fast paths, else DuckDB folding)."""
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        text = node.this
        if text.isdigit():
            return int(text)
        return Decimal(text) if "e" not in text.lower() else float(text)
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        return -_constant(node.this)
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if any(True for _ in node.find_all(exp.Column)):
        raise SchemaError(f"VALUES may not reference columns: {node.sql()}")
    return ExpressionCompiler(Scope([])).compile(node).fn(())


def _literal(value: object) -> exp.Expression:
    if value is None:
        return exp.Null()
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, (int, float, Decimal)):
        if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
            return exp.cast(exp.Literal.string(str(value)), "DOUBLE")
        lit = exp.Literal.number(repr(value) if isinstance(value, float) else str(value))
        return exp.Neg(this=exp.Literal.number(str(-value))) if value < 0 else lit
    if isinstance(value, str):
        return exp.Literal.string(value)
    if isinstance(value, dt.date):
        return exp.cast(exp.Literal.string(value.isoformat()), "DATE")
    raise SchemaError(f"unsupported parameter value {value!r}")


def _bind_parameters(stmt: exp.Expression, params: list) -> exp.Expression:
    placeholders = list(stmt.find_all(exp.Placeholder))
    if len(placeholders) != len(params):
        raise SchemaError(f"statement has {len(placeholders)} parameters, got {len(params)}")
    stmt = stmt.copy()
    values = iter(params)
    return stmt.transform(lambda n: _literal(next(values)) if isinstance(n, exp.Placeholder) else n)


def _simple_insert(stmt: exp.Expression) -> str | None:
    """``INSERT INTO t VALUES (?, ?, ...)``: the table name, for the executemany fast path."""
    if not isinstance(stmt, exp.Insert) or isinstance(stmt.this, exp.Schema):
        return None
    values = stmt.expression
    if not isinstance(values, exp.Values) or len(values.expressions) != 1:
        return None
    tup = values.expressions[0]
    if all(isinstance(e, exp.Placeholder) for e in tup.expressions):
        return stmt.this.name.lower()
    return None


def _simple_scan(stmt: exp.Expression) -> tuple[str, int | None] | None:
    """``SELECT * FROM rel [LIMIT n]``: served directly from the relation (enumeration)."""
    if not isinstance(stmt, exp.Select):
        return None
    if len(stmt.expressions) != 1 or not isinstance(stmt.expressions[0], exp.Star):
        return None
    from_ = stmt.args.get("from_") or stmt.args.get("from")
    if from_ is None or not isinstance(from_.this, exp.Table):
        return None
    for key, value in stmt.args.items():
        if key in ("expressions", "from_", "from", "limit") or not value:
            continue
        return None
    limit = stmt.args.get("limit")
    n = None
    if limit is not None:
        lit = limit.expression
        if not (isinstance(lit, exp.Literal) and lit.this.isdigit()):
            return None
        n = int(lit.this)
    return from_.this.name.lower(), n


def _iter_rows(rows, table: Table) -> Iterator:
    """Rows from an iterable, a pandas DataFrame or an Arrow table."""
    module = type(rows).__module__
    if module.startswith("pandas"):
        import pandas as pd

        frame = rows.astype(object).where(pd.notna(rows), None)
        for r in frame.itertuples(index=False, name=None):
            yield tuple(v.date() if isinstance(v, pd.Timestamp) else v for v in r)
        return
    if module.startswith("pyarrow"):
        names = [n for n, _ in table.columns]
        data = rows.to_pydict()
        lowered = {k.lower(): v for k, v in data.items()}
        missing = [n for n in names if n not in lowered]
        if missing:
            raise SchemaError(f"Arrow data for table {table.name} lacks columns {missing}")
        yield from zip(*(lowered[n] for n in names), strict=True)
        return
    if isinstance(rows, (str, bytes)):
        raise SchemaError(f"rows for table {table.name} must be an iterable of rows")
    yield from rows
