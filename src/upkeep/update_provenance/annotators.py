"""How a hyperplane query rewrites annotations: one operator, three annotation structures.

:mod:`.relation` applies INSERT / DELETE / MODIFY to a relation once, written against the
interface below; the annotator decides what an annotation is while a transaction runs:

* :class:`NormalForm`: the incremental normal form of Theorem 5.3 (Figure 6 rules 1-8,
  zero post-processing of Proposition 5.5), kept per tuple as one of five states over the
  annotation the tuple had when the transaction began (spec U.9, [OURS] reconstruction);
* :class:`Naive`: the propagation rules of section 3.1 applied literally (section 5.1's
  naive construction, exponential on alternating updates, Proposition 5.1);
* :class:`Concrete`: the same rules computed directly in an :class:`UpdateStructure`
  under a valuation, the other side of Proposition 4.2 (used to test the homomorphism).

``papers/update-provenance-hyperplane-transactions.txt``: section 3.1 (rules), 5 (forms).
"""

from __future__ import annotations

from collections.abc import Callable

from .expression import ZERO, ZERO_NODE, Node, minus, plus_i, plus_m, times_m, total
from .structures import UpdateStructure


class Annotator:
    """What an annotation is during a transaction of query annotation ``p``.  Compiled,
    the annotators are extension types (annotators.pxd) whose methods are C calls."""

    __slots__ = ("absent",)

    def __init__(self) -> None:
        #: the annotation of a tuple that is not in the relation
        self.absent = ZERO_NODE

    def dropped(self, final) -> bool:
        """Whether a finished annotation means the tuple left the support (``op``, not the
        ``is_zero`` property: compiled, a C slot instead of an attribute looked up by
        name, per tuple a transaction changed)."""
        node: Node = final
        return node.op == ZERO

    def start(self, node: Node):
        """The working annotation of a tuple whose annotation was ``node`` when the
        transaction (segment) began."""
        raise NotImplementedError

    def in_support(self, w) -> bool:
        raise NotImplementedError

    def live(self, w) -> bool:
        """Whether the tuple is in the database with every variable true."""
        raise NotImplementedError

    def insert(self, w, p: Node):
        raise NotImplementedError

    def delete(self, w, p: Node):
        raise NotImplementedError

    def modify_target(self, w, sources: list, p: Node):
        """A modification's target: ``w`` its annotation after the source rule (a target
        that is also a source was deleted first, spec U.2 [OURS]), ``sources`` the working
        annotations of the tuples mapped to it, as they were before the query."""
        raise NotImplementedError

    def finish(self, w, p: Node) -> Node:
        """The annotation at the end of the transaction."""
        raise NotImplementedError


class Naive(Annotator):
    """Expressions built literally, sub-expressions copied by reference (a tree when
    written out: its size is what Proposition 5.1 measures)."""

    def start(self, node: Node) -> Node:
        return node

    def in_support(self, w: Node) -> bool:
        return w.op != ZERO

    def live(self, w: Node) -> bool:
        return w.live

    def insert(self, w: Node, p: Node) -> Node:
        return plus_i(w, p)

    def delete(self, w: Node, p: Node) -> Node:
        return minus(w, p)

    def modify_target(self, w: Node, sources: list, p: Node) -> Node:
        return plus_m(w, times_m(total(sources), p))

    def finish(self, w: Node, p: Node) -> Node:
        return w


# the five normal-form states (spec U.9); a state is (kind, base, contributors)
BASE, INS, DEL, MOD, DELMOD = range(5)
_INSERTED = object()  # contribution of a tuple inserted by this transaction (Rule 4)


class NormalForm(Annotator):
    """Theorem 5.3's normal form, incrementally after each query: per tuple one of
    ``a``, ``a +I p``, ``a - p``, ``a +M (ΣB ·M p)``, ``(a - p) +M (ΣB ·M p)`` with ``a``
    and ``B`` annotations from the start of the transaction (shared, never copied)."""

    def start(self, node: Node) -> tuple:
        return (BASE, node, None)

    def in_support(self, w: tuple) -> bool:
        kind, a, _ = w
        return not (a.op == ZERO and kind in (BASE, DEL))

    def live(self, w: tuple) -> bool:
        kind, a, b = w
        if kind == BASE:
            return a.live
        if kind == INS:
            return True
        if kind == DEL:
            return False
        if kind == MOD and a.live:
            return True
        for x in b:  # (a loop, not any(): no closure in a compiled method)
            if x.live:
                return True
        return False

    def insert(self, w: tuple, p: Node) -> tuple:
        return (INS, w[1], None)  # Rule 1

    def delete(self, w: tuple, p: Node) -> tuple:
        return (DEL, w[1], None)  # Rule 2

    def modify_target(self, w: tuple, sources: list, p: Node) -> tuple:
        kind, a, b = w
        flowing: dict[Node, None] = {}  # an ordered set: Σ is printed in arrival order
        for source in sources:
            c = _contribution(source)
            if c is _INSERTED:
                return (INS, a, None)  # Rules 4 then 1
            for x in c:
                if x.op != ZERO:
                    flowing[x] = None
        if not flowing:
            return w  # Rule 3
        if kind == BASE:
            return (MOD, a, tuple(flowing))
        if kind == INS:
            return w  # Rule 5
        if kind == DEL:
            return (DELMOD, a, tuple(flowing))
        merged = dict.fromkeys(b)  # Rule 6
        merged.update(flowing)
        return (kind, a, tuple(merged))

    def finish(self, w: tuple, p: Node) -> Node:
        """Zero post-processing (Proposition 5.5): the unique minimal form."""
        kind, a, b = w
        zero = a.op == ZERO
        if kind == BASE:
            return a
        if kind == INS:
            return p if zero else plus_i(a, p)
        if kind == DEL:
            return ZERO_NODE if zero else minus(a, p)
        flow = times_m(total(b), p)
        if zero:
            return flow
        return plus_m(a if kind == MOD else minus(a, p), flow)


def _contribution(w: tuple):
    """What a modification's source in normal-form state ``w`` makes flow to its target."""
    kind, a, b = w
    if kind == BASE:
        return (a,)
    if kind == INS:
        return _INSERTED  # Rule 4
    if kind == DEL:
        return ()  # Rules 3 and 8
    return (a, *b) if kind == MOD else b  # Rule 7 (then Rule 8 for DELMOD)


class Concrete(Annotator):
    """The rules evaluated in ``structure`` as they run: variables mapped by ``valuation``.
    Proposition 4.2 says the result equals evaluating the symbolic annotation."""

    __slots__ = ("structure", "valuation")

    def __init__(self, structure: UpdateStructure, valuation: Callable[[str], object]):
        self.structure = structure
        self.valuation = valuation
        self.absent = structure.zero

    def dropped(self, final) -> bool:
        return final == self.structure.zero

    def start(self, value):
        return value

    def in_support(self, w) -> bool:
        return w != self.structure.zero

    def live(self, w) -> bool:
        return self.structure.accepts(w)

    def insert(self, w, p: Node):
        return self.structure.plus_i(w, self.valuation(p.name))

    def delete(self, w, p: Node):
        return self.structure.minus(w, self.valuation(p.name))

    def modify_target(self, w, sources: list, p: Node):
        s = self.structure
        return s.plus_m(w, s.times_m(s.total(sources), self.valuation(p.name)))

    def finish(self, w, p: Node):
        return w


ANNOTATORS: dict[str, Callable[[], Annotator]] = {"update": NormalForm, "update-naive": Naive}
