"""The rewritability graph and configurations of Delta
(``papers/delta-pubsub-view-dissemination.txt`` section 2; ``specs/delta-dissemination.md``
D.2-D.4).

A :class:`RewritabilityGraph` holds the subscriptions ("views", one per site) and their
rewritings: each rewriting (an ∧ node) computes one view from a set of other views, or from
the publisher :data:`SOURCE` alone, with a utilisation ``U`` and a local latency ``l``.  A
configuration picks exactly one rewriting per view such that the publisher reaches every
view (so it is acyclic); its utilisation is the sum of the chosen ``U``, its latency the sum
over views of ``λ(v) = max λ(inputs) + l``, and each view (and the publisher) feeds at most
its fan-out bound ``B_out`` of rewritings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..errors import Error

SOURCE = "D"  # the publisher


class PlanError(Error):
    """A malformed rewritability graph or configuration, or a plan that cannot exist."""


@dataclass(frozen=True)
class Rewriting:
    """An ∧ node: ``view`` computed from ``inputs`` (views, or ``(SOURCE,)``)."""

    id: str
    view: str
    inputs: tuple[str, ...]
    utilisation: float
    latency: float

    @property
    def from_source(self) -> bool:
        return self.inputs == (SOURCE,)


@dataclass
class RewritabilityGraph:
    """Views and their rewritings (D.2); every view needs its rewriting from the source."""

    views: list[str] = field(default_factory=list)
    rewritings: dict[str, Rewriting] = field(default_factory=dict)
    _of: dict[str, list[str]] = field(default_factory=dict)  # view -> its rewritings' ids

    def add_view(self, view: str) -> None:
        if view == SOURCE:
            raise PlanError(f"{SOURCE!r} names the publisher, not a view")
        if view in self._of:
            raise PlanError(f"view {view!r} is already in the graph")
        self.views.append(view)
        self._of[view] = []

    def add_rewriting(self, rewriting: Rewriting) -> None:
        if rewriting.id in self.rewritings:
            raise PlanError(f"rewriting {rewriting.id!r} is already in the graph")
        if rewriting.view not in self._of:
            raise PlanError(f"rewriting {rewriting.id!r} feeds unknown view {rewriting.view!r}")
        if not rewriting.inputs:
            raise PlanError(f"rewriting {rewriting.id!r} has no inputs")
        for u in rewriting.inputs:
            if u == rewriting.view:
                raise PlanError(f"rewriting {rewriting.id!r} of {u!r} reads {u!r} itself")
            if u != SOURCE and u not in self._of:
                raise PlanError(f"rewriting {rewriting.id!r} reads unknown view {u!r}")
        if SOURCE in rewriting.inputs and not rewriting.from_source:
            raise PlanError(f"rewriting {rewriting.id!r} mixes the publisher with views")
        if rewriting.utilisation < 0 or rewriting.latency < 0:
            raise PlanError(f"rewriting {rewriting.id!r} has a negative cost")
        self.rewritings[rewriting.id] = rewriting
        self._of[rewriting.view].append(rewriting.id)

    def of(self, view: str) -> list[Rewriting]:
        """The rewritings that feed ``view``."""
        return [self.rewritings[r] for r in self._of[view]]

    def remove_rewriting(self, rid: str) -> None:
        """Drop one rewriting (not a view's rewriting from the source, which every view
        keeps)."""
        r = self.rewritings[rid]
        if r.from_source:
            raise PlanError(f"rewriting {rid!r} is {r.view!r}'s from the publisher")
        del self.rewritings[rid]
        self._of[r.view].remove(rid)

    def remove_view(self, view: str) -> list[str]:
        """Drop ``view`` and every rewriting that feeds or reads it; their ids."""
        if view not in self._of:
            raise PlanError(f"unknown view {view!r}")
        gone = [r.id for r in self.rewritings.values() if r.view == view or view in r.inputs]
        for rid in gone:
            r = self.rewritings.pop(rid)
            if r.view != view:
                self._of[r.view].remove(rid)
        del self._of[view]
        self.views.remove(view)
        return gone

    def check(self) -> None:
        """Every view has its rewriting from the source (D.2)."""
        for v in self.views:
            if not any(r.from_source for r in self.of(v)):
                raise PlanError(f"view {v!r} has no rewriting from the publisher")


Bounds = Mapping[str, int | None]
Configuration = dict[str, str]  # view -> the id of its chosen rewriting


def out_degrees(rg: RewritabilityGraph, cfg: Configuration) -> dict[str, int]:
    """How many chosen rewritings each view (and the publisher) feeds."""
    out = dict.fromkeys([SOURCE, *rg.views], 0)
    for rid in cfg.values():
        for u in rg.rewritings[rid].inputs:
            out[u] += 1
    return out


def over_bounds(rg: RewritabilityGraph, cfg: Configuration, bounds: Bounds) -> list[str]:
    """The nodes whose out-degree exceeds their bound."""
    return [v for v, n in out_degrees(rg, cfg).items()
            if bounds.get(v) is not None and n > bounds[v]]


def latencies(rg: RewritabilityGraph, cfg: Configuration) -> dict[str, float]:
    """``λ(v)`` of every view (D.4), or PlanError if the configuration has a cycle."""
    lam: dict[str, float] = {SOURCE: 0.0}
    visiting: set[str] = set()

    def of(v: str) -> float:
        got = lam.get(v)
        if got is not None:
            return got
        if v in visiting:
            raise PlanError(f"the configuration has a cycle through view {v!r}: the "
                            "publisher does not reach it")
        visiting.add(v)
        r = rg.rewritings[cfg[v]]
        lam[v] = max(of(u) for u in r.inputs) + r.latency
        visiting.discard(v)
        return lam[v]

    for v in rg.views:
        of(v)
    del lam[SOURCE]
    return lam


def utilisation(rg: RewritabilityGraph, cfg: Configuration) -> float:
    return sum(rg.rewritings[r].utilisation for r in cfg.values())


def total_latency(rg: RewritabilityGraph, cfg: Configuration) -> float:
    return sum(latencies(rg, cfg).values())


def cost(rg: RewritabilityGraph, cfg: Configuration, alpha: float = 1.0,
         beta: float = 1.0) -> float:
    """``C(cfg) = α·U(cfg) + β·λ(cfg)``."""
    return alpha * utilisation(rg, cfg) + beta * total_latency(rg, cfg)


def validate(rg: RewritabilityGraph, cfg: Configuration, bounds: Bounds | None = None) -> None:
    """The conditions of D.3: one rewriting of the graph per view, the publisher reaching
    every view (no cycle), and, given ``bounds``, every fan-out within its bound."""
    missing = [v for v in rg.views if v not in cfg]
    if missing:
        raise PlanError(f"the configuration feeds no rewriting into view {missing[0]!r}")
    for v, rid in cfg.items():
        r = rg.rewritings.get(rid)
        if r is None or r.view != v:
            raise PlanError(f"{rid!r} is not a rewriting of view {v!r}")
    latencies(rg, cfg)
    if bounds is not None:
        over = over_bounds(rg, cfg, bounds)
        if over:
            raise PlanError(f"{over[0]!r} feeds {out_degrees(rg, cfg)[over[0]]} rewritings, "
                            f"over its bound {bounds[over[0]]}")


def reach(rg: RewritabilityGraph, cfg: Configuration) -> dict[str, set[str]]:
    """For each view, the views its results flow to in ``cfg`` (transitively, not itself)."""
    feeds: dict[str, list[str]] = {v: [] for v in rg.views}
    for v, rid in cfg.items():
        for u in rg.rewritings[rid].inputs:
            if u != SOURCE:
                feeds[u].append(v)
    out: dict[str, set[str]] = {}

    def of(v: str) -> set[str]:
        got = out.get(v)
        if got is None:
            got = out[v] = set()
            for w in feeds[v]:
                got.add(w)
                got |= of(w)
        return got

    for v in rg.views:
        of(v)
    return out


def levels(rg: RewritabilityGraph, cfg: Configuration) -> dict[str, int]:
    """Each view's level: 1 when fed by the publisher, else one more than its deepest input."""
    level: dict[str, int] = {SOURCE: 0}

    def of(v: str) -> int:
        if v not in level:
            level[v] = 1 + max(of(u) for u in rg.rewritings[cfg[v]].inputs)
        return level[v]

    for v in rg.views:
        of(v)
    del level[SOURCE]
    return level


def graph_of(rewritings: Iterable[Rewriting]) -> RewritabilityGraph:
    """A graph of the given rewritings, its views in order of first mention."""
    rewritings = list(rewritings)
    rg = RewritabilityGraph()
    for r in rewritings:
        if r.view not in rg._of:
            rg.add_view(r.view)
    for r in rewritings:
        for u in r.inputs:
            if u != SOURCE and u not in rg._of:
                rg.add_view(u)
    for r in rewritings:
        rg.add_rewriting(r)
    return rg
