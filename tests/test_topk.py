"""Top-k views (issue 22; ``topk.py``): ``ORDER BY .. LIMIT k [OFFSET m]`` kept in a sorted
list over a helper view.  After every batch of random changes (NULL and NaN keys, ties,
deletes inside the window) the view is checked against DuckDB: it holds rows of the query's
full result, and the ORDER BY keys of its rows are those of DuckDB's window (rows that tie
at the window's edge may differ, as DuckDB's own choice among them may).  Operation counts
show that a change after the window does not re-read it."""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterator

import duckdb
import pytest
import sqlglot
from oracle import _vkey

import upkeep

DDL = "CREATE TABLE t (k INTEGER PRIMARY KEY, g INTEGER, x DOUBLE, s VARCHAR)"
QUERIES = [
    "SELECT k, x FROM t ORDER BY x DESC LIMIT 3",
    "SELECT k, x, s FROM t WHERE g <> 1 ORDER BY x, s DESC LIMIT 4 OFFSET 2",
    "SELECT s, count(*) AS n, sum(x) AS total FROM t GROUP BY s ORDER BY n DESC, s LIMIT 2",
    "SELECT k, s FROM t ORDER BY s NULLS FIRST, k LIMIT 5",
    "SELECT k, x FROM t ORDER BY 2, 1 DESC LIMIT 1",
    # set operations: ORDER BY / LIMIT / OFFSET apply to the whole (they were dropped)
    "SELECT g FROM t WHERE k < 8 INTERSECT SELECT g FROM t WHERE k >= 4 ORDER BY g LIMIT 1",
    "SELECT s FROM t EXCEPT SELECT s FROM t WHERE g = 1 ORDER BY s NULLS FIRST LIMIT 2 "
    "OFFSET 1",
    "SELECT x FROM t WHERE g = 0 INTERSECT ALL SELECT x FROM t WHERE g <> 2 ORDER BY x "
    "LIMIT 2 OFFSET 1",
    "SELECT g FROM t UNION ALL SELECT k FROM t ORDER BY g DESC LIMIT 3",
]


def key_columns(sql: str, columns: list[str]) -> list[int]:
    """The output positions the ORDER BY reads (names or positions)."""
    order = sqlglot.parse_one(sql, read="duckdb").args["order"]
    out = []
    for item in order.expressions:
        node = item.this
        out.append(int(node.this) - 1 if node.is_int else columns.index(node.name.lower()))
    return out


