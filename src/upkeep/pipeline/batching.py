"""Cutting the record stream into batches.

A batch is closed when it holds ``rows_per_batch`` records, when ``commit_interval`` seconds
have passed since its first record, when the source has nothing more to read for now (end
of input, or caught up while following), or when a stop is requested.  A batch never ends
inside a source transaction (records with the same ``txn``): a full batch waits for the
transaction's last record, and when the source is caught up the records of a transaction
still open stay for the next batch (only the end of the input closes it; a stop leaves
them to be read again).
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
    full = False  # the batch is due but its last transaction may not be complete
    for item in items:
        if item is CAUGHT_UP:
            done, batch = _complete(batch)
            yield done
            full = False
            if batch:
                started = time.monotonic()
        else:
            assert isinstance(item, ChangeRecord)
            if full and (item.txn is None or item.txn != batch[-1].txn):
                yield batch
                batch, full = [], False
            if not batch:
                started = time.monotonic()
            batch.append(item)
            if (limit is not None and len(batch) >= limit) or (
                    interval is not None and time.monotonic() - started >= interval):
                if item.txn is None:
                    yield batch
                    batch = []
                else:
                    full = True
        if stop is not None and stop.is_set():
            break
    if stop is not None and stop.is_set():  # also when the source ended because of it
        batch = _complete(batch)[0]  # an open transaction is read again on restart
    if batch:
        yield batch


def _complete(batch: list[ChangeRecord]) -> tuple[list[ChangeRecord], list[ChangeRecord]]:
    """``batch`` split before the records of its last transaction if that transaction may
    still go on (its id is set): (records to commit now, records to keep)."""
    txn = batch[-1].txn if batch else None
    if txn is None:
        return batch, []
    cut = len(batch)
    while cut > 0 and batch[cut - 1].txn == txn:
        cut -= 1
    return batch[:cut], batch[cut:]
