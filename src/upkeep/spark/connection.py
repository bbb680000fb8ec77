"""``upkeep.connect(engine="spark")``: the embedded API, with the views maintained on Spark.

Tables and views are declared as on the local engine (the catalog is checked by the local
engine, so the same SQL is accepted and rejected with the same errors).  Each committed batch
is written as one JSONL change file into ``<directory>/changes`` (the log, which a reopened
database replays) and processed as one micro-batch of a streaming query checkpointed in
``<directory>/checkpoint-<n>``, which reads links to the files it has yet to process from
``<directory>/inbox`` (so that its polls between batches list no growing log); the view deltas
come back to the driver, which keeps each view's current rows for :meth:`SparkViewHandle.rows`
and calls subscribers.  A batch the engine rejects raises the local engine's error and leaves
every view as it was: the micro-batch is never committed, its file and its uncommitted
offsets are removed, and the query resumes from the checkpoint.

Rows of tables declared ``WITH (ttl_seconds = N)`` expire as on the local engine
(``expiry.py``): the driver keeps their timers and commits the due rows as a delete batch
before every change and read.  Each change file is named with its commit time, so a
connection opened on an existing directory gets the timers back from the files.

A connection may be shared by threads: autocommitted statements (and transactions, which
belong to the thread that opened them) committed close together by several threads share
one micro-batch and change file, each still atomic (:mod:`.group_commit`; ``commit_window``
seconds to wait for more, default 0).
"""

from __future__ import annotations

import copy
import errno
import functools
import hashlib
import itertools
import json
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pyarrow.parquet as pq
from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException, PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.utils import StreamingQueryException
from sqlglot import exp

from ..codecs.json_values import dumps, from_json, to_json
from ..cursor import Cursor
from ..ddl import created_name, table_from_create, table_properties
from ..dml_rows import fixed_columns, matches_by_duckdb, updated_rows
from ..engine import (
    SPARK_DEFAULT_STATE,
    SPARK_STATES,
    Engine,
    Subscriber,
    Subscription,
    ViewHandle,
    check_subscriber,
    deliver,
)
from ..errors import (
    ConstraintError,
    DuplicateKeyError,
    Error,
    SchemaError,
    UnsupportedError,
    refusing_deep_nesting,
)
from ..expiry import Expiry, due_changes
from ..expressions import ExpressionCompiler, table_scope
from ..local.bulk_insert import placed
from ..local.catalog import LocalCatalog, new_view_name, view_provenance
from ..planner import refuse_per_row_random
from ..recursive.provenance import ORDERINGS
from ..rows import iter_rows
from ..sql import (
    insert_rows,
    insert_target,
    is_parameter,
    is_query,
    parse_one,
    reads_subquery,
    relations_read,
    single_table_select,
    unsupported,
)
from ..storage import StorageError, sync_directory
from ..table import Table
from ..types import INT_RANGES, SqlType, coerce_row, coerce_value, format_row
from ..views import query_duckdb
from ..zset import net_by_table
from .codec import decode_deltas
from .dml import committed_tables, fixed_sql, predicate, where_sql
from .errors import query_error, spark_job_errors
from .fixpoint import FIXPOINT_VIEW, FixpointDriver
from .group_commit import GroupCommit
from .keyed import bulk_build
from .paths import glob_characters
from .processor import (
    CHANGE_FILE,
    DEAD_LETTER_VIEW,
    TICK_SUFFIX,
    QueryPlan,
    metadata_in,
    metadata_line,
)
from .query import delta_stream, keyed_load_records, make_plan
from .session import spark_session

T = TypeVar("T")
#: what one statement or transaction commits: its changes, and its metadata line or None
Unit = tuple[list[tuple[str, tuple, int]], str | None]
# a commit's change file: its sequence number (the batch it commits) and commit time


def open_spark(database: str | os.PathLike | None = ":memory:", *,
               spark: SparkSession | None = None, master: str | None = None,
               shards: int | None = None, bdd_ordering: str = "sifting",
               clock: Callable[[], float] | None = None,
               state: str = SPARK_DEFAULT_STATE, commit_window: float = 0.0
               ) -> SparkConnection:
    """``upkeep.connect(engine="spark")``: see :func:`upkeep.engine.connect`."""
    if bdd_ordering not in ORDERINGS:
        raise UnsupportedError(f"unknown bdd_ordering {bdd_ordering!r}; choose one of {ORDERINGS}")
    if state not in SPARK_STATES:
        raise UnsupportedError(f"unknown state {state!r}; choose one of {SPARK_STATES}")
    if not isinstance(commit_window, (int, float)) or not 0 <= commit_window <= 60:
        raise UnsupportedError(f"commit_window must be 0 to 60 seconds, not {commit_window!r}")
    directory = None if database in (":memory:", "", None) else database
    return SparkConnection(spark=spark, master=master, directory=directory, shards=shards,
                           clock=clock, bdd_ordering=bdd_ordering, state=state,
                           commit_window=float(commit_window))


class SparkViewHandle(ViewHandle):
    """``db.view(name)`` on the Spark engine: rows, counts and subscriptions, served from
    the driver's copy of the view."""

    def __init__(self, db: SparkConnection, name: str):
        super().__init__(name)
        self._db = db

    def rows(self) -> list[tuple]:
        return self._db._read(self.name, lambda rows: list(rows.elements()))

    def count(self, row: tuple) -> int:
        row = self.looked_up(row)
        return self._db._read(self.name, lambda rows: rows[row])

    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        """Call ``fn(changes)`` with every change of the view told from now on: each
        micro-batch's, and a view's first rows when a later sync builds it.  One attached
        while changes are being told is not told those (its first rows, read now, hold
        them): ``engine.Subscription``, counting deliveries, not batches."""
        check_subscriber(fn)
        subs = self._db._subscribers.setdefault(self.name, [])
        subscription = Subscription(fn, self._db._deliveries)
        subs.append(subscription)
        return lambda: subs.remove(subscription) if subscription in subs else None

    @property
    def columns(self) -> list[str]:
        return [n for n, _ in self._db.display_schema_of(self.name)]

    @property
    def schema(self) -> list[tuple[str, str]]:
        return [(n, t.sql()) for n, t in self._db.display_schema_of(self.name)]

    def explain(self) -> str:
        return self._db.explain(self.name)

    def why(self, row: tuple):
        return self._db.why(self.name, row)

    def counters(self) -> dict[str, int]:
        """A partitioned recursive view's work: the fixpoint counters summed over its
        partitions (last batch), and tuples / bytes shipped between partitions and
        supersteps (all batches)."""
        self._db._sync()
        driver = next((d for d in self._db._fixpoints.values() if d.spec.view == self.name),
                      None)
        if driver is None:
            raise UnsupportedError(f"counters of view {self.name}: on the spark engine only "
                                   f"views run as partitioned fixpoints report counters")
        return driver.report()


