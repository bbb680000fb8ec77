"""Independent reference model for upkeep.

Base tables are kept as Python multisets (``collections.Counter`` of row
tuples).  View contents are computed by DuckDB from those multisets (never
from upkeep's own output) and compared, as bags, with

* ``db.view(name).rows()``,
* ``db.execute("SELECT * FROM name").fetchall()``,
* the sum of all deltas delivered to a ``subscribe`` callback.

Every statement applied through :class:`Oracle` is logged as runnable Python so
that a failure message doubles as a minimal repro.
"""

from __future__ import annotations

import datetime
import math
import random
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, event
from hypothesis import strategies as st
from hypothesis.internal.conjecture import engine as _hyp_engine
from queries import JOIN_KEYS, KEY_MULTIPLICITY, SCHEMA, Query, ddl

import upkeep

Row = tuple[Any, ...]

REL_TOL = 1e-9
ABS_TOL = 1e-9

# (query name, forced strategy or None) -> (applicable, note); filled by the stream tests
APPLICABILITY: dict[tuple[str, str | None], tuple[bool, str]] = {}


# ---------------------------------------------------------------------------
# bag comparison
# ---------------------------------------------------------------------------
def _vkey(v: Any) -> Any:
    """Hashable key; numbers rounded to ~9 significant digits, bools kept apart from ints."""
    t = type(v)
    if v is None or t is int or t is str:
        return v
    if t is float or t is Decimal:
        f = float(v)
        if f != f:
            return ("nan",)
        if f.is_integer() or math.isinf(f):
            return f
        if abs(f) < ABS_TOL:
            return 0.0
        return float(f"{f:.9g}")
    if t is bool:
        return ("B", v)
    if t is datetime.date or t is datetime.datetime:
        return v
    # anything else (numpy scalars, lists, ...) is not a value the spec allows
    return ("?", t.__name__, repr(v))


def _rkey(row: Sequence[Any]) -> tuple:
    return tuple(_vkey(v) for v in row)


def values_close(a: Any, b: Any) -> bool:
    """Equality of two SQL values, numbers compared with 1e-9 tolerance."""
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    num = (int, float, Decimal)
    if isinstance(a, num) and isinstance(b, num):
        if isinstance(a, int | Decimal) and isinstance(b, int | Decimal):
            return a == b
        fa, fb = float(a), float(b)
        if math.isnan(fa) or math.isnan(fb):
            return math.isnan(fa) and math.isnan(fb)
        return math.isclose(fa, fb, rel_tol=REL_TOL, abs_tol=ABS_TOL)
    if type(a) is not type(b):
        return False
    return a == b


def rows_close(a: Sequence[Any], b: Sequence[Any]) -> bool:
    return len(a) == len(b) and all(values_close(x, y) for x, y in zip(a, b, strict=True))


def bag_diff(expected: Iterable[Sequence[Any]], actual: Iterable[Sequence[Any]]):
    """Return (missing, unexpected): rows of ``expected`` not matched in ``actual`` and vice versa."""
    exp = [tuple(r) for r in expected]
    act = [tuple(r) for r in actual]
    if Counter(map(_rkey, exp)) == Counter(map(_rkey, act)):
        return [], []
    # tolerant greedy matching; exact-key matches first so rounding edges don't matter
    remaining = Counter(map(_rkey, act))
    missing_exact: list[Row] = []
    for r in exp:
        k = _rkey(r)
        if remaining[k] > 0:
            remaining[k] -= 1
        else:
            missing_exact.append(r)
    left_act: list[Row] = []
    pool = Counter(remaining)
    for r in act:
        k = _rkey(r)
        if pool[k] > 0:
            pool[k] -= 1
            left_act.append(r)
    missing: list[Row] = []
    for r in missing_exact:
        for i, cand in enumerate(left_act):
            if rows_close(r, cand):
                del left_act[i]
                break
        else:
            missing.append(r)
    return missing, left_act


def _fmt_rows(rows: Sequence[Row], limit: int = 12) -> str:
    out = "\n".join(f"      {r!r}" for r in sorted(rows, key=_sortkey)[:limit])
    if len(rows) > limit:
        out += f"\n      ... {len(rows) - limit} more"
    return out


def _sortkey(r: Sequence[Any]) -> tuple:
    return tuple((type(k).__name__, str(k)) for k in _rkey(r))


def assert_bag_equal(expected, actual, what: str, context: str = "") -> None:
    """Assert two bags of rows are equal (floats to 1e-9 relative tolerance)."""
    expected = [tuple(r) for r in expected]
    actual = [tuple(r) for r in actual]
    missing, unexpected = bag_diff(expected, actual)
    if missing or unexpected:
        msg = [
            f"{what}: bag mismatch (expected {len(expected)} rows, got {len(actual)})",
            f"    missing (expected by DuckDB, absent in upkeep): {len(missing)}",
            _fmt_rows(missing),
            f"    unexpected (in upkeep, not in DuckDB): {len(unexpected)}",
            _fmt_rows(unexpected),
        ]
        if len(expected) <= 12 and len(actual) <= 12:
            msg += ["    expected:", _fmt_rows(expected), "    actual:", _fmt_rows(actual)]
        if context:
            msg.append(context)
        raise AssertionError("\n".join(m for m in msg if m))


