"""The DB-API style surface: cursors, bulk input formats, transactions, subscriptions, EXPLAIN."""

import datetime as dt
import functools
import math
from decimal import Decimal

import duckdb
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import view_follows_duckdb

import upkeep

SCHEMA = """
CREATE TABLE orders (ok INTEGER, ck INTEGER, prio INTEGER, day DATE);
CREATE TABLE lineitem (ok INTEGER, qty INTEGER, price DOUBLE, tag VARCHAR);
"""
ORDERS = [(1, 7, 2, dt.date(2024, 1, 1)), (2, 7, 1, dt.date(2024, 1, 2)),
          (3, 8, 5, None), (4, 9, 0, dt.date(2024, 2, 1))]
LINES = [(1, 3, 9.5, "a"), (1, 1, 2.0, None), (2, 4, 1.25, "b"), (4, 2, 3.0, "a"),
         (9, 1, 1.0, "z")]


@pytest.fixture
def db():
    con = upkeep.connect()
    con.execute(SCHEMA)
    con.insert("orders", ORDERS)
    con.insert("lineitem", LINES)
    return con


def duck(sql: str, orders=ORDERS, lines=LINES):
    con = duckdb.connect()
    con.execute(SCHEMA)
    con.executemany("INSERT INTO orders VALUES (?, ?, ?, ?)", orders)
    con.executemany("INSERT INTO lineitem VALUES (?, ?, ?, ?)", lines)
    return con.execute(sql).fetchall()


def test_select_with_where_order_limit_matches_duckdb(db):
    sql = "SELECT ok, qty * price AS v FROM lineitem WHERE tag IS NOT NULL ORDER BY v DESC LIMIT 2"
    assert db.execute(sql).fetchall() == duck(sql)


def test_cursor_fetch_methods_and_description(db):
    cur = db.execute("SELECT ok, ck FROM orders ORDER BY ok")
    assert [d[0] for d in cur.description] == ["ok", "ck"]
    assert cur.fetchone() == (1, 7)
    assert cur.fetchmany(2) == [(2, 7), (3, 8)]
    assert cur.fetchall() == [(4, 9)]
    assert cur.fetchone() is None


def test_arrow_and_pandas_output(db):
    db.execute("CREATE MATERIALIZED VIEW v AS SELECT o.ck, SUM(l.qty) AS q "
               "FROM orders o JOIN lineitem l ON o.ok = l.ok GROUP BY o.ck")
    table = db.execute("SELECT * FROM v").arrow()
    assert isinstance(table, pa.Table)
    assert table.column_names == ["ck", "q"]
    expected = sorted(duck("SELECT o.ck, SUM(l.qty) FROM orders o JOIN lineitem l "
                           "ON o.ok = l.ok GROUP BY o.ck"))
    assert sorted(zip(table.column("ck").to_pylist(), table.column("q").to_pylist(),
                      strict=True)) == expected
    frame = db.execute("SELECT * FROM v").df()
    assert sorted(map(tuple, frame.itertuples(index=False))) == expected


def test_insert_from_pandas_and_arrow():
    db = upkeep.connect()
    db.execute("CREATE TABLE t (a INTEGER, b DOUBLE, c VARCHAR, d DATE)")
    frame = pd.DataFrame({"a": [1, 2], "b": [0.5, None], "c": ["x", None],
                          "d": [dt.date(2024, 1, 1), None]})
    db.insert("t", frame)
    db.insert("t", pa.table({"a": [3], "b": [1.5], "c": ["y"], "d": [dt.date(2024, 1, 3)]}))
    assert sorted(db.execute("SELECT * FROM t").fetchall(), key=lambda r: r[0]) == [
        (1, 0.5, "x", dt.date(2024, 1, 1)), (2, None, None, None),
        (3, 1.5, "y", dt.date(2024, 1, 3))]


def test_executemany_and_parameters():
    db = upkeep.connect()
    db.execute("CREATE TABLE t (a INTEGER, b VARCHAR, c DECIMAL(10,2))")
    db.executemany("INSERT INTO t VALUES (?, ?, ?)", [(1, "x", Decimal("1.5")), (2, "y", 2)])
    db.executemany("UPDATE t SET b = ? WHERE a = ?", [("z", 1)])
    db.execute("DELETE FROM t WHERE a = ?", [2])
    assert db.execute("SELECT * FROM t").fetchall() == [(1, "z", Decimal("1.50"))]


