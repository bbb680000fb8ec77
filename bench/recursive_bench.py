"""Recursive views on GT-ITM transit-stub networks (section VIII of
``recursive-views-absorption-provenance.txt``).

Usage::

    python bench/recursive_bench.py [--nodes 100 1000] [--deletes 20] [--timeout 300]

For each topology (``gtitm.py``; dense and sparse) and each configuration, one process:

* ``maintenance``: the ``reachable`` view under DRed, absorption eager and absorption lazy.
  Insert-only: all link tuples in random order, in ten batches.  Insert-then-delete:
  then ``--deletes`` random links deleted one at a time, each its own batch.  Reported:
  tuples shipped (derivations passed into the fixpoint relation, plus removals; for DRed
  over-deletions, re-derivations and insertions), rule derivations, wall time, BDD nodes
  and provenance bytes per derived tuple (12 bytes per node), operator state.  DuckDB's
  recomputation of the view after each delete is timed as the peer.
* ``aggsel``: cheapest path (``MIN(cost)``, single) and shortest plus cheapest
  (``MIN(hops), MIN(cost)``, multi) with aggregate selection, absorption lazy.
* ``ordering``: BDD nodes of the ``reachable`` provenance (absorption eager) with the
  depth-first order, arrival order and CUDD sifting, links arriving in random order.

Results go to ``bench/results/recursive.json`` and the "Recursive views" section of
``docs/benchmarks.md`` (the other sections are kept).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import random
import time
from pathlib import Path
from typing import Any

from doc_format import fmt_number, fmt_times, ratio_of, replace_section
from environment import git_rev, machine, now
from gtitm import transit_stub

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "recursive.json"
DOC = ROOT / "docs" / "benchmarks.md"
HEADING = "## Recursive views (GT-ITM transit-stub networks)"

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
STRATEGIES = ("dred", "absorption-eager", "absorption")


def links_of(nodes: int, density: str, seed: int = 1) -> list[tuple[int, int, int]]:
    return list(transit_stub(nodes, density=density, seed=seed).links)


def _counters(db, view: str) -> dict[str, int]:
    return dict(db.view(view).counters())


def _diff(after: dict, before: dict) -> dict:
    return {k: after.get(k, 0) - before.get(k, 0) for k in after}


def run_maintenance(nodes: int, density: str, strategy: str, deletes: int) -> dict[str, Any]:
    import upkeep

    links = links_of(nodes, density)
    rnd = random.Random(7)
    order = links[:]
    rnd.shuffle(order)
    db = upkeep.connect(bdd_ordering="sifting")
    db.execute("CREATE TABLE link(src INTEGER, dst INTEGER, cost INTEGER)")
    db.create_view("reach", REACH, strategy=strategy)
    started = time.perf_counter()
    step = max(1, len(order) // 10)
    for i in range(0, len(order), step):
        db.insert("link", order[i:i + step])
    insert_s = time.perf_counter() - started
    after_insert = _counters(db, "reach")
    rows = len(db.view("reach").rows())
    state = db._view("reach").state_size()
    victims = rnd.sample(links, min(deletes, len(links)))
    started = time.perf_counter()
    for link in victims:
        db.delete("link", [link])
    delete_s = time.perf_counter() - started
    after_delete = _counters(db, "reach")
    final = sorted(db.view("reach").rows())
    remaining = [link for link in links if link not in set(victims)]
    duck_s, duck_rows = _duckdb_recompute(remaining, victims)
    return {
        "status": "ok", "insert_s": insert_s, "delete_s": delete_s, "rows": rows,
        "insert": after_insert, "delete": _diff(after_delete, after_insert),
        "state": state, "duckdb_delete_s": duck_s, "matches_duckdb": final == duck_rows,
        "links": len(links), "deleted": len(victims),
    }


def _duckdb_recompute(remaining: list[tuple], victims: list[tuple]) -> tuple[float, list]:
    """DuckDB's WITH RECURSIVE after each delete (the same deletes, timed)."""
    import duckdb

    con = duckdb.connect()
    con.execute("CREATE TABLE link(src INTEGER, dst INTEGER, cost INTEGER)")
    con.executemany("INSERT INTO link VALUES (?, ?, ?)", remaining + victims)
    total = 0.0
    rows: list = []
    for v in victims:
        started = time.perf_counter()
        con.execute("DELETE FROM link WHERE src = ? AND dst = ? AND cost = ?", list(v))
        rows = con.execute(REACH).fetchall()
        total += time.perf_counter() - started
    return total, sorted(rows)


