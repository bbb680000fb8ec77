"""Autocommitted statements from many threads on one Spark connection: group commit.

TPC-H ``customer`` and ``orders`` bulk-loaded (``--scale``), the view ``join_agg`` (revenue
per customer) in keyed state; then ``--threads`` threads each autocommit ``--statements``
single-row order inserts (``INSERT ... VALUES``), all started together.  For each
``commit_window`` in ``--windows`` (seconds; 0 = group only what queues while a batch
runs), and for one thread committing the same statements alone: statements per second,
micro-batches (change files) written, and the median and worst statement latency.  The
view's rows are checked against DuckDB over the final tables.

Usage::

    .venv/bin/python -m bench.spark.group_commit_bench --scale 0.01
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import tempfile
import threading
import time
from decimal import Decimal
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from bench.spark.keyed_bench import VIEWS, normalized
from bench.tpch.data import generate, load_table
from bench.tpch.schema import create_table_sql

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results" / "spark_group_commit.json"
TABLES = ("customer", "orders")


def _literal(value) -> str:
    if isinstance(value, (int, float, Decimal)):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"


def run(spark, scale: float, threads: int, statements: int, window: float | None) -> dict:
    """One run: ``window`` None is one thread committing every statement alone."""
    import upkeep

    data = {t: load_table(scale, t) for t in TABLES}
    orders = data["orders"]
    held = threads * statements
    initial, rest = orders.slice(0, orders.num_rows - held), orders.slice(orders.num_rows - held)
    work = Path(tempfile.mkdtemp(prefix="group-commit-bench-"))
    for t in TABLES:
        (work / t).mkdir()
        pq.write_table(initial if t == "orders" else data[t], work / t / "part-0.parquet")
    db = upkeep.connect(engine="spark", spark=spark, shards=4, state="keyed",
                        database=work / "db", commit_window=window or 0.0)
    for t in TABLES:
        db.execute(create_table_sql(t))
    db.create_view("join_agg", VIEWS["join_agg"])
    for t in TABLES:
        db.load(t, str(work / t))
    db.view("join_agg").rows()
    changes = work / "db" / "changes"
    files = len(list(changes.glob("changes-*.jsonl")))
    columns = orders.column_names
    sql = [f"INSERT INTO orders ({', '.join(columns)}) VALUES "
           f"({', '.join(_literal(r[c]) for c in columns)})" for r in rest.to_pylist()]
    latencies: list[float] = []
    lock = threading.Lock()

    def writer(mine: list[str]) -> None:
        for statement in mine:
            t0 = time.perf_counter()
            db.execute(statement)
            with lock:
                latencies.append(time.perf_counter() - t0)

    t0 = time.perf_counter()
    if window is None:
        writer(sql)
    else:
        start = threading.Barrier(threads)

        def together(mine: list[str]) -> None:
            start.wait()
            writer(mine)

        workers = [threading.Thread(target=together, args=(sql[i::threads],))
                   for i in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    seconds = time.perf_counter() - t0
    got = normalized(db.view("join_agg").rows())
    batches = len(list(changes.glob("changes-*.jsonl"))) - files
    db.close()
    con = duckdb.connect()
    con.register("customer", data["customer"])
    con.register("orders", pa.concat_tables([initial, rest]))
    expected = normalized(con.execute(VIEWS["join_agg"]).fetchall())
    return {"scale": scale, "threads": 1 if window is None else threads,
            "window_s": window, "statements": held, "seconds": round(seconds, 2),
            "statements_per_s": round(held / seconds, 2), "micro_batches": batches,
            "median_latency_s": round(statistics.median(latencies), 2),
            "max_latency_s": round(max(latencies), 2), "equal_duckdb": got == expected}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=0.01)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--statements", type=int, default=5)
    parser.add_argument("--windows", default="0,0.05")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()
    from upkeep.spark import spark_session

    generate(args.scale)
    spark = spark_session("local[2]", config={"spark.sql.shuffle.partitions": "4",
                                              "spark.driver.memory": "6g"})
    results = []
    for window in [None, *(float(w) for w in args.windows.split(","))]:
        result = run(spark, args.scale, args.threads, args.statements, window)
        print(json.dumps(result), flush=True)
        results.append(result)
    out = Path(args.out)
    out.write_text(json.dumps({
        "command": "python -m bench.spark.group_commit_bench " + " ".join(sys.argv[1:]),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "results": results}, indent=1))


if __name__ == "__main__":
    main()
