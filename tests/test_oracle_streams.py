"""Random change streams checked against the DuckDB oracle after every batch.

Each query of ``queries.QUERIES`` runs under the automatic strategy and under
every forced strategy that applies to it.  Whether a forced strategy applies is
decided at collection time by asking the engine (``create_view`` raising
``upkeep.UnsupportedError`` means "not applicable"); such combinations become
``test_forced_strategy_not_applicable`` cases instead of stream tests.
"""

from __future__ import annotations

import duckdb
import oracle
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st
from oracle import HYPOTHESIS_SETTINGS, Oracle, random_batch, random_insert, seeded_rows
from queries import CORE, CYCLIC, EXTRAS, QUERIES, SCHEMA, THETA, Query, ddl

import upkeep
from upkeep import row_store

FORCED = ("dyn", "general", "lftj")


# ---------------------------------------------------------------------------
# strategy applicability (decided by the engine at collection time)
# ---------------------------------------------------------------------------
def _probe(q: Query, strategy: str | None) -> tuple[bool, str]:
    """(applicable, note): create ``q`` with ``strategy`` on an empty database."""
    db = upkeep.connect()
    try:
        for t in q.all_tables():
            db.execute(ddl(t))
        for d in q.all_views()[:-1]:
            db.create_view(d.name, d.sql)
        try:
            db.create_view(q.name, q.sql, strategy=strategy)
        except upkeep.UnsupportedError as e:
            if strategy is None:
                return True, f"auto strategy raised UnsupportedError: {e}"
            return False, str(e)
        try:
            first = db.explain(q.name).strip().splitlines()[0][:100]
        except Exception as e:  # noqa: BLE001 - only a note for the summary
            first = f"explain failed: {e!r}"
        return True, first
    except Exception as e:  # noqa: BLE001 - the stream test will surface it
        return True, f"probe error: {type(e).__name__}: {e}"
    finally:
        db.close()


def _applicability() -> dict[tuple[str, str | None], tuple[bool, str]]:
    out = {}
    for q in QUERIES:
        for s in (None, *FORCED):
            out[(q.name, s)] = _probe(q, s)
    return out


APPLICABLE = _applicability()
oracle.APPLICABILITY.update(APPLICABLE)

AUTO_PARAMS = [pytest.param(q, id=q.name) for q in QUERIES]
CORE_PARAMS = [pytest.param(q, id=q.name) for q in CORE]
EXTRA_PARAMS = [pytest.param(q, id=q.name) for q in EXTRAS]
THETA_CYCLIC_PARAMS = [pytest.param(q, id=q.name) for q in (*THETA, *CYCLIC)]
FORCED_PARAMS = [
    pytest.param(q, s, id=f"{q.name}-{s}")
    for q in QUERIES
    for s in FORCED
    if APPLICABLE[(q.name, s)][0]
]
NA_PARAMS = [
    pytest.param(q, s, id=f"{q.name}-{s}")
    for q in QUERIES
    for s in FORCED
    if not APPLICABLE[(q.name, s)][0]
]
ALL_PARAMS = [pytest.param(q, None, id=f"{q.name}-auto") for q in QUERIES] + FORCED_PARAMS


def _fail_on_probe_error(q: Query, strategy: str | None) -> None:
    """Fail at once (no stream) if creating the view already failed during the probe."""
    ok, msg = APPLICABLE[(q.name, strategy)]
    if (strategy is None and msg.startswith("auto strategy raised")) or msg.startswith(
        "probe error"
    ):
        pytest.fail(f"create_view({q.name!r}, strategy={strategy!r}) failed: {msg}\n    {q.sql}")


def run_stream(data, q: Query, strategy: str | None, max_batches: int,
               late: bool | None = None) -> None:
    """Create ``q``, apply random batches, check against the oracle after each; ``late``
    creates the view after the bulk load (drawn when None)."""
    _fail_on_probe_error(q, strategy)
    db = upkeep.connect()
    orc = Oracle(db, q.all_tables())
    try:
        if late is None:
            late = data.draw(st.integers(0, 3), label="create view after bulk load") == 0
        via = "api"
        if strategy is None:
            via = data.draw(st.sampled_from(["api", "api", "sql", "plain"]), label="create via")
        if not late:
            orc.create_query(q, strategy, via=via)
            orc.check("create_view on empty tables")
        tables = list(q.all_tables())
        # first batch: bulk load, sometimes atomically
        if data.draw(st.booleans(), label="bulk load in transaction"):
            with orc.transaction():
                for t in tables:
                    random_insert(data, orc, t, 2, 8)
        else:
            for t in tables:
                random_insert(data, orc, t, 2, 8)
        if late:
            orc.create_query(q, strategy, via=via)
        orc.check("bulk load")
        for b in range(data.draw(st.integers(1, max_batches), label="batches")):
            desc = random_batch(data, orc, tables)
            orc.check(f"batch {b}: {desc}")
    except Exception:
        note(orc.repro())
        raise
    finally:
        orc.close()
        db.close()


@pytest.mark.parametrize("q", CORE_PARAMS)
@settings(max_examples=8, **HYPOTHESIS_SETTINGS)
@given(data=st.data())
def test_stream_auto(q: Query, data) -> None:
    """Automatic strategy: every view equals DuckDB after every batch."""
    run_stream(data, q, None, max_batches=8)


