"""``upkeep run --engine spark``: a pipeline as one Spark Structured Streaming query.

The source directory is Spark's file-stream source (each file read whole and decoded by
upkeep's readers, so records and error positions are the local pipeline's); the views are
kept in shards (:mod:`upkeep.spark.processor`); the checkpoint in ``<state_dir>/checkpoint``
makes a stopped or killed run resume exactly where the last committed micro-batch ended.
Sinks receive each micro-batch's view deltas exactly once:

* ``parquet``: as on the local engine, a snapshot of the view's rows rewritten atomically
  after batches that change it; the file records the last micro-batch it includes, so a
  replayed batch is not applied twice and a resumed run continues from the file;
* ``jsonl``: the local sink's lines ``{"batch", "weight", "row"}``; lines of batches the
  checkpoint has not committed are cut at start, so a replayed batch is not written twice;
* ``parquet-deltas``: each micro-batch's net delta of the view, written by the executors as a
  DataFrame (``<path>/batch=<id>/``, the local sink's layout); a batch Spark replays
  overwrites its own directory, and directories of batches the checkpoint has not committed
  are removed at start.  The view's rows never pass through the driver;
* ``terminal``: each batch's deltas printed (at least once; display only).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.utils import StreamingQueryException
from rich.console import Console

from ..codecs.arrow_values import from_arrow, to_arrow
from ..errors import SchemaError
from ..io.errors import PipelineError
from ..io.sinks.base import SinkConfig
from ..io.sinks.jsonl import delta_lines
from ..io.sinks.parquet_deltas import check_columns
from ..local import Connection
from ..pipeline.config import MEMORY, PipelineConfig
from ..pipeline.schema import ensure_schema
from ..types import SqlType
from .codec import decode_deltas
from .errors import query_error
from .processor import DEAD_LETTER_VIEW, TICK_SUFFIX
from .query import RateSource, delta_stream, make_plan, typed_deltas
from .session import spark_session

SPARK_SINKS = ("parquet", "parquet-deltas", "jsonl", "terminal")
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
        if config.spark_state == "keyed" and config.on_error != "stop":
            raise PipelineError(f"{config.file}: views in keyed state ([spark] state = "
                                f"\"keyed\") stop at a rejected record; on_error must be "
                                f"\"stop\", not {config.on_error!r}")
        if not config.source.path.is_dir():
            raise PipelineError(f"{config.file}: the spark engine reads a directory of change "
                                f"files; {config.source.path} is not a directory")
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
        temporary = state == MEMORY
        directory = Path(tempfile.mkdtemp(prefix="upkeep-spark-")) if temporary else Path(state)
        checkpoint = directory / "checkpoint"
        try:
            directory.mkdir(parents=True, exist_ok=True)
            spark = self.spark or spark_session(self.config.spark_master,
                                                config=self.config.spark_conf)
            plan = make_plan(self.catalog.local_catalog, self.config.spark_shards or int(
                spark.conf.get("spark.sql.shuffle.partitions", "4")), on_error=self.config.on_error,
                keyed=self.config.spark_state == "keyed")
            committed = _committed(checkpoint)
            _check_plan(directory / "upkeep-plan.txt", plan.plan_id, committed)
            if committed < 0:  # a fresh run: every shard reports its views' initial rows
                tick = self.config.source.path / f"upkeep-start{TICK_SUFFIX}"
                if not tick.exists():
                    tick.write_text("start\n")  # not empty: Spark skips empty files
            order_by_name(self.config.source.path)
            sinks = [_open_sink(s, self.catalog, committed) for s in self.config.sinks]
            rates = [RateSource(**r) for r in self.config.spark_rates]
            deltas = delta_stream(spark, plan, str(self.config.source.path),
                                  max_files_per_trigger=self.config.spark_files_per_batch,
                                  rates=rates)
            writer = (deltas.writeStream.foreachBatch(
                lambda df, batch_id: self._deliver(df, batch_id, sinks))
                .option("checkpointLocation", str(checkpoint)))
            if self.config.source.follow or rates:
                writer = writer.trigger(processingTime=f"{self.config.source.poll_interval} seconds")
            else:
                writer = writer.trigger(availableNow=True)
            query = writer.start()
            self.console.print(f"upkeep: pipeline {self.config.name} on Spark "
                               f"({spark.sparkContext.master}), {len(plan.groups)} view "
                               f"group(s); checkpoint {checkpoint}", highlight=False)
            deadline = (time.monotonic() + self.config.spark_run_seconds
                        if self.config.spark_run_seconds else None)
            try:
                while query.isActive and not self.stop.is_set():
                    query.awaitTermination(0.5)
                    if deadline is not None and time.monotonic() > deadline:
                        break
                if query.isActive:
                    query.stop()
                query.awaitTermination()
            except StreamingQueryException as exc:
                error = query_error(exc)
                where = getattr(error, "position", None)
                raise PipelineError(f"{where}: {error}" if where else str(error)) from None
            for sink in sinks:
                sink.close()
            self.console.print(f"upkeep: {self.batches} micro-batch(es), {self.changes} view "
                               f"delta row(s) delivered, {self.rejected} record(s) rejected",
                               highlight=False)
            return self.batches
        finally:
            if temporary:
                shutil.rmtree(directory, ignore_errors=True)

    def _deliver(self, frame: DataFrame, batch_id: int, sinks: list[_Sink]) -> None:
        """One micro-batch's deltas to the sinks: executor-written sinks write the frame
        themselves; only the views a driver-side sink or ``on_batch`` needs (and rejected
        records) are collected."""
        started = time.monotonic()
        written = [s for s in sinks if isinstance(s, _ExecutorSink)]
        collected = None if self.on_batch is not None else {
            s.view for s in sinks if not isinstance(s, _ExecutorSink)}
        if written:
            frame = frame.persist()
        try:
            for sink in written:
                sink.write(frame, batch_id)
            wanted = frame if collected is None else frame.where(
                F.col("view").isin([*collected, DEAD_LETTER_VIEW]))
            changes, rejected = decode_deltas(wanted.collect(), self.catalog.schema_of,
                                              DEAD_LETTER_VIEW)
            counts = {v: (sum(w for _, w in c if w > 0), -sum(w for _, w in c if w < 0))
                      for v, c in changes.items()}
            if written and collected is not None:
                counts.update(_emitted_counts(frame, {s.view for s in written} - collected))
        finally:
            if written:
                frame.unpersist()
        for sink in sinks:
            if not isinstance(sink, _ExecutorSink):
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


def order_by_name(directory: Path) -> None:
    """Give the change files modification times in name order (2 ms apart at least).

    Spark's file source takes new files oldest first; the local pipeline reads them in name
    order.  Files written in quick succession can share a modification time (or come out of
    order), so the runner makes the two orders agree before the query starts.
    """
    previous = 0.0
    for path in sorted(p for p in directory.iterdir()
                       if p.is_file() and not p.name.startswith((".", "_"))):
        mtime = max(path.stat().st_mtime, previous + 0.002)
        os.utime(path, (mtime, mtime))
        previous = mtime


def _check_plan(path: Path, plan_id: str, committed: int) -> None:
    """A checkpoint only fits the catalog and shard count it was made with: refuse another
    (its state would be routed differently) instead of giving wrong results."""
    if committed >= 0 and path.exists() and path.read_text().strip() != plan_id:
        raise PipelineError(f"the pipeline's tables, views or shard count changed since its "
                            f"checkpoint in {path.parent} was made; use a fresh state_dir")
    path.write_text(plan_id + "\n")


def _committed(checkpoint: Path) -> int:
    """The last micro-batch id the checkpoint committed (-1 if none)."""
    ids = [int(p.name) for p in (checkpoint / "commits").glob("[0-9]*") if p.name.isdigit()]
    return max(ids, default=-1)


# ---------------------------------------------------------------- sinks
class _Sink:
    def __init__(self, config: SinkConfig, columns: list[tuple[str, SqlType]]):
        self.config = config
        self.view = config.view
        self.columns = columns

    def deliver(self, batch: int, changes: list[tuple[tuple, int]]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class _ParquetSnapshot(_Sink):
    """The local ``parquet`` sink's meaning: a snapshot of the view's rows, written to a
    temporary file and renamed over the old one after every ``every`` batches that change
    the view.  The file's metadata names the last micro-batch it includes, so a batch Spark
    replays after a restart is not applied twice, and a resumed run starts from the file."""

    def __init__(self, config: SinkConfig, columns):
        super().__init__(config, columns)
        self.path: Path = config.options["path"]
        self.every = int(config.options.get("every") or 1)
        self.rows: Counter[tuple] = Counter()
        self.included = -1
        self._since = 0
        if self.path.exists():
            # The file may include a batch the checkpoint has not committed (written, then
            # killed before Spark's commit): Spark replays that batch from the same offsets
            # and state, with the same deltas, which deliver() then skips.
            table = pq.read_table(self.path)
            self.included = int((table.schema.metadata or {}).get(b"upkeep.batch", b"-1"))
            self.rows.update(from_arrow(table, columns))
        else:
            self._write()

    def deliver(self, batch, changes) -> None:
        if batch <= self.included:
            return  # a replayed batch the file already includes
        for row, weight in changes:
            self.rows[row] += weight
        self.rows = +self.rows
        self.included = batch
        self._since += 1
        if changes and self._since >= self.every:
            self._write()

    def _write(self) -> None:
        try:
            table = to_arrow(self.columns, list(self.rows.elements()))
        except SchemaError as exc:
            raise PipelineError(f"parquet sink {self.path} (view {self.view}): {exc}") from None
        table = table.replace_schema_metadata({"upkeep.batch": str(self.included)})
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, tmp)
        os.replace(tmp, self.path)
        self._since = 0

    def close(self) -> None:
        if self._since:
            self._write()


class _JsonlDeltas(_Sink):
    def __init__(self, config: SinkConfig, columns, committed: int):
        super().__init__(config, columns)
        self.path: Path = config.options["path"]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():  # cut lines of batches the checkpoint never committed
            kept = [line for line in self.path.read_text().splitlines(keepends=True)
                    if line.endswith("\n") and json.loads(line)["batch"] <= committed]
            self.path.write_text("".join(kept))
        self.file = self.path.open("a", encoding="utf-8")

    def deliver(self, batch, changes) -> None:
        self.file.write("".join(delta_lines([n for n, _ in self.columns], changes, batch)))
        self.file.flush()
        os.fsync(self.file.fileno())

    def close(self) -> None:
        self.file.close()


class _Terminal(_Sink):
    def __init__(self, config: SinkConfig, columns, console: Console):
        super().__init__(config, columns)
        self.console = console

    def deliver(self, batch, changes) -> None:
        limit = self.config.options.get("limit") or 10
        for row, weight in changes[:limit]:
            self.console.print(f"  {self.view} {'+' if weight > 0 else '-'}{abs(weight)} {row}",
                               highlight=False, markup=False)
        if len(changes) > limit:
            self.console.print(f"  {self.view}: {len(changes) - limit} more", highlight=False)


class _ExecutorSink(_Sink):
    """A sink whose micro-batches Spark's executors write (the driver never holds them)."""

    def write(self, frame: DataFrame, batch: int) -> None:
        raise NotImplementedError


