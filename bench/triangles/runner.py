"""Runner for one triangle-count configuration (one process each, started by
``triangle_bench.py``).

Usage::

    python -m bench.triangles.runner --system lftj --edges 100000 [--inserts 1000]

Protocol (graph_stream.py): bulk load ``--edges`` edges, then single-edge inserts, then
single-edge deletes of ``--delete-fraction`` of the edges.

* ``lftj`` / ``general`` / ``auto``: upkeep with ``strategy="lftj"`` (leapfrog triejoin
  with sensitivity indices), ``"general"`` (the delta-join baseline: materializing hash
  joins) or the planner's choice.  Load = one ``db.insert`` of all edges, then
  ``create_view`` builds the view from the table.  Every update is its own batch
  (``db.insert("edges", [edge])`` / ``db.delete``) and is timed; for views that have
  ``db.view(name).counters()`` (lftj) the counters are read after each update, outside
  the timed region, and their differences are the operation counts of that update.
* ``duckdb``: the edges live in a DuckDB table.  At ``--samples`` updates spread over the
  inserts and the deletes, the update is applied as one statement and the count is
  recomputed (``SELECT COUNT(*) ...``), timed together; the updates in between are
  applied untimed, in bulk, just before the next sample (a full recompute per update
  would take hours at 10^6 edges).

The final count is reported and compared with DuckDB on the final edges by the
orchestrator.
"""

from __future__ import annotations

import argparse
import time

from bench.common.measure import MemoryMeter, distribution
from bench.common.protocol import Emitter, guarded
from bench.triangles.graph_stream import CREATE_SQL, TRIANGLE_SQL, build, recompute_samples

VIEW = "triangles"
UPKEEP = {"lftj": "lftj", "general": "general", "auto": None}
SYSTEMS = (*UPKEEP, "duckdb")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="one triangle-count configuration")
    p.add_argument("--system", required=True, choices=SYSTEMS)
    p.add_argument("--edges", type=int, required=True)
    p.add_argument("--inserts", type=int, default=1000)
    p.add_argument("--delete-fraction", type=float, default=0.1)
    p.add_argument("--samples", type=int, default=20, help="DuckDB recomputations")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--gamma", type=float, default=2.5)
    p.add_argument("--avg-degree", type=float, default=8.0)
    return p.parse_args(argv)


def _stream(args: argparse.Namespace):
    return build(args.edges, args.inserts, args.delete_fraction, args.seed, args.gamma,
                 args.avg_degree)



def _ops_summary(diffs: list[dict[str, int]]) -> dict[str, object]:
    """Distributions of seeks+nexts per update and the mean of every counter."""
    if not diffs:
        return {}
    keys = sorted({k for d in diffs for k in d})
    return {
        "seeks_plus_nexts": distribution(
            [d.get("seeks", 0) + d.get("nexts", 0) for d in diffs], digits=1
        ),
        "mean": {k: round(sum(d.get(k, 0) for d in diffs) / len(diffs), 2) for k in keys},
    }


def run_upkeep(args: argparse.Namespace, emit: Emitter) -> None:
    import upkeep

    stream = _stream(args)
    initial = list(zip(stream.src[: stream.initial].tolist(),
                       stream.dst[: stream.initial].tolist(), strict=True))
    updates = stream.updates()
    samples = recompute_samples(stream, args.samples)
    db = upkeep.connect()
    db.execute(CREATE_SQL)
    meter = MemoryMeter()
    meter.baseline()

    t0 = time.perf_counter()
    db.insert("edges", initial)
    load_s = time.perf_counter() - t0
    del initial
    t0 = time.perf_counter()
    try:
        handle = db.create_view(VIEW, TRIANGLE_SQL, strategy=UPKEEP[args.system])
    except upkeep.UnsupportedError as exc:
        emit.result(status="unsupported", error=str(exc), load_seconds=round(load_s, 3))
        return
    build_s = time.perf_counter() - t0
    initial_count = handle.rows()[0][0]
    explain = handle.explain()
    build_memory = meter.report()

    counters = getattr(handle, "counters", None)
    counter_note = None
    prev: dict[str, int] | None = None
    if counters is not None:
        try:
            prev = dict(counters())
        except Exception as exc:  # a strategy without counters: keep timing only
            counters, counter_note = None, f"counters() failed: {type(exc).__name__}: {exc}"
        else:
            if not prev:
                counters, prev = None, None
                counter_note = "counters() is empty: this strategy keeps no operation counts"
    else:
        counter_note = "db.view(name).counters() does not exist in this upkeep version"

    times = {"insert": [], "delete": []}
    ops: dict[str, list[dict[str, int]]] = {"insert": [], "delete": []}
    apply = {"insert": db.insert, "delete": db.delete}
    emit.total = len(updates)
    for j, (kind, edge) in enumerate(updates):
        fn = apply[kind]
        t = time.perf_counter()
        fn("edges", [edge])
        times[kind].append(time.perf_counter() - t)
        if counters is not None:
            cur = dict(counters())
            ops[kind].append({k: v - prev.get(k, 0) for k, v in cur.items()})
            prev = cur
        if j % 256 == 0:
            emit.progress(j)
    emit.progress(len(updates), force=True)
    final_count = handle.rows()[0][0]
    every = times["insert"] + times["delete"]
    emit.result(
        status="ok",
        strategy=explain.splitlines()[0].split("strategy", 1)[-1].strip(),
        explain=explain,
        edges=args.edges,
        load_seconds=round(load_s, 3),
        build_seconds=round(build_s, 3),
        initial_count=initial_count,
        final_count=final_count,
        updates=len(updates),
        update_us={"insert": distribution(times["insert"], 1e6),
                   "delete": distribution(times["delete"], 1e6),
                   "all": distribution(every, 1e6)},
        sample_us=[round(every[j] * 1e6, 2) for j in samples],
        ops={"insert": _ops_summary(ops["insert"]), "delete": _ops_summary(ops["delete"]),
             "all": _ops_summary(ops["insert"] + ops["delete"])} if counters else None,
        counters_note=counter_note,
        counters_total=prev,
        state_size=db.state_size(),
        build_peak_mb=build_memory["peak_mb"],
        **meter.report(),
    )


