"""Building the streaming query: change files in, view deltas out.

One query maintains every view of a catalog: change files are read whole (Spark's
``binaryFile`` file-stream source, so each file is decoded by upkeep's own readers),
routed, and grouped by ``(group, shard)`` into :class:`~upkeep.spark.processor.ShardProcessor`.
Its output is one delta stream ``(view, row, weight)`` for all views;
:func:`typed_deltas` turns one view's part into typed columns for Spark's own sinks.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import partial

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from ..codecs.spark_rows import spark_schema
from ..errors import SchemaError
from ..local.catalog import LocalCatalog
from ..types import SqlType
from .codec import OUTPUT_SCHEMA
from .keyed import KEYED_SCHEMA, keyed_stream, plan_keyed
from .processor import (
    ROUTED_SCHEMA,
    QueryPlan,
    ShardProcessor,
    keyed_snapshot_records,
    route_files,
    route_generated,
    route_keyed_files,
    route_rows,
)
from .routing import plan_groups, tables_group, view_inputs
from .session import configure

BINARY_FILE_SCHEMA = "path string, modificationTime timestamp, length long, content binary"
SNAPSHOT_SCHEMA = "grp string, shard int, rows long, payload binary"


def make_plan(db: LocalCatalog, shards: int, on_error: str = "stop",
              fixpoints: bool = False, keyed: bool = False,
              loaded: dict[str, int] | None = None,
              since: dict[str, int] | None = None, embedded: bool = False) -> QueryPlan:
    """The query plan of ``db``'s catalog (tables and views) over ``shards`` shards;
    ``on_error`` is the pipeline's policy for rejected records (stop, skip, dead-letter);
    ``fixpoints``: run recursive views as partitioned fixpoints (:mod:`.fixpoint`);
    ``keyed``: keep the views that fit it in Spark's keyed state (:mod:`.keyed`), the
    others in shards, its keys sized and joins ordered for the rows ``loaded`` in bulk
    (per table); ``since``:
    per table, the first embedded change file that may hold its rows
    (:attr:`QueryPlan.since`); ``embedded``: the change files are an embedded database's
    own (:attr:`QueryPlan.embedded`)."""
    catalog = db.describe()
    layout, unkeyed = None, {}
    if keyed:
        catalog["view_columns"] = {name: db.schema_of(name) for name in catalog["views"]}
        reads = view_inputs(catalog["views"])
        kept_out: dict[str, str] = {}
        while True:  # a view in shards has every view it reads in shards with it
            layout, refused = plan_keyed(catalog, {
                name: sql for name, (sql, _) in catalog["views"].items()
                if name not in kept_out}, loaded)
            stranded = {read: f"view {name} reads it and runs in shards"
                        for name in refused.keys() | kept_out.keys()
                        for read in reads[name] if read in layout.views}
            if not stranded:
                break
            kept_out.update(stranded)
        unkeyed = {**refused, **kept_out}
        layout = layout if layout.tables else None
    groups = plan_groups(db, shards, fixpoints,
                         frozenset(layout.views) if layout else frozenset())
    held = set(layout.tables) if layout else set()
    for group in groups:
        held |= group.tables
    unheld = sorted(set(db.tables) - held)  # no view reads them
    if unheld:
        groups.append(tables_group(db, unheld, shards))
    digest = hashlib.sha256(_canonical((catalog, [g.__dict__ for g in groups],
                                        layout and layout.__dict__)).encode())
    digest = digest.hexdigest()
    return QueryPlan(digest[:16], catalog, groups, on_error, layout, unkeyed, since or {},
                     embedded)


@dataclass(frozen=True)
class RateSource:
    """Generated insertions for load tests: Spark's ``rate`` source, ``rows_per_second``
    rows whose columns are Spark SQL expressions over its ``value`` (0, 1, 2, ...)."""

    table: str
    rows_per_second: int
    columns: dict[str, str]


def _canonical(value: object) -> str:
    """A text of ``value`` that is the same in every process (sets sorted; Python salts the
    hash of strings per process, and with it the order of a set of them)."""
    if isinstance(value, (set, frozenset)):
        return "{" + ",".join(sorted(_canonical(v) for v in value)) + "}"
    if isinstance(value, dict):
        return "{" + ",".join(sorted(f"{_canonical(k)}:{_canonical(v)}"
                                     for k, v in value.items())) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_canonical(v) for v in value) + "]"
    return repr(value)


def delta_stream(spark: SparkSession, plan: QueryPlan, changes: str,
                 snapshots: dict[str, DataFrame] | None = None,
                 max_files_per_trigger: int | None = None,
                 rates: list[RateSource] | None = None,
                 keyed_state: list[DataFrame | None] | None = None) -> DataFrame:
    """The streaming DataFrame of view deltas for change files arriving in ``changes``.

    ``snapshots`` (table -> DataFrame) bulk-load the tables' initial contents into the
    shards' state (Spark's ``initialState``), built by DataFrame operations, not row by row.
    ``rates`` add generated insertions (:class:`RateSource`).  Views in keyed state
    take their loaded tables from ``keyed_state``, each level's state from
    :func:`upkeep.spark.keyed.bulk_build`.
    """
    configure(spark)
    reader = spark.readStream.format("binaryFile").schema(BINARY_FILE_SCHEMA)
    if max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", str(max_files_per_trigger))
    files = reader.load(changes).select("path", "content")
    routed = files.mapInPandas(partial(route_files, plan), ROUTED_SCHEMA)
    keyed_records = (files.mapInPandas(partial(route_keyed_files, plan), KEYED_SCHEMA)
                     if plan.keyed is not None else None)
    for rate in rates or []:
        names = [n for n, _ in plan_schema(plan, rate.table)]
        missing = [n for n in names if n not in rate.columns]
        unknown = [n for n in rate.columns if n not in names]
        if missing or unknown:
            raise SchemaError(f"rate source for {rate.table}: columns {names} need one "
                              f"expression each (missing {missing}, unknown {unknown})")
        generated = (spark.readStream.format("rate")
                     .option("rowsPerSecond", str(rate.rows_per_second)).load()
                     .selectExpr(*[f"{rate.columns[n]} AS `{n}`" for n in names]))
        routed = routed.unionByName(
            generated.mapInArrow(partial(route_generated, plan, rate.table), ROUTED_SCHEMA))
        if keyed_records is not None and rate.table in plan.keyed.tables:
            keyed_records = keyed_records.unionByName(generated.mapInArrow(
                partial(keyed_snapshot_records, plan, rate.table), KEYED_SCHEMA))
    keyed = None
    if plan.keyed is not None:
        keyed = keyed_stream(keyed_records, plan.keyed, plan.catalog, keyed_state)
        snapshots = {t: df for t, df in (snapshots or {}).items()
                     if any(t in g.tables for g in plan.groups)}
        if not plan.groups:
            return keyed
    initial = None
    if snapshots:
        parts = [df.mapInArrow(partial(route_rows, plan, table), SNAPSHOT_SCHEMA)
                 for table, df in snapshots.items()]
        union = parts[0]
        for part in parts[1:]:
            union = union.unionByName(part)
        initial = union.groupBy("grp", "shard")
    shards = routed.groupBy("grp", "shard").transformWithStateInPandas(
        ShardProcessor(plan), OUTPUT_SCHEMA, "Append", "None", initialState=initial)
    return shards if keyed is None else shards.unionByName(keyed)


def keyed_load_records(plan: QueryPlan, snapshots: dict[str, DataFrame]) -> DataFrame | None:
    """The loaded tables' rows as level-0 records of the keyed steps (None if none)."""
    parts = [df.mapInArrow(partial(keyed_snapshot_records, plan, t), KEYED_SCHEMA)
             for t, df in snapshots.items() if t in plan.keyed.tables]
    if not parts:
        return None
    records = parts[0]
    for part in parts[1:]:
        records = records.unionByName(part)
    return records


