"""Depth-first order of the edge relation's rows, for BDD variable ordering.

``recursive-views-absorption-provenance.txt`` section VI-B/C: path provenance BDDs stay
small when variables follow a depth-first traversal of the network, because paths that
share a prefix then share the top of the diagram (Figures 7 and 8).  Algorithm 2 keeps the
order incrementally at O(|edges|) per inserted edge; here the order is recomputed once per
batch that changes the edge relation, which is the same O(|edges|) bound per change and
less per batch, and also covers deletions (the orphaned subtrees the paper sketches simply
fall where the new traversal puts them).
"""

from __future__ import annotations

from collections.abc import Iterable

from .program import Program


def edge_relation(program: Program) -> str | None:
    """The base relation that plays the network's links: the first one with two or more
    columns read by a recursive rule (its first two columns are ``src`` and ``dst``)."""
    for rule in program.rules:
        if not any(a.relation in program.recursive for a in rule.atoms):
            continue
        for a in rule.atoms:
            if a.relation in program.base and a.arity >= 2:
                return a.relation
    return None


def dfs_edge_order(edges: Iterable[tuple]) -> list[tuple]:
    """Edges in the order a depth-first traversal meets them, roots taken in order of
    first appearance; every edge is listed once, cyclic ones too."""
    out_edges: dict[object, list[tuple]] = {}
    nodes: dict[object, None] = {}
    for e in edges:
        out_edges.setdefault(e[0], []).append(e)
        nodes.setdefault(e[0])
        nodes.setdefault(e[1])
    visited: set = set()
    order: list[tuple] = []
    for root in nodes:
        if root in visited:
            continue
        visited.add(root)
        stack = [iter(out_edges.get(root, ()))]
        while stack:
            e = next(stack[-1], None)
            if e is None:
                stack.pop()
                continue
            order.append(e)
            if e[1] not in visited:
                visited.add(e[1])
                stack.append(iter(out_edges.get(e[1], ())))
    return order
