"""SQL statements through ``db.execute``: keyed UPDATEs, view creation, ad-hoc SELECTs.

The case a user of SQL lives in: a table loaded first (``--rows`` rows, a composite
PRIMARY KEY), a join-free aggregate view over it maintained, one keyed UPDATE untimed (it
builds the key's index) and one full collection of the loaded objects (what a database
running a while has paid once), then ``--statements`` keyed
``UPDATE ... SET n = c WHERE w = a AND d = b`` statements, each its own transaction, once
with their constants written in and once with parameters (``?``); DuckDB runs the same
statements on the same table in the same run (it maintains no view: it is the peer for what
a statement costs to parse, plan and apply). Then ``5 * --statements`` new rows in one
``executemany`` of an INSERT naming its columns. Then ``--subqueries`` keyed UPDATEs whose SET
reads a 100-row table through a correlated subquery (``SET n = (SELECT bonus FROM u WHERE
u.w = t.w)``), which upkeep hands to DuckDB with the rows the key fixes. Then views created one after another (each is
parsed, bound by DuckDB, planned and built), and ad-hoc SELECTs, which upkeep evaluates
with DuckDB over the current contents: on the 1,000-row table, a GROUP BY over the big one
(unchanged between the queries: its Arrow copy is reused), and key lookups on the big one
(DuckDB is handed the rows the key's index finds).

    .venv/bin/python -m bench.statements            # results in bench/results/statements.json
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import time
from pathlib import Path

import duckdb
import pyarrow as pa

import upkeep
from bench.common.environment import REPO, git_rev, machine, now

TABLE = "CREATE TABLE t (w INTEGER, d INTEGER, n INTEGER, name VARCHAR, PRIMARY KEY (w, d))"
VIEW = "SELECT w, COUNT(*) AS c, SUM(n) AS s FROM t GROUP BY w"
UPDATE = "UPDATE t SET n = {n} WHERE w = {w} AND d = {d}"
PARAMETERIZED = "UPDATE t SET n = ? WHERE w = ? AND d = ?"
BONUS = "CREATE TABLE u (w INTEGER, bonus INTEGER)"
SCAN = "SELECT d % 10 AS g, COUNT(*), SUM(n) FROM t GROUP BY g"
LOOKUP = "SELECT n, name FROM t WHERE w = ? AND d = ?"
MANY = "INSERT INTO t (w, d, name, n) VALUES (?, ?, ?, ?)"
SUBQUERY = "UPDATE t SET n = (SELECT bonus FROM u WHERE u.w = t.w) + ? WHERE w = ? AND d = ?"


def _statements(rows: int, count: int, seed: int) -> list[tuple[int, int, int]]:
    rng = random.Random(seed)
    width = rows // 1000
    return [(rng.randrange(10**6), rng.randrange(width), rng.randrange(1000))
            for _ in range(count)]


def _per_second(count: int, run) -> float:
    t0 = time.perf_counter()
    run()
    return count / (time.perf_counter() - t0)


def measure(rows: int, count: int, views: int, selects: int, subqueries: int) -> dict:
    data = [(w, d, 0, f"name{d}") for w in range(rows // 1000) for d in range(1000)]
    db = upkeep.connect()
    db.execute(TABLE)
    db.insert("t", data)
    db.create_view("v", VIEW)
    db.view("v").subscribe(lambda changes: None)
    con = duckdb.connect()
    con.execute(TABLE)
    con.register("loaded", pa.table({name: [r[i] for r in data]
                                     for i, name in enumerate(("w", "d", "n", "name"))}))
    con.execute("INSERT INTO t SELECT * FROM loaded")
    first, second = _statements(rows, count, 1), _statements(rows, count, 2)
    out: dict = {"rows": rows, "statements": count}
    # one keyed UPDATE first, untimed: it builds the key's index (about 0.3 s here), a
    # cost a running database pays once, which would otherwise land on the first timed
    # statements; so does the collector's first full pass over the loaded objects
    for target in (db, con):
        target.execute(UPDATE.format(n=0, w=0, d=0))
    gc.collect()  # the load's objects collected once, as in a database running a while
    out["upkeep_update_per_s"] = _per_second(count, lambda: [
        db.execute(UPDATE.format(n=n, w=w, d=d)) for n, w, d in first])
    out["duckdb_update_per_s"] = _per_second(count, lambda: [
        con.execute(UPDATE.format(n=n, w=w, d=d)) for n, w, d in first])
    out["upkeep_parameterized_per_s"] = _per_second(count, lambda: [
        db.execute(PARAMETERIZED, (n, w, d)) for n, w, d in second])
    out["duckdb_parameterized_per_s"] = _per_second(count, lambda: [
        con.execute(PARAMETERIZED, (n, w, d)) for n, w, d in second])
    bonus = [(w, w % 7) for w in range(100)]
    for target in (db, con):
        target.execute(BONUS)
        target.executemany("INSERT INTO u VALUES (?, ?)", bonus)
    third = [(n, w % 100, d) for n, w, d in _statements(rows, subqueries, 3)]
    out["subqueries"] = subqueries
    out["upkeep_subquery_per_s"] = _per_second(subqueries, lambda: [
        db.execute(SUBQUERY, (n, w, d)) for n, w, d in third])
    out["duckdb_subquery_per_s"] = _per_second(subqueries, lambda: [
        con.execute(SUBQUERY, (n, w, d)) for n, w, d in third])
    fresh = [(rows // 1000 + i // 1000, i % 1000, f"new{i}", i) for i in range(count * 5)]
    out["many"] = len(fresh)
    out["upkeep_executemany_per_s"] = _per_second(len(fresh), lambda: db.executemany(
        MANY, fresh))
    out["duckdb_executemany_per_s"] = _per_second(len(fresh), lambda: con.executemany(
        MANY, fresh))
    expected = con.execute("SELECT w, COUNT(*), SUM(n) FROM t GROUP BY w").fetchall()
    assert sorted(db.view("v").rows()) == sorted(expected), "the view differs from DuckDB"
    t0 = time.perf_counter()
    for i in range(views):
        db.create_view(f"v{i}", f"SELECT w, SUM(n) AS s FROM t WHERE d < {i} AND n > -1 "
                                "AND name <> 'x' GROUP BY w")
    out["upkeep_create_view_ms"] = (time.perf_counter() - t0) / views * 1000
    small = upkeep.connect()
    small.execute(TABLE)
    small.insert("t", data[:1000])
    con.execute("CREATE TABLE s AS SELECT * FROM t LIMIT 1000")
    t0 = time.perf_counter()
    for i in range(selects):
        small.execute(f"SELECT d, n FROM t WHERE d = {i}").fetchall()
    out["upkeep_select_ms"] = (time.perf_counter() - t0) / selects * 1000
    t0 = time.perf_counter()
    for i in range(selects):
        con.execute(f"SELECT d, n FROM s WHERE d = {i}").fetchall()
    out["duckdb_select_ms"] = (time.perf_counter() - t0) / selects * 1000
    for key, target in (("upkeep_scan_ms", db), ("duckdb_scan_ms", con)):
        t0 = time.perf_counter()
        for _ in range(selects):
            target.execute(SCAN).fetchall()
        out[key] = (time.perf_counter() - t0) / selects * 1000
    lookups = [(w, d) for _, w, d in _statements(rows, selects, 4)]
    for key, target in (("upkeep_lookup_ms", db), ("duckdb_lookup_ms", con)):
        t0 = time.perf_counter()
        for w, d in lookups:
            target.execute(LOOKUP, (w % (rows // 1000), d)).fetchall()
        out[key] = (time.perf_counter() - t0) / selects * 1000
    return out


def report(result: dict) -> str:
    m = result["measured"]
    lines = [
        f"`python -m bench.statements --rows {m['rows']} --statements {m['statements']} "
        f"--subqueries {m['subqueries']}` "
        f"({result['when']}, {result['git']}, {result['machine']})",
        "",
        "| work | upkeep | DuckDB | upkeep's speed / DuckDB's |",
        "|---|---:|---:|---:|",
    ]
    for label, key, unit in (("keyed UPDATE, constants written in", "update_per_s", "/s"),
                             ("keyed UPDATE, parameters", "parameterized_per_s", "/s"),
                             ("keyed UPDATE, SET from a correlated subquery",
                              "subquery_per_s", "/s"),
                             (f"executemany INSERT with a column list, {m['many']:,} rows "
                              "in one call", "executemany_per_s", " rows/s")):
        up, dk = m[f"upkeep_{key}"], m[f"duckdb_{key}"]
        lines.append(f"| {label} | {up:,.0f}{unit} | {dk:,.0f}{unit} | {up / dk:.2f}x |")
    lines.append(f"| ad-hoc SELECT on a 1,000-row table | {m['upkeep_select_ms']:.1f} ms | "
                 f"{m['duckdb_select_ms']:.1f} ms | "
                 f"{m['duckdb_select_ms'] / m['upkeep_select_ms']:.2f}x |")
    lines.append(f"| ad-hoc GROUP BY (`{SCAN}`) over the {m['rows']:,}-row table, "
                 f"unchanged between queries | {m['upkeep_scan_ms']:.1f} ms | "
                 f"{m['duckdb_scan_ms']:.1f} ms | "
                 f"{m['duckdb_scan_ms'] / m['upkeep_scan_ms']:.2f}x |")
    lines.append(f"| ad-hoc key lookup (`{LOOKUP}`) on the {m['rows']:,}-row table | "
                 f"{m['upkeep_lookup_ms']:.1f} ms | {m['duckdb_lookup_ms']:.1f} ms | "
                 f"{m['duckdb_lookup_ms'] / m['upkeep_lookup_ms']:.2f}x |")
    lines.append(f"| CREATE VIEW (aggregate, built over {m['rows']:,} rows) | "
                 f"{m['upkeep_create_view_ms']:.1f} ms | – | – |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--statements", type=int, default=2_000)
    parser.add_argument("--views", type=int, default=20)
    parser.add_argument("--selects", type=int, default=50)
    parser.add_argument("--subqueries", type=int, default=200)
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "statements.json"))
    args = parser.parse_args()
    result = {"when": now(), "git": git_rev(), "machine": machine(),
              "measured": measure(args.rows, args.statements, args.views, args.selects,
                                         args.subqueries)}
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(report(result))


if __name__ == "__main__":
    main()
