"""The ``parquet-deltas`` sink: each committed batch's delta of a view as Parquet files.

The target is a directory partitioned by batch, in the Hive layout Spark, DuckDB and
pyarrow read: ``<path>/batch=<id>/*.parquet``, each file holding the view's columns plus
``weight`` (the net change of that row's multiplicity in the batch, never 0).  The view's
contents are the rows whose weights sum to more than 0, with that sum as their count::

    SELECT * EXCLUDE (weight), SUM(weight) AS n
    FROM read_parquet('out/revenue/*/*.parquet', hive_partitioning = true)
    GROUP BY ALL HAVING SUM(weight) > 0

On the local engine a batch's file is written to a hidden temporary name and renamed, so
readers never see half of one.  At start the sink sums what the directory holds and, if that
does not add up to the view's current rows (a crash between a commit and the write, a new
directory while the view already has rows), writes the difference as a ``correction``
file of the last committed batch; a directory holding batches numbered after that one
(the pipeline started over with a fresh state directory) is emptied first.  On Spark the executors write each micro-batch's
directory (``upkeep.spark.pipeline``); a micro-batch Spark replays overwrites its own
directory, so each batch is there exactly once.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq

from ...codecs.arrow_values import Columns, from_arrow, to_arrow
from ...errors import SchemaError
from ..errors import PipelineError
from .base import Changes, Sink

#: columns the sink adds to the view's: a view with a column of one of these names is refused
RESERVED = ("batch", "weight")


def check_columns(columns: Columns, label: str) -> None:
    """Refuse a view whose column names clash with the sink's partition or weight column."""
    clash = [name for name, _ in columns if name.lower() in RESERVED]
    if clash:
        raise PipelineError(f"{label}: the view has a column named {clash[0]!r}, which a "
                            f"parquet-deltas sink adds itself (the batch and the weight); "
                            f"rename it in the view")


def read_deltas(path: Path, columns: Columns) -> Counter[tuple]:
    """The net weight of each row over every batch in a ``parquet-deltas`` directory."""
    total: Counter[tuple] = Counter()
    for file in sorted(path.glob("batch=*/*.parquet")):
        if file.name.startswith((".", "_")):
            continue
        table = pq.read_table(file, partitioning=None)
        missing = [name for name in [*(n for n, _ in columns), "weight"]
                   if name not in table.column_names]
        if missing:  # written for another view (the sink was pointed elsewhere), or not
            raise ValueError(  # by a parquet-deltas sink at all
                f"{file.relative_to(path)} has no column {missing[0]!r}: the directory "
                "holds another view's deltas or other files; give the sink another path")
        for row, w in zip(from_arrow(table, columns), table.column("weight").to_pylist(),
                          strict=True):
            total[row] += w
    return total


class ParquetDeltasSink(Sink):
    """Writes a view's committed deltas, one Parquet file per batch that changes it."""

    def start(self, batch: int) -> None:
        self.path: Path = self.options["path"]
        check_columns(self.columns, self.config.label)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self._forget_other_histories(batch)
            written = read_deltas(self.path, self.columns)
        except (OSError, ValueError) as exc:  # pyarrow's errors are ValueErrors
            raise PipelineError(f"parquet-deltas sink {self.path}: {exc}") from None
        difference = Counter(self.view.rows())
        difference.subtract(written)
        changes = [(row, w) for row, w in difference.items() if w]
        if changes:
            fixes = len(list(self.path.glob(f"batch={batch}/correction-*.parquet")))
            self._write(changes, batch, f"correction-{fixes}.parquet")

    def _forget_other_histories(self, batch: int) -> None:
        """Remove every batch directory when one is numbered after ``batch``, the last
        committed: the pipeline started over (a fresh ``state_dir``), its batch ids begin
        again and would replace those files, so the directory is rebuilt from the view."""
        numbered = [d for d in self.path.glob("batch=*")
                    if d.is_dir() and d.name.removeprefix("batch=").isdigit()]
        if any(int(d.name.removeprefix("batch=")) > batch for d in numbered):
            for directory in numbered:
                shutil.rmtree(directory)

    def deliver(self, changes: Changes, batch: int) -> None:
        self._write(changes, batch, "part-0.parquet")

    def _write(self, changes: Changes, batch: int, name: str) -> None:
        try:
            table = to_arrow(self.columns, [row for row, _ in changes],
                             {"weight": [w for _, w in changes]})
        except SchemaError as exc:
            raise PipelineError(f"parquet-deltas sink {self.path} (view {self.view.name}): "
                                f"{exc} as the engine reports it") from None
        directory = self.path / f"batch={batch}"
        tmp = directory / f".{name}.{os.getpid()}.tmp"
        try:
            directory.mkdir(parents=True, exist_ok=True)
            pq.write_table(table, tmp)
            os.replace(tmp, directory / name)
        except OSError as exc:
            raise PipelineError(f"parquet-deltas sink {self.path}: {exc}") from None
