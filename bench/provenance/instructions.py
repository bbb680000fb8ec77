"""Update provenance's tracking overhead in machine instructions, counted by callgrind.

:mod:`bench.provenance.bench` times the log on the annotated relations alone (its
``track`` part): a few tens of milliseconds, so its overhead percentages move with the
machine's load.  This counts instead the instructions the same log executes on the
relations, with no provenance (Boolean annotations), the normal form and the naive
construction, each mode in its own process under valgrind's callgrind with counting on
for the log only (the relations loaded and their indexes built first, as ``track`` does;
:mod:`bench.common.callgrind`).  Instructions are not time, but they do not move with
the load, so they show what a change of the code does to the overhead.

Usage::

    python -m bench.provenance.instructions --rows 200000 --queries 2000
    python -m bench.provenance.instructions --workload tpcc --warehouses 4 --tpcc-scale 0.25

Results are added to ``bench/results/provenance_instructions.json`` (``--out``).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
from pathlib import Path

from bench.common.callgrind import counting, have_valgrind, run_counted
from bench.common.environment import git_rev, machine, now
from bench.provenance.bench import add_workload_arguments, apply_log, indexed, workload

MODES = ("none", "update", "update-naive")


def run_child(args: argparse.Namespace) -> None:
    """Inside valgrind: load the relations in ``--mode``, then count the log."""
    w = workload(args)
    relations, transactions, _ = indexed(w, args.mode)
    gc.collect()
    gc.freeze()  # as upkeep's commit path pauses the collector (gc_pause.py)
    with counting():
        affected = apply_log(relations, transactions)
    print(json.dumps({"statements": sum(len(tx) for tx in transactions),
                      "affected": affected}))


def _arguments(args: argparse.Namespace, mode: str) -> list[str]:
    return ["--child", "--mode", mode, "--workload", args.workload, "--rows", str(args.rows),
            "--queries", str(args.queries), "--warehouses", str(args.warehouses),
            "--tpcc-scale", str(args.tpcc_scale), "--seed", str(args.seed)]


def measure(args: argparse.Namespace) -> dict:
    """Every mode, each in its own process; the overhead against no provenance."""
    counts = {}
    t0 = time.perf_counter()
    for mode in MODES:
        with tempfile.TemporaryDirectory() as scratch:
            total, out = run_counted("bench.provenance.instructions", _arguments(args, mode),
                                     Path(scratch) / "callgrind.out", args.hash_seed,
                                     args.timeout)
        log = json.loads(out.strip().splitlines()[-1])
        counts[mode] = {"instructions": total,
                        "per_statement": round(total / log["statements"]),
                        "affected": log["affected"]}
        if log["affected"] != counts["none"]["affected"]:
            raise SystemExit(f"{mode} changed {log['affected']} tuples where no provenance "
                             f"changed {counts['none']['affected']}")
    for mode in MODES[1:]:
        counts[mode]["overhead_percent"] = round(
            (counts[mode]["instructions"] / counts["none"]["instructions"] - 1) * 100, 1)
    return {"workload": args.workload, "rows": args.rows, "queries": args.queries,
            "warehouses": args.warehouses, "tpcc_scale": args.tpcc_scale,
            "hash_seed": args.hash_seed, "modes": counts,
            "seconds": round(time.perf_counter() - t0, 1), "date": now(), "git": git_rev(),
            "command": "python -m bench.provenance.instructions " + " ".join(sys.argv[1:])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_workload_arguments(parser, rows=200_000, tpcc_scale=0.25)
    parser.add_argument("--hash-seed", default="0",
                        help="PYTHONHASHSEED of the counted process ('random': Python's own)")
    parser.add_argument("--timeout", type=float, default=3_600)
    parser.add_argument("--out", default="bench/results/provenance_instructions.json")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run_child(args)
        return
    if not have_valgrind():
        parser.error("needs valgrind (Debian: apt-get install valgrind)")
    result = measure(args)
    print(json.dumps(result), flush=True)
    out = Path(args.out)
    kept = json.loads(out.read_text())["results"] if out.exists() else []
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": machine(), "results": [*kept, result]}, indent=1))


if __name__ == "__main__":
    main()
