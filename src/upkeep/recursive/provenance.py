"""Absorption provenance: PosBool annotations kept as reduced ordered BDDs.

``recursive-views-absorption-provenance.txt`` section IV: a base tuple's annotation is a
variable, a join conjoins, a union or projection disjoins (Figure 6), and the ROBDD's
canonical form applies absorption (``a & (a | b) = a``) for free.  A deleted base tuple is
handled by restricting its variable to false.  Section VI: BDD size depends on the
variable order, so the order is a policy: CUDD's dynamic sifting, the paper's depth-first
order of the edge relation, or plain arrival order.

The BDD library is ``dd``: its compiled CUDD binding when the wheel ships it, else the
pure-Python ``dd.autoref`` with the same API.
"""

from __future__ import annotations

import atexit
import ctypes
import weakref
from collections.abc import Iterable

ORDERINGS = ("sifting", "dfs", "arrival")
NODE_BYTES = 12  # a shipped BDD node: variable id, low and high references, 4 bytes each


# A CUDD manager must outlive every BDD that refers to it, but the garbage collector frees a
# cycle of objects in any order.  So a manager whose PosBool is gone is parked here and
# dropped once no BDD refers to it any more (``len(manager)`` counts referenced nodes).
_RETIRED: list = []
_LIVE: weakref.WeakSet = weakref.WeakSet()  # every PosBool not yet collected


def _sweep_retired() -> None:
    _RETIRED[:] = [m for m in _RETIRED if len(m) > 0]


@atexit.register
def _keep_managers_at_exit() -> None:
    """At exit the interpreter frees what is left in any order: a CUDD manager freed
    before a BDD that refers to it raises in its dealloc ("Still n nodes referenced",
    printed as "Error in sys.excepthook") and the BDD's dereference then reads freed
    memory.  The process is ending, so every manager is kept: its memory goes with it."""
    for manager in [*_RETIRED, *(pb.bdd for pb in list(_LIVE))]:
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(manager))


def _backend():
    try:
        from dd import cudd
        return cudd, True
    except ImportError:  # pragma: no cover - the wheel ships CUDD on the platforms we test
        from dd import autoref
        return autoref, False


