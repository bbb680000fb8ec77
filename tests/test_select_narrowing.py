"""Ad-hoc SELECTs over one table whose WHERE fixes columns are handed to DuckDB with only
the rows the table's index finds for those values: the answers must be DuckDB's over the
whole table, committed or staged, and the rows handed over must be only those."""

from __future__ import annotations

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import upkeep
import upkeep.local.statements as statements

CREATE = "CREATE TABLE t (k INTEGER, s VARCHAR, b BOOLEAN, x DOUBLE)"
QUERIES = [
    "SELECT * FROM t WHERE k = {k}",
    "SELECT s, count(*) FROM t WHERE k = {k} GROUP BY s",
    "SELECT count(*), sum(x) FROM t WHERE k = {k} AND s = '{s}'",
    "SELECT z.s, z.x FROM t AS z WHERE z.k = {k} AND z.b = TRUE",
    "SELECT DISTINCT s FROM t WHERE {k} = k",
    "SELECT k, count(*) OVER () FROM t WHERE s = '{s}'",
    "SELECT * FROM t WHERE k = {k} OR s = '{s}'",
    "SELECT * FROM t WHERE k = '{k}'",
    "SELECT * FROM t WHERE k = {k} AND x > 0.5",
    "SELECT * FROM t WHERE k = {k} ORDER BY s, x, b LIMIT 2",
    "SELECT k FROM t WHERE k = {k} AND k IN (SELECT k FROM t WHERE s = '{s}')",
    "SELECT count(*) FROM t WHERE k = {k} HAVING count(*) > 1",
    "SELECT count(*) FROM t WHERE k = -2",
    "SELECT * FROM t WHERE s = '{s}' AND k = {k} AND b = FALSE",
]

rows = st.tuples(st.one_of(st.none(), st.integers(-3, 3)),
                 st.one_of(st.none(), st.sampled_from(["a", "b", "c"])),
                 st.one_of(st.none(), st.booleans()),
                 st.one_of(st.none(), st.floats(-2, 2, allow_nan=False)))


def bag(result: list[tuple]) -> list[str]:
    """Rows as text, -0.0 as 0.0 (upkeep stores it so: docs/sql.md)."""
    return sorted(repr(tuple(v + 0.0 if type(v) is float else v for v in r)) for r in result)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(committed=st.lists(rows, max_size=25), staged=st.lists(rows, max_size=5),
       query=st.sampled_from(QUERIES), k=st.integers(-3, 3),
       s=st.sampled_from(["a", "b", "c"]))
def test_a_select_reads_what_duckdb_reads_over_the_whole_table(committed, staged, query, k, s):
    sql = query.format(k=k, s=s)
    db = upkeep.connect()
    db.execute(CREATE)
    db.insert("t", committed)
    con = duckdb.connect()
    con.execute(CREATE)
    if committed + staged:
        con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", committed + staged)
    with db.transaction():
        db.insert("t", staged)  # a SELECT inside a transaction reads its staged rows
        got = db.execute(sql).fetchall()
    want = con.execute(sql).fetchall()
    if "LIMIT" in sql:
        assert [bag([r]) for r in got] == [bag([r]) for r in want], sql
    assert bag(got) == bag(want), sql


@pytest.mark.parametrize(("sql", "handed"), [
    ("SELECT count(*) FROM t WHERE k = 7", 3),
    ("SELECT s FROM t AS z WHERE z.k = 7 AND s = 'x7'", 3),
    ("SELECT count(*) FROM t WHERE k = 7 OR k = 8", 3000),
    ("SELECT count(*) FROM t WHERE k = 7 AND k IN (SELECT k FROM t)", 3000),
])
def test_only_the_rows_the_index_finds_are_handed_to_duckdb(monkeypatch, sql, handed):
    """A key lookup hands DuckDB the rows holding the key (3 of 3,000), not the table;
    a WHERE fixing no column, and a query with a subquery, hand the whole table."""
    db = upkeep.connect()
    db.execute(CREATE)
    db.insert("t", [(i % 1000, f"x{i % 1000}", True, 1.0) for i in range(3000)])
    seen: list[int] = []
    real = statements.query_duckdb

    def counting(sql, relations, contents_of, arrow_of):
        for r in relations:
            kept = arrow_of(r)  # (columns, Arrow table) kept from an earlier query
            seen.append(len(contents_of(r)[1]) if kept is None else kept[1].num_rows)
        return real(sql, relations, contents_of, arrow_of)

    monkeypatch.setattr(statements, "query_duckdb", counting)
    assert db.execute(sql).fetchall()[0][0] is not None
    assert seen == [handed]


@pytest.mark.parametrize("sql", [
    "SELECT * FROM t AS q(v, k) WHERE k = 1",  # the alias renames v to k
    "SELECT * FROM t AS q(v, k) WHERE q.k = 1",
    "SELECT count(*) FROM t TABLESAMPLE reservoir(1 ROWS) REPEATABLE (1) WHERE k = 1",
    "SELECT count(*) FROM t WHERE k = 1 USING SAMPLE reservoir(1 ROWS) REPEATABLE (2)",
    "SELECT v FROM t WHERE k = 0 LIMIT 3",
])
def test_a_renaming_alias_or_a_sample_reads_the_whole_table(sql):
    """``FROM t AS q(v, k)`` names t's column v ``k``, and a sample is drawn from the whole
    table before the WHERE: neither may be narrowed by t's own column k."""
    rows = [(0, i) for i in range(200)] + [(2, 1), (1, 3), (1, 1000)]
    db, con = upkeep.connect(), duckdb.connect()
    for c in (db, con):
        c.execute("CREATE TABLE t (k INTEGER, v INTEGER)")
    db.insert("t", rows)
    con.executemany("INSERT INTO t VALUES (?, ?)", rows)
    assert db.execute(sql).fetchall() == con.execute(sql).fetchall()
