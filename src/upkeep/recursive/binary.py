"""Rules of three or more atoms as chains of two-atom rules, for the partitioned fixpoint.

``recursive-views-absorption-provenance.txt`` section III executes a rule as joins between
pairs of partitioned relations (Figure 4: ``link`` re-partitioned by ``dst`` meets
``reachable`` partitioned by ``src``).  A rule ``head :- A, B, C`` becomes
``j1 :- A, B`` and ``head :- j1, C``: the intermediate relation ``j1`` is derived and
partitioned like any CTE, its provenance the conjunction of its inputs', so absorption,
MinShip and deletion by restriction hold for it unchanged.  The next atom is one that
shares an equality with the atoms joined so far (one that shares none is joined by
replicating it to every partition, see ``partitioned.py``).  Each intermediate keeps only
the columns that a later equality, condition or the head reads, so partial joins that
differ only in dropped columns merge (their provenance ORed, as set semantics asks).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..expressions import column_refs
from .program import BodyAtom, Program, Rule


def binary_program(program: Program) -> Program:
    """``program`` with every rule of three or more atoms split into two-atom rules."""
    rules: list[Rule] = []
    ctes = dict(program.ctes)
    recursive = set(program.recursive)
    for index, rule in enumerate(program.rules):
        if len(rule.atoms) < 3:
            rules.append(rule)
            continue
        types = {c.slot: c.type for c in rule.block.scope.columns}
        for split, carried in _chain(rule, f"{rule.head}#join{index}"):
            rules.append(split)
            if carried is not None:
                ctes[split.head] = [(f"c{s}", types[s]) for s in carried]
                if rule.head in program.recursive and any(
                        a.relation in recursive for a in split.atoms):
                    recursive.add(split.head)
    return replace(program, ctes=ctes, rules=rules, recursive=recursive)


def _order(rule: Rule) -> list[BodyAtom]:
    """Atoms in join order: each next one shares an equality with those before, if any does
    (ties by position in the rule)."""
    linked: dict[int, set[int]] = {}
    for x, y in rule.equalities:
        linked.setdefault(x, set()).add(y)
        linked.setdefault(y, set()).add(x)
    order = [rule.atoms[0]]
    joined = set(rule.atoms[0].slots)
    rest = list(rule.atoms[1:])
    while rest:
        nxt = next((a for a in rest if any(linked.get(s, set()) & joined for s in a.slots)),
                   rest[0])
        rest.remove(nxt)
        order.append(nxt)
        joined |= set(nxt.slots)
    return order


def _chain(rule: Rule, prefix: str) -> list[tuple[Rule, list[int] | None]]:
    """The two-atom rules replacing ``rule``, each with the original wide-row slots its
    head carries (None for the last, whose head is the rule's)."""
    scope = rule.block.scope
    head_reads = {scope.resolve(c).slot for node in rule.head_nodes for c in column_refs(node)}
    head_reads |= {s for s in rule.head_slots if s is not None}
    order = _order(rule)
    equalities = list(rule.equalities)
    conditions = list(rule.conditions)
    carried = list(order[0].slots)  # original slots held by the relation joined so far
    relation, alias = order[0].relation, order[0].alias
    out: list[tuple[Rule, list[int] | None]] = []
    for k, atom in enumerate(order[1:], 1):
        last = k == len(order) - 1
        new = {s: i for i, s in enumerate(carried)}
        new.update({s: len(carried) + j for j, s in enumerate(atom.slots)})
        width = len(carried) + atom.arity
        eqs = [(x, y) for x, y in equalities if x in new and y in new]
        conds = [(slots, fn) for slots, fn in conditions if slots <= new.keys()]
        equalities = [e for e in equalities if e not in eqs]
        conditions = [c for c in conditions if c not in conds]
        atoms = [BodyAtom(relation, alias, 0, len(carried)),
                 BodyAtom(atom.relation, atom.alias, len(carried), atom.arity)]
        later = head_reads | {s for e in equalities for s in e} | {
            s for slots, _ in conditions for s in slots}
        base = dict(atoms=atoms, width=width, equalities=[(new[x], new[y]) for x, y in eqs],
                    conditions=[(frozenset(new[s] for s in slots), _rewired(fn, slots, new,
                                                                           rule.width))
                                for slots, fn in conds], block=rule.block, text=rule.text)
        if last:
            out.append((Rule(head=rule.head, head_nodes=rule.head_nodes,
                             head_exprs=[_rewired(f, head_reads, new, rule.width)
                                         if slot is None else _column(new[slot])
                                         for f, slot in zip(rule.head_exprs, rule.head_slots,
                                                            strict=True)],
                             head_slots=[None if s is None else new[s]
                                         for s in rule.head_slots], **base), None))
            break
        keep = [s for s in [*carried, *atom.slots] if s in later]
        head = f"{prefix}_{k}"
        out.append((Rule(head=head, head_nodes=[], head_exprs=[_column(new[s]) for s in keep],
                         head_slots=[new[s] for s in keep], **base), keep))
        carried, relation, alias = keep, head, head
    return out


def _column(slot: int) -> Callable[[list], object]:
    return lambda wide: wide[slot]


def _rewired(fn: Callable[[list], object], slots, new: dict[int, int], width: int
             ) -> Callable[[list], object]:
    """``fn`` (compiled over the original wide row) over a split rule's wide row."""
    pairs = [(s, new[s]) for s in slots]

    def call(wide: list) -> object:
        original = [None] * width
        for s, i in pairs:
            original[s] = wide[i]
        return fn(original)

    return call