def run_aggsel(nodes: int, density: str, which: str, deletes: int) -> dict[str, Any]:
    import upkeep

    links = links_of(nodes, density)
    rnd = random.Random(7)
    db = upkeep.connect()
    db.execute("CREATE TABLE link(src INTEGER, dst INTEGER, cost INTEGER)")
    db.create_view("p", CHEAPEST if which == "single" else MULTI)
    started = time.perf_counter()
    db.insert("link", links)
    insert_s = time.perf_counter() - started
    after_insert = _counters(db, "p")
    started = time.perf_counter()
    for link in rnd.sample(links, min(deletes, len(links))):
        db.delete("link", [link])
    delete_s = time.perf_counter() - started
    return {"status": "ok", "insert_s": insert_s, "delete_s": delete_s,
            "insert": after_insert, "delete": _diff(_counters(db, "p"), after_insert),
            "rows": len(db.view("p").rows())}


def run_ordering(nodes: int, density: str, ordering: str) -> dict[str, Any]:
    import upkeep

    links = links_of(nodes, density)
    random.Random(11).shuffle(links)
    db = upkeep.connect(bdd_ordering=ordering)
    db.execute("CREATE TABLE link(src INTEGER, dst INTEGER, cost INTEGER)")
    db.create_view("reach", REACH, strategy="absorption-eager")
    started = time.perf_counter()
    for link in links:  # randomized arrivals, one link per batch
        db.insert("link", [link])
    counters = _counters(db, "reach")
    return {"status": "ok", "time_s": time.perf_counter() - started,
            "bdd_nodes": counters["bdd_nodes"], "rows": counters["derived_tuples"]}


def _child(kind: str, args: tuple, out) -> None:
    fn = {"maintenance": run_maintenance, "aggsel": run_aggsel, "ordering": run_ordering}[kind]
    try:
        out.put(fn(*args))
    except Exception as exc:  # reported, not raised: one config must not stop the others
        out.put({"status": "error", "error": repr(exc)})


def run_isolated(kind: str, args: tuple, timeout: float) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_child, args=(kind, args, out))
    proc.start()
    proc.join(timeout)
    if proc.is_alive():
        proc.kill()
        proc.join()
        return {"status": "timeout", "timeout_s": timeout}
    return out.get() if not out.empty() else {"status": "error", "error": "no result"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[100])
    parser.add_argument("--deletes", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args()
    results: list[dict[str, Any]] = []
    plan = []
    for nodes in args.nodes:
        for density in ("dense", "sparse"):
            for s in STRATEGIES:
                plan.append(("maintenance", (nodes, density, s, args.deletes),
                             {"nodes": nodes, "density": density, "strategy": s}))
            for which in ("single", "multi"):
                plan.append(("aggsel", (nodes, density, which, args.deletes),
                             {"nodes": nodes, "density": density, "aggsel": which}))
            for ordering in ("dfs", "arrival", "sifting"):
                plan.append(("ordering", (nodes, density, ordering),
                             {"nodes": nodes, "density": density, "ordering": ordering}))
    for i, (kind, a, identity) in enumerate(plan, 1):
        print(f"[{i}/{len(plan)}] {kind} {identity}", flush=True)
        r = run_isolated(kind, a, args.timeout)
        r.update(identity, kind=kind)
        print("   ", json.dumps({k: v for k, v in r.items() if k not in ("insert", "delete")}),
              flush=True)
        results.append(r)
    command = "python bench/recursive_bench.py " + " ".join(
        [f"--nodes {' '.join(map(str, args.nodes))}", f"--deletes {args.deletes}",
         f"--timeout {args.timeout:g}"])
    data = {"command": command, "git": git_rev(), "machine": machine(), "date": now(),
            "results": results}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(data, indent=2, default=str) + "\n")
    replace_section(DOC, HEADING, report(data))


