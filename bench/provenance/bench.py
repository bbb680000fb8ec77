"""Update provenance: tracking overhead, size, and what-if against re-running the log.

Two workloads of section 6 of ``papers/update-provenance-hyperplane-transactions.txt``
(spec U.11): ``synthetic``, a relation of ``--rows`` tuples with values drawn uniformly from
fixed domains and ``--queries`` hyperplane queries (insert / delete / modify, uniform; delete
and modify select on the numeric columns), each its own transaction; and ``tpcc``, the
New-Order / Payment / Delivery log of :mod:`bench.provenance.tpcc` over ``--warehouses``.
Measured, each part in its own process (peak memory is per process):

* ``track``: the log applied to annotated relations (:mod:`upkeep.update_provenance`)
  with no provenance (Boolean annotations, the same indexed operator), the normal form
  and the naive construction: seconds, expression size (DAG nodes and tree size), tuples
  kept, peak resident memory;
* ``whatif``: a local database with the provenance tables and a maintained join +
  aggregate view, the log committed transaction by transaction; then ``db.what_if`` on the
  view aborting one transaction and removing one input row, against DuckDB re-running the
  log without them (load + every statement + the view's query), results checked equal.

Usage::

    python -m bench.provenance.bench --rows 1000000 --queries 2000
    python -m bench.provenance.bench --workload tpcc --warehouses 4 --queries 2000

Results go to ``bench/results/provenance.json`` (``provenance_tpcc.json``); ``--report``
prints the Markdown table of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass

from sqlglot import exp, parse_one

from bench.common.environment import git_rev, machine, now
from bench.common.measure import peak_rss_mb
from bench.provenance.tpcc import TABLES, generate
from upkeep.sql import insert_target


@dataclass
class Workload:
    """Tables (name -> columns; ``dims`` keep no provenance), their input rows, the log as
    transactions of SQL statements, and the join + aggregate view what-if is asked on."""

    tables: dict[str, tuple[str, ...]]
    rows: dict[str, list[tuple]]
    transactions: list[list[str]]
    view: str
    #: a top-k view: what-if pushes its batch through it (ties broken by the rows' values)
    #: or, with DuckDB recomputing it, answers on a scratch copy of its table
    top: str = ""
    dims: frozenset = frozenset()
    distinct: bool = True  # whether an UPDATE can merge rows (set semantics in the re-run)


def synthetic(rows: int, queries: int, seed: int) -> Workload:
    """Section 6.1's synthetic workload: uniform values, delete and modify on numerics."""
    rng = random.Random(seed)
    keys = max(rows // 5, 1)

    def row() -> tuple:
        return (rng.randrange(keys), rng.randrange(10), rng.randrange(10), rng.randrange(1000))

    data = list({row() for _ in range(rows)})
    log = []
    for _ in range(queries):
        kind = rng.choice(("insert", "delete", "modify"))
        if kind == "insert":
            log.append([f"INSERT INTO r VALUES {row()}"])
            continue
        where = f"k = {rng.randrange(keys)} AND a = {rng.randrange(10)}"
        if kind == "delete":
            log.append([f"DELETE FROM r WHERE {where}"])
        else:
            log.append([f"UPDATE r SET b = {rng.randrange(10)} WHERE {where}"])
    view = ("SELECT r.a, d.label, COUNT(*) AS n, SUM(r.c) AS total FROM r JOIN d ON r.b = d.b "
            "GROUP BY r.a, d.label")
    return Workload({"r": ("k", "a", "b", "c"), "d": ("b", "label")},
                    {"r": data, "d": [(b, f"group{b % 3}") for b in range(10)]},
                    log, view, "SELECT k, a, b, c FROM r ORDER BY c DESC, k, a, b LIMIT 10",
                    frozenset({"d"}))


def tpcc_workload(args: argparse.Namespace) -> Workload:
    """The TPC-C log of :mod:`bench.provenance.tpcc`; the view is each district's
    undelivered orders: lines and amount (orders joined with their order lines)."""
    log = generate(args.warehouses, args.tpcc_scale, args.queries, args.seed)
    view = ("SELECT o.o_w_id, o.o_d_id, COUNT(*) AS lines, SUM(ol.ol_amount) AS amount "
            "FROM orders o JOIN order_line ol ON o.o_w_id = ol.ol_w_id AND "
            "o.o_d_id = ol.ol_d_id AND o.o_id = ol.ol_o_id WHERE o.o_carrier_id = 0 "
            "GROUP BY o.o_w_id, o.o_d_id")
    top = ("SELECT ol_w_id, ol_d_id, ol_o_id, ol_number, ol_amount FROM order_line ORDER BY "
           "ol_amount DESC, ol_w_id, ol_d_id, ol_o_id, ol_number LIMIT 10")
    return Workload(dict(TABLES), log.rows, log.transactions, view, top, distinct=False)


def workload(args: argparse.Namespace) -> Workload:
    if args.workload == "tpcc":
        return tpcc_workload(args)
    return synthetic(args.rows, args.queries, args.seed)


def _target(stmt: exp.Expression) -> str:
    return insert_target(stmt) if isinstance(stmt, exp.Insert) else stmt.this.name.lower()


def _queries(w: Workload) -> list[list[tuple[str, object]]]:
    """Each transaction's statements as (table, hyperplane query)."""
    from upkeep.types import SqlType
    from upkeep.update_provenance.hyperplane import HyperplaneParser, Insert

    parsers = {t: HyperplaneParser(t, [(c, SqlType("BIGINT")) for c in cols])
               for t, cols in w.tables.items()}
    out = []
    for tx in w.transactions:
        queries = []
        for sql in tx:
            stmt = parse_one(sql)
            table = _target(stmt)
            if isinstance(stmt, exp.Insert):
                values = stmt.expression.expressions[0].expressions
                queries.append((table, Insert(tuple(int(v.this) for v in values))))
            elif isinstance(stmt, exp.Delete):
                queries.append((table, parsers[table].delete(stmt)))
            else:
                queries.append((table, parsers[table].update(stmt)))
        out.append(queries)
    return out


def _annotated(w: Workload, mode: str) -> tuple[dict, int]:
    """The workload's provenance relations loaded in ``mode``, and how many input rows."""
    from upkeep.update_provenance.annotators import Concrete, Naive, NormalForm
    from upkeep.update_provenance.expression import var
    from upkeep.update_provenance.relation import ProvenanceRelation
    from upkeep.update_provenance.structures import Boolean

    relations, inputs = {}, 0
    for table, cols in w.tables.items():
        if table in w.dims:
            continue
        annotator = {"none": lambda: Concrete(Boolean(), lambda name: True),
                     "update": NormalForm, "update-naive": Naive}[mode]()
        rel = relations[table] = ProvenanceRelation(annotator, len(cols))
        if mode == "none":
            rel.commit(dict.fromkeys(w.rows[table], True))
        else:
            rel.commit({row: var(f"{table}#{i}") for i, row in enumerate(w.rows[table], 1)})
        inputs += len(w.rows[table])
    return relations, inputs


def indexed(w: Workload, mode: str) -> tuple[dict, list, int]:
    """The workload's annotated relations in ``mode`` with the indexes its log needs
    built, the log's transactions, and how many input rows were loaded."""
    transactions = _queries(w)
    relations, inputs = _annotated(w, mode)
    for tx in transactions:
        for table, query in tx:
            if hasattr(query, "pattern"):
                relations[table].candidates(query.pattern)
    return relations, transactions, inputs


def apply_log(relations: dict, transactions: list) -> int:
    """Each transaction of the log on the annotated relations, committed (the query
    annotation ``T<k>``); how many tuples' membership the log changed."""
    from upkeep.update_provenance.expression import var
    from upkeep.update_provenance.relation import RelationTransaction

    affected = 0
    for k, tx in enumerate(transactions, 1):
        p = var(f"T{k}")
        work = {}
        for table, query in tx:
            rtx = work.get(table)
            if rtx is None:
                rtx = work[table] = RelationTransaction(relations[table])
            affected += len(rtx.apply(query, p))
        for table, rtx in work.items():
            relations[table].commit(rtx.result())
    return affected


def track(args: argparse.Namespace) -> dict:
    """The log on annotated relations, in one mode."""
    from upkeep.update_provenance.expression import dag_size, tree_size

    w = workload(args)
    best = relations = None
    for _ in range(args.repeat):  # the log is short: its best time of --repeat fresh runs
        relations = None  # the previous run's relations go before the next
        relations, transactions, inputs = indexed(w, args.mode)
        gc.collect()
        gc.freeze()  # as upkeep's commit path pauses the collector (gc_pause.py)
        t0 = time.perf_counter()
        affected = apply_log(relations, transactions)
        seconds = time.perf_counter() - t0
        gc.unfreeze()
        best = seconds if best is None else min(best, seconds)
    seconds = best
    out = {"mode": args.mode, "seconds": round(seconds, 6), "affected": affected,
           "statements": sum(len(tx) for tx in transactions),
           "tuples": sum(len(r) for r in relations.values()), "peak_mb": round(peak_rss_mb(), 1)}
    if args.mode != "none":
        nodes = [n for rel in relations.values() for n in rel.annotations.values()]
        out["dag_nodes"] = dag_size(nodes) - inputs  # beyond the input variables
        out["tree_size"] = sum(tree_size(n) for n in nodes) - inputs
    return out


def _database(w: Workload, mode: str) -> tuple[object, dict]:
    """A local database with the workload's tables (``mode``: provenance of the non-dimension
    tables, or ``none`` for ordinary tables), the input rows loaded in one transaction, the
    join + aggregate view created, then the log committed transaction by transaction:
    the database and its seconds and resident memory."""
    import upkeep

    db = upkeep.connect()
    for table, cols in w.tables.items():
        prov = "" if table in w.dims or mode == "none" else f" WITH (provenance = '{mode}')"
        spec = ", ".join(f"{c} {'VARCHAR' if c == 'label' else 'BIGINT'}" for c in cols)
        db.execute(f"CREATE TABLE {table} ({spec}){prov}")
    t0 = time.perf_counter()
    with db.transaction():
        for table, rows in w.rows.items():
            db.insert(table, rows)
    load_s = time.perf_counter() - t0
    db.create_view("v", w.view)
    gc.collect()

    def commit(transactions: list[list[str]]) -> float:
        t = time.perf_counter()
        for tx in transactions:
            with db.transaction():
                for sql in tx:
                    db.execute(sql)
        return time.perf_counter() - t

    # The log's first tenth warms up, timed on its own: it builds the column indexes the
    # keyed statements find their rows by (both kinds of table build them on first use;
    # ordinary tables decode their stored rows for it), a cost a running database pays once.
    warm = len(w.transactions) // 10
    warm_s = commit(w.transactions[:warm])
    log_s = commit(w.transactions[warm:])
    timed = sum(len(tx) for tx in w.transactions[warm:])
    return db, {"mode": mode, "load_s": round(load_s, 2), "warm_s": round(warm_s, 3),
                "log_s": round(log_s, 3), "timed_statements": timed,
                "statements_per_s": round(timed / log_s), "rss_mb": round(peak_rss_mb(), 1)}


def database(args: argparse.Namespace) -> dict:
    """The log through the database in one mode: load, log, memory."""
    return _database(workload(args), args.mode)[1]


def whatif(args: argparse.Namespace) -> dict:
    """What-if through the database against DuckDB re-running the log."""
    import duckdb
    import pyarrow as pa

    w = workload(args)
    db, stats = _database(w, "update")
    load_s, log_s, rss_log = stats["load_s"], stats["log_s"], stats["rss_mb"]
    txns = sorted(db.transactions())  # txns[0] loaded the input rows
    victim = len(txns) // 2
    victim_row = ("r", w.rows["r"][len(w.rows["r"]) // 2]) if "r" in w.rows else (
        "order_line", w.rows["order_line"][len(w.rows["order_line"]) // 2])

    def timed(fn) -> tuple[float, object]:
        t = time.perf_counter()
        got = fn()
        return time.perf_counter() - t, got

    arrows = {t: pa.Table.from_pylist([dict(zip(cols, r, strict=True)) for r in w.rows[t]])
              for t, cols in w.tables.items()}

    def rerun(skip_txn: int | None, skip_row: tuple | None, query: str = w.view) -> set:
        con = duckdb.connect()
        for table, arrow in arrows.items():
            con.register("input", arrow)
            con.execute(f"CREATE TABLE {table} AS SELECT DISTINCT * FROM input")
            con.unregister("input")
        if skip_row is not None:
            table, row = skip_row
            cols = w.tables[table]
            con.execute(f"DELETE FROM {table} WHERE " + " AND ".join(f"{c} = ?" for c in cols),
                        list(row))
        for k, tx in enumerate(w.transactions, 1):
            if k == skip_txn:
                continue
            for sql in tx:
                con.execute(sql)
                if w.distinct and not sql.startswith("DELETE"):
                    table = _target(parse_one(sql))
                    con.execute(f"CREATE OR REPLACE TABLE {table} AS SELECT DISTINCT * "
                                f"FROM {table}")
        return set(con.execute(query).fetchall())

    abort_s, world = timed(lambda: db.what_if("v", abort=[txns[victim]]))
    rerun_abort_s, expected = timed(lambda: rerun(victim, None))
    assert set(world.rows) == expected, "what-if (abort) differs from the re-run"
    without_s, world = timed(lambda: db.what_if("v", without=[victim_row]))
    rerun_without_s, expected = timed(lambda: rerun(None, victim_row))
    assert set(world.rows) == expected, "what-if (without) differs from the re-run"
    top_table = parse_one(w.top).find(exp.Table).name
    inserts = next(k for k in range(victim, len(txns))  # its abort reaches the view
                   if any(sql.startswith(f"INSERT INTO {top_table} ")
                          for sql in w.transactions[k - 1]))
    rerun_top_s, expected = timed(lambda: rerun(inserts, None, w.top))
    tops = {}
    for strategy in ("topk", "recompute"):  # pushed through; on a scratch copy
        db.create_view(f"top_{strategy}", w.top,
                       strategy="recompute" if strategy == "recompute" else None)
        tops[strategy], world = timed(lambda s=strategy: db.what_if(f"top_{s}",
                                                                    abort=[txns[inserts]]))
        assert set(world.rows) == expected, f"what-if (top-k, {strategy}) differs"
    fork_s, exit_s = _fork_floor()
    return {"load_s": round(load_s, 2), "log_s": round(log_s, 2),
            "statements_per_s": stats["statements_per_s"],
            "fork_floor_s": round(fork_s, 4), "fork_exit_s": round(exit_s, 4),
            "abort_view_s": round(abort_s, 4), "rerun_abort_s": round(rerun_abort_s, 3),
            "abort_speedup": round(rerun_abort_s / abort_s, 1),
            "without_view_s": round(without_s, 4), "rerun_without_s": round(rerun_without_s, 3),
            "without_speedup": round(rerun_without_s / without_s, 1),
            "top_view_s": round(tops["topk"], 4), "rerun_top_s": round(rerun_top_s, 3),
            "top_speedup": round(rerun_top_s / tops["topk"], 1),
            "top_scratch_s": round(tops["recompute"], 4),
            "top_scratch_speedup": round(rerun_top_s / tops["recompute"], 2),
            "provenance": db._catalog.provenance.size(), "rss_after_log_mb": rss_log,
            "peak_mb": round(peak_rss_mb(), 1)}


def _fork_floor(runs: int = 5) -> tuple[float, float]:
    """What an overlay kept by the operating system would cost before any work: the best
    of ``runs`` ``os.fork()`` calls of this process (the database loaded) until the child
    has sent one byte back, and the wait for the child to exit (its page tables torn
    down).  A what-if answered in a forked child would pay at least the first."""
    forks, exits = [], []
    for _ in range(runs):
        read, write = os.pipe()
        t0 = time.perf_counter()
        pid = os.fork()
        if pid == 0:  # the child: answer at once, leave without cleanup
            os.write(write, b"1")
            os._exit(0)
        os.close(write)
        os.read(read, 1)
        t1 = time.perf_counter()
        os.close(read)
        os.waitpid(pid, 0)
        forks.append(t1 - t0)
        exits.append(time.perf_counter() - t1)
    return min(forks), min(exits)


def _common(args: argparse.Namespace) -> list[str]:
    return ["--workload", args.workload, "--rows", str(args.rows), "--queries",
            str(args.queries), "--warehouses", str(args.warehouses), "--tpcc-scale",
            str(args.tpcc_scale), "--seed", str(args.seed)]


def run_all(args: argparse.Namespace) -> dict:
    common = _common(args)
    result = {"workload": args.workload, "rows": args.rows, "queries": args.queries,
              "warehouses": args.warehouses, "tpcc_scale": args.tpcc_scale, "date": now(),
              "git": git_rev(), "machine": machine(),
              "command": "python -m bench.provenance.bench " + " ".join(sys.argv[1:]),
              "track": {}}
    for mode in ("none", "update", "update-naive"):
        print("track", mode, flush=True)
        done = subprocess.run([sys.executable, "-m", "bench.provenance.bench", *common,
                               "--part", "track", "--mode", mode],
                              capture_output=True, text=True, check=True)
        result["track"][mode] = json.loads(done.stdout.strip().splitlines()[-1])
        print(result["track"][mode], flush=True)
    result["database"] = {}
    for mode in ("none", "update", "update-naive"):
        runs = []
        for _ in range(args.repeat):  # a fresh process each: the log runs once per load
            print("database", mode, flush=True)
            done = subprocess.run([sys.executable, "-m", "bench.provenance.bench", *common,
                                   "--part", "database", "--mode", mode],
                                  capture_output=True, text=True, check=True)
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        best = min(runs, key=lambda r: r["log_s"])
        best["log_s_runs"] = [r["log_s"] for r in runs]
        best["load_s_best"] = min(r["load_s"] for r in runs)
        result["database"][mode] = best
        print(best, flush=True)
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
    what = (f"{result['rows']:,} input tuples" if result.get("workload", "synthetic")
            == "synthetic" else f"TPC-C, {result['warehouses']} warehouse(s) at "
            f"{result['tpcc_scale']}x the cardinalities, {t['none']['tuples']:,} tuples at the end")
    lines = [
        f"{what}, {t['update'].get('statements', result['queries']):,} hyperplane statements, "
        f"{t['update']['affected']:,} tuple changes; `{result['command']}` ({result['date']}, "
        f"{result['git']})",
        "",
        "| tracking | log ms | overhead | expression nodes (DAG) | tree size | "
        "tuples kept | peak MB |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for mode, label in (("none", "no provenance"), ("update", "normal form"),
                        ("update-naive", "naive")):
        r = t[mode]
        over = "–" if mode == "none" else f"{(r['seconds'] / base - 1) * 100:+.0f}%"
        lines.append(f"| {label} | {r['seconds'] * 1000:.0f} | {over} | {r.get('dag_nodes', '–')} | "
                     f"{r.get('tree_size', '–')} | {r['tuples']:,} | {r['peak_mb']:,.0f} |")
    d = result.get("database")
    if d:
        plain = d["none"]
        lines += [
            "",
            "Through the database (the case users live in: tables loaded, the join + aggregate "
            "view maintained, one transaction per statement; the log's first tenth warms up "
            "(builds the column indexes keyed statements use), then the other "
            f"{plain.get('timed_statements', 0):,} statements are timed; best of "
            f"{len(plain['log_s_runs'])} fresh processes, resident memory after the log):",
            "",
            "| tables | load s | warm-up s | log s (runs) | log overhead | memory MB | "
            "memory ratio |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for mode, label in (("none", "ordinary"), ("update", "provenance, normal form"),
                            ("update-naive", "provenance, naive")):
            r = d[mode]
            runs = ", ".join(f"{x:.2f}" for x in r["log_s_runs"])
            over = "–" if mode == "none" else f"{(r['log_s'] / plain['log_s'] - 1) * 100:+.1f}%"
            ratio = "–" if mode == "none" else f"{r['rss_mb'] / plain['rss_mb']:.2f}x"
            lines.append(f"| {label} | {r['load_s_best']:.1f} | {r.get('warm_s', 0):.2f} | "
                         f"{r['log_s']:.2f} ({runs}) | {over} | {r['rss_mb']:,.0f} | {ratio} |")
    w = result["whatif"]
    lines += [
        "",
        "| what-if (join + aggregate view) | upkeep s | DuckDB re-run s | speed-up |",
        "|---|---:|---:|---:|",
        f"| abort one transaction | {w['abort_view_s']:.4f} | {w['rerun_abort_s']:.2f} | "
        f"{w['abort_speedup']:,.0f}x |",
        f"| remove one input row | {w['without_view_s']:.4f} | {w['rerun_without_s']:.2f} | "
        f"{w['without_speedup']:,.0f}x |",
    ]
    if "top_view_s" in w:
        lines.append(f"| abort one transaction (that inserts), top-10 view | "
                     f"{w['top_view_s']:.4f} | {w['rerun_top_s']:.2f} | "
                     f"{w['top_speedup']:,.1f}x |")
        lines.append(f"| the same, top-10 view DuckDB recomputes (a scratch copy of its "
                     f"table) | {w['top_scratch_s']:.4f} | {w['rerun_top_s']:.2f} | "
                     f"{w['top_scratch_speedup']:,.2f}x |")
    if "fork_floor_s" in w:
        lines.append(f"| (an operating-system overlay: `os.fork()` of the loaded process "
                     f"until its child answers, no work; the child's exit {w['fork_exit_s']:.4f} "
                     f"s more) | {w['fork_floor_s']:.4f} | – | – |")
    lines += [
        "",
        f"Through the database: input rows loaded in {w['load_s']} s, the log committed at "
        f"{w['statements_per_s']:,} statements/s with the view maintained.",
    ]
    return "\n".join(lines)


def sweep(args: argparse.Namespace, lengths: list[int], out: str) -> None:
    """:func:`run_all` at each log length; the results, a table and :func:`plot_sweep`."""
    results = []
    for length in lengths:
        args.queries = length
        results.append(run_all(args))
    with open(out, "w") as f:
        json.dump(results, f, indent=1)
    plot_sweep(results)


def plot_sweep(results: list[dict]) -> None:
    """Tracking overhead, provenance size and what-if speed-ups against the log's length
    (``docs/img/provenance_sweep.png``), and the table under it in docs/benchmarks.md."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lengths = [r["queries"] for r in results]
    fig, (over, size, speed) = plt.subplots(1, 3, figsize=(14, 4))
    for mode, label in (("update", "normal form"), ("update-naive", "naive")):
        line, = over.plot(lengths, [_overhead(r["database"], mode, "log_s") for r in results],
                          marker="o", label=f"{label}, through the database")
        over.plot(lengths, [_overhead(r["track"], mode, "seconds") for r in results],
                  marker="x", linestyle="--", color=line.get_color(),
                  label=f"{label}, relations alone")
        size.plot(lengths, [r["track"][mode]["dag_nodes"] for r in results], marker="o",
                  label=label)
    over.axhline(0, color="grey", linewidth=0.5)
    over.set(xlabel="statements in the log", ylabel="% over no provenance",
             title="tracking overhead")
    over.legend()
    size.set(xlabel="statements in the log", ylabel="expression nodes (DAG)",
             title="provenance size")
    size.legend()
    for key, label in (("abort_speedup", "abort one transaction"),
                       ("without_speedup", "remove one input row")):
        speed.plot(lengths, [r["whatif"][key] for r in results], marker="o", label=label)
    speed.set(xlabel="statements in the log", ylabel="x faster than DuckDB re-running",
              title="what-if on a join + aggregate view")
    speed.legend()
    first = results[0]
    fig.suptitle(f"update provenance, synthetic ({first['rows']:,} tuples)"
                 if first["workload"] == "synthetic" else "update provenance, TPC-C")
    fig.tight_layout()
    fig.savefig("docs/img/provenance_sweep.png", dpi=110)
    print("| statements | through the database: no provenance ms | normal form | naive | "
          "relations alone: no provenance ms | normal form | naive | nodes, normal form | "
          "nodes, naive | what-if abort | what-if without |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        t, d, w = r["track"], r["database"], r["whatif"]
        print(f"| {r['queries']:,} | {d['none']['log_s'] * 1000:.0f} | "
              f"{_overhead(d, 'update', 'log_s'):+.1f}% | "
              f"{_overhead(d, 'update-naive', 'log_s'):+.1f}% | "
              f"{t['none']['seconds'] * 1000:.0f} | {_overhead(t, 'update', 'seconds'):+.1f}% | "
              f"{_overhead(t, 'update-naive', 'seconds'):+.1f}% | "
              f"{t['update']['dag_nodes']:,} | {t['update-naive']['dag_nodes']:,} | "
              f"{w['abort_speedup']:,.0f}x | {w['without_speedup']:,.0f}x |")


def _overhead(part: dict, mode: str, key: str) -> float:
    """``mode``'s time over no provenance's in one part of a result, in percent."""
    return (part[mode][key] / part["none"][key] - 1) * 100


def add_workload_arguments(parser: argparse.ArgumentParser, rows: int,
                           tpcc_scale: float) -> None:
    """The options that choose a workload (:func:`workload`), with these defaults."""
    parser.add_argument("--workload", choices=("synthetic", "tpcc"), default="synthetic")
    parser.add_argument("--rows", type=int, default=rows, help="synthetic: input tuples")
    parser.add_argument("--queries", type=int, default=2_000, help="statements in the log")
    parser.add_argument("--warehouses", type=int, default=4, help="tpcc: warehouses")
    parser.add_argument("--tpcc-scale", type=float, default=tpcc_scale,
                        help="tpcc: fraction of the specification's cardinalities")
    parser.add_argument("--seed", type=int, default=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_workload_arguments(parser, rows=1_000_000, tpcc_scale=1.0)
    parser.add_argument("--repeat", type=int, default=3,
                        help="track and database: fresh runs, best time")
    parser.add_argument("--part", choices=("track", "database", "whatif"))
    parser.add_argument("--mode", choices=("none", "update", "update-naive"), default="update")
    parser.add_argument("--out", default=None,
                        help="default bench/results/provenance[_tpcc].json")
    parser.add_argument("--report", action="store_true", help="print the table of --out")
    parser.add_argument("--plot", action="store_true", help="plot the sweep of --out again")
    parser.add_argument("--lengths", default=None,
                        help="a sweep over log lengths, e.g. 250,500,1000,2000 (needs the "
                             "bench extra's matplotlib)")
    args = parser.parse_args()
    out = args.out or ("bench/results/provenance.json" if args.workload == "synthetic"
                       else "bench/results/provenance_tpcc.json")
    if args.report:
        with open(out) as f:
            print(report(json.load(f)))
        return
    if args.plot:
        with open(args.out or "bench/results/provenance_sweep.json") as f:
            plot_sweep(json.load(f))
        return
    if args.lengths:
        sweep(args, [int(n) for n in args.lengths.split(",")],
              args.out or "bench/results/provenance_sweep.json")
        return
    if args.part == "track":
        print(json.dumps(track(args)))
    elif args.part == "database":
        print(json.dumps(database(args)))
    elif args.part == "whatif":
        print(json.dumps(whatif(args)))
    else:
        result = run_all(args)
        with open(out, "w") as f:
            json.dump(result, f, indent=1)
        print(report(result))


if __name__ == "__main__":
    main()
