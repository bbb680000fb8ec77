"""The ``parquet`` sink: a snapshot of a view's rows, rewritten after batches that change it.

The file is written to a temporary name in the same directory and renamed over the old
one, so readers see a whole snapshot (the previous or the new), never a partial file.  With
``every = N`` the snapshot is rewritten at most every N batches (and always at start and
when the run ends).
"""

from __future__ import annotations

import os

import pyarrow.parquet as pq

from ...codecs.arrow_values import to_arrow
from ...errors import SchemaError
from ..errors import PipelineError
from .base import Changes, Sink


class ParquetSink(Sink):
    """Keeps a Parquet file equal to the view (as of its last write)."""

    def start(self, batch: int) -> None:
        self.path = self.options["path"]
        self.every = int(self.options.get("every") or 1)
        self._since = 0
        self._dirty = False
        self.write()

    def deliver(self, changes: Changes, batch: int) -> None:
        self._dirty = True
        self._since += 1
        if self._since >= self.every:
            self.write()

    def write(self) -> None:
        """Write the view's current rows atomically (temporary file, then rename)."""
        try:
            table = to_arrow(self.columns, self.view.rows())
        except SchemaError as exc:
            raise PipelineError(f"parquet sink {self.path} (view {self.view.name}): {exc} "
                                f"as the engine reports it") from None
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(table, tmp)
            os.replace(tmp, self.path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)  # (the rename failed: a directory at the path)
            raise PipelineError(f"parquet sink {self.path}: {exc}") from None
        self._since = 0
        self._dirty = False

    def close(self) -> None:
        if getattr(self, "_dirty", False):
            self.write()
