"""DRed: delete and re-derive, the classic recursive view maintenance (the baseline).

``recursive-views-absorption-provenance.txt`` section III-B and Figure 5, after Gupta,
Mumick and Subrahmanian: no provenance is kept.  Insertions run semi-naive evaluation.
A deletion first *over-deletes* everything with some derivation through a deleted tuple
(evaluated on the old state), then *re-derives* the over-deleted tuples that still have a
derivation from what remains, and lets those re-derivations propagate semi-naively.
"""

from __future__ import annotations

from collections import deque

from .absorption import DEFAULT_MAX_STEPS, converge_guard
from .joins import BodyPlan, Relation, evaluate, head_seeded, plan_body, seeded
from .program import Program


def _keep(acc, ann):
    return acc


class DRedFixpoint:
    """Maintain ``program.target`` with set semantics and no annotations."""

    def __init__(self, program: Program, max_steps: int = DEFAULT_MAX_STEPS):
        self.program = program
        self.max_steps = max_steps
        self.relations: dict[str, Relation] = {}
        for name, arity in program.base.items():
            self.relations[name] = Relation(name, arity)
        for name, cols in program.ctes.items():
            self.relations[name] = Relation(name, len(cols))
        self.plans: dict[str, list[BodyPlan]] = {}
        self.head_plans: dict[str, list[BodyPlan]] = {}
        for rule in program.rules:
            for i, atom in enumerate(rule.atoms):
                self.plans.setdefault(atom.relation, []).append(plan_body(rule, i))
            self.head_plans.setdefault(rule.head, []).append(plan_body(rule, -1))
        for plans in (*self.plans.values(), *self.head_plans.values()):
            for plan in plans:
                for st in plan.steps:
                    if st.cols:
                        self.relations[st.relation].index(st.cols)
        self.counts: dict[str, dict[tuple, int]] = {b: {} for b in program.base}
        self.stats = dict.fromkeys(
            ("derivations", "shipped", "overdeleted", "rederived", "steps"), 0)

    def apply(self, deltas: dict[str, dict[tuple, int]]) -> dict[tuple, int]:
        target = self.relations[self.program.target]
        before_target = set()
        inserted: list[tuple[str, tuple]] = []
        deleted: list[tuple[str, tuple]] = []
        for rel, delta in deltas.items():
            counts = self.counts.get(rel)
            if counts is None:
                continue
            for row, w in delta.items():
                before = counts.get(row, 0)
                after = before + w
                if after:
                    counts[row] = after
                else:
                    counts.pop(row, None)
                if before <= 0 < after:
                    inserted.append((rel, row))
                elif after <= 0 < before:
                    deleted.append((rel, row))
        removed: set[tuple] = set()
        if deleted:
            over = self._overdelete(deleted)
            removed = {t for rel, t in over if rel == self.program.target}
            before_target = set(removed)
            self._rederive(over)
        for rel, row in inserted:
            self.relations[rel].add(row, True)
        added = self._propagate(deque(inserted))
        changes: dict[tuple, int] = {}
        for t in before_target:
            if t not in target.rows:
                changes[t] = -1
        for t in added:
            if t not in before_target:
                changes[t] = 1
        return changes

    def _overdelete(self, rows: list[tuple[str, tuple]]) -> list[tuple[str, tuple]]:
        """Everything with a derivation through a deleted tuple, on the old state."""
        marked: set[tuple[str, tuple]] = set(rows)
        queue = deque(rows)
        found: list[tuple[str, tuple]] = []
        steps = 0
        while queue:
            rel, t = queue.popleft()
            steps += 1
            out: list[tuple[str, tuple]] = []
            for plan in self.plans.get(rel, ()):
                head = plan.rule.head

                def emit(h, _, head=head, out=out):
                    out.append((head, h))

                evaluate(plan, self.relations, seeded(plan, t), True, _keep, emit)
            self.stats["derivations"] += len(out)
            for item in out:
                if item not in marked and item[1] in self.relations[item[0]].rows:
                    marked.add(item)
                    found.append(item)
                    queue.append(item)
                    self.stats["shipped"] += 1
            if steps & 0xFFFF == 0:
                converge_guard(steps, self.max_steps)
        self.stats["overdeleted"] += len(found)
        self.stats["steps"] += steps
        for rel, t in [*rows, *found]:
            self.relations[rel].remove(t)
        return found

    def _rederive(self, over: list[tuple[str, tuple]]) -> None:
        """Put back over-deleted tuples with a derivation from what remains, then let them
        propagate."""
        back: list[tuple[str, tuple]] = []
        for rel, t in over:
            if self._derivable(rel, t):
                back.append((rel, t))
        for rel, t in back:
            if t not in self.relations[rel].rows:
                self.relations[rel].add(t, True)
                self.stats["rederived"] += 1
                self.stats["shipped"] += 1
        self._propagate(deque(back))

    def _derivable(self, rel: str, t: tuple) -> bool:
        found = False

        def emit(h, _):
            nonlocal found
            if h == t:
                found = True

        for plan in self.head_plans.get(rel, ()):
            evaluate(plan, self.relations, head_seeded(plan, t), True, _keep, emit)
            self.stats["derivations"] += 1
            if found:
                return True
        return False

    def _propagate(self, queue: deque) -> set[tuple]:
        """Semi-naive evaluation from tuples just added; returns the target's new tuples."""
        added: set[tuple] = set()
        target = self.program.target
        steps = 0
        while queue:
            rel, t = queue.popleft()
            steps += 1
            out: list[tuple[str, tuple]] = []
            for plan in self.plans.get(rel, ()):
                head = plan.rule.head

                def emit(h, _, head=head, out=out):
                    out.append((head, h))

                evaluate(plan, self.relations, seeded(plan, t), True, _keep, emit)
            self.stats["derivations"] += len(out)
            for hrel, h in out:
                relation = self.relations[hrel]
                if h not in relation.rows:
                    relation.add(h, True)
                    self.stats["shipped"] += 1
                    queue.append((hrel, h))
                    if hrel == target:
                        added.add(h)
            if steps & 0xFFFF == 0:
                converge_guard(steps, self.max_steps)
        self.stats["steps"] += steps
        return added

    def rows(self):
        return self.relations[self.program.target].rows

    def counters(self) -> dict[str, int]:
        out = dict(self.stats)
        out["derived_tuples"] = sum(len(self.relations[c]) for c in self.program.ctes)
        return out

    def state_size(self) -> int:
        return sum(len(r) for r in self.relations.values())
