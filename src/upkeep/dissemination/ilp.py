"""The utilisation-minimal configuration under fan-out bounds: the integer program of
Delta's Table 1 / Figure 3 (``papers/delta-pubsub-view-dissemination.txt`` section 3.3;
``specs/delta-dissemination.md`` D.6), solved by HiGHS through ``scipy.optimize.milp``.

One binary ``x_a`` per rewriting (the spec's equivalent of one per edge: constraint (3)
forces every edge into a chosen ∧ node to equal it):

* (2) ``Σ_{a→v} x_a = 1`` for every view: one rewriting each;
* (4) ``Σ_{a : u ∈ in(a)} x_a ≤ B_u`` for every bounded view and the publisher;
* minimise ``Σ U_a x_a``.

The paper's program has no reachability constraint and is right only on an acyclic graph
(spec C7: on a cycle it picks the cycle).  ``levels=True`` adds continuous levels ``h_v``
with ``h_v ≥ h_u + 1 − M(1 − x_a)`` for every input ``u`` of ``a → v``, which forbids cycles
on any graph; it is switched on by itself when the graph has a cycle.  When the solver
stops at its time limit the best configuration found is returned with its optimality gap;
if it found none, the LP relaxation's near-integral choices are fixed and the rest solved
again (relax-and-fix), the gap measured against the relaxation's bound.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds as VariableBounds
from scipy.optimize import LinearConstraint, milp
from scipy.sparse import coo_array

from .graph import SOURCE, Bounds, Configuration, PlanError, RewritabilityGraph, validate


@dataclass
class Solution:
    """A configuration and how it was found."""

    cfg: Configuration
    utilisation: float
    optimal: bool
    gap: float  # relative gap to the best bound (0 when optimal)
    seconds: float
    method: str  # "milp", or "relax-and-fix" after a time limit with no solution


class Infeasible(PlanError):
    """No configuration meets the fan-out bounds."""


def has_cycle(rg: RewritabilityGraph) -> bool:
    """Whether some view can (through rewritings) be computed from itself."""
    reads: dict[str, set[str]] = {v: set() for v in rg.views}
    for r in rg.rewritings.values():
        reads[r.view].update(u for u in r.inputs if u != SOURCE)
    state: dict[str, int] = {}  # 1 on the stack, 2 done

    for start in rg.views:
        if start in state:
            continue
        stack = [(start, iter(reads[start]))]
        state[start] = 1
        while stack:
            v, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[v] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return True
            elif nxt not in state:
                state[nxt] = 1
                stack.append((nxt, iter(reads[nxt])))
    return False


def minimise_utilisation(rg: RewritabilityGraph, bounds: Bounds | None = None, *,
                         levels: bool | None = None, time_limit: float | None = None,
                         relative_gap: float = 1e-6) -> Solution:
    """The configuration of least total utilisation within ``bounds`` (Infeasible when
    none exists).  ``levels``: add the acyclicity constraints (default: when the graph has
    a cycle)."""
    rg.check()
    bounds = dict(bounds or {})
    start = time.perf_counter()
    if levels is None:
        levels = has_cycle(rg)
    ids = list(rg.rewritings)
    if not ids:  # no views: the empty configuration (HiGHS takes no empty program)
        return Solution({}, 0.0, True, 0.0, time.perf_counter() - start, "milp")
    column = {rid: i for i, rid in enumerate(ids)}
    nx = len(ids)
    view_index = {v: i for i, v in enumerate(rg.views)}
    nh = len(rg.views) if levels else 0
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    lower: list[float] = []
    upper: list[float] = []

    def constraint(entries: list[tuple[int, float]], lo: float, hi: float) -> None:
        row = len(lower)
        for col, val in entries:
            rows.append(row)
            cols.append(col)
            vals.append(val)
        lower.append(lo)
        upper.append(hi)

    for v in rg.views:  # (2)
        constraint([(column[r.id], 1.0) for r in rg.of(v)], 1.0, 1.0)
    users: dict[str, list[int]] = {}
    for r in rg.rewritings.values():
        for u in r.inputs:
            users.setdefault(u, []).append(column[r.id])
    for u, bound in bounds.items():  # (4)
        if bound is not None and users.get(u):
            constraint([(c, 1.0) for c in users[u]], -np.inf, float(bound))
    if levels:
        big_m = float(len(rg.views) + 1)
        for r in rg.rewritings.values():
            if r.from_source:
                continue
            hv = nx + view_index[r.view]
            for u in r.inputs:  # h_v - h_u - M x_a >= 1 - M
                constraint([(hv, 1.0), (nx + view_index[u], -1.0), (column[r.id], -big_m)],
                           1.0 - big_m, np.inf)
    n = nx + nh
    c = np.zeros(n)
    for rid, i in column.items():
        c[i] = rg.rewritings[rid].utilisation
    integrality = np.zeros(n)
    integrality[:nx] = 1
    var_bounds = VariableBounds(np.zeros(n), np.concatenate([np.ones(nx),
                                                             np.full(nh, len(rg.views))]))
    matrix = coo_array((vals, (rows, cols)), shape=(len(lower), n)).tocsr()
    constraints = LinearConstraint(matrix, np.array(lower), np.array(upper))
    # HiGHS's presolve (scipy 1.17's) reduces the level constraints' big-M rows wrongly:
    # it returned 11 as optimal where a feasible configuration costs 10 (a cycle v0 <-> v3)
    options = {"mip_rel_gap": relative_gap, "presolve": not levels}
    if time_limit is not None:
        options["time_limit"] = time_limit
    res = milp(c, constraints=constraints, integrality=integrality, bounds=var_bounds,
               options=options)
    if res.status == 2:
        raise Infeasible(_infeasible_message(bounds))
    if res.x is not None:
        cfg = _configuration(rg, ids, res.x)
        validate(rg, cfg, bounds)
        gap = float(res.mip_gap or 0.0) if res.status != 0 else 0.0
        return Solution(cfg, float(sum(rg.rewritings[r].utilisation for r in cfg.values())),
                        res.status == 0, gap, time.perf_counter() - start, "milp")
    if res.status != 1:
        raise PlanError(f"the solver failed: {res.message}")
    return _relax_and_fix(rg, bounds, c, integrality, var_bounds, constraints, ids,
                          levels, start)


def _relax_and_fix(rg, bounds, c, integrality, var_bounds, constraints, ids, levels,
                   start) -> Solution:
    """No integer solution within the time limit: solve the LP relaxation, fix the
    rewritings it chooses (x ≥ 0.999) and solve the smaller integer program left."""
    relaxed = milp(c, constraints=constraints, integrality=np.zeros_like(integrality),
                   bounds=var_bounds)
    if relaxed.status == 2:
        raise Infeasible(_infeasible_message(bounds))
    lo = var_bounds.lb.copy()
    nx = len(ids)
    lo[:nx] = np.where(relaxed.x[:nx] >= 0.999, 1.0, 0.0)
    options = {"presolve": not levels}  # as in minimise_utilisation
    res = milp(c, constraints=constraints, integrality=integrality,
               bounds=VariableBounds(lo, var_bounds.ub), options=options)
    if res.x is None:  # the fixing was too greedy: the full program without a time limit
        res = milp(c, constraints=constraints, integrality=integrality, bounds=var_bounds,
                   options=options)
    if res.x is None:
        raise Infeasible(_infeasible_message(bounds))
    cfg = _configuration(rg, ids, res.x)
    validate(rg, cfg, bounds)
    value = float(sum(rg.rewritings[r].utilisation for r in cfg.values()))
    gap = (value - relaxed.fun) / value if value else 0.0
    return Solution(cfg, value, gap <= 1e-9, gap, time.perf_counter() - start,
                    "relax-and-fix")


def _configuration(rg: RewritabilityGraph, ids: list[str], x: np.ndarray) -> Configuration:
    cfg: Configuration = {}
    for i, rid in enumerate(ids):
        if x[i] > 0.5:
            cfg[rg.rewritings[rid].view] = rid
    return cfg


def _infeasible_message(bounds: dict) -> str:
    """The bounds in short: the publisher's, then each value with how many views have it."""
    parts = [] if bounds.get(SOURCE) is None else [f"publisher {bounds[SOURCE]}"]
    counts: dict[int, list[str]] = {}
    for v, b in bounds.items():
        if v != SOURCE and b is not None:
            counts.setdefault(b, []).append(v)
    for b, views in sorted(counts.items()):
        parts.append(f"{b} for {views[0]}" if len(views) == 1 else
                     f"{b} for {len(views)} subscriptions")
    return f"no configuration meets the fan-out bounds ({', '.join(parts) or 'none'})"


def least_utilisation_per_view(rg: RewritabilityGraph) -> Configuration:
    """The unbounded special case of D.4: each view's cheapest rewriting (ties by id);
    a configuration only when the graph is acyclic."""
    return {v: min(rg.of(v), key=lambda r: (r.utilisation, r.id)).id for v in rg.views}
