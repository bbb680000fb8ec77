"""Storage under faults (issue 18): a disk that fails any write or fsync (whole or after a
prefix), a flipped byte at every position class of the log and of a snapshot, a deleted
snapshot, a rotation cut short.  No acknowledged batch is lost, no rejected batch comes
back, and damage is always reported (``upkeep repair`` keeps the intact records before
the damage)."""

from __future__ import annotations

import errno
import os
import shutil
import warnings
from collections import Counter
from pathlib import Path

import duckdb
import pytest

import upkeep
from upkeep.cli import main as cli_main
from upkeep.storage import LOG_MAGIC, SNAPSHOT_MAGIC, StorageError, scan_log


class FailingDisk:
    """Fails the ``at``-th I/O call (os.write, os.fsync, os.ftruncate, os.replace) on files
    under ``root`` with ENOSPC, optionally after writing half of the data for real; with
    ``at`` None it only counts the calls."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
        self.root = str(root)
        self.at: int | None = None
        self.calls = 0
        self.partial = False
        self.fired = 0
        self.repeat = 1  # how many calls in a row fail once the first one does
        self.kinds: tuple[str, ...] = ("write", "fsync", "ftruncate", "replace")
        real = {name: getattr(os, name) for name in ("write", "fsync", "ftruncate", "replace")}

        def under_root(target: object) -> bool:
            if isinstance(target, int):
                try:
                    target = os.readlink(f"/proc/self/fd/{target}")
                except OSError:
                    return False
            return str(target).startswith(self.root)

        def fail_now(target: object, kind: str) -> bool:
            if not under_root(target):
                return False
            self.calls += 1
            if self.at is None or self.fired >= self.repeat or kind not in self.kinds:
                return False
            if self.calls >= self.at:
                self.fired += 1
                return True
            return False

        def write(fd: int, data: bytes) -> int:
            if fail_now(fd, "write"):
                if self.partial and len(data) > 1:
                    real["write"](fd, bytes(data[:len(data) // 2]))
                raise OSError(errno.ENOSPC, "No space left on device")
            return real["write"](fd, data)

        def simple(name: str):
            def call(target, *args):
                if fail_now(target, name):
                    raise OSError(errno.ENOSPC, "No space left on device")
                return real[name](target, *args)
            return call

        monkeypatch.setattr(os, "write", write)
        for name in ("fsync", "ftruncate", "replace"):
            monkeypatch.setattr(os, name, simple(name))

    def arm(self, at: int | None, partial: bool = False, repeat: int = 1,
            kinds: tuple[str, ...] = ("write", "fsync", "ftruncate", "replace")) -> None:
        """Fail from the ``at``-th call on, ``repeat`` calls of the ``kinds`` given."""
        self.at, self.partial, self.repeat, self.kinds = at, partial, repeat, kinds
        self.calls = self.fired = 0


SCHEMA = "CREATE TABLE t (k INTEGER, v VARCHAR)"
VIEW = "CREATE MATERIALIZED VIEW per_v AS SELECT v, COUNT(*) AS n, SUM(k) AS s FROM t GROUP BY v"


def rows_of(i: int) -> list[tuple]:
    return [(i * 10 + j, f"g{(i + j) % 3}") for j in range(3)]


def fresh(path: Path, snapshot_bytes: int = 1 << 30, batches: int = 3) -> upkeep.Connection:
    db = upkeep.connect(path, snapshot_bytes=snapshot_bytes)
    db.execute(SCHEMA)
    db.execute(VIEW)
    for i in range(batches):
        db.insert("t", rows_of(i))
    return db


def check(db: upkeep.Connection, batches: list[int], label: str) -> None:
    """The table holds exactly ``batches``' rows and the view equals DuckDB on it."""
    expected = Counter(r for i in batches for r in rows_of(i))
    assert Counter(db.execute("SELECT * FROM t").fetchall()) == expected, label
    con = duckdb.connect()
    con.execute(SCHEMA)
    if expected:
        con.executemany("INSERT INTO t VALUES (?, ?)", list(expected.elements()))
    want = Counter(con.execute("SELECT v, COUNT(*), SUM(k) FROM t GROUP BY v").fetchall())
    assert Counter(db.view("per_v").rows()) == want, label


