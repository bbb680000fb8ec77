"""Errors are typed and informative, and a failing statement or batch changes nothing.

Every test loads seeded data, takes an exact snapshot of all tables, views and
subscription states, provokes one error, and checks that (a) the error has the
right class and names the position or row at fault, (b) the snapshot is
unchanged and no subscriber was called, and (c) everything still equals the
DuckDB oracle, also after a later valid batch.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from decimal import Decimal

import duckdb
import pytest
from oracle import Oracle, assert_bag_equal, seeded_rows
from queries import BY_NAME, SCHEMA

import upkeep

VIEWS = [
    "tpch_q3",
    "minmax_group",
    "global_counts_empty",
    "distinct_single",
    "count_distinct_global",
    "self_path2",
    "vov_over_agg",
    "union_all_join",
]


@pytest.fixture
def orc():
    """A database with seeded tables and several views, mirrored by the oracle."""
    queries = [BY_NAME[v] for v in VIEWS]
    tables = list(dict.fromkeys(t for q in queries for t in q.all_tables()))
    db = upkeep.connect()
    o = Oracle(db, tables)
    try:
        for q in queries:
            o.create_query(q)
        for t in tables:
            o.insert(t, seeded_rows(t, 8, 1))
        o.check("fixture load")
        yield o
    finally:
        o.close()
        db.close()


def expect_failure(orc: Oracle, exc_type: type[Exception], fn: Callable[[], object]) -> Exception:
    """Run ``fn``, require ``exc_type``, and require that nothing changed."""
    before = orc.state()
    calls = {v: s.calls for v, s in orc.subs.items()}
    snap = orc.model.snapshot()
    with pytest.raises(exc_type) as ei:
        fn()
    orc.model.restore(snap)
    orc.note(f"# ^ raised {type(ei.value).__name__}: {str(ei.value)[:120]!r}")
    after = orc.state()
    for key in before:
        assert after[key] == before[key], (
            f"{key} changed by a failing operation ({type(ei.value).__name__}: {ei.value})\n"
            f"    before: {sorted(before[key].items(), key=repr)[:10]}\n"
            f"    after:  {sorted(after[key].items(), key=repr)[:10]}\n{orc.repro()}"
        )
    assert {v: s.calls for v, s in orc.subs.items()} == calls, (
        f"subscribers were called for a failing operation\n{orc.repro()}"
    )
    orc.check("after the failing operation")
    return ei.value


def follow_up(orc: Oracle) -> None:
    """A valid batch after the failure is applied correctly."""
    with orc.transaction():
        orc.insert("orders", seeded_rows("orders", 3, 9))
        orc.delete("customer", orc.model.rows("customer")[:2])
        orc.update("lineitem", {4: 45}, 0, orc.model.rows("lineitem")[0][0])
    orc.check("valid batch after the failure")


POSITION = re.compile(r"(line|column|col|position|pos|offset|char)\w*\W{0,3}\d+|\d+:\d+", re.I)


# ---------------------------------------------------------------------------
# ParseError
# ---------------------------------------------------------------------------
MALFORMED = [
    "SELEC * FROM orders",
    "SELECT o_orderkey FROM orders WHERE",
    "SELECT (o_orderkey FROM orders",
    "INSERT INTO orders VALUES (1, 2",
    "DELETE FROM orders WHERE o_orderkey = = 3",
    "UPDATE orders SET WHERE o_orderkey = 1",
    "CREATE TABLE t_bad (a INTEGER,",
    "CREATE MATERIALIZED VIEW v_bad AS SELECT o_orderkey FROM orders WHERE AND",
    "INSERT INTO orders VALUES (1, 2, 'O', 1.00, DATE '1995-01-01', 'x', 0, 'c'))",
]


@pytest.mark.parametrize("sql", MALFORMED)
def test_parse_error_names_position(orc: Oracle, sql: str) -> None:
    """Malformed SQL raises ParseError whose message names a position."""
    with pytest.raises(duckdb.ParserException):  # the statement really is malformed
        duckdb.connect().execute(sql)
    err = expect_failure(orc, upkeep.ParseError, lambda: orc.db.execute(sql))
    assert POSITION.search(str(err)), f"ParseError without a position: {err}"
    follow_up(orc)


def test_parse_error_in_create_view(orc: Oracle) -> None:
    """create_view with malformed SQL raises ParseError and creates nothing."""
    sql = "SELECT o_orderkey, FROM orders GROUP"
    with pytest.raises(duckdb.ParserException):  # the statement really is malformed
        duckdb.connect().execute(sql)
    err = expect_failure(orc, upkeep.ParseError, lambda: orc.db.create_view("v_bad", sql))
    assert POSITION.search(str(err)), f"ParseError without a position: {err}"
    assert "v_bad" not in orc.db.views()


def test_parse_error_inside_transaction_rolls_back(orc: Oracle) -> None:
    """A malformed statement after valid ones rolls the whole transaction back."""

    def batch() -> None:
        with orc.transaction():
            orc.insert("orders", seeded_rows("orders", 4, 2))
            orc.delete("lineitem", orc.model.rows("lineitem")[:3])
            orc.db.execute("UPDATE orders SET o_orderkey = WHERE o_custkey = 1")

    expect_failure(orc, upkeep.ParseError, batch)
    follow_up(orc)


# ---------------------------------------------------------------------------
# UnsupportedError
# ---------------------------------------------------------------------------
def test_unsupported_forced_dyn_on_cyclic_query(orc: Oracle) -> None:
    """Dynamic Yannakakis cannot maintain a cyclic (triangle) query."""
    sql = BY_NAME["self_triangle"].sql
    expect_failure(
        orc, upkeep.UnsupportedError, lambda: orc.db.create_view("v_tri", sql, strategy="dyn")
    )
    assert "v_tri" not in orc.db.views()
    follow_up(orc)


def test_unsupported_forced_strategy_window_function(orc: Oracle) -> None:
    """Window functions cannot be maintained by the incremental strategies."""
    sql = "SELECT o_orderkey, ROW_NUMBER() OVER (ORDER BY o_orderkey) AS rn FROM orders"
    for strategy in ("dyn", "general"):
        expect_failure(
            orc,
            upkeep.UnsupportedError,
            lambda s=strategy: orc.db.create_view("v_win", sql, strategy=s),
        )
    assert "v_win" not in orc.db.views()


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE TABLE t_blob (a INTEGER, b BLOB)",
        "CREATE TABLE t_list (a INTEGER[])",
        "CREATE INDEX idx_orders ON orders (o_orderkey)",
        "ALTER TABLE orders ADD COLUMN o_extra INTEGER",
    ],
)
def test_unsupported_statements(orc: Oracle, sql: str) -> None:
    """Valid SQL outside upkeep's dialect raises UnsupportedError and changes nothing."""
    duckdb.connect().execute("CREATE TABLE orders (o_orderkey INTEGER)").execute(sql)  # valid SQL
    expect_failure(orc, upkeep.UnsupportedError, lambda: orc.db.execute(sql))
    assert sorted(orc.db.tables()) == sorted(orc.table_names)
    follow_up(orc)


