"""Inequality / theta joins (IEDyn: strategy "dyn" with theta predicates on join-tree edges)
and cyclic joins (leapfrog triejoin: strategy "lftj"), beyond the generic random streams of
``test_oracle_streams``:

* the automatic strategy picks the intended algorithm (EXPLAIN names it),
* deletion-heavy streams (load, delete most, reload) stay equal to DuckDB after every batch,
* the specialised strategy and the "general" strategy hold identical bags on one stream.
"""

from __future__ import annotations

import dataclasses
import random

import duckdb
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st
from oracle import (
    HYPOTHESIS_SETTINGS,
    Oracle,
    assert_bag_equal,
    random_batch,
    random_insert,
    seeded_rows,
)
from queries import BY_NAME, CYCLIC, THETA, Query, ddl

import upkeep

# The strategy the automatic planner is expected to choose (``strategy <name>`` appears in
# the view's EXPLAIN text).
EXPECTED_STRATEGY: dict[str, str] = {
    # GCQ1-GCQ8 of Table 2 (dynamic-yannakakis-iedyn.txt, section 5.2) and variants
    "gcq1": "dyn",
    "gcq2": "dyn",
    "gcq3": "dyn",
    "gcq4": "dyn",
    "gcq5": "dyn",
    "gcq6": "dyn",
    "gcq7": "dyn",
    "gcq8": "dyn",
    "gcq7_distinct": "dyn",
    "gcq4_group_agg": "dyn",
    # Figure 1: credit-card fraud
    "theta_fraud": "dyn",
    # band joins
    "band_between": "dyn",
    "band_le_ge": "dyn",
    "band_two_ineq": "dyn",
    "band_eq_ineq": "dyn",
    "band_neq": "dyn",
    "band_expr": "dyn",
    "band_decimal": "dyn",
    "band_date": "dyn",
    # cyclic joins
    "self_triangle": "lftj",
    "cyc_triangle": "lftj",
    "cyc_triangle_count": "lftj",
    "cyc_4cycle": "lftj",
    "cyc_4cycle_count": "lftj",
    "cyc_4clique_count": "lftj",
    "cyc_triangle_3tables": "lftj",
    "cyc_triangle_distinct": "lftj",
    "cyc_triangle_bag_proj": "lftj",
    "cyc_triangle_aggs": "lftj",
    "cyc_tpch_q5": "lftj",
}

EXPLAIN_PARAMS = [pytest.param(BY_NAME[n], id=n) for n in EXPECTED_STRATEGY]
FAST_PARAMS = [
    pytest.param(BY_NAME[n], s, id=f"{n}-{s}") for n, s in EXPECTED_STRATEGY.items()
]


def test_expected_strategy_covers_theta_and_cyclic() -> None:
    """Every THETA and CYCLIC query has an entry (and nothing else does, but self_triangle)."""
    names = {q.name for q in (*THETA, *CYCLIC)} | {"self_triangle"}
    assert set(EXPECTED_STRATEGY) == names


# ---------------------------------------------------------------------------
# (a) the automatic strategy, as EXPLAIN tells it
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("q", EXPLAIN_PARAMS)
def test_auto_strategy_explained(q: Query) -> None:
    """Created with the automatic strategy, the view's EXPLAIN names the expected strategy
    (and the view equals DuckDB, before and after a batch)."""
    expected = EXPECTED_STRATEGY[q.name]
    db = upkeep.connect()
    orc = Oracle(db, q.all_tables())
    try:
        for t in q.all_tables():
            orc.insert(t, seeded_rows(t, 12, 3))
        orc.create_query(q)
        orc.check("create_view over seeded data")
        text = db.view(q.name).explain()
        assert text == db.explain(q.name)
        assert text.startswith(f"view {q.name}: strategy "), text
        assert f"strategy {expected}" in text, (
            f"{q.name}: expected the automatic strategy {expected!r}; EXPLAIN says:\n{text}"
        )
        t = q.all_tables()[0]
        orc.delete(t, orc.model.rows(t)[::2])
        orc.insert(t, seeded_rows(t, 4, 4))
        orc.check("delete half of one table, insert a few rows")
    finally:
        orc.close()
        db.close()


# ---------------------------------------------------------------------------
# (b) deletion-heavy streams
# ---------------------------------------------------------------------------
_HEAVY = {
    # query: (table, rows loaded, SQL predicates for DELETE ... WHERE)
    "theta_fraud": ("tx", 60, ["amnt < 10", "ts BETWEEN 4 AND 9", "ts IS NULL OR acc = 1"]),
    "cyc_triangle_count": ("edges", 45, ["src = 2", "dst < src", "w IS NULL OR w > 2"]),
}
HEAVY_PARAMS = [
    pytest.param(BY_NAME[n], s, id=f"{n}-{s or 'auto'}")
    for n in _HEAVY
    for s in (None, EXPECTED_STRATEGY[n])
]