def run_duckdb(args: argparse.Namespace, emit: Emitter) -> None:
    import duckdb
    import pyarrow as pa

    stream = _stream(args)
    updates = stream.updates()
    samples = set(recompute_samples(stream, args.samples))
    con = duckdb.connect()
    con.execute(CREATE_SQL)
    meter = MemoryMeter()
    meter.baseline()

    def bulk(kind: str, edges: list[tuple[int, int]]) -> None:
        if not edges:
            return
        src, dst = zip(*edges, strict=True)
        con.register("batch_edges", pa.table({"src": pa.array(src, pa.int64()),
                                              "dst": pa.array(dst, pa.int64())}))
        if kind == "insert":
            con.execute("INSERT INTO edges SELECT * FROM batch_edges").fetchall()
        else:
            con.execute("DELETE FROM edges USING batch_edges b "
                        "WHERE edges.src = b.src AND edges.dst = b.dst").fetchall()
        con.unregister("batch_edges")

    t0 = time.perf_counter()
    bulk("insert", list(zip(stream.src[: stream.initial].tolist(),
                            stream.dst[: stream.initial].tolist(), strict=True)))
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    initial_count = con.execute(TRIANGLE_SQL).fetchall()[0][0]
    first_s = time.perf_counter() - t0

    statement = {"insert": "INSERT INTO edges VALUES (?, ?)",
                 "delete": "DELETE FROM edges WHERE src = ? AND dst = ?"}
    pending: list[tuple[str, tuple[int, int]]] = []

    def flush() -> None:
        run: list[tuple[int, int]] = []
        kind = None
        for k, e in pending:
            if k != kind:
                if kind is not None:
                    bulk(kind, run)
                kind, run = k, []
            run.append(e)
        if kind is not None:
            bulk(kind, run)
        pending.clear()

    timed: dict[str, list[float]] = {"insert": [], "delete": []}
    recompute: list[float] = []
    sample_us = []
    count = initial_count
    emit.total = len(updates)
    for j, (kind, edge) in enumerate(updates):
        if j not in samples:
            pending.append((kind, edge))
            continue
        flush()
        t = time.perf_counter()
        con.execute(statement[kind], list(edge)).fetchall()
        t1 = time.perf_counter()
        count = con.execute(TRIANGLE_SQL).fetchall()[0][0]
        t2 = time.perf_counter()
        timed[kind].append(t2 - t)
        recompute.append(t2 - t1)
        sample_us.append(round((t2 - t) * 1e6, 2))
        emit.progress(j, force=True)
    flush()
    final_count = con.execute(TRIANGLE_SQL).fetchall()[0][0]
    emit.progress(len(updates), force=True)
    emit.result(
        status="ok",
        strategy="recompute per sampled update",
        edges=args.edges,
        load_seconds=round(load_s, 3),
        build_seconds=round(first_s, 3),
        initial_count=initial_count,
        final_count=final_count,
        last_sample_count=count,
        updates=len(updates),
        sampled_updates=len(sample_us),
        update_us={"insert": distribution(timed["insert"], 1e6),
                   "delete": distribution(timed["delete"], 1e6),
                   "all": distribution(timed["insert"] + timed["delete"], 1e6)},
        recompute_us=distribution(recompute, 1e6),
        sample_us=sample_us,
        threads=int(con.execute("SELECT current_setting('threads')").fetchall()[0][0]),
        **meter.report(),
    )


def main() -> None:
    args = parse_args()
    emit = Emitter(f"triangle-{args.edges}", args.system, 0)
    body = run_duckdb if args.system == "duckdb" else run_upkeep
    guarded(f"triangle-{args.edges}", args.system, lambda: body(args, emit))


if __name__ == "__main__":
    main()
