"""The absorption fixpoint over partitions: relations split by their first attribute.

``recursive-views-absorption-provenance.txt`` sections II-III and Figure 4: every relation
is horizontally partitioned by the value of its first attribute.  A two-atom rule joins at
the partition of its join value, where both inputs meet: an input whose join column is not
its first is also kept as a copy partitioned by that column (``link`` re-partitioned by
``dst`` and shipped there), and each arrival is stored and then probes the other input,
so every pair of tuples meets exactly where both are kept.  A derived tuple goes through
MinShip at the partition that derived it and is shipped to the partition of its own first
attribute, where aggregate selection and Algorithm 1 run.  Provenance travels with the
tuples as serialized BDDs, which is what "bytes shipped" counts.

A batch runs in supersteps: deleted base rows are first announced to every partition, then
each partition restricts them, adds its inserted rows and runs until it has nothing to do
but send; the messages are delivered and the next superstep begins, until none are left.
:class:`PartitionFixpoint` is one partition (``dred_partition.DRedPartition`` is DRed's,
on the same :class:`PartitionBase`, in two rounds of supersteps); :class:`PartitionedFixpoint`
runs them all in one process (the local engine, tests and benchmarks);
:mod:`upkeep.spark.fixpoint` runs them as Spark tasks.  Rules of three or more atoms are first split into chains of two-atom
rules (``binary.py``); a join without an equality keeps its second input replicated to every
partition.  Aggregate selection grouped without the first attribute is not partitioned
(:func:`partition_plan` says why; the view then runs on one partition).
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from dataclasses import dataclass, field

from ..hashing import stable_hash
from .absorption import AbsorptionFixpoint
from .aggsel import AggregateSelection, SelectionSpec
from .binary import binary_program
from .engine import DEFAULT_MAX_STEPS, RecursionLimit
from .joins import Combine, Relation, evaluate, plan_body, seeded
from .program import Program
from .provenance import PosBool

Message = tuple  # ("delete", rel, row) | ("frag", rel, col, t, wire) | ("derive", rel, t, wire)
Outbox = list[tuple[int, bytes]]  # (destination partition, pickled message)
EVERYWHERE = -1  # the "column" of a copy replicated to every partition


def home(value: object, partitions: int) -> int:
    """The partition that keeps rows whose partitioning attribute is ``value``."""
    return stable_hash(value) % partitions


@dataclass
class Layout:
    """Where each relation is kept and which rules each kept part feeds.

    ``meets[i]``: for rule ``i``, each atom's ``(relation, column)``: its atoms meet at the
    partition of that column's value (column 0 for a one-atom rule; :data:`EVERYWHERE` for
    the second input of a join without an equality).  Derived from it:
    ``copies[rel]``: columns other than the first that ``rel`` is also partitioned by
    (:data:`EVERYWHERE`: a copy on every partition).
    ``probes[(rel, col)]``: ``(rule index, seed atom, other relation, its column)`` for each
    rule evaluated when a tuple arrives in ``rel``'s part partitioned by ``col``
    (``other`` is None for a one-atom rule)."""

    partitions: int
    meets: list[tuple[tuple[str, int], ...]]
    copies: dict[str, tuple[int, ...]] = field(init=False)
    probes: dict[tuple[str, int], list[tuple[int, int, str | None, int]]] = field(init=False)

    def __post_init__(self) -> None:
        copies: dict[str, set[int]] = {}
        self.probes = {}
        for i, atoms in enumerate(self.meets):
            for seed, (rel, col) in enumerate(atoms):
                if col:
                    copies.setdefault(rel, set()).add(col)
                other, other_col = atoms[1 - seed] if len(atoms) == 2 else (None, 0)
                self.probes.setdefault((rel, col), []).append((i, seed, other, other_col))
        self.copies = {rel: tuple(sorted(cols)) for rel, cols in copies.items()}

    def describe(self) -> str:
        parts = [f"{self.partitions} partitions by first attribute"]
        for rel, cols in sorted(self.copies.items()):
            if EVERYWHERE in cols:
                parts.append(f"{rel} replicated to every partition")
            by = [str(c) for c in cols if c != EVERYWHERE]
            if by:
                parts.append(f"{rel} also by column {', '.join(by)}")
        return "; ".join(parts)

    def destinations(self, rel: str, t: tuple) -> list[tuple[int, int]]:
        """``(column, partition)`` of each copy of ``t`` besides the one by its first
        attribute."""
        out = []
        for col in self.copies.get(rel, ()):
            if col == EVERYWHERE:
                out += [(col, p) for p in range(self.partitions)]
            else:
                out.append((col, home(t[col], self.partitions)))
        return out


def partition_plan(program: Program, partitions: int, selection: SelectionSpec | None
                   ) -> tuple[Program, Layout] | str:
    """The program the partitions evaluate (rules of two atoms at most) and its layout, or
    the reason the view cannot be split."""
    program = binary_program(program)
    layout = layout_for(program, partitions, selection)
    return layout if isinstance(layout, str) else (program, layout)


def layout_for(program: Program, partitions: int, selection: SelectionSpec | None
               ) -> Layout | str:
    """The layout of ``program`` over ``partitions``, or the reason it cannot be split."""
    if selection is not None and 0 not in selection.keys:
        return "aggregate selection groups by columns other than the first"
    meets: list[tuple[tuple[str, int], ...]] = []
    for rule in program.rules:
        if len(rule.atoms) == 1:
            meets.append(((rule.atoms[0].relation, 0),))
            continue
        if len(rule.atoms) > 2:
            raise ValueError(f"rule of {rule.head}: {len(rule.atoms)} atoms (split it first)")
        a, b = rule.atoms
        pairs = []
        for x, y in rule.equalities:
            for s, t in ((x, y), (y, x)):
                if s in a.slots and t in b.slots:
                    pairs.append((s - a.offset, t - b.offset))
        # the join column pair needing fewest copies; none: every a meets every b where a
        # is kept, so b is replicated
        ca, cb = (min(pairs, key=lambda p: ((p[0] != 0) + (p[1] != 0), p)) if pairs
                  else (0, EVERYWHERE))
        meets.append(((a.relation, ca), (b.relation, cb)))
    return Layout(partitions, meets)


class PartitionBase:
    """What a partition of either strategy does alike: keep its part of every relation
    (``relations``: the rows partitioned by their first attribute; ``fragments``: those and
    the copies partitioned by a join column), plan the rules per kept part, and stage the
    batch's base rows."""

    program: Program
    relations: dict[str, Relation]
    phases = 1  # rounds of supersteps per batch, each run until no message is left

    def __init__(self, layout: Layout, index: int, *engine_args) -> None:
        """``index`` of ``layout.partitions``; ``engine_args`` go to the strategy's engine
        (which plans the rules, so the layout is set first)."""
        self.layout = layout
        self.index = index
        super().__init__(*engine_args)
        self.outbox: Outbox = []
        self.inserted: list[tuple[str, tuple]] = []  # this batch's base rows kept here
        self.deleted: list[tuple[str, tuple]] = []

    def _plan_rules(self, head_seeded: bool) -> None:
        """Rules are evaluated per kept part (``probes``): a tuple arriving in ``rel``'s part
        partitioned by ``col`` probes the other input's part at this partition."""
        self.fragments: dict[tuple[str, int], Relation] = {
            (rel, 0): relation for rel, relation in self.relations.items()}
        for rel, cols in self.layout.copies.items():
            for col in cols:
                self.fragments[(rel, col)] = Relation(rel, self.relations[rel].arity)
        self.probes: dict[tuple[str, int], list] = {}
        for part, entries in self.layout.probes.items():
            for rule_index, seed, other, other_col in entries:
                plan = plan_body(self.program.rules[rule_index], seed)
                lookups = {} if other is None else {other: self.fragments[(other, other_col)]}
                for st in plan.steps:
                    if st.cols:
                        lookups[st.relation].index(st.cols)
                self.probes.setdefault(part, []).append((plan, lookups))

    def stage(self, deltas: dict[str, dict[tuple, int]]) -> None:
        """This partition's base rows of the batch (those whose first attribute is here),
        added to what is staged already (a row staged in and now out cancels out)."""
        inserted, deleted = self.base_changes(deltas)
        ins, dels = set(inserted), set(deleted)
        staged_ins, staged_dels = set(self.inserted), set(self.deleted)
        self.inserted = ([r for r in self.inserted if r not in dels]
                         + [r for r in inserted if r not in staged_dels])
        self.deleted = ([r for r in self.deleted if r not in ins]
                        + [r for r in deleted if r not in staged_ins])

    def restage(self) -> None:
        """Forget everything derived and stage every base row kept here, with the batch's
        staged changes, as an insertion (the partitions are rebuilt together when one of
        them lost its state)."""
        gone = set(self.deleted)
        rows = [(rel, row) for rel in self.program.base for row in self.relations[rel].rows
                if (rel, row) not in gone] + self.inserted
        for relation in self.fragments.values():
            relation.clear()
        self._forget()
        self.inserted, self.deleted = rows, []

    def _forget(self) -> None:
        """Drop the strategy's own state besides the kept parts (for :meth:`restage`)."""

    def advance(self) -> Outbox:
        """Start the batch's next round of supersteps (every partition's previous round has
        run out of messages); what to send."""
        return []

    def consequences_at(self, rel: str, col: int, t: tuple, annotation: object,
                        combine: Combine, emit: Callable[[str, tuple, object], None]) -> None:
        """Every rule body that reads ``rel``'s part partitioned by ``col`` here, seeded with
        ``t``: ``emit(head relation, head tuple, annotation)`` per derivation (the
        partitioned form of ``RuleEngine.consequences``)."""
        for plan, lookups in self.probes.get((rel, col), ()):
            head = plan.rule.head
            evaluate(plan, lookups, seeded(plan, t), annotation, combine,
                     lambda h, acc, head=head: emit(head, h, acc))

    def state_size(self) -> int:
        return super().state_size() + sum(len(f) for (_, c), f in self.fragments.items() if c)