def test_unsupported_statement_inside_transaction_rolls_back(orc: Oracle) -> None:
    """An unsupported statement inside a transaction rolls back the earlier changes."""

    def batch() -> None:
        with orc.transaction():
            orc.insert("customer", seeded_rows("customer", 3, 3), via="sql")
            orc.delete_where("orders", 0, orc.model.rows("orders")[0][0])
            orc.db.execute("CREATE INDEX idx_c ON customer (c_custkey)")

    expect_failure(orc, upkeep.UnsupportedError, batch)
    follow_up(orc)


# ---------------------------------------------------------------------------
# SchemaError
# ---------------------------------------------------------------------------
def _names_row(msg: str, row: tuple) -> bool:
    return repr(row) in msg or all(str(v) in msg for v in row)


BAD_ROWS = [
    ("nt2", (7771, 8881, 9991)),  # too many values
    ("nt2", (7772,)),  # too few
    ("nt2", ("not-a-number-42", 10)),  # wrong type
    ("orders", (1, 2, "O", Decimal("1.00"), "no-such-date-x", "1-URGENT", 0, "c")),
    ("customer", (1, "Customer#1", 2, "BUILDING", "rich-77")),
]
BAD_ROW_PARAMS = [
    pytest.param(t, bad, via, id=f"{t}-{i}-{via}")
    for i, (t, bad) in enumerate(BAD_ROWS)
    for via in ("insert", "executemany")
    # executemany's placeholders fix the arity, so only type errors go through it
    if via == "insert" or len(bad) == len(SCHEMA[t])
]


@pytest.mark.parametrize(("table", "bad", "via"), BAD_ROW_PARAMS)
def test_schema_error_names_row(orc: Oracle, table: str, bad: tuple, via: str) -> None:
    """A bad row in a multi-row insert rejects the whole insert; the message names it."""
    good = seeded_rows(table, 3, 4)
    rows = [good[0], good[1], bad, good[2]]
    if via == "insert":
        fn = lambda: orc.db.insert(table, rows)  # noqa: E731
    else:
        ph = ", ".join("?" for _ in SCHEMA[table])
        fn = lambda: orc.db.executemany(f"INSERT INTO {table} VALUES ({ph})", rows)  # noqa: E731
    err = expect_failure(orc, upkeep.SchemaError, fn)
    assert _names_row(str(err), bad), f"SchemaError does not name the row {bad!r}: {err}"
    follow_up(orc)


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO nt2 VALUES (1, 2, 3)",
        "INSERT INTO nt2 VALUES ('abc', 1)",
        "INSERT INTO no_such_table VALUES (1)",
        "UPDATE nt2 SET k = 'abc' WHERE k = 1",
        "DELETE FROM nt2 WHERE no_such_column = 1",
    ],
)
def test_schema_error_sql(orc: Oracle, sql: str) -> None:
    """Shape/type/name errors in SQL statements raise SchemaError and change nothing."""
    expect_failure(orc, upkeep.SchemaError, lambda: orc.db.execute(sql))
    follow_up(orc)


