"""``DELETE ... WHERE`` and ``UPDATE ... SET ... WHERE`` on the Spark engine.

With keyed state (:mod:`.keyed`) the tables' rows live in their table steps' state, and
with views in shards in the shards' logs (``ShardProcessor.log``: every table is in a view
group, or in the group of tables no view reads), so a statement finds its rows by a Spark
job over that state (Spark's ``statestore`` data source reads the last committed
micro-batch's state; executors evaluate the WHERE with the local engine's expression
compiler) and stages them as deletes (and, for UPDATE, the new rows as
inserts) in the connection's batch: the statement commits as one micro-batch, or with its
transaction.  Rows staged earlier in the same transaction are matched on the driver.
Statements that read tables beyond their own rows (subqueries, ``INSERT ... SELECT``,
queries) read them here too, whole, for DuckDB on the driver (:mod:`upkeep.dml_rows`).
"""

from __future__ import annotations

import json
import pickle
from collections import Counter
from collections.abc import Iterator
from functools import partial

import pandas as pd
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from sqlglot import exp

from ..errors import Error
from ..expressions import ExpressionCompiler, table_scope
from ..sql import parse_one
from ..types import SqlType
from .errors import BatchRejected

MATCH_SCHEMA = "step long, row binary, weight long"
LOGGED_SCHEMA = "table string, row binary, weight long"

#: table step -> (its table, the table's columns, the WHERE its rows are read through)
Reads = dict[int, tuple[str, list[tuple[str, SqlType]], str | None]]


def predicate(name: str, columns: list[tuple[str, SqlType]], where_sql: str | None):
    """``row -> True/False/None`` for ``WHERE where_sql`` over ``name``'s rows."""
    if where_sql is None:
        return lambda row: True
    quoted = name.replace('"', '""')
    where = parse_one(f'SELECT * FROM "{quoted}" WHERE {where_sql}').args["where"].this
    return ExpressionCompiler(table_scope(name, columns)).compile_condition(where).fn


