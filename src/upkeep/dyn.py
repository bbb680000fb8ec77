"""The (T, N)-representation of Dynamic Yannakakis (``dynamic-yannakakis-iedyn.txt`` 3.2).

For every GJT node n it keeps the reduct GMR ``rho_n`` (a dict tuple -> weight) and hash
indexes on subsets of its variables: the parent index P_n used by enumeration and the
sibling index S_n used by UPDATE (Algorithm 1, line 21).  Sibling indexes also keep the
total weight per key, so that when the parent's variables are covered by the updated
child (a guard), ``pi_var(p)(rho_m |x| Delta_n)`` costs O(1) per delta tuple: this is what
makes updates O(|u|) for simple trees, i.e. q-hierarchical queries (Theorem 3.4).

Weights are any ring elements supporting ``+``, ``*`` and truthiness (``int`` for Z-sets,
:class:`upkeep.aggregates.DualWeight` for aggregates): the operators are written once.

Theta predicates on GJT edges (section 4, IEDyn) are served by :mod:`upkeep.theta`: the
indexes of a node whose edge carries an inequality keep each hash bucket sorted on the
inequality's side, so enumeration walks a contiguous run and UPDATE's semijoin is a range sum.

Push mode (section 5, "delta enumeration"): UPDATE first propagates the change through the
nodes outside N, which yields the deltas of the frontier of N; the output tuples that can
change are exactly those extending a touched frontier tuple, so they are enumerated
anchored at those tuples before and after the N part is updated, and subtracted.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from dataclasses import replace
from operator import itemgetter

from .dyn_loops import anchor_key_vars, combiner, contexter, emitter, generate
from .gc_pause import StateDict
from .gjt import GJTPair, Node
from .theta import BoxIndex, RangeAccess, RangeIndex, ThetaPredicate, range_access
from .zset import add_into

Compile = Callable[[object, list[int]], Callable[[tuple], object]]


def key_function(positions: tuple[int, ...], width: int | None = None
                 ) -> Callable[[tuple], tuple]:
    """A function extracting ``positions`` of a tuple as a tuple (also for 0 or 1 position).

    When the positions are all of a ``width``-tuple in order, the tuple itself is the key:
    the node above keeps the same tuple object instead of an equal copy (the reducts of a
    q-hierarchical tree hold one key per group in every node)."""
    if width is not None and positions == tuple(range(width)):
        return _identity
    if not positions:
        return lambda t: ()
    if len(positions) == 1:
        (p,) = positions
        return lambda t: (t[p],)
    return itemgetter(*positions)


def _identity(t: tuple) -> tuple:
    return t


_FIRST = itemgetter(0)


#: tuples a list bucket of an index holds before it becomes a dict (an order's line items
#: fit; :class:`Index` here, ``operators._IndexedState`` for the general strategy)
LIST_BUCKET_MAX = 8


class Index:
    """Hash index of a node's reduct on a subset of its variables, optionally with totals.

    A bucket holding one tuple is stored as the 1-tuple ``(t,)``, 2 to
    :data:`LIST_BUCKET_MAX` tuples as a list, more as an insertion-ordered dict: most join
    keys are unique or have a few tuples (an order's line items), and a dict per key would
    dominate the representation's memory and hash each wide tuple once more.  A tuple is
    inserted only when new to rho and removed only when it leaves it, so a list holds no
    tuple twice and its ``remove`` finds the one there.

    With totals, :meth:`total` gives the summed weight of a key's tuples, what a sibling's
    delta is multiplied by (``_make_push``).  Weights of any ring keep the totals
    themselves in ``totals``.  Integer weights (``counted``: a join view's, a ``COUNT(*)``
    view's) keep only each key's *excess*, its total less its number of tuples, and only
    where it is not 0: a base table's tuples nearly all weigh 1, so a bucket's length is
    its total and ``totals`` stays empty, where a dict of totals costs a large dict's
    probe per change and about 56 bytes per key (TPC-H FQ1 under dyn: two such dicts of
    1.5 M keys at SF 1).
    """

    __slots__ = ("key", "buckets", "totals", "counted")

    def __init__(self, positions: tuple[int, ...], with_totals: bool, width: int | None = None,
                 counted: bool = False):
        self.key = key_function(positions, width)
        self.buckets: dict[tuple, tuple | list[tuple] | dict[tuple, None]] = StateDict()
        self.totals: dict[tuple, object] | None = StateDict() if with_totals else None
        self.counted = counted and with_totals

    def insert(self, t: tuple, w: object) -> None:
        k = self.key(t)
        buckets = self.buckets
        bucket = dict.get(buckets, k)
        if bucket is None:
            buckets[k] = (t,)
        else:
            kind = type(bucket)
            if kind is tuple:
                buckets[k] = [bucket[0], t]
            elif kind is list:
                if len(bucket) < LIST_BUCKET_MAX:
                    bucket.append(t)
                else:
                    grown = dict.fromkeys(bucket)
                    grown[t] = None
                    buckets[k] = grown
            else:
                bucket[t] = None
        if self.totals is not None:
            if not self.counted:
                self.adjust(k, w)
            elif w != 1:  # counted: the key has one more tuple, of weight w
                self.adjust(k, w - 1)

    def remove(self, t: tuple, w: object) -> None:
        k = self.key(t)
        buckets = self.buckets
        bucket = dict.get(buckets, k)
        kind = type(bucket)
        if kind is tuple:
            dict.pop(buckets, k)
        else:
            if kind is list:
                bucket.remove(t)
            else:
                del bucket[t]
            if len(bucket) == 1:
                buckets[k] = (next(iter(bucket)),)
        if self.totals is not None:
            if not self.counted:
                self.adjust(k, w)
            elif w != -1:  # counted: the key has one tuple fewer, which weighed -w
                self.adjust(k, w + 1)

    @property
    def weighted(self) -> bool:
        """Whether a change of a tuple's weight alone must reach this index."""
        return self.totals is not None

    def reweight(self, t: tuple, w: object) -> None:
        self.adjust(self.key(t), w)

    def total(self, k: tuple) -> object | None:
        """The summed weight of key k's tuples; None when it has none, or they sum to 0."""
        if not self.counted:
            return dict.get(self.totals, k)
        bucket = dict.get(self.buckets, k)
        if bucket is None:
            return None
        total = len(bucket)  # (a 1-tuple bucket holds one tuple)
        excess = self.totals
        if excess:
            total += dict.get(excess, k, 0)
        return total if total else None

    def adjust(self, k: tuple, w: object) -> None:
        """Add w to key k's entry of ``totals``, dropping the entry when it becomes 0."""
        totals = self.totals
        old = dict.get(totals, k)
        new = w if old is None else old + w
        if new:
            totals[k] = new
        else:
            del totals[k]


class NodeState:
    """Runtime state of one GJT node."""

    __slots__ = ("node", "node_id", "parent_id", "rho", "indexes", "weighted", "push", "in_n",
                 "frontier", "other_weights", "counted")

    def __init__(self, node: Node):
        self.node = node
        self.node_id = node.id
        self.parent_id = None if node.parent is None else node.parent.id
        self.rho: dict[tuple, object] = StateDict()
        self.indexes: dict[tuple, Index | RangeIndex] = {}
        self.weighted: list[Index | RangeIndex] = []  # the indexes that keep weights
        # the node's push into its parent's delta (None at the root): an EquiPush, or a
        # closure ``push(delta, parent delta)`` where the parent has predicates
        self.push: EquiPush | Callable[[dict, dict], None] | None = None
        self.in_n = False
        self.frontier = False
        self.other_weights: list[int] | None = None  # see count_other_weights
        self.counted = False  # integer weights: indexes keep counted totals (Index)

    def index(self, key_vars: tuple[int, ...], with_totals: bool = False) -> Index:
        idx = self.indexes.get(key_vars)
        if idx is None or (with_totals and idx.totals is None):
            positions = tuple(self.node.vars.index(v) for v in key_vars)
            idx = self._register(key_vars, Index(positions, with_totals, len(self.node.vars),
                                                 self.counted))
        return idx

    def range_index(self, key_vars: tuple[int, ...], access: RangeAccess,
                    compile_: Compile) -> RangeIndex | BoxIndex:
        """The index of rho on ``key_vars`` with buckets sorted on ``access.indexed`` (and a
        max/min tree on ``access.cross.indexed``, if set)."""
        layout = list(self.node.vars)
        cross = access.cross
        name = ("range", key_vars, access.indexed.sql()) if cross is None else (
            "box", key_vars, access.indexed.sql(), cross.indexed.sql())
        idx = self.indexes.get(name)
        if idx is None:
            key = key_function(tuple(self.node.vars.index(v) for v in key_vars))
            first = compile_(access.indexed, layout)
            idx = self._register(name, RangeIndex(key, first) if cross is None else
                                 BoxIndex(key, first, compile_(cross.indexed, layout)))
        return idx

    def _register(self, name: tuple, idx):
        """Fill a new index from rho and keep it maintained from now on."""
        for t, w in self.rho.items():
            idx.insert(t, w)
        self.indexes[name] = idx
        self.weighted = [i for i in self.indexes.values() if i.weighted]
        return idx

    def count_other_weights(self) -> list[int]:
        """A one-item list holding how many tuples of rho have a weight other than 1, kept
        up to date from now on: the rows of a plain join view (:func:`dyn_loops.emitter`)
        read a frontier node's weights from rho only while it is not 0 (a wide tuple's hash
        costs more than the test).  A weight of another ring never equals 1, so it counts."""
        if self.other_weights is None:
            self.other_weights = [sum(1 for w in self.rho.values() if w != 1)]
        return self.other_weights

    def add(self, t: tuple, w: object) -> None:
        rho = self.rho
        if type(w) is int and w < 0:
            # a deleted tuple is hashed and found once: taken out, put back only if some
            # weight stays (setdefault then ``del`` hashed a wide tuple twice and compared
            # it twice with the stored one: 1k instructions of a TPC-H line item's delete).
            # Put back, it moves to the end of rho's order, as a tuple deleted and inserted
            # again always did: nothing reads that order for meaning
            old = dict.pop(rho, t, None)
            if old is not None:
                self._reweighted(t, w, old, True)
                return
            # absent: a tuple of negative weight, added as any new one
        n = len(rho)
        old = dict.setdefault(rho, t, w)  # a new tuple is hashed once (zset.add_into)
        if len(rho) != n:
            counted = self.other_weights
            if counted is not None and w != 1:
                counted[0] += 1
            for idx in self.indexes.values():
                idx.insert(t, w)
            return
        self._reweighted(t, w, old, False)

    def _reweighted(self, t: tuple, w: object, old: object, taken_out: bool) -> None:
        """Tuple t, of weight ``old`` in rho, changed by ``w``: rho and the indexes follow
        (``taken_out``: t is out of rho already, put back if weight stays)."""
        new = old + w
        counted = self.other_weights
        if counted is not None:
            if old != 1:
                counted[0] -= 1
            if new and new != 1:
                counted[0] += 1
        if new:
            self.rho[t] = new
            for idx in self.weighted:
                idx.reweight(t, w)
        else:
            if not taken_out:
                del self.rho[t]
            for idx in self.indexes.values():
                idx.remove(t, w)

    def process(self, deltas: dict[int, dict]) -> None:
        """UPDATE of this node (Algorithm 1, lines 17-23): its delta from ``deltas`` added
        to rho and its indexes, then pushed into the parent's delta."""
        delta = deltas.pop(self.node_id, None)
        if not delta:
            return
        for t, w in delta.items():
            if w:
                self.add(t, w)
        push = self.push
        if push is not None:
            pid = self.parent_id
            pd = deltas.get(pid)
            if pd is None:
                pd = deltas[pid] = {}
            if type(push) is EquiPush:  # (a direct call: dyn.pxd)
                equi = push
                equi.run(delta, pd)
            else:
                push(delta, pd)


#: how an :class:`EquiPush` finds the parent's tuples (C constants in the compiled module)
_PUSH_PROJECTION = 0  # no sibling: the delta tuple projected
_PUSH_LOOKUP = 1  # the sibling's tuple is a projection of the delta tuple: one rho lookup
_PUSH_TOTALS = 2  # the parent's tuple is a projection of the delta tuple: the sibling's total
_PUSH_JOIN = 3  # the delta tuple joined with each sibling tuple of its key


class EquiPush:
    """Algorithm 1, lines 20-23, for a node whose parent has no predicate:
    ``Delta_p += pi_var(p) (rho_m |x| Delta_n)`` with the sibling m joined on their shared
    variables (``papers/dynamic-yannakakis-iedyn.txt``, section 4).  An extension type
    (``dyn.pxd``) that :meth:`NodeState.process` calls directly, one per node; predicates'
    pushes stay closures (:meth:`Representation._make_theta_push`).

    ``make``: the parent's tuple from the delta tuple (a projection), or from the delta
    tuple and a sibling tuple (:func:`_combiner`, for ``_PUSH_JOIN``); ``key``: the shared
    variables of the delta tuple; ``rho_m``: the sibling's reduct; ``index``: the sibling's
    index on the shared variables (with totals for ``_PUSH_TOTALS``)."""

    __slots__ = ("kind", "make", "key", "rho_m", "index")

    def __init__(self, kind: int, make: Callable, key: Callable | None = None,
                 rho_m: dict | None = None, index: Index | None = None):
        self.kind = kind
        self.make = make
        self.key = key
        self.rho_m = rho_m
        self.index = index

    def run(self, delta: dict, pd: dict) -> None:
        """Add the parent's delta of ``delta`` into ``pd``."""
        kind = self.kind
        make = self.make
        key = self.key
        if kind == _PUSH_PROJECTION:
            for t, w in delta.items():
                _accumulate(pd, make(t), w)
        elif kind == _PUSH_LOOKUP:
            rho_m = self.rho_m
            for t, w in delta.items():
                weight = dict.get(rho_m, key(t))
                if weight is not None:
                    _accumulate(pd, make(t), w * weight)
        elif kind == _PUSH_TOTALS:
            index = self.index
            for t, w in delta.items():
                tot = index.total(key(t))
                if tot is not None:
                    _accumulate(pd, make(t), w * tot)
        else:
            rho_m = self.rho_m
            buckets = self.index.buckets
            for t, w in delta.items():
                bucket = dict.get(buckets, key(t))
                if bucket:
                    for s in bucket:
                        _accumulate(pd, make(t, s), w * rho_m[s])


def _combiner(n: Node, m: Node) -> Callable[[tuple, tuple], tuple]:
    """``(t, s) -> `` the parent's tuple from a tuple t of node n and s of its sibling m."""
    sources = [("t", n.vars.index(v)) if v in n.vars else ("s", m.vars.index(v))
               for v in n.parent.vars]
    return eval(  # noqa: S307 - generated from variable positions only
        "lambda t, s: (" + "".join(f"{src}[{i}], " for src, i in sources) + ")")




def _accumulate(target: dict, k: tuple, w: object) -> None:
    """Sum into a delta; zero sums stay (they are skipped when applied)."""
    old = target.get(k)
    target[k] = w if old is None else old + w


def _grouped(key: Callable[[tuple], tuple], items, tuple_of: Callable = _identity
             ) -> dict[tuple, list]:
    """Anchor tuples (or items holding them, ``tuple_of(item)`` the tuple) by the key their
    context depends on (:func:`anchor_key_vars`)."""
    groups: dict[tuple, list[tuple]] = {}
    for s in items:
        k = key(tuple_of(s))
        group = groups.get(k)
        if group is None:
            groups[k] = [s]
        else:
            group.append(s)
    return groups


class Representation:
    """A maintained (T, N)-rep: ``update`` (push or pull mode), ``enumerate``, ``weight``."""

    def __init__(self, pair: GJTPair, thetas: list[ThetaPredicate] = (),
                 compile_: Compile | None = None, int_weights: bool = False):
        """``int_weights``: every weight is an integer (a join view's, a dataflow's, a
        ``COUNT(*)`` view's), so the indexes keep counted totals (:class:`Index`); other
        rings (an aggregate view's :class:`~upkeep.aggregates.DualWeight`) keep sums."""
        self.pair = pair
        self.thetas = list(thetas)
        self.compile = compile_
        self._env_checks: dict[tuple[int, ...], Callable[[list], bool]] = {}
        self.width = max((v for n in pair.nodes for v in n.vars), default=-1) + 1
        for th in self.thetas:
            self.width = max(self.width, max(th.vars, default=-1) + 1)
        self.states = {n.id: NodeState(n) for n in pair.nodes}
        self.root_state = self.states[pair.root.id]
        for n in pair.nodes:
            st = self.states[n.id]
            st.in_n = n.id in pair.n_set
            st.counted = int_weights
        for f in pair.frontier():
            self.states[f.id].frontier = True
        post = list(reversed(pair.nodes))  # pre-order reversed: children before parents
        self.lower = [self.states[n.id] for n in post if n.id not in pair.n_set]
        self.upper = [self.states[n.id] for n in post if n.id in pair.n_set]
        self.leaf_of_atom = {n.atom: self.states[n.id] for n in pair.nodes if n.is_leaf}
        self.frontier = pair.frontier()
        for n in pair.nodes:
            if n.parent is not None:
                self.states[n.id].push = self._make_push(n)
        self._plan_of_n: dict[int, Callable] | None = None
        self._schedules: dict[frozenset[int] | int,
                              tuple[list[NodeState], list[NodeState]]] = {}
        self._anchored_by_id: dict[int, tuple[Callable, Callable, Callable]] = {}
        # anchor id -> (positions, its emitter): one select list per representation
        self._emitters: dict[int, tuple[tuple[int, ...], Callable]] = {}
        self.push_anchors = 0
        self.push_outputs = 0
        self.enum_work = [0]  # tuples visited by ENUM's walks (dyn_loops, dyn_walk)
        # predicates on edges between nodes of N: what membership checks beyond the frontier
        self._n_checks = [self._env_check(n.preds) for n in pair.nodes
                          if n.preds and n.id in pair.n_set]
        root = pair.root
        # when N is the root alone (q-hierarchical queries grouped by the join key), an
        # output tuple is a projection of a root tuple: push mode needs no enumeration
        self._root_out = (key_function(tuple(root.vars.index(v) for v in pair.out),
                                       len(root.vars))
                          if pair.n_set == {root.id} and set(pair.out) <= set(root.vars)
                          and not self._n_checks else None)
        # the parent indexes P_n of N's nodes are part of the representation (section 3.2):
        # built now and maintained by UPDATE, so ENUM never pays for building them
        self._plan()
        self._loops = generate(self, None)

    # ---------------------------------------------------------------- predicates
    def _check(self, preds: tuple[int, ...], layout: list[int]) -> Callable[[tuple], bool]:
        """All of ``preds`` hold (are TRUE) on a tuple laid out as the variables ``layout``."""
        fns = [self.compile(self.thetas[k].node, layout, condition=True) for k in preds]
        if len(fns) == 1:
            (f,) = fns
            return lambda t: f(t) is True
        return lambda t: all(f(t) is True for f in fns)

    def _env_check(self, preds: tuple[int, ...]) -> Callable[[list], bool]:
        """The check of ``preds`` over an environment indexed by variable id (cached)."""
        check = self._env_checks.get(preds)
        if check is None:
            check = self._env_checks[preds] = self._check(preds, list(range(self.width)))
        return check

    def _access(self, preds: tuple[int, ...], node: Node, bound: set[int]
                ) -> tuple[RangeAccess | None, tuple[int, ...]]:
        """One predicate served by a sorted run of ``node`` (with the opposite bound on the
        same side, if the edge has one: an interval; and a bound on a second side, if any:
        a :class:`BoxIndex`), and the rest to check."""
        accesses = {k: range_access(self.thetas[k], set(node.vars), bound) for k in preds}
        ranged = [k for k in preds if accesses[k] is not None]
        if not ranged:
            return None, preds
        k = ranged[0]
        acc, served = accesses[k], {k}
        for j in ranged[1:]:
            if acc.closes(accesses[j]):
                acc = replace(acc, other=(accesses[j].op, accesses[j].probe))
                served.add(j)
                break
        for j in ranged[1:]:
            if j not in served and accesses[j].indexed.sql() != acc.indexed.sql():
                acc = replace(acc, cross=accesses[j])
                served.add(j)
                break
        return acc, tuple(j for j in preds if j not in served)

    def _range_scan(self, access: RangeAccess, ridx: RangeIndex, layout: list[int]
                    ) -> tuple[Callable, Callable]:
        """``scan(key, row)`` and ``total(key, row)`` of the run's entries within the
        access's bound(s), the probes computed from ``row`` laid out as ``layout`` (no
        ``total`` for a :class:`BoxIndex`, which keeps no weights)."""
        probe, op = self.compile(access.probe, layout), access.op
        if access.cross is not None:
            op2, cross = access.cross.op, self.compile(access.cross.probe, layout)
            other = None if access.other is None else (
                access.other[0], self.compile(access.other[1], layout))

            def box_scan(k: tuple, row) -> Iterator[tuple]:
                bounds = [(op, probe(row))]
                if other is not None:
                    bounds.append((other[0], other[1](row)))
                return ridx.scan(k, bounds, op2, cross(row))
            return box_scan, None
        if access.other is None:
            return (lambda k, row: ridx.scan(k, op, probe(row)),
                    lambda k, row: ridx.total(k, op, probe(row)))
        op2, probe2 = access.other[0], self.compile(access.other[1], layout)
        return (lambda k, row: ridx.scan(k, op, probe(row), op2, probe2(row)),
                lambda k, row: ridx.total(k, op, probe(row), op2, probe2(row)))

    # ---------------------------------------------------------------- update
    def _make_push(self, n: Node) -> EquiPush | Callable[[dict, dict], None]:
        """The code of Algorithm 1, lines 20-23, specialised for this node."""
        p = n.parent
        siblings = [c for c in p.children if c is not n]
        width = len(n.vars)
        proj = key_function(tuple(n.vars.index(v) for v in p.vars), width) if set(
            p.vars) <= set(n.vars) else None
        preds = tuple(k for c in p.children for k in c.preds)
        if preds:
            return self._make_theta_push(n, siblings[0] if siblings else None, proj, preds)
        if not siblings:
            return EquiPush(_PUSH_PROJECTION, proj)
        m = siblings[0]
        shared = tuple(v for v in m.vars if v in n.vars)
        m_state = self.states[m.id]
        if len(shared) == len(m.vars):
            # the sibling's whole tuple is fixed by the delta tuple: look it up, no index
            # (var(m) within var(n), so var(p) is too: proj is set)
            return EquiPush(_PUSH_LOOKUP, proj, key_function(
                tuple(n.vars.index(v) for v in shared), width), m_state.rho)
        key = key_function(tuple(n.vars.index(v) for v in shared))
        if proj is not None:
            return EquiPush(_PUSH_TOTALS, proj, key, None,
                            m_state.index(shared, with_totals=True))
        idx = m_state.index(shared)
        return EquiPush(_PUSH_JOIN, _combiner(n, m), key, m_state.rho, idx)

    def _make_theta_push(self, n: Node, m: Node | None, proj, preds: tuple[int, ...]
                         ) -> Callable[[dict, dict], None]:
        """Lines 20-23 with predicates: ``Delta_p += pi sigma_pred(p) (rho_m |x| Delta_n)``."""
        if m is None:
            check = self._check(preds, list(n.vars))

            def push_filtered(delta: dict, pd: dict) -> None:
                for t, w in delta.items():
                    if check(t):
                        _accumulate(pd, proj(t), w)
            return push_filtered
        p = n.parent
        m_state = self.states[m.id]
        rho_m = m_state.rho
        shared = tuple(v for v in m.vars if v in n.vars)
        key = key_function(tuple(n.vars.index(v) for v in shared))
        layout = list(n.vars) + list(m.vars)
        if len(shared) == len(m.vars):
            check = self._check(preds, layout)

            def push_lookup(delta: dict, pd: dict) -> None:
                for t, w in delta.items():
                    s = key(t)
                    weight = rho_m.get(s)
                    if weight is not None and check(t + s):
                        _accumulate(pd, proj(t), w * weight)
            return push_lookup
        access, rest = self._access(preds, m, set(n.vars))
        check = self._check(rest, layout) if rest else None
        if access is not None:
            ridx = m_state.range_index(shared, access, self.compile)
            scan, total = self._range_scan(access, ridx, list(n.vars))

            def candidates(t: tuple):
                return scan(key(t), t)
        else:
            buckets = m_state.index(shared).buckets

            def candidates(t: tuple):
                return buckets.get(key(t), ())
        if proj is not None:
            if access is not None and check is None and total is not None:
                def push_range_totals(delta: dict, pd: dict) -> None:
                    for t, w in delta.items():
                        tot = total(key(t), t)
                        if tot is not None:
                            _accumulate(pd, proj(t), w * tot)
                return push_range_totals

            def push_checked_totals(delta: dict, pd: dict) -> None:
                for t, w in delta.items():
                    tot = None
                    for s in candidates(t):
                        if check is None or check(t + s):
                            tot = rho_m[s] if tot is None else tot + rho_m[s]
                    if tot is not None:
                        _accumulate(pd, proj(t), w * tot)
            return push_checked_totals
        if (access is not None and access.other is None and access.cross is None
                and check is None and set(p.vars) <= set(m.vars)):
            return self._make_sweep(n, m, key, ridx, self.compile(access.probe, list(n.vars)),
                                    access.op)
        combine = _combiner(n, m)

        def push_theta_join(delta: dict, pd: dict) -> None:
            for t, w in delta.items():
                for s in candidates(t):
                    if check is None or check(t + s):
                        _accumulate(pd, combine(t, s), w * rho_m[s])
        return push_theta_join

    def _make_sweep(self, n: Node, m: Node, key, ridx: RangeIndex, probe, op: str
                    ) -> Callable[[dict, dict], None]:
        """The parent's tuples come from the sibling's alone (``var(p) <= var(m)``): each
        sibling tuple s gains ``rho_m(s) * sum of w(t)`` over the delta tuples t it satisfies
        the inequality with.  Sorting the batch's probes and sweeping the sibling's run once
        costs O(|run part| log |batch|), not O(|batch| * |run part|)."""
        proj_m = key_function(tuple(m.vars.index(v) for v in n.parent.vars), len(m.vars))
        rho_m = self.states[m.id].rho
        upward = op in (">", ">=")  # sibling values above the probes satisfy

        def push_sweep(delta: dict, pd: dict) -> None:
            groups: dict[tuple, list] = {}
            for t, w in delta.items():
                pv = probe(t)
                if pv is not None and w:
                    groups.setdefault(key(t), []).append((pv, w))
            for k, items in groups.items():
                items.sort(key=lambda item: item[0])
                probes = [pv for pv, _ in items]
                cum = [None]  # cum[i]: the weight of the first i probes
                for _, w in items:
                    cum.append(w if cum[-1] is None else cum[-1] + w)
                total = cum[-1]
                for s in ridx.scan(k, op, probes[0] if upward else probes[-1]):
                    v = ridx.value(s)
                    if op == ">":
                        got = cum[bisect_left(probes, v)]
                    elif op == ">=":
                        got = cum[bisect_right(probes, v)]
                    else:
                        i = bisect_right(probes, v) if op == "<" else bisect_left(probes, v)
                        got = total if cum[i] is None else total - cum[i]
                    if got:
                        _accumulate(pd, proj_m(s), got * rho_m[s])
        return push_sweep

    def _schedule(self, leaves: frozenset[int] | int
                  ) -> tuple[list[NodeState], list[NodeState]]:
        """The nodes a batch changing ``leaves`` (a set of node ids, or one id: a batch of
        one table, kept apart so that it is looked up without building a set) can reach:
        their ancestors, children before parents, outside N and in N.  Every other node's
        delta is empty (Algorithm 1 only propagates upwards), so UPDATE visits the paths
        from the changed leaves to the root."""
        got = self._schedules.get(leaves)
        if got is None:
            reach: set[int] = set()
            for leaf in ((leaves,) if isinstance(leaves, int) else leaves):
                n = self.states[leaf].node
                while n is not None and n.id not in reach:
                    reach.add(n.id)
                    n = n.parent
            got = ([st for st in self.lower if st.node_id in reach],
                   [st for st in self.upper if st.node_id in reach])
            self._schedules[leaves] = got
        return got

    def update(self, leaf_deltas: dict[int, dict[tuple, object]], want_delta: bool
               ) -> dict[tuple, tuple[object, object]] | None:
        """Apply per-atom deltas (UPDATE of Algorithm 1).

        With ``want_delta``, return ``{output tuple: (old weight, new weight)}`` for every
        output tuple whose weight may have changed (None weights mean absent).
        """
        return self.update_leaves(self.by_leaf(leaf_deltas), want_delta)

    def by_leaf(self, leaf_deltas: dict[int, dict]) -> dict[int, dict]:
        """Per-atom deltas keyed by their leaf node's id instead, the empty ones left out:
        what :meth:`update_leaves` and :meth:`difference_leaves` take."""
        return {self.leaf_of_atom[a].node_id: d for a, d in leaf_deltas.items() if d}

    def leaf_id(self, atom: int) -> int:
        """The id of atom ``atom``'s leaf node (:meth:`by_leaf`)."""
        return self.leaf_of_atom[atom].node_id

    def update_leaves(self, deltas: dict[int, dict], want_delta: bool
                      ) -> dict[tuple, tuple[object, object]] | None:
        """:meth:`update` of deltas keyed by leaf node id, none empty (:meth:`by_leaf`): a
        view's step keys them so as it lifts them, and a change builds no second dict."""
        if not deltas:  # every changed row was filtered out below the leaves
            return {} if want_delta else None
        upper = self._update_below_n(deltas)
        if not want_delta:
            for st in upper:
                st.process(deltas)
            return None
        touched = self._touched(upper, deltas)
        return self._changes(upper, touched, deltas)

    def _changes(self, upper: list[NodeState], touched: list[NodeState],
                 deltas: dict[int, dict]) -> dict[tuple, tuple[object, object]]:
        """UPDATE of N's nodes ``upper``, returning ``{output tuple: (old, new)}`` for the
        output tuples extending the ``touched`` frontier nodes' changed tuples."""
        if not self.root_state.rho:
            for st in upper:
                st.process(deltas)
            return {k: (None, w) for k, w in self.enumerate()}
        if len(touched) == 1:
            return self._delta_of_one_frontier(touched[0], upper, deltas)
        anchors = [(st, list(deltas[st.node_id])) for st in touched]
        old = self._enumerate_anchored(anchors)
        for st in upper:
            st.process(deltas)
        new = self._enumerate_anchored(anchors)
        changes = {}
        for k, w in old.items():
            nw = new.pop(k, None)
            if nw is None or nw != w:
                changes[k] = (w, nw)
        for k, w in new.items():
            changes[k] = (None, w)
        return changes

    def _touched(self, upper: list[NodeState], deltas: dict[int, dict]) -> list[NodeState]:
        """The frontier nodes among ``upper`` whose delta is not empty."""
        touched = []
        for st in upper:
            if st.frontier and deltas.get(st.node_id):
                touched.append(st)
        return touched

    def count_frontier_weights(self) -> None:
        """Keep each frontier node's count of weights other than 1 from now on
        (:meth:`NodeState.count_other_weights`), for a view whose changes are read as rows
        (:meth:`difference`): started while the representation is still empty and kept by
        every ``add`` of its build and changes, so no change pays a pass over a node's
        tuples to start it (at TPC-H SF 1 FQ1's first change after subscribing took 13.5
        ms for that pass, its median change 19 us)."""
        for st in self.states.values():
            if st.frontier:
                st.count_other_weights()

    def _update_below_n(self, deltas: dict[int, dict]) -> list[NodeState]:
        """UPDATE of the nodes outside N a batch reaches; returns N's nodes it reaches,
        children before parents, still to be updated."""
        lower, upper = self._schedule(
            next(iter(deltas)) if len(deltas) == 1 else frozenset(deltas))
        for st in lower:
            st.process(deltas)
        return upper

    def difference(self, leaf_deltas: dict[int, dict[tuple, int]],
                   row: Callable[[tuple], tuple] = _identity,
                   positions: tuple[int, ...] | None = None) -> dict[tuple, int]:
        """Apply per-atom deltas and return ``{row(output tuple): new weight - old weight}``
        (Z-set weights): what a view that only hands its rows' changes on needs, without
        the ``(old, new)`` pairs :meth:`update` keeps per output tuple.  When one frontier
        node changes (every single-table batch) each changed anchor tuple s contributes
        ``others * (new(s) - old(s))`` per context entry, so s's output tuples are combined
        once, not once before and once after the batch (section 5, delta enumeration).
        ``positions``, when ``row`` only picks output-tuple positions (a select list of
        plain columns): those positions, so that each row is built from the anchor tuple
        and its context at once, not through an output tuple."""
        return self.difference_leaves(self.by_leaf(leaf_deltas), row, positions)

    def difference_leaves(self, deltas: dict[int, dict],
                          row: Callable[[tuple], tuple] = _identity,
                          positions: tuple[int, ...] | None = None) -> dict[tuple, int]:
        """:meth:`difference` of deltas keyed by leaf node id, none empty (:meth:`by_leaf`)."""
        out: dict[tuple, int] = {}
        if not deltas:
            return out
        upper = self._update_below_n(deltas)
        touched = self._touched(upper, deltas)
        if len(touched) != 1 or not self.root_state.rho:
            for t, (old, new) in self._changes(upper, touched, deltas).items():
                d = (new or 0) - (old or 0)
                if d:
                    add_into(out, row(t), d)
            return out
        st = touched[0]
        anchor, rho = st.node, st.rho
        delta = deltas[st.node_id]
        if positions is not None and self._root_out is None:
            return self._rows_of_changes(st, upper, deltas, positions)
        get = rho.get
        # (anchor tuple s, its weight before the batch, its change w): the batch adds w to
        # s, so s's output tuples change by ``others * w``; each changed anchor tuple is
        # hashed once here (a wide row's hash costs about half a microsecond)
        changed = [(s, get(s), w) for s, w in delta.items() if w]
        self.push_anchors += len(changed)
        if self._root_out is not None:  # N is the root alone: an output tuple is s itself
            for node_state in upper:
                node_state.process(deltas)
            project = self._root_out
            for s, _, w in changed:
                add_into(out, row(project(s)), w)
            self.push_outputs += len(changed)
            return out
        # a key's context is the same before and after the batch while the key has anchor
        # tuples on both sides: taken before the batch for keys present then, after it for
        # the keys the batch brings (as in _delta_of_one_frontier)
        key, context, combine = self._anchored(anchor)
        if len(changed) == 1:  # a single-row change
            s, before, w = changed[0]
            k = key(s)
            found = None if before is None else context(k)
            for node_state in upper:
                node_state.process(deltas)
            if found is None:
                found = context(k)
            self.push_outputs += len(found)
            for c, others in found:
                add_into(out, row(combine(s, c)), others * w)
            return out
        groups = _grouped(key, changed, _FIRST)
        contexts = {}
        for k, group in groups.items():
            for _, before, _ in group:
                if before is not None:
                    contexts[k] = context(k)
                    break
        for node_state in upper:
            node_state.process(deltas)
        outputs = 0
        for k, group in groups.items():
            found = contexts.get(k)
            if found is None:
                found = context(k)
            outputs += len(found) * len(group)
            for s, _, w in group:
                for c, others in found:
                    add_into(out, row(combine(s, c)), others * w)
        self.push_outputs += outputs
        return out

    def _rows_of_changes(self, st: NodeState, upper: list[NodeState], deltas: dict,
                         positions: tuple[int, ...]) -> dict[tuple, int]:
        """:meth:`difference` when one frontier node's tuples change, for a plain join view
        (integer weights) whose rows are values at ``positions``: each changed anchor
        tuple s's context and rows in one compiled call (:func:`dyn_loops.emitter`).  A
        tuple whose weight falls was in rho before the batch and one whose weight grows is
        in it after (the database is positive), and s's context is the same on both sides
        while s is there (the other frontier nodes are untouched), so s's rows are made
        once, falling tuples before the batch is processed and growing ones after, and no
        old weight is looked up (a wide tuple's hash and compare).  A batch of many
        anchor tuples costs one walk each, as a single-row change does, instead of
        grouping them by key and building each row through Python calls."""
        out: dict[tuple, int] = {}
        emit = self._emitter_of(st.node, positions)
        delta: dict = deltas[st.node_id]
        added = 0
        falling = 0
        rising = 0
        for s, w in delta.items():
            if w < 0:
                added += emit(s, w, out)
                falling += 1
            elif w > 0:
                rising += 1
        for node_state in upper:
            node_state.process(deltas)
        if rising:  # (a second pass over the delta: no tuple hashed to find its weight)
            for s, w in delta.items():
                if w > 0:
                    added += emit(s, w, out)
        self.push_anchors += falling + rising
        self.push_outputs += added
        return out

    def _delta_of_one_frontier(self, st: NodeState, upper: list[NodeState],
                               deltas: dict[int, dict]) -> dict[tuple, tuple[object, object]]:
        """Push mode when one frontier node f changes (every single-table batch): an output
        tuple extends exactly one tuple s of f, and its weight is ``rho_f(s)`` times the
        weights of the other frontier nodes, which this batch leaves alone.  Those come from
        s's *context*, which depends on s only through its anchor key: the changed tuples are
        grouped by key and each key's context is enumerated once (docs/design.md, "Dynamic
        Yannakakis").  The work is the number of output tuples that change plus one context
        per key (section 5, delta enumeration), not twice the outputs as when enumerating the
        old and the new output around the change."""
        anchor = st.node
        rho = st.rho
        delta = deltas[st.node_id]
        changes: dict[tuple, tuple[object, object]] = {}
        if len(delta) == 1:
            # a single-row change, the loops below unrolled for one anchor tuple, without
            # the dict of old weights: grouping it and looping over one group cost Q3 dyn
            # 1.5k instructions a change (2.8%), the dict another 600
            for s, w in delta.items():
                if not w:  # (a weight that cancelled out: nothing to enumerate)
                    for node_state in upper:
                        node_state.process(deltas)
                    return changes
                self.push_anchors += 1
                w = dict.get(rho, s)
                if self._root_out is not None:  # N is the root alone: the output is s
                    for node_state in upper:
                        node_state.process(deltas)
                    changes[self._root_out(s)] = (w, dict.get(rho, s))
                    self.push_outputs += 1
                    return changes
                key, context, combine = self._anchored(anchor)
                k = key(s)
                found = None if w is None else context(k)
                for node_state in upper:
                    node_state.process(deltas)
                new = dict.get(rho, s)
                if found is None:
                    found = context(k)
                self.push_outputs += len(found)
                for c, others in found:
                    changes[combine(s, c)] = (None if w is None else others * w,
                                              None if new is None else others * new)
            return changes
        old = {s: dict.get(rho, s) for s, w in delta.items() if w}
        self.push_anchors += len(old)
        if self._root_out is not None:  # N is the root alone: an output tuple is s itself
            for node_state in upper:
                node_state.process(deltas)
            out, get = self._root_out, rho.get
            for s, w in old.items():
                changes[out(s)] = (w, get(s))
            self.push_outputs += len(old)
            return changes
        key, context, combine = self._anchored(anchor)
        # an anchor key's context is the same before and after the batch while the key has
        # anchor tuples on both sides (the other nodes' contents stay, and ancestors are
        # present as long as something below them joins): computed once, before the batch
        # for keys present then, after it for keys the batch brings
        groups = _grouped(key, old)
        contexts: dict[tuple, list] = {}
        for k, group in groups.items():
            for s in group:
                if old[s] is not None:
                    contexts[k] = context(k)
                    break
        for node_state in upper:
            node_state.process(deltas)
        get = rho.get
        outputs = 0
        # a tuple absent after the batch and present before it was removed: its outputs
        # leave with the context taken before the batch (read off rho, not by adding the
        # batch's weight to the old one, which costs a ring addition per tuple)
        for k, group in groups.items():
            found = contexts.get(k)
            if found is None:
                found = context(k)
            for s in group:
                new = get(s)
                w = old[s]
                if new is None:
                    if w is not None:
                        outputs += len(found)
                        for c, others in found:
                            changes[combine(s, c)] = (others * w, None)
                    continue
                outputs += len(found)
                if w is None:
                    for c, others in found:
                        changes[combine(s, c)] = (None, others * new)
                else:
                    for c, others in found:
                        changes[combine(s, c)] = (others * w, others * new)
        self.push_outputs += outputs
        return changes

    # ---------------------------------------------------------------- enumeration
    def _plan(self) -> dict[int, Callable]:
        """Match functions per N node: the tuples of rho_n compatible with the variables it
        shares with its parent (the parent index P_n), filtered by the predicates on its
        edge.  The generated loops (:mod:`upkeep.dyn_loops`) inline the plain ones and call
        these for nodes whose edge carries theta predicates."""
        plan = self._plan_of_n
        if plan is not None:
            return plan
        plan = {}
        for n in self.pair.nodes:
            if n.id not in self.pair.n_set:
                continue
            bound = set(n.parent.vars) if n.parent is not None else set()
            key_vars = tuple(v for v in n.vars if v in bound)
            matcher = self._matcher(self.states[n.id], key_vars)
            if n.preds:
                matcher = self._theta_matcher(n, matcher, key_vars, bound)
            plan[n.id] = matcher
        self._plan_of_n = plan
        return plan

    def _theta_matcher(self, n: Node, matcher: Callable, key_vars: tuple[int, ...],
                       bound: set[int]) -> Callable:
        """The tuples of rho_n compatible with the bound variables that satisfy the edge's
        predicates: a sorted run when one predicate allows it (constant delay), and the
        remaining predicates checked on each candidate.  The candidate is written into the
        environment before the check (the caller binds it there anyway)."""
        access, rest = self._access(n.preds, n, bound)
        check = self._env_check(rest) if rest else None
        if access is not None:
            ridx = self.states[n.id].range_index(key_vars, access, self.compile)
            getter = key_function(key_vars)
            scan, _ = self._range_scan(access, ridx, list(range(self.width)))

            def candidates(env):
                return scan(getter(env), env)
        else:
            candidates = matcher
        if check is None:
            return candidates
        vars_ = n.vars

        def checked(env):
            for s in candidates(env):
                for v, x in zip(vars_, s, strict=True):
                    env[v] = x
                if check(env):
                    yield s
        return checked

    def _matcher(self, st: NodeState, key_vars: tuple[int, ...]) -> Callable:
        rho = st.rho
        if not key_vars:
            return lambda env: rho
        getter = key_function(key_vars)
        if len(key_vars) == len(st.node.vars):
            def member(env):
                t = getter(env)
                return (t,) if t in rho else ()
            return member
        buckets = st.index(key_vars).buckets

        def probe(env):
            return buckets.get(getter(env), ())
        return probe

    def _anchored(self, anchor: Node) -> tuple[Callable, Callable, Callable]:
        """For delta enumeration anchored at ``anchor`` (generated on first use, with the
        indexes its path up to the root probes): the anchor key of a tuple, the context of
        a key, and the combiner of an anchor tuple with a context (:mod:`upkeep.dyn_loops`)."""
        got = self._anchored_by_id.get(anchor.id)
        if got is None:
            positions = tuple(anchor.vars.index(v) for v in anchor_key_vars(self, anchor))
            got = self._anchored_by_id[anchor.id] = (
                key_function(positions, len(anchor.vars)), contexter(self, anchor),
                combiner(self, anchor))
        return got

    def _emitter_of(self, anchor: Node, positions: tuple[int, ...]) -> Callable:
        """For :meth:`difference`, generated on first use: ``emit(anchor tuple, weight,
        out)``, the anchor tuple's context and its rows' values at ``positions`` in one
        call (:func:`dyn_loops.emitter`)."""
        got = self._emitters.get(anchor.id)
        # the view passes the same tuple every batch: identity first, since hashing or
        # comparing a wide select list's positions cost a single-row change 2% of its time
        if got is not None and (got[0] is positions or got[0] == positions):
            return got[1]
        emit = emitter(self, anchor, positions)
        self._emitters[anchor.id] = (positions, emit)
        return emit

    def enumerate(self) -> Iterator[tuple[tuple, object]]:
        """ENUM of Algorithm 1: each output tuple once, with its weight, constant delay."""
        return self._loops()

    def _enumerate_anchored(self, anchors: list[tuple[NodeState, list[tuple]]]
                            ) -> dict[tuple, object]:
        """The output tuples extending any of the anchors' tuples, with their weights."""
        out: dict[tuple, object] = {}
        for st, tuples in anchors:
            self.push_anchors += len(tuples)
            rho = st.rho
            key, context, combine = self._anchored(st.node)
            for k, group in _grouped(key, [s for s in tuples if s in rho]).items():
                found = context(k)
                for s in group:
                    w = rho[s]
                    self.push_outputs += len(found)
                    for c, others in found:
                        out[combine(s, c)] = others * w
        return out

    def counters(self) -> dict[str, int]:
        """Push-mode work (frontier tuples anchored on, output tuples enumerated there) and
        the tuples every enumeration, pushed or pulled, visited (``enum_work``)."""
        return {"push_anchors": self.push_anchors, "push_outputs": self.push_outputs,
                "enum_work": self.enum_work[0]}

    def weight(self, out_tuple: tuple) -> object | None:
        """Membership in O(|N|): the product of the frontier weights, or None if absent."""
        env: list = [None] * self.width
        for v, x in zip(self.pair.out, out_tuple, strict=True):
            env[v] = x
        w = None
        for f in self.frontier:
            st = self.states[f.id]
            got = st.rho.get(tuple(env[v] for v in f.vars))
            if got is None:
                return None
            w = got if w is None else w * got
        for check in self._n_checks:
            if not check(env):
                return None
        return w

    def size(self) -> int:
        """Total number of stored reduct tuples (the O(|db|) of property P3)."""
        return sum(len(st.rho) for st in self.states.values())