def test_schema_error_unknown_column_in_view(orc: Oracle) -> None:
    """A view over an unknown column raises SchemaError and is not created."""
    expect_failure(
        orc,
        upkeep.SchemaError,
        lambda: orc.db.create_view("v_bad", "SELECT no_such_col FROM orders"),
    )
    assert "v_bad" not in orc.db.views()


def test_schema_error_inside_transaction_rolls_back(orc: Oracle) -> None:
    """A bad row after valid statements rolls back the whole transaction."""

    def batch() -> None:
        with orc.transaction():
            orc.insert("nt2", [(0, 10), (1, None)])
            orc.update("orders", {1: 3}, 0, orc.model.rows("orders")[0][0])
            orc.delete("lineitem", orc.model.rows("lineitem")[:2])
            orc.db.insert("nt2", [(1, 20), ("bad-value-55", 1)])

    err = expect_failure(orc, upkeep.SchemaError, batch)
    assert "bad-value-55" in str(err)
    follow_up(orc)


# ---------------------------------------------------------------------------
# ConstraintError
# ---------------------------------------------------------------------------
def test_delete_missing_row(orc: Oracle) -> None:
    """Deleting a row that is not present raises ConstraintError naming the row."""
    missing = (6661, 7771)
    err = expect_failure(orc, upkeep.ConstraintError, lambda: orc.db.delete("nt2", [missing]))
    assert _names_row(str(err), missing), f"ConstraintError does not name {missing!r}: {err}"
    follow_up(orc)


def test_delete_present_and_missing_is_atomic(orc: Oracle) -> None:
    """A delete batch with one missing row removes nothing."""
    present = orc.model.rows("orders")[:3]
    missing = (99, 98, "O", Decimal("1.00"), None, "5-LOW", 0, None)
    expect_failure(
        orc, upkeep.ConstraintError, lambda: orc.db.delete("orders", [*present, missing])
    )
    follow_up(orc)


def test_delete_more_copies_than_present(orc: Oracle) -> None:
    """Deleting a row twice when it is present once raises and removes nothing."""
    row = (5, 20)
    orc.insert("nt2", [row])
    n = orc.model.tables["nt2"][row]
    orc.check("insert")
    expect_failure(orc, upkeep.ConstraintError, lambda: orc.db.delete("nt2", [row] * (n + 1)))
    orc.delete("nt2", [row] * n)
    orc.check("delete every copy")
    expect_failure(orc, upkeep.ConstraintError, lambda: orc.db.delete("nt2", [row]))


def test_constraint_error_inside_transaction_rolls_back(orc: Oracle) -> None:
    """A failing delete after inserts, updates and deletes rolls back all of them."""

    def batch() -> None:
        with orc.transaction():
            orc.insert("orders", seeded_rows("orders", 5, 5), via="many")
            orc.update("customer", {3: "BUILDING"}, 0, orc.model.rows("customer")[0][0])
            orc.delete_all("edges")
            orc.insert("edges", [(1, 2, 3), (2, 1, 3)])
            orc.db.delete("nt2", [(4242, 4343)])

    expect_failure(orc, upkeep.ConstraintError, batch)
    follow_up(orc)


def test_deleting_a_row_inserted_then_deleted_in_same_transaction(orc: Oracle) -> None:
    """Inside a transaction a row inserted and deleted once cannot be deleted again."""
    row = (6, 10)

    def batch() -> None:
        with orc.transaction():
            orc.insert("nt2", [row])
            orc.delete("nt2", [row])
            orc.db.delete("nt2", [row] * (orc.model.tables["nt2"][row] + 1))

    expect_failure(orc, upkeep.ConstraintError, batch)
    follow_up(orc)


def test_user_exception_inside_transaction_rolls_back(orc: Oracle) -> None:
    """An exception raised by user code inside ``with db.transaction()`` rolls back."""

    class Boom(Exception):
        pass

    def batch() -> None:
        with orc.transaction():
            orc.insert("lineitem", seeded_rows("lineitem", 4, 6))
            orc.delete_all("customer")
            raise Boom

    expect_failure(orc, Boom, batch)
    follow_up(orc)


def test_failing_view_creation_leaves_existing_views(orc: Oracle) -> None:
    """A duplicate view name raises upkeep.Error and leaves the existing view intact."""
    expect_failure(
        orc, upkeep.Error, lambda: orc.db.create_view("minmax_group", "SELECT * FROM nt2")
    )
    follow_up(orc)


