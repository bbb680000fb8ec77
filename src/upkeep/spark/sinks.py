"""The Spark pipeline's sinks: each micro-batch's view deltas, exactly once per batch id.

The file sinks are written by Spark's executors through the DataFrame writer, so a view's
rows never pass through the driver.  Each keeps the meaning the sink has on one machine
(docs/pipelines.md) in the layout Spark writes, directories of part files, and is written
only for the micro-batches that change its view (the runner counts them):

* ``parquet-deltas``: ``<path>/batch=<id>/``, the micro-batch's net delta of the view (the
  view's columns plus ``weight``), the local sink's layout;
* ``jsonl``: ``<path>/batch=<id>/part-*.txt``, the local sink's lines
  ``{"batch", "weight", "row"}``, one per row occurrence, encoded by upkeep's own value codec
  on the executors.  A batch's delta is net, so each row appears in a batch with one sign
  and the order of lines within a batch does not matter;
* ``parquet``: ``<path>`` is a symbolic link to the latest snapshot of the view's rows
  (``<path>.snapshots/batch=<id>/``, duplicates repeated), swapped atomically after every
  ``every`` micro-batches that change the view: the previous snapshot plus the net deltas
  since, summed by Spark.
  The link's target names the last micro-batch the snapshot includes, so a batch Spark
  replays after a restart is skipped.

A micro-batch's directory is written under a hidden name and renamed into place, so a
reader never sees half of one; a micro-batch Spark replays replaces its own directory, and
at start directories of batches the checkpoint never committed are removed: each batch is
there exactly once.  A run with a fresh checkpoint starts every sink afresh, as the local
sinks overwrite their files; a sink new to a run that has committed micro-batches starts
from its view's rows, read from the tables' keyed state or the shards' logs
(:func:`starts_late`).
``terminal`` prints deltas from the driver (at least once; display only).
"""

from __future__ import annotations

import os
import re
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from rich.console import Console

from ..codecs.arrow_values import to_arrow
from ..codecs.spark_rows import decode_row
from ..io.errors import PipelineError
from ..io.locations import is_uri
from ..io.sinks.base import SinkConfig
from ..io.sinks.jsonl import delta_lines
from ..io.sinks.parquet_deltas import check_columns
from ..local import Connection
from ..types import SqlType
from .hadoop_files import Files, child, files_for, local_uri, location_of
from .paths import read_parquet_literally
from .query import typed_deltas

SPARK_SINKS = ("parquet", "parquet-deltas", "jsonl", "terminal")
Changes = list[tuple[tuple, int]]
# internal column names, apart from any view column's: a row as the delta stream encodes it,
# its weight, and a snapshot row's multiplicity
ENCODED, WEIGHT, COUNT = "__upkeep_row", "__upkeep_weight", "__upkeep_count"


class Sink:
    """A view's sink in a Spark pipeline; the driver-side ones get decoded changes."""

    def __init__(self, config: SinkConfig, columns: list[tuple[str, SqlType]]):
        self.config = config
        self.view = config.view
        self.columns = columns

    def deliver(self, batch: int, changes: Changes) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class Terminal(Sink):
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


def batch_id(name: str) -> int | None:
    """The micro-batch of a ``batch=<id>`` directory's name (None for anything else)."""
    found = re.fullmatch(r"batch=(-?[0-9]+)", name)
    return int(found[1]) if found else None


def remove_uncommitted(files: Files, directory: str, committed: int) -> None:
    """Remove the ``batch=<id>`` directories (and strays) of batches after ``committed``:
    written by a run that was stopped before Spark's checkpoint committed them; and any
    batch a stopped run left half-written under its hidden name."""
    for name in files.names(directory, "batch=*"):
        b = batch_id(name)
        if b is None or b > committed:
            files.remove(child(directory, name))
    for name in files.names(directory, ".batch=*.writing"):
        files.remove(child(directory, name))


#: a view's rows (duplicates repeated) after the last committed micro-batch, read from the
#: tables' keyed state or the shards' logs (:meth:`upkeep.spark.pipeline.SparkPipelineRunner.run`)
Fill = Callable[[str], list[tuple]]


def starts_late(committed: int) -> bool:
    """Whether a sink with nothing at its path joins a pipeline that has already run (its
    checkpoint committed micro-batch ``committed``): it is then filled with its view's rows
    as of that batch (:func:`filled_rows`), as a local sink is at start."""
    return committed >= 0


