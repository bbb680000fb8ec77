"""docs/benchmarks.md's "Loaded tables" section and its plots, from ``bench.tpch.loaded`` results.

Usage::

    python -m bench.tpch.loaded_report [--results bench/results/loaded.json]
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from bench.common.doc_format import fmt_number, replace_section, save_figure

DOCS = Path(__file__).resolve().parents[2] / "docs"
HEADING = "## Loaded tables, a subscriber attached"
SYSTEMS = {"dyn": "upkeep dyn", "general": "upkeep general", "duckdb": "DuckDB recompute/1000",
           "flink": "Flink SQL streaming"}


def _ratio(a: float | None, b: float | None) -> str:
    return "–" if not a or not b else f"{a / b:.2f}"


def table(results: list[dict]) -> str:
    """One row per (scale, query, system), with the ratios the issue's targets name."""
    lines = ["| SF | query | system | single-row changes/s | batched changes/s "
             "| batch / single per change | loaded MB | loaded MB / DuckDB | "
             "speed / DuckDB recompute |",
             "|---:|---|---|---:|---:|---:|---:|---:|---:|"]
    by_key = {(r["scale"], r["query"], r["system"]): r for r in results}
    for r in sorted(results, key=lambda r: (r["scale"], r["query"], list(SYSTEMS).index(r["system"]))):
        if r.get("status") != "ok":
            lines.append(f"| {r['scale']:g} | {r['query']} | {SYSTEMS[r['system']]} | failed: "
                         f"{r.get('error', '')[-80:]} | | | | | |")
            continue
        duck = by_key.get((r["scale"], r["query"], "duckdb"), {})
        single, batch = r.get("single_per_s"), r.get("batch_per_s") or r.get("stream_per_s")
        lines.append(
            f"| {r['scale']:g} | {r['query']} | {SYSTEMS[r['system']]} | {fmt_number(single)} | "
            f"{fmt_number(batch)} | {_ratio(batch, single)} | {fmt_number(r['loaded_mb'])} | "
            f"{_ratio(r['loaded_mb'], duck.get('loaded_mb'))} | "
            f"{_ratio(single, duck.get('single_per_s')) if single and r['system'] != 'duckdb' else '–'} |")
    return "\n".join(lines)


def _us(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f}"


