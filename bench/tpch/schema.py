"""TPC-H table schemas as used by the benchmark (SQL DDL and Arrow types).

TPC-H types are mapped to INTEGER / BIGINT / DOUBLE / VARCHAR / DATE:
identifiers are BIGINT, small integers INTEGER, CHAR/VARCHAR become VARCHAR,
and DECIMAL(15,2) becomes DOUBLE (to keep every system on the same, simple
numeric type; the benchmark does not compare money to the cent).
"""

from __future__ import annotations

import pyarrow as pa

#: Column name and SQL type of every TPC-H table, in TPC-H column order.
COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "region": (
        ("r_regionkey", "BIGINT"),
        ("r_name", "VARCHAR"),
        ("r_comment", "VARCHAR"),
    ),
    "nation": (
        ("n_nationkey", "BIGINT"),
        ("n_name", "VARCHAR"),
        ("n_regionkey", "BIGINT"),
        ("n_comment", "VARCHAR"),
    ),
    "supplier": (
        ("s_suppkey", "BIGINT"),
        ("s_name", "VARCHAR"),
        ("s_address", "VARCHAR"),
        ("s_nationkey", "BIGINT"),
        ("s_phone", "VARCHAR"),
        ("s_acctbal", "DOUBLE"),
        ("s_comment", "VARCHAR"),
    ),
    "customer": (
        ("c_custkey", "BIGINT"),
        ("c_name", "VARCHAR"),
        ("c_address", "VARCHAR"),
        ("c_nationkey", "BIGINT"),
        ("c_phone", "VARCHAR"),
        ("c_acctbal", "DOUBLE"),
        ("c_mktsegment", "VARCHAR"),
        ("c_comment", "VARCHAR"),
    ),
    "part": (
        ("p_partkey", "BIGINT"),
        ("p_name", "VARCHAR"),
        ("p_mfgr", "VARCHAR"),
        ("p_brand", "VARCHAR"),
        ("p_type", "VARCHAR"),
        ("p_size", "INTEGER"),
        ("p_container", "VARCHAR"),
        ("p_retailprice", "DOUBLE"),
        ("p_comment", "VARCHAR"),
    ),
    "partsupp": (
        ("ps_partkey", "BIGINT"),
        ("ps_suppkey", "BIGINT"),
        ("ps_availqty", "INTEGER"),
        ("ps_supplycost", "DOUBLE"),
        ("ps_comment", "VARCHAR"),
    ),
    "orders": (
        ("o_orderkey", "BIGINT"),
        ("o_custkey", "BIGINT"),
        ("o_orderstatus", "VARCHAR"),
        ("o_totalprice", "DOUBLE"),
        ("o_orderdate", "DATE"),
        ("o_orderpriority", "VARCHAR"),
        ("o_clerk", "VARCHAR"),
        ("o_shippriority", "INTEGER"),
        ("o_comment", "VARCHAR"),
    ),
    "lineitem": (
        ("l_orderkey", "BIGINT"),
        ("l_partkey", "BIGINT"),
        ("l_suppkey", "BIGINT"),
        ("l_linenumber", "INTEGER"),
        ("l_quantity", "DOUBLE"),
        ("l_extendedprice", "DOUBLE"),
        ("l_discount", "DOUBLE"),
        ("l_tax", "DOUBLE"),
        ("l_returnflag", "VARCHAR"),
        ("l_linestatus", "VARCHAR"),
        ("l_shipdate", "DATE"),
        ("l_commitdate", "DATE"),
        ("l_receiptdate", "DATE"),
        ("l_shipinstruct", "VARCHAR"),
        ("l_shipmode", "VARCHAR"),
        ("l_comment", "VARCHAR"),
    ),
}

#: Unique key of every table (used to sort rows and to delete rows in DuckDB).
PRIMARY_KEYS: dict[str, tuple[str, ...]] = {
    "region": ("r_regionkey",),
    "nation": ("n_nationkey",),
    "supplier": ("s_suppkey",),
    "customer": ("c_custkey",),
    "part": ("p_partkey",),
    "partsupp": ("ps_partkey", "ps_suppkey"),
    "orders": ("o_orderkey",),
    "lineitem": ("l_orderkey", "l_linenumber"),
}

#: Order in which whole dimension tables enter the stream (before the facts).
DIMENSION_ORDER: tuple[str, ...] = (
    "region",
    "nation",
    "supplier",
    "customer",
    "part",
    "partsupp",
)

_ARROW_TYPES: dict[str, pa.DataType] = {
    "BIGINT": pa.int64(),
    "INTEGER": pa.int32(),
    "DOUBLE": pa.float64(),
    "VARCHAR": pa.string(),
    "DATE": pa.date32(),
}


def column_names(table: str) -> list[str]:
    """Names of the columns of ``table`` in TPC-H order."""
    return [name for name, _ in COLUMNS[table]]


def arrow_schema(table: str) -> pa.Schema:
    """Arrow schema of ``table`` after the benchmark's type mapping."""
    return pa.schema([(name, _ARROW_TYPES[sql]) for name, sql in COLUMNS[table]])


def create_table_sql(table: str, primary_key: bool = False) -> str:
    """``CREATE TABLE`` statement for ``table`` (accepted by upkeep and DuckDB), with its
    ``PRIMARY KEY`` (:data:`PRIMARY_KEYS`) declared if ``primary_key``."""
    cols = ", ".join(f"{name} {sql}" for name, sql in COLUMNS[table])
    if primary_key:
        cols += f", PRIMARY KEY ({', '.join(PRIMARY_KEYS[table])})"
    return f"CREATE TABLE {table} ({cols})"