@pytest.mark.parametrize(("sql", "params"), [
    ("WITH x AS (SELECT ? AS v) INSERT INTO t SELECT v, ? FROM x", [(1, 2), (3, 4)]),
    ("WITH x AS (SELECT ? AS v) INSERT INTO t SELECT v + ?, ? FROM x WHERE v < ?",
     [(1, 2, 3, 9), (5, 6, 7, 1)]),
    ("INSERT INTO t SELECT ? + (SELECT ?), ?", [(1, 2, 3)]),
])
def test_parameters_bind_in_the_order_of_the_text_as_duckdb_binds_them(sql, params):
    """A CTE's ``?`` comes first in the text, after the query in sqlglot's tree: its
    value went to the query's ``?`` and the other way round."""
    import duckdb

    db, con = upkeep.connect(), duckdb.connect()
    for c in (db, con):
        c.execute("CREATE TABLE t (a INTEGER, b INTEGER)")
    db.execute(sql, list(params[0]))
    con.execute(sql, list(params[0]))
    db.executemany(sql, params)
    con.executemany(sql, params)
    assert sorted(db.execute("SELECT * FROM t").fetchall()) == sorted(
        con.execute("SELECT * FROM t").fetchall())
    select = "WITH x AS (SELECT ? AS v) SELECT v, ? FROM x"
    assert db.execute(select, [1, 2]).fetchall() == con.execute(select, [1, 2]).fetchall()


@pytest.mark.parametrize(("sql", "params"), [
    ("INSERT INTO t VALUES ($2, $1)", [(1, 2), (3, 4)]),
    ("INSERT INTO t SELECT $1, $1 + $2", [(5, 1)]),
    ("WITH x AS (SELECT $2 AS v) INSERT INTO t SELECT v, $1 FROM x", [(1, 2), (3, 4)]),
    ("UPDATE t SET b = $1 WHERE a = $2", [(9, 2)]),
])
def test_numbered_parameters_bind_by_number_as_duckdb_binds_them(sql, params):
    """``$n`` takes the n-th value wherever it stands (it bound in text order, as ``?``)."""
    import duckdb

    db, con = upkeep.connect(), duckdb.connect()
    for c in (db, con):
        c.execute("CREATE TABLE t (a INTEGER, b INTEGER)")
        c.execute("INSERT INTO t VALUES (2, 0)")
        c.execute(sql, list(params[0]))
        c.executemany(sql, params)
    assert sorted(db.execute("SELECT * FROM t").fetchall()) == sorted(
        con.execute("SELECT * FROM t").fetchall())
    for select, values in [("SELECT $2, $1", [1, 2]), ("SELECT $1, $1 * 2", [5]),
                           ("SELECT a FROM t WHERE b = $2 AND a = $1", [2, 9])]:
        assert db.execute(select, values).fetchall() == con.execute(select, values).fetchall()


@pytest.mark.parametrize(("sql", "params", "message"), [
    ("SELECT $2", [1, 2], "no parameter \\$1"),
    ("SELECT $2", [1], "has 2 parameters, got 1"),
    ("SELECT $1, ?", [1, 2], "all \\? or all numbered"),
    ("SELECT $name", [1], "not by name"),
])
def test_parameters_that_cannot_bind_are_named(sql, params, message):
    db = upkeep.connect()
    with pytest.raises(upkeep.SchemaError, match=message):
        db.execute(sql, params)


@functools.cache
def _decimal_connections():
    """One upkeep and one DuckDB connection for every example (no table: nothing carries
    over from one example to the next)."""
    return upkeep.connect(), duckdb.connect()


@settings(max_examples=150, deadline=None)
@given(st.decimals(allow_nan=False, allow_infinity=False, places=None)
       | st.decimals(min_value=-10**6, max_value=10**6, allow_nan=False, places=3))
def test_a_decimal_parameter_is_typed_and_valued_as_duckdb_does(value):
    """A Decimal binds as DECIMAL(width, scale) of its own digits (it bound as an
    INTEGER without a fraction and as a DOUBLE in exponent form), a DOUBLE past 38."""
    db, con = _decimal_connections()

    def outcome(run, sql):  # the rows, or that it failed (an overflow, on both)
        try:
            return run(sql, [value, value]).fetchall()
        except (upkeep.Error, duckdb.Error):
            return "error"

    for sql in ("SELECT ?, typeof(?)", "SELECT CAST(? AS VARCHAR), ? * 3"):
        assert outcome(db.execute, sql) == outcome(con.execute, sql), (sql, value)


def test_an_integer_parameter_past_hugeint_is_refused():
    db = upkeep.connect()
    for value in (2**127, -2**127 - 1, 2**130):
        with pytest.raises(upkeep.SchemaError, match="outside HUGEINT's range"):
            db.execute("SELECT ?", [value])
    assert db.execute("SELECT ?, ?", [2**127 - 1, -2**127]).fetchall() == [
        (2**127 - 1, -2**127)]


