"""A table's PRIMARY KEY counts live in a row store of the key's columns (``Table.keys``,
docs/design.md "State layout"), not a dict of key tuples: which statements it refuses
equals DuckDB's over composite keys of every encoded kind (doubles with -0.0 and NaN,
decimals, dates, strings inside and past a column's dictionary of codes), it survives
reopening, and a key costs a fraction of a dict entry's bytes."""

from __future__ import annotations

import datetime
import gc
import tracemalloc
from decimal import Decimal

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import same_outcome_as_duckdb, sql_literal

import upkeep
from upkeep.errors import ConstraintError
from upkeep.row_store import _DICTIONARY_MAX

KEYED = {
    "ks": ("CREATE TABLE t (k INTEGER, s VARCHAR, x DOUBLE, d DECIMAL(6, 2), day DATE, "
           "v INTEGER, PRIMARY KEY (k, s))", 2),
    "xdd": ("CREATE TABLE t (k INTEGER, s VARCHAR, x DOUBLE, d DECIMAL(6, 2), day DATE, "
            "v INTEGER, PRIMARY KEY (x, d, day))", 3),
}
# strings a column codes (loaded first, as many as it codes) and ones written out after
CODED = [f"c{i}" for i in range(_DICTIONARY_MAX)]
STRINGS = st.sampled_from(["c0", "c7", CODED[-1], "w1", "w2", "it's", "é", ""])
KEYS = st.tuples(st.integers(0, 2), STRINGS, st.sampled_from([0.0, -0.0, 1.5, float("nan")]),
                 st.sampled_from([Decimal("1.00"), Decimal("-2.50"), Decimal("1.0")]),
                 st.sampled_from([datetime.date(2024, 2, 29), datetime.date(1970, 1, 1)]))


def _double(x: float) -> str:
    return "'NaN'::DOUBLE" if x != x else repr(x)


def _row(key: tuple, v: int) -> str:
    k, s, x, d, day = key
    return (f"({k}, {sql_literal(s)}, {_double(x)}, {d}, {sql_literal(day)}, {v})")


def _where(schema: str, key: tuple) -> str:
    k, s, x, d, day = key
    if schema == "ks":
        return f"k = {k} AND s = {sql_literal(s)}"
    # a NaN compares equal to itself in DuckDB and in upkeep's WHERE alike
    return f"x = {_double(x)} AND d = {d} AND day = {sql_literal(day)}"


STATEMENTS = st.one_of(
    st.builds(lambda key, v: ("insert", key, v), KEYS, st.integers(0, 9)),
    st.builds(lambda a, b: ("arrow2", a, b), KEYS, KEYS),
    st.builds(lambda a, b: ("insert2", a, b), KEYS, KEYS),
    st.builds(lambda key: ("delete", key, 0), KEYS),
    st.builds(lambda key, v: ("update", key, v), KEYS, st.integers(0, 9)),
)


def _sql(schema: str, op: str, a, b) -> str:
    if op == "insert":
        return f"INSERT INTO t VALUES {_row(a, b)}"
    if op == "insert2":  # two rows: both go in, or (a key twice or taken) neither
        return f"INSERT INTO t VALUES {_row(a, 1)}, {_row(b, 2)}"
    if op == "delete":
        return f"DELETE FROM t WHERE {_where(schema, a)}"
    return f"UPDATE t SET v = {b} WHERE {_where(schema, a)}"


ARROW_SCHEMA = pa.schema([("k", pa.int32()), ("s", pa.string()), ("x", pa.float64()),
                          ("d", pa.decimal128(6, 2)), ("day", pa.date32()), ("v", pa.int32())])


def _arrow_insert(db, con, a: tuple, b: tuple) -> None:
    """Two rows as Arrow data into upkeep (staged as keys while no column index or view
    needs rows; NaN and -0.0 take the row path) and as one INSERT into DuckDB."""
    rows = [(*a, 1), (*b, 2)]
    data = pa.Table.from_pylist([dict(zip(ARROW_SCHEMA.names, r, strict=True)) for r in rows],
                                schema=ARROW_SCHEMA)
    try:
        con.execute(f"INSERT INTO t VALUES {_row(a, 1)}, {_row(b, 2)}")
    except duckdb.Error:
        with pytest.raises(ConstraintError):
            db.insert("t", data)
    else:
        db.insert("t", data)


def _contents(cur) -> list[str]:
    return sorted(repr(tuple("nan" if isinstance(v, float) and v != v else v for v in r))
                  for r in cur.fetchall())


