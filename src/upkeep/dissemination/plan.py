"""A dissemination plan for a set of subscriptions: Delta's pipeline end to end
(``papers/delta-pubsub-view-dissemination.txt``; ``specs/delta-dissemination.md`` D.0):
the embedding graph, up to ``k`` rewritings per subscription (Algorithm 1 over CGR), the
utilisation-optimal configuration under fan-out bounds (the ILP), then LOGA for latency.

Utilisation and local latency come from :class:`CostModel`, the default D.17 proposes
(the paper fixes none): a rewriting's utilisation is the rows it ships plus the rows it
produces, with a subscription's rows estimated from table sizes and predicate
selectivities; its latency is one hop plus processing per input.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import Error
from .graph import (
    SOURCE,
    Configuration,
    RewritabilityGraph,
    Rewriting,
    latencies,
    levels,
    out_degrees,
    total_latency,
    utilisation,
)
from .ilp import Solution, minimise_utilisation
from .loga import loga_bounds, minimise_latency
from .rewriting import Use, break_ties, embedding_graph, rewriting_sql, rewritings
from .subscriptions import Subscription


@dataclass
class CostModel:
    """Row estimates and the costs of rewritings (D.17's default)."""

    table_rows: dict[str, float] = field(default_factory=dict)
    default_rows: float = 1_000.0
    equality: float = 0.1  # selectivity of col = c
    comparison: float = 0.5  # of a range comparison
    join: float = 0.01  # of an equi-join
    source_factor: float = 2.0  # the publisher evaluates and ships: twice a view's rows
    hop: float = 1.0
    processing: float = 0.1  # per input of a rewriting

    def rows(self, s: Subscription) -> float:
        n = 1.0
        for table in s.atoms.values():
            n *= self.table_rows.get(table, self.default_rows)
        for p in s.predicates:
            n *= self.equality if p.op == "=" else self.comparison
        return n * self.join ** len(s.joins)

    def from_source(self, s: Subscription) -> tuple[float, float]:
        return self.source_factor * self.rows(s), self.hop

    def from_views(self, s: Subscription, inputs: list[Subscription]) -> tuple[float, float]:
        return (sum(self.rows(u) for u in inputs) + self.rows(s),
                self.hop + self.processing * len(inputs))


@dataclass
class Plan:
    """The graph, the configurations before and after LOGA, and the timings."""

    subscriptions: dict[str, Subscription]
    rg: RewritabilityGraph
    uses: dict[str, list[Use]]  # rewriting id -> the views it reads
    ilp: Solution
    cfg: Configuration  # after LOGA
    seconds: dict[str, float]
    embedding_edges: int

    def sql(self, view: str) -> str | None:
        """The chosen rewriting of ``view`` as SQL over its inputs (None: from the source)."""
        rid = self.cfg[view]
        uses = self.uses.get(rid)
        return None if uses is None else rewriting_sql(self.subscriptions[view], uses)

    def summary(self) -> dict[str, float]:
        before, after = self.ilp.cfg, self.cfg
        fed = sum(1 for v in self.rg.views if not self.rg.rewritings[after[v]].from_source)
        lat0, lat1 = total_latency(self.rg, before), total_latency(self.rg, after)
        u0, u1 = utilisation(self.rg, before), utilisation(self.rg, after)
        return {"subscriptions": len(self.rg.views), "rewritings": len(self.rg.rewritings),
                "embedding_edges": self.embedding_edges,
                "fed_by_others": fed / max(len(self.rg.views), 1),
                "levels": max(levels(self.rg, after).values(), default=0),
                "source_fanout": out_degrees(self.rg, after)[SOURCE],
                "utilisation_ilp": u0, "utilisation": u1,
                "latency_ilp": lat0, "latency": lat1,
                "latency_reduction": (lat0 - lat1) / lat0 if lat0 else 0.0,
                "utilisation_increase": (u1 - u0) / u0 if u0 else 0.0,
                "ilp_gap": self.ilp.gap, **{f"{k}_s": v for k, v in self.seconds.items()}}

    def describe(self) -> str:
        """The configuration in words: one line per subscription, then the totals."""
        lam = latencies(self.rg, self.cfg)
        level = levels(self.rg, self.cfg)
        out = out_degrees(self.rg, self.cfg)
        lines = [f"{'subscription':<20} {'level':>5} {'fed by':<30} {'feeds':>5} "
                 f"{'utilisation':>12} {'latency':>8}"]
        for v in sorted(self.rg.views, key=lambda v: (level[v], v)):
            r = self.rg.rewritings[self.cfg[v]]
            source = "publisher" if r.from_source else " ⋈ ".join(r.inputs)
            lines.append(f"{v:<20} {level[v]:>5} {source:<30} {out[v]:>5} "
                         f"{r.utilisation:>12,.1f} {lam[v]:>8.1f}")
        s = self.summary()
        lines.append(
            f"{s['subscriptions']} subscriptions, {s['fed_by_others']:.1%} fed by other "
            f"subscriptions, {s['levels']} level(s); publisher feeds {s['source_fanout']}; "
            f"utilisation {s['utilisation']:,.1f} (ILP {s['utilisation_ilp']:,.1f}, gap "
            f"{s['ilp_gap']:.2%}), latency {s['latency']:,.1f} (ILP {s['latency_ilp']:,.1f}, "
            f"LOGA -{s['latency_reduction']:.1%})")
        return "\n".join(lines)


def plan(subscriptions: list[Subscription], *, k: int = 30, bound: int | None = None,
         source_bound: int | None = None, loga_factor: float = 1.5,
         costs: CostModel | None = None, time_limit: float | None = None,
         candidates: int | None = None, latency_budget: float | None = None,
         on_phase: Callable[[str], object] | None = None) -> Plan:
    """Plan the dissemination of ``subscriptions``: in the configuration of least
    utilisation (the ILP's, :attr:`Plan.ilp`) every subscription feeds at most ``bound``
    rewritings and the publisher ``source_bound`` (None: unbounded); lowering latency
    (LOGA, :attr:`Plan.cfg`) keeps those bounds times ``loga_factor``, rounded down (the
    paper's 1.5; 1 keeps them hard).  No subscriptions: an empty plan.
    ``candidates``: at most that many (the most specific) subscriptions are considered to
    feed each one (:func:`.rewriting.embedding_graph`'s ``limit``; None: all).
    ``latency_budget``: the most LOGA may add to the ILP's utilisation, as a fraction of
    it (:func:`.loga.minimise_latency`'s ``budget``; None: no limit).
    ``on_phase`` is told each phase as it starts (progress on a long plan)."""
    tell = on_phase or (lambda phase: None)
    costs = costs or CostModel()
    by_name = {s.name: s for s in subscriptions}
    seconds: dict[str, float] = {}
    t = time.perf_counter()
    tell(f"embedding graph of {len(subscriptions):,} subscriptions")
    into = break_ties(embedding_graph(subscriptions, candidates))
    seconds["embedding_graph"] = time.perf_counter() - t
    t = time.perf_counter()
    tell("rewritings (CGR)")
    rg = RewritabilityGraph()
    for s in subscriptions:
        rg.add_view(s.name)
    uses: dict[str, list[Use]] = {}
    for s in subscriptions:
        u, lat = costs.from_source(s)
        rg.add_rewriting(Rewriting(f"{s.name}<-{SOURCE}", s.name, (SOURCE,), u, lat))
        for i, rw in enumerate(rewritings(s, [by_name[n] for n in into[s.name]], k)):
            inputs = sorted({use.view.name for use in rw})
            u, lat = costs.from_views(s, [by_name[n] for n in inputs])
            rid = f"{s.name}<-{i}"
            rg.add_rewriting(Rewriting(rid, s.name, tuple(inputs), u, lat))
            uses[rid] = rw
    seconds["rewritings"] = time.perf_counter() - t
    bounds = {v: bound for v in rg.views}
    bounds[SOURCE] = source_bound
    tell(f"integer program over {len(rg.rewritings):,} rewritings (HiGHS)")
    solution = minimise_utilisation(rg, bounds, time_limit=time_limit)
    seconds["ilp"] = solution.seconds
    t = time.perf_counter()
    tell("latency (LOGA)")
    cfg = minimise_latency(rg, solution.cfg, loga_bounds(bounds, loga_factor),
                           budget=latency_budget)
    seconds["loga"] = time.perf_counter() - t
    return Plan(by_name, rg, uses, solution, cfg, seconds,
                sum(len(v) for v in into.values()))


def load(tables_sql: str, subscriptions_sql: str) -> list[Subscription]:
    """Subscriptions written as ``CREATE VIEW name AS SELECT ...;`` over the tables of
    ``CREATE TABLE`` statements (each with a PRIMARY KEY)."""
    import sqlglot
    from sqlglot import exp

    from ..ddl import created_name, table_from_create
    from ..sql import Dialect, quiet_sqlglot
    from .subscriptions import SubscriptionError, parse

    def statements(text: str, what: str) -> list[exp.Expression]:
        try:
            with quiet_sqlglot():
                return [s for s in sqlglot.parse(text, read=Dialect) if s is not None]
        except sqlglot.errors.ParseError as exc:
            raise SubscriptionError(f"{what}: {str(exc).splitlines()[0]}") from None
        except RecursionError:
            raise SubscriptionError(f"{what}: cannot parse SQL: expressions nested too "
                                    "deeply") from None

    schema = {}
    for stmt in statements(tables_sql, "tables"):
        if not (isinstance(stmt, exp.Create) and (stmt.args.get("kind") or "").upper()
                == "TABLE"):
            raise SubscriptionError(f"tables: expected CREATE TABLE, got {stmt.sql()[:60]!r}")
        try:
            table = table_from_create(stmt)
        except Error as exc:
            raise SubscriptionError(f"tables: {exc}") from None
        if table.name in schema:
            raise SubscriptionError(f"tables: {table.name} is defined twice")
        schema[table.name] = (table.columns,
                              [table.column_names[i] for i in (table.key or ())])
    out = []
    for stmt in statements(subscriptions_sql, "subscriptions"):
        if not (isinstance(stmt, exp.Create) and (stmt.args.get("kind") or "").upper()
                == "VIEW") or stmt.expression is None:
            raise SubscriptionError(f"subscriptions: expected CREATE VIEW name AS SELECT, got "
                                    f"{stmt.sql()[:60]!r}")
        name = created_name(stmt)
        out.append(parse(name, stmt.expression.sql(dialect="duckdb"), schema))
    names = [s.name for s in out]
    if len(set(names)) != len(names):
        raise SubscriptionError("subscriptions: "
                                f"{next(n for n in names if names.count(n) > 1)} is defined twice")
    return out