def test_parameters_with_a_cast_read_as_duckdb_reads_them():
    """``?::TYPE`` is a parameter and a cast, as in DuckDB (sqlglot alone reads ``?::`` as
    one operator of other dialects)."""
    db = upkeep.connect()
    db.execute("CREATE TABLE t (a INTEGER PRIMARY KEY, b VARCHAR)")
    db.execute("INSERT INTO t VALUES (?::INTEGER, ?::VARCHAR)", ["7", 8])
    db.execute("INSERT INTO t VALUES (?, '?::x')", [9])
    queries = [("SELECT ?::INTEGER + 1", ["41"]),
               ("SELECT a, b FROM t WHERE a = ?::INTEGER", ["7"]),
               ("SELECT b FROM t WHERE a >= ?::BIGINT ORDER BY a", [8])]
    con = duckdb.connect()
    con.execute("CREATE TABLE t (a INTEGER PRIMARY KEY, b VARCHAR)")
    con.execute("INSERT INTO t VALUES (7, '8'), (9, '?::x')")
    for sql, params in queries:
        assert db.execute(sql, params).fetchall() == con.execute(sql, params).fetchall(), sql


def test_float_and_datetime_parameters_bind_as_duckdb_binds_them():
    """A float is a DOUBLE (not the DECIMAL its digits spell: ``? * 3`` of 0.1 is
    0.30000000000000004), so one written to a DECIMAL column is scaled in floating point
    on every path; a datetime is a TIMESTAMP (it was cut to its date)."""
    when = dt.datetime(2020, 1, 1, 10, 30)
    ddl = "CREATE TABLE t (id INTEGER, d DECIMAL(10,2), day DATE, f DOUBLE)"
    db, con = upkeep.connect(), duckdb.connect()
    for c in (db, con):
        c.execute(ddl)
        c.execute("INSERT INTO t VALUES (?, ?, ?, ?)", [1, 0.285, dt.date(2020, 1, 1), 1e-05])
        c.execute("INSERT INTO t (day, id, d) VALUES (?, ?, ?)", [None, 2, -1.005])
        c.execute("UPDATE t SET d = ?, f = ? WHERE id = ?", [2.675, -1.5e300, 2])
        c.execute("INSERT INTO t VALUES (3, NULL, ?, ?)", [dt.date(2024, 2, 29), math.inf])
        c.execute("UPDATE t SET f = ? WHERE day = ?", [-math.inf, dt.date(2020, 1, 1)])
    queries = [("SELECT ? * 3", [0.1]), ("SELECT typeof(?)", [0.1]), ("SELECT ?", [when]),
               ("SELECT count(*) FROM t WHERE day < ?", [when]),
               ("SELECT * FROM t ORDER BY id", [])]
    for sql, params in queries:
        assert db.execute(sql, params).fetchall() == con.execute(sql, params).fetchall(), sql
    with pytest.raises(upkeep.SchemaError, match="time zone"):
        db.execute("SELECT ?", [when.replace(tzinfo=dt.UTC)])


def test_insert_select_and_update_delete_statements(db):
    db.execute("CREATE TABLE big (ok INTEGER, qty INTEGER)")
    db.execute("INSERT INTO big SELECT ok, qty FROM lineitem WHERE qty > 1")
    db.execute("UPDATE big SET qty = qty * 10 WHERE ok = 1")
    db.execute("DELETE FROM big WHERE ok = 4")
    assert sorted(db.execute("SELECT * FROM big").fetchall()) == [(1, 30), (2, 4)]


def test_transaction_commits_one_batch_and_subscribers_see_it_once(db):
    db.execute("CREATE MATERIALIZED VIEW v AS SELECT o.ck, COUNT(*) AS n "
               "FROM orders o JOIN lineitem l ON o.ok = l.ok GROUP BY o.ck")
    seen = []
    db.view("v").subscribe(seen.append)
    with db.transaction():
        db.insert("lineitem", [(3, 1, 1.0, "c")])
        db.execute("DELETE FROM lineitem WHERE ok = 4")
    assert len(seen) == 1
    delta = dict(seen[0])
    assert delta == {(8, 1): 1, (9, 1): -1}


