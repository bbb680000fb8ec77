"""The case users live in: TPC-H loaded first, a subscriber attached, then changes.

One process per (scale, query, system) measures, in this order:

1. bulk load of the query's tables, read from Parquet a chunk of ``LOAD_CHUNK`` rows at a
   time, one transaction per chunk (so a scale whose tables do not fit in memory twice still
   loads), and the view's build;
2. ``--changes`` single-row changes, each its own transaction: updates of random existing
   fact rows, each written as the delete of the old row and the insert of a new version
   (so two changes), with a subscriber attached that counts the rows it is sent;
   each change timed on its own too (its first, median, 99th percentile and slowest
   latency are reported beside the rate);
3. ``--batch`` changes of the same kind in one transaction (the batch path);
4. the process's resident memory after the load and at the end.

``--system duckdb`` is the recomputation peer: the same tables in DuckDB, the same changes as
single-row ``DELETE`` (by the line item's key) / ``INSERT`` statements, and the view recomputed (``CREATE OR REPLACE TABLE
... AS query``) after every 1,000 changes.  ``flink`` is the incremental peer on the JVM:
Apache Flink SQL in streaming mode over a change stream of the same kind, run by
:mod:`bench.tpch.flink_peer` in its own interpreter (``bench/.venv-flink``).

Usage::

    python -m bench.tpch.loaded --scale 0.1 --query QH --system dyn
    python -m bench.tpch.loaded --scale 0.1 --all --out bench/results/loaded.json

With ``--all`` every (query, system) pair runs in its own subprocess and the results go to
one JSON file; :mod:`bench.tpch.loaded_report` turns it into docs/benchmarks.md's table.
With ``--rounds N`` every pair runs N times, the systems of a query alternating within each
round, and a pair's rates are the medians of its runs (each run's kept under ``runs``): on
a shared machine one process's rate moves by half from run to run.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.common.environment import flink_python, git_rev, machine, now
from bench.common.measure import peak_rss_mb, settled_rss_mb
from bench.tpch.data import generate, iter_table, sample_rows
from bench.tpch.queries import QUERIES, Query
from bench.tpch.schema import column_names, create_table_sql

VIEW = "bench_view"
RECOMPUTE_EVERY = 1_000
SYSTEMS = ("dyn", "general", "duckdb", "flink")
LOADED_QUERIES = ("QH", "FQ1", "Q3")
FACT = "lineitem"
PRICE = "l_extendedprice"
FACT_KEY = ("l_orderkey", "l_linenumber")  # how a user deletes one line item
LOAD_CHUNK = 1_000_000  # rows per load transaction, read from Parquet as they load


def updates(rows: list[tuple], count: int, price: int, seed: int) -> list[tuple[int, tuple]]:
    """``count`` changes: (weight, row) pairs deleting a random existing row and inserting
    it back with a new price, each row chosen at most once."""
    rng = random.Random(seed)
    changes = []
    for old in rng.sample(rows, count // 2):
        new = old[:price] + (round(old[price] + 1.0, 2),) + old[price + 1:]
        changes += [(-1, old), (1, new)]
    return changes


def _inputs(args: argparse.Namespace) -> tuple[Query, list[tuple], float]:
    """The query, the fact rows the changes update (drawn at random, distinct: the
    single-row changes' first, then the batch's), and the resident memory before anything
    is loaded (what each system's memory is measured from).  Tables are read from Parquet
    a chunk at a time while they load, so no copy of them is held beside the system."""
    query = QUERIES[args.query]
    pool = sample_rows(args.scale, FACT, args.changes // 2 + args.batch // 2, args.seed)
    return query, pool, settled_rss_mb()


def _changes(args: argparse.Namespace, pool: list[tuple]) -> tuple[list, list]:
    """The single-row changes and the batch's, over disjoint rows of ``pool``."""
    price = column_names(FACT).index(PRICE)
    first = args.changes // 2
    return (updates(pool[:first], args.changes, price, args.seed),
            updates(pool[first:], args.batch, price, args.seed + 1))


def _result(load_s: float, build_s: float, single_s: float, singles: int, view_rows: int,
            base_mb: float, loaded_mb: float) -> dict:
    """The fields every system reports."""
    return {
        "load_seconds": round(load_s, 2),
        "build_seconds": round(build_s, 2),
        "single_per_s": round(singles / single_s),
        "single_us": round(single_s / singles * 1e6, 1),
        "view_rows": view_rows,
        "loaded_mb": round(loaded_mb - base_mb, 1),
        "end_mb": round(settled_rss_mb() - base_mb, 1),
        "peak_mb": round(peak_rss_mb(), 1),
        "base_mb": round(base_mb, 1),
    }


def load_upkeep(db, scale: float, query: Query, primary_keys: bool = False) -> None:
    """Create ``query``'s tables in upkeep connection ``db`` (with their PRIMARY KEYs if
    ``primary_keys``) and load them from Parquet, ``LOAD_CHUNK`` rows per transaction."""
    for name in query.tables:
        db.execute(create_table_sql(name, primary_keys))
        for chunk in iter_table(scale, name, LOAD_CHUNK):
            with db.transaction():
                db.insert(name, chunk)


def run_upkeep(args: argparse.Namespace) -> dict:
    """Load, build, subscribe, then time single-row transactions and one big batch."""
    import upkeep

    query, pool, base_mb = _inputs(args)
    db = upkeep.connect()
    t0 = time.perf_counter()
    load_upkeep(db, args.scale, query, args.primary_keys)
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    db.create_view(VIEW, query.sql, strategy=args.system, provenance=args.provenance)
    build_s = time.perf_counter() - t0
    loaded_mb = settled_rss_mb()
    received = [0]
    db.view(VIEW).subscribe(lambda changes: received.__setitem__(0, received[0] + len(changes)))

    singles, batch = _changes(args, pool)
    del pool
    insert, delete = db.insert, db.delete
    clock = time.perf_counter
    times = []
    t0 = clock()
    for w, row in singles:
        t = clock()
        (insert if w > 0 else delete)(FACT, [row])
        times.append(clock() - t)
    single_s = clock() - t0
    t0 = time.perf_counter()
    with db.transaction():
        delete(FACT, [row for w, row in batch if w < 0])
        insert(FACT, [row for w, row in batch if w > 0])
    batch_s = time.perf_counter() - t0
    return {
        **_result(load_s, build_s, single_s, len(singles), len(db.view(VIEW).rows()),
                  base_mb, loaded_mb),
        "batch_per_s": round(len(batch) / batch_s),
        "batch_us": round(batch_s / len(batch) * 1e6, 1),
        "rows_sent": received[0],
        **latencies(times),
    }


def latencies(times: list[float]) -> dict:
    """The single-row changes' latencies in microseconds: the first (one-time work the first
    change after subscribing pays shows there), the median, the 99th percentile and the
    slowest, beside the rate, which averages them."""
    ordered = sorted(times)
    return {
        "first_us": round(times[0] * 1e6, 1),
        "median_us": round(ordered[len(ordered) // 2] * 1e6, 1),
        "p99_us": round(ordered[int(len(ordered) * 0.99)] * 1e6, 1),
        "max_us": round(ordered[-1] * 1e6, 1),
    }


def run_duckdb(args: argparse.Namespace) -> dict:
    """The same changes as single-row statements, the view recomputed every 1,000."""
    import duckdb

    query, pool, base_mb = _inputs(args)
    con = duckdb.connect()
    t0 = time.perf_counter()
    for name in query.tables:
        con.execute(create_table_sql(name, args.primary_keys))
        for chunk in iter_table(args.scale, name, LOAD_CHUNK):
            con.register("arrow_input", chunk)
            con.execute(f"INSERT INTO {name} SELECT * FROM arrow_input")
            con.unregister("arrow_input")
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    con.execute(f"CREATE TABLE {VIEW} AS {query.sql}")
    build_s = time.perf_counter() - t0
    loaded_mb = settled_rss_mb()
    columns = column_names(FACT)
    singles, _ = _changes(args, pool)
    key = [columns.index(c) for c in FACT_KEY]
    where = " AND ".join(f"{c} = ?" for c in FACT_KEY)
    marks = ", ".join("?" for _ in columns)
    t0 = time.perf_counter()
    for i, (w, row) in enumerate(singles, 1):
        if w > 0:
            con.execute(f"INSERT INTO {FACT} VALUES ({marks})", row)
        else:
            con.execute(f"DELETE FROM {FACT} WHERE {where}", [row[k] for k in key])
        if i % RECOMPUTE_EVERY == 0:
            con.execute(f"CREATE OR REPLACE TABLE {VIEW} AS {query.sql}")
    single_s = time.perf_counter() - t0
    view_rows = con.execute(f"SELECT count(*) FROM {VIEW}").fetchone()[0]
    return _result(load_s, build_s, single_s, len(singles), view_rows, base_mb, loaded_mb)


def _command(args: argparse.Namespace, query: str, system: str) -> list[str] | None:
    """The command measuring one (query, system), or None if its system is not installed."""
    common = ["--scale", str(args.scale), "--query", query, "--seed", str(args.seed)]
    if system == "flink":
        python = flink_python()
        return None if python is None else [python, "-m", "bench.tpch.flink_peer", *common,
                                            "--changes", str(args.flink_changes)]
    extra = ["--provenance", args.provenance] if args.provenance and system in (
        "dyn", "general") else []
    if args.primary_keys:
        extra.append("--primary-keys")
    return [sys.executable, "-m", "bench.tpch.loaded", *common, "--system", system,
            "--changes", str(args.changes), "--batch", str(args.batch), *extra]


#: the rates and times ``--rounds`` reports as medians of a pair's runs
_MEDIAN_FIELDS = ("single_per_s", "single_us", "batch_per_s", "batch_us", "first_us", "median_us",
                  "p99_us", "max_us")


def _median_of(runs: list[dict]) -> dict:
    """One result from a (query, system)'s runs: its rates and times the runs' medians, the
    other fields (memory, rows) the first run's, each run's rates under ``runs``.  A failed
    run is the result."""
    failed = [r for r in runs if r.get("status") != "ok"]
    if failed or len(runs) == 1:
        return (failed or runs)[0]
    merged = dict(runs[0])
    for field in _MEDIAN_FIELDS:
        values = [r[field] for r in runs if r.get(field) is not None]
        if values:
            merged[field] = round(statistics.median(values), 1)
    merged["runs"] = [{f: r[f] for f in ("single_per_s", "batch_per_s") if f in r}
                      for r in runs]
    return merged


def run_all(args: argparse.Namespace) -> None:
    """Every (query, system) pair in its own process, ``--rounds`` times; results appended
    to ``--out``."""
    runs: dict[tuple[str, str], list[dict]] = {}
    for _ in range(args.rounds):
        for query in args.queries:
            for system in args.systems:
                cmd = _command(args, query, system)
                if cmd is None:
                    print(f"skipping {system}: not installed (see bench/README.md)", flush=True)
                    continue
                print("running", " ".join(cmd[2:]), flush=True)
                done = subprocess.run(cmd, capture_output=True, text=True,
                                      timeout=args.timeout)
                if done.returncode != 0:
                    result = {"status": "failed", "error": done.stderr.strip()[-500:]}
                else:
                    result = json.loads(done.stdout.strip().splitlines()[-1])
                result.update(scale=args.scale, query=query, system=system, date=now(),
                              primary_keys=args.primary_keys,
                              git=git_rev(), command="python -m bench.tpch.loaded " +
                              " ".join(sys.argv[1:]))
                print(json.dumps(result), flush=True)
                runs.setdefault((query, system), []).append(result)
    results = [_median_of(r) for r in runs.values()]
    out = Path(args.out)
    previous = json.loads(out.read_text())["results"] if out.exists() else []
    ran = {(r["scale"], r["query"], r["system"]) for r in results}
    keep = [r for r in previous if (r["scale"], r["query"], r["system"]) not in ran]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": machine(), "results": keep + results}, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.1)
    parser.add_argument("--query", choices=sorted(QUERIES), default="QH")
    parser.add_argument("--system", choices=SYSTEMS, default="dyn")
    parser.add_argument("--changes", type=int, default=2_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--flink-changes", type=int, default=1_000_000,
                        help="changes in Flink's stream (more where a query's rate is "
                             "beyond what a million resolves)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--provenance", choices=("why",), default=None,
                        help="upkeep systems: keep the view's why-provenance too")
    parser.add_argument("--primary-keys", action="store_true",
                        help="declare the tables' PRIMARY KEYs (upkeep and DuckDB check them)")
    parser.add_argument("--all", action="store_true", help="every query and system")
    parser.add_argument("--queries", nargs="+", default=list(LOADED_QUERIES))
    parser.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
    parser.add_argument("--timeout", type=float, default=1_800)
    parser.add_argument("--rounds", type=int, default=1,
                        help="with --all: runs of each pair, rates reported as medians")
    parser.add_argument("--out", default=None,
                        help="results file (default bench/results/loaded.json, or "
                             "loaded_keys.json with --primary-keys)")
    args = parser.parse_args()
    if args.out is None:
        args.out = f"bench/results/loaded{'_keys' if args.primary_keys else ''}.json"
    generate(args.scale)
    if args.all:
        run_all(args)
        return
    if args.system == "flink":
        parser.error("flink runs in its own interpreter: use --all, or bench.tpch.flink_peer")
    run = run_duckdb if args.system == "duckdb" else run_upkeep
    print(json.dumps({"status": "ok", **run(args)}))


if __name__ == "__main__":
    main()