def io_points(disk: FailingDisk, tmp_path: Path, snapshot_bytes: int) -> int:
    """How many I/O calls one commit makes (counted, none failed)."""
    db = fresh(tmp_path / "count", snapshot_bytes)
    disk.arm(None)
    db.insert("t", rows_of(3))
    db.close()
    return disk.calls


@pytest.mark.parametrize("snapshot_bytes", [1 << 30, 1], ids=["log", "log+snapshot"])
@pytest.mark.parametrize("partial", [False, True], ids=["fails", "half-written"])
def test_a_full_disk_at_any_write_loses_and_revives_nothing(monkeypatch, tmp_path,
                                                            snapshot_bytes, partial) -> None:
    disk = FailingDisk(monkeypatch, tmp_path)
    points = io_points(disk, tmp_path, snapshot_bytes)
    assert points >= (2 if snapshot_bytes > 1 else 7)  # log write+fsync (+ snapshot's)
    for at in range(1, points + 1):
        path = tmp_path / f"db{at}"
        db = fresh(path, snapshot_bytes)
        disk.arm(at, partial)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                db.insert("t", rows_of(3))
                accepted = True
            except upkeep.Error as exc:
                assert isinstance(exc, upkeep.StorageError), exc
                assert "not committed" in str(exc)
                accepted = False
        assert disk.fired == 1, at
        disk.arm(None)
        if at <= 2:  # the log's own write and fsync: the commit is refused
            assert not accepted, at
        else:  # a snapshot after the commit: acknowledged, reported as a warning
            assert accepted and any(issubclass(w.category, upkeep.StorageWarning)
                                    for w in caught), at
        kept = [0, 1, 2] + ([3] if accepted else [])
        check(db, kept, f"in memory after a failure at I/O call {at}")
        db.insert("t", rows_of(4))  # the database goes on writing
        db.close()
        db = upkeep.connect(path, snapshot_bytes=snapshot_bytes)
        check(db, kept + [4], f"reopened after a failure at I/O call {at}")
        db.insert("t", rows_of(5))
        db.close()
        db = upkeep.connect(path)
        check(db, kept + [4, 5], f"reopened twice after a failure at I/O call {at}")
        db.close()
        shutil.rmtree(path)


def test_a_log_that_cannot_be_restored_refuses_writes_until_reopened(monkeypatch,
                                                                     tmp_path) -> None:
    disk = FailingDisk(monkeypatch, tmp_path)
    path = tmp_path / "db"
    db = fresh(path)
    disk.arm(1, partial=True, repeat=3)  # the write fails half-way, so does the truncate
    with pytest.raises(upkeep.StorageError, match="not committed"):
        db.insert("t", rows_of(3))
    disk.arm(None)
    with pytest.raises(upkeep.StorageError, match="reopen"):
        db.insert("t", rows_of(4))
    check(db, [0, 1, 2], "after the refused writes")
    db.close()
    db = upkeep.connect(path)  # the half-written frame is a torn tail: cut
    check(db, [0, 1, 2], "reopened")
    db.close()


def test_metadata_that_cannot_be_stored_rejects_the_batch(tmp_path) -> None:
    db = fresh(tmp_path / "db")
    with pytest.raises(upkeep.Error, match="cannot be stored"):
        with db.transaction(metadata={"offset": object()}):
            db.insert("t", rows_of(3))
    check(db, [0, 1, 2], "after the rejected batch")
    db.close()
    db = upkeep.connect(tmp_path / "db")
    check(db, [0, 1, 2], "reopened")
    db.close()


# ---------------------------------------------------------------- damaged logs
def thirty_records(path: Path) -> tuple[Path, list[tuple[int, bytes]]]:
    """A database whose log holds the table and view records and 30 single-row batches."""
    db = upkeep.connect(path)
    db.execute(SCHEMA)
    db.execute(VIEW)
    for i in range(30):
        db.insert("t", [(i, f"g{i % 3}")])
    db.close()
    wal = next(path.glob("wal-*.log"))
    return wal, scan_log(wal.read_bytes()).records


def flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x10
    path.write_bytes(bytes(data))


