"""DRed over partitions: the baseline in the paper's execution model.

``recursive-views-absorption-provenance.txt`` section III-B (Figure 5) for DRed, sections
II-III (Figure 4) for the execution model: relations split by their first attribute, a
two-atom rule joined at the partition of its join value (:mod:`.partitioned` lays this out
and plans the probes; this module shares them with the absorption partitions).  No
provenance is kept, so a deletion takes two rounds of supersteps, each run until no message
is left anywhere:

1. *Over-delete*, on the old state: a deleted base row is marked where it is kept, its
   copies partitioned by join columns are marked too, and every derivation it takes part in
   marks its head at the head's own partition, recursively.
2. Marked tuples are removed everywhere.  Each over-deleted derived tuple asks every
   partition whether a derivation from what remains still gives it (a pair of joining
   tuples meets at exactly one partition, so every derivation is found somewhere); the ones
   re-derived go back and propagate semi-naively, with the batch's inserted base rows.

Messages are pickled tuples: ``("odel", rel, t)``, ``("odel-frag", rel, col, t)``,
``("check", rel, t)``, ``("back", rel, t)``, ``("ins", rel, t)``, ``("ins-frag", rel, col,
t)``.  The asks of step 2 go to every partition, so on deletions DRed ships what it
over-deletes, its re-derivations and their propagation, plus one ask per partition for
each over-deleted tuple.
"""

from __future__ import annotations

import pickle
from collections import deque
from dataclasses import replace

from .engine import DEFAULT_MAX_STEPS, RuleEngine, converge_guard
from .joins import derives, keep, plan_body
from .partitioned import Layout, Outbox, PartitionBase, home
from .program import Program


