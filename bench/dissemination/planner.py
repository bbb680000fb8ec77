"""The dissemination planner at scale (section 5.1 of
``papers/delta-pubsub-view-dissemination.txt``; ``specs/delta-dissemination.md`` D.14).

A generator in the spirit of the paper's YFilter / XMark workload over a relational
schema: ``items(id, category, region, seller, price)`` and ``sellers(id, country,
rating)``; most subscriptions select items (some joined with their seller) by a few
constants drawn from skewed (Zipf-like) domains and sometimes a price range, the rest
select sellers alone, and each outputs a few columns, so many subscriptions are contained
in others, as tree patterns are in XMark, and a join subscription can also be put together
from an items subscription and a sellers subscription (D.12's ``s3 = s1 JOIN s2``), as the
paper's rewritings join 2.15 views on average (Table 2).  For each size the planner runs end to end (:func:`upkeep.dissemination.plan.plan`)
and, on the same graph, the ILP at each fan-out bound ``B_out`` (the publisher's bound
``B_D`` = 1.2 x the subscriptions no other can feed, as the paper sets it) and LOGA with
1.5 x ``B_out``.  Reported: embedding-graph and rewritability-graph sizes and times, ILP
time and gap, the share of subscriptions fed by other subscriptions, LOGA's latency
reduction and utilisation cost.

Usage::

    python -m bench.dissemination.planner --sizes 1000,10000,100000

Results go to ``bench/results/dissemination_planner.json``; ``--report`` prints the
Markdown table of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time

from bench.common.environment import git_rev, machine, now
from bench.common.measure import peak_rss_mb
from upkeep.dissemination.graph import SOURCE, Rewriting, graph_of, total_latency, utilisation
from upkeep.dissemination.ilp import minimise_utilisation
from upkeep.dissemination.loga import loga_bounds, minimise_latency
from upkeep.dissemination.plan import CostModel, plan
from upkeep.dissemination.subscriptions import parse
from upkeep.types import type_from_name

INT, TEXT = type_from_name("INTEGER"), type_from_name("VARCHAR")
SCHEMA = {"items": ([("id", INT), ("category", TEXT), ("region", TEXT), ("seller", INT),
                     ("price", INT)], ["id"]),
          "sellers": ([("id", INT), ("country", TEXT), ("rating", INT)], ["id"])}
COSTS = CostModel(table_rows={"items": 1_000_000, "sellers": 10_000})


def zipf(rng: random.Random, n: int, s: float = 1.1) -> int:
    """A value in 0..n-1, value i with weight 1 / (i + 1)^s."""
    weights = [1 / (i + 1) ** s for i in range(n)]
    return rng.choices(range(n), weights)[0]


def subscriptions(count: int, seed: int, sellers_share: float = 0.1) -> list:
    """``count`` random subscriptions (see the module's docstring), ``sellers_share`` of
    them over ``sellers`` alone."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        if rng.random() < sellers_share:
            out.append(parse(f"s{i}", _sellers_subscription(rng), SCHEMA))
            continue
        join = rng.random() < 0.3
        preds = []
        if rng.random() < 0.95:
            preds.append(f"i.category = 'c{zipf(rng, 400)}'")
        if rng.random() < 0.6:
            preds.append(f"i.region = 'r{zipf(rng, 30)}'")
        if rng.random() < 0.3:
            preds.append(f"i.price >= {rng.choice([10, 50, 100, 500])}")
        if join and rng.random() < 0.7:
            preds.append(f"s.country = 'k{zipf(rng, 50)}'")
        cols = ["i.id", "i.category", "i.region", "i.price", "i.seller"]
        if join:
            cols += ["s.country", "s.rating"]
        outputs = rng.sample(cols, rng.randint(1, min(4, len(cols))))
        select = ", ".join(f"{c} AS {c.replace('.', '_')}" for c in outputs)
        sql = f"SELECT {select} FROM items i"
        if join:
            sql += " JOIN sellers s ON i.seller = s.id"
        if preds:
            sql += " WHERE " + " AND ".join(preds)
        out.append(parse(f"s{i}", sql, SCHEMA))
    return out


def _sellers_subscription(rng: random.Random) -> str:
    """Sellers of a country (most of them) and sometimes a least rating."""
    preds = []
    if rng.random() < 0.8:
        preds.append(f"s.country = 'k{zipf(rng, 50)}'")
    if rng.random() < 0.3:
        preds.append(f"s.rating >= {rng.choice([1, 3, 4])}")
    outputs = rng.sample(["s.id", "s.country", "s.rating"], rng.randint(1, 3))
    sql = "SELECT " + ", ".join(f"{c} AS {c.replace('.', '_')}" for c in outputs)
    sql += " FROM sellers s"
    return sql + (" WHERE " + " AND ".join(preds) if preds else "")


def run(size: int, bounds: list[int | None], k: int, seed: int, time_limit: float,
        candidates: int | None, sellers_share: float = 0.1) -> dict:
    subs = subscriptions(size, seed, sellers_share)
    t0 = time.perf_counter()
    p = plan(subs, k=k, costs=COSTS, time_limit=time_limit, candidates=candidates)
    end_to_end = time.perf_counter() - t0
    rg = p.rg
    unrewritable = sum(1 for v in rg.views if len(rg.of(v)) == 1)
    joined = [len(r.inputs) for r in rg.rewritings.values() if not r.from_source]
    # the graph with utilisation 1 on the publisher's rewritings: its optimum is the fewest
    # subscriptions the publisher must feed itself under a bound
    source_count = graph_of(
        Rewriting(r.id, r.view, r.inputs, 1.0 if r.from_source else 0.0, r.latency)
        for r in rg.rewritings.values())
    out = {"subscriptions": size, "k": k, "candidates": candidates,
           "sellers_share": sellers_share, "embedding_edges": p.embedding_edges,
           "rewritings": len(rg.rewritings), "unrewritable": unrewritable,
           "views_per_rewriting": sum(joined) / max(len(joined), 1),
           "seconds": {**p.seconds, "end_to_end": end_to_end}, "bounds": {}}
    for bound in bounds:
        b: dict = {v: bound for v in rg.views}
        fewest = minimise_utilisation(source_count, b, time_limit=time_limit)
        least = fewest.utilisation
        b[SOURCE] = int(least * 1.2) + 1  # the paper's B_D: what must come from it, +20%
        t = time.perf_counter()
        solution = minimise_utilisation(rg, b, time_limit=time_limit)
        ilp_s = time.perf_counter() - t
        t = time.perf_counter()
        better = minimise_latency(rg, solution.cfg, loga_bounds(b))
        loga_s = time.perf_counter() - t
        lat0, lat1 = total_latency(rg, solution.cfg), total_latency(rg, better)
        u0, u1 = utilisation(rg, solution.cfg), utilisation(rg, better)
        within = minimise_latency(rg, solution.cfg, loga_bounds(b), budget=0.07)
        lat2, u2 = total_latency(rg, within), utilisation(rg, within)
        chosen = [rg.rewritings[solution.cfg[v]] for v in rg.views]
        fed = [len(r.inputs) for r in chosen if not r.from_source]
        out["bounds"][str(bound)] = {
            "least_source_fanout": least, "least_gap": fewest.gap,
            "source_bound": b[SOURCE], "ilp_s": round(ilp_s, 2), "gap": solution.gap,
            "method": solution.method,
            "fed_by_others": len(fed) / size,
            "views_per_rewriting": sum(fed) / max(len(fed), 1), "loga_s": round(loga_s, 2),
            "latency_reduction": (lat0 - lat1) / lat0, "utilisation_increase": (u1 - u0) / u0,
            "budget_latency_reduction": (lat0 - lat2) / lat0,
            "budget_utilisation_increase": (u2 - u0) / u0}
        print(size, bound, out["bounds"][str(bound)], flush=True)
    out["peak_mb"] = round(peak_rss_mb(), 1)
    return out


def report(result: dict) -> str:
    lines = [f"`{result['command']}` ({result['date']}, {result['git']}, {result['machine']})",
             "",
             "| subscriptions | candidates | EG edges | RG rewritings | views per rewriting | "
             "EG s | CGR s | end to end s | B_out | ILP s | gap | fed by others | at most | "
             "views per chosen rewriting | LOGA latency | LOGA utilisation | "
             "LOGA within +7%: latency | utilisation |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|"
             "---:|---:|---:|"]
    for r in result["runs"]:
        first = True
        for bound, b in r["bounds"].items():
            head = (f"| {r['subscriptions']:,} | {r.get('candidates') or 'all'} | "
                    f"{r['embedding_edges']:,} | "
                    f"{r['rewritings']:,} | {_views(r)} | "
                    f"{r['seconds']['embedding_graph']:.1f} | "
                    f"{r['seconds']['rewritings']:.1f} | {r['seconds']['end_to_end']:.1f} |"
                    if first else "| | | | | | | | |")
            first = False
            least = b.get("least_source_fanout")  # the publisher feeds at least that many
            most = "–" if least is None else f"{1 - least / r['subscriptions']:.1%}"
            if b.get("least_gap"):  # that least not proven within the time limit
                most += f" (gap {b['least_gap']:.0%})"
            lines.append(f"{head} {'unbounded' if bound == 'None' else bound} | "
                         f"{b['ilp_s']:.1f} | {b['gap']:.2%} | {b['fed_by_others']:.1%} | "
                         f"{most} | {_views(b)} | "
                         f"-{b['latency_reduction']:.1%} | +{b['utilisation_increase']:.1%} | "
                         f"-{b.get('budget_latency_reduction', 0):.1%} | "
                         f"+{b.get('budget_utilisation_increase', 0):.1%} |")
    return "\n".join(lines)


def _views(record: dict) -> str:
    """Views per rewriting, where the record has it (results older than the statistic)."""
    views = record.get("views_per_rewriting")
    return "–" if views is None else f"{views:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--bounds", default="30,50,100,none", help="B_out values")
    parser.add_argument("-k", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--candidates", default="32",
                        help="subscriptions considered to feed each one, most specific "
                             "first ('all': the full embedding graph); a list compares")
    parser.add_argument("--sellers-share", type=float, default=0.1,
                        help="share of subscriptions over sellers alone (0: items only, "
                             "the generator before 2026-11-29)")
    parser.add_argument("--time-limit", type=float, default=120.0,
                        help="seconds for each integer program")
    parser.add_argument("--out", default="bench/results/dissemination_planner.json")
    parser.add_argument("--report", action="store_true")
    args = parser.parse_args()
    if args.report:
        with open(args.out) as f:
            print(report(json.load(f)))
        return
    bounds = [None if b == "none" else int(b) for b in args.bounds.split(",")]
    result = {"date": now(), "git": git_rev(), "machine": machine(),
              "command": "python -m bench.dissemination.planner " + " ".join(sys.argv[1:]),
              "runs": [run(int(n), bounds, args.k, args.seed, args.time_limit,
                           None if c == "all" else int(c), args.sellers_share)
                       for n in args.sizes.split(",") for c in args.candidates.split(",")]}
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(report(result))


if __name__ == "__main__":
    main()
