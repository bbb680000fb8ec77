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

from collections.abc import Iterable, Iterator
from zlib import crc32

#: operation names, as the paper writes them
VAR, ZERO, PLUS_I, MINUS, PLUS_M, TIMES_M, SUM = "var", "0", "+I", "-", "+M", "·M", "Σ"


def variable_mask(name: str) -> int:
    """The bit of a variable in a node's mask (CRC-32: stable across processes, unlike
    ``hash``, and computed in C for the million variables of a bulk load)."""
    return 1 << (crc32(name.encode()) & 63)


class Node:
    """One UP[X] expression node; build them with the functions below, not directly."""

    __slots__ = ("op", "args", "name", "live", "mask", "_hash")

    def __init__(self, op: str, args: tuple[Node, ...] = (), name: str | None = None,
                 live: bool = False, mask: int = 0):
        self.op = op
        self.args = args
        self.name = name
        self.live = live
        self.mask = mask
        self._hash: int | None = None

    # ------------------------------------------------------------ structure
    def __eq__(self, other: object) -> bool:
        """Syntactic equality, Σ compared as a set of terms (spec U.4: "modulo Σ order")."""
        if self is other:
            return True
        if not isinstance(other, Node) or self.op != other.op or hash(self) != hash(other):
            return False
        if self.op == VAR:
            return self.name == other.name
        if self.op == SUM:
            return set(self.args) == set(other.args)
        return self.args == other.args

    def __hash__(self) -> int:
        if self._hash is None:
            if self.op == VAR:
                self._hash = hash((VAR, self.name))
            elif self.op == SUM:
                self._hash = hash((SUM, frozenset(self.args)))
            else:
                self._hash = hash((self.op, self.args))
        return self._hash

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
        a plain structure for callers that walk it, and for serialisation."""
        if self.op == VAR:
            return (VAR, self.name)
        return (self.op, *(a.as_tuple() for a in self.args))


ZERO_NODE = Node(ZERO)


def var(name: str) -> Node:
    """A basic annotation: a tuple's or a transaction's variable."""
    return Node(VAR, name=name, live=True, mask=variable_mask(name))


def plus_i(a: Node, p: Node) -> Node:
    return Node(PLUS_I, (a, p), live=a.live or p.live, mask=a.mask | p.mask)


def minus(a: Node, p: Node) -> Node:
    return Node(MINUS, (a, p), live=a.live and not p.live, mask=a.mask | p.mask)


def plus_m(a: Node, s: Node) -> Node:
    return Node(PLUS_M, (a, s), live=a.live or s.live, mask=a.mask | s.mask)


def times_m(s: Node, p: Node) -> Node:
    return Node(TIMES_M, (s, p), live=s.live and p.live, mask=s.mask | p.mask)


def total(terms: Iterable[Node]) -> Node:
    """Σ of ``terms``; one term is itself (a Σ of one term costs nothing, spec U.8)."""
    terms = tuple(terms)
    if len(terms) == 1:
        return terms[0]
    mask = 0
    for t in terms:
        mask |= t.mask
    return Node(SUM, terms, live=any(t.live for t in terms), mask=mask)


def from_tuple(value: object) -> Node:
    """The inverse of :meth:`Node.as_tuple`."""
    op, *rest = value
    if op == VAR:
        return var(rest[0])
    if op == ZERO:
        return ZERO_NODE
    args = [from_tuple(a) for a in rest]
    if op == SUM:
        return total(args)
    return {PLUS_I: plus_i, MINUS: minus, PLUS_M: plus_m, TIMES_M: times_m}[op](*args)


# ---------------------------------------------------------------- printing and size

_BINARY = {PLUS_I: "+I", MINUS: "-", PLUS_M: "+M", TIMES_M: "·M"}


def render(node: Node) -> str:
    """The expression in the paper's notation, e.g. ``(p1 + p3) ·M p``."""
    if node.op == VAR:
        return node.name
    if node.op == ZERO:
        return "0"
    if node.op == SUM:
        return " + ".join(_operand(a) for a in node.args)
    left, right = node.args
    return f"{_operand(left)} {_BINARY[node.op]} {_operand(right)}"


def _operand(node: Node) -> str:
    text = render(node)
    return text if node.op in (VAR, ZERO) else f"({text})"


def tree_size(node: Node) -> int:
    """Leaves plus binary operations of the expression written out as a tree (a Σ of n
    terms counts n - 1 operations): the size measure of Proposition 5.1 (spec U.8)."""
    memo: dict[int, int] = {}

    def size(n: Node) -> int:
        got = memo.get(id(n))
        if got is None:
            if not n.args:
                got = 1
            else:
                got = sum(size(a) for a in n.args) + len(n.args) - 1
            memo[id(n)] = got
        return got

    stack = [node]
    while stack:  # children first, without deep recursion on long logs
        n = stack[-1]
        todo = [a for a in n.args if id(a) not in memo]
        if todo:
            stack.extend(todo)
        else:
            size(stack.pop())
    return memo[id(node)]


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
