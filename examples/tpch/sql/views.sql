-- Revenue per nation and market segment.  Grouping by c_nationkey as well as the nation's
-- name keeps the join free-connex, so it is maintained as a Dynamic Yannakakis aggregate
-- (`upkeep explain examples/tpch/pipeline.toml` shows the join tree).  Revenue is
-- price * (1 - discount) at 4 decimals, as DuckDB computes it; the CAST states that type.
CREATE MATERIALIZED VIEW revenue_by_nation_segment AS
SELECT c.c_nationkey AS nationkey,
       n.n_name AS nation,
       c.c_mktsegment AS segment,
       SUM(CAST(l.l_extendedprice * (1 - l.l_discount) AS DECIMAL(18,4))) AS revenue,
       COUNT(*) AS lineitems
FROM lineitem l
JOIN orders o ON l.l_orderkey = o.o_orderkey
JOIN customer c ON o.o_custkey = c.c_custkey
JOIN nation n ON c.c_nationkey = n.n_nationkey
GROUP BY c.c_nationkey, n.n_name, c.c_mktsegment;

-- Revenue per customer; the terminal sink shows the top ones.
CREATE MATERIALIZED VIEW top_customers AS
SELECT c.c_custkey AS custkey,
       c.c_name AS customer,
       SUM(CAST(l.l_extendedprice * (1 - l.l_discount) AS DECIMAL(18,4))) AS revenue,
       COUNT(*) AS lineitems
FROM lineitem l
JOIN orders o ON l.l_orderkey = o.o_orderkey
JOIN customer c ON o.o_custkey = c.c_custkey
GROUP BY c.c_custkey, c.c_name;

-- Line items received after their commit date, per supplier.
CREATE MATERIALIZED VIEW late_shipments AS
SELECT s.s_suppkey AS suppkey,
       s.s_name AS supplier,
       COUNT(*) AS late_lineitems
FROM lineitem l
JOIN supplier s ON l.l_suppkey = s.s_suppkey
WHERE l.l_receiptdate > l.l_commitdate
GROUP BY s.s_suppkey, s.s_name;
