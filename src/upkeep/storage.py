"""Durable state: a write-ahead log of committed batches plus periodic snapshots.

A database directory holds ``snapshot-<gen>.upk`` (the catalog, every base table, the last
batch id and its metadata) and ``wal-<gen>.log``, the records committed since snapshot
``<gen>`` was taken.  Both files start with a magic line and are sequences of frames::

    payload length (4 bytes) | CRC-32 of the payload (4) | CRC-32 of those 8 bytes (4) | payload

Payloads are msgpack (:mod:`upkeep.record_codec`): reading a directory runs no code.

Guarantees (issue 18):

* A commit is acknowledged only when its record is written and fsynced.  A write or fsync
  that fails is undone (the log is truncated back to where the record started), so the
  log is exactly as before the failed commit; if even that fails, the storage refuses
  every further write until the database is reopened.
* Recovery cuts a *torn tail*: a last frame that is cut short, or whose checksum fails
  where its bytes end in zeros (what a write lost in a power failure leaves); only a write
  that never returned can leave one.  Damage anywhere before the tail (a bad checksum
  followed by more data) is never cut silently: opening raises
  :class:`DamagedStorageError` naming the file and byte offset, and :func:`repair` keeps
  the intact records before the damage and reports what it drops.
* A snapshot is written to a temporary file, fsynced, and renamed; it ends with an end
  frame, so a cut or changed snapshot is detected.  Generations must be contiguous: a log
  whose snapshot is missing is an error, not an empty database.
* Snapshot rotation: snapshot ``N`` is written, log ``N`` is created (header only), the
  snapshot is renamed into place, then generation ``N-1`` is removed.  A crash in between
  leaves an unused header-only log ``N`` (removed on open) or an old generation that
  snapshot ``N`` covers (removed on open).
"""

from __future__ import annotations

import fcntl
import os
import re
import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from .errors import Error
from .record_codec import decode, encode

LOG_MAGIC = b"upkeep-log 2\n"
SNAPSHOT_MAGIC = b"upkeep-snapshot 2\n"
_HEADER = struct.Struct(">III")  # length, payload CRC, header CRC (of the first 8 bytes)
_GENERATION = re.compile(r"(snapshot|wal)-(\d+)\.(upk|log)$")
_ZERO_TAIL = 16  # a last frame whose checksum fails is torn only if it ends in this many zeros
_END = "end"  # a snapshot's last frame: ("end", number of frames before it)


class StorageError(Error):
    """A database directory that cannot be read or written; names the file and offset."""

    fields = ("path", "offset")

    def __init__(self, message: str, path: str | None = None, offset: int | None = None):
        super().__init__(message)
        self.path = path
        self.offset = offset


class StorageWarning(UserWarning):
    """Durable state not written where nothing was lost (a snapshot after a commit)."""


class DamagedStorageError(StorageError):
    """A log or snapshot whose bytes were changed or lost before its end (``upkeep repair``
    recovers what is intact in a log)."""


def frame(payload: bytes) -> bytes:
    """One frame around ``payload``."""
    head = struct.pack(">II", len(payload), zlib.crc32(payload))
    return head + struct.pack(">I", zlib.crc32(head)) + payload


def _header(data: bytes | memoryview, pos: int = 0) -> tuple[int, int] | None:
    """The payload length and CRC of the frame header at ``pos`` (None if its own CRC
    fails)."""
    length, crc, head_crc = _HEADER.unpack_from(data, pos)
    return (length, crc) if zlib.crc32(data[pos:pos + 8]) == head_crc else None


@dataclass
class LogScan:
    """What a pass over a log's bytes found: intact records with their offsets, where the
    intact prefix ends, and the damaged ranges (``repair`` skips them, open refuses)."""

    records: list[tuple[int, bytes]] = field(default_factory=list)
    end: int = 0
    torn: int = 0  # bytes of a torn tail after ``end``
    damaged: list[tuple[int, int]] = field(default_factory=list)  # (offset, length)


