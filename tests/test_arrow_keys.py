"""Bulk inserts of typed Arrow data staged as keys (``arrow_keys.py``, ``local/bulk_insert.py``).

The keys written from Arrow columns must be, byte for byte and in the same order, the keys
the row-by-row path writes for the same rows (string codes included), and a database
taking the path must hold, answer and maintain exactly what it holds by the row-by-row
path: checked against DuckDB running the same statements.
"""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from killing import kill_and_reopen
from oracle import insert_rows

import upkeep
from upkeep.codecs.arrow_values import column_values
from upkeep.errors import ConstraintError, EvaluationError, SchemaError
from upkeep.row_store import RowStore
from upkeep.types import SqlType

COLUMNS = [("i", SqlType("BIGINT")), ("s", SqlType("SMALLINT")), ("t", SqlType("TINYINT")),
           ("n", SqlType("INTEGER")), ("d", SqlType("DOUBLE")), ("day", SqlType("DATE")),
           ("m", SqlType("DECIMAL", 12, 3)), ("v", SqlType("VARCHAR")),
           ("w", SqlType("VARCHAR")), ("b", SqlType("BOOLEAN"))]
_BOUNDS = {"BIGINT": 63, "SMALLINT": 15, "TINYINT": 7, "INTEGER": 31}


def _value(kind: str, precision: int, scale: int) -> st.SearchStrategy:
    if kind in _BOUNDS:
        top = 2 ** _BOUNDS[kind]
        return st.one_of(st.integers(-top, top - 1), st.integers(max(-top, -300), min(top - 1, 300)))
    if kind == "DOUBLE":
        return st.one_of(st.floats(allow_nan=True), st.sampled_from([0.0, -0.0, 1.5]))
    if kind == "DATE":
        return st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31))
    if kind == "DECIMAL":
        units = st.integers(-(10 ** precision) + 1, 10 ** precision - 1)
        return units.map(lambda u: Decimal(u).scaleb(-scale))
    if kind == "VARCHAR":
        return st.one_of(st.sampled_from(["", "a", "b", "ü", "x" * 200]), st.text(max_size=12))
    return st.booleans()


def _rows(columns, max_size: int = 40) -> st.SearchStrategy:
    values = [st.one_of(st.none(), _value(t.kind, t.precision, t.scale)) for _, t in columns]
    return st.lists(st.tuples(*values), max_size=max_size)


def _arrow(columns, rows: list[tuple]) -> pa.Table:
    return pa.table({name: pa.array([r[k] for r in rows], t.arrow())
                     for k, (name, t) in enumerate(columns)})


def _store_rows(store: RowStore, columns, table: pa.Table) -> None:
    """The row-by-row path's keys for ``table``'s rows: its Python values, encoded."""
    values = [column_values(table.column(k), t) for k, (_, t) in enumerate(columns)]
    for row in zip(*values, strict=True):
        store.add(row, 1)


def _same_stores(fast: RowStore, slow: RowStore) -> None:
    assert list(fast.items()) == list(slow.items())
    assert bytes(fast._table.arena[:fast._table.used]) == bytes(slow._table.arena[:slow._table.used])
    assert list(fast._encoder.strings) == list(slow._encoder.strings)


@settings(max_examples=150, deadline=None)
@given(before=_rows(COLUMNS, 10), parts=st.lists(_rows(COLUMNS), min_size=1, max_size=3))
def test_keys_written_from_arrow_are_the_row_by_row_keys(before, parts) -> None:
    """Stores filled with the same earlier rows (their strings holding codes already), then
    given the same Arrow parts, one from the columns, one row by row: equal keys, in
    equal order, with equal multiplicities and dictionaries (NULLs, -0.0 and NaN, every
    integer width's ends, days 1 and 9999, decimals, duplicates)."""
    fast, slow = RowStore(COLUMNS), RowStore(COLUMNS)
    for store in (fast, slow):
        _store_rows(store, COLUMNS, _arrow(COLUMNS, before))
    for rows in parts:
        table = _arrow(COLUMNS, rows)
        keys = fast.keys_of(table)
        assert keys is not None
        fast.add_keys(keys, 1)
        _store_rows(slow, COLUMNS, table)
    _same_stores(fast, slow)


