"""GT-ITM-style transit-stub network topologies (standard library only, deterministic).

Model (the two-level "transit-stub" construction of GT-ITM, Zegura/Calvert/Bhattacharjee;
implemented here from its description, no GT-ITM code):

* ``T`` transit domains, each with ``transit_nodes`` transit nodes.
* Every transit node owns ``stubs_per_transit`` stub domains of ``stub_nodes`` nodes each,
  so one transit domain accounts for ``transit_nodes * (1 + stubs_per_transit * stub_nodes)``
  nodes (4 * (1 + 3 * 8) = 100 with the defaults).
* Inside every domain the edges are a random graph: each pair of nodes is joined
  independently with probability ``transit_edge_prob`` (transit domains) or
  ``stub_edge_prob`` (stub domains).  The domain is then made connected: its connected
  components are shuffled and component ``i`` (``i >= 1``) is joined by one edge from a
  random node of it to a random node of a random earlier component (``k - 1`` extra edges
  for ``k`` components, i.e. a random tree over the components).
* Each stub domain hangs off its transit node by exactly one edge, to a random stub node.
* With several transit domains, a domain-level random graph (edge probability
  ``domain_edge_prob``, made connected the same way) decides which transit domains are
  adjacent; each domain-level edge becomes one edge between a random transit node of
  each of the two domains.

Latencies: 50 ms transit-transit (inside a transit domain and between transit domains),
10 ms transit-stub, 2 ms stub-stub.

Defaults reproduce the paper setting: 1 transit domain of 4 nodes, 3 stubs per transit
node, 8 nodes per stub = 100 nodes and about 200 undirected links.  ``nodes_target``
scales the number of transit domains (100 nodes each) and must be a multiple of the
per-domain size.

Densities (``density=``), measured mean undirected links (seeds 0..199; 0..9 at 10000):

* ``"dense"`` (stub_edge_prob 0.55, transit_edge_prob 0.5, domain-level degree ~3):
  100 nodes -> 201.2 (range 178..222, 4.02 link tuples per node);
  1000 nodes -> 2020.5 (4.04 per node); 10000 nodes -> 20255.5 (4.05 per node).
* ``"sparse"`` (stub_edge_prob 0.1, transit_edge_prob 0.2, domain-level random tree):
  100 nodes -> 100.0 (range 99..103, 2.00 per node);
  1000 nodes -> 1008.5 (2.02 per node); 10000 nodes -> 10093.3 (2.02 per node).
  A spanning tree has ``n - 1`` edges, so sparse topologies are barely more than trees.

Run ``python -m bench.recursive.gtitm`` for counts and generation times.
"""

from __future__ import annotations

import argparse
import random
import time
from dataclasses import dataclass, field

TRANSIT_TRANSIT_MS = 50
TRANSIT_STUB_MS = 10
STUB_STUB_MS = 2

# Per-density defaults: (stub_edge_prob, transit_edge_prob, average domain-level degree).
# A domain degree of 0 means the domain-level graph is just a random spanning tree.
DENSITIES: dict[str, tuple[float, float, float]] = {
    "dense": (0.55, 0.5, 3.0),
    "sparse": (0.1, 0.2, 0.0),
}


@dataclass
class Topology:
    """A generated network: node ids, directed link tuples (both directions), node kinds."""

    nodes: list[int]
    links: list[tuple[int, int, int]]  # (src, dst, latency_ms); every edge listed both ways
    kind: dict[int, str] = field(default_factory=dict)  # node -> "transit" | "stub"

    @property
    def undirected_links(self) -> int:
        """Number of undirected edges (half the link tuples)."""
        return len(self.links) // 2


def _random_connected(
    members: list[int], prob: float, rng: random.Random, edges: set[tuple[int, int]]
) -> None:
    """Add a random graph over ``members`` (pair probability ``prob``), then connect it."""
    n = len(members)
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(n):
        for j in range(i + 1, n):
            if rng.random() < prob:
                edges.add(_key(members[i], members[j]))
                parent[find(i)] = find(j)
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(find(i), []).append(members[i])
    comps = list(groups.values())
    rng.shuffle(comps)
    for i in range(1, len(comps)):
        other = comps[rng.randrange(i)]
        edges.add(_key(rng.choice(comps[i]), rng.choice(other)))


def _key(a: int, b: int) -> tuple[int, int]:
    return (a, b) if a < b else (b, a)


