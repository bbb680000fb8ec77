"""Provenance tables on the local engine: what-if, access control and trust on tables and
maintained views, checked against DuckDB re-running the log without what was removed;
bad input; durability.  ``papers/update-provenance-hyperplane-transactions.txt``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import upkeep
from upkeep.errors import ConstraintError, ProvenanceError, SchemaError, UnsupportedError
from upkeep.update_provenance import AccessControl

PRODUCTS = ("CREATE TABLE products (product VARCHAR, category VARCHAR, price INTEGER) "
            "WITH (provenance = '{mode}')")
F1 = [("Kids mnt bike", "Sport", 120), ("Tennis Racket", "Sport", 70),
      ("Kids mnt bike", "Kids", 120), ("Children sneakers", "Fashion", 40)]
T1 = ["UPDATE products SET category = 'Sport' WHERE product = 'Kids mnt bike' AND category = 'Kids'",
      "UPDATE products SET category = 'Bicycles' WHERE product = 'Kids mnt bike' "
      "AND category = 'Sport'"]
T2 = ["UPDATE products SET price = 50 WHERE category = 'Sport'"]
BY_CATEGORY = "SELECT category, COUNT(*) AS n, SUM(price) AS total FROM products GROUP BY category"


def figure_db(mode: str = "update", database=None):
    db = upkeep.connect() if database is None else upkeep.connect(database)
    db.execute(PRODUCTS.format(mode=mode))
    with db.transaction(metadata={"who": "loader"}):  # T1 in the database: the input rows
        db.insert("products", F1)
    db.create_view("by_category", BY_CATEGORY)
    with db.transaction(metadata={"principals": ["FR", "IL"], "trust": 0.6}):
        for sql in T1:
            db.execute(sql)
    with db.transaction(metadata={"principals": ["FR"], "trust": 0.3}):
        for sql in T2:
            db.execute(sql)
    return db


def duck(statements_by_txn, skip=(), skip_rows=(), query=None):
    """DuckDB re-running the log (set semantics) without ``skip`` transactions and rows."""
    con = duckdb.connect()
    con.execute("CREATE TABLE products (product VARCHAR, category VARCHAR, price INTEGER)")
    for txn, statements in statements_by_txn:
        if txn in skip:
            continue
        for sql in statements:
            if isinstance(sql, tuple):
                if sql not in skip_rows:
                    con.execute("INSERT INTO products VALUES (?, ?, ?)", list(sql))
            else:
                con.execute(sql)
            con.execute("CREATE OR REPLACE TABLE products AS SELECT DISTINCT * FROM products")
    return Counter(con.execute(query or "SELECT * FROM products").fetchall())


LOG = [(1, F1), (2, T1), (3, T2)]


@pytest.mark.parametrize("mode", ["update", "update-naive"])
def test_figure_1_log_through_the_database(mode):
    db = figure_db(mode)
    assert Counter(db.execute("SELECT * FROM products").fetchall()) == duck(LOG)
    assert db.transactions() == {1: {"who": "loader"},
                                 2: {"principals": ["FR", "IL"], "trust": 0.6},
                                 3: {"principals": ["FR"], "trust": 0.3}}
    if mode == "update":
        assert str(db.provenance("products", ("Kids mnt bike", "Bicycles", 120))) in (
            "(products#1 + products#3) ·M T2", "(products#3 + products#1) ·M T2")
        assert str(db.provenance("products", ("Kids mnt bike", "Sport", 50))) == \
            "(products#1 - T2) ·M T3"
        assert db.provenance("products", ("Lego", "Kids", 1)).is_zero
    for abort in ([2], [3], [2, 3], [1]):
        for name, query in (("products", None), ("by_category", BY_CATEGORY)):
            world = db.what_if(name, abort=abort)
            assert Counter(world.rows) == duck(LOG, skip=abort, query=query), (name, abort)
    tennis = ("products", ("Tennis Racket", "Sport", 70))
    world = db.what_if("by_category", without=[tennis])
    assert Counter(world.rows) == duck(LOG, skip_rows={tennis[1]}, query=BY_CATEGORY)
    assert Counter(db.view("by_category").rows()) == duck(LOG, query=BY_CATEGORY)


def test_what_if_reports_the_change_and_leaves_everything_as_it_was():
    db = figure_db()
    seen = []
    db.view("by_category").subscribe(seen.append)
    before_rows = sorted(db.view("by_category").rows())
    before_table = sorted(db.execute("SELECT * FROM products").fetchall())
    batches = db.batches
    world = db.what_if("by_category", abort=[2])  # Example 4.4
    assert sorted(world.added) == [("Kids", 1, 120), ("Sport", 2, 100)]
    assert sorted(world.removed) == [("Bicycles", 1, 120), ("Sport", 1, 50)]
    assert sorted(db.view("by_category").rows()) == before_rows
    assert sorted(db.execute("SELECT * FROM products").fetchall()) == before_table
    assert (seen, db.batches) == ([], batches)
    stale = db.what_if("by_category", abort=[3])
    db.execute("DELETE FROM products WHERE category = 'Fashion'")  # maintenance goes on
    with pytest.raises(upkeep.Error, match="changed after this what-if"):
        stale.rows  # noqa: B018 - the hypothetical rows of a state that is gone
    assert Counter(db.view("by_category").rows()) == duck(
        LOG + [(4, ["DELETE FROM products WHERE category = 'Fashion'"])], query=BY_CATEGORY)


TIED_VIEWS = {  # views whose rows depend on which of two tied rows came first
    "top": "SELECT a FROM r ORDER BY b LIMIT 1",
    "top_offset": "SELECT a FROM r ORDER BY b DESC LIMIT 1 OFFSET 1",
    "ranked": "SELECT a, b FROM r QUALIFY ROW_NUMBER() OVER (PARTITION BY b ORDER BY b) <= 1",
    "numbered": "SELECT a, ROW_NUMBER() OVER (PARTITION BY b ORDER BY b) AS rn FROM r",
    "lagged": "SELECT a, LAG(a) OVER (ORDER BY b) AS l FROM r",
    "distinct_on": "SELECT DISTINCT ON (b) b, a FROM r",
    "any_one": "SELECT a FROM r LIMIT 1",
}


@pytest.mark.parametrize("strategy", [None, "recompute"])
@pytest.mark.parametrize("view", sorted(TIED_VIEWS))
def test_a_what_if_leaves_a_view_of_tied_rows_as_it_was(view, strategy):
    """A window or recomputed view tells tied rows apart by arrival (top-k and ranked
    views by the rows' values): a what-if pushed through it and taken back could leave it
    holding the other one of two tied rows, its subscribers not told, and a row deleted
    and added back comes last in its table, which DuckDB reads next.  Such a what-if, also
    one on another view of the same tables, is computed on a scratch copy of the tables:
    the view, and what later changes do to it, stay exactly as on a database that was
    never asked."""
    def build():
        db = upkeep.connect()
        db.execute("CREATE TABLE r (a INTEGER, b INTEGER) WITH (provenance = 'update')")
        db.create_view("v", TIED_VIEWS[view], strategy=strategy)
        db.create_view("n", "SELECT COUNT(*) AS n FROM r")
        for a in (1, 2, 3):
            db.execute(f"INSERT INTO r VALUES ({a}, 5)")  # transactions 1-3, tied on b
        return db

    asked, never = build(), build()
    copy = Counter(asked.view("v").rows())
    asked.view("v").subscribe(lambda changes: copy.update(dict(changes)))
    before = Counter(asked.view("v").rows())
    for txn in (1, 2, 1, 3):
        world = asked.what_if("v", abort=[txn])
        assert Counter(world.rows) == before + Counter(world.added) - Counter(world.removed)
        assert Counter(asked.view("v").rows()) == before
        assert asked.what_if("n", abort=[txn]).rows == [(2,)]
        assert Counter(asked.view("v").rows()) == before
    if view == "top":
        assert asked.what_if("v", abort=[1]).rows == [(2,)]
    for db in (asked, never):
        db.execute("DELETE FROM r WHERE a = 3")
    assert Counter(asked.view("v").rows()) == Counter(never.view("v").rows()) == +copy


def test_a_what_if_on_a_scratch_copy_keeps_rows_a_key_allows_once(monkeypatch):
    """Constraints do not hold in hypothetical worlds, on the scratch copy (a view DuckDB
    recomputes) either: with the delete between two inserts of key 1 aborted, both rows
    are there, and the real table's key index is left alone."""
    db = upkeep.connect()
    db.execute("CREATE TABLE r (k INTEGER PRIMARY KEY, v VARCHAR NOT NULL) "
               "WITH (provenance = 'update')")
    db.create_view("top", "SELECT k, v FROM r ORDER BY k LIMIT 5", strategy="recompute")
    for sql in ("INSERT INTO r VALUES (1, 'a')", "DELETE FROM r WHERE k = 1",
                "INSERT INTO r VALUES (1, 'b')"):
        db.execute(sql)
    import upkeep.local.connection as connection

    scratches = []
    made = connection.from_catalog
    monkeypatch.setattr(connection, "from_catalog",
                        lambda *args: scratches.append(args) or made(*args))
    world = db.what_if("top", abort=[2])
    assert sorted(world.rows) == [(1, "a"), (1, "b")] and len(scratches) == 1
    assert db.view("top").rows() == [(1, "b")]
    with pytest.raises(ConstraintError, match="duplicate primary key"):
        db.execute("INSERT INTO r VALUES (1, 'c')")


def test_a_what_if_pushes_through_views_without_ties_and_copies_nothing(monkeypatch):
    """Views that do not tell tied rows apart by arrival (a join + aggregate; top-k,
    ranked and window views, which break ties by the rows' values) take the what-if's
    batch and its inverse: no scratch database is built, and an abort of a row that sorts
    after its tied peers changes nothing, whichever of them came first."""
    import upkeep.local.connection as connection

    def refuse(*args, **kwargs):
        raise AssertionError("a scratch database was built")

    monkeypatch.setattr(connection, "from_catalog", refuse)
    db = figure_db()
    world = db.what_if("by_category", abort=[2])
    assert sorted(world.added) == [("Kids", 1, 120), ("Sport", 2, 100)]
    db = upkeep.connect()
    db.execute("CREATE TABLE r (a INTEGER, b INTEGER) WITH (provenance = 'update')")
    db.execute("CREATE TABLE s (a INTEGER, label VARCHAR)")
    db.execute("INSERT INTO s VALUES (1, 'x'), (2, 'y'), (3, 'z')")
    removed = {"top": [], "ranked": [], "numbered": [(3, 3)], "lagged": [(3, 2)]}
    for view in removed:  # over r joined to an ordinary table
        db.create_view(view, TIED_VIEWS[view].replace(
            "FROM r", "FROM (SELECT r.*, s.label FROM r JOIN s ON r.a = s.a) r"))
    for a, b in ((2, 5), (1, 5), (3, 5)):  # transactions 1-3, tied; 3 comes last
        db.execute(f"INSERT INTO r VALUES ({a}, {b})")
    for view, gone in removed.items():  # only the aborted row's own output goes
        world = db.what_if(view, abort=[3])
        assert (world.added, world.removed) == ([], gone), view


def test_a_what_if_keeps_the_order_a_table_holds_its_rows_in():
    """The fast path deletes the aborted transaction's row and adds it back; the row must
    keep its place, or DuckDB, which reads a table in the order it holds its rows, picks
    another of the tied rows for views made later and for queries than a database never
    asked would, and DuckDB fed the same log does."""

    def build() -> upkeep.Connection:
        db = upkeep.connect()
        db.execute("CREATE TABLE r (a INTEGER, b INTEGER) WITH (provenance = 'update')")
        db.create_view("n", "SELECT COUNT(*) AS n FROM r")
        for a in (1, 2, 3):  # transactions 1-3, tied on b
            db.execute(f"INSERT INTO r VALUES ({a}, 5)")
        return db

    asked, never = build(), build()
    assert asked.what_if("n", abort=[1]).rows == [(2,)]
    reference = duckdb.connect()
    reference.execute("CREATE TABLE r (a INTEGER, b INTEGER)")
    reference.execute("INSERT INTO r VALUES (1, 5), (2, 5), (3, 5)")
    queries = {"v": "SELECT a FROM r ORDER BY b LIMIT 1", "w": "SELECT a FROM r LIMIT 1"}
    for db in (asked, never):
        for name, sql in queries.items():
            db.create_view(name, sql, strategy="recompute")
    assert asked.execute("SELECT * FROM r").fetchall() == \
        never.execute("SELECT * FROM r").fetchall() == [(1, 5), (2, 5), (3, 5)]
    for name, sql in queries.items():
        assert asked.view(name).rows() == never.view(name).rows() == \
            reference.execute(sql).fetchall(), name


def test_a_what_ifs_rows_are_refused_once_its_view_is_made_again():
    """A DROP and CREATE commits no batch, yet the rows of an earlier what-if over the
    dropped view are not those of the new one."""
    db = figure_db()
    stale = db.what_if("by_category", abort=[2])
    db.execute("DROP VIEW by_category")
    db.create_view("by_category", "SELECT category, SUM(price) AS total FROM products "
                   "GROUP BY category")
    with pytest.raises(upkeep.Error, match="changed after this what-if"):
        stale.rows  # noqa: B018


def test_a_what_ifs_rows_are_read_holding_the_connection():
    """``rows`` is read when first asked for: while another thread's what-if has its
    hypothetical batch applied, it waits for it instead of reading that state."""
    import threading

    db = upkeep.connect()
    db.execute("CREATE TABLE r (a INTEGER, b INTEGER) WITH (provenance = 'update')")
    db.create_view("v", "SELECT b, COUNT(*) AS n FROM r GROUP BY b")
    for i in range(6):
        db.insert("r", [(i * 500 + k, i * 500 + k) for k in range(500)])
    expected = len(db.view("v").rows()) - 500  # without transaction 1's 500 groups
    stop = threading.Event()

    def other_thread():
        i = 0
        while not stop.is_set():
            db.what_if("v", abort=[2 + i % 5])
            i += 1

    thread = threading.Thread(target=other_thread)
    thread.start()
    try:
        sizes = [len(db.what_if("v", abort=[1]).rows) for _ in range(60)]
    finally:
        stop.set()
        thread.join()
    assert sizes == [expected] * 60


def test_access_control_and_trust_equal_their_reruns():
    db = figure_db()
    # FR may see T2's and T3's effects and the input rows (no principals: everyone)
    assert Counter(db.visible("products", "FR").rows) == duck(LOG)
    # IL may not see T3's: the log without it
    assert Counter(db.visible("by_category", "IL").rows) == duck(LOG, skip=[3], query=BY_CATEGORY)
    # US sees neither T2 nor T3
    assert Counter(db.visible("products", "US").rows) == duck(LOG, skip=[2, 3])
    # trust 0.5: T3 (0.3) is not trusted, T2 (0.6) is
    assert Counter(db.trusted("by_category", 0.5).rows) == duck(LOG, skip=[3], query=BY_CATEGORY)
    assert Counter(db.trusted("products", 0.65).rows) == duck(LOG, skip=[2, 3])
    # strictly above the threshold (Example 4.6's x.v > L): T2's 0.6 is not trusted at 0.6
    assert Counter(db.trusted("products", 0.6).rows) == duck(LOG, skip=[2, 3])
    assert Counter(db.trusted("products", 0.59).rows) == duck(LOG, skip=[3])
    grants = {"products#2": ["IL"]}  # the tennis racket's input row only for IL
    assert Counter(db.visible("products", "FR", grants).rows) == duck(
        LOG, skip_rows={F1[1]})


def test_a_user_structure_specialises_views():
    db = figure_db()
    sets = {"T2": {"FR"}, "T3": {"FR", "US"}}
    structure = AccessControl(frozenset({"FR", "IL", "US"}))
    world = db.specialise("products", structure,
                          lambda v: frozenset(sets.get(v, structure.universe)))
    # a row is kept if some principal sees it: the union of each principal's re-run
    union = set(duck(LOG)) | set(duck(LOG, skip=[2, 3])) | set(duck(LOG, skip=[2]))
    assert Counter(world.rows) == Counter(union)


def test_bad_input_is_refused_and_changes_nothing():
    db = figure_db()
    state = (sorted(db.execute("SELECT * FROM products").fetchall()),
             {r: str(db.provenance("products", r)) for r in F1}, db.transactions(), db.batches)
    statements = {
        "UPDATE products SET price = price + 1 WHERE category = 'Sport'": "non-constant",
        "DELETE FROM products WHERE price > 50": "price > 50",
        "DELETE FROM products WHERE category = 'Sport' OR price = 1": "OR",
        "UPDATE products SET price = 1 WHERE category = product": "category = product",
        "INSERT INTO products SELECT * FROM products": "INSERT ... SELECT",
        "INSERT INTO products VALUES ('x', (SELECT max(category) FROM products), 1)":
            "a subquery in VALUES",
        "DELETE FROM products WHERE category IN (SELECT category FROM products)": "IN",
    }
    for sql, words in statements.items():
        with pytest.raises(UnsupportedError, match="provenance table products") as err:
            db.execute(sql)
        assert words in str(err.value), sql
    with pytest.raises(UnsupportedError, match=r"line 1, column"):
        db.execute("DELETE FROM products WHERE price > 50")
    with pytest.raises(ProvenanceError, match="unknown transaction 9"):
        db.what_if("by_category", abort=[9])
    with pytest.raises(ProvenanceError, match="not an input row") as err:
        db.what_if("products", without=[("products", ("Kids mnt bike", "Bicycles", 120))])
    assert err.value.row == ("Kids mnt bike", "Bicycles", 120)  # the row at fault, as a field
    with pytest.raises(ConstraintError, match="not present"):
        db.delete("products", [("Kids mnt bike", "Sport", 120)])  # logically deleted
    with pytest.raises(SchemaError, match="no column"):
        db.execute("DELETE FROM products WHERE colour = 'red'")
    with pytest.raises(ProvenanceError, match="keeps no update provenance"):
        db.execute("CREATE TABLE plain (a INTEGER)")
        db.provenance("plain", (1,))
    with pytest.raises(RuntimeError), db.transaction():  # a failing transaction
        db.execute("DELETE FROM products WHERE category = 'Fashion'")
        raise RuntimeError("abandon")
    assert state == (sorted(db.execute("SELECT * FROM products").fetchall()),
                     {r: str(db.provenance("products", r)) for r in F1}, db.transactions(),
                     db.batches + 0)


def test_a_constraint_violation_rejects_the_statement_and_its_provenance():
    db = upkeep.connect()
    db.execute("CREATE TABLE r (k INTEGER PRIMARY KEY, v INTEGER) WITH (provenance = 'update')")
    db.insert("r", [(1, 10), (2, 20)])
    with db.transaction():
        db.execute("UPDATE r SET v = 11 WHERE k = 1")
        with pytest.raises(ConstraintError, match="duplicate primary key"):
            db.execute("UPDATE r SET k = 2 WHERE k = 1")  # two rows with key 2
        db.execute("UPDATE r SET v = 21 WHERE k = 2")
    assert sorted(db.execute("SELECT * FROM r").fetchall()) == [(1, 11), (2, 21)]
    assert str(db.provenance("r", (1, 11))) == "r#1 ·M T2"
    assert str(db.provenance("r", (1, 10))) == "r#1 - T2"


def test_a_failed_load_takes_back_its_rows_variables_and_segment():
    db = upkeep.connect()
    db.execute("CREATE TABLE r (k INTEGER PRIMARY KEY, v INTEGER) WITH (provenance = 'update')")
    db.insert("r", [(1, 10)])
    with db.transaction():
        db.execute("UPDATE r SET v = 11 WHERE k = 1")
        with pytest.raises(ConstraintError, match="duplicate primary key"):
            db.insert("r", [(2, 20), (1, 12)])  # input rows r#2, r#3: the second fails
        db.insert("r", [(3, 30)])  # numbered r#2: the failed load's numbers are free again
        db.execute("UPDATE r SET v = 12 WHERE k = 1")
    assert sorted(db.execute("SELECT * FROM r").fetchall()) == [(1, 12), (3, 30)]
    assert str(db.provenance("r", (3, 30))) == "r#2"
    assert db.provenance("r", (2, 20)).is_zero
    # the load split T2 into two normal-form segments: the second UPDATE sees the first's
    # annotations as opaque, so the deleted (1, 10) still contributes (false under every
    # valuation where T2 is true, as Rule 8 would drop it within one segment)
    assert str(db.provenance("r", (1, 12))) == "((r#1 - T2) + (r#1 ·M T2)) ·M T2"  # a sum prints sorted
    assert Counter(db.what_if("r", abort=[2]).rows) == Counter([(1, 10)])


def test_properties_of_provenance_tables_are_checked():
    db = upkeep.connect()
    with pytest.raises(SchemaError, match="provenance of table t must be one of"):
        db.execute("CREATE TABLE t (a INTEGER) WITH (provenance = 'why')")
    with pytest.raises(UnsupportedError, match="ttl_seconds with provenance"):
        db.execute("CREATE TABLE t (a INTEGER) WITH (provenance = 'update', ttl_seconds = 5)")
    assert db.tables() == []


def test_create_table_as_select_keeps_its_properties(tmp_path):
    """``CREATE TABLE ... WITH (provenance = ...) AS SELECT``: a provenance table whose
    rows are input rows of the creating transaction, across a reopen; a bad property is
    refused and creates nothing."""
    db = upkeep.connect(tmp_path / "db")
    db.execute("CREATE TABLE src (a INTEGER PRIMARY KEY, b VARCHAR)")
    db.execute("INSERT INTO src VALUES (1, 'x'), (2, 'y')")
    with pytest.raises(SchemaError, match="provenance of table bad must be one of"):
        db.execute("CREATE TABLE bad WITH (provenance = 'bogus') AS SELECT * FROM src")
    with pytest.raises(UnsupportedError, match="ttl_seconds with provenance"):
        db.execute("CREATE TABLE bad WITH (provenance = 'update', ttl_seconds = 5) AS "
                   "SELECT * FROM src")
    assert db.tables() == ["src"]
    db.execute("CREATE TABLE copy WITH (provenance = 'update') AS SELECT * FROM src")
    db.execute("DELETE FROM copy WHERE a = 1")
    db.close()
    again = upkeep.connect(tmp_path / "db")
    assert str(again.provenance("copy", (2, "y"))) == "copy#2"
    assert str(again.provenance("copy", (1, "x"))) == "copy#1 - T2"
    assert sorted(again.what_if("copy", abort=[2]).rows) == [(1, "x"), (2, "y")]
    again.close()


def test_where_compares_numbers_by_value_as_on_any_table():
    """A WHERE constant of another numeric type than its column compares by value, as on
    a table without provenance and in DuckDB: ``k = 1.0`` is ``k = 1``, ``k = 1.5`` holds
    for no row, ``k <> 1.5`` for every row."""
    ddl = "CREATE TABLE t (k INTEGER, s VARCHAR, x DOUBLE, d DECIMAL(6,2))"
    statements = ["INSERT INTO t VALUES (1, 'a', 0.5, 1.50), (2, 'b', 0.25, 2.5), "
                  "(3, 'c', 0.1, 3)",
                  "DELETE FROM t WHERE k = 1.5", "DELETE FROM t WHERE k = 1e30",
                  "UPDATE t SET s = 'x' WHERE k = 1.0", "UPDATE t SET s = 'y' WHERE k <> 2.5",
                  "DELETE FROM t WHERE d = 2.500 AND k <> 1.0", "DELETE FROM t WHERE x = 0.1",
                  "UPDATE t SET s = 'z' WHERE d = 1.505", "UPDATE t SET s = 'w' WHERE d = 15e-1",
                  "UPDATE t SET s = 'v' WHERE k = 1e0 AND x <> 1"]
    tracked, plain, duck = upkeep.connect(), upkeep.connect(), duckdb.connect()
    tracked.execute(ddl + " WITH (provenance = 'update')")
    plain.execute(ddl)
    duck.execute(ddl)
    for sql in statements:
        for db in (tracked, plain, duck):
            db.execute(sql)
        want = sorted(duck.execute("SELECT * FROM t").fetchall())
        assert sorted(tracked.execute("SELECT * FROM t").fetchall()) == want, sql
        assert sorted(plain.execute("SELECT * FROM t").fetchall()) == want, sql


def test_a_hypothetical_world_is_not_checked_against_the_key():
    """What-if is the log under a valuation, not a re-run with checks (docs/design.md):
    aborting the DELETE between two inserts of key 1 leaves both rows."""
    db = upkeep.connect()
    db.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, s VARCHAR) WITH (provenance = 'update')")
    db.execute("INSERT INTO t VALUES (1, 'a')")
    db.execute("DELETE FROM t WHERE k = 1")
    db.execute("INSERT INTO t VALUES (1, 'b')")
    world = db.what_if("t", abort=[2])
    assert sorted(world.rows) == [(1, "a"), (1, "b")] and world.added == [(1, "a")]
    assert db.execute("SELECT * FROM t").fetchall() == [(1, "b")]


