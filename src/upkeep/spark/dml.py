"""``DELETE ... WHERE`` and ``UPDATE ... SET ... WHERE`` on the Spark engine.

With keyed state (:mod:`.keyed`) the tables' rows live in their table steps' state, so a
statement finds its rows by a Spark job over that state (Spark's ``statestore`` data source
reads the last committed micro-batch's state; executors evaluate the WHERE with the local
engine's expression compiler) and stages them as deletes (and, for UPDATE, the new rows as
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

#: table step -> (its table, the table's columns, the WHERE its rows are read through)
Reads = dict[int, tuple[str, list[tuple[str, SqlType]], str | None]]


def predicate(name: str, columns: list[tuple[str, SqlType]], where_sql: str | None):
    """``row -> True/False/None`` for ``WHERE where_sql`` over ``name``'s rows."""
    if where_sql is None:
        return lambda row: True
    where = parse_one(f"SELECT * FROM {name} WHERE {where_sql}").args["where"].this
    return ExpressionCompiler(table_scope(name, columns)).compile_condition(where).fn


def _matches(reads: Reads, frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """Table steps' map entries (each key's rows with counts, pickled) as the rows that
    satisfy their table's WHERE."""
    tests = {step: predicate(*read) for step, read in reads.items()}
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
    metadata = spark.read.format("state-metadata").load(checkpoint).collect()
    found: dict[str, Counter] = {name: Counter() for name, _, _ in reads.values()}
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
    variables = json.loads(properties or "{}").get("stateVariables", [])
    return any(v.get("stateName") == "values" for v in variables)


def fixed_sql(columns: list[tuple[str, SqlType]], fixed: list[tuple[int, object]]) -> str:
    """The conjunction ``col = value AND ...`` of :func:`upkeep.dml_rows.fixed_columns`'
    probes: the WHERE a table's rows are read through when a statement fixes columns."""
    return exp.and_(*(exp.EQ(this=exp.column(columns[i][0], quoted=True),
                             expression=exp.convert(value))
                      for i, value in fixed)).sql("duckdb")


def where_sql(stmt: exp.Delete | exp.Update) -> str | None:
    where = stmt.args.get("where")
    return None if where is None else where.this.sql(dialect="duckdb")