class PartitionFixpoint(PartitionBase, AbsorptionFixpoint):
    """One partition: Algorithm 1, MinShip and AggSel over this partition's part of every
    relation."""

    def __init__(self, program: Program, layout: Layout, index: int, ordering: str = "sifting",
                 lazy: bool = True, selection: SelectionSpec | None = None,
                 max_steps: int = DEFAULT_MAX_STEPS):
        super().__init__(layout, index, program, ordering, lazy, selection, max_steps)

    def _forget(self) -> None:
        for name in self.program.ctes:
            self.sent[name].clear()
            self.buffer[name].clear()
        if self.selection is not None:
            self.selection = AggregateSelection(self.selection.spec, self.false)
        self.dependents.clear()
        self.pb.release_all()

    def announce(self) -> Outbox:
        """Superstep 0: every partition hears of every deleted base row."""
        return [(p, pickle.dumps(("delete", rel, row), protocol=5))
                for rel, row in self.deleted for p in range(self.layout.partitions)]

    def step(self, inbox: list[bytes], first: bool = False) -> Outbox:
        """Process delivered messages (``first``: the batch's deletions, then its insertions,
        run before anything else); returns what to send."""
        messages = [pickle.loads(m) for m in inbox]
        if first:
            self.changes = {}
            deleted = [(m[1], m[2]) for m in messages if m[0] == "delete"]
            self._change_base(self.inserted, deleted)
            self.inserted, self.deleted = [], []
        for message in messages:
            if message[0] != "delete":
                self._arrive((*message[:-1], self.pb.from_wire(message[-1])))
                self._run()
        out, self.outbox = self.outbox, []
        return out

    def finish(self) -> dict[tuple, int]:
        """The target rows kept here that the batch added (+1) or removed (-1)."""
        changes, self.changes = self.changes, {}
        return {t: w for t, w in changes.items() if w}

    # ------------------------------------------------------------ placement
    def _send(self, dest: int, message: Message) -> None:
        """Ship ``message`` (its last element a BDD) to partition ``dest``; one that stays
        here is handled at once and ships nothing."""
        if dest == self.index:
            self._arrive(message)
            return
        wire = self.pb.to_wire(message[-1])
        self.outbox.append((dest, pickle.dumps((*message[:-1], wire), protocol=5)))

    def _arrive(self, message: Message) -> None:
        """A copy's tuple reaches the part partitioned by its join column, or a derivation
        reaches the partition of its first attribute (AggSel, then Algorithm 1)."""
        if message[0] == "frag":
            _, rel, col, t, pv = message
            self._fragment(rel, col, t, pv)
        else:
            _, rel, t, pv = message
            self._selected(rel, t, pv)

    def _pass(self, rel: str, t: tuple, pv, depth: int = 0) -> None:
        """MinShip let the derivation through: ship it to the partition of ``t[0]``."""
        self._send(home(t[0], self.layout.partitions), ("derive", rel, t, pv))

    def _join(self, rel: str, t: tuple, delta, depth: int = -1) -> None:
        """A tuple's provenance grew here, where its first attribute lives: update its
        copies partitioned by join columns, and probe the rules joining on the first."""
        for col, dest in self.layout.destinations(rel, t):
            self._send(dest, ("frag", rel, col, t, delta))
        self._probe(rel, 0, t, delta, depth)

    def _fragment(self, rel: str, col: int, t: tuple, pv) -> None:
        """A copy partitioned by ``col`` receives (more provenance of) ``t``."""
        part = self.fragments[(rel, col)]
        old = part.rows.get(t, self.false)
        new = old | pv
        if new == old:
            return
        part.add(t, new)
        self._depend(pv, ("frag", (rel, col), t))
        self._probe(rel, col, t, new & ~old)

    def _probe(self, rel: str, col: int, t: tuple, pv, depth: int = 0) -> None:
        queue = self.queue
        stats = self.stats

        def emit(head: str, h: tuple, acc) -> None:
            stats["derivations"] += 1
            queue.append((head, h, acc, depth + 1))

        self.consequences_at(rel, col, t, pv, self._conjoin, emit)

    def _restrict(self, stage: str, rel, t: tuple, restrict, resend: list, revisit: list
                  ) -> None:
        if stage != "frag":
            super()._restrict(stage, rel, t, restrict, resend, revisit)
            return
        part = self.fragments[rel]
        if self._restricted(part.rows, t, restrict) == self.false:
            part.remove(t)

    def rows_here(self) -> dict[tuple, object]:
        return self.relations[self.program.target].rows