def test_a_column_past_its_dictionary_writes_the_rest_out_as_row_by_row() -> None:
    """Strings get codes in the order of their first row until the column's dictionary
    is full (1,024), across parts; later strings are written out; a part's strings that
    hold codes already keep them."""
    rng = random.Random(7)
    pool = [f"s{k}-{'é' * (k % 3)}" for k in range(1_500)]
    columns = [("v", SqlType("VARCHAR")), ("w", SqlType("VARCHAR"))]
    fast, slow = RowStore(columns), RowStore(columns)
    for size in (700, 900, 1_200):
        rows = [(rng.choice(pool), rng.choice(pool[:40]) if rng.random() < 0.9 else None)
                for _ in range(size)]
        table = _arrow(columns, rows)
        fast.add_keys(fast.keys_of(table), 1)
        _store_rows(slow, columns, table)
    assert len(fast._encoder.codes[0]) == 1_024
    _same_stores(fast, slow)


def test_values_python_cannot_hold_leave_the_path_to_the_row_by_row_error() -> None:
    """A day past year 9999 or bytes that are not UTF-8: no keys (``None``), and the
    insert names the column as the row-by-row path does."""
    days = pa.table({"day": pa.array([1, 3_000_000], pa.int32()).cast(pa.date32())})
    bad = pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(b"\x00\x00\x00\x00\x02\x00\x00\x00"),
                                                 pa.py_buffer(b"\xff\xfe")])
    for column, table in ((("day", SqlType("DATE")), days),
                          (("v", SqlType("VARCHAR")), pa.table({"v": bad}))):
        assert RowStore([column]).keys_of(table) is None
        db = upkeep.connect()
        db.execute(f"CREATE TABLE t ({column[0]} {column[1].sql()})")
        with pytest.raises(SchemaError, match=f"Arrow column {column[0]}"):
            db.insert("t", table)
        assert db.execute("SELECT count(*) FROM t").fetchall() == [(0,)]


SQL = ("CREATE TABLE {name} (i BIGINT, s SMALLINT, t TINYINT, n INTEGER, d DOUBLE, day DATE, "
       "m DECIMAL(12, 3), v VARCHAR, w VARCHAR, b BOOLEAN{key})")
VIEWS = {"by_v": "SELECT v, COUNT(*) AS c, SUM(n) AS total FROM {name} GROUP BY v",
         "pairs": "SELECT a.v, b.w FROM {name} a JOIN {name} b ON a.n = b.n"}
_KEYED_ROWS = st.lists(st.tuples(
    st.integers(0, 30), *[st.one_of(st.none(), _value(t.kind, t.precision, t.scale))
                          for _, t in COLUMNS[1:]]), max_size=25)
_STEP = st.one_of(
    st.tuples(st.just("arrow"), _KEYED_ROWS),
    st.tuples(st.just("rows"), _KEYED_ROWS),
    st.tuples(st.just("delete"), st.integers(0, 5)),
    st.tuples(st.just("view"), st.sampled_from(sorted(VIEWS))),
    st.tuples(st.just("query"), st.just(None)))


def _clean(rows: list[tuple]) -> list[tuple]:
    """Rows as typed Arrow data holds them (no NaN or -0.0: such data is not typed, and
    takes the row-by-row path), at most once per key value for a keyed table."""
    seen, out = set(), []
    for r in rows:
        d = r[4]
        if d is not None and (d != d or (d == 0.0 and str(d) == "-0.0")):
            r = (*r[:4], 0.0, *r[5:])
        if r[0] not in seen:
            seen.add(r[0])
            out.append(r)
    return out


def _contents(con, name: str) -> list[tuple]:
    return sorted(con.execute(f"SELECT * FROM {name}").fetchall(), key=repr)


@settings(max_examples=60, deadline=None)
@given(keyed=st.booleans(), transactions=st.lists(st.lists(_STEP, min_size=1, max_size=4),
                                                  min_size=1, max_size=5))
