"""``upkeep run --engine spark``: a pipeline as one Spark Structured Streaming query.

The source directory is Spark's file-stream source (each file read whole and decoded by
upkeep's readers, so records and error positions are the local pipeline's); the views are
kept in shards (:mod:`upkeep.spark.processor`); the checkpoint in ``<state_dir>/checkpoint``
makes a stopped or killed run resume exactly where the last committed micro-batch ended.
Sinks receive each micro-batch's view deltas exactly once; the file sinks are written by the
executors (:mod:`upkeep.spark.sinks`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urlparse

from pyspark import InheritableThread
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.utils import StreamingQueryException
from rich.console import Console
from sqlglot import exp

from ..errors import ConstraintError, Error, EvaluationError, SchemaError
from ..io.apply import Applier, BadRecord
from ..io.errors import PipelineError, RecordError
from ..io.locations import is_uri
from ..io.records import ChangeRecord
from ..local import Connection
from ..pipeline.config import MEMORY, PipelineConfig
from ..pipeline.schema import ensure_schema
from ..types import SqlType
from .codec import decode_deltas
from .dml import committed_tables
from .errors import query_error, spark_job_errors
from .hadoop_files import Files, child, files_for, location_of, name_of
from .paths import glob_characters
from .processor import DEAD_LETTER_VIEW, TICK_SUFFIX, QueryPlan, file_records, record_dead_letter
from .query import RateSource, delta_stream, make_plan
from .session import spark_session
from .sinks import SPARK_SINKS, ExecutorSink, Sink, open_sink

Callback = Callable[[int, dict[str, list[tuple[tuple, int]]]], object]


class SparkPipelineRunner:
    """Runs a pipeline on Spark until its source is exhausted (or, following, stopped)."""

    def __init__(self, config: PipelineConfig, *, spark=None, console: Console | None = None,
                 stop: threading.Event | None = None, on_batch: Callback | None = None):
        self.config = config
        self.console = console or Console()
        self.stop = stop or threading.Event()
        self.on_batch = on_batch
        for sink in config.sinks:
            if sink.type not in SPARK_SINKS:
                raise PipelineError(f"{config.file}: {sink.label}: sink type {sink.type!r} is not "
                                    f"available on the spark engine ({', '.join(SPARK_SINKS)})")
        if config.spark_state == "keyed" and config.on_error != "stop" and config.spark_rates:
            raise PipelineError(f"{config.file}: a pipeline with views in keyed state and a "
                                f"rate source stops at a rejected record (a rate's rows are "
                                f"no records to leave out); on_error must be \"stop\", not "
                                f"{config.on_error!r}")
        source = config.source.path
        if not is_uri(source) and not source.is_dir():  # (a URI's: checked as the run starts)
            raise PipelineError(f"{config.file}: the spark engine reads a directory of change "
                                f"files; {source} is not a directory")
        odd = glob_characters(source if is_uri(source) else source.resolve())
        if odd:
            raise PipelineError(f"{config.file}: the source directory {config.source.path} "
                                f"holds {odd!r}, which Spark reads as a Hadoop glob pattern; "
                                f"choose a directory without them")
        #: the change files' directory and the state's, as Hadoop takes them (a URI, or a
        #: local path as a file: URI), with their file systems once a run has a session
        self._source_dir = location_of(source)
        self._source: Files
        self._state: Files
        self.catalog = Connection()
        ensure_schema(self.catalog, config)
        for sink in config.sinks:
            if sink.view not in self.catalog.views():
                raise PipelineError(f"{config.file}: {sink.label}: no view named {sink.view!r}")
        self.spark = spark
        self.batches = 0
        self.changes = 0
        self.rejected = 0

    # ------------------------------------------------------------ the run
    def run(self) -> int:
        """Process the source; returns the number of micro-batches this run delivered (a batch
        delivered as the run stops may be delivered again by the next run: same id, same
        changes)."""
        state = self.config.state_dir
        temporary = Path(tempfile.mkdtemp(prefix="upkeep-spark-")) if state == MEMORY else None
        directory = location_of(temporary or state)
        checkpoint = child(directory, "checkpoint")
        try:
            spark = self.spark or spark_session(self.config.spark_master,
                                                config=self.config.spark_conf)
            try:
                self._source = files_for(spark, self._source_dir)
                if not (self._source.exists(self._source_dir)
                        and self._source.is_dir(self._source_dir)):
                    raise PipelineError(f"{self.config.file}: the spark engine reads a "
                                        f"directory of change files; {self._source_dir} is "
                                        f"not a directory")
                self._state = files_for(spark, directory)
                self._state.mkdirs(directory)
            except OSError as exc:
                raise PipelineError(f"{self.config.file}: {exc.filename}: {exc.strerror}"
                                    ) from None
            plan = make_plan(self.catalog.local_catalog, self.config.spark_shards or int(
                spark.conf.get("spark.sql.shuffle.partitions", "4")), on_error=self.config.on_error,
                keyed=self.config.spark_state == "keyed")
            committed = _committed(self._state, checkpoint)
            _check_plan(self._state, child(directory, "upkeep-plan.txt"), plan.plan_id,
                        committed)
            if committed < 0:  # a fresh run: every shard reports its views' initial rows
                tick = child(self._source_dir, f"upkeep-start{TICK_SUFFIX}")
                if not self._source.exists(tick):
                    self._source.write_bytes(tick, b"start\n")  # not empty: Spark skips those
            order_by_name(self._source, self._source_dir)
            fill = self._rows_so_far(spark, checkpoint, plan)
            sinks = [open_sink(s, self.catalog, committed, spark, fill)
                     for s in self.config.sinks]
            rates = [RateSource(**r) for r in self.config.spark_rates]
            deadline = (time.monotonic() + self.config.spark_run_seconds
                        if self.config.spark_run_seconds else None)
            while True:
                try:
                    self._stream(spark, plan, checkpoint, sinks, rates, deadline)
                    break
                except StreamingQueryException as exc:
                    error = query_error(exc)
                    again = self._leave_out(spark, checkpoint, plan, error)
                    if again is None:
                        raise self._stop_error(spark, checkpoint, plan, error) from None
                    plan = again
            for sink in sinks:
                sink.close()
            self.console.print(f"upkeep: {self.batches} micro-batch(es), {self.changes} view "
                               f"delta row(s) delivered, {self.rejected} record(s) rejected",
                               highlight=False)
            return self.batches
        finally:
            if temporary:
                shutil.rmtree(temporary, ignore_errors=True)

    def _stream(self, spark, plan: QueryPlan, checkpoint: str, sinks: list[Sink],
                rates: list[RateSource], deadline: float | None) -> None:
        """Run the streaming query until the source is exhausted, the run is stopped or its
        time is up; a failed micro-batch raises ``StreamingQueryException``."""
        deltas = delta_stream(spark, plan, self._source_dir,
                              max_files_per_trigger=self.config.spark_files_per_batch,
                              rates=rates)
        writer = (deltas.writeStream.foreachBatch(
            lambda df, batch_id: self._deliver(df, batch_id, sinks))
            .option("checkpointLocation", checkpoint))
        if self.config.source.follow or rates:
            writer = writer.trigger(processingTime=f"{self.config.source.poll_interval} seconds")
        else:
            writer = writer.trigger(availableNow=True)
        query = writer.start()
        if not plan.excluded:
            self.console.print(f"upkeep: pipeline {self.config.name} on Spark "
                               f"({spark.sparkContext.master}), "
                               f"{sum(1 for g in plan.groups if g.views)} view group(s); "
                               f"checkpoint {checkpoint}", highlight=False)
        while query.isActive and not self.stop.is_set():
            query.awaitTermination(0.5)
            if deadline is not None and time.monotonic() > deadline:
                break
        if query.isActive:
            query.stop()
        query.awaitTermination()

    def _stop_error(self, spark, checkpoint: str, plan: QueryPlan,
                    error: BaseException) -> PipelineError:
        """What a failed micro-batch stops the run with: its error, named by the record at
        fault.  A keyed table step names a row, not a record, so under ``stop`` the batch
        is judged as under ``skip`` (:meth:`_judge`) to name the first bad record's file
        and line, as the local pipeline does."""
        where = getattr(error, "position", None)
        if where:
            return PipelineError(f"{where}: {error}")
        if self.config.on_error == "stop" and self._judged(plan, error):
            try:
                bad = self._judge(spark, checkpoint, plan,
                                  _committed(self._state, checkpoint) + 1,
                                  views=False)
            except Exception as exc:  # naming the record is a courtesy: the error stands
                self.console.print(f"could not find the record at fault: {exc}",
                                   highlight=False, markup=False)
                bad = []
            if bad:
                record, why = min(bad, key=lambda entry: entry[0].position)
                more = (f"; {len(bad) - 1} more bad record(s) in the micro-batch"
                        if len(bad) > 1 else "")
                return RecordError(record.position, why, f"{more}. Nothing of its micro-batch "
                                   f"was applied; fix or remove the record, or run with "
                                   f"--on-error skip or dead-letter")
        return PipelineError(str(error))

    def _judged(self, plan: QueryPlan, error: BaseException) -> bool:
        """Whether a failed micro-batch is judged again on the driver: a record's error
        (what the engine says of a row) in a keyed pipeline whose rows all come from
        records (a rate source's do not; one with ``skip`` or ``dead-letter`` is refused
        at start)."""
        return (plan.keyed is not None and not self.config.spark_rates
                and isinstance(error, (ConstraintError, SchemaError, EvaluationError)))

    def _leave_out(self, spark, checkpoint: str, plan: QueryPlan,
                   error: BaseException) -> QueryPlan | None:
        """The plan that runs a failed micro-batch again without its bad records, for views
        in keyed state under ``on_error`` skip or dead-letter (None: stop with ``error``).

        A keyed table step sees rows, not the records they came from, and the views' first
        steps take the same rows beside it, so a record the table step rejects cannot be
        left out inside the batch.  The batch is judged again here, as the local pipeline
        judges one (:meth:`_judge`; Spark's file-source log in the checkpoint names its
        change files).  The records found are skipped or dead-lettered, and the batch runs
        again under the same id without them (never committed, it left state and sinks as
        before).  Nothing found stops the run with ``error``, as does a failure that is
        not a record's (a lost executor, a storage error) or one the judge cannot read.
        (A keyed pipeline with a rate source, whose rows are no records, is refused
        ``skip`` and ``dead-letter`` when it starts.)"""
        if self.config.on_error == "stop" or not self._judged(plan, error):
            return None
        batch_id = _committed(self._state, checkpoint) + 1
        try:
            bad = self._judge(spark, checkpoint, plan, batch_id)
        except Exception as exc:  # a change file gone, a read that fails: the error stands
            self.console.print(f"batch {batch_id}: could not judge its records again: {exc}",
                               highlight=False, markup=False)
            return None
        if not bad:
            return None
        self._reject(batch_id, [record_dead_letter(record, why) for record, why in bad])
        return dataclasses.replace(plan, excluded=plan.excluded | {
            (record.position.file, record.position.number) for record, _ in bad})

    def _judge(self, spark, checkpoint: str, plan: QueryPlan, batch_id: int,
               views: bool = True) -> list[tuple[ChangeRecord, str]]:
        """The records of micro-batch ``batch_id`` the local engine rejects, as the local
        pipeline finds them: those that cannot be decoded, then, on a local database of the
        committed rows of the tables the batch changes and of those their views read, the
        ones its tables reject (:meth:`Applier.find_bad`, rolled back), then, committing
        the rest there, the ones its views fail on (one record at a time once the whole
        fails).  ``views=False`` (naming the record a stopping run failed on) judges by
        the tables' checks alone, over only the committed rows that could meet the batch's
        (:func:`_meeting`; most of a table whose first column has few values)."""
        records = [record for file in _batch_files(self._state, checkpoint, batch_id)
                   for record in file_records(plan, name_of(file), self._source.read_bytes(file))]
        if not records:
            return []
        db = Connection()
        ensure_schema(db, self.config)
        applier = Applier(db)
        bad: list[tuple[ChangeRecord, str]] = []
        changes = []
        for record in records:
            try:
                changes.append(applier.prepare(record))
            except BadRecord as exc:
                bad.append((record, str(exc)))
        local = db.local_catalog
        named = {change.table for change in changes}
        if views:
            wheres: dict[str, str | None] = dict.fromkeys(named)
            for view in local.affected(frozenset(named)):
                wheres.update(dict.fromkeys(local.reads(view) & set(local.tables)))
        else:
            wheres = {table: _meeting(db.schema_of(table), local.tables[table].key,
                                      [row for c in changes if c.table == table
                                       for row, _ in c.rows]) for table in named}
        if batch_id > 0:
            self._fill(db, spark, checkpoint, plan, wheres)
        found = applier.find_bad(changes)
        bad += [(change.record, str(why)) for change, why in found]
        if not views:
            return bad
        rejected = {id(change) for change, _ in found}
        good = [change for change in changes if id(change) not in rejected]
        try:
            with db.transaction():
                applier.apply(good)
        except Error:
            for change in good:
                try:
                    with db.transaction():
                        applier.apply([change])
                except Error as exc:
                    bad.append((change.record, str(exc)))
        return bad

    def _fill(self, db: Connection, spark, checkpoint: str, plan: QueryPlan,
              wheres: dict[str, str | None]) -> None:
        """Insert into ``db`` the rows of each table of ``wheres`` that meet its WHERE (None:
        all) after the last committed micro-batch, read by Spark jobs from their keyed
        state or, where views run in shards, from the shards' logs, into the driver."""
        if not wheres:
            return
        with spark_job_errors():
            found = committed_tables(spark, checkpoint, plan, wheres,
                                     {name: db.schema_of(name) for name in wheres})
        with db.transaction():
            for name, counted in found.items():
                db.insert(name, list(counted.elements()))

    def _tables_as_committed(self, spark, checkpoint: str, plan: QueryPlan) -> Connection:
        """A local database of the pipeline's schema holding every table's rows after the
        last committed micro-batch (:meth:`_fill`); its views are computed by the local
        engine."""
        db = Connection()
        ensure_schema(db, self.config)
        self._fill(db, spark, checkpoint, plan, dict.fromkeys(db.tables()))
        return db

    def _deliver(self, frame: DataFrame, batch_id: int, sinks: list[Sink]) -> None:
        """One micro-batch's deltas to the sinks: executor-written sinks write the frame
        themselves, for the views the batch changes (as the local sinks write only batches
        that change their view); only the views a driver-side sink or ``on_batch`` needs
        (and rejected records) are collected."""
        started = time.monotonic()
        written = [s for s in sinks if isinstance(s, ExecutorSink)]
        collected = None if self.on_batch is not None else {
            s.view for s in sinks if not isinstance(s, ExecutorSink)}
        if written:
            frame = frame.persist()
        try:
            wanted = frame if collected is None else frame.where(
                F.col("view").isin([*collected, DEAD_LETTER_VIEW]))
            changes, rejected = decode_deltas(wanted.collect(), self.catalog.schema_of,
                                              DEAD_LETTER_VIEW)
            counts = {v: (sum(w for _, w in c if w > 0), -sum(w for _, w in c if w < 0))
                      for v, c in changes.items()}
            if written and collected is not None:
                counts.update(_emitted_counts(frame, {s.view for s in written} - collected))
            write_concurrently([s for s in written if any(counts.get(s.view, ()))],
                               frame, batch_id)
        finally:
            if written:
                frame.unpersist()
        for sink in sinks:
            if not isinstance(sink, ExecutorSink):
                sink.deliver(batch_id, changes.get(sink.view, []))
        if self.on_batch is not None:
            self.on_batch(batch_id, changes)
        if rejected:
            self._reject(batch_id, rejected)
        self.batches += 1
        self.changes += sum(plus + minus for plus, minus in counts.values())
        self.console.print(f"batch {batch_id}: " + (", ".join(
            f"{v} +{plus} -{minus}" for v, (plus, minus) in sorted(counts.items())
            if plus or minus) or "no view changes")
            + f" ({time.monotonic() - started:.2f} s to deliver)", highlight=False)

    def _reject(self, batch_id: int, lines: list[str]) -> None:
        """Skipped or dead-lettered records of a micro-batch (at least once, like the local
        pipeline's dead-letter file: ``_source`` identifies a record written twice)."""
        self.rejected += len(lines)
        if self.config.on_error == "dead-letter":
            path = self.config.dead_letter or Path("dead-letter.jsonl")
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as f:
                f.write("".join(line + "\n" for line in sorted(lines)))
                f.flush()
                os.fsync(f.fileno())
        verb = "dead-lettered" if self.config.on_error == "dead-letter" else "skipped"
        for line in sorted(lines)[:5]:
            entry = json.loads(line)
            self.console.print(f"batch {batch_id}: {verb} {entry['_source']}: {entry['_error']}",
                               highlight=False, markup=False)

    def _rows_so_far(self, spark, checkpoint: str, plan) -> Callable[[str], list[tuple]]:
        """``view -> its rows`` after the last committed micro-batch, for a sink new to a
        run that has committed some (read on first use: :meth:`_tables_as_committed`)."""
        database = functools.cache(lambda: self._tables_as_committed(spark, checkpoint, plan))
        return lambda view: database().view(view).rows()


