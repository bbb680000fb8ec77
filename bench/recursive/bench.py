"""Recursive views on GT-ITM transit-stub networks (section VIII of
``recursive-views-absorption-provenance.txt``).

Usage::

    python -m bench.recursive.bench [--nodes 100 1000] [--kinds maintenance ...]
        [--densities dense sparse] [--configs absorption ...] [--deletes 20]
        [--timeout 300] [--merge]

For each topology (``gtitm.py``; dense and sparse) one runner process per configuration
(``recursive_runner.py``, which documents what each measures), under ``run_command``'s
time and memory limits:

* ``maintenance``: ``reachable`` under DRed, absorption eager and absorption lazy:
  insert-only, then single-link deletes, with DuckDB recomputation as the peer;
* ``aggsel``: cheapest path with aggregate selection, single and multi aggregate;
* ``ordering``: BDD nodes under the depth-first order, arrival order and CUDD sifting
  (absorption lazy);
* ``distributed``: ``maintenance`` over ``--partitions`` partitions (DRed, absorption eager and
  lazy in one process, and lazy on the Spark engine end to end), with tuples and bytes
  shipped between partitions.

``--merge`` keeps the results of earlier runs in the JSON file for configurations this run
does not repeat (e.g. all kinds at 100 nodes, then ``maintenance`` at 1k and 10k nodes),
and the command of each run.  Results go to ``bench/results/recursive.json``, the
"Recursive views" section of ``docs/benchmarks.md`` (before the Spark section; the others
are kept) and ``docs/recursive_bench.png``; ``--report-only`` redraws both from the JSON file.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from bench.common.doc_format import fmt_number, fmt_times, ratio_of, replace_section, save_figure
from bench.common.environment import BENCH_DIR, git_rev
from bench.common.orchestrate import publish, run_command, run_each, run_meta
from bench.recursive.runner import KINDS
from bench.spark.plot import SECTION as SPARK_SECTION

RESULTS = BENCH_DIR / "results" / "recursive.json"
LOGS = BENCH_DIR / "data" / "logs" / "recursive"
DOC = BENCH_DIR.parent / "docs" / "benchmarks.md"
FIGURE = BENCH_DIR.parent / "docs" / "recursive_bench.png"
SECTION = "## Recursive views (GT-ITM transit-stub networks)"
console = Console()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="recursive views on GT-ITM networks")
    p.add_argument("--nodes", type=int, nargs="+", default=[100])
    p.add_argument("--densities", nargs="+", choices=("dense", "sparse"),
                   default=["dense", "sparse"])
    p.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    p.add_argument("--configs", nargs="+", help="only these configurations of the kinds")
    p.add_argument("--deletes", type=int, default=20)
    p.add_argument("--partitions", type=int, default=4, help="for the distributed runs")
    p.add_argument("--bdd-ordering", choices=("sifting", "dfs", "arrival"), default="sifting",
                   help="BDD variable order of the maintenance and distributed runs (the "
                        "ordering kind compares them)")
    p.add_argument("--timeout", type=float, default=300, help="seconds per configuration")
    p.add_argument("--memory-limit", type=float, default=8, help="GiB per configuration")
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--merge", action="store_true",
                   help="keep --out's results of configurations this run does not repeat")
    p.add_argument("--report-only", action="store_true", help="rewrite the docs from --out")
    return p.parse_args(argv)


def configs(args: argparse.Namespace) -> list[dict[str, Any]]:
    return [{"kind": kind, "config": config, "nodes": nodes, "density": density}
            for nodes in args.nodes for density in args.densities
            for kind, choices in KINDS.items() if kind in args.kinds for config in choices
            if args.configs is None or config in args.configs]


def run_all(args: argparse.Namespace) -> list[dict[str, Any]]:
    def execute(c: dict[str, Any], on_progress) -> dict[str, Any]:
        cmd = [sys.executable, "-m", "bench.recursive.runner", "--kind", c["kind"],
               "--config", c["config"], "--nodes", str(c["nodes"]), "--density",
               c["density"], "--deletes", str(args.deletes), "--partitions",
               str(args.partitions), "--bdd-ordering", args.bdd_ordering]
        log = LOGS / f"{c['kind']}-{c['config']}-{c['nodes']}-{c['density']}.log"
        result = run_command(cmd, {"query": c["kind"], "system": c["config"]}, args.timeout,
                             log, on_progress, memory_limit_mb=args.memory_limit * 1024)
        ordering = {} if c["kind"] == "ordering" else {"bdd_ordering": args.bdd_ordering}
        return {**result, **c, **ordering}

    def describe(c: dict[str, Any]) -> str:
        return f"{c['kind']} {c['config']} {c['nodes']} {c['density']}"

    def one_line(r: dict[str, Any]) -> str:
        head = f"{r['kind']:<12} {r['config']:<17} {r['nodes']:>6} {r['density']:<6}"
        if r.get("status") != "ok":
            return f"{head} [red]{r.get('status')}[/red]: {str(r.get('error', ''))[:120]}"
        return f"{head} ok in {r['process_wall_seconds']:.1f} s, peak {r['peak_mb']:,.0f} MB"

    return run_each(configs(args), describe, execute, one_line, console)


def write_docs(data: dict[str, Any]) -> str:
    replace_section(DOC, SECTION, report(data), before=SPARK_SECTION)
    plot(data, FIGURE)
    return f"wrote the section of {DOC.relative_to(BENCH_DIR.parent)} and {FIGURE.name}"


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.report_only:
        console.print(write_docs(json.loads(args.out.read_text())))
        return
    started = time.perf_counter()
    results = run_all(args)
    meta = run_meta("bench.recursive.bench", argv, started, results, deletes=args.deletes,
                    partitions=args.partitions, timeout_s=args.timeout,
                    memory_limit_gib=args.memory_limit, git=git_rev())
    data = {"meta": meta, "results": results, "runs": [meta]}
    if args.merge and args.out.exists():
        data = merged(json.loads(args.out.read_text()), data)
    publish(data, args.out, lambda d: None, lambda: write_docs(data), console)


def merged(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """``new``'s results plus ``old``'s for configurations ``new`` did not run; every run's
    metadata is kept under ``runs`` (``meta`` is the newest)."""
    def key(r: dict[str, Any]) -> tuple:
        return r["kind"], r["config"], r["nodes"], r["density"], r.get("bdd_ordering", "sifting")

    again = {key(r) for r in new["results"]}
    kept = [r for r in old["results"] if key(r) not in again]
    return {"meta": new["meta"], "runs": old.get("runs", [old["meta"]]) + new["runs"],
            "results": kept + new["results"]}


def _label(r: dict[str, Any]) -> str:
    """The configuration, with its BDD order when that is not the default (sifting)."""
    ordering = r.get("bdd_ordering", "sifting")
    return r["config"] + ("" if ordering == "sifting" or r["config"] == "dred"
                          else f" ({ordering} order)")


def _find(results: list[dict[str, Any]], **match: Any) -> dict[str, Any] | None:
    for r in results:
        if r.get("status") == "ok" and all(r.get(k) == v for k, v in match.items()):
            return r
    return None


def _failed(r: dict[str, Any], cells: int) -> str | None:
    if r.get("status") == "ok":
        return None
    progress = r.get("progress")
    reached = f" after {progress[0]}/{progress[1]} steps" if progress else ""
    return (f"| {r['nodes']} | {r['density']} | {_label(r)} | {r['status']} "
            f"({r.get('error', '')}){reached} |" + " |" * (cells - 4))


def _rows(res: list[dict[str, Any]], kind: str, cells: int, row) -> list[str]:
    """One table line per result of ``kind``: ``row(result)``, or the failure's status."""
    return [_failed(r, cells) or row(r) for r in res if r["kind"] == kind]