def test_commits_reach_views_and_subscribers_the_catalog_gained_since_earlier_commits(db):
    """A commit finds the views a table's change reaches, and those someone reads, from
    what earlier commits of that table kept (``LocalCatalog.plans``): a view made, a view
    over it, a subscriber attached and a view dropped in between must each show."""
    lines = list(LINES)

    def change(row: tuple, weight: int = 1) -> None:
        (db.insert if weight > 0 else db.delete)("lineitem", [row])
        (lines.append if weight > 0 else lines.remove)(row)

    per_order = "SELECT ok, SUM(qty) AS q FROM lineitem GROUP BY ok"
    change((3, 1, 1.0, "c"))  # no view reads lineitem yet
    db.execute(f"CREATE MATERIALIZED VIEW per_order AS {per_order}")
    change((3, 2, 1.0, "d"))
    assert sorted(db.view("per_order").rows()) == sorted(duck(per_order, lines=lines))
    seen: list = []
    db.view("per_order").subscribe(seen.append)
    change((4, 5, 1.0, "e"))  # order 4's quantities: 2, then 2 + 5
    assert [dict(changes) for changes in seen] == [{(4, 2): -1, (4, 7): 1}]
    big = f"SELECT ok, q FROM ({per_order}) WHERE q > 3"
    db.execute("CREATE MATERIALIZED VIEW big AS SELECT ok, q FROM per_order WHERE q > 3")
    change((1, 9, 1.0, "f"))
    assert sorted(db.view("big").rows()) == sorted(duck(big, lines=lines))
    db.execute("DROP VIEW big")
    change((4, 5, 1.0, "e"), -1)
    assert sorted(db.view("per_order").rows()) == sorted(duck(per_order, lines=lines))
    assert len(seen) == 3 and dict(seen[-1]) == {(4, 7): -1, (4, 2): 1}


def test_failed_transaction_changes_nothing(db):
    db.execute("CREATE MATERIALIZED VIEW v AS SELECT ok, SUM(qty) AS q FROM lineitem GROUP BY ok")
    before = sorted(db.view("v").rows())
    with pytest.raises(upkeep.ConstraintError):
        with db.transaction():
            db.insert("lineitem", [(1, 100, 1.0, "new")])
            db.delete("lineitem", [(1, 999, 1.0, "missing")])
    assert sorted(db.view("v").rows()) == before
    assert sorted(db.execute("SELECT * FROM lineitem").fetchall(), key=str) == sorted(
        LINES, key=str)


def test_subscriber_deltas_replay_to_the_view(db):
    db.execute("CREATE MATERIALIZED VIEW v AS SELECT o.ck, l.qty FROM orders o, lineitem l "
               "WHERE o.ok = l.ok")
    state: dict = {}
    for row in db.view("v").rows():
        state[row] = state.get(row, 0) + 1
    db.view("v").subscribe(lambda changes: [state.__setitem__(r, state.get(r, 0) + w)
                                            for r, w in changes])
    db.insert("lineitem", [(2, 9, 1.0, "n"), (1, 9, 1.0, "n")])
    db.execute("DELETE FROM orders WHERE ok = 1")
    expected = {}
    for row in db.view("v").rows():
        expected[row] = expected.get(row, 0) + 1
    assert {r: w for r, w in state.items() if w} == expected


def test_views_over_views_and_derived_tables(db):
    db.execute("CREATE MATERIALIZED VIEW per_order AS SELECT ok, SUM(qty) AS q FROM lineitem "
               "GROUP BY ok")
    db.execute("CREATE MATERIALIZED VIEW hist AS SELECT q, COUNT(*) AS n FROM "
               "(SELECT ok, q FROM per_order WHERE q > 1) AS big GROUP BY q")
    db.insert("lineitem", [(2, 10, 1.0, "x")])
    got = sorted(db.execute("SELECT * FROM hist").fetchall())
    lines = LINES + [(2, 10, 1.0, "x")]
    assert got == sorted(duck("SELECT q, COUNT(*) FROM (SELECT ok, SUM(qty) AS q FROM lineitem "
                              "GROUP BY ok) WHERE q > 1 GROUP BY q", lines=lines))
    assert "hist" in db.views() and "per_order" in db.views()


def test_explain_names_strategy_class_and_tree(db):
    db.execute("CREATE MATERIALIZED VIEW agg AS SELECT l.ok, COUNT(*) AS n "
               "FROM orders o JOIN lineitem l ON o.ok = l.ok GROUP BY l.ok")
    text = db.explain("agg")
    assert "strategy dyn-aggregate" in text
    assert "q-hierarchical" in text and "not q-hierarchical" not in text
    assert "orders o" in text and "lineitem l" in text
    db.execute("CREATE MATERIALIZED VIEW outer_j AS SELECT o.ok, l.qty FROM orders o "
               "LEFT JOIN lineitem l ON o.ok = l.ok")  # a join plus an anti-join
    assert "recompute" not in db.explain("outer_j")
    assert "anti-join NOT EXISTS" in db.explain("outer_j")
    db.execute("CREATE MATERIALIZED VIEW outer_lt AS SELECT o.ok, l.qty FROM orders o "
               "LEFT JOIN lineitem l ON o.ok < l.ok AND o.ck > l.qty")  # two comparisons:
    assert "strategy recompute" in db.explain("outer_lt")  # no anti-join keeps this one
    assert "LEFT JOIN" in db.explain("outer_lt")
    for view, on in (("outer_j", "o.ok = l.ok"), ("outer_lt", "o.ok < l.ok AND o.ck > l.qty")):
        assert sorted(db.view(view).rows(), key=str) == sorted(
            duck(f"SELECT o.ok, l.qty FROM orders o LEFT JOIN lineitem l ON {on}"), key=str)


