"""One conformance suite, run against every engine (docs/design.md, "Layers").

The engine contract (:mod:`upkeep.engine`) names every method and property of a connection
and a view handle.  Here each engine must (1) implement every member with the contract's
signature, (2) return the contract's types, (3) keep views equal to DuckDB recomputing
them from the base rows after every batch, with subscribers seeing exactly the changes,
and (4) raise the same error class with the same fields (row, index, position) for bad
SQL, bad rows and rejected batches, leaving every view as it was.  A method an engine
cannot serve must exist and raise :class:`UnsupportedError`; which ones those are is
declared per engine below, so an engine cannot silently opt out of anything else.
"""

from __future__ import annotations

import inspect
from collections import Counter
from decimal import Decimal

import duckdb
import pandas as pd
import pytest
from oracle import insert_rows

import upkeep
from upkeep.engine import Engine, ViewHandle
from upkeep.errors import (
    ConstraintError,
    Error,
    ParseError,
    RecursionLimit,
    SchemaError,
    UnsupportedError,
)
from upkeep.types import SqlType

ENGINES = ["local", "spark"]

# What an engine answers with UnsupportedError, by contract member.
UNSUPPORTED = {
    "local": set(),
    "spark": {"why", "counters"},
}

TABLES = """
CREATE TABLE customers (ck INTEGER PRIMARY KEY, segment VARCHAR, nation INTEGER NOT NULL);
CREATE TABLE orders (ok BIGINT, ck INTEGER, price DECIMAL(12,2));
"""
VIEWS = {
    "revenue": "SELECT c.segment, SUM(o.price) AS total, COUNT(*) AS n "
               "FROM orders o JOIN customers c ON o.ck = c.ck GROUP BY c.segment",
    "cheap": "SELECT o.ok, o.ck FROM orders o WHERE o.price < 50",
}
COLUMNS = {"customers": ["ck", "segment", "nation"], "orders": ["ok", "ck", "price"]}
TYPES = {"customers": "ck INTEGER, segment VARCHAR, nation INTEGER",
         "orders": "ok BIGINT, ck INTEGER, price DECIMAL(12,2)"}


# ---------------------------------------------------------------- the surface
def contract_members(contract: type) -> dict[str, object]:
    """Public members of a contract class (and ``__contains__``)."""
    return {name: member for name, member in vars(contract).items()
            if not name.startswith("_") or name == "__contains__"}


def surface_problems(implementation: type, contract: type) -> list[str]:
    """How ``implementation`` departs from ``contract``: missing or abstract members, a
    property where the contract has a method (or the reverse), other parameters."""
    problems = []
    for name, member in contract_members(contract).items():
        if name in getattr(implementation, "__abstractmethods__", ()):
            problems.append(f"{name} is not implemented")
            continue
        impl = inspect.getattr_static(implementation, name, None)
        if impl is None:
            problems.append(f"{name} is missing")
            continue
        if isinstance(member, property) != isinstance(impl, property):
            problems.append(f"{name} is {'not ' if isinstance(member, property) else ''}"
                            f"a property")
            continue
        if isinstance(member, property) or not callable(member):
            continue
        want = [(p.name, p.kind, p.default) for p in inspect.signature(member).parameters.values()]
        got = [(p.name, p.kind, p.default) for p in inspect.signature(impl).parameters.values()]
        if want != got:
            problems.append(f"{name} takes {got}, the contract {want}")
    return problems


def implementations(kind: str) -> tuple[type, type]:
    if kind == "local":
        from upkeep.local import Connection
        from upkeep.local import ViewHandle as LocalHandle

        return Connection, LocalHandle
    from upkeep.spark.connection import SparkConnection, SparkViewHandle

    return SparkConnection, SparkViewHandle


@pytest.mark.parametrize("kind", ENGINES)
def test_surface_matches_the_contract(kind: str) -> None:
    connection, handle = implementations(kind)
    assert issubclass(connection, Engine) and issubclass(handle, ViewHandle)
    assert surface_problems(connection, Engine) == []
    assert surface_problems(handle, ViewHandle) == []