def report(data: dict[str, Any]) -> str:
    meta, res = data["meta"], data["results"]
    runs = "; then ".join(f"`{m['command']}` (git {m['git']}, {m['date']})"
                          for m in data.get("runs", [meta]))
    lines = [SECTION, "",
             f"Generated by {runs} on {meta['machine']}; topologies from `bench/recursive/gtitm.py` "
             "(seed 1), runners in `bench/recursive/runner.py`. Figure: "
             "`docs/recursive_bench.png`.", "",
             "Maintenance of `reachable`: all links inserted in 10 batches, then links deleted "
             "one at a time. *Shipped* counts derivations passed into a fixpoint relation plus "
             "removals (DRed: over-deletions, re-derivations and insertions); DuckDB "
             "recomputes the view after each of the same deletes. A run that did not finish "
             "shows how many of its steps (the 10 insert batches, then each delete) it "
             "completed.", "",
             "| nodes | density | strategy | insert: shipped / time | deletes: shipped / time "
             "| shipped on deletes vs lazy | DuckDB on the same deletes | BDD bytes per tuple "
             "| peak memory |",
             "|---:|---|---|---|---|---:|---|---:|---:|"]
    def maintenance(r: dict[str, Any]) -> str:
        lazy = _find(res, kind="maintenance", nodes=r["nodes"], density=r["density"],
                     config="absorption")
        ratio = ratio_of(r["delete"]["shipped"], lazy["delete"]["shipped"] if lazy else None)
        per_tuple = ratio_of(r["insert"].get("provenance_bytes"),
                             r["insert"].get("derived_tuples"))
        return (f"| {r['nodes']} | {r['density']} | {_label(r)} | "
                f"{fmt_number(r['insert']['shipped'])} / {r['insert_s']:.2f} s | "
                f"{fmt_number(r['delete']['shipped'])} / {r['delete_s']:.2f} s | "
                f"{fmt_times(ratio)} | {r['duckdb_delete_s']:.2f} s "
                f"({'same rows' if r['matches_duckdb'] else 'ROWS DIFFER'}) | "
                f"{fmt_number(per_tuple, 1)} | {fmt_number(r['peak_mb'])} MB |")

    def aggsel(r: dict[str, Any]) -> str:
        return (f"| {r['nodes']} | {r['density']} | {r['config']} | "
                f"{fmt_number(r['insert']['shipped'])} | {fmt_number(r['insert']['pruned'])} | "
                f"{r['insert_s']:.2f} s / {r['delete_s']:.2f} s |")

    def ordering(r: dict[str, Any]) -> str:
        arrival = _find(res, kind="ordering", nodes=r["nodes"], density=r["density"],
                        config="arrival")
        ratio = ratio_of(r["bdd_nodes"], arrival["bdd_nodes"] if arrival else None)
        each = zip(r.get("bdd_nodes_by_arrival", []),
                   (arrival or {}).get("bdd_nodes_by_arrival", []), strict=False)
        ratios = [a / b for a, b in each if b]
        spread = f"{min(ratios):.2f}–{max(ratios):.2f}" if ratios else "–"
        return (f"| {r['nodes']} | {r['density']} | {r['config']} | "
                f"{fmt_number(r['bdd_nodes'])} | "
                f"{'–' if ratio is None else f'{ratio:.2f}'} | {spread} | {r['time_s']:.2f} s |")

    lines += _rows(res, "maintenance", 9, maintenance)
    lines += ["", "Aggregate selection (absorption lazy; all links inserted, then the deletes):",
              "", "| nodes | density | aggregates | shipped (insert) | pruned | insert / deletes |",
              "|---:|---|---|---:|---:|---|"]
    lines += _rows(res, "aggsel", 6, aggsel)
    lines += ["", "BDD variable order (`reachable`, absorption lazy, links in random order, "
              "one per batch; BDD nodes of all stored provenance at the end, summed over four "
              "random arrival orders; the ratio per arrival order gives the range):", "",
              "| nodes | density | order | BDD nodes | vs arrival | range | time |",
              "|---:|---|---|---:|---:|---|---|"]
    lines += _rows(res, "ordering", 6, ordering)
    return "\n".join(lines + distributed(data) + targets(res)) + "\n"


