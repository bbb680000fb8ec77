"""Delta's dissemination planner (``specs/delta-dissemination.md`` D.2-D.8): the worked
examples of D.13 (Figure 3's graph G3, ILP cases C1-C7, LOGA, incremental add and remove),
and random graphs against brute-force enumeration of every configuration."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from upkeep.dissemination.graph import (
    SOURCE,
    PlanError,
    Rewriting,
    graph_of,
    latencies,
    out_degrees,
    over_bounds,
    total_latency,
    utilisation,
    validate,
)
from upkeep.dissemination.ilp import Infeasible, least_utilisation_per_view, minimise_utilisation
from upkeep.dissemination.incremental import place, remove
from upkeep.dissemination.loga import loga_bounds, minimise_latency

D = SOURCE


def g3():
    """Figure 3's rewritability graph with D.13's utilisation and local latency."""
    return graph_of([
        Rewriting("a10", "v1", (D,), 10, 1), Rewriting("a11", "v1", ("v2", "v3"), 3, 1),
        Rewriting("a20", "v2", (D,), 10, 1), Rewriting("a30", "v3", (D,), 10, 2),
        Rewriting("a40", "v4", (D,), 10, 1), Rewriting("a41", "v4", ("v2", "v3"), 4, 1),
        Rewriting("a42", "v4", ("v1",), 2, 1)])


def chosen(cfg):
    return set(cfg.values())


def every_configuration(rg, bounds):
    """Brute force (D.3's oracle): every choice of one rewriting per view that is a valid
    configuration within ``bounds``."""
    for choice in itertools.product(*(rg.of(v) for v in rg.views)):
        cfg = {r.view: r.id for r in choice}
        try:
            validate(rg, cfg, bounds)
        except PlanError:
            continue
        yield cfg


@pytest.mark.parametrize("case, bounds, optimum, picks", [
    ("C1", {}, 25, {"a11", "a20", "a30", "a42"}),
    ("C2", {D: 2}, 25, {"a11", "a20", "a30", "a42"}),
    ("C4", {"v1": 0}, 27, {"a11", "a20", "a30", "a41"}),
    ("C5", {"v1": 0, "v2": 1}, 33, {"a11", "a20", "a30", "a40"}),
])
def test_ilp_cases_of_figure_3(case, bounds, optimum, picks):
    rg = g3()
    solution = minimise_utilisation(rg, bounds)
    assert solution.optimal and solution.gap == 0
    assert solution.utilisation == optimum and chosen(solution.cfg) == picks, case
    assert min(utilisation(rg, c) for c in every_configuration(rg, bounds)) == optimum
    validate(rg, solution.cfg, bounds)


@pytest.mark.parametrize("bounds", [{D: 1}, {"v1": 0, "v2": 1, D: 2}])
def test_ilp_cases_c3_and_c6_are_infeasible(bounds):
    with pytest.raises(Infeasible, match="no configuration meets the fan-out bounds"):
        minimise_utilisation(g3(), bounds)
    assert not list(every_configuration(g3(), bounds))


def test_c1_metrics_and_the_unbounded_special_case():
    rg = g3()
    cfg = minimise_utilisation(rg).cfg
    assert least_utilisation_per_view(rg) == cfg
    assert latencies(rg, cfg) == {"v1": 3, "v2": 1, "v3": 2, "v4": 4}
    assert total_latency(rg, cfg) == 10
    assert out_degrees(rg, cfg) == {D: 2, "v1": 1, "v2": 1, "v3": 1, "v4": 0}


def test_loga_on_c1_trades_utilisation_for_latency():
    rg = g3()
    cfg = minimise_utilisation(rg).cfg
    better = minimise_latency(rg, cfg)
    assert chosen(better) == {"a11", "a20", "a30", "a41"}
    assert total_latency(rg, better) == 9 and utilisation(rg, better) == 27
    assert chosen(cfg) == {"a11", "a20", "a30", "a42"}  # the input is not changed
    for bound in ({"v2": 1}, {"v3": 1}):  # a41 would make v2 / v3 feed two rewritings
        assert minimise_latency(rg, cfg, bound) == cfg
    assert loga_bounds({D: 30, "v1": 5, "v2": None}) == {D: 45, "v1": 7, "v2": None}


def with_v5():
    rg = g3()
    rg.add_view("v5")
    for r in (Rewriting("a50", "v5", (D,), 10, 1), Rewriting("a51", "v5", ("v4",), 1, 1),
              Rewriting("a52", "v5", ("v2",), 2, 1)):
        rg.add_rewriting(r)
    return rg


@pytest.mark.parametrize("alpha, beta, bounds, expected, over", [
    (1, 0, {}, "a51", False),
    (1, 1, {}, "a52", False),
    (1, 1, {"v2": 1}, "a51", False),
    (1, 1, {"v2": 1, "v4": 0, D: 2}, "a50", True),
])
def test_incremental_add(alpha, beta, bounds, expected, over):
    rg = with_v5()
    cfg = {"v1": "a11", "v2": "a20", "v3": "a30", "v4": "a42"}
    placement = place(rg, cfg, "v5", bounds, alpha, beta)
    assert placement.rewriting == expected and cfg["v5"] == expected
    assert placement.over_source_bound is over


def test_incremental_remove():
    rg = with_v5()
    cfg = {"v1": "a11", "v2": "a20", "v3": "a30", "v4": "a42", "v5": "a52"}
    placements = remove(rg, cfg, "v1")
    assert [(p.view, p.rewriting) for p in placements] == [("v4", "a41")]
    assert chosen(cfg) == {"a20", "a30", "a41", "a52"}
    assert not {"a10", "a11", "a42"} & set(rg.rewritings)
    assert latencies(rg, cfg)["v4"] == 3 and latencies(rg, cfg)["v5"] == 2


def c7():
    return graph_of([Rewriting("d6", "v6", (D,), 10, 1), Rewriting("d7", "v7", (D,), 10, 1),
                     Rewriting("r76", "v6", ("v7",), 1, 1),
                     Rewriting("r67", "v7", ("v6",), 1, 1)])


def test_c7_a_cycle_needs_the_level_constraints():
    rg = c7()
    with pytest.raises(PlanError, match="cycle"):  # the paper's program picks the cycle
        minimise_utilisation(rg, levels=False)
    with pytest.raises(PlanError, match="cycle"):
        validate(rg, {"v6": "r76", "v7": "r67"})
    safe = minimise_utilisation(rg)  # the cycle switches the level constraints on
    assert safe.utilisation == 11 and chosen(safe.cfg) in ({"d6", "r67"}, {"d7", "r76"})
    acyclic = graph_of([r for r in rg.rewritings.values() if r.id != "r76"])
    assert chosen(minimise_utilisation(acyclic, levels=False).cfg) == {"d6", "r67"}


def test_bad_graphs_are_refused():
    rg = g3()
    with pytest.raises(PlanError, match="unknown view 'v9'"):
        rg.add_rewriting(Rewriting("b", "v1", ("v9",), 1, 1))
    with pytest.raises(PlanError, match="reads 'v1' itself"):
        rg.add_rewriting(Rewriting("b", "v1", ("v1",), 1, 1))
    with pytest.raises(PlanError, match="already in the graph"):
        rg.add_rewriting(Rewriting("a10", "v1", (D,), 1, 1))
    with pytest.raises(PlanError, match="names the publisher"):
        rg.add_view(D)
    orphan = graph_of([Rewriting("x", "v1", ("v2",), 1, 1), Rewriting("y", "v2", (D,), 1, 1)])
    with pytest.raises(PlanError, match="no rewriting from the publisher"):
        minimise_utilisation(orphan)
    with pytest.raises(PlanError, match="is not a rewriting of view 'v2'"):
        validate(g3(), {"v1": "a10", "v2": "a30", "v3": "a30", "v4": "a40"})


@st.composite
def graphs(draw):
    """Small random rewritability graphs (acyclic or not) with random bounds."""
    n = draw(st.integers(2, 5))
    views = [f"v{i}" for i in range(n)]
    rewritings = [Rewriting(f"d{i}", v, (D,), draw(st.integers(5, 12)), draw(st.integers(1, 3)))
                  for i, v in enumerate(views)]
    for j in range(draw(st.integers(0, 7))):
        v = draw(st.sampled_from(views))
        others = [u for u in views if u != v]
        inputs = draw(st.lists(st.sampled_from(others), min_size=1, max_size=2, unique=True))
        rewritings.append(Rewriting(f"r{j}", v, tuple(inputs), draw(st.integers(0, 6)),
                                    draw(st.integers(1, 3))))
    bounds = {u: draw(st.one_of(st.none(), st.integers(0, 3))) for u in [D, *views]}
    return graph_of(rewritings), bounds


def test_the_acyclic_program_finds_the_optimum_through_a_cycle_of_the_graph():
    """A graph with a cycle (v0 <-> v3): HiGHS's presolve reduced the level constraints
    wrongly and returned 11 as optimal where brute force finds 10 (v0 from v1 and v3)."""
    rg = graph_of([
        Rewriting("d0", "v0", (D,), 6, 1), Rewriting("d1", "v1", (D,), 5, 1),
        Rewriting("d2", "v2", (D,), 6, 1), Rewriting("d3", "v3", (D,), 5, 1),
        Rewriting("r0", "v3", ("v0",), 0, 1), Rewriting("r1", "v3", ("v0",), 0, 1),
        Rewriting("r2", "v2", ("v0", "v1"), 0, 1), Rewriting("r3", "v2", ("v0", "v1"), 0, 1),
        Rewriting("r4", "v1", ("v0",), 5, 1), Rewriting("r5", "v0", ("v1", "v3"), 0, 1),
        Rewriting("r6", "v2", ("v1",), 0, 1)])
    bounds = {D: None, "v0": 1, "v1": 2, "v2": None, "v3": 1}
    solution = minimise_utilisation(rg, bounds)
    validate(rg, solution.cfg, bounds)
    assert solution.optimal and solution.utilisation == 10 == min(
        utilisation(rg, c) for c in every_configuration(rg, bounds))


@settings(max_examples=80, deadline=None)
@given(graphs())
def test_ilp_and_loga_against_every_configuration(instance):
    rg, bounds = instance
    valid = list(every_configuration(rg, bounds))
    if not valid:
        with pytest.raises(Infeasible):
            minimise_utilisation(rg, bounds)
        return
    solution = minimise_utilisation(rg, bounds)
    validate(rg, solution.cfg, bounds)
    assert solution.utilisation == min(utilisation(rg, c) for c in valid)
    better = minimise_latency(rg, solution.cfg, bounds)
    validate(rg, better, bounds)
    assert total_latency(rg, better) <= total_latency(rg, solution.cfg)
    assert not over_bounds(rg, better, bounds)
    assert all(better[v] == solution.cfg[v] or not rg.rewritings[better[v]].from_source
               for v in rg.views)  # LOGA never moves a view back to the publisher
    u0 = utilisation(rg, solution.cfg)
    for budget in (0.0, 0.07, 0.5):  # a utilisation budget holds, and latency still falls
        within = minimise_latency(rg, solution.cfg, bounds, budget=budget)
        validate(rg, within, bounds)
        assert utilisation(rg, within) <= u0 * (1 + budget) + 1e-9
        assert total_latency(rg, within) <= total_latency(rg, solution.cfg)


def test_loga_breaks_a_latency_tie_by_the_cheaper_rewriting():
    """v3 sits two levels below the publisher (over v4, over v5); two swaps bring it one
    level up (over v1 or over v2) for the same latency, and LOGA makes the one that adds
    less utilisation, whichever CGR listed first."""
    for order in ((("a", 9), ("b", 4)), (("b", 4), ("a", 9))):
        rewritings = [Rewriting("d1", "v1", (D,), 10, 1), Rewriting("d2", "v2", (D,), 10, 1),
                      Rewriting("d5", "v5", (D,), 10, 1), Rewriting("e", "v4", ("v5",), 1, 1),
                      Rewriting("c", "v3", ("v4",), 1, 1)]
        rewritings += [Rewriting(rid, "v3", ("v1" if rid == "a" else "v2",), u, 1)
                       for rid, u in order]
        rg = graph_of(rewritings)
        cfg = {"v1": "d1", "v2": "d2", "v5": "d5", "v4": "e", "v3": "c"}
        better = minimise_latency(rg, cfg)
        assert better["v3"] == "b", order
        assert total_latency(rg, better) == total_latency(rg, cfg) - 1


def test_loga_within_a_budget_fills_it_by_latency_gained_per_utilisation():
    """A utilisation budget of 7: ``big`` (first in impact order) can move up four levels
    for 7 more utilisation, each of s1-s3 two levels for 1 more.  Algorithm 2's order
    spends the whole budget on ``big`` (latency -4); gain per utilisation spends it on
    s1-s3 (latency -6), so that is the configuration kept."""
    rewritings = [Rewriting("d", "r", (D,), 10, 1)]
    chain = ["r", "c1", "c2", "c3", "c4"]
    rewritings += [Rewriting(f"x{i}", v, (u,), 1, 1)
                   for i, (u, v) in enumerate(itertools.pairwise(chain))]
    rewritings += [Rewriting("big_deep", "big", ("c4",), 1, 1),
                   Rewriting("big_up", "big", ("r",), 8, 1)]
    for s in ("s1", "s2", "s3"):
        rewritings += [Rewriting(f"{s}_deep", s, ("c2",), 1, 1),
                       Rewriting(f"{s}_up", s, ("r",), 2, 1)]
    rg = graph_of(rewritings)
    cfg = {"r": "d", "c1": "x0", "c2": "x1", "c3": "x2", "c4": "x3", "big": "big_deep",
           "s1": "s1_deep", "s2": "s2_deep", "s3": "s3_deep"}
    assert utilisation(rg, cfg) == 18
    unlimited = minimise_latency(rg, cfg)
    assert total_latency(rg, unlimited) == total_latency(rg, cfg) - 10  # every swap made
    within = minimise_latency(rg, cfg, budget=7 / 18)
    assert within["big"] == "big_deep"
    assert [within[s] for s in ("s1", "s2", "s3")] == ["s1_up", "s2_up", "s3_up"]
    assert total_latency(rg, within) == total_latency(rg, cfg) - 6
    assert utilisation(rg, within) == 21
