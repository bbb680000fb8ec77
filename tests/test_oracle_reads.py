"""Reading views: cursor interfaces, column names, ad-hoc SELECTs over views, and
all catalogue views maintained side by side in one database."""

from __future__ import annotations

from decimal import Decimal

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import (
    HYPOTHESIS_SETTINGS,
    Oracle,
    assert_bag_equal,
    bag_diff,
    random_insert,
    random_op,
    seeded_rows,
)
from queries import CORE, QUERIES, SCHEMA, Query

import upkeep

PARAMS = [pytest.param(q, id=q.name) for q in QUERIES]


@pytest.fixture
def loaded():
    """Factory: a database holding one query's view over seeded data."""
    made: list[tuple] = []

    def make(q: Query) -> Oracle:
        db = upkeep.connect()
        orc = Oracle(db, q.all_tables())
        made.append((orc, db))
        for t in q.all_tables():
            orc.insert(t, seeded_rows(t, 12, 1))
        orc.create_query(q)
        return orc

    yield make
    for orc, db in made:
        orc.close()
        db.close()


@pytest.mark.parametrize("q", PARAMS)
def test_cursor_interfaces(loaded, q: Query) -> None:
    """fetchone/fetchmany/fetchall/arrow/df over a view all agree with DuckDB."""
    orc = loaded(q)
    exp = orc.expected(q.name)
    ctx = orc.repro()
    sql = f"SELECT * FROM {q.name}"

    cur = orc.db.execute(sql)
    one = []
    while (r := cur.fetchone()) is not None:
        one.append(r)
    assert_bag_equal(exp, one, f"{q.name} fetchone loop", ctx)

    cur = orc.db.execute(sql)
    many = []
    while chunk := cur.fetchmany(3):
        assert len(chunk) <= 3
        many.extend(chunk)
    assert_bag_equal(exp, many, f"{q.name} fetchmany(3) loop", ctx)

    tbl = orc.db.execute(sql).arrow()
    if hasattr(tbl, "read_all"):  # a RecordBatchReader
        tbl = tbl.read_all()
    cols = tbl.column_names
    arrow_rows = [tuple(d[c] for c in cols) for d in tbl.to_pylist()]
    assert_bag_equal(exp, arrow_rows, f"{q.name} arrow()", ctx)

    df = orc.db.execute(sql).df()
    assert len(df) == len(exp), f"{q.name} df(): {len(df)} rows, DuckDB has {len(exp)}\n{ctx}"


@pytest.mark.parametrize("q", PARAMS)
def test_column_names_match_duckdb(loaded, q: Query) -> None:
    """cursor.description names the view's columns as DuckDB does."""
    orc = loaded(q)
    sql = f"SELECT * FROM {q.name}"
    want = [d[0].lower() for d in orc.duck.execute(sql).description]
    got = [d[0].lower() for d in orc.db.execute(sql).description]
    assert got == want, f"{q.name}: columns {got}, DuckDB {want}\n{orc.repro()}"
    assert [c.lower() for c in orc.db.view(q.name).columns] == want


@pytest.mark.parametrize("q", PARAMS)
def test_adhoc_select_over_view(loaded, q: Query) -> None:
    """Ad-hoc SELECTs reading a view (filter, count, aggregate) agree with DuckDB."""
    orc = loaded(q)
    first = orc.duck.execute(f"SELECT * FROM {q.name}").description[0][0]
    for sql in (
        f"SELECT COUNT(*) FROM {q.name}",
        f'SELECT * FROM {q.name} WHERE "{first}" IS NOT NULL',
        f'SELECT "{first}", COUNT(*) AS n FROM {q.name} GROUP BY "{first}"',
    ):
        assert_bag_equal(
            orc.duck_rows(sql), orc.db.execute(sql).fetchall(), f"ad-hoc {sql!r}", orc.repro()
        )


@settings(max_examples=6, **HYPOTHESIS_SETTINGS)
@given(data=st.data())
def test_all_views_in_one_database(data) -> None:
    """All core catalogue views live side by side in one database under one change stream."""
    tables = list(SCHEMA)
    db = upkeep.connect()
    orc = Oracle(db, tables)
    try:
        for q in CORE:
            orc.create_query(q)
        with orc.transaction():
            for t in tables:
                random_insert(data, orc, t, 2, 6)
        orc.check("bulk load")
        for b in range(data.draw(st.integers(1, 6), label="batches")):
            if data.draw(st.booleans(), label="txn?"):
                with orc.transaction():
                    descs = [
                        random_op(data, orc, tables) for _ in range(data.draw(st.integers(2, 6)))
                    ]
                desc = "; ".join(descs)
            else:
                desc = random_op(data, orc, tables)
            orc.check(f"batch {b}: {desc}")
    finally:
        orc.close()
        db.close()


