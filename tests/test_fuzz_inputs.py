"""Property-based fuzzing of everything a user hands upkeep (issue 18): SQL statements, bulk
rows, and change records of every source format.  After each input: the only exception is
an ``upkeep.Error`` subclass; a rejected input leaves every table and view as it was; after
an accepted one every view equals DuckDB's evaluation of its SQL on the current tables.

``make test`` runs a fixed-seed sample; ``UPKEEP_FUZZ_EXAMPLES=2000 .venv/bin/python -m
pytest tests/test_fuzz_inputs.py`` runs a longer, random one (docs/design.md, "Errors").
"""

from __future__ import annotations

import datetime as dt
import io
import os
from collections import Counter
from decimal import Decimal

import duckdb
import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from oracle import insert_rows
from rich.console import Console
from test_pipeline_support import WRITERS

import upkeep
from upkeep.pipeline import PipelineRunner, load_config

EXAMPLES = int(os.environ.get("UPKEEP_FUZZ_EXAMPLES", "0"))
FUZZ = settings(max_examples=EXAMPLES or 40, derandomize=not EXAMPLES, deadline=None,
                suppress_health_check=list(HealthCheck), database=None)

TABLES = {
    "p": "CREATE TABLE p (a INTEGER, b BIGINT, s VARCHAR, d DOUBLE, m DECIMAL(6,2), day DATE)",
    "q": "CREATE TABLE q (a INTEGER, c SMALLINT)",
}
VIEWS = {
    "v_expr": "SELECT a, b * 2 AS b2, upper(s) AS us, m + 1 AS m1 FROM p WHERE d > 0",
    "v_join": "SELECT p.a, q.c, p.m FROM p JOIN q ON p.a = q.a",
    "v_agg": "SELECT a, SUM(m) AS sm, COUNT(*) AS n, MAX(s) AS ms FROM p GROUP BY a",
    "v_div": "SELECT q.a // q.c AS r FROM q",
    "v_cast": "SELECT CAST(s AS INTEGER) AS i FROM p WHERE s < 'a'",
}


def fresh() -> upkeep.Connection:
    db = upkeep.connect()
    for ddl in TABLES.values():
        db.execute(ddl)
    db.insert("p", [(1, 10, "1", 1.5, Decimal("1.25"), dt.date(2024, 1, 1)),
                    (2, 20, "x", -1.0, None, None)])
    db.insert("q", [(1, 3), (2, 5)])
    for name, sql in VIEWS.items():
        db.execute(f"CREATE VIEW {name} AS {sql}")
    return db


def state(db: upkeep.Connection) -> dict[str, Counter]:
    out = {t: Counter(map(repr, db.execute(f"SELECT * FROM {t}").fetchall())) for t in db.tables()}
    out.update({v: Counter(map(repr, db.view(v).rows())) for v in db.views()})
    return out


def check_views(db: upkeep.Connection, label: str) -> None:
    """Every view equals DuckDB on the current base tables (values compared by repr, NaN
    alike, floats to 12 digits)."""
    con = duckdb.connect()
    for table in db.tables():
        columns = ", ".join(f"{n} {t.sql()}" for n, t in db.schema_of(table))
        con.execute(f"CREATE TABLE {table} ({columns})")
        insert_rows(con, table, db.execute(f"SELECT * FROM {table}").fetchall())
    for view in db.views():
        sql = db._catalog.user_views[view][0]  # the SQL as the view was defined
        want = Counter(map(_key, con.execute(sql).fetchall()))
        got = Counter(map(_key, db.view(view).rows()))
        assert got == want, f"{label}: view {view} ({sql})"


def _key(row: tuple) -> tuple:
    return tuple(f"{v:.12g}" if isinstance(v, float) else repr(v) for v in row)


def apply(db: upkeep.Connection, action, label: str) -> None:
    """Run one input; it is accepted (views equal DuckDB) or rejected with an upkeep.Error
    and no trace."""
    before = state(db)
    try:
        action()
    except upkeep.Error:
        assert state(db) == before, f"{label}: a rejected input changed the state"
        return
    check_views(db, label)


