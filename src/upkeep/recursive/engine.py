"""What both fixpoint engines (absorption provenance and DRed) share: the relations of a
program, its rule bodies planned from every seed, base rows under set semantics, and the
convergence guard."""

from __future__ import annotations

from collections.abc import Callable

from ..errors import RecursionLimit
from ..zset import clamp
from .joins import BodyPlan, Combine, Relation, evaluate, plan_body, seeded
from .program import Program

DEFAULT_MAX_STEPS = 20_000_000


def converge_guard(steps: int, limit: int) -> None:
    if steps > limit:
        raise RecursionLimit(
            f"the recursion did not converge within {limit:,} steps; the query may derive "
            "unboundedly many rows (for example a path length or path string on a cyclic "
            "graph: bound it in the WHERE clause or read it through MIN/MAX)")


class RuleEngine:
    """Relations (base and CTE) with the indexes the plans probe, and the plans of every
    rule body seeded at each atom (``head_seeded``: also seeded at the head, for DRed)."""

    def __init__(self, program: Program, max_steps: int, head_seeded: bool = False):
        self.program = program
        self.max_steps = max_steps
        self.relations: dict[str, Relation] = {}
        for name, arity in program.base.items():
            self.relations[name] = Relation(name, arity)
        for name, cols in program.ctes.items():
            self.relations[name] = Relation(name, len(cols))
        self.plans: dict[str, list[BodyPlan]] = {}
        self.head_plans: dict[str, list[BodyPlan]] = {}
        self._plan_rules(head_seeded)
        self.counts: dict[str, dict[tuple, int]] = {b: {} for b in program.base}

    def _plan_rules(self, head_seeded: bool) -> None:
        """Plan every rule body seeded at each atom (and at the head, for DRed)."""
        for rule in self.program.rules:
            for i, atom in enumerate(rule.atoms):
                self._register(plan_body(rule, i), self.plans.setdefault(atom.relation, []))
            if head_seeded:
                self._register(plan_body(rule, -1), self.head_plans.setdefault(rule.head, []))

    def _register(self, plan: BodyPlan, into: list[BodyPlan]) -> None:
        into.append(plan)
        for st in plan.steps:
            if st.cols:
                self.relations[st.relation].index(st.cols)

    def base_changes(self, deltas: dict[str, dict[tuple, int]]
                     ) -> tuple[list[tuple[str, tuple]], list[tuple[str, tuple]]]:
        """Base rows that appear and disappear (set semantics over the tables' bags)."""
        inserted: list[tuple[str, tuple]] = []
        deleted: list[tuple[str, tuple]] = []
        for rel, delta in deltas.items():
            counts = self.counts.get(rel)
            if counts is None:
                continue
            for row, w in clamp(counts, delta).items():
                (inserted if w > 0 else deleted).append((rel, row))
        return inserted, deleted

    def consequences(self, rel: str, t: tuple, annotation: object, combine: Combine,
                     emit: Callable[[str, tuple, object], None]) -> None:
        """Every rule body that reads ``rel``, seeded with ``t``: ``emit(head relation, head
        tuple, annotation)`` per derivation."""
        for plan in self.plans.get(rel, ()):
            head = plan.rule.head
            evaluate(plan, self.relations, seeded(plan, t), annotation, combine,
                     lambda h, pv, head=head: emit(head, h, pv))

    def rows(self) -> dict[tuple, object]:
        return self.relations[self.program.target].rows

    def state_size(self) -> int:
        return sum(len(r) for r in self.relations.values())