def test_what_if_refuses_the_hidden_views_of_why_provenance():
    db = upkeep.connect()
    db.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, s VARCHAR) WITH (provenance = 'update')")
    db.execute("CREATE VIEW v WITH (provenance = 'why') AS SELECT s, count(*) AS n FROM t "
               "GROUP BY s")
    db.execute("INSERT INTO t VALUES (1, 'a')")
    hidden = next(v for v in db._catalog.views if v.startswith("v__"))
    for ask in (lambda n: db.what_if(n, abort=[1]), lambda n: db.visible(n, "x"),
                lambda n: db.trusted(n, 0.5)):
        with pytest.raises(SchemaError, match=f"unknown table or view {hidden}"):
            ask(hidden)
        assert ask("V").name == "v"  # the view itself, named in any case


def test_naive_provenance_grows_where_the_normal_form_does_not():
    sizes = {}
    for mode in ("update", "update-naive"):
        db = upkeep.connect()
        db.execute(f"CREATE TABLE r (a VARCHAR) WITH (provenance = '{mode}')")
        db.insert("r", [("a",), ("b",)])
        with db.transaction():
            for k in range(12):
                src, dst = ("a", "b") if k % 2 == 0 else ("b", "a")
                db.execute(f"UPDATE r SET a = '{dst}' WHERE a = '{src}'")
        sizes[mode] = db._catalog.provenance.size()["tree"]
        assert sorted(db.execute("SELECT * FROM r").fetchall()) == [("a",)]  # merged
    assert sizes["update"] < 20 < 1000 < sizes["update-naive"]


