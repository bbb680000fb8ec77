"""The Fixpoint operator with absorption provenance, MinShip and aggregate selection.

``recursive-views-absorption-provenance.txt``:

* Algorithm 1 (section IV-B): pipelined semi-naive evaluation.  Each derived tuple keeps
  its absorption provenance ``P[t]``; a new derivation is passed on only with the part the
  old provenance does not absorb (``deltaPv = P[t] & ~old``).  A deleted base tuple's
  variable is restricted to false in every annotation that mentions it, and tuples whose
  provenance becomes false leave the view: no over-deletion, no re-derivation.
* MinShip (section V) sits in front of each recursive relation.  Lazy propagation passes on
  only the first derivation of a tuple and buffers the rest (absorbed into one BDD); when
  a deletion kills what was passed on, the buffered alternatives go out instead.  Eager
  propagation passes on every derivation that is not absorbed.
* Aggregate selection (section VII, Algorithm 3) in front of the target relation when the
  view only reads it through MIN/MAX per group (:mod:`.aggsel`).
* The incremental depth-first variable order (section VI) as an option (:mod:`.ordering`).

One engine maintains one target CTE; the work counters play the role of the paper's
"tuples shipped": every derivation passed into a fixpoint relation, and every removal.
"""

from __future__ import annotations

from collections import deque

from .aggsel import AggregateSelection, SelectionSpec
from .engine import DEFAULT_MAX_STEPS, RuleEngine, converge_guard
from .ordering import dfs_edge_order, edge_relation
from .program import Program
from .provenance import NODE_BYTES, PosBool


