"""The 22 TPC-H queries (TPC-H specification 3.0, section 2.4, with its validation
parameters), as views over the schema of ``bench/tpch/schema.py`` (money as DOUBLE), and a
small generator of TPC-H-shaped data whose values reach each query's predicates.

``PYTHONPATH=. python tests/tpch_queries.py`` prints the table of docs/sql.md: how upkeep maintains each
query (its strategy, or why it is recomputed).
"""

from __future__ import annotations

import datetime as dt
import random

D = "CAST('{}' AS DATE)".format

QUERIES: dict[str, str] = {
    "Q1": f"""SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty,
        sum(l_extendedprice) AS sum_base_price,
        sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
        sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge,
        avg(l_quantity) AS avg_qty, avg(l_extendedprice) AS avg_price,
        avg(l_discount) AS avg_disc, count(*) AS count_order
        FROM lineitem WHERE l_shipdate <= {D('1998-09-02')}
        GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus""",
    "Q2": """SELECT s_acctbal, s_name, n_name, p_partkey, p_mfgr, s_address, s_phone, s_comment
        FROM part, supplier, partsupp, nation, region
        WHERE p_partkey = ps_partkey AND s_suppkey = ps_suppkey AND p_size = 15
        AND p_type LIKE '%BRASS' AND s_nationkey = n_nationkey AND n_regionkey = r_regionkey
        AND r_name = 'EUROPE' AND ps_supplycost = (
            SELECT min(ps_supplycost) FROM partsupp, supplier, nation, region
            WHERE p_partkey = ps_partkey AND s_suppkey = ps_suppkey
            AND s_nationkey = n_nationkey AND n_regionkey = r_regionkey
            AND r_name = 'EUROPE')
        ORDER BY s_acctbal DESC, n_name, s_name, p_partkey LIMIT 100""",
    "Q3": f"""SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue,
        o_orderdate, o_shippriority FROM customer, orders, lineitem
        WHERE c_mktsegment = 'BUILDING' AND c_custkey = o_custkey AND l_orderkey = o_orderkey
        AND o_orderdate < {D('1995-03-15')} AND l_shipdate > {D('1995-03-15')}
        GROUP BY l_orderkey, o_orderdate, o_shippriority
        ORDER BY revenue DESC, o_orderdate LIMIT 10""",
    "Q4": f"""SELECT o_orderpriority, count(*) AS order_count FROM orders
        WHERE o_orderdate >= {D('1993-07-01')} AND o_orderdate < {D('1993-10-01')}
        AND EXISTS (SELECT * FROM lineitem WHERE l_orderkey = o_orderkey
                    AND l_commitdate < l_receiptdate)
        GROUP BY o_orderpriority ORDER BY o_orderpriority""",
    "Q5": f"""SELECT n_name, sum(l_extendedprice * (1 - l_discount)) AS revenue
        FROM customer, orders, lineitem, supplier, nation, region
        WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey AND l_suppkey = s_suppkey
        AND c_nationkey = s_nationkey AND s_nationkey = n_nationkey
        AND n_regionkey = r_regionkey AND r_name = 'ASIA'
        AND o_orderdate >= {D('1994-01-01')} AND o_orderdate < {D('1995-01-01')}
        GROUP BY n_name ORDER BY revenue DESC""",
    "Q6": f"""SELECT sum(l_extendedprice * l_discount) AS revenue FROM lineitem
        WHERE l_shipdate >= {D('1994-01-01')} AND l_shipdate < {D('1995-01-01')}
        AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24""",
    "Q7": f"""SELECT supp_nation, cust_nation, l_year, sum(volume) AS revenue FROM (
        SELECT n1.n_name AS supp_nation, n2.n_name AS cust_nation,
        extract(year FROM l_shipdate) AS l_year,
        l_extendedprice * (1 - l_discount) AS volume
        FROM supplier, lineitem, orders, customer, nation n1, nation n2
        WHERE s_suppkey = l_suppkey AND o_orderkey = l_orderkey AND c_custkey = o_custkey
        AND s_nationkey = n1.n_nationkey AND c_nationkey = n2.n_nationkey
        AND ((n1.n_name = 'FRANCE' AND n2.n_name = 'GERMANY')
             OR (n1.n_name = 'GERMANY' AND n2.n_name = 'FRANCE'))
        AND l_shipdate BETWEEN {D('1995-01-01')} AND {D('1996-12-31')}) AS shipping
        GROUP BY supp_nation, cust_nation, l_year ORDER BY supp_nation, cust_nation, l_year""",
    "Q8": f"""SELECT o_year, sum(CASE WHEN nation = 'BRAZIL' THEN volume ELSE 0 END)
        / sum(volume) AS mkt_share FROM (
        SELECT extract(year FROM o_orderdate) AS o_year,
        l_extendedprice * (1 - l_discount) AS volume, n2.n_name AS nation
        FROM part, supplier, lineitem, orders, customer, nation n1, nation n2, region
        WHERE p_partkey = l_partkey AND s_suppkey = l_suppkey AND l_orderkey = o_orderkey
        AND o_custkey = c_custkey AND c_nationkey = n1.n_nationkey
        AND n1.n_regionkey = r_regionkey AND r_name = 'AMERICA'
        AND s_nationkey = n2.n_nationkey
        AND o_orderdate BETWEEN {D('1995-01-01')} AND {D('1996-12-31')}
        AND p_type = 'ECONOMY ANODIZED STEEL') AS all_nations
        GROUP BY o_year ORDER BY o_year""",
    "Q9": """SELECT nation, o_year, sum(amount) AS sum_profit FROM (
        SELECT n_name AS nation, extract(year FROM o_orderdate) AS o_year,
        l_extendedprice * (1 - l_discount) - ps_supplycost * l_quantity AS amount
        FROM part, supplier, lineitem, partsupp, orders, nation
        WHERE s_suppkey = l_suppkey AND ps_suppkey = l_suppkey AND ps_partkey = l_partkey
        AND p_partkey = l_partkey AND o_orderkey = l_orderkey AND s_nationkey = n_nationkey
        AND p_name LIKE '%green%') AS profit
        GROUP BY nation, o_year ORDER BY nation, o_year DESC""",
    "Q10": f"""SELECT c_custkey, c_name, sum(l_extendedprice * (1 - l_discount)) AS revenue,
        c_acctbal, n_name, c_address, c_phone, c_comment
        FROM customer, orders, lineitem, nation
        WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey
        AND o_orderdate >= {D('1993-10-01')} AND o_orderdate < {D('1994-01-01')}
        AND l_returnflag = 'R' AND c_nationkey = n_nationkey
        GROUP BY c_custkey, c_name, c_acctbal, c_phone, n_name, c_address, c_comment
        ORDER BY revenue DESC LIMIT 20""",
    "Q11": """SELECT ps_partkey, sum(ps_supplycost * ps_availqty) AS value
        FROM partsupp, supplier, nation
        WHERE ps_suppkey = s_suppkey AND s_nationkey = n_nationkey AND n_name = 'GERMANY'
        GROUP BY ps_partkey HAVING sum(ps_supplycost * ps_availqty) > (
            SELECT sum(ps_supplycost * ps_availqty) * 0.0001 FROM partsupp, supplier, nation
            WHERE ps_suppkey = s_suppkey AND s_nationkey = n_nationkey
            AND n_name = 'GERMANY')
        ORDER BY value DESC""",
    "Q12": f"""SELECT l_shipmode,
        sum(CASE WHEN o_orderpriority = '1-URGENT' OR o_orderpriority = '2-HIGH'
            THEN 1 ELSE 0 END) AS high_line_count,
        sum(CASE WHEN o_orderpriority <> '1-URGENT' AND o_orderpriority <> '2-HIGH'
            THEN 1 ELSE 0 END) AS low_line_count
        FROM orders, lineitem WHERE o_orderkey = l_orderkey AND l_shipmode IN ('MAIL', 'SHIP')
        AND l_commitdate < l_receiptdate AND l_shipdate < l_commitdate
        AND l_receiptdate >= {D('1994-01-01')} AND l_receiptdate < {D('1995-01-01')}
        GROUP BY l_shipmode ORDER BY l_shipmode""",
    "Q13": """SELECT c_count, count(*) AS custdist FROM (
        SELECT c_custkey, count(o_orderkey) FROM customer LEFT OUTER JOIN orders
        ON c_custkey = o_custkey AND o_comment NOT LIKE '%special%requests%'
        GROUP BY c_custkey) AS c_orders (c_custkey, c_count)
        GROUP BY c_count ORDER BY custdist DESC, c_count DESC""",
    "Q14": f"""SELECT 100.00 * sum(CASE WHEN p_type LIKE 'PROMO%'
        THEN l_extendedprice * (1 - l_discount) ELSE 0 END)
        / sum(l_extendedprice * (1 - l_discount)) AS promo_revenue
        FROM lineitem, part WHERE l_partkey = p_partkey
        AND l_shipdate >= {D('1995-09-01')} AND l_shipdate < {D('1995-10-01')}""",
    "Q15": f"""WITH revenue AS (SELECT l_suppkey AS supplier_no,
        sum(l_extendedprice * (1 - l_discount)) AS total_revenue FROM lineitem
        WHERE l_shipdate >= {D('1996-01-01')} AND l_shipdate < {D('1996-04-01')}
        GROUP BY l_suppkey)
        SELECT s_suppkey, s_name, s_address, s_phone, total_revenue FROM supplier, revenue
        WHERE s_suppkey = supplier_no
        AND total_revenue = (SELECT max(total_revenue) FROM revenue) ORDER BY s_suppkey""",
    "Q16": """SELECT p_brand, p_type, p_size, count(DISTINCT ps_suppkey) AS supplier_cnt
        FROM partsupp, part WHERE p_partkey = ps_partkey AND p_brand <> 'Brand#45'
        AND p_type NOT LIKE 'MEDIUM POLISHED%' AND p_size IN (49, 14, 23, 45, 19, 3, 36, 9)
        AND ps_suppkey NOT IN (SELECT s_suppkey FROM supplier
                               WHERE s_comment LIKE '%Customer%Complaints%')
        GROUP BY p_brand, p_type, p_size
        ORDER BY supplier_cnt DESC, p_brand, p_type, p_size""",
    "Q17": """SELECT sum(l_extendedprice) / 7.0 AS avg_yearly FROM lineitem, part
        WHERE p_partkey = l_partkey AND p_brand = 'Brand#23' AND p_container = 'MED BOX'
        AND l_quantity < (SELECT 0.2 * avg(l_quantity) FROM lineitem
                          WHERE l_partkey = p_partkey)""",
    "Q18": """SELECT c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice, sum(l_quantity)
        FROM customer, orders, lineitem
        WHERE o_orderkey IN (SELECT l_orderkey FROM lineitem GROUP BY l_orderkey
                             HAVING sum(l_quantity) > 300)
        AND c_custkey = o_custkey AND o_orderkey = l_orderkey
        GROUP BY c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice
        ORDER BY o_totalprice DESC, o_orderdate LIMIT 100""",
    "Q19": """SELECT sum(l_extendedprice * (1 - l_discount)) AS revenue FROM lineitem, part
        WHERE (p_partkey = l_partkey AND p_brand = 'Brand#12'
               AND p_container IN ('SM CASE', 'SM BOX', 'SM PACK', 'SM PKG')
               AND l_quantity >= 1 AND l_quantity <= 1 + 10 AND p_size BETWEEN 1 AND 5
               AND l_shipmode IN ('AIR', 'AIR REG') AND l_shipinstruct = 'DELIVER IN PERSON')
        OR (p_partkey = l_partkey AND p_brand = 'Brand#23'
            AND p_container IN ('MED BAG', 'MED BOX', 'MED PKG', 'MED PACK')
            AND l_quantity >= 10 AND l_quantity <= 10 + 10 AND p_size BETWEEN 1 AND 10
            AND l_shipmode IN ('AIR', 'AIR REG') AND l_shipinstruct = 'DELIVER IN PERSON')
        OR (p_partkey = l_partkey AND p_brand = 'Brand#34'
            AND p_container IN ('LG CASE', 'LG BOX', 'LG PACK', 'LG PKG')
            AND l_quantity >= 20 AND l_quantity <= 20 + 10 AND p_size BETWEEN 1 AND 15
            AND l_shipmode IN ('AIR', 'AIR REG') AND l_shipinstruct = 'DELIVER IN PERSON')""",
    "Q20": f"""SELECT s_name, s_address FROM supplier, nation
        WHERE s_suppkey IN (
            SELECT ps_suppkey FROM partsupp
            WHERE ps_partkey IN (SELECT p_partkey FROM part WHERE p_name LIKE 'forest%')
            AND ps_availqty > (SELECT 0.5 * sum(l_quantity) FROM lineitem
                               WHERE l_partkey = ps_partkey AND l_suppkey = ps_suppkey
                               AND l_shipdate >= {D('1994-01-01')}
                               AND l_shipdate < {D('1995-01-01')}))
        AND s_nationkey = n_nationkey AND n_name = 'CANADA' ORDER BY s_name""",
    "Q21": """SELECT s_name, count(*) AS numwait FROM supplier, lineitem l1, orders, nation
        WHERE s_suppkey = l1.l_suppkey AND o_orderkey = l1.l_orderkey
        AND o_orderstatus = 'F' AND l1.l_receiptdate > l1.l_commitdate
        AND EXISTS (SELECT * FROM lineitem l2 WHERE l2.l_orderkey = l1.l_orderkey
                    AND l2.l_suppkey <> l1.l_suppkey)
        AND NOT EXISTS (SELECT * FROM lineitem l3 WHERE l3.l_orderkey = l1.l_orderkey
                        AND l3.l_suppkey <> l1.l_suppkey
                        AND l3.l_receiptdate > l3.l_commitdate)
        AND s_nationkey = n_nationkey AND n_name = 'SAUDI ARABIA'
        GROUP BY s_name ORDER BY numwait DESC, s_name LIMIT 100""",
    "Q22": """SELECT cntrycode, count(*) AS numcust, sum(c_acctbal) AS totacctbal FROM (
        SELECT substring(c_phone, 1, 2) AS cntrycode, c_acctbal FROM customer
        WHERE substring(c_phone, 1, 2) IN ('13', '31', '23', '29', '30', '18', '17')
        AND c_acctbal > (SELECT avg(c_acctbal) FROM customer WHERE c_acctbal > 0.00
                         AND substring(c_phone, 1, 2)
                             IN ('13', '31', '23', '29', '30', '18', '17'))
        AND NOT EXISTS (SELECT * FROM orders WHERE o_custkey = c_custkey)) AS custsale
        GROUP BY cntrycode ORDER BY cntrycode""",
}

