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
    total_latency,
    utilisation,
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
    would overrun it is not made.  Within a budget, Algorithm 2's order can spend it on a
    few costly swaps, so a second run fills it as a knapsack is filled greedily (each pass
    offers every view's swap with the most latency gained per unit of utilisation added,
    swaps that add none first, and makes them best ratio first, each re-priced against
    the swaps made before it); the configuration with the lower total latency is kept."""
    if budget is None:
        return _passes(rg, dict(cfg), dict(bounds or {}), math.inf, priced=False)
    room = budget * sum(rg.rewritings[r].utilisation for r in cfg.values())
    runs = [_passes(rg, dict(cfg), dict(bounds or {}), room, priced)
            for priced in (False, True)]
    return min(runs, key=lambda c: (total_latency(rg, c), utilisation(rg, c)))


def _passes(rg: RewritabilityGraph, cfg: Configuration, bounds: Bounds, room: float,
            priced: bool) -> Configuration:
    """LOGA's passes over ``cfg`` (changed in place) until one makes no swap; ``room``:
    the utilisation the swaps may still add."""
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
        if priced:  # every view's offer at this pass's latencies, best ratio first
            offers = []
            for v in chosen:
                swap = _best_swap(rg, cfg, lam, out, children, bounds, room, v, True)
                if swap is not None:
                    offers.append((swap[2], v, swap[0]))
            offers.sort(key=lambda t: t[0])  # stable: ties keep the order of impact
            plan = [(v, alternative) for _, v, alternative in offers]
        else:
            plan = [(v, None) for v in chosen]
        swapped = False
        for v, offered in plan:
            if offered is None:
                swap = _best_swap(rg, cfg, lam, out, children, bounds, room, v, False)
            else:  # re-priced after the swaps made before it
                swap = _reprice(rg, cfg, lam, out, children, bounds, room, v, offered)
            if swap is None:
                continue
            best, best_change = swap[0], swap[1]
            current = rg.rewritings[cfg[v]]
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


def _allowed(rg: RewritabilityGraph, cfg: Configuration, out: dict[str, int],
             bounds: Bounds, room: float, v: str, alternative, below: set[str]) -> bool:
    """Whether ``v`` may swap to ``alternative``: not the publisher's, no cycle, the
    fan-out bounds and the utilisation budget kept."""
    current = rg.rewritings[cfg[v]]
    if alternative.from_source or alternative.id == current.id:
        return False
    if any(u == v or u in below for u in alternative.inputs):
        return False  # the swap would close a cycle
    if any(bounds.get(u) is not None and u not in current.inputs
           and out[u] + 1 > bounds[u] for u in alternative.inputs):
        return False
    return alternative.utilisation - current.utilisation <= room


def _best_swap(rg: RewritabilityGraph, cfg: Configuration, lam: dict[str, float],
               out: dict[str, int], children: dict[str, set[str]], bounds: Bounds,
               room: float, v: str, priced: bool):
    """The rewriting of ``v`` LOGA would swap in, with the views' new latencies and its
    sort key (smaller is better), or None.  The key is (latency change, utilisation
    added), or, ``priced``, (-gain per utilisation added, latency change): a swap that
    adds no utilisation has an infinite ratio."""
    current = rg.rewritings[cfg[v]]
    below = _downstream(v, children)
    best, best_change, best_key = None, {}, None
    for alternative in rg.of(v):
        if not _allowed(rg, cfg, out, bounds, room, v, alternative, below):
            continue
        added = alternative.utilisation - current.utilisation
        change = _relatency(rg, cfg, lam, v, alternative, below, children)
        delta = sum(change[w] - lam[w] for w in change)
        if delta >= -1e-12:
            continue  # no latency gained
        if priced:
            key = (-math.inf if added <= 0 else delta / added, round(delta, 9))
        else:
            key = (round(delta, 9), added)
        if best_key is None or key < best_key:
            best, best_change, best_key = alternative, change, key
    return None if best is None else (best, best_change, best_key)


def _reprice(rg: RewritabilityGraph, cfg: Configuration, lam: dict[str, float],
             out: dict[str, int], children: dict[str, set[str]], bounds: Bounds,
             room: float, v: str, alternative):
    """``v``'s offered swap against the configuration as it is now: the rewriting and
    the views' new latencies, or None if it is no longer allowed or gains nothing."""
    below = _downstream(v, children)
    if not _allowed(rg, cfg, out, bounds, room, v, alternative, below):
        return None
    change = _relatency(rg, cfg, lam, v, alternative, below, children)
    if sum(change[w] - lam[w] for w in change) >= -1e-12:
        return None
    return alternative, change


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