def order_by_name(files: Files, directory: str) -> None:
    """Give the change files modification times in name order (2 ms apart at least).

    Spark's file source takes new files oldest first; the local pipeline reads them in name
    order.  Files written in quick succession can share a modification time (or come out of
    order), so the runner makes the two orders agree before the query starts (a store
    that keeps no times of its own, as S3, cannot: there, write the files in name order,
    apart).
    """
    previous = 0
    for name, modified in sorted(files.file_times(directory)):
        if name.startswith((".", "_")):
            continue
        if modified < previous + 2:
            modified = previous + 2
            files.set_modified(child(directory, name), modified)
        previous = modified


def _check_plan(files: Files, path: str, plan_id: str, committed: int) -> None:
    """A checkpoint only fits the catalog, the state (``spark.state``) and, with views in
    shards, the shard count it was made with: refuse another (its state would be routed
    differently) instead of giving wrong results."""
    if committed >= 0 and files.exists(path) and files.read_text(path).strip() != plan_id:
        raise PipelineError(f"the pipeline's tables, views, spark.state or shard count "
                            f"changed since its checkpoint in {path.rpartition('/')[0]} was "
                            f"made; use a fresh state_dir, or the settings it was made with")
    files.write_bytes(path, (plan_id + "\n").encode())


def _meeting(columns: list[tuple[str, SqlType]], key: tuple[int, ...] | None,
             rows: list[tuple]) -> str | None:
    """A WHERE for a table's rows that could meet ``rows`` in its checks: those holding one
    of their values of the first PRIMARY KEY column (else the first column), which every
    row equal to one of them, or sharing its key, does; None (every row) where a value
    has no SQL literal (a DOUBLE's NaN or infinity)."""
    column = key[0] if key else 0
    values = {row[column] for row in rows}
    if any(isinstance(v, float) and not math.isfinite(v) for v in values):
        return None
    name = exp.column(columns[column][0], quoted=True)
    meets = [exp.In(this=name.copy(), expressions=[exp.convert(v) for v in values
                                                   if v is not None])] if values - {None} else []
    if None in values:
        meets.append(exp.Is(this=name.copy(), expression=exp.Null()))
    return exp.or_(*meets).sql("duckdb")