def duckdb_query(ddl: Iterable[str], tables: dict[str, Iterable[Sequence[Any]]],
                 sql: str) -> list[tuple]:
    """``sql`` evaluated by DuckDB on tables made by ``ddl`` (keys dropped: DuckDB sees
    the rows as given) and filled with ``tables``' rows (a bag: a Counter's elements)."""
    with duckdb_loaded(ddl, tables) as con:
        return con.execute(sql).fetchall()


@contextmanager
def duckdb_loaded(ddl: Iterable[str], tables: dict[str, Iterable[Sequence[Any]]]
                  ) -> Iterator[duckdb.DuckDBPyConnection]:
    """A DuckDB connection holding ``tables`` as :func:`duckdb_query` loads them (pooled:
    its tables are dropped when the block ends)."""
    con = _duck_acquire()
    try:
        for statement in ddl:
            con.execute(statement.replace("PRIMARY KEY", ""))
        for name, rows in tables.items():
            insert_rows(con, name, list(rows.elements() if isinstance(rows, Counter) else rows))
        yield con
    finally:
        _duck_release(con)


def insert_rows(con: duckdb.DuckDBPyConnection, table: str, rows: Sequence[Row]) -> None:
    """Insert ``rows`` into DuckDB's ``table`` a few hundred to a statement (one statement
    per row, as ``executemany`` runs them, costs ~0.4 ms a row)."""
    for i in range(0, len(rows), 500):
        chunk = rows[i:i + 500]
        marks = "(" + ", ".join("?" * len(chunk[0])) + ")"
        con.execute(f"INSERT INTO {table} VALUES " + ", ".join([marks] * len(chunk)),
                    [v for r in chunk for v in r])


def random_change(db, tables: dict[str, Counter], rnd, table: str,
                  new_row: Callable[[], tuple], deletes: float = 0.35,
                  duplicates: float = 0.2) -> None:
    """One random change to ``table`` in ``db`` and in its bag ``tables[table]``: the
    delete of a row it holds (share ``deletes``), else the insert of a duplicate of one
    (share ``duplicates``) or of ``new_row()``."""
    rows = tables[table]
    if rows and rnd.random() < deletes:
        row = rnd.choice(sorted(rows, key=repr))
        db.delete(table, [row])
        rows[row] -= 1
        if not rows[row]:
            del rows[row]
        return
    row = (rnd.choice(sorted(rows, key=repr)) if rows and rnd.random() < duplicates
           else new_row())
    db.insert(table, [row])
    rows[row] += 1


#: a keyed table and a bag, for ordered-state views (ranks, windows)
WINDOW_DDL = ["CREATE TABLE t (k INTEGER PRIMARY KEY, g INTEGER, x DOUBLE, s VARCHAR)",
              "CREATE TABLE b (g INTEGER, v INTEGER)"]


def window_change(rnd, tables: dict[str, Counter], db) -> None:
    """One random change to WINDOW_DDL's tables (NULL and NaN values, NULL partitions, ties,
    duplicates in ``b``, deletes of one copy or of all), in ``db`` and in ``tables``."""
    if rnd.random() < 0.5:  # t, keyed
        rows = tables["t"]
        k = rnd.randrange(14)
        mine = [r for r in rows if r[0] == k]
        if mine and rnd.random() < 0.6:
            db.delete("t", mine)
            del rows[mine[0]]
        elif not mine:
            row = (k, rnd.choice([None, 0, 1, 2]), rnd.choice([None, math.nan, 1.0, 2.0, 2.0,
                                                                5.5, -1.0]),
                   rnd.choice([None, "a", "b", "c"]))
            db.insert("t", [row])
            rows[row] += 1
        return
    rows = tables["b"]
    if rows and rnd.random() < 0.4:  # one copy of a row, or every copy at once
        row = rnd.choice(sorted(rows, key=repr))
        copies = rows[row] if rnd.random() < 0.5 else 1
        db.delete("b", [row] * copies)
        rows[row] -= copies
        if not rows[row]:
            del rows[row]
        return
    row = (rnd.choice([None, 0, 1]), rnd.choice([None, -1, 0, 1, 2, 3]))
    db.insert("b", [row])
    rows[row] += 1


def check_window_stream(sql: str, says: str, steps: int = 50) -> None:
    """View ``sql`` over WINDOW_DDL's tables, kept as EXPLAIN ``says`` (never recomputed),
    equals DuckDB after every one of ``steps`` batches of random changes."""
    import upkeep

    db = upkeep.connect()
    for statement in WINDOW_DDL:
        db.execute(statement)
    view = db.create_view("v", sql)
    explained = db.explain("v")
    assert says in explained and "recompute" not in explained, explained
    rnd = random.Random(sql)
    tables: dict[str, Counter] = {"t": Counter(), "b": Counter()}
    for step in range(steps):
        with db.transaction():
            for _ in range(rnd.randint(1, 4)):
                window_change(rnd, tables, db)
        assert_bag_equal(duckdb_query(WINDOW_DDL, tables, sql), view.rows(), sql,
                         f"step {step}")


