"""Relations with annotations and hash indexes, and rule bodies evaluated from a seed.

Pipelined semi-naive evaluation (``recursive-views-absorption-provenance.txt`` section IV-B,
after Loo et al.) combines each arriving tuple only with what arrived before it: a rule
body is evaluated *from a seed*, the new tuple bound to one atom and the other atoms
probed through hash indexes (the PipelinedHashJoin of Figure 4).  DRed's re-derivation
step seeds from a head tuple instead.  The annotation carried along is a parameter
(``combine``): a BDD conjunction for absorption provenance, nothing for DRed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .program import Rule


class Relation:
    """A set of tuples, each with an annotation, indexed on column subsets."""

    def __init__(self, name: str, arity: int):
        self.name = name
        self.arity = arity
        self.rows: dict[tuple, object] = {}
        self.indexes: dict[tuple[int, ...], dict[tuple, dict[tuple, None]]] = {}

    def index(self, cols: tuple[int, ...]) -> dict[tuple, dict[tuple, None]]:
        idx = self.indexes.get(cols)
        if idx is None:
            idx = self.indexes[cols] = {}
            for t in self.rows:
                _index_add(idx, cols, t)
        return idx

    def add(self, t: tuple, annotation: object) -> None:
        if t not in self.rows:
            for cols, idx in self.indexes.items():
                _index_add(idx, cols, t)
        self.rows[t] = annotation

    def remove(self, t: tuple) -> None:
        del self.rows[t]
        for cols, idx in self.indexes.items():
            key = tuple(t[c] for c in cols)
            bucket = idx.get(key)
            if bucket is not None:
                bucket.pop(t, None)
                if not bucket:
                    del idx[key]

    def clear(self) -> None:
        self.rows.clear()
        for idx in self.indexes.values():
            idx.clear()

    def __len__(self) -> int:
        return len(self.rows)


def _index_add(idx: dict, cols: tuple[int, ...], t: tuple) -> None:
    key = tuple(t[c] for c in cols)
    if None not in key:  # NULL joins nothing
        idx.setdefault(key, {})[t] = None


@dataclass
class Step:
    """Bind one atom: look its tuples up by ``cols`` = wide[``key_slots``] (all tuples if no
    key), then run the checks that have become decidable."""

    atom: int
    relation: str
    offset: int
    cols: tuple[int, ...]
    key_slots: tuple[int, ...]
    equal_checks: list[tuple[int, int]]
    checks: list[Callable[[list], object]]
    # per key column: whether its value is the head's own (a head-seeded plan, DRed's
    # re-derivation), where a NULL is a value the tuple must hold, not a join that fails
    copied: tuple[bool, ...] = ()


@dataclass
class BodyPlan:
    """A join order for one rule from one seed: an atom index, or the head (``-1``)."""

    rule: Rule
    seed: int
    steps: list[Step]
    seed_checks: list[Callable[[list], object]]
    seed_equal_checks: list[tuple[int, int]]


def plan_body(rule: Rule, seed: int) -> BodyPlan:
    """Greedy join order: next the atom with the most columns already determined."""
    equal: dict[int, set[int]] = {}
    for a, b in rule.equalities:
        equal.setdefault(a, set()).add(b)
        equal.setdefault(b, set()).add(a)
    if seed >= 0:
        bound = set(rule.atoms[seed].slots)
        remaining = [i for i in range(len(rule.atoms)) if i != seed]
    else:
        bound = {s for s in rule.head_slots if s is not None}
        remaining = list(range(len(rule.atoms)))
    pending_eq = list(rule.equalities)
    pending_cond = list(rule.conditions)

    def decidable() -> tuple[list, list]:
        eqs = [e for e in pending_eq if e[0] in bound and e[1] in bound]
        conds = [c for c in pending_cond if c[0] <= bound]
        for e in eqs:
            pending_eq.remove(e)
        for c in conds:
            pending_cond.remove(c)
        return eqs, [fn for _, fn in conds]

    def key_of(i: int) -> list[tuple[int, int, bool]]:
        """(column, slot its value is in, whether that slot is the column's own)."""
        atom = rule.atoms[i]
        pairs = []
        for col, slot in enumerate(atom.slots):
            if slot in bound:  # bound by the head: the head's value itself
                pairs.append((col, slot, True))
                continue
            other = next((o for o in sorted(equal.get(slot, ())) if o in bound), None)
            if other is not None:
                pairs.append((col, other, False))
        return pairs

    seed_eqs, seed_checks = decidable() if seed >= 0 else ([], [])
    steps: list[Step] = []
    while remaining:
        best = max(remaining, key=lambda i: (len(key_of(i)), -i))
        remaining.remove(best)
        pairs = key_of(best)
        atom = rule.atoms[best]
        bound.update(atom.slots)
        eqs, checks = decidable()
        steps.append(Step(best, atom.relation, atom.offset, tuple(c for c, _, _ in pairs),
                          tuple(s for _, s, _ in pairs), eqs, checks,
                          tuple(own for _, _, own in pairs)))
    return BodyPlan(rule, seed, steps, seed_checks, seed_eqs)


Combine = Callable[[object, object], object]  # (accumulated, tuple's annotation) -> new or None


def keep(acc: object, annotation: object) -> object:
    """The :data:`Combine` of set semantics (DRed): no annotation to carry."""
    return acc


def evaluate(plan: BodyPlan, relations: dict[str, Relation], wide: list, annotation: object,
             combine: Combine, emit: Callable[[tuple, object], None]) -> None:
    """Run ``plan`` with ``wide`` holding the seed's slots; ``emit(head tuple, annotation)``
    for each satisfying binding.  ``combine`` returns None to prune a binding.  ``emit``
    must not change ``relations`` (callers queue what it gives them)."""
    for a, b in plan.seed_equal_checks:
        if wide[a] is None or wide[a] != wide[b]:
            return
    for check in plan.seed_checks:
        if not check(wide):
            return
    steps = plan.steps
    n = len(steps)
    head_of = plan.rule.head_of

    def go(k: int, acc: object) -> None:
        if k == n:
            emit(head_of(wide), acc)
            return
        st = steps[k]
        rel = relations[st.relation]
        if st.cols:
            key = tuple(wide[s] for s in st.key_slots)
            if None not in key:
                candidates: Iterable[tuple] = rel.index(st.cols).get(key, ())
            elif all(own for v, own in zip(key, st.copied, strict=True) if v is None):
                candidates = _holding(rel, st.cols, key)  # the head's NULLs, not a join's
            else:
                return  # NULL joins nothing
        else:
            candidates = rel.rows
        off = st.offset
        rows = rel.rows
        for t in candidates:  # emit only queues work, so nothing changes under this loop
            ann = rows.get(t)
            if ann is None:
                continue
            wide[off:off + len(t)] = t
            if any(wide[a] is None or wide[a] != wide[b] for a, b in st.equal_checks):
                continue
            if any(not check(wide) for check in st.checks):
                continue
            nxt = combine(acc, ann)
            if nxt is not None:
                go(k + 1, nxt)

    go(0, annotation)


def _holding(rel: Relation, cols: tuple[int, ...], key: tuple) -> list[tuple]:
    """The tuples holding ``key`` in ``cols``, NULL included (not in the hash indexes,
    whose keys never hold NULL): DRed re-deriving a head tuple with a NULL."""
    return [t for t in rel.rows
            if all(t[c] is None if v is None else t[c] == v
                   for c, v in zip(cols, key, strict=True))]


def seeded(plan: BodyPlan, t: tuple) -> list:
    """A wide row with the seed atom's tuple in place."""
    wide: list = [None] * plan.rule.width
    atom = plan.rule.atoms[plan.seed]
    wide[atom.offset:atom.offset + atom.arity] = t
    return wide


def head_seeded(plan: BodyPlan, head: tuple) -> list:
    """A wide row with the slots a head tuple determines in place."""
    wide: list = [None] * plan.rule.width
    for slot, value in zip(plan.rule.head_slots, head, strict=True):
        if slot is not None:
            wide[slot] = value
    return wide


def derives(plan: BodyPlan, relations: dict[str, Relation], head: tuple) -> bool:
    """Whether ``plan``, seeded at the head (DRed's re-derivation step), gives ``head`` a
    derivation from ``relations``."""
    found = False

    def emit(h: tuple, _) -> None:
        nonlocal found
        found = found or h == head

    evaluate(plan, relations, head_seeded(plan, head), True, keep, emit)
    return found