def test_a_database_loaded_from_arrow_holds_and_maintains_what_duckdb_does(keyed,
                                                                          transactions):
    """Random transactions of typed Arrow inserts, row inserts, deletes and queries read
    inside the transaction, with views created between them, on a table with or without a
    PRIMARY KEY: after every transaction the table and every view equal DuckDB's, and a
    transaction of Arrow inserts alone into a table no view reads put them in as keys (no
    row encoded one by one).  A transaction upkeep refuses (a duplicate key) is rolled back on both sides."""
    name = "r"
    db, oracle = upkeep.connect(), duckdb.connect()
    db.execute(SQL.format(name=name, key=", PRIMARY KEY (i)" if keyed else ""))
    oracle.execute(SQL.format(name=name, key=""))
    views: list[str] = []
    marks = ", ".join("?" * len(COLUMNS))
    match = " AND ".join(f"{c} IS NOT DISTINCT FROM ?" for c, _ in COLUMNS)
    for steps in transactions:
        for kind, arg in steps:  # views are created between transactions
            if kind == "view" and arg not in views:
                views.append(arg)
                db.create_view(arg, VIEWS[arg].format(name=name))
        encodes = db._catalog.tables[name].rows.encodes
        as_keys = not views
        oracle.execute("BEGIN")
        try:
            with db.transaction():
                for kind, arg in steps:
                    if kind in ("arrow", "rows"):
                        rows = _clean(arg) if keyed else _clean(arg) + _clean(arg)[:2]
                        db.insert(name, _arrow(COLUMNS, rows) if kind == "arrow" else rows)
                        as_keys = as_keys and kind == "arrow"
                        if rows:
                            oracle.executemany(f"INSERT INTO {name} VALUES ({marks})", rows)
                    elif kind == "delete":
                        gone = _contents(oracle, name)[arg:arg + 2]
                        if gone:
                            as_keys = False
                            db.delete(name, gone)
                            for row in gone:
                                oracle.execute(
                                    f"DELETE FROM {name} WHERE rowid = (SELECT min(rowid) "
                                    f"FROM {name} WHERE {match})", list(row))
                    elif kind == "query":  # (reads what is staged: as rows)
                        as_keys = False
                        sql = f"SELECT count(*), count(DISTINCT v), sum(n) FROM {name}"
                        assert db.execute(sql).fetchall() == oracle.execute(sql).fetchall()
        except ConstraintError as refused:
            oracle.execute("ROLLBACK")
            assert keyed and "duplicate primary key" in str(refused)
        else:
            oracle.execute("COMMIT")
        assert _contents(db, name) == _contents(oracle, name)
        if keyed:
            assert not oracle.execute(f"SELECT i FROM {name} GROUP BY i HAVING count(*) > 1"
                                      ).fetchall()
        for v in views:
            assert sorted(db.view(v).rows(), key=repr) == _contents_of(oracle, VIEWS[v], name)
        if as_keys:
            assert db._catalog.tables[name].rows.encodes == encodes, (
                "Arrow inserts into a table no view reads were encoded row by row")


def _contents_of(con, sql: str, name: str) -> list[tuple]:
    return sorted(con.execute(sql.format(name=name)).fetchall(), key=repr)


def test_a_null_in_a_not_null_column_is_refused_naming_the_row_and_stages_nothing() -> None:
    """The first row holding a NULL in any NOT NULL column is named, with the row path's
    words, whichever column holds the first NULL of its own."""
    rows = [(1, "a", 1), (2, "b", None), (3, None, 3), (None, "d", 4)]
    messages = []
    for data in (pa.table({"k": pa.array([r[0] for r in rows], pa.int32()),
                           "v": [r[1] for r in rows],
                           "w": pa.array([r[2] for r in rows], pa.int64())}), rows):
        db = upkeep.connect()
        db.execute("CREATE TABLE t (k INTEGER NOT NULL, v VARCHAR NOT NULL, w BIGINT NOT NULL)")
        with pytest.raises(ConstraintError) as raised:
            db.insert("t", data)
        messages.append(str(raised.value))
        assert db.execute("SELECT count(*) FROM t").fetchall() == [(0,)]
    assert messages[0] == messages[1]
    assert "NULL in NOT NULL column w" in messages[0] and "(2, 'b', NULL)" in messages[0]


@pytest.mark.parametrize("second", [[4, 5, 4], [6, 1]])
def test_a_duplicate_primary_key_in_a_bulk_insert_is_refused_and_stages_nothing(second):
    db = upkeep.connect()
    db.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v VARCHAR)")
    db.insert("t", pa.table({"k": pa.array([1, 2, 3], pa.int32()), "v": ["a", "b", "c"]}))
    with pytest.raises(ConstraintError, match="duplicate primary key"):
        with db.transaction():
            db.insert("t", pa.table({"k": pa.array([9], pa.int32()), "v": ["z"]}))
            db.insert("t", pa.table({"k": pa.array(second, pa.int32()),
                                     "v": ["x"] * len(second)}))
    assert sorted(db.execute("SELECT k FROM t").fetchall()) == [(1,), (2,), (3,)]
    db.insert("t", pa.table({"k": pa.array([9], pa.int32()), "v": ["z"]}))
    assert db.execute("SELECT count(*) FROM t WHERE k = 9").fetchall() == [(1,)]


