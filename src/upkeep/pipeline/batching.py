"""Cutting the record stream into batches.

A batch is closed when it holds ``rows_per_batch`` records, when ``commit_interval`` seconds
have passed since its first record, when the source has nothing more to read for now (end
of input, or caught up while following), or when a stop is requested.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator

from ..io.records import ChangeRecord
from .config import BatchConfig
from .source import CAUGHT_UP


def batches(items: Iterable[object], config: BatchConfig,
            stop: threading.Event | None = None) -> Iterator[list[ChangeRecord]]:
    """Batches of records; an empty list means "idle" (the source is caught up)."""
    limit = config.rows_per_batch
    interval = config.commit_interval
    batch: list[ChangeRecord] = []
    started = 0.0
    for item in items:
        if item is CAUGHT_UP:
            yield batch
            batch = []
        else:
            assert isinstance(item, ChangeRecord)
            if not batch:
                started = time.monotonic()
            batch.append(item)
            if (limit is not None and len(batch) >= limit) or (
                    interval is not None and time.monotonic() - started >= interval):
                yield batch
                batch = []
        if stop is not None and stop.is_set():
            break
    if batch:
        yield batch