# ---------------------------------------------------------------- the random oracle

VALUES = st.sampled_from([1, 2, 3])
COLS = {"r": ("a", "b"), "s": ("b", "c")}
VIEWS = {
    "joined": "SELECT r.a, s.c, COUNT(*) AS n FROM r JOIN s ON r.b = s.b GROUP BY r.a, s.c",
    "filtered": "SELECT a, b FROM r WHERE a <> 2",
    "totals": "SELECT c, SUM(b) AS total FROM s GROUP BY c",
}


@st.composite
def statements(draw):
    table = draw(st.sampled_from(["r", "s"]))
    x, y = COLS[table]
    kind = draw(st.sampled_from(["input", "insert", "delete", "update"]))
    if kind == "input":
        return ("input", table, (draw(VALUES), draw(VALUES)))
    if kind == "insert":
        return ("sql", table, f"INSERT INTO {table} VALUES ({draw(VALUES)}, {draw(VALUES)})")
    conds = [f"{draw(st.sampled_from([x, y]))} {draw(st.sampled_from(['=', '<>']))} "
             f"{draw(VALUES)}" for _ in range(draw(st.integers(0, 2)))]
    where = (" WHERE " + " AND ".join(conds)) if conds else ""
    if kind == "delete":
        return ("sql", table, f"DELETE FROM {table}{where}")
    return ("sql", table, f"UPDATE {table} SET {draw(st.sampled_from([x, y]))} = "
                          f"{draw(VALUES)}{where}")


