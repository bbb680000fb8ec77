"""LOGA, Delta's latency-optimisation greedy (``papers/delta-pubsub-view-dissemination.txt``
section 3.4, Algorithm 2; ``specs/delta-dissemination.md`` D.7).

LOGA takes the utilisation-optimal configuration and swaps, view by view in order of
impact ``I(v) = λ(v) × |views v reaches in the configuration|``, the rewriting of a view
not fed by the publisher for another rewriting of it (never the publisher's) when that
lowers the total latency and keeps every fan-out within the (looser) LOGA bounds; it
repeats until a pass makes no swap.  Total latency strictly decreases, so it stops.
"""

from __future__ import annotations

import math

from .graph import (
    Bounds,
    Configuration,
    PlanError,
    RewritabilityGraph,
    latencies,
    over_bounds,
    reach,
    total_latency,
)


def loga_bounds(bounds: Bounds, factor: float = 1.5) -> dict[str, int | None]:
    """The paper's LOGA bounds: the ILP's times ``factor``, rounded down."""
    return {v: None if b is None else math.floor(b * factor) for v, b in bounds.items()}


def _acyclic(rg: RewritabilityGraph, cfg: Configuration) -> bool:
    try:
        latencies(rg, cfg)
    except PlanError:
        return False
    return True


def minimise_latency(rg: RewritabilityGraph, cfg: Configuration,
                     bounds: Bounds | None = None) -> Configuration:
    """Algorithm 2 on a copy of ``cfg``; the swaps keep ``bounds`` (LOGA's, see
    :func:`loga_bounds`) and acyclicity."""
    bounds = dict(bounds or {})
    cfg = dict(cfg)
    while True:
        previous = total_latency(rg, cfg)
        lam = latencies(rg, cfg)
        reached = reach(rg, cfg)
        chosen = [v for v in rg.views if not rg.rewritings[cfg[v]].from_source]
        chosen.sort(key=lambda v: (-lam[v] * len(reached[v]), v))
        for v in chosen:
            best, best_latency = None, total_latency(rg, cfg)
            current = cfg[v]
            for alternative in rg.of(v):
                if alternative.from_source or alternative.id == current:
                    continue
                cfg[v] = alternative.id
                if _acyclic(rg, cfg) and not over_bounds(rg, cfg, bounds):
                    got = total_latency(rg, cfg)
                    if got < best_latency:
                        best, best_latency = alternative.id, got
                cfg[v] = current
            if best is not None:
                cfg[v] = best
        if total_latency(rg, cfg) >= previous:
            return cfg
