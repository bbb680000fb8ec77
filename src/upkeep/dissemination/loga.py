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
    SOURCE,
    Bounds,
    Configuration,
    RewritabilityGraph,
    latencies,
    out_degrees,
    reach,
)


def loga_bounds(bounds: Bounds, factor: float = 1.5) -> dict[str, int | None]:
    """The paper's LOGA bounds: the ILP's times ``factor``, rounded down."""
    return {v: None if b is None else math.floor(b * factor) for v, b in bounds.items()}


def minimise_latency(rg: RewritabilityGraph, cfg: Configuration,
                     bounds: Bounds | None = None, budget: float | None = None
                     ) -> Configuration:
    """Algorithm 2 on a copy of ``cfg``; the swaps keep ``bounds`` (LOGA's, see
    :func:`loga_bounds`) and acyclicity.  A candidate swap is priced incrementally, over
    the views downstream of the swapped one only (section 3.4).

    Among swaps that gain the same latency (common: a view's latency follows its level),
    the one adding the least utilisation is made (the paper leaves ties open).

    ``budget`` [OURS]: the most the total utilisation may grow, as a fraction of ``cfg``'s
    (the paper's LOGA has none; its figures report what the swaps cost).  A swap that
    would overrun it is not made."""
    bounds = dict(bounds or {})
    cfg = dict(cfg)
    room = math.inf if budget is None else budget * sum(
        rg.rewritings[r].utilisation for r in cfg.values())
    while True:
        lam = latencies(rg, cfg)
        out = out_degrees(rg, cfg)
        children: dict[str, set[str]] = {v: set() for v in rg.views}
        for v, rid in cfg.items():
            for u in rg.rewritings[rid].inputs:
                if u != SOURCE:
                    children[u].add(v)
        reached = reach(rg, cfg)
        chosen = [v for v in rg.views if not rg.rewritings[cfg[v]].from_source]
        chosen.sort(key=lambda v: (-lam[v] * len(reached[v]), v))
        swapped = False
        for v in chosen:
            current = rg.rewritings[cfg[v]]
            below = _downstream(v, children)
            best, best_change = None, {}
            best_key = (0.0, 0.0)  # (latency gained, utilisation added): ties go cheaper
            for alternative in rg.of(v):
                if alternative.from_source or alternative.id == current.id:
                    continue
                if any(u == v or u in below for u in alternative.inputs):
                    continue  # the swap would close a cycle
                if any(bounds.get(u) is not None and u not in current.inputs
                       and out[u] + 1 > bounds[u] for u in alternative.inputs):
                    continue
                if alternative.utilisation - current.utilisation > room:
                    continue
                change = _relatency(rg, cfg, lam, v, alternative, below, children)
                delta = sum(change[w] - lam[w] for w in change)
                if delta >= -1e-12:
                    continue  # no latency gained
                key = (round(delta, 9), alternative.utilisation - current.utilisation)
                if best is None or key < best_key:
                    best, best_change, best_key = alternative, change, key
            if best is None:
                continue
            for u in current.inputs:
                out[u] -= 1
                if u != SOURCE:
                    children[u].discard(v)
            for u in best.inputs:
                out[u] += 1
                children[u].add(v)
            cfg[v] = best.id
            room -= best.utilisation - current.utilisation
            lam.update(best_change)
            swapped = True
        if not swapped:
            return cfg


def _downstream(v: str, children: dict[str, set[str]]) -> set[str]:
    """The views ``v``'s results flow to (not ``v``)."""
    seen: set[str] = set()
    stack = list(children[v])
    while stack:
        w = stack.pop()
        if w not in seen:
            seen.add(w)
            stack.extend(children[w])
    return seen


def _relatency(rg: RewritabilityGraph, cfg: Configuration, lam: dict[str, float], v: str,
               alternative, below: set[str], children: dict[str, set[str]]
               ) -> dict[str, float]:
    """The new ``λ`` of ``v`` and the views below it if ``v`` were fed by ``alternative``
    (only those that change)."""
    new = {v: max(lam[u] if u != SOURCE else 0.0 for u in alternative.inputs)
           + alternative.latency}
    if new[v] == lam[v]:
        return {}
    pending = {w: sum(1 for u in rg.rewritings[cfg[w]].inputs if u == v or u in below)
               for w in below}
    ready = [w for w in children[v]]
    for w in ready:
        pending[w] -= 1
    queue = [w for w in ready if pending[w] == 0]
    while queue:
        w = queue.pop()
        r = rg.rewritings[cfg[w]]
        got = max(new.get(u, lam.get(u, 0.0)) for u in r.inputs) + r.latency
        if got != lam[w]:
            new[w] = got
        for x in children[w]:
            pending[x] -= 1
            if pending[x] == 0:
                queue.append(x)
    return new
