"""Steady single-row changes on loaded tables, and where their time goes (``perf``).

:mod:`bench.tpch.loaded` times the first ``--changes`` single-row changes after a view's
build, each over a fact row read long before (so cold), which is the case a user meets
first.  This measures the case after it: the same ``--changes`` updates (delete a line
item, insert it with a new price, as :func:`bench.tpch.loaded.updates`) applied and then
taken back, over and over for ``--seconds``, so the input rows stay in cache and what is
timed is the engine's own work, misses of its state included.  With ``--perf`` Linux
``perf record`` samples the process while the changes run (``--call-graph dwarf`` with
``--stacks``), to a file ``perf report`` reads: this is how docs/benchmarks.md found that
at TPC-H SF 1 the probes of large dicts, not the instructions, separate dyn from general
on FQ1 ("Where FQ1's single-row time goes at SF 1").  Needs ``perf`` (Debian's
``linux-perf``) for ``--perf`` only.

Usage::

    python -m bench.tpch.cycle --scale 1 --query FQ1 --system dyn --perf /tmp/fq1.data
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import time

from bench.tpch.data import generate, sample_rows
from bench.tpch.loaded import FACT, PRICE, VIEW, load_upkeep, updates
from bench.tpch.queries import QUERIES
from bench.tpch.schema import column_names

#: rounds of the changes (forward and back) run before timing: the first touch of each
#: row's state is the cold case :mod:`bench.tpch.loaded` measures, not this one
WARM_ROUNDS = 3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.1)
    parser.add_argument("--query", choices=sorted(QUERIES), default="FQ1")
    parser.add_argument("--system", choices=("dyn", "general"), default="dyn")
    parser.add_argument("--changes", type=int, default=2_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--perf", metavar="FILE", help="perf record to FILE while timing")
    parser.add_argument("--stacks", action="store_true", help="with --perf: call stacks")
    args = parser.parse_args()
    if args.perf and shutil.which("perf") is None:
        parser.error("--perf needs Linux perf (Debian: apt-get install linux-perf)")
    if args.stacks and not args.perf:
        parser.error("--stacks goes with --perf")
    generate(args.scale)

    import upkeep

    query = QUERIES[args.query]
    price = column_names(FACT).index(PRICE)
    pool = sample_rows(args.scale, FACT, args.changes // 2, args.seed)
    db = upkeep.connect()
    load_upkeep(db, args.scale, query)
    db.create_view(VIEW, query.sql, strategy=args.system)
    received = [0]
    db.view(VIEW).subscribe(lambda changes: received.__setitem__(0, received[0] + len(changes)))
    forward = updates(pool, args.changes, price, args.seed)
    back = [(-w, row) for w, row in reversed(forward)]
    insert, delete = db.insert, db.delete

    def round_trip() -> None:
        for changes in (forward, back):
            for w, row in changes:
                (insert if w > 0 else delete)(FACT, [row])

    for _ in range(WARM_ROUNDS):
        round_trip()
    received[0] = 0  # the rows sent for the timed changes only
    recorder = None
    if args.perf:
        call_graph = ["--call-graph", "dwarf,16384"] if args.stacks else []
        recorder = subprocess.Popen(
            ["perf", "record", "-e", "cpu-clock", "-F", "499", *call_graph,
             "-p", str(os.getpid()), "-o", args.perf], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        time.sleep(1.0)  # perf attached before the timed changes start
    done = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < args.seconds:
        round_trip()
        done += 2 * len(forward)
    elapsed = time.perf_counter() - t0
    if recorder is not None:
        recorder.send_signal(signal.SIGINT)  # perf writes its file and stops
        recorder.wait()
    print(json.dumps({"scale": args.scale, "query": args.query, "system": args.system,
                      "changes": done, "per_s": round(done / elapsed),
                      "rows_sent": received[0], "perf": args.perf}))


if __name__ == "__main__":
    main()
