"""Tests for the GT-ITM-style transit-stub topology generator (bench/recursive/gtitm.py)."""

from __future__ import annotations

from collections import deque

import pytest

from bench.recursive.gtitm import Topology, transit_stub

CASES = [(100, "dense"), (1000, "dense"), (100, "sparse"), (1000, "sparse")]


def _connected(topo: Topology) -> bool:
    adj: dict[int, list[int]] = {n: [] for n in topo.nodes}
    for a, b, _ in topo.links:
        adj[a].append(b)
    seen = {topo.nodes[0]}
    queue = deque(seen)
    while queue:
        for nxt in adj[queue.popleft()]:
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return len(seen) == len(topo.nodes)


@pytest.mark.parametrize(("n", "density"), CASES)
def test_node_counts_and_kinds(n: int, density: str) -> None:
    topo = transit_stub(n, density=density, seed=1)
    assert topo.nodes == list(range(n))
    assert set(topo.kind) == set(topo.nodes)
    transit = sum(1 for k in topo.kind.values() if k == "transit")
    assert transit == 4 * (n // 100)
    assert n - transit == sum(1 for k in topo.kind.values() if k == "stub")


def test_default_is_paper_setting() -> None:
    topo = transit_stub()
    assert len(topo.nodes) == 100
    assert sorted(topo.kind.values()).count("transit") == 4


@pytest.mark.parametrize(("n", "density"), CASES)
@pytest.mark.parametrize("seed", [0, 7])
def test_connected(n: int, density: str, seed: int) -> None:
    assert _connected(transit_stub(n, density=density, seed=seed))


@pytest.mark.parametrize(("n", "density"), CASES)
def test_links_symmetric_simple_and_latencies(n: int, density: str) -> None:
    topo = transit_stub(n, density=density, seed=3)
    lat = {(a, b): ms for a, b, ms in topo.links}
    assert len(lat) == len(topo.links), "duplicate link tuples"
    expected = {
        ("transit", "transit"): 50,
        ("transit", "stub"): 10,
        ("stub", "transit"): 10,
        ("stub", "stub"): 2,
    }
    for a, b, ms in topo.links:
        assert a != b, "self loop"
        assert lat.get((b, a)) == ms, f"missing or mismatched reverse of {(a, b)}"
        assert ms == expected[(topo.kind[a], topo.kind[b])]


def test_one_attachment_edge_per_stub_domain() -> None:
    topo = transit_stub(1000, seed=5)
    stub_neighbours: dict[int, int] = {}
    for a, b, _ in topo.links:
        if topo.kind[a] == "transit" and topo.kind[b] == "stub":
            stub_neighbours[a] = stub_neighbours.get(a, 0) + 1
    # 40 transit nodes, each attached to its 3 stub domains by one edge each.
    assert stub_neighbours == {t: 3 for t, k in topo.kind.items() if k == "transit"}


def test_dense_average_about_200_undirected_links() -> None:
    counts = [transit_stub(density="dense", seed=s).undirected_links for s in range(30)]
    mean = sum(counts) / len(counts)
    assert 170 <= mean <= 230, mean
    assert all(len(transit_stub(seed=s).links) % 2 == 0 for s in range(3))


def test_sparse_has_fewer_links_and_is_near_tree() -> None:
    for s in range(10):
        dense = transit_stub(1000, density="dense", seed=s)
        sparse = transit_stub(1000, density="sparse", seed=s)
        assert len(sparse.links) < len(dense.links)
        assert 999 <= sparse.undirected_links <= 1.2 * 1000


def test_deterministic_for_seed() -> None:
    assert transit_stub(1000, seed=42) == transit_stub(1000, seed=42)
    assert transit_stub(1000, density="sparse", seed=42) == transit_stub(
        1000, density="sparse", seed=42
    )
    assert transit_stub(1000, seed=42).links != transit_stub(1000, seed=43).links


def test_explicit_probabilities_override_density() -> None:
    full = transit_stub(stub_edge_prob=1.0, transit_edge_prob=1.0, seed=0)
    # 12 complete K8 stubs (28 edges each) + K4 transit (6) + 12 attachment edges.
    assert full.undirected_links == 12 * 28 + 6 + 12


def test_bad_nodes_target_rejected() -> None:
    with pytest.raises(ValueError):
        transit_stub(150)
    with pytest.raises(ValueError):
        transit_stub(100, density="medium")