# ---------------------------------------------------------------------------
# documented transaction semantics (docs/sql.md)
# ---------------------------------------------------------------------------
def test_caught_error_inside_transaction_keeps_the_other_statements(orc: Oracle) -> None:
    """An error caught inside the block discards only its statement; the rest commit."""
    calls = {v: s.calls for v, s in orc.subs.items()}
    with orc.transaction():
        orc.insert("orders", seeded_rows("orders", 3, 11))
        with pytest.raises(upkeep.ConstraintError):
            orc.db.delete("nt2", [(4242, 4343)])
        with pytest.raises(upkeep.SchemaError):
            orc.db.insert("customer", [(1, "x", 2, "BUILDING", "not-a-double-9")])
        orc.delete("lineitem", orc.model.rows("lineitem")[:2])
    orc.check("transaction with caught errors")
    assert all(s.calls <= calls[v] + 1 for v, s in orc.subs.items()), "one batch, one call"


def test_reads_inside_transaction(orc: Oracle) -> None:
    """Inside a transaction table reads see staged changes; views change at commit."""
    before = orc.state()
    calls = {v: s.calls for v, s in orc.subs.items()}
    with orc.transaction():
        orc.insert("orders", seeded_rows("orders", 4, 12))
        orc.delete_all("customer")
        for t in ("orders", "customer"):
            staged = orc.db.execute(f"SELECT * FROM {t}").fetchall()
            assert_bag_equal(orc.model.rows(t), staged, f"staged read of {t}", orc.repro())
        for v in orc.views:
            assert before[f"view {v} rows()"] == Counter(map(tuple, orc.db.view(v).rows())), (
                f"view {v} changed before commit\n{orc.repro()}"
            )
        assert {v: s.calls for v, s in orc.subs.items()} == calls, "subscriber called early"
    orc.check("commit")


# ---------------------------------------------------------------------------
# more ConstraintErrors: keys, NOT NULL, dropping what others use
# ---------------------------------------------------------------------------
def test_drop_refused_while_views_depend(orc: Oracle) -> None:
    """DROP of a table or view that views depend on raises and changes nothing."""
    for sql in ("DROP TABLE orders", "DROP VIEW vb_spent"):
        expect_failure(orc, upkeep.ConstraintError, lambda s=sql: orc.db.execute(s))
    assert sorted(orc.db.tables()) == sorted(orc.table_names)
    assert set(orc.views) <= set(orc.db.views())
    follow_up(orc)


@pytest.mark.parametrize(("sql", "error", "words"), [
    ("CREATE TABLE twice (a INTEGER, b VARCHAR, A DOUBLE)", upkeep.SchemaError,
     "column 'A' is declared twice (column names are not case-sensitive)"),
    ("DROP TABLE orders, customer", upkeep.UnsupportedError,
     "DROP of several tables or views in one statement: drop them one at a time"),
    ("DROP VIEW IF EXISTS tpch_q3, minmax_group", upkeep.UnsupportedError,
     "DROP of several tables or views in one statement"),
])
def test_parse_time_errors_are_said_in_upkeeps_words(orc: Oracle, sql: str, error: type,
                                                     words: str) -> None:
    """Errors DuckDB's parser raises for valid syntax (a column declared twice, a DROP
    of several objects) came in DuckDB's words ("Catalog Error: Column with name ...
    already exists!", "Not implemented Error: ..."); they change nothing."""
    exc = expect_failure(orc, error, lambda: orc.db.execute(sql))
    assert str(exc).startswith(words), str(exc)
    assert "Error:" not in str(exc)
    assert sorted(orc.db.tables()) == sorted(orc.table_names)
    follow_up(orc)


@pytest.mark.parametrize(
    "bad",
    [
        "INSERT INTO kt VALUES (1, 5)",  # duplicate key
        "INSERT INTO kt VALUES (9, NULL)",  # NOT NULL
        "INSERT INTO kt VALUES (NULL, 1)",  # key is NOT NULL
        "INSERT INTO kt VALUES (7, 1), (7, 2)",  # duplicate within the statement
        "UPDATE kt SET k = 2 WHERE k = 1",  # update onto an existing key
        "UPDATE kt SET v = NULL WHERE k = 3",
    ],
)
def test_key_and_not_null_constraints(bad: str) -> None:
    """PRIMARY KEY and NOT NULL violations raise ConstraintError like DuckDB, atomically."""
    ddl = "CREATE TABLE kt (k INTEGER PRIMARY KEY, v INTEGER NOT NULL)"
    load = "INSERT INTO kt VALUES (1, 10), (2, 20), (3, 30)"
    view = "SELECT v % 20 AS r, COUNT(*) AS n, SUM(k) AS s FROM kt GROUP BY v % 20"
    con = duckdb.connect()
    con.execute(ddl)
    con.execute(load)
    with pytest.raises(duckdb.ConstraintException):  # DuckDB rejects it too
        con.execute(bad)
    db = upkeep.connect()
    try:
        db.execute(ddl)
        db.execute(load)
        db.create_view("kv", view)
        got = []
        db.view("kv").subscribe(got.append)
        with pytest.raises(upkeep.ConstraintError):
            with db.transaction():
                db.execute("INSERT INTO kt VALUES (4, 40)")
                db.execute(bad)
        assert_bag_equal(
            con.execute("SELECT * FROM kt").fetchall(),
            db.execute("SELECT * FROM kt").fetchall(),
            "kt",
        )
        assert_bag_equal(con.execute(view).fetchall(), db.view("kv").rows(), "kv")
        assert got == [], "subscriber called for a failed batch"
    finally:
        db.close()
        con.close()