# ---------------------------------------------------------------------------
# SQL literal rendering
# ---------------------------------------------------------------------------
def view_follows_duckdb(setup: Sequence[str], changes: Sequence[str], view: str = "v",
                        query: str | None = None, strategy: str | None = None) -> None:
    """Run ``setup`` (tables, rows, ``CREATE VIEW``) on upkeep and on DuckDB, and, given a
    ``query``, make it view ``view`` on both (on upkeep with ``strategy``); then each of
    ``changes`` on both: after the setup and after every change, upkeep's ``view`` has
    DuckDB's column names and holds exactly DuckDB's rows, as a bag."""
    db, con = upkeep.connect(), duckdb.connect()
    for statement in setup:
        db.execute(statement)
        con.execute(statement)
    if query is not None:
        db.create_view(view, query, strategy=strategy)
        con.execute(f"CREATE VIEW {view} AS {query}")
    for change in ("", *changes):
        if change:
            db.execute(change)
            con.execute(change)
        cur = con.execute(f"SELECT * FROM {view}")
        assert db.view(view).columns == [d[0] for d in cur.description], change or "setup"
        assert sorted(db.view(view).rows(), key=repr) == sorted(cur.fetchall(), key=repr), (
            change or "setup")


def connected(ddl: Sequence[str]) -> upkeep.Connection:
    """A fresh database holding ``ddl``'s tables."""
    db = upkeep.connect()
    for statement in ddl:
        db.execute(statement)
    return db


def stream_follows_duckdb(ddl: Sequence[str], sql: str,
                          new_rows: dict[str, Callable[[], tuple]], rnd: random.Random, *,
                          recomputed: bool, drawn: Sequence[str], steps: int = 40,
                          most: int = 4, duplicates: float = 0.15) -> upkeep.Connection:
    """View ``v`` of ``sql`` over ``ddl``'s empty tables, recomputed by DuckDB exactly when
    ``recomputed`` (``db.explain``), holds DuckDB's rows after each of ``steps``
    transactions of 1 to ``most`` random changes (:func:`random_change`) to tables drawn
    from ``drawn``, new rows made by ``new_rows``; the database, for more checks."""
    db = connected(ddl)
    view = db.create_view("v", sql)
    explained = db.explain("v")
    assert ("recomputed by DuckDB" in explained) == recomputed, explained
    tables: dict[str, Counter] = {t: Counter() for t in new_rows}
    for step in range(steps):
        with db.transaction():
            for _ in range(rnd.randint(1, most)):
                table = rnd.choice(drawn)
                random_change(db, tables, rnd, table, new_rows[table], duplicates=duplicates)
        assert_bag_equal(duckdb_query(ddl, tables, sql), view.rows(), sql, f"step {step}")
    return db


def view_equals_duckdb(ddl: Sequence[str], tables: dict[str, Counter], sql: str,
                       strategy: str | None = None):
    """A connection with ``ddl``'s tables holding ``tables`` (bags) and ``sql`` as view
    ``v`` (with ``strategy``), checked to hold exactly DuckDB's rows of ``sql``."""
    db = connected(ddl)
    for table, rows in tables.items():
        if rows:
            db.insert(table, list(rows.elements()))
    view = db.create_view("v", sql, strategy=strategy)
    assert_bag_equal(duckdb_query(ddl, tables, sql), view.rows(), sql)
    return db


def same_outcome_as_duckdb(db, con, sql: str, error: type, match: str | None = None) -> None:
    """Run ``sql`` on DuckDB's ``con`` and on upkeep's ``db``: where DuckDB refuses it,
    upkeep raises ``error`` (matching ``match``), else upkeep runs it too."""
    try:
        con.execute(sql)
    except duckdb.Error:
        with pytest.raises(error, match=match):
            db.execute(sql)
    else:
        db.execute(sql)


def sql_literal(v: Any) -> str:
    """Render a Python value as a DuckDB/upkeep SQL literal."""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, Decimal):
        return str(v)
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    if isinstance(v, datetime.datetime):
        return f"TIMESTAMP '{v.isoformat(sep=' ')}'"
    if isinstance(v, datetime.date):
        return f"DATE '{v.isoformat()}'"
    raise TypeError(f"no literal for {v!r}")


# ---------------------------------------------------------------------------
# the reference model
# ---------------------------------------------------------------------------
_DUCK_POOL: list[duckdb.DuckDBPyConnection] = []


def _duck_acquire() -> duckdb.DuckDBPyConnection:
    """An empty in-memory DuckDB connection (pooled: connecting costs 20-35 ms)."""
    if _DUCK_POOL:
        return _DUCK_POOL.pop()
    con = duckdb.connect()
    con.execute("SET threads = 1")
    return con


def _duck_release(con: duckdb.DuckDBPyConnection) -> None:
    views = con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()
    for (v,) in views:
        con.execute(f"DROP VIEW IF EXISTS {v} CASCADE")
    tables = con.execute("SELECT table_name FROM duckdb_tables()").fetchall()
    for (t,) in tables:
        con.execute(f"DROP TABLE IF EXISTS {t} CASCADE")
    _DUCK_POOL.append(con)


