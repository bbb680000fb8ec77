"""Bulk work runs with CPython's cyclic collector paused (``gc_pause.py``): a many-row batch
triggers no collection that would walk the tables' and views' state, subscribers run with
the collector as the caller keeps it, and a failed batch leaves it as it was."""

from __future__ import annotations

import gc
import weakref

import pytest

import upkeep
from upkeep.errors import Error
from upkeep.gc_pause import PAUSE_ROWS, gc_paused

ROWS = 5_000


@pytest.fixture
def db():
    db = upkeep.connect()
    db.execute("CREATE TABLE o (ok BIGINT PRIMARY KEY, cust BIGINT)")
    db.execute("CREATE TABLE l (ok BIGINT, n INTEGER, price DOUBLE)")
    db.insert("o", [(k, k % 7) for k in range(100)])
    db.create_view("v", "SELECT o.cust, l.n, l.price FROM o JOIN l ON o.ok = l.ok")
    return db


@pytest.fixture
def collections():
    """The generations of the collections run while the fixture is in use."""
    seen: list[int] = []

    def record(phase: str, info: dict) -> None:
        if phase == "start":
            seen.append(info["generation"])

    gc.callbacks.append(record)
    yield seen
    gc.callbacks.remove(record)


def _rows(start: int, count: int = ROWS) -> list[tuple]:
    return [(k % 100, k, float(k)) for k in range(start, start + count)]


def _collections_during(work, collections: list[int]) -> int:
    collections.clear()
    work()
    return len(collections)


def test_collections_during_a_statement_do_not_grow_with_its_rows(db, collections):
    """Paused, the collector runs once when each bulk step ends (over what the step left
    young), not every 700 allocations during it."""
    small, big = _rows(0, 500), _rows(500, 20 * ROWS)
    ran_small = _collections_during(lambda: db.insert("l", small), collections)
    ran_big = _collections_during(lambda: db.insert("l", big), collections)
    assert ran_big <= ran_small + 1
    assert gc.isenabled()
    assert len(db.view("v").rows()) == 500 + 20 * ROWS


def test_collections_during_a_transaction_do_not_grow_with_its_rows(db, collections):
    def transaction(first: list[tuple], second: list[tuple]):
        def run() -> None:
            with db.transaction():
                db.insert("l", first)
                db.insert("l", second)
        return run

    small = transaction(_rows(0, 250), _rows(250, 250))
    big = transaction(_rows(500, 10 * ROWS), _rows(500 + 10 * ROWS, 10 * ROWS))
    ran_small = _collections_during(small, collections)
    ran_big = _collections_during(big, collections)
    assert ran_big <= ran_small + 1
    assert len(db.view("v").rows()) == 500 + 20 * ROWS


def test_subscribers_run_with_the_collector_on(db):
    states: list[bool] = []
    db.view("v").subscribe(lambda changes: states.append(gc.isenabled()))
    db.insert("l", _rows(0))
    assert states == [True]


def test_a_caller_who_disabled_the_collector_keeps_it_disabled(db):
    gc.disable()
    try:
        db.insert("l", _rows(0))
        with gc_paused(ROWS):
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_small_work_leaves_the_collector_running():
    """Pausing for a few rows buys nothing; the pause starts at ``PAUSE_ROWS`` rows."""
    with gc_paused(PAUSE_ROWS - 1):
        assert gc.isenabled()
    with gc_paused(PAUSE_ROWS):
        assert not gc.isenabled()
        with gc_paused(PAUSE_ROWS):  # nested
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_failed_batch_leaves_the_collector_on(db):
    before = db.view("v").rows()
    with pytest.raises(Error):
        db.insert("l", _rows(0) + [(1, "not a number", 1.0)])
    with pytest.raises(Error):
        db.insert("o", [(k, 0) for k in range(1000, 1000 + ROWS)] + [(1, 1)])  # duplicate key
    assert gc.isenabled()
    assert db.view("v").rows() == before


def test_bulk_work_leaves_the_state_out_of_the_young_generations(db):
    """The view's dicts that a bulk batch gave new tuples are tracked again; they end the
    batch in the oldest generation, so the next young collections do not walk them."""
    db.create_view("w", "SELECT o.ok, o.cust, l.n, l.price FROM o JOIN l ON o.ok = l.ok",
                   strategy="dyn")
    gc.collect()  # state dicts holding only untracked tuples are untracked now
    db.insert("l", _rows(0))
    rep = db.local_catalog.runtime("w").rep
    state = [d for st in rep.states.values() for d in (st.rho, *(
        i.buckets for i in st.indexes.values())) if gc.is_tracked(d)]
    assert state, "the batch tracks some state dict again"
    young = {id(o) for g in (0, 1) for o in gc.get_objects(generation=g)}
    assert not any(id(d) in young for d in state)
    assert gc.isenabled()