def setup_and_latency(results: list[dict]) -> str:
    """Per (scale, query, system): how long the load and the view's build took, and the
    single-row changes' latencies (runs from before the harness timed each change show
    only their mean)."""
    lines = ["| SF | query | system | load s | build s | mean µs | first µs | median µs "
             "| p99 µs | slowest µs |",
             "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in sorted(results, key=lambda r: (r["scale"], r["query"], list(SYSTEMS).index(r["system"]))):
        if r.get("status") != "ok" or r["system"] == "flink":
            continue
        lines.append(
            f"| {r['scale']:g} | {r['query']} | {SYSTEMS[r['system']]} | {r['load_seconds']:,.2f} | "
            f"{r['build_seconds']:,.2f} | {_us(r.get('single_us'))} | {_us(r.get('first_us'))} | "
            f"{_us(r.get('median_us'))} | {_us(r.get('p99_us'))} | {_us(r.get('max_us'))} |")
    return "\n".join(lines)


def against_flink(results: list[dict]) -> str:
    """upkeep dyn beside Flink SQL per (scale, query): changes/s and memory, as ratios."""
    by_key = {(r["scale"], r["query"], r["system"]): r for r in results if r.get("status") == "ok"}
    lines = ["| SF | query | upkeep dyn single-row changes/s | upkeep dyn batched changes/s | "
             "Flink streamed changes/s (of N) | upkeep batched / Flink | upkeep MB | "
             "Flink MB | Flink MB / upkeep MB | view rows equal DuckDB's |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for scale, query, system in sorted(by_key):
        dyn = by_key[(scale, query, system)]
        flink = by_key.get((scale, query, "flink"))
        if system != "dyn" or flink is None:
            continue
        duck_rows = by_key.get((scale, query, "duckdb"), {}).get("view_rows")
        rows_ok = "–" if duck_rows is None else "yes" if flink["view_rows"] == duck_rows else (
            f"no: {flink['view_rows']:,} vs {duck_rows:,}")
        lines.append(
            f"| {scale:g} | {query} | {fmt_number(dyn['single_per_s'])} | "
            f"{fmt_number(dyn['batch_per_s'])} | {fmt_number(flink['stream_per_s'])} "
            f"({fmt_number(flink.get('streamed_changes'))}) | "
            f"{_ratio(dyn['batch_per_s'], flink['stream_per_s'])} | {fmt_number(dyn['loaded_mb'])} | "
            f"{fmt_number(flink['loaded_mb'])} | {_ratio(flink['loaded_mb'], dyn['loaded_mb'])} | "
            f"{rows_ok} |")
    return "\n".join(lines)


def plots(results: list[dict]) -> list[str]:
    """Changes/s and memory against scale factor, one line per (query, system); without
    matplotlib (the ``bench`` extra) the plots are skipped and the docs keep the last ones."""
    names = ["loaded_speed.png", "loaded_memory.png"]
    try:
        import matplotlib
    except ModuleNotFoundError:
        print("matplotlib is not installed (pip install -e '.[bench]'): plots not redrawn")
        return names

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for field, label, name in (("single_per_s", "changes/s (single-row; Flink: streamed)",
                                "loaded_speed.png"),
                               ("loaded_mb", "MB after load and view build", "loaded_memory.png")):
        fig, ax = plt.subplots(figsize=(6, 4))
        for query in sorted({r["query"] for r in results}):
            for system in SYSTEMS:
                key = "stream_per_s" if system == "flink" and field == "single_per_s" else field
                points = sorted((r["scale"], r[key]) for r in results
                                if r["query"] == query and r["system"] == system
                                and r.get("status") == "ok" and r.get(key))
                if points:
                    ax.plot(*zip(*points, strict=True), marker="o",
                            label=f"{query} {SYSTEMS[system]}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("TPC-H scale factor")
        ax.set_ylabel(label)
        ax.legend(fontsize=7)
        fig.tight_layout()
        save_figure(fig, DOCS / "img" / name)
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", default="bench/results/loaded.json")
    args = parser.parse_args()
    data = json.loads(Path(args.results).read_text())
    results = data["results"]
    images = plots(results)
    commands = ", ".join(f"`{c}`" for c in dict.fromkeys(
        re.sub(r" --out \S+", "", r["command"]) for r in results))
    runs = ", ".join(dict.fromkeys(f"{r['date']} (git {r['git']})" for r in results))
    text = f"""{HEADING}

The case users live in: the query's tables bulk-loaded first (read from Parquet as Arrow a
million rows at a time, one transaction per chunk), the view built, a subscriber attached,
then 2,000 single-row changes, each its own transaction (updates of random line items, each a
delete and an insert), and then 10,000 changes of the same kind in one transaction. DuckDB is
the recomputation peer: the same tables loaded the same way, the same single-row changes as
`DELETE` (by key) / `INSERT` statements, the view recomputed every 1,000 changes. Memory is
the process's resident set after the load and the view's build, minus what it held before
loading (the interpreter and the sampled rows the changes update; no copy of the tables is
held), each read once Arrow's memory pool has handed back the buffers the harness's Parquet
reads left unused. Each (query, system) runs in its own process; a command with `--rounds N` runs each
N times, a query's systems alternating, and its rates are the medians of the N runs.

Apache Flink SQL (PyFlink 2.3.0, streaming mode, local mini-cluster with default settings:
heap state, parallelism 2, no mini-batching) is the incremental peer on the JVM: the same view
as a continuous query over Debezium-JSON change logs of the same tables, the fact table's log
holding the loaded rows and then N changes of the same kind (N/2 updates; N is 1,000,000
unless `--flink-changes` gives more, for a query whose jobs a million changes do not
lengthen beyond their spread: the Flink table gives N), the view's changelog (retractions
included) going to a `blackhole` sink. Flink has no
transactions, so its changes/s is the stream's: N / (T(load + changes) - T(load)),
medians of three timed runs after one warm-up run; it is listed under "batched". Its memory is
the JVM's peak resident set during the load job minus before it. Nobody consumes Flink's
output, where upkeep hands every change to a Python subscriber; Flink uses both cores,
upkeep one. The price updates leave every view's row count unchanged, so Flink's final row
count (a last, untimed job) must equal DuckDB's. `bench/tpch/flink_peer.py` has the details.

- **Commands:** {commands}, then `python -m bench.tpch.loaded_report`
- **Runs:** {runs}; **machine:** {data['machine']}

{table(results)}

Setting up (the load and the view's build) and the single-row changes' latencies (upkeep's
changes each timed on its own; DuckDB's mean includes its recomputations):

{setup_and_latency(results)}

Against Flink SQL (upkeep dyn; "batched" is the 10,000-change transaction):

{against_flink(results)}

![changes/s against scale factor](img/{images[0]}) ![memory against scale factor](img/{images[1]})
"""
    replace_section(DOCS / "benchmarks.md", HEADING, text,
                    before="## Streaming into empty tables, no subscriber")


if __name__ == "__main__":
    main()