def test_surface_check_catches_a_departure() -> None:
    """A missing method, a changed signature or a method turned property fails the check."""
    connection, handle = implementations("local")

    class Broken(connection):
        def insert(self, table, rows, extra=None):  # another signature
            return 0

        @property
        def tables(self):  # a property where the contract has a method
            return []

    Broken.__abstractmethods__ = frozenset({"delete"})  # as if delete were missing
    problems = surface_problems(Broken, Engine)
    assert any(p.startswith("insert takes") for p in problems)
    assert "tables is a property" in problems
    assert "delete is not implemented" in problems


# ---------------------------------------------------------------- behaviour
@pytest.fixture(params=ENGINES)
def engine(request, tmp_path):
    kind = request.param
    if kind == "local":
        db = upkeep.connect()
    else:
        db = upkeep.connect(engine="spark", spark=request.getfixturevalue("spark"), shards=2,
                            database=tmp_path / "spark")
    db.kind = kind
    db.execute(TABLES)
    for name, sql in VIEWS.items():
        db.create_view(name, sql)
    yield db
    db.close()


def oracle(tables: dict[str, Counter], view: str) -> Counter:
    """The view recomputed by DuckDB from the test's own model of the base tables."""
    con = duckdb.connect()
    for name, rows in tables.items():
        con.execute(f"CREATE TABLE {name} ({TYPES[name]})")
        insert_rows(con, name, list(rows.elements()))
    return Counter(con.execute(VIEWS[view]).fetchall())


def expect_unsupported_or(db, member: str, call):
    if member in UNSUPPORTED[db.kind]:
        with pytest.raises(UnsupportedError):
            call()
        return None
    return call()


def test_results_types_and_subscriptions(engine) -> None:
    db = engine
    model = {"customers": Counter(), "orders": Counter()}
    seen = {name: Counter() for name in VIEWS}
    for name in VIEWS:
        def collect(changes, name=name):
            assert isinstance(changes, list)
            for row, weight in changes:
                assert isinstance(row, tuple) and isinstance(weight, int)
                seen[name][row] += weight
        unsubscribe = db.view(name).subscribe(collect)
        assert callable(unsubscribe)

    def check() -> None:
        for name in VIEWS:
            want = oracle(model, name)
            handle = db.view(name)
            rows = handle.rows()
            assert isinstance(rows, list) and all(isinstance(r, tuple) for r in rows)
            assert Counter(rows) == want, name
            assert +seen[name] == want, name
            for row, n in want.items():
                assert handle.count(row) == n and row in handle
            cursor = db.execute(f"SELECT * FROM {name}")
            assert isinstance(cursor, upkeep.Cursor)
            assert Counter(cursor.fetchall()) == want

    customers = [(1, "AUTO", 1), (2, "BUILDING", 2), (3, None, 3)]
    assert db.insert("customers", customers) == 3
    model["customers"].update(customers)
    orders = pd.DataFrame({"ok": [10, 11, 12], "ck": [1, 2, 2],
                           "price": [Decimal("20.50"), Decimal("70.00"), Decimal("5.25")]})
    assert db.insert("orders", orders) == 3
    model["orders"].update([(10, 1, Decimal("20.50")), (11, 2, Decimal("70.00")),
                            (12, 2, Decimal("5.25"))])
    check()
    cursor = db.execute("INSERT INTO orders VALUES (13, 3, 1.00), (14, 1, 99.99)")
    assert isinstance(cursor, upkeep.Cursor) and cursor.rowcount == 2
    model["orders"].update([(13, 3, Decimal("1.00")), (14, 1, Decimal("99.99"))])
    with db.transaction() as tx:
        assert tx is db
        assert db.delete("orders", [(10, 1, Decimal("20.50"))]) == 1
        db.insert("orders", [(15, 3, Decimal("49.99"))])
        db.executemany("INSERT INTO orders VALUES (?, ?, ?)", [(16, 1, Decimal("3.00"))])
    model["orders"] -= Counter([(10, 1, Decimal("20.50"))])
    model["orders"].update([(15, 3, Decimal("49.99")), (16, 1, Decimal("3.00"))])
    check()

    handle = db.view("revenue")
    assert handle.name == "revenue"
    assert handle.columns == ["segment", "total", "n"]
    assert [n for n, _ in handle.schema] == handle.columns
    assert all(isinstance(t, str) for _, t in handle.schema)
    assert isinstance(handle.explain(), str) and "revenue" in handle.explain()
    assert db.explain("revenue") == handle.explain()
    assert db.tables() == ["customers", "orders"] and db.views() == list(VIEWS)
    schema = db.schema_of("orders")
    assert [n for n, _ in schema] == COLUMNS["orders"]
    assert all(isinstance(t, SqlType) for _, t in schema)
    counters = expect_unsupported_or(db, "counters", handle.counters)
    assert counters is None or isinstance(counters, dict)
    with pytest.raises(UnsupportedError):  # no engine answers why for a join view
        handle.why(next(iter(handle.rows())))
    assert isinstance(db.metadata(), dict)
    assert isinstance(db.expire(), int)
    assert isinstance(db.in_transaction(), bool) and not db.in_transaction()
    db.checkpoint()


