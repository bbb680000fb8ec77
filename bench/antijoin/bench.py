"""Anti-join benchmark: ``NOT EXISTS`` maintained by upkeep, read by counting-based
complement iteration (``lftj-incremental-maintenance.txt`` section 3.1.2), against DuckDB
recomputation.

Usage::

    python -m bench.antijoin.bench [--orders 100000,1000000] [--open 0.001,0.5] \\
        [--batches 20] [--batch 1000] [--seed 1]

Per size and share of open orders: ``orders(id, customer)`` holds ``--orders`` rows and
``shipments(order_id)`` one row per shipped order.  The view lists the open orders::

    SELECT id, customer FROM orders o
    WHERE NOT EXISTS (SELECT 1 FROM shipments s WHERE s.order_id = o.id)

Then ``--batches`` batches of up to ``--batch`` changes: half ship open orders, as many
cancel shipments, so the share of open orders stays put.  Reported per configuration: upkeep's time per batch against DuckDB recomputing
the query on the same tables (ratio), the time of one full read of the view against the
same DuckDB query, the count queries that read made against the left keys that probing
every key would touch, and the stored tuples: upkeep stores no rows for the result (a
materialized view would add one per open order).  Every read is compared with DuckDB's.

Writes ``bench/results/antijoin_latest.json`` and the "Anti-joins" section of
``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
from rich.console import Console
from rich.progress import track

import upkeep
from bench.common.doc_format import fmt, replace_section
from bench.common.environment import BENCH_DIR
from bench.common.orchestrate import run_meta

RESULTS = BENCH_DIR / "results" / "antijoin_latest.json"
DOCS = BENCH_DIR.parent / "docs" / "benchmarks.md"
SECTION = "## Anti-joins (NOT EXISTS) and complement iteration"
VIEW_SQL = ("SELECT id, customer FROM orders o WHERE NOT EXISTS "
            "(SELECT 1 FROM shipments s WHERE s.order_id = o.id)")
console = Console()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--orders", default="100000,1000000", help="comma-separated sizes")
    p.add_argument("--open", default="0.001,0.5", help="comma-separated shares of open orders")
    p.add_argument("--batches", type=int, default=20)
    p.add_argument("--batch", type=int, default=1000, help="changes per batch")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--no-docs", action="store_true")
    args = p.parse_args(argv)
    args.orders = [int(float(x)) for x in args.orders.split(",") if x.strip()]
    args.open = [float(x) for x in args.open.split(",") if x.strip()]
    return args


def _arrow(column: str, values: list[int]) -> pa.Table:
    return pa.table({column: pa.array(values, pa.int64())})


def run_one(n: int, open_share: float, args: argparse.Namespace) -> dict[str, Any]:
    rnd = random.Random(args.seed)
    orders = [(i, i % 997) for i in range(n)]
    open_ids = set(rnd.sample(range(n), int(n * open_share)))
    shipped = [i for i in range(n) if i not in open_ids]
    con = duckdb.connect()
    con.register("o_in", pa.table({"id": [i for i, _ in orders], "customer": [c for _, c in orders]}))
    con.execute("CREATE TABLE orders AS SELECT id::INTEGER AS id, customer::INTEGER AS customer "
                "FROM o_in")
    con.register("s_in", _arrow("order_id", shipped))
    con.execute("CREATE TABLE shipments AS SELECT order_id::INTEGER AS order_id FROM s_in")
    db = upkeep.connect()
    db.execute("CREATE TABLE orders (id INTEGER, customer INTEGER)")
    db.execute("CREATE TABLE shipments (order_id INTEGER)")
    started = time.perf_counter()
    db.insert("orders", orders)
    db.insert("shipments", [(i,) for i in shipped])
    db.create_view("open_orders", VIEW_SQL)
    build_s = time.perf_counter() - started
    view = db.runtime("open_orders")
    upkeep_batch, duckdb_batch = [], []
    open_list, shipped_set = sorted(open_ids), set(shipped)
    for _ in track(range(args.batches), description=f"{n:,} orders, {open_share:g} open",
                   console=console, transient=True):
        ship = rnd.sample(open_list, min(args.batch // 2, len(open_list)))
        cancel = rnd.sample(sorted(shipped_set), len(ship))  # the open share stays put
        t0 = time.perf_counter()
        with db.transaction():
            db.insert("shipments", [(i,) for i in ship])
            db.delete("shipments", [(i,) for i in cancel])
        upkeep_batch.append(time.perf_counter() - t0)
        con.register("ship", _arrow("order_id", ship))
        con.register("cancel", _arrow("order_id", cancel))
        con.execute("INSERT INTO shipments SELECT order_id::INTEGER FROM ship")
        con.execute("DELETE FROM shipments WHERE order_id IN (SELECT order_id FROM cancel)")
        t0 = time.perf_counter()
        expected = con.execute(VIEW_SQL).fetchall()
        duckdb_batch.append(time.perf_counter() - t0)
        shipped_set.difference_update(cancel)
        shipped_set.update(ship)
        open_set = set(open_list).difference(ship).union(cancel)
        open_list = sorted(open_set)
    before = view.counters()["complement_count_queries"]
    t0 = time.perf_counter()
    rows = db.view("open_orders").rows()
    read_s = time.perf_counter() - t0
    queries = view.counters()["complement_count_queries"] - before
    if sorted(rows) != sorted(expected):
        raise SystemExit(f"open_orders differs from DuckDB at {n} orders, {open_share} open")
    result = {
        "orders": n, "open_share": open_share, "result_rows": len(rows),
        "build_s": round(build_s, 3),
        "upkeep_batch_ms": round(1000 * statistics.median(upkeep_batch), 3),
        "duckdb_batch_ms": round(1000 * statistics.median(duckdb_batch), 3),
        "read_ms": round(1000 * read_s, 3),
        "count_queries": queries, "left_keys": n,
        "probed_keys": view.counters()["complement_probed_keys"],
        "stored_tuples": view.state_size(),
        "materialized_extra_rows": len(rows),
    }
    result["speedup"] = round(result["duckdb_batch_ms"] / result["upkeep_batch_ms"], 1)
    db.close()
    con.close()
    return result


def section(data: dict[str, Any]) -> str:
    lines = [SECTION, "",
             "Generated by `bench/antijoin/bench.py`: open orders, "
             f"`{VIEW_SQL}`, under batches of {data['batch']} changes (half ship an open "
             "order, half cancel a shipment). upkeep maintains the view as an anti-join and "
             "stores no rows for it; a read lists the complement of the matched keys by "
             "counting (LFTJ §3.1.2) when the complement is sparse, else probes every key. DuckDB recomputes the query after each batch on the "
             "same tables. Times are medians over the batches; every read equals DuckDB's.", "",
             f"- **Command:** `{data['command']}`",
             f"- **Date:** {data['date']}; whole run {data['total_seconds'] / 60:.1f} min",
             f"- **Machine:** {data['machine']}",
             f"- **Versions:** {data['versions']}", "",
             "| orders | open | result rows | upkeep ms / batch | DuckDB ms / batch | "
             "speedup | read ms | count queries (left keys) | stored tuples (+ rows a "
             "materialized view adds) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in data["results"]:
        lines.append(
            f"| {r['orders']:,} | {r['open_share']:g} | {r['result_rows']:,} | "
            f"{fmt(r['upkeep_batch_ms'], '.2f')} | {fmt(r['duckdb_batch_ms'], '.2f')} | "
            f"{r['speedup']:g}x | {fmt(r['read_ms'], '.1f')} | {r['count_queries']:,} "
            f"({r['left_keys']:,}) | {r['stored_tuples']:,} (+ {r['materialized_extra_rows']:,}) |")
    lines += ["", "- With few open orders a read makes a few count queries per open order "
              "(O(log n) each) instead of touching every order. With half the orders open, "
              "counting would cost more than probing, so the read probes every order's key "
              "(count queries 0).",
              "- The stored tuples are the orders (indexed by id) and the shipment counts; a "
              "materialized view would add a copy of every open order."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    started = time.perf_counter()
    results = [run_one(n, share, args) for n in args.orders for share in args.open]
    data = run_meta("bench.antijoin.bench", argv, started, [], batch=args.batch,
                    batches=args.batches)
    data["results"] = results
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    for r in results:
        console.print(r)
    if not args.no_docs:
        replace_section(DOCS, SECTION, section(data), before="## Recursive views")
        console.print(f"wrote {args.out} and the {SECTION[3:]!r} section of {DOCS}")


if __name__ == "__main__":
    sys.exit(main())
