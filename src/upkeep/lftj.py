"""Cyclic joins by leapfrog triejoin, maintained through sensitivity indices and a change
oracle (``lftj-incremental-maintenance.txt``).

Evaluation (section 4.1): the join variables (those shared by two or more atoms) are bound
one at a time in a fixed *variable order*; each atom is a sorted trie over its join
variables in that order, whose leaves hold the atom's tuples (its payload) with weights.  At
each level the iterators of the atoms that contain the level's variable run a leapfrog join:
the iterator at the least key seeks the greatest key, and when all agree the key is bound and
the first iterator steps on.

Maintenance (sections 4.1-4.2): every iterator move is recorded as a *sensitivity interval*
(open at v: [lo, v]; seek to v_s landing at v': [v_s, v']; next from v to v': [v, v']),
together with the bindings made before it (the *context*).  A batch turns into tree-surgery
operations per atom (a trie branch inserted or removed, or a leaf's payload changed); each
surgery at point x is matched against the atom's intervals whose prefix agrees and that
contain x.  The matched intervals, with their contexts, form the change oracle: the only
regions of the search space whose trace can change.  Each region is evaluated on the old
tries and on the new ones; the difference of the satisfying assignments is the delta of the
body, projected onto the output with multiplicities (support counts, section 2.2).  The
region's intervals are replaced by the new run's, so maintenance costs follow the trace
edit distance, not the database size.

Variable order (the stated rule): first the join variable in the most atoms; then, again
and again, the variable sharing an atom with the most variables chosen so far (ties: more
atoms, then first in the query), so every level after the first is constrained by earlier
bindings, as leapfrog triejoin needs for its worst-case bound.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sortedcontainers import SortedList

from .operators import Batch, Delta, Operator, Source
from .zset import add_into

NEG = (0,)  # the interval bound -infinity
POS = (2,)  # +infinity; a key v is (1, v)


def variable_order(edges: Sequence[Sequence[int]]) -> list[int]:
    """The join variables in the order of the rule stated in the module docstring."""
    atoms_of: dict[int, int] = {}
    first_seen: dict[int, int] = {}
    for e in edges:
        for v in e:
            atoms_of[v] = atoms_of.get(v, 0) + 1
            first_seen.setdefault(v, len(first_seen))
    join_vars = [v for v in first_seen if atoms_of[v] >= 2]
    order: list[int] = []
    while len(order) < len(join_vars):
        chosen = set(order)

        def rank(v: int, chosen: set[int] = chosen) -> tuple:
            linked = set()
            for e in edges:
                if v in e:
                    linked |= chosen & set(e)
            return (-len(linked), -atoms_of[v], first_seen[v])

        order.append(min((v for v in join_vars if v not in chosen), key=rank))
    return order


class TrieNode:
    """One trie level: sorted keys, their children, and how many payload tuples lie below."""

    __slots__ = ("keys", "children", "count")

    def __init__(self) -> None:
        self.keys = SortedList()
        self.children: dict = {}
        self.count = 0


class Trie:
    """An atom's tuples as a trie on its join variables; a leaf is ``{payload: weight}``."""

    def __init__(self, key_positions: tuple[int, ...]):
        self.positions = key_positions
        self.depth = len(key_positions)
        self.root = TrieNode() if key_positions else None
        self.leaf_root: dict = {}  # the payload of an atom without join variables

    def path(self, t: tuple) -> tuple:
        return tuple(t[p] for p in self.positions)

    def node(self, prefix: tuple) -> TrieNode | None:
        n = self.root
        for k in prefix:
            n = n.children.get(k)
            if n is None:
                return None
        return n

    def below(self, prefix: tuple) -> TrieNode | dict | None:
        """What lies under a key prefix: a trie node, or the leaf once the path is complete."""
        if not self.depth:
            return self.leaf_root
        n = self.node(prefix[:-1]) if prefix else self.root
        return n if n is None or not prefix else n.children.get(prefix[-1])

    def presence(self, t: tuple, path: tuple) -> tuple[list[int], int]:
        """Tuples below each prefix of ``path`` (the last: in its leaf), and ``t``'s weight."""
        counts = []
        n = self.root
        for k in path:
            n = n.children.get(k)
            if n is None:
                return counts + [0] * (len(path) - len(counts)), 0
            counts.append(n.count if type(n) is TrieNode else len(n))
        return counts, n.get(t, 0)

    def apply(self, t: tuple, w: int) -> None:
        """Add weight ``w`` to tuple ``t`` (removing branches that become empty)."""
        if not self.depth:
            add_into(self.leaf_root, t, w)
            return
        path = self.path(t)
        nodes = [self.root]
        n = self.root
        for k in path[:-1]:
            child = n.children.get(k)
            if child is None:
                child = n.children[k] = TrieNode()
                n.keys.add(k)
            nodes.append(child)
            n = child
        leaf = n.children.get(path[-1])
        if leaf is None:
            leaf = n.children[path[-1]] = {}
            n.keys.add(path[-1])
        old = leaf.get(t, 0)
        new = old + w
        if new:
            leaf[t] = new
        else:
            del leaf[t]
        change = (new != 0) - (old != 0)
        if change:
            for nd in nodes:
                nd.count += change
        if not leaf:
            del n.children[path[-1]]
            n.keys.remove(path[-1])
            for depth in range(len(nodes) - 1, 0, -1):
                if nodes[depth].count:
                    break
                parent = nodes[depth - 1]
                del parent.children[path[depth - 1]]
                parent.keys.remove(path[depth - 1])