class Model:
    """Base tables as multisets of row tuples."""

    def __init__(self, tables: Iterable[str]):
        self.tables: dict[str, Counter] = {t: Counter() for t in tables}
        self.dirty: set[str] = set(self.tables)

    def rows(self, table: str) -> list[Row]:
        return list(self.tables[table].elements())

    def insert(self, table: str, rows: Iterable[Row]) -> None:
        self.tables[table].update(tuple(r) for r in rows)
        self.dirty.add(table)

    def delete(self, table: str, rows: Iterable[Row]) -> None:
        c = self.tables[table]
        for r in rows:
            r = tuple(r)
            if c[r] <= 0:
                raise KeyError(f"model: deleting absent row {r!r} from {table}")
            c[r] -= 1
            if c[r] == 0:
                del c[r]
        self.dirty.add(table)

    def matching(self, table: str, col: int, value: Any) -> list[Row]:
        """Rows where column ``col`` = value (SQL semantics; value None means IS NULL)."""
        if value is None:
            return [r for r in self.rows(table) if r[col] is None]
        return [r for r in self.rows(table) if r[col] is not None and r[col] == value]

    def snapshot(self) -> dict[str, Counter]:
        return {t: Counter(c) for t, c in self.tables.items()}

    def restore(self, snap: dict[str, Counter]) -> None:
        self.tables = {t: Counter(c) for t, c in snap.items()}
        self.dirty = set(self.tables)


class Subscription:
    """Accumulates subscribe() deltas on top of an initial state."""

    def __init__(self, initial: Iterable[Sequence[Any]]):
        self.state: Counter = Counter(tuple(r) for r in initial)
        self.calls = 0
        self.errors: list[str] = []

    def __call__(self, changes) -> None:
        self.calls += 1
        changes = list(changes)
        if not changes:
            self.errors.append(f"call #{self.calls}: empty change list")
        for item in changes:
            try:
                row, w = item
            except (TypeError, ValueError):
                self.errors.append(f"call #{self.calls}: malformed change {item!r}")
                continue
            if not isinstance(w, int) or isinstance(w, bool) or w == 0:
                self.errors.append(f"call #{self.calls}: bad weight {w!r} for {row!r}")
                continue
            self._add(tuple(row), w)

    def _add(self, row: Row, w: int) -> None:
        deficit = -w - max(self.state[row], 0)
        if w < 0 and deficit > 0:
            # retraction of a row held under a float-rounding-equivalent key
            for k, n in list(self.state.items()):
                if deficit == 0:
                    break
                if n > 0 and k != row and rows_close(k, row):
                    take = min(n, deficit)
                    self.state[k] -= take
                    deficit -= take
                    w += take
        self.state[row] += w
        for k in [k for k, n in self.state.items() if n == 0]:
            del self.state[k]

    def bag(self) -> list[Row]:
        neg = {r: n for r, n in self.state.items() if n < 0}
        if neg:
            raise AssertionError(f"subscription state has negative multiplicities: {neg!r}")
        return list(self.state.elements())