# ---------------------------------------------------------------- SQL statements
LITERALS = st.sampled_from([
    "NULL", "0", "1", "-1", "2147483647", "2147483648", "-2147483649", "9223372036854775807",
    "9223372036854775808", "1e400", "-1e400", "0.5", "1.255", "99999.99", "123456.78",
    "'x'", "'1'", "'it''s'", "''", "'2024-02-29'", "'2024-02-30'", "'NaN'", "'inf'",
    "DATE '2024-01-01'", "TRUE", "'\u00e9t\u00e9'", "'" + "y" * 300 + "'", "-0.0", "1/0",
])
COLUMNS = st.sampled_from(["a", "b", "s", "d", "m", "day", "p.a", "nope", "q.c"])


@st.composite
def expressions(draw, depth: int = 2):
    if depth == 0 or draw(st.booleans()):
        return draw(st.one_of(COLUMNS, LITERALS))
    inner = expressions(depth=depth - 1)
    form = draw(st.sampled_from(["op", "cast", "fn", "sub", "case", "neg"]))
    if form == "op":
        op = draw(st.sampled_from(["+", "-", "*", "/", "//", "%", "||", "<", "=", "AND"]))
        return f"({draw(inner)} {op} {draw(inner)})"
    if form == "cast":
        typ = draw(st.sampled_from(["INTEGER", "BIGINT", "SMALLINT", "DOUBLE", "VARCHAR",
                                    "DECIMAL(4,1)", "DATE", "BOOLEAN"]))
        return f"CAST({draw(inner)} AS {typ})"
    if form == "fn":
        fn = draw(st.sampled_from(["upper", "lower", "trim", "length", "abs", "round",
                                   "coalesce", "nonexistent_fn"]))
        return f"{fn}({draw(inner)})"
    if form == "sub":
        return f"substring({draw(inner)}, {draw(LITERALS)}, {draw(LITERALS)})"
    if form == "neg":
        return f"-({draw(inner)})"
    return f"CASE WHEN {draw(inner)} THEN {draw(inner)} ELSE {draw(inner)} END"


@st.composite
def statements(draw):
    kind = draw(st.sampled_from(["insert", "insert_cols", "delete", "update", "view",
                                 "replace", "table", "drop", "select", "garbage"]))
    if kind == "insert":
        values = ", ".join(draw(LITERALS) for _ in range(draw(st.integers(4, 7))))
        return f"INSERT INTO p VALUES ({values})"
    if kind == "insert_cols":
        return f"INSERT INTO p (a, s) VALUES ({draw(LITERALS)}, {draw(LITERALS)})"
    if kind == "delete":
        return f"DELETE FROM p WHERE {draw(expressions())}"
    if kind == "update":
        return f"UPDATE p SET {draw(COLUMNS)} = {draw(expressions())} WHERE {draw(expressions())}"
    if kind in ("view", "replace"):
        how = "CREATE OR REPLACE VIEW v_expr" if kind == "replace" else (
            f"CREATE VIEW f{draw(st.integers(0, 3))}")
        where = f" WHERE {draw(expressions())}" if draw(st.booleans()) else ""
        return f"{how} AS SELECT {draw(expressions())} AS e FROM p{where}"
    if kind == "table":
        cols = ", ".join(f"{draw(st.sampled_from(['x', 'y', 'x']))} "
                         f"{draw(st.sampled_from(['INTEGER', 'VARCHAR', 'BLOB', 'FOO']))}"
                         for _ in range(draw(st.integers(0, 3))))
        return f"CREATE TABLE t{draw(st.integers(0, 2))} ({cols})"
    if kind == "drop":
        return f"DROP {draw(st.sampled_from(['VIEW', 'TABLE']))} " \
               f"{draw(st.sampled_from(['f0', 'f1', 'v_expr', 'p', 'zz']))}"
    if kind == "select":
        return f"SELECT {draw(expressions())} FROM p"
    tokens = draw(st.lists(st.sampled_from(["SELECT", "FROM", "(", ")", "p", ",", "*", "WHERE",
                                            "1", "'", "JOIN", "ON", ";", "--", "a"]),
                           max_size=8))
    return " ".join(tokens)


@FUZZ
@given(st.lists(statements(), min_size=1, max_size=6))
def test_fuzzed_statements(sqls) -> None:
    db = fresh()
    for i, sql in enumerate(sqls):
        apply(db, lambda sql=sql: db.execute(sql).fetchall() if sql.startswith("SELECT")
              else db.execute(sql), f"statement {i}: {sql}")