def test_a_single_row_commit_leaves_young_garbage_to_the_collector(db):
    """Promotion is for bulk work only: a caller's young cyclic garbage is still collected
    by a young collection after a single-row commit."""
    class Cycle:
        pass

    garbage = Cycle()
    garbage.self = garbage
    alive = weakref.ref(garbage)
    del garbage
    db.insert("l", [(1, 1, 1.0)])
    gc.collect(0)
    assert alive() is None


def test_a_callers_frozen_objects_stay_frozen(db):
    """Bulk work promotes nothing while the caller has frozen objects: a frozen object stays
    in the permanent generation (promotion's ``unfreeze`` would move it to the oldest one).
    The freeze count itself may fall, as frozen objects that other code releases are freed."""
    kept = [object()]  # a tracked container the test holds
    gc.freeze()
    try:
        db.insert("l", _rows(0))
        assert gc.get_freeze_count() > 0
        assert not any(o is kept for o in gc.get_objects(generation=2))
    finally:
        gc.unfreeze()
    assert any(o is kept for o in gc.get_objects(generation=2))
    assert len(db.view("v").rows()) == ROWS


@pytest.mark.parametrize("strategy", ["dyn", "general"])
def test_single_row_commits_leave_the_state_out_of_the_young_generations(strategy):
    """A state dict of untracked tuples is never untracked by the collector (it is a
    ``StateDict``), so a single-row insert's new tuple does not put the whole dict back into
    the young generation, where every young collection would walk it."""
    db = upkeep.connect()
    db.execute("CREATE TABLE o (ok BIGINT PRIMARY KEY, cust BIGINT)")
    db.execute("CREATE TABLE l (ok BIGINT, n INTEGER, price DOUBLE)")
    db.insert("o", [(k, k % 7) for k in range(ROWS)])
    db.insert("l", [(k, k, float(k)) for k in range(ROWS)])
    db.create_view("w", "SELECT o.ok, COUNT(*) AS c, SUM(l.price) AS p "
                   "FROM o JOIN l ON o.ok = l.ok GROUP BY o.ok", strategy=strategy)
    db.create_view("j", "SELECT o.ok, o.cust, l.n FROM o JOIN l ON o.ok = l.ok",
                   strategy=strategy)
    gc.collect()
    for n in range(3):
        db.insert("l", [(n, ROWS + n, 0.5)])
        db.insert("o", [(ROWS + n, 1)])
    young = [o for g in (0, 1) for o in gc.get_objects(generation=g)]
    big = [len(o) for o in young if isinstance(o, dict) and len(o) >= ROWS]
    assert big == []
    assert len(db.view("j").rows()) == ROWS + 3


@pytest.mark.parametrize("mode", ["update", "update-naive"])
def test_provenance_tables_leave_their_state_out_of_the_young_generations(mode):
    """As above for a provenance table's column index and variable index: a full
    collection would untrack a plain dict of untracked row tuples, and the next row put
    into it (an UPDATE's new version, an inserted row's variable) would put it back, whole,
    into the youngest generation."""
    db = upkeep.connect()
    db.execute(f"CREATE TABLE r (k INTEGER PRIMARY KEY, v INTEGER) WITH (provenance = '{mode}')")
    db.insert("r", [(k, k % 7) for k in range(ROWS)])
    db.execute("DELETE FROM r WHERE k = 1")  # builds the index on k
    gc.collect()
    gc.disable()  # no collection moves anything on before the generations are read
    try:
        db.execute("UPDATE r SET v = 0 WHERE k = 2")
        db.insert("r", [(ROWS, 1)])
        young = [o for g in (0, 1) for o in gc.get_objects(generation=g)]
    finally:
        gc.enable()
    big = [len(o) for o in young if isinstance(o, dict) and len(o) >= ROWS]
    assert big == []
    # k 0..4 held v = k % 7; k = 1 deleted, k = 2 set to 0
    assert sorted(db.execute("SELECT k, v FROM r WHERE k < 5").fetchall()) == [
        (0, 0), (2, 0), (3, 3), (4, 4)]
