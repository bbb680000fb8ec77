"""Staging inside a transaction costs O(rows staged), whatever the number of calls.

Work is counted, not timed: the rows :class:`Staging` examines, and the Python line events
``sys.settrace`` sees while staging (a loop over staged rows in any interpreted module shows
up there).  Staging that re-checked or copied the whole pending change on every call would
grow quadratically: 20 times the calls would cost about 400 times the events.  The modules
a change passes through are compiled (``setup.py``), which the tracer does not see: then
only a few stray events remain, and the ratios are taken over a floor of
:data:`EVENTS_FLOOR` events, far below what quadratic interpreted work would make.
"""

from __future__ import annotations

import sys

import pytest

import upkeep
from upkeep.errors import ConstraintError

#: the events below which a run counts as doing no interpreted work per call (one event
#: a call of the smallest run)
EVENTS_FLOOR = 1_000


def staged_events(calls: int, keyed: bool) -> tuple[int, int]:
    """Line events and rows examined while ``calls`` single-row inserts (and, every
    tenth call, a delete of an earlier row) are staged in one transaction."""
    db = upkeep.connect()
    key = " PRIMARY KEY" if keyed else ""
    db.execute(f"CREATE TABLE t (a INTEGER{key}, b VARCHAR NOT NULL)")
    db.create_view("v", "SELECT b, COUNT(*) AS n FROM t GROUP BY b")
    events = 0

    def tracer(frame, event, arg):
        nonlocal events
        events += 1
        return tracer

    with db.transaction():
        sys.settrace(tracer)
        try:
            for i in range(calls):
                db.insert("t", [(i, f"g{i % 7}")])
                if i % 10 == 9:
                    db.delete("t", [(i - 5, f"g{(i - 5) % 7}")])
        finally:
            sys.settrace(None)
        examined = db._staging.rows_examined
    assert sum(n for _, n in db.view("v").rows()) == calls - calls // 10
    return events, examined


@pytest.mark.parametrize("keyed", [False, True])
def test_staging_is_linear_in_the_calls(keyed: bool) -> None:
    small, _ = staged_events(1_000, keyed)
    medium, _ = staged_events(4_000, keyed)
    large, examined = staged_events(20_000, keyed)
    assert medium < 4.5 * max(small, EVENTS_FLOOR)
    assert large < 22 * max(small, EVENTS_FLOOR)
    assert examined == 20_000 + 2_000


def test_a_rejected_statement_stages_nothing() -> None:
    db = upkeep.connect()
    db.execute("CREATE TABLE t (a INTEGER PRIMARY KEY, b VARCHAR NOT NULL)")
    with db.transaction():
        db.insert("t", [(1, "x")])
        with pytest.raises(ConstraintError):
            db.insert("t", [(2, "y"), (1, "z")])  # the key 1 is taken: nothing of it stays
        with pytest.raises(ConstraintError):
            db.insert("t", [(3, "y"), (4, None)])
        with pytest.raises(ConstraintError):
            db.delete("t", [(1, "x"), (1, "x")])
        assert db.staged() == {"t": {(1, "x"): 1}}
        db.delete("t", [(1, "x")])
        db.insert("t", [(1, "w")])  # the key is free again once its row is deleted
    assert db.execute("SELECT * FROM t").fetchall() == [(1, "w")]


def test_rows_staged_and_taken_back_leave_nothing() -> None:
    """A later statement that cancels staged rows removes them from the staged change (the
    first statement of a table is staged whole, later ones merged into it)."""
    db = upkeep.connect()
    db.execute("CREATE TABLE t (a INTEGER, b VARCHAR)")
    db.insert("t", [(0, "kept")])
    with db.transaction():
        db.insert("t", [(1, "x"), (2, "y"), (2, "y")])
        db.delete("t", [(1, "x"), (2, "y"), (2, "y")])
        assert db.staged() == {}
        db.delete("t", [(0, "kept")])
        db.insert("t", [(3, "z"), (0, "kept")])
        db.delete("t", [(3, "z")])
        assert db.staged() == {}
        db.insert("t", [(4, "w"), (5, "v")])
        db.delete("t", [(4, "w")])
        assert db.staged() == {"t": {(5, "v"): 1}}
    assert sorted(db.execute("SELECT * FROM t").fetchall()) == [(0, "kept"), (5, "v")]