# ---------------------------------------------------------------- bulk rows
VALUES = st.one_of(
    st.none(), st.integers(-2**70, 2**70), st.floats(), st.text(max_size=5),
    st.sampled_from(["\udc80", "1.5", "2024-01-01", "NaN", "", "x" * 100]),
    st.decimals(allow_nan=True, places=None), st.dates(), st.datetimes(), st.booleans(),
    st.binary(max_size=3), st.just(np.int64(3)), st.just(np.float32(1.5)),
    st.just(np.datetime64("2020-01-01")), st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2))


@FUZZ
@given(st.lists(st.one_of(st.lists(VALUES, min_size=5, max_size=7).map(tuple), VALUES),
                max_size=5), st.sampled_from(["p", "q"]), st.booleans())
def test_fuzzed_bulk_rows(rows, table, delete) -> None:
    db = fresh()
    apply(db, lambda: (db.delete if delete else db.insert)(table, rows), f"{table}: {rows!r}")
    apply(db, lambda: db.insert(table, rows[0] if rows else None), f"{table}: a bare value")


# ---------------------------------------------------------------- change records
RECORD_VALUES = st.one_of(st.none(), st.integers(-2**40, 2**40), st.sampled_from(
    [1.5, "x", "1.25", "NaN", "\udc80", "2024-01-01", [1], {"k": 1}, 10**30, True]))


@st.composite
def change_records(draw):
    if draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from(['{"table": "t"', "[]", "null", '{"op": 1}', "",
                                     '{"table": "t", "op": "insert", "row": ' + "[" * 5000]))
    row = draw(st.one_of(st.lists(RECORD_VALUES, min_size=2, max_size=4),
                         st.fixed_dictionaries({"k": RECORD_VALUES, "s": RECORD_VALUES})))
    record = {"table": draw(st.sampled_from(["t", "t", "t", "nope"])),
              "op": draw(st.sampled_from(["insert", "insert", "delete", "update", "upsert"])),
              "row": row}
    if record["op"] == "update":
        record = {**record, "before": row, "after": draw(st.lists(RECORD_VALUES, min_size=3,
                                                                  max_size=3))}
        del record["row"]
    return record


@FUZZ
@given(st.lists(change_records(), min_size=1, max_size=12),
       st.sampled_from(sorted(WRITERS)))
def test_fuzzed_change_records_of_every_format(tmp_path_factory, records, fmt) -> None:
    directory = tmp_path_factory.mktemp("fuzz")
    if fmt != "jsonl":  # raw lines exist only in JSONL
        records = [r for r in records if isinstance(r, dict)]
    assume(records)
    WRITERS[fmt](directory / "changes", records, files=2)
    (directory / "tables.sql").write_text(
        "CREATE TABLE t (k INTEGER, s VARCHAR, d DOUBLE);\n")
    (directory / "views.sql").write_text(
        "CREATE MATERIALIZED VIEW big AS SELECT k * 1000 AS kk, s FROM t;\n"
        "CREATE MATERIALIZED VIEW per_s AS SELECT s, SUM(d) AS sd, COUNT(*) AS n FROM t "
        "GROUP BY s;\n")
    (directory / "pipeline.toml").write_text(
        'state_dir = ":memory:"\ntables = ["tables.sql"]\nviews = ["views.sql"]\n'
        'on_error = "dead-letter"\n[source]\npath = "changes"\n[batch]\nrows_per_batch = 3\n'
        + "".join(f'[[sinks]]\nview = "{view}"\ntype = "{kind}"\npath = "out/{view}.{kind}"\n'
                  for view in ("big", "per_s") for kind in ("duckdb", "sqlite", "parquet",
                                                             "jsonl")))  # every sink writes
    db = upkeep.connect()
    runner = PipelineRunner(load_config(directory / "pipeline.toml"), db=db, progress="none",
                            console=Console(file=io.StringIO()))
    try:
        runner.run()
    except upkeep.Error as exc:  # only a problem of the whole run may stop it
        raise AssertionError(f"a bad record stopped a dead-letter run: {exc}") from exc
    dead = directory / "pipeline.dead-letter.jsonl"
    rejected = len(dead.read_text().splitlines()) if dead.exists() else 0
    assert runner.stats.rejected == rejected
    blank = sum(1 for r in records if isinstance(r, str) and not r.strip())  # not records
    assert runner.stats.applied + rejected == len(records) - blank
    check_views(db, f"{fmt} records {records!r}")
