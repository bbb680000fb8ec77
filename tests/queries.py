"""Schema, value domains and the query catalogue used by the oracle tests.

Every table column has a small value domain (keys 0..6 or so) so that joins,
filters and groups actually match under random change streams.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from decimal import Decimal

D = datetime.date
T = datetime.datetime
DATES = [
    D(1993, 12, 31),
    D(1994, 1, 1),
    D(1994, 6, 15),
    D(1995, 1, 1),
    D(1995, 3, 15),
    D(1995, 3, 16),
    D(1996, 1, 1),
    D(1998, 9, 2),
    D(1998, 12, 1),
]
KEYS = list(range(7))
KEYS_N = [*KEYS, None]
SMALL = list(range(6))


def _dec(*xs: str | None) -> list[Decimal | None]:
    return [None if x is None else Decimal(x) for x in xs]


@dataclass(frozen=True)
class Column:
    """One column: name, SQL type and the finite domain values are drawn from."""

    name: str
    type: str
    domain: tuple


def _cols(*specs: tuple[str, str, list]) -> tuple[Column, ...]:
    return tuple(Column(n, t, tuple(d)) for n, t, d in specs)


SCHEMA: dict[str, tuple[Column, ...]] = {
    # --- TPC-H-like (subset of columns) ---
    "region": _cols(
        ("r_regionkey", "INTEGER", list(range(5))),
        ("r_name", "VARCHAR", ["EUROPE", "ASIA", "AMERICA", "AFRICA"]),
    ),
    "nation": _cols(
        ("n_nationkey", "INTEGER", KEYS),
        ("n_name", "VARCHAR", ["FRANCE", "GERMANY", "CHINA", "BRAZIL", "KENYA"]),
        ("n_regionkey", "INTEGER", [*range(5), None]),
    ),
    "supplier": _cols(
        ("s_suppkey", "INTEGER", KEYS),
        ("s_name", "VARCHAR", ["Supplier#1", "Supplier#2", "Supplier#13", None]),
        ("s_nationkey", "INTEGER", KEYS_N),
        ("s_acctbal", "DOUBLE", [-100.5, 0.0, 250.25, 99.99, 1000.75, None]),
    ),
    "customer": _cols(
        ("c_custkey", "INTEGER", KEYS),
        (
            "c_name",
            "VARCHAR",
            ["Customer#1", "Customer#2", "Cust#3", "alice", "O'Neil", "Zoë", None],
        ),
        ("c_nationkey", "INTEGER", KEYS_N),
        ("c_mktsegment", "VARCHAR", ["BUILDING", "AUTOMOBILE", "MACHINERY", "HOUSEHOLD"]),
        ("c_acctbal", "DOUBLE", [-50.0, 0.0, 120.5, 999.99, None, None]),
    ),
    "orders": _cols(
        ("o_orderkey", "INTEGER", KEYS),
        ("o_custkey", "INTEGER", KEYS_N),
        ("o_orderstatus", "VARCHAR", ["O", "F", "P"]),
        (
            "o_totalprice",
            "DECIMAL(10,2)",
            _dec("50.00", "99.99", "150.25", "600.10", "1234.56", "-12.30", "0.01", None),
        ),
        ("o_orderdate", "DATE", DATES),
        ("o_orderpriority", "VARCHAR", ["1-URGENT", "2-HIGH", "3-MEDIUM", "5-LOW"]),
        ("o_shippriority", "INTEGER", [0, 1]),
        (
            "o_comment",
            "VARCHAR",
            ["ok", "special requests", "very special big requests", "pending", None],
        ),
    ),
    "lineitem": _cols(
        ("l_orderkey", "INTEGER", KEYS),
        ("l_partkey", "INTEGER", KEYS),
        ("l_suppkey", "INTEGER", KEYS),
        ("l_linenumber", "INTEGER", [1, 2, 3, 4]),
        ("l_quantity", "INTEGER", [1, 5, 12, 23, 24, 30, 45]),
        ("l_extendedprice", "DOUBLE", [100.0, 250.5, 999.99, 1234.56, 0.1]),
        ("l_discount", "DOUBLE", [0.0, 0.05, 0.06, 0.07, 0.1]),
        ("l_tax", "DOUBLE", [0.0, 0.02, 0.08]),
        ("l_returnflag", "VARCHAR", ["A", "N", "R"]),
        ("l_linestatus", "VARCHAR", ["O", "F"]),
        ("l_shipdate", "DATE", DATES),
        ("l_commitdate", "DATE", DATES),
        ("l_receiptdate", "DATE", DATES),
        ("l_shipmode", "VARCHAR", ["MAIL", "SHIP", "AIR", "TRUCK", None]),
    ),
    "part": _cols(
        ("p_partkey", "INTEGER", KEYS),
        ("p_name", "VARCHAR", ["green apple", "dark green metal", "red rose", "blue sky", None]),
        ("p_brand", "VARCHAR", ["Brand#12", "Brand#23", "Brand#45"]),
        (
            "p_type",
            "VARCHAR",
            ["SMALL BRASS", "LARGE PLATED BRASS", "MEDIUM POLISHED TIN", "ECONOMY STEEL"],
        ),
        ("p_size", "INTEGER", [3, 9, 14, 15, 23, 50]),
        ("p_retailprice", "DECIMAL(10,2)", _dec("10.00", "99.95", "1000.50", None)),
    ),
    "partsupp": _cols(
        ("ps_partkey", "INTEGER", KEYS),
        ("ps_suppkey", "INTEGER", KEYS),
        ("ps_availqty", "INTEGER", [0, 10, 500, None]),
        ("ps_supplycost", "DOUBLE", [1.5, 20.25, 100.0, None]),
    ),
    # --- graph / chain ---
    "edges": _cols(
        ("src", "INTEGER", SMALL),
        ("dst", "INTEGER", SMALL),
        ("w", "BIGINT", [1, 2, 3, 10**12 + 7, None]),
    ),
    "r1": _cols(("a", "INTEGER", SMALL), ("b", "INTEGER", [*SMALL, None])),
    "r2": _cols(("b", "INTEGER", SMALL), ("c", "INTEGER", SMALL)),
    "r3": _cols(("c", "INTEGER", SMALL), ("d", "INTEGER", [*SMALL, None])),
    "r4": _cols(("d", "INTEGER", SMALL), ("e", "INTEGER", SMALL)),
    # --- star / snowflake ---
    "fact": _cols(
        ("f_id", "INTEGER", list(range(10))),
        ("a_id", "INTEGER", list(range(5))),
        ("b_id", "INTEGER", [0, 1, 2, 3, None]),
        ("c_id", "INTEGER", list(range(5))),
        ("amount", "DOUBLE", [1.5, 2.25, 10.0, -3.75, None]),
    ),
    "dim_a": _cols(
        ("a_id", "INTEGER", list(range(5))),
        ("a_name", "VARCHAR", ["alpha", "beta", "gamma"]),
        ("a_grp", "INTEGER", [1, 2]),
    ),
    "dim_b": _cols(("b_id", "INTEGER", [0, 1, 2, 3]), ("b_flag", "BOOLEAN", [True, False, None])),
    "dim_c": _cols(("c_id", "INTEGER", list(range(5))), ("c_sub", "INTEGER", [0, 1, 2, None])),
    "sub": _cols(
        ("sub_id", "INTEGER", [0, 1, 2]), ("sub_name", "VARCHAR", ["north", "south", None])
    ),
    # --- NULL-heavy ---
    "nt1": _cols(
        ("k", "INTEGER", [None, None, None, 0, 1, 2]),
        ("v", "INTEGER", [None, None, 1, 2, 3]),
        ("s", "VARCHAR", [None, None, "x", "y"]),
    ),
    "nt2": _cols(("k", "INTEGER", [None, None, 0, 1, 2]), ("w", "INTEGER", [None, 10, 20])),
    # --- inequality joins (GCQ1-GCQ8 of the Dynamic Yannakakis paper, Table 2) ---
    "ie_r": _cols(
        ("a", "INTEGER", [*SMALL, None]),
        ("b", "INTEGER", [0, 1, 2, None]),
        ("c", "DOUBLE", [0.5, 1.25, -2.0, 10.0, None]),
    ),
    "ie_s": _cols(
        ("d", "INTEGER", SMALL),
        ("e", "INTEGER", [*SMALL, None]),
        ("f", "INTEGER", [0, 1, 2, None]),
        ("k", "INTEGER", [0, 1, 2, 3]),
    ),
    "ie_t": _cols(
        ("g", "INTEGER", [*SMALL, None]),
        ("h", "INTEGER", [0, 1, 2]),
        ("i", "VARCHAR", ["p", "q", None]),
        ("k", "INTEGER", [0, 1, 2, 3]),
    ),
    # --- credit-card transactions (fraud query, Figure 1 of that paper) ---
    "tx": _cols(
        ("ts", "INTEGER", [*range(16), None]),
        ("acc", "INTEGER", [0, 1]),
        ("amnt", "INTEGER", [1, 5, 20, 150, 400, None]),
    ),
    # --- band / theta joins ---
    "bl": _cols(
        ("bl_id", "INTEGER", SMALL),
        ("grp", "INTEGER", [0, 1, 2]),
        ("v", "INTEGER", [*range(10), None]),
        ("a", "INTEGER", [0, 1, 2, 3, 4]),
        ("c", "INTEGER", [0, 1, 2, 3, 4, None]),
        ("amt", "DECIMAL(8,2)", _dec("-5.25", "1.50", "10.00", "99.99", "100.00", None)),
        ("day", "DATE", [*DATES[:6], None]),
    ),
    "br": _cols(
        ("br_id", "INTEGER", SMALL),
        ("grp", "INTEGER", [0, 1, 2]),
        ("w", "INTEGER", [*range(10), None]),
        ("b", "INTEGER", [0, 1, 2, 3, 4, None]),
        ("lim", "DECIMAL(8,2)", _dec("0.00", "10.00", "50.50", "100.00", None)),
        ("d_from", "DATE", [DATES[0], DATES[1], DATES[3], None]),
        ("d_to", "DATE", [DATES[2], DATES[4], DATES[6]]),
    ),
    # --- triangle over three different tables (with edges as the middle one) ---
    "tri_xy": _cols(
        ("x", "INTEGER", SMALL),
        ("y", "INTEGER", SMALL),
        ("pa", "VARCHAR", ["red", "blue", None]),
    ),
    "tri_zx": _cols(
        ("z", "INTEGER", SMALL),
        ("x", "INTEGER", SMALL),
        ("pc", "DOUBLE", [0.5, 2.25, -1.0, 100.125, None]),
    ),
    # --- events stamped to the microsecond (TIMESTAMP columns) ---
    "events": _cols(
        ("ev_id", "INTEGER", KEYS),
        ("ev_key", "INTEGER", [0, 1, 2, None]),
        ("ev_ts", "TIMESTAMP", [T(1969, 12, 31, 23, 59, 59, 999999), T(1995, 3, 15),
                                T(1995, 3, 15, 10, 30, 0, 500000), T(1995, 3, 15, 10, 59),
                                T(1998, 12, 31, 23, 0), None]),
    ),
}


# Join columns per table; streams keep at most ``KEY_MULTIPLICITY`` rows per
# non-NULL value of each, so multi-way join outputs stay small.
JOIN_KEYS: dict[str, tuple[str, ...]] = {
    "region": ("r_regionkey",),
    "nation": ("n_nationkey", "n_regionkey"),
    "supplier": ("s_suppkey", "s_nationkey"),
    "customer": ("c_custkey", "c_nationkey"),
    "orders": ("o_orderkey", "o_custkey"),
    "lineitem": ("l_orderkey", "l_partkey", "l_suppkey"),
    "part": ("p_partkey",),
    "partsupp": ("ps_partkey", "ps_suppkey"),
    "edges": ("src", "dst"),
    "r1": ("b",),
    "r2": ("b", "c"),
    "r3": ("c", "d"),
    "r4": ("d",),
    "fact": ("a_id", "b_id", "c_id"),
    "dim_a": ("a_id",),
    "dim_b": ("b_id",),
    "dim_c": ("c_id", "c_sub"),
    "sub": ("sub_id",),
    "nt1": ("k",),
    "nt2": ("k",),
    # inequality columns are not limited: the oracle's CAP bounds the theta joins
    "ie_r": (),
    "ie_s": ("k",),
    "ie_t": ("k",),
    "tx": (),
    "bl": (),
    "br": (),
    "tri_xy": ("x", "y"),
    "tri_zx": ("z", "x"),
    "events": ("ev_key",),
}
KEY_MULTIPLICITY = 3


def ddl(table: str) -> str:
    """CREATE TABLE statement for ``table``."""
    cols = ", ".join(f"{c.name} {c.type}" for c in SCHEMA[table])
    return f"CREATE TABLE {table} ({cols})"


@dataclass(frozen=True)
class Query:
    """A view under test: name, SQL, base tables read, and views it is defined on."""

    name: str
    sql: str
    tables: tuple[str, ...]
    deps: tuple[Query, ...] = field(default=())
    tags: frozenset[str] = field(default=frozenset())

    def all_tables(self) -> tuple[str, ...]:
        """Base tables read by this view and (transitively) its dependencies."""
        seen: list[str] = []
        for d in self.deps:
            seen.extend(d.all_tables())
        seen.extend(self.tables)
        return tuple(dict.fromkeys(seen))

    def all_views(self) -> tuple[Query, ...]:
        """Dependencies first (creation order), then this view."""
        out: list[Query] = []
        for d in self.deps:
            for q in d.all_views():
                if q not in out:
                    out.append(q)
        out.append(self)
        return tuple(out)


def Q(
    name: str, sql: str, tables: str = "", *, deps: tuple[Query, ...] = (), tags: str = ""
) -> Query:
    """Build a Query; ``tables`` and ``tags`` are space-separated."""
    return Query(name, " ".join(sql.split()), tuple(tables.split()), deps, frozenset(tags.split()))


# ---------------------------------------------------------------------------
# TPC-H full-join parts (FQ1-FQ4 of the Dynamic Yannakakis paper)
# ---------------------------------------------------------------------------
FQ = [
    Q(
        "fq1_q3_join",
        """SELECT c_custkey, c_name, o_orderkey, o_orderdate, o_shippriority,
                  l_linenumber, l_extendedprice, l_discount
           FROM customer, orders, lineitem
           WHERE c_mktsegment = 'BUILDING' AND c_custkey = o_custkey
             AND l_orderkey = o_orderkey
             AND o_orderdate < DATE '1995-03-15' AND l_shipdate > DATE '1995-03-15'""",
        "customer orders lineitem",
        tags="join tpch",
    ),
    Q(
        "fq2_q10_join",
        """SELECT c_custkey, c_name, c_acctbal, n_name, o_orderkey, l_extendedprice, l_discount
           FROM customer, orders, lineitem, nation
           WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey
             AND o_orderdate >= DATE '1993-10-01' AND o_orderdate < DATE '1995-01-01'
             AND l_returnflag = 'R' AND c_nationkey = n_nationkey""",
        "customer orders lineitem nation",
        tags="join tpch",
    ),
    Q(
        "fq3_q2_join",
        """SELECT s_acctbal, s_name, n_name, p_partkey, p_brand, ps_supplycost
           FROM part, supplier, partsupp, nation, region
           WHERE p_partkey = ps_partkey AND s_suppkey = ps_suppkey
             AND p_size = 15 AND p_type LIKE '%BRASS'
             AND s_nationkey = n_nationkey AND n_regionkey = r_regionkey
             AND r_name = 'EUROPE'""",
        "part supplier partsupp nation region",
        tags="join tpch like",
    ),
    Q(
        "fq4_q9_join",
        """SELECT n_name, o_orderdate, l_extendedprice, l_discount, ps_supplycost, l_quantity
           FROM part, supplier, lineitem, partsupp, orders, nation
           WHERE s_suppkey = l_suppkey AND ps_suppkey = l_suppkey
             AND ps_partkey = l_partkey AND p_partkey = l_partkey
             AND o_orderkey = l_orderkey AND s_nationkey = n_nationkey
             AND p_name LIKE '%green%'""",
        "part supplier lineitem partsupp orders nation",
        tags="join tpch like",
    ),
]

# ---------------------------------------------------------------------------
# TPC-H aggregate queries (adapted to the small schema)
# ---------------------------------------------------------------------------
TPCH = [
    Q(
        "tpch_q1",
        """SELECT l_returnflag, l_linestatus,
                  SUM(l_quantity) AS sum_qty,
                  SUM(l_extendedprice) AS sum_base_price,
                  SUM(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
                  SUM(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge,
                  AVG(l_quantity) AS avg_qty,
                  AVG(l_extendedprice) AS avg_price,
                  AVG(l_discount) AS avg_disc,
                  COUNT(*) AS count_order
           FROM lineitem
           WHERE l_shipdate <= DATE '1998-09-02'
           GROUP BY l_returnflag, l_linestatus""",
        "lineitem",
        tags="agg avg tpch",
    ),
    Q(
        "tpch_q3",
        """SELECT l_orderkey, SUM(l_extendedprice * (1 - l_discount)) AS revenue,
                  o_orderdate, o_shippriority
           FROM customer, orders, lineitem
           WHERE c_mktsegment = 'BUILDING' AND c_custkey = o_custkey
             AND l_orderkey = o_orderkey
             AND o_orderdate < DATE '1995-03-15' AND l_shipdate > DATE '1995-03-15'
           GROUP BY l_orderkey, o_orderdate, o_shippriority""",
        "customer orders lineitem",
        tags="agg join tpch",
    ),
    Q(
        "tpch_q4_join",
        """SELECT o_orderpriority, COUNT(DISTINCT o_orderkey) AS order_count
           FROM orders JOIN lineitem ON l_orderkey = o_orderkey
           WHERE o_orderdate >= DATE '1994-01-01' AND o_orderdate < DATE '1995-03-16'
             AND l_commitdate < l_receiptdate
           GROUP BY o_orderpriority""",
        "orders lineitem",
        tags="agg join distinct tpch",
    ),
    Q(
        "tpch_q6",
        """SELECT SUM(l_extendedprice * l_discount) AS revenue
           FROM lineitem
           WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01'
             AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24""",
        "lineitem",
        tags="agg global tpch",
    ),
    Q(
        "tpch_q9",
        """SELECT nation, o_year, SUM(amount) AS sum_profit
           FROM (SELECT n_name AS nation, EXTRACT(YEAR FROM o_orderdate) AS o_year,
                        l_extendedprice * (1 - l_discount) - ps_supplycost * l_quantity AS amount
                 FROM part, supplier, lineitem, partsupp, orders, nation
                 WHERE s_suppkey = l_suppkey AND ps_suppkey = l_suppkey
                   AND ps_partkey = l_partkey AND p_partkey = l_partkey
                   AND o_orderkey = l_orderkey AND s_nationkey = n_nationkey
                   AND p_name LIKE '%green%') AS profit
           GROUP BY nation, o_year""",
        "part supplier lineitem partsupp orders nation",
        tags="agg join subquery tpch",
    ),
    Q(
        "tpch_q10",
        """SELECT c_custkey, c_name, SUM(l_extendedprice * (1 - l_discount)) AS revenue,
                  c_acctbal, n_name
           FROM customer, orders, lineitem, nation
           WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey
             AND o_orderdate >= DATE '1993-10-01' AND o_orderdate < DATE '1995-01-01'
             AND l_returnflag = 'R' AND c_nationkey = n_nationkey
           GROUP BY c_custkey, c_name, c_acctbal, n_name""",
        "customer orders lineitem nation",
        tags="agg join tpch",
    ),
    Q(
        "tpch_q12",
        """SELECT l_shipmode,
                  SUM(CASE WHEN o_orderpriority = '1-URGENT' OR o_orderpriority = '2-HIGH'
                           THEN 1 ELSE 0 END) AS high_line_count,
                  SUM(CASE WHEN o_orderpriority <> '1-URGENT' AND o_orderpriority <> '2-HIGH'
                           THEN 1 ELSE 0 END) AS low_line_count
           FROM orders, lineitem
           WHERE o_orderkey = l_orderkey AND l_shipmode IN ('MAIL', 'SHIP')
             AND l_commitdate < l_receiptdate AND l_shipdate < l_commitdate
             AND l_receiptdate >= DATE '1994-01-01' AND l_receiptdate < DATE '1999-01-01'
           GROUP BY l_shipmode""",
        "orders lineitem",
        tags="agg join case tpch",
    ),
    Q(
        "tpch_q13",
        """SELECT c_count, COUNT(*) AS custdist
           FROM (SELECT c_custkey, COUNT(o_orderkey) AS c_count
                 FROM customer JOIN orders ON c_custkey = o_custkey
                 WHERE o_comment NOT LIKE '%special%requests%'
                 GROUP BY c_custkey) AS c_orders
           GROUP BY c_count""",
        "customer orders",
        tags="agg join subquery like tpch",
    ),
    Q(
        "tpch_q16",
        """SELECT p_brand, p_type, p_size, COUNT(DISTINCT ps_suppkey) AS supplier_cnt
           FROM partsupp, part
           WHERE p_partkey = ps_partkey AND p_brand <> 'Brand#45'
             AND p_type NOT LIKE 'MEDIUM POLISHED%'
             AND p_size IN (49, 14, 23, 45, 19, 3, 36, 9)
           GROUP BY p_brand, p_type, p_size""",
        "partsupp part",
        tags="agg join distinct like tpch",
    ),
    Q(
        "tpch_q18",
        """SELECT c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice,
                  SUM(l_quantity) AS total_qty
           FROM customer, orders, lineitem
           WHERE c_custkey = o_custkey AND o_orderkey = l_orderkey
           GROUP BY c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice
           HAVING SUM(l_quantity) > 30""",
        "customer orders lineitem",
        tags="agg join having decimal tpch",
    ),
]

# ---------------------------------------------------------------------------
# Join shapes: star, snowflake, chain, self-joins, cyclic
# ---------------------------------------------------------------------------
JOINS = [
    Q(
        "star_join",
        """SELECT f.f_id, a.a_name, b.b_flag, c.c_sub, f.amount
           FROM fact f JOIN dim_a a ON f.a_id = a.a_id
                       JOIN dim_b b ON f.b_id = b.b_id
                       JOIN dim_c c ON f.c_id = c.c_id""",
        "fact dim_a dim_b dim_c",
        tags="join star bool",
    ),
    Q(
        "star_agg",
        """SELECT a.a_grp, b.b_flag, COUNT(*) AS n, SUM(f.amount) AS total
           FROM fact f JOIN dim_a a ON f.a_id = a.a_id JOIN dim_b b ON f.b_id = b.b_id
           GROUP BY a.a_grp, b.b_flag""",
        "fact dim_a dim_b",
        tags="agg join star bool",
    ),
    Q(
        "snowflake_join",
        """SELECT s.sub_name, a.a_name, f.amount
           FROM fact f JOIN dim_c c ON f.c_id = c.c_id
                       JOIN sub s ON c.c_sub = s.sub_id
                       JOIN dim_a a ON f.a_id = a.a_id""",
        "fact dim_c sub dim_a",
        tags="join snowflake",
    ),
    Q(
        "snowflake_minmax",
        """SELECT s.sub_name, SUM(f.amount) AS total, MIN(f.amount) AS lo, MAX(f.amount) AS hi
           FROM fact f JOIN dim_c c ON f.c_id = c.c_id JOIN sub s ON c.c_sub = s.sub_id
           GROUP BY s.sub_name""",
        "fact dim_c sub",
        tags="agg join snowflake minmax",
    ),
    Q(
        "chain3",
        """SELECT r1.a, r2.c, r3.d
           FROM r1 JOIN r2 ON r1.b = r2.b JOIN r3 ON r2.c = r3.c""",
        "r1 r2 r3",
        tags="join chain",
    ),
    Q(
        "chain4_full",
        """SELECT r1.a, r1.b, r2.c, r3.d, r4.e
           FROM r1, r2, r3, r4
           WHERE r1.b = r2.b AND r2.c = r3.c AND r3.d = r4.d""",
        "r1 r2 r3 r4",
        tags="join chain",
    ),
    Q(
        "chain4_ends_count",
        """SELECT r1.a, r4.e, COUNT(*) AS paths
           FROM r1 JOIN r2 ON r1.b = r2.b JOIN r3 ON r2.c = r3.c JOIN r4 ON r3.d = r4.d
           GROUP BY r1.a, r4.e""",
        "r1 r2 r3 r4",
        tags="agg join chain non-free-connex",
    ),
    Q(
        "self_path2",
        """SELECT e1.src, e1.dst AS mid, e2.dst, e1.w + e2.w AS w
           FROM edges e1 JOIN edges e2 ON e1.dst = e2.src""",
        "edges",
        tags="join self",
    ),
    Q(
        "self_path2_count",
        """SELECT e1.src, COUNT(*) AS paths, SUM(e2.w) AS wsum
           FROM edges e1 JOIN edges e2 ON e1.dst = e2.src
           GROUP BY e1.src""",
        "edges",
        tags="agg join self",
    ),
    Q(
        "self_triangle",
        """SELECT e1.src AS a, e2.src AS b, e3.src AS c
           FROM edges e1, edges e2, edges e3
           WHERE e1.dst = e2.src AND e2.dst = e3.src AND e3.dst = e1.src""",
        "edges",
        tags="join self cyclic",
    ),
    Q(
        "self_path3_ends",
        """SELECT DISTINCT e1.src, e3.dst
           FROM edges e1 JOIN edges e2 ON e1.dst = e2.src JOIN edges e3 ON e2.dst = e3.src""",
        "edges",
        tags="join self distinct",
    ),
]

# ---------------------------------------------------------------------------
# DISTINCT, set operations
# ---------------------------------------------------------------------------
SETOPS = [
    Q(
        "distinct_single",
        "SELECT DISTINCT c_nationkey, c_mktsegment FROM customer",
        "customer",
        tags="distinct",
    ),
    Q(
        "distinct_join",
        """SELECT DISTINCT n_name, c_mktsegment
           FROM customer JOIN nation ON c_nationkey = n_nationkey""",
        "customer nation",
        tags="distinct join",
    ),
    Q(
        "union_all",
        "SELECT src AS x, dst AS y FROM edges UNION ALL SELECT a, b FROM r1",
        "edges r1",
        tags="union",
    ),
    Q(
        "union_distinct",
        "SELECT src AS node FROM edges UNION SELECT dst FROM edges",
        "edges",
        tags="union distinct",
    ),
    Q(
        "union_mixed_numbers",  # INTEGER UNION DOUBLE is DOUBLE: 0 meets 0.0
        """SELECT c_nationkey AS v FROM customer UNION SELECT c_acctbal FROM customer
           UNION SELECT p_retailprice FROM part""",
        "customer part",
        tags="union distinct",
    ),
    Q(
        "union_all_join",
        """SELECT c_nationkey AS nk, 'cust' AS kind FROM customer
           UNION ALL
           SELECT s_nationkey, 'supp' FROM supplier JOIN nation ON s_nationkey = n_nationkey""",
        "customer supplier nation",
        tags="union join",
    ),
]

# ---------------------------------------------------------------------------
# Views over views
# ---------------------------------------------------------------------------
_VB_CUST_NATION = Q(
    "vb_cust_nation",
    """SELECT c_custkey, c_name, c_acctbal, n_name, n_regionkey
       FROM customer JOIN nation ON c_nationkey = n_nationkey""",
    "customer nation",
    tags="join",
)
_VB_SPENT = Q(
    "vb_spent",
    "SELECT o_custkey, SUM(o_totalprice) AS spent, COUNT(*) AS n FROM orders GROUP BY o_custkey",
    "orders",
    tags="agg decimal",
)
VOV = [
    Q(
        "vov_agg",
        "SELECT n_name, COUNT(*) AS n, SUM(c_acctbal) AS bal FROM vb_cust_nation GROUP BY n_name",
        deps=(_VB_CUST_NATION,),
        tags="vov agg",
    ),
    Q(
        "vov_join",
        """SELECT v.c_name, r.r_name
           FROM vb_cust_nation v JOIN region r ON v.n_regionkey = r.r_regionkey""",
        "region",
        deps=(_VB_CUST_NATION,),
        tags="vov join",
    ),
    Q(
        "vov_over_agg",
        """SELECT c_name, spent, n
           FROM customer JOIN vb_spent ON c_custkey = o_custkey
           WHERE spent > 100""",
        "customer",
        deps=(_VB_SPENT,),
        tags="vov join agg decimal",
    ),
]

# ---------------------------------------------------------------------------
# Aggregates: MIN/MAX, COUNT(DISTINCT), AVG, HAVING, global aggregates
# ---------------------------------------------------------------------------
AGGS = [
    Q(
        "minmax_group",
        """SELECT o_custkey, MIN(o_totalprice) AS lo, MAX(o_totalprice) AS hi,
                  MIN(o_orderdate) AS first_d, MAX(o_orderdate) AS last_d,
                  MIN(o_orderpriority) AS min_prio
           FROM orders GROUP BY o_custkey""",
        "orders",
        tags="agg minmax decimal",
    ),
    Q(
        "minmax_global",
        """SELECT MIN(l_quantity) AS qmin, MAX(l_extendedprice) AS pmax,
                  MIN(l_shipmode) AS mmin, MAX(l_shipdate) AS dmax
           FROM lineitem""",
        "lineitem",
        tags="agg minmax global",
    ),
    Q(
        "minmax_join",
        """SELECT n_name, MIN(s_acctbal) AS lo, MAX(s_acctbal) AS hi, COUNT(*) AS n
           FROM supplier JOIN nation ON s_nationkey = n_nationkey
           GROUP BY n_name""",
        "supplier nation",
        tags="agg minmax join",
    ),
    Q(
        "count_distinct",
        """SELECT l_orderkey, COUNT(DISTINCT l_suppkey) AS nsupp,
                  COUNT(DISTINCT l_shipmode) AS nmodes, COUNT(*) AS n
           FROM lineitem GROUP BY l_orderkey""",
        "lineitem",
        tags="agg distinct",
    ),
    Q(
        "count_distinct_global",
        "SELECT COUNT(DISTINCT o_custkey) AS ncust, COUNT(o_custkey) AS nref FROM orders",
        "orders",
        tags="agg distinct global",
    ),
    Q(
        "avg_group",
        """SELECT c_mktsegment, AVG(c_acctbal) AS avg_bal, COUNT(c_acctbal) AS nbal, COUNT(*) AS n
           FROM customer GROUP BY c_mktsegment""",
        "customer",
        tags="agg avg null",
    ),
    Q(
        "having_count",
        """SELECT o_custkey, COUNT(*) AS n, SUM(o_totalprice) AS total
           FROM orders GROUP BY o_custkey HAVING COUNT(*) >= 2""",
        "orders",
        tags="agg having decimal",
    ),
    Q(
        "having_join_sum",
        """SELECT n_name, COUNT(*) AS n
           FROM customer JOIN nation ON c_nationkey = n_nationkey
           GROUP BY n_name HAVING SUM(c_acctbal) > 0""",
        "customer nation",
        tags="agg join having null",
    ),
    Q(
        "decimal_sum",
        """SELECT p_brand, SUM(p_retailprice) AS total, MAX(p_retailprice) AS hi,
                  AVG(p_retailprice) AS mean
           FROM part GROUP BY p_brand""",
        "part",
        tags="agg decimal minmax avg",
    ),
    Q(
        "global_counts_empty",
        "SELECT COUNT(*) AS n, SUM(w) AS total, COUNT(w) AS nw, AVG(w) AS mean FROM nt2",
        "nt2",
        tags="agg global null",
    ),
    Q(
        "global_join_sum",
        """SELECT COUNT(*) AS n, SUM(l_quantity) AS qty, SUM(o_totalprice) AS price
           FROM orders JOIN lineitem ON o_orderkey = l_orderkey""",
        "orders lineitem",
        tags="agg global join decimal",
    ),
]

# ---------------------------------------------------------------------------
# Expressions: CASE, arithmetic, strings, LIKE
# ---------------------------------------------------------------------------
EXPRS = [
    Q(
        "case_arith",
        """SELECT o_orderkey,
                  CASE WHEN o_totalprice > 500 THEN 'high'
                       WHEN o_totalprice > 100 THEN 'mid' ELSE 'low' END AS band,
                  o_shippriority * 2 + 1 AS sp
           FROM orders""",
        "orders",
        tags="case decimal",
    ),
    Q(
        "string_concat",
        """SELECT c_custkey, UPPER(c_name) || '-' || c_mktsegment AS label
           FROM customer WHERE c_name LIKE 'Cust%'""",
        "customer",
        tags="string like",
    ),
    Q(
        "string_join",
        """SELECT UPPER(n_name) || ':' || s_name AS tag, s_acctbal * 2 - 1 AS adj
           FROM supplier JOIN nation ON s_nationkey = n_nationkey
           WHERE s_name LIKE '%#1%' OR s_acctbal IS NULL""",
        "supplier nation",
        tags="string like join null",
    ),
    Q(
        "case_agg",
        """SELECT c_nationkey,
                  SUM(CASE WHEN c_acctbal < 0 THEN 1 ELSE 0 END) AS neg,
                  SUM(CASE WHEN c_mktsegment LIKE 'B%' THEN c_acctbal END) AS b_sum
           FROM customer GROUP BY c_nationkey""",
        "customer",
        tags="agg case like null",
    ),
    Q(
        "filter_select_star",
        "SELECT * FROM lineitem WHERE l_quantity > 20 AND l_shipmode <> 'AIR'",
        "lineitem",
        tags="filter",
    ),
    Q(
        "bool_filter",
        """SELECT f.f_id, f.amount * 10 AS amt10
           FROM fact f JOIN dim_b b ON f.b_id = b.b_id
           WHERE NOT b.b_flag""",
        "fact dim_b",
        tags="join bool",
    ),
]

# ---------------------------------------------------------------------------
# NULL-heavy data
# ---------------------------------------------------------------------------
NULLS = [
    Q(
        "null_join",
        "SELECT nt1.v, nt1.s, nt2.w FROM nt1 JOIN nt2 ON nt1.k = nt2.k",
        "nt1 nt2",
        tags="join null",
    ),
    Q(
        "null_group_agg",
        """SELECT k, COUNT(*) AS n, COUNT(v) AS nv, SUM(v) AS sv, MIN(s) AS smin,
                  MAX(v) AS vmax, AVG(v) AS vavg
           FROM nt1 GROUP BY k""",
        "nt1",
        tags="agg null minmax avg",
    ),
    Q(
        "null_join_agg",
        """SELECT nt1.s, SUM(nt2.w) AS sw, COUNT(nt2.w) AS cw, COUNT(DISTINCT nt1.v) AS dv
           FROM nt1 JOIN nt2 ON nt1.k = nt2.k GROUP BY nt1.s""",
        "nt1 nt2",
        tags="agg join null distinct",
    ),
    Q(
        "null_filter_expr",
        """SELECT k, v + 1 AS v1, COALESCE(s, 'none') AS s2
           FROM nt1 WHERE v IS NOT NULL OR s IS NULL""",
        "nt1",
        tags="null",
    ),
]

# ---------------------------------------------------------------------------
# Beyond the core: original TPC-H subquery/outer-join forms, window functions,
# top-k, set difference, theta joins, FILTER, more functions.  Valid DuckDB SQL;
# the automatic strategy must accept and maintain all of them (recomputing if need be).
# ---------------------------------------------------------------------------
EXTRAS = [
    Q(
        "x_tpch_q4_exists",
        """SELECT o_orderpriority, COUNT(*) AS order_count
           FROM orders
           WHERE o_orderdate >= DATE '1994-01-01' AND o_orderdate < DATE '1995-03-16'
             AND EXISTS (SELECT * FROM lineitem
                         WHERE l_orderkey = o_orderkey AND l_commitdate < l_receiptdate)
           GROUP BY o_orderpriority""",
        "orders lineitem",
        tags="extra subquery tpch",
    ),
    Q(
        "x_tpch_q13_outer",
        """SELECT c_count, COUNT(*) AS custdist
           FROM (SELECT c_custkey, COUNT(o_orderkey) AS c_count
                 FROM customer LEFT OUTER JOIN orders
                   ON c_custkey = o_custkey AND o_comment NOT LIKE '%special%requests%'
                 GROUP BY c_custkey) AS c_orders
           GROUP BY c_count""",
        "customer orders",
        tags="extra outer tpch",
    ),
    Q(
        "x_tpch_q16_not_in",
        """SELECT p_brand, p_type, p_size, COUNT(DISTINCT ps_suppkey) AS supplier_cnt
           FROM partsupp, part
           WHERE p_partkey = ps_partkey AND p_brand <> 'Brand#45'
             AND p_size IN (49, 14, 23, 45, 19, 3, 36, 9)
             AND ps_suppkey NOT IN (SELECT s_suppkey FROM supplier WHERE s_name LIKE '%#1%')
           GROUP BY p_brand, p_type, p_size""",
        "partsupp part supplier",
        tags="extra subquery tpch",
    ),
    Q(
        "x_tpch_q2_min_cost",
        """SELECT s_acctbal, s_name, n_name, p_partkey
           FROM part, supplier, partsupp, nation, region
           WHERE p_partkey = ps_partkey AND s_suppkey = ps_suppkey
             AND s_nationkey = n_nationkey AND n_regionkey = r_regionkey
             AND r_name = 'EUROPE'
             AND ps_supplycost = (SELECT MIN(ps_supplycost)
                                  FROM partsupp, supplier, nation, region
                                  WHERE p_partkey = ps_partkey AND s_suppkey = ps_suppkey
                                    AND s_nationkey = n_nationkey
                                    AND n_regionkey = r_regionkey AND r_name = 'EUROPE')""",
        "part supplier partsupp nation region",
        tags="extra subquery tpch",
    ),
    Q(
        "x_window",
        """SELECT o_orderkey, o_custkey,
                  RANK() OVER (PARTITION BY o_custkey ORDER BY o_totalprice) AS rk,
                  SUM(o_totalprice) OVER (PARTITION BY o_custkey) AS tot
           FROM orders""",
        "orders",
        tags="extra window",
    ),
    Q(
        "x_left_join_counts",
        """SELECT c_custkey, c_nationkey, COUNT(o_orderkey) AS n, SUM(o_totalprice) AS total,
                  COUNT(*) AS c
           FROM customer LEFT JOIN orders ON o_custkey = c_custkey AND o_orderstatus <> 'F'
           GROUP BY c_custkey, c_nationkey""",
        "customer orders",
        tags="extra outer",
    ),
    Q(
        "x_null_safe_join",
        """SELECT c_custkey, s_suppkey FROM customer JOIN supplier
           ON c_nationkey IS NOT DISTINCT FROM s_nationkey""",
        "customer supplier",
        tags="extra null",
    ),
    Q(
        "x_top_k",
        """SELECT o_orderkey, o_totalprice FROM orders
           ORDER BY o_totalprice DESC NULLS LAST, o_orderkey LIMIT 3""",
        "orders",
        tags="extra limit",
    ),
    Q(
        "x_scalar_subquery",
        "SELECT c_custkey, c_acctbal - (SELECT AVG(c_acctbal) FROM customer) AS diff FROM customer",
        "customer",
        tags="extra subquery",
    ),
    Q(
        "x_lateral_top_k",
        """SELECT c_custkey, c_name, t.o_orderkey, t.o_totalprice FROM customer,
           LATERAL (SELECT o_orderkey, o_totalprice FROM orders WHERE o_custkey = c_custkey
                    ORDER BY o_totalprice DESC NULLS LAST, o_orderkey LIMIT 2) t""",
        "customer orders",
        tags="extra lateral limit",
    ),
    Q(
        "x_lateral_aggregate",
        """SELECT c_custkey, t.n, t.total FROM customer LEFT JOIN LATERAL
           (SELECT COUNT(*) AS n, SUM(o_totalprice) AS total FROM orders
            WHERE o_custkey = c_custkey AND o_orderstatus <> 'F') t ON TRUE""",
        "customer orders",
        tags="extra lateral subquery",
    ),
    Q(
        "x_distinct_on",
        """SELECT DISTINCT ON (o_custkey) o_custkey, o_orderkey, o_totalprice FROM orders
           ORDER BY o_custkey, o_totalprice DESC NULLS LAST, o_orderkey""",
        "orders",
        tags="extra window",
    ),
    Q(
        "x_quantiles",
        """SELECT o_custkey, MEDIAN(o_totalprice) AS m, QUANTILE_CONT(o_orderdate, 0.25) AS d,
                  QUANTILE_DISC(o_orderpriority, 0.5) AS p FROM orders GROUP BY o_custkey""",
        "orders",
        tags="extra agg",
    ),
    Q(
        "x_timestamps",
        """SELECT date_trunc('hour', ev_ts) AS h, ev_key, COUNT(*) AS n, MAX(ev_ts) AS last,
                  MIN(date_diff('minute', TIMESTAMP '1995-01-01 00:00:00', ev_ts)) AS m
           FROM events WHERE ev_ts >= '1970-01-01' GROUP BY 1, 2""",
        "events",
        tags="extra agg",
    ),
    Q(
        "x_timestamp_join",
        """SELECT o_orderkey, ev_id, hour(ev_ts) AS h, epoch(ev_ts) AS e FROM orders
           JOIN events ON ev_key = o_custkey WHERE CAST(ev_ts AS DATE) >= o_orderdate""",
        "orders events",
        tags="extra",
    ),
    Q(
        "x_string_agg",
        """SELECT c_nationkey, STRING_AGG(c_name, ', ' ORDER BY c_name DESC NULLS FIRST,
                  c_acctbal) AS names, COUNT(*) AS n FROM customer GROUP BY c_nationkey""",
        "customer",
        tags="extra agg",
    ),
    Q(
        "x_string_agg_join",
        """SELECT n_name, LISTAGG(o_orderstatus, '' ORDER BY o_orderdate, o_orderstatus)
                  AS statuses FROM orders JOIN customer ON o_custkey = c_custkey
           JOIN nation ON c_nationkey = n_nationkey GROUP BY n_name""",
        "orders customer nation",
        tags="extra agg join",
    ),
    Q(
        "x_statistics",
        """SELECT o_custkey, STDDEV_SAMP(o_totalprice) AS sd, VAR_POP(o_shippriority) AS v,
                  COUNT_IF(o_orderstatus = 'O') AS open FROM orders GROUP BY o_custkey""",
        "orders",
        tags="extra agg",
    ),
    Q(
        "x_sum_avg_distinct",
        """SELECT o_custkey, SUM(DISTINCT o_shippriority) AS sd, AVG(DISTINCT o_totalprice) AS ad
           FROM orders GROUP BY o_custkey""",
        "orders",
        tags="extra agg distinct",
    ),
    Q(
        "x_filter_clause",
        """SELECT o_custkey, COUNT(*) FILTER (WHERE o_shippriority = 1) AS n1,
                  SUM(o_totalprice) FILTER (WHERE o_orderstatus = 'O') AS open_total
           FROM orders GROUP BY o_custkey""",
        "orders",
        tags="extra agg",
    ),
    Q(
        "x_bool_aggs",
        """SELECT o_custkey, BOOL_OR(o_shippriority = 1) AS any1,
                  BOOL_AND(o_orderstatus = 'O') AS all_open
           FROM orders GROUP BY o_custkey""",
        "orders",
        tags="extra agg bool",
    ),
    Q(
        "x_int_div_mod",
        """SELECT o_orderkey / 2 AS half, o_orderkey // 2 AS q, o_orderkey % 3 AS m,
                  -o_shippriority AS neg, (o_orderkey - 4) // 3 AS nq, (o_orderkey - 4) % 3 AS nm,
                  (o_orderkey - 4) // -3 AS nq2, o_orderkey % -4 AS nm2
           FROM orders""",
        "orders",
        tags="extra arith",
    ),
    Q(
        "x_string_funcs",
        """SELECT LOWER(c_name) AS lo, LENGTH(c_name) AS len, SUBSTRING(c_mktsegment, 1, 3) AS pre,
                  CONCAT(c_name, '/', c_mktsegment) AS cat, REPLACE(c_mktsegment, 'I', 'i') AS rep
           FROM customer""",
        "customer",
        tags="extra string",
    ),
    Q(
        "x_like_patterns",
        """SELECT c_custkey, c_name FROM customer
           WHERE c_name LIKE 'Cust_mer#_' OR c_name ILIKE 'ALICE' OR c_name NOT LIKE '%#%'""",
        "customer",
        tags="extra string like",
    ),
    Q(
        "x_null_semantics",
        """SELECT k, v, NULLIF(v, 2) AS nv, k IS DISTINCT FROM 1 AS d, COALESCE(s, 'none') AS s2
           FROM nt1
           WHERE v NOT IN (1, NULL) OR v IS NULL OR s IN ('x', NULL)""",
        "nt1",
        tags="extra null",
    ),
    Q(
        "x_date_funcs",
        """SELECT o_orderkey, YEAR(o_orderdate) AS y, MONTH(o_orderdate) AS m,
                  o_orderdate + INTERVAL 1 DAY AS next_day, date_trunc('month', o_orderdate) AS mon
           FROM orders""",
        "orders",
        tags="extra date",
    ),
    Q(
        "x_casts",
        """SELECT CAST(o_totalprice AS DOUBLE) AS p, CAST(o_orderkey AS VARCHAR) AS k,
                  CAST(o_orderdate AS VARCHAR) AS d, CAST(o_shippriority AS BOOLEAN) AS b
           FROM orders""",
        "orders",
        tags="extra cast",
    ),
    Q(
        "x_cte_nested_agg",
        """WITH x AS (SELECT o_custkey, COUNT(*) AS n FROM orders GROUP BY o_custkey)
           SELECT n, COUNT(*) AS k FROM x GROUP BY n""",
        "orders",
        tags="extra cte agg",
    ),
    Q(
        "x_intersect",
        "SELECT o_custkey AS k FROM orders INTERSECT SELECT c_custkey FROM customer",
        "orders customer",
        tags="extra setop",
    ),
    Q(
        "x_except",
        """SELECT c_custkey AS k FROM customer EXCEPT
           SELECT o_custkey FROM orders WHERE o_orderstatus = 'F'""",
        "customer orders",
        tags="extra setop",
    ),
    Q(
        "x_except_all",
        "SELECT c_nationkey AS k FROM customer EXCEPT ALL SELECT s_nationkey FROM supplier",
        "customer supplier",
        tags="extra setop",
    ),
    Q(
        "x_not_exists",
        """SELECT c_custkey, c_name FROM customer
           WHERE NOT EXISTS (SELECT 1 FROM orders
                             WHERE o_custkey = c_custkey AND o_orderstatus <> 'P')""",
        "customer orders",
        tags="extra subquery antijoin",
    ),
    Q(
        "x_in_subquery",
        """SELECT o_orderkey, o_custkey FROM orders
           WHERE o_custkey IN (SELECT c_custkey FROM customer WHERE c_mktsegment = 'BUILDING')""",
        "orders customer",
        tags="extra subquery",
    ),
    Q(
        "x_not_exists_join_agg",
        """SELECT n_name, COUNT(*) AS idle FROM customer JOIN nation ON c_nationkey = n_nationkey
           WHERE NOT EXISTS (SELECT 1 FROM orders o
                             WHERE o.o_custkey = customer.c_custkey AND o.o_orderstatus = 'F')
           GROUP BY n_name""",
        "customer nation orders",
        tags="extra subquery antijoin agg",
    ),
    Q(
        "x_not_exists_two_keys",
        """SELECT src, dst FROM edges e
           WHERE NOT EXISTS (SELECT 1 FROM edges r WHERE r.src = e.dst AND r.dst = e.src)""",
        "edges",
        tags="extra subquery antijoin",
    ),
    Q(
        "x_exists_uncorrelated",
        """SELECT c_custkey FROM customer
           WHERE EXISTS (SELECT 1 FROM supplier WHERE s_acctbal > 500)""",
        "customer supplier",
        tags="extra subquery",
    ),
    Q(
        "x_intersect_all",
        "SELECT c_nationkey AS k FROM customer INTERSECT ALL SELECT s_nationkey FROM supplier",
        "customer supplier",
        tags="extra setop",
    ),
    Q(
        "x_theta_join",
        """SELECT c_custkey, o_orderkey FROM customer JOIN orders
             ON c_custkey < o_custkey AND c_mktsegment = 'BUILDING'""",
        "customer orders",
        tags="extra join theta",
    ),
    Q(
        "x_or_join",
        """SELECT c_custkey, o_orderkey FROM customer, orders
           WHERE c_custkey = o_custkey OR c_nationkey = o_orderkey""",
        "customer orders",
        tags="extra join theta",
    ),
    Q(
        "x_cross_join",
        "SELECT r_name, n_name FROM region CROSS JOIN nation WHERE n_regionkey <> r_regionkey",
        "region nation",
        tags="extra join",
    ),
    Q(
        "x_group_by_expr",
        """SELECT o_orderkey % 2 AS parity, COUNT(*) AS n, MAX(o_orderdate) AS d
           FROM orders GROUP BY o_orderkey % 2""",
        "orders",
        tags="extra agg",
    ),
    Q(
        "x_group_by_ordinal_having",
        "SELECT o_custkey, COUNT(*) AS n FROM orders GROUP BY 1 HAVING MAX(o_totalprice) > 100",
        "orders",
        tags="extra agg having",
    ),
    Q(
        "x_agg_arith",
        """SELECT SUM(o_totalprice * 2) AS s2, SUM(o_totalprice) * 2 AS t2,
                  MAX(o_totalprice) - MIN(o_totalprice) AS spread,
                  COUNT(DISTINCT o_custkey) + 1 AS dc
           FROM orders""",
        "orders",
        tags="extra agg global",
    ),
    Q(
        "x_distinct_expr",
        "SELECT DISTINCT UPPER(c_mktsegment) AS seg, c_acctbal > 0 AS pos FROM customer",
        "customer",
        tags="extra distinct",
    ),
    Q(
        "x_union_mixed",
        """SELECT c_custkey AS k FROM customer UNION ALL SELECT o_custkey FROM orders
           UNION SELECT s_suppkey FROM supplier""",
        "customer orders supplier",
        tags="extra union",
    ),
    Q(
        "x_const_cols",
        "SELECT 1 AS one, 'x' AS s, NULL AS n, o_orderkey FROM orders",
        "orders",
        tags="extra",
    ),
    Q(
        "x_select_star_join",
        "SELECT * FROM nation JOIN region ON n_regionkey = r_regionkey",
        "nation region",
        tags="extra join",
    ),
    Q(
        "x_more_funcs",
        """SELECT GREATEST(c_custkey, c_nationkey) AS g, LEAST(c_acctbal, 100) AS l,
                  TRIM('  ' || c_mktsegment || ' ') AS tr, EXTRACT(DAY FROM DATE '1995-03-15') AS dd
           FROM customer""",
        "customer",
        tags="extra arith string",
    ),
    Q(
        "x_extract_day",
        """SELECT EXTRACT(DAY FROM o_orderdate) AS d, EXTRACT(MONTH FROM o_orderdate) AS m,
                  COUNT(*) AS n
           FROM orders GROUP BY EXTRACT(DAY FROM o_orderdate), EXTRACT(MONTH FROM o_orderdate)""",
        "orders",
        tags="extra agg date",
    ),
    Q(
        "x_math",
        """SELECT c_custkey, ABS(c_acctbal) AS a, ROUND(c_acctbal, 1) AS r, c_acctbal / 3 AS third
           FROM customer""",
        "customer",
        tags="extra arith",
    ),
]

# ---------------------------------------------------------------------------
# Theta / inequality joins: GCQ1-GCQ8 of Table 2 of the Dynamic Yannakakis paper
# (dynamic-yannakakis-iedyn.txt, section 5.2), its credit-card fraud query (Figure 1),
# and band joins.  Intended for IEDyn (strategy "dyn" with theta predicates on
# join-tree edges); the automatic strategy must maintain all of them.
# ---------------------------------------------------------------------------
_R_S_T = "FROM ie_r r, ie_s s, ie_t t"
_GCQ3_WHERE = "WHERE r.a < s.d AND s.d < t.g"
_GCQ4_WHERE = "WHERE s.k = t.k AND r.a < s.d AND s.d < t.g"
THETA = [
    Q(
        "gcq1",
        "SELECT r.a, r.b, r.c, s.d, s.e, s.f, s.k FROM ie_r r, ie_s s WHERE r.a < s.d",
        "ie_r ie_s",
        tags="theta join full",
    ),
    Q(
        "gcq2",
        f"""SELECT r.a, r.b, r.c, s.d, s.e, s.f, t.g, t.h, t.i {_R_S_T}
            WHERE r.a < s.d AND s.e < t.g""",
        "ie_r ie_s ie_t",
        tags="theta join full",
    ),
    Q(
        "gcq3",
        f"SELECT r.a, r.b, r.c, s.d, s.e, s.f, t.g, t.h, t.i {_R_S_T} {_GCQ3_WHERE}",
        "ie_r ie_s ie_t",
        tags="theta join full",
    ),
    Q(
        "gcq4",
        f"SELECT r.a, r.b, r.c, s.d, s.e, s.f, s.k, t.g, t.h, t.i {_R_S_T} {_GCQ4_WHERE}",
        "ie_r ie_s ie_t",
        tags="theta join full",
    ),
    Q(
        "gcq5",
        f"SELECT r.a, r.b, s.d, s.e, s.f, t.g, t.h {_R_S_T} {_GCQ3_WHERE}",
        "ie_r ie_s ie_t",
        tags="theta join free-connex",
    ),
    Q(
        "gcq6",
        f"SELECT s.d, s.e, s.f, t.g, t.h, s.k {_R_S_T} {_GCQ4_WHERE}",
        "ie_r ie_s ie_t",
        tags="theta join free-connex",
    ),
    Q(
        "gcq7",
        f"SELECT r.b, r.c, s.e, s.f, t.h, t.i {_R_S_T} {_GCQ3_WHERE}",
        "ie_r ie_s ie_t",
        tags="theta join non-free-connex",
    ),
    Q(
        "gcq8",
        f"SELECT r.b, r.c, s.e, s.f, t.h, t.i {_R_S_T} {_GCQ4_WHERE}",
        "ie_r ie_s ie_t",
        tags="theta join non-free-connex",
    ),
    Q(
        "gcq7_distinct",
        f"SELECT DISTINCT r.b, s.f, t.h {_R_S_T} {_GCQ3_WHERE}",
        "ie_r ie_s ie_t",
        tags="theta join distinct",
    ),
    Q(
        "gcq4_group_agg",
        f"""SELECT r.b, COUNT(*) AS n, SUM(s.f) AS sf, SUM(r.c) AS sc
            {_R_S_T} {_GCQ4_WHERE} GROUP BY r.b""",
        "ie_r ie_s ie_t",
        tags="theta join agg",
    ),
    Q(
        "theta_fraud",
        """SELECT t1.acc, t1.ts AS ts1, t2.ts AS ts2, t3.ts AS ts3, t3.amnt
           FROM tx t1, tx t2, tx t3
           WHERE t1.acc = t2.acc AND t2.acc = t3.acc
             AND t1.amnt < 50 AND t2.amnt < 50 AND t3.amnt > 100
             AND t1.ts < t2.ts AND t2.ts < t3.ts AND t3.ts < t1.ts + 8""",
        "tx",
        tags="theta join self",
    ),
    Q(
        "band_between",
        """SELECT x.bl_id, x.v, y.br_id, y.w
           FROM bl x JOIN br y ON x.v BETWEEN y.w - 2 AND y.w + 2""",
        "bl br",
        tags="theta join band",
    ),
    Q(
        "band_le_ge",
        """SELECT x.bl_id, x.v, x.a, y.br_id, y.w, y.b
           FROM bl x, br y WHERE x.v <= y.w AND x.a >= y.b""",
        "bl br",
        tags="theta join band",
    ),
    Q(
        "band_two_ineq",
        """SELECT x.bl_id, x.v, x.c, y.br_id, y.w, y.b
           FROM bl x, br y WHERE x.v > y.w AND x.c < y.b""",
        "bl br",
        tags="theta join band null",
    ),
    Q(
        "band_eq_ineq",
        """SELECT x.bl_id, x.grp, x.v, y.br_id, y.w
           FROM bl x JOIN br y ON x.grp = y.grp AND x.v < y.w""",
        "bl br",
        tags="theta join band",
    ),
    Q(
        "band_neq",
        """SELECT x.bl_id, x.a, y.br_id, y.b
           FROM bl x JOIN br y ON x.grp = y.grp AND x.a <> y.b""",
        "bl br",
        tags="theta join neq",
    ),
    Q(
        "band_expr",
        """SELECT x.bl_id, y.br_id, x.a + y.b AS s
           FROM bl x, br y WHERE x.a + y.b > x.c * 2""",
        "bl br",
        tags="theta join expr null",
    ),
    Q(
        "band_decimal",
        """SELECT x.bl_id, x.amt, y.br_id, y.lim
           FROM bl x, br y WHERE x.amt >= y.lim""",
        "bl br",
        tags="theta join decimal",
    ),
    Q(
        "band_date",
        """SELECT x.bl_id, x.day, y.br_id, y.d_from, y.d_to
           FROM bl x JOIN br y ON x.day >= y.d_from AND x.day < y.d_to""",
        "bl br",
        tags="theta join date",
    ),
]

# ---------------------------------------------------------------------------
# Cyclic joins (leapfrog triejoin, strategy "lftj"): triangles, 4-cycles, 4-cliques,
# TPC-H Q5 (c_nationkey = s_nationkey closes the cycle; its one-year date window is
# widened to two years to suit the sparse DATES).  Vertices 0..5, so triangles appear.
# (``self_triangle`` in JOINS is the aliased triangle listing.)
# ---------------------------------------------------------------------------
_TRIANGLE = """FROM edges e1, edges e2, edges e3
               WHERE e1.dst = e2.src AND e2.dst = e3.src AND e3.dst = e1.src"""
_FOUR_CYCLE = """FROM edges e1, edges e2, edges e3, edges e4
                 WHERE e1.dst = e2.src AND e2.dst = e3.src AND e3.dst = e4.src
                   AND e4.dst = e1.src"""
_TRI3 = """FROM tri_xy p JOIN edges e ON p.y = e.src JOIN tri_zx q ON e.dst = q.z AND q.x = p.x"""
CYCLIC = [
    Q(
        "cyc_triangle",
        f"SELECT e1.src, e2.src, e3.src {_TRIANGLE}",
        "edges",
        tags="join self cyclic",
    ),
    Q(
        "cyc_triangle_count",
        f"SELECT COUNT(*) AS n {_TRIANGLE}",
        "edges",
        tags="join self cyclic agg global",
    ),
    Q(
        "cyc_4cycle",
        f"SELECT e1.src AS a, e2.src AS b, e3.src AS c, e4.src AS d {_FOUR_CYCLE}",
        "edges",
        tags="join self cyclic",
    ),
    Q(
        "cyc_4cycle_count",
        f"SELECT COUNT(*) AS n {_FOUR_CYCLE}",
        "edges",
        tags="join self cyclic agg global",
    ),
    Q(
        "cyc_4clique_count",
        """SELECT COUNT(*) AS n
           FROM edges ab, edges ac, edges ad, edges bc, edges bd, edges cd
           WHERE ac.src = ab.src AND ad.src = ab.src
             AND bc.src = ab.dst AND bc.dst = ac.dst
             AND bd.src = ab.dst AND bd.dst = ad.dst
             AND cd.src = ac.dst AND cd.dst = ad.dst""",
        "edges",
        tags="join self cyclic agg global",
    ),
    Q(
        "cyc_triangle_3tables",
        f"SELECT p.x, p.y, e.dst AS z, p.pa, e.w, q.pc {_TRI3}",
        "tri_xy edges tri_zx",
        tags="join cyclic null",
    ),
    Q(
        "cyc_triangle_distinct",
        f"SELECT DISTINCT e1.src AS a, e2.src AS b {_TRIANGLE}",
        "edges",
        tags="join self cyclic distinct",
    ),
    Q(
        "cyc_triangle_bag_proj",
        f"SELECT e1.src AS a, e1.w {_TRIANGLE}",
        "edges",
        tags="join self cyclic",
    ),
    Q(
        "cyc_triangle_aggs",
        f"""SELECT p.x, MIN(e.w) AS lo, MAX(p.pa) AS hi, SUM(q.pc) AS total,
                   AVG(q.pc) AS mean, COUNT(*) AS n
            {_TRI3} GROUP BY p.x""",
        "tri_xy edges tri_zx",
        tags="join cyclic agg minmax avg null",
    ),
    Q(
        "cyc_tpch_q5",
        """SELECT n_name, SUM(l_extendedprice * (1 - l_discount)) AS revenue
           FROM customer, orders, lineitem, supplier, nation, region
           WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey
             AND l_suppkey = s_suppkey AND c_nationkey = s_nationkey
             AND s_nationkey = n_nationkey AND n_regionkey = r_regionkey
             AND r_name = 'ASIA'
             AND o_orderdate >= DATE '1994-01-01' AND o_orderdate < DATE '1996-01-01'
           GROUP BY n_name""",
        "customer orders lineitem supplier nation region",
        tags="join cyclic agg tpch",
    ),
]

CORE: list[Query] = [*FQ, *TPCH, *JOINS, *SETOPS, *VOV, *AGGS, *EXPRS, *NULLS]
QUERIES: list[Query] = [*CORE, *EXTRAS, *THETA, *CYCLIC]
BY_NAME: dict[str, Query] = {q.name: q for q in QUERIES}
assert all(k in {c.name for c in SCHEMA[t]} for t, ks in JOIN_KEYS.items() for k in ks), (
    "JOIN_KEYS names a missing column"
)
assert len(BY_NAME) == len(QUERIES), "duplicate query names"
