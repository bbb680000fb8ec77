"""What the SQL forms beyond inner joins cost per change: each form against the inner-join (or plain)
view it extends, and against DuckDB recomputing it, on TPC-H tables loaded first with a
subscriber attached.

Usage::

    python -m bench.sql_forms.bench [--scale 0.1] [--changes 2000] [--forms all] [--seed 1]

For each form, two views over the same loaded tables (``customer``, ``orders``, ``lineitem``,
``part``), each created alone, subscribed, fed ``--changes`` single-row changes (each its
own transaction: the delete of an existing row, then the insert of a changed version), and
dropped:

* outer join: ``customer LEFT JOIN orders`` against the inner join; orders move between
  customers, so customers lose their last order and get their first;
* correlated scalar subquery (TPC-H Q17's shape) against the join without it; line item
  quantities change, and with them the per-part averages;
* uncorrelated scalar subquery (Q22's shape: above twice the average price) against a
  constant threshold; order prices change;
* top-k and per-group top-k (``ROW_NUMBER() <= 3`` per customer) against the plain
  projection; order prices change, mostly outside the windows (operation counts: sorted-list
  updates and window re-reads);
* ``NOT IN`` (Q16's shape) against its ``NOT EXISTS`` anti-join; customers' balances change;
* ``EXISTS`` correlated by ``<>`` (Q21's shape) against the equality semijoin; line items'
  suppliers change;
* window functions (``LAG`` inside an expression per customer and per supplier, whose
  partitions hold ~600 line items at scale 0.1; a running ``SUM`` per customer) against the
  plain projection; prices change.  ``LAG`` re-reads the rows next to a change, the running
  sum its customer's orders (operation counts: partition re-reads and rows re-read);
* a LATERAL top-k per customer (Materialize's idiom, a ranked view per customer) and a
  ``DISTINCT ON`` (each customer's dearest order, a ranked view) against the plain
  projection, and variances, quantiles and ``ARG_MAX`` per customer against the SUM per customer; order
  prices change.

Reported: changes/s and µs per change of each view, the ratio form / base (the target:
outer joins and nested aggregates within 2x), and DuckDB's time to recompute the form once
on the same tables.  Writes ``bench/results/sql_forms.json`` and the "SQL forms" section of
``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
from rich.console import Console

import upkeep
from bench.common.doc_format import fmt, replace_section, save_figure
from bench.common.environment import BENCH_DIR
from bench.common.orchestrate import run_meta, save_results
from bench.tpch.data import generate, load_table
from bench.tpch.schema import column_names, create_table_sql

RESULTS = BENCH_DIR / "results" / "sql_forms.json"
DOCS = BENCH_DIR.parent / "docs" / "benchmarks.md"
SECTION = "## SQL forms: outer joins, nested aggregates, top-k, subqueries"
PLOT = BENCH_DIR.parent / "docs" / "img" / "sql_forms.png"
TABLES = ("customer", "orders", "lineitem", "part")
console = Console()


@dataclass(frozen=True)
class Form:
    name: str
    sql: str
    base: str  # the view it extends
    table: str  # the table whose rows change
    column: str  # the column a change rewrites
    values: tuple  # what it is rewritten to (drawn at random)


FORMS = [
    Form("outer join",
         "SELECT c_custkey, c_name, o_orderkey, o_totalprice FROM customer "
         "LEFT JOIN orders ON c_custkey = o_custkey",
         "SELECT c_custkey, c_name, o_orderkey, o_totalprice FROM customer "
         "JOIN orders ON c_custkey = o_custkey",
         "orders", "o_custkey", ("customer",)),
    Form("correlated scalar subquery (Q17)",
         "SELECT l_orderkey, l_linenumber, l_quantity FROM lineitem, part "
         "WHERE p_partkey = l_partkey AND p_brand = 'Brand#23' AND l_quantity < "
         "(SELECT 0.6 * avg(l2.l_quantity) FROM lineitem l2 WHERE l2.l_partkey = p_partkey)",
         "SELECT l_orderkey, l_linenumber, l_quantity FROM lineitem, part "
         "WHERE p_partkey = l_partkey AND p_brand = 'Brand#23'",
         "lineitem", "l_quantity", tuple(float(q) for q in range(1, 51))),
    Form("uncorrelated scalar subquery (Q22)",
         "SELECT o_orderkey, o_totalprice FROM orders "
         "WHERE o_totalprice > (SELECT 2 * avg(o_totalprice) FROM orders)",
         "SELECT o_orderkey, o_totalprice FROM orders WHERE o_totalprice > 300000",
         "orders", "o_totalprice", (1000.0, 50000.0, 150000.0, 310000.0, 450000.0)),
    Form("top-k (LIMIT 10)",
         "SELECT o_orderkey, o_totalprice FROM orders ORDER BY o_totalprice DESC LIMIT 10",
         "SELECT o_orderkey, o_totalprice FROM orders",
         "orders", "o_totalprice", (1000.0, 50000.0, 150000.0, 310000.0, 450000.0)),
    Form("per-group top-k (ROW_NUMBER <= 3)",
         "SELECT * FROM (SELECT o_custkey, o_orderkey, o_totalprice, row_number() OVER "
         "(PARTITION BY o_custkey ORDER BY o_totalprice DESC) AS rn FROM orders) WHERE rn <= 3",
         "SELECT o_custkey, o_orderkey, o_totalprice FROM orders",
         "orders", "o_totalprice", (1000.0, 50000.0, 150000.0, 310000.0, 450000.0)),
    Form("NOT IN (Q16)",
         "SELECT o_orderkey FROM orders WHERE o_custkey NOT IN "
         "(SELECT c_custkey FROM customer WHERE c_acctbal < 0)",
         "SELECT o_orderkey FROM orders WHERE NOT EXISTS (SELECT 1 FROM customer "
         "WHERE c_custkey = o_custkey AND c_acctbal < 0)",
         "customer", "c_acctbal", (-500.0, -1.0, 100.0, 5000.0)),
    Form("EXISTS correlated by <> (Q21)",
         "SELECT l1.l_orderkey, l1.l_linenumber FROM lineitem l1 WHERE EXISTS "
         "(SELECT * FROM lineitem l2 WHERE l2.l_orderkey = l1.l_orderkey "
         "AND l2.l_suppkey <> l1.l_suppkey)",
         "SELECT l1.l_orderkey, l1.l_linenumber FROM lineitem l1 WHERE EXISTS "
         "(SELECT * FROM lineitem l2 WHERE l2.l_orderkey = l1.l_orderkey "
         "AND l2.l_suppkey = l1.l_suppkey)",
         "lineitem", "l_suppkey", tuple(range(1, 11))),
    Form("LAG per customer",
         "SELECT o_custkey, o_orderkey, o_totalprice, o_totalprice - lag(o_totalprice) OVER "
         "(PARTITION BY o_custkey ORDER BY o_orderdate, o_orderkey) AS change FROM orders",
         "SELECT o_custkey, o_orderkey, o_totalprice FROM orders",
         "orders", "o_totalprice", (1000.0, 50000.0, 150000.0, 310000.0, 450000.0)),
    Form("LAG per supplier (long partitions)",
         "SELECT l_suppkey, l_orderkey, l_linenumber, l_extendedprice - lag(l_extendedprice) "
         "OVER (PARTITION BY l_suppkey ORDER BY l_shipdate, l_orderkey, l_linenumber) AS change "
         "FROM lineitem",
         "SELECT l_suppkey, l_orderkey, l_linenumber, l_extendedprice FROM lineitem",
         "lineitem", "l_extendedprice", (900.0, 1500.0, 20000.0, 50000.0)),
    Form("running SUM per customer",
         "SELECT o_custkey, o_orderkey, sum(o_totalprice) OVER (PARTITION BY o_custkey "
         "ORDER BY o_orderdate, o_orderkey) AS spent FROM orders",
         "SELECT o_custkey, o_orderkey, o_totalprice FROM orders",
         "orders", "o_totalprice", (1000.0, 50000.0, 150000.0, 310000.0, 450000.0)),
    Form("LATERAL top-k per customer (LIMIT 3)",
         "SELECT c_custkey, s.o_orderkey, s.o_totalprice FROM customer, LATERAL "
         "(SELECT o_orderkey, o_totalprice FROM orders WHERE o_custkey = c_custkey "
         "ORDER BY o_totalprice DESC, o_orderkey LIMIT 3) s",
         "SELECT o_custkey, o_orderkey, o_totalprice FROM orders",
         "orders", "o_totalprice", (1000.0, 50000.0, 150000.0, 310000.0, 450000.0)),
    Form("STDDEV and VAR per customer",
         "SELECT o_custkey, stddev_samp(o_totalprice) AS sd, var_pop(o_totalprice) AS v "
         "FROM orders GROUP BY o_custkey",
         "SELECT o_custkey, sum(o_totalprice) AS total FROM orders GROUP BY o_custkey",
         "orders", "o_totalprice", (1000.0, 50000.0, 150000.0, 310000.0, 450000.0)),
    Form("DISTINCT ON: each customer's dearest order",
         "SELECT DISTINCT ON (o_custkey) o_custkey, o_orderkey, o_totalprice FROM orders "
         "ORDER BY o_custkey, o_totalprice DESC, o_orderkey",
         "SELECT o_custkey, o_orderkey, o_totalprice FROM orders",
         "orders", "o_totalprice", (1000.0, 50000.0, 150000.0, 310000.0, 450000.0)),
    Form("MEDIAN, a quantile and ARG_MAX per customer",
         "SELECT o_custkey, median(o_totalprice) AS m, quantile_disc(o_totalprice, 0.9) AS p90, "
         "arg_max(o_orderkey, o_totalprice) AS dearest FROM orders GROUP BY o_custkey",
         "SELECT o_custkey, sum(o_totalprice) AS total FROM orders GROUP BY o_custkey",
         "orders", "o_totalprice", (1000.0, 50000.0, 150000.0, 310000.0, 450000.0)),
]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--scale", type=float, default=0.1, help="TPC-H scale factor")
    p.add_argument("--changes", type=int, default=2000, help="single-row changes per view")
    p.add_argument("--forms", default="all", help="comma-separated form numbers (1-based)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--no-docs", action="store_true")
    args = p.parse_args(argv)
    args.forms = FORMS if args.forms == "all" else [FORMS[int(i) - 1]
                                                    for i in args.forms.split(",")]
    return args


def changes(rows: list[tuple], form: Form, count: int, rnd: random.Random,
            customers: int) -> list[tuple[int, tuple]]:
    """``count`` changes: the delete of a random row, then the insert of it with
    ``form.column`` rewritten (each row at most once)."""
    at = column_names(form.table).index(form.column)
    out = []
    for old in rnd.sample(rows, count // 2):
        value = (rnd.randrange(1, customers + 1) if form.values == ("customer",)
                 else rnd.choice(form.values))
        out += [(-1, old), (1, (*old[:at], value, *old[at + 1:]))]
    return out


def measure(db, sql: str, form: Form, stream: list[tuple[int, tuple]]) -> dict[str, Any]:
    """Create ``sql`` as a view, subscribe, time the single-row changes, drop it (the
    changes are undone after, so every view sees the same tables)."""
    t0 = time.perf_counter()
    db.create_view("bench_view", sql)
    build_s = time.perf_counter() - t0
    strategy = db.explain("bench_view").splitlines()[0].split("strategy ", 1)[1]
    sent = [0]
    db.view("bench_view").subscribe(lambda delta: sent.__setitem__(0, sent[0] + len(delta)))
    before = _counters(db)
    insert, delete = db.insert, db.delete
    t0 = time.perf_counter()
    for weight, row in stream:
        (insert if weight > 0 else delete)(form.table, [row])
    seconds = time.perf_counter() - t0
    after = _counters(db)
    db.execute("DROP VIEW bench_view")
    with db.transaction():  # back to the loaded tables
        for weight, row in reversed(stream):
            (delete if weight > 0 else insert)(form.table, [row])
    return {"strategy": strategy, "build_s": round(build_s, 2),
            "per_s": round(len(stream) / seconds), "us": round(seconds / len(stream) * 1e6, 1),
            "rows_sent": sent[0],
            "counters": {k: after.get(k, 0) - before.get(k, 0) for k in after
                         if k in ("sorted_updates", "window_rebuilds", "rows_flipped",
                                  "partition_rereads", "rows_reread")}}


def _counters(db) -> dict[str, int]:
    """The counters of the view's top-k, ranked and window helpers, summed."""
    out: dict[str, int] = {}
    names = ["bench_view"] + [line.split()[2].rstrip(":")
                              for line in db.explain("bench_view").splitlines()
                              if line.startswith("helper view")]
    for name in names:
        for key, value in db.runtime(name).counters().items():
            out[key] = out.get(key, 0) + value
    return out


