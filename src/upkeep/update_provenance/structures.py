"""Update-structures: what a UP[X] annotation means once its variables are given values.

``papers/update-provenance-hyperplane-transactions.txt`` section 4: an Update-Structure is a
carrier with the five operations of UP[X] and 0 (Definition 4.1); evaluating an expression
under a valuation is the homomorphism of Proposition 4.2, so provenance computed once
symbolically answers every specialisation.  Shipped (Example 4.6, spec U.6):

* :class:`Boolean`: deletion propagation and transaction abort (``a - b = a ∧ ¬b``);
* :class:`AccessControl`: sets of principals (union, intersection, set difference);
* :class:`Trust`: (score, T/F/U) pairs certified against a threshold.

:func:`check_update_structure` checks a user's structure built from a commutative semiring
with a minus against the conditions of Theorem 4.5, naming the first law that fails.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..errors import Error
from .expression import MINUS, PLUS_I, PLUS_M, SUM, TIMES_M, VAR, ZERO, Node


class UpdateStructureError(Error):
    """A structure that is not a valid UP[X] specialisation; ``law`` names the failed law
    and ``witness`` the elements that break it."""

    fields = ("law", "witness")

    def __init__(self, message: str, law: str, witness: tuple):
        super().__init__(message)
        self.law = law
        self.witness = witness


class UpdateStructure:
    """A semantics for UP[X] (Definition 4.1).  Theorem 4.5's structures use one
    semiring addition for ``+I``, ``+M`` and Σ, and its multiplication for ``·M``;
    subclasses override ``plus``, ``times``, ``minus``, ``zero`` and ``one``."""

    zero: object = None
    one: object = None

    def plus(self, a, b):
        raise NotImplementedError

    def times(self, a, b):
        raise NotImplementedError

    def minus(self, a, b):
        raise NotImplementedError

    def plus_i(self, a, b):
        return self.plus(a, b)

    def plus_m(self, a, b):
        return self.plus(a, b)

    def times_m(self, a, b):
        return self.times(a, b)

    def total(self, terms: Iterable):
        out = self.zero
        for t in terms:
            out = self.plus(out, t)
        return out

    def accepts(self, value) -> bool:
        """Whether a tuple with this annotation belongs to the specialised database."""
        return value != self.zero


class Boolean(UpdateStructure):
    """PosBool evaluated: deletion propagation and abort set variables to False."""

    zero, one = False, True

    def plus(self, a, b):
        return a or b

    def times(self, a, b):
        return a and b

    def minus(self, a, b):
        return a and not b


@dataclass
class AccessControl(UpdateStructure):
    """``(P(C), ∪, ∩, ∅, C)`` with set difference: a tuple is visible to the principals in
    its annotation (``accepts``: to ``principal``, or to anyone if None)."""

    universe: frozenset
    principal: str | None = None

    def __post_init__(self) -> None:
        self.universe = frozenset(self.universe)
        self.zero, self.one = frozenset(), self.universe

    def plus(self, a, b):
        return a | b

    def times(self, a, b):
        return a & b

    def minus(self, a, b):
        return a - b

    def accepts(self, value) -> bool:
        return self.principal in value if self.principal is not None else bool(value)


#: a trust value: (score in [0, 1], "T" | "F" | "U"); inputs are (score, "U")
TRUSTED, UNTRUSTED = (1.0, "T"), (0.0, "F")


@dataclass
class Trust(UpdateStructure):
    """Certification with a threshold (Example 4.6): ``x`` is trusted iff it is certified
    ("T") or unknown ("U") with a score strictly above ``threshold``."""

    threshold: float

    def __post_init__(self) -> None:
        self.zero, self.one = UNTRUSTED, TRUSTED

    def trusted(self, x) -> bool:
        score, mark = x
        return mark == "T" or (mark == "U" and score > self.threshold)

    def plus(self, a, b):
        return TRUSTED if self.trusted(a) or self.trusted(b) else UNTRUSTED

    def times(self, a, b):
        return TRUSTED if self.trusted(a) and self.trusted(b) else UNTRUSTED

    def minus(self, a, b):
        return TRUSTED if self.trusted(a) and not self.trusted(b) else UNTRUSTED

    def accepts(self, value) -> bool:
        return self.trusted(value)


def evaluate(node: Node, structure: UpdateStructure, valuation: Callable[[str], object],
             memo: dict[int, object] | None = None) -> object:
    """The homomorphic image of ``node`` (Proposition 4.2): variables mapped by
    ``valuation``, each operation by the structure's.  ``memo`` (node id -> value) may be
    shared across the annotations of one evaluation: shared sub-expressions count once."""
    memo = {} if memo is None else memo
    stack = [node]
    while stack:
        n = stack[-1]
        if id(n) in memo:
            stack.pop()
            continue
        pending = [a for a in n.args if id(a) not in memo]
        if pending:
            stack.extend(pending)
            continue
        stack.pop()
        op = n.op
        if op == VAR:
            value = valuation(n.name)
        elif op == ZERO:
            value = structure.zero
        elif op == SUM:
            value = structure.total(memo[id(a)] for a in n.args)
        else:
            a, b = (memo[id(x)] for x in n.args)
            value = {PLUS_I: structure.plus_i, MINUS: structure.minus,
                     PLUS_M: structure.plus_m, TIMES_M: structure.times_m}[op](a, b)
        memo[id(n)] = value
    return memo[id(node)]


def falsified(false_mask: int, false_vars: frozenset[str]) -> Callable[[Node, dict], bool]:
    """A fast Boolean evaluator for valuations that set only ``false_vars`` to False:
    a node whose mask shares no bit with ``false_mask`` keeps its ``live`` value."""
    structure = Boolean()

    def value(node: Node, memo: dict) -> bool:
        if not node.mask & false_mask:
            return node.live
        return evaluate(node, structure, lambda name: name not in false_vars, memo)

    return value


# ---------------------------------------------------------------- Theorem 4.5's checker

def check_update_structure(elements: Sequence, structure: UpdateStructure,
                           equal: Callable[[object, object], bool] | None = None) -> None:
    """Raise :class:`UpdateStructureError` unless ``structure`` over ``elements`` meets
    Theorem 4.5: a commutative semiring (0, 1, + and · associative and commutative, ·
    distributing over +, 0 annihilating) with ``a + 1 = 1`` and ``a · a = a``, and a minus
    satisfying axioms 2, 4, 5, 7, 10 and 12 of Figure 3 (sums of one or two terms).

    The check is exhaustive over ``elements`` (pass a finite carrier, or a sample of an
    infinite one).  The structure's ``plus_i``, ``plus_m``, ``times_m`` and ``total`` (what
    evaluation uses) must equal ``+`` and ``·`` there; the axioms then read with
    ``+I = +M = Σ = +`` and ``·M = ·``."""
    eq = equal or (lambda x, y: x == y)
    plus, times, minus = structure.plus, structure.times, structure.minus
    zero, one = structure.zero, structure.one
    els = list(elements)

    def law(name: str, holds: Callable[..., bool], arity: int) -> None:
        for witness in itertools.product(els, repeat=arity):
            if not holds(*witness):
                raise UpdateStructureError(
                    f"not an update structure (Theorem 4.5): {name} fails for "
                    f"{', '.join(map(repr, witness))}", name, witness)

    # Theorem 4.5 asks +I = +M = Σ = + and ·M = ·: evaluation uses the structure's own
    # update operations, so an override of one must agree with the semiring's
    law("a +I b = a + b", lambda a, b: eq(structure.plus_i(a, b), plus(a, b)), 2)
    law("a +M b = a + b", lambda a, b: eq(structure.plus_m(a, b), plus(a, b)), 2)
    law("a ·M b = a · b", lambda a, b: eq(structure.times_m(a, b), times(a, b)), 2)
    law("Σ() = 0", lambda: eq(structure.total(()), zero), 0)
    law("Σ(a) = a", lambda a: eq(structure.total((a,)), a), 1)
    law("Σ(a, b) = a + b", lambda a, b: eq(structure.total((a, b)), plus(a, b)), 2)
    law("0 + a = a", lambda a: eq(plus(zero, a), a), 1)
    law("0 · a = 0", lambda a: eq(times(zero, a), zero), 1)
    law("1 · a = a", lambda a: eq(times(one, a), a), 1)
    law("a + b = b + a", lambda a, b: eq(plus(a, b), plus(b, a)), 2)
    law("a · b = b · a", lambda a, b: eq(times(a, b), times(b, a)), 2)
    law("(a + b) + c = a + (b + c)",
        lambda a, b, c: eq(plus(plus(a, b), c), plus(a, plus(b, c))), 3)
    law("(a · b) · c = a · (b · c)",
        lambda a, b, c: eq(times(times(a, b), c), times(a, times(b, c))), 3)
    law("a · (b + c) = a · b + a · c",
        lambda a, b, c: eq(times(a, plus(b, c)), plus(times(a, b), times(a, c))), 3)
    law("a + 1 = 1", lambda a: eq(plus(a, one), one), 1)
    law("a · a = a", lambda a: eq(times(a, a), a), 1)
    # Figure 3 with +I = +M = + and ·M = ·; Σ of one or two terms
    law("axiom 2: (a +M (b ·M c)) - c = a - c",
        lambda a, b, c: eq(minus(plus(a, times(b, c)), c), minus(a, c)), 3)
    law("axiom 4: (a - b) - b = a - b",
        lambda a, b: eq(minus(minus(a, b), b), minus(a, b)), 2)
    law("axiom 5: a +M ((Σ (b_i - c)) ·M c) = a",
        lambda a, b1, b2, c: eq(plus(a, times(plus(minus(b1, c), minus(b2, c)), c)), a), 4)
    law("axiom 7: (a +I b) - b = a - b",
        lambda a, b: eq(minus(plus(a, b), b), minus(a, b)), 2)
    law("axiom 10: (a - b) +I b = a +I b",
        lambda a, b: eq(plus(minus(a, b), b), plus(a, b)), 2)
    law("axiom 12: (a - b) +M (c ·M b) = (a - b) +M (((d - b) +M (c ·M b)) ·M b)",
        lambda a, b, c, d: eq(plus(minus(a, b), times(c, b)),
                              plus(minus(a, b), times(plus(minus(d, b), times(c, b)), b))), 4)


def valuation_of(values: Mapping[str, object], default: object) -> Callable[[str], object]:
    """A valuation reading ``values``, with ``default`` for every other variable."""
    return lambda name: values.get(name, default)
