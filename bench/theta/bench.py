"""GCQ1-GCQ8 benchmark: inequality joins (Table 2 of dynamic-yannakakis-iedyn.txt) under
synthetic insert streams, every (query, system) pair in its own process.

Usage::

    python -m bench.theta.bench [--scale 0.3] [--queries GCQ1,...] \\
        [--systems auto,general,duckdb,pathway] [--batch 1000] [--timeout 600]

Systems: ``auto`` (upkeep's own choice: IEDyn, i.e. strategy dyn with theta predicates),
``general`` (upkeep's materializing hash joins + filters), ``duckdb`` (recompute after
every batch), ``pathway`` (cross join + filter, see gcq_pathway_queries.py), and ``dyn``
(IEDyn forced; not in the default set since auto should pick it).

Streams: Table 2's lengths times ``--scale`` (gcq_queries.py).  At scale 1 the outputs
reach 10^8 rows (GCQ4: ~3*10^8), which upkeep general cannot hold in 24 GiB and whose
enumeration alone (to verify the result) takes tens of minutes; the default 0.3 keeps
the largest output near 8*10^6 rows.  Each configuration gets ``--timeout`` seconds and
is killed above ``--memory-limit`` GiB of resident memory (recorded as "timeout" /
"memory limit").  Every result's fingerprint (row count + checksum, bench/theta/fingerprint.py)
is compared with DuckDB's on the final tables.

Writes ``bench/results/gcq_latest.json`` and (unless ``--no-docs``) the "Inequality and
cyclic joins" section of ``docs/benchmarks.md`` plus ``docs/theta_bench.png``
(bench/theta/plot.py; ``--report-only`` re-renders them from the JSON).
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
from bench.common.environment import BENCH_DIR, pathway_python
from bench.common.orchestrate import publish, run_command, run_each, run_meta
from bench.theta.fingerprint import sql_select
from bench.theta.plot import GCQ_LABELS, gcq_summary, write_all
from bench.theta.queries import QUERIES, create_table_sql, generate, stream_length

RESULTS = BENCH_DIR / "results" / "gcq_latest.json"
LOGS = BENCH_DIR / "data" / "logs" / "gcq"
DEFAULT_SYSTEMS = ("auto", "general", "duckdb", "pathway")
ALL_SYSTEMS = (*DEFAULT_SYSTEMS, "dyn")
_probe = Console()
console = _probe if _probe.is_terminal else Console(width=120)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--scale", type=float, default=0.3, help="stream length = Table 2 × scale")
    p.add_argument("--queries", default=",".join(QUERIES), help="comma-separated")
    p.add_argument("--systems", default=",".join(DEFAULT_SYSTEMS), help="comma-separated")
    p.add_argument("--batch", type=int, default=1000, help="rows per batch (one transaction)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per configuration")
    p.add_argument(
        "--memory-limit", type=float, default=18.0, help="GiB of RSS per configuration"
    )
    p.add_argument("--no-verify", action="store_true",
                   help="upkeep runners skip enumerating the view (no fingerprint check)")
    p.add_argument("--pathway-python", default=None, help="interpreter with pathway installed")
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--no-docs", action="store_true", help="only write the JSON")
    p.add_argument("--report-only", action="store_true", help="re-render docs from --out")
    args = p.parse_args(argv)
    args.queries = [q.strip().upper() for q in args.queries.split(",") if q.strip()]
    args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    for q in args.queries:
        if q not in QUERIES:
            p.error(f"unknown query {q!r}; known: {', '.join(QUERIES)}")
    for s in args.systems:
        if s not in ALL_SYSTEMS:
            p.error(f"unknown system {s!r}; known: {', '.join(ALL_SYSTEMS)}")
    return args


def reference(query: str, scale: float, seed: int) -> dict[str, Any]:
    """DuckDB's fingerprint of the view over the final tables (all inserts applied)."""
    q = QUERIES[query]
    stream = generate(q, scale, seed)
    con = duckdb.connect()
    for name in stream.names:
        con.execute(create_table_sql(name, stream.columns[name]))
        data = stream.rows[name]
        table = pa.table({c: data[:, j] for j, c in enumerate(stream.columns[name])})
        con.register("rows_in", table)
        con.execute(f"INSERT INTO {name} SELECT * FROM rows_in").fetchall()
        con.unregister("rows_in")
    t0 = time.perf_counter()
    n, cs = con.execute(f"SELECT {sql_select(list(q.columns))} FROM ({q.sql})").fetchall()[0]
    return {
        "rows": int(n),
        "checksum": int(cs),
        "seconds": round(time.perf_counter() - t0, 3),
        "relation_sizes": {name: len(stream.rows[name]) for name in stream.names},
    }


