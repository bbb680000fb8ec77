"""Statements that differ only in their constants share one parse (statement_shapes.py).

The oracle of a shape is the parser: a statement bound from a kept shape must be exactly
the tree parsing its own text gives (sqlglot's structural equality, and the same SQL text
back), and a database running texts through shapes must hold what DuckDB holds after the
same texts."""

from __future__ import annotations

import duckdb
import pytest
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st

import upkeep
from upkeep import engine as engine_module
from upkeep import sql as sql_module
from upkeep.sql import parse
from upkeep.statement_shapes import Shapes, scan

# DML whose literals stand where values stand, each a family of texts of one shape; {}
# marks a literal
FAMILIES = [
    "UPDATE stock SET s_quantity = {}, s_name = {} WHERE s_w_id = {} AND s_i_id = {}",
    "UPDATE t SET a = -{} WHERE b <> {} AND c >= {} AND d < {}",
    "DELETE FROM t WHERE a IN ({}, {}, {}) AND b BETWEEN {} AND {}",
    "UPDATE t SET a = a * {} + {} - {} WHERE c LIKE {}",
    "INSERT INTO t VALUES ({}, {}, NULL, {})",
    "INSERT INTO t (a, b) VALUES ({}, {}), ({}, {})",
    'DELETE FROM "quoted ""name""" WHERE "a\'b" = {}',
    "delete from t where (a = {}) and b <= {};",
]

literal = st.one_of(
    st.integers(0, 10**18 - 1).map(str),
    st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)).map(lambda p: f"{p[0]}.{p[1]}"),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\\"),
            max_size=12).map(lambda s: "'" + s.replace("'", "''") + "'"),
)


def _text(family: str, draw_values: list[str]) -> str:
    return family.format(*draw_values)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(FAMILIES), st.data())
def test_a_statement_bound_from_its_shape_is_the_tree_its_text_parses_to(family, data):
    """Two texts of a family teach the shape, the second with one literal in every place
    (equal literals do not show in which order the tree holds them); every later one,
    bound, equals its parse."""
    shapes = Shapes()
    count = family.count("{}")
    texts = [_text(family, data.draw(st.lists(literal, min_size=count, max_size=count)))
             for _ in range(5)]
    texts[1] = _text(family, [data.draw(literal)] * count)
    for text in texts[:2]:
        scanned = scan(text)
        assert scanned is not None and len(scanned[1]) == count, text
        assert shapes.statement(*scanned) is None  # not kept before its second sighting
        shapes.learn(*scanned, parse(text))
    for text in texts[2:]:
        scanned = scan(text)
        bound = shapes.statement(*scanned)
        (want,) = parse(text)
        assert bound is not None, text
        assert bound == want and bound.sql() == want.sql(), text


def test_a_shape_learned_from_equal_literals_binds_each_in_its_own_place():
    """The tree may hold the literals in another order than the text (a WITH before an
    INSERT is moved into its query): a shape learned from a text whose two literals are
    equal, where binding in the tree's order shows nothing wrong, binds a later text's
    literals each in its own place (the placeholders' order, as parameters are bound)."""
    shapes = Shapes()
    learned = "WITH c AS (SELECT * FROM u WHERE y = 1) INSERT INTO t SELECT x FROM c WHERE x > 1"
    for _ in range(2):
        shapes.learn(*scan(learned), parse(learned))
    text = "WITH c AS (SELECT * FROM u WHERE y = 5) INSERT INTO t SELECT x FROM c WHERE x > 7"
    bound = shapes.statement(*scan(text))
    assert bound is not None and bound == parse(text)[0]


@pytest.mark.parametrize("text, again", [
    # literals whose place is no value: their parse may depend on the value
    ("UPDATE t SET a = INTERVAL '5' DAY", "UPDATE t SET a = INTERVAL '6' DAY"),
    ("UPDATE t SET a = INTERVAL '5'", "UPDATE t SET a = INTERVAL '5 day'"),
    ("UPDATE t SET d = DATE '2020-01-01'", "UPDATE t SET d = DATE '2020-01-02'"),
    ("UPDATE t SET a = CAST('5' AS DECIMAL(10, 2))", "UPDATE t SET a = CAST('6' AS DECIMAL(9, 1))"),
    ("INSERT INTO t SELECT a FROM u LIMIT 5", "INSERT INTO t SELECT a FROM u LIMIT 6"),
    # not DML, or more than one statement
    ("SELECT * FROM t WHERE a = 1", "SELECT * FROM t WHERE a = 2"),
    ("DELETE FROM t WHERE a = 1; DELETE FROM t WHERE a = 2",
     "DELETE FROM t WHERE a = 3; DELETE FROM t WHERE a = 4"),
])
def test_a_shape_whose_literals_are_not_values_only_is_not_kept(text, again):
    """A shape is kept only where binding cannot change the parse (INTERVAL '5' and
    INTERVAL '5 day' parse apart): such texts are parsed as before."""
    shapes = Shapes()
    for t in (text, again, text):
        scanned = scan(t)
        assert scanned is not None
        shapes.learn(*scanned, parse(t))
    assert shapes.statement(*scan(again)) is None


