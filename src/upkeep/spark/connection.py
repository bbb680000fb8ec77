"""``upkeep.connect(engine="spark")``: the embedded API, with the views maintained on Spark.

Tables and views are declared as on the local engine (the catalog is checked by the local
engine, so the same SQL is accepted and rejected with the same errors).  Each committed batch
is written as one JSONL change file into ``<directory>/changes`` and processed as one
micro-batch of a streaming query checkpointed in ``<directory>/checkpoint``; the view deltas
come back to the driver, which keeps each view's current rows for :meth:`SparkViewHandle.rows`
and calls subscribers.  A batch the engine rejects raises the local engine's error and leaves
every view as it was: the micro-batch is never committed, its file and its uncommitted
offsets are removed, and the query resumes from the checkpoint.

Rows of tables declared ``WITH (ttl_seconds = N)`` expire as on the local engine
(``expiry.py``): the driver keeps their timers and commits the due rows as a delete batch
before every change and read.  Each change file is named with its commit time, so a
connection opened on an existing directory gets the timers back from the files.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.utils import StreamingQueryException
from sqlglot import exp

from ..connection import Connection, _parse
from ..errors import Error, UnsupportedError
from ..expiry import Expiry
from ..pipeline.sinks.values import json_value
from ..types import SqlType, coerce_row
from ..zset import net_by_table
from .codec import decode_deltas
from .fixpoint import FIXPOINT_VIEW, FixpointDriver
from .processor import DEAD_LETTER_VIEW, TICK_SUFFIX, QueryPlan
from .query import delta_stream, make_plan, query_error
from .session import spark_session

Delta = list[tuple[tuple, int]]
CHANGE_FILE = re.compile(r"changes-\d+-t(?P<at>.+)\.jsonl")  # the commit time after -t


class _RolledBack(Exception):
    pass


class SparkViewHandle:
    """``db.view(name)`` on the Spark engine: rows, counts and subscriptions."""

    def __init__(self, db: SparkConnection, name: str):
        self._db = db
        self.name = name

    def rows(self) -> list[tuple]:
        self._db.expire()
        self._db._sync()
        return list(self._db._contents[self.name].elements())

    def count(self, row: tuple) -> int:
        self._db.expire()
        self._db._sync()
        return self._db._contents[self.name][tuple(row)]

    def __contains__(self, row: tuple) -> bool:
        return self.count(row) > 0

    def subscribe(self, fn: Callable[[Delta], object]) -> Callable[[], None]:
        """Call ``fn(changes)`` after every micro-batch that changes the view."""
        subs = self._db._subscribers.setdefault(self.name, [])
        subs.append(fn)
        return lambda: subs.remove(fn) if fn in subs else None

    def columns(self) -> list[str]:
        return [n for n, _ in self._db._catalog.schema_of(self.name)]

    def explain(self) -> str:
        return self._db.explain(self.name)

    def counters(self) -> dict[str, int]:
        """A partitioned recursive view's work: the fixpoint counters summed over its
        partitions (last batch), and tuples / bytes shipped between partitions and
        supersteps (all batches)."""
        self._db._sync()
        driver = next((d for d in self._db._fixpoints.values() if d.spec.view == self.name),
                      None)
        if driver is None:
            raise UnsupportedError(f"view {self.name} does not run as a partitioned fixpoint")
        return driver.report()


class SparkConnection:
    """The views of one catalog, maintained by a Spark streaming query."""

    def __init__(self, spark: SparkSession | None = None, master: str | None = None,
                 directory: str | os.PathLike | None = None, shards: int | None = None,
                 clock: Callable[[], float] | None = None, bdd_ordering: str = "sifting"):
        self.spark = spark or spark_session(master or "local[2]")
        self._own_dir = directory is None
        self.directory = Path(directory or tempfile.mkdtemp(prefix="upkeep-spark-"))
        self.changes = self.directory / "changes"
        self.changes.mkdir(parents=True, exist_ok=True)
        self.shards = shards or int(self.spark.conf.get("spark.sql.shuffle.partitions", "4"))
        self._catalog = Connection(bdd_ordering=bdd_ordering)  # schema only: no rows stored
        self._snapshots: dict[str, DataFrame] = {}
        self._pending: list[tuple[str, tuple, int]] | None = None
        self._contents: dict[str, Counter] = {}
        self._subscribers: dict[str, list[Callable]] = {}
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
        self._sequence = itertools.count(len(list(self.changes.iterdir())) + 1)
        self._lock = threading.Lock()

    # ------------------------------------------------------------ catalog
    def execute(self, sql: str) -> None:
        """CREATE TABLE / CREATE VIEW / DROP / INSERT ... VALUES statements."""
        for stmt in _parse(sql):
            if isinstance(stmt, exp.Insert):
                self._insert_statement(stmt)
            elif isinstance(stmt, (exp.Create, exp.Drop)):
                self._catalog.execute_parsed(stmt)
                self._catalog_changed()
                self._keep_timers()
            else:
                raise UnsupportedError(
                    f"{type(stmt).__name__.upper()} on the spark engine: the driver does not hold "
                    f"table contents; use db.insert(table, rows) and db.delete(table, rows)")

    def create_view(self, name: str, sql: str, strategy: str | None = None) -> SparkViewHandle:
        self._catalog.create_view(name, sql, strategy)
        self._catalog_changed()
        return SparkViewHandle(self, name.lower())

    def view(self, name: str) -> SparkViewHandle:
        name = name.lower()
        if name not in self._catalog.views():
            raise Error(f"unknown view {name}")
        return SparkViewHandle(self, name)

    def tables(self) -> list[str]:
        return self._catalog.tables()

    def views(self) -> list[str]:
        return self._catalog.views()

    def schema_of(self, name: str) -> list[tuple[str, SqlType]]:
        return self._catalog.schema_of(name)

    def explain(self, name: str) -> str:
        """The local engine's plan of the view, and how it is partitioned across shards."""
        plan = self._plan_now()
        group = next(g for g in plan.groups if name.lower() in g.views)
        return f"{self._catalog.explain(name)}\nspark: {group.describe()}"

    def load(self, table: str, data: DataFrame | str) -> None:
        """Bulk-load a table's initial contents (a Spark DataFrame, or a Parquet path) before
        the first change: the shards' state is built from it by Spark, not row by row."""
        if self._query is not None or self._generation:
            raise UnsupportedError("bulk loads must come before the first change")
        table = table.lower()
        self._catalog.schema_of(table)
        if table in self._expiry:
            raise UnsupportedError(f"bulk load of table {table}, whose rows expire: rows "
                                   f"loaded in bulk have no commit time; insert them instead")
        if isinstance(data, (str, os.PathLike)):
            data = self.spark.read.parquet(str(data))
        names = [n for n, _ in self._catalog.schema_of(table)]
        self._snapshots[table] = data.select(*names)

    def _catalog_changed(self) -> None:
        """A new catalog needs a new plan: the query restarts and replays every change file
        (a view created late starts from all the data, like on the local engine)."""
        if self._query is not None:
            self._stop_query()
            self._generation += 1
        self._plan = None
        self._contents = {v: Counter() for v in self._catalog.views()}

    def _plan_now(self) -> QueryPlan:
        if self._plan is None:
            self._plan = plan = make_plan(self._catalog, self.shards, fixpoints=True)
            self._fixpoints = {g.name: FixpointDriver(plan.plan_id, plan.catalog, g.name,
                                                      g.fixpoint)
                               for g in plan.groups if g.fixpoint is not None}
        return self._plan

    # ------------------------------------------------------------ changes
    def insert(self, table: str, rows: Iterable) -> int:
        return self._change(table, rows, 1)

    def delete(self, table: str, rows: Iterable) -> int:
        return self._change(table, rows, -1)

    def _change(self, table: str, rows: Iterable, weight: int) -> int:
        table = table.lower()
        schema = self._catalog.schema_of(table)
        if table not in self._catalog.tables():
            raise Error(f"{table} is a view, not a table")
        staged = [(table, coerce_row(r, schema, table, i), weight) for i, r in enumerate(rows)]
        if self._pending is not None:
            self._pending.extend(staged)
        elif staged:  # nothing to change: no change file, no micro-batch
            self._commit(staged)
        return len(staged)

    def _insert_statement(self, stmt: exp.Insert) -> None:
        if not isinstance(stmt.expression, exp.Values):
            raise UnsupportedError("INSERT ... SELECT on the spark engine (the driver does not "
                                   "hold table contents); use INSERT ... VALUES")
        staged: dict = {}
        try:  # the local engine parses and checks the rows; the catalog keeps none of them
            with self._catalog.transaction():
                self._catalog.execute_parsed(stmt)
                staged = self._catalog.staged()
                raise _RolledBack
        except _RolledBack:
            pass
        for table, delta in staged.items():
            self._change(table, [r for r, w in delta.items() for _ in range(w)], 1)

    @contextmanager
    def transaction(self):
        """Changes inside commit as one micro-batch; an exception discards them."""
        if self._pending is not None:
            raise Error("transactions do not nest")
        self._pending = []
        try:
            yield self
        except BaseException:
            self._pending = None
            raise
        staged, self._pending = self._pending, None
        if staged:
            self._commit(staged)

    def _commit(self, staged: list[tuple[str, tuple, int]]) -> None:
        self.expire()
        now = self._clock()
        self._commit_at(staged, now)
        for table, delta in net_by_table(staged).items():
            if table in self._expiry:
                self._expiry[table].committed(delta, now)

    def _commit_at(self, staged: list[tuple[str, tuple, int]], now: float) -> None:
        lines = [json.dumps({"table": table, "op": "insert" if weight > 0 else "delete",
                             "row": [json_value(v) for v in row]}) + "\n"
                 for table, row, weight in staged]
        path = self._write(f"changes-{next(self._sequence):08d}-t{now!r}.jsonl", "".join(lines))
        self._run(path)

    # ------------------------------------------------------------ expiry
    def expire(self) -> int:
        """Delete the rows whose time-to-live has passed, as one batch with all their
        consequences; returns how many rows expired.  Runs on its own before every change
        and read (as on the local engine)."""
        if self._pending is not None:
            return 0
        now = self._clock()
        staged: list[tuple[str, tuple, int]] = []
        consumed: dict[str, int] = {}
        for name, expiry in self._expiry.items():
            due = expiry.next_due()
            if due is None or due > now:
                continue
            delta, consumed[name] = expiry.due(now)
            staged += [(name, row, -1) for row, w in delta.items() for _ in range(-w)]
        if staged:
            self._commit_at(staged, now)
        for name, n in consumed.items():
            self._expiry[name].expired(n)
        return len(staged)

    def _keep_timers(self) -> None:
        """One :class:`Expiry` per table declared with ``ttl_seconds``; a table declared
        over an existing directory gets its timers back from the change files."""
        declared = {t: self._catalog.ttl_of(t) for t in self._catalog.tables()}
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
        for path in sorted(self.changes.glob("changes-*.jsonl")):
            named = CHANGE_FILE.fullmatch(path.name)
            if named is None:
                continue
            staged = []
            for line in path.read_text().splitlines():
                record = json.loads(line)
                if record["table"] == table:
                    row = coerce_row(record["row"], schema, table, len(staged))
                    staged.append((table, row, 1 if record["op"] == "insert" else -1))
            if staged:
                expiry.committed(net_by_table(staged)[table], float(named["at"]))
        return expiry

    def _write(self, name: str, text: str) -> Path:
        tmp = self.changes / f".{name}.tmp"
        tmp.write_text(text)
        path = self.changes / name
        tmp.rename(path)
        return path

    # ------------------------------------------------------------ the query
    def _checkpoint(self) -> Path:
        return self.directory / f"checkpoint-{self._generation}"

    def _start(self) -> None:
        plan = self._plan_now()
        if not (self._checkpoint() / "commits").exists():
            # a fresh query: every shard reports its views' initial contents in batch 0
            # (not empty: Spark's file source skips empty files)
            self._write(f"changes-{self._generation:08d}{TICK_SUFFIX}", "start\n")
        deltas = delta_stream(self.spark, plan, str(self.changes), self._snapshots)
        self._last_batch = -1
        self._query = (deltas.writeStream.foreachBatch(self._receive)
                       .option("checkpointLocation", str(self._checkpoint()))
                       .queryName(f"upkeep_{plan.plan_id}_{self._generation}")
                       .start())

    def _stop_query(self) -> None:
        if self._query is not None:
            try:
                self._query.stop()
            finally:
                self._query = None

    def _sync(self) -> None:
        if self._query is None:
            self._start()
        self._query.processAllAvailable()

    def _run(self, path: Path) -> None:
        try:
            self._sync()
        except StreamingQueryException as exc:
            error = query_error(exc)
            self._query = None
            path.unlink(missing_ok=True)
            self._discard_uncommitted()
            self._sync()
            raise error from None

    def _discard_uncommitted(self) -> None:
        """Forget a failed micro-batch's offsets, so the restarted query plans anew (the
        batch was never committed: state and sink are as before it)."""
        checkpoint = self._checkpoint()
        committed = {p.name for p in (checkpoint / "commits").glob("[0-9]*")}
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
        with self._lock:
            for view, delta in changes.items():
                contents = self._contents.setdefault(view, Counter())
                for row, w in delta:
                    contents[row] += w
                    if contents[row] == 0:
                        del contents[row]
            self._last_batch = batch_id
        for view, delta in changes.items():
            for fn in list(self._subscribers.get(view, [])):
                fn(delta)

    def stop(self) -> None:
        """Stop the streaming query; the next change restarts it from its checkpoint."""
        self._stop_query()

    def close(self) -> None:
        """Stop the streaming query (the SparkSession stays, it may be shared)."""
        self._stop_query()
        if self._own_dir:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> SparkConnection:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
