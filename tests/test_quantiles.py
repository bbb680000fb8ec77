"""MEDIAN, QUANTILE_CONT, QUANTILE_DISC and QUANTILE, and ARG_MAX / ARG_MIN, maintained per
group (a sorted list of each group's values, ``aggregates.quantile_result`` and
``chosen_value``): each view equals DuckDB, values and types, after every batch of random
changes (NULLs, NaN and infinities, duplicates, deletes); the forms left to DuckDB are
recomputed, still equal to it."""

from __future__ import annotations

import datetime
import math
import random
from collections import Counter
from decimal import Decimal

import duckdb
import pytest
from oracle import (
    assert_bag_equal,
    connected,
    duckdb_query,
    stream_follows_duckdb,
    view_equals_duckdb,
)

import upkeep

DDL = ["CREATE TABLE t (g INTEGER, i INTEGER, b BIGINT, d DECIMAL(10, 2), f DOUBLE, "
       "dt DATE, s VARCHAR)",
       "CREATE TABLE u (g INTEGER, name VARCHAR)"]

MAINTAINED = [
    "SELECT g, median(i) AS mi, median(d) AS md, median(f) AS mf, median(dt) AS mdt, "
    "median(s) AS ms FROM t GROUP BY g",
    "SELECT g, quantile_cont(i, 0.3) AS a, quantile_disc(d, 0.75) AS b, quantile(s, 0.2) AS c, "
    "quantile_cont(dt, 0.25) AS e, quantile_cont(b, 0.9) AS h, quantile_disc(f, 0.4) AS k "
    "FROM t GROUP BY g",
    "SELECT median(f) AS m, quantile_disc(b, 0.9) AS q, quantile_cont(d, 0.1) AS c, "
    "count(*) AS n FROM t",
    "SELECT g, quantile_cont(i, 0.5) FILTER (WHERE i > 0) AS pos, sum(i) AS total FROM t "
    "GROUP BY g HAVING median(i) > 1",
    "SELECT u.name, median(t.d) AS m, quantile_disc(t.dt, 0.5) AS day FROM t JOIN u "
    "ON t.g = u.g GROUP BY u.name",
    "SELECT g, i FROM t WHERE i > (SELECT median(i) FROM t)",
    # the standard spelling: QUANTILE_CONT / QUANTILE_DISC
    "SELECT g, percentile_cont(0.5) WITHIN GROUP (ORDER BY i) AS m, "
    "percentile_disc(0.25) WITHIN GROUP (ORDER BY dt) AS e FROM t GROUP BY g",
]
RECOMPUTED = [
    "SELECT g, median(DISTINCT i) AS m FROM t GROUP BY g",
    "SELECT g, percentile_cont(0.5) WITHIN GROUP (ORDER BY i DESC) AS m FROM t GROUP BY g",
    "SELECT g, quantile_cont(d::DECIMAL(30, 2), 0.5) AS m FROM t GROUP BY g",
    "SELECT g, quantile_cont(i, -0.25) AS m FROM t GROUP BY g",
]


def _row(rnd: random.Random) -> tuple:
    return (rnd.choice([None, 0, 1, 2]),
            rnd.choice([None, -7, 0, 1, 2, 5, 9, 40]),
            rnd.choice([None, 3, 9007199254740993, -2**62, 12]),
            rnd.choice([None, Decimal("1.25"), Decimal("-2.50"), Decimal("3.33"),
                        Decimal("3.34"), Decimal("0.01")]),
            rnd.choice([None, 1.5, -2.25, 1e308, 1e308, math.inf, -math.inf, math.nan, 0.1]),
            rnd.choice([None, datetime.date(2020, 1, 1), datetime.date(2020, 1, 2),
                        datetime.date(1969, 12, 31), datetime.date(2024, 2, 29)]),
            rnd.choice([None, "a", "b", "zz", ""]))


@pytest.mark.parametrize("sql", MAINTAINED + RECOMPUTED)
def test_quantiles_equal_duckdb_after_every_batch(sql) -> None:
    rnd = random.Random(sql)
    new_rows = {"t": lambda: _row(rnd),
                "u": lambda: (rnd.choice([None, 0, 1, 2]), rnd.choice(["p", "q", None]))}
    stream_follows_duckdb(DDL, sql, new_rows, rnd, recomputed=sql in RECOMPUTED,
                          drawn=["t", "t", "t", "u"], most=5, duplicates=0.2)


