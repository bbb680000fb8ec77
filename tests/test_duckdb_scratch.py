"""The scratch DuckDB database's time limit (``duckdb_scratch.time_limit``): a statement
is stopped at its limit whether DuckDB is executing it or still planning it."""

from __future__ import annotations

import threading
import time

import pytest

import upkeep
from upkeep.duckdb_scratch import time_limit
from upkeep.errors import StatementTimeout

# DuckDB plans a long UNION ALL in time growing with the square of its branches (1,500:
# 0.6 s here, which a suite's run once saw end within the test's grace period; 2,500:
# 1.8 s), and heeds no interrupt while it plans
BRANCHES = 2_500
LONG_TO_PLAN = "SELECT 1 AS x" + " UNION ALL SELECT 1" * BRANCHES


def _planning() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "upkeep-duckdb"]


def test_a_statement_still_being_planned_at_its_limit_is_left_behind_not_waited_for():
    db = upkeep.connect()
    started = time.monotonic()
    with time_limit(0.05), pytest.raises(StatementTimeout):
        db.execute(LONG_TO_PLAN).fetchall()
    waited = time.monotonic() - started
    left = _planning()
    assert left, f"returned after {waited:.2f} s with DuckDB done: it waited for the plan"
    for thread in left:  # the call left behind ends on its own, and closes its connection
        thread.join(60)
        assert not thread.is_alive()
    assert db.execute("SELECT 41 + 1").fetchall() == [(42,)]
    with time_limit(30):  # within the limit, the same statement answers
        assert db.execute(LONG_TO_PLAN).fetchall() == [(1,)] * (BRANCHES + 1)


def test_an_executing_statement_is_interrupted_at_its_limit():
    db = upkeep.connect()
    db.execute("CREATE TABLE o (a INTEGER)")
    db.insert("o", [(i,) for i in range(1_000)])
    started = time.monotonic()
    with time_limit(0.2), pytest.raises(StatementTimeout, match="time limit of 0.2 s"):
        db.execute("SELECT count(*) FROM o a, o b, o c, o d").fetchall()
    assert time.monotonic() - started < 30
    assert db.execute("SELECT count(*) FROM o").fetchall() == [(1_000,)]