def plan_schema(plan: QueryPlan, table: str) -> list:
    """The columns of ``table`` in the plan's catalog (SchemaError if there is none)."""
    for name, columns, _not_null, _key in plan.catalog["tables"]:
        if name == table:
            return columns
    raise SchemaError(f"unknown table {table}")


def typed_deltas(deltas: DataFrame, db: LocalCatalog, view: str, weight: str = "weight",
                 encoded: str | None = None) -> DataFrame:
    """One view's deltas with its own column names and Spark types, plus the weight (named
    ``weight``) and, named ``encoded``, the row as the stream encodes it."""
    columns = db.schema_of(view)
    parsed = F.from_json("row", spark_schema(columns)).alias("r")
    extra = [F.col("weight").alias(weight)]
    if encoded:
        extra.append(F.col("row").alias(encoded))
    text = "__upkeep_text"
    return deltas.where(F.col("view") == view).select(
        parsed, F.col("row").alias(text), *extra).select(
        *[_held(i, name, typ, text, view) for i, (name, typ) in enumerate(columns)],
        *[F.col(f"`{c}`") for c in [weight, encoded] if c])


def _held(i: int, name: str, typ: SqlType, text: str, view: str) -> Column:
    """Column ``i`` of the parsed row as ``name``.  A HUGEINT past 38 digits, which Spark's
    ``decimal(38,0)`` cannot hold, fails the micro-batch (``from_json`` made it NULL, which
    the sinks wrote, and grouped with other rows)."""
    value = F.col(f"r.c{i}")
    if typ.kind == "HUGEINT":
        given = F.get_json_object(F.col(text), f"$.c{i}")
        value = F.when(value.isNull() & given.isNotNull(), F.raise_error(F.lit(
            f"view {view}: column {name} holds an integer of more than 38 digits, which "
            "Spark's DECIMAL cannot hold (use the local engine's jsonl sink for such "
            "values)"))).otherwise(value)
    return value.alias(name)