@pytest.mark.parametrize(("q", "strategy"), HEAVY_PARAMS)
def test_deletion_heavy_stream(q: Query, strategy: str | None) -> None:
    """Load many rows, delete most of them (API, SQL DELETE, in transactions), reload;
    the view equals DuckDB after every batch."""
    t, n, preds = _HEAVY[q.name]
    rnd = random.Random(20240611)
    db = upkeep.connect()
    orc = Oracle(db, [t])
    try:
        orc.create_query(q, strategy)
        orc.check("create on empty table")
        loaded = seeded_rows(t, n, 11)
        orc.insert(t, loaded[: n // 2])
        orc.check("load first half (API)")
        orc.insert(t, loaded[n // 2 :], via="sql")
        orc.check("load second half (SQL)")
        gone: list[tuple] = []
        # delete about 35% of what is there, five times over, by different routes
        for step in range(5):
            present = orc.model.rows(t)
            victims = rnd.sample(present, max(1, len(present) * 35 // 100))
            gone += victims
            if step == 1:
                with orc.transaction():
                    orc.delete(t, victims[: len(victims) // 2])
                    orc.delete(t, victims[len(victims) // 2 :])
            elif step == 3:
                with orc.transaction():
                    orc.delete(t, victims)
                    orc.insert(t, seeded_rows(t, 2, 100 + step))
            else:
                orc.delete(t, victims)
            orc.check(f"delete step {step}: {len(victims)} rows")
        for pred in preds:
            orc.dml(t, f"DELETE FROM {t} WHERE {pred}")
            orc.check(f"DELETE FROM {t} WHERE {pred}")
        # delete one row at a time until a handful remain
        while len(orc.model.rows(t)) > 3:
            orc.delete(t, [rnd.choice(orc.model.rows(t))])
            orc.check("single-row delete")
        # reload: the deleted rows come back, some twice
        orc.insert(t, gone)
        orc.check(f"re-insert {len(gone)} deleted rows")
        with orc.transaction():
            orc.insert(t, rnd.sample(gone, len(gone) // 3))
            present = orc.model.rows(t)
            orc.delete(t, rnd.sample(present, len(present) // 4))
        orc.check("re-insert duplicates and delete a quarter in one transaction")
        orc.delete_all(t)
        orc.check("DELETE everything")
        orc.insert(t, loaded)
        orc.check("reload everything")
    finally:
        orc.close()
        db.close()


# ---------------------------------------------------------------------------
# (c) specialised strategy == general strategy on one stream
# ---------------------------------------------------------------------------
def _create_or_fail(q: Query, strategy: str) -> None:
    """Fail at once (before any stream is drawn and shrunk) if ``strategy`` rejects ``q``."""
    db = upkeep.connect()
    try:
        for t in q.all_tables():
            db.execute(ddl(t))
        try:
            db.create_view(q.name, q.sql, strategy=strategy)
        except upkeep.UnsupportedError as e:
            pytest.fail(f"create_view({q.name!r}, strategy={strategy!r}) raised: {e}\n    {q.sql}")
    finally:
        db.close()


@pytest.mark.parametrize(("q", "strategy"), FAST_PARAMS)
def test_strategy_matches_general(q: Query, strategy: str) -> None:
    """The same query under ``strategy`` and under "general", in one database on one random
    stream: identical bags after every batch (and both equal to DuckDB)."""
    _create_or_fail(q, strategy)
    _same_stream(q, strategy)


@settings(max_examples=3, **HYPOTHESIS_SETTINGS)
@given(data=st.data())
def _same_stream(q: Query, strategy: str, data) -> None:
    fast = dataclasses.replace(q, name=f"{q.name}_{strategy}")
    slow = dataclasses.replace(q, name=f"{q.name}_general")
    tables = list(q.all_tables())
    db = upkeep.connect()
    orc = Oracle(db, tables)

    def same(label: str) -> None:
        orc.check(label)
        assert_bag_equal(
            db.view(slow.name).rows(),
            db.view(fast.name).rows(),
            f"{fast.name} [strategy={strategy}] vs {slow.name} [strategy=general]",
            f"    after: {label}\n{orc.repro()}",
        )

    try:
        late = data.draw(st.booleans(), label="create views after bulk load")
        if not late:
            orc.create_view(fast, strategy)
            orc.create_view(slow, "general")
        for t in tables:
            random_insert(data, orc, t, 4, 12)
        if late:
            orc.create_view(fast, strategy)
            orc.create_view(slow, "general")
        same("bulk load")
        for b in range(data.draw(st.integers(1, 6), label="batches")):
            desc = random_batch(data, orc, tables)
            same(f"batch {b}: {desc}")
    except Exception:
        note(orc.repro())
        raise
    finally:
        orc.close()
        db.close()


def test_band_join_enumerates_only_matching_candidates(monkeypatch) -> None:
    """``t.ts BETWEEN s.ts AND s.ts + 5`` is one interval of the sorted run: enumeration
    touches exactly the matching tuples (constant delay), not every tuple below the upper
    bound; the rows equal DuckDB's."""
    from upkeep.theta import SortedRun

    examined = []
    scan = SortedRun.scan

    def counted(self, *args):
        for t in scan(self, *args):
            examined.append(t)
            yield t

    monkeypatch.setattr(SortedRun, "scan", counted)
    sql = ("SELECT s.k, s.ts, t.ts AS tts FROM s, t "
           "WHERE s.k = t.k AND t.ts BETWEEN s.ts AND s.ts + 5")
    s_rows = [(k, ts) for k in (1, 2) for ts in range(0, 1000, 10)]
    t_rows = [(k, ts) for k in (1, 2) for ts in range(0, 1000, 7)]
    db = upkeep.connect()
    con = duckdb.connect()
    for target in (db, con):
        target.execute("CREATE TABLE s(k INTEGER, ts INTEGER)")
        target.execute("CREATE TABLE t(k INTEGER, ts INTEGER)")
    db.create_view("band", sql)
    db.insert("s", s_rows)
    db.insert("t", t_rows)
    con.executemany("INSERT INTO s VALUES (?, ?)", s_rows)
    con.executemany("INSERT INTO t VALUES (?, ?)", t_rows)
    examined.clear()
    rows = db.view("band").rows()
    assert sorted(rows) == sorted(con.execute(sql).fetchall())
    assert 0 < len(examined) == len(rows)