def transit_stub(
    nodes_target: int | None = None,
    *,
    transit_domains: int = 1,
    transit_nodes: int = 4,
    stubs_per_transit: int = 3,
    stub_nodes: int = 8,
    stub_edge_prob: float | None = None,
    transit_edge_prob: float | None = None,
    domain_edge_prob: float | None = None,
    density: str = "dense",
    seed: int = 0,
) -> Topology:
    """Generate a transit-stub topology (see the module docstring for the model).

    ``nodes_target`` overrides ``transit_domains`` with ``nodes_target / per_domain``
    (must divide exactly).  Probabilities left as ``None`` come from ``density``
    ("dense" or "sparse"); ``domain_edge_prob`` defaults to an average domain-level
    degree of 3 (dense) or a random tree over the domains (sparse).
    """
    if density not in DENSITIES:
        raise ValueError(f"density must be one of {sorted(DENSITIES)}, got {density!r}")
    if transit_nodes < 1 or stubs_per_transit < 0 or stub_nodes < 1:
        raise ValueError("transit_nodes and stub_nodes must be >= 1, stubs_per_transit >= 0")
    d_stub, d_transit, d_degree = DENSITIES[density]
    stub_p = d_stub if stub_edge_prob is None else stub_edge_prob
    transit_p = d_transit if transit_edge_prob is None else transit_edge_prob

    per_domain = transit_nodes * (1 + stubs_per_transit * stub_nodes)
    if nodes_target is not None:
        if nodes_target < per_domain or nodes_target % per_domain:
            raise ValueError(
                f"nodes_target={nodes_target} is not a positive multiple of the "
                f"{per_domain} nodes per transit domain"
            )
        transit_domains = nodes_target // per_domain
    if transit_domains < 1:
        raise ValueError("transit_domains must be >= 1")
    if domain_edge_prob is None:
        domain_p = min(1.0, d_degree / (transit_domains - 1)) if transit_domains > 1 else 0.0
    else:
        domain_p = domain_edge_prob

    rng = random.Random(seed)
    kind: dict[int, str] = {}
    edges: set[tuple[int, int]] = set()
    domains: list[list[int]] = []

    def domain(size: int, p: float, label: str) -> list[int]:
        """The next ``size`` node ids as one connected random domain."""
        nodes = list(range(len(kind), len(kind) + size))
        for n in nodes:
            kind[n] = label
        _random_connected(nodes, p, rng, edges)
        return nodes

    for _ in range(transit_domains):
        transit = domain(transit_nodes, transit_p, "transit")
        domains.append(transit)
        for t in transit:
            for _ in range(stubs_per_transit):
                edges.add(_key(t, rng.choice(domain(stub_nodes, stub_p, "stub"))))

    # Domain-level graph: each domain-level edge -> one transit-transit edge.
    domain_edges: set[tuple[int, int]] = set()
    _random_connected(list(range(transit_domains)), domain_p, rng, domain_edges)
    for a, b in sorted(domain_edges):
        edges.add(_key(rng.choice(domains[a]), rng.choice(domains[b])))

    links: list[tuple[int, int, int]] = []
    for a, b in sorted(edges):
        lat = _latency(kind[a], kind[b])
        links.append((a, b, lat))
        links.append((b, a, lat))
    return Topology(nodes=list(range(len(kind))), links=links, kind=kind)


def _latency(ka: str, kb: str) -> int:
    if ka == kb == "transit":
        return TRANSIT_TRANSIT_MS
    if ka == kb == "stub":
        return STUB_STUB_MS
    return TRANSIT_STUB_MS


def main() -> None:
    """Print node/link counts and generation time for 100, 1000, 10000 nodes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    args = parser.parse_args()
    print(
        f"{'density':8s} {'nodes':>7s} {'links':>8s} {'undirected':>10s} {'per node':>8s} {'ms':>8s}"
    )
    for density in DENSITIES:
        for n in args.sizes:
            start = time.perf_counter()
            topo = transit_stub(n, density=density, seed=args.seed)
            ms = (time.perf_counter() - start) * 1000
            print(
                f"{density:8s} {len(topo.nodes):7d} {len(topo.links):8d} "
                f"{topo.undirected_links:10d} {len(topo.links) / len(topo.nodes):8.2f} {ms:8.1f}"
            )


if __name__ == "__main__":
    main()
