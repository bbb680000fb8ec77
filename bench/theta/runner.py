"""Runner for one GCQ configuration on upkeep or DuckDB (one process each, started by
``gcq_bench.py``).

Usage::

    python -m bench.theta.runner --query GCQ3 --system auto --scale 0.3 [--batch 1000]

Systems:

* ``auto``: ``db.create_view(name, sql)`` - the planner's choice (IEDyn, i.e.
  ``dyn`` with theta predicates, once it maintains inequality joins); the chosen
  strategy is reported from ``explain()``.
* ``dyn``: ``strategy="dyn"`` forced (fails clearly if dyn cannot maintain the query).
* ``general``: ``strategy="general"`` (materializing hash joins, then filters).
* ``duckdb``: the batch is appended to DuckDB tables, then DuckDB recomputes the view
  and folds its rows into the fingerprint (count + checksum; the rows themselves are
  not fetched into Python, which for 10^7-10^8 rows would measure the transfer).

upkeep gets each batch as one transaction with one ``db.insert(table, rows)`` per
relation (row tuples are built before the clock starts).  Timed per batch.  After the
stream, the view's rows are enumerated once (``db.weighted_rows``, timed separately)
into the fingerprint that ``gcq_bench.py`` compares with DuckDB on the final tables
(``--no-enumerate`` skips that, for outputs of 10^8 rows that take too long to read).
The memory fields are taken after the stream, before that read (whose own peak is
``peak_after_enumerate_mb``).
"""

from __future__ import annotations

import argparse
import time

from bench.common.measure import MemoryMeter, distribution, peak_rss_mb
from bench.common.protocol import Emitter, guarded
from bench.theta.fingerprint import accumulator, sql_select
from bench.theta.queries import QUERIES, Stream, create_table_sql, generate, stream_length

VIEW = "gcq_view"
UPKEEP_SYSTEMS = {"auto": None, "dyn": "dyn", "general": "general"}
SYSTEMS = (*UPKEEP_SYSTEMS, "duckdb")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="one GCQ configuration on upkeep or DuckDB")
    p.add_argument("--query", required=True, choices=list(QUERIES))
    p.add_argument("--system", required=True, choices=SYSTEMS)
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-enumerate", action="store_true",
                   help="upkeep: skip the final enumeration (no fingerprint, not verified)")
    return p.parse_args(argv)


def _tuples(stream: Stream) -> dict[str, list[tuple]]:
    return {name: list(map(tuple, rows.tolist())) for name, rows in stream.rows.items()}



def _strategy_line(explain: str) -> str:
    first = explain.splitlines()[0] if explain else ""
    return first.split("strategy", 1)[1].strip() if "strategy" in first else first


def run_upkeep(args: argparse.Namespace, emit: Emitter) -> None:
    import upkeep

    query = QUERIES[args.query]
    stream = generate(query, args.scale, args.seed)
    rows = _tuples(stream)
    db = upkeep.connect()
    for name in stream.names:
        db.execute(create_table_sql(name, stream.columns[name]))
    meter = MemoryMeter()
    meter.baseline()

    t0 = time.perf_counter()
    try:
        handle = db.create_view(VIEW, query.sql, strategy=UPKEEP_SYSTEMS[args.system])
    except upkeep.UnsupportedError as exc:
        emit.result(status="unsupported", error=str(exc))
        return
    setup_s = time.perf_counter() - t0
    explain = handle.explain()

    batch_s: list[float] = []
    starts = dict.fromkeys(stream.names, 0)
    for lo, hi in stream.batches(args.batch):
        pieces = {}
        for name, data in stream.batch(lo, hi).items():
            pieces[name] = rows[name][starts[name] : starts[name] + len(data)]
            starts[name] += len(data)
        t = time.perf_counter()
        with db.transaction():
            for name, piece in pieces.items():
                db.insert(name, piece)
        batch_s.append(time.perf_counter() - t)
        emit.progress(hi)
    emit.progress(len(stream), force=True)
    stream_memory = meter.report()
    state = db.state_size()

    got: dict[str, int] | None = None
    enumerate_s = None
    if not args.no_enumerate:
        t0 = time.perf_counter()
        got = accumulator(len(query.columns))(db.weighted_rows(VIEW))
        enumerate_s = round(time.perf_counter() - t0, 3)
    total = sum(batch_s)
    emit.result(
        status="ok",
        strategy=_strategy_line(explain),
        explain=explain,
        events=len(stream),
        batches=len(batch_s),
        batch_size=args.batch,
        seconds=round(total, 6),
        setup_seconds=round(setup_s, 3),
        events_per_s=round(len(stream) / total, 1) if total else None,
        batch_ms=distribution(batch_s, 1e3),
        batch_seconds=[round(x, 4) for x in batch_s],
        state_size=state,
        view_rows=None if got is None else got["rows"],
        fingerprint=got,
        enumerate_seconds=enumerate_s,
        peak_after_enumerate_mb=round(peak_rss_mb(), 1),
        **stream_memory,
    )


def run_duckdb(args: argparse.Namespace, emit: Emitter) -> None:
    import duckdb
    import pyarrow as pa

    query = QUERIES[args.query]
    stream = generate(query, args.scale, args.seed)
    con = duckdb.connect()
    for name in stream.names:
        con.execute(create_table_sql(name, stream.columns[name]))
    recompute = f"SELECT {sql_select(list(query.columns))} FROM ({query.sql})"
    meter = MemoryMeter()
    meter.baseline()

    batch_s: list[float] = []
    recompute_s: list[float] = []
    got = {"rows": 0, "checksum": 0}
    for lo, hi in stream.batches(args.batch):
        pieces = {
            name: pa.table({c: data[:, j] for j, c in enumerate(stream.columns[name])})
            for name, data in stream.batch(lo, hi).items()
        }
        t = time.perf_counter()
        for name, table in pieces.items():
            con.register("batch_rows", table)
            con.execute(f"INSERT INTO {name} SELECT * FROM batch_rows").fetchall()
            con.unregister("batch_rows")
        t1 = time.perf_counter()
        n, cs = con.execute(recompute).fetchall()[0]
        t2 = time.perf_counter()
        batch_s.append(t2 - t)
        recompute_s.append(t2 - t1)
        got = {"rows": int(n), "checksum": int(cs)}
        emit.progress(hi)
    emit.progress(len(stream), force=True)
    total = sum(batch_s)
    emit.result(
        status="ok",
        strategy="recompute per batch",
        events=len(stream),
        batches=len(batch_s),
        batch_size=args.batch,
        seconds=round(total, 6),
        recompute_seconds=round(sum(recompute_s), 3),
        events_per_s=round(len(stream) / total, 1) if total else None,
        batch_ms=distribution(batch_s, 1e3),
        batch_seconds=[round(x, 4) for x in batch_s],
        view_rows=got["rows"],
        fingerprint=got,
        threads=int(con.execute("SELECT current_setting('threads')").fetchall()[0][0]),
        **meter.report(),
    )


def main() -> None:
    args = parse_args()
    emit = Emitter(args.query, args.system, stream_length(QUERIES[args.query], args.scale))
    body = run_duckdb if args.system == "duckdb" else run_upkeep
    guarded(args.query, args.system, lambda: body(args, emit))


if __name__ == "__main__":
    main()
