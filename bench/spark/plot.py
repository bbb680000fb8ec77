"""Summary, plot (``docs/spark_bench.png``) and docs section of ``bench/spark/bench.py``.

``python -m bench.spark.plot`` redraws both from ``bench/results/spark_latest.json``.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from bench.common.doc_format import fmt_number, is_ok, load_range, replace_section, save_figure

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results" / "spark_latest.json"
SECTION = "## Spark engine (micro-batches)"
LABELS = {"upkeep-spark": "upkeep on Spark", "spark-recompute": "Spark recompute",
          "upkeep-local": "upkeep local engine", "upkeep-local-pull": "upkeep local, pull mode"}


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def growth_summary(g: dict) -> dict:
    """Median latency in the first and last tenth of the growth batches."""
    batches = g["batches"]
    n = len(batches)
    tenth = max(1, n // 10)
    loads = [b.get("load1") for b in batches]
    out: dict[str, Any] = {"batches": n, "batch_changes": g["batch_changes"],
                           "first_tenth_load1": _median([x for x in loads[:tenth] if x]),
                           "last_tenth_load1": _median([x for x in loads[-tenth:] if x]),
                           "start_rows": g["start_rows"], "final_rows": g["final_rows"],
                           "first_tenth_state": [batches[0]["state_rows"],
                                                 batches[tenth - 1]["state_rows"]],
                           "last_tenth_state": [batches[n - tenth]["state_rows"],
                                                batches[-1]["state_rows"]]}
    up = [b["seconds"] for b in batches if "seconds" in b]
    if up:
        first, last = _median(up[:tenth]), _median(up[-tenth:])
        out["upkeep-spark"] = {"first_tenth_median_s": round(first, 3),
                               "last_tenth_median_s": round(last, 3),
                               "ratio": round(last / first, 2),
                               "median_s": round(_median(up), 3), "max_s": round(max(up), 3),
                               "changes_per_s": round(sum(b["changes"] for b in batches)
                                                      / sum(up), 1)}
    spark = [b["spark"] for b in batches if b.get("spark")]
    if spark:
        out["spark_ms_median"] = {k: _median([p[k] for p in spark if p.get(k) is not None])
                                  for k in ("triggerExecution", "addBatch", "state_commit_ms",
                                            "state_updates_ms")}
    rec = g.get("recompute") or []
    if rec:
        first = [r["seconds"] for r in rec if r["i"] < tenth]
        last = [r["seconds"] for r in rec if r["i"] >= n - tenth]
        if first and last:
            out["spark-recompute"] = {"first_tenth_median_s": round(_median(first), 3),
                                      "last_tenth_median_s": round(_median(last), 3),
                                      "ratio": round(_median(last) / _median(first), 2),
                                      "samples": len(rec), "samples_first": len(first),
                                      "samples_last": len(last)}
    return out


def by_size(batches: list[dict]) -> dict[int, dict]:
    """Median latency and changes/s (changes over summed latency) per batch size."""
    sizes: dict[int, list[float]] = {}
    for b in batches:
        sizes.setdefault(int(b["size"]), []).append(float(b["seconds"]))
    return {s: {"batches": len(xs), "median_s": round(_median(xs), 4),
                "max_s": round(max(xs), 4), "changes_per_s": round(s * len(xs) / sum(xs), 1)}
            for s, xs in sorted(sizes.items())}


def summarize(data: dict) -> dict:
    out: dict[str, Any] = {}
    if is_ok(data.get("growth")):
        out["growth"] = growth_summary(data["growth"])
    sizes = data.get("sizes") or {}
    for system, res in (sizes.get("systems") or {}).items():
        if res.get("batches"):
            out.setdefault("sizes", {})[system] = {str(k): v for k, v in
                                                   by_size(res["batches"]).items()}
    for master, res in (data.get("executors") or {}).items():
        if is_ok(res):
            out.setdefault("executors", {})[master] = {str(k): v for k, v in
                                                       by_size(res["batches"]).items()}
    return out


# ---------------------------------------------------------------- plot
def write_plot(data: dict, path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return False
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8))
    g = data.get("growth")
    if is_ok(g):
        up = [b for b in g["batches"] if "seconds" in b]
        if up:
            xs, ys = [b["state_rows"] for b in up], [b["seconds"] for b in up]
            left.scatter(xs, ys, s=7, alpha=0.45, label=f"{LABELS['upkeep-spark']} (every batch)")
            w = max(1, len(up) // 10)
            rolling = [_median(ys[max(0, i - w // 2):i + w // 2 + 1]) for i in range(len(ys))]
            left.plot(xs, rolling, "-", color="C0", lw=2,
                      label=f"{LABELS['upkeep-spark']}, rolling median of {w}")
        rec = g.get("recompute") or []
        if rec:
            left.plot([r["state_rows"] for r in rec], [r["seconds"] for r in rec], "o-",
                      color="C3", ms=4, label=f"{LABELS['spark-recompute']} (sampled batches)")
        left.xaxis.set_major_formatter(
            matplotlib.ticker.FuncFormatter(lambda x, _: f"{x / 1e6:g}M" if x >= 1e6 else
                                            f"{x / 1e3:g}k"))
        left.set_xlabel("rows held (customer + orders)")
        left.set_ylabel("micro-batch latency (s)")
        left.set_ylim(bottom=0)
        left.set_title(f"latency as the state grows 10× "
                       f"({g['batch_changes']:,} inserts per batch)")
        left.grid(alpha=0.3)
        left.legend(fontsize=8)
    summary = data.get("summary") or summarize(data)
    styles = {"upkeep-spark": "o-", "spark-recompute": "s-", "upkeep-local": "^-",
              "upkeep-local-pull": "v:"}
    for system, sizes in (summary.get("sizes") or {}).items():
        xs = [int(s) for s in sizes]
        right.plot(xs, [sizes[s]["changes_per_s"] for s in sizes], styles.get(system, "o-"),
                   label=LABELS.get(system, system))
    for j, (master, sizes) in enumerate((summary.get("executors") or {}).items()):
        xs = [int(s) for s in sizes]
        right.plot(xs, [sizes[s]["changes_per_s"] for s in sizes], "D--", ms=5,
                   color=f"C{4 + j}", label=f"upkeep on Spark, {master}")
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xlabel("changes per micro-batch")
    right.set_ylabel("changes/s (log)")
    right.set_title("throughput by batch size")
    right.grid(alpha=0.3, which="both")
    right.legend(fontsize=8)
    fig.suptitle(f"upkeep Spark engine, TPC-H SF {data['scale']:g} customer ⋈ orders, "
                 f"per-customer count and revenue")
    fig.tight_layout()
    save_figure(fig, path)
    return True


# ---------------------------------------------------------------- docs
def _s(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:.3f}" if x < 1 else f"{x:.2f}"


def _load_range(batches: list[dict]) -> str:
    return load_range([b["load1"] for b in batches if b.get("load1") is not None])


def _check_row(label: str, c: dict | None) -> str:
    if not c:
        return f"| {label} | – | – | – | – | not run |"
    g, e = c["got"], c["expected"]
    return (f"| {label} | {g['rows']:,} ({e['rows']:,}) | {g['sum_count']:,} "
            f"({e['sum_count']:,}) | {g['sum_revenue']:,.2f} ({e['sum_revenue']:,.2f}) | "
            f"{'✅ equal' if c['ok'] else '❌ differs'} |")


def _failed(label: str, part: dict | None) -> str:
    if part is None:
        return f"{label}: not run.\n"
    return f"{label}: **{part.get('status')}**\n\n```\n{part.get('error', '')}\n```\n"


def section(data: dict) -> str:
    """The markdown section (appended at the end of docs/benchmarks.md)."""
    s = data.get("summary") or summarize(data)
    m, v = data["machine"], data["versions"]
    g = data.get("growth")
    sizes = data.get("sizes") or {}
    systems = sizes.get("systems") or {}
    loads = [(data.get("load_at_start") or [None])[0]]
    for part in [g, sizes, *(data.get("executors") or {}).values()]:
        if part and "load1_min" in part:
            loads += [part["load1_min"], part["load1_max"]]
    if sizes.get("local_load1"):
        loads += sizes["local_load1"]
    loads = [x for x in loads if x is not None]
    explain = (g or {}).get("explain") or sizes.get("explain") or "–"
    lines = [SECTION, ""]
    lines += [
        "Generated by `bench/spark/bench.py` (with `bench/spark/plot.py`); one run per "
        "configuration, no repetitions. Each configuration runs in its own process with its "
        "own Spark JVM and shard servers.",
        "",
        f"- **Command:** `{data['command']}`",
        f"- **Date:** {data['date']}; whole run {data['total_wall_s'] / 60:.1f} min",
        f"- **Machine:** {m['cpus']} CPUs, {m['memory_mib'] / 1024:.0f} GiB RAM, "
        f"{m['platform']}; 1-min load average sampled during the runs "
        f"{min(loads):.1f}–{max(loads):.1f}",
        f"- **Versions:** Python {v['python']}, PySpark {v['pyspark']} ({v['java']}), "
        f"DuckDB {v['duckdb']}, pyarrow {v['pyarrow']}, upkeep git {v['upkeep_git']}"
        + (" (with uncommitted changes in src/)" if v.get("src_modified") else "")
        + (f" (HEAD moved to {data['upkeep_git_end']} during the run)"
           if data.get("upkeep_git_end") not in (None, v["upkeep_git"]) else ""),
        f"- **Spark:** master `{data['config']['master']}` for parts 1–2, "
        f"{data['config']['shards']} shards (= `spark.sql.shuffle.partitions`), RocksDB "
        "state store as set by `spark_session`, driver memory 6g, all other settings default.",
    ]
    rows = {}
    if is_ok(g):
        rows = {"customer": g["start_rows"] - g["initial_orders"],
                "orders": g["final_rows"] - (g["start_rows"] - g["initial_orders"])}
    data_line = (f"- **Data:** TPC-H SF {data['scale']:g} from `tpchgen-cli` "
                 "(bench/tpch/data.py, types of bench/tpch/schema.py: keys BIGINT, money DOUBLE)")
    if rows:
        data_line += f": `customer` {rows['customer']:,} rows and `orders` {rows['orders']:,} rows"
    lines += [data_line + ". Changes are inserts of `orders` rows, in TPC-H key order.", ""]
    lines += ["The view (a join plus aggregate; the group key contains the join key, so "
              "upkeep partitions it across shards):", "", "```sql", data["view_sql"], "```", "",
              f"`db.explain` partitioning line: `{explain}`", ""]

    # ---- part 1
    lines += ["### 1. Latency while the state grows 10×", ""]
    if is_ok(g):
        gs = s["growth"]
        up, rec = gs.get("upkeep-spark"), gs.get("spark-recompute")
        f0, f1 = gs["first_tenth_state"]
        l0, l1 = gs["last_tenth_state"]
        load = g.get("load") or {}
        lines += [
            f"Bulk load (`db.load`) of S = {gs['start_rows']:,} rows (all of `customer`, the "
            f"first {g['initial_orders']:,} `orders`), then {gs['batches']} micro-batches of "
            f"{gs['batch_changes']:,} order inserts each (one `with db.transaction()` each) "
            f"until all {gs['final_rows']:,} rows are in. Every upkeep batch is timed; Spark "
            f"recompute is timed at {len(g.get('recompute') or [])} of the batches "
            "(the batch's Parquet file write plus the query). 1-min load average during "
            f"this part: {_load_range(g['batches'])}.",
            "",
            "| system | median latency, first tenth (state "
            f"{f0:,}–{f1:,} rows) | median latency, last tenth (state {l0:,}–{l1:,} rows) "
            "| last / first |",
            "|---|---:|---:|---:|",
        ]
        if up:
            lines.append(f"| {LABELS['upkeep-spark']} | {_s(up['first_tenth_median_s'])} s | "
                         f"{_s(up['last_tenth_median_s'])} s | {up['ratio']:.2f} |")
        if rec:
            lines.append(f"| {LABELS['spark-recompute']} | {_s(rec['first_tenth_median_s'])} s"
                         f" ({rec['samples_first']} samples) | {_s(rec['last_tenth_median_s'])}"
                         f" s ({rec['samples_last']} samples) | {rec['ratio']:.2f} |")
        if gs.get("first_tenth_load1") is not None:
            lines.append(f"| *1-min load average (median)* | *{gs['first_tenth_load1']:.1f}* | "
                         f"*{gs['last_tenth_load1']:.1f}* | |")
        lines.append("")
        if up:
            lines.append(
                f"upkeep on Spark over all {gs['batches']} batches: median {_s(up['median_s'])}"
                f" s, max {_s(up['max_s'])} s, {fmt_number(up['changes_per_s'])} changes/s; bulk load "
                f"{_s(load.get('seconds'))} s (until the view's {load.get('view_rows', 0):,} "
                "rows were readable). Shard servers' resident memory at the end: "
                f"{fmt_number(g.get('shard_rss_mb'))} MB.")
            lines.append("")
        ms = gs.get("spark_ms_median")
        if up and ms and ms.get("triggerExecution"):
            lines += [
                "Where a batch's time goes (medians over the batches, from Spark's "
                "`StreamingQueryProgress`): the micro-batch itself "
                f"{ms['triggerExecution'] / 1000:.2f} s of the {up['median_s']:.2f} s "
                f"(`addBatch` {_s((ms.get('addBatch') or 0) / 1000)} s); inside it the "
                "stateful operator spent "
                f"{_s((ms.get('state_updates_ms') or 0) / 1000)} s in the shards' Python "
                f"processor and {_s((ms.get('state_commit_ms') or 0) / 1000)} s committing "
                "the RocksDB state store (both summed over the shards' tasks, which share "
                "the cores).", ""]
        stats = g.get("engine_stats")
        if stats and "loads" in stats:
            lines += [f"Shard servers: {stats['loads']} engine builds from the state log and "
                      f"{stats['applies']:,} warm applies over the run.", ""]
    else:
        lines.append(_failed("Part 1", g))

    # ---- part 2
    lines += ["### 2. Latency and throughput per batch size", ""]
    if systems:
        start = sizes.get("start_rows")
        lines += [
            "Same view; "
            + (f"the initial state ({start:,} rows: all of `customer`, the first "
               f"{start - rows.get('customer', 0):,} `orders`) " if start and rows else
               "the initial state ")
            + "is bulk-loaded, then the held-out orders arrive in batches, "
            f"{data['config']['batches']} batches per size (smallest size first). "
            "Latency = wall time of one `with db.transaction(): db.insert(...)` block "
            "(upkeep) or of appending the batch as one Parquet file plus recomputing the "
            "view's SQL with `spark.sql(...).toArrow()` (Spark recompute). "
            "changes/s = changes / summed latency. 1-min load average during the Spark runs: "
            + _load_range(systems.get("upkeep-spark", {}).get("batches") or
                          systems.get("spark-recompute", {}).get("batches") or [])
            + ", during the local runs: "
            + _load_range(systems.get("upkeep-local", {}).get("batches") or []) + ".",
            "",
            "| system | changes per batch | median latency | max latency | changes/s | "
            "initial load |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for system in ("upkeep-spark", "spark-recompute", "upkeep-local", "upkeep-local-pull"):
            res = systems.get(system)
            if res is None:
                continue
            if not res.get("batches"):
                lines.append(f"| {LABELS[system]} | – | – | – | – | {res.get('status')} |")
                continue
            load = res.get("load_s")
            load_text = (f"{_s(load)} s" if load is not None else
                         f"first query {_s(res.get('first_recompute_s'))} s")
            for size, r in (s.get("sizes") or {}).get(system, {}).items():
                lines.append(f"| {LABELS[system]} | {int(size):,} | {_s(r['median_s'])} s | "
                             f"{_s(r['max_s'])} s | {fmt_number(r['changes_per_s'])} | {load_text} |")
        lines.append("")
        ss = s.get("sizes") or {}
        if "upkeep-spark" in ss and "spark-recompute" in ss:
            parts = [f"{int(k):,}: {ss['upkeep-spark'][k]['changes_per_s'] / v['changes_per_s']:.1f}×"
                     for k, v in ss["spark-recompute"].items() if k in ss["upkeep-spark"]]
            lines += ["upkeep on Spark vs Spark recompute, changes/s ratio by batch size: "
                      + ", ".join(parts) + ".", ""]
        if "upkeep-spark" in ss and "upkeep-local" in ss:
            parts = [f"{int(k):,}: {v['changes_per_s'] / ss['upkeep-spark'][k]['changes_per_s']:.0f}×"
                     for k, v in ss["upkeep-local"].items() if k in ss["upkeep-spark"]]
            lines += ["upkeep local engine vs upkeep on Spark, changes/s ratio by batch size: "
                      + ", ".join(parts) + ".", ""]
    else:
        lines.append(_failed("Part 2", sizes or None))

    # ---- part 3
    lines += ["### 3. One vs two executors", ""]
    execs = data.get("executors") or {}
    if execs:
        es = s.get("executors") or {}
        size_keys = sorted({k for v in es.values() for k in v}, key=int)
        lines += [
            "upkeep on Spark only, same data and view as part 2, `local-cluster[N,1,1024]` "
            "(N worker JVMs with one core and 1024 MB each, started from the pip "
            "installation), the same number of shards. 1-min load average during the runs: "
            + ", ".join(f"`{m}` {_load_range(r.get('batches') or [])}"
                        for m, r in execs.items()) + ".",
            "",
            "| master | executors | bulk load | "
            + " | ".join(f"median latency @ {int(k):,} | changes/s @ {int(k):,}"
                         for k in size_keys) + " | status |",
            "|---|---:|---:|" + "---:|---:|" * len(size_keys) + "---|",
        ]
        for master, res in execs.items():
            if not is_ok(res):
                lines.append(f"| `{master}` | – | – | " + "– | – | " * len(size_keys)
                             + f"{res.get('status')}: {str(res.get('error', ''))[:200]} |")
                continue
            cells = []
            for k in size_keys:
                r = es[master].get(k)
                cells += [f"{_s(r['median_s'])} s" if r else "–",
                          fmt_number(r["changes_per_s"]) if r else "–"]
            lines.append(f"| `{master}` | {res.get('executors')} | "
                         f"{_s(res['load']['seconds'])} s | " + " | ".join(cells) + " | ok |")
        masters = [m for m in execs if is_ok(execs[m])]
        if len(masters) == 2:
            a, b = (es[m] for m in masters)
            ratios = [f"{int(k):,}: {b[k]['changes_per_s'] / a[k]['changes_per_s']:.2f}×"
                      for k in size_keys if k in a and k in b]
            lines += ["", f"`{masters[1]}` vs `{masters[0]}`, changes/s: " + ", ".join(ratios)
                      + "."]
        lines.append("")
    else:
        lines += ["Not run.", ""]

    # ---- correctness
    lines += ["### Correctness", "",
              "At the end of every configuration the view's rows are compared with DuckDB "
              "evaluating the same SQL over the final tables (exact row equality after "
              "rounding the DOUBLE sum to cents; the count and checksums are shown, DuckDB's "
              "in parentheses).", "",
              "| configuration | view rows | sum(order_count) | sum(revenue) | result |",
              "|---|---:|---:|---:|---|"]
    if is_ok(g):
        for system, c in (g.get("checks") or {}).items():
            lines.append(_check_row(f"part 1, {LABELS[system]}", c))
    for system, res in systems.items():
        lines.append(_check_row(f"part 2, {LABELS.get(system, system)}", res.get("check")))
    for master, res in execs.items():
        lines.append(_check_row(f"part 3, `{master}`", res.get("check")))
    lines += ["", "![latency vs state size; throughput by batch size](spark_bench.png)", ""]
    lines += NOTES
    rate = None
    if systems.get("upkeep-spark", {}).get("load_s") and sizes.get("start_rows"):
        rate = sizes["start_rows"] / systems["upkeep-spark"]["load_s"]
    lines += [
        "- **Why customer ⋈ orders and not lineitem**: the shards keep every row as Python "
        "objects in the shard servers (and the same rows pickled in the RocksDB state log), "
        "and a bulk load goes through Python row by row"
        + (f" (part 2 loaded {rate:,.0f} rows/s, so SF {data['scale']:g} `lineitem`, "
           f"{6_001_215 * data['scale']:,.0f} rows, would take about "
           f"{6_001_215 * data['scale'] / rate / 60:.0f} min to load before a single batch)"
           if rate else "")
        + f"; so the benchmark keeps SF {data['scale']:g} but uses its `customer` and "
        "`orders` tables only.", ""]
    return "\n".join(lines) + "\n"


NOTES = [
    "### Method and caveats",
    "",
    "- **upkeep on Spark**: `upkeep.connect(engine=\"spark\", spark=spark_session(master), "
    "shards=4)`, `CREATE TABLE` for both tables, `create_view`, `db.load(table, parquet)` for "
    "the initial snapshot, then one transaction per batch. The time of the `with` block is "
    "what a user waits for: writing the JSONL change file, the micro-batch "
    "(`processAllAvailable()`), and folding the view's deltas into the driver's copy. Row "
    "tuples are built from Arrow before the clock starts.",
    "- **Spark recompute**: the same session; the tables are Parquet directories (the "
    "initial snapshot plus one file appended per batch). Per batch: write the batch's file, "
    "register both directories as temp views, run the view's SQL, fetch the result to the "
    "driver as Arrow. One untimed query runs first (JIT warm-up).",
    "- **upkeep local engine**: `upkeep.connect()` in its own process; initial rows inserted "
    "as Arrow tables in one transaction, then the same batches, one transaction each. The "
    "main row subscribes to the view, so each batch computes the view's changes, as the "
    "Spark engine's shards do (they subscribe to deliver deltas); *pull mode* is the same "
    "without a subscriber: the engine then defers the aggregate's groups until the view is "
    "read (once, at the end), so its batch times leave that work out.",
    "- **Shared machine**: the benchmark ran while other processes were active (see the load "
    "average above); latencies are per run, not averaged, and sensitive to that.",
    "- Spark recompute here reads Parquet and uses Spark's whole plan each time; it could be "
    "made faster (cached DataFrames, fewer partitions), and upkeep on Spark could be made "
    "faster with fewer shards per core; neither was tuned.",
]


def write_docs(data: dict, path: Path) -> None:
    """Replace the section (the last one) or append it."""
    replace_section(path, SECTION, section(data))


if __name__ == "__main__":
    import argparse

    argparse.ArgumentParser(description="Rewrite docs/spark_bench.png and the Spark section "
                            f"of docs/benchmarks.md from {RESULTS.name}.").parse_args()
    saved = json.loads(RESULTS.read_text())
    saved["summary"] = summarize(saved)
    write_plot(saved, ROOT / "docs" / "spark_bench.png")
    write_docs(saved, ROOT / "docs" / "benchmarks.md")
    print("wrote docs/spark_bench.png and the section of docs/benchmarks.md")