class Oracle:
    """Drives an upkeep database and mirrors every change into the model."""

    def __init__(self, db, tables: Iterable[str]):
        self.db = db
        self.table_names = list(dict.fromkeys(tables))
        self.model = Model(self.table_names)
        self.duck = _duck_acquire()
        self.views: dict[str, Query] = {}
        self.strategies: dict[str, str | None] = {}
        self.subs: dict[str, Subscription] = {}
        self.log: list[str] = ["import upkeep", "db = upkeep.connect()"]
        self._indent = ""
        for t in self.table_names:
            self.duck.execute(ddl(t))
            self._exec(ddl(t))

    # ---- logging -----------------------------------------------------------
    def note(self, line: str) -> None:
        self.log.append(self._indent + line)

    def repro(self) -> str:
        return "    --- repro ---\n" + "\n".join("    " + line for line in self.log)

    def _exec(self, sql: str):
        self.note(f"db.execute({sql!r})")
        return self.db.execute(sql)

    # ---- views -------------------------------------------------------------
    def create_view(self, q: Query, strategy: str | None = None, via: str = "api") -> None:
        """Create ``q`` (dependencies must exist) in upkeep and DuckDB, and subscribe.

        ``via``: "api" (db.create_view), "sql" (CREATE MATERIALIZED VIEW), "plain"
        (CREATE VIEW, also maintained) or "replace" (CREATE OR REPLACE MATERIALIZED VIEW).
        """
        if via != "api":
            assert strategy is None, "a strategy can only be forced through create_view"
            head = {
                "sql": "CREATE MATERIALIZED VIEW",
                "plain": "CREATE VIEW",
                "replace": "CREATE OR REPLACE MATERIALIZED VIEW",
            }[via]
            self._exec(f"{head} {q.name} AS {q.sql}")
        elif strategy is None:
            self.note(f"db.create_view({q.name!r}, {q.sql!r})")
            self.db.create_view(q.name, q.sql)
        else:
            self.note(f"db.create_view({q.name!r}, {q.sql!r}, strategy={strategy!r})")
            self.db.create_view(q.name, q.sql, strategy=strategy)
        self.duck.execute(f"CREATE OR REPLACE VIEW {q.name} AS {q.sql}")
        self.views[q.name] = q
        self.strategies[q.name] = strategy
        self._sync_duck()
        # initial state: the current contents, as DuckDB computes them
        initial = self.duck.execute(f"SELECT * FROM {q.name}").fetchall()
        sub = Subscription(initial)
        self.db.view(q.name).subscribe(sub)
        self.subs[q.name] = sub

    def create_query(self, q: Query, strategy: str | None = None, via: str = "api") -> None:
        """Create ``q`` with ``strategy``, and its dependencies with it where it applies."""
        import upkeep

        for v in q.all_views():
            if v.name in self.views:
                continue
            if v is q or strategy is None:
                self.create_view(v, strategy, via=via)
                continue
            try:
                self.create_view(v, strategy)
            except upkeep.UnsupportedError:
                self.note(f"# strategy {strategy} does not apply to {v.name}; automatic instead")
                self.create_view(v, None)

    # ---- changes -----------------------------------------------------------
    def insert_columns(self, table: str, rows: Sequence[Row], order: Sequence[int]) -> None:
        """INSERT INTO t (cols in ``order``) VALUES ...; columns left out become NULL."""
        cols = SCHEMA[table]
        names = ", ".join(cols[i].name for i in order)
        vals = ", ".join("(" + ", ".join(sql_literal(r[i]) for i in order) + ")" for r in rows)
        self._exec(f"INSERT INTO {table} ({names}) VALUES {vals}")
        kept = set(order)
        self.model.insert(
            table, [tuple(v if i in kept else None for i, v in enumerate(r)) for r in rows]
        )

    def insert(self, table: str, rows: Sequence[Row], via: str = "api") -> None:
        rows = [tuple(r) for r in rows]
        if via == "api":
            self.note(f"db.insert({table!r}, {rows!r})")
            self.db.insert(table, rows)
        elif via == "sql":
            vals = ", ".join("(" + ", ".join(sql_literal(v) for v in r) + ")" for r in rows)
            self._exec(f"INSERT INTO {table} VALUES {vals}")
        elif via == "many":
            ph = ", ".join("?" for _ in SCHEMA[table])
            sql = f"INSERT INTO {table} VALUES ({ph})"
            self.note(f"db.executemany({sql!r}, {rows!r})")
            self.db.executemany(sql, rows)
        elif via == "arrow":
            tbl = arrow_table(table, rows)
            self.note(f"db.insert({table!r}, tests.oracle.arrow_table({table!r}, {rows!r}))")
            self.db.insert(table, tbl)
        else:
            raise ValueError(via)
        self.model.insert(table, rows)

    def delete(self, table: str, rows: Sequence[Row]) -> None:
        rows = [tuple(r) for r in rows]
        self.note(f"db.delete({table!r}, {rows!r})")
        self.db.delete(table, rows)
        self.model.delete(table, rows)

    def delete_where(self, table: str, col: int, value: Any) -> None:
        name = SCHEMA[table][col].name
        cond = f"{name} IS NULL" if value is None else f"{name} = {sql_literal(value)}"
        gone = self.model.matching(table, col, value)
        self._exec(f"DELETE FROM {table} WHERE {cond}")
        self.model.delete(table, gone)

    def dml(self, table: str, sql: str) -> None:
        """Run any INSERT/UPDATE/DELETE on ``table``; DuckDB computes its effect on the model."""
        self._sync_duck()
        self._exec(sql)
        self.duck.execute(sql)
        self.model.tables[table] = Counter(
            map(tuple, self.duck.execute(f"SELECT * FROM {table}").fetchall())
        )

    def duck_rows(self, sql: str) -> list[Row]:
        """Evaluate a query over the model with DuckDB."""
        self._sync_duck()
        return self.duck.execute(sql).fetchall()

    def delete_all(self, table: str) -> None:
        gone = self.model.rows(table)
        self._exec(f"DELETE FROM {table}")
        self.model.delete(table, gone)

    def updated_rows(self, table: str, sets: dict[int, Any], where_col: int, where_val: Any):
        """(old rows, new rows) of the simple UPDATE, computed by the Python model."""
        old = self.model.matching(table, where_col, where_val)
        new = []
        for r in old:
            r2 = list(r)
            for i, v in sets.items():
                if v == "+1":
                    r2[i] = None if r[i] is None else r[i] + 1
                else:
                    r2[i] = v
            new.append(tuple(r2))
        return old, new

    def preview(self, table: str, sql: str) -> list[Row]:
        """Contents of ``table`` after ``sql``, computed by DuckDB and rolled back."""
        self._sync_duck()
        self.duck.execute("BEGIN")
        try:
            self.duck.execute(sql)
            return self.duck.execute(f"SELECT * FROM {table}").fetchall()
        finally:
            self.duck.execute("ROLLBACK")

    def update(self, table: str, sets: dict[int, Any], where_col: int, where_val: Any) -> None:
        """UPDATE table SET col = value | col = col + 1 (value ``"+1"``) WHERE col = v."""
        cols = SCHEMA[table]
        parts = []
        for i, v in sets.items():
            n = cols[i].name
            parts.append(f"{n} = {n} + 1" if v == "+1" else f"{n} = {sql_literal(v)}")
        wname = cols[where_col].name
        cond = f"{wname} IS NULL" if where_val is None else f"{wname} = {sql_literal(where_val)}"
        old, new = self.updated_rows(table, sets, where_col, where_val)
        self._exec(f"UPDATE {table} SET {', '.join(parts)} WHERE {cond}")
        self.model.delete(table, old)
        self.model.insert(table, new)

    def transaction(self):
        return _LoggedTxn(self)

    # ---- checking ----------------------------------------------------------
    def _sync_duck(self) -> None:
        for t in sorted(self.model.dirty):
            self.duck.execute(f"DELETE FROM {t}")
            insert_rows(self.duck, t, self.model.rows(t))
        self.model.dirty.clear()

    def expected(self, view: str) -> list[Row]:
        """View contents computed by DuckDB from the model."""
        self._sync_duck()
        return self.duck.execute(f"SELECT * FROM {view}").fetchall()

    def check(self, label: str = "", views: Iterable[str] | None = None) -> None:
        """Compare every table and view of upkeep against the model / DuckDB."""
        ctx = f"    after: {label}\n{self.repro()}" if label else self.repro()
        for t in self.table_names:
            got = self.db.execute(f"SELECT * FROM {t}").fetchall()
            assert_bag_equal(self.model.rows(t), got, f"table {t} (SELECT *)", ctx)
        for name in views if views is not None else self.views:
            strat = self.strategies.get(name)
            tag = f"view {name} [strategy={strat}]"
            exp = self.expected(name)
            assert_bag_equal(exp, self.db.view(name).rows(), f"{tag} .rows()", ctx)
            got = self.db.execute(f"SELECT * FROM {name}").fetchall()
            assert_bag_equal(exp, got, f"{tag} SELECT *", ctx)
            sub = self.subs[name]
            assert not sub.errors, f"{tag} subscribe: {sub.errors}\n{ctx}"
            assert_bag_equal(exp, sub.bag(), f"{tag} accumulated subscribe deltas", ctx)

    def state(self) -> dict[str, Counter]:
        """Exact snapshot of upkeep's tables, views and subscription states."""
        snap: dict[str, Counter] = {}
        for t in self.table_names:
            snap[f"table {t}"] = Counter(
                map(tuple, self.db.execute(f"SELECT * FROM {t}").fetchall())
            )
        for v in self.views:
            snap[f"view {v} rows()"] = Counter(map(tuple, self.db.view(v).rows()))
            snap[f"view {v} SELECT"] = Counter(
                map(tuple, self.db.execute(f"SELECT * FROM {v}").fetchall())
            )
            snap[f"view {v} subscription"] = Counter(self.subs[v].state)
        return snap

    def close(self) -> None:
        if self.duck is not None:
            _duck_release(self.duck)
            self.duck = None