def filled_rows(config: SinkConfig, fill: Fill) -> Changes:
    """A late sink's view rows with their counts; a failure to read them (a Spark job, the
    local engine) is the sink's PipelineError, before anything is written."""
    try:
        return list(Counter(fill(config.view)).items())
    except Exception as exc:  # Spark's errors and upkeep's alike
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise PipelineError(f"{config.label}: a new sink of a pipeline that has run starts "
                            f"from its view's rows, which could not be read: {first}") from None


def _made_whole(files: Files, location: str, build: Callable[[str], None]) -> None:
    """The directory ``location`` built by ``build`` under a hidden name and renamed into
    place: a build that fails leaves no directory, so the next run fills the sink again."""
    head, _, name = location.rstrip("/").rpartition("/")
    partial = child(head, f".{name}.filling")
    files.remove(partial)
    files.mkdirs(partial)
    build(partial)
    files.rename(partial, location)


def write_batch(files: Files, directory: str, batch: int,
                write: Callable[[str], None]) -> None:
    """Micro-batch ``batch``'s directory under ``directory``: ``write(location)`` writes it
    under a hidden name (which Spark's and upkeep's readers skip), then it is renamed into
    place (replacing the directory of a replayed batch)."""
    final = child(directory, f"batch={batch}")
    partial = child(directory, f".batch={batch}.writing")
    write(partial)
    files.remove(final)
    files.rename(partial, final)


def _write_file(files: Files, directory: str, name: str, data: bytes) -> None:
    """A batch directory of one file written by the driver (a late sink's fill)."""
    files.mkdirs(directory)
    files.write_bytes(child(directory, name), data)


class ExecutorSink(Sink):
    """A sink whose micro-batches Spark's executors write: each batch's net delta of the
    view, summed by Spark over the view's typed columns (the driver never holds them)."""

    def __init__(self, config: SinkConfig, catalog: Connection, spark: SparkSession):
        super().__init__(config, catalog.schema_of(config.view))
        self.catalog = catalog
        path = config.options["path"]
        if is_uri(path) and not urlparse(path).path.strip("/"):
            raise PipelineError(f"{config.label}: {path} is the root of its file system; a "
                                f"sink writes a directory of its own under it (say "
                                f"{path.rstrip('/')}/{config.view})")
        #: where Spark writes the micro-batches: a URI, or the local path as a file: URI
        self.location = location_of(path)
        self.files = files_for(spark, self.location)
        if self.files.exists(self.location) and not self.files.is_dir(self.location):
            raise PipelineError(f"{config.label}: {path} is a file; on the spark engine "
                                f"the {config.type} sink writes a directory of micro-batches "
                                f"there (move the file away or choose another path)")

    def keys(self) -> list:
        return [F.col("`" + name.replace("`", "``") + "`") for name, _ in self.columns]

    def net(self, frame: DataFrame, weight: str = "weight",
            encoded: str | None = None) -> DataFrame:
        """The view's net delta in this micro-batch: its typed columns and the weight (never
        0, named ``weight``), plus, named ``encoded``, one of the stream's spellings of the
        row."""
        typed = typed_deltas(frame, self.catalog, self.view, weight, encoded)
        spelling = [F.first(encoded).alias(encoded)] if encoded else []
        return (typed.groupBy(*self.keys()).agg(*spelling, F.sum(weight).alias(weight))
                .where(F.col(weight) != 0))

    def write(self, frame: DataFrame, batch: int) -> None:
        raise NotImplementedError


class ParquetDeltas(ExecutorSink):
    """``<path>/batch=<id>/``: each micro-batch's net delta as Parquet."""

    def __init__(self, config: SinkConfig, catalog: Connection, committed: int,
                 spark: SparkSession, fill: Fill):
        super().__init__(config, catalog, spark)
        check_columns(self.columns, config.label)
        if not self.files.exists(self.location) and starts_late(committed):
            # the view's rows so far, as the delta of the last committed batch
            changes = filled_rows(config, fill)

            def build(directory: str) -> None:
                if changes:
                    out = pa.BufferOutputStream()
                    pq.write_table(to_arrow(self.columns, [r for r, _ in changes],
                                            {"weight": [w for _, w in changes]}), out)
                    write_batch(self.files, directory, committed, lambda p: _write_file(
                        self.files, p, "part-fill.parquet", out.getvalue().to_pybytes()))
            _made_whole(self.files, self.location, build)
        self.files.mkdirs(self.location)
        remove_uncommitted(self.files, self.location, committed)

    def write(self, frame: DataFrame, batch: int) -> None:
        write_batch(self.files, self.location, batch,
                    self.net(frame).write.mode("overwrite").parquet)