def distributed(data: dict[str, Any]) -> list[str]:
    """``reachable`` with the fixpoint over partitions: what crosses between them."""
    res = data["results"]
    lines = ["", f"Over {data['meta'].get('partitions', 4)} partitions (relations split by "
             "first attribute; in one process, and as `spark`: absorption lazy on the Spark "
             "engine, `local[2]`, one task per partition and superstep, timed end to end "
             "from the change files to the view's rows; `spark-dred`: DRed there). *Shipped* "
             "here counts messages from one partition to another (derivations, copies "
             "re-partitioned by a join column, deletion notices; for DRed also over-deletion "
             "marks and re-derivation asks) and their bytes with the serialized BDD "
             "provenance:", "",
             "| nodes | density | strategy | insert: tuples / bytes / time | deletes: tuples / "
             "bytes / time | supersteps (insert / deletes) | vs one partition (insert / "
             "deletes time) |",
             "|---:|---|---|---|---|---|---|"]
    def row(r: dict[str, Any]) -> str:
        local = {"spark": "absorption", "spark-dred": "dred"}.get(r["config"], r["config"])
        one = _find(res, kind="maintenance", nodes=r["nodes"], density=r["density"],
                    config=local)
        slower = (f"{fmt_times(ratio_of(r['insert_s'], one['insert_s']))} / "
                  f"{fmt_times(ratio_of(r['delete_s'], one['delete_s']))}" if one else "–")
        cells = [f"{fmt_number(r[phase]['shipped_tuples'])} / "
                 f"{fmt_number(r[phase]['shipped_bytes'] / 1e3)} kB / "
                 f"{r[phase + '_s']:.2f} s" for phase in ("insert", "delete")]
        return (f"| {r['nodes']} | {r['density']} | {r['config']} | {cells[0]} | {cells[1]} | "
                f"{r['insert']['supersteps']} / {r['delete']['supersteps']} | {slower} |")

    lines += _rows(res, "distributed", 7, row)
    return lines


