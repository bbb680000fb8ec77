"""UP[X] expressions: the provenance of tuples under hyperplane update transactions.

``papers/update-provenance-hyperplane-transactions.txt`` section 3.1: an annotation is a
formal expression over basic annotations X (tuple variables such as ``products#1`` and
transaction variables such as ``T3``) and 0, built with five operations (Example 3.3 shows
``-M`` = ``-D``, written ``-``):

* ``a +I p``: tuple annotation ``a`` after an insertion by query annotation ``p``;
* ``a - p``: after a deletion (or as the source of a modification) by ``p``;
* ``a +M s``: a modification's target, its old annotation ``a`` plus what flows in, ``s``;
* ``s ·M p``: what flows into a modification's target: ``s`` the sources, ``p`` the query;
* ``Σ(b1, ..., bn)``: the disjunction of a modification's sources mapped to one target.

Nodes are immutable and shared by reference, so an expression is a DAG: a transaction's
normal form (:mod:`.annotators`) points at the annotations its tuples had when it began
instead of copying them, which keeps the size linear in the log (spec U.9 [OURS]).  Each
node carries ``live`` (its Boolean value with every variable true: whether the tuple is in
the current database) and ``mask`` (a 64-bit summary of the variables under it), so a
what-if that falsifies a few variables skips every annotation that cannot mention them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from zlib import crc32

try:  # Cython reads the class decorators below as it compiles this module
    import cython
except ImportError:  # run as plain Python without Cython installed: they change nothing
    from ..compiled import cython_stand_in as cython

#: operation names, as the paper writes them
VAR, ZERO, PLUS_I, MINUS, PLUS_M, TIMES_M, SUM = "var", "0", "+I", "-", "+M", "·M", "Σ"


def variable_mask(name: str) -> int:
    """The bit of a variable in a node's mask (CRC-32: stable across processes, unlike
    ``hash``, and computed in C for the million variables of a bulk load)."""
    return 1 << (crc32(name.encode()) & 63)


@cython.no_gc
@cython.cclass
class Node:
    """One UP[X] expression node, made by the functions below (:func:`_node`), with its
    structural hash computed as it is made from its arguments' (compiled, a C integer,
    not an int object per node: a bulk load makes a variable per row).

    Compiled, a node is not tracked by CPython's cyclic collector (``no_gc``): nodes are
    immutable and point only at nodes made before them, so they cannot form a cycle, and a
    transaction's normal form makes one to three per tuple it changed, each of which made
    the collector run sooner and walk more (on TPC-C's log its runs cost about as much as
    making the nodes)."""

    __slots__ = ("op", "args", "name", "live", "mask", "_hash")

    # ------------------------------------------------------------ structure
    def __eq__(self, other: object) -> bool:
        """Syntactic equality, Σ compared as a set of terms (spec U.4: "modulo Σ order").
        Each pair of nodes is compared once, so two DAGs compare in their size, not in the
        size of the trees they stand for."""
        if self is other:
            return True
        if not isinstance(other, Node):
            return False
        equal: set[tuple[int, int]] = set()
        todo = [(self, other)]
        while todo:
            a, b = todo.pop()
            if a is b or (id(a), id(b)) in equal:
                continue
            if a.op != b.op or hash(a) != hash(b) or (
                    a.op != SUM and len(a.args) != len(b.args)):
                return False
            if a.op == VAR:
                if a.name != b.name:
                    return False
            elif a.op == SUM:  # as sets: terms paired by their (cached) hashes
                mine: dict[int, list[Node]] = {}
                theirs: dict[int, list[Node]] = {}
                for terms, by_hash in ((a.args, mine), (b.args, theirs)):
                    for t in terms:
                        by_hash.setdefault(hash(t), []).append(t)
                if mine.keys() != theirs.keys():
                    return False
                for h, ts in mine.items():
                    us = theirs[h]
                    if len(ts) == 1 and len(us) == 1:
                        todo.append((ts[0], us[0]))
                    elif set(ts) != set(us):  # a repeated term, or hashes that collide
                        return False
            else:
                todo.extend(zip(a.args, b.args, strict=True))
            equal.add((id(a), id(b)))
        return True

    def __hash__(self) -> int:
        """Structural, computed when the node was made (:func:`_structural_hash`)."""
        return self._hash

    def __reduce__(self):
        """Pickled as its nested tuples (:meth:`as_tuple`, linear in the DAG), made again by
        :func:`from_tuple`: the hash cached in a node is the process's (strings hash
        differently in another), and is computed again where it is loaded."""
        return (from_tuple, (self.as_tuple(),))

    def __copy__(self) -> Node:
        return self  # immutable

    def __deepcopy__(self, memo: dict) -> Node:
        """Itself: a node is immutable (copying it through :meth:`__reduce__` walked a
        shared sub-expression once per path to it, exponential in a long log)."""
        return self

    def __repr__(self) -> str:
        return f"Node({self})"

    def __str__(self) -> str:
        return render(self)

    @property
    def is_zero(self) -> bool:
        return self.op == ZERO

    def variables(self) -> set[str]:
        """Every variable the expression mentions."""
        return {n.name for n in self.nodes() if n.op == VAR}

    def nodes(self) -> Iterator[Node]:
        """Every distinct node of the DAG (each once)."""
        seen: set[int] = set()
        todo = [self]
        while todo:
            node = todo.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            yield node
            todo.extend(node.args)

    def as_tuple(self) -> object:
        """The expression as nested tuples (``("var", name)``, ``("0",)``, ``(op, *args)``):
        a plain structure for callers that walk it, and for serialisation.  A node the DAG
        shares is one tuple object shared the same way, so this takes time and memory
        linear in the DAG, not in the tree it stands for (which can be exponential)."""
        made: dict[int, tuple] = {}
        for n in _post_order(self):
            made[id(n)] = ((VAR, n.name) if n.op == VAR else
                           (n.op, *(made[id(a)] for a in n.args)))
        return made[id(self)]


#: a node's hash is mixed in 64 bits (FNV-1a's prime): C arithmetic when compiled
_HASH_BITS = 0xFFFFFFFFFFFFFFFF
_HASH_PRIME = 0x100000001B3


def _structural_hash(op: str, args: tuple, name: str | None) -> int:
    """A node's hash from its operation and its arguments' (cached in them), without a
    tuple made and hashed per node; Σ's as a set of terms."""
    if op == SUM:
        return hash((SUM, frozenset(args)))
    h = hash(op) & _HASH_BITS
    if op == VAR:
        return ((h ^ (hash(name) & _HASH_BITS)) * _HASH_PRIME) & _HASH_BITS
    for x in args:
        h = ((h ^ (x._hash & _HASH_BITS)) * _HASH_PRIME) & _HASH_BITS
    return h