@pytest.mark.parametrize("select, group_by, having", [
    ("o.ck, COUNT(*) AS n, SUM(l.qty) AS total", "o.ck", ""),
    ("SUM(l.qty) AS total, o.ok, o.ck, AVG(l.qty) AS mean", "o.ck, o.ok", ""),
    ("o.ck, COUNT(*) AS n", "o.ck", "HAVING COUNT(*) > 1")])
def test_membership_is_a_lookup_on_dynamic_yannakakis_aggregates(db, select, group_by,
                                                                   having):
    """A GROUP BY view's row is found by its group's lookup, in any select-list order, and
    only with its aggregates' values (it enumerated every group)."""
    sql = (f"SELECT {select} FROM orders o JOIN lineitem l ON o.ok = l.ok "
           f"GROUP BY {group_by} {having}")
    db.execute(f"CREATE MATERIALIZED VIEW g AS {sql}")
    expected = duck(sql)
    assert expected and sorted(db.view("g").rows()) == sorted(expected)
    runtime = db.runtime("g")
    assert runtime.strategy == "dyn-aggregate"
    enumerated = runtime.counters()["enum_work"]
    for row in expected:
        assert row in db.view("g") and db.view("g").count(row) == 1
        assert (*row[:-1], row[-1] + 1000) not in db.view("g")  # another aggregate value
    assert (None,) * len(expected[0]) not in db.view("g")
    assert runtime.counters()["enum_work"] == enumerated, "membership must not enumerate"
    with pytest.raises(upkeep.SchemaError, match="values, not 0"):  # not a row of it
        assert () in db.view("g")


def test_drop_refuses_while_dependents_exist(db):
    db.execute("CREATE MATERIALIZED VIEW a AS SELECT ok FROM lineitem")
    db.execute("CREATE MATERIALIZED VIEW b AS SELECT ok FROM a")
    with pytest.raises(upkeep.ConstraintError):
        db.execute("DROP VIEW a")
    db.execute("DROP VIEW b")
    db.execute("DROP VIEW a")
    assert db.views() == []


def test_membership_is_a_lookup_on_dynamic_yannakakis_views(db):
    db.execute("CREATE MATERIALIZED VIEW f AS SELECT o.ok, o.ck, l.qty FROM orders o "
               "JOIN lineitem l ON o.ok = l.ok")
    rows = db.view("f").rows()
    expected = duck("SELECT o.ok, o.ck, l.qty FROM orders o JOIN lineitem l ON o.ok = l.ok")
    assert sorted(rows) == sorted(expected)
    runtime = db.runtime("f")
    assert runtime.strategy == "dyn"
    enumerated = runtime.counters()["enum_work"]
    for row in expected:
        assert db.view("f").count(row) == expected.count(row)
    assert (1, 7, 99) not in db.view("f")
    assert (3, 8, 1) not in db.view("f")  # order 3 has no line items
    assert runtime.counters()["enum_work"] == enumerated, "membership must not enumerate"


@pytest.mark.parametrize("inner", [
    "SELECT r.a, r.b * 0 AS x FROM r",
    "SELECT t.a, r.b + t.f AS x FROM t JOIN r ON t.a = r.a"])
@pytest.mark.parametrize("outer", ["SELECT * FROM v1", "SELECT COUNT(*) AS n FROM v1",
                                   "SELECT DISTINCT * FROM v1"])
def test_a_view_over_a_view_keeps_rows_an_expression_makes_equal(inner, outer):
    """Two rows of the inner view made equal by an expression are one row of weight two
    to the view over it (the build read them as one row, the second overwriting)."""
    view_follows_duckdb(["CREATE TABLE t (a INTEGER, f DECIMAL(8,2))",
                         "CREATE TABLE r (a INTEGER, b INTEGER)",
                         "INSERT INTO t VALUES (3, NULL), (4, 1.50)",
                         "INSERT INTO r VALUES (3, 1), (3, 2), (4, 7), (4, 7)",
                         f"CREATE VIEW v1 AS {inner}", f"CREATE VIEW v AS {outer}"],
                        ["INSERT INTO r VALUES (3, 5)", "DELETE FROM r WHERE b = 1"])