@pytest.mark.parametrize("text", [
    "DELETE FROM t WHERE a = 1 -- a comment",
    "DELETE FROM t WHERE a = 1 /* a comment */",
    "DELETE FROM t WHERE a = ?",
    "DELETE FROM t WHERE a = $1",
    "DELETE FROM t WHERE a = E'x\\ny'",
    "DELETE FROM t WHERE a = 'x\\'",
    "DELETE FROM t WHERE a = '5'::INTEGER",
    "DELETE FROM t",
])
def test_texts_a_scan_cannot_read_alike_with_every_parser_are_not_shaped(text):
    """Comments, parameters, escape strings, backslashes and casts by ``::`` keep a text
    unshaped, as does a text with no literal."""
    assert scan(text) is None


def test_queries_and_long_texts_take_no_room_among_the_shapes():
    """Only DML is remembered (ad-hoc queries would push its shapes out of the bounded
    cache), and a text longer than the texts' cache keeps is not shaped (a bulk INSERT
    of literal rows: its kept tree would be big)."""
    shapes = Shapes()
    for i in range(3):
        text = f"SELECT * FROM t WHERE a = {i}"
        shapes.learn(*scan(text), parse(text))
    assert len(shapes) == 0
    text = "DELETE FROM t WHERE a = 1"
    shapes.learn(*scan(text), parse(text))
    assert len(shapes) == 1
    assert scan("INSERT INTO t VALUES " + ", ".join(f"({i})" for i in range(1_000))) is None


def test_a_text_that_is_not_valid_unicode_is_refused_as_parsing_refuses_it(monkeypatch):
    """A lone surrogate in a string literal of a kept shape is the ParseError parsing
    gives, naming its place, not a statement bound around it."""
    monkeypatch.setattr(engine_module, "SHAPES", Shapes())
    db = upkeep.connect()
    db.execute("CREATE TABLE t (a VARCHAR)")
    for i in range(3):
        db.execute(f"INSERT INTO t VALUES ('x{i}')")
    assert engine_module.SHAPES.bound == 1
    with pytest.raises(upkeep.ParseError, match="lone surrogate .* at character 24"):
        db.execute("INSERT INTO t VALUES ('a\ud800')")
    assert engine_module.SHAPES.bound == 1  # not bound: the scan refused the text
    assert sorted(db.execute("SELECT * FROM t").fetchall()) == [("x0",), ("x1",), ("x2",)]


def test_numbers_against_words_stay_in_the_shape():
    """``t1``, ``1e5`` and ``1.2.3`` are no literals of their own: they are the shape's."""
    shape, literals = scan("UPDATE t1 SET a = 1e5, b = 7 WHERE c = 'x'")
    assert shape == "UPDATE t1 SET a = 1e5, b = ? WHERE c = ?"
    assert literals == [("7", False), ("x", True)]


def _counting_parses(monkeypatch) -> list[str]:
    parses: list[str] = []
    real = sqlglot.parse
    monkeypatch.setattr(sql_module.sqlglot, "parse",
                        lambda text, **kw: parses.append(text) or real(text, **kw))
    monkeypatch.setattr(engine_module, "SHAPES", Shapes())
    return parses


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["insert", "update", "delete", "bad"]),
                          st.integers(-3, 3), st.integers(-50, 50),
                          st.text(alphabet="ab'%", max_size=4)),
                min_size=1, max_size=30))