def _node(op: str, args: tuple, name: str | None, live: bool, mask: int) -> Node:
    """The one way a node is made (compiled, its fields are C slots, expression.pxd),
    its hash computed at once from its arguments' (a transaction's normal form makes one
    or two per tuple it changed, and files many in dicts)."""
    node = Node.__new__(Node)
    node.op = op
    node.args = args
    node.name = name
    node.live = live
    node.mask = mask
    node._hash = _structural_hash(op, args, name)
    return node


ZERO_NODE = _node(ZERO, (), None, False, 0)


def var(name: str) -> Node:
    """A basic annotation: a tuple's or a transaction's variable."""
    return _node(VAR, (), name, True, variable_mask(name))


def plus_i(a: Node, p: Node) -> Node:
    return _node(PLUS_I, (a, p), None, a.live or p.live, a.mask | p.mask)


def minus(a: Node, p: Node) -> Node:
    return _node(MINUS, (a, p), None, a.live and not p.live, a.mask | p.mask)


def plus_m(a: Node, s: Node) -> Node:
    return _node(PLUS_M, (a, s), None, a.live or s.live, a.mask | s.mask)


def times_m(s: Node, p: Node) -> Node:
    return _node(TIMES_M, (s, p), None, s.live and p.live, s.mask | p.mask)


def total(terms: Iterable[Node]) -> Node:
    """Σ of ``terms``; one term is itself (a Σ of one term costs nothing, spec U.8)."""
    terms = tuple(terms)
    if len(terms) == 1:
        return terms[0]
    mask = 0
    live = False
    for t in terms:
        mask |= t.mask
        live = live or t.live
    return _node(SUM, terms, None, live, mask)