@pytest.mark.parametrize("q", CORE_PARAMS)
@settings(max_examples=3, **HYPOTHESIS_SETTINGS)
@given(data=st.data())
def test_stream_over_shared_values(q: Query, data) -> None:
    """Views built by a bulk read that shares repeated values (``RowStore._bulk_decoder``,
    which tables reach at 1,000 rows; lowered to 1 here so the oracle's small tables take
    it) equal DuckDB after every batch."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(row_store, "_SHARE_MIN_ROWS", 1)
        run_stream(data, q, None, max_batches=4, late=True)


@pytest.mark.parametrize("q", EXTRA_PARAMS)
@settings(max_examples=5, **HYPOTHESIS_SETTINGS)
@given(data=st.data())
def test_stream_auto_extra(q: Query, data) -> None:
    """Automatic strategy on the constructs beyond the core catalogue."""
    run_stream(data, q, None, max_batches=6)


@pytest.mark.parametrize("q", THETA_CYCLIC_PARAMS)
@settings(max_examples=8, **HYPOTHESIS_SETTINGS)
@given(data=st.data())
def test_stream_auto_theta_cyclic(q: Query, data) -> None:
    """Automatic strategy on inequality (IEDyn) and cyclic (leapfrog triejoin) joins."""
    run_stream(data, q, None, max_batches=8)


@pytest.mark.parametrize(("q", "strategy"), FORCED_PARAMS)
@settings(max_examples=3, **HYPOTHESIS_SETTINGS)
@given(data=st.data())
def test_stream_forced(q: Query, strategy: str, data) -> None:
    """Forced strategy (where applicable): every view equals DuckDB after every batch."""
    run_stream(data, q, strategy, max_batches=6)


@pytest.mark.parametrize(("q", "strategy"), NA_PARAMS)
def test_forced_strategy_not_applicable(q: Query, strategy: str) -> None:
    """A forced strategy that does not apply fails cleanly with UnsupportedError."""
    db = upkeep.connect()
    orc = Oracle(db, q.all_tables())
    try:
        for d in q.all_views()[:-1]:
            orc.create_view(d)
        orc.insert(q.all_tables()[0], seeded_rows(q.all_tables()[0], 5, 1))
        with pytest.raises(upkeep.UnsupportedError) as ei:
            db.create_view(q.name, q.sql, strategy=strategy)
        assert str(ei.value), "UnsupportedError without a message"
        assert q.name not in db.views()
        orc.check("failed forced create_view")
        orc.create_view(q)  # the automatic strategy must still accept it
        orc.check("create_view with automatic strategy")
    finally:
        orc.close()
        db.close()


# ---------------------------------------------------------------------------
# deterministic: tables that empty completely and refill
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(("q", "strategy"), ALL_PARAMS)
def test_empty_and_refill(q: Query, strategy: str | None) -> None:
    """Fill, empty each table completely (API and SQL), refill; check after each step."""
    _fail_on_probe_error(q, strategy)
    db = upkeep.connect()
    orc = Oracle(db, q.all_tables())
    tables = list(q.all_tables())
    try:
        orc.create_query(q, strategy)
        orc.check("create")
        for t in tables:
            orc.insert(t, seeded_rows(t, 10, 1))
        orc.check("fill")
        for i, t in enumerate(tables):
            if i % 2:
                orc.delete_all(t)
            else:
                orc.delete(t, orc.model.rows(t))
            orc.check(f"empty {t}")
            orc.insert(t, seeded_rows(t, 10, 2), via="sql")
            orc.check(f"refill {t}")
        with orc.transaction():
            for t in tables:
                orc.delete(t, orc.model.rows(t))
        orc.check("empty all tables in one transaction")
        with orc.transaction():
            for t in tables:
                orc.insert(t, seeded_rows(t, 12, 3))
        orc.check("refill all tables in one transaction")
        with orc.transaction():
            for t in tables:
                orc.delete_all(t)
                orc.insert(t, seeded_rows(t, 6, 4))
        orc.check("empty and refill inside one transaction")
    finally:
        orc.close()
        db.close()


# ---------------------------------------------------------------------------
# the catalogue itself must be meaningful
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("q", AUTO_PARAMS)
def test_catalogue_query_nonvacuous(q: Query) -> None:
    """On seeded data each query yields rows in DuckDB (the domains hit the filters)."""
    results = []
    con = duckdb.connect()
    try:
        for t in q.all_tables():
            con.execute(ddl(t))
        for v in q.all_views():
            con.execute(f"CREATE VIEW {v.name} AS {v.sql}")
        for seed in (5, 6, 7):
            for t in q.all_tables():
                rows = seeded_rows(t, 30, seed)
                ph = "(" + ", ".join("?" for _ in SCHEMA[t]) + ")"
                con.execute(f"DELETE FROM {t}")
                con.execute(
                    f"INSERT INTO {t} VALUES " + ", ".join(ph for _ in rows),
                    [v for r in rows for v in r],
                )
            results.append(con.execute(f"SELECT * FROM {q.name}").fetchall())
    finally:
        con.close()
    assert any(results), f"{q.name} is empty on all seeded data sets"
    assert any(v is not None for rows in results for r in rows for v in r)