def test_a_subscriber_attached_inside_a_callback_hears_only_later_batches(engine) -> None:
    """A subscriber attached while a batch is being told starts from the view's rows,
    which hold that batch: it must not be told of it as well (its copy would hold the
    batch's rows twice).  Each view's first callback attaches copies to every view, so
    whichever view an engine tells first, the others are told after the attachment."""
    db = engine
    db.insert("customers", [(1, "AUTO", 1)])
    copies: dict[str, Counter] = {name: Counter() for name in VIEWS}
    attached: list = []

    def watcher(changes) -> None:
        if not attached:
            for name in VIEWS:
                copies[name].update(db.view(name).rows())
                attached.append(db.view(name).subscribe(
                    lambda told, name=name: copies[name].update(dict(told))))

    for name in VIEWS:
        db.view(name).subscribe(watcher)
    for order in [(10, 1, Decimal("20.50")), (11, 1, Decimal("7.00"))]:
        db.insert("orders", [order])
        for name in VIEWS:
            assert +copies[name] == Counter(db.view(name).rows()), name
    assert len(attached) == len(VIEWS)


def test_why_on_a_recursive_view(engine) -> None:
    db = engine
    db.execute("CREATE TABLE link (a INTEGER, b INTEGER)")
    db.create_view("reach", "WITH RECURSIVE r(a, b) AS (SELECT a, b FROM link UNION "
                            "SELECT r.a, l.b FROM r JOIN link l ON r.b = l.a) SELECT * FROM r")
    db.insert("link", [(1, 2), (2, 3)])
    assert Counter(db.view("reach").rows()) == Counter([(1, 2), (2, 3), (1, 3)])
    why = expect_unsupported_or(db, "why", lambda: db.view("reach").why((1, 3)))
    if why is not None:
        assert why == db.why("reach", (1, 3))
        assert "link" in str(why)


def test_metadata_commits_with_the_batch(engine) -> None:
    """Metadata commits with its batch (also alone, with no change), stays through batches
    without any, and a rejected transaction's is not kept."""
    db = engine
    with db.transaction(metadata={"offset": 7}):
        db.insert("orders", [(9, 9, Decimal("1.00"))])
    assert db.metadata() == {"offset": 7}
    assert db.view("cheap").rows() == [(9, 9)]
    db.insert("orders", [(10, 9, Decimal("2.00"))])
    assert db.metadata() == {"offset": 7}
    with pytest.raises(ConstraintError):
        with db.transaction(metadata={"offset": 8}):
            db.delete("orders", [(77, 1, Decimal("1.00"))])
    assert db.metadata() == {"offset": 7}
    with db.transaction(metadata={"offset": 9, "source": ["a", "b"]}):
        pass
    assert db.metadata() == {"offset": 9, "source": ["a", "b"]}
    assert sorted(db.view("cheap").rows()) == [(9, 9), (10, 9)]


# ---------------------------------------------------------------- errors
def fields(exc: Error) -> tuple:
    return (type(exc), getattr(exc, "row", None), getattr(exc, "index", None),
            getattr(exc, "line", None), getattr(exc, "column", None))