@dataclass
class AtomPlan:
    """How one atom takes part: its trie, its join variables' levels, its payload layout."""

    index: int
    label: str
    trie: Trie
    levels: list[int]  # global level of each of the atom's join variables, in trie order
    vars: tuple[int, ...]  # the atom's variables (the layout of its payload tuples)

    def prefix(self, context: tuple, upto: int) -> tuple:
        """The atom's trie prefix for its join variables at levels below ``upto``."""
        return tuple(context[d] for d in self.levels if d < upto)


@dataclass
class Counters:
    """Iterator operations (the trace's steps) and maintenance work, cumulative."""

    opens: int = 0
    seeks: int = 0
    nexts: int = 0
    regions: int = 0
    surgeries: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass
class Region:
    """A part of the search space to re-evaluate: level, bound prefix, key interval."""

    level: int
    context: tuple
    lo: tuple
    hi: tuple


@dataclass
class _Intervals:
    los: list = field(default_factory=list)
    his: list = field(default_factory=list)


def _covering(iv: _Intervals, x: tuple) -> tuple[tuple, tuple] | None:
    """The union of the intervals containing ``x`` (they are contiguous in the lists)."""
    i = bisect_left(iv.his, x)
    lo = hi = None
    while i < len(iv.los) and iv.los[i] <= x:
        if lo is None:
            lo = iv.los[i]
        hi = iv.his[i]
        i += 1
    return None if lo is None else (lo, hi)


def _splice(iv: _Intervals, lo: tuple, hi: tuple, los: list, his: list) -> None:
    """Replace the intervals inside [lo, hi] by new ones; ones crossing a bound are cut."""
    i = bisect_left(iv.his, lo)
    j = bisect_right(iv.los, hi)
    new_los, new_his = list(los), list(his)
    if i < j:
        if iv.los[i] < lo:
            new_los.insert(0, iv.los[i])
            new_his.insert(0, lo)
        if iv.his[j - 1] > hi:
            new_los.append(hi)
            new_his.append(iv.his[j - 1])
    iv.los[i:j] = new_los
    iv.his[i:j] = new_his


