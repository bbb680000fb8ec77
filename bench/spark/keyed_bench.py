"""Views in Spark's keyed state against the shard servers and Spark recomputation.

TPC-H ``customer``, ``orders`` and ``nation`` at two scale factors (the state grows 10x),
bulk-loaded, then micro-batches of order inserts: 1-row batches and 10,000-row batches.
Three views, each run alone (one streaming query per run):

* ``join_agg``: revenue per customer (``customer JOIN orders``, GROUP BY the customer);
* ``by_dimension``: revenue per nation name (``orders``, ``customer``, ``nation``), a
  three-way join grouped by a dimension attribute;
* ``distinct``: the distinct (nation, order priority) pairs;
* ``over_view``: a view over a view: the customers of ``join_agg`` whose revenue passes a
  threshold, counted per nation (``join_agg`` is maintained too).

For each (scale, view) and each of ``state="keyed"`` / ``state="shards"``: bulk-load
seconds, the median latency of the 1-row batches and of the 10k batches, and Spark's own
RocksDB bytes read and gets in the 1-row batches (``db.last_batch_metrics()``).  Spark
recomputation appends the same batch as a Parquet file and evaluates the view's SQL.  Every
run checks the view's rows against DuckDB over the final tables.

Results go to ``--out`` as a list of runs, each with its command and date; a rerun of some
(scale, view, system) replaces their earlier results and keeps the others.

Usage::

    .venv/bin/python -m bench.spark.keyed_bench --scales 0.1
    .venv/bin/python -m bench.spark.keyed_bench --scales 0.01 --big 1000 \\
        --out bench/results/spark_keyed_small.json
    .venv/bin/python -m bench.spark.keyed_bench --scales 1 --views join_agg --systems keyed \\
        --singles 1 --big 100000 --bigs 2 \\
        --masters 'local-cluster[1,1,1024];local-cluster[2,1,1024]' \\
        --out bench/results/spark_keyed_executors.json

``--masters`` runs each case on each Spark master (``;``-separated): executor JVMs of
``local-cluster[N,cores,MB]`` against one another for the throughput of big batches.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from bench.tpch.data import generate, load_table
from bench.tpch.schema import create_table_sql

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results" / "spark_keyed.json"
TABLES = ("customer", "orders", "nation")
VIEWS = {
    "join_agg": "SELECT c_custkey, COUNT(*) AS n, SUM(o_totalprice) AS revenue "
                "FROM customer JOIN orders ON c_custkey = o_custkey GROUP BY c_custkey",
    "by_dimension": "SELECT n_name, COUNT(*) AS n, SUM(o_totalprice) AS revenue "
                    "FROM orders, customer, nation WHERE o_custkey = c_custkey "
                    "AND c_nationkey = n_nationkey GROUP BY n_name",
    "distinct": "SELECT DISTINCT n_name, o_orderpriority FROM orders, customer, nation "
                "WHERE o_custkey = c_custkey AND c_nationkey = n_nationkey",
    "over_view": "SELECT n_name, COUNT(*) AS rich FROM join_agg, customer, nation "
                 "WHERE join_agg.c_custkey = customer.c_custkey AND c_nationkey = n_nationkey "
                 "AND revenue > 1000000 GROUP BY n_name",
}
INNER = {"over_view": ["join_agg"]}  # the views a view reads, created before it


def _rows(table: pa.Table) -> list[tuple]:
    return list(zip(*[c.to_pylist() for c in table.columns], strict=True))


def normalized(rows) -> Counter:
    """A bag of rows with floats and decimals rounded to cents (DuckDB sums doubles in
    another order)."""
    return Counter(tuple(round(float(v), 2) if isinstance(v, float) or hasattr(v, "as_tuple")
                         else v for v in r) for r in rows)


def run_one(scale: float, view: str, system: str, singles: int, big: int, bigs: int,
            master: str = "local[2]", partitions: int | None = None) -> dict:
    """One (scale, view, system) in this process, on Spark master ``master``, with
    ``partitions`` shuffle partitions (None: the session's default, the master's cores)."""
    from upkeep.spark import spark_session
    from upkeep.spark.session import default_partitions

    partitions = partitions or default_partitions(master)
    spark = spark_session(master, config={"spark.sql.shuffle.partitions": str(partitions),
                                          "spark.driver.memory": "6g"})
    data = {t: load_table(scale, t) for t in TABLES}
    held = singles + big * bigs
    orders = data["orders"]
    initial, rest = orders.slice(0, orders.num_rows - held), orders.slice(orders.num_rows - held)
    work = Path(tempfile.mkdtemp(prefix="keyed-bench-"))
    for t in TABLES:
        (work / t).mkdir()
        pq.write_table(initial if t == "orders" else data[t], work / t / "part-0.parquet")
    out: dict = {"scale": scale, "view": view, "system": system, "master": master,
                 "partitions": partitions,
                 "state_rows": sum(data[t].num_rows for t in TABLES) - held}
    sql = VIEWS[view]
    batches = [_rows(rest.slice(i, 1)) for i in range(singles)]
    batches += [_rows(rest.slice(singles + i * big, big)) for i in range(bigs)]
    if system == "spark-recompute":
        times = []
        for i, rows in enumerate(batches):
            t0 = time.perf_counter()
            pq.write_table(pa.Table.from_pylist(
                [dict(zip(orders.column_names, r, strict=True)) for r in rows],
                schema=orders.schema), work / "orders" / f"part-{i + 1}.parquet")
            for t in TABLES:
                spark.read.parquet(str(work / t)).createOrReplaceTempView(t)
            for inner in INNER.get(view, []):
                spark.sql(VIEWS[inner]).createOrReplaceTempView(inner)
            result = spark.sql(sql).toArrow()
            times.append(time.perf_counter() - t0)
        out["single_s"] = statistics.median(times[:singles])
        out["big_s"] = statistics.median(times[singles:])
        got = _rows(result)
    else:
        import upkeep

        db = upkeep.connect(engine="spark", spark=spark, shards=4, state=system,
                            database=work / "db")
        for t in TABLES:
            db.execute(create_table_sql(t))
        for inner in INNER.get(view, []):
            db.create_view(inner, VIEWS[inner])
        db.create_view(view, sql)
        t0 = time.perf_counter()
        for t in TABLES:
            db.load(t, str(work / t))
        db.view(view).rows()
        out["load_s"] = round(time.perf_counter() - t0, 2)
        out["explain"] = db.explain(view).splitlines()[-1]  # as it runs: sized by the loads
        times, metrics = [], []
        for rows in batches:
            t0 = time.perf_counter()
            db.insert("orders", rows)
            times.append(time.perf_counter() - t0)
            metrics.append(db.last_batch_metrics())
        out["single_s"] = statistics.median(times[:singles])
        out["big_s"] = statistics.median(times[singles:])
        out["single_bytes_read"] = statistics.median(m.get("bytes_read", 0)
                                                     for m in metrics[:singles])
        out["single_gets"] = statistics.median(m.get("gets", 0) for m in metrics[:singles])
        got = db.view(view).rows()
        db.close()
    con = duckdb.connect()
    for t in TABLES:
        con.register(t, data[t])
    for inner in INNER.get(view, []):
        con.execute(f"CREATE VIEW {inner} AS {VIEWS[inner]}")
    out["equal_duckdb"] = normalized(got) == normalized(con.execute(sql).fetchall())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scales", default="0.01,0.1")
    parser.add_argument("--views", default=",".join(VIEWS))
    parser.add_argument("--systems", default="keyed,shards,spark-recompute")
    parser.add_argument("--singles", type=int, default=5)
    parser.add_argument("--big", type=int, default=10_000)
    parser.add_argument("--bigs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--partitions", type=int, default=0,
                        help="spark.sql.shuffle.partitions (the keyed state's partitions; "
                             "default: what upkeep's session gives, the master's cores)")
    parser.add_argument("--masters", default="local[2]",
                        help="Spark masters to run each case on, comma-separated with ';' "
                        "(e.g. 'local-cluster[1,1,1024];local-cluster[2,1,1024]')")
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        scale, view, system = args.child
        print(json.dumps(run_one(float(scale), view, system, args.singles, args.big,
                                 args.bigs, args.masters, args.partitions)))
        sys.stdout.flush()
        import os

        os._exit(0)
    command = "python -m bench.spark.keyed_bench " + " ".join(sys.argv[1:])
    results = []
    for scale in [float(s) for s in args.scales.split(",")]:
        generate(scale, TABLES)
        for view, system, master in [(v, s, m) for v in args.views.split(",")
                                     for s in args.systems.split(",")
                                     for m in args.masters.split(";")]:
            cmd = [sys.executable, "-m", "bench.spark.keyed_bench", "--singles",
                   str(args.singles), "--big", str(args.big), "--bigs", str(args.bigs),
                   "--masters", master, "--partitions", str(args.partitions),
                   "--child", str(scale), view, system]
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT,
                                      timeout=args.timeout)
                lines = done.stdout.strip().splitlines()
                result = json.loads(lines[-1]) if lines else {
                    "scale": scale, "view": view, "system": system, "master": master,
                    "error": done.stderr.strip().splitlines()[-1:]}
            except subprocess.TimeoutExpired:
                result = {"scale": scale, "view": view, "system": system,
                          "master": master, "error": "timeout"}
            print(json.dumps(result), flush=True)
            results.append(result)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    runs = [{"command": command, "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
             "results": results}]
    if out.exists():  # a partial rerun replaces its own (scale, view, system) results only
        def case(r: dict) -> tuple:
            return (r["scale"], r["view"], r["system"], r.get("master", "local[2]"),
                    r.get("partitions", 4))

        done = {case(r) for r in results}
        for run in json.loads(out.read_text()).get("runs", []):
            run["results"] = [r for r in run["results"] if case(r) not in done]
            if run["results"]:
                runs.append(run)
    out.write_text(json.dumps({"runs": runs}, indent=1))


if __name__ == "__main__":
    main()
