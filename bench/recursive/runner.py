"""Runner for one recursive-view configuration (one process each, started by
``recursive_bench.py``; JSON-lines protocol of ``protocol.py``).

Usage::

    python -m bench.recursive.runner --kind maintenance --nodes 100 --density dense \
        --config absorption [--deletes 20]

* ``maintenance`` (``--config`` dred | absorption-eager | absorption): the ``reachable``
  view.  Insert-only: all link tuples in random order, in ten batches.  Then ``--deletes``
  random links deleted one at a time, each its own batch.  DuckDB's recomputation of the
  view after each of the same deletes is timed as the peer, and the final rows compared.
* ``aggsel`` (``--config`` single | multi): cheapest path (``MIN(cost)``) or shortest plus
  cheapest (``MIN(hops), MIN(cost)``), absorption lazy with aggregate selection.
* ``ordering`` (``--config`` dfs | arrival | sifting): ``reachable`` under absorption (lazy,
  the default strategy; eager does not finish on the dense network, as in the paper) with
  that BDD variable order, links arriving one per batch in random order; four arrival
  orders (``ARRIVAL_SEEDS``), BDD nodes summed and listed per order.

* ``distributed`` (``--config`` dred | absorption | absorption-eager | spark | spark-dred):
  ``maintenance`` with the fixpoint over ``--partitions`` partitions (relations split by
  first attribute, as in the paper's execution model); reports tuples and bytes shipped
  between partitions.
  ``spark`` is absorption lazy, ``spark-dred`` DRed, on the Spark engine (``local[2]``, one Spark task per
  partition and superstep), timed end to end: change files, micro-batches and supersteps.

Counters are the view's ``counters()``: *shipped* counts derivations passed into a
fixpoint relation plus removals (DRed: over-deletions, re-derivations and insertions).
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

from bench.common.measure import MemoryMeter
from bench.common.protocol import Emitter, guarded
from bench.recursive.gtitm import transit_stub

REACH = ("WITH RECURSIVE reach(src, dst) AS (SELECT src, dst FROM link UNION "
         "SELECT link.src, reach.dst FROM link, reach WHERE link.dst = reach.src) "
         "SELECT * FROM reach")
CHEAPEST = ("WITH RECURSIVE p(src, dst, cost) AS (SELECT src, dst, cost FROM link UNION "
            "SELECT link.src, p.dst, link.cost + p.cost FROM link, p WHERE link.dst = p.src) "
            "SELECT src, dst, MIN(cost) AS cost FROM p GROUP BY src, dst")
MULTI = ("WITH RECURSIVE p(src, dst, hops, cost) AS (SELECT src, dst, 1, cost FROM link UNION "
         "SELECT link.src, p.dst, p.hops + 1, link.cost + p.cost FROM link, p "
         "WHERE link.dst = p.src) "
         "SELECT src, dst, MIN(hops) AS hops, MIN(cost) AS cost FROM p GROUP BY src, dst")
LINK_SQL = "CREATE TABLE link(src INTEGER, dst INTEGER, cost INTEGER)"
ARRIVAL_SEEDS = (11, 12, 13, 14)  # the ordering kind's random arrival orders
KINDS = {"maintenance": ("dred", "absorption-eager", "absorption"),
         "aggsel": ("single", "multi"), "ordering": ("dfs", "arrival", "sifting"),
         "distributed": ("dred", "absorption", "absorption-eager", "spark", "spark-dred")}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="one recursive-view configuration")
    p.add_argument("--kind", required=True, choices=KINDS)
    p.add_argument("--config", required=True)
    p.add_argument("--nodes", type=int, default=100)
    p.add_argument("--density", choices=("dense", "sparse"), default="dense")
    p.add_argument("--deletes", type=int, default=20)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--bdd-ordering", choices=("sifting", "dfs", "arrival"), default="sifting",
                   help="BDD variable order of the maintenance and distributed kinds")
    args = p.parse_args(argv)
    if args.config not in KINDS[args.kind]:
        p.error(f"--config for {args.kind} is one of {KINDS[args.kind]}")
    return args


def _diff(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: after.get(k, 0) - before.get(k, 0) for k in after}


def _delete_each(db, victims: list[tuple], emit: Emitter, done: int) -> float:
    started = time.perf_counter()
    for i, link in enumerate(victims, 1):
        db.delete("link", [link])
        emit.progress(done + i)
    return time.perf_counter() - started


def maintenance(args: argparse.Namespace, links: list[tuple], emit: Emitter) -> dict[str, Any]:
    import upkeep

    rnd = random.Random(7)
    order = links[:]
    rnd.shuffle(order)
    victims = rnd.sample(links, min(args.deletes, len(links)))
    partitions = args.partitions if args.kind == "distributed" else 1
    on_spark = args.config.startswith("spark")
    if on_spark:
        db = upkeep.connect(engine="spark", shards=partitions, bdd_ordering=args.bdd_ordering)
    else:
        db = upkeep.connect(fixpoint_partitions=partitions, bdd_ordering=args.bdd_ordering)
    db.execute(LINK_SQL)
    strategy = {"spark": "absorption", "spark-dred": "dred"}.get(args.config, args.config)
    view = db.create_view("reach", REACH, strategy=strategy)
    started = time.perf_counter()
    step = max(1, len(order) // 10)
    for i in range(0, len(order), step):
        db.insert("link", order[i:i + step])
        emit.progress(min(i + step, len(order)) // step)
    insert_s = time.perf_counter() - started
    after_insert = view.counters()
    rows = len(view.rows())
    state = None if on_spark else db.runtime("reach").state_size()
    delete_s = _delete_each(db, victims, emit, 10)
    duck_s, duck_rows = _duckdb_deletes(links, victims)
    final, counters = sorted(view.rows()), view.counters()
    if on_spark:
        db.close()
    return {"insert_s": insert_s, "delete_s": delete_s, "rows": rows, "state": state,
            "insert": after_insert, "delete": _diff(counters, after_insert),
            "duckdb_delete_s": duck_s, "matches_duckdb": final == duck_rows,
            "deleted": len(victims)}


def _duckdb_deletes(links: list[tuple], victims: list[tuple]) -> tuple[float, list]:
    """DuckDB's WITH RECURSIVE after each of the same deletes, timed."""
    import duckdb

    con = duckdb.connect()
    con.execute(LINK_SQL)
    con.executemany("INSERT INTO link VALUES (?, ?, ?)", links)
    total = 0.0
    rows: list = []
    for v in victims:
        started = time.perf_counter()
        con.execute("DELETE FROM link WHERE src = ? AND dst = ? AND cost = ?", list(v))
        rows = con.execute(REACH).fetchall()
        total += time.perf_counter() - started
    return total, sorted(rows)