def _batch_files(files: Files, checkpoint: str, batch_id: int) -> list[str]:
    """The change files Spark's file source gave micro-batch ``batch_id``, in name order:
    the batch's offsets (``offsets/<id>``) give the source's log entry, and its log in the
    checkpoint (``sources/<n>/<entry>``, or ``<entry>.compact`` where the log was
    compacted, which lists every entry's files until then) the files, as their locations
    (the log's URIs, percent-decoded, as Hadoop takes a path)."""
    entry = batch_id
    offsets = child(child(checkpoint, "offsets"), str(batch_id))
    if files.exists(offsets):
        for line in files.read_text(offsets).splitlines()[2:]:  # after v1, metadata
            offset = json.loads(line) if line.startswith("{") else None
            if isinstance(offset, dict) and isinstance(offset.get("logOffset"), int):
                entry = offset["logOffset"]
                break
    found = []
    sources = child(checkpoint, "sources")
    for log in files.names(sources) if files.exists(sources) else []:
        for name in (str(entry), f"{entry}.compact"):
            at = child(child(sources, log), name)
            if not files.exists(at):
                continue
            for line in files.read_text(at).splitlines()[1:]:  # after v1
                item = json.loads(line)
                if item.get("batchId") == entry and "path" in item:
                    uri = urlparse(item["path"])
                    found.append(f"{uri.scheme}://{uri.netloc}{unquote(uri.path)}")
    return sorted(found, key=name_of)


