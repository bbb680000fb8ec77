"""Recursive views on Spark: the fixpoint (absorption or DRed) over the shards, as Spark
tasks.

``recursive-views-absorption-provenance.txt`` sections II-III: relations are partitioned
by their first attribute and the fixpoint exchanges tuples between partitions
(:mod:`upkeep.recursive.partitioned`).  Here the partitions are the shards of a *fixpoint
group* (:func:`fixpoint_layout` decides which recursive views qualify):

* the streaming query routes each base row to the shard of its first attribute, where the
  shard processor logs it in Spark state (durable, compacted like any shard's log) and
  stages it in the shard's :class:`FixpointShard`, kept warm in the executor's shard
  server; every shard hears of every change file, so each reports a marker with the token
  of its state;
* the micro-batch's ``foreachBatch`` then runs the supersteps (:class:`FixpointDriver`):
  one Spark job per superstep, each task one partition, the messages between them moved
  by a Spark shuffle (``partitionBy``), until none are left (DRed runs two such rounds:
  over-deletion, then re-derivation and insertion);
* the recursive CTE's changes meet the outer query (GROUP BY, MIN/MAX, ...) on the driver,
  which is the final aggregation of section VII.

A shard whose engine was lost (a restart, a retried or rejected batch) is rebuilt from its
Spark-state log, and then every partition restarts the fixpoint from its base rows, since
derived tuples depend on rows of all partitions.  The driver diffs the result against the
contents it holds, so subscribers still see exact changes.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

from pyspark import StorageLevel

from ..local import from_catalog
from ..local.catalog import LocalCatalog
from ..recursive.partitioned import Layout, partition_plan
from ..recursive.view import RecursiveView, internal_name, new_partition, partition_class
from ..zset import TableChanges, net_by_table
from .errors import BatchRejected, ShardError
from .shard_client import call
from .shard_engine import ShardEngine

FIXPOINT_VIEW = "__fixpoint__"  # output rows that are a fixpoint partition's marker


@dataclass(frozen=True)
class FixpointSpec:
    """What a fixpoint shard needs besides the catalog: its view and the partition count."""

    view: str
    partitions: int


def fixpoint_layout(db: LocalCatalog, name: str, partitions: int) -> Layout | None:
    """The layout of view ``name`` over ``partitions`` when it can run partitioned: a
    recursive view of one CTE whose outer query reads only the CTE, with rules the
    partitioned fixpoint splits (:func:`partition_plan`)."""
    view = db.runtime(name)
    if not isinstance(view, RecursiveView) or partitions < 2:
        return None
    if len(view.engines) != 1:
        return None
    (engine,) = view.engines.values()
    if view.outer_block is not None and any(
            a.relation != internal_name(engine.program.target) for a in view.outer_block.atoms):
        return None
    if view.outer is not None and view.outer_block is None:
        return None
    plan = partition_plan(engine.program, partitions, getattr(engine, "selection_spec", None))
    return None if isinstance(plan, str) else plan[1]


# ---------------------------------------------------------------- executor side
class FixpointShard(ShardEngine):
    """One partition on its shard server: the base rows kept here (checked and logged like
    any shard's tables) and the partition of the fixpoint over them."""

    def __init__(self, catalog: dict, spec: FixpointSpec, index: int, log=(),
                 restored: bool = False):
        """``restored``: the shard had state before (Spark state says so), so the other
        partitions' derived tuples may depend on what this one lost: all must restart."""
        super().__init__(catalog, [], log)
        db = from_catalog(catalog, [spec.view])
        view = db.runtime(spec.view)
        (engine,) = view.engines.values()
        selection = getattr(engine, "selection_spec", None)
        plan = partition_plan(engine.program, spec.partitions, selection)
        if isinstance(plan, str):
            raise ShardError(f"view {spec.view} cannot be partitioned: {plan}")
        self.fixpoint = new_partition(view.strategy, *plan, index, db.bdd_ordering, selection)
        self.rebuilt = restored
        self._last: tuple | None = None  # (call id, result): a retried task gets the same
        self._stage(self.dump())

    def apply(self, changes: TableChanges, where=None, tolerant=False):
        deltas, rejected = super().apply(changes, where, tolerant)
        bad = {i for i, _ in rejected}
        self._stage([c for i, c in enumerate(changes) if i not in bad])
        return deltas, rejected

    def _stage(self, changes: TableChanges) -> None:
        self.fixpoint.stage(net_by_table(changes))

    def superstep(self, call_id: tuple, op: str, args: tuple):
        """``restage`` / ``announce`` / ``step`` / ``advance`` / ``finish``; a repeated
        ``call_id`` (a task Spark re-ran) returns the first result without running again."""
        if self._last is not None and self._last[0] == call_id:
            return self._last[1]
        fx = self.fixpoint
        if op == "restage":
            fx.restage()
            self.rebuilt = False
            result = None
        elif op == "announce":
            result = fx.announce()
        elif op == "step":
            inbox, first = args
            result = fx.step(inbox, first)
        elif op == "advance":
            result = fx.advance()
        elif op == "finish":
            result = (fx.finish(), fx.counters())
        else:
            raise ValueError(op)
        self._last = (call_id, result)
        return result

    def report(self, deltas, key: tuple, token: str):
        """No view deltas here: one output row telling the driver this partition's state
        token (the driver runs the supersteps, :class:`FixpointDriver`)."""
        return [(FIXPOINT_VIEW, json.dumps({"group": key[0], "shard": key[1], "token": token,
                                            "rebuilt": self.rebuilt}), 0)]


# ---------------------------------------------------------------- driver side
class FixpointDriver:
    """The supersteps of one fixpoint group, and its view's outer query, on the driver."""

    def __init__(self, plan_id: str, catalog: dict, group: str, spec: FixpointSpec):
        self.plan_id = plan_id
        self.group = group
        self.spec = spec
        self.view: RecursiveView = from_catalog(catalog, [spec.view]).runtime(spec.view)
        self.contents: set[tuple] = set()  # the CTE's rows
        self.batches = 0
        self.shipping = dict.fromkeys(("shipped_tuples", "shipped_bytes", "supersteps"), 0)
        self.counters: dict[str, int] = {}

    def run(self, spark, markers: list[dict]) -> list[tuple[tuple, int]]:
        """One micro-batch: the supersteps over every partition; returns the view's delta."""
        n = self.spec.partitions
        tokens = {m["shard"]: m["token"] for m in markers}
        if set(tokens) != set(range(n)):
            raise ShardError(f"fixpoint {self.spec.view}: partitions "
                             f"{sorted(set(range(n)) - set(tokens))} did not report")
        self.batches += 1
        sc = spark.sparkContext
        key = (self.plan_id, self.group, tokens, self.batches)
        rebuilt = any(m["rebuilt"] for m in markers)
        if rebuilt:
            self._each(sc, key, "restage", ())
        step = self._supersteps(sc, key, self._each(sc, key, "announce", ()), 0, first=True)
        for _ in range(partition_class(self.view.strategy).phases - 1):
            step = self._supersteps(sc, key, self._each(sc, key, "advance", (), step), step)
        finished = self._each(sc, key, "finish", ())
        changes: dict[tuple, int] = {}
        counters: Counter = Counter()
        for part_changes, part_counters in finished:
            changes.update(part_changes)
            counters.update(part_counters)
        self.counters = dict(counters)
        if rebuilt:  # the partitions restarted: their result is the whole CTE
            now = {t for t, w in changes.items() if w > 0}
            delta = {t: 1 for t in now - self.contents}
            delta.update({t: -1 for t in self.contents - now})
        else:
            delta = changes
        for t, w in delta.items():
            (self.contents.add if w > 0 else self.contents.discard)(t)
        return self._outer(delta)

    def _supersteps(self, sc, key: tuple, outboxes: list, step: int, first: bool = False
                    ) -> int:
        """Deliver ``outboxes`` and run supersteps until no message is left (``first``: at
        least one, which starts the batch); returns the last superstep's number."""
        n = self.spec.partitions
        for source, box in enumerate(outboxes):
            cross = [m for d, m in box if d != source]
            self.shipping["shipped_tuples"] += len(cross)
            self.shipping["shipped_bytes"] += sum(len(m) for m in cross)
        if not first and not any(outboxes):
            return step
        messages = sc.parallelize([m for box in outboxes for m in box], n)
        started = step
        kept = []
        while True:
            step += 1
            out = (messages.partitionBy(n, lambda d: d)
                   .mapPartitionsWithIndex(_step_task(key, step, first), True)
                   .persist(StorageLevel.MEMORY_AND_DISK))
            kept.append(out)
            stats = out.filter(lambda m: m[0] < 0).map(lambda m: m[1]).collect()
            sent = sum(s[0] for s in stats)
            self.shipping["shipped_tuples"] += sum(s[1] for s in stats)
            self.shipping["shipped_bytes"] += sum(s[2] for s in stats)
            messages = out.filter(lambda m: m[0] >= 0)
            first = False
            if not sent:
                break
        for rdd in kept:
            rdd.unpersist()
        self.shipping["supersteps"] += step - started
        return step

    def _outer(self, delta: dict[tuple, int]) -> list[tuple[tuple, int]]:
        view = self.view
        if view.outer is None:
            out = delta
        else:
            (cte,) = view.engines
            out = view.outer.step({internal_name(cte): delta})
        view.record(out)
        return [(row, w) for row, w in out.items() if w]

    def _each(self, sc, key: tuple, op: str, args: tuple, step: int = 0) -> list:
        """``op`` on every partition, one Spark task each; their results in order."""
        n = self.spec.partitions
        return (sc.parallelize(range(n), n)
                .map(lambda p: _call(key, p, op, args, step)).collect())

    def report(self) -> dict[str, int]:
        return {**self.counters, **self.shipping}


def _call(key: tuple, shard: int, op: str, args: tuple, step: int = 0):
    """Run a fixpoint operation on the partition's shard server (inside a Spark task);
    a rejected batch surfaces as the processor's marked error."""
    plan_id, group, tokens, batch = key
    try:
        return call(shard, ("fixpoint", plan_id, (group, shard), tokens[shard],
                            (batch, op, step), op, args))
    except ShardError as exc:
        raise BatchRejected(exc.record) from None


def _step_task(key: tuple, step: int, first: bool):
    def run(shard: int, messages):
        inbox = [payload for _, payload in messages]
        outbox = _call(key, shard, "step", (inbox, first), step)
        cross = [(d, m) for d, m in outbox if d != shard]
        yield (-1, (len(outbox), len(cross), sum(len(m) for _, m in cross)))
        yield from outbox
    return run
