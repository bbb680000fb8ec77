"""Update provenance: tracking overhead, size, and what-if against re-running the log.

The synthetic workload of section 6 of ``papers/update-provenance-hyperplane-transactions.txt``
(spec U.11): a relation of ``--rows`` tuples with values drawn uniformly from fixed domains,
then ``--queries`` hyperplane queries (insert / delete / modify, uniform), delete and modify
selecting on the numeric columns, each query its own transaction.  Measured, each part in
its own process (peak memory is per process):

* ``track``: the log applied to an annotated relation (:mod:`upkeep.update_provenance`)
  with no provenance (Boolean annotations, the same indexed operator), the normal form
  and the naive construction: seconds, expression size (DAG nodes and tree size), tuples
  kept, peak resident memory;
* ``whatif``: a local database with the provenance table and a maintained join + aggregate
  view, the log committed statement by statement; then ``db.what_if`` aborting one
  transaction and removing one input row, on the table and on the view, against DuckDB
  re-running the log without them (load + every statement + the view's query).

Usage::

    python -m bench.provenance.bench --rows 1000000 --queries 2000
    python -m bench.provenance.bench --rows 100000 --queries 500 --out bench/results/x.json

Results go to ``bench/results/provenance.json``; ``--report`` prints the Markdown table of
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time

from bench.common.environment import git_rev, machine, now
from bench.common.measure import peak_rss_mb

COLUMNS = ("k", "a", "b", "c")
VIEW = ("SELECT r.a, d.label, COUNT(*) AS n, SUM(r.c) AS total FROM r JOIN d ON r.b = d.b "
        "GROUP BY r.a, d.label")


def workload(rows: int, queries: int, seed: int) -> tuple[list[tuple], list[str]]:
    """The input rows and the log as SQL statements (hyperplane only)."""
    rng = random.Random(seed)
    keys = max(rows // 5, 1)

    def row() -> tuple:
        return (rng.randrange(keys), rng.randrange(10), rng.randrange(10), rng.randrange(1000))

    data = list({row() for _ in range(rows)})
    log = []
    for _ in range(queries):
        kind = rng.choice(("insert", "delete", "modify"))
        if kind == "insert":
            log.append(f"INSERT INTO r VALUES {row()}")
            continue
        where = f"k = {rng.randrange(keys)} AND a = {rng.randrange(10)}"
        if kind == "delete":
            log.append(f"DELETE FROM r WHERE {where}")
        else:
            log.append(f"UPDATE r SET b = {rng.randrange(10)} WHERE {where}")
    return data, log


def _queries(log: list[str]):
    from sqlglot import parse_one

    from upkeep.types import SqlType
    from upkeep.update_provenance.hyperplane import HyperplaneParser, Insert

    parser = HyperplaneParser("r", [(c, SqlType("INTEGER")) for c in COLUMNS])
    out = []
    for sql in log:
        stmt = parse_one(sql)
        if sql.startswith("INSERT"):
            out.append(Insert(tuple(int(v.this) for v in stmt.expression.expressions[0])))
        elif sql.startswith("DELETE"):
            out.append(parser.delete(stmt))
        else:
            out.append(parser.update(stmt))
    return out


def track(args: argparse.Namespace) -> dict:
    """The log on an annotated relation, in one mode."""
    from upkeep.update_provenance.annotators import Concrete, Naive, NormalForm
    from upkeep.update_provenance.expression import dag_size, tree_size, var
    from upkeep.update_provenance.relation import ProvenanceRelation, RelationTransaction
    from upkeep.update_provenance.structures import Boolean

    data, log = workload(args.rows, args.queries, args.seed)
    queries = _queries(log)
    annotator = {"none": lambda: Concrete(Boolean(), lambda name: True),
                 "update": NormalForm, "update-naive": Naive}[args.mode]()
    rel = ProvenanceRelation(annotator, len(COLUMNS))
    if args.mode == "none":
        rel.commit(dict.fromkeys(data, True))
    else:
        rel.commit({row: var(f"r#{i}") for i, row in enumerate(data, 1)})
    for query in queries:  # the indexes the log needs exist before it runs
        if hasattr(query, "pattern"):
            rel.candidates(query.pattern)
    affected = 0
    t0 = time.perf_counter()
    for i, query in enumerate(queries, 1):
        tx = RelationTransaction(rel)
        affected += len(tx.apply(query, var(f"T{i}")))
        rel.commit(tx.result())
    seconds = time.perf_counter() - t0
    out = {"mode": args.mode, "seconds": round(seconds, 3), "affected": affected,
           "tuples": len(rel), "peak_mb": round(peak_rss_mb(), 1)}
    if args.mode != "none":
        nodes = list(rel.annotations.values())
        out["dag_nodes"] = dag_size(nodes) - len(data)  # beyond the input variables
        out["tree_size"] = sum(tree_size(n) for n in nodes) - len(data)
    return out


def whatif(args: argparse.Namespace) -> dict:
    """What-if through the database against DuckDB re-running the log."""
    import duckdb
    import pyarrow as pa

    import upkeep

    data, log = workload(args.rows, args.queries, args.seed)
    dims = [(b, f"group{b % 3}") for b in range(10)]
    db = upkeep.connect()
    db.execute("CREATE TABLE r (k INTEGER, a INTEGER, b INTEGER, c INTEGER) "
               "WITH (provenance = 'update')")
    db.execute("CREATE TABLE d (b INTEGER, label VARCHAR)")
    db.insert("d", dims)
    t0 = time.perf_counter()
    db.insert("r", data)
    load_s = time.perf_counter() - t0
    db.create_view("v", VIEW)
    t0 = time.perf_counter()
    for sql in log:
        db.execute(sql)
    log_s = time.perf_counter() - t0
    txns = sorted(db.transactions())
    victim_txn = txns[1 + len(txns) // 2]
    victim_row = data[len(data) // 2]

    def timed(fn) -> tuple[float, object]:
        t = time.perf_counter()
        got = fn()
        return time.perf_counter() - t, got

    arrow = pa.Table.from_pylist([dict(zip(COLUMNS, r, strict=True)) for r in data])

    def rerun(skip_statement: int | None, skip_row: tuple | None) -> dict:
        con = duckdb.connect()
        con.execute("CREATE TABLE d (b INTEGER, label VARCHAR)")
        con.executemany("INSERT INTO d VALUES (?, ?)", dims)
        con.register("input", arrow)
        con.execute("CREATE TABLE r AS SELECT DISTINCT * FROM input")
        if skip_row is not None:
            con.execute("DELETE FROM r WHERE k = ? AND a = ? AND b = ? AND c = ?",
                        list(skip_row))
        for i, sql in enumerate(log):
            if i != skip_statement:
                con.execute(sql)
                if sql.startswith("UPDATE") or sql.startswith("INSERT"):
                    con.execute("CREATE OR REPLACE TABLE r AS SELECT DISTINCT * FROM r")
        return dict(((a, lab), (n, t)) for a, lab, n, t in con.execute(VIEW).fetchall())

    # the log's statement i is transaction txns[i + 1] (txns[0] loaded the input rows)
    statement = txns.index(victim_txn) - 1
    abort_s, world = timed(lambda: db.what_if("v", abort=[victim_txn]))
    rerun_abort_s, expected = timed(lambda: rerun(statement, None))
    got = {(a, lab): (n, t) for a, lab, n, t in world.rows}
    assert got == expected, "what-if (abort) differs from the re-run"
    without_s, world = timed(lambda: db.what_if("v", without=[("r", victim_row)]))
    rerun_without_s, expected = timed(lambda: rerun(None, victim_row))
    assert {(a, lab): (n, t) for a, lab, n, t in world.rows} == expected, \
        "what-if (without) differs from the re-run"
    table_abort_s, _ = timed(lambda: db.what_if("r", abort=[victim_txn]))
    return {"load_s": round(load_s, 2), "log_s": round(log_s, 2),
            "statements_per_s": round(len(log) / log_s),
            "abort_view_s": round(abort_s, 4), "abort_table_s": round(table_abort_s, 4),
            "rerun_abort_s": round(rerun_abort_s, 3),
            "abort_speedup": round(rerun_abort_s / abort_s, 1),
            "without_view_s": round(without_s, 4), "rerun_without_s": round(rerun_without_s, 3),
            "without_speedup": round(rerun_without_s / without_s, 1),
            "provenance": db._catalog.provenance.size(), "peak_mb": round(peak_rss_mb(), 1)}


def run_all(args: argparse.Namespace) -> dict:
    common = ["--rows", str(args.rows), "--queries", str(args.queries), "--seed", str(args.seed)]
    result = {"rows": args.rows, "queries": args.queries, "date": now(), "git": git_rev(),
              "machine": machine(), "command": "python -m bench.provenance.bench " + " ".join(
                  sys.argv[1:]), "track": {}}
    for mode in ("none", "update", "update-naive"):
        print("track", mode, flush=True)
        done = subprocess.run([sys.executable, "-m", "bench.provenance.bench", *common,
                               "--part", "track", "--mode", mode],
                              capture_output=True, text=True, check=True)
        result["track"][mode] = json.loads(done.stdout.strip().splitlines()[-1])
        print(result["track"][mode], flush=True)
    print("whatif", flush=True)
    done = subprocess.run([sys.executable, "-m", "bench.provenance.bench", *common,
                           "--part", "whatif"], capture_output=True, text=True, check=True)
    result["whatif"] = json.loads(done.stdout.strip().splitlines()[-1])
    print(result["whatif"], flush=True)
    return result


def report(result: dict) -> str:
    """The Markdown table of docs/benchmarks.md."""
    t = result["track"]
    base = t["none"]["seconds"]
    lines = [
        f"{result['rows']:,} input tuples, {result['queries']:,} hyperplane queries "
        f"(each its own transaction), {t['update']['affected']:,} tuple changes; "
        f"`{result['command']}` ({result['date']}, {result['git']})",
        "",
        "| tracking | log seconds | overhead | expression nodes (DAG) | tree size | "
        "tuples kept | peak MB |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for mode, label in (("none", "no provenance"), ("update", "normal form"),
                        ("update-naive", "naive")):
        r = t[mode]
        over = "–" if mode == "none" else f"{(r['seconds'] / base - 1) * 100:+.0f}%"
        lines.append(f"| {label} | {r['seconds']:.2f} | {over} | {r.get('dag_nodes', '–')} | "
                     f"{r.get('tree_size', '–')} | {r['tuples']:,} | {r['peak_mb']:,.0f} |")
    w = result["whatif"]
    lines += [
        "",
        "| what-if (join + aggregate view) | upkeep s | DuckDB re-run s | speed-up |",
        "|---|---:|---:|---:|",
        f"| abort one transaction | {w['abort_view_s']:.4f} | {w['rerun_abort_s']:.2f} | "
        f"{w['abort_speedup']:,.0f}x |",
        f"| remove one input row | {w['without_view_s']:.4f} | {w['rerun_without_s']:.2f} | "
        f"{w['without_speedup']:,.0f}x |",
        "",
        f"Through the database: input rows loaded in {w['load_s']} s, the log committed at "
        f"{w['statements_per_s']:,} statements/s with the view maintained; aborting on the "
        f"table alone {w['abort_table_s']:.4f} s.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--part", choices=("track", "whatif"))
    parser.add_argument("--mode", choices=("none", "update", "update-naive"), default="update")
    parser.add_argument("--out", default="bench/results/provenance.json")
    parser.add_argument("--report", action="store_true", help="print the table of --out")
    args = parser.parse_args()
    if args.report:
        with open(args.out) as f:
            print(report(json.load(f)))
        return
    if args.part == "track":
        print(json.dumps(track(args)))
    elif args.part == "whatif":
        print(json.dumps(whatif(args)))
    else:
        result = run_all(args)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
        print(report(result))


if __name__ == "__main__":
    main()
