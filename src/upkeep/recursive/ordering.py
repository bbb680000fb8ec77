"""Depth-first order of the edge relation's rows, for BDD variable ordering.

``recursive-views-absorption-provenance.txt`` section VI-B/C: path provenance BDDs stay
small when variables follow a depth-first traversal of the network, because paths that
share a segment then share a sub-diagram (Figures 7 and 8).  Algorithm 2 keeps the
order incrementally at O(|edges|) per inserted edge; here the order is recomputed once per
batch that inserts edges, which is the same O(|edges|) bound per change and less per batch,
and also covers earlier deletions (the orphaned subtrees the paper sketches simply fall where
the new traversal puts them).
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
    """Edges, top BDD level first, in the order a depth-first traversal of the network
    reaches them, the links reached last on top.

    The traversal follows outgoing links, starts from the node with the most of them (ties:
    first seen; a node it cannot reach starts a later traversal) and numbers nodes in
    preorder.  A link is reached when both its ends are found, so ``link(a, b)`` and
    ``link(b, a)`` sit together, and a meshed region the traversal enters (a stub domain) is
    finished before it leaves, so the region's links form one block of levels.  A path's
    provenance conjoins its links region by region, and paths that leave a region through
    the same links share the diagram below its block.  On GT-ITM networks this takes dense
    networks from 0.73x to 0.50x the nodes of arrival order, and sparse ones from 0.39x to
    0.37x, against listing links by direction (away from the root, then back) as earlier
    versions did (``bench/recursive/bench.py --kinds ordering``).
    """
    edges = list(edges)
    successors: dict[object, list] = {}
    for e in edges:
        successors.setdefault(e[0], []).append(e[1])
        successors.setdefault(e[1], [])
    found: dict[object, int] = {}  # node -> its place in depth-first preorder
    for root in sorted(successors, key=lambda n: -len(successors[n])):
        stack = [root]
        while stack:
            node = stack.pop()
            if node not in found:
                found[node] = len(found)
                stack.extend(reversed(successors[node]))

    def reached(e: tuple) -> tuple[int, int, int]:
        a, b = found[e[0]], found[e[1]]
        return max(a, b), min(a, b), a

    return sorted(edges, key=reached, reverse=True)
