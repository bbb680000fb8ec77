"""Update provenance's tracking overhead, timed in pairs within one process.

``bench.provenance.bench --part track`` times each mode's log in its own process, best of
three; the log takes 20-80 ms, and on a shared machine the same code's best moved by half
between runs, more than the 3% the issue asks the normal form to stay within.  Here one
process builds the annotated relations of both modes afresh (with the indexes the log
needs) and times the log on each, ``--rounds`` times, the mode that goes first alternating
from round to round, the collector frozen during each log as upkeep's commits pause it.  A
round's two logs run seconds apart, so the ratio of the pair cancels most of what drifts
on the machine (frequency, other load); the median of the rounds' ratios, with a bootstrap
interval over the rounds, is the overhead this reports, next to each mode's median time
and the CPU time (``time.process_time``) of the same logs.

Usage::

    python -m bench.provenance.paired --workload tpcc --warehouses 4 --queries 2000 --rounds 15

Results go to ``bench/results/provenance_paired.json`` (a list, one entry per run).
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import time
from pathlib import Path

from bench.common.environment import git_rev, machine, now
from bench.provenance.bench import add_workload_arguments, apply_log, indexed, workload

MODES = ("none", "update")


def timed_log(w, mode: str) -> tuple[float, float, int]:
    """The workload's log on freshly built relations in ``mode``: wall seconds, CPU
    seconds, tuples whose membership it changed."""
    relations, transactions, _ = indexed(w, mode)
    gc.collect()
    gc.freeze()  # as upkeep's commit path pauses the collector (gc_pause.py)
    try:
        c0, t0 = time.process_time(), time.perf_counter()
        affected = apply_log(relations, transactions)
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        gc.unfreeze()
    del relations
    gc.collect()
    return seconds, cpu, affected


def interval(ratios: list[float], seed: int, draws: int = 2_000) -> tuple[float, float]:
    """A 95% bootstrap interval of the median of ``ratios`` (resampling the rounds)."""
    rng = random.Random(seed)
    medians = sorted(statistics.median(rng.choices(ratios, k=len(ratios)))
                     for _ in range(draws))
    return medians[int(0.025 * draws)], medians[int(0.975 * draws) - 1]


def run(args: argparse.Namespace) -> dict:
    w = workload(args)
    wall: dict[str, list[float]] = {m: [] for m in MODES}
    cpu: dict[str, list[float]] = {m: [] for m in MODES}
    affected: dict[str, int] = {}
    for r in range(args.rounds):
        for mode in (MODES if r % 2 == 0 else MODES[::-1]):
            seconds, used, changed = timed_log(w, mode)
            wall[mode].append(seconds)
            cpu[mode].append(used)
            affected[mode] = changed
        print(f"round {r + 1}/{args.rounds}: " + ", ".join(
            f"{m} {wall[m][-1] * 1000:.1f} ms" for m in MODES), file=sys.stderr, flush=True)
    if affected["none"] != affected["update"]:
        raise SystemExit(f"the modes changed different tuples: {affected}")
    ratios = [u / n for u, n in zip(wall["update"], wall["none"], strict=True)]
    cpu_ratios = [u / n for u, n in zip(cpu["update"], cpu["none"], strict=True)]
    low, high = interval(ratios, args.seed)
    return {
        "workload": args.workload, "rows": args.rows, "queries": args.queries,
        "warehouses": args.warehouses, "tpcc_scale": args.tpcc_scale, "rounds": args.rounds,
        "affected": affected["update"], "date": now(), "git": git_rev(), "machine": machine(),
        "command": "python -m bench.provenance.paired " + " ".join(sys.argv[1:]),
        "wall_ms": {m: [round(s * 1000, 3) for s in wall[m]] for m in MODES},
        "cpu_ms": {m: [round(s * 1000, 3) for s in cpu[m]] for m in MODES},
        "median_ms": {m: round(statistics.median(wall[m]) * 1000, 3) for m in MODES},
        "overhead_pct": round((statistics.median(ratios) - 1) * 100, 2),
        "overhead_interval_pct": [round((low - 1) * 100, 2), round((high - 1) * 100, 2)],
        "cpu_overhead_pct": round((statistics.median(cpu_ratios) - 1) * 100, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_workload_arguments(parser, rows=1_000_000, tpcc_scale=1.0)
    parser.add_argument("--rounds", type=int, default=15,
                        help="pairs of logs (one per mode), the first mode alternating")
    parser.add_argument("--out", default="bench/results/provenance_paired.json")
    args = parser.parse_args()
    if args.rounds < 2:
        parser.error("--rounds must be at least 2")
    result = run(args)
    print(json.dumps(result))
    out = Path(args.out)
    runs = json.loads(out.read_text()) if out.exists() else []
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps([*runs, result], indent=1))


if __name__ == "__main__":
    main()
