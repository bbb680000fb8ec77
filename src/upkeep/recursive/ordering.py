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
    """Edges, top BDD level first, in a depth-first order that keeps every path's links in
    path order: a link nearer a path's end sits above a link nearer its start.

    The traversal starts from the node with the most outgoing links (ties: first seen) and
    lists each link when it is followed (preorder), cyclic ones too.  ``reach(x, y)`` is
    built as ``link(x, z) AND reach(z, y)``; with ``link(x, z)`` below every variable of
    ``reach(z, y)``, that BDD is one new node over ``reach(z, y)``'s, shared whole.  Links
    that lead away from the root are therefore listed in reverse preorder (deeper ones on
    top), then the links that lead back toward it (to a node found earlier on the way down)
    in preorder.  On a tree every reachable pair then costs one BDD node.
    """
    out_edges: dict[object, list[tuple]] = {}
    nodes: dict[object, None] = {}
    for e in edges:
        out_edges.setdefault(e[0], []).append(e)
        nodes.setdefault(e[0])
        nodes.setdefault(e[1])
    roots = sorted(nodes, key=lambda n: -len(out_edges.get(n, ())))
    depth: dict[object, int] = {}
    order: list[tuple] = []
    for root in roots:
        if root in depth:
            continue
        depth[root] = 0
        stack = [iter(out_edges.get(root, ()))]
        while stack:
            e = next(stack[-1], None)
            if e is None:
                stack.pop()
                continue
            order.append(e)
            if e[1] not in depth:
                depth[e[1]] = depth[e[0]] + 1
                stack.append(iter(out_edges.get(e[1], ())))
    back = [e for e in order if depth[e[1]] < depth[e[0]]]
    away = [e for e in order if depth[e[1]] >= depth[e[0]]]
    return away[::-1] + back
