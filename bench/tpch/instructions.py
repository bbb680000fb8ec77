"""Machine instructions per single-row change, counted by valgrind's callgrind.

The loaded-tables benchmark (:mod:`bench.tpch.loaded`) times changes, and on a shared or
throttled machine the same code's timings move by half from run to run.  Comparing two
strategies, or a change against the code before it, then needs a measure that does not
move: the number of machine instructions the interpreter executes per change.  This runs
the loaded-tables case (TPC-H loaded, the view built, a subscriber attached, 1,000 warm-up
changes) under ``valgrind --tool=callgrind`` with instrumentation off, switches it on
(``callgrind_control -i on``) for ``--changes`` single-row changes only, and reports

* instructions per change, the whole transaction (staging, the table, the log, the view,
  the subscriber);
* instructions per change inside the view's own step (the outermost ``*View.step`` of
  :mod:`upkeep.views`, or the ``GroupStep`` / ``RepStep`` a dyn view commits through),
  where the strategies differ.

With ``--batch`` the counted changes are one transaction (the deletes, then the inserts, as
:mod:`bench.tpch.loaded` applies its 10,000-change batch) instead of single-row ones: the
ratio of the two per-change counts is the batch path's gain, measured without timing noise.

Each counted process runs with a fixed string-hash seed (``--hash-seed``, default 0): with
Python's random seed per process, dict probes (and so the counts) moved by 1-3% between
runs of the same code, more than the differences worth measuring.

Instructions are not time (a cache miss costs hundreds of cycles, and bigger state misses
more), so this ranks code paths at one scale; :mod:`bench.tpch.loaded` stays the measure of
speed.  Needs valgrind (Debian's ``valgrind`` package: ``apt-get install valgrind``); runs
about 60x slower than natively while counting, so keep ``--changes`` in the thousands.

Usage::

    python -m bench.tpch.instructions --queries FQ1 Q3 QH --systems dyn general
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common.callgrind import counting, have_valgrind, run_counted
from bench.common.environment import git_rev, machine, now
from bench.tpch.data import generate, sample_rows
from bench.tpch.loaded import FACT, LOADED_QUERIES, PRICE, VIEW, load_upkeep, updates
from bench.tpch.queries import QUERIES
from bench.tpch.schema import column_names

WARM_UP = 1_000
#: the outermost view step of each strategy's runtime (upkeep/views.py), as Cython names it
#: (dyn views commit through their ``stepper()``: a ``GroupStep`` or ``RepStep``)
_VIEW_STEP = re.compile(r"views\.c:__pyx_pw_6upkeep_5views_\d+(\w+View|GroupStep|RepStep)_\d+step\b")


def run_child(args: argparse.Namespace) -> None:
    """Inside valgrind: load, build, subscribe, warm up, then count ``--changes`` changes."""
    import upkeep

    query = QUERIES[args.query]
    price = column_names(FACT).index(PRICE)
    pool = sample_rows(args.scale, FACT, (WARM_UP + args.changes) // 2, args.seed)
    db = upkeep.connect()
    load_upkeep(db, args.scale, query, args.primary_keys)
    db.create_view(VIEW, query.sql, strategy=args.system)
    received = [0]
    db.view(VIEW).subscribe(lambda changes: received.__setitem__(0, received[0] + len(changes)))
    warm = updates(pool[:WARM_UP // 2], WARM_UP, price, args.seed)
    counted = updates(pool[WARM_UP // 2:], args.changes, price, args.seed + 1)
    insert, delete = db.insert, db.delete
    for w, row in warm:
        (insert if w > 0 else delete)(FACT, [row])
    received[0] = 0
    with counting():
        if args.batch:
            with db.transaction():
                delete(FACT, [row for w, row in counted if w < 0])
                insert(FACT, [row for w, row in counted if w > 0])
        else:
            for w, row in counted:
                (insert if w > 0 else delete)(FACT, [row])
    print(json.dumps({"rows_sent": received[0]}))


def view_step_instructions(profile: Path) -> int:
    """Inclusive instructions of the outermost view step in a callgrind profile."""
    annotated = subprocess.run(["callgrind_annotate", "--inclusive=yes", str(profile)],
                               capture_output=True, text=True, check=True).stdout
    steps = [int(line.split()[0].replace(",", "")) for line in annotated.splitlines()
             if _VIEW_STEP.search(line)]
    if not steps:
        raise SystemExit(f"no view step in {profile}: was upkeep built (make build)?")
    return max(steps)


def measure(args: argparse.Namespace, query: str, system: str) -> dict:
    """One (query, system) under callgrind, in its own process."""
    with tempfile.TemporaryDirectory() as scratch:
        profile = Path(scratch) / "callgrind.out"
        t0 = time.perf_counter()
        total, out = run_counted(
            "bench.tpch.instructions",
            ["--child", "--query", query, "--system", system, "--scale", str(args.scale),
             "--changes", str(args.changes), "--seed", str(args.seed),
             *(["--batch"] if args.batch else []),
             *(["--primary-keys"] if args.primary_keys else [])],
            profile, args.hash_seed, args.timeout)
        step = view_step_instructions(profile)
    return {"scale": args.scale, "query": query, "system": system, "changes": args.changes,
            "mode": "batch" if args.batch else "single-row", "hash_seed": args.hash_seed,
            "primary_keys": args.primary_keys,
            "instructions_per_change": round(total / args.changes),
            "view_step_per_change": round(step / args.changes),
            "rows_sent": json.loads(out.strip().splitlines()[-1])["rows_sent"],
            "seconds": round(time.perf_counter() - t0, 1), "date": now(), "git": git_rev(),
            "command": "python -m bench.tpch.instructions " + " ".join(sys.argv[1:])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.1)
    parser.add_argument("--queries", nargs="+", choices=sorted(QUERIES),
                        default=list(LOADED_QUERIES))
    parser.add_argument("--systems", nargs="+", choices=("dyn", "general"),
                        default=["dyn", "general"])
    parser.add_argument("--changes", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--batch", action="store_true",
                        help="count the changes as one transaction, not single-row ones")
    parser.add_argument("--primary-keys", action="store_true",
                        help="declare the tables' PRIMARY KEYs (checked on every change)")
    parser.add_argument("--hash-seed", default="0",
                        help="PYTHONHASHSEED of the counted process ('random': Python's own)")
    parser.add_argument("--timeout", type=float, default=1_800)
    parser.add_argument("--out", default="bench/results/instructions.json")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--query", help=argparse.SUPPRESS)
    parser.add_argument("--system", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.hash_seed != "random" and not (args.hash_seed.isdigit()
                                           and int(args.hash_seed) <= 4_294_967_295):
        parser.error(f"--hash-seed must be 0 to 4294967295 or 'random', not {args.hash_seed!r}")
    if args.child:
        run_child(args)
        return
    if not have_valgrind():
        parser.error("needs valgrind (Debian: apt-get install valgrind)")
    generate(args.scale)
    results = []
    for query in args.queries:
        for system in args.systems:
            result = measure(args, query, system)
            print(json.dumps(result), flush=True)
            results.append(result)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    # appended: docs/benchmarks.md reads earlier counts of the same (query, system) by git
    earlier = json.loads(out.read_text())["results"] if out.exists() else []
    out.write_text(json.dumps({"machine": machine(), "results": earlier + results}, indent=1))


if __name__ == "__main__":
    main()
