"""What one random lookup into a big map of maintained state costs, cold and hot.

A change at TPC-H SF 1 spends much of its time in lookups of state that is no longer in
the cache (docs/benchmarks.md, "Where a batch's time goes at SF 1"). This measures that
cost on the structures the state is made of, each holding ``--entries`` keys (QH's order
keys: 1.5 M at SF 1):

* a dict keyed by 1-tuples of integers (a (T,N)-rep's node keyed by one variable, and
  its indexes' buckets),
* a dict keyed by the integers themselves,
* the row store's :class:`~upkeep.key_table.KeyTable` with 8-byte keys,

each probed ``--probes`` times with random present keys (cold: the map is far larger than
the caches), then one key probed as often (hot). A probe's time is the loop's time over
the probes, the median of ``--rounds``; the loop's own work is in the hot figure.

Usage::

    python -m bench.probe_latency --entries 1500000

Results go to ``bench/results/probe_latency.json`` (a list, one entry per run).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import struct
import time
from collections.abc import Callable
from pathlib import Path

from bench.common.environment import git_rev, machine, now
from upkeep.key_table import KeyTable


def _probe_ns(lookup: Callable[[object], object], probes: list) -> float:
    """Nanoseconds per call of ``lookup`` over ``probes``."""
    t0 = time.perf_counter()
    for p in probes:
        lookup(p)
    return (time.perf_counter() - t0) / len(probes) * 1e9


def measure(entries: int, probes: int, rounds: int, seed: int) -> dict[str, float]:
    """Median nanoseconds per probe of each structure, cold and hot."""
    rng = random.Random(seed)
    keys = rng.sample(range(1, 40 * entries), entries)
    by_tuple = {(k,): (k, 1) for k in keys}
    by_int = {k: (k, 1) for k in keys}
    table = KeyTable()
    for k in keys:
        table.add(memoryview(struct.pack("<q", k)), 1)
    picked = rng.sample(keys, probes)
    cases = {
        "dict, 1-tuple keys": (by_tuple.get, [(k,) for k in picked]),
        "dict, integer keys": (by_int.get, list(picked)),
        "KeyTable, 8-byte keys": (table.find, [memoryview(struct.pack("<q", k)) for k in picked]),
    }
    times: dict[str, list[float]] = {}
    for _ in range(rounds):
        for name, (lookup, cold) in cases.items():
            times.setdefault(f"{name}, cold", []).append(_probe_ns(lookup, cold))
            hot = [cold[0]] * probes
            times.setdefault(f"{name}, hot", []).append(_probe_ns(lookup, hot))
    return {name: round(statistics.median(ts)) for name, ts in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=1_500_000)
    parser.add_argument("--probes", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default="bench/results/probe_latency.json")
    args = parser.parse_args()
    result = measure(args.entries, args.probes, args.rounds, args.seed)
    print("| structure | ns per probe |\n|---|---:|")
    for name, ns in result.items():
        print(f"| {name} | {ns:,} |")
    out = Path(args.out)
    runs = json.loads(out.read_text()) if out.exists() else []
    runs.append({"when": now(), "git": git_rev(), "machine": machine(),
                 "entries": args.entries, "probes": args.probes, "rounds": args.rounds,
                 "ns_per_probe": result})
    out.write_text(json.dumps(runs, indent=1) + "\n")


if __name__ == "__main__":
    main()