class _ParquetDeltas(_ExecutorSink):
    """The local ``parquet-deltas`` sink's layout, written by the executors: the view's net
    delta of each micro-batch in ``<path>/batch=<id>/``, overwritten if Spark replays it."""

    def __init__(self, config: SinkConfig, catalog: Connection, committed: int):
        super().__init__(config, catalog.schema_of(config.view))
        check_columns(self.columns, config.label)
        self.catalog = catalog
        self.path: Path = config.options["path"]
        self.path.mkdir(parents=True, exist_ok=True)
        for stale in self.path.glob("batch=*"):  # written, but never committed
            if not stale.name[6:].isdigit() or int(stale.name[6:]) > committed:
                shutil.rmtree(stale)

    def write(self, frame: DataFrame, batch: int) -> None:
        typed = typed_deltas(frame, self.catalog, self.view)
        keys = [F.col("`" + name.replace("`", "``") + "`") for name, _ in self.columns]
        net = (typed.groupBy(*keys).agg(F.sum("weight").alias("weight"))
               .where(F.col("weight") != 0))
        net.write.mode("overwrite").parquet(str(self.path / f"batch={batch}"))


def _emitted_counts(frame: DataFrame, views: set[str]) -> dict[str, tuple[int, int]]:
    """Rows added and removed per view as the steps emitted them (before consolidation),
    counted by Spark: for the progress line of views the driver does not collect."""
    if not views:
        return {}
    weight = F.col("weight")
    rows = (frame.where(F.col("view").isin(list(views))).groupBy("view")
            .agg(F.sum(F.when(weight > 0, weight).otherwise(0)).alias("plus"),
                 F.sum(F.when(weight < 0, -weight).otherwise(0)).alias("minus")).collect())
    return {r["view"]: (int(r["plus"]), int(r["minus"])) for r in rows}


def _open_sink(config: SinkConfig, catalog: Connection, committed: int) -> _Sink:
    if config.type == "parquet-deltas":
        return _ParquetDeltas(config, catalog, committed)
    columns = catalog.schema_of(config.view)
    if config.type == "parquet":
        return _ParquetSnapshot(config, columns)
    if config.type == "jsonl":
        return _JsonlDeltas(config, columns, committed)
    return _Terminal(config, columns, Console())
