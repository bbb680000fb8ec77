"""General incremental operators over Z-sets (docs/design.md, "One algebra, annotation as a
parameter").

Each operator turns the deltas of one committed batch into its output delta.  Selection
and projection are linear; join is bilinear and keeps both inputs materialized and
indexed (``Delta(L |x| R) = dL |x| R + L' |x| dR``); DISTINCT and GROUP BY keep state.
This is the "general materializing strategy": it covers what Dynamic Yannakakis does not
(cyclic joins, theta predicates) and serves as its baseline in the benchmarks.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Iterator
from operator import itemgetter

from .aggregates import AggregateSpec, Finalizer, GroupState
from .complement import ComplementScan, CountedKeys
from .dyn import LIST_BUCKET_MAX, Representation, key_function
from .errors import EvaluationError
from .gc_pause import StateDict
from .zset import Delta, add_into, clamp, replace_row

Batch = dict[str, Delta]


class Operator:
    """One node of a view's dataflow; ``step`` maps a batch to this node's output delta."""

    def step(self, batch: Batch) -> Delta:
        raise NotImplementedError

    def describe(self) -> list[str]:
        return [type(self).__name__]

    def state_size(self) -> int:
        """Number of stored tuples here and below (for EXPLAIN and memory accounting)."""
        return sum(op.state_size() for op in self.inputs())

    def inputs(self) -> list[Operator]:
        """The operators this one reads: by the attribute names every operator here uses
        for them (``child``; ``left`` and ``right``; ``children``)."""
        return [getattr(self, a) for a in ("child", "left", "right") if hasattr(self, a)] + list(
            getattr(self, "children", []))

    def walk(self):
        yield self
        for op in self.inputs():
            yield from op.walk()

    def counters(self) -> dict[str, int]:
        """Work counters of this operator alone (see ViewHandle.counters)."""
        return {}


class Source(Operator):
    """Reads one relation's delta and maps its rows through the atom's filter-and-project.
    ``reads``, when given, says which columns of the relation's rows the leaf (and
    anything else compiled over the atom's rows) can read: a build over a table's store
    then makes only those (:func:`rows_read`)."""

    def __init__(self, relation: str, leaf: Callable[[tuple], tuple | None], label: str,
                 reads: Callable[[], frozenset[int]] | None = None):
        self.relation = relation
        self.leaf = leaf
        self.label = label
        self.reads = reads
        # ``row, w -> leaf tuple`` for a row whose leaf raised, a failing value kept in it
        # (a dyn aggregate's computed GROUP BY value: ``failed_values.LeafSalvage``)
        self.salvage: Callable[[tuple, int], tuple | None] | None = None

    def step(self, batch: Batch) -> Delta:
        delta = batch.get(self.relation)
        out: Delta = {}
        if not delta:
            return out
        if type(delta) is not dict:  # a table's store, handed to a build
            delta = rows_read(delta, self.reads)
        leaf = self.leaf
        for row, w in delta.items():
            try:
                t = leaf(row)
            except EvaluationError:
                if self.salvage is None:
                    raise
                t = self.salvage(row, w)
            if t is not None:
                add_into(out, t, w)
        return out

    def describe(self) -> list[str]:
        return [f"scan {self.label}"]


def rows_read(delta, reads: Callable[[], frozenset[int]] | None):
    """``delta`` as a source with ``reads`` (:class:`Source`) reads it: a table's store, which
    a view's build is handed, as a reading of those columns alone, the others None
    (``RowStore.reading``: their values are never made); any other delta as it is.  A
    source calls it only for a delta that is not a dict (a change's is one): the lookup
    below misses on a dict by raising inside ``getattr``, and a call is ~170 instructions,
    1% of a single-row change's step."""
    reading = None if reads is None else getattr(type(delta), "reading", None)
    return delta if reading is None else reading(delta, reads())


class ColumnLeaf:
    """An atom's filter-and-project over its relation's rows when it reads columns only
    (no WHERE condition of its own, no derived value): ``project(r)`` is the tuple of
    ``r``'s columns at ``positions`` (``r`` itself when they are all of its columns, in
    order), or None when a column at ``nonnull`` is NULL or the two columns of a pair in
    ``equal`` (one join variable twice) differ.  Compiled (``operators.pxd``), where the
    generated lambda it stands for (``Core._leaf``) ran an interpreter frame per row."""

    def __init__(self, positions: list[int], nonnull: list[int],
                 equal: list[tuple[int, int]], whole: bool):
        self.nonnull = array("q", nonnull)
        self.left = array("q", [a for a, _ in equal])
        self.right = array("q", [b for _, b in equal])
        self.whole = whole
        # the projection, built in C: a slice when the columns are a run in order (a
        # relation's columns but its last: 1 slice where a list of 15 values took 1.7k
        # instructions), else an itemgetter, which gives a tuple for two columns or more
        start = positions[0] if positions else 0
        if positions == list(range(start, start + len(positions))):
            self.pick = None
            self.start, self.stop = start, start + len(positions)
        else:
            self.pick = itemgetter(*positions) if len(positions) > 1 else None
            self.start, self.stop = positions[0], positions[0] + 1  # one column

    def project(self, r: tuple) -> tuple | None:
        for k in range(len(self.nonnull)):
            if r[self.nonnull[k]] is None:
                return None
        for k in range(len(self.left)):
            x, y = r[self.left[k]], r[self.right[k]]
            if not (x == y or (x != x and y != y)):  # NaN = NaN, as DuckDB joins them
                return None
        if self.whole:
            return r
        if self.pick is not None:
            return self.pick(r)
        return r[self.start:self.stop]


class Map(Operator):
    """Projection with expressions (linear): ``fn`` maps a tuple to a tuple."""

    def __init__(self, child: Operator, fn: Callable[[tuple], tuple], label: str = "map"):
        self.child = child
        self.fn = fn
        self.label = label

    def step(self, batch: Batch) -> Delta:
        out: Delta = {}
        fn = self.fn
        for t, w in self.child.step(batch).items():
            add_into(out, fn(t), w)
        return out

    def describe(self) -> list[str]:
        return [self.label] + ["  " + x for x in self.child.describe()]


class Filter(Operator):
    """Selection (linear): keeps tuples whose predicate is TRUE (not NULL)."""

    def __init__(self, child: Operator, pred: Callable[[tuple], object], label: str):
        self.child = child
        self.pred = pred
        self.label = label

    def step(self, batch: Batch) -> Delta:
        pred = self.pred
        return {t: w for t, w in self.child.step(batch).items() if pred(t) is True}

    def describe(self) -> list[str]:
        return [f"filter {self.label}"] + ["  " + x for x in self.child.describe()]


def bucket_items(bucket: object) -> Iterator[tuple[object, int]]:
    """The rows (with a payload position, the payloads) and weights of one
    :class:`_IndexedState` bucket: a list, a dict, or one row (payload) alone."""
    kind = type(bucket)
    if kind is list:
        return ((row, 1) for row in bucket)
    if kind is dict:
        return iter(bucket.items())
    return iter(((bucket, 1),))


class _IndexedState:
    """A materialized Z-set indexed by a join key.  A key's bucket is its one row when that
    row is alone there with weight 1 (a key of a unique column: every bucket); a list of
    its rows when they are 2 to :data:`LIST_BUCKET_MAX` distinct rows of weight 1 (a line
    item's order); else a dict row -> weight.  A dict costs 224 bytes (up to five rows)
    or more, a list of n rows 56 + 8 n (docs/design.md, "State layout"); a list is
    searched row by row, so it stays short.  A row that is its own key (an input of the
    key columns alone) keys its bucket too, so no second tuple.

    With a ``payload`` position (:func:`join_state`: rows of the key columns and that one
    more, as an aggregate over a join reads its fact table, QH's line items: order key and
    price), the buckets hold that column's values instead of the rows, which saves a tuple
    per row (56 bytes for two columns; at TPC-H SF 1, 6 M line items), and a probe
    rebuilds the rows it joins.  SQL values are never lists or dicts, so the bucket kinds
    stay apart; a NULL payload is the bucket ``None``, so absence is :data:`_MISSING`.
    Values compare as the rows did (a tuple compares its items by identity, then ``==``).
    A rebuilt row carries the probing key's values, equal to the stored key's but perhaps
    not the same (0.0 and -0.0): payloads only for an input whose key columns the join's
    output does not take (:class:`HashJoin`'s right input)."""

    def __init__(self, key_positions: tuple[int, ...], payload: int | None = None):
        self.key = key_function(key_positions)
        self.payload = payload
        self.restore = None if payload is None else _restorer(key_positions, payload)
        self.buckets: dict[tuple, object] = StateDict()
        self.size = 0

    def apply(self, delta: Delta) -> None:
        key, p, buckets = self.key, self.payload, self.buckets
        for t, w in delta.items():
            if not w:
                continue
            k = key(t)
            v = t if p is None else t[p]  # what the bucket holds: the row or its payload
            bucket = dict.get(buckets, k, _MISSING)
            if bucket is _MISSING:  # keyed by the row itself when it is its own key
                buckets[t if p is None and k == t else k] = v if w == 1 else {v: w}
                self.size += 1
                continue
            kind = type(bucket)
            if kind is list:
                if w == 1:
                    if len(bucket) < LIST_BUCKET_MAX and v not in bucket:
                        buckets[k] = bucket + [v]  # exact size: append over-allocates
                        self.size += 1
                        continue
                elif w == -1 and v in bucket:
                    bucket.remove(v)
                    self.size -= 1
                    if len(bucket) == 1:
                        buckets[k] = bucket[0]
                    continue
                bucket = buckets[k] = dict.fromkeys(bucket, 1)
            elif kind is not dict:  # one row (payload) of weight 1
                if bucket is v or bucket == v:
                    if w == -1:
                        dict.pop(buckets, k)
                        self.size -= 1
                    else:
                        buckets[k] = {v: 1 + w}
                    continue
                if w == 1:
                    buckets[k] = [bucket, v]
                    self.size += 1
                    continue
                bucket = buckets[k] = {bucket: 1}
            before = len(bucket)
            add_into(bucket, v, w)
            self.size += len(bucket) - before
            if len(bucket) == 1:
                for value, n in bucket.items():
                    if n == 1:
                        buckets[k] = value
            elif not bucket:
                dict.pop(buckets, k)

    def probe(self, out: Delta, delta: Delta, key: Callable[[tuple], tuple],
              combine: Callable[[tuple, tuple], tuple], delta_left: bool) -> None:
        """Add to ``out`` the join of the other input's ``delta`` (keyed by ``key``) with
        this index's rows; ``delta_left`` says on which side of ``combine`` they go."""
        buckets, restore = self.buckets, self.restore
        for t, w in delta.items():
            k = key(t)
            bucket = dict.get(buckets, k, _MISSING)
            if bucket is _MISSING:
                continue
            kind = type(bucket)
            if kind is list:
                for s in bucket:
                    if restore is not None:
                        s = restore(k, s)
                    add_into(out, combine(t, s) if delta_left else combine(s, t), w)
            elif kind is dict:
                for s, n in bucket.items():
                    if restore is not None:
                        s = restore(k, s)
                    add_into(out, combine(t, s) if delta_left else combine(s, t), w * n)
            else:
                s = bucket if restore is None else restore(k, bucket)
                add_into(out, combine(t, s) if delta_left else combine(s, t), w)


#: a bucket's absence (a payload bucket may be a NULL: ``None``)
_MISSING = object()


def _restorer(key_positions: tuple[int, ...], payload: int
              ) -> Callable[[tuple, object], tuple]:
    """The row of key ``k`` and payload ``v`` (:class:`_IndexedState`)."""
    if key_positions == (0,) and payload == 1:
        return lambda k, v: (k[0], v)
    if key_positions == (1,) and payload == 0:
        return lambda k, v: (v, k[0])
    width = len(key_positions) + 1
    source = [-1 if i == payload else key_positions.index(i) for i in range(width)]
    return lambda k, v: tuple(v if i < 0 else k[i] for i in source)


def join_state(key_positions: tuple[int, ...], width: int) -> _IndexedState:
    """The index of a join input of ``width`` columns on ``key_positions``: of payloads
    when one column is not in the key, else of rows."""
    rest = [i for i in range(width) if i not in key_positions]
    if len(rest) == 1 and len(key_positions) + 1 == width:
        return _IndexedState(key_positions, rest[0])
    return _IndexedState(key_positions)


class HashJoin(Operator):
    """Bilinear equi-join with both inputs materialized and indexed on the join key."""

    def __init__(self, left: Operator, right: Operator, left_key: tuple[int, ...],
                 right_key: tuple[int, ...], combine: Callable[[tuple, tuple], tuple],
                 label: str, right_width: int):
        """``combine`` takes the join columns from the left row.  So the right input, when
        its rows (``right_width`` columns) are the key and one more column, is indexed by
        its payloads (:func:`join_state`): the rows a probe rebuilds there carry the
        probing row's key values, which equal the stored ones but need not be the same
        value (0.0 joins -0.0), and ``combine`` never reads them.  The left input keeps
        its rows."""
        self.left, self.right = left, right
        self.lstate = _IndexedState(left_key)
        self.rstate = join_state(right_key, right_width)
        self.combine = combine
        self.label = label

    def step(self, batch: Batch) -> Delta:
        dl = self.left.step(batch)
        dr = self.right.step(batch)
        out: Delta = {}
        combine = self.combine
        if dl:
            self.rstate.probe(out, dl, self.lstate.key, combine, True)
            self.lstate.apply(dl)
        if dr:
            self.lstate.probe(out, dr, self.rstate.key, combine, False)
            self.rstate.apply(dr)
        return out

    def describe(self) -> list[str]:
        return ([f"hash join {self.label}"] + ["  " + x for x in self.left.describe()]
                + ["  " + x for x in self.right.describe()])

    def state_size(self) -> int:
        return self.lstate.size + self.rstate.size + super().state_size()


class Union(Operator):
    """UNION ALL (linear): the sum of the inputs' deltas."""

    def __init__(self, children: list[Operator]):
        self.children = children

    def step(self, batch: Batch) -> Delta:
        out: Delta = {}
        for c in self.children:
            for t, w in c.step(batch).items():
                add_into(out, t, w)
        return out

    def describe(self) -> list[str]:
        return ["union all"] + ["  " + x for c in self.children for x in c.describe()]



class SemiJoin(Operator):
    """``EXISTS`` / ``IN`` (semijoin) or, ``negated``, ``NOT EXISTS`` / ``EXCEPT`` (anti-join):
    the left tuples whose key has at least one (anti: no) tuple on the right.

    The right input's tuples are keys.  State: the left tuples indexed by key and the right
    keys' counts.  A left tuple's membership changes only when its key's right count
    crosses zero, so each change costs the tuples under that key.  When a view is read
    through this operator (:meth:`serve_reads`), it also keeps ordered key sets with
    interval counts: the matched keys, and for an anti-join the left keys (a superset).
    :meth:`current` then lists the output without storing it: the matched keys' tuples, or
    for an anti-join the complement within the left keys by counting
    (``lftj-incremental-maintenance.txt`` section 3.1.2), in ``O(|result| log n)``, when the
    complement is sparse enough for that to beat probing every left key.  With
    ``nulls_match`` (set operations) NULL equals NULL; otherwise a key with a NULL matches
    nothing, as for ``=``.
    """

    def __init__(self, left: Operator, right: Operator, key_positions: tuple[int, ...],
                 negated: bool, nulls_match: bool, label: str):
        self.left, self.right = left, right
        self.key = key_function(key_positions)
        self.negated = negated
        self.nulls_match = nulls_match
        self.label = label
        self.rows = _IndexedState(key_positions)
        self.right_counts: dict[tuple, int] = StateDict()
        self.left_keys: CountedKeys | None = None  # kept once serve_reads is called
        self.matched_keys: CountedKeys | None = None
        self.complement_queries = 0
        self.probed_keys = 0

    def _matched(self, key: tuple) -> bool:
        return (self.nulls_match or None not in key) and self.right_counts.get(key, 0) > 0

    def serve_reads(self) -> None:
        """Keep the ordered key sets :meth:`current` reads (a view reads through here)."""
        self.matched_keys = CountedKeys()
        for k in self.rows.buckets:
            if self._matched(k):
                self.matched_keys.add(k)
        if self.negated:
            self.left_keys = CountedKeys()
            for k in self.rows.buckets:
                self.left_keys.add(k)

    def step(self, batch: Batch) -> Delta:
        dl = self.left.step(batch)
        dr = self.right.step(batch)
        out: Delta = {}
        buckets, matched_keys = self.rows.buckets, self.matched_keys
        if not self.nulls_match:
            dr = {k: w for k, w in dr.items() if None not in k}
        for k, change in clamp(self.right_counts, dr).items():  # against the old left side
            bucket = buckets.get(k)
            if bucket is None:
                continue
            if matched_keys is not None:
                (matched_keys.add if change > 0 else matched_keys.remove)(k)
            sign = -change if self.negated else change
            for t, wt in bucket_items(bucket):
                add_into(out, t, sign * wt)
        if not dl:
            return out
        key, matched = self.key, self._matched
        touched: dict[tuple, bool] = {}  # key -> did it have left tuples before
        for t, w in dl.items():  # against the new right side
            k = key(t)
            if k not in touched:
                touched[k] = k in buckets
            if matched(k) != self.negated:
                add_into(out, t, w)
        self.rows.apply(dl)
        if matched_keys is not None:
            for k, existed in touched.items():
                if existed == (k in buckets):
                    continue
                for keys in (self.left_keys, matched_keys if matched(k) else None):
                    if keys is not None:
                        (keys.remove if existed else keys.add)(k)
        return out

    def current(self) -> Iterator[tuple[tuple, int]]:
        """The output now, without storing it: the matched keys' tuples, or for an anti-join
        the complement's.  Complement iteration costs about ``2 log2 n`` count queries per
        key it lists, so it is used where it helps: when the complement holds fewer than
        ``n / (2 log2 n)`` of the ``n`` left keys; otherwise every left key is probed."""
        if self.matched_keys is None:
            raise RuntimeError("internal: SemiJoin.current without serve_reads")
        buckets = self.rows.buckets
        if not self.negated:
            for k in self.matched_keys:
                yield from bucket_items(buckets[k])
            return
        n = len(self.left_keys)
        if (n - len(self.matched_keys)) * 2 * math.log2(max(n, 2)) < n:
            scan = ComplementScan(self.left_keys, self.matched_keys)
            for k in scan:
                yield from bucket_items(buckets[k])
            self.complement_queries += scan.count_queries
            return
        self.probed_keys += n
        matched = self._matched
        for k, bucket in buckets.items():
            if not matched(k):
                yield from bucket_items(bucket)

    def describe(self) -> list[str]:
        kind = "anti-join" if self.negated else "semijoin"
        return ([f"{kind} {self.label}"] + ["  " + x for x in self.left.describe()]
                + ["  " + x for x in self.right.describe()])

    def state_size(self) -> int:
        return self.rows.size + len(self.right_counts) + super().state_size()

    def counters(self) -> dict[str, int]:
        return {"complement_count_queries": self.complement_queries,
                "complement_probed_keys": self.probed_keys}


class BagSetOperation(Operator):
    """``EXCEPT ALL`` (multiplicity ``max(l - r, 0)``) or ``INTERSECT ALL`` (``min(l, r)``):
    both inputs' multiplicities are kept; a tuple's output changes only with its own."""

    def __init__(self, left: Operator, right: Operator, kind: str):
        self.left, self.right = left, right
        self.kind = kind
        self.counts: dict[tuple, list[int]] = StateDict()

    def _out(self, pair: list[int]) -> int:
        left, right = pair
        return max(left - right, 0) if self.kind == "except" else max(min(left, right), 0)

    def step(self, batch: Batch) -> Delta:
        out: Delta = {}
        counts = self.counts
        for side, delta in ((0, self.left.step(batch)), (1, self.right.step(batch))):
            for t, w in delta.items():
                pair = counts.get(t) or [0, 0]
                before = self._out(pair)
                pair[side] += w
                if pair == [0, 0]:
                    counts.pop(t, None)
                else:
                    counts[t] = pair
                add_into(out, t, self._out(pair) - before)
        return out

    def describe(self) -> list[str]:
        return ([f"{self.kind} all"] + ["  " + x for x in self.left.describe()]
                + ["  " + x for x in self.right.describe()])

    def state_size(self) -> int:
        return len(self.counts) + super().state_size()


class Distinct(Operator):
    """DISTINCT: a weight clamp; emits +1/-1 when a tuple's count crosses zero."""

    def __init__(self, child: Operator):
        self.child = child
        self.counts: dict[tuple, int] = StateDict()

    def step(self, batch: Batch) -> Delta:
        return clamp(self.counts, self.child.step(batch))

    def describe(self) -> list[str]:
        return ["distinct"] + ["  " + x for x in self.child.describe()]

    def state_size(self) -> int:
        return len(self.counts) + super().state_size()


class Aggregate(Operator):
    """GROUP BY with aggregates and HAVING; emits -old/+new output rows of changed groups."""

    def __init__(self, child: Operator, group_key: Callable[[tuple], tuple],
                 aggs: list[AggregateSpec], finalizer: Finalizer, global_group: bool):
        self.child = child
        self.group_key = group_key
        self.aggs = aggs
        self.finalizer = finalizer
        self.groups: dict[tuple, GroupState] = StateDict()  # each holds its output row
        self.global_group = global_group
        self._started = False
        if global_group:
            self.groups[()] = GroupState(aggs)

    def _initial(self) -> Delta:
        """The output before any input: one row for a global aggregate (COUNT(*) = 0)."""
        self._started = True
        if not self.global_group:
            return {}
        state = self.groups[()]
        row = state.output = self.finalizer.finish(state.result(self.aggs))
        return {} if row is None else {row: 1}

    def step(self, batch: Batch) -> Delta:
        out: Delta = {} if self._started else self._initial()
        delta = self.child.step(batch)
        touched: set[tuple] = set()
        aggs, groups, key = self.aggs, self.groups, self.group_key
        for t, w in delta.items():
            g = key(t)
            state = groups.get(g)
            if state is None:
                state = groups[g] = GroupState(aggs)
            state.add(aggs, t, w)
            touched.add(g)
        finish = self.finalizer.finish
        for g in touched:
            state = groups[g]
            old = state.output
            if state.rows == 0 and not self.global_group:
                del groups[g]
                new = None
            else:
                new = state.output = finish((*g, *state.result(aggs)))
            replace_row(out, old, new)
        return out

    def describe(self) -> list[str]:
        kinds = ", ".join(a.node.sql() for a in self.aggs)
        return [f"aggregate [{kinds}]"] + ["  " + x for x in self.child.describe()]

    def state_size(self) -> int:
        return len(self.groups) + super().state_size()


class DynCore(Operator):
    """A Dynamic Yannakakis block used as a delta producer (push mode) inside a dataflow."""

    def __init__(self, rep: Representation, sources: list[Source]):
        self.rep = rep
        rep.count_frontier_weights()  # before the build fills it: its rows read them
        self.sources = sources

    def step(self, batch: Batch) -> Delta:
        leaf = {i: s.step(batch) for i, s in enumerate(self.sources)}
        return self.rep.difference(leaf)

    def describe(self) -> list[str]:
        return ["dynamic yannakakis (push mode)"]

    def state_size(self) -> int:
        return self.rep.size()

    def counters(self) -> dict[str, int]:
        return self.rep.counters()
