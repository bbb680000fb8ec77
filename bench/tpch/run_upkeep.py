"""Runner (a)/(b): upkeep with ``strategy="dyn"`` or ``"general"``, one row per update.

``--system tables`` is a reference run: the same stream into upkeep's base tables
with no view at all, which isolates the cost of storing the tables from the cost
of maintaining a view.

Usage (normally started by ``run.py``)::

    python -m bench.tpch.run_upkeep --stream DIR --query FQ1 --system dyn

Feeds every event as ``db.insert(table, [row])`` / ``db.delete(table, [row])``;
only those calls are timed (row tuples are built from Arrow beforehand, in chunks).
After the stream the view is enumerated once with ``db.view(name).rows()``.
"""

from __future__ import annotations

import argparse
import time

from bench.common.measure import MemoryMeter, Stopwatch, throughput
from bench.common.protocol import Emitter, guarded, runner_args
from bench.tpch.queries import QUERIES
from bench.tpch.schema import create_table_sql
from bench.tpch.stream import load

VIEW = "bench_view"
CHUNK = 10_000


def run(args: argparse.Namespace) -> None:
    """Measure one (query, strategy) pair and emit the result."""
    import upkeep  # imported here so an import failure is reported as a result

    query = QUERIES[args.query]
    stream = load(args.stream)
    db = upkeep.connect()
    for name in stream.table_names:
        db.execute(create_table_sql(name))
    meter = MemoryMeter()
    meter.baseline()

    with_view = args.system != "tables"
    t0 = time.perf_counter()
    explain = "no view (base tables only)"
    if with_view:
        db.create_view(VIEW, query.sql, strategy=args.system)
        try:
            explain = db.explain(VIEW)
        except Exception as exc:  # explain is informative only
            explain = f"explain failed: {exc}"
    setup_s = time.perf_counter() - t0

    emit = Emitter(args.query, args.system, len(stream))
    insert = db.insert
    delete = db.delete
    phases = {"insert": Stopwatch(), "delete": Stopwatch()}
    done = 0
    n_ins = stream.n_inserts
    for phase, lo, hi in (("insert", 0, n_ins), ("delete", n_ins, len(stream))):
        apply = insert if phase == "insert" else delete
        for chunk in stream.chunks(CHUNK, lo, hi):
            with phases[phase]:
                for _op, table, row in chunk:
                    apply(table, [row])
            done += len(chunk)
            emit.progress(done)
    emit.progress(done, force=True)

    t0 = time.perf_counter()
    rows = db.view(VIEW).rows() if with_view else None
    enumerate_s = time.perf_counter() - t0
    memory = meter.report()
    emit.result(
        status="ok",
        **throughput(len(stream), n_ins, stream.n_deletes, phases),
        setup_seconds=round(setup_s, 3),
        view_rows=None if rows is None else len(rows),
        enumerate_seconds=round(enumerate_s, 3),
        explain=explain,
        **memory,
    )


def main() -> None:
    """Entry point."""
    args = runner_args("upkeep single-row update runner", ("dyn", "general", "tables"))
    guarded(args.query, args.system, lambda: run(args))


if __name__ == "__main__":
    main()