@pytest.mark.parametrize("sql", MAINTAINED[:3])
def test_quantiles_are_typed_as_duckdb_types_them(sql) -> None:
    db = connected(DDL)
    db.create_view("v", sql)
    con = duckdb.connect()
    for ddl in DDL:
        con.execute(ddl)
    assert db.view("v").schema == [(n, t) for n, t, *_ in con.execute(f"DESCRIBE {sql}")
                                   .fetchall()]


def test_interpolation_rounds_as_duckdb_does() -> None:
    """Far-apart values where the order of the double arithmetic shows: BIGINTs beyond
    2**53 (cast before subtracting), a DECIMAL's half unit (truncated toward zero, also
    below zero), a timestamp's half microsecond (rounded away from zero), and
    infinities (NaN between -inf and inf)."""
    cases = [
        ("b", [1, 9007199254740993], 0.5),
        ("d", [Decimal("-2.50"), Decimal("-3.33")], 0.5),
        ("d", [Decimal("1.25"), Decimal("2.50")], 0.3),
        ("dt", [datetime.date(2020, 1, 1), datetime.date(2020, 1, 2)], 1 / 3),
        ("dt", [datetime.date(2020, 1, 1), datetime.date(2020, 1, 4)], 0.123456789),
        ("f", [-math.inf, math.inf], 0.5),
        ("f", [math.inf, math.inf], 0.5),
        ("i", [-7, 40], 0.999),
    ]
    columns = ["g", "i", "b", "d", "f", "dt", "s"]
    for column, values, q in cases:
        db = connected(DDL)
        at = columns.index(column)
        rows = [tuple(v if k == at else None for k in range(7)) for v in values]
        db.insert("t", rows)
        sql = f"SELECT quantile_cont({column}, {q!r}) AS v FROM t"
        view = db.create_view("v", sql)
        assert_bag_equal(duckdb_query(DDL, {"t": Counter(rows), "u": Counter()}, sql),
                         view.rows(), sql)


def test_a_list_of_fractions_is_refused_as_lists_are() -> None:
    db = connected(DDL)
    with pytest.raises(upkeep.UnsupportedError, match="list"):
        db.create_view("v", "SELECT quantile_cont(i, [0.1, 0.5]) AS q FROM t")


ARG_DDL = ["CREATE TABLE e (g INTEGER, x INTEGER, ts BIGINT, f DOUBLE, s VARCHAR)"]
ARG_QUERIES = [
    "SELECT g, arg_max(x, ts) AS latest, arg_min(s, ts) AS first_s, max_by(f, ts) AS f_last "
    "FROM e GROUP BY g",
    # a DOUBLE to order by (NaN the greatest), FILTER, a global one beside a count
    "SELECT arg_min(x, f) AS lowest, arg_max(s, f) FILTER (WHERE x > 0) AS s_high, "
    "count(*) AS n FROM e",
]


@pytest.mark.parametrize("sql", ARG_QUERIES)
def test_arg_max_and_min_equal_duckdb_after_every_batch(sql) -> None:
    """The values to order by are drawn from a wide range, so rows tie in them only as
    copies of one row (among tied rows DuckDB takes the first it reads)."""
    rnd = random.Random(sql)

    def new_row() -> tuple:
        return (rnd.choice([None, 0, 1, 2]), rnd.choice([None, -3, 0, 4, 7]),
                rnd.choice([None, rnd.randrange(10**9)]),
                rnd.choice([None, rnd.uniform(-1e6, 1e6)]),
                rnd.choice([None, "a", "b", "c"]))

    db = stream_follows_duckdb(ARG_DDL, sql, {"e": new_row}, rnd, recomputed=False,
                               drawn=["e"], most=5, duplicates=0.2)
    con = duckdb.connect()
    con.execute(ARG_DDL[0])
    assert db.view("v").schema == [(n, t) for n, t, *_ in con.execute(f"DESCRIBE {sql}")
                                   .fetchall()]


def test_arg_max_orders_nan_above_infinity() -> None:
    view_equals_duckdb(ARG_DDL, {"e": Counter([(1, 1, None, math.nan, "a"),
                                               (1, 2, None, 5.0, "b"),
                                               (2, 3, None, math.inf, "c")])},
                       "SELECT arg_max(x, f) AS hi, arg_min(s, f) AS lo, "
                       "arg_max(f, x) AS last_f FROM e")


def test_arg_max_of_several_rows_is_a_list_and_refused() -> None:
    db = upkeep.connect()
    db.execute(ARG_DDL[0])
    with pytest.raises(upkeep.UnsupportedError, match="list"):
        db.create_view("v", "SELECT arg_max(x, ts, 2) AS top FROM e")