class SparkConnection(Engine):
    """The views of one catalog, maintained by a Spark streaming query."""

    name = "spark"

    def __init__(self, spark: SparkSession | None = None, master: str | None = None,
                 directory: str | os.PathLike | None = None, shards: int | None = None,
                 clock: Callable[[], float] | None = None, bdd_ordering: str = "sifting",
                 state: str = SPARK_DEFAULT_STATE, commit_window: float = 0.0):
        self.spark = spark or spark_session(master or "local[2]")
        self.state = state
        self._own_dir = directory is None
        self._closed = False
        self.directory = Path(directory or tempfile.mkdtemp(prefix="upkeep-spark-"))
        odd = glob_characters(self.directory.resolve())
        if odd:
            raise UnsupportedError(f"a Spark database directory holding {odd!r}: Spark reads "
                                   f"its change files through a Hadoop glob pattern "
                                   f"({self.directory}); choose a directory without them")
        self.changes = self.directory / "changes"
        self.changes.mkdir(parents=True, exist_ok=True)
        # what the streaming query reads: links to the change files it has yet to process
        # (:meth:`_refill_inbox`), so that its polls between batches list a file or two,
        # not the whole log, and cost the same after a million batches as after one
        self.inbox = self.directory / "inbox"
        self.inbox.mkdir(exist_ok=True)
        self.loads = self.directory / "loads"  # <table>/<n>: the rows of each db.load
        self.shards = shards or int(self.spark.conf.get("spark.sql.shuffle.partitions", "4"))
        self._catalog = LocalCatalog(bdd_ordering)  # checks and plans the SQL; holds no rows
        self._thread = threading.local()  # per thread: its open transaction (``_pending``)
        self._contents: dict[str, Counter] = {}
        self._subscribers: dict[str, list[Subscriber]] = {}
        self._query = None
        self._plan: QueryPlan | None = None
        self._fixpoints: dict[str, FixpointDriver] = {}
        self._clock = clock or time.time
        self._expiry: dict[str, Expiry] = {}  # per table with ttl_seconds
        # An existing directory's change files are the durable log: a new connection replays
        # them into a fresh checkpoint, so its views start from all the data.
        self._generation = 1 + max((int(p.name.rsplit("-", 1)[1])
                                    for p in self.directory.glob("checkpoint-[0-9]*")), default=-1)
        self._last_batch = -1
        #: the last committed batch: the sequence number of the newest change file
        self.batches = max((int(m["seq"]) for m in map(CHANGE_FILE.fullmatch, (
            p.name for p in self.changes.iterdir())) if m), default=0)
        self._sequence = itertools.count(self.batches + 1)
        # the views' changes folded since subscribers were last called; after a restart
        # (which replays every change file) what they had been sent instead, so that they
        # are sent the difference, not the replay (``_deliver``)
        self._undelivered: dict[str, Counter] = {}
        self._baseline: dict[str, Counter] | None = None
        self._journal: Callable[[int, dict], Callable[[], None]] | None = None
        self._journaled = self.batches  # the last batch the journal was called for
        self._deliveries = 0  # how many times subscribers were told (engine.Subscription)
        self._metadata = self._last_metadata()
        self._lock = threading.Lock()  # the driver's copies of the views
        self._writes = threading.RLock()  # the streaming query: one user of it at a time
        self._group = GroupCommit(self._commit_group, commit_window)

    def _last_metadata(self) -> dict:
        """The metadata of the newest change file that carries some ({} if none)."""
        files = [(int(m["seq"]), p) for p in self.changes.glob("changes-*.jsonl")
                 if (m := CHANGE_FILE.fullmatch(p.name))]
        for _, path in sorted(files, reverse=True):
            try:
                with path.open("rb") as f:
                    found = metadata_in(f.readline().decode("utf-8", "replace"))
            except (OSError, ValueError) as exc:
                raise StorageError(f"cannot read the change file {path}: {exc}") from None
            if found is not None:
                return found
        return {}

    @property
    def _pending(self) -> list[tuple[str, tuple, int]] | None:
        """The calling thread's open transaction's changes (None: none open)."""
        return getattr(self._thread, "pending", None)

    @_pending.setter
    def _pending(self, staged: list[tuple[str, tuple, int]] | None) -> None:
        self._thread.pending = staged
        self._thread.keys = Counter()  # (table, PRIMARY KEY value) -> net count staged

    def _stage(self, table: Table, staged: list[tuple[str, tuple, int]]) -> None:
        """Add one statement's changes to the calling thread's transaction.  A PRIMARY KEY
        value the transaction would insert twice is refused at once, as the local engine
        refuses it (later statements of the transaction could cancel it out before the
        table step sees the batch), and the statement stages nothing."""
        if table.key is not None:
            keys: Counter = self._thread.keys
            changed: Counter = Counter()
            for _, row, weight in staged:
                changed[tuple(row[i] for i in table.key)] += weight
            for key, weight in changed.items():
                if keys[(table.name, key)] + weight > 1:
                    raise DuplicateKeyError(f"duplicate primary key {format_row(key)} in "
                                            f"table {table.name}", key)
            for key, weight in changed.items():
                keys[(table.name, key)] += weight
        self._pending.extend(staged)

    # ------------------------------------------------------------ statements
    def execute_parsed(self, stmt: exp.Expression) -> Cursor:
        """CREATE TABLE / CREATE VIEW / DROP, INSERT, DELETE / UPDATE ... WHERE, queries.

        With ``state="keyed"`` statements find the tables' rows in their keyed state
        (:mod:`.dml`); queries over views alone read the views' driver copies.  With
        shards the driver holds no table contents: statements and queries that read
        tables raise :class:`UnsupportedError`."""
        if isinstance(stmt, exp.Insert):
            return self._insert_statement(stmt)
        if isinstance(stmt, (exp.Delete, exp.Update)):
            return self._modify(stmt)
        if isinstance(stmt, (exp.Create, exp.Drop)):
            self._check_open()
            if self.in_transaction():
                raise UnsupportedError(f"{stmt.key.upper()} inside a transaction")
            kind = (stmt.args.get("kind") or "").upper() if isinstance(stmt, exp.Create) else ""
            if kind == "TABLE" and "provenance" in table_properties(stmt, created_name(stmt)):
                raise UnsupportedError(
                    "update provenance tables (WITH (provenance = ...)) on the spark "
                    "engine: they are kept by the local engine only (docs/spark.md)")
            if kind == "VIEW" and view_provenance(stmt, created_name(stmt)):
                raise UnsupportedError(
                    "why-provenance of views (WITH (provenance = 'why')) on the spark "
                    "engine: it is kept by the local engine only (docs/spark.md)")
            with self._writes:
                if kind == "TABLE" and isinstance(stmt.this, exp.Schema):
                    self._check_declaration(stmt)
                self._catalog.execute_ddl(stmt)
                if isinstance(stmt, exp.Drop) and stmt.kind == "TABLE":
                    for dropped in stmt.args.get("tables") or [stmt.this]:
                        shutil.rmtree(self.loads / dropped.name.lower(), ignore_errors=True)
                        # its rows in the change files so far are a dropped table's
                        self._declare(dropped.name.lower(),
                                      {"dropped": True, "since": self.batches + 1})
                self._catalog_changed()
                self._keep_timers()
            return Cursor()
        if is_query(stmt):
            return self._select(stmt)
        raise unsupported(stmt, "spark")

    def _check_declaration(self, stmt: exp.Create) -> None:
        """The directory's change files and loads hold rows by position: a table declared
        again after a reopen must be declared as before (its columns, their types, NOT
        NULL and the key), or its rows would be read under other columns.  The first
        declaration is kept in ``<dir>/tables.json``."""
        table = table_from_create(stmt)
        if table.name in self._catalog.tables:
            return  # CREATE TABLE IF NOT EXISTS of a declared table, or the catalog's error
        mine = {"columns": [[n, t.sql()] for n, t in table.columns],
                "not_null": sorted(table.not_null), "key": list(table.key or ())}
        saved = self._declarations().get(table.name)
        if saved is not None and saved.get("dropped"):
            saved = None  # a table of that name was dropped: this is a new one
        if saved is not None:
            saved = {k: v for k, v in saved.items() if k != "since"}
        if saved is not None and saved != mine:
            def spelled(d: dict) -> str:
                return ", ".join(f"{n} {t}" for n, t in d["columns"]) + (
                    f"; key {', '.join(d['columns'][i][0] for i in d['key'])}"
                    if d["key"] else "")
            raise SchemaError(f"table {table.name} is declared ({spelled(saved)}) in "
                              f"{self.directory}, whose change files hold its rows by "
                              f"position; declare it the same way, or DROP TABLE it first "
                              f"(now: {spelled(mine)})")
        if saved is None:  # its rows are in the change files from the next one on
            self._declare(table.name, {**mine, "since": self.batches + 1})

    def _since(self) -> dict[str, int]:
        """Per table declared or dropped, the first change file that may hold its rows:
        the files before it hold a dropped table's of that name (``QueryPlan.since``)."""
        return {name: d.get("since", 0) for name, d in self._declarations().items()}

    def _declarations(self) -> dict:
        path = self.directory / "tables.json"
        try:
            return json.loads(path.read_text()) if path.exists() else {}
        except (OSError, ValueError) as exc:
            raise StorageError(f"cannot read {path}: {exc}") from None

    def _declare(self, table: str, declaration: dict | None) -> None:
        """Keep (or, with None, forget) ``table``'s declaration, replaced atomically."""
        saved = self._declarations()
        if declaration is None and table not in saved:
            return
        saved.pop(table, None)
        if declaration is not None:
            saved[table] = declaration
        path = self.directory / "tables.json"
        try:
            _write_whole(path, json.dumps(saved, indent=1))
        except OSError as exc:
            raise StorageError(f"cannot write {path}: {exc}") from None

    def _modify(self, stmt: exp.Delete | exp.Update) -> Cursor:
        """DELETE / UPDATE ... WHERE: the matching rows found by a Spark job over the
        table's keyed state (plus rows staged earlier in the transaction), staged as one
        change of this statement.  With a subquery in WHERE or SET, DuckDB evaluates the
        statement on the driver over the rows its ``col = literal`` conjuncts leave and
        the relations it reads (:mod:`upkeep.dml_rows`)."""
        self._check_open()
        verb = "DELETE" if isinstance(stmt, exp.Delete) else "UPDATE"
        refuse_per_row_random(stmt)
        table = self._catalog.table(stmt.this.name)
        columns = self._catalog.schema_of(table.name)
        assignments = stmt.expressions if verb == "UPDATE" else []
        targets = [table.column_index(a.this.name.lower()) for a in assignments]
        parameters = [is_parameter(a.expression) for a in assignments]
        by_duckdb = reads_subquery(stmt)
        reads: dict[str, str | None] = {}  # table -> the WHERE its rows are read through
        if by_duckdb:
            alias = stmt.this.alias_or_name.lower()
            where = stmt.args.get("where")
            fixed = [] if where is None else fixed_columns(table, where.this, alias)
            others = relations_read(stmt) - {table.name}
            if any(t.name.lower() == table.name and t is not stmt.this
                   for t in stmt.find_all(exp.Table)):
                others.add(table.name)  # a subquery reads the whole target
            elif fixed:
                reads[table.name] = fixed_sql(columns, fixed)
            for name in others:
                self.schema_of(name)
            reads.update(dict.fromkeys(others & set(self._catalog.tables)))
            reads.setdefault(table.name, None)
        else:
            reads[table.name] = where_sql(stmt)
            predicate(table.name, columns, reads[table.name])  # errors before any Spark job
            compiler = ExpressionCompiler(table_scope(table.name, columns))
            sets = [compiler.compile(a.expression).fn for a in assignments]
        with self._writes:  # the rows read are the rows changed
            self.expire()
            read = self._table_rows(reads)
            candidates = [(r, w) for r, w in read[table.name].items() if w > 0]
            if by_duckdb:
                changed = matches_by_duckdb(table, stmt, targets, candidates,
                                            self._relations(read), self.schema_of)
            else:
                changed = [(r, w, [fn(r) for fn in sets]) for r, w in candidates]
            if verb == "UPDATE":
                delta = updated_rows(table, changed, targets, parameters)
            else:
                delta = {r: -w for r, w, _ in changed}
            for row, w in delta.items():
                if w > 0:
                    table.check_not_null(row)
            staged = [(table.name, row, 1 if w > 0 else -1)
                      for row, w in delta.items() for _ in range(abs(w))]
            if self._pending is not None:
                self._stage(table, staged)
            elif staged:  # read and written under one hold of the query: no lost update
                self._commit_now([(staged, None)])
        return Cursor(rowcount=sum(w for _, w, _ in changed))

    def _table_rows(self, reads: dict[str, str | None]) -> dict[str, Counter]:
        """The rows of each table of ``reads`` that satisfy its WHERE (None: all), with
        counts: the committed ones by Spark jobs over the tables' keyed state or, for
        tables in shards, the shards' logs (every table is in one or the other:
        :func:`upkeep.spark.routing.tables_group`), filtered on the executors, plus what
        the calling thread's transaction staged.  Called holding ``_writes``, after every
        committed change file is processed."""
        self._sync()
        columns = {name: self._catalog.schema_of(name) for name in reads}
        found = {name: Counter() for name in reads}
        checkpoint = self._checkpoint()
        if any((checkpoint / "commits").glob("[0-9]*")):
            with spark_job_errors():
                found = committed_tables(self.spark, str(checkpoint), self._plan_now(),
                                         reads, columns)
        tests = {name: predicate(name, columns[name], where) for name, where in reads.items()}
        for name, row, weight in self._pending or []:
            if name in reads and tests[name](row) is True:
                found[name][row] += weight
        return found

    def _relations(self, tables: dict[str, Counter]
                  ) -> Callable[[str], tuple[list, list[tuple]]]:
        """``name -> (columns, rows)`` for DuckDB: tables from ``tables`` (as
        :meth:`_table_rows` read them), views from the driver's copies as last committed."""
        def contents(name: str) -> tuple[list, list[tuple]]:
            # under their column names as written: DuckDB names the result's columns so
            if name in tables:
                return self.display_schema_of(name), list(tables[name].elements())
            with self._lock:  # as the caller synced it: no expiry may commit in between
                return self.display_schema_of(name), list(self._contents[name].elements())
        return contents

    def _select(self, stmt: exp.Expression) -> Cursor:
        """A query evaluated by DuckDB on the driver: over the views' copies, and over the
        tables it reads, read from their keyed state by a Spark job.  A SELECT over one
        table whose WHERE fixes columns (``col = literal`` conjuncts) brings only the rows
        holding those values to the driver (filtered on the executors)."""
        relations = relations_read(stmt)
        for name in relations:
            self.schema_of(name)
        tables: dict[str, str | None] = dict.fromkeys(
            name for name in relations if name in self._catalog.tables)
        single = single_table_select(stmt)
        if single is not None and single[0].name.lower() in tables:
            source, where = single
            table = self._catalog.table(source.name)
            fixed = fixed_columns(table, where.this, (source.alias or table.name).lower())
            if fixed:
                tables[table.name] = fixed_sql(self._catalog.schema_of(table.name), fixed)
        if tables:  # a Spark job: not once the database is closed (views' copies are)
            self._check_open()
        with self._writes:  # tables and views read at the same committed micro-batch
            self.expire()
            if tables:
                read = self._table_rows(tables)
            else:
                self._sync()
                read = {}
            columns, rows = query_duckdb(stmt.sql(dialect="duckdb"), relations,
                                         self._relations(read))
        return Cursor(columns, rows)

    # ------------------------------------------------------------ catalog
    def create_view(self, name: str, sql: str, strategy: str | None = None,
                    provenance: str | None = None) -> SparkViewHandle:
        name = new_view_name(name, sql)
        if provenance is not None:
            raise UnsupportedError(
                "why-provenance of views (provenance=...) on the spark engine: it is kept by "
                "the local engine only (docs/spark.md)")
        if self.in_transaction():
            raise UnsupportedError("CREATE VIEW inside a transaction")
        self._check_open()
        with self._writes, refusing_deep_nesting():
            self._catalog.define_view(name, parse_one(sql), strategy)
            self._catalog_changed()
        return SparkViewHandle(self, name)

    def view(self, name: str) -> SparkViewHandle:
        name = name.lower()
        if name not in self._catalog.view_names():
            raise SchemaError(f"unknown view {name}")
        return SparkViewHandle(self, name)

    def tables(self) -> list[str]:
        return list(self._catalog.tables)

    def views(self) -> list[str]:
        return self._catalog.view_names()

    def schema_of(self, name: str) -> list[tuple[str, SqlType]]:
        return self._catalog.schema_of(name)

    def display_schema_of(self, name: str) -> list[tuple[str, SqlType]]:
        """:meth:`schema_of` with the column names as written (``LocalCatalog.display_schema_of``)."""
        return self._catalog.display_schema_of(name)

    def why(self, view: str, row: tuple):
        self._catalog.runtime(view)
        raise UnsupportedError(f"why on the spark engine: view {view}'s provenance lives in "
                               f"its shards; ask the local engine")

    def checkpoint(self) -> None:
        """Nothing to do: Spark checkpoints every micro-batch as it commits."""

    def metadata(self) -> dict:
        """The metadata committed with the latest batch that carried some ({} if none): the
        first line of its change file, so it commits (and survives a reopen) with it."""
        return copy.deepcopy(self._metadata)

    def explain(self, name: str) -> str:
        """The local engine's plan of the view, and how it is partitioned across shards."""
        plan = self._plan_now()
        name = name.lower()
        if plan.keyed is not None and name in plan.keyed.views:
            return f"{self._catalog.explain(name)}\n{plan.keyed.describe(name, plan.catalog)}"
        group = next(g for g in plan.groups if name in g.views)
        why = plan.unkeyed.get(name)
        return (f"{self._catalog.explain(name)}\nspark: {group.describe()}"
                + (f" (not in keyed state: {why})" if why else ""))

    def last_batch_metrics(self) -> dict[str, int]:
        """Spark's measurements of the last micro-batch, summed over its stateful
        operators: RocksDB bytes read (by gets and iterators) and written, gets and puts,
        and the batch's wall time in ms (``{}`` before the first batch).  (Spark's count of
        state rows is off: counting makes every write read its key's value first.)"""
        progress = self._query.lastProgress if self._query is not None else None
        if not progress:
            return {}
        operators = progress.get("stateOperators", [])

        def total(name: str) -> int:
            return sum(int(op.get("customMetrics", {}).get(name, 0)) for op in operators)
        return {"bytes_read": total("rocksdbTotalBytesRead")
                + total("rocksdbTotalBytesReadThroughIterator"),
                "bytes_written": total("rocksdbTotalBytesWritten"),
                "gets": total("rocksdbGetCount"), "puts": total("rocksdbPutCount"),
                "batch_ms": int(progress["durationMs"].get("triggerExecution", 0))}

    def load(self, table: str, data) -> None:
        """Bulk-load rows into a table (a Spark DataFrame, a Parquet path, or a pandas
        DataFrame or Arrow table, made a Spark DataFrame on the driver) before the first
        change: the shards' state is built from them by Spark, not row by row.

        The executors copy the rows into ``<directory>/loads/<table>/`` (Parquet, renamed
        into place when whole), so they are part of the database: a connection opened
        again on the directory starts from them and the change files after them.  Loading
        a table twice adds both loads' rows.  A load the table cannot hold is refused and
        its copy removed (:func:`check_load_types`, :func:`check_load_values`)."""
        self._check_open()
        if self._ran() or self._generation or self.batches:
            raise UnsupportedError("bulk loads must come before the first change (and "
                                   "before the first read, which builds the views)")
        relation = self._catalog.table(table)
        table, names = relation.name, relation.column_names
        if table in self._expiry:
            raise UnsupportedError(f"bulk load of table {table}, whose rows expire: rows "
                                   f"loaded in bulk have no commit time; insert them instead")
        try:
            if isinstance(data, (str, os.PathLike)):
                data = self.spark.read.parquet(str(data))
            elif not isinstance(data, DataFrame):
                data = self._driver_frame(table, data)
            extra = sorted({c.lower() for c in data.columns} - set(names))
            if extra:
                raise SchemaError(f"bulk load of table {table}: the rows have column(s) "
                                  f"{', '.join(extra)}, which the table lacks (its columns: "
                                  f"{', '.join(names)})")
            data = data.select(*names)
        except (AnalysisException, Py4JJavaError) as exc:  # no such path, not Parquet, or
            # a column missing
            raise SchemaError(f"bulk load of table {table}: "
                              f"{str(exc).strip().splitlines()[0][:500]}") from None
        check_load_types(relation, data.schema)
        target = self.loads / table
        target.mkdir(parents=True, exist_ok=True)
        tmp = target / f".{uuid.uuid4().hex}.tmp"
        data.write.parquet(str(tmp))
        try:
            check_load_values(relation, self.spark.read.parquet(str(tmp)))
        except Error:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        tmp.rename(target / f"{len(self._load_parts(table)):08d}")
        self._plan = None  # keyed steps' keys are sized for the rows loaded

    def _load_parts(self, table: str) -> list[Path]:
        return sorted(p for p in (self.loads / table).glob("[0-9]*") if p.is_dir())

    def _loaded_rows(self) -> dict[str, int]:
        """How many rows each table's bulk loads hold (from the Parquet footers)."""
        return {table: sum(pq.ParquetFile(f).metadata.num_rows
                           for part in self._load_parts(table) for f in part.glob("*.parquet"))
                for table in self._catalog.tables}

    def _driver_frame(self, table: str, data) -> DataFrame:
        """A pandas DataFrame or an Arrow table given to :meth:`load`, as a Spark
        DataFrame; anything else is a :class:`SchemaError` naming what load takes."""
        import pandas as pd
        import pyarrow as pa

        if not isinstance(data, (pd.DataFrame, pa.Table)):
            raise SchemaError(f"bulk load of table {table} takes a Spark DataFrame, a "
                              f"Parquet path, a pandas DataFrame or an Arrow table, not "
                              f"{type(data).__name__}")
        try:
            return self.spark.createDataFrame(data)
        except (ValueError, TypeError, PySparkException) as exc:  # a column Spark cannot type
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise SchemaError(f"bulk load of table {table}: {first[:500]}") from None

    def _snapshots(self) -> dict[str, DataFrame]:
        """Each declared table's bulk-loaded rows, all its loads in order."""
        snapshots = {}
        for table in self._catalog.tables:
            names = [n for n, _ in self._catalog.schema_of(table)]
            parts = [self.spark.read.parquet(str(p)).select(*names)
                     for p in self._load_parts(table)]
            if parts:
                snapshots[table] = functools.reduce(DataFrame.unionByName, parts)
        return snapshots

    def _catalog_changed(self) -> None:
        """A new catalog needs a new plan: the query restarts and replays every change file
        (a view created late starts from all the data, like on the local engine).  What the
        subscribers were sent is kept, so that they are sent only what differs."""
        # a query of this generation ran (running still, or stopped by stop()): its
        # checkpoint holds the old plan's state, so the new plan starts a new one
        ran = self._ran()
        self._stop_query()
        if ran:
            self._generation += 1
        self._plan = None
        with self._lock:
            if self._baseline is None:
                self._baseline = self._contents
                for view, pending in self._undelivered.items():
                    sent = self._baseline[view] = Counter(self._baseline.get(view, ()))
                    sent.subtract(pending)
                self._undelivered = {}
            self._contents = {v: Counter() for v in self._catalog.view_names()}

    def _ran(self) -> bool:
        """Whether a query of this generation ran (running still, or stopped by
        :meth:`stop`): its checkpoint holds state of the plan it ran."""
        return self._query is not None or (self._checkpoint() / "commits").exists()

    def _plan_now(self) -> QueryPlan:
        if self._plan is None:
            keyed = self.state == "keyed"
            self._plan = plan = make_plan(self._catalog, self.shards, fixpoints=True,
                                          keyed=keyed,
                                          loaded=self._loaded_rows() if keyed else None,
                                          since=self._since(), embedded=True)
            self._fixpoints = {g.name: FixpointDriver(plan.plan_id, plan.catalog, g.name,
                                                      g.fixpoint)
                               for g in plan.groups if g.fixpoint is not None}
        return self._plan

    # ------------------------------------------------------------ changes
    def insert(self, table: str, rows) -> int:
        """Insert rows (iterable of tuples/dicts, pandas DataFrame or Arrow table)."""
        return self._change(table, rows, 1)

    def delete(self, table: str, rows) -> int:
        """Delete one occurrence of each row; a row not present rejects the micro-batch."""
        return self._change(table, rows, -1)

    def _change(self, table: str, rows, weight: int, grouped: bool = True) -> int:
        """Stage or commit ``rows`` of ``table`` with ``weight``; outside a transaction in
        the next group commit, or (``grouped`` false, the caller holding the query) now."""
        if self._pending is None:
            self._check_open()  # (a transaction checked it when it began)
        relation = self._catalog.table(table)
        table = relation.name
        schema = self._catalog.schema_of(table)
        staged = [(table, coerce_row(r, schema, table, i), weight)
                  for i, r in enumerate(iter_rows(rows, table, schema))]
        if weight > 0:  # on the driver: the executors' check would reject the whole batch
            for _, row, _ in staged:
                relation.check_not_null(row)  # the local engine's error, field for field
        try:
            if self._pending is not None:
                self._stage(relation, staged)
            elif staged and grouped:  # nothing to change: no change file, no micro-batch
                self._commit(staged)
            elif staged:
                self._commit_now([(staged, None)])
        except DuplicateKeyError as exc:  # named by the rows holding the key, as locally
            raise placed(exc, relation, [row for _, row, _ in staged]) from None
        return len(staged)

    def _insert_statement(self, stmt: exp.Insert) -> Cursor:
        """INSERT ... VALUES, or INSERT ... SELECT with the query evaluated as
        :meth:`_select` evaluates it (tables as the transaction sees them)."""
        table = self._catalog.table(insert_target(stmt))
        if self._pending is not None or isinstance(stmt.expression, exp.Values):
            rows = insert_rows(stmt, table.columns, lambda query: self._select(query).fetchall())
            return Cursor(rowcount=self.insert(table.name, rows))
        with self._writes:  # read and written under one hold of the query: no lost update
            rows = insert_rows(stmt, table.columns, lambda query: self._select(query).fetchall())
            return Cursor(rowcount=self._change(table.name, rows, 1, grouped=False))

    def in_transaction(self) -> bool:
        return self._pending is not None

    def _check_open(self) -> None:
        """Refuse a change after :meth:`close`: its streaming query is stopped (and a
        temporary directory removed), so it could not be committed."""
        if self._closed:
            raise StorageError("the database is closed: connect again to change it")

    def _begin(self) -> None:
        self._check_open()
        self._pending = []

    def _discard(self) -> None:
        self._pending = None

    def _finish(self, metadata: dict | None) -> None:
        staged, self._pending = self._pending, None
        line = None if metadata is None else metadata_line(metadata)
        if staged or line is not None:  # metadata alone commits too, as on one machine
            self._check_open()  # closed inside the transaction: nothing of it commits
            self._commit(staged or [], line)

    def _commit(self, staged: list[tuple[str, tuple, int]], line: str | None = None) -> None:
        """An autocommitted statement or a transaction (with its metadata line), in the
        next group of commits."""
        self._group.submit((staged, line))

    def _commit_group(self, units: list[Unit]) -> list[Error | None]:
        """The leader's group commit (:class:`GroupCommit`): each unit's error or None."""
        with self._writes:
            return self._commit_now(units, raise_single=False)

    def _commit_now(self, units: list[Unit], *, raise_single: bool = True
                    ) -> list[Error | None]:
        """Commit ``units`` (changes, metadata line or None) as one micro-batch after the
        due expiries, with the last metadata among them; if it is rejected, each unit
        alone, so only the bad ones fail.  One unit's error is raised (unless
        ``raise_single`` is false); with several, each unit's error or None is returned."""
        self.expire()
        now = self._clock()
        lines = [line for _, line in units if line is not None]
        try:
            self._commit_at([c for staged, _ in units for c in staged], now,
                            lines[-1] if lines else None)
            errors: list[Error | None] = [None] * len(units)
        except Error as exc:
            if len(units) == 1:
                if raise_single:
                    raise
                return [exc]
            errors = [self._commit_now([unit], raise_single=False)[0] for unit in units]
            return errors
        for staged, _ in units:
            for table, delta in net_by_table(staged).items():
                if table in self._expiry:
                    self._expiry[table].committed(delta, now)
        return errors

    def _commit_at(self, staged: list[tuple[str, tuple, int]], now: float,
                   line: str | None = None) -> None:
        """Write the change file of ``staged`` (its first line the transaction's metadata,
        if any) and run it as the next micro-batch."""
        lines = [dumps({"table": table, "op": "insert" if weight > 0 else "delete",
                        "row": [to_json(v) for v in row]}) + "\n"
                 for table, row, weight in staged]
        if self._query is None:  # (re)build the views first: the replay is no batch's change
            self._sync()
        seq = next(self._sequence)
        path = self._write(f"changes-{seq:08d}-t{now!r}.jsonl",
                           "".join([line] if line is not None else []) + "".join(lines))
        self._run(path, seq, None if line is None else metadata_in(line))

    # ------------------------------------------------------------ expiry
    def expire(self) -> int:
        """Delete the rows whose time-to-live has passed, as one batch with all their
        consequences; returns how many rows expired.  Runs on its own before every change
        and read (as on the local engine); not once the database is closed, whose views'
        copies stay as they were."""
        if self._pending is not None or self._closed:
            return 0
        with self._writes:
            return self._expire_now()

    def _expire_now(self) -> int:
        """Commit the due rows' deletes now (the caller holds the query)."""
        now = self._clock()
        deltas, consumed = due_changes(self._expiry, now)
        staged = [(name, row, -1) for name, delta in deltas.items()
                  for row, w in delta.items() for _ in range(-w)]
        if staged:
            self._commit_at(staged, now)
        for name, n in consumed.items():
            self._expiry[name].expired(n)
        return len(staged)

    def _keep_timers(self) -> None:
        """One :class:`Expiry` per table declared with ``ttl_seconds``; a table declared
        over an existing directory gets its timers back from the change files."""
        declared = {t: self._catalog.ttl_of(t) for t in self._catalog.tables}
        for name in list(self._expiry):
            if declared.get(name) != self._expiry[name].ttl:
                del self._expiry[name]
        for name, ttl in declared.items():
            if ttl is not None and name not in self._expiry:
                self._expiry[name] = self._timers_from_files(name, ttl)

    def _timers_from_files(self, table: str, ttl: float) -> Expiry:
        """Replay the change files' net changes of ``table`` at their commit times (an
        expiry's deletes replay as hand deletes, which skip the same timers)."""
        expiry = Expiry(ttl)
        schema = self._catalog.schema_of(table)
        first = self._since().get(table, 0)
        for path in sorted(self.changes.glob("changes-*.jsonl")):
            named = CHANGE_FILE.fullmatch(path.name)
            if named is None or int(named["seq"]) < first:
                continue
            staged = []
            for line in path.read_text().splitlines():
                if metadata_in(line) is not None:
                    continue
                record = json.loads(line)
                if record["table"] == table:  # as the change file spells it (DECIMAL: text)
                    row = tuple(from_json(v, t) for v, (_, t) in zip(record["row"], schema,
                                                                     strict=True))
                    staged.append((table, row, 1 if record["op"] == "insert" else -1))
            if staged:
                expiry.committed(net_by_table(staged)[table], float(named["at"]))
        return expiry

    def _write(self, name: str, text: str) -> Path:
        """Add change file ``name`` to the log, then hand it to the query (the inbox); if
        that fails, the log does not keep it either (a reopening would replay it)."""
        try:
            path = _write_durably(self.changes / name, text)
            try:
                _link_or_copy(path, self.inbox / name)
            except OSError:
                path.unlink(missing_ok=True)
                raise
        except OSError as exc:
            raise StorageError(f"cannot write the change file {name} of {self.directory}: "
                               f"{exc}") from None
        return path

    def _refill_inbox(self) -> None:
        """A fresh query's inbox: every change file of the log (it replays them all)."""
        shutil.rmtree(self.inbox, ignore_errors=True)
        self.inbox.mkdir(parents=True)
        for path in self.changes.iterdir():
            if CHANGE_FILE.fullmatch(path.name):
                _link_or_copy(path, self.inbox / path.name)

    def _empty_inbox(self) -> None:
        """Forget the change files the query processed (every one written so far: the
        caller holds the query, and it has processed all that was available)."""
        for path in self.inbox.iterdir():
            path.unlink(missing_ok=True)

    # ------------------------------------------------------------ the query
    def _checkpoint(self) -> Path:
        return self.directory / f"checkpoint-{self._generation}"

    def _start(self) -> None:
        plan = self._plan_now()
        snapshots = self._snapshots()
        keyed_state = None
        if not (self._checkpoint() / "commits").exists():
            # a fresh query: every shard reports its views' initial contents in batch 0
            # (not empty: Spark's file source skips empty files)
            self._refill_inbox()  # the tick is no change: the inbox has it, the log not
            tick = self.inbox / f"changes-{self._generation:08d}{TICK_SUFFIX}"
            try:
                _write_whole(tick, "start\n")
            except OSError as exc:
                raise StorageError(f"cannot write {tick}: {exc}", path=str(tick)) from None
            if plan.keyed is not None and snapshots:
                keyed_state, initial = self._bulk_build(plan, snapshots)
                self._contents = {v: Counter() for v in self._catalog.view_names()}
                self._fold(initial)
        deltas = delta_stream(self.spark, plan, str(self.inbox), snapshots,
                              keyed_state=keyed_state)
        self._last_batch = -1
        # one active query per name in a session: connections over other directories
        # with the same catalog must not collide
        place = hashlib.sha256(str(self.directory.resolve()).encode()).hexdigest()[:8]
        self._query = (deltas.writeStream.foreachBatch(self._receive)
                       .option("checkpointLocation", str(self._checkpoint()))
                       .queryName(f"upkeep_{plan.plan_id}_{self._generation}_{place}")
                       .start())

    def _bulk_build(self, plan: QueryPlan, snapshots: dict[str, DataFrame]):
        """Keyed state built from the loaded tables by Spark jobs; a bad loaded row (a
        duplicate key, a value of the wrong type) raises the local engine's error."""
        with spark_job_errors():
            return bulk_build(plan, keyed_load_records(plan, snapshots))

    def _fold(self, rows: list[tuple[str, str, int]]) -> None:
        """The views' initial deltas (from the bulk build) into the driver's copies."""
        changes, _ = decode_deltas(rows, self._catalog.schema_of, DEAD_LETTER_VIEW)
        self._apply_changes(changes)

    def _stop_query(self) -> None:
        with self._writes:
            if self._query is not None:
                try:
                    self._query.stop()
                finally:
                    self._query = None

    def _read(self, view: str, read: Callable[[Counter], T]) -> T:
        """``read`` of the driver's copy of ``view``, after every committed change and
        expiry (under the copies' lock: another thread's batch may be landing)."""
        self._catalog.runtime(view)
        self.expire()
        self._sync()
        with self._lock:
            return read(self._contents[view.lower()])

    def sync(self) -> None:
        """Build the views created since the last change, now (they are otherwise built
        by the next change or read): subscribers attached after this get changes only."""
        self._sync()

    def _sync(self, batch: int | None = None, metadata: dict | None = None) -> None:
        """Process every change file written so far (``batch``: the newest one's number,
        carrying ``metadata``), then hand the views' changes to the journal and the
        subscribers (who read the batch's metadata as committed).

        Once the database is closed, nothing starts a query (it would run on after close,
        polling the change directory): every commit was processed before close, so the
        copies are current, unless views were created since the last batch and never
        built."""
        with self._writes:
            if self._closed:
                if self._plan is None and self._catalog.view_names():
                    raise StorageError("the database was closed before its views "
                                       f"{sorted(self._catalog.view_names())} were built "
                                       "(by a change or read after they were created): "
                                       "connect again to read them")
                return
            if self._query is None:
                self._start()
            self._query.processAllAvailable()
            while not self._query.isActive:  # stopped from outside (``spark.streams``)
                self._query = None  # before all was processed: on from the checkpoint
                self._start()
                self._query.processAllAvailable()
            self._empty_inbox()
            if batch is not None:
                self.batches = batch
            if metadata is not None:
                self._metadata = metadata
            self._deliver()

    def _run(self, path: Path, batch: int, metadata: dict | None = None) -> None:
        """Commit the change file ``path`` (batch ``batch``, with ``metadata``); if Spark
        rejects it, or the journal cannot record it, the file is removed and the state
        (the metadata too) is as before."""
        before = self._metadata
        try:
            self._sync(batch, metadata)
        except StreamingQueryException as exc:
            error = query_error(exc)
            self._query = None
            path.unlink(missing_ok=True)
            (self.inbox / path.name).unlink(missing_ok=True)
            self._discard_uncommitted()
            self._sync()
            raise error from None
        except _JournalFailed as failed:
            self._metadata = before
            path.unlink(missing_ok=True)  # its micro-batch committed: replay without it
            self.batches = batch - 1
            self._catalog_changed()
            self._sync()
            raise failed.__cause__ from None

    def _discard_uncommitted(self) -> None:
        """Forget a failed micro-batch's offsets, so the restarted query plans anew (the
        batch was never committed: state and sink are as before it)."""
        checkpoint = self._checkpoint()
        committed = {p.name for p in (checkpoint / "commits").glob("[0-9]*")}
        if not committed:  # the first batch failed: start afresh (its state too)
            shutil.rmtree(checkpoint, ignore_errors=True)
            return
        for log in [checkpoint / "offsets", *(checkpoint / "sources").glob("*")]:
            for entry in log.glob("[0-9]*"):  # "12", or "9.compact" (a compacted log)
                if entry.name.split(".")[0] not in committed:
                    entry.unlink()
        for crc in checkpoint.rglob(".*.crc"):
            if not crc.with_name(crc.name[1:-4]).exists():
                crc.unlink()

    def _receive(self, batch: DataFrame, batch_id: int) -> None:
        """foreachBatch: fold a micro-batch's deltas into the driver's copy of each view."""
        if batch_id <= self._last_batch:
            return  # a replayed batch after a restart
        rows = batch.collect()
        markers = [json.loads(text) for view, text, _ in rows if view == FIXPOINT_VIEW]
        changes, _ = decode_deltas([r for r in rows if r[0] != FIXPOINT_VIEW],
                                   self._catalog.schema_of, DEAD_LETTER_VIEW)
        for name, driver in self._fixpoints.items():
            mine = [m for m in markers if m["group"] == name]
            if mine:
                delta = driver.run(self.spark, mine)
                if delta:
                    changes[driver.spec.view] = delta
        self._apply_changes(changes, batch_id)

    def _apply_changes(self, changes: dict[str, list[tuple[tuple, int]]],
                       batch_id: int | None = None) -> None:
        """Fold views' deltas into the driver's copies (subscribers are called once the
        change files are processed: :meth:`_deliver`)."""
        with self._lock:
            for view, delta in changes.items():
                contents = self._contents.setdefault(view, Counter())
                pending = (self._undelivered.setdefault(view, Counter())
                           if self._baseline is None else None)
                for row, w in delta:
                    contents[row] += w
                    if contents[row] == 0:
                        del contents[row]
                    if pending is not None:
                        pending[row] += w
            if batch_id is not None:
                self._last_batch = batch_id

    def _deliver(self) -> None:
        """The views' changes since subscribers were last called: the journal records them
        as batch :attr:`batches` (``set_journal``; if it fails the caller takes the batch
        back), then each view's subscribers get them.  After a restart the change is the
        difference between what they were sent and the replayed contents."""
        fresh: set[str] = set()  # views created since: their contents are no batch's
        with self._lock:
            if self._baseline is not None:
                before, self._baseline = self._baseline, None
                fresh = set(self._contents) - set(before)
                changed = {view: _difference(before.get(view, Counter()), now)
                           for view, now in self._contents.items()}
            else:
                changed = {view: [(r, w) for r, w in pending.items() if w]
                           for view, pending in self._undelivered.items()}
            self._undelivered = {}
        changed = {view: d for view, d in changed.items() if d}
        journaled = {view: d for view, d in changed.items() if view not in fresh}
        if self._journal is not None and (journaled or self.batches > self._journaled):
            try:
                self._journal(self.batches, journaled)
            except Exception as exc:
                with self._lock:  # the subscribers were not sent these: keep them pending
                    for view, d in changed.items():
                        self._undelivered.setdefault(view, Counter()).update(dict(d))
                raise _JournalFailed() from exc
            self._journaled = self.batches
        if changed:
            self._deliveries += 1
            deliver(self._subscribers, changed, self._deliveries)

    #: the journal is called after the batch's change file (the log) is written, once for
    #: every committed batch (also with no view changes): a journal that finds itself behind
    #: :attr:`batches` when the database is opened lost the batches in between
    journal_follows_log = True

    def set_journal(self, journal: Callable[[int, dict], Callable[[], None]] | None) -> None:
        """Install the hook called with each committed batch's view changes (``{view:
        [(row, weight), ...]}``) before the commit returns, or remove it; if the hook
        raises, the batch is taken back and its error raised to the committer (the
        service's feed)."""
        self._journal = journal
        self._journaled = self.batches

    def catalog(self) -> dict:
        """The schema without rows, as the local engine's :meth:`catalog`."""
        return self._catalog.describe()

    @property
    def local_catalog(self) -> LocalCatalog:
        """The catalog that checks and plans the views (it holds no rows)."""
        return self._catalog

    def stop(self) -> None:
        """Stop the streaming query; the next change restarts it from its checkpoint."""
        self._stop_query()

    def close(self) -> None:
        """Stop the streaming query (the SparkSession stays, it may be shared); later
        changes are refused (:class:`StorageError`)."""
        self._closed = True
        self._stop_query()
        if self._own_dir:
            shutil.rmtree(self.directory, ignore_errors=True)


