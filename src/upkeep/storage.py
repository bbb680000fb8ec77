"""Durable state: a write-ahead log of committed batches plus periodic snapshots.

A database directory holds ``snapshot-<gen>.pkl`` (the catalog, every base table, the last
batch id and its metadata, written to a temporary file and renamed, so it is either whole or
absent) and ``wal-<gen>.log``, the batches and catalog changes committed since that snapshot.
Each log record is framed as ``length, crc32, payload``; recovery replays records up to the
first torn or corrupt frame and cuts the file there, so a batch whose record was not wholly
written (the process died mid-write) is discarded, and every batch whose commit returned
(it was fsynced first) is present exactly once.  Views are derived state: they are rebuilt
from the recovered tables.  Metadata committed with a batch (e.g. source offsets) lands in
the same record, so offsets and data can never disagree.
"""

from __future__ import annotations

import fcntl
import os
import pickle
import re
import struct
import zlib
from pathlib import Path

from .errors import Error

_FRAME = struct.Struct(">II")
_SNAPSHOT = re.compile(r"snapshot-(\d+)\.pkl$")


class Storage:
    """One database directory, opened by at most one process at a time."""

    def __init__(self, path: str | os.PathLike, fsync: bool = True,
                 snapshot_bytes: int = 64 << 20):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.fsync = fsync
        self.snapshot_bytes = snapshot_bytes
        self._lock = open(self.path / "LOCK", "a+")  # noqa: SIM115 - held while open
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            self._lock.close()
            raise Error(f"database {self.path} is open in another process") from exc
        self.generation = self._latest_generation()
        self._wal = None

    def _latest_generation(self) -> int:
        gens = [int(m.group(1)) for p in self.path.iterdir() if (m := _SNAPSHOT.match(p.name))]
        return max(gens, default=0)

    def _wal_path(self, gen: int) -> Path:
        return self.path / f"wal-{gen:06d}.log"

    def _snapshot_path(self, gen: int) -> Path:
        return self.path / f"snapshot-{gen:06d}.pkl"

    def load(self) -> tuple[dict | None, list[tuple]]:
        """The latest snapshot (or None) and the log records after it; cuts a torn tail."""
        snapshot = None
        if self.generation:
            with open(self._snapshot_path(self.generation), "rb") as f:
                snapshot = pickle.load(f)
        records: list[tuple] = []
        wal = self._wal_path(self.generation)
        good = 0
        if wal.exists():
            data = wal.read_bytes()
            pos = 0
            while pos + _FRAME.size <= len(data):
                length, crc = _FRAME.unpack_from(data, pos)
                start = pos + _FRAME.size
                payload = data[start:start + length]
                if len(payload) < length or zlib.crc32(payload) != crc:
                    break
                records.append(pickle.loads(payload))
                pos = start + length
            good = pos
            if good < len(data):
                with open(wal, "r+b") as f:
                    f.truncate(good)
                    f.flush()
                    os.fsync(f.fileno())
        self._wal = open(wal, "ab")  # noqa: SIM115 - kept open for appends
        return snapshot, records

    def append(self, record: tuple) -> None:
        """Write one record and make it durable before the commit is acknowledged."""
        payload = pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL)
        self._wal.write(_FRAME.pack(len(payload), zlib.crc32(payload)) + payload)
        self._wal.flush()
        if self.fsync:
            os.fsync(self._wal.fileno())

    def wants_snapshot(self) -> bool:
        return self._wal is not None and self._wal.tell() >= self.snapshot_bytes

    def snapshot(self, state: dict) -> None:
        """Write a new snapshot generation atomically, start its empty log, drop the old ones."""
        gen = self.generation + 1
        tmp = self.path / f"snapshot-{gen:06d}.tmp"
        with open(tmp, "wb") as f:
            pickle.dump(state, f, protocol=pickle.HIGHEST_PROTOCOL)
            f.flush()
            os.fsync(f.fileno())
        new_wal = self._wal_path(gen)
        with open(new_wal, "wb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, self._snapshot_path(gen))
        dir_fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        old = self.generation
        self.generation = gen
        if self._wal is not None:
            self._wal.close()
        self._wal = open(new_wal, "ab")  # noqa: SIM115
        for path in (self._wal_path(old), self._snapshot_path(old)):
            if path.exists() and old != gen:
                path.unlink()

    def close(self) -> None:
        if self._wal is not None:
            self._wal.close()
            self._wal = None
        if not self._lock.closed:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