BAD_INPUT = {
    # name: (action, expected class)
    "syntax": (lambda db: db.execute("SELECT FROM WHERE orders"), ParseError),
    "syntax on line 2": (lambda db: db.execute("CREATE TABLE t (a INTEGER);\nINSERT INTO t VALUS (1)"),
                         ParseError),
    "wrong type": (lambda db: db.insert("orders", [(1, 1, Decimal("1")), (2, "x", Decimal("2"))]),
                   SchemaError),
    "wrong width": (lambda db: db.insert("orders", [(1, 1)]), SchemaError),
    "unknown table": (lambda db: db.insert("nope", [(1,)]), SchemaError),
    "unknown view": (lambda db: db.view("nope"), SchemaError),
    "a view is not a table": (lambda db: db.insert("cheap", [(1, 1)]), UnsupportedError),
    "null in not null": (lambda db: db.insert("customers", [(5, "AUTO", None)]), ConstraintError),
    "duplicate key": (lambda db: db.insert("customers", [(1, "AUTO", 1), (1, "AUTO", 2)]),
                      ConstraintError),
    "delete of an absent row": (lambda db: db.delete("orders", [(77, 1, Decimal("1.00"))]),
                                ConstraintError),
    "a view name that is no string": (lambda db: db.create_view(3, "SELECT 1 AS one"),
                                      SchemaError),
    "an empty view name": (lambda db: db.create_view("", "SELECT 1 AS one"), SchemaError),
    "a schema other than main": (lambda db: db.execute("INSERT INTO s.orders VALUES (1, 1, 1)"),
                                 SchemaError),
    "or replace table": (lambda db: db.execute("CREATE OR REPLACE TABLE orders (a INTEGER)"),
                         UnsupportedError),
    "a column declared twice": (lambda db: db.execute("CREATE TABLE twice (a INTEGER, A DOUBLE)"),
                                SchemaError),
    "a drop of several tables": (lambda db: db.execute("DROP TABLE orders, customers"),
                                 UnsupportedError),
    "an endless UNION ALL recursion": (lambda db: db.execute(
        "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) SELECT count(*) "
        "FROM c"), RecursionLimit),
}


@pytest.fixture(scope="module")
def local_errors():
    """Each bad input's error fields on the local engine, the reference for the others."""
    out = {}
    for name, (action, _cls) in BAD_INPUT.items():
        db = upkeep.connect()
        db.execute(TABLES)
        for view, sql in VIEWS.items():
            db.create_view(view, sql)
        db.insert("orders", [(1, 1, Decimal("10.00"))])
        db.insert("customers", [(1, "AUTO", 1)])
        try:
            action(db)
        except Error as exc:
            out[name] = fields(exc)
    return out


def test_bad_input_raises_the_same_error_everywhere(engine, local_errors) -> None:
    db = engine
    db.insert("orders", [(1, 1, Decimal("10.00"))])
    db.insert("customers", [(1, "AUTO", 1)])
    before = {name: Counter(db.view(name).rows()) for name in VIEWS}
    for name, (action, cls) in BAD_INPUT.items():
        with pytest.raises(cls) as caught:
            action(db)
        assert fields(caught.value) == local_errors[name], name
        assert {n: Counter(db.view(n).rows()) for n in VIEWS} == before, name
    assert local_errors["wrong type"][1:3] == ((2, "x", Decimal("2")), 1)
    assert local_errors["syntax on line 2"][3] == 2
    assert local_errors["delete of an absent row"][1] == (77, 1, Decimal("1.00"))


def test_a_failing_transaction_changes_nothing(engine) -> None:
    db = engine
    db.insert("customers", [(1, "AUTO", 1)])
    db.insert("orders", [(1, 1, Decimal("10.00"))])
    before = {name: Counter(db.view(name).rows()) for name in VIEWS}
    with pytest.raises(ConstraintError):
        with db.transaction():
            db.insert("orders", [(2, 1, Decimal("3.00"))])
            db.delete("customers", [(2, "AUTO", 1)])  # absent: the whole batch is rejected
    with pytest.raises(RuntimeError):
        with db.transaction():
            db.insert("orders", [(3, 1, Decimal("4.00"))])
            raise RuntimeError("the caller gives up")
    assert {name: Counter(db.view(name).rows()) for name in VIEWS} == before
    assert not db.in_transaction()
    with pytest.raises(Error, match="do not nest"):
        with db.transaction():
            with db.transaction():
                pass