def from_tuple(value: object) -> Node:
    """The inverse of :meth:`Node.as_tuple` (a tuple object met twice is one node)."""
    made: dict[int, Node] = {}
    stack = [value]
    while stack:  # children first, without deep recursion on long logs
        t = stack[-1]
        if id(t) in made:
            stack.pop()
            continue
        op, *rest = t
        todo = [] if op in (VAR, ZERO) else [a for a in rest if id(a) not in made]
        if todo:
            stack.extend(todo)
            continue
        stack.pop()
        if op == VAR:
            made[id(t)] = var(rest[0])
        elif op == ZERO:
            made[id(t)] = ZERO_NODE
        elif op == SUM:
            made[id(t)] = total(made[id(a)] for a in rest)
        else:
            made[id(t)] = {PLUS_I: plus_i, MINUS: minus, PLUS_M: plus_m,
                           TIMES_M: times_m}[op](*(made[id(a)] for a in rest))
    return made[id(value)]


def _post_order(root: Node) -> list[Node]:
    """Every distinct node under ``root``, each after its arguments (iteratively: a long
    log's expression is deeper than Python's recursion limit)."""
    order: list[Node] = []
    done: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if id(node) in done:
            continue
        if expanded:
            done.add(id(node))
            order.append(node)
        else:
            stack.append((node, True))
            stack.extend((a, False) for a in reversed(node.args) if id(a) not in done)
    return order


# ---------------------------------------------------------------- printing and size

_BINARY = {PLUS_I: "+I", MINUS: "-", PLUS_M: "+M", TIMES_M: "·M"}


#: an expression whose tree has more symbols than this prints its shared parts once
PRINT_AS_TREE = 400


def render(node: Node) -> str:
    """The expression in the paper's notation, e.g. ``(p1 + p3) ·M p``.

    Written out as a tree while that is short.  A long log's normal form shares
    sub-expressions across transactions (a DAG, spec U.9), and its tree can be exponential
    in the log: then each shared sub-expression is written once, named ``e1``, ``e2``, ...
    and defined after a ``where``, so the text is linear in the DAG."""
    order = _post_order(node)
    if _tree_size(order) <= PRINT_AS_TREE:
        shared: set[int] = set()
    else:
        parents: dict[int, int] = {}
        for n in order:
            for a in n.args:
                parents[id(a)] = parents.get(id(a), 0) + 1
        shared = {id(n) for n in order
                  if n is not node and n.op not in (VAR, ZERO) and parents.get(id(n), 0) > 1}
    text: dict[int, str] = {}
    names: dict[int, str] = {}
    definitions: list[str] = []
    for n in order:
        if n.op == VAR:
            text[id(n)] = n.name
        elif n.op == ZERO:
            text[id(n)] = "0"
        else:
            operands = [names.get(id(a)) or (text[id(a)] if a.op in (VAR, ZERO)
                                             else f"({text[id(a)]})") for a in n.args]
            text[id(n)] = (" + ".join(sorted(operands, key=_natural)) if n.op == SUM else
                           f"{operands[0]} {_BINARY[n.op]} {operands[1]}")
        if id(n) in shared:
            names[id(n)] = f"e{len(names) + 1}"
            definitions.append(f"  {names[id(n)]} = {text.pop(id(n))}")
    if not definitions:
        return text[id(node)]
    return "\n".join([text[id(node)], "where", *definitions])


def _natural(text: str) -> list:
    """A Σ's terms printed in one order whatever the order they were summed in (which can
    follow string hashes, so differ between processes): by text, numbers by value (p2
    before p10)."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part)
            for part in re.split(r"(\d+)", text) if part]


def tree_size(node: Node) -> int:
    """Leaves plus binary operations of the expression written out as a tree (a Σ of n
    terms counts n - 1 operations): the size measure of Proposition 5.1 (spec U.8)."""
    return _tree_size(_post_order(node))


def _tree_size(order: list[Node]) -> int:
    """:func:`tree_size` of the last node of ``order`` (a :func:`_post_order`)."""
    size: dict[int, int] = {}
    for n in order:
        size[id(n)] = sum(size[id(a)] for a in n.args) + len(n.args) - 1 if n.args else 1
    return size[id(order[-1])]


def dag_size(nodes: Iterable[Node]) -> int:
    """Distinct nodes reachable from ``nodes``: what the shared representation stores."""
    seen: set[int] = set()
    todo = list(nodes)
    while todo:
        n = todo.pop()
        if id(n) not in seen:
            seen.add(id(n))
            todo.extend(n.args)
    return len(seen)