STAR_QUERIES = [
    "SELECT * EXCLUDE (a) FROM t",
    "SELECT * REPLACE (a + 100 AS a) FROM t",
    "SELECT * RENAME (a AS z) FROM t",
    "SELECT t.* EXCLUDE (b), u.* RENAME (k AS uk) FROM t JOIN u ON t.a = u.k",
    "SELECT * EXCLUDE (u.k) REPLACE (b || '!' AS b) FROM t JOIN u ON t.a = u.k",
    "SELECT * EXCLUDE (b) FROM t JOIN x USING (a)",  # both b: only the first went
    "SELECT * REPLACE (d AS a, a AS d) FROM x",  # by the alias: a bare column went by itself
]


@pytest.mark.parametrize("strategy", [None, "dyn", "general"])
def test_star_exclude_replace_and_rename_as_duckdb(strategy):
    """``* EXCLUDE / REPLACE / RENAME`` in views and in ad-hoc queries (views kept every
    column unchanged; ``SELECT * ...`` was served from the table as it is)."""
    db, con = upkeep.connect(), duckdb.connect()
    for c in (db, con):
        c.execute("CREATE TABLE t (a INTEGER, b VARCHAR)")
        c.execute("CREATE TABLE u (k INTEGER, w INTEGER)")
        c.execute("CREATE TABLE x (a INTEGER, b VARCHAR, d INTEGER)")
    for i, sql in enumerate(STAR_QUERIES):
        db.create_view(f"v{i}", sql, strategy=strategy)
    for c in (db, con):
        c.execute("INSERT INTO t VALUES (1, 'x'), (2, 'y')")
        c.execute("INSERT INTO u VALUES (1, 10), (1, 11), (3, 30)")
        c.execute("INSERT INTO x VALUES (1, 'p', 7), (2, 'q', 8)")
    for i, sql in enumerate(STAR_QUERIES):
        want = con.execute(sql)
        names = [d[0] for d in want.description]
        rows = sorted(want.fetchall())
        assert db.view(f"v{i}").columns == names, sql
        assert sorted(db.view(f"v{i}").rows()) == rows, sql
        mine = db.execute(sql)
        assert [d[0] for d in mine.description] == names, sql
        assert sorted(mine.fetchall()) == rows, sql
    with pytest.raises(upkeep.SchemaError, match="EXCLUDE"):
        db.create_view("bad", "SELECT * EXCLUDE (nope) FROM t", strategy=strategy)


@pytest.mark.parametrize("sql", [
    "SELECT * FROM t AS q(p, r)", "SELECT * FROM t TABLESAMPLE 0%", "SELECT * FROM t LIMIT 50%",
    "SELECT * FROM range(3)", "SELECT * FROM generate_series(1, 3) AS g(x)",
])
def test_select_star_forms_read_as_duckdb_reads_them(sql):
    """``SELECT * FROM rel [LIMIT n]`` is served from the relation itself only as written
    so: an alias renaming its columns, a sample, a percentage limit or a table function
    went by it (the columns not renamed, every row, 50 rows, an unknown table ``''``)."""
    db, con = upkeep.connect(), duckdb.connect()
    for c in (db, con):
        c.execute("CREATE TABLE t (a INTEGER, b VARCHAR)")
        c.execute("INSERT INTO t VALUES (1, 'x'), (2, 'y'), (3, 'z'), (4, 'w')")
    mine, want = db.execute(sql), con.execute(sql)
    assert [d[0] for d in mine.description] == [d[0] for d in want.description]
    assert sorted(mine.fetchall()) == sorted(want.fetchall())
    db.execute(f"CREATE TABLE c AS {sql}")
    con.execute(f"CREATE TABLE c AS {sql}")
    assert sorted(db.execute("SELECT * FROM c").fetchall()) == sorted(
        con.execute("SELECT * FROM c").fetchall())


def test_dict_rows_find_columns_whatever_their_case_as_frames_do():
    """A dict row's keys name columns as SQL names them (``"Col A"`` is column ``col a``),
    as a DataFrame's and an Arrow table's column names do; a key given twice in two cases
    is refused, not one of them dropped."""
    db = upkeep.connect()
    db.execute('CREATE TABLE m ("Col A" INTEGER, Name VARCHAR)')
    db.insert("m", [{"Col A": 1, "Name": "dict"}, {"col a": 2, "NAME": "lower"}])
    db.insert("m", pd.DataFrame({"Col A": [3], "Name": ["frame"]}))
    assert sorted(db.execute("SELECT * FROM m").fetchall()) == [
        (1, "dict"), (2, "lower"), (3, "frame")]
    with pytest.raises(upkeep.SchemaError, match="unknown or repeated columns"):
        db.insert("m", [{"Col A": 4, "col a": 5, "name": "twice"}])
    with pytest.raises(upkeep.SchemaError, match="unknown or repeated columns"):
        db.insert("m", [{"nope": 4}])
    assert len(db.execute("SELECT * FROM m").fetchall()) == 3