def test_a_database_running_texts_through_shapes_holds_what_duckdb_holds(steps):
    """Texts with their constants written in, run one by one on a table with a view over
    it, against DuckDB running the same texts: the table and the view agree after each,
    and a statement that fails (a key taken twice) fails in both, changing nothing."""
    db, con = upkeep.connect(), duckdb.connect()
    for c in (db, con):
        c.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, n INTEGER, s VARCHAR)")
        c.execute("INSERT INTO t VALUES (0, 0, 'a')")
    db.execute("CREATE VIEW v AS SELECT s, COUNT(*) AS c, SUM(n) AS total FROM t GROUP BY s")
    quote = "'{}'".format
    for kind, k, n, s in steps:
        text = {
            "insert": f"INSERT INTO t VALUES ({k}, {n}, {quote(s.replace(chr(39), 2 * chr(39)))})",
            "update": f"UPDATE t SET n = n + {n}, s = {quote(s.replace(chr(39), 2 * chr(39)))} "
                      f"WHERE k = {k}",
            "delete": f"DELETE FROM t WHERE k = {k} AND s LIKE {quote(s.replace(chr(39), 2 * chr(39)))}",
            "bad": f"INSERT INTO t VALUES (0, {n}, 'dup')",  # k = 0 is always there
        }[kind]
        errors = []
        for c, family in ((db, upkeep.Error), (con, duckdb.Error)):
            try:
                c.execute(text)
            except family:
                errors.append(c)
        assert errors in ([], [db, con]), text
        rows = sorted(con.execute("SELECT * FROM t").fetchall())
        assert sorted(db.execute("SELECT * FROM t").fetchall()) == rows, text
        assert sorted(db.view("v").rows()) == sorted(con.execute(
            "SELECT s, COUNT(*), SUM(n) FROM t GROUP BY s").fetchall()), text


def test_texts_of_one_shape_are_parsed_once_more_in_all(monkeypatch):
    """A text with constants is parsed while its shape is new (twice, then the shape
    itself once): the other 18 texts of each shape are bound, not parsed."""
    parses = _counting_parses(monkeypatch)
    db = upkeep.connect()
    db.execute("CREATE TABLE t (k INTEGER, n INTEGER, s VARCHAR)")
    parses.clear()
    for i in range(20):
        db.execute(f"INSERT INTO t VALUES ({i}, {i * 7}, 'it''s {i}')")
    for i in range(20):
        db.execute(f"UPDATE t SET n = {i}, s = 'x{i}' WHERE k = {i}")
    assert len(parses) == 2 * 3
    assert engine_module.SHAPES.bound == 2 * 18
    assert sorted(db.execute("SELECT * FROM t").fetchall()) == [
        (i, i, f"x{i}") for i in range(20)]


def test_a_failing_statement_bound_from_a_shape_names_the_position_in_its_own_text():
    """An error raised by a statement bound from a shape is the one its own parse gives:
    the statement runs again from its text, so the position counts the literals as
    written (here, after a literal longer in each text)."""
    db = upkeep.connect()
    db.execute("CREATE TABLE products (name VARCHAR, category VARCHAR, price INTEGER) "
               "WITH (provenance = 'update')")
    db.execute("INSERT INTO products VALUES ('a', 'Sport', 10)")
    before = engine_module.SHAPES.bound
    for i in range(1, 6):
        with pytest.raises(upkeep.UnsupportedError) as refused:
            db.execute(f"DELETE FROM products WHERE category = '{'x' * i}' OR price > {10 ** i}")
        assert f"(line 1, column {40 + i})" in str(refused.value)
        assert f"price > {10 ** i}" in str(refused.value)
    assert engine_module.SHAPES.bound - before == 3
    assert db.execute("SELECT * FROM products").fetchall() == [("a", "Sport", 10)]


def test_a_storage_error_or_timeout_of_a_bound_statement_is_not_run_again():
    """Only errors that name places in the text send a bound statement back to its own
    parse: a storage error (a log that could not be written) or a statement timeout is
    raised as it is, the statement run once."""
    db = upkeep.connect()
    db.execute("CREATE TABLE t (a INTEGER)")
    for i in range(3):
        db.execute(f"INSERT INTO t VALUES ({i})")  # the shape is kept from the second
    runs = []

    def failing(error):
        def run(stmt):
            runs.append(stmt)
            raise error
        return run

    for error in (upkeep.storage.StorageError("the log could not be written"),
                  upkeep.errors.StatementTimeout("statement timed out")):
        runs.clear()
        db.execute_parsed = failing(error)
        with pytest.raises(type(error)):
            db.execute("INSERT INTO t VALUES (7)")
        assert len(runs) == 1
    runs.clear()
    db.execute_parsed = failing(upkeep.ConstraintError("refused", None))
    with pytest.raises(upkeep.ConstraintError):
        db.execute("INSERT INTO t VALUES (8)")
    assert len(runs) == 2  # bound, then again from its own parse
