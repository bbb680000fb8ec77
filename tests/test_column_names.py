"""Column names as written: a table keeps its declared names' case, a view names its
columns as DuckDB names them, and every result shows those names (a cursor's description,
Arrow, pandas, a view's ``columns``, a sink's table), also after reopening.  Names are
still matched regardless of case, as DuckDB matches them.  The oracle is DuckDB running the
same statements."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

import upkeep
from upkeep.io.sinks import make_sink
from upkeep.io.sinks.base import SinkConfig

DDL = [
    "CREATE TABLE Orders (OrderId INTEGER PRIMARY KEY, CustName VARCHAR, Amount DOUBLE)",
    "CREATE TABLE lines (OrderId INTEGER, LineNo INTEGER, Qty INTEGER)",
]
ROWS = {
    "orders": [(1, "Ann", 2.5), (2, "Bob", 7.0), (3, "Ann", 1.0)],
    "lines": [(1, 1, 3), (1, 2, 4), (2, 1, 1), (4, 1, 9)],
}
QUERIES = [
    "SELECT * FROM Orders",
    "SELECT orderid, custname FROM orders",
    "SELECT o.OrderID, SUM(l.Qty) AS TotalQty FROM orders o JOIN lines l "
    "ON o.orderid = l.orderid GROUP BY o.OrderID",
    "SELECT CustName, COUNT(*), sum(Amount) FROM Orders GROUP BY CustName",
    "SELECT DISTINCT custname AS Customer FROM orders",
    "SELECT OrderId FROM orders UNION SELECT orderid FROM lines",
    "SELECT x.* FROM (SELECT OrderId AS Id2, Amount FROM orders) x",
    "SELECT OrderId, Amount, ROW_NUMBER() OVER (ORDER BY Amount) AS Rn FROM orders",
    "SELECT * FROM orders ORDER BY Amount DESC LIMIT 2",
    "WITH Big AS (SELECT * FROM orders WHERE Amount > 1) SELECT big.custname FROM Big",
    "SELECT o.*, l.LineNo FROM orders o LEFT JOIN lines l ON o.OrderId = l.OrderId",
    "SELECT OrderId AS id, OrderId AS ID FROM orders",
    "SELECT orderid AS ORDERID, OrderId AS oRdErId, amount AS amount_1, Amount FROM orders",
    # a column list renaming the first of two columns of one name frees it for the other
    "SELECT * FROM (SELECT o.*, l.* FROM orders o JOIN lines l ON o.OrderId = l.OrderId) "
    "AS d(X)",
    # a GROUP BY expression spelled in another case than the select list's
    "SELECT orderid % 2, COUNT(*) FROM orders GROUP BY ORDERID % 2",
    "SELECT (Amount * 2) + 1 AS k, upper(CUSTNAME) FROM orders GROUP BY AMOUNT * 2, upper(custname)",
]


def _duckdb() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    for ddl in DDL:
        con.execute(ddl)
    for table, rows in ROWS.items():
        con.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(rows[0]))})", rows)
    return con


def _upkeep(path: Path | None = None):
    db = upkeep.connect(str(path) if path else None)
    for ddl in DDL:
        db.execute(ddl)
    for table, rows in ROWS.items():
        db.insert(table, rows)
    return db


def _names(description) -> list[str]:
    return [d[0] for d in description]


@pytest.mark.parametrize("strategy", [None, "recompute"])
@pytest.mark.parametrize("sql", QUERIES)
def test_view_columns_named_as_duckdb_names_them(sql: str, strategy: str | None) -> None:
    con = _duckdb()
    con.execute(f"CREATE VIEW v AS {sql}")
    expected = _names(con.execute("SELECT * FROM v").description)
    db = _upkeep()
    db.create_view("v", sql, strategy=strategy)
    assert db.view("v").columns == expected
    assert [n for n, _ in db.view("v").schema] == expected
    assert _names(db.execute("SELECT * FROM v").description) == expected
    assert db.execute("SELECT * FROM v").arrow().column_names == expected
    assert list(db.execute("SELECT * FROM V").df().columns) == expected
    # an ad-hoc query, and a view over the view, name theirs as DuckDB does too
    assert _names(db.execute(sql).description) == _names(con.execute(sql).description)
    over = "SELECT * FROM v WHERE 1 = 1"
    con.execute(f"CREATE VIEW w AS {over}")
    db.create_view("w", over)
    assert db.view("w").columns == _names(con.execute("SELECT * FROM w").description)
    # the names are matched regardless of case, as DuckDB matches them
    first = expected[0]
    assert sorted(db.execute(f'SELECT "{first.upper()}" FROM v').fetchall()) == sorted(
        con.execute(f'SELECT "{first.upper()}" FROM v').fetchall())


def test_tables_keep_declared_names_and_created_tables_their_query_names() -> None:
    con, db = _duckdb(), _upkeep()
    for sql in ("CREATE TABLE Copy AS SELECT OrderId AS OrderKey, Amount FROM orders",
                "CREATE VIEW cv (A, bB) AS SELECT OrderId, Amount FROM Orders"):
        con.execute(sql)
        db.execute(sql)
    for relation in ("orders", "lines", "copy", "cv"):
        assert _names(db.execute(f"SELECT * FROM {relation}").description) == _names(
            con.execute(f"SELECT * FROM {relation}").description)
    assert db.view("cv").columns == ["A", "bB"]
    # statements reading the tables by other cases keep working
    db.execute("UPDATE orders SET amount = 3 WHERE ORDERID IN (SELECT orderid FROM LINES)")
    con.execute("UPDATE orders SET amount = 3 WHERE ORDERID IN (SELECT orderid FROM LINES)")
    assert sorted(db.execute("SELECT * FROM orders").fetchall()) == sorted(
        con.execute("SELECT * FROM orders").fetchall())


def test_names_survive_reopening_from_the_log_and_from_a_snapshot(tmp_path: Path) -> None:
    db = _upkeep(tmp_path / "db")
    db.execute("CREATE TABLE Copy AS SELECT OrderId AS OrderKey FROM orders")
    db.create_view("v", QUERIES[2])
    expected = {r: _names(db.execute(f"SELECT * FROM {r}").description)
                for r in ("orders", "copy", "v")}
    assert expected["orders"] == ["OrderId", "CustName", "Amount"]
    db.close()
    for checkpoint in (False, True):
        db = upkeep.connect(str(tmp_path / "db"))
        for relation, names in expected.items():
            assert _names(db.execute(f"SELECT * FROM {relation}").description) == names
        assert db.view("v").columns == expected["v"]
        if checkpoint:
            db.checkpoint()
        db.close()
    db = upkeep.connect(str(tmp_path / "db"))
    assert db.view("v").columns == expected["v"]
    db.close()


def test_a_dropped_and_recreated_table_takes_its_new_names() -> None:
    db = upkeep.connect()
    db.execute("CREATE TABLE t (Abc INTEGER)")
    db.execute("DROP TABLE t")
    db.execute("CREATE TABLE t (abc INTEGER)")
    assert _names(db.execute("SELECT * FROM t").description) == ["abc"]
    db.create_view("v", "SELECT abc AS Total FROM t")
    db.execute("CREATE OR REPLACE VIEW v AS SELECT abc FROM t")
    assert db.view("v").columns == ["abc"]


def test_a_sink_writes_the_names_as_written(tmp_path: Path) -> None:
    db = _upkeep()
    db.create_view("v", QUERIES[2])
    path = tmp_path / "out.duckdb"
    sink = make_sink(SinkConfig("v", "duckdb", "sink", {"path": path, "table": "Out"}), db)
    sink.start(0)
    sink.close()
    with duckdb.connect(str(path)) as con:
        assert _names(con.execute("SELECT * FROM Out").description) == db.view("v").columns
    assert db.view("v").columns == ["OrderId", "TotalQty"]


def test_the_spark_engine_shows_the_same_names(spark, tmp_path: Path) -> None:
    db = upkeep.connect(engine="spark", spark=spark, database=tmp_path / "spark")
    try:
        db.execute(DDL[0])
        db.insert("orders", ROWS["orders"])
        db.create_view("v", QUERIES[3])
        con = _duckdb()
        con.execute(f"CREATE VIEW v AS {QUERIES[3]}")
        expected = _names(con.execute("SELECT * FROM v").description)
        assert db.view("v").columns == expected
        assert _names(db.execute("SELECT * FROM v").description) == expected
        assert _names(db.execute("SELECT * FROM orders").description) == [
            "OrderId", "CustName", "Amount"]
    finally:
        db.close()


@pytest.mark.parametrize("order_by", ["TotalQty DESC", "totalqty desc", '"TotalQty" DESC'])
def test_the_terminal_sink_orders_by_a_name_in_any_case(order_by: str) -> None:
    db = _upkeep()
    db.create_view("v", QUERIES[2])
    sink = make_sink(SinkConfig("v", "terminal", "sink", {"order_by": order_by, "limit": 1}),
                     db)
    sink.start(0)
    assert sink.top() == [max(db.view("v").rows(), key=lambda r: r[1])]


def test_a_view_column_list_frees_a_repeated_name_for_the_later_column() -> None:
    """``v(X, Y)`` over ``k, amount, amount, id`` names the later ``amount`` as DuckDB does,
    and a view over it can read it by that name (it was ``amount_1``: refused)."""
    con, db = duckdb.connect(), upkeep.connect()
    for c in (con, db):
        c.execute("CREATE TABLE a (K INTEGER, Amount DOUBLE)")
        c.execute("CREATE TABLE b (K INTEGER, AMOUNT DOUBLE, Id INTEGER)")
        c.execute("INSERT INTO a VALUES (1, 2.5)")
        c.execute("INSERT INTO b VALUES (1, 4.0, 7)")
        c.execute("CREATE VIEW v (X, Y) AS SELECT * FROM a JOIN b USING (k)")
        c.execute("CREATE VIEW w AS SELECT amount, y FROM v")
    for view in ("v", "w"):
        assert _names(db.execute(f"SELECT * FROM {view}").description) == _names(
            con.execute(f"SELECT * FROM {view}").description)
        assert db.execute(f"SELECT * FROM {view}").fetchall() == con.execute(
            f"SELECT * FROM {view}").fetchall()
