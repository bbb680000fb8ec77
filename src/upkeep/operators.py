"""General incremental operators over Z-sets (DESIGN.md, "One algebra underneath").

Each operator turns the deltas of one committed batch into its output delta.  Selection
and projection are linear; join is bilinear and keeps both inputs materialized and
indexed (``Delta(L |x| R) = dL |x| R + L' |x| dR``); DISTINCT and GROUP BY keep state.
This is the "general materializing strategy": it covers what Dynamic Yannakakis does not
(cyclic joins, theta predicates) and serves as its baseline in the benchmarks.
"""

from __future__ import annotations

from collections.abc import Callable

from .aggregates import AggregateSpec, Finalizer, GroupState
from .dyn import Representation, key_function
from .zset import add_into, clamp, replace_row

Delta = dict[tuple, int]
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
    """Reads one relation's delta and maps its rows through the atom's filter-and-project."""

    def __init__(self, relation: str, leaf: Callable[[tuple], tuple | None], label: str):
        self.relation = relation
        self.leaf = leaf
        self.label = label

    def step(self, batch: Batch) -> Delta:
        delta = batch.get(self.relation)
        out: Delta = {}
        if not delta:
            return out
        leaf = self.leaf
        for row, w in delta.items():
            t = leaf(row)
            if t is not None:
                add_into(out, t, w)
        return out

    def describe(self) -> list[str]:
        return [f"scan {self.label}"]


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


class _IndexedState:
    """A materialized Z-set indexed by a join key."""

    def __init__(self, key_positions: tuple[int, ...]):
        self.key = key_function(key_positions)
        self.buckets: dict[tuple, dict[tuple, int]] = {}
        self.size = 0

    def apply(self, delta: Delta) -> None:
        key = self.key
        for t, w in delta.items():
            k = key(t)
            bucket = self.buckets.get(k)
            if bucket is None:
                bucket = self.buckets[k] = {}
            before = len(bucket)
            add_into(bucket, t, w)
            self.size += len(bucket) - before
            if not bucket:
                del self.buckets[k]


class HashJoin(Operator):
    """Bilinear equi-join with both inputs materialized and indexed on the join key."""

    def __init__(self, left: Operator, right: Operator, left_key: tuple[int, ...],
                 right_key: tuple[int, ...], combine: Callable[[tuple, tuple], tuple],
                 label: str):
        self.left, self.right = left, right
        self.lstate = _IndexedState(left_key)
        self.rstate = _IndexedState(right_key)
        self.combine = combine
        self.label = label

    def step(self, batch: Batch) -> Delta:
        dl = self.left.step(batch)
        dr = self.right.step(batch)
        out: Delta = {}
        combine = self.combine
        if dl:
            rb, rkey = self.rstate.buckets, self.lstate.key
            for t, w in dl.items():
                for s, ws in rb.get(rkey(t), {}).items():
                    add_into(out, combine(t, s), w * ws)
            self.lstate.apply(dl)
        if dr:
            lb, skey = self.lstate.buckets, self.rstate.key
            for s, ws in dr.items():
                for t, w in lb.get(skey(s), {}).items():
                    add_into(out, combine(t, s), w * ws)
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



class Distinct(Operator):
    """DISTINCT: a weight clamp; emits +1/-1 when a tuple's count crosses zero."""

    def __init__(self, child: Operator):
        self.child = child
        self.counts: dict[tuple, int] = {}

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
        self.groups: dict[tuple, GroupState] = {}
        self.outputs: dict[tuple, tuple | None] = {}
        self.global_group = global_group
        self._started = False
        if global_group:
            self.groups[()] = GroupState(aggs)

    def _initial(self) -> Delta:
        """The output before any input: one row for a global aggregate (COUNT(*) = 0)."""
        self._started = True
        if not self.global_group:
            return {}
        row = self.finalizer.finish(self.groups[()].result(self.aggs))
        if row is None:
            return {}
        self.outputs[()] = row
        return {row: 1}

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
        for g in touched:
            state = groups[g]
            old = self.outputs.get(g)
            if state.rows == 0 and not self.global_group:
                del groups[g]
                new = None
            else:
                new = self.finalizer.finish((*g, *state.result(aggs)))
            if new is None:
                self.outputs.pop(g, None)
            else:
                self.outputs[g] = new
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
        self.sources = sources

    def step(self, batch: Batch) -> Delta:
        leaf = {i: s.step(batch) for i, s in enumerate(self.sources)}
        changes = self.rep.update(leaf, want_delta=True)
        out: Delta = {}
        for t, (old, new) in changes.items():
            d = (new or 0) - (old or 0)
            if d:
                out[t] = d
        return out

    def describe(self) -> list[str]:
        return ["dynamic yannakakis (push mode)"]

    def state_size(self) -> int:
        return self.rep.size()