@pytest.mark.parametrize("q", PARAMS)
def test_select_star_limit(loaded, q: Query) -> None:
    """``SELECT * FROM v LIMIT n`` returns n rows of the view (a sub-bag)."""
    orc = loaded(q)
    exp = orc.expected(q.name)
    for n in (0, 1, 3):
        got = [tuple(r) for r in orc.db.execute(f"SELECT * FROM {q.name} LIMIT {n}").fetchall()]
        assert len(got) == min(n, len(exp)), f"LIMIT {n}: {len(got)} rows of {len(exp)}"
        missing, _ = bag_diff(got, exp)
        assert not missing, f"LIMIT {n} returned rows not in the view: {missing}\n{orc.repro()}"


def test_type_aliases_follow_duckdb() -> None:
    """The documented type aliases store and compute exactly as DuckDB does."""
    cols = {
        "ti": "TINYINT",
        "si": "SMALLINT",
        "hi": "HUGEINT",
        "ch": "CHAR(3)",
        "tx": "TEXT",
        "d4": "DECIMAL(4,1)",
    }
    ddl = "CREATE TABLE ty (" + ", ".join(f"{c} {t}" for c, t in cols.items()) + ")"
    rows = [
        (100, -300, 12345678901234567890, "ab", "x", Decimal("123.4")),
        (-5, 7, -1, None, "y", Decimal("-0.5")),
    ]
    exprs = ["ti + si", "hi * 2", "ch || tx", "d4 * 2", "d4 + ti"]
    con = duckdb.connect()
    db = upkeep.connect()
    errors = []
    try:
        for c in (con, db):
            c.execute(ddl)
        con.executemany("INSERT INTO ty VALUES (?, ?, ?, ?, ?, ?)", rows)
        db.insert("ty", rows)
        checks = [(f"column {c} {t}", f"SELECT {c} FROM ty") for c, t in cols.items()]
        checks += [(f"view {e}", f"SELECT {e} AS x FROM ty") for e in exprs]
        for i, (what, sql) in enumerate(checks):
            db.create_view(f"tyv{i}", sql)
            try:
                assert_bag_equal(con.execute(sql).fetchall(), db.view(f"tyv{i}").rows(), what)
            except AssertionError as e:
                errors.append(str(e).splitlines()[0] + " " + " ".join(str(e).split()[-12:]))
    finally:
        db.close()
        con.close()
    assert not errors, "\n".join(errors)


def test_create_table_as_select_and_replace_view() -> None:
    """CREATE TABLE AS SELECT and CREATE OR REPLACE MATERIALIZED VIEW follow DuckDB."""
    q = next(q for q in CORE if q.name == "tpch_q3")
    db = upkeep.connect()
    orc = Oracle(db, q.all_tables())
    try:
        for t in q.all_tables():
            orc.insert(t, seeded_rows(t, 12, 2))
        orc.create_view(q, via="sql")
        orc.check("created with CREATE MATERIALIZED VIEW")
        ctas = "CREATE TABLE q3_copy AS SELECT * FROM tpch_q3"
        db.execute(ctas)
        assert_bag_equal(
            orc.expected(q.name), db.execute("SELECT * FROM q3_copy").fetchall(), "CTAS"
        )
        other = Query(
            q.name, "SELECT o_custkey, COUNT(*) AS n FROM orders GROUP BY o_custkey", ("orders",)
        )
        orc.create_view(other, via="replace")
        orc.check("after CREATE OR REPLACE")
        orc.insert("orders", seeded_rows("orders", 5, 3))
        orc.delete("customer", orc.model.rows("customer")[:4])
        orc.check("changes after replacing the view")
    finally:
        orc.close()
        db.close()


@pytest.mark.parametrize("alias", ["REAL", "FLOAT", "FLOAT4"])
def test_four_byte_floats_are_refused_clearly(alias: str) -> None:
    """DuckDB computes REAL/FLOAT in 4-byte precision, which upkeep does not emulate: a clear
    UnsupportedError instead of silently different numbers (docs/sql.md)."""
    db = upkeep.connect()
    with pytest.raises(upkeep.UnsupportedError, match="4-byte float"):
        db.execute(f"CREATE TABLE t (x {alias})")
    assert db.tables() == []