def position_classes(records: list[tuple[int, bytes]], index: int) -> dict[str, int]:
    offset, payload = records[index]
    return {"length": offset + 1, "payload crc": offset + 5, "header crc": offset + 9,
            "payload start": offset + 12, "payload middle": offset + 12 + len(payload) // 2,
            "payload end": offset + 12 + len(payload) - 1}


@pytest.mark.parametrize("which", ["middle", "last"])
def test_a_flipped_byte_in_the_log_is_reported_never_cut(tmp_path, which) -> None:
    wal, records = thirty_records(tmp_path / "orig")
    index = 16 if which == "middle" else len(records) - 1
    classes = position_classes(records, index) | ({"magic": 3} if which == "middle" else {})
    for name, offset in classes.items():
        path = tmp_path / f"{which}-{name.replace(' ', '-')}"
        shutil.copytree(tmp_path / "orig", path)
        target = path / wal.name
        flip(target, offset)
        before = target.read_bytes()
        with pytest.raises(upkeep.DamagedStorageError) as info:
            upkeep.connect(path)
        assert info.value.path == str(target), name
        assert wal.name in str(info.value), name
        if name != "magic":
            assert info.value.offset == records[index][0], name
            assert "upkeep repair" in str(info.value), name
        assert target.read_bytes() == before, f"{name}: the damaged log was rewritten"


def test_repair_keeps_the_records_before_the_damage_and_reports_the_rest(tmp_path,
                                                                        capsys) -> None:
    path = tmp_path / "db"
    wal, records = thirty_records(path)
    assert len(records) == 32  # table, view, 30 batches
    flip(wal, records[16][0] + 20)  # the batch inserting row 14
    assert cli_main(["repair", str(path)]) == 0
    out = capsys.readouterr().out
    assert "kept 16 intact record(s)" in out
    assert f"dropped {len(records[16][1]) + 12} damaged byte(s) of {wal.name} at byte " \
           f"{records[16][0]}" in out
    assert f"dropped 15 intact record(s) of {wal.name} after the damage" in out
    db = upkeep.connect(path)
    assert sorted(db.execute("SELECT k FROM t").fetchall()) == [(i,) for i in range(14)]
    db.close()
    assert cli_main(["repair", str(path)]) == 0
    assert "nothing was damaged" in capsys.readouterr().out


def test_repair_of_a_lost_table_declaration_leaves_a_database_that_opens(tmp_path,
                                                                          capsys) -> None:
    """Records after the damage may depend on the lost one: here every batch inserts into
    the table whose declaration was damaged, so keeping them made a log that could not be
    opened (a raw KeyError) and kept the lock."""
    path = tmp_path / "db"
    wal, records = thirty_records(path)
    flip(wal, records[0][0] + 20)  # the CREATE TABLE record
    with pytest.raises(upkeep.DamagedStorageError):
        upkeep.connect(path)
    assert cli_main(["repair", str(path)]) == 0  # the failed open released the directory
    assert "kept 0 intact record(s)" in capsys.readouterr().out
    db = upkeep.connect(path)
    assert db.tables() == []
    db.close()


def test_a_torn_tail_is_cut_and_a_zeroed_tail_too(tmp_path) -> None:
    wal, records = thirty_records(tmp_path / "orig")
    last_offset, payload = records[-1]
    for name, mangle in {
        "cut in the payload": lambda d: d[:-3],
        "cut in the header": lambda d: d[:last_offset + 5],
        "payload zeroed": lambda d: d[:-16] + bytes(16),
        "whole frame zeroed": lambda d: d[:last_offset] + bytes(len(d) - last_offset),
    }.items():
        path = tmp_path / name.replace(" ", "-")
        shutil.copytree(tmp_path / "orig", path)
        target = path / wal.name
        target.write_bytes(mangle(target.read_bytes()))
        db = upkeep.connect(path)
        assert sorted(db.execute("SELECT k FROM t").fetchall()) == [(i,) for i in range(29)]
        db.insert("t", [(99, "g0")])
        db.close()
        assert target.read_bytes()[:last_offset] == wal.read_bytes()[:last_offset]
        db = upkeep.connect(path)
        assert (99,) in db.execute("SELECT k FROM t").fetchall(), name
        db.close()