class AbsorptionFixpoint(RuleEngine):
    """Maintain ``program.target`` under base-row inserts and deletes."""

    def __init__(self, program: Program, ordering: str = "sifting", lazy: bool = True,
                 selection: SelectionSpec | None = None, max_steps: int = DEFAULT_MAX_STEPS):
        super().__init__(program, max_steps)
        self.lazy = lazy
        self.pb = PosBool(ordering)
        false = self.false = self.pb.false
        self.true = self.pb.true

        def conjoin(acc, ann):  # a join's provenance; a false one prunes the binding
            out = acc & ann
            return None if out == false else out

        self._conjoin = conjoin
        self._support: tuple = (None, set())  # the last annotation's variables (see _depend)
        self.sent: dict[str, dict[tuple, object]] = {c: {} for c in program.ctes}  # MinShip
        self.buffer: dict[str, dict[tuple, object]] = {c: {} for c in program.ctes}
        self.selection = AggregateSelection(selection, false) if selection else None
        self.dependents: dict[str, set[tuple[str, str, tuple]]] = {}
        self.edges = edge_relation(program) if ordering == "dfs" else None
        self.queue: deque = deque()  # (relation, tuple, provenance, derivation depth)
        self.trace: list | None = None  # (depth, relation, tuple, provenance) when enabled
        self.changes: dict[tuple, int] = {}
        self._spent = 0  # steps run so far in this batch (the convergence budget)
        self.stats = dict.fromkeys(
            ("derivations", "shipped", "absorbed", "buffered", "pruned", "removed",
             "restricted", "steps"), 0)

    # ------------------------------------------------------------ batches
    def apply(self, deltas: dict[str, dict[tuple, int]]) -> dict[tuple, int]:
        """Apply base-row changes (Z-sets); returns the target's change as a Z-set."""
        self.changes = {}
        self._change_base(*self.base_changes(deltas))
        return {t: w for t, w in self.changes.items() if w}

    def _change_base(self, inserted: list[tuple[str, tuple]],
                     deleted: list[tuple[str, tuple]]) -> None:
        """A batch's base rows: deletions restricted first, then each insertion a fresh
        variable entering the pipeline, run to the fixpoint."""
        self._spent = 0
        if deleted:
            self._delete(deleted)
        for rel, row in inserted:
            var = self.pb.variable(rel, row)
            self.relations[rel].add(row, var)
            self.queue.append((rel, row, var, -1))
        if self.edges is not None and any(r == self.edges for r, _ in inserted):
            self._reorder()
        self._run()

    def _run(self) -> None:
        steps = 0
        queue = self.queue
        base = self.program.base
        while queue:
            rel, t, pv, depth = queue.popleft()
            steps += 1
            if steps & 0xFFFF == 0:
                converge_guard(self._spent + steps, self.max_steps)
            if rel in base:
                self._join(rel, t, pv, depth)
            else:
                self._derived(rel, t, pv, depth)
        self.stats["steps"] += steps
        self._spent += steps
        converge_guard(self._spent, self.max_steps)
        self._support = (None, set())  # hold no BDD between batches

    # ------------------------------------------------------------ the pipeline
    def _derived(self, rel: str, t: tuple, pv, depth: int = 0) -> None:
        """A derivation of ``t`` from a rule head enters MinShip (section V)."""
        if self.lazy:
            buf = self.buffer[rel]
            old = buf.get(t, self.false)
            new = old | pv
            if new == old:
                self.stats["absorbed"] += 1
                return
            buf[t] = new
            self._depend(pv, ("ship", rel, t))
            sent = self.sent[rel]
            if t in sent:
                self.stats["buffered"] += 1
                return
            sent[t] = pv = new
        self._pass(rel, t, pv, depth)

    def _pass(self, rel: str, t: tuple, pv, depth: int = 0) -> None:
        """What MinShip lets through goes on to the relation (shipped to the tuple's
        partition in :mod:`.partitioned`)."""
        self._selected(rel, t, pv, depth)

    def _selected(self, rel: str, t: tuple, pv, depth: int = 0) -> None:
        """Aggregate selection (Algorithm 3) in front of the target relation, if any."""
        if self.selection is not None and rel == self.program.target:
            self._depend(pv, ("sel", rel, t))
            demoted, pv = self.selection.insert(t, pv)
            for b in demoted:
                self._remove(rel, b)
            if pv is None:
                return
        self._fixpoint(rel, t, pv, depth)

    def _fixpoint(self, rel: str, t: tuple, pv, depth: int = 0) -> None:
        """Algorithm 1, lines 11-26."""
        relation = self.relations[rel]
        old = relation.rows.get(t, self.false)
        new = old | pv
        if new == old:
            self.stats["absorbed"] += 1
            return
        self.stats["shipped"] += 1
        relation.add(t, new)
        self._depend(pv, ("fix", rel, t))
        if old == self.false and rel == self.program.target:
            self.changes[t] = self.changes.get(t, 0) + 1
        if self.trace is not None:
            self.trace.append((depth, rel, t, new))
        self._join(rel, t, new & ~old, depth)

    def _join(self, rel: str, t: tuple, delta, depth: int = -1) -> None:
        """Seed every rule body that reads ``rel`` with ``t`` (annotated ``delta``)."""
        queue = self.queue
        stats = self.stats

        def emit(head: str, h: tuple, pv) -> None:
            stats["derivations"] += 1
            queue.append((head, h, pv, depth + 1))

        self.consequences(rel, t, delta, self._conjoin, emit)

    def _remove(self, rel: str, t: tuple) -> None:
        relation = self.relations[rel]
        if t in relation.rows:
            relation.remove(t)
            self.stats["removed"] += 1
            if rel == self.program.target:
                self.changes[t] = self.changes.get(t, 0) - 1

    def _depend(self, pv, entry: tuple) -> None:
        """Remember which annotations mention each variable (for deletions).  A derivation's
        annotation usually passes MinShip, AggSel and the fixpoint unchanged, so the last
        support computed is kept rather than walking the same BDD again."""
        if pv == self.false or pv == self.true:
            return
        last, names = self._support
        if last is None or last != pv:
            names = self.pb.support(pv)
            self._support = (pv, names)
        deps = self.dependents
        for name in names:
            deps.setdefault(name, set()).add(entry)

    # ------------------------------------------------------------ deletions
    def _delete(self, rows: list[tuple[str, tuple]]) -> None:
        """Algorithm 1 lines 27-35 for every annotation that mentions a deleted row, then
        MinShip's and AggSel's replacements for what died (sections V and VII)."""
        names = [n for rel, row in rows if (n := self.pb.known(rel, row)) is not None]
        for rel, row in rows:
            if row in self.relations[rel].rows:  # a partition holds only its own rows
                self.relations[rel].remove(row)
        affected: set[tuple[str, str, tuple]] = set()
        for name in names:
            affected |= self.dependents.pop(name, set())
        dead = set(names)

        def restrict(u):
            return self.pb.restrict(u, dead)

        self.stats["restricted"] += len(affected)
        resend: list[tuple[str, tuple]] = []
        revisit: list[tuple[str, tuple]] = []  # target tuples whose best-ness may have changed
        for stage, rel, t in affected:
            self._restrict(stage, rel, t, restrict, resend, revisit)
        self.pb.release(names)
        # MinShip: what was sent died but a buffered derivation survives: send that instead
        for rel, t in resend:
            pv = self.buffer[rel].get(t)
            if pv is not None and t not in self.sent[rel]:
                self.sent[rel][t] = pv
                self._pass(rel, t, pv)
        # AggSel: a group's best enters the fixpoint with everything known about it
        if self.selection is not None:
            for rel, t in revisit:
                if self.selection.is_best(t) and t not in self.relations[rel].rows:
                    self._fixpoint(rel, t, self.selection.provenance(t))

    def _restrict(self, stage: str, rel, t: tuple, restrict, resend: list, revisit: list
                  ) -> None:
        """Restrict one annotation that mentions a deleted row (``stage`` says where it is
        kept: the fixpoint relation, MinShip's buffer, or AggSel's)."""
        if stage == "fix":
            if self._restricted(self.relations[rel].rows, t, restrict) == self.false:
                self._remove(rel, t)
                revisit.append((rel, t))
        elif stage == "ship":
            buf, sent = self.buffer[rel], self.sent[rel]
            if self._restricted(buf, t, restrict) == self.false:
                del buf[t]
            if self._restricted(sent, t, restrict) == self.false:
                del sent[t]
                resend.append((rel, t))
        elif stage == "sel":
            _, promoted = self.selection.restrict(t, restrict)
            revisit.extend((rel, b) for b in promoted)

    def _restricted(self, annotations: dict, t: tuple, restrict) -> object | None:
        """``annotations[t]`` restricted, stored back unless it became false (the caller
        then removes ``t`` its own way); None when ``t`` has no annotation there."""
        pv = annotations.get(t)
        if pv is None:
            return None
        pv = restrict(pv)
        if pv != self.false:
            annotations[t] = pv
        return pv

    # ------------------------------------------------------------ ordering
    def _reorder(self) -> None:
        """Section VI-C: variables of the edge relation in depth-first order, after a batch
        that inserts edges.  A batch that only deletes edges brings no variable to place and
        leaves every diagram valid, so the order is brought up to date at the next insertion
        instead: shuffling every stored BDD costs seconds at 10^6 annotations."""
        edges = self.relations[self.edges].rows
        self.pb.reorder([self.pb.name_of(self.edges, row) for row in dfs_edge_order(edges)])

    # ------------------------------------------------------------ reading
    def complete_provenance(self) -> None:
        """Send every buffered derivation on (MinShip's periodic flush, section V), so that
        each tuple's provenance covers all its derivations; the rows do not change."""
        if not self.lazy:
            return
        self._spent = 0
        while True:
            pending = [(rel, t, pv) for rel, buf in self.buffer.items()
                       for t, pv in buf.items() if self.sent[rel].get(t) != pv]
            if not pending:
                return
            for rel, t, pv in pending:
                self.sent[rel][t] = pv
                self._pass(rel, t, pv)
            self._run()

    @property
    def selection_spec(self) -> SelectionSpec | None:
        return self.selection.spec if self.selection is not None else None

    def provenance(self, t: tuple):
        return self.relations[self.program.target].rows.get(t)

    def annotations(self) -> list:
        out = []
        for name in self.program.ctes:
            out.extend(self.relations[name].rows.values())
            if self.lazy:
                out.extend(self.buffer[name].values())
        if self.selection is not None:
            out.extend(self.selection.annotations())
        return out

    def counters(self) -> dict[str, int]:
        nodes = self.pb.nodes(self.annotations())
        derived = sum(len(self.relations[c]) for c in self.program.ctes)
        out = dict(self.stats)
        out["bdd_nodes"] = nodes
        out["provenance_bytes"] = nodes * NODE_BYTES
        out["derived_tuples"] = derived
        out["live_variables"] = self.pb.live_variables
        if self.selection is not None:
            out["pruned"] = self.selection.pruned
        return out

    def state_size(self) -> int:
        n = super().state_size() + sum(len(b) for b in self.buffer.values())
        if self.selection is not None:
            n += len(self.selection)
        return n
