"""The Spark side of a shard: decoding change files, routing, and the stateful processor.

A streaming query (see :mod:`upkeep.spark.query`) reads whole change files, decodes them with
the local pipeline's readers (so records, errors and their positions are the same as on one
machine), routes each row to the shards of every view group that reads its table
(:mod:`upkeep.spark.routing`), and groups by ``(group, shard)`` into
:class:`ShardProcessor`, a ``transformWithStateInPandas`` processor.  Its Spark-managed state
per shard is a log of change chunks (``ListState``, appended once per micro-batch) and a
version token (``ValueState``); the engine itself runs in a shard server
(:mod:`upkeep.spark.shards`).  The log is compacted to the shard's live rows when it grows
past a few times their number, so both the state and the work per batch stay proportional.
"""

from __future__ import annotations

import json
import pickle
import re
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pyarrow as pa
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from ..codecs.arrow_values import column_values
from ..codecs.spark_rows import encode_row
from ..errors import ConstraintError, SchemaError
from ..io.apply import Applier, BadRecord
from ..io.formats import EXTENSIONS, READERS
from ..io.records import ChangeRecord, Position
from ..local import from_catalog
from .errors import BatchRejected, ShardError
from .fixpoint import FIXPOINT_VIEW
from .keyed import (
    KeyedLayout,
    compile_views,
    freeze,
    partial_aggregates,
    route_changes,
    start_records,
)
from .routing import Group
from .shard_client import call
from .worker_heap import freeze_worker_heap

ROUTED_SCHEMA = "grp string, shard int, file string, payload binary"
DEAD = "__dead__"  # the key that carries records rejected while decoding
DEAD_LETTER_VIEW = "__dead_letter__"  # output rows that are rejected records, not deltas
#: an embedded database's change file (``upkeep.spark.connection``): its sequence number
#: and commit time
CHANGE_FILE = re.compile(r"changes-(?P<seq>\d+)-t(?P<at>.+)\.jsonl")
#: how the first line of an embedded change file carrying a transaction's metadata begins
METADATA_PREFIX = '{"upkeep_metadata": '
TICK_SUFFIX = ".tick"  # a change file with no records that makes every shard report in
CHUNK_ROWS = 50_000
COMPACT_FACTOR = 4


@dataclass(frozen=True)
class QueryPlan:
    """Everything executors need, shipped with the query: the catalog, the view groups and
    the policy for rejected records."""

    plan_id: str
    catalog: dict
    groups: list[Group]
    on_error: str = "stop"
    keyed: KeyedLayout | None = None  # views kept in Spark's keyed state (:mod:`.keyed`)
    unkeyed: dict[str, str] = field(default_factory=dict)  # with keyed state: why not
    #: table -> the first embedded change file (:data:`CHANGE_FILE`) that may hold its rows:
    #: a table dropped and created again ignores the rows earlier files give its name
    since: dict[str, int] = field(default_factory=dict)
    #: the change files are an embedded database's own (``upkeep.spark.connection``), whose
    #: first line may carry its transaction's metadata; a pipeline's are the user's
    embedded: bool = False
    #: records left out of the stream, ``(file name, line or record number)``: those a
    #: keyed pipeline's failed micro-batch was found to reject under ``on_error`` skip or
    #: dead-letter, dropped when the batch runs again (:mod:`upkeep.spark.pipeline`)
    excluded: frozenset[tuple[str, int]] = frozenset()

    def stale_tables(self, name: str) -> frozenset[str]:
        """The tables whose records in change file ``name`` belong to a dropped table."""
        named = CHANGE_FILE.fullmatch(name)
        if named is None or not self.since:
            return frozenset()
        seq = int(named["seq"])
        return frozenset(t for t, first in self.since.items() if seq < first)

    def group(self, name: str) -> Group:
        return next(g for g in self.groups if g.name == name)

    def spec(self, name: str) -> tuple[dict, list[str], object]:
        group = self.group(name)
        return self.catalog, group.views, group.fixpoint

    def readers(self) -> dict[str, list[Group]]:
        """Each table's groups (the groups whose views read it)."""
        out: dict[str, list[Group]] = {}
        for group in self.groups:
            for table in group.tables:
                out.setdefault(table, []).append(group)
        return out

    def reports(self, group: str, shard: int, table: str) -> bool:
        """Whether this shard reports a rejected record of ``table``: a record reaches every
        group reading its table (and, where the table is copied, every shard), and each of
        them rejects it alike, so exactly one of them speaks."""
        first = next(g for g in self.groups if table in g.tables)
        return first.name == group and (table in first.routes or shard == 0)


