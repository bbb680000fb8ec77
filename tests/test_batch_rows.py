"""A statement of many rows is checked and counted a part at a time (``_add_part`` in
upkeep/local/connection.py): a part of valid, distinct rows by C loops, any other part row
by row.  Whatever the parts (their size is patched small here so that a statement spans
several), the table and a view over it equal DuckDB's on the same rows, and a bad row is
named by its index in the statement with nothing staged."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from unittest.mock import patch

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import upkeep
import upkeep.local.connection as connection
from upkeep.errors import SchemaError

DDL = "CREATE TABLE t (a INTEGER, b DOUBLE, c VARCHAR, d DATE)"
VIEW = "SELECT c, COUNT(*) AS n, SUM(b) AS s, MAX(d) AS last FROM t GROUP BY c"

# a few distinct rows, so that statements repeat rows within and across parts
POOL = [(i % 4, float(i % 3) / 2, f"g{i % 3}", dt.date(2024, 1, 1 + i % 5)) for i in range(7)]


def given_as(row: tuple, form: int):
    """``row`` as a user may hand it: as it is (valid), as a list, or with its DOUBLE as an
    int (both coerced row by row)."""
    if form == 1:
        return list(row)
    if form == 2 and row[1].is_integer():
        return (row[0], int(row[1]), *row[2:])
    return row


statements = st.lists(st.tuples(st.integers(0, len(POOL) - 1), st.integers(0, 2)),
                      min_size=1, max_size=14)


def duckdb_view(rows: Counter) -> Counter:
    con = duckdb.connect()
    con.execute(DDL)
    for row, n in rows.items():
        con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", [row] * n)
    return Counter(con.execute(VIEW).fetchall())


def check(db, expected: Counter) -> None:
    assert Counter(db.execute("SELECT * FROM t").fetchall()) == +expected
    assert Counter(db.view("v").rows()) == duckdb_view(+expected)


@settings(max_examples=60, deadline=None)
@given(inserted=statements, deleted=statements, step=st.integers(1, 5),
       in_transaction=st.booleans())
def test_statements_of_many_rows_equal_duckdb_whatever_their_parts(inserted, deleted, step,
                                                                   in_transaction):
    db = upkeep.connect()
    db.execute(DDL)
    db.create_view("v", VIEW)
    expected = Counter(POOL[i] for i, _ in inserted)
    removable, gone = expected.copy(), []  # deletes of rows the inserts put there
    for i, _ in deleted:
        if removable[POOL[i]] > 0:
            removable[POOL[i]] -= 1
            gone.append(POOL[i])
    with patch.object(connection, "STEP", step):
        if in_transaction:
            with db.transaction():
                db.insert("t", [given_as(POOL[i], form) for i, form in inserted])
                db.delete("t", gone)
            expected.subtract(gone)
            check(db, expected)
        else:
            db.insert("t", [given_as(POOL[i], form) for i, form in inserted])
            check(db, expected)
            db.delete("t", [given_as(row, 1) for row in gone])
            expected.subtract(gone)
            check(db, expected)


@pytest.mark.parametrize("bad_at", [0, 4, 9])
def test_a_bad_row_in_any_part_is_named_and_nothing_is_staged(bad_at):
    db = upkeep.connect()
    db.execute(DDL)
    db.create_view("v", VIEW)
    db.insert("t", POOL[:3])
    rows = [POOL[i % len(POOL)] for i in range(10)]
    rows[bad_at] = (1, "not a number", "g0", dt.date(2024, 1, 1))
    with patch.object(connection, "STEP", 4), pytest.raises(SchemaError, match=f"row {bad_at}"):
        db.insert("t", rows)
    check(db, Counter(POOL[:3]))
    with db.transaction():
        db.insert("t", POOL[3:5])
        with patch.object(connection, "STEP", 4), pytest.raises(SchemaError,
                                                                match=f"row {bad_at}"):
            db.insert("t", rows)
        assert db.staged() == {"t": dict.fromkeys(POOL[3:5], 1)}
    check(db, Counter(POOL[:5]))
