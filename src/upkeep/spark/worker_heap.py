"""Executor Python workers' heap: PySpark's daemon runs a full ``gc.collect()`` after
every task, and a full collection walks every tracked object.  With pandas, pyarrow,
sqlglot and the compiled views loaded, that was 44% of the workers' py-spy samples in the
keyed oracle test (docs/spark.md, "Performance")."""

from __future__ import annotations

import atexit
import gc

from pyspark import TaskContext

_heap_frozen = False


def freeze_worker_heap() -> None:
    """Once per executor Python worker, after its first views are compiled: move what it
    has allocated (modules, compiled views) out of the cyclic collector's reach.  Objects
    made by later tasks stay collectable; the driver's process is left alone."""
    global _heap_frozen
    if not _heap_frozen and TaskContext.get() is not None:
        gc.collect()
        gc.freeze()
        # frozen objects are never collected, not even at exit, where DuckDB's bindings
        # (nanobind) then report each of theirs as leaked on the worker's stderr
        atexit.register(gc.unfreeze)
        _heap_frozen = True