def rerun(log, skip_txns, skip_inputs):
    con = duckdb.connect()
    for table, (x, y) in COLS.items():
        con.execute(f"CREATE TABLE {table} ({x} INTEGER, {y} INTEGER)")
    for txn, stmts in log:
        if txn in skip_txns:
            continue
        for kind, table, what in stmts:
            if kind == "input":
                if (table, what) not in skip_inputs:  # a row never loaded, by any txn
                    con.execute(f"INSERT INTO {table} VALUES {what}")
            else:
                con.execute(what)
            con.execute(f"CREATE OR REPLACE TABLE {table} AS SELECT DISTINCT * FROM {table}")
    out = {t: Counter(con.execute(f"SELECT * FROM {t}").fetchall()) for t in COLS}
    out.update({v: Counter(con.execute(q).fetchall()) for v, q in VIEWS.items()})
    return out


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(statements(), min_size=1, max_size=5), min_size=1, max_size=5),
       st.data())
def test_what_if_equals_rerunning_the_log_without_it(transactions, data):
    db = upkeep.connect()
    for table, (x, y) in COLS.items():
        db.execute(f"CREATE TABLE {table} ({x} INTEGER, {y} INTEGER) "
                   "WITH (provenance = 'update')")
    for name, sql in VIEWS.items():
        db.create_view(name, sql)
    log, inputs = [], []
    for stmts in transactions:
        before = db.batches
        with db.transaction():
            for kind, table, what in stmts:
                if kind == "input":
                    db.insert(table, [what])
                else:
                    db.execute(what)
        txn = max(db.transactions()) if db.batches > before else None
        log.append((txn, stmts))
        inputs += [(t, w) for k, t, w in stmts if k == "input"]
    real = rerun(log, (), ())
    for name in (*COLS, *VIEWS):
        got = db.execute(f"SELECT * FROM {name}").fetchall()
        assert Counter(got) == real[name], name
    txns = sorted(db.transactions())
    for _ in range(3):
        abort = data.draw(st.sets(st.sampled_from(txns))) if txns else set()
        gone = data.draw(st.sets(st.sampled_from(inputs))) if inputs else set()
        expected = rerun(log, abort, gone)
        without = sorted(gone)
        for name in (*COLS, *VIEWS):
            world = db.what_if(name, abort=sorted(abort), without=without)
            assert Counter(world.rows) == expected[name], (name, abort, gone)
    for name in (*COLS, *VIEWS):  # nothing moved
        assert Counter(db.execute(f"SELECT * FROM {name}").fetchall()) == real[name]


# ---------------------------------------------------------------- durability

def test_provenance_survives_reopening_and_snapshots(tmp_path):
    db = figure_db(database=tmp_path / "db")
    expected = {r: str(db.provenance("products", r))
                for r in [*F1, ("Kids mnt bike", "Bicycles", 120), ("Tennis Racket", "Sport", 50)]}
    db.checkpoint()
    db.execute("INSERT INTO products VALUES ('Lego bricks', 'Kids', 90)")
    expected[("Lego bricks", "Kids", 90)] = "T4"
    db.close()
    again = upkeep.connect(tmp_path / "db")
    assert {r: str(again.provenance("products", r)) for r in expected} == expected
    assert again.transactions()[2] == {"principals": ["FR", "IL"], "trust": 0.6}
    assert Counter(again.what_if("by_category", abort=[2]).rows) == duck(
        LOG + [(4, [("Lego bricks", "Kids", 90)])], skip=[2], query=BY_CATEGORY)
    again.execute("DELETE FROM products WHERE category = 'Kids'")  # ids continue after T4
    assert str(again.provenance("products", ("Lego bricks", "Kids", 90))) == "T4 - T5"
    again.close()


