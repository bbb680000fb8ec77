"""Tables whose rows expire (``ttl_seconds``) with subscribers that read and write, and
the order in which subscribers are told of batches that subscribers commit."""

from __future__ import annotations

import warnings
from collections import Counter

import pytest

import upkeep


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def ttl_database(path=None) -> tuple[upkeep.Connection, Clock]:
    clock = Clock()
    db = upkeep.connect(path, clock=clock) if path else upkeep.connect(clock=clock)
    db.execute("CREATE TABLE t (k INTEGER, v INTEGER) WITH (ttl_seconds = 10)")
    db.execute("CREATE TABLE audit (n INTEGER)")
    db.execute("CREATE MATERIALIZED VIEW s AS SELECT COUNT(*) AS n FROM t")
    return db, clock


@pytest.mark.parametrize("durable", [False, True])
def test_a_subscriber_that_reads_and_writes_sees_one_expiry(tmp_path, durable) -> None:
    """Every read and write of a subscriber runs the expiry again: the rows it was told
    of must be gone by then, not deleted again (the count went to -993 and the caller got
    an IndexError)."""
    db, clock = ttl_database(tmp_path / "db" if durable else None)
    db.insert("t", [(1, 1), (2, 2)])
    told = []

    def react(changes) -> None:
        told.append(changes)
        db.view("s").rows()
        db.insert("audit", [(len(told),)])

    db.view("s").subscribe(react)
    clock.now = 1010
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a subscriber that raised is reported as a warning
        assert db.view("s").rows() == [(0,)]
    assert told == [[((2,), -1), ((0,), 1)]]
    assert db.execute("SELECT * FROM audit").fetchall() == [(1,)]
    assert db.batches == 3  # the insert, the expiry, the audit row
    if durable:
        db.close()
        db = upkeep.connect(tmp_path / "db", clock=clock)
        assert db.view("s").rows() == [(0,)]
        assert db.batches == 3


def test_delete_and_update_statements_match_the_rows_left_after_expiry() -> None:
    db, clock = ttl_database()
    db.insert("t", [(1, 1)])
    clock.now = 1005
    db.insert("t", [(2, 2)])
    clock.now = 1010  # (1, 1) is due
    assert db.execute("UPDATE t SET v = v + 100 WHERE k >= 1").rowcount == 1
    assert db.execute("SELECT * FROM t").fetchall() == [(2, 102)]
    clock.now = 1016
    db.insert("t", [(3, 3)])
    clock.now = 1020
    assert db.execute("DELETE FROM t WHERE v > 0").rowcount == 1
    assert db.execute("SELECT * FROM t").fetchall() == []


def test_why_does_not_explain_an_expired_row() -> None:
    db, clock = ttl_database()
    db.execute("CREATE MATERIALIZED VIEW w WITH (provenance = 'why') AS SELECT k FROM t")
    db.insert("t", [(1, 5)])
    assert db.why("w", (1,)).products == [[("t", (1, 5))]]
    clock.now = 1010
    with pytest.raises(upkeep.ProvenanceError, match="not in view w"):
        db.why("w", (1,))


def test_batches_a_subscriber_commits_reach_every_subscriber_after_the_batch_told() -> None:
    """The first subscriber of v commits a batch when told of one: the second subscriber
    (and a view over both tables) must still hear of the batches in commit order."""
    db = upkeep.connect()
    db.execute("CREATE TABLE t (a INTEGER)")
    db.execute("CREATE TABLE log (a INTEGER)")
    db.execute("CREATE MATERIALIZED VIEW v AS SELECT a FROM t")
    db.execute("CREATE MATERIALIZED VIEW both_ AS SELECT 't' AS src, a FROM t "
               "UNION ALL SELECT 'log', a FROM log")
    heard: list[tuple[str, list]] = []

    def first(changes) -> None:
        for (a,), _ in changes:
            if a < 100:
                db.insert("log", [(a,)])
                db.insert("t", [(a + 100,)])

    db.view("v").subscribe(first)
    db.view("v").subscribe(lambda changes: heard.append(("v", changes)))
    db.view("both_").subscribe(lambda changes: heard.append(("both_", changes)))
    db.insert("t", [(1,)])
    assert heard == [("v", [((1,), 1)]), ("both_", [(("t", 1), 1)]),
                     ("both_", [(("log", 1), 1)]),
                     ("v", [((101,), 1)]), ("both_", [(("t", 101), 1)])]