class JsonlBatches(ExecutorSink):
    """``<path>/batch=<id>/part-*.txt``: each micro-batch's delta lines, encoded on the
    executors by the local sink's own code (:func:`~upkeep.io.sinks.jsonl.delta_lines`)."""

    def __init__(self, config: SinkConfig, catalog: Connection, committed: int,
                 spark: SparkSession, fill: Fill):
        super().__init__(config, catalog, spark)
        if not self.files.exists(self.location) and starts_late(committed):
            # the view's rows so far, as the lines of the last committed batch
            lines = delta_lines([n for n, _ in self.columns], filled_rows(config, fill),
                                committed)

            def build(directory: str) -> None:
                if lines:
                    write_batch(self.files, directory, committed, lambda p: _write_file(
                        self.files, p, "part-fill.txt", "".join(lines).encode()))
            _made_whole(self.files, self.location, build)
        self.files.mkdirs(self.location)
        remove_uncommitted(self.files, self.location, committed)

    def write(self, frame: DataFrame, batch: int) -> None:
        names = [n for n, _ in self.columns]
        types = [t for _, t in self.columns]

        def lines(chunks):
            for chunk in chunks:
                rows = chunk.column(ENCODED).to_pylist()
                weights = chunk.column(WEIGHT).to_pylist()
                changes = [(decode_row(text, types), w)
                           for text, w in zip(rows, weights, strict=True)]
                yield pa.RecordBatch.from_pydict(
                    {"value": [line[:-1] for line in delta_lines(names, changes, batch)]},
                    schema=pa.schema([("value", pa.string())]))

        encoded = self.net(frame, WEIGHT, ENCODED).select(ENCODED, WEIGHT)
        write_batch(self.files, self.location, batch,
                    encoded.mapInArrow(lines, "value string").write.mode("overwrite").text)


