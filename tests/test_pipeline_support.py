"""Helpers for the pipeline tests (no tests here).

A seeded generator of change streams over two small tables that keeps its own model of the
base tables (an independent oracle: DuckDB evaluates the view SQL on the model's final
rows), writers for the three source formats, and readers that turn every sink's output
back into a multiset of normalised rows.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import random
import sqlite3
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from oracle import insert_rows

TABLES_SQL = """
CREATE TABLE customers (ck INTEGER PRIMARY KEY, name VARCHAR NOT NULL, segment VARCHAR);
CREATE TABLE orders (ok INTEGER, ck INTEGER, day DATE, price DECIMAL(10,2), qty INTEGER,
                     note VARCHAR);
"""

VIEWS_SQL = """
-- revenue per segment: a join with an aggregate
CREATE MATERIALIZED VIEW revenue AS
SELECT c.segment, SUM(o.price * o.qty) AS total, COUNT(*) AS n
FROM orders o JOIN customers c ON o.ck = c.ck
GROUP BY c.segment;

-- a filter with duplicate rows (bag semantics) and NULLs
CREATE MATERIALIZED VIEW big_orders AS
SELECT o.ok, o.ck, o.day, o.note FROM orders o WHERE o.qty >= 5;

-- a global aggregate: one row even when orders is empty
CREATE MATERIALIZED VIEW order_count AS SELECT COUNT(*) AS n, SUM(qty) AS q FROM orders;
"""

# the kind of each view column, to normalise values read back from any sink
VIEW_KINDS = {
    "revenue": ("str", "dec", "int"),
    "big_orders": ("int", "int", "date", "str"),
    "order_count": ("int", "int"),
}
COLUMNS = {"customers": ("ck", "name", "segment"),
           "orders": ("ok", "ck", "day", "price", "qty", "note")}
SEGMENTS = ("AUTO", "BUILDING", "FURNITURE", None)


# ---------------------------------------------------------------- the stream and its model


class Stream:
    """Random change records plus the base tables they lead to (the model)."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.records: list[dict[str, Any]] = []
        self.model: dict[str, Counter[tuple]] = {"customers": Counter(), "orders": Counter()}
        self.next_ok = 1

    # values as Python (model) and as JSON (records)
    def _order(self) -> tuple:
        rng = self.rng
        day = dt.date(2024, 1, 1) + dt.timedelta(days=rng.randrange(60))
        price = Decimal(rng.randrange(100, 10000)) / 100
        note = rng.choice(["rush", "gift", None, "b[old]"])
        ck = rng.randrange(1, 7)  # customer 6 never exists: orders that join nothing
        self.next_ok += 1
        return (self.next_ok, ck, day, price, rng.randrange(1, 10), note)

    def _image(self, table: str, row: tuple) -> Any:
        values = []
        for v in row:
            if isinstance(v, dt.date):
                v = v.isoformat()
            elif isinstance(v, Decimal):
                v = str(v) if self.rng.random() < 0.5 else float(v)
            values.append(v)
        if self.rng.random() < 0.5:
            return values
        return dict(zip(COLUMNS[table], values, strict=True))

    def _emit(self, table: str, op: str, row: tuple | None = None,
              before: tuple | None = None) -> None:
        record: dict[str, Any] = {"table": table, "op": op}
        if op == "update":
            record["before"] = self._image(table, before)
            record["after"] = self._image(table, row)
            self.model[table][before] -= 1
            self.model[table][row] += 1
        else:
            record["row"] = self._image(table, row)
            self.model[table][row] += 1 if op == "insert" else -1
        self.model[table] = +self.model[table]
        self.records.append(record)

    def generate(self, n: int) -> Stream:
        """Append ``n`` valid records (the first ones create customers)."""
        rng = self.rng
        for _ in range(n):
            customers = list(self.model["customers"])
            orders = list(self.model["orders"].elements())
            if len(customers) < 5:
                ck = len(customers) + 1
                self._emit("customers", "insert", (ck, f"customer {ck}", rng.choice(SEGMENTS)))
                continue
            roll = rng.random()
            if roll < 0.45 or not orders:
                row = self._order()
                self._emit("orders", "insert", row)
                if rng.random() < 0.15:  # an exact duplicate row
                    self._emit("orders", "insert", row)
            elif roll < 0.65:
                self._emit("orders", "delete", rng.choice(orders))
            elif roll < 0.9:
                before = rng.choice(orders)
                after = (*before[:4], rng.randrange(1, 10), rng.choice(["changed", None]))
                self._emit("orders", "update", after, before)
            else:
                before = rng.choice(customers)
                after = (*before[:2], rng.choice(SEGMENTS))
                self._emit("customers", "update", after, before)
        return self