def command(args: argparse.Namespace, query: str, system: str, pw_python: str | None):
    """The runner command line of one configuration (None: Pathway not installed)."""
    common = ["--query", query, "--scale", str(args.scale), "--batch", str(args.batch),
              "--seed", str(args.seed)]
    if system == "pathway":
        if pw_python is None:
            return None
        return [pw_python, "-m", "bench.theta.run_pathway", *common]
    if system != "duckdb" and args.no_verify:
        common.append("--no-enumerate")
    return [sys.executable, "-m", "bench.theta.runner", "--system", system, *common]


def run_all(args: argparse.Namespace, expected: dict[str, dict]) -> list[dict[str, Any]]:
    pw_python = pathway_python(args.pathway_python)

    def execute(config: tuple[str, str], on_progress) -> dict[str, Any]:
        q, system = config
        cmd = command(args, q, system, pw_python)
        if cmd is None:
            result = {"query": q, "system": system, "status": "skipped",
                      "error": "pathway not installed (see bench/README.md)"}
        else:
            result = run_command(cmd, {"query": q, "system": system}, args.timeout,
                                 LOGS / f"{q}-{system}.log", on_progress,
                                 memory_limit_mb=args.memory_limit * 1024)
        exp = expected[q]
        result["expected"] = {"rows": exp["rows"], "checksum": exp["checksum"]}
        if result.get("status") == "ok" and result.get("fingerprint") is not None:
            result["matches_duckdb"] = result["fingerprint"] == result["expected"]
        return result

    configs = [(q, s) for q in args.queries for s in args.systems]
    return run_each(configs, lambda c: f"{c[0]} {GCQ_LABELS[c[1]]}", execute, one_line, console)


def one_line(r: dict[str, Any]) -> str:
    head = f"{r['query']:>5} {GCQ_LABELS[r['system']]:<32}"
    if r.get("status") != "ok":
        return f"{head} [red]{r.get('status')}[/red]: {str(r.get('error', ''))[:150]}"
    check = {True: "", None: " (not verified)"}.get(r.get("matches_duckdb"),
                                                  " [red]fingerprint differs from DuckDB[/red]")
    rows = "–" if r.get("view_rows") is None else f"{r['view_rows']:,}"
    return (f"{head} {r['seconds']:>9.3f} s  peak {r['peak_mb']:>8,.1f} MB  "
            f"rows {rows:>12}  [{r.get('strategy', '')}]{check}")


def print_summary(data: dict[str, Any]) -> None:
    t = Table(title=f"GCQ inequality joins, scale {data['meta']['scale']:g}")
    cols = ("query", "output rows", "auto strategy", "auto s", "general/auto time",
            "duckdb/auto time", "pathway/auto time", "general/auto memory", "auto state")
    for c in cols:
        t.add_column(c, justify="left" if c in ("query", "auto strategy") else "right")

    for row in data["summary"]:
        t.add_row(row["query"], fmt(row["output_rows"], ",d"), row.get("auto_strategy") or "–",
                  fmt(row["auto_seconds"], ".3f"), fmt(row["time_general_over_auto"], ",.1f"),
                  fmt(row["time_duckdb_over_auto"], ",.1f"),
                  fmt(row["time_pathway_over_auto"], ",.1f"),
                  fmt(row["memory_general_over_auto"], ",.1f"),
                  fmt(row["auto_state_size"], ",d"))
    console.print(t)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.report_only:
        data = json.loads(args.out.read_text())
        print_summary(data)
        console.print(write_all())
        return
    started = time.perf_counter()
    expected = {}
    for q in args.queries:
        with console.status(f"{q}: DuckDB reference on the final tables"):
            expected[q] = reference(q, args.scale, args.seed)
        n = stream_length(QUERIES[q], args.scale)
        batches = -(-n // args.batch)
        note = " [yellow](fewer than 5 batches: mostly a bulk build)[/yellow]" if batches < 5 else ""
        console.print(f"{q}: stream {n:,} inserts in {batches} batches, output "
                      f"{expected[q]['rows']:,} rows{note}")
    results = run_all(args, expected)
    data = {
        "meta": run_meta("bench.theta.bench", argv, started, results, scale=args.scale,
                         batch=args.batch, seed=args.seed, timeout_s=args.timeout,
                         verified=not args.no_verify, memory_limit_gib=args.memory_limit),
        "queries": {
            q: {"expression": QUERIES[q].expression, "sql": QUERIES[q].sql,
                "kind": QUERIES[q].kind, "predicates": QUERIES[q].predicates,
                "table2_stream": QUERIES[q].stream, "table2_output": QUERIES[q].paper_output,
                "stream": stream_length(QUERIES[q], args.scale), "reference": expected[q]}
            for q in args.queries
        },
        "results": results,
    }
    data["summary"] = gcq_summary(data)
    publish(data, args.out, print_summary, None if args.no_docs else write_all, console)

if __name__ == "__main__":
    main()