def _frame_at(data: bytes | memoryview, pos: int) -> tuple[str, int]:
    """Classify the frame at ``pos``: ("ok", end), ("torn", len) or ("bad", 0)."""
    left = len(data) - pos
    if left < _HEADER.size:
        return "torn", left
    header = _header(data, pos)
    if header is None:
        return ("torn", left) if not any(data[pos:]) else ("bad", 0)
    length, crc = header
    start = pos + _HEADER.size
    if start + length > len(data):
        return "torn", left
    if zlib.crc32(data[start:start + length]) != crc:
        # torn only where a lost write leaves zeros at the very end of the file
        tail = data[max(start, len(data) - _ZERO_TAIL):]
        torn = start + length == len(data) and not any(tail)
        return ("torn", left) if torn else ("bad", 0)
    return "ok", start + length


def scan_log(data: bytes, resync: bool = False) -> LogScan:
    """The frames of a log's bytes after its magic line.  Without ``resync`` the scan
    stops at the first damaged frame; with it, it searches for the next intact frame."""
    out = LogScan(end=len(LOG_MAGIC))
    pos = len(LOG_MAGIC)
    view = memoryview(data)
    while pos < len(data):
        status, value = _frame_at(view, pos)
        if status == "ok":
            out.records.append((pos, bytes(view[pos + _HEADER.size:value])))
            pos = out.end = value
            continue
        if status == "torn":
            out.torn = value
            return out
        if not resync:
            out.damaged.append((pos, len(data) - pos))
            return out
        nxt = pos + 1
        while nxt < len(data) and _frame_at(view, nxt)[0] != "ok":
            nxt += 1
        out.damaged.append((pos, nxt - pos))
        pos = out.end = nxt
    return out


def _check_database_directory(path: Path) -> None:
    """Refuse a directory that holds files but none of a database's (its ``LOCK``, logs
    or snapshots, of any upkeep version): a mistyped path (``/etc``, a project's folder)
    must not become a database, its files mixed with a log and a lock.  A new or empty
    directory becomes one."""
    try:
        entries = [p.name for p in path.iterdir()] if path.is_dir() else []
    except OSError:
        return  # the mkdir or open below names what is wrong
    if entries and not any(n == "LOCK" or n.startswith(("wal-", "snapshot-"))
                           for n in entries):
        shown = ", ".join(sorted(entries)[:3]) + (", ..." if len(entries) > 3 else "")
        raise StorageError(f"database {path} is a directory of other files ({shown}), not "
                           "an upkeep database: give a new or empty directory",
                           path=str(path))