def recompute_seconds(con: duckdb.DuckDBPyConnection, sql: str) -> float:
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        con.execute(f"CREATE OR REPLACE TEMP TABLE r AS {sql}")
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    generate(args.scale)
    arrow = {t: load_table(args.scale, t) for t in TABLES}
    rows = {t: [tuple(r.values()) for r in arrow[t].to_pylist()] for t in ("orders",
                                                                            "lineitem",
                                                                            "customer")}
    db = upkeep.connect()
    con = duckdb.connect()
    t0 = time.perf_counter()
    for name, table in arrow.items():
        db.execute(create_table_sql(name))
        with db.transaction():
            db.insert(name, table)
        con.execute(create_table_sql(name))
        con.register("loaded", table)
        con.execute(f"INSERT INTO {name} SELECT * FROM loaded")
        con.unregister("loaded")
    console.print(f"loaded {', '.join(f'{t} {len(a):,}' for t, a in arrow.items())} "
                  f"in {time.perf_counter() - t0:.0f} s")
    del arrow
    rnd = random.Random(args.seed)
    results = []
    for form in args.forms:
        stream = changes(rows[form.table], form, args.changes, rnd, len(rows["customer"]))
        base = measure(db, form.base, form, stream)
        mine = measure(db, form.sql, form, stream)
        result = {"form": form.name, "sql": form.sql, "base_sql": form.base,
                  "changed": f"{form.table}.{form.column}", "base": base, "view": mine,
                  "ratio": round(mine["us"] / base["us"], 2),
                  "duckdb_recompute_s": round(recompute_seconds(con, form.sql), 4)}
        results.append(result)
        console.print(f"{form.name}: {mine['per_s']:,}/s ({mine['strategy']}) against "
                      f"{base['per_s']:,}/s ({base['strategy']}): {result['ratio']}x; "
                      f"DuckDB recomputes it in {result['duckdb_recompute_s'] * 1000:.0f} ms")
    return results