def test_an_in_list_compares_each_option_as_equality_does() -> None:
    """``id IN (1, '2')`` on an INTEGER column compares as ``id = '2'`` does: the string
    literal cast to the column's type, as DuckDB binds it (it silently matched only 1,
    then it was refused); one that does not cast (``'x'``) is refused, in a view and in
    DML, and changes nothing; numbers of other types compare by value."""
    db = upkeep.connect()
    db.execute("CREATE TABLE e (id INTEGER, x DOUBLE)")
    db.execute("INSERT INTO e VALUES (1, 1.5), (2, 2.0)")
    for sql in ("CREATE MATERIALIZED VIEW v AS SELECT id FROM e WHERE id IN (1, 'x')",
                "DELETE FROM e WHERE id IN (1, 'x')", "UPDATE e SET x = 0 WHERE id IN ('x')"):
        with pytest.raises(upkeep.errors.SchemaError, match="'x' cannot be cast to INTEGER"):
            db.execute(sql)
    assert sorted(db.execute("SELECT * FROM e").fetchall()) == [(1, 1.5), (2, 2.0)]
    assert db.views() == []
    db.execute("CREATE MATERIALIZED VIEW w AS SELECT id FROM e WHERE id IN (1, '2')")
    assert sorted(db.execute("SELECT * FROM w").fetchall()) == [(1,), (2,)]
    db.execute("DROP VIEW w")
    db.execute("CREATE MATERIALIZED VIEW v AS SELECT id FROM e WHERE id IN (1, 2.0) AND "
               "x IN (1.5, 2)")
    assert sorted(db.execute("SELECT * FROM v").fetchall()) == [(1,), (2,)]
    db.execute("UPDATE e SET x = 0 WHERE id = ' 2 '")
    assert sorted(db.execute("SELECT * FROM e").fetchall()) == [(1, 1.5), (2, 0.0)]


@pytest.mark.parametrize("sql, error, message", [
    ("INSERT INTO t BY NAME SELECT 2 AS b, 1 AS a", "UnsupportedError", "BY NAME"),
    ("INSERT INTO t VALUES (5, 2) RETURNING b", "UnsupportedError", "RETURNING"),
    ("INSERT INTO t DEFAULT VALUES", "UnsupportedError", "DEFAULT VALUES"),
    ("INSERT INTO t VALUES (1, 20) ON CONFLICT (a) DO UPDATE SET b = excluded.b",
     "UnsupportedError", "ON CONFLICT"),
    ("INSERT OR REPLACE INTO t VALUES (1, 3)", "UnsupportedError", "INSERT OR REPLACE"),
    ("UPDATE t SET b = u.b FROM u WHERE t.a = u.a", "UnsupportedError", "UPDATE ... FROM"),
    ("DELETE FROM t USING u WHERE t.a = u.a", "UnsupportedError", "DELETE ... USING"),
    ("UPDATE t SET b = 1 RETURNING *", "UnsupportedError", "RETURNING"),
    ("UPDATE t SET b = b + 1, b = 2", "SchemaError", "column b is assigned twice"),
])
def test_dml_clauses_no_engine_runs_are_refused_before_the_batch_runs(sql, error, message):
    """Clauses of DuckDB's DML that upkeep does not run are refused by name (they were
    dropped: BY NAME inserted by position, RETURNING returned nothing, ON CONFLICT failed
    on the key), and the batch they are in changes nothing.  Each refusal names a position
    (a flag such as OR REPLACE, which has none of its own, that of its statement)."""
    db = upkeep.connect()
    db.execute("CREATE TABLE t (a INTEGER PRIMARY KEY, b INTEGER); CREATE TABLE u (a INTEGER, "
               "b INTEGER); INSERT INTO t VALUES (1, 1), (8, 8)")
    with pytest.raises(getattr(upkeep.errors, error), match=re.escape(message)) as refused:
        db.execute(f"INSERT INTO t VALUES (9, 9); {sql}")
    assert re.search(r"line 1, column \d+\)", str(refused.value))
    assert sorted(db.execute("SELECT * FROM t").fetchall()) == [(1, 1), (8, 8)]


def test_dml_with_a_table_alias_or_ctes_equals_duckdb():
    statements = ["DELETE FROM t AS z WHERE z.a = 8", "UPDATE t AS z SET b = z.b + 1 WHERE z.a = 1",
                  "WITH q AS (SELECT 50 AS x, 60 AS y) INSERT INTO t SELECT * FROM q"]
    db, duck = upkeep.connect(), duckdb.connect()
    for con in (db, duck):
        con.execute("CREATE TABLE t (a INTEGER PRIMARY KEY, b INTEGER)")
        con.execute("INSERT INTO t VALUES (1, 1), (8, 8)")
        for sql in statements:
            con.execute(sql)
    assert sorted(db.execute("SELECT * FROM t").fetchall()) == sorted(
        duck.execute("SELECT * FROM t").fetchall())