# ---------------------------------------------------------------- snapshots
def checkpointed(path: Path) -> Path:
    db = fresh(path, batches=5)
    db.checkpoint()
    db.insert("t", rows_of(5))  # one batch in the new log
    db.close()
    (snapshot,) = path.glob("snapshot-*.upk")
    return snapshot


def test_a_checkpointed_database_recovers_snapshot_and_log(tmp_path) -> None:
    path = tmp_path / "db"
    snapshot = checkpointed(path)
    assert snapshot.read_bytes().startswith(SNAPSHOT_MAGIC)
    assert b"\x80\x05" not in snapshot.read_bytes()[:len(SNAPSHOT_MAGIC) + 14]  # not pickle
    db = upkeep.connect(path)
    check(db, list(range(6)), "reopened")
    db.close()
    assert path.stat().st_mode & 0o077 == 0  # owner-only, as every file in it
    assert all(p.stat().st_mode & 0o077 == 0 for p in path.iterdir())


def test_a_damaged_or_missing_snapshot_is_reported(tmp_path) -> None:
    snapshot = checkpointed(tmp_path / "orig")
    size = snapshot.stat().st_size
    offsets = {"magic": 2, "manifest header": len(SNAPSHOT_MAGIC) + 1,
               "manifest": len(SNAPSHOT_MAGIC) + 20, "rows": size // 2 + 10,
               "end frame": size - 2}
    for name, offset in offsets.items():
        path = tmp_path / name.replace(" ", "-")
        shutil.copytree(tmp_path / "orig", path)
        flip(path / snapshot.name, offset)
        with pytest.raises(upkeep.DamagedStorageError) as info:
            upkeep.connect(path)
        assert snapshot.name in str(info.value), name
    for name, mangle in {"cut": lambda p: p.write_bytes(p.read_bytes()[:size // 2]),
                         "deleted": lambda p: p.unlink()}.items():
        path = tmp_path / name
        shutil.copytree(tmp_path / "orig", path)
        mangle(path / snapshot.name)
        with pytest.raises(upkeep.DamagedStorageError, match=snapshot.name):
            upkeep.connect(path)


def test_a_rotation_cut_short_leaves_a_database_that_opens(tmp_path) -> None:
    path = tmp_path / "db"
    snapshot = checkpointed(path)
    gen = int(snapshot.stem.split("-")[1])
    # a crash after the next snapshot's temporary file and log were written, before the
    # rename: both are dropped on open
    (path / f"snapshot-{gen + 1:06d}.tmp").write_bytes(b"partial")
    (path / f"wal-{gen + 1:06d}.log").write_bytes(LOG_MAGIC)
    db = upkeep.connect(path)
    check(db, list(range(6)), "after a rotation cut before its rename")
    db.close()
    assert not list(path.glob("*.tmp")) and not (path / f"wal-{gen + 1:06d}.log").exists()
    # a crash after the rename, before the old generation was removed: snapshot ``gen``
    # covers it, so it is dropped unread
    (path / f"wal-{gen - 1:06d}.log").write_bytes(b"whatever was here")
    db = upkeep.connect(path)
    check(db, list(range(6)), "after a rotation cut before the old files went")
    db.close()


def test_a_directory_of_the_pickle_format_is_refused_with_a_message(tmp_path) -> None:
    path = tmp_path / "db"
    path.mkdir()
    (path / "wal-000000.log").write_bytes(b"\x00\x00\x00\x10\x12\x34\x56\x78\x80\x05rest")
    with pytest.raises(upkeep.StorageError, match="older upkeep"):
        upkeep.connect(path)


def test_repair_refuses_a_directory_that_holds_no_database(tmp_path, capsys) -> None:
    """It made any empty directory a database ("kept 0 intact record(s)")."""
    assert cli_main(["repair", str(tmp_path)]) == 1
    assert "holds no upkeep database" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_failed_snapshot_delays_only_the_next_one(tmp_path, monkeypatch) -> None:
    """A snapshot that fails is tried again after another ``snapshot_bytes`` of log; once
    one succeeds, logs are snapshotted at ``snapshot_bytes`` again (the raised threshold
    stayed for good, so each disk-full event let every later log grow further)."""
    import upkeep.storage as storage

    limit = 20_000
    path = tmp_path / "db"
    db = upkeep.connect(path, fsync=False, snapshot_bytes=limit)
    db.execute("CREATE TABLE r (a INTEGER, b INTEGER)")
    real_replace, failures = os.replace, [1]

    def replace_failing_once(source, target, *args, **kwargs):
        if failures[0] and str(source).endswith(".tmp"):
            failures[0] -= 1
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_replace(source, target, *args, **kwargs)

    monkeypatch.setattr(storage.os, "replace", replace_failing_once)
    largest, i = 0, 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(1_500):
            db.insert("r", [(i, i)])
            db.delete("r", [(i, i)])
            i += 1
            largest = max([largest] + [p.stat().st_size for p in path.glob("wal-*.log")])
    assert failures == [0]
    assert largest > 1.5 * limit  # the log the failure left grew on to its retry
    db.checkpoint()
    largest = 0
    for _ in range(1_000):
        db.insert("r", [(i, i)])
        db.delete("r", [(i, i)])
        i += 1
        largest = max([largest] + [p.stat().st_size for p in path.glob("wal-*.log")])
    assert largest < 1.2 * limit
    db.close()


def test_a_create_table_as_that_failed_leaves_its_name_free_after_reopening(
        monkeypatch, tmp_path) -> None:
    """A CREATE TABLE AS whose fill and then whose clean-up record failed to be written
    (a full disk; the log cut back each time) left a declared, unfilled table in the log;
    the name, used again and acknowledged, made reopening fail ("a table or view named t
    already exists")."""
    real_write = os.write
    failing = [False]

    def write(fd: int, data: bytes) -> int:
        if failing[0]:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    db = upkeep.connect(tmp_path / "db")
    db.execute("CREATE TABLE a (k INTEGER)")
    db.execute("INSERT INTO a VALUES (1), (2)")
    storage = db._durability.storage
    append = storage.append

    def append_then_fill_the_disk(record: tuple) -> None:
        append(record)
        if record[0] == "table_as":  # the declaration is written, then the disk is full
            failing[0] = True

    monkeypatch.setattr(os, "write", write)
    monkeypatch.setattr(storage, "append", append_then_fill_the_disk)
    with pytest.raises(StorageError):
        db.execute("CREATE TABLE t AS SELECT k FROM a")
    failing[0] = False
    assert db.tables() == ["a"]
    db.execute("CREATE TABLE t (x INTEGER)")
    db.execute("INSERT INTO t VALUES (42)")
    db.close()
    again = upkeep.connect(tmp_path / "db")
    assert sorted(again.tables()) == ["a", "t"]
    assert again.execute("SELECT * FROM t").fetchall() == [(42,)]
    again.close()


@pytest.mark.parametrize("snapshot_bytes", [1 << 30, 1], ids=["log", "log+snapshot"])
def test_a_create_table_as_refused_by_a_full_disk_is_gone_after_reopening(
        monkeypatch, tmp_path, snapshot_bytes) -> None:
    """The disk fills at any I/O call of a ``CREATE TABLE .. AS`` and stays full (every
    later write fails): a statement that raised leaves no table, in memory or after
    reopening.  (A snapshot taken
    by the statement's own batch replaced the log record that marks the table unfinished,
    and the drop logged after the failure could not be written: the table came back.)"""
    disk = FailingDisk(monkeypatch, tmp_path)
    statement = "CREATE TABLE copy AS SELECT * FROM t"
    counting = fresh(tmp_path / "count", snapshot_bytes)
    disk.arm(None)
    counting.execute(statement)
    counting.close()
    points = disk.calls
    for at in range(1, points + 1):
        path = tmp_path / f"db{at}"
        db = fresh(path, snapshot_bytes)
        disk.arm(at, repeat=1 << 20, kinds=("write",))  # full from there on
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", upkeep.StorageWarning)
            try:
                db.execute(statement)
                returned = True
            except upkeep.StorageError:
                returned = False
        assert sorted(db.tables()) == (["copy", "t"] if returned else ["t"]), at
        disk.arm(None)
        db.close()
        db = upkeep.connect(path)
        assert sorted(db.tables()) == (["copy", "t"] if returned else ["t"]), at
        check(db, [0, 1, 2], f"reopened after a failure at I/O call {at}")
        db.close()
        shutil.rmtree(path)