def _committed(files: Files, checkpoint: str) -> int:
    """The last micro-batch id the checkpoint committed (-1 if none)."""
    commits = child(checkpoint, "commits")
    if not files.exists(commits):
        return -1
    return max((int(name) for name in files.names(commits) if name.isdigit()), default=-1)


def write_concurrently(sinks: list[ExecutorSink], frame: DataFrame, batch_id: int) -> None:
    """Each sink writes its part of the micro-batch as a Spark job of its own, all at once
    from threads of the driver (Spark schedules concurrent jobs of one application): a
    write's job planning and output commit on the driver overlap the others' tasks, where
    one after another they made most of a small batch's time.  Every sink writes under a
    hidden name and renames (``write_batch``), so a batch retried after one sink failed
    rewrites them all, as before; the first failure is raised once all have ended."""
    if len(sinks) <= 1:
        for sink in sinks:
            sink.write(frame, batch_id)
        return
    failures: list[BaseException] = []

    def write(sink: ExecutorSink) -> None:
        try:
            sink.write(frame, batch_id)
        except BaseException as exc:  # raised in the caller's thread below
            failures.append(exc)

    threads = [InheritableThread(target=write, args=(sink,), name=f"sink {sink.view}")
               for sink in sinks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]


def _emitted_counts(frame: DataFrame, views: set[str]) -> dict[str, tuple[int, int]]:
    """Rows added and removed per view, net of a row removed and added back in the same
    micro-batch (as the driver's decoded changes are), counted by Spark: for the views the
    driver does not collect, whether their sinks write this batch, and the progress line."""
    if not views:
        return {}
    weight = F.col("weight")
    rows = (frame.where(F.col("view").isin(list(views))).groupBy("view", "row")
            .agg(F.sum("weight").alias("weight")).groupBy("view")
            .agg(F.sum(F.when(weight > 0, weight).otherwise(0)).alias("plus"),
                 F.sum(F.when(weight < 0, -weight).otherwise(0)).alias("minus")).collect())
    return {r["view"]: (int(r["plus"]), int(r["minus"])) for r in rows}