@pytest.mark.parametrize("ddl, error, message", [
    ("CREATE TABLE c (x INTEGER CHECK (x > 0))", "UnsupportedError", "CHECK (x > 0) of c.x"),
    ("CREATE TABLE c (x INTEGER UNIQUE)", "UnsupportedError", "UNIQUE of c.x"),
    ("CREATE TABLE c (x INTEGER DEFAULT 5)", "UnsupportedError", "DEFAULT 5 of c.x"),
    ("CREATE TABLE c (x DECIMAL(40, 2))", "SchemaError", "width is 1 to 38"),
    ("CREATE TABLE c (x DECIMAL(5, 6))", "SchemaError", "scale 0 to the width"),
])
def test_a_table_refuses_what_it_would_not_enforce(ddl, error, message):
    """Constraints other than NOT NULL and PRIMARY KEY were accepted and never enforced; a
    DECIMAL wider than DuckDB's was accepted and failed later: both are refused at CREATE."""
    db = upkeep.connect()
    with pytest.raises(getattr(upkeep.errors, error), match=re.escape(message)):
        db.execute(ddl)
    assert db.tables() == []
    db.execute("CREATE TABLE c (x INTEGER NULL, y VARCHAR NOT NULL, k INTEGER PRIMARY KEY)")


def test_dates_written_without_zero_padding_read_as_duckdb_reads_them():
    statements = ["INSERT INTO e VALUES (1, '2020-01-31'), (2, '2020-1-31'), (3, '2020-2-1')",
                  "DELETE FROM e WHERE d = '2020-2-1'"]
    query = "SELECT k FROM e WHERE d = '2020-1-31'"
    db, duck = upkeep.connect(), duckdb.connect()
    for con in (db, duck):
        con.execute("CREATE TABLE e (k INTEGER, d DATE)")
        for sql in statements:
            con.execute(sql)
    db.execute(f"CREATE MATERIALIZED VIEW v AS {query}")
    assert sorted(db.execute("SELECT * FROM v").fetchall()) == sorted(
        duck.execute(query).fetchall())
    with pytest.raises(upkeep.errors.SchemaError, match="'2020-13-31' is not a DATE"):
        db.execute("CREATE MATERIALIZED VIEW w AS SELECT k FROM e WHERE d = '2020-13-31'")


def test_a_view_no_one_can_evaluate_says_why_in_the_users_terms():
    """DuckDB's reason, without the statement upkeep asked it (``DESCRIBE ...``)."""
    db = upkeep.connect()
    db.execute("CREATE TABLE e (s INTEGER, d INTEGER)")
    with pytest.raises(upkeep.UnsupportedError, match="neither maintained nor evaluated") as err:
        db.execute("CREATE VIEW v AS WITH RECURSIVE r(a, b) AS (SELECT r.a, e.d FROM r JOIN e "
                   "ON r.b = e.s) SELECT * FROM r")
    assert "DESCRIBE" not in str(err.value) and "\n" not in str(err.value)
    assert db.views() == []


def test_hidden_helper_views_are_no_users_names(tmp_path) -> None:
    """A view's hidden helpers (a CTE kept as a view, its why-provenance) cannot be dropped
    or replaced by name (DROP VIEW of one left the catalog half-changed, with a raw
    KeyError on the next DROP); a name one takes is refused with its owner; errors about
    dependents name the user's views; a user's table named as a helper would be is a
    clear error when the view is made."""
    db = upkeep.connect(tmp_path / "db")
    db.execute("CREATE TABLE t (a INTEGER, b INTEGER)")
    db.execute("INSERT INTO t VALUES (1, 2), (1, 3), (2, -1)")
    db.execute("CREATE VIEW v AS WITH x AS (SELECT a, sum(b) AS s FROM t GROUP BY a) "
               "SELECT * FROM x WHERE s > 0")
    db.create_view("w", "SELECT a FROM t WHERE b > 0", provenance="why")
    helpers = sorted(set(db._catalog.views) - {"v", "w"})
    assert helpers, "the views keep hidden helpers"
    for helper in helpers:
        owner = "v" if helper.startswith("v__") else "w"
        with pytest.raises(upkeep.SchemaError, match=f"unknown view {helper}"):
            db.execute(f"DROP VIEW {helper}")
        for sql in (f"CREATE OR REPLACE VIEW {helper} AS SELECT 1 AS one",
                    f"CREATE TABLE {helper} (q INTEGER)",
                    f"CREATE TABLE IF NOT EXISTS {helper} (q INTEGER)",
                    f"CREATE TABLE {helper} AS SELECT 1 AS q"):
            with pytest.raises(upkeep.SchemaError, match=f"helper view of view {owner}"):
                db.execute(sql)
    with pytest.raises(upkeep.ConstraintError, match=r"views \['v', 'w'\] depend on it"):
        db.execute("DROP TABLE t")
    db.execute("CREATE TABLE u__cte_y (q INTEGER)")
    with pytest.raises(upkeep.SchemaError, match="view u needs a hidden helper view named "
                                                  "u__cte_y"):
        db.execute("CREATE VIEW u AS WITH y AS (SELECT a FROM t) SELECT * FROM y")
    db.execute("CREATE VIEW IF NOT EXISTS u__cte_y AS SELECT 1 AS one")  # a table: nothing
    assert db.views() == ["v", "w"] and db.tables() == ["t", "u__cte_y"]
    db.execute("DROP VIEW v")
    db.execute("DROP VIEW w")
    db.close()
    db = upkeep.connect(tmp_path / "db")
    assert db.views() == [] and set(db._catalog.views) == set()
    db.execute("DROP TABLE t")