class DRedPartition(PartitionBase, RuleEngine):
    """One partition of DRed (``index`` of ``layout.partitions``), with set semantics."""

    phases = 2

    def __init__(self, program: Program, layout: Layout, index: int,
                 max_steps: int = DEFAULT_MAX_STEPS):
        super().__init__(layout, index, program, max_steps)
        self.stats = dict.fromkeys(
            ("derivations", "shipped", "overdeleted", "rederived", "steps"), 0)
        self.marked: dict[tuple[str, int], set[tuple]] = {}  # over-deleted, per kept part
        self.removed: set[tuple] = set()  # target tuples over-deleted in this batch
        self.added: set[tuple] = set()  # target tuples added in this batch
        self.local: deque = deque()  # messages this partition sent itself
        self.phase = 0
        self._spent = 0  # messages handled in this batch (the convergence budget)

    def _plan_rules(self, head_seeded: bool) -> None:
        """The probes (:class:`PartitionBase`), and each rule seeded at its head over the
        parts where its atoms meet: atom ``i`` is read from the part partitioned by the
        column it joins on, renamed so that a self-join reads two different parts."""
        super()._plan_rules(head_seeded)
        self.checks: dict[str, list] = {}
        for rule, meets in zip(self.program.rules, self.layout.meets, strict=True):
            parts = {f"{rel}@{col}": self.fragments[(rel, col)] for rel, col in meets}
            renamed = replace(rule, atoms=[replace(a, relation=f"{rel}@{col}")
                                           for a, (rel, col) in zip(rule.atoms, meets,
                                                                    strict=True)])
            plan = plan_body(renamed, -1)
            for st in plan.steps:
                if st.cols:
                    parts[st.relation].index(st.cols)
            self.checks.setdefault(rule.head, []).append((plan, parts))

    # ------------------------------------------------------------ a batch
    def _forget(self) -> None:
        self.marked.clear()

    def announce(self) -> Outbox:
        """Nothing to announce: a deleted base row is over-deleted where it is kept."""
        return []

    def step(self, inbox: list[bytes], first: bool = False) -> Outbox:
        """Process delivered messages (``first``: start over-deleting the batch's deleted
        base rows); returns what to send."""
        if first:
            self.phase = 1
            self._spent = 0
            self.removed, self.added = set(), set()
            for rel, row in self.deleted:
                self._overdelete(rel, 0, row)
            self.deleted = []
        self.local.extend(pickle.loads(m) for m in inbox)
        return self._drain()

    def advance(self) -> Outbox:
        """After over-deletion: remove what is marked, ask for re-derivations and insert the
        batch's base rows.  After that round: nothing (the batch is done)."""
        if self.phase != 1:
            self.phase = 0
            return []
        self.phase = 2
        for (rel, col), rows in self.marked.items():
            part = self.fragments[(rel, col)]
            for t in rows:
                part.remove(t)
            if col == 0 and rel in self.program.ctes:
                if rel == self.program.target:
                    self.removed |= rows
                for t in rows:  # asks are queued, so they run once every mark is removed
                    for p in range(self.layout.partitions):
                        self._send(p, ("check", rel, t))
        self.marked = {}
        for rel, row in self.inserted:
            self._insert(rel, row)
        self.inserted = []
        return self._drain()

    def finish(self) -> dict[tuple, int]:
        """The target rows kept here that the batch added (+1) or removed (-1)."""
        rows = self.relations[self.program.target].rows
        changes = {t: -1 for t in self.removed if t not in rows}
        changes.update((t, 1) for t in self.added if t not in self.removed)
        self.removed, self.added = set(), set()
        return changes

    # ------------------------------------------------------------ messages
    def _send(self, dest: int, message: tuple) -> None:
        if dest == self.index:
            self.local.append(message)
        else:
            self.outbox.append((dest, pickle.dumps(message, protocol=5)))

    def _drain(self) -> Outbox:
        steps = 0
        local = self.local
        while local:
            steps += 1
            if steps & 0xFFFF == 0:
                converge_guard(self._spent + steps, self.max_steps)
            message = local.popleft()
            kind = message[0]
            if kind == "odel":
                _, rel, t = message
                if t in self.relations[rel].rows:
                    self._overdelete(rel, 0, t)
            elif kind == "odel-frag":
                _, rel, col, t = message
                if t in self.fragments[(rel, col)].rows:
                    self._overdelete(rel, col, t)
            elif kind == "check":
                _, rel, t = message
                if self._derivable(rel, t):
                    self._send(home(t[0], self.layout.partitions), ("back", rel, t))
            elif kind == "back":
                _, rel, t = message
                if t not in self.relations[rel].rows:
                    self.stats["rederived"] += 1
                    self._insert(rel, t)
            elif kind == "ins":
                _, rel, t = message
                if t not in self.relations[rel].rows:
                    self._insert(rel, t)
            else:  # "ins-frag"
                _, rel, col, t = message
                part = self.fragments[(rel, col)]
                if t not in part.rows:
                    part.add(t, True)
                    self._probe(rel, col, t, "ins")
        self.stats["steps"] += steps
        self._spent += steps
        converge_guard(self._spent, self.max_steps)
        out, self.outbox = self.outbox, []
        return out

    def _overdelete(self, rel: str, col: int, t: tuple) -> None:
        """Mark ``t`` in its part partitioned by ``col`` (once), and pass the mark on: to
        its copies (from the part by first attribute) and to every head it derives."""
        marked = self.marked.setdefault((rel, col), set())
        if t in marked:
            return
        marked.add(t)
        if col == 0:
            if rel in self.program.ctes:
                self.stats["overdeleted"] += 1
                self.stats["shipped"] += 1
            for c, dest in self.layout.destinations(rel, t):
                self._send(dest, ("odel-frag", rel, c, t))
        self._probe(rel, col, t, "odel")

    def _insert(self, rel: str, t: tuple) -> None:
        """Add ``t`` where its first attribute lives; copy it to the parts partitioned by
        join columns and derive from it."""
        self.relations[rel].add(t, True)
        if rel in self.program.ctes:
            self.stats["shipped"] += 1
            if rel == self.program.target:
                self.added.add(t)
        for c, dest in self.layout.destinations(rel, t):
            self._send(dest, ("ins-frag", rel, c, t))
        self._probe(rel, 0, t, "ins")

    def _probe(self, rel: str, col: int, t: tuple, kind: str) -> None:
        """Every rule body that reads ``t``'s part here, seeded with ``t``: send ``(kind,
        head, h)`` to the partition of each head tuple."""
        n = self.layout.partitions
        heads: list[tuple[str, tuple]] = []
        self.consequences_at(rel, col, t, True, keep, lambda head, h, _: heads.append((head, h)))
        self.stats["derivations"] += len(heads)
        for head, h in heads:
            self._send(home(h[0], n), (kind, head, h))

    def _derivable(self, rel: str, t: tuple) -> bool:
        """Whether the parts kept here give ``t`` a derivation."""
        if any(derives(plan, parts, t) for plan, parts in self.checks.get(rel, ())):
            self.stats["derivations"] += 1
            return True
        return False

    # ------------------------------------------------------------ reading
    def rows_here(self) -> dict[tuple, object]:
        return self.relations[self.program.target].rows

    def counters(self) -> dict[str, int]:
        out = dict(self.stats)
        out["derived_tuples"] = sum(len(self.relations[c]) for c in self.program.ctes)
        return out