def _write_whole(path: Path, text: str) -> Path:
    """Write ``path`` so that it appears whole or not at all: a hidden file (Spark's file
    source skips hidden names), fsynced, renamed into place."""
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    tmp.rename(path)
    return path


def _write_durably(path: Path, text: str) -> Path:
    """:func:`_write_whole` of a new name, then its directory fsynced, so the name stays
    (a commit's change file is the record of what it committed: a reopened database
    replays the log); if that fails the file is removed and the error raised (a file
    system that cannot fsync a directory, EINVAL, is taken as it is)."""
    _write_whole(path, text)
    try:
        sync_directory(path.parent)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP):
            path.unlink(missing_ok=True)  # not durable, so not written: the caller fails
            raise
    return path


def _link_or_copy(source: Path, target: Path) -> None:
    """``target`` a hard link to ``source`` (a copy where the file system has none)."""
    target.unlink(missing_ok=True)
    try:
        os.link(source, target)
    except OSError:
        _write_whole(target, source.read_text())


class _JournalFailed(Exception):
    """The journal could not record a committed micro-batch (its error is the cause)."""


def _difference(before: Counter, now: Counter) -> list[tuple[tuple, int]]:
    """``now - before`` as ``(row, weight)`` changes."""
    out = [(row, n - before.get(row, 0)) for row, n in now.items() if n != before.get(row, 0)]
    out += [(row, -n) for row, n in before.items() if n and row not in now]
    return out