def _matches(reads: Reads, frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """Table steps' map entries (each key's rows with counts, pickled) as the rows that
    satisfy their table's WHERE."""
    try:
        tests = {step: predicate(*read) for step, read in reads.items()}
    except Error as exc:  # a WHERE that does not compile: the driver's error, not a traceback
        raise BatchRejected(exc.to_record()) from None
    for frame in frames:
        try:
            keep = [(step, r, n) for step, value in zip(frame["step"], frame["value"],
                                                        strict=True)
                    for r, n in pickle.loads(value).items()
                    if tests[step](pickle.loads(r)) is True]
        except Error as exc:  # a row the WHERE cannot evaluate: the local engine's error
            raise BatchRejected(exc.to_record()) from None
        yield pd.DataFrame(keep, columns=["step", "row", "weight"])


def committed_rows(spark: SparkSession, checkpoint: str, reads: Reads) -> dict[str, Counter]:
    """The committed rows of each table step of ``reads`` that satisfy its WHERE, with
    counts, by table: one Spark job over the last committed micro-batch's state."""
    found: dict[str, Counter] = {name: Counter() for name, _, _ in reads.values()}
    if not reads:
        return found
    metadata = spark.read.format("state-metadata").load(checkpoint).collect()
    for operator in metadata:
        if not _keeps_tables(operator.operatorProperties):
            continue  # the shards' log, when some views run in shards
        state = (spark.read.format("statestore").option("operatorId", operator.operatorId)
                 .option("stateVarName", "values").load(checkpoint)
                 .where(F.col("key.step").isin(list(reads)))
                 .select(F.col("key.step").alias("step"),
                         F.col("user_map_value.value").alias("value")))
        hits = state.mapInPandas(partial(_matches, reads), MATCH_SCHEMA)
        for r in hits.collect():
            found[reads[int(r.step)][0]][pickle.loads(r.row)] += int(r.weight)
    return found


def _keeps_tables(properties: str | None) -> bool:
    """Whether a stateful operator (its ``state-metadata`` properties, JSON) is a level of
    keyed steps: the one kind that declares the ``values`` map state table steps keep."""
    return _declares(properties, "values")


def _declares(properties: str | None, state: str) -> bool:
    """Whether a stateful operator's ``state-metadata`` properties (JSON) declare the state
    variable ``state``."""
    variables = json.loads(properties or "{}").get("stateVariables", [])
    return any(v.get("stateName") == state for v in variables)


#: table -> (the view group whose shards' logs it is read from, whether that group
#: partitions it over its shards (else every shard holds it whole), its columns, its WHERE)
ShardReads = dict[str, tuple[str, bool, list[tuple[str, SqlType]], str | None]]


def _shard_reads(plan, wheres: dict[str, str | None],
                 columns: dict[str, list[tuple[str, SqlType]]]) -> ShardReads:
    """Where each table of ``wheres`` is read from when views run in shards: the first
    group that holds it (``plan.readers()``; a group holds every row of each table it
    reads, partitioned over its shards or copied to each; tables no view reads are held by
    :func:`upkeep.spark.routing.tables_group`)."""
    readers = plan.readers()
    return {name: (readers[name][0].name, name in readers[name][0].routes, columns[name],
                   where) for name, where in wheres.items() if name in readers}


def _logged_matches(reads: ShardReads, frames: Iterator[pd.DataFrame]
                    ) -> Iterator[pd.DataFrame]:
    """Shards' log chunks (``ShardProcessor.log``: pickled ``(table, row, weight)`` lists,
    the changes each shard applied) as the rows they leave, net, that satisfy their table's
    WHERE: a partitioned table's from every shard of its group, a copied one's from shard
    0 only (every shard holds it whole)."""
    try:
        tests = {name: predicate(name, cols, where)
                 for name, (_, _, cols, where) in reads.items()}
    except Error as exc:  # a WHERE that does not compile: the driver's error, not a traceback
        raise BatchRejected(exc.to_record()) from None
    for frame in frames:
        net: Counter = Counter()
        for group, shard, chunk in zip(frame["grp"], frame["shard"], frame["chunk"],
                                       strict=True):
            for table, row, weight in pickle.loads(chunk):
                read = reads.get(table)
                if read is not None and read[0] == group and (read[1] or shard == 0):
                    net[table, row] += weight
        try:
            keep = [(table, pickle.dumps(row, protocol=5), n)
                    for (table, row), n in net.items() if n and tests[table](row) is True]
        except Error as exc:  # a row the WHERE cannot evaluate: the local engine's error
            raise BatchRejected(exc.to_record()) from None
        yield pd.DataFrame(keep, columns=["table", "row", "weight"])


def committed_shard_rows(spark: SparkSession, checkpoint: str, reads: ShardReads
                         ) -> dict[str, Counter]:
    """The committed rows of each table of ``reads`` that satisfy its WHERE, with counts,
    where views run in shards: one Spark job over the shards' logs in the last committed
    micro-batch's state (each ``(group, shard)`` key's changes; a log is compacted to its
    live rows as it grows, so this reads about the tables' size).  A row's count is its
    net weight over the log, whatever the order of its chunks."""
    found: dict[str, Counter] = {name: Counter() for name in reads}
    if not reads:
        return found
    groups = sorted({group for group, _, _, _ in reads.values()})
    for operator in spark.read.format("state-metadata").load(checkpoint).collect():
        if not _declares(operator.operatorProperties, "log"):
            continue  # the keyed steps' levels, when some views are keyed
        state = (spark.read.format("statestore").option("operatorId", operator.operatorId)
                 .option("stateVarName", "log").load(checkpoint)
                 .where(F.col("key.grp").isin(groups))
                 .select(F.col("key.grp").alias("grp"), F.col("key.shard").alias("shard"),
                         F.col("list_element.chunk").alias("chunk")))
        hits = state.mapInPandas(partial(_logged_matches, reads), LOGGED_SCHEMA)
        for r in hits.collect():
            found[r.table][pickle.loads(r.row)] += int(r.weight)
    for counted in found.values():  # a row a partition added and another took back
        for row in [row for row, n in counted.items() if not n]:
            del counted[row]
    return found


def committed_tables(spark: SparkSession, checkpoint: str, plan,
                     wheres: dict[str, str | None],
                     columns: dict[str, list[tuple[str, SqlType]]]) -> dict[str, Counter]:
    """The committed rows of each table of ``wheres`` that satisfy its WHERE (None: all),
    with counts: a table in keyed state read from its table step, any other from the
    shards' logs (every table is in one or the other)."""
    keyed = plan.keyed.tables if plan.keyed is not None else ()
    found: dict[str, Counter] = {name: Counter() for name in wheres}
    found.update(committed_rows(spark, checkpoint, {
        keyed.index(name): (name, columns[name], where)
        for name, where in wheres.items() if name in keyed}))
    found.update(committed_shard_rows(spark, checkpoint, _shard_reads(
        plan, {name: w for name, w in wheres.items() if name not in keyed}, columns)))
    return found


def fixed_sql(columns: list[tuple[str, SqlType]], fixed: list[tuple[int, object]]) -> str:
    """The conjunction ``col = value AND ...`` of :func:`upkeep.dml_rows.fixed_columns`'
    probes: the WHERE a table's rows are read through when a statement fixes columns."""
    return exp.and_(*(exp.EQ(this=exp.column(columns[i][0], quoted=True),
                             expression=exp.convert(value))
                      for i, value in fixed)).sql("duckdb")


def where_sql(stmt: exp.Delete | exp.Update) -> str | None:
    where = stmt.args.get("where")
    return None if where is None else where.this.sql(dialect="duckdb")