class Storage:
    """One database directory, opened by at most one process at a time."""

    def __init__(self, path: str | os.PathLike, fsync: bool = True,
                 snapshot_bytes: int = 64 << 20):
        self.path = Path(path)
        _check_database_directory(self.path)
        try:
            self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
            lock = os.open(self.path / "LOCK", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise StorageError(f"database {self.path} cannot be opened as a directory: "
                               f"{exc.strerror or exc}", path=str(self.path)) from None
        self.fsync = fsync
        self.snapshot_bytes = snapshot_bytes
        self._lock = os.fdopen(lock, "r+")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            self._lock.close()
            raise StorageError(f"database {self.path} is open in another process",
                               path=str(self.path)) from exc
        self.generation = 0
        self._fd: int | None = None
        self._size = 0
        self._broken: str | None = None
        self._retry_at = 0  # log size at which a snapshot that failed is tried again

    # ------------------------------------------------------------------ files
    def _wal_path(self, gen: int) -> Path:
        return self.path / f"wal-{gen:06d}.log"

    def _snapshot_path(self, gen: int) -> Path:
        return self.path / f"snapshot-{gen:06d}.upk"

    def _generations(self) -> tuple[set[int], set[int]]:
        snapshots, wals = set(), set()
        for p in self.path.iterdir():
            if m := _GENERATION.match(p.name):
                (snapshots if m.group(1) == "snapshot" else wals).add(int(m.group(2)))
        if any(self.path.glob("snapshot-*.pkl")) or self._old_log():
            raise StorageError(f"database {self.path} was written by an older upkeep (pickle "
                               "format); export it with that version and load it again",
                               path=str(self.path))
        return snapshots, wals

    def _old_log(self) -> bool:
        """A log of the pickle format: a frame header, then a pickle's protocol mark."""
        for p in self.path.glob("wal-*.log"):
            with open(p, "rb") as f:
                head = f.read(len(LOG_MAGIC))
            if head[8:9] == b"\x80" and not head.startswith(LOG_MAGIC):
                return True
        return False

    # ------------------------------------------------------------------ reading
    def load(self) -> tuple[tuple[dict, Iterator[object]] | None, list[object]]:
        """The latest snapshot (its manifest and an iterator over its chunks, or None) and
        the log records after it, in order; cuts a torn tail, refuses damage."""
        snapshots, wals = self._generations()
        base = max(snapshots, default=0)
        for gen in (g for g in wals if g < base):  # covered by snapshot ``base``
            self._wal_path(gen).unlink()
        for gen in (g for g in snapshots if g < base):
            self._snapshot_path(gen).unlink()
        for tmp in self.path.glob("snapshot-*.tmp"):  # a snapshot never renamed in
            tmp.unlink()
        wals = {g for g in wals if g >= base}
        top = max(wals, default=base)
        if top > base and top - 1 in wals and self._header_only(self._wal_path(top)):
            self._wal_path(top).unlink()  # created by a rotation cut before its rename
            wals.discard(top)
            top -= 1
        missing = sorted(set(range(base, top + 1)) - wals) if wals or base else []
        if missing:
            gone = (self._snapshot_path(min(wals)) if missing[0] == 0 and wals
                    else self._wal_path(missing[0]))
            raise DamagedStorageError(
                f"database {self.path} is incomplete: {gone.name} is missing, so the "
                "records after it cannot be placed", path=str(gone))
        later = sorted(wals)
        snapshot = self._read_snapshot(self._snapshot_path(base)) if base else None
        records: list[object] = []
        for gen in later:
            records.extend(self._read_log(self._wal_path(gen), last=gen == later[-1]))
        self.generation = later[-1] if later else base
        self._open_log(self.generation)
        return snapshot, records

    def _header_only(self, path: Path) -> bool:
        return path.stat().st_size <= len(LOG_MAGIC)

    def _read_log(self, path: Path, last: bool) -> list[object]:
        data = path.read_bytes()
        if len(data) < len(LOG_MAGIC) and LOG_MAGIC.startswith(data):
            return []  # cut while its header was written
        if not data.startswith(LOG_MAGIC):
            raise DamagedStorageError(f"{path}: not an upkeep log", path=str(path), offset=0)
        scan = scan_log(data)
        if scan.damaged:
            offset = scan.damaged[0][0]
            raise DamagedStorageError(
                f"{path} is damaged at byte {offset} ({len(scan.records)} intact records "
                f"before it, {len(data) - offset} bytes after): run `upkeep repair "
                f"{self.path}` to keep the intact records before it", path=str(path), offset=offset)
        if scan.torn and not last:
            raise DamagedStorageError(f"{path} ends in a torn record at byte {scan.end} but "
                                      "a later log follows it", path=str(path), offset=scan.end)
        if scan.torn:  # the commit that wrote it never returned: cut it
            with open(path, "r+b") as f:
                f.truncate(scan.end)
                f.flush()
                os.fsync(f.fileno())
        out = []
        for offset, payload in scan.records:
            try:
                out.append(decode(payload))
            except ValueError as exc:
                raise DamagedStorageError(f"{path}: the record at byte {offset} cannot be "
                                          f"read: {exc}", path=str(path), offset=offset) from None
        return out

    def _read_snapshot(self, path: Path) -> tuple[dict, Iterator[object]]:
        f = open(path, "rb")  # noqa: SIM115 - closed by the chunk iterator
        try:
            if f.read(len(SNAPSHOT_MAGIC)) != SNAPSHOT_MAGIC:
                raise DamagedStorageError(f"{path}: not an upkeep snapshot", path=str(path),
                                          offset=0)
            manifest = _read_frame(f, path)
        except BaseException:
            f.close()
            raise
        if not isinstance(manifest, dict):
            f.close()
            raise DamagedStorageError(f"{path}: its first frame is not a manifest",
                                      path=str(path), offset=len(SNAPSHOT_MAGIC))
        return manifest, _chunks(f, path)

    # ------------------------------------------------------------------ writing
    def _open_log(self, gen: int) -> None:
        path = self._wal_path(gen)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        size = os.fstat(fd).st_size
        if size < len(LOG_MAGIC):
            os.ftruncate(fd, 0)
            _write_all(fd, LOG_MAGIC)
            os.fsync(fd)
            size = len(LOG_MAGIC)
        if self._fd is not None:
            os.close(self._fd)
        self._fd, self._size = fd, size

    def append(self, record: object) -> None:
        """Write one record and make it durable before the commit is acknowledged; on any
        failure the log is left exactly as it was and :class:`StorageError` is raised."""
        payload = frame(encode(record))  # a value that cannot be stored fails here
        if self._broken:
            raise StorageError(self._broken, path=str(self._wal_path(self.generation)))
        if self._fd is None:
            raise StorageError(f"database {self.path} is closed")
        start = self._size
        try:
            _write_all(self._fd, payload)
            if self.fsync:
                os.fsync(self._fd)
        except OSError as exc:
            where = self._wal_path(self.generation)
            try:
                os.ftruncate(self._fd, start)
                os.fsync(self._fd)
            except OSError as again:
                self._broken = (f"the log {where} could not be restored after a failed write "
                                f"({again}); reopen the database to recover")
            raise StorageError(f"could not write the log {where}: {exc}; the batch was not "
                               "committed", path=str(where), offset=start) from None
        self._size = start + len(payload)

    def wants_snapshot(self) -> bool:
        return self._fd is not None and self._size >= max(self.snapshot_bytes,
                                                            self._retry_at)

    def snapshot(self, manifest: dict, chunks: Iterable[object]) -> None:
        """Write generation ``N+1``: the snapshot (``manifest`` then every chunk) and its empty
        log; then drop generation ``N``.  On failure nothing changes on disk or here, and
        :class:`StorageError` is raised (the records stay in the current log)."""
        gen = self.generation + 1
        tmp = self.path / f"snapshot-{gen:06d}.tmp"
        target, new_wal = self._snapshot_path(gen), self._wal_path(gen)
        try:
            count = 0
            with _Writer(tmp) as out:
                out.put(SNAPSHOT_MAGIC)
                out.put(frame(encode(manifest)))
                for chunk in chunks:
                    out.put(frame(encode(chunk)))
                    count += 1
                out.put(frame(encode((_END, count))))
            with _Writer(new_wal) as out:
                out.put(LOG_MAGIC)
            os.replace(tmp, target)
        except (OSError, Error) as exc:
            for leftover in (tmp, new_wal):
                leftover.unlink(missing_ok=True)
            self._retry_at = self._size + self.snapshot_bytes
            raise StorageError(f"could not write snapshot {target}: {exc}; the database "
                               "goes on with its log", path=str(target)) from None
        try:
            self._sync_directory()
        except OSError as exc:  # the rename may not last: keep what it replaces
            self._switch(gen, drop_old=False)
            raise StorageError(f"snapshot {target} was written but {self.path} could not "
                               f"be synced ({exc}); the previous generation stays until "
                               "the next open", path=str(target)) from None
        self._switch(gen, drop_old=True)

    def _switch(self, gen: int, drop_old: bool) -> None:
        old = self.generation
        self.generation = gen
        self._retry_at = 0  # a failure's later retry applied to the log it left only
        self._open_log(gen)
        if not drop_old:
            return
        for path in (self._snapshot_path(old), self._wal_path(old)):
            try:
                path.unlink(missing_ok=True)
            except OSError:
                pass  # removed on the next open

    def _sync_directory(self) -> None:
        sync_directory(self.path)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if not self._lock.closed:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()


def sync_directory(path: str | os.PathLike) -> None:
    """fsync a directory, so that the names just created or renamed in it survive a crash."""
    dir_fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _write_all(fd: int, data: bytes | bytearray) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class _Writer:
    """A new owner-only file written through a 1 MiB buffer and fsynced on a clean exit."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        self.buffer = bytearray()

    def put(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) >= 1 << 20:
            _write_all(self.fd, self.buffer)
            self.buffer.clear()

    def __enter__(self) -> _Writer:
        return self

    def __exit__(self, kind: object, *_: object) -> None:
        try:
            if kind is None:
                _write_all(self.fd, self.buffer)
                os.fsync(self.fd)
        finally:
            os.close(self.fd)


def _read_frame(f: BinaryIO, path: Path) -> object:
    """The next frame of a snapshot; damage (or a cut) raises with its offset."""
    offset = f.tell()
    head = f.read(_HEADER.size)
    if len(head) < _HEADER.size:
        raise DamagedStorageError(f"{path} is cut short at byte {offset}", path=str(path),
                                  offset=offset)
    header = _header(head)
    payload = f.read(header[0]) if header is not None else b""
    if header is None or len(payload) < header[0] or zlib.crc32(payload) != header[1]:
        raise DamagedStorageError(f"{path} is damaged at byte {offset}", path=str(path),
                                  offset=offset)
    try:
        return decode(payload)
    except ValueError as exc:
        raise DamagedStorageError(f"{path}: the frame at byte {offset} cannot be read: {exc}",
                                  path=str(path), offset=offset) from None


def _chunks(f: BinaryIO, path: Path) -> Iterator[object]:
    """A snapshot's chunks up to its end frame, which must be its last bytes."""
    with f:
        count = 0
        while True:
            value = _read_frame(f, path)
            if isinstance(value, tuple) and value and value[0] == _END:
                if value != (_END, count) or f.read(1):
                    raise DamagedStorageError(f"{path}: its end frame does not match",
                                              path=str(path), offset=f.tell())
                return
            count += 1
            yield value


@dataclass
class RepairReport:
    """What :func:`repair` kept and dropped, per log file."""

    kept: int = 0
    dropped: list[tuple[str, int, int]] = field(default_factory=list)  # (file, offset, bytes)
    torn: int = 0
    #: intact records dropped because they follow damage: (file, how many)
    after_damage: list[tuple[str, int]] = field(default_factory=list)


def repair(path: str | os.PathLike) -> RepairReport:
    """Rewrite the damaged log of database ``path`` with its intact records before the
    first damage (in order), and report what was dropped.  Intact records after the damage
    are dropped too: one may depend on a lost record (a batch on a table whose declaration
    was lost, a delete of rows a lost batch inserted), so replaying them could make a state
    no sequence of commits made.  A damaged snapshot cannot be repaired: it raises
    :class:`DamagedStorageError` (restore the directory from a backup)."""
    storage = Storage(path)
    report = RepairReport()
    try:
        snapshots, wals = storage._generations()
        if snapshots:  # a damaged snapshot raises here: only a backup restores it
            _, chunks = storage._read_snapshot(storage._snapshot_path(max(snapshots)))
            for _ in chunks:
                pass
        damaged = False
        for gen in sorted(wals):
            wal = storage._wal_path(gen)
            data = wal.read_bytes()
            if not data.startswith(LOG_MAGIC):
                raise DamagedStorageError(f"{wal}: not an upkeep log", path=str(wal), offset=0)
            scan = scan_log(data, resync=True)
            first = scan.damaged[0][0] if scan.damaged else len(data)
            kept = [] if damaged else [p for offset, p in scan.records if offset < first]
            if len(kept) < len(scan.records):
                report.after_damage.append((wal.name, len(scan.records) - len(kept)))
            report.kept += len(kept)
            report.torn += scan.torn
            report.dropped += [(wal.name, o, n) for o, n in scan.damaged]
            if scan.damaged or scan.torn or len(kept) < len(scan.records):
                tmp = wal.with_suffix(".repair")
                with _Writer(tmp) as out:
                    out.put(LOG_MAGIC)
                    for payload in kept:
                        out.put(frame(payload))
                os.replace(tmp, wal)
                storage._sync_directory()
            damaged = damaged or bool(scan.damaged)
    finally:
        storage.close()
    return report