@pytest.mark.parametrize("condition", [
    "x IN (1.5, 'NaN'::DOUBLE)", "x IN (2, NULL)", "x NOT IN (2, NULL)", "id IN (1, 2.0, 7)",
    "x IN (" + ", ".join(str(v / 2) for v in range(2_000)) + ")", "s IN ('a', 'b', NULL)",
    "x IN (id, 2.0)", "x IN (1.5, x)"])
def test_in_lists_equal_duckdb_with_nan_nulls_and_many_options(condition) -> None:
    """IN over constants is one lookup per row (it scanned the options, and its cost
    grew with their number), with DuckDB's answers: NaN matches NaN (it matched nothing),
    a NULL option makes a miss NULL, numbers of other types match by value."""
    rows = [(1, 1.5, "a"), (2, float("nan"), "b"), (3, 2.0, "c"), (4, None, None),
            (5, 999.5, "a"), (7, -0.0, "d")]
    con = duckdb.connect()
    db = upkeep.connect()
    for c in (db, con):
        c.execute("CREATE TABLE e (id INTEGER, x DOUBLE, s VARCHAR)")
        c.executemany("INSERT INTO e VALUES (?, ?, ?)", rows)
    query = f"SELECT id, {condition} AS r FROM e"
    db.create_view("v", query)
    assert sorted(db.view("v").rows()) == sorted(con.execute(query).fetchall())
    db.create_view("w", f"SELECT id FROM e WHERE {condition}")
    assert sorted(db.view("w").rows()) == sorted(
        con.execute(f"SELECT id FROM e WHERE {condition}").fetchall())


def test_a_bad_clock_rejects_the_batch_and_leaves_the_database_openable(tmp_path) -> None:
    """A clock whose readings are not seconds rejects each batch before it changes
    anything (the batch was committed and logged with the reading, the caller got a raw
    TypeError, and every reopening failed on it); options of the wrong kind are refused
    when connecting."""
    import datetime as dt

    db = upkeep.connect(tmp_path / "db", clock=dt.datetime.now)
    db.execute("CREATE TABLE t (a INTEGER) WITH (ttl_seconds = 60)")
    with pytest.raises(upkeep.UnsupportedError, match=r"clock\(\) must return seconds"):
        db.insert("t", [(1,)])
    assert db.batches == 0
    db.close()
    again = upkeep.connect(tmp_path / "db")
    assert again.execute("SELECT * FROM t").fetchall() == []
    again.insert("t", [(2,)])
    assert again.execute("SELECT * FROM t").fetchall() == [(2,)]
    again.close()
    for options, message in (({"clock": "x"}, "clock must be a function"),
                             ({"snapshot_bytes": None}, "snapshot_bytes must be a positive"),
                             ({"snapshot_bytes": 0}, "snapshot_bytes must be a positive"),
                             ({"fsync": "no"}, "fsync must be True or False")):
        with pytest.raises(upkeep.UnsupportedError, match=message):
            upkeep.connect(tmp_path / "other", **options)


def test_metadata_nested_too_deeply_rejects_its_transaction() -> None:
    """In memory, metadata nested too deeply to copy was found so after the batch had
    committed (the caller got a RecursionError for a committed batch): now nothing
    changes, as on a durable database."""
    db = upkeep.connect()
    db.execute("CREATE TABLE t (k INTEGER)")
    db.execute("CREATE VIEW v AS SELECT COUNT(*) AS n FROM t")
    meta: dict = {}
    for _ in range(5000):
        meta = {"m": meta}
    with pytest.raises(upkeep.Error, match="nested too deeply"):
        with db.transaction(metadata=meta):
            db.insert("t", [(1,)])
    assert db.execute("SELECT * FROM t").fetchall() == [] and db.view("v").rows() == [(0,)]
    assert db.batches == 0 and db.metadata() == {}


def test_each_subscriber_gets_a_list_of_its_own() -> None:
    """A subscriber that edits the list it is given (clears it, pops from it) changed what
    the view's other subscribers got: they shared one list."""
    db = upkeep.connect()
    db.execute("CREATE TABLE t (k INTEGER)")
    db.execute("CREATE VIEW v AS SELECT k FROM t")
    db.view("v").subscribe(lambda changes: changes.clear())
    got: list = []
    db.view("v").subscribe(lambda changes: got.append(sorted(changes)))
    db.insert("t", [(1,), (2,)])
    assert got == [[((1,), 1), ((2,), 1)]]


