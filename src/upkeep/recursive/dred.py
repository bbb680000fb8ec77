"""DRed: delete and re-derive, the classic recursive view maintenance (the baseline).

``recursive-views-absorption-provenance.txt`` section III-B and Figure 5, after Gupta,
Mumick and Subrahmanian: no provenance is kept.  Insertions run semi-naive evaluation.
A deletion first *over-deletes* everything with some derivation through a deleted tuple
(evaluated on the old state), then *re-derives* the over-deleted tuples that still have a
derivation from what remains, and lets those re-derivations propagate semi-naively.
"""

from __future__ import annotations

from collections import deque

from .engine import DEFAULT_MAX_STEPS, RuleEngine, converge_guard
from .joins import derives, keep
from .program import Program


class DRedFixpoint(RuleEngine):
    """Maintain ``program.target`` with set semantics and no annotations."""

    def __init__(self, program: Program, max_steps: int = DEFAULT_MAX_STEPS):
        super().__init__(program, max_steps, head_seeded=True)
        self.stats = dict.fromkeys(
            ("derivations", "shipped", "overdeleted", "rederived", "steps"), 0)

    def apply(self, deltas: dict[str, dict[tuple, int]]) -> dict[tuple, int]:
        """Apply base-row changes (Z-sets); returns the target's change as a Z-set."""
        target = self.relations[self.program.target]
        inserted, deleted = self.base_changes(deltas)
        removed: set[tuple] = set()
        if deleted:
            over = self._overdelete(deleted)
            removed = {t for rel, t in over if rel == self.program.target}
            self._rederive(over)
        for rel, row in inserted:
            self.relations[rel].add(row, True)
        added = self._propagate(deque(inserted))
        changes = {t: -1 for t in removed if t not in target.rows}
        changes.update((t, 1) for t in added if t not in removed)
        return changes

    def _derived_from(self, rel: str, t: tuple) -> list[tuple[str, tuple]]:
        """The heads of every rule derivation that uses ``t``, on the current state."""
        out: list[tuple[str, tuple]] = []
        self.consequences(rel, t, True, keep, lambda head, h, _: out.append((head, h)))
        self.stats["derivations"] += len(out)
        return out

    def _overdelete(self, rows: list[tuple[str, tuple]]) -> list[tuple[str, tuple]]:
        """Everything with a derivation through a deleted tuple, on the old state."""
        marked: set[tuple[str, tuple]] = set(rows)
        queue = deque(rows)
        found: list[tuple[str, tuple]] = []
        steps = 0
        while queue:
            steps += 1
            if steps & 0xFFFF == 0:
                converge_guard(steps, self.max_steps)
            for item in self._derived_from(*queue.popleft()):
                if item not in marked and item[1] in self.relations[item[0]].rows:
                    marked.add(item)
                    found.append(item)
                    queue.append(item)
                    self.stats["shipped"] += 1
        self.stats["overdeleted"] += len(found)
        self.stats["steps"] += steps
        for rel, t in [*rows, *found]:
            self.relations[rel].remove(t)
        return found

    def _rederive(self, over: list[tuple[str, tuple]]) -> None:
        """Put back over-deleted tuples with a derivation from what remains, then let them
        propagate."""
        back = [(rel, t) for rel, t in over if self._derivable(rel, t)]
        for rel, t in back:
            self.relations[rel].add(t, True)
        self.stats["rederived"] += len(back)
        self.stats["shipped"] += len(back)
        self._propagate(deque(back))

    def _derivable(self, rel: str, t: tuple) -> bool:
        if any(derives(plan, self.relations, t) for plan in self.head_plans.get(rel, ())):
            self.stats["derivations"] += 1
            return True
        return False

    def _propagate(self, queue: deque) -> set[tuple]:
        """Semi-naive evaluation from tuples just added; returns the target's new tuples."""
        added: set[tuple] = set()
        target = self.program.target
        steps = 0
        while queue:
            steps += 1
            if steps & 0xFFFF == 0:
                converge_guard(steps, self.max_steps)
            for hrel, h in self._derived_from(*queue.popleft()):
                relation = self.relations[hrel]
                if h not in relation.rows:
                    relation.add(h, True)
                    self.stats["shipped"] += 1
                    queue.append((hrel, h))
                    if hrel == target:
                        added.add(h)
        self.stats["steps"] += steps
        return added

    def counters(self) -> dict[str, int]:
        out = dict(self.stats)
        out["derived_tuples"] = sum(len(self.relations[c]) for c in self.program.ctes)
        return out