def test_bound_parameters_are_read_without_asking_duckdb(monkeypatch):
    """A Decimal, float or date parameter's cast is read by the compiler, not folded by
    DuckDB (~0.6 ms a statement: a Decimal parameter's DECIMAL cast was), with the values
    DuckDB gives the same statement."""
    from upkeep.expressions import ExpressionCompiler

    folded = []
    fold = ExpressionCompiler._fold
    monkeypatch.setattr(ExpressionCompiler, "_fold",
                        lambda self, node: folded.append(node.sql()) or fold(self, node))
    ddl = "CREATE TABLE t (k INTEGER, d DECIMAL(10,2), x DOUBLE, day DATE)"
    update = "UPDATE t SET d = d + ?, x = x * ?, day = ? WHERE k = ? AND d > ?"
    db, con = upkeep.connect(), duckdb.connect()
    for c in (db, con):
        c.execute(ddl)
    db.insert("t", [(1, Decimal("1.00"), 1.0, dt.date(2020, 1, 1))])
    con.execute("INSERT INTO t VALUES (1, 1.00, 1.0, DATE '2020-01-01')")
    for params in ([Decimal("2.50"), 0.5, dt.date(2021, 1, 1), 1, Decimal("-0.00")],
                   [Decimal("-3.505"), 2.0, dt.date(2022, 2, 2), 1, Decimal("0.001")],
                   [Decimal("1E+2"), 1.5, dt.date(2023, 3, 3), 1, Decimal("-12345678901")]):
        for c in (db, con):
            c.execute(update, params)
        assert db.execute("SELECT * FROM t").fetchall() == con.execute(
            "SELECT * FROM t").fetchall(), params
    assert folded == []


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["insert", "update", "delete", "select", "many"]),
                          st.integers(0, 3), st.integers(-5, 5)), min_size=1, max_size=25))
def test_a_repeated_text_runs_as_written_each_time(steps):
    """A text run again is parsed once (``sql.parsed_once``): each run, and each tuple of
    an executemany, binds its own parameters into a copy, and a run without parameters
    gets a copy of the kept tree, so what a run changes in its statement never reaches
    the next run (checked against DuckDB running the same texts)."""
    texts = {"insert": "INSERT INTO t VALUES (?, ?)",
             "update": "UPDATE t SET n = n + ? WHERE k = ?",
             "delete": "DELETE FROM t WHERE k = ? AND n > ?",
             "select": "SELECT k, SUM(n) FROM t GROUP BY k ORDER BY k",
             "many": "UPDATE t SET n = n + ? WHERE k = ?"}  # by executemany
    db, con = upkeep.connect(), duckdb.connect()
    for c in (db, con):
        c.execute("CREATE TABLE t (k INTEGER, n INTEGER)")
        c.execute("INSERT INTO t VALUES (1, 1), (2, 2)")
    for kind, k, n in steps:
        if kind == "many":
            for c in (db, con):
                c.executemany(texts[kind], [(n, k), (n, k + 1)])
        else:
            params = {"insert": [k, n], "update": [n, k], "delete": [k, n],
                      "select": None}[kind]
            got = db.execute(texts[kind], params).fetchall() if params else db.execute(
                texts[kind]).fetchall()
            want = con.execute(texts[kind], params).fetchall() if params else con.execute(
                texts[kind]).fetchall()
            if kind == "select":
                assert got == want
        assert sorted(db.execute("SELECT * FROM t").fetchall()) == sorted(
            con.execute("SELECT * FROM t").fetchall()), (kind, k, n)


