"""Runner (c): DuckDB recomputing the query from scratch after every batch.

Usage (normally started by ``run.py``)::

    python -m bench.tpch.run_duckdb --stream DIR --query FQ1 --batch 1000

The insert phase and the delete phase are each cut into batches of ``--batch``
events.  A batch is applied with Arrow appends (``INSERT INTO t SELECT * FROM
batch``) and key-based ``DELETE ... USING``; then the view query runs and its full
result is fetched as an Arrow table.  Updates/s = events / (apply + recompute time).
"""

from __future__ import annotations

import argparse
import time

import duckdb
import numpy as np
import pyarrow as pa

from bench.common.measure import MemoryMeter, Stopwatch, throughput
from bench.common.protocol import Emitter, guarded, runner_args
from bench.tpch.queries import QUERIES
from bench.tpch.schema import PRIMARY_KEYS, create_table_sql
from bench.tpch.stream import Stream, load

Piece = tuple[str, str, pa.Table]


def batch_pieces(stream: Stream, lo: int, hi: int) -> list[Piece]:
    """Split events ``[lo, hi)`` into per-table insert and delete Arrow tables."""
    ops = stream.op[lo:hi]
    tids = stream.table_id[lo:hi]
    rows = stream.row[lo:hi]
    pieces: list[Piece] = []
    for kind, mask_op in (("insert", ops > 0), ("delete", ops < 0)):
        for tid in np.unique(tids[mask_op]).tolist():
            name = stream.table_names[tid]
            taken = stream.tables[name].take(pa.array(rows[mask_op & (tids == tid)]))
            if kind == "delete":
                taken = taken.select(list(PRIMARY_KEYS[name]))
            pieces.append((kind, name, taken))
    return pieces


def apply_pieces(con: duckdb.DuckDBPyConnection, pieces: list[Piece]) -> None:
    """Apply one batch: all inserts, then all deletes (deletes may hit same-batch rows)."""
    for kind, name, data in pieces:
        con.register("batch_rows", data)
        if kind == "insert":
            con.execute(f"INSERT INTO {name} SELECT * FROM batch_rows")
        else:
            cond = " AND ".join(f"{name}.{k} = batch_rows.{k}" for k in PRIMARY_KEYS[name])
            con.execute(f"DELETE FROM {name} USING batch_rows WHERE {cond}")
        con.unregister("batch_rows")


def run(args: argparse.Namespace) -> None:
    """Measure one query on DuckDB and emit the result."""
    query = QUERIES[args.query]
    stream = load(args.stream)
    con = duckdb.connect()
    for name in stream.table_names:
        con.execute(create_table_sql(name))
    meter = MemoryMeter()
    meter.baseline()

    emit = Emitter(args.query, "duckdb", len(stream))
    phases = {"insert": Stopwatch(), "delete": Stopwatch()}
    n_ins = stream.n_inserts
    batches = 0
    result_rows = 0
    recompute_s = 0.0
    for phase, start, stop in (("insert", 0, n_ins), ("delete", n_ins, len(stream))):
        for lo in range(start, stop, args.batch):
            hi = min(lo + args.batch, stop)
            pieces = batch_pieces(stream, lo, hi)
            with phases[phase]:
                apply_pieces(con, pieces)
                t0 = time.perf_counter()
                result_rows = con.sql(query.sql).to_arrow_table().num_rows
                recompute_s += time.perf_counter() - t0
            batches += 1
            emit.progress(hi)
    emit.progress(len(stream), force=True)

    memory = meter.report()
    emit.result(
        status="ok",
        **throughput(len(stream), n_ins, stream.n_deletes, phases),
        batches=batches,
        batch_size=args.batch,
        recompute_seconds=round(recompute_s, 3),
        view_rows=result_rows,
        threads=int(con.execute("SELECT current_setting('threads')").fetchone()[0]),
        **memory,
    )


def main() -> None:
    """Entry point."""
    args = runner_args("DuckDB recompute-per-batch runner", ("duckdb",))
    guarded(args.query, "duckdb", lambda: run(args))


if __name__ == "__main__":
    main()