class _LoggedTxn:
    def __init__(self, orc: Oracle):
        self.orc = orc

    def __enter__(self):
        self.orc.note("with db.transaction():")
        self.orc._indent = "    "
        self.cm = self.orc.db.transaction()
        return self.cm.__enter__()

    def __exit__(self, *exc):
        self.orc._indent = ""
        return self.cm.__exit__(*exc)


# ---------------------------------------------------------------------------
# pyarrow input
# ---------------------------------------------------------------------------
def arrow_table(table: str, rows: Sequence[Row]):
    """A pyarrow Table with the column types of ``table``."""
    import pyarrow as pa

    def pa_type(sql_type: str):
        t = sql_type.upper()
        if t.startswith("DECIMAL"):
            p, s = t[t.index("(") + 1 : t.index(")")].split(",")
            return pa.decimal128(int(p), int(s))
        return {
            "INTEGER": pa.int32(),
            "BIGINT": pa.int64(),
            "DOUBLE": pa.float64(),
            "VARCHAR": pa.string(),
            "DATE": pa.date32(),
            "TIMESTAMP": pa.timestamp("us"),
            "BOOLEAN": pa.bool_(),
        }[t]

    cols = SCHEMA[table]
    arrays = [pa.array([r[i] for r in rows], type=pa_type(c.type)) for i, c in enumerate(cols)]
    return pa.Table.from_arrays(arrays, names=[c.name for c in cols])


# ---------------------------------------------------------------------------
# deterministic and hypothesis-driven change generation
# ---------------------------------------------------------------------------
EQ_TYPES = ("INTEGER", "BIGINT", "VARCHAR", "DATE", "BOOLEAN")  # safe for WHERE col = literal
INT_TYPES = ("INTEGER", "BIGINT")
CAP = 20  # rows per table; keeps multi-way join outputs small

# A failing stream is shrunk for at most this long (hypothesis' default is 300 s per
# test), so a buggy engine cannot stretch the suite; the repro log is printed anyway.
_hyp_engine.MAX_SHRINKING_SECONDS = min(_hyp_engine.MAX_SHRINKING_SECONDS, 60)