@pytest.mark.parametrize("writes", [False, True])
def test_a_subscriber_attached_while_batches_are_told_hears_only_later_ones(writes) -> None:
    """A subscriber attached inside another's callback starts from the view's rows, which
    hold the batch being told and any batch committed since (a subscriber's write, queued
    behind it): it must hear only of batches after those (it heard of them too, and its
    copy held a row twice, or lost one it never had)."""
    db = upkeep.connect()
    db.execute("CREATE TABLE t (a INTEGER)")
    db.execute("CREATE TABLE audit (a INTEGER)")
    db.execute("CREATE MATERIALIZED VIEW v AS SELECT a FROM t")
    db.execute("CREATE MATERIALIZED VIEW late AS SELECT a FROM t UNION ALL "
               "SELECT -a FROM audit")
    db.view("late").subscribe(lambda changes: None)  # told after v, of each batch
    copy: Counter = Counter()
    attached = []

    def watcher(changes) -> None:
        if writes:
            db.insert("audit", [(row[0],) for row, w in changes if w > 0])
        if not attached:
            copy.update(db.view("late").rows())
            attached.append(db.view("late").subscribe(
                lambda told: copy.update(dict(told))))

    db.view("v").subscribe(watcher)
    db.insert("t", [(5,)])
    assert +copy == Counter(db.view("late").rows())
    db.insert("t", [(6,)])
    assert +copy == Counter(db.view("late").rows())
    assert sorted(copy.elements()) == ([(-6,), (-5,), (5,), (6,)] if writes else [(5,), (6,)])


def test_a_snapshot_taken_by_an_expiry_commit_does_not_keep_its_timers(tmp_path) -> None:
    """A snapshot the expiry's own commit takes (the log has grown past ``snapshot_bytes``)
    held the tables without the expired rows but their timers still pending: reopened,
    they expired again, and the table held a row -1 times."""
    clock = Clock()
    db = upkeep.connect(tmp_path / "db", clock=clock, snapshot_bytes=1)
    db.execute("CREATE TABLE t (a INTEGER) WITH (ttl_seconds = 10)")
    db.create_view("v", "SELECT a, COUNT(*) AS c FROM t GROUP BY a")
    db.insert("t", [(1,)])
    clock.now = 1005
    db.insert("t", [(2,)])
    clock.now = 1011
    assert db.expire() == 1  # its commit takes a snapshot (every commit does here)
    db.close()
    db = upkeep.connect(tmp_path / "db", clock=clock, snapshot_bytes=1)
    clock.now = 1012
    assert db.expire() == 0
    assert db.execute("SELECT a FROM t").fetchall() == [(2,)]
    assert db.view("v").rows() == [(2, 1)]
    clock.now = 1016
    assert db.expire() == 1 and db.view("v").rows() == []


def test_a_row_inserted_after_the_clock_stepped_back_expires_when_due() -> None:
    """Timers are kept in order of their due times, not of their commits: after the clock
    stepped back (an NTP correction), a row inserted then is due before rows inserted
    earlier, and must go when its own time comes (it outlived them: the timers were a
    queue in commit order, and the first one was not due yet)."""
    db, clock = ttl_database()
    db.insert("t", [(1, 1)])  # due at 1010
    clock.now = 900  # the clock stepped back
    db.insert("t", [(2, 2)])  # due at 910
    clock.now = 911
    assert db.execute("SELECT * FROM t").fetchall() == [(1, 1)]
    assert db.view("s").rows() == [(1,)]
    clock.now = 1010
    assert db.execute("SELECT * FROM t").fetchall() == []
    assert db.view("s").rows() == [(0,)]


def test_a_hand_delete_after_the_clock_stepped_back_removes_the_soonest_timer() -> None:
    """Deleting one copy by hand cancels the copy due soonest, whatever the order of the
    commits that inserted them."""
    db, clock = ttl_database()
    db.insert("t", [(1, 1)])  # due at 1010
    clock.now = 900
    db.insert("t", [(1, 1)])  # due at 910
    db.delete("t", [(1, 1)])  # one copy
    clock.now = 911
    assert db.execute("SELECT * FROM t").fetchall() == [(1, 1)]
    clock.now = 1010
    assert db.execute("SELECT * FROM t").fetchall() == []


def test_a_copy_deleted_by_hand_before_the_clock_stepped_back_keeps_its_timer_cancelled(
) -> None:
    """A hand delete cancels a timer that exists when it commits: a copy inserted after the
    clock stepped back, due sooner, still expires at its own time."""
    db, clock = ttl_database()
    db.insert("t", [(1, 1)])  # due at 1010
    db.delete("t", [(1, 1)])
    clock.now = 900
    db.insert("t", [(1, 1)])  # due at 910
    clock.now = 911
    assert db.execute("SELECT * FROM t").fetchall() == []
    assert db.view("s").rows() == [(0,)]