def check_top_k(rows: list[tuple], columns: list[str], con, sql: str) -> None:
    """``rows`` is a valid answer to the top-k ``sql`` on DuckDB connection ``con``."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    limit = int(tree.args["limit"].expression.this)
    offset = int(tree.args["offset"].expression.this) if tree.args.get("offset") else 0
    tree.set("limit", None)
    tree.set("offset", None)
    ordered = con.execute(tree.sql(dialect="duckdb")).fetchall()  # DuckDB's full order
    window = ordered[offset:offset + limit]
    keys = key_columns(sql, columns)

    def key_bag(rs) -> Counter:
        return Counter(tuple(_vkey(r[i]) for i in keys) for r in rs)

    assert key_bag(rows) == key_bag(window), (sql, rows, window)
    everything = Counter(tuple(_vkey(v) for v in r) for r in ordered)
    mine = Counter(tuple(_vkey(v) for v in r) for r in rows)
    assert not mine - everything, (sql, mine - everything)


@pytest.mark.parametrize("sql", QUERIES)
def test_top_k_views_hold_duckdbs_window_after_every_batch(sql) -> None:
    db = upkeep.connect()
    db.execute(DDL)
    view = db.create_view("v", sql)
    assert "strategy topk" in db.explain("v")
    columns = [c for c, _ in view.schema]
    batches = random_batches(db, random.Random(sql), 40, deletes=0.5,
                             doubles=[None, math.nan, 1.0, 2.0, 2.0, 5.5, -1.0],
                             texts=[None, "a", "b", "c"])
    for con in batches:
        check_top_k(view.rows(), columns, con, sql)


def random_batches(db, rnd: random.Random, steps: int, deletes: float, doubles: list,
                   texts: list) -> Iterator[duckdb.DuckDBPyConnection]:
    """``steps`` transactions of 1-4 random inserts and deletes of ``t`` on ``db``; after
    each, a DuckDB connection holding the same rows (the oracle)."""
    rows: dict[int, tuple] = {}
    for _ in range(steps):
        with db.transaction():
            for _ in range(rnd.randint(1, 4)):
                k = rnd.randrange(15)
                if k in rows and rnd.random() < deletes:
                    db.delete("t", [(k, *rows.pop(k))])
                elif k not in rows:
                    rows[k] = (rnd.randrange(3), rnd.choice(doubles), rnd.choice(texts))
                    db.insert("t", [(k, *rows[k])])
        con = duckdb.connect()
        con.execute(DDL)
        if rows:
            con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)",
                            [(k, *r) for k, r in rows.items()])
        yield con


def test_a_change_after_the_window_does_not_reread_it() -> None:
    db = upkeep.connect()
    db.execute(DDL)
    db.insert("t", [(k, 0, float(k), "a") for k in range(100)])
    view = db.create_view("v", "SELECT k, x FROM t ORDER BY x LIMIT 3")
    before = db.view("v").counters()
    db.insert("t", [(500, 0, 50.5, "a")])  # sorts after the window
    db.delete("t", [(90, 0, 90.0, "a")])
    after = db.view("v").counters()
    assert after["window_rebuilds"] == before["window_rebuilds"]
    assert after["sorted_updates"] == before["sorted_updates"] + 2
    db.delete("t", [(1, 0, 1.0, "a")])  # inside the window: the window is re-read
    assert db.view("v").counters()["window_rebuilds"] == after["window_rebuilds"] + 1
    assert sorted(view.rows()) == [(0, 0.0), (2, 2.0), (3, 3.0)]


@pytest.mark.parametrize("operation", ["UNION", "UNION ALL", "INTERSECT", "EXCEPT"])
def test_a_limit_on_a_set_operation_is_kept_or_refused_never_dropped(operation) -> None:
    """Without ORDER BY the rows are any ``k`` of the whole (DuckDB recomputes them);
    a strategy that cannot keep a LIMIT refuses the view."""
    db, con = upkeep.connect(), duckdb.connect()
    for c in (db, con):
        c.execute(DDL)
        c.execute("INSERT INTO t VALUES (1, 0, 1.0, 'a'), (2, 1, 2.0, 'b'), (3, 2, 3.0, 'c'), "
                  "(4, 3, 4.0, 'a')")
    sql = f"SELECT g FROM t {operation} SELECT g FROM t WHERE g > 1 LIMIT 2"
    whole = Counter(con.execute(sql.removesuffix(" LIMIT 2")).fetchall())
    rows = Counter(db.create_view("v", sql).rows())
    assert sum(rows.values()) == min(2, sum(whole.values())) and not rows - whole
    for strategy in ("dyn", "lftj", "general"):
        with pytest.raises(upkeep.StrategyError):
            db.create_view(f"v_{strategy}", sql, strategy=strategy)


# rows of these are fixed by ORDER BY (no ties among the kept rows): compared whole
EXACT = [
    "SELECT DISTINCT ON (g) g, k, x FROM t ORDER BY g, x DESC NULLS LAST, k",
    "SELECT DISTINCT ON (g) g, k FROM t ORDER BY g, k DESC",
    "SELECT DISTINCT ON (g) g, k FROM t ORDER BY g DESC, k LIMIT 2",
    "SELECT k, x FROM t ORDER BY k LIMIT 40 PERCENT",
    "SELECT k, x FROM t ORDER BY k DESC LIMIT 10 PERCENT OFFSET 1",
    "SELECT k, x FROM t ORDER BY k LIMIT 0",
    "SELECT k, x FROM t ORDER BY k LIMIT 0 OFFSET 1",
]


@pytest.mark.parametrize("sql", EXACT)
def test_distinct_on_limit_percent_and_limit_0_equal_duckdb_after_every_batch(sql) -> None:
    """DISTINCT ON kept an arbitrary row of each group (its ORDER BY was dropped, as a view's
    presentation order is); LIMIT n PERCENT was kept as n rows; a LIMIT 0 view made every
    later write to its table fail with a raw IndexError."""
    db = upkeep.connect()
    db.execute(DDL)
    view = db.create_view("v", sql)
    for con in random_batches(db, random.Random(sql), 25, deletes=0.4,
                              doubles=[None, 1.0, 2.0, 5.5, -1.0], texts=[None, "a", "b"]):
        assert Counter(view.rows()) == Counter(con.execute(sql).fetchall()), sql


def test_rows_tie_in_the_order_duckdb_sorts_them_by_every_column() -> None:
    """``row_order`` (what cuts ties in top-k, ranked and window views) sorts rows as DuckDB
    does ``ORDER BY`` every column ascending: NULL after every value, NaN after every
    number and before NULL; a row without either is its own order (shared, not copied)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from upkeep.topk import row_order

    rows = st.lists(st.tuples(
        st.none() | st.integers(-3, 3),
        st.none() | st.sampled_from([math.nan, -math.inf, -1.5, 0.0, 2.0, math.inf]),
        st.none() | st.sampled_from(["", "a", "ab", "b", "é"])), max_size=12)

    @settings(max_examples=150, deadline=None)
    @given(rows)
    def check(rows: list[tuple]) -> None:
        con = duckdb.connect()
        con.execute("CREATE TABLE t (i INTEGER, d DOUBLE, s VARCHAR)")
        if rows:
            con.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
        expected = con.execute("SELECT * FROM t ORDER BY i, d, s").fetchall()
        assert [_vkey(r) for r in sorted(rows, key=row_order)] == \
            [_vkey(r) for r in expected]

    check()
    plain = (1, 2.5, "x")
    assert row_order(plain) is plain
