"""Run the TPC-H update-stream benchmark: every (query, system) pair in its own process.

Usage::

    python -m bench.tpch.run [--scale 0.1] [--limit N] [--queries FQ1,...] \
        [--systems dyn,general,duckdb,pathway]

Writes ``bench/results/latest.json``, ``docs/benchmarks.md`` and
``docs/bench_tpch.png`` (plot only if matplotlib is installed).  Pathway runs in
its own interpreter (``bench/.venv-pathway`` by default, see ``--pathway-python``)
because pathway 0.33.0 requires ``pyarrow<26``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

import bench.tpch.data as tpch_data
import bench.tpch.stream as stream_mod
from bench.common.doc_format import replace_section
from bench.common.environment import BENCH_DIR, pathway_python
from bench.common.orchestrate import run_config, run_each, run_meta, save_results
from bench.tpch.expected import expected_rows
from bench.tpch.plot import write_plot
from bench.tpch.queries import DEFAULT_QUERIES, QUERIES
from bench.tpch.report import OWNED_SECTIONS, SECTION, SYSTEM_LABELS, TITLE, markdown, summarize

REPO = BENCH_DIR.parent
SYSTEMS = tuple(SYSTEM_LABELS)
_probe = Console()
console = _probe if _probe.is_terminal else Console(width=120)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--scale", type=float, default=0.1, help="TPC-H scale factor (default 0.1)")
    p.add_argument(
        "--limit",
        type=int,
        default=None,
        help="stream only the first N fact rows per query (default: all)",
    )
    p.add_argument("--queries", default=",".join(DEFAULT_QUERIES), help="comma-separated")
    p.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated")
    p.add_argument("--seed", type=int, default=1, help="seed of the 10%% delete sample")
    p.add_argument("--batch", type=int, default=1000, help="DuckDB recompute batch size")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per configuration")
    p.add_argument("--pathway-python", default=None, help="interpreter with pathway installed")
    p.add_argument("--out", type=Path, default=BENCH_DIR / "results" / "latest.json")
    p.add_argument("--docs", type=Path, default=REPO / "docs" / "benchmarks.md")
    p.add_argument("--plot", type=Path, default=REPO / "docs" / "bench_tpch.png")
    p.add_argument("--no-docs", action="store_true", help="do not write docs/ files")
    p.add_argument(
        "--report-only",
        action="store_true",
        help="only re-render docs/ from the existing --out JSON (no runs)",
    )
    args = p.parse_args(argv)
    args.queries = [q.strip() for q in args.queries.split(",") if q.strip()]
    args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    for q in args.queries:
        if q not in QUERIES:
            p.error(f"unknown query {q!r}; known: {', '.join(QUERIES)}")
    for s in args.systems:
        if s not in SYSTEMS:
            p.error(f"unknown system {s!r}; known: {', '.join(SYSTEMS)}")
    return args


def prepare(args: argparse.Namespace) -> dict[str, tuple[Path, int]]:
    """Generate data and streams; return ``query -> (stream_dir, expected_rows)``."""
    with console.status(f"tpchgen-cli: TPC-H SF {args.scale:g} (cached after the first run)"):
        tpch_data.generate(args.scale)
    root = tpch_data.scale_dir(args.scale) / "streams"
    prepared = {}
    for q in args.queries:
        query = QUERIES[q]
        with console.status(f"preparing stream and reference result for {q}"):
            d = stream_mod.build(
                query, lambda t: tpch_data.load_table(args.scale, t), root, args.limit, args.seed
            )
            cache = d / f"expected_{q}.json"
            cached = json.loads(cache.read_text()) if cache.exists() else {}
            if cached.get("sql") == query.sql:  # the SQL may have changed since it was cached
                expected = cached["rows"]
            else:
                expected = expected_rows(d, query)
                cache.write_text(json.dumps({"rows": expected, "sql": query.sql}))
        prepared[q] = (d, expected)
    return prepared


def run_all(args: argparse.Namespace, prepared: dict[str, tuple[Path, int]]) -> list[dict]:
    """Run every configuration with a rich progress display."""
    pw_python = pathway_python(args.pathway_python)

    def execute(config: tuple[str, str], on_progress) -> dict[str, Any]:
        q, system = config
        stream_dir, expected = prepared[q]
        if system == "pathway" and pw_python is None:
            result = {"query": q, "system": system, "status": "skipped",
                      "error": "pathway not installed (see bench/README.md)"}
        else:
            python = pw_python if system == "pathway" else sys.executable
            log = tpch_data.DATA_ROOT / "logs" / f"{q}-{system}.log"
            result = run_config(python, system, q, stream_dir, args.timeout, log, on_progress,
                                args.batch)
        result["expected_rows"] = expected
        if result.get("status") == "ok" and result.get("view_rows") is not None:
            result["rows_match"] = result.get("view_rows") == expected
        return result

    configs = [(q, s) for q in args.queries for s in args.systems]
    return run_each(configs, lambda c: f"{c[0]:>4} {SYSTEM_LABELS[c[1]]}", execute, _one_line,
                    console)


def _one_line(r: dict[str, Any]) -> str:
    head = f"{r['query']:>4} {SYSTEM_LABELS[r['system']]:<26}"
    if r.get("status") != "ok":
        return f"{head} [red]{r.get('status')}[/red]: {r.get('error', '')}"
    check = (
        ""
        if r.get("rows_match") is not False
        else f" [red]rows {r['view_rows']} != {r['expected_rows']}[/red]"
    )
    return (
        f"{head} {r['updates_per_s']:>12,.0f} upd/s  peak {r['peak_mb']:>8,.1f} MB  "
        f"Δ {r['delta_mb']:>8,.1f} MB{check}"
    )


def print_tables(results: list[dict[str, Any]]) -> None:
    """Print the measurements and the ratio summary."""
    t = Table(title="TPC-H update streams")
    for col in ("query", "system", "status", "events", "updates/s", "peak MB", "Δ MB", "rows ok"):
        t.add_column(col, justify="right" if col not in ("query", "system", "status") else "left")
    for r in results:
        ok = r.get("status") == "ok"
        t.add_row(
            r["query"],
            r["system"],
            r.get("status", "?"),
            f"{r['events']:,}" if ok else "",
            f"{r['updates_per_s']:,.0f}" if ok else "",
            f"{r['peak_mb']:,.1f}" if ok else "",
            f"{r['delta_mb']:,.1f}" if ok else "",
            {True: "yes", False: "NO", None: "n/a"}[r.get("rows_match")] if ok else "",
        )
    console.print(t)
    s = Table(title="(a) dyn relative to the others")
    for col in ("query", "dyn upd/s", "mem dyn/general", "dyn/duckdb", "dyn/pathway"):
        s.add_column(col, justify="right")
    for row in summarize(results):

        def f(x: float | None, fmt: str) -> str:
            return "–" if x is None else format(x, fmt)

        s.add_row(
            row["query"],
            f(row["dyn_updates_per_s"], ",.0f"),
            f(row["mem_dyn_over_general"], ".2f"),
            f(row["speed_dyn_over_duckdb"], ".2f"),
            f(row["speed_dyn_over_pathway"], ".2f"),
        )
    console.print(s)


def write_docs(args: argparse.Namespace, data: dict[str, Any]) -> None:
    """Write the TPC-H part of ``docs/benchmarks.md`` (keeping the sections other benchmarks
    own) and the plot."""
    args.docs.parent.mkdir(parents=True, exist_ok=True)
    if not args.docs.exists():
        args.docs.write_text(f"{TITLE}\n")
    replace_section(args.docs, SECTION, markdown(data), owns=OWNED_SECTIONS)
    console.print(f"wrote {args.docs}")
    if write_plot(data["results"], args.plot):
        console.print(f"wrote {args.plot}")
    else:
        console.print("matplotlib not installed: plot skipped")


def main(argv: list[str] | None = None) -> None:
    """Entry point."""
    args = parse_args(argv)
    if args.report_only:
        data = json.loads(args.out.read_text())
        print_tables(data["results"])
        write_docs(args, data)
        return
    started = time.perf_counter()
    prepared = prepare(args)
    results = run_all(args, prepared)
    print_tables(results)
    data = {
        "meta": run_meta("bench.tpch.run", argv, started, results, scale=args.scale,
                         limit=args.limit, seed=args.seed, batch=args.batch,
                         delete_fraction=stream_mod.DELETE_FRACTION, timeout_s=args.timeout),
        "summary": summarize(results),
        "results": results,
    }
    save_results(args.out, data)
    console.print(f"wrote {args.out}")
    if not args.no_docs:
        write_docs(args, data)


if __name__ == "__main__":
    main()