def test_a_text_run_again_is_parsed_once(monkeypatch):
    """Parsing is most of a keyed statement's time: a text with parameters is parsed on
    its first run only, one without from its second (a text run once pays no copy)."""
    import sqlglot

    from upkeep import sql as sql_module

    parses = []
    real = sqlglot.parse
    monkeypatch.setattr(sql_module.sqlglot, "parse",
                        lambda text, **kw: parses.append(text) or real(text, **kw))
    monkeypatch.setattr(sql_module, "_PARSED", {})
    monkeypatch.setattr(sql_module, "_ACCEPTED", set())  # texts run before count as seen
    db = upkeep.connect()
    db.execute("CREATE TABLE t (k INTEGER, n INTEGER)")
    parses.clear()
    for i in range(5):
        db.execute("INSERT INTO t VALUES (?, ?)", [i, i])
    assert len(parses) == 1
    parses.clear()
    for _ in range(4):
        assert db.execute("SELECT COUNT(*) FROM t").fetchall() == [(5,)]
    assert len(parses) == 2
    parses.clear()  # executemany's text too, as execute's with parameters
    for _ in range(3):
        db.executemany("UPDATE t SET n = n + ? WHERE k = ?", [(1, 0), (1, 1)])
    assert len(parses) == 1
    assert sorted(db.execute("SELECT * FROM t").fetchall()) == [
        (0, 3), (1, 4), (2, 2), (3, 3), (4, 4)]
    parses.clear()  # a text too long to keep, run with parameters: parsed once a run
    long_text = "INSERT INTO t VALUES " + ", ".join(["(?, ?)"] * 800)
    for _ in range(2):
        db.execute(long_text, list(range(1600)))
    assert len(parses) == 2


def test_parameters_are_bound_into_a_tree_without_token_places(monkeypatch):
    """A statement with parameters is bound into a copy of its kept tree without the
    token places errors name (a copy in half the time); one that raises is bound again
    into the tree with them and run again, so its error names the place in the text, as
    each tuple's of an executemany does."""
    from sqlglot import exp

    from upkeep import engine as engine_module
    from upkeep.sql import bind_parameters, parse

    db = upkeep.connect()
    db.execute("CREATE TABLE t (k INTEGER, n INTEGER)")
    db.execute("CREATE TABLE products (name VARCHAR, category VARCHAR, price INTEGER) "
               "WITH (provenance = 'update')")
    placed = []

    def recording(stmt, params, order=None):
        placed.append(any(n.meta for n in stmt.find_all(exp.Identifier)))
        return bind_parameters(stmt, params, order)

    monkeypatch.setattr(engine_module, "bind_parameters", recording)
    for i in range(3):
        db.execute("INSERT INTO t VALUES (?, ?)", [i, i])
    db.executemany("UPDATE t SET n = n + ? WHERE k = ?", [(1, 0), (1, 1)])
    assert placed == [False] * 5
    assert sorted(db.execute("SELECT * FROM t").fetchall()) == [(0, 1), (1, 2), (2, 2)]
    refused = "DELETE FROM products WHERE category = ? OR price > ?"
    with pytest.raises(upkeep.UnsupportedError) as direct:  # the text's places, as parsed
        db.execute_parsed(bind_parameters(parse(refused)[0], ["x", 5]))
    assert "(line 1, column" in str(direct.value)
    placed.clear()
    with pytest.raises(upkeep.UnsupportedError) as error:
        db.execute(refused, ["x", 5])
    assert str(error.value) == str(direct.value)
    assert placed == [False, True]  # without places first, then again with them
    with pytest.raises(upkeep.UnsupportedError) as error:
        db.executemany(refused, [("x", 5)])
    assert str(direct.value) in str(error.value)


def test_a_query_s_columns_are_typed_as_duckdb_describes_them():
    """A query DuckDB evaluates is typed from its result's description, not from a second
    planning of the query (DESCRIBE): the two agree for every type upkeep holds, the
    widths of decimals and a NULL column included."""
    from upkeep.types import type_from_name
    from upkeep.views import query_duckdb

    sql = ("SELECT 1::TINYINT a, 2::SMALLINT b, 3 c, 4::BIGINT d, 5::HUGEINT e, 1.5::DOUBLE f, "
           "1.25::DECIMAL(5,2) g, 12.5 h, 'x' i, DATE '2020-01-01' j, "
           "TIMESTAMP '2020-01-01 01:02:03' k, true l, NULL m, 1 + 2.5 n")
    columns, rows = query_duckdb(sql, set(), lambda name: None)
    described = duckdb.connect().execute("DESCRIBE " + sql).fetchall()
    assert columns == [(row[0], type_from_name(row[1])) for row in described]
    assert [t.sql() for _, t in columns][:8] == [
        "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "DOUBLE", "DECIMAL(5,2)",
        "DECIMAL(3,1)"]
    assert rows == [(1, 2, 3, 4, 5, 1.5, Decimal("1.25"), Decimal("12.5"), "x",
                     dt.date(2020, 1, 1), dt.datetime(2020, 1, 1, 1, 2, 3), True, None,
                     Decimal("3.5"))]


def test_sql_that_is_no_string_is_a_parse_error():
    db = upkeep.connect()
    for bad in (["SELECT 1"], bytearray(b"SELECT 1"), {"q": 1}, None):
        with pytest.raises(upkeep.ParseError, match="SQL must be a string"):
            db.execute(bad)
        with pytest.raises(upkeep.ParseError, match="SQL must be a string"):
            db.execute(bad, [1])