@pytest.mark.parametrize("schema", sorted(KEYED))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(statements=st.lists(STATEMENTS, min_size=1, max_size=25))
def test_key_checks_equal_duckdb(schema: str, statements: list) -> None:
    """Each statement refused by DuckDB is refused by upkeep (a ConstraintError, nothing of
    it applied), each other one runs; the tables stay equal."""
    ddl, _ = KEYED[schema]
    db, con = upkeep.connect(), duckdb.connect()
    for c in (db, con):
        c.execute(ddl)
    # the key column's dictionary filled first (the "ks" key codes these strings)
    coded = [(i % 3 + 3, s, float(i), Decimal(i % 100), datetime.date(2000, 1, 1)
              + datetime.timedelta(days=i), 0) for i, s in enumerate(CODED)]
    db.insert("t", coded)
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)", coded)
    for op, a, b in statements:
        if op == "arrow2":
            _arrow_insert(db, con, a, b)
        else:
            same_outcome_as_duckdb(db, con, _sql(schema, op, a, b), ConstraintError)
    assert _contents(db.execute("SELECT * FROM t")) == _contents(con.execute("SELECT * FROM t"))


@pytest.mark.parametrize("checkpoint", [False, True])
def test_keys_survive_reopening(tmp_path, checkpoint: bool) -> None:
    """The key counts are rebuilt from the log (and from a snapshot): a taken key is
    refused after a reopen, a freed one takes a new row."""
    path = str(tmp_path / "db")
    with upkeep.connect(path) as db:
        db.execute(KEYED["ks"][0])
        db.execute("INSERT INTO t VALUES (1, 'a', 0.0, 1.00, DATE '2024-02-29', 1), "
                   "(2, 'b', -0.0, 2.00, DATE '2024-02-29', 2)")
        if checkpoint:
            db.checkpoint()
        db.execute("DELETE FROM t WHERE k = 2 AND s = 'b'")
    with upkeep.connect(path) as db:
        with pytest.raises(ConstraintError, match="duplicate primary key"):
            db.execute("INSERT INTO t VALUES (1, 'a', 9.0, 9.00, DATE '2000-01-01', 9)")
        db.execute("INSERT INTO t VALUES (2, 'b', 9.0, 9.00, DATE '2000-01-01', 9)")
        assert db.execute("SELECT k, v FROM t ORDER BY k").fetchall() == [(1, 1), (2, 9)]


@pytest.mark.parametrize("checkpoint", [False, True])
@pytest.mark.parametrize("how", ["sql", "arrow", "rows"])
def test_a_nan_key_read_back_from_the_log_is_still_taken(tmp_path, checkpoint: bool,
                                                          how: str) -> None:
    """A NaN key is one key, as DuckDB has it, also once the database is reopened: the
    values read back from the log are other NaN objects than those inserted, which a
    dict of key tuples (comparing NaN by identity) took for another key."""
    path = str(tmp_path / "db")
    with upkeep.connect(path) as db:
        db.execute("CREATE TABLE t (x DOUBLE, s VARCHAR, PRIMARY KEY (x, s))")
        if how == "sql":
            db.execute("INSERT INTO t VALUES ('NaN'::DOUBLE, 'a')")
        elif how == "arrow":
            db.insert("t", pa.table({"x": [float("nan")], "s": ["a"]}))
        else:
            db.insert("t", [(float("nan"), "a")])
        if checkpoint:
            db.checkpoint()
    with upkeep.connect(path) as db:
        with pytest.raises(ConstraintError, match="duplicate primary key"):
            db.execute("INSERT INTO t VALUES ('NaN'::DOUBLE, 'a')")
        assert db.execute("SELECT count(*) FROM t").fetchone() == (1,)


def _traced_bytes(ddl: str, rows: list[tuple]) -> int:
    """Bytes left allocated by making a table with ``ddl`` and inserting ``rows``."""
    gc.collect()
    tracemalloc.start()
    try:
        db = upkeep.connect()
        db.execute(ddl)
        db.insert("t", rows)
        gc.collect()
        return tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()


def test_a_key_costs_a_fraction_of_a_dict_entry() -> None:
    """20,000 rows keyed by (BIGINT, INTEGER), like a line item's (order, line number): the
    key store adds under 64 bytes a row; a dict of the key tuples alone takes over 100."""
    rows = [(100_000 + i // 4, i % 4 + 1, float(i)) for i in range(20_000)]
    plain = _traced_bytes("CREATE TABLE t (o BIGINT, n INTEGER, p DOUBLE)", rows)
    keyed = _traced_bytes("CREATE TABLE t (o BIGINT, n INTEGER, p DOUBLE, "
                          "PRIMARY KEY (o, n))", rows)
    assert (keyed - plain) / len(rows) < 64
    gc.collect()
    tracemalloc.start()
    try:
        as_dict = {(int(str(o)), int(str(n))): 1 for o, n, _ in rows}  # fresh int objects
        assert tracemalloc.get_traced_memory()[0] / len(as_dict) > 100
    finally:
        tracemalloc.stop()
