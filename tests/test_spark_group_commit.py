"""Group commit on the Spark engine: statements of several threads committed close together
share one micro-batch, each still atomic; a transaction belongs to its thread."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

import upkeep
from upkeep.spark.group_commit import GroupCommit


def _run_threads(targets) -> list[BaseException | None]:
    """Start one thread per target together; each one's exception (or None)."""
    errors: list[BaseException | None] = [None] * len(targets)
    start = threading.Barrier(len(targets))

    def run(i: int) -> None:
        start.wait()
        try:
            targets[i]()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            errors[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(targets))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
        assert not t.is_alive(), "a thread never finished"
    return errors


def test_concurrent_units_share_groups_and_fail_alone() -> None:
    groups: list[list[int]] = []

    def commit(units: list[int]) -> list[BaseException | None]:
        groups.append(list(units))
        time.sleep(0.05)  # the others queue meanwhile, however slowly they are scheduled
        return [ValueError(f"unit {u}") if u == 13 else None for u in units]

    group = GroupCommit(commit, window=0.05)
    errors = _run_threads([lambda u=u: group.submit(u) for u in range(20)])
    assert sorted(u for g in groups for u in g) == list(range(20))  # each exactly once
    assert len(groups) < 20
    assert [str(e) if e else None for e in errors] == [
        "unit 13" if u == 13 else None for u in range(20)]


def test_a_failed_commit_fails_its_whole_group_and_the_next_one_runs() -> None:
    calls = []

    def commit(units: list[str]) -> list[BaseException | None]:
        calls.append(units)
        if len(calls) == 1:
            raise OSError("disk full")
        return [None] * len(units)

    group = GroupCommit(commit)
    with pytest.raises(OSError, match="disk full"):
        group.submit("a")
    group.submit("b")
    assert calls == [["a"], ["b"]]
    with pytest.raises(ValueError, match="window"):
        GroupCommit(commit, window=-1)


def test_threads_share_micro_batches_each_statement_atomic(spark, tmp_path) -> None:
    """A bad statement in a group fails alone; a transaction belongs to its thread."""
    db = upkeep.connect(engine="spark", spark=spark, shards=1, database=tmp_path / "db",
                        commit_window=0.5)
    db.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, g VARCHAR)")
    db.create_view("per_g", "SELECT g, COUNT(*) AS n FROM t GROUP BY g")
    db.insert("t", [(0, "a")])
    files = len(list((tmp_path / "db" / "changes").glob("changes-*.jsonl")))

    def writer(i: int):
        def run() -> None:
            for j in range(3):
                db.execute(f"INSERT INTO t VALUES ({10 * i + j + 1}, '{'ab'[i % 2]}')")
        return run

    def bad() -> None:
        db.delete("t", [(999, "a")])  # not present: rejects this statement only

    errors = _run_threads([writer(i) for i in range(3)] + [bad])
    assert all(e is None for e in errors[:3]), errors
    assert isinstance(errors[3], upkeep.ConstraintError)
    assert Counter(db.view("per_g").rows()) == Counter([("a", 1 + 6), ("b", 3)])
    # one file per group, and per statement of the group the bad one was in (re-run
    # alone); one file per statement without groups
    written = len(list((tmp_path / "db" / "changes").glob("changes-*.jsonl"))) - files
    assert written < 3 * 3, written

    # a transaction belongs to the thread that opened it
    staged, go = threading.Event(), threading.Event()

    def in_transaction() -> None:
        with db.transaction():
            db.insert("t", [(100, "c")])
            staged.set()
            assert go.wait(600)

    def autocommit() -> None:
        assert staged.wait(600)
        assert not db.in_transaction()
        db.insert("t", [(101, "d")])
        assert ("c", 1) not in db.view("per_g").rows()  # the open transaction's row
        go.set()

    assert _run_threads([in_transaction, autocommit]) == [None, None]
    assert {("c", 1), ("d", 1)} <= set(db.view("per_g").rows())
    db.close()