def aggsel(args: argparse.Namespace, links: list[tuple], emit: Emitter) -> dict[str, Any]:
    import upkeep

    rnd = random.Random(7)
    db = upkeep.connect()
    db.execute(LINK_SQL)
    view = db.create_view("p", CHEAPEST if args.config == "single" else MULTI)
    started = time.perf_counter()
    db.insert("link", links)
    insert_s = time.perf_counter() - started
    after_insert = view.counters()
    delete_s = _delete_each(db, rnd.sample(links, min(args.deletes, len(links))), emit, 1)
    return {"insert_s": insert_s, "delete_s": delete_s, "insert": after_insert,
            "delete": _diff(view.counters(), after_insert), "rows": len(view.rows())}


def ordering(args: argparse.Namespace, links: list[tuple], emit: Emitter) -> dict[str, Any]:
    import upkeep

    started = time.perf_counter()
    nodes, done = [], 0
    for seed in ARRIVAL_SEEDS:  # several randomized arrival orders, one link per batch
        arrivals = links[:]
        random.Random(seed).shuffle(arrivals)
        db = upkeep.connect(bdd_ordering=args.config)
        db.execute(LINK_SQL)
        view = db.create_view("reach", REACH, strategy="absorption")
        for link in arrivals:
            db.insert("link", [link])
            done += 1
            emit.progress(done)
        counters = view.counters()
        nodes.append(counters["bdd_nodes"])
        db.close()
    return {"time_s": time.perf_counter() - started, "bdd_nodes": sum(nodes),
            "bdd_nodes_by_arrival": nodes, "arrival_seeds": list(ARRIVAL_SEEDS),
            "rows": counters["derived_tuples"]}


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    name = f"{args.kind}-{args.nodes}-{args.density}"
    links = list(transit_stub(args.nodes, density=args.density, seed=args.seed).links)
    total = {"maintenance": 10 + args.deletes, "distributed": 10 + args.deletes,
             "aggsel": 1 + args.deletes, "ordering": len(links) * len(ARRIVAL_SEEDS)}[args.kind]
    emit = Emitter(name, args.config, total)

    def body() -> None:
        meter = MemoryMeter()
        meter.baseline()
        run = {"maintenance": maintenance, "distributed": maintenance, "aggsel": aggsel,
               "ordering": ordering}[args.kind]
        out = run(args, links, emit)
        emit.result(status="ok", links=len(links), **out, **meter.report())

    guarded(name, args.config, body)


if __name__ == "__main__":
    main()