@pytest.mark.parametrize("statement", [
    lambda db: db.insert("t", [(10**5000,)]),
    lambda db: db.delete("t", [(10**5000,)]),
    lambda db: db.execute("SELECT ?", [10**5000]),
    lambda db: db.execute("INSERT INTO t VALUES (" + "9" * 5000 + ")"),
    lambda db: db.insert("t", [(Decimal("1E+5000"),)]),
    lambda db: db.insert("t", [(Decimal("1E+100000000"),)]),  # was expanded: a hang
])
def test_integers_beyond_every_integer_type_are_named_not_printed(statement) -> None:
    """Integers of thousands of digits got Python's own ValueError (it prints at most
    4,300 digits), and a Decimal of a huge exponent into an INTEGER column was expanded
    before its range was checked; now each is upkeep's error, and nothing changes."""
    db = upkeep.connect()
    db.execute("CREATE TABLE t (k INTEGER)")
    with pytest.raises(upkeep.Error, match="out of range|outside HUGEINT|beyond HUGEINT"):
        statement(db)
    assert db.execute("SELECT * FROM t").fetchall() == []


@pytest.mark.parametrize("sql", ["CREATE TEMP VIEW v AS SELECT k FROM t",
                                 "CREATE VIEW v WITH (colour = 'red') AS SELECT k FROM t"])
def test_a_view_property_upkeep_does_not_take_is_named_as_unsupported(sql) -> None:
    """The message ended "(provenance is known)", which said neither that the property is
    unsupported nor which one a view takes."""
    db = upkeep.connect()
    db.execute("CREATE TABLE t (k INTEGER)")
    with pytest.raises(upkeep.UnsupportedError,
                       match=r"of view v is not supported: the one a view takes is provenance"):
        db.execute(sql)
    assert db.views() == []


def test_a_comment_after_the_last_semicolon_ends_a_script() -> None:
    """SQL scripts often end with a comment after the last ``;``; sqlglot reads it as a
    statement of its own, which was refused ("SEMICOLON statements are not supported")
    where DuckDB runs the script."""
    db = upkeep.connect()
    db.execute("CREATE TABLE t (k INTEGER); -- the table")
    db.execute("INSERT INTO t VALUES (1); /* loaded */")
    assert db.execute("SELECT * FROM t;\n-- end of script\n").fetchall() == [(1,)]
    with pytest.raises(upkeep.ParseError, match="empty SQL statement"):
        db.execute("-- only a comment")


def test_a_view_over_a_file_is_refused_and_the_database_stays_openable(tmp_path) -> None:
    """A view over ``read_csv`` was accepted, never followed the file, and once the file
    was gone the durable database (its tables too) no longer opened.  Such a view is
    refused as a view over the clock is; a query may still read the file, and views over
    table functions of values (``range``, ``unnest``) stay."""
    data = tmp_path / "data.csv"
    data.write_text("a,b\n1,2\n")
    db = upkeep.connect(tmp_path / "db")
    db.execute("CREATE TABLE t (k INTEGER)")
    db.insert("t", [(1,), (2,)])
    for sql in (f"SELECT * FROM read_csv('{data}')", f"SELECT * FROM read_parquet('{data}')",
                "SELECT * FROM glob('*')"):
        with pytest.raises(upkeep.UnsupportedError, match="reads from outside the database"):
            db.execute(f"CREATE VIEW z AS {sql}")
    assert db.execute(f"SELECT * FROM read_csv('{data}')").fetchall() == [(1, 2)]
    db.create_view("r", "SELECT k, x FROM t, range(2) AS s(x)")
    db.close()
    data.unlink()
    again = upkeep.connect(tmp_path / "db")
    assert sorted(again.view("r").rows()) == [(1, 0), (1, 1), (2, 0), (2, 1)]
    assert again.views() == ["r"]


def test_numbered_parameters_need_no_spaces_between_them() -> None:
    """``$1,$2`` failed to tokenize (sqlglot reads ``$1,$`` as the start of a ``$tag$``
    string) where ``$1, $2`` ran; strings and ``$$..$$`` strings holding the same text
    are left as written."""
    db = upkeep.connect()
    db.execute("CREATE TABLE t (a INTEGER, b INTEGER, c INTEGER)")
    assert db.execute("SELECT $1,$2", [1, 2]).fetchall() == [(1, 2)]
    assert db.execute("SELECT $1+$2, $1||$2", [1, 2]).fetchall() == [(3, "12")]
    db.execute("INSERT INTO t VALUES ($2,$1,$2)", [1, 2])
    assert db.execute("SELECT * FROM t").fetchall() == [(2, 1, 2)]
    assert db.execute("SELECT '$1,$2', $$a$1,$b$$").fetchall() == [("$1,$2", "a$1,$b")]
