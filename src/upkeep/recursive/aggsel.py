"""Aggregate selection under insertions and deletions (Algorithm 3).

``recursive-views-absorption-provenance.txt`` section VII: when the recursive result is only
read through ``MIN``/``MAX`` per group, a tuple that is not the best of its group for any
aggregate cannot contribute, and need not enter the fixpoint.  Every tuple that arrives
is kept in its group's buffer ``H`` with its provenance (deletions need the runners-up);
only the best per aggregate (``B``) is passed on.  When a best tuple loses its last
derivation, the next best in the buffer takes its place.

Two refinements over the pseudocode: a new derivation of a tuple that is already a best
is passed on as well, so the fixpoint's provenance of that tuple stays complete; and a
tuple with a NULL aggregated value is never pruned.  MIN and MAX skip NULL, but the rules
need not treat it as the worst value: ``LEAST(NULL, e)`` is ``e``, so under ``MAX`` a NULL
tuple can derive a better value than its group's best does (the selection's "a worse tuple
derives only worse tuples" holds for values, not for NULL).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..expressions import nan_order


@dataclass(frozen=True)
class SelectionSpec:
    """Group key positions and ``(position, "min" | "max")`` per aggregate."""

    keys: tuple[int, ...]
    aggregates: tuple[tuple[int, str], ...]

    def describe(self, columns: list[str]) -> str:
        aggs = ", ".join(f"{kind.upper()}({columns[p]})" for p, kind in self.aggregates)
        keys = ", ".join(columns[k] for k in self.keys) or "()"
        return f"aggregate selection: keep the best tuple per ({keys}) for {aggs}"


def _better(a: object, b: object, kind: str) -> bool:
    """Whether ``a`` beats ``b`` for MIN / MAX, ordered as DuckDB orders them: NULL never
    wins, and NaN is above every number (Python's ``<`` is False for it either way)."""
    if a is None:
        return False
    if b is None:
        return True
    a, b = nan_order(a), nan_order(b)
    return a < b if kind == "min" else a > b


class AggregateSelection:
    """The buffer ``H``, provenance ``P`` and bests ``B`` of Algorithm 3, for one relation."""

    def __init__(self, spec: SelectionSpec, false):
        self.spec = spec
        self.false = false
        self.groups: dict[tuple, dict[tuple, object]] = {}  # H with P: key -> tuple -> pv
        self.best: dict[tuple, list[tuple | None]] = {}  # B
        self.pruned = 0

    def key(self, t: tuple) -> tuple:
        return tuple(t[k] for k in self.spec.keys)

    def is_best(self, t: tuple) -> bool:
        """Whether ``t`` is passed on: a best of its group, or never pruned (NULL) while
        it has a derivation (a NULL tuple whose last one died is no longer held)."""
        key = self.key(t)
        if self._unranked(t):
            return t in self.groups.get(key, ())
        return t in self.best.get(key, ())

    def _unranked(self, t: tuple) -> bool:
        """A NULL aggregated value: outside the ranking, always passed on (module doc)."""
        return any(t[pos] is None for pos, _ in self.spec.aggregates)

    def insert(self, t: tuple, pv) -> tuple[list[tuple], object | None]:
        """A derivation arrives: (tuples no longer best anywhere, provenance to pass on for
        ``t`` or None if ``t`` is pruned or the derivation absorbed)."""
        key = self.key(t)
        group = self.groups.setdefault(key, {})
        old = group.get(t, self.false)
        new = old | pv
        if new == old:
            return [], None
        group[t] = new
        best = self.best.setdefault(key, [None] * len(self.spec.aggregates))
        if self._unranked(t):
            return [], new & ~old
        displaced = []
        for i, (pos, kind) in enumerate(self.spec.aggregates):
            b = best[i]
            if b is None or (b != t and _better(t[pos], b[pos], kind)):
                best[i] = t
                if b is not None:
                    displaced.append(b)
        demoted = [b for b in dict.fromkeys(displaced) if b not in best]
        if t in best:
            return demoted, new & ~old
        self.pruned += 1
        return demoted, None

    def restrict(self, t: tuple, restrict) -> tuple[bool, list[tuple]]:
        """Apply a deletion to ``t``'s provenance: (whether ``t`` died, groups' new bests)."""
        key = self.key(t)
        group = self.groups.get(key)
        if group is None or t not in group:
            return False, []
        pv = restrict(group[t])
        if pv != self.false:
            group[t] = pv
            return False, []
        del group[t]
        best = self.best[key]
        if not group:
            del self.groups[key]
            del self.best[key]
            return True, []
        promoted = []
        for i, (pos, kind) in enumerate(self.spec.aggregates):
            if best[i] == t:
                nb = None
                for c in group:
                    if self._unranked(c):
                        continue
                    if nb is None or _better(c[pos], nb[pos], kind):
                        nb = c
                best[i] = nb
                if nb is not None:
                    promoted.append(nb)
        return True, list(dict.fromkeys(promoted))

    def provenance(self, t: tuple):
        return self.groups[self.key(t)][t]

    def annotations(self):
        for group in self.groups.values():
            yield from group.values()

    def __len__(self) -> int:
        return sum(len(g) for g in self.groups.values())
