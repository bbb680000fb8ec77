"""Leapfrog triejoin maintenance (``lftj-incremental-maintenance.txt``): the paper's worked
example, a brute-force check of the maintained join, and work that follows the trace edit
distance rather than the database size."""

from __future__ import annotations

import random
from collections import Counter

import pytest

import upkeep
from upkeep.lftj import LeapfrogJoin, variable_order

A_KEYS = [0, 2, 4, 5, 6]
B_KEYS = [1, 2, 6, 7]


def _unary_join() -> LeapfrogJoin:
    join = LeapfrogJoin([(0,), (0,)], ["A", "B"], (0,))
    join.build({0: {(k,): 1 for k in A_KEYS}, 1: {(k,): 1 for k in B_KEYS}})
    return join


def test_section_4_1_sensitivity_intervals() -> None:
    """The leapfrog join of A = {0,2,4,5,6} and B = {1,2,6,7}: A_sens and B_sens of 4.1."""
    join = _unary_join()
    assert join.sensitivity(0) == [(None, 0), (1, 2), (2, 4), (6, 6), (6, None)]
    assert join.sensitivity(1) == [(None, 1), (2, 2), (4, 6)]


def test_section_4_1_1_change_oracle_and_maintenance() -> None:
    """dA = {5 erased, 8 inserted}, dB = {2 erased, 3 inserted}: the contributions table,
    ChangeOracle = [2,2] u [6,+inf], and the join after maintenance."""
    join = _unary_join()
    delta = join.update({0: {(5,): -1, (8,): 1}, 1: {(2,): -1, (3,): 1}})
    contributions = {(label, key): hit for label, key, hit in join.last_contributions}
    assert contributions == {
        ("A", 5): None,
        ("A", 8): ((1, 6), (2,)),  # [6, end]
        ("B", 2): ((1, 2), (1, 2)),  # [2, 2]
        ("B", 3): None,
    }
    oracle = sorted((r.lo, r.hi) for r in join.last_regions)
    assert oracle == [((1, 2), (1, 2)), ((1, 6), (2,))]
    assert all(r.level == 0 and r.context == () for r in join.last_regions)
    assert delta == {(2,): -1}  # 2 is no longer in A n B; 6 stays
    # the re-evaluated regions' intervals replace the matched ones: [2,2] is re-run (A lands
    # on 2, B's seek is cut at the region's end) and [6,+inf] (both on 6, A steps to 8,
    # B's seek to 8 runs off the end); intervals crossing a region's bound are cut there
    assert join.sensitivity(0) == [(None, 0), (1, 2), (2, 2), (2, 4), (6, 6), (6, 8)]
    assert join.sensitivity(1) == [(None, 1), (2, 2), (4, 6), (6, 6), (8, None)]
    # the next round uses them: inserting B(8) re-runs only [8, +inf] and finds 8
    assert join.update({1: {(8,): 1}}) == {(8,): 1}
    assert [(r.lo, r.hi) for r in join.last_regions] == [((1, 8), (2,))]


def _brute_triangles(edges: Counter, out: tuple[int, ...]) -> Counter:
    result: Counter = Counter()
    for (a, b, p1), w1 in edges.items():
        for (c, d, p2), w2 in edges.items():
            if b != c:
                continue
            for (e, f, p3), w3 in edges.items():
                if d == e and f == a:
                    env = {0: a, 1: b, 2: d, 3: p1, 4: p2, 5: p3}
                    result[tuple(env[v] for v in out)] += w1 * w2 * w3
    return +result


@pytest.mark.parametrize("seed", range(12))
def test_maintained_triangles_equal_brute_force(seed: int) -> None:
    """Random insert/delete batches (payload columns, bag weights, shared tries or not)."""
    rnd = random.Random(seed)
    out = [(0, 1, 2), (0,), (), (1, 3, 5), (3, 4, 5)][seed % 5]
    shared = ["E", "E", "E"] if seed % 2 else None
    # atoms E(x, y, p1), E(y, z, p2), E(z, x, p3): payload variables 3, 4, 5
    join = LeapfrogJoin([(0, 1, 3), (1, 2, 4), (2, 0, 5)], ["e1", "e2", "e3"], out, shared)
    edges: Counter = Counter()
    view = Counter(join.build({}))
    for _ in range(30):
        delta: Counter = Counter()
        for _ in range(rnd.randint(1, 6)):
            e = (rnd.randrange(5), rnd.randrange(5), rnd.choice("pq"))
            if edges[e] + delta[e] > 0 and rnd.random() < 0.4:
                delta[e] -= 1
            else:
                delta[e] += 1
        delta = Counter({k: v for k, v in delta.items() if v})
        # each atom reads the relation through its own variables
        per_atom = {i: dict(delta) for i in range(3)}
        for row, w in join.update(per_atom).items():
            view[row] += w
        edges.update(delta)
        edges = +edges
        view = Counter({k: v for k, v in view.items() if v})
        assert view == _brute_triangles(edges, out)


def test_variable_order_rule() -> None:
    """The most shared variable first, then the one linked to most chosen variables."""
    # 4-cycle x-y-z-w plus a chord on (x, z): x and z are in three atoms each
    edges = [(0, 1), (1, 2), (2, 3), (3, 0), (0, 2)]
    order = variable_order(edges)
    assert order[:2] == [0, 2]
    assert set(order) == {0, 1, 2, 3}
    # a variable in one atom only is no trie level
    assert variable_order([(0, 1, 9), (1, 2), (2, 0)]) == [0, 1, 2]


TRIANGLE = """SELECT COUNT(*) FROM edges e1, edges e2, edges e3
              WHERE e1.dst = e2.src AND e2.dst = e3.src AND e3.dst = e1.src"""


def _work_per_update(vertices: int, degree: int, updates: int, seed: int) -> tuple[float, int]:
    """Mean iterator operations per single-edge update on a random graph, and the build's."""
    rnd = random.Random(seed)
    db = upkeep.connect()
    db.execute("CREATE TABLE edges (src INTEGER, dst INTEGER)")
    rows = {(rnd.randrange(vertices), rnd.randrange(vertices)) for _ in range(vertices * degree)}
    db.insert("edges", sorted(rows))
    db.create_view("t", TRIANGLE)
    assert "strategy lftj" in db.view("t").explain()

    def ops() -> int:
        c = db.view("t").counters()
        return c["opens"] + c["seeks"] + c["nexts"]

    build = ops()
    present = sorted(rows)
    before = ops()
    for k in range(updates):
        if k % 2:
            edge = present.pop(rnd.randrange(len(present)))
            db.delete("edges", [edge])
        else:
            edge = (rnd.randrange(vertices), rnd.randrange(vertices))
            db.insert("edges", [edge])
            present.append(edge)
    return (ops() - before) / updates, build


def test_triangle_update_work_stays_flat_as_the_graph_grows() -> None:
    """Operation counts (not time) per single-edge update: 10x the edges, about the same work,
    while a full evaluation's work grows with the graph."""
    small, small_build = _work_per_update(400, 4, 300, seed=1)
    large, large_build = _work_per_update(4000, 4, 300, seed=1)
    assert large_build > 5 * small_build  # the build follows the database size
    assert large < 2.5 * small, (small, large)  # the maintenance does not
    assert large < large_build / 100