def test_a_batch_that_fails_in_a_view_takes_its_bulk_insert_back() -> None:
    """The bulk insert went into its table as keys before another table's view failed
    (an overflowing SUM): the batch is rejected whole, the keys taken out again."""
    db = upkeep.connect()
    db.execute("CREATE TABLE loaded (k INTEGER, v VARCHAR)")
    db.execute("CREATE TABLE t (k INTEGER, h HUGEINT)")
    db.create_view("s", "SELECT k, SUM(h) AS total FROM t GROUP BY k")
    db.insert("loaded", pa.table({"k": pa.array([1], pa.int32()), "v": ["kept"]}))
    db.insert("t", [(1, 2)])
    with pytest.raises(EvaluationError, match="overflow in SUM"):
        with db.transaction():
            db.insert("loaded", pa.table({"k": pa.array([2, 3], pa.int32()), "v": ["x", "y"]}))
            db.insert("t", [(1, 2 ** 127 - 1)])
    assert db.execute("SELECT * FROM loaded").fetchall() == [(1, "kept")]
    assert db.view("s").rows() == [(1, 2)]
    db.create_view("all_loaded", "SELECT k, v FROM loaded")
    assert db.view("all_loaded").rows() == [(1, "kept")]


def test_an_insert_into_a_table_a_view_reads_is_not_written_as_keys(monkeypatch) -> None:
    """A view's step reads the batch's rows, so its table's Arrow inserts are made into
    rows at once, not written as keys first; the view follows them."""
    from upkeep.local import connection

    prepared = []
    real = connection.prepare
    monkeypatch.setattr(connection, "prepare", lambda *a: prepared.append(a) or real(*a))
    db = upkeep.connect()
    db.execute("CREATE TABLE t (k INTEGER, v VARCHAR)")
    db.execute("CREATE TABLE other (k INTEGER)")
    db.create_view("c", "SELECT v, COUNT(*) AS n FROM t GROUP BY v")
    db.insert("t", pa.table({"k": pa.array([1, 2, 3], pa.int32()), "v": ["a", "b", "a"]}))
    assert not prepared
    assert sorted(db.view("c").rows()) == [("a", 2), ("b", 1)]
    db.insert("other", pa.table({"k": pa.array([1], pa.int32())}))
    assert len(prepared) == 1


WORKER = r"""
import sys, pyarrow as pa, upkeep
path, snapshot_bytes = sys.argv[1], int(sys.argv[2])
db = upkeep.connect(path, snapshot_bytes=snapshot_bytes)
if "loaded" not in db.tables():
    db.execute("CREATE TABLE loaded (i INTEGER, k BIGINT, v VARCHAR, PRIMARY KEY (i, k))")
i = db.metadata().get("next", 0)
print("start", i, flush=True)
while True:
    rows = BATCH(i)
    with db.transaction(metadata={"next": i + 1}):
        db.insert("loaded", pa.table({"i": pa.array([r[0] for r in rows], pa.int32()),
                                      "k": pa.array([r[1] for r in rows], pa.int64()),
                                      "v": [r[2] for r in rows]}))
    print("ack", i, flush=True)
    i += 1
"""


def _batch(i: int) -> list[tuple]:
    return [(i, k, f"s{(i * 50 + k) % 1_100}") for k in range(50)]


@pytest.mark.parametrize("snapshot_bytes", [1 << 30, 20_000])
def test_bulk_inserts_on_disk_survive_kill_nine_exactly_once(tmp_path, snapshot_bytes):
    """A database on disk logs each bulk insert's rows as Arrow and recovery adds them
    again as keys: killed at random points, it holds every acknowledged batch exactly once
    (at most the one unacknowledged batch more), with snapshots taken or not."""
    import inspect
    from collections import Counter

    script = tmp_path / "worker.py"
    script.write_text(inspect.getsource(_batch).replace("_batch", "BATCH") + WORKER)
    path = tmp_path / "db"

    def check(db, committed: int) -> None:
        held = Counter(db.execute("SELECT * FROM loaded").fetchall())
        assert held == Counter(r for i in range(committed) for r in _batch(i))
        db.create_view("per_v", "SELECT v, COUNT(*) AS n FROM loaded GROUP BY v")
        oracle = duckdb.connect()
        oracle.execute("CREATE TABLE loaded (i INTEGER, k BIGINT, v VARCHAR)")
        if held:  # (killed before the first commit, nothing is held)
            insert_rows(oracle, "loaded", list(held.elements()))
        assert sorted(db.view("per_v").rows()) == sorted(
            oracle.execute("SELECT v, COUNT(*) FROM loaded GROUP BY v").fetchall())
        db.execute("DROP VIEW per_v")

    kill_and_reopen(script, path, snapshot_bytes, 4, (0.2, 0.8), check)
    if snapshot_bytes < 1 << 20:
        assert any(p.name.startswith("snapshot-") for p in path.iterdir())