class PartitionedFixpoint:
    """Every partition of a program in this process, with the supersteps between them;
    counts the tuples and bytes shipped from one partition to another."""

    def __init__(self, program: Program, layout: Layout, parts: list, pb: PosBool | None = None,
                 lazy: bool = False, max_steps: int = DEFAULT_MAX_STEPS):
        """``parts``: one partition engine per partition (:class:`PartitionFixpoint`, or
        ``dred_partition.DRedPartition``); ``pb`` gathers their provenance for ``why``."""
        self.program = program
        self.layout = layout
        self.lazy = lazy
        self.parts = parts
        self.pb = pb
        self.max_steps = max_steps
        self.selection = getattr(parts[0], "selection", None)
        self.shipping = dict.fromkeys(("shipped_tuples", "shipped_bytes", "supersteps"), 0)

    def apply(self, deltas: dict[str, dict[tuple, int]]) -> dict[tuple, int]:
        """Apply base-row changes (Z-sets); returns the target's change as a Z-set."""
        n = self.layout.partitions
        routed: list[dict[str, dict[tuple, int]]] = [{} for _ in range(n)]
        for rel, delta in deltas.items():
            for row, w in delta.items():
                routed[home(row[0], n)].setdefault(rel, {})[row] = w
        for part, own in zip(self.parts, routed, strict=True):
            part.stage(own)
        inboxes = self._deliver([(i, part.announce()) for i, part in enumerate(self.parts)])
        self._supersteps(inboxes, first=True)
        for _ in range(self.parts[0].phases - 1):
            self._supersteps(self._deliver([(i, part.advance())
                                            for i, part in enumerate(self.parts)]))
        changes: dict[tuple, int] = {}
        for part in self.parts:
            changes.update(part.finish())
        return changes

    def _supersteps(self, inboxes: list[list[bytes]], first: bool = False) -> None:
        steps = 0
        while first or any(inboxes):
            steps += 1
            if steps > self.max_steps:
                raise RecursionLimit(f"the recursion did not converge within {steps:,} "
                                     "supersteps")
            outboxes = [(i, part.step(inbox, first))
                        for i, (part, inbox) in enumerate(zip(self.parts, inboxes, strict=True))]
            first = False
            inboxes = self._deliver(outboxes)
        self.shipping["supersteps"] += steps

    def _deliver(self, outboxes: list[tuple[int, Outbox]]) -> list[list[bytes]]:
        inboxes: list[list[bytes]] = [[] for _ in self.parts]
        for source, outbox in outboxes:
            for dest, message in outbox:
                inboxes[dest].append(message)
                if dest != source:
                    self.shipping["shipped_tuples"] += 1
                    self.shipping["shipped_bytes"] += len(message)
        return inboxes

    # ------------------------------------------------------------ reading
    def rows(self) -> dict[tuple, object]:
        out: dict[tuple, object] = {}
        for part in self.parts:
            out.update(part.rows_here())
        return out

    def complete_provenance(self) -> None:
        """MinShip's flush on every partition, and the supersteps it starts."""
        if not self.lazy:
            return
        while True:
            outboxes = []
            for i, part in enumerate(self.parts):
                part.complete_provenance()
                outboxes.append((i, part.outbox))
                part.outbox = []
            inboxes = self._deliver(outboxes)
            if not any(inboxes):
                return
            self._supersteps(inboxes)

    def provenance(self, t: tuple):
        part = self.parts[home(t[0], self.layout.partitions)]
        pv = part.provenance(t)
        return None if pv is None else self.pb.from_wire(part.pb.to_wire(pv))

    def counters(self) -> dict[str, int]:
        out: dict[str, int] = dict(self.shipping)
        for part in self.parts:
            for key, value in part.counters().items():
                out[key] = out.get(key, 0) + value
        return out

    def state_size(self) -> int:
        return sum(part.state_size() for part in self.parts)
