"""Power-law edge streams for the triangle benchmark (numpy only, deterministic).

Graph model: a directed Chung-Lu graph.  Node ``i`` (of ``n = edges / avg_degree``)
gets weight ``w_i ∝ i^(-1/(gamma-1))`` (expected degrees follow a power law with
exponent ``gamma``, default 2.5); each edge picks its source and its destination
independently with probability proportional to the weights, so hubs have both high
out- and in-degree.  Self-loops and repeated edges are dropped (the edge set is a simple
directed graph), node ids are a random permutation so they carry no degree order.  Edges
are stored directed, one row ``(src, dst)`` each; the triangle query

    SELECT COUNT(*) FROM edges e1, edges e2, edges e3
    WHERE e1.dst = e2.src AND e2.dst = e3.src AND e3.dst = e1.src

counts directed 3-cycles, each once per rotation (3 times per cycle).

Protocol (``build``): ``edges + inserts`` distinct edges are drawn from the same model in
one sequence; the first ``edges`` are bulk-loaded, the next ``inserts`` arrive one at a
time, then ``round(delete_fraction * edges)`` edges chosen uniformly from all present
edges are deleted one at a time.  Average degree is held fixed, so 10x the edges means
10x the nodes and a heavier tail (max degree grows like ``n^(1/(gamma-1))``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TRIANGLE_SQL = (
    "SELECT COUNT(*) FROM edges e1, edges e2, edges e3 "
    "WHERE e1.dst = e2.src AND e2.dst = e3.src AND e3.dst = e1.src"
)
CREATE_SQL = "CREATE TABLE edges (src BIGINT NOT NULL, dst BIGINT NOT NULL)"


@dataclass
class GraphStream:
    """Edges in arrival order plus the update schedule."""

    nodes: int
    src: np.ndarray  # int64, all loaded + inserted edges, arrival order
    dst: np.ndarray
    initial: int  # the first ``initial`` edges are the bulk load
    deletes: np.ndarray  # indices into src/dst, in delete order

    @property
    def inserts(self) -> range:
        return range(self.initial, len(self.src))

    def edge(self, i: int) -> tuple[int, int]:
        return int(self.src[i]), int(self.dst[i])

    def updates(self) -> list[tuple[str, tuple[int, int]]]:
        """The single-edge updates after the bulk load: ``("insert"|"delete", edge)``."""
        out = [("insert", self.edge(i)) for i in self.inserts]
        out += [("delete", self.edge(int(i))) for i in self.deletes]
        return out

    def final_mask(self) -> np.ndarray:
        """Which of ``src``/``dst`` are present after all updates."""
        keep = np.ones(len(self.src), dtype=bool)
        keep[self.deletes] = False
        return keep

    def degrees(self) -> dict[str, int]:
        """Max out- and in-degree and the number of 2-paths of the loaded graph."""
        s, d = self.src[: self.initial], self.dst[: self.initial]
        out_deg = np.bincount(s, minlength=self.nodes)
        in_deg = np.bincount(d, minlength=self.nodes)
        return {
            "max_out_degree": int(out_deg.max()),
            "max_in_degree": int(in_deg.max()),
            "two_paths": int((out_deg * in_deg).sum()),
        }


def chung_lu(count: int, nodes: int, gamma: float, rng: np.random.Generator):
    """``count`` distinct directed edges (no self-loops), in draw order."""
    weights = np.arange(1, nodes + 1, dtype=np.float64) ** (-1.0 / (gamma - 1.0))
    p = weights / weights.sum()
    ids = rng.permutation(nodes).astype(np.int64)
    got = np.empty(0, dtype=np.int64)
    while len(got) < count:
        m = int((count - len(got)) * 1.3) + 64
        s = ids[rng.choice(nodes, m, p=p)]
        d = ids[rng.choice(nodes, m, p=p)]
        keys = (s * nodes + d)[s != d]
        got = np.concatenate([got, keys])
        _, first = np.unique(got, return_index=True)
        got = got[np.sort(first)]  # drop repeats, keep the first occurrence's order
    got = got[:count]
    return got // nodes, got % nodes


def build(edges: int, inserts: int = 1000, delete_fraction: float = 0.1, seed: int = 1,
          gamma: float = 2.5, avg_degree: float = 8.0) -> GraphStream:
    """The graph and its update schedule (see the module docstring)."""
    rng = np.random.default_rng([seed, edges])
    nodes = max(16, int(edges / avg_degree))
    src, dst = chung_lu(edges + inserts, nodes, gamma, rng)
    n_del = round(delete_fraction * edges)
    deletes = rng.choice(len(src), size=n_del, replace=False).astype(np.int64)
    return GraphStream(nodes, src, dst, edges, deletes)


def sample_positions(count: int, k: int) -> list[int]:
    """``k`` positions spread evenly over ``range(count)`` (all if ``k >= count``)."""
    if k >= count:
        return list(range(count))
    if k <= 0:
        return []
    return sorted({int((j + 0.5) * count / k) for j in range(k)})


def recompute_samples(stream: GraphStream, samples: int) -> list[int]:
    """Indices into :meth:`GraphStream.updates` at which DuckDB recomputes: half of
    ``samples`` spread over the inserts, the rest over the deletes."""
    n_ins, n_del = len(stream.inserts), len(stream.deletes)
    k_ins = min(n_ins, samples // 2) if n_del else min(n_ins, samples)
    k_del = min(n_del, samples - k_ins)
    return sample_positions(n_ins, k_ins) + [n_ins + j for j in sample_positions(n_del, k_del)]