@pytest.mark.parametrize("on_disk", [False, True])
def test_a_staged_bulk_insert_holds_its_rows_not_the_callers_buffers(tmp_path, on_disk):
    """Arrow data may share the caller's memory (a numpy array): reusing it for the next
    statement of the transaction changes neither what is staged, nor what a query in the
    transaction reads, nor what is committed and logged.  Parts under other column-name
    case or nullability commit together."""
    import numpy as np

    db = upkeep.connect(tmp_path / "db" if on_disk else ":memory:")
    db.execute("CREATE TABLE t (k BIGINT)")
    buffer = np.zeros(3, dtype=np.int64)
    with db.transaction():
        buffer[:] = [1, 2, 3]
        db.insert("t", pa.table({"k": buffer}))
        buffer[:] = [10, 20, 30]
        assert db.execute("SELECT sum(k) FROM t").fetchall() == [(6,)]
        db.insert("t", pa.table({"K": buffer}))
        buffer[:] = [7, 7, 7]
        db.insert("t", pa.Table.from_arrays([pa.array([5], pa.int64())], schema=pa.schema(
            [pa.field("k", pa.int64(), nullable=False)])))
        buffer[:] = [8, 8, 8]
    expected = [(1,), (2,), (3,), (5,), (10,), (20,), (30,)]
    assert sorted(db.execute("SELECT k FROM t").fetchall()) == expected
    if on_disk:
        db.close()
        db = upkeep.connect(tmp_path / "db")
        assert sorted(db.execute("SELECT k FROM t").fetchall()) == expected


def test_a_decimal_past_its_precision_takes_the_row_path() -> None:
    """Arrow data can hold a decimal past its type's precision (an unsafe cast): its units
    do not fit 64 bits, so the statement goes down the row path, which refuses or stores
    it as it always has, never a truncated value."""
    wide = pa.array([Decimal(10) ** 20 + 7, Decimal(5)], pa.decimal128(38, 0))
    data = pa.table({"m": wide.cast(pa.decimal128(18, 0), safe=False)})
    outcomes = []
    for rows in (data, [tuple(r.values()) for r in data.to_pylist()]):
        db = upkeep.connect()
        db.execute("CREATE TABLE t (m DECIMAL(18, 0))")
        try:
            db.insert("t", rows)
            outcomes.append(sorted(db.execute("SELECT m FROM t").fetchall()))
        except Exception as exc:  # noqa: BLE001 - the row path's outcome, whatever it is
            outcomes.append(type(exc).__name__)
    assert RowStore([("m", SqlType("DECIMAL", 18, 0))]).keys_of(data) is None
    assert outcomes[0] == outcomes[1]


def test_room_reserved_for_a_bulk_insert_is_what_its_keys_take(monkeypatch) -> None:
    """The key table's room for a bulk insert (``RowStore.reserve_keys``) is what its keys
    take, however far apart the keys lie in the buffer they were written to (each row has
    room there for its widest value): one long string among short ones (written out, past
    the column's dictionary) takes its own length once, and nothing grows while the keys go
    in.  Reserved by the keys' span, TPC-H SF 1's line items kept 107 MB of arena unused."""
    import upkeep.row_store as row_store

    monkeypatch.setattr(row_store, "_DICTIONARY_MAX", 0)
    store = RowStore([("k", SqlType("BIGINT")), ("s", SqlType("VARCHAR"))])
    n = 1_000
    part = pa.table({"k": pa.array(range(n), pa.int64()),
                     "s": pa.array(["x" * 2_000] + [f"r{i}" for i in range(1, n)])})
    keys = store.keys_of(part)
    store.reserve_keys([keys])
    table = store._table
    room = len(table.arena)
    store.add_keys(keys, 1)
    assert len(table.arena) == room and len(store) == n
    # each key's length (up to 3 bytes), the append's headroom, the arena's step of growth
    # (the keys' span in their buffer is about three times what they take)
    assert room - table.used <= 3 * n + 10 + 4_096
