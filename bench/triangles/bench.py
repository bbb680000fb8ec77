"""Triangle-count benchmark: a cyclic join maintained under single-edge updates on a
power-law graph, every (size, system) pair in its own process.

Usage::

    python -m bench.triangles.bench [--edges 10000,100000,1000000] \\
        [--systems lftj,general,duckdb] [--inserts 1000] [--samples 20] [--timeout 1800]

Per size (graph_stream.py: directed Chung-Lu graph, gamma 2.5, average degree 8):
bulk load ``--edges`` edges, then ``--inserts`` single-edge inserts, then deletes of
``--delete-fraction`` of the edges, one edge each.  Systems (triangle_runner.py):
``lftj`` (upkeep strategy "lftj": leapfrog triejoin with sensitivity indices; per-update
operation counts from ``db.view(name).counters()``), ``general`` (upkeep's delta-join
baseline: materializing hash joins), ``duckdb`` (recompute the count per update, on
``--samples`` updates), and ``auto`` (upkeep's own choice; not in the default set).

Reported: time per update (all updates for upkeep, the samples for DuckDB), seeks+nexts
per update for lftj, the ratio DuckDB recompute / lftj per update (target >= 100x at
10^6 edges) and how the operation counts change as the graph grows 10x.  Each
configuration gets ``--timeout`` seconds and ``--memory-limit`` GiB of resident memory;
each final count is compared with DuckDB's on the final edges.

Writes ``bench/results/triangle_latest.json`` and (unless ``--no-docs``) the "Inequality
and cyclic joins" section of ``docs/benchmarks.md`` plus ``docs/theta_bench.png``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
from rich.console import Console
from rich.table import Table

from bench.common.doc_format import fmt
from bench.common.environment import BENCH_DIR
from bench.common.orchestrate import publish, run_command, run_each, run_meta
from bench.theta.plot import TRIANGLE_LABELS, triangle_summary, write_all
from bench.triangles.graph_stream import CREATE_SQL, TRIANGLE_SQL, build

RESULTS = BENCH_DIR / "results" / "triangle_latest.json"
LOGS = BENCH_DIR / "data" / "logs" / "triangle"
DEFAULT_SYSTEMS = ("lftj", "general", "duckdb")
ALL_SYSTEMS = (*DEFAULT_SYSTEMS, "auto")
_probe = Console()
console = _probe if _probe.is_terminal else Console(width=120)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--edges", default="10000,100000,1000000", help="comma-separated sizes")
    p.add_argument("--systems", default=",".join(DEFAULT_SYSTEMS), help="comma-separated")
    p.add_argument("--inserts", type=int, default=1000, help="single-edge inserts")
    p.add_argument("--delete-fraction", type=float, default=0.1,
                   help="single-edge deletes, as a fraction of --edges")
    p.add_argument("--samples", type=int, default=20, help="DuckDB recomputations per size")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--gamma", type=float, default=2.5, help="power-law exponent")
    p.add_argument("--avg-degree", type=float, default=8.0, help="edges per node")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per configuration")
    p.add_argument("--memory-limit", type=float, default=18.0,
                   help="GiB of RSS per configuration")
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--no-docs", action="store_true", help="only write the JSON")
    p.add_argument("--report-only", action="store_true", help="re-render docs from --out")
    args = p.parse_args(argv)
    args.edges = [int(float(x)) for x in args.edges.split(",") if x.strip()]
    args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    for s in args.systems:
        if s not in ALL_SYSTEMS:
            p.error(f"unknown system {s!r}; known: {', '.join(ALL_SYSTEMS)}")
    return args


def reference(args: argparse.Namespace, edges: int) -> dict[str, Any]:
    """Graph statistics and DuckDB's count on the initial and the final edges."""
    stream = build(edges, args.inserts, args.delete_fraction, args.seed, args.gamma,
                   args.avg_degree)
    con = duckdb.connect()
    con.execute(CREATE_SQL)
    keep = stream.final_mask()
    n = stream.initial
    con.register("e0", pa.table({"src": stream.src[:n], "dst": stream.dst[:n]}))
    con.execute("INSERT INTO edges SELECT * FROM e0").fetchall()
    initial = con.execute(TRIANGLE_SQL).fetchall()[0][0]
    con.execute("DELETE FROM edges").fetchall()
    con.register("e1", pa.table({"src": stream.src[keep], "dst": stream.dst[keep]}))
    con.execute("INSERT INTO edges SELECT * FROM e1").fetchall()
    t0 = time.perf_counter()
    final = con.execute(TRIANGLE_SQL).fetchall()[0][0]
    return {
        "nodes": stream.nodes,
        **stream.degrees(),
        "inserts": len(stream.inserts),
        "deletes": len(stream.deletes),
        "final_edges": int(keep.sum()),
        "initial_count": int(initial),
        "final_count": int(final),
        "duckdb_count_seconds": round(time.perf_counter() - t0, 3),
    }


