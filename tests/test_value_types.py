"""The types of values picked from several (``COALESCE``, ``CASE``, ``GREATEST``, a
``UNION ALL`` column, an outer join's padded column) are DuckDB's: the narrowest type
holding each side (``max_numeric``), an integer literal taking the integer type it meets
where it fits, folded left to right (``expressions.common_type``).  They were widened
(SMALLINT to INTEGER, DECIMAL(12,2) to DECIMAL(38,2)) before."""

from __future__ import annotations

import itertools

import duckdb
import pytest

import upkeep

COLUMNS = {"ti": "TINYINT", "si": "SMALLINT", "i": "INTEGER", "bi": "BIGINT",
           "hi": "HUGEINT", "d41": "DECIMAL(4,1)", "d122": "DECIMAL(12,2)",
           "d104": "DECIMAL(10,4)", "d3810": "DECIMAL(38,10)", "f": "DOUBLE"}
LITERALS = ["0", "-1", "200", "1000000", "3000000000", "0.5", "12345678901.25", "NULL"]
FORMS = ["COALESCE({a}, {b})", "COALESCE({a}, {b}, si)", "CASE WHEN i > 0 THEN {a} ELSE {b} END",
         "GREATEST({a}, {b})", "LEAST({b}, {a})"]
DDL = "CREATE TABLE t (" + ", ".join(f"{c} {t}" for c, t in COLUMNS.items()) + ")"
ROW = (-7, 300, 70000, -5_000_000_000, 10**20, 123.4, 1234567890.12, 123456.789, 0.5, 2.25)


@pytest.fixture(scope="module")
def databases():
    con = duckdb.connect()
    con.execute(DDL)
    con.execute("INSERT INTO t VALUES (" + ", ".join(repr(v) for v in ROW) + ")")
    db = upkeep.connect()
    db.execute(DDL)
    db.insert("t", [ROW])
    yield db, con
    db.close()
    con.close()


@pytest.mark.parametrize("form", FORMS)
def test_picked_values_are_typed_as_duckdb_types_them(databases, form) -> None:
    db, con = databases
    operands = [*COLUMNS, *LITERALS]
    for n, (a, b) in enumerate(itertools.product(operands, operands)):
        if a == b == "NULL":
            continue  # DuckDB's type of NULL alone reads '"NULL"'
        sql = f"SELECT {form.format(a=a, b=b)} AS x FROM t"
        want = con.execute("DESCRIBE " + sql).fetchall()[0][1]
        name = f"v{abs(hash(form)) % 10**6}_{n}"
        db.create_view(name, sql)
        got = db.execute(f"SELECT * FROM {name}")
        assert got.description[0][1] == want, sql
        assert got.fetchall() == con.execute(sql).fetchall(), sql
        db.execute(f"DROP VIEW {name}")


def test_a_union_column_and_padded_columns_keep_their_types(databases) -> None:
    db, con = databases
    for a, b in itertools.product(COLUMNS, COLUMNS):
        sql = f"SELECT {a} AS x FROM t UNION ALL SELECT {b} FROM t"
        want = con.execute("DESCRIBE " + sql).fetchall()[0][1]
        db.create_view("u", sql)
        got = db.execute("SELECT * FROM u")
        assert got.description[0][1] == want, sql
        assert sorted(got.fetchall()) == sorted(con.execute(sql).fetchall()), sql
        db.execute("DROP VIEW u")
    sql = "SELECT a.i, b.si, b.d122, b.d41 FROM t a LEFT JOIN t b ON b.si = a.si"
    db.create_view("padded", sql)
    assert "recompute" not in db.explain("padded")
    got = db.execute("SELECT * FROM padded")
    assert [d[1] for d in got.description] == [
        r[1] for r in con.execute("DESCRIBE " + sql).fetchall()]
    assert got.fetchall() == con.execute(sql).fetchall()


@pytest.mark.parametrize("a, b, kept", [("DECIMAL(30,2)", "DECIMAL(20,15)", "DECIMAL(38,15)"),
                                        ("DECIMAL(38,0)", "DECIMAL(10,5)", "DECIMAL(38,5)"),
                                        ("DECIMAL(38,10)", "HUGEINT", None),
                                        ("DECIMAL(36,2)", "BIGINT", None)])
def test_decimals_past_38_digits_keep_their_decimals(a, b, kept) -> None:
    """Two DECIMALs needing more than 38 digits keep the larger scale (DuckDB keeps the
    integer digits and cuts decimals; upkeep types arithmetic DECIMAL(38, s), wider than
    DuckDB's, and cutting would round values DuckDB keeps); the values are DuckDB's."""
    sql = f"SELECT CAST(x AS {a}) AS v FROM w UNION ALL SELECT CAST(x AS {b}) FROM w"
    con = duckdb.connect()
    con.execute("CREATE TABLE w (x INTEGER)")
    con.execute("INSERT INTO w VALUES (7)")
    db = upkeep.connect()
    db.execute("CREATE TABLE w (x INTEGER)")
    db.insert("w", [(7,)])
    db.create_view("v", sql)
    got = db.execute("SELECT * FROM v")
    assert got.description[0][1] == (kept or con.execute("DESCRIBE " + sql).fetchall()[0][1])
    assert got.fetchall() == con.execute(sql).fetchall()