HYPOTHESIS_SETTINGS = {
    "deadline": None,
    "report_multiple_bugs": False,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
    "print_blob": True,
}


def seeded_rows(table: str, n: int, seed: int) -> list[tuple]:
    rnd = random.Random(seed * 7919 + zlib.crc32(table.encode()))
    return [tuple(rnd.choice(c.domain) for c in SCHEMA[table]) for _ in range(n)]


def draw_rows(data, table: str, lo: int, hi: int) -> list[tuple]:
    row = st.tuples(*[st.sampled_from(c.domain) for c in SCHEMA[table]])
    return data.draw(st.lists(row, min_size=lo, max_size=hi), label=f"rows for {table}")


def limit_key_multiplicity(orc: Oracle, t: str, rows: list[tuple]) -> list[tuple]:
    """Drop rows that would give a join-key value more than KEY_MULTIPLICITY rows."""
    idx = [i for i, c in enumerate(SCHEMA[t]) if c.name in JOIN_KEYS[t]]
    counts = Counter((i, r[i]) for r in orc.model.rows(t) for i in idx if r[i] is not None)
    kept = []
    for r in rows:
        keys = [(i, r[i]) for i in idx if r[i] is not None]
        if all(counts[k] < KEY_MULTIPLICITY for k in keys):
            counts.update(keys)
            kept.append(r)
    return kept


def within_limits(t: str, rows: list[tuple]) -> bool:
    """No join-key value of ``t`` held by more than twice KEY_MULTIPLICITY rows."""
    idx = [i for i, c in enumerate(SCHEMA[t]) if c.name in JOIN_KEYS[t]]
    counts = Counter((i, r[i]) for r in rows for i in idx if r[i] is not None)
    return all(n <= 2 * KEY_MULTIPLICITY for n in counts.values())


def random_insert(data, orc: Oracle, t: str, lo: int = 1, hi: int = 4) -> str:
    room = max(1, CAP - sum(orc.model.tables[t].values()))
    big = room >= 8 and data.draw(st.integers(0, 7), label="size class") == 0
    rows = draw_rows(data, t, 8, room) if big else draw_rows(data, t, min(lo, room), min(hi, room))
    rows = limit_key_multiplicity(orc, t, rows)
    if not rows:
        return f"(insert into {t} skipped: join-key multiplicity limit)"
    via = data.draw(
        st.sampled_from(["api", "api", "sql", "many", "arrow", "columns"]), label="insert via"
    )
    if via == "columns":
        n = len(SCHEMA[t])
        order = data.draw(st.permutations(range(n)), label="column order")
        order = order[: data.draw(st.integers(max(1, n - 2), n), label="columns given")]
        orc.insert_columns(t, rows, order)
    else:
        orc.insert(t, rows, via=via)
    return f"insert {len(rows)} into {t} via {via}"


def random_atom(data, t: str) -> str:
    """A simple condition on one column of ``t``."""
    c = data.draw(st.sampled_from(SCHEMA[t]), label="pred col")
    vals = [v for v in c.domain if v is not None]
    form = data.draw(st.sampled_from(["cmp", "cmp", "null", "between", "in"]), label="pred form")
    if form == "null" or c.type == "BOOLEAN" and form != "cmp":
        return f"{c.name} IS {data.draw(st.sampled_from(['', 'NOT ']))}NULL"
    v = data.draw(st.sampled_from(vals), label="pred value")
    if form == "cmp":
        op = data.draw(st.sampled_from(["=", "<>", "<", "<=", ">", ">="]), label="pred op")
        return f"{c.name} {op} {sql_literal(v)}"
    w = data.draw(st.sampled_from(vals), label="pred value 2")
    if form == "between":
        lo, hi = sorted([v, w])
        return f"{c.name} BETWEEN {sql_literal(lo)} AND {sql_literal(hi)}"
    return f"{c.name} IN ({sql_literal(v)}, {sql_literal(w)})"


def random_predicate(data, t: str) -> str:
    """A WHERE condition: an atom, or two combined with AND / OR, maybe negated."""
    shape = data.draw(st.sampled_from(["atom", "and", "or", "not"]), label="pred shape")
    if shape == "atom":
        return random_atom(data, t)
    if shape == "not":
        return f"NOT ({random_atom(data, t)})"
    return f"({random_atom(data, t)}) {shape.upper()} ({random_atom(data, t)})"


def random_set_expr(data, t: str, i: int) -> str:
    """Right-hand side for ``SET col = ...``: a literal or an expression of the row."""
    c = SCHEMA[t][i]
    lit = sql_literal(data.draw(st.sampled_from(c.domain), label="set value"))
    exprs = [lit, lit]
    if c.type in INT_TYPES:
        exprs += [
            f"{c.name} + 1",
            f"{c.name} * 2 - 1",
            f"CASE WHEN {random_atom(data, t)} THEN {lit} ELSE {c.name} END",
        ]
    elif c.type == "DOUBLE":
        exprs += [f"{c.name} * 2", f"{c.name} + 0.5"]
    elif c.type == "VARCHAR":
        exprs += [f"UPPER({c.name})", f"COALESCE({c.name}, {lit})"]
    elif c.type == "BOOLEAN":
        exprs += [f"NOT {c.name}"]
    return data.draw(st.sampled_from(exprs), label="set expr")