def _find(results, **match):
    for r in results:
        if all(r.get(k) == v for k, v in match.items()):
            return r
    return None


def report(data: dict[str, Any]) -> str:
    res = data["results"]
    lines = [HEADING, "",
             f"`{data['command']}` (git {data['git']}, {data['machine']}, {data['date']}).", "",
             "Maintenance of `reachable` (insert all links in 10 batches, then delete links "
             "one at a time). *Shipped* counts tuples passed into the fixpoint relation plus "
             "removals (DRed: over-deletions, re-derivations and insertions).", "",
             "| nodes | density | strategy | insert: shipped / time | deletes: shipped / time "
             "| lazy-vs-this shipped on deletes | DuckDB recompute on the same deletes | "
             "BDD bytes per tuple | state (tuples) |",
             "|---:|---|---|---|---|---:|---|---:|---:|"]
    for r in res:
        if r["kind"] != "maintenance":
            continue
        if r.get("status") != "ok":
            lines.append(f"| {r['nodes']} | {r['density']} | {r['strategy']} | "
                         f"{r['status']} | | | | | |")
            continue
        lazy = _find(res, kind="maintenance", nodes=r["nodes"], density=r["density"],
                     strategy="absorption")
        lazy_ship = lazy["delete"]["shipped"] if lazy and lazy.get("status") == "ok" else None
        ratio = ratio_of(r["delete"]["shipped"], lazy_ship)
        per_tuple = ratio_of(r["insert"].get("provenance_bytes"),
                             r["insert"].get("derived_tuples"))
        lines.append(
            f"| {r['nodes']} | {r['density']} | {r['strategy']} | "
            f"{fmt_number(r['insert']['shipped'])} / {r['insert_s']:.2f} s | "
            f"{fmt_number(r['delete']['shipped'])} / {r['delete_s']:.2f} s | "
            f"{fmt_times(ratio)} | {r['duckdb_delete_s']:.2f} s "
            f"({'same rows' if r['matches_duckdb'] else 'ROWS DIFFER'}) | "
            f"{fmt_number(per_tuple, 1)} | {fmt_number(r['state'])} |")
    lines += ["", "Aggregate selection (absorption lazy; insert all links, then the deletes):",
              "", "| nodes | density | query | shipped (insert) | pruned | time insert / deletes |",
              "|---:|---|---|---:|---:|---|"]
    for r in res:
        if r["kind"] != "aggsel":
            continue
        if r.get("status") != "ok":
            lines.append(f"| {r['nodes']} | {r['density']} | {r['aggsel']} | {r['status']} | | |")
            continue
        lines.append(f"| {r['nodes']} | {r['density']} | {r['aggsel']} | "
                     f"{fmt_number(r['insert']['shipped'])} | {fmt_number(r['insert']['pruned'])} "
                     f"| {r['insert_s']:.2f} s / {r['delete_s']:.2f} s |")
    lines += ["", "BDD variable order (reachable, absorption eager, links in random order):", "",
              "| nodes | density | order | BDD nodes | vs arrival | time |",
              "|---:|---|---|---:|---:|---|"]
    for r in res:
        if r["kind"] != "ordering":
            continue
        if r.get("status") != "ok":
            lines.append(f"| {r['nodes']} | {r['density']} | {r['ordering']} | {r['status']} | | |")
            continue
        arr = _find(res, kind="ordering", nodes=r["nodes"], density=r["density"],
                    ordering="arrival")
        base = arr["bdd_nodes"] if arr and arr.get("status") == "ok" else None
        ratio = ratio_of(r["bdd_nodes"], base)
        lines.append(f"| {r['nodes']} | {r['density']} | {r['ordering']} | "
                     f"{fmt_number(r['bdd_nodes'])} | "
                     f"{'–' if ratio is None else f'{ratio:.2f}'} | {r['time_s']:.2f} s |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