# ---------------------------------------------------------------- writing sources


def split(records: list[Any], files: int) -> list[list[Any]]:
    size = -(-len(records) // files)
    return [records[i:i + size] for i in range(0, len(records), size)]


def write_jsonl(directory: Path, records: list[Any], files: int = 3, first: int = 1) -> list[Path]:
    """Records (dicts, or raw strings written as they are) as JSONL files."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, chunk in enumerate(split(records, files), first):
        path = directory / f"changes-{i:03d}.jsonl"
        path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n"
                                for r in chunk))
        paths.append(path)
    return paths


def _cells(record: dict[str, Any]) -> dict[str, Any]:
    return {"table": record.get("table"), "op": record.get("op"),
            **{k: json.dumps(record[k]) if k in record else None
               for k in ("row", "before", "after")}}


def write_csv(directory: Path, records: list[dict[str, Any]], files: int = 3,
              first: int = 1) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, chunk in enumerate(split(records, files), first):
        path = directory / f"changes-{i:03d}.csv"
        with path.open("w", newline="") as f:
            writer = csv.DictWriter(f, ["table", "op", "row", "before", "after"])
            writer.writeheader()
            for record in chunk:
                writer.writerow(_cells(record))
        paths.append(path)
    return paths


def write_parquet(directory: Path, records: list[dict[str, Any]], files: int = 3,
                  first: int = 1) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, chunk in enumerate(split(records, files), first):
        path = directory / f"changes-{i:03d}.parquet"
        rows = [_cells(r) for r in chunk]
        table = pa.table({k: pa.array([r[k] for r in rows], pa.string())
                          for k in ("table", "op", "row", "before", "after")})
        pq.write_table(table, path)
        paths.append(path)
    return paths


WRITERS = {"jsonl": write_jsonl, "csv": write_csv, "parquet": write_parquet}


# ---------------------------------------------------------------- the pipeline file


def write_pipeline(directory: Path, source: str = "changes", *, state_dir: str = ":memory:",
                   rows_per_batch: int = 50, extra: str = "",
                   sinks: dict[str, list[str]] | None = None) -> Path:
    """A pipeline file with the test tables and views, and sinks under ``out/``."""
    (directory / "tables.sql").write_text(TABLES_SQL)
    (directory / "views.sql").write_text(VIEWS_SQL)
    if sinks is None:
        sinks = {view: ["duckdb", "sqlite", "jsonl", "parquet", "parquet-deltas", "terminal"]
                 for view in VIEW_KINDS}
    parts = [f'state_dir = "{state_dir}"', 'tables = ["tables.sql"]', 'views = ["views.sql"]',
             extra, "[source]", f'path = "{source}"', "[batch]",
             f"rows_per_batch = {rows_per_batch}"]
    for view, kinds in sinks.items():
        for kind in kinds:
            parts.append(f'[[sinks]]\nview = "{view}"\ntype = "{kind}"')
            if kind in ("duckdb", "sqlite"):
                parts.append(f'path = "out/views.{kind}"')
            elif kind in ("jsonl", "parquet"):
                parts.append(f'path = "out/{view}.{kind}"')
            elif kind == "parquet-deltas":
                parts.append(f'path = "out/{view}.deltas"')
    path = directory / "pipeline.toml"
    path.write_text("\n".join(parts) + "\n")
    return path


# ---------------------------------------------------------------- the oracle and the sinks


def normalise(view: str, rows: Any) -> Counter[tuple]:
    """Rows (from any sink) with values in one representation per column kind."""
    kinds = VIEW_KINDS[view]
    out: Counter[tuple] = Counter()
    for row in rows:
        values = []
        for kind, v in zip(kinds, row, strict=True):
            if v is None:
                values.append(None)
            elif kind == "dec":
                values.append(Decimal(str(v)))
            elif kind == "date":
                values.append(v if isinstance(v, dt.date) else dt.date.fromisoformat(v))
            elif kind == "int":
                values.append(int(v))
            else:
                values.append(v)
        out[tuple(values)] += 1
    return out


def expected_views(model: dict[str, Counter[tuple]]) -> dict[str, Counter[tuple]]:
    """DuckDB evaluating the view SQL on the model's base tables."""
    con = duckdb.connect()
    con.execute(TABLES_SQL.replace("PRIMARY KEY", "").replace("NOT NULL", ""))
    for table, rows in model.items():
        if rows:
            insert_rows(con, table, list(rows.elements()))
    con.execute(VIEWS_SQL.replace("MATERIALIZED VIEW", "VIEW"))
    return {v: normalise(v, con.execute(f"SELECT * FROM {v}").fetchall()) for v in VIEW_KINDS}


def read_duckdb(path: Path, view: str) -> Counter[tuple] | None:
    """The table ``view`` of a DuckDB sink file (None if the file has no such table)."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        if not con.execute("SELECT 1 FROM information_schema.tables WHERE table_name = ?",
                           [view]).fetchall():
            return None
        return normalise(view, con.execute(f"SELECT * FROM {view}").fetchall())
    finally:
        con.close()


def read_sqlite(path: Path, view: str) -> Counter[tuple] | None:
    """The table ``view`` of a SQLite sink file (None if the file has no such table)."""
    con = sqlite3.connect(path)
    try:
        if not con.execute("SELECT 1 FROM sqlite_master WHERE name = ?", [view]).fetchall():
            return None
        return normalise(view, con.execute(f"SELECT * FROM {view}").fetchall())
    finally:
        con.close()


def read_parquet(path: Path, view: str) -> Counter[tuple]:
    return normalise(view, [tuple(r.values()) for r in pq.read_table(path).to_pylist()])


def read_parquet_deltas(path: Path, view: str) -> Counter[tuple]:
    """A parquet-deltas directory read by DuckDB: every batch's weights summed per row (no
    weight is 0, no row's sum negative)."""
    files = f"{path}/batch=*/*.parquet"
    if not list(path.glob("batch=*/*.parquet")):
        return Counter()
    con = duckdb.connect()
    zero = con.execute(f"SELECT count(*) FROM read_parquet('{files}') WHERE weight = 0")
    assert zero.fetchone()[0] == 0
    summed = con.execute(f"SELECT * EXCLUDE (weight, batch), SUM(weight) FROM "
                         f"read_parquet('{files}', hive_partitioning = true) "
                         f"GROUP BY ALL HAVING SUM(weight) <> 0").fetchall()
    state: Counter[tuple] = Counter()
    for *row, n in summed:
        assert n > 0, f"{path}: row {row} summed to {n}"
        state.update({next(iter(normalise(view, [tuple(row)]))): int(n)})
    return state


def jsonl_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def read_jsonl(path: Path, view: str) -> Counter[tuple]:
    """Replay a jsonl sink file: apply weights in order, clearing at reset lines."""
    state: Counter[tuple] = Counter()
    for entry in jsonl_lines(path):
        if entry.get("reset"):
            state.clear()
            continue
        assert entry["weight"] in (1, -1)
        row = next(iter(normalise(view, [tuple(entry["row"].values())])))
        state[row] += entry["weight"]
        assert state[row] >= 0, f"{path}: deleting a row that is not there: {entry}"
    return +state


def read_all_sinks(out: Path, view: str) -> dict[str, Counter[tuple]]:
    """Every file sink's contents for ``view`` (those that exist)."""
    found: dict[str, Counter[tuple] | None] = {}
    if (out / "views.duckdb").exists():
        found["duckdb"] = read_duckdb(out / "views.duckdb", view)
    if (out / "views.sqlite").exists():
        found["sqlite"] = read_sqlite(out / "views.sqlite", view)
    if (out / f"{view}.parquet").exists():
        found["parquet"] = read_parquet(out / f"{view}.parquet", view)
    if (out / f"{view}.jsonl").exists():
        found["jsonl"] = read_jsonl(out / f"{view}.jsonl", view)
    if (out / f"{view}.deltas").exists():
        found["parquet-deltas"] = read_parquet_deltas(out / f"{view}.deltas", view)
    return {kind: rows for kind, rows in found.items() if rows is not None}


_TABLE_KINDS = {"customers": ("int", "str", "str"),
                "orders": ("int", "int", "date", "dec", "int", "str")}


def _typed(table: str, image: Any) -> tuple:
    if isinstance(image, dict):
        image = [image[c] for c in COLUMNS[table]]
    out = []
    for kind, v in zip(_TABLE_KINDS[table], image, strict=True):
        if v is not None and kind == "date":
            v = dt.date.fromisoformat(v)
        elif v is not None and kind == "dec":
            v = Decimal(str(v)).quantize(Decimal("0.01"))
        out.append(v)
    return tuple(out)


def model_of(records: list[dict[str, Any]]) -> dict[str, Counter[tuple]]:
    """The base tables a list of valid records leads to (replayed independently)."""
    model: dict[str, Counter[tuple]] = {"customers": Counter(), "orders": Counter()}
    for r in records:
        table = model[r["table"]]
        if r["op"] == "insert":
            table[_typed(r["table"], r["row"])] += 1
        elif r["op"] == "delete":
            table[_typed(r["table"], r["row"])] -= 1
        else:
            table[_typed(r["table"], r["before"])] -= 1
            table[_typed(r["table"], r["after"])] += 1
        assert all(n >= 0 for n in table.values())
    return {t: +rows for t, rows in model.items()}