def write_docs(data: dict[str, Any]) -> str:
    lines = [SECTION, "",
             "Each form as a view over TPC-H tables loaded first, with a subscriber attached, "
             f"fed {data['changes']:,} single-row changes (each its own transaction), against the "
             "inner-join or plain view it extends on the same tables and changes, and against "
             "DuckDB recomputing the form once. Issue 22's target: outer joins and nested "
             "aggregates within 2x of their inner join per change.", "",
             f"`{data['command']}` ({data['date']}, scale {data['scale']}):", "",
             "| form | changes | view: changes/s (strategy) | base: changes/s (strategy) | "
             "view / base per change | DuckDB recompute | ordered-state counters |",
             "|---|---|---|---|---|---|---|"]
    for r in data["results"]:
        counters = r["view"]["counters"]
        lines.append(
            f"| {r['form']} | {r['changed']} | {r['view']['per_s']:,} ({r['view']['strategy']})"
            f" | {r['base']['per_s']:,} ({r['base']['strategy']}) | {fmt(r['ratio'], '.2f')}x"
            f" | {r['duckdb_recompute_s'] * 1000:.0f} ms | "
            + (", ".join(f"{k} {v:,}" for k, v in counters.items()) or "") + " |")
    lines += ["", "![changes/s of each form and of the view it extends](img/sql_forms.png)",
              "", "Queries (view, then base):", ""]
    for r in data["results"]:
        lines += [f"- {r['form']}: `{r['sql']}`; base `{r['base_sql']}`"]
    return "\n".join(lines) + "\n"


def plot(data: dict[str, Any]) -> None:
    """Changes/s of each form beside the view it extends (docs/img/sql_forms.png)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = data["results"]
    fig, ax = plt.subplots(figsize=(9, 4))
    at = range(len(results))
    ax.barh([i + 0.2 for i in at], [r["base"]["per_s"] for r in results], 0.4,
            label="the view it extends")
    ax.barh([i - 0.2 for i in at], [r["view"]["per_s"] for r in results], 0.4,
            label="the form")
    ax.set_yticks(list(at), [r["form"] for r in results])
    ax.invert_yaxis()
    ax.set_xlabel(f"single-row changes/s (TPC-H scale {data['scale']}, subscribed)")
    ax.legend(loc="lower right")
    fig.tight_layout()
    save_figure(fig, PLOT)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    started = time.perf_counter()
    results = run(args)
    data = {**run_meta("bench.sql_forms.bench", argv, started, results, scale=args.scale,
                       changes=args.changes),
            "results": results}
    save_results(args.out, data)
    if not args.no_docs:
        replace_section(DOCS, SECTION, write_docs(data),
                        before="## Inequality and cyclic joins")
        plot(data)


if __name__ == "__main__":
    main(sys.argv[1:])