def targets(res: list[dict[str, Any]]) -> list[str]:
    """The issue's targets, checked on every topology of the run."""
    out = ["", "Targets:"]
    for nodes, density in dict.fromkeys((r["nodes"], r["density"]) for r in res):
        where = dict(nodes=nodes, density=density)
        dred = _find(res, kind="maintenance", config="dred", **where)
        lazy = _find(res, kind="maintenance", config="absorption", **where)
        if dred and lazy:
            ratio = ratio_of(dred["delete"]["shipped"], lazy["delete"]["shipped"] or 1)
            faster = lazy["delete_s"] < dred["delete_s"]
            met = "met" if ratio is not None and ratio >= 10 and faster else "not met"
            order = _label(lazy).removeprefix("absorption")  # " (dfs order)" or ""
            out.append(f"- {nodes} {density}: absorption lazy{order} ships {fmt_times(ratio)} "
                       f"fewer tuples than DRed on the deletes and converges in "
                       f"{lazy['delete_s']:.2f} s against {dred['delete_s']:.2f} s (target >= 10x "
                       f"fewer and faster: {met}); DuckDB recomputation of the same deletes "
                       f"takes {lazy['duckdb_delete_s']:.2f} s.")
        for dred_config, lazy_config, where_run in (("dred", "absorption", "in one process"),
                                                    ("spark-dred", "spark", "on Spark")):
            dred = _find(res, kind="distributed", config=dred_config, **where)
            lazy = _find(res, kind="distributed", config=lazy_config, **where)
            if not (dred and lazy):
                continue
            ratio = ratio_of(dred["delete"]["shipped_tuples"],
                             lazy["delete"]["shipped_tuples"] or 1)
            faster = lazy["delete_s"] < dred["delete_s"]
            met = "met" if ratio is not None and ratio >= 10 and faster else "not met"
            out.append(f"- {nodes} {density} over partitions {where_run}: absorption lazy "
                       f"ships {fmt_times(ratio)} fewer tuples between partitions than DRed on "
                       f"the deletes and converges in {lazy['delete_s']:.2f} s against "
                       f"{dred['delete_s']:.2f} s (target >= 10x fewer and faster: {met}).")
        dfs = _find(res, kind="ordering", config="dfs", **where)
        arrival = _find(res, kind="ordering", config="arrival", **where)
        if dfs and arrival:
            ratio = ratio_of(dfs["bdd_nodes"], arrival["bdd_nodes"])
            met = "met" if ratio is not None and ratio <= 0.6 else "not met"
            ratios = [a / b for a, b in zip(dfs.get("bdd_nodes_by_arrival", []),
                                            arrival.get("bdd_nodes_by_arrival", []),
                                            strict=False) if b]
            spread = (f"; {min(ratios):.2f}x to {max(ratios):.2f}x per arrival order"
                      if ratios else "")
            out.append(f"- {nodes} {density}: the DFS order uses {ratio:.2f}x the BDD nodes of "
                       f"arrival order{spread} (target <= 0.6x: {met}).")
    return out


def plot(data: dict[str, Any], path: Path) -> None:
    """Tuples shipped on the deletes per strategy, and delete time against DuckDB."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res = [r for r in data["results"] if r["kind"] == "maintenance" and r.get("status") == "ok"]
    fig, (ship, secs) = plt.subplots(1, 2, figsize=(11, 4))
    labels = [f"{r['nodes']} {r['density']}\n{r['config']}" for r in res]
    xs = range(len(res))
    ship.bar(xs, [max(r["delete"]["shipped"], 1) for r in res])
    ship.set_yscale("log")
    ship.set_title(f"tuples shipped on {data['meta']['deletes']} single-link deletes "
                   "(0 drawn as 1)")
    secs.bar([x - 0.2 for x in xs], [r["delete_s"] for r in res], 0.4, label="upkeep")
    secs.bar([x + 0.2 for x in xs], [r["duckdb_delete_s"] for r in res], 0.4,
             label="DuckDB recompute")
    secs.set_yscale("log")
    secs.set_title("time for the deletes (s)")
    secs.legend(fontsize=8)
    for ax in (ship, secs):
        ax.set_xticks(list(xs), labels, fontsize=7)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("reachable on GT-ITM transit-stub networks")
    fig.tight_layout()
    save_figure(fig, path)


if __name__ == "__main__":
    main()