class ParquetSnapshot(ExecutorSink):
    """``<path>`` -> ``<path>.snapshots/batch=<id>/``: the view's rows after micro-batch
    ``id``, merged by Spark from the previous snapshot and the net deltas since
    (``<path>.snapshots/pending/batch=<id>/``) after every ``every`` batches and at close."""

    def __init__(self, config: SinkConfig, catalog: Connection, committed: int,
                 spark: SparkSession, fill: Fill):
        path = config.options["path"]
        if is_uri(path):
            raise PipelineError(f"{config.label}: {path}: on the spark engine the parquet sink "
                                f"keeps a symbolic link to its latest snapshot, which only a "
                                f"local (or mounted) path has; give it one, or write the "
                                f"view's deltas there with a parquet-deltas sink")
        super().__init__(config, catalog, spark)
        self.path = Path(path)
        if self.path.is_dir() and not self.path.is_symlink():
            raise PipelineError(f"{config.label}: {self.path} is a directory; on the spark "
                                f"engine the parquet sink keeps a link to its latest snapshot "
                                f"there (move the directory away or choose another path)")
        late = not self.path.is_symlink() and starts_late(committed)
        self.spark = spark
        self.every = int(config.options.get("every") or 1)
        self.store = self.path.with_name(self.path.name + ".snapshots")
        self.pending_dir = local_uri(self.store / "pending")
        self.files.mkdirs(self.pending_dir)
        # The snapshot may include a batch the checkpoint has not committed (written, then
        # killed before Spark's commit): Spark replays that batch with the same deltas,
        # which write() then skips.  A snapshot further ahead, or any snapshot when the
        # checkpoint has committed nothing, is another run's: start from no rows.  A sink
        # new to a run that has committed batches starts from its view's rows.
        self.included = (batch_id(Path(os.readlink(self.path)).name) if self.path.is_symlink()
                         else None)
        if late:  # the view's rows so far, as the snapshot of the last committed batch
            rows = [r for r, n in filled_rows(config, fill) for _ in range(n)]
            self._publish(self._first(rows, committed), committed)
        elif self.included is None or committed < 0 or self.included > committed + 1:
            self._publish(self._first([], -1), -1)
        for stray in self.store.glob("batch=*"):  # a merge stopped before its swap
            if batch_id(stray.name) != self.included:
                self.files.remove(local_uri(stray))
        self.retired: Path | None = None  # the snapshot before the latest, kept for readers
        remove_uncommitted(self.files, self.pending_dir, committed)
        written = [b for name in self.files.names(self.pending_dir, "batch=*")
                   if (b := batch_id(name)) is not None]
        self.pending = sorted(b for b in written if b > self.included)
        for b in set(written) - set(self.pending):  # merged already
            self.files.remove(child(self.pending_dir, f"batch={b}"))

    def _first(self, rows: list[tuple], batch: int) -> Path:
        """The first snapshot, of ``rows`` as of micro-batch ``batch`` (a new run: none, as
        of -1), written with the view's Arrow types."""
        directory = self.store / f"batch={batch}"
        self.files.remove(local_uri(directory))
        directory.mkdir(parents=True)
        pq.write_table(to_arrow(self.columns, rows), directory / "part-0.parquet")
        return directory

    def _publish(self, directory: Path, batch: int) -> None:
        """Point ``<path>`` at ``directory`` atomically (a new link renamed over the old)."""
        link = self.path.with_name(f".{self.path.name}.{os.getpid()}.link")
        link.unlink(missing_ok=True)
        link.symlink_to(os.path.relpath(directory, self.path.parent))
        os.replace(link, self.path)
        self.included = batch

    def write(self, frame: DataFrame, batch: int) -> None:
        if batch <= self.included:
            return  # a replayed batch the snapshot already includes
        write_batch(self.files, self.pending_dir, batch,
                    self.net(frame, WEIGHT).write.mode("overwrite").parquet)
        if batch not in self.pending:
            self.pending.append(batch)
        if len(self.pending) >= self.every:
            self._merge()

    def _merge(self) -> None:
        """The previous snapshot plus the pending deltas, summed by Spark and written as the
        new snapshot, which the link then points at; the merged inputs are removed."""
        batch, previous = self.pending[-1], self.store / f"batch={self.included}"
        keys = self.keys()
        deltas = read_parquet_literally(self.spark, [child(self.pending_dir, f"batch={b}")
                                                     for b in self.pending])
        combined = deltas.select(*keys, WEIGHT)
        if self.included >= 0:
            rows = read_parquet_literally(self.spark, [local_uri(previous)]).select(*keys)
            combined = combined.unionByName(rows.withColumn(WEIGHT, F.lit(1).cast("long")))
        merged = (combined.groupBy(*keys).agg(F.sum(WEIGHT).alias(COUNT))
                  .where(F.col(COUNT) > 0)
                  .withColumn(COUNT, F.explode(F.array_repeat(F.lit(0), F.col(COUNT).cast("int"))))
                  .select(*keys))
        target = self.store / f"batch={batch}"
        merged.write.mode("overwrite").parquet(local_uri(target))
        self._publish(target, batch)
        # the snapshot before the previous one goes: a reader that followed the link just
        # before this swap still finds the previous one
        if self.retired is not None:
            shutil.rmtree(self.retired, ignore_errors=True)
        self.retired = previous
        for b in self.pending:
            self.files.remove(child(self.pending_dir, f"batch={b}"))
        self.pending = []

    def close(self) -> None:
        if self.pending:
            try:
                self._merge()
            except Exception as exc:  # Spark's errors and the file system's alike
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                raise PipelineError(f"{self.config.label}: the last snapshot could not be "
                                    f"written to {self.path}: {first}") from None


def open_sink(config: SinkConfig, catalog: Connection, committed: int,
              spark: SparkSession, fill: Fill) -> Sink:
    """The Spark pipeline's sink for ``config``; ``committed`` is the checkpoint's last
    committed micro-batch (-1 if none); ``fill`` fills a sink new to a pipeline that has
    run (:func:`starts_late`)."""
    try:
        if config.type == "parquet-deltas":
            return ParquetDeltas(config, catalog, committed, spark, fill)
        if config.type == "parquet":
            return ParquetSnapshot(config, catalog, committed, spark, fill)
        if config.type == "jsonl":
            return JsonlBatches(config, catalog, committed, spark, fill)
    except OSError as exc:
        raise PipelineError(f"{config.label}: cannot prepare {exc.filename or config.label}: "
                            f"{exc.strerror or exc}") from None
    return Terminal(config, catalog.schema_of(config.view), Console())
