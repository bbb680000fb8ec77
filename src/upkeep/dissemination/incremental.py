"""Keeping a configuration as subscriptions come and go: Delta's section 3.5
(``papers/delta-pubsub-view-dissemination.txt``; ``specs/delta-dissemination.md`` D.8).

A new view takes its cheapest rewriting over views already placed, ``C = α·U + β·λ``,
that keeps every fan-out bound (the publisher only as the fallback, which may exceed the
publisher's bound: the signal to re-optimise in full).  A removed view takes its
rewritings with it, and the views it fed are placed again the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from .graph import (
    SOURCE,
    Bounds,
    Configuration,
    PlanError,
    RewritabilityGraph,
    Rewriting,
    out_degrees,
)


@dataclass
class Placement:
    """Where :func:`place` put a view: its rewriting, and whether the publisher's bound is
    now exceeded (the signal to re-optimise in full)."""

    view: str
    rewriting: str
    over_source_bound: bool


def place(rg: RewritabilityGraph, cfg: Configuration, view: str, bounds: Bounds | None = None,
          alpha: float = 1.0, beta: float = 1.0) -> Placement:
    """Section 3.5: put ``view`` (already in ``rg`` with its rewritings) into ``cfg`` by its
    cheapest rewriting ``C = α·U + β·(max λ(inputs) + l)`` over views already placed whose
    use keeps every bound, ties by id; the publisher's rewriting when there is none."""
    bounds = dict(bounds or {})
    placed = {v: r for v, r in cfg.items() if v != view}
    lam = _placed_latencies(rg, placed)
    out = out_degrees(rg, placed)
    candidates: list[tuple[float, str, Rewriting]] = []
    for r in rg.of(view):
        if r.from_source or any(u not in lam for u in r.inputs):
            continue
        if any(bounds.get(u) is not None and out[u] + 1 > bounds[u] for u in r.inputs):
            continue
        c = alpha * r.utilisation + beta * (max(lam[u] for u in r.inputs) + r.latency)
        candidates.append((c, r.id, r))
    if candidates:
        chosen = min(candidates, key=lambda t: (t[0], t[1]))[2]
    else:
        sources = [r for r in rg.of(view) if r.from_source]
        if not sources:
            raise PlanError(f"view {view!r} has no rewriting from the publisher")
        chosen = min(sources, key=lambda r: (r.utilisation, r.id))
    cfg[view] = chosen.id
    bound = bounds.get(SOURCE)
    over = bound is not None and out_degrees(rg, cfg)[SOURCE] > bound
    return Placement(view, chosen.id, over)


def remove(rg: RewritabilityGraph, cfg: Configuration, view: str, bounds: Bounds | None = None,
           alpha: float = 1.0, beta: float = 1.0) -> list[Placement]:
    """Section 3.5: drop ``view`` from ``rg`` and ``cfg``; every view whose rewriting read it
    is placed again (:func:`place`), in order of id.  Returns those placements."""
    orphans = sorted(v for v, rid in cfg.items()
                     if v != view and view in rg.rewritings[rid].inputs)
    rg.remove_view(view)
    cfg.pop(view, None)
    for v in orphans:
        cfg.pop(v)
    placed = []
    for v in orphans:
        placed.append(place(rg, cfg, v, bounds, alpha, beta))
    return placed


def _placed_latencies(rg: RewritabilityGraph, cfg: Configuration) -> dict[str, float]:
    """``λ`` of the views of ``cfg`` whose inputs are all placed (transitively): while
    views are being placed again, the others cannot feed anyone yet."""
    lam: dict[str, float] = {SOURCE: 0.0}
    pending = dict(cfg)
    while pending:
        ready = [v for v, rid in pending.items()
                 if all(u in lam for u in rg.rewritings[rid].inputs)]
        if not ready:
            break
        for v in ready:
            r = rg.rewritings[pending.pop(v)]
            lam[v] = max(lam[u] for u in r.inputs) + r.latency
    del lam[SOURCE]
    return lam