def check_load_types(table: Table, loaded) -> None:
    """Refuse a bulk load with a column of a type that cannot hold the table's values (a
    string column for an INTEGER one) before it is written: kept, it would fail every
    later read of the table and every reopening.  ``loaded``: the DataFrame's schema."""
    from pyspark.sql import types as st

    numbers = (st.IntegralType, st.DecimalType)
    fits = {"DOUBLE": (*numbers, st.FractionalType), "DECIMAL": numbers,
            "VARCHAR": (st.StringType,), "DATE": (st.DateType,),
            "TIMESTAMP": (st.TimestampNTZType,), "BOOLEAN": (st.BooleanType,)}
    for (name, typ), field in zip(table.columns, loaded.fields, strict=True):
        given = field.dataType
        allowed = numbers if typ.is_integer else fits.get(typ.kind, ())
        fractions = typ.is_integer and isinstance(given, st.DecimalType) and given.scale
        if isinstance(given, st.NullType) or (isinstance(given, allowed) and not fractions):
            continue
        zoned = typ.kind == "TIMESTAMP" and isinstance(given, st.TimestampType)
        raise SchemaError(f"bulk load of table {table.name}: column {name} is "
                          f"{given.simpleString()}, which cannot hold {typ.sql()} values; "
                          + ("cast it to timestamp_ntz (a TIMESTAMP has no time zone)"
                             if zoned else "cast it first"))