def command(args: argparse.Namespace, edges: int, system: str) -> list[str]:
    return [sys.executable, "-m", "bench.triangles.runner", "--system", system,
            "--edges", str(edges), "--inserts", str(args.inserts),
            "--delete-fraction", str(args.delete_fraction), "--samples", str(args.samples),
            "--seed", str(args.seed), "--gamma", str(args.gamma),
            "--avg-degree", str(args.avg_degree)]


def run_all(args: argparse.Namespace, expected: dict[int, dict]) -> list[dict[str, Any]]:
    def execute(config: tuple[int, str], on_progress) -> dict[str, Any]:
        n, system = config
        result = run_command(command(args, n, system), {"query": f"triangle-{n}", "system": system},
                             args.timeout, LOGS / f"{n}-{system}.log", on_progress,
                             memory_limit_mb=args.memory_limit * 1024)
        result["edges"] = n
        result["expected"] = {k: expected[n][k] for k in ("initial_count", "final_count")}
        if result.get("status") == "ok":
            result["matches_duckdb"] = (
                result.get("final_count") == expected[n]["final_count"]
                and result.get("initial_count") == expected[n]["initial_count"]
            )
        return result

    configs = [(n, s) for n in args.edges for s in args.systems]
    return run_each(configs, lambda c: f"{c[0]:,} edges {TRIANGLE_LABELS[c[1]]}", execute,
                    one_line, console)


def one_line(r: dict[str, Any]) -> str:
    head = f"{r['edges']:>10,} edges {TRIANGLE_LABELS[r['system']]:<30}"
    if r.get("status") != "ok":
        return f"{head} [red]{r.get('status')}[/red]: {str(r.get('error', ''))[:150]}"
    u = r["update_us"]["all"]
    ops = ((r.get("ops") or {}).get("all") or {}).get("seeks_plus_nexts") or {}
    ops_text = f"  seeks+nexts median {ops['median']:,.0f}" if ops.get("n") else ""
    check = "" if r.get("matches_duckdb") else " [red]count differs from DuckDB[/red]"
    return (f"{head} per update median {u['median']:>12,.1f} µs mean {u['mean']:>12,.1f} µs"
            f"  peak {r['peak_mb']:>8,.1f} MB{ops_text}{check}")


def print_summary(data: dict[str, Any]) -> None:
    t = Table(title="triangle count under single-edge updates")
    cols = ("edges", "lftj µs/update (median)", "general µs/update (median)",
            "DuckDB µs/update (median)", "DuckDB/lftj (mean)", "DuckDB/lftj (same updates)",
            "lftj seeks+nexts/update (mean)")
    for c in cols:
        t.add_column(c, justify="right")

    for row in data["summary"]["sizes"]:
        t.add_row(f"{row['edges']:,}", fmt(row["lftj_median_us"], ",.1f"),
                  fmt(row["general_median_us"], ",.1f"), fmt(row["duckdb_median_us"], ",.0f"),
                  fmt(row["duckdb_over_lftj_mean"], ",.0f"),
                  fmt(row["duckdb_over_lftj_same_updates"], ",.0f"),
                  fmt(row["lftj_ops_mean"], ",.1f"))
    console.print(t)
    for line in data["summary"].get("notes", []):
        console.print(line)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.report_only:
        data = json.loads(args.out.read_text())
        print_summary(data)
        console.print(write_all())
        return
    started = time.perf_counter()
    expected = {}
    for n in args.edges:
        with console.status(f"{n:,} edges: graph and DuckDB reference counts"):
            expected[n] = reference(args, n)
        e = expected[n]
        console.print(f"{n:,} edges: {e['nodes']:,} nodes, max out/in degree "
                      f"{e['max_out_degree']:,}/{e['max_in_degree']:,}, {e['two_paths']:,} "
                      f"2-paths, count {e['initial_count']:,} -> {e['final_count']:,} "
                      f"after {e['inserts']:,} inserts and {e['deletes']:,} deletes")
    results = run_all(args, expected)
    data = {
        "meta": run_meta("bench.triangles.bench", argv, started, results, sql=TRIANGLE_SQL,
                         inserts=args.inserts, delete_fraction=args.delete_fraction,
                         samples=args.samples, seed=args.seed, gamma=args.gamma,
                         avg_degree=args.avg_degree, timeout_s=args.timeout,
                         memory_limit_gib=args.memory_limit),
        "graphs": {str(n): e for n, e in expected.items()},
        "results": results,
    }
    data["summary"] = triangle_summary(data)
    publish(data, args.out, print_summary, None if args.no_docs else write_all, console)

if __name__ == "__main__":
    main()