class PosBool:
    """A BDD manager whose variables stand for base rows ``(relation, row)``."""

    def __init__(self, ordering: str = "sifting"):
        if ordering not in ORDERINGS:
            raise ValueError(f"unknown BDD ordering {ordering!r}; choose one of {ORDERINGS}")
        self.ordering = ordering
        backend, self.cudd = _backend()
        self._module = backend
        self.bdd = backend.BDD()
        _sweep_retired()
        weakref.finalize(self, _RETIRED.append, self.bdd)
        _LIVE.add(self)
        self.bdd.configure(reordering=ordering == "sifting")
        self.false = self.bdd.false
        self.true = self.bdd.true
        self._var_of: dict[tuple[str, tuple], str] = {}
        self._row_of: dict[str, tuple[str, tuple]] = {}
        self._free: list[str] = []
        self._declared = 0

    # ------------------------------------------------------------ variables
    def variable(self, relation: str, row: tuple):
        """A fresh variable for a base row (a released name is reused)."""
        if self._free:
            name = self._free.pop()
        else:
            name = f"v{self._declared}"
            self._declared += 1
            self.bdd.add_var(name)
        self._var_of[(relation, row)] = name
        self._row_of[name] = (relation, row)
        return self.bdd.var(name)

    def name_of(self, relation: str, row: tuple) -> str:
        return self._var_of[(relation, row)]

    def known(self, relation: str, row: tuple) -> str | None:
        """The row's variable name, or None if this manager has never seen the row."""
        return self._var_of.get((relation, row))

    def var_for(self, relation: str, row: tuple):
        """The row's variable, declared on first sight (provenance received from another
        partition names base rows this manager may not know yet)."""
        name = self._var_of.get((relation, row))
        return self.variable(relation, row) if name is None else self.bdd.var(name)

    def row_of(self, name: str) -> tuple[str, tuple]:
        return self._row_of[name]

    def release(self, names: Iterable[str]) -> None:
        """Forget deleted rows' variables; call once nothing refers to them any more."""
        for name in names:
            self._var_of.pop(self._row_of.pop(name), None)
            self._free.append(name)

    def release_all(self) -> None:
        self.release(list(self._row_of))

    @property
    def live_variables(self) -> int:
        return len(self._row_of)

    # ------------------------------------------------------------ operations
    def restrict(self, u, names: Iterable[str]):
        """``u`` with the given variables set to false (section IV-B, Algorithm 1 line 30)."""
        return self.bdd.let(dict.fromkeys(names, False), u)

    def support(self, u) -> set[str]:
        return self.bdd.support(u)

    def nodes(self, roots: list) -> int:
        """Distinct BDD nodes under ``roots`` (shared nodes counted once)."""
        roots = [u for u in roots if u != self.false and u != self.true]
        if not roots:
            return 0
        if self.cudd:
            return self._module.count_nodes(roots)
        return sum(u.dag_size for u in roots)  # pragma: no cover

    def to_wire(self, u) -> tuple[list[tuple[str, tuple]], list[tuple[int, int, int]], int]:
        """``u`` as plain data another manager can rebuild (provenance shipped between
        partitions, section III): the base rows it mentions, its nodes as ``(row index,
        low, high)`` children first (0 is false, 1 true, ``k >= 2`` node ``k - 2``), and the
        root.  CUDD's complemented edges are resolved into plain cofactors."""
        memo: dict[int, int] = {}
        rows: list[tuple[str, tuple]] = []
        index_of: dict[str, int] = {}
        nodes: list[tuple[int, int, int]] = []
        false, true = self.false, self.true

        def ref(f) -> int | None:
            if f == false:
                return 0
            if f == true:
                return 1
            return memo.get(int(f))

        stack = [u]
        while stack:
            f = stack[-1]
            if ref(f) is not None:
                stack.pop()
                continue
            low, high = f.low, f.high
            if getattr(f, "negated", False):
                low, high = ~low, ~high
            r_low, r_high = ref(low), ref(high)
            if r_low is None or r_high is None:
                stack.extend(x for x, r in ((low, r_low), (high, r_high)) if r is None)
                continue
            name = f.var
            i = index_of.get(name)
            if i is None:
                i = index_of[name] = len(rows)
                rows.append(self._row_of[name])
            memo[int(f)] = len(nodes) + 2
            nodes.append((i, r_low, r_high))
            stack.pop()
        return rows, nodes, ref(u)

    def from_wire(self, wire: tuple) -> object:
        """The BDD :meth:`to_wire` gave, in this manager."""
        rows, nodes, root = wire
        variables = [self.var_for(rel, row) for rel, row in rows]
        built = [self.false, self.true]
        for i, low, high in nodes:
            built.append(self.bdd.ite(variables[i], built[high], built[low]))
        return built[root]

    def reorder(self, first: list[str]) -> None:
        """Put ``first`` at the top levels in this order, the other variables below them."""
        levels = self.bdd.var_levels
        if all(levels[name] == i for i, name in enumerate(first)):
            return  # already in place: skip CUDD's shuffle, the costly part
        chosen = set(first)
        rest = sorted((n for n in levels if n not in chosen), key=levels.get)
        self.bdd.reorder({name: i for i, name in enumerate([*first, *rest])})

    def products(self, u, limit: int = 1000) -> tuple[list[list[tuple[str, tuple]]], bool]:
        """The minimal sum of products of a monotone function: its minimal true sets of
        base rows (prime implicants).  Returns (products, truncated)."""
        memo: dict = {}
        truncated = False

        def primes(f) -> list[frozenset[str]]:
            nonlocal truncated
            if f == self.true:
                return [frozenset()]
            if f == self.false:
                return []
            hit = memo.get(f)
            if hit is not None:
                return hit
            x = f.var
            p0 = primes(self.bdd.let({x: False}, f))
            p1 = primes(self.bdd.let({x: True}, f))
            out = list(p0)
            for m in p1:
                if not any(q <= m for q in p0):
                    out.append(m | {x})
            if len(out) > limit:
                out, truncated = out[:limit], True
            memo[f] = out
            return out

        sets = sorted(primes(u), key=lambda s: (len(s), sorted(s)))
        return [sorted((self._row_of[n] for n in s), key=repr) for s in sets], truncated