def test_provenance_survives_kill_nine(tmp_path):
    script = textwrap.dedent(f"""
        import os, signal
        from test_update_provenance_db import figure_db
        db = figure_db(database={str(tmp_path / "db")!r})
        print("committed", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, env=env)
    assert "committed" in done.stdout and done.returncode == -9, done.stderr
    db = upkeep.connect(tmp_path / "db")
    fresh = figure_db()
    for row in [*F1, ("Kids mnt bike", "Bicycles", 120), ("Kids mnt bike", "Sport", 50)]:
        assert str(db.provenance("products", row)) == str(fresh.provenance("products", row))
    assert Counter(db.what_if("products", abort=[3]).rows) == duck(LOG, skip=[3])
    db.close()


# ---------------------------------------------------------------- command line, Spark

def test_command_line_provenance_and_what_if(tmp_path, capsys):
    from upkeep.cli import main

    figure_db(database=tmp_path / "db").close()
    assert main(["provenance", str(tmp_path / "db"), "products",
                 '["Tennis Racket", "Sport", 50]']) == 0
    assert capsys.readouterr().out.strip() == "products#2 ·M T3"
    assert main(["what-if", str(tmp_path / "db"), "by_category", "--abort", "3"]) == 0
    expected = duck(LOG, skip=[3], query=BY_CATEGORY) - duck(LOG, query=BY_CATEGORY)
    out = capsys.readouterr().out.splitlines()
    assert {line for line in out if line.startswith("+")} == {
        f"+ {json.dumps(list(r))}" for r in expected}
    assert main(["what-if", str(tmp_path / "db"), "by_category", "--abort", "7"]) == 1
    assert "unknown transaction 7" in capsys.readouterr().err
    assert main(["provenance", str(tmp_path / "db"), "products", "not json"]) == 1
    assert "JSON array" in capsys.readouterr().err
    assert main(["provenance", str(tmp_path / "db"), "products", '["Kite", "Toy", 1]']) == 0
    assert capsys.readouterr().out.strip() == "0 (the row was never in products)"


def test_asking_a_directory_or_pipeline_that_holds_no_database_makes_none(tmp_path, capsys):
    """The read-only commands made a database of an empty directory, or of a pipeline's
    state directory before the pipeline ever ran."""
    from upkeep.cli import main

    (tmp_path / "empty").mkdir()
    (tmp_path / "t.sql").write_text("CREATE TABLE t (a INTEGER);")
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(f'state_dir = "{tmp_path / "state"}"\ntables = ["t.sql"]\n'
                        f'[source]\npath = "{tmp_path / "in"}"\n')
    commands = [["provenance", "{}", "t", "[1]"], ["what-if", "{}", "v", "--abort", "1"],
                ["why", "{}", "v", "[1]"]]
    for target, message in ((tmp_path / "empty", "holds no upkeep database"),
                            (pipeline, "holds no database yet")):
        for command in commands:
            argv = [str(target) if a == "{}" else a for a in command]
            assert main(argv) == 1, argv
            assert message in capsys.readouterr().err
    assert list((tmp_path / "empty").iterdir()) == [] and not (tmp_path / "state").exists()


def test_non_finite_rows_are_found_after_a_reopen_and_as_the_command_line_prints_them(
        tmp_path, capsys):
    """NaN and infinities: ``provenance`` and ``without=`` find their input rows after a
    reopen (from the log and from a snapshot), and the command line reads back the rows it
    prints (``"NaN"``, ``"Infinity"``)."""
    from upkeep.cli import main

    nan, inf = float("nan"), float("inf")
    db = upkeep.connect(tmp_path / "db")
    db.execute("CREATE TABLE m (k INTEGER, x DOUBLE) WITH (provenance = 'update')")
    db.insert("m", [(1, nan), (2, inf)])
    db.checkpoint()
    db.insert("m", [(3, nan), (4, -inf)])
    db.close()
    db = upkeep.connect(tmp_path / "db")
    for n, row in enumerate([(1, nan), (2, inf), (3, nan), (4, -inf)], 1):
        assert str(db.provenance("m", row)) == f"m#{n}"
        assert repr(db.what_if("m", without=[("m", row)]).removed) == repr([row])
    db.close()
    assert main(["what-if", str(tmp_path / "db"), "m", "--without", "m", "[4, -1e999]"]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed == '- [4, "-Infinity"]'
    for k, spelled in [(4, '"-Infinity"'), (1, '"NaN"'), (2, '"Infinity"')]:
        assert main(["provenance", str(tmp_path / "db"), "m", f"[{k}, {spelled}]"]) == 0
        assert capsys.readouterr().out.strip() == f"m#{k}"
        assert main(["what-if", str(tmp_path / "db"), "m", "--without", "m",
                     f"[{k}, {spelled}]"]) == 0
        assert capsys.readouterr().out.strip() == f"- [{k}, {spelled}]"


def test_the_spark_engine_refuses_provenance_tables(spark, tmp_path):
    db = upkeep.connect(engine="spark", spark=spark, database=tmp_path / "spark")
    try:
        with pytest.raises(UnsupportedError, match="provenance tables"):
            db.execute(PRODUCTS.format(mode="update"))
        assert db.tables() == []
        with pytest.raises(UnsupportedError, match="update provenance on the spark engine"):
            db.what_if("products", abort=[1])
    finally:
        db.close()


def write_pipeline(tmp_path, records: list[dict]) -> None:
    """A pipeline over a provenance table ``orders(ok, ck)`` with a view counting each
    customer's orders, its change records in one JSON-lines file, two records a batch."""

    (tmp_path / "tables.sql").write_text(
        "CREATE TABLE orders (ok INTEGER, ck INTEGER) WITH (provenance = 'update');")
    (tmp_path / "views.sql").write_text(
        "CREATE MATERIALIZED VIEW per_customer AS SELECT ck, COUNT(*) AS n FROM orders "
        "GROUP BY ck;")
    (tmp_path / "changes").mkdir()
    (tmp_path / "changes" / "c-1.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in records))
    (tmp_path / "p.toml").write_text(textwrap.dedent("""
        state_dir = "state"
        tables = ["tables.sql"]
        views = ["views.sql"]
        [source]
        path = "changes"
        [batch]
        rows_per_batch = 2
    """))


def test_a_pipeline_over_a_provenance_table_answers_what_if(tmp_path, capsys):
    from upkeep.cli import main

    records = [{"table": "orders", "op": "insert", "row": [1, 7]},
               {"table": "orders", "op": "insert", "row": [2, 7]},
               {"table": "orders", "op": "insert", "row": [3, 8]},
               {"table": "orders", "op": "delete", "row": [1, 7]},
               {"table": "orders", "op": "update", "before": [2, 7], "after": [2, 8]},
               {"table": "orders", "op": "insert", "row": [4, 9]}]
    write_pipeline(tmp_path, records)
    assert main(["run", str(tmp_path / "p.toml"), "--progress", "plain"]) == 0
    capsys.readouterr()

    def model(skip_batch: int | None) -> Counter:
        rows: set = set()
        for i, r in enumerate(records):
            if i // 2 == skip_batch:
                continue
            if r["op"] == "insert":
                rows.add(tuple(r["row"]))
            elif r["op"] == "delete":
                rows.discard(tuple(r["row"]))
            else:
                rows.discard(tuple(r["before"]))
                rows.add(tuple(r["after"]))
        return Counter(Counter(ck for _, ck in rows).items())

    db = upkeep.connect(tmp_path / "state")
    txns = sorted(db.transactions())
    assert len(txns) == 3  # one per batch of two records, each with its source offset
    assert all(db.transactions()[t] for t in txns)
    assert Counter(db.view("per_customer").rows()) == model(None)
    for batch, txn in enumerate(txns):
        assert Counter(db.what_if("per_customer", abort=[txn]).rows) == model(batch)
    db.close()
    assert main(["what-if", str(tmp_path / "p.toml"), "per_customer", "--abort",
                 str(txns[1])]) == 0
    out = capsys.readouterr().out.splitlines()
    removed = model(None) - model(1)
    assert {line for line in out if line.startswith("-")} == {f"- {json.dumps(list(r))}" for r in removed}


def test_a_pipeline_commits_each_source_transaction_as_its_own(tmp_path, capsys):
    """Change records carrying ``txn``: each source transaction is one annotated
    transaction with its id in the metadata (never split by the batch size), what-if
    aborts it by that id."""

    from upkeep.cli import main

    log = {"t1": [("insert", [1, 7]), ("insert", [2, 7]), ("insert", [3, 8])],
           "t2": [("delete", [1, 7])],
           "t3": [("update", ([2, 7], [2, 8])), ("insert", [4, 9]), ("insert", [5, 9])],
           "t4": [("insert", [1, 7])]}
    records = []
    for txn, ops in log.items():
        for op, image in ops:
            record = {"table": "orders", "op": op, "txn": txn}
            if op == "update":
                record["before"], record["after"] = image
            else:
                record["row"] = image
            records.append(record)
    write_pipeline(tmp_path, records)

    def model(skip: str | None) -> Counter:
        rows: set = set()
        for txn, ops in log.items():
            for op, image in ops if txn != skip else ():
                if op == "insert":
                    rows.add(tuple(image))
                elif op == "delete":
                    rows.discard(tuple(image))
                else:
                    rows.discard(tuple(image[0]))
                    rows.add(tuple(image[1]))
        return Counter(Counter(ck for _, ck in rows).items())

    assert main(["run", str(tmp_path / "p.toml"), "--progress", "plain"]) == 0
    capsys.readouterr()
    db = upkeep.connect(tmp_path / "state")
    by_source = {m["txn"]: t for t, m in db.transactions().items()}
    assert sorted(by_source) == sorted(log)
    assert Counter(db.view("per_customer").rows()) == model(None)
    for txn, t in by_source.items():
        assert Counter(db.what_if("per_customer", abort=[t]).rows) == model(txn), txn
    db.close()
    assert main(["what-if", str(tmp_path / "p.toml"), "per_customer", "--abort-txn", "t3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert {line for line in out if line.startswith("-")} == {
        f"- {json.dumps(list(r))}" for r in model(None) - model("t3")}
    assert main(["what-if", str(tmp_path / "p.toml"), "per_customer", "--abort-txn", "t9"]) == 1
    assert "no committed transaction has source txn 't9'" in capsys.readouterr().err


def test_a_source_transaction_keeps_its_history_for_what_if(tmp_path, capsys):
    """A pipeline applies a provenance table's records in order, as the Python API does,
    not as the transaction's net change: t3 inserts a row and deletes it again, so
    aborting t2 (which deleted it first) changes nothing, and t3 is a committed
    transaction of its own, as after ``db.transaction()`` doing the same."""
    from upkeep.cli import main

    records = [{"table": "orders", "op": op, "row": [1, 7], "txn": txn}
               for op, txn in [("insert", "t1"), ("delete", "t2"), ("insert", "t3"),
                               ("delete", "t3"), ("insert", "t4"), ("insert", "t4")]]
    records[-1]["row"] = [2, 7]
    write_pipeline(tmp_path, records)
    assert main(["run", str(tmp_path / "p.toml"), "--progress", "none"]) == 0
    api = upkeep.connect()
    api.execute("CREATE TABLE orders (ok INTEGER, ck INTEGER) WITH (provenance = 'update')")
    api.create_view("per_customer", "SELECT ck, COUNT(*) AS n FROM orders GROUP BY ck")
    for txn in ("t1", "t2", "t3", "t4"):
        with api.transaction(metadata={"txn": txn}):
            for record in records:
                if record["txn"] == txn:
                    getattr(api, record["op"])("orders", [tuple(record["row"])])
    db = upkeep.connect(tmp_path / "state")
    by_source = {m["txn"]: t for t, m in db.transactions().items()}
    assert sorted(by_source) == ["t1", "t2", "t3", "t4"]
    api_ids = {m["txn"]: t for t, m in api.transactions().items()}
    for txn, t in by_source.items():
        assert sorted(db.what_if("per_customer", abort=[t]).rows) == sorted(
            api.what_if("per_customer", abort=[api_ids[txn]]).rows), txn
    assert sorted(db.what_if("per_customer", abort=[by_source["t2"]]).rows) == sorted(
        db.view("per_customer").rows()) == [(7, 2)]  # t3 deletes the row t2 deleted
    db.close()
    capsys.readouterr()
    assert main(["what-if", str(tmp_path / "p.toml"), "per_customer", "--abort-txn", "t2"]) == 0
    assert not [line for line in capsys.readouterr().out.splitlines()
                if line.startswith(("+", "-"))]


def test_an_unreadable_line_inside_a_source_transaction_applies_none_of_it(tmp_path, capsys):
    """Under ``on_error = "stop"`` a line that cannot be read stops the run with none of
    the transaction it interrupts applied (its records before the line were committed as
    a transaction of their own, the rest as another after the line was fixed)."""
    from upkeep.cli import main

    write_pipeline(tmp_path, [])
    good = [json.dumps({"table": "orders", "op": "insert", "row": [k, 7], "txn": "t1"})
            for k in (1, 2, 3)]
    (tmp_path / "changes" / "c-1.jsonl").write_text(
        "\n".join([good[0], good[1][:-1], good[2]]) + "\n")
    (tmp_path / "p.toml").write_text((tmp_path / "p.toml").read_text().replace(
        "rows_per_batch = 2", "rows_per_batch = 10"))
    assert main(["run", str(tmp_path / "p.toml"), "--progress", "none"]) == 1
    assert "c-1.jsonl, line 2" in capsys.readouterr().err
    db = upkeep.connect(tmp_path / "state")
    assert db.transactions() == {} and db.view("per_customer").rows() == []
    db.close()


def test_what_if_aborts_every_transaction_of_a_source_txn_and_repeated_aborts(tmp_path,
                                                                               capsys):
    """Records of source txn x around those of y commit as two transactions with txn x:
    ``--abort-txn x`` aborts both; ``--abort`` and ``--abort-txn`` may be repeated; rows
    print as JSON, as ``--without`` reads them."""
    from upkeep.cli import main

    write_pipeline(tmp_path, [{"table": "orders", "op": "insert", "row": [k, ck], "txn": t}
                              for k, ck, t in [(1, 7, "x"), (2, 8, "y"), (3, 9, "x")]])
    assert main(["run", str(tmp_path / "p.toml"), "--progress", "none"]) == 0
    capsys.readouterr()
    assert main(["what-if", str(tmp_path / "p.toml"), "per_customer", "--abort-txn", "x"]) == 0
    assert sorted(capsys.readouterr().out.splitlines()) == ["- [7, 1]", "- [9, 1]"]
    db = upkeep.connect(tmp_path / "state")
    ids = sorted(db.transactions())
    db.close()
    assert main(["what-if", str(tmp_path / "p.toml"), "per_customer",
                 "--abort", str(ids[0]), "--abort", str(ids[1])]) == 0
    assert sorted(capsys.readouterr().out.splitlines()) == ["- [7, 1]", "- [8, 1]"]


@pytest.mark.parametrize("call", [
    lambda db: db.what_if(5),
    lambda db: db.what_if("by_category", abort=1),
    lambda db: db.what_if("by_category", abort=[True]),
    lambda db: db.what_if("by_category", abort=["2"]),
    lambda db: db.what_if("by_category", without=("products", F1[0])),
    lambda db: db.what_if("by_category", without=[("products",)]),
    lambda db: db.what_if("by_category", without=None),
    lambda db: db.provenance("products", 1),
    lambda db: db.visible(None, "FR"),
    lambda db: db.visible("by_category", "FR", grants=[1, 2]),
    lambda db: db.visible("by_category", "FR", grants={"T2": "FR"}),
    lambda db: db.trusted("by_category", "high"),
    lambda db: db.trusted("by_category", True),
    lambda db: db.trusted("by_category", 0.5, scores={"T2": "y"}),
    lambda db: db.specialise("by_category", None, lambda v: True),
])
def test_arguments_of_the_wrong_kind_are_schema_errors(call):
    """Never a TypeError from inside an evaluation, nor a value read as something else
    (``True`` as transaction 1, ``"FR"`` as the principals ``F`` and ``R``)."""
    db = figure_db()
    before = sorted(db.view("by_category").rows())
    with pytest.raises(SchemaError):
        call(db)
    assert sorted(db.view("by_category").rows()) == before


@pytest.mark.parametrize("metadata", [{"principals": "FR"}, {"principals": [1]},
                                      {"trust": "high"}, {"trust": 1.5}, {"trust": True}])
def test_metadata_provenance_reads_is_checked_before_the_transaction_runs(metadata):
    db = figure_db()
    with pytest.raises(SchemaError, match="metadata"):
        with db.transaction(metadata=metadata):
            db.insert("products", [("Ball", "Sport", 10)])
    assert ("Ball", "Sport", 10) not in db.execute("SELECT * FROM products").fetchall()
    assert len(db.transactions()) == 3


def test_an_override_of_a_transaction_applies_to_the_input_rows_it_loaded():
    """``T<id>`` in ``scores`` / ``grants`` stands for the transaction's input rows too, as
    its metadata does; a key naming no variable is refused."""
    db = upkeep.connect()
    db.execute("CREATE TABLE a (k INTEGER, v INTEGER) WITH (provenance = 'update')")
    with db.transaction(metadata={"trust": 0.2, "principals": ["bob"]}):
        db.insert("a", [(1, 1)])  # an input row: a#1
        db.execute("INSERT INTO a VALUES (2, 2)")  # written by the transaction: T1
    (txn,) = db.transactions()
    assert sorted(db.trusted("a", 0.5).rows) == []
    assert sorted(db.trusted("a", 0.5, scores={f"T{txn}": 0.9}).rows) == [(1, 1), (2, 2)]
    assert sorted(db.visible("a", "alice", grants={f"T{txn}": ["alice"]}).rows) == [
        (1, 1), (2, 2)]
    assert sorted(db.trusted("a", 0.5, scores={"a#1": 0.9}).rows) == [(1, 1)]
    for key in ("T99", "a#99", "nope"):
        with pytest.raises(ProvenanceError, match=f"unknown variable '{key}'"):
            db.trusted("a", 0.5, scores={key: 0.9})


def test_a_dropped_provenance_table_leaves_a_snapshot_that_opens(tmp_path):
    db = upkeep.connect(tmp_path / "db")
    db.execute("CREATE TABLE gone (a INTEGER) WITH (provenance = 'update')")
    db.execute("CREATE TABLE kept (a INTEGER) WITH (provenance = 'update')")
    with db.transaction():
        db.insert("gone", [(1,)])
        db.insert("kept", [(2,)])
    db.execute("DROP TABLE gone")
    db.checkpoint()
    db.execute("DELETE FROM kept WHERE a = 2")
    db.close()
    again = upkeep.connect(tmp_path / "db")
    assert again.tables() == ["kept"]
    assert str(again.provenance("kept", (2,))) == "kept#1 - T2"
    assert Counter(again.what_if("kept", abort=[2]).rows) == Counter([(2,)])
    again.close()


def test_provenance_of_a_view_or_inside_a_transaction_says_why_not():
    db = figure_db()
    with pytest.raises(ProvenanceError, match="by_category is a view"):
        db.provenance("by_category", ("Sport", 1, 70))
    with pytest.raises(ProvenanceError, match="by_category is a view"):
        db.what_if("by_category", without=[("by_category", ("Sport", 1, 70))])
    with db.transaction():
        db.insert("products", [("Ball", "Sport", 10)])
        with pytest.raises(UnsupportedError, match="provenance inside a transaction"):
            db.provenance("products", ("Ball", "Sport", 10))
    assert str(db.provenance("products", ("Ball", "Sport", 10))).startswith("products#")


@pytest.mark.parametrize("mode", ["update", "update-naive"])
def test_hyperplane_statements_compare_nan_as_duckdb(mode):
    """``x = NaN`` holds for a NaN (as on an ordinary table and in DuckDB; it matched
    nothing), ``x <> NaN`` does not, and ``db.delete`` of a row holding NaN deletes it (it
    was silently kept)."""
    db, con = upkeep.connect(), duckdb.connect()
    db.execute(f"CREATE TABLE m (k INTEGER, x DOUBLE) WITH (provenance = '{mode}')")
    con.execute("CREATE TABLE m (k INTEGER, x DOUBLE)")
    for sql in ("INSERT INTO m VALUES (1, 'NaN'), (2, 1.5), (4, 'NaN')",
                "UPDATE m SET k = 3 WHERE x = CAST('NaN' AS DOUBLE)",
                "INSERT INTO m VALUES (5, 'NaN'), (6, 2.5)",
                "DELETE FROM m WHERE x <> CAST('NaN' AS DOUBLE) AND k <> 6"):
        db.execute(sql)
        con.execute(sql)
        assert sorted(map(repr, db.execute("SELECT * FROM m").fetchall())) == sorted(
            map(repr, con.execute("SELECT DISTINCT * FROM m").fetchall())), sql
    (row,) = [r for r in db.execute("SELECT * FROM m").fetchall() if r[0] == 5]
    db.delete("m", [row])
    assert sorted(map(repr, db.execute("SELECT * FROM m").fetchall())) == [
        "(3, nan)", "(6, 2.5)"]


def test_a_dropped_tables_input_variables_are_unknown_before_and_after_reopening(tmp_path):
    db = upkeep.connect(tmp_path / "db")
    db.execute("CREATE TABLE r (a INTEGER) WITH (provenance = 'update')")
    db.insert("r", [(1,), (2,)])  # r#1, r#2
    db.execute("DROP TABLE r")
    db.execute("CREATE TABLE r (a INTEGER) WITH (provenance = 'update')")
    db.insert("r", [(5,)])  # r#3
    for _ in range(2):
        with pytest.raises(ProvenanceError, match="unknown variable 'r#1'"):
            db.trusted("r", 0.5, scores={"r#1": 1.0})
        assert db.trusted("r", 0.5, scores={"r#3": 1.0}).rows == [(5,)]
        db.checkpoint()
        db.close()
        db = upkeep.connect(tmp_path / "db")
    db.close()


def test_a_provenance_tables_set_value_is_cast_as_on_any_table():
    """``UPDATE p SET s = 5`` stores ``'5'`` as on an ordinary table (it was refused while
    INSERT cast); a bound parameter stays strict."""
    db, con = upkeep.connect(), duckdb.connect()
    db.execute("CREATE TABLE p (k INTEGER, s VARCHAR) WITH (provenance = 'update')")
    con.execute("CREATE TABLE p (k INTEGER, s VARCHAR)")
    for sql in ("INSERT INTO p VALUES (2.5, 'x'), (1, 7)", "UPDATE p SET s = 5 WHERE k = 1",
                "UPDATE p SET k = '4' WHERE k = 1"):
        db.execute(sql)
        con.execute(sql)
    assert sorted(db.execute("SELECT * FROM p").fetchall()) == sorted(
        con.execute("SELECT * FROM p").fetchall())
    with pytest.raises(SchemaError, match="expected VARCHAR"):
        db.execute("UPDATE p SET s = ? WHERE k = 4", [5])


def test_a_commit_that_takes_a_snapshot_keeps_its_transaction_on_reopening(tmp_path):
    """A commit that grows the log past ``snapshot_bytes`` writes a snapshot, which
    replaces the log: the snapshot must hold that commit's transaction (its metadata and
    annotations), or reopening lost T2 and gave the next transaction its id again."""
    db = upkeep.connect(tmp_path / "db", snapshot_bytes=1)  # every commit snapshots
    db.execute("CREATE TABLE t (a INTEGER, b VARCHAR) WITH (provenance = 'update')")
    with db.transaction(metadata={"who": "loader"}):
        db.insert("t", [(1, "x"), (2, "y")])
    with db.transaction(metadata={"who": "updater"}):
        db.execute("UPDATE t SET b = 'z' WHERE a = 1")
    before = (db.transactions(), str(db.provenance("t", (1, "z"))),
              db.what_if("t", abort=[2]).rows)
    db.close()
    db = upkeep.connect(tmp_path / "db")
    assert (db.transactions(), str(db.provenance("t", (1, "z"))),
            db.what_if("t", abort=[2]).rows) == before
    with db.transaction(metadata={"who": "next"}):
        db.execute("DELETE FROM t WHERE b = 'z'")
    assert sorted(db.transactions()) == [1, 2, 3]
    assert db.execute("SELECT * FROM t").fetchall() == [(2, "y")]


def test_transaction_metadata_is_fixed_when_the_transaction_commits(tmp_path):
    """The caller's dict, and what ``transactions()`` hands out, are copies: changing them
    changes neither the answers nor what the log or a snapshot keeps."""
    db = upkeep.connect(tmp_path / "db")
    db.execute("CREATE TABLE t (a INTEGER) WITH (provenance = 'update')")
    meta = {"principals": ["FR"], "trust": 0.9}
    with db.transaction(metadata=meta):
        db.insert("t", [(1,)])
    meta["principals"].append("IL")
    meta["trust"] = 0.1
    db.transactions()[1]["principals"].append("US")
    assert db.transactions() == {1: {"principals": ["FR"], "trust": 0.9}}
    assert db.visible("t", "IL").rows == []
    second = {"trust": 0.9}
    with db.transaction(metadata=second):
        db.insert("t", [(2,)])
    second["trust"] = 0.1
    db.checkpoint()
    expected = {1: {"principals": ["FR"], "trust": 0.9}, 2: {"trust": 0.9}}
    assert db.transactions() == expected
    db.close()
    db = upkeep.connect(tmp_path / "db")
    assert db.transactions() == expected
    assert db.visible("t", "IL").rows == [(2,)]  # T2 names no principals: seen by all


def test_a_long_logs_provenance_prints_and_converts_in_the_size_of_its_dag():
    """A normal form shares sub-expressions across transactions, so its tree can be
    exponential in the log (here over a million symbols for 200 statements on five rows):
    printing writes each shared part once (``where e1 = ...``), ``as_tuple`` shares tuples
    as the DAG shares nodes and ``==`` compares each pair of nodes once, all in its size
    (each took minutes or more); small expressions print as trees."""
    import random

    from upkeep.update_provenance.expression import dag_size, from_tuple, tree_size

    db = upkeep.connect()
    db.execute("CREATE TABLE t (k INTEGER, v INTEGER) WITH (provenance = 'update')")
    db.insert("t", [(i, 0) for i in range(5)])
    rng = random.Random(0)
    for _ in range(200):
        k, v, op = rng.randrange(5), rng.randrange(3), rng.random()
        if op < 0.6:
            db.execute(f"UPDATE t SET v = {v} WHERE k = {k}")
        elif op < 0.8:
            db.execute(f"DELETE FROM t WHERE k = {k} AND v <> {v}")
        else:
            db.execute(f"INSERT INTO t VALUES ({k}, {v})")
    expressions = [db.provenance("t", r) for r in db.execute("SELECT * FROM t").fetchall()]
    assert max(tree_size(e) for e in expressions) > 1_000_000
    for e in expressions:
        text = str(e)
        assert len(text) < 60 * dag_size([e])
        assert ("\nwhere\n  e1 = " in text) == (tree_size(e) > 400)
        again = from_tuple(e.as_tuple())
        assert again == e and str(again) == text
    assert all(a != b for a, b in zip(expressions, expressions[1:], strict=False))


def test_a_naive_expression_as_deep_as_a_long_log_hashes_and_answers():
    """The naive construction nests a node per statement, so 2,000 updates of two rows
    give expressions deeper than Python's recursion limit (1,000): hashing them (which
    ``==``, sets and the what-if's evaluation use) once recursed and failed with
    RecursionError. Aborting the last transaction gives back the row the one before it
    wrote.  Python's limit is lowered to 500 here, so that 1,000 updates are deeper than
    it (2,000 took 29 s: each update of a key matches every version of its row the
    provenance keeps, so the time grows with the square of the log)."""
    import sys

    n = 1000
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(n // 2)
    try:
        _deep_naive_expressions(n)
    finally:
        sys.setrecursionlimit(limit)


def _deep_naive_expressions(n: int) -> None:
    db = upkeep.connect()
    db.execute("CREATE TABLE t (k INTEGER, v INTEGER) WITH (provenance = 'update-naive')")
    db.insert("t", [(1, 0), (2, 0)])
    for i in range(1, n + 1):
        db.execute(f"UPDATE t SET v = {i} WHERE k = {1 + i % 2}")
    last = max(db.transactions())
    e = db.provenance("t", (1, n))
    assert hash(e) == hash(db.provenance("t", (1, n)))
    assert e == db.provenance("t", (1, n)) and e != db.provenance("t", (2, n - 1))
    assert len({e, db.provenance("t", (1, n))}) == 1
    assert sorted(db.what_if("t", abort=[last]).changes) == [((1, n - 2), 1), ((1, n), -1)]


def test_a_double_constant_on_an_integer_or_decimal_column_compares_as_duckdb():
    """``col = <DOUBLE>`` compares as DOUBLEs in DuckDB: on a DECIMAL(3,2) column
    ``0.1::DOUBLE`` finds 0.10; on a BIGINT column ``2.0**53`` equals both 2**53 and
    2**53 + 1, which no hyperplane (one value) says: refused, nothing changed (it deleted
    no row where DuckDB deletes one, and ``<>`` the reverse)."""
    import duckdb

    ddl = "CREATE TABLE p (k INTEGER, b BIGINT, d DECIMAL(3,2))"
    db, con = upkeep.connect(), duckdb.connect()
    db.execute(ddl + " WITH (provenance = 'update')")
    con.execute(ddl)
    for target in (db, con):
        target.execute("INSERT INTO p VALUES (1, 9007199254740993, 0.10), (2, 5, 0.20)")
    sql = "DELETE FROM p WHERE d = 0.1::DOUBLE AND b <> 5.0::DOUBLE"
    assert db.execute(sql).rowcount == con.execute(sql).fetchone()[0] == 1
    sql = "UPDATE p SET k = 4 WHERE b <> 1e30 AND k = 2.0::DOUBLE"  # 1e30: past BIGINT
    assert db.execute(sql).rowcount == con.execute(sql).fetchone()[0] == 1
    for bad in ("DELETE FROM p WHERE b = 9007199254740992::DOUBLE",
                "UPDATE p SET k = 3 WHERE b <> 9007199254740992::DOUBLE"):
        with pytest.raises(upkeep.UnsupportedError, match="several values of b BIGINT"):
            db.execute(bad)
    assert sorted(db.execute("SELECT * FROM p").fetchall()) == sorted(
        con.execute("SELECT * FROM p").fetchall())


@pytest.mark.parametrize("prov", ["", " WITH (provenance = 'update')"])
@pytest.mark.parametrize(("sql", "clash"), [("INSERT INTO r VALUES (?, ?)", (1, 9)),
                                            ("INSERT INTO r (a, k) VALUES (?, ?)", (9, 1))])
def test_a_failing_executemany_insert_in_a_transaction_stages_nothing(prov, sql, clash) -> None:
    """The tuples before the failing one were staged one statement each on a provenance
    table (annotated with the transaction, so a what-if aborting the load showed them);
    an ordinary table's one-call insert staged nothing."""
    db = upkeep.connect()
    db.execute(f"CREATE TABLE r (k INTEGER PRIMARY KEY, a INTEGER){prov}")
    db.execute("INSERT INTO r VALUES (1, 1)")
    with db.transaction():
        with pytest.raises(ConstraintError, match="duplicate primary key"):
            db.executemany(sql, [(5, 5), (6, 6), clash])
        assert db.executemany(sql, [(7, 7), (8, 8)]).rowcount == 2
    assert sorted(db.execute("SELECT * FROM r").fetchall()) == [(1, 1), (7, 7), (8, 8)]
    if prov:
        assert str(db.provenance("r", (5, 5))) == "0"
        assert sorted(db.what_if("r", abort=[1]).rows) == [(7, 7), (8, 8)]


def test_a_sum_prints_its_terms_in_one_order_in_every_process() -> None:
    """The sources an UPDATE merges are summed in the order their rows hash, which follows
    PYTHONHASHSEED: the printed provenance of one row differed between processes."""
    script = "\n".join([
        "import upkeep",
        "db = upkeep.connect()",
        "db.execute(\"CREATE TABLE t (k VARCHAR, v VARCHAR) WITH (provenance = 'update')\")",
        "for k in ['apple', 'pear', 'fig', 'kiwi', 'plum', 'lime']:",
        "    db.execute(f\"INSERT INTO t VALUES ('{k}', 'x')\")",
        "db.execute(\"UPDATE t SET k = 'z' WHERE v = 'x'\")",
        "print(db.provenance('t', ('z', 'x')))"])
    printed = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              check=True, env={**os.environ, "PYTHONHASHSEED": seed}).stdout
               for seed in ("1", "2", "3")}
    assert printed == {"(T1 + T2 + T3 + T4 + T5 + T6) ·M T7\n"}


def test_text_compared_with_a_column_is_cast_to_its_type_as_duckdb_binds_it():
    """``k = '1'`` on an INTEGER column of a provenance table: the text is cast to the
    column's type, as DuckDB binds it (it was refused); text that does not cast is a
    SchemaError naming it, and nothing changes."""
    db, con = upkeep.connect(), duckdb.connect()
    ddl = "CREATE TABLE t (k INTEGER, s VARCHAR, x DECIMAL(5,2), b BOOLEAN, ts TIMESTAMP)"
    db.execute(ddl + " WITH (provenance = 'update')")
    con.execute(ddl)
    rows = ("(1, 'a', 1.5, true, '2024-01-01 10:00:00'), (2, 'b', 2.25, false, NULL), "
            "(3, 'c', 0.5, NULL, '2024-01-01 11:30:00')")
    statements = [f"INSERT INTO t VALUES {rows}", "DELETE FROM t WHERE k = '1'",
                  "UPDATE t SET s = 'z' WHERE k <> '5' AND x = '2.25'",
                  "UPDATE t SET s = 'y' WHERE b = 'false'",
                  "DELETE FROM t WHERE ts = '2024-01-01 11:30'",
                  "UPDATE t SET k = 7 WHERE k = ' 2 '"]
    for sql in statements:
        db.execute(sql)
        con.execute(sql)
        assert Counter(db.execute("SELECT * FROM t").fetchall()) == Counter(
            con.execute("SELECT * FROM t").fetchall()), sql
    with pytest.raises(SchemaError, match="'x' cannot be cast to INTEGER for column k"):
        db.execute("DELETE FROM t WHERE k = 'x'")
    assert Counter(db.execute("SELECT * FROM t").fetchall()) == Counter(
        con.execute("SELECT * FROM t").fetchall())