@pytest.mark.parametrize("sql", [
    "SELECT COALESCE(d41 - 1, 0.25) AS x FROM t",
    "SELECT d122 AS x FROM t UNION ALL SELECT bi - d41 FROM t",
    "SELECT COALESCE(d41 * NULL, d104) AS x FROM t",
])
def test_a_widened_arithmetic_type_rounds_no_value(databases, sql) -> None:
    """Arithmetic typed DECIMAL(38, s) meeting a value of more decimals keeps them (a
    review found 0.25 read as 0.3 where the scale gave way to 38 integer digits)."""
    db, con = databases
    db.create_view("w", sql)
    assert sorted(db.view("w").rows()) == sorted(con.execute(sql).fetchall())
    db.execute("DROP VIEW w")


@pytest.mark.parametrize("expression", [
    "COALESCE(si, (0))", "COALESCE(si, -(1))", "COALESCE(si, - -1)",
    "CASE WHEN i > 0 THEN 100 WHEN i < 0 THEN si END",
    "CASE WHEN i > 0 THEN hi WHEN i < 0 THEN d104 ELSE ti END",
    "CASE WHEN i > 0 THEN NULL WHEN i < 0 THEN 0 ELSE ti END",
])
def test_literals_and_case_branches_as_duckdb_folds_them(databases, expression) -> None:
    """An integer literal in parentheses or negated is one; CASE folds its ELSE first."""
    db, con = databases
    sql = f"SELECT {expression} AS x FROM t"
    db.create_view("w", sql)
    assert db.execute("SELECT * FROM w").description[0][1] == con.execute(
        "DESCRIBE " + sql).fetchall()[0][1]
    assert db.view("w").rows() == con.execute(sql).fetchall()
    db.execute("DROP VIEW w")


@pytest.mark.parametrize("op", ["+", "-", "*", "//", "%"])
def test_integer_arithmetic_is_typed_and_overflows_as_duckdb(databases, op) -> None:
    """Integer arithmetic is of the wider operand's type, an integer literal taking the
    type it meets where it fits (``ti + 1`` is a TINYINT, ``ti + 1000`` an INTEGER), and
    overflows that type as DuckDB does (``si * si`` past 32767 raises).  It was typed at
    least INTEGER: TINYINT and SMALLINT sums went past their type."""
    from upkeep.errors import EvaluationError

    db, con = databases
    operands = ["ti", "si", "i", "bi", "0", "-1", "127", "-128", "200", "(3)", "1000000"]
    for n, (a, b) in enumerate(itertools.product(operands, operands)):
        if not ({a, b} & {"ti", "si", "i", "bi"}):
            continue  # constants: DuckDB folds them
        sql = f"SELECT {a} {op} {b} AS x FROM t"
        want = con.execute("DESCRIBE " + sql).fetchall()[0][1]
        try:
            expected = con.execute(sql).fetchall()
        except duckdb.Error:
            expected = None
        name = f"w{n}"
        if expected is None:
            with pytest.raises(EvaluationError):
                db.create_view(name, sql)
            continue
        db.create_view(name, sql)
        got = db.execute(f"SELECT * FROM {name}")
        assert (got.description[0][1], got.fetchall()) == (want, expected), sql
        db.execute(f"DROP VIEW {name}")


@pytest.mark.parametrize("expression", ["hi % d41", "d3810 % hi", "d122 % hi", "bi % d41",
                                        "i % d122", "d41 % d104", "hi % i"])
def test_a_remainder_is_typed_as_duckdb_and_past_38_digits_a_double(databases, expression
                                                                    ) -> None:
    """``%`` of decimals is of the larger integer part and scale, as DuckDB types it; past
    38 digits DuckDB computes it as DOUBLEs (``HUGEINT % DECIMAL(4,1)``), and so does the
    view (it kept an exact DECIMAL(38, s): another value; found by a review)."""
    db, con = databases
    sql = f"SELECT {expression} AS x FROM t"
    db.create_view("w", sql)
    want = con.execute("DESCRIBE " + sql).fetchall()[0][1]
    got = db.execute("SELECT * FROM w")
    if want == "DOUBLE":
        assert got.description[0][1] == want, sql
    assert got.fetchall() == con.execute(sql).fetchall(), sql
    db.execute("DROP VIEW w")


@pytest.mark.parametrize("expression", [
    "d41 + 1", "d41 * 2", "d41 - d122", "d41 + ti", "d122 * d122", "d122 * d3810",
    "d3810 + d3810", "hi + d41", "bi * d41", "d41 * d41 * d41", "(d41 - 1) * i",
    "d41 + 0.5", "d41 * 1.25", "d122 + 100000000000", "d41 % d122", "d104 - d41 + d3810",
    "(d122 - 1) * bi"])
def test_decimal_arithmetic_is_typed_and_overflows_as_duckdb(databases, expression) -> None:
    """A sum or difference of decimals is as wide as DuckDB makes it (the larger integer
    part, the larger scale, a digit for the carry), a product the widths added (at most
    38; two of at most 18 digits kept in 18, overflowing past it); both were typed
    DECIMAL(38, s), so ``(d - 1) * i`` answered where DuckDB's overflows (found by a
    review)."""
    from upkeep.errors import EvaluationError

    db, con = databases
    sql = f"SELECT {expression} AS x FROM t"
    want = con.execute("DESCRIBE " + sql).fetchall()[0][1]
    try:
        expected = con.execute(sql).fetchall()
    except duckdb.Error:
        with pytest.raises(EvaluationError, match="overflow"):
            db.create_view("w", sql)
        return
    db.create_view("w", sql)
    got = db.execute("SELECT * FROM w")
    assert (got.description[0][1], got.fetchall()) == (want, expected), sql
    db.execute("DROP VIEW w")