def random_batch(data, orc: Oracle, tables: list[str]) -> str:
    """One committed batch: a single change, or (one time in three) a transaction of 2-4."""
    if data.draw(st.integers(0, 2), label="txn?") == 0:
        with orc.transaction():
            descs = [random_op(data, orc, tables) for _ in range(data.draw(st.integers(2, 4)))]
        return "transaction[" + "; ".join(descs) + "]"
    return random_op(data, orc, tables)


def random_op(data, orc: Oracle, tables: list[str]) -> str:
    """Draw one change against the current model state and apply it."""
    t = data.draw(st.sampled_from(tables), label="table")
    cols = SCHEMA[t]
    present = orc.model.rows(t)
    if not present:
        return random_insert(data, orc, t)
    kinds = ["delete"] * 2 + ["delete_where", "update", "update", "clear", "extreme"]
    kinds += ["dml_delete", "dml_update"]
    if len(present) < CAP:
        kinds += ["insert"] * 3 + ["insert_select"]
    kind = data.draw(st.sampled_from(kinds), label="op")
    event(f"op {kind}")
    if kind == "insert":
        return random_insert(data, orc, t)
    if kind == "dml_delete":
        sql = f"DELETE FROM {t} WHERE {random_predicate(data, t)}"
        orc.dml(t, sql)
        return sql
    if kind == "dml_update":
        i = data.draw(st.integers(0, len(cols) - 1), label="set col")
        sql = f"UPDATE {t} SET {cols[i].name} = {random_set_expr(data, t, i)} WHERE {random_predicate(data, t)}"
        if not within_limits(t, orc.preview(t, sql)):
            return f"({sql} skipped: join-key multiplicity)"
        orc.dml(t, sql)
        return sql
    if kind == "insert_select":
        pred = random_predicate(data, t)
        new = orc.duck_rows(f"SELECT * FROM {t} WHERE {pred}")
        if not new or len(present) + len(new) > CAP or limit_key_multiplicity(orc, t, new) != new:
            return f"(INSERT INTO {t} SELECT ... skipped: size limits)"
        sql = f"INSERT INTO {t} SELECT * FROM {t} WHERE {pred}"
        orc.dml(t, sql)
        return sql
    if kind == "delete":
        idx = data.draw(
            st.lists(
                st.integers(0, len(present) - 1), min_size=1, max_size=len(present), unique=True
            ),
            label="delete indices",
        )
        orc.delete(t, [present[i] for i in idx])
        return f"delete {len(idx)} from {t}"
    if kind == "delete_where":
        ci = data.draw(
            st.sampled_from([i for i, c in enumerate(cols) if c.type in EQ_TYPES]), label="col"
        )
        vals = (
            sorted({r[ci] for r in present}, key=repr)
            + [v for v in cols[ci].domain if v is None][:1]
        )
        v = data.draw(st.sampled_from(vals), label="where value")
        orc.delete_where(t, ci, v)
        return f"DELETE FROM {t} WHERE {cols[ci].name} = {v!r}"
    if kind == "update":
        wi = data.draw(
            st.sampled_from([i for i, c in enumerate(cols) if c.type in EQ_TYPES]),
            label="where col",
        )
        wv = data.draw(
            st.sampled_from(sorted({r[wi] for r in present}, key=repr)), label="where value"
        )
        targets = data.draw(
            st.lists(st.integers(0, len(cols) - 1), min_size=1, max_size=2, unique=True),
            label="set cols",
        )
        sets = {}
        for i in targets:
            choices = list(cols[i].domain) + (["+1"] if cols[i].type in INT_TYPES else [])
            sets[i] = data.draw(st.sampled_from(choices), label=f"set {cols[i].name}")
        old, new = orc.updated_rows(t, sets, wi, wv)
        after = Counter(present)
        after.subtract(old)
        if not within_limits(t, [*after.elements(), *new]):
            return f"(UPDATE {t} skipped: join-key multiplicity)"
        orc.update(t, sets, wi, wv)
        return f"UPDATE {t} SET {sets} WHERE {cols[wi].name} = {wv!r}"
    if kind == "clear":
        if data.draw(st.booleans(), label="clear via sql"):
            orc.delete_all(t)
            return f"DELETE FROM {t}"
        orc.delete(t, present)
        return f"delete all {len(present)} rows of {t}"
    # extreme: remove every row holding the current MIN or MAX of some column
    cands = [
        i
        for i, c in enumerate(cols)
        if c.type != "BOOLEAN" and any(r[i] is not None for r in present)
    ]
    if not cands:
        return random_insert(data, orc, t)
    ci = data.draw(st.sampled_from(cands), label="extreme col")
    vals = [r[ci] for r in present if r[ci] is not None]
    hi = data.draw(st.booleans(), label="max?")
    ext = max(vals) if hi else min(vals)
    gone = [r for r in present if r[ci] is not None and r[ci] == ext]
    orc.delete(t, gone)
    return f"delete {'max' if hi else 'min'} {cols[ci].name}={ext!r} from {t}"