# ---------------------------------------------------------------- decode and route
_appliers: dict[str, Applier] = {}


def _applier(plan: QueryPlan) -> Applier:
    """The record checker of the plan's catalog (one per worker process and plan)."""
    applier = _appliers.get(plan.plan_id)
    if applier is None:
        applier = _appliers[plan.plan_id] = Applier(from_catalog(plan.catalog, []))
    return applier


def route_files(plan: QueryPlan, frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """``mapInPandas`` over ``binaryFile`` rows: each change file's records, decoded and
    checked like the local pipeline's, as one payload per ``(group, shard)``."""
    applier, readers = _applier(plan), plan.readers()
    for frame in frames:
        out: list[tuple] = []
        for path, content in zip(frame["path"], frame["content"], strict=True):
            name = Path(path.removeprefix("file:")).name
            if name.endswith(TICK_SUFFIX):
                out += [(g.name, s, name, pickle.dumps(([], [], []))) for g in plan.groups
                        for s in range(g.shards)]
                continue
            out += _route_file(plan, applier, readers, name, content)
        yield pd.DataFrame(out, columns=["grp", "shard", "file", "payload"])


def metadata_line(metadata: dict) -> str:
    """The change-file line carrying a transaction's ``metadata`` (JSON), or a SchemaError
    when JSON cannot hold it."""
    try:
        return json.dumps({"upkeep_metadata": metadata}, allow_nan=False) + "\n"
    except (TypeError, ValueError) as exc:
        raise SchemaError(f"transaction metadata on the spark engine is written as JSON "
                          f"with the batch's changes: {exc}") from None


def metadata_in(line: str) -> dict | None:
    """The metadata a change-file line carries (None for a record's line)."""
    if not line.startswith(METADATA_PREFIX):
        return None
    return json.loads(line)["upkeep_metadata"]


def file_records(plan: QueryPlan, name: str, content: bytes) -> Iterator:
    """A change file's records, read by the local pipeline's reader for its format (none
    for a file of another kind), but for those of a table dropped since the file was
    written (:meth:`QueryPlan.stale_tables`), an embedded database's metadata line
    (:func:`metadata_line`) and the records the plan leaves out
    (:attr:`QueryPlan.excluded`)."""
    fmt = EXTENSIONS.get(Path(name).suffix.lower())
    if fmt is None:
        return
    stale = plan.stale_tables(name)
    left_out = {number for file, number in plan.excluded if file == name}  # mostly none
    # an embedded database's change file may begin with its transaction's metadata
    skip = int(plan.embedded and CHANGE_FILE.fullmatch(name) is not None
               and content.startswith(METADATA_PREFIX.encode()))
    with tempfile.TemporaryDirectory() as tmp:
        local = Path(tmp) / name
        local.write_bytes(content)
        for record in READERS[fmt](local, name, skip).read(final=True):
            if stale and isinstance(record.table, str) and record.table.lower() in stale:
                continue
            if not (left_out and record.position.number in left_out):
                yield record


def decode_file(plan: QueryPlan, name: str, content: bytes) -> list[tuple[str, tuple, int]]:
    """A change file's changes ``(table, row, weight)``, each record checked like the local
    pipeline's, and each row it inserts against its table's NOT NULL columns (a keyed
    table step keeps rows and keys, not the columns' rules); a bad record fails the batch
    with its position (a pipeline under ``skip`` or ``dead-letter`` then runs the batch
    again without it: :meth:`upkeep.spark.pipeline.SparkPipelineRunner._leave_out`)."""
    applier = _applier(plan)
    tables = applier.db.local_catalog.tables
    out = []
    for record in file_records(plan, name, content):
        try:
            change = applier.prepare(record)
            for row, weight in change.rows:
                if weight > 0:
                    tables[change.table].check_not_null(row)
        except BadRecord as exc:
            raise BatchRejected(SchemaError(str(exc)).to_record(
                position=str(record.position))) from None
        except ConstraintError as exc:
            raise BatchRejected(exc.to_record(position=str(record.position))) from None
        out += [(change.table, row, weight) for row, weight in change.rows]
    return out


def _route_file(plan: QueryPlan, applier: Applier, readers: dict[str, list[Group]], name: str,
                content: bytes) -> list[tuple]:
    if EXTENSIONS.get(Path(name).suffix.lower()) is None:
        return []
    buckets: dict[tuple[str, int], tuple[list, list, list]] = {}
    for record in file_records(plan, name, content):
        try:
            change = applier.prepare(record)
        except BadRecord as exc:
            if plan.on_error == "stop":
                raise BatchRejected(SchemaError(str(exc)).to_record(
                    position=str(record.position))) from None
            buckets.setdefault((DEAD, 0), ([], [], []))[2].append(
                record_dead_letter(record, str(exc)))
            continue
        where = record.position
        for row, weight in change.rows:
            for group in readers.get(change.table, ()):
                for shard in group.shards_of(change.table, row):
                    changes, positions, _ = buckets.setdefault((group.name, shard),
                                                               ([], [], []))
                    changes.append((change.table, row, weight))
                    positions.append(where)
    for group in plan.groups:  # every partition of a fixpoint takes part in every batch
        if group.fixpoint is not None:
            for shard in range(group.shards):
                buckets.setdefault((group.name, shard), ([], [], []))
    return [(g, s, name, pickle.dumps(v, protocol=5)) for (g, s), v in buckets.items()]


def route_rows(plan: QueryPlan, table: str, batches: Iterator[pa.RecordBatch]
               ) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` over a snapshot of ``table`` (bulk load): its rows, coerced to the
    table's types, as chunks of insertions per ``(group, shard)``.  Arrow keeps NULL apart
    from NaN and decimals exact, which pandas would not."""
    for frame in _route_arrow(plan, table, batches):
        yield pa.RecordBatch.from_pydict(
            {"grp": [g for g, _, _ in frame], "shard": [s for _, s, _ in frame],
             "rows": [len(c) for _, _, c in frame],
             "payload": [pickle.dumps(c, protocol=5) for _, _, c in frame]},
            schema=pa.schema([("grp", pa.string()), ("shard", pa.int32()),
                              ("rows", pa.int64()), ("payload", pa.binary())]))


def route_generated(plan: QueryPlan, table: str, batches: Iterator[pa.RecordBatch]
                    ) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` over generated rows (the rate source): insertions into ``table``,
    routed like a change file's."""
    where = f"rate source for {table}"
    for frame in _route_arrow(plan, table, batches):
        yield pa.RecordBatch.from_pydict(
            {"grp": [g for g, _, _ in frame], "shard": [s for _, s, _ in frame],
             "file": [where] * len(frame),
             "payload": [pickle.dumps((c, [where] * len(c), []), protocol=5)
                         for _, _, c in frame]},
            schema=pa.schema([("grp", pa.string()), ("shard", pa.int32()),
                              ("file", pa.string()),
                              ("payload", pa.binary())]))


def _route_arrow(plan: QueryPlan, table: str, batches: Iterator[pa.RecordBatch]
                 ) -> Iterator[list[tuple[str, int, list]]]:
    groups = plan.readers().get(table, [])
    for batch in batches:
        buckets: dict[tuple[str, int], list] = {}
        for row in coerce_arrow(plan, table, batch):
            for group in groups:
                for shard in group.shards_of(table, row):
                    buckets.setdefault((group.name, shard), []).append((table, row, 1))
        yield [(g, s, c) for (g, s), c in buckets.items()]


def coerce_arrow(plan: QueryPlan, table: str, batch: pa.RecordBatch) -> list[tuple]:
    """A snapshot's Arrow rows coerced to ``table``'s types (a bad value rejects the load)."""
    converters = _applier(plan).converters[table]
    rows = []
    for values in zip(*map(column_values, batch.columns), strict=True):
        try:
            rows.append(tuple([None if v is None else f(v)
                               for f, v in zip(converters, values, strict=True)]))
        except ValueError as exc:
            raise BatchRejected(SchemaError(f"a row for table {table}: {exc}",
                                            tuple(values)).to_record()) from None
    return rows


def record_dead_letter(record: ChangeRecord, error: str) -> str:
    """The dead-letter line of a change record: its images, or its text when it has none."""
    images = record.images() if record.table or record.original else {"_raw": record.raw}
    return dead_letter(images, error, record.position)


def dead_letter(images: dict, error: str, position: Position | str) -> str:
    """A dead-letter line as the local pipeline writes it: the record, ``_error``, ``_source``."""
    line = {"_error": error}
    if isinstance(position, Position):
        line["_source"] = {"file": position.file, position.unit: position.number}
    else:
        line["_source"] = {"file": position}
    line.update(images)
    return json.dumps(line, default=str)


# ---------------------------------------------------------------- the stateful processor
class ShardProcessor(StatefulProcessor):
    """One ``(group, shard)`` key: its log in Spark state, its engine in a shard server."""

    def __init__(self, plan: QueryPlan):
        self.plan = plan

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.meta = handle.getValueState("meta", "token string, logged long, emitted boolean")
        self.log = handle.getListState("log", "chunk binary")
        freeze_worker_heap()

    def _state(self) -> tuple[str | None, int, bool]:
        value = self.meta.get() if self.meta.exists() else None
        # A new shard has not sent its views' contents yet (non-empty even over empty
        # tables for a global aggregate); the first batch's tick makes every shard send them.
        return (value[0], int(value[1]), bool(value[2])) if value else (None, 0, False)

    def _call(self, key: tuple, request: tuple, token: str | None):
        """A request that needs the engine at ``token``: rebuilt from the log if stale."""
        full = (request[0], self.plan.plan_id, key) + request[1:]
        try:
            result = call(key[1], full)
            if result is None:
                chunks = ([pickle.loads(c[0]) for c in self.log.get()]
                          if self.log.exists() else [])
                call(key[1], ("load", self.plan.plan_id, key, self.plan.spec(key[0]), token,
                              chunks))
                result = call(key[1], full)
        except ShardError as exc:
            raise BatchRejected(exc.record) from None
        return result

    def _apply(self, key: tuple, changes: list, where: list) -> tuple[list, list[str]]:
        """Apply a batch to the shard; returns its view deltas and dead-letter lines (records
        rejected under ``on_error`` skip/dead-letter, which are left out of the log)."""
        token, logged, emitted = self._state()
        new = uuid.uuid4().hex
        tolerant = self.plan.on_error != "stop"
        deltas, size, rejected = self._call(
            key, ("apply", token, new, changes, where, tolerant), token)
        dead: list[str] = []
        if rejected:
            bad = {where[i] for i, _ in rejected}
            for i, error in rejected:
                table, row, weight = changes[i]
                if self.plan.reports(key[0], key[1], table):
                    op = "insert" if weight > 0 else "delete"
                    dead.append(dead_letter({"table": table, "op": op, "row": list(row)},
                                            error, where[i]))
            changes = [c for c, w in zip(changes, where, strict=True) if w not in bad]
        if changes:
            logged += len(changes)
            if logged > COMPACT_FACTOR * size + CHUNK_ROWS:
                live = self._call(key, ("dump", new), new)
                self.log.put([(pickle.dumps(live[i:i + CHUNK_ROWS], protocol=5),)
                              for i in range(0, len(live), CHUNK_ROWS)])
                logged = len(live)
            else:
                self.log.appendList([(pickle.dumps(changes, protocol=5),)])
        self.meta.update((new, logged, emitted))
        return deltas, dead

    def handleInitialState(self, key, initialState: pd.DataFrame, timerValues) -> None:
        """Snapshot chunks go to the log only; the first batch (the start tick) finds no
        engine at the new token, builds it from the log in bulk (checking every row) and
        sends the views' contents."""
        _, logged, _ = self._state()
        self.log.appendList([(p,) for p in initialState["payload"]])
        logged += int(initialState["rows"].sum())
        self.meta.update((uuid.uuid4().hex, logged, False))

    def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:
        key = (key[0], int(key[1]))
        # files in name order (the local pipeline's); each file is one payload per shard
        frame = pd.concat(list(rows), ignore_index=True).sort_values("file", kind="stable")
        changes: list = []
        where: list = []
        dead: list[str] = []
        for payload in frame["payload"]:
            c, w, d = pickle.loads(payload)
            changes += c
            where += w
            dead += d
        out: list = []
        if key[0] != DEAD:
            token, logged, emitted = self._state()
            if not emitted:
                out += self._call(key, ("contents", token), token)
                self.meta.update((token, logged, True))
            deltas, rejected = self._apply(key, changes, where)
            out += deltas
            dead += rejected
        for i in range(0, len(out), CHUNK_ROWS):
            part = out[i:i + CHUNK_ROWS]
            yield pd.DataFrame({"view": [v for v, _, _ in part],
                                "row": [r if v == FIXPOINT_VIEW else encode_row(r)
                                        for v, r, _ in part],
                                "weight": [w for _, _, w in part]})
        if dead:
            yield pd.DataFrame({"view": DEAD_LETTER_VIEW, "row": dead, "weight": 1})

    def close(self) -> None:
        pass


# ---------------------------------------------------------------- keyed state's input
def route_keyed_files(plan: QueryPlan, frames: Iterator[pd.DataFrame]
                      ) -> Iterator[pd.DataFrame]:
    """``mapInPandas`` over ``binaryFile`` rows: each change file's records, decoded and
    checked like the local pipeline's, as level-0 records of the keyed steps
    (:func:`upkeep.spark.keyed.route_changes`)."""
    layout, frozen = plan.keyed, freeze(plan.catalog)
    compiled = compile_views(layout, frozen)
    views = compiled.chains
    wanted = set(layout.tables)
    for frame in frames:
        out: list[tuple] = []
        for path, content in zip(frame["path"], frame["content"], strict=True):
            name = path.rsplit("/", 1)[-1]
            if name.endswith(TICK_SUFFIX):
                out += start_records(layout, frozen)
                continue
            changes = [c for c in decode_file(plan, name, content) if c[0] in wanted]
            out += route_changes(layout, plan.catalog, views, changes)
        out = partial_aggregates(out, compiled.finals)
        yield pd.DataFrame(out, columns=["step", "group", "key", "side", "row", "weight"])


def keyed_snapshot_records(plan: QueryPlan, table: str, batches: Iterator[pa.RecordBatch]
                           ) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` over a loaded table (or a rate source's rows): its rows as level-0
    records of the keyed steps."""
    schema = pa.schema([("step", pa.int32()), ("group", pa.int64()), ("key", pa.int64()),
                        ("side", pa.int32()), ("row", pa.binary()), ("weight", pa.int64())])
    compiled = compile_views(plan.keyed, freeze(plan.catalog))
    for batch in batches:
        records = partial_aggregates(route_changes(
            plan.keyed, plan.catalog, compiled.chains,
            [(table, row, 1) for row in coerce_arrow(plan, table, batch)]), compiled.finals)
        yield pa.RecordBatch.from_pydict(
            {name: [r[i] for r in records] for i, name in enumerate(schema.names)},
            schema=schema)
