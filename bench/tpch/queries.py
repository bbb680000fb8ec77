"""The benchmark queries as data: SQL text plus the metadata the harness needs.

* FQ1-FQ4 are the full joins of TPC-H Q3, Q10, Q2 (without its correlated subquery)
  and Q9 as in section 5.1 of ``dynamic-yannakakis-iedyn.txt``: the FROM clause with its
  equi-join predicates, no single-table filters, no aggregation, so the join result is
  large (one row per line item or per partsupp) and keeping it materialized costs what
  the paper's comparison is about.  They select every column of the joined relations
  except the free-text ``*_comment`` columns.
* Q3 is TPC-H Q3 without ORDER BY / LIMIT.
* QH is a q-hierarchical query (the GROUP BY variable is the join variable), used
  for the single-row-update throughput target.

Run ``python -m bench.tpch.queries`` to print the SQL.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.tpch.schema import COLUMNS


@dataclass(frozen=True)
class Query:
    """One benchmark query."""

    name: str
    title: str
    sql: str
    tables: tuple[str, ...]
    columns: tuple[str, ...]
    q_hierarchical: bool = False
    full_join: bool = False

    @property
    def fact_tables(self) -> tuple[str, ...]:
        """Tables whose rows are streamed interleaved and 10% deleted afterwards."""
        facts = tuple(t for t in ("orders", "lineitem") if t in self.tables)
        return facts or ("partsupp",)


def _payload(*tables: str) -> tuple[str, ...]:
    """All non-comment columns of ``tables`` (the SELECT list of the full joins)."""
    return tuple(
        name for table in tables for name, _ in COLUMNS[table] if not name.endswith("_comment")
    )


def _select(columns: tuple[str, ...]) -> str:
    return "SELECT " + ",\n       ".join(columns)


_FQ1_COLS = _payload("customer", "orders", "lineitem")
_FQ2_COLS = _payload("customer", "orders", "lineitem", "nation")
_FQ3_COLS = _payload("part", "supplier", "partsupp", "nation", "region")
_FQ4_COLS = _payload("part", "supplier", "lineitem", "partsupp", "orders", "nation")

QUERIES: dict[str, Query] = {
    q.name: q
    for q in (
        Query(
            name="FQ1",
            title="full join of TPC-H Q3 (customer, orders, lineitem)",
            sql=_select(_FQ1_COLS)
            + """
FROM customer, orders, lineitem
WHERE c_custkey = o_custkey
  AND l_orderkey = o_orderkey""",
            tables=("customer", "orders", "lineitem"),
            columns=_FQ1_COLS,
            full_join=True,
        ),
        Query(
            name="FQ2",
            title="full join of TPC-H Q10 (customer, orders, lineitem, nation)",
            sql=_select(_FQ2_COLS)
            + """
FROM customer, orders, lineitem, nation
WHERE c_custkey = o_custkey
  AND l_orderkey = o_orderkey
  AND c_nationkey = n_nationkey""",
            tables=("nation", "customer", "orders", "lineitem"),
            columns=_FQ2_COLS,
            full_join=True,
        ),
        Query(
            name="FQ3",
            title="full join of TPC-H Q2 without its subquery (part, supplier, partsupp, nation, region)",
            sql=_select(_FQ3_COLS)
            + """
FROM part, supplier, partsupp, nation, region
WHERE p_partkey = ps_partkey
  AND s_suppkey = ps_suppkey
  AND s_nationkey = n_nationkey
  AND n_regionkey = r_regionkey""",
            tables=("region", "nation", "supplier", "part", "partsupp"),
            columns=_FQ3_COLS,
            full_join=True,
        ),
        Query(
            name="FQ4",
            title="full join of TPC-H Q9 (part, supplier, lineitem, partsupp, orders, nation)",
            sql=_select(_FQ4_COLS)
            + """
FROM part, supplier, lineitem, partsupp, orders, nation
WHERE s_suppkey = l_suppkey
  AND ps_suppkey = l_suppkey
  AND ps_partkey = l_partkey
  AND p_partkey = l_partkey
  AND o_orderkey = l_orderkey
  AND s_nationkey = n_nationkey""",
            tables=("nation", "supplier", "part", "partsupp", "orders", "lineitem"),
            columns=_FQ4_COLS,
            full_join=True,
        ),
        Query(
            name="Q3",
            title="TPC-H Q3 without ORDER BY / LIMIT",
            sql="""SELECT l_orderkey,
       SUM(l_extendedprice * (1 - l_discount)) AS revenue,
       o_orderdate,
       o_shippriority
FROM customer, orders, lineitem
WHERE c_mktsegment = 'BUILDING'
  AND c_custkey = o_custkey
  AND l_orderkey = o_orderkey
  AND o_orderdate < DATE '1995-03-15'
  AND l_shipdate > DATE '1995-03-15'
GROUP BY l_orderkey, o_orderdate, o_shippriority""",
            tables=("customer", "orders", "lineitem"),
            columns=("l_orderkey", "revenue", "o_orderdate", "o_shippriority"),
        ),
        Query(
            name="QH",
            title="q-hierarchical: per-order line count and value (group by the join key)",
            sql="""SELECT l_orderkey, COUNT(*) AS line_count, SUM(l_extendedprice) AS total_price
FROM orders JOIN lineitem ON o_orderkey = l_orderkey
GROUP BY l_orderkey""",
            tables=("orders", "lineitem"),
            columns=("l_orderkey", "line_count", "total_price"),
            q_hierarchical=True,
        ),
    )
}

DEFAULT_QUERIES: tuple[str, ...] = tuple(QUERIES)


if __name__ == "__main__":
    for query in QUERIES.values():
        print(f"-- {query.name}: {query.title}\n{query.sql};\n")
