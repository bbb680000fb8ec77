"""Reference results: DuckDB evaluates a query once on a stream's final table contents.

Used by ``run.py`` to check that every system ends with the right number of view
rows, and that the SQL's output columns match ``Query.columns``.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from bench.tpch.queries import Query
from bench.tpch.stream import load


def expected_rows(stream_dir: Path, query: Query) -> int:
    """Number of rows of ``query`` over the tables after the whole stream."""
    stream = load(stream_dir)
    con = duckdb.connect()
    for name, table in stream.final_tables().items():
        con.register(name, table)
    relation = con.sql(query.sql)
    if tuple(relation.columns) != query.columns:
        raise ValueError(f"{query.name}: SQL columns {relation.columns} != {query.columns}")
    (count,) = relation.aggregate("count(*)").fetchall()[0]
    con.close()
    return int(count)
