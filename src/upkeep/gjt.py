"""Generalized join trees (GJTs) and GJT pairs (T, N) for conjunctive queries.

``dynamic-yannakakis-iedyn.txt`` section 3.2, Definition 3.1: a GJT is a binary tree whose
leaves are atoms and whose interior nodes are hyperedges with a guard child; N is a
sibling-closed connex subset containing the root with ``var(N)`` = the output variables.

Construction is a GYO-style reduction over the atoms' hyperedges, building the tree as it
goes:

* ISOLATE x: a variable in exactly one hyperedge is projected away (a one-child node);
* SUBSET e <= f: the hyperedge e is joined under the guard f (a two-child node labelled f);
  when e holds output variables only and f's extra variables occur nowhere else, f is first
  projected onto e ("project first"), which keeps the tree simple for q-hierarchical queries.

Theta predicates (section 4: GJT edges carry predicates) take part as follows: a variable
still used by a pending predicate is never isolated; a predicate whose variables all lie in
one hyperedge goes on the edge below a new node with the same label (FILTER); and e is a
*conditional* subset of f when e's variables outside f occur in no other hyperedge and every
pending predicate over them reads only e's and f's variables: e is then joined under f with
those predicates on the edge to e (their variables leave the hypergraph with it).

Phase 1 may isolate only non-output variables; the nodes left then carry output variables
only and phase 2 reduces them to one root.  N is the smallest sibling-closed connex set
containing the root that covers the output variables; the query is free-connex for this
tree when N holds no other variable.  A query that is acyclic but not free-connex gets the
free-connex approximation of section 5: the variables that block phase 1 join the output.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import count


@dataclass(eq=False)
class Node:
    """A GJT node: ``vars`` is its label (ordered); ``atom`` is set on leaves."""

    id: int
    vars: tuple[int, ...]
    children: list[Node] = field(default_factory=list)
    atom: int | None = None
    parent: Node | None = None
    preds: tuple[int, ...] = ()  # theta predicates on the edge from the parent to this node

    @property
    def is_leaf(self) -> bool:
        return self.atom is not None

    def walk(self):
        yield self
        for c in self.children:
            yield from c.walk()

    def subtree_vars(self) -> set[int]:
        out = set(self.vars)
        for c in self.children:
            out |= c.subtree_vars()
        return out


@dataclass
class GJTPair:
    root: Node
    n_set: set[int]  # ids of the nodes in N
    out: tuple[int, ...]  # output variables, in order

    @property
    def nodes(self) -> list[Node]:
        return list(self.root.walk())

    def frontier(self) -> list[Node]:
        return [n for n in self.nodes if n.id in self.n_set and not any(
            c.id in self.n_set for c in n.children)]

    def is_simple(self) -> bool:
        return all(set(n.vars) <= set(c.vars) for n in self.nodes for c in n.children)

    def has_predicates(self) -> bool:
        return any(n.preds for n in self.nodes)


class _Builder:
    def __init__(self) -> None:
        self.ids = count()

    def leaf(self, atom: int, vars_: tuple[int, ...]) -> Node:
        return Node(next(self.ids), vars_, atom=atom)

    def interior(self, vars_: set[int] | tuple[int, ...], children: list[Node]) -> Node:
        ordered = tuple(sorted(vars_))
        node = Node(next(self.ids), ordered, children)
        for c in children:
            c.parent = node
        return node


def _reduce(edges: list[tuple[int, ...]], out: set[int], project_first: bool,
            residue: list | None = None, preds: Sequence[frozenset[int]] = ()
            ) -> tuple[Node | None, set[int]]:
    """Run the two-phase reduction; return (root, blocking variables of phase 1).

    ``preds`` holds the variable sets of the theta predicates; ``residue``, when given,
    receives the hyperedges left when the reduction got stuck."""
    b = _Builder()
    current: list[tuple[set[int], Node]] = [(set(e), b.leaf(i, e)) for i, e in enumerate(edges)]
    pending = dict(enumerate(preds))

    def occurrences(x: int) -> int:
        return sum(1 for vs, _ in current if x in vs)

    def in_predicate(x: int) -> bool:
        return any(x in pv for pv in pending.values())

    def step(allow_out: bool) -> bool:
        for i, (vs, node) in enumerate(current):
            inside = tuple(k for k, pv in pending.items() if pv <= vs)
            if inside:  # FILTER
                for k in inside:
                    del pending[k]
                node.preds = inside
                current[i] = (vs, b.interior(vs, [node]))
                return True
        for i, (vs, node) in enumerate(current):
            iso = {x for x in vs if (allow_out or x not in out) and occurrences(x) == 1
                   and not in_predicate(x)}
            if iso:
                rest = vs - iso
                current[i] = (rest, b.interior(rest, [node]))
                return True
        for i, (e, ne) in enumerate(current):
            for j, (f, nf) in enumerate(current):
                if i == j or not e <= f:
                    continue
                extra = f - e
                if (project_first and extra and e <= out
                        and all(occurrences(x) == 1 and not in_predicate(x) for x in extra)):
                    proj = b.interior(e, [nf])
                    joined = b.interior(e, [proj, ne])
                    current[j] = (set(e), joined)
                else:
                    current[j] = (f, b.interior(f, [nf, ne]))
                del current[i]
                return True
        for i, (e, ne) in enumerate(current):  # conditional subset: e under f, with predicates
            for j, (f, nf) in enumerate(current):
                gone = e - f
                if i == j or not gone or (not allow_out and gone & out):
                    continue
                if any(occurrences(x) != 1 for x in gone):
                    continue
                used = [k for k, pv in pending.items() if pv & gone]
                if not used or any(not pending[k] <= e | f for k in used):
                    continue
                for k in used:
                    del pending[k]
                ne.preds = tuple(used)
                current[j] = (f, b.interior(f, [nf, ne]))
                del current[i]
                return True
        return False

    while step(allow_out=False):
        pass
    blocking = set().union(*(vs for vs, _ in current)) - out if current else set()
    if pending and not blocking:
        blocking = set().union(*pending.values()) - out
    if blocking:
        if residue is not None:
            residue.extend(vs for vs, _ in current)
        return None, blocking
    while (len(current) > 1 or pending) and step(allow_out=True):
        pass
    if len(current) != 1 or pending:
        if residue is not None:
            residue.extend(vs for vs, _ in current)
        return None, set()
    return current[0][1], set()


def why_not(edges: list[tuple[int, ...]], out: set[int], preds: Sequence[frozenset[int]] = ()
            ) -> list[set[int]]:
    """The hyperedges on which the reduction gets stuck (empty when it succeeds)."""
    residue: list[set[int]] = []
    _reduce(edges, out, project_first=False, residue=residue, preds=preds)
    return residue


def _n_set(root: Node, out: set[int]) -> set[int] | None:
    n_set = {root.id}
    stack = [root]
    while stack:
        n = stack.pop()
        if (n.subtree_vars() & out) <= set(n.vars):
            continue
        for c in n.children:
            n_set.add(c.id)
            stack.append(c)
    nodes = {n.id: n for n in root.walk()}
    covered: set[int] = set()
    for nid in n_set:
        vs = set(nodes[nid].vars)
        if not vs <= out:
            return None
        covered |= vs
    return n_set if covered == out else None


def build_gjt_pair(edges: list[tuple[int, ...]], out: tuple[int, ...],
                   preds: Sequence[frozenset[int]] = ()) -> GJTPair | None:
    """A GJT pair for ``pi_out(edges | preds)``, preferring a simple tree; None if none is found."""
    found = None
    for project_first in (True, False):
        root, _ = _reduce(edges, set(out), project_first, preds=preds)
        if root is None:
            continue
        n_set = _n_set(root, set(out))
        if n_set is None:
            continue
        pair = GJTPair(root, n_set, out)
        _splice_repeats(pair)
        if pair.is_simple():
            return pair
        found = found or pair
    return found


def _splice_repeats(pair: GJTPair) -> None:
    """Take out each interior node with one child whose label is its parent's (the
    reduction makes them: a projection joined under a node with the same variables), the
    child taking its place.  Such a node holds what its parent holds, so every change below
    it paid one more node's update for nothing.  The child guards the parent as the node
    did (a one-child node's variables are its child's or fewer), and N stays sibling-closed
    and connex: a node is taken out only when its child is in N exactly when it is, and
    never when either edge carries theta predicates."""
    for n in list(pair.root.walk()):
        p = n.parent
        if (p is None or len(n.children) != 1 or n.preds or n.children[0].preds
                or set(n.vars) != set(p.vars)
                or (n.id in pair.n_set) != (n.children[0].id in pair.n_set)):
            continue
        c = n.children[0]
        p.children[p.children.index(n)] = c
        c.parent = p
        pair.n_set.discard(n.id)


def is_acyclic(edges: list[tuple[int, ...]], preds: Sequence[frozenset[int]] = ()) -> bool:
    root, _ = _reduce(edges, set(), project_first=False, preds=preds)
    return root is not None


def free_connex_approximation(edges: list[tuple[int, ...]], out: tuple[int, ...],
                              preds: Sequence[frozenset[int]] = ()) -> tuple[int, ...] | None:
    """Extend ``out`` until the query is free-connex (section 5); None if it is cyclic."""
    if not is_acyclic(edges, preds):
        return None
    current = set(out)
    while True:
        if build_gjt_pair(edges, tuple(sorted(current)), preds) is not None:
            return tuple(sorted(current))
        root, blocking = _reduce(edges, current, project_first=False, preds=preds)
        if not blocking:
            blocking = set().union(*map(set, edges)) - current
        if not blocking:
            return None
        current |= blocking


def is_hierarchical(edges: list[tuple[int, ...]], out: set[int]) -> tuple[bool, bool, str]:
    """(hierarchical, q-hierarchical, reason) by the definition of Berkholz et al. (paper [4])."""
    atoms: dict[int, set[int]] = {}
    for i, e in enumerate(edges):
        for x in e:
            atoms.setdefault(x, set()).add(i)
    xs = sorted(atoms)
    for x in xs:
        for y in xs:
            ax, ay = atoms[x], atoms[y]
            if ax & ay and not (ax <= ay or ay <= ax):
                return False, False, f"variables v{x} and v{y} overlap without nesting"
    for x in xs:
        for y in xs:
            if x in out and y not in out and atoms[x] < atoms[y]:
                return True, False, f"output v{x} lies below bound v{y}"
    return True, True, "hierarchical, and no output variable lies below a bound one"