class LeapfrogJoin:
    """A maintained leapfrog triejoin over atoms; emits the delta of projected assignments."""

    def __init__(self, edges: Sequence[tuple[int, ...]], labels: Sequence[str],
                 out: tuple[int, ...], shared_tries: Sequence[object] | None = None,
                 order: list[int] | None = None):
        self.order = order if order is not None else variable_order(edges)
        level_of = {v: d for d, v in enumerate(self.order)}
        self.atoms: list[AtomPlan] = []
        tries: dict[object, Trie] = {}
        for i, e in enumerate(edges):
            jv = sorted((v for v in e if v in level_of), key=level_of.__getitem__)
            positions = tuple(e.index(v) for v in jv)
            sig = (shared_tries[i], positions) if shared_tries is not None else (i,)
            trie = tries.get(sig)
            if trie is None:
                trie = tries[sig] = Trie(positions)
            self.atoms.append(AtomPlan(i, labels[i], trie, [level_of[v] for v in jv], tuple(e)))
        # each trie once, with the atoms reading it (they share its changes and surgeries)
        self.trie_users: list[tuple[Trie, list[AtomPlan]]] = []
        for trie in tries.values():
            self.trie_users.append((trie, [a for a in self.atoms if a.trie is trie]))
        self.at_level: list[list[AtomPlan]] = [
            [a for a in self.atoms if d in a.levels] for d in range(len(self.order))]
        sources = []
        for v in out:
            if v in level_of:
                sources.append(("b", level_of[v]))
            else:
                a = next(a for a in self.atoms if v in a.vars)
                sources.append(("p", a.index, a.vars.index(v)))
        self._out_sources = sources
        self.counters = Counters()
        # context (bound prefix of the order) -> atom index -> sensitivity intervals
        self.sens: dict[tuple, dict[int, _Intervals]] = {}
        # (atom, trie depth, atom prefix) -> contexts holding that atom's intervals there
        self.by_prefix: dict[tuple, set[tuple]] = {}
        self.last_regions: list[Region] = []
        # (atom label, surgery key, covering interval or None) of the last update
        self.last_contributions: list[tuple[str, object, tuple | None]] = []

    # ------------------------------------------------------------ evaluation
    def _leapfrog(self, level: int, context: tuple, nodes: list, lo: tuple, hi: tuple,
                  record: bool, forget: bool, emit: Callable[[tuple, list], None]) -> None:
        """Leapfrog join at ``level`` for keys in [lo, hi]; recurse or emit per key.

        ``nodes[i]`` is where atom i stands in its trie under ``context`` (a node, its leaf
        once all its keys are bound, or None); binding a key steps the level's atoms down.
        ``record`` stores the iterator moves as sensitivity intervals; ``forget`` drops the
        intervals recorded below each bound key (the old trace of a re-evaluated region)."""
        atoms = self.at_level[level]
        counters = self.counters
        iters = []
        for a in atoms:
            node = nodes[a.index]
            iters.append(node.keys if node is not None else ())
        n = len(iters)
        pos = [0] * n
        trace: list[tuple[list, list]] = [([], []) for _ in range(n)]

        def land(k: int, start: tuple, p: int) -> object | None:
            """Record [start, landing] for iterator k at position p; the key, or None past hi."""
            keys = iters[k]
            pos[k] = p
            if p < len(keys):
                key = keys[p]
                w = (1, key)
                if w > hi:
                    if record:
                        trace[k][0].append(start)
                        trace[k][1].append(hi)
                    return None
                if record:
                    trace[k][0].append(start)
                    trace[k][1].append(w)
                return key
            if record:
                trace[k][0].append(start)
                trace[k][1].append(hi)
            return None

        current = []
        done = False
        for k in range(n):
            counters.opens += 1
            keys = iters[k]
            p = 0 if lo == NEG else keys.bisect_left(lo[1]) if keys else 0
            key = land(k, lo, p)
            current.append(key)
            if key is None:
                done = True
        last = level == len(self.order) - 1
        while not done:
            top = max(current)
            k = min(range(n), key=current.__getitem__)
            if current[k] == top:
                child = (*context, top)
                below = list(nodes)
                for a in atoms:
                    below[a.index] = nodes[a.index].children[top]
                if last:
                    emit(child, below)
                else:
                    if forget:
                        self._forget(child)
                    self._leapfrog(level + 1, child, below, NEG, POS, record, forget, emit)
                counters.nexts += 1
                key = land(0, (1, top), pos[0] + 1)
                current[0] = key
            else:
                counters.seeks += 1
                keys = iters[k]
                key = land(k, (1, top), keys.bisect_left(top))
                current[k] = key
            if key is None:
                done = True
        if record:
            self._store(level, context, lo, hi, trace)

    def _store(self, level: int, context: tuple, lo: tuple, hi: tuple, trace) -> None:
        per_atom = self.sens.get(context)
        if per_atom is None:
            per_atom = self.sens[context] = {}
        for a, (los, his) in zip(self.at_level[level], trace, strict=True):
            iv = per_atom.get(a.index)
            if iv is None:
                iv = per_atom[a.index] = _Intervals()
                depth = a.levels.index(level)
                key = (a.index, depth, a.prefix(context, level))
                self.by_prefix.setdefault(key, set()).add(context)
            _splice(iv, lo, hi, los, his)

    def _forget(self, context: tuple) -> None:
        """Drop the intervals recorded at a context (its subtree is being re-evaluated)."""
        per_atom = self.sens.pop(context, None)
        if not per_atom:
            return
        level = len(context)
        for a in self.at_level[level]:
            if a.index in per_atom:
                key = (a.index, a.levels.index(level), a.prefix(context, level))
                contexts = self.by_prefix.get(key)
                if contexts is not None:
                    contexts.discard(context)
                    if not contexts:
                        del self.by_prefix[key]

    def _assignments(self, region: Region, record: bool, forget: bool) -> Delta:
        """The projected satisfying assignments inside a region, with multiplicities."""
        out: Delta = {}
        sources = self._out_sources
        atoms = self.atoms

        def emit(binding: tuple, leaves: list) -> None:
            payloads = []
            for leaf in leaves:
                if not leaf:
                    return
                payloads.append(list(leaf.items()))
            combos: list[tuple[list, int]] = [([], 1)]
            for items in payloads:
                combos = [([*ts, t], w * wt) for ts, w in combos for t, wt in items]
            for ts, w in combos:
                row = tuple(binding[s[1]] if s[0] == "b" else ts[s[1]][s[2]] for s in sources)
                add_into(out, row, w)

        nodes = [a.trie.below(a.prefix(region.context, region.level)) for a in atoms]
        if not self.order:  # no join variable at all: a product of payloads
            emit((), nodes)
        else:
            self._leapfrog(region.level, region.context, nodes, region.lo, region.hi, record,
                           forget, emit)
        return out

    # ------------------------------------------------------------ maintenance
    def build(self, deltas: dict[int, Delta]) -> Delta:
        """Load the first contents (one region: everything) and return the full result."""
        return self.update(deltas, initial=True)

    def _surgeries(self, deltas: dict[int, Delta]) -> list[tuple[AtomPlan, int, tuple, object]]:
        """Tree-surgery points per atom: (atom, trie depth, prefix, key) of each branch that
        appears or disappears, or of a leaf whose payload changes (section 4.2.1)."""
        points: list[tuple[AtomPlan, int, tuple, object]] = []
        for trie, users in self.trie_users:
            delta = deltas.get(users[0].index)
            if not delta or not trie.depth:
                continue
            net: dict[tuple, int] = {}
            walked = []
            for t, w in delta.items():
                if not w:
                    continue
                path = trie.path(t)
                counts, old = trie.presence(t, path)
                walked.append((path, counts))
                change = (old + w != 0) - (old != 0)
                if change:
                    for j in range(1, len(path) + 1):
                        net[path[:j]] = net.get(path[:j], 0) + change
            seen = set()
            for path, counts in walked:
                depth = len(path)
                for j, before in enumerate(counts, start=1):
                    if (before == 0) != (before + net.get(path[:j], 0) == 0):
                        depth = j
                        break
                point = (depth, path[:depth])
                if point in seen:
                    continue
                seen.add(point)
                for a in users:
                    points.append((a, depth - 1, path[:depth - 1], path[depth - 1]))
        return points

    def _oracle(self, deltas: dict[int, Delta]) -> list[Region]:
        """The change oracle: regions from surgeries matched against sensitivity intervals."""
        self.last_contributions = []
        if any(deltas.get(a.index) and not a.trie.depth for a in self.atoms):
            return [Region(0, (), NEG, POS)]
        found: dict[tuple, list[tuple[tuple, tuple]]] = {}
        for a, depth, prefix, key in self._surgeries(deltas):
            self.counters.surgeries += 1
            x = (1, key)
            contexts = self.by_prefix.get((a.index, depth, prefix), ())
            matched = None
            for context in contexts:
                iv = self.sens[context][a.index]
                hit = _covering(iv, x)
                if hit is not None:
                    found.setdefault(context, []).append(hit)
                    matched = hit
            self.last_contributions.append((a.label, key, matched))
        regions = []
        for context, spans in found.items():
            spans.sort()
            lo, hi = spans[0]
            for s_lo, s_hi in spans[1:]:
                if s_lo <= hi:
                    hi = max(hi, s_hi)
                else:
                    regions.append(Region(len(context), context, lo, hi))
                    lo, hi = s_lo, s_hi
            regions.append(Region(len(context), context, lo, hi))
        regions.sort(key=lambda r: r.level)
        kept: list[Region] = []
        by_context: dict[tuple, list[Region]] = {}
        for r in regions:
            covered = False
            for d in range(r.level):
                for outer in by_context.get(r.context[:d], ()):
                    if outer.lo <= (1, r.context[d]) <= outer.hi:
                        covered = True
                        break
                if covered:
                    break
            if not covered:
                kept.append(r)
                by_context.setdefault(r.context, []).append(r)
        return kept

    def update(self, deltas: dict[int, Delta], initial: bool = False) -> Delta:
        """Apply per-atom deltas; return the delta of the projected join."""
        deltas = {i: d for i, d in deltas.items() if d}
        if not deltas and not initial:
            self.last_regions = []
            return {}
        regions = [Region(0, (), NEG, POS)] if initial else self._oracle(deltas)
        self.last_regions = regions
        self.counters.regions += len(regions)
        old: Delta = {}
        if not initial:
            for r in regions:
                for t, w in self._assignments(r, record=False, forget=True).items():
                    add_into(old, t, w)
        for trie, users in self.trie_users:
            for t, w in deltas.get(users[0].index, {}).items():
                if w:
                    trie.apply(t, w)
        out: Delta = {}
        for r in regions:
            for t, w in self._assignments(r, record=True, forget=False).items():
                add_into(out, t, w)
        for t, w in old.items():
            add_into(out, t, -w)
        return out

    def sensitivity(self, atom: int, context: tuple = ()) -> list[tuple[object, object]]:
        """An atom's sensitivity intervals at a context, with None for an infinite end."""
        iv = self.sens.get(context, {}).get(atom)
        if iv is None:
            return []

        def value(b: tuple) -> object:
            return None if len(b) == 1 else b[1]
        return [(value(lo), value(hi)) for lo, hi in zip(iv.los, iv.his, strict=True)]

    def size(self) -> int:
        """Stored tuples plus stored sensitivity intervals."""
        tuples = sum(self._trie_size(t) for t, _ in self.trie_users)
        intervals = sum(len(iv.los) for per in self.sens.values() for iv in per.values())
        return tuples + intervals

    @staticmethod
    def _trie_size(trie: Trie) -> int:
        if not trie.depth:
            return len(trie.leaf_root)
        return trie.root.count


class LeapfrogCore(Operator):
    """A cyclic (or any) conjunctive core maintained by :class:`LeapfrogJoin`."""

    def __init__(self, join: LeapfrogJoin, sources: list[Source], order_labels: list[str]):
        self.join = join
        self.sources = sources
        self.order_labels = order_labels
        self._built = False

    def step(self, batch: Batch) -> Delta:
        deltas = {i: s.step(batch) for i, s in enumerate(self.sources)
                  if s.relation in batch}
        if not self._built:
            self._built = True
            return self.join.build(deltas)
        return self.join.update(deltas)

    def describe(self) -> list[str]:
        lines = ["leapfrog triejoin, variable order " + ", ".join(self.order_labels)]
        for a in self.join.atoms:
            lines.append(f"  trie {a.label} on "
                         + (", ".join(self.order_labels[d] for d in a.levels) or "(no join variable)"))
        return lines

    def state_size(self) -> int:
        return self.join.size()

    def counters(self) -> dict[str, int]:
        return self.join.counters.as_dict()