def check_load_values(table: Table, written: DataFrame) -> None:
    """Refuse a bulk load holding a NULL in a NOT NULL column, an integer out of its
    column's range (a BIGINT value for an INTEGER column) or a decimal too wide for its
    column (kept, it would fail every later read), by one aggregation over the
    load's written Parquet copy (reading the columns back, not computing the caller's
    DataFrame a second time)."""
    from pyspark.sql import functions as fn

    checks = [fn.count(fn.lit(1)).alias("rows")]
    for i, (name, typ) in enumerate(table.columns):
        if i in table.not_null:
            checks.append(fn.count(fn.col(name)).alias(f"n{i}"))
        if (typ.is_integer and typ.kind != "HUGEINT") or typ.kind == "DECIMAL":
            # (Spark's widest decimal fits a HUGEINT)
            checks += [fn.min(name).alias(f"lo{i}"), fn.max(name).alias(f"hi{i}")]
    found = written.agg(*checks).collect()[0].asDict()
    for i, (name, typ) in enumerate(table.columns):
        if found.get(f"n{i}", found["rows"]) != found["rows"]:
            raise ConstraintError(f"bulk load of table {table.name}: NULL in NOT NULL column "
                                  f"{name} ({found['rows'] - found[f'n{i}']} rows)")
        for value in (found.get(f"lo{i}"), found.get(f"hi{i}")):
            if value is None:
                continue
            if typ.kind == "DECIMAL":
                try:
                    coerce_value(value, typ)
                except ValueError:
                    raise SchemaError(f"bulk load of table {table.name}: column {name} holds "
                                      f"{value}, which does not fit {typ.sql()}") from None
            elif not -INT_RANGES[typ.kind] <= value < INT_RANGES[typ.kind]:
                raise SchemaError(f"bulk load of table {table.name}: column {name} holds "
                                  f"{value}, out of range for {typ.sql()}")