NATIONS = ["ALGERIA", "ARGENTINA", "BRAZIL", "CANADA", "EGYPT", "FRANCE", "GERMANY", "INDIA",
           "JAPAN", "SAUDI ARABIA", "CHINA", "UNITED STATES"]
REGIONS = ["AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST"]
NATION_REGION = [0, 1, 1, 1, 4, 3, 3, 2, 2, 4, 2, 1]
BUSY = [2, 3, 5, 5, 6, 6, 7, 8, 9, 10]  # the nations the queries ask about, most often


class Data:
    """Small TPC-H-shaped tables with values each query's predicates select (customers 30
    and up place no orders, for Q22), and random changes to them (new orders with their line items, deleted line items and orders,
    changed part suppliers' costs)."""

    def __init__(self, seed: int) -> None:
        self.rnd = rnd = random.Random(seed)
        self.tables: dict[str, list[tuple]] = {
            "region": [(i, r, "c") for i, r in enumerate(REGIONS)],
            "nation": [(i, n, NATION_REGION[i], "c") for i, n in enumerate(NATIONS)],
            "supplier": [(s, f"Supplier#{s}", f"addr{s}", rnd.choice(BUSY),
                          f"{rnd.choice(['13', '31', '10'])}-555", rnd.choice([-5.0, 100.5,
                                                                               950.0]),
                          rnd.choice(["ok", "Customer x Complaints", "fine"]))
                         for s in range(12)],
            "customer": [(c, f"Customer#{c}", f"addr{c}", rnd.choice(BUSY),
                          f"{rnd.choice(['13', '31', '23', '10', '42'])}-{c:03}",
                          rnd.choice([-10.0, 0.0, 50.0, 500.0, 2000.0]),
                          rnd.choice(["BUILDING", "AUTOMOBILE"]), "c") for c in range(50)],
            "part": [(p, rnd.choice(["forest green", "green tin", "red", "forest pale"]),
                      f"Manufacturer#{p % 3}", rnd.choice(["Brand#12", "Brand#23", "Brand#34",
                                                           "Brand#45"]),
                      rnd.choice(["ECONOMY ANODIZED STEEL", "PROMO BRUSHED COPPER",
                                  "LARGE BRASS", "MEDIUM POLISHED TIN"]),
                      rnd.choice([1, 3, 5, 9, 14, 15]),
                      rnd.choice(["SM CASE", "MED BOX", "MED BAG", "LG BOX", "JUMBO JAR"]),
                      rnd.choice([900.0, 1500.0]), "c") for p in range(16)],
            "orders": [], "lineitem": [], "partsupp": [],
        }
        for p in range(16):
            for s in rnd.sample(range(12), 3):
                self.tables["partsupp"].append((p, s, rnd.randrange(1, 60),
                                                rnd.choice([10.0, 20.5, 30.0]), "c"))
        self.next_order = 0
        for _ in range(150):
            self.new_order()

    def new_order(self) -> tuple[tuple, list[tuple]]:
        rnd = self.rnd
        o = self.next_order
        self.next_order += 1
        date = dt.date(1993, 1, 1) + dt.timedelta(days=rnd.randrange(4 * 365))
        order = (o, rnd.randrange(30), rnd.choice(["F", "O"]), rnd.choice([100.0, 5000.0]),
                 date, rnd.choice(["1-URGENT", "2-HIGH", "3-MEDIUM"]), "clerk", 0,
                 rnd.choice(["ok", "special requests here"]))
        items = []
        for line in range(rnd.randint(1, 4)):
            p, s = rnd.choice([(ps[0], ps[1]) for ps in self.tables["partsupp"]])
            ship = date + dt.timedelta(days=rnd.randrange(1, 60))
            commit = date + dt.timedelta(days=rnd.randrange(1, 60))
            receipt = ship + dt.timedelta(days=rnd.randrange(1, 30))
            items.append((o, p, s, line, float(rnd.choice([1, 5, 10, 15, 25, 40, 150])),
                          rnd.choice([100.0, 1000.0, 2500.0]), rnd.choice([0.04, 0.06, 0.08]),
                          rnd.choice([0.0, 0.02]), rnd.choice(["R", "N", "A"]),
                          rnd.choice(["O", "F"]), ship, commit, receipt,
                          rnd.choice(["DELIVER IN PERSON", "NONE"]),
                          rnd.choice(["MAIL", "SHIP", "AIR", "AIR REG"]), "c"))
        self.tables["orders"].append(order)
        self.tables["lineitem"].extend(items)
        return order, items

    def changes(self) -> list[tuple[str, str, list[tuple]]]:
        """One batch: (table, "insert" / "delete", rows), applied to ``tables`` too."""
        rnd, out = self.rnd, []
        for _ in range(rnd.randint(1, 3)):
            kind = rnd.choice(["order", "order", "drop item", "drop order", "cost"])
            if kind == "order":
                order, items = self.new_order()
                out += [("orders", "insert", [order]), ("lineitem", "insert", items)]
            elif kind == "drop item" and self.tables["lineitem"]:
                item = rnd.choice(self.tables["lineitem"])
                self.tables["lineitem"].remove(item)
                out.append(("lineitem", "delete", [item]))
            elif kind == "drop order" and self.tables["orders"]:
                order = rnd.choice(self.tables["orders"])
                items = [i for i in self.tables["lineitem"] if i[0] == order[0]]
                self.tables["orders"].remove(order)
                for i in items:
                    self.tables["lineitem"].remove(i)
                out += [("lineitem", "delete", items), ("orders", "delete", [order])]
            elif kind == "cost":
                old = rnd.choice(self.tables["partsupp"])
                new = (*old[:3], rnd.choice([5.0, 10.0, 20.5, 30.0]), old[4])
                i = self.tables["partsupp"].index(old)
                self.tables["partsupp"][i] = new
                out += [("partsupp", "delete", [old]), ("partsupp", "insert", [new])]
        return [c for c in out if c[2]]


def strategy_table() -> str:
    """The Markdown table of docs/sql.md: each query's strategy, or why it is recomputed."""
    import upkeep
    from bench.tpch.schema import COLUMNS, create_table_sql

    db = upkeep.connect()
    for table in COLUMNS:
        db.execute(create_table_sql(table))
    lines = ["| query | how upkeep keeps it |", "|---|---|"]
    for name, sql in QUERIES.items():
        db.create_view(name.lower(), sql)
        text = db.explain(name.lower())
        head = text.splitlines()[0].split("strategy ", 1)[1]
        if head == "recompute":
            why = next(line for line in text.splitlines() if "not incremental" in line)
            head = "recomputed: " + why.split("not incremental: ", 1)[1].rstrip(")")
        helpers = [line.split("strategy ", 1)[1] for line in text.splitlines()
                   if line.startswith("helper view")]
        if helpers:
            head += f" (helpers: {', '.join(helpers)})"
        lines.append(f"| {name} | {head} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(strategy_table())
