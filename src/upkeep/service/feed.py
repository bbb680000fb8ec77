"""The subscription feed: every committed batch's changes to the served subscriptions,
kept durably so that a client can resume from its token, also after a server restart.

A record is ``(batch id, {subscription id: [(row, weight), ...]})``, written (and fsynced)
by the committer's journal hook after the views are stepped and *before* the batch's own
log record (``local/commit.py``): a batch is never acknowledged without its feed record.
A record whose batch never committed (the process died between the two writes, or the log
write failed and the record could not be taken back) has a batch id above the database's
last batch and is cut when the feed is opened.

The file is ``feed.log`` beside the database's log, in the same checksummed frames
(``storage.py``).  It keeps the records of the last ``retention`` batches; older records
are dropped by rewriting the file (a temporary file renamed into place).  A token older
than what is kept can no longer be resumed: the client gets a fresh snapshot instead
(``service/hub.py``).  An in-memory database keeps its feed in memory only.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterator
from pathlib import Path

from ..record_codec import decode, encode
from ..storage import LOG_MAGIC, DamagedStorageError, frame, scan_log
from ..zset import Changes

Record = tuple[int, dict[str, Changes]]


class Feed:
    """The retained records, oldest first; ``horizon`` is the last batch whose records were
    dropped (a token at or after it can be resumed)."""

    def __init__(self, path: Path | None, last_batch: int, retention: int = 100_000) -> None:
        self.path = path
        self.retention = retention
        self.records: list[Record] = []
        self.horizon = last_batch  # a new feed: only what commits from now on
        self._fd: int | None = None
        if path is None:
            return
        if path.exists():
            self.horizon = self._read(path, last_batch)
        self._rewrite()  # drops what never committed or is past retention
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND)

    def _read(self, path: Path, last_batch: int) -> int:
        data = path.read_bytes()
        if not data.startswith(LOG_MAGIC):
            raise DamagedStorageError(f"{path}: not an upkeep feed", path=str(path), offset=0)
        scan = scan_log(data)
        if scan.damaged:
            offset = scan.damaged[0][0]
            raise DamagedStorageError(f"{path} is damaged at byte {offset}", path=str(path),
                                      offset=offset)
        records = [decode(payload) for _, payload in scan.records]
        horizon, *kept = records or [last_batch]
        self.records = [(int(b), {s: [(tuple(r), int(w)) for r, w in c] for s, c in subs.items()})
                        for b, subs in kept if int(b) <= last_batch]
        return int(horizon)

    def _rewrite(self) -> None:
        """Write the file anew: the horizon first, then the kept records."""
        if len(self.records) > self.retention:
            cut = len(self.records) - self.retention
            self.horizon = self.records[cut - 1][0]
            del self.records[:cut]
        if self.path is None:
            return
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, LOG_MAGIC + frame(encode(self.horizon)) +
                     b"".join(frame(encode(r)) for r in self.records))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)

    def append(self, batch: int, changes: dict[str, Changes]) -> None:
        """Make one batch's record durable (called before the batch itself is logged).
        Every batch has a record, an empty one if it changed no subscription, so that
        batches committed while nobody journaled (the database opened without the server)
        show as a gap.  An empty record is written but not fsynced: if a machine crash
        loses it, the gap only costs resuming clients a ``reset``."""
        record = (batch, changes)
        if self._fd is not None:
            payload = frame(encode(record))
            start = os.lseek(self._fd, 0, os.SEEK_END)
            try:
                os.write(self._fd, payload)
                if changes:
                    os.fsync(self._fd)
            except OSError:
                os.ftruncate(self._fd, start)
                raise
        self.records.append(record)

    def take_back(self, batch: int) -> None:
        """Forget batch ``batch``'s record: its log write failed, so it never committed."""
        if self.records and self.records[-1][0] == batch:
            self.records.pop()
            self._rewrite()

    def compact(self) -> None:
        """Drop records past the retention (called between batches)."""
        if len(self.records) > 2 * self.retention:
            self._rewrite()

    @property
    def last(self) -> int:
        """The newest batch the feed knows of (its last record, or the horizon)."""
        return self.records[-1][0] if self.records else self.horizon

    def restart_at(self, batch: int) -> None:
        """Forget every record: nothing before ``batch`` can be resumed (the records of
        batches between :attr:`last` and ``batch`` were lost)."""
        self.records = []
        self.horizon = batch
        self._rewrite()

    def since(self, subscription: str, batch: int) -> Iterator[tuple[int, Changes]]:
        """The subscription's changes of every batch after ``batch``, in order."""
        start = bisect.bisect_right(self.records, batch, key=lambda r: r[0])
        for b, subs in self.records[start:]:
            if subscription in subs:
                yield b, subs[subscription]

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
