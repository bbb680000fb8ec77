"""A TPC-C transaction log written as hyperplane DML, for update provenance.

From the TPC-C specification (clauses 1.3 and 2.4-2.7): the tables the New-Order, Payment
and Delivery transactions write (columns they read or write, plus keys), an initial
population per warehouse as clause 4.3 scales it (scaled down by ``scale``), and a log of
those three transactions in the mix's proportions.  Every statement is in the fragment of
``papers/update-provenance-hyperplane-transactions.txt`` section 2: INSERT of constants,
DELETE / UPDATE whose WHERE is a conjunction of ``col = constant`` and whose SET values
are constants computed at generation time from the generator's own copy of the rows it
touches (``s_quantity = s_quantity - q`` becomes ``s_quantity = 37``), as spec U.11 says the
paper probably did.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

TABLES = {
    "warehouse": ("w_id", "w_ytd"),
    "district": ("d_w_id", "d_id", "d_ytd", "d_next_o_id"),
    "customer": ("c_w_id", "c_d_id", "c_id", "c_balance", "c_ytd_payment", "c_payment_cnt",
                 "c_delivery_cnt"),
    "stock": ("s_w_id", "s_i_id", "s_quantity", "s_ytd", "s_order_cnt"),
    "orders": ("o_w_id", "o_d_id", "o_id", "o_c_id", "o_carrier_id", "o_ol_cnt"),
    "new_order": ("no_w_id", "no_d_id", "no_o_id"),
    "order_line": ("ol_w_id", "ol_d_id", "ol_o_id", "ol_number", "ol_i_id", "ol_quantity",
                   "ol_amount", "ol_delivered"),
    "history": ("h_c_id", "h_c_d_id", "h_c_w_id", "h_w_id", "h_amount", "h_seq"),
}
DISTRICTS = 10


def create_sql(table: str, provenance: str | None = None) -> str:
    cols = ", ".join(f"{c} BIGINT" for c in TABLES[table])
    with_ = f" WITH (provenance = '{provenance}')" if provenance else ""
    return f"CREATE TABLE {table} ({cols}){with_}"


@dataclass
class TpccLog:
    """The initial rows per table and the log: transactions, each a list of SQL strings."""

    rows: dict[str, list[tuple]] = field(default_factory=dict)
    transactions: list[list[str]] = field(default_factory=list)

    @property
    def statements(self) -> int:
        return sum(len(t) for t in self.transactions)


def generate(warehouses: int, scale: float, statements: int, seed: int = 1) -> TpccLog:
    """``warehouses`` warehouses of ``scale`` x the specification's cardinalities (items
    100,000, customers 3,000 per district, orders 3,000 per district, the last 900 of them
    new), then transactions until the log holds ``statements`` statements."""
    rng = random.Random(seed)
    items = max(int(100_000 * scale), 10)
    customers = max(int(3_000 * scale), 3)
    orders = max(int(3_000 * scale), 3)
    new_from = orders - max(int(900 * scale), 1)
    rows: dict[str, list[tuple]] = {t: [] for t in TABLES}
    stock, customer, district, warehouse = {}, {}, {}, {}
    pending: dict[tuple, list[int]] = {}  # (w, d) -> undelivered order ids
    order_of: dict[tuple, tuple] = {}  # (w, d, o) -> (customer, lines amount)
    for w in range(1, warehouses + 1):
        warehouse[w] = [300_000]
        rows["warehouse"].append((w, 300_000))
        for i in range(1, items + 1):
            s = stock[(w, i)] = [rng.randint(10, 100), 0, 0]
            rows["stock"].append((w, i, *s))
        for d in range(1, DISTRICTS + 1):
            district[(w, d)] = [30_000, orders + 1]
            rows["district"].append((w, d, 30_000, orders + 1))
            pending[(w, d)] = list(range(new_from + 1, orders + 1))
            for c in range(1, customers + 1):
                cu = customer[(w, d, c)] = [-1_000, 1_000, 1, 0]
                rows["customer"].append((w, d, c, *cu))
                rows["history"].append((c, d, w, w, 1_000, 0))
            for o in range(1, orders + 1):
                c = rng.randint(1, customers)
                lines = rng.randint(5, 15)
                delivered = o <= new_from
                rows["orders"].append((w, d, o, c, rng.randint(1, 10) if delivered else 0,
                                       lines))
                if not delivered:
                    rows["new_order"].append((w, d, o))
                total = 0
                for n in range(1, lines + 1):
                    amount = 0 if delivered else rng.randint(1, 999_999)
                    total += amount
                    rows["order_line"].append((w, d, o, n, rng.randint(1, items), 5, amount,
                                               1 if delivered else 0))
                order_of[(w, d, o)] = (c, total)
    log = TpccLog(rows)
    seq = 0
    while log.statements < statements:
        w = rng.randint(1, warehouses)
        d = rng.randint(1, DISTRICTS)
        kind = rng.choices(("new_order", "payment", "delivery"), (45, 43, 4))[0]
        tx: list[str] = []
        if kind == "new_order":
            dist = district[(w, d)]
            o, dist[1] = dist[1], dist[1] + 1
            c = rng.randint(1, customers)
            lines = rng.randint(5, 15)
            tx.append(f"UPDATE district SET d_next_o_id = {dist[1]} WHERE d_w_id = {w} "
                      f"AND d_id = {d}")
            tx.append(f"INSERT INTO orders VALUES ({w}, {d}, {o}, {c}, 0, {lines})")
            tx.append(f"INSERT INTO new_order VALUES ({w}, {d}, {o})")
            total = 0
            for n in range(1, lines + 1):
                i, q = rng.randint(1, items), rng.randint(1, 10)
                s = stock[(w, i)]
                s[0] = s[0] - q if s[0] - q >= 10 else s[0] - q + 91
                s[1] += q
                s[2] += 1
                tx.append(f"UPDATE stock SET s_quantity = {s[0]}, s_ytd = {s[1]}, "
                          f"s_order_cnt = {s[2]} WHERE s_w_id = {w} AND s_i_id = {i}")
                amount = q * rng.randint(100, 10_000)
                total += amount
                tx.append(f"INSERT INTO order_line VALUES ({w}, {d}, {o}, {n}, {i}, {q}, "
                          f"{amount}, 0)")
            pending[(w, d)].append(o)
            order_of[(w, d, o)] = (c, total)
        elif kind == "payment":
            c, h = rng.randint(1, customers), rng.randint(100, 500_000)
            warehouse[w][0] += h
            district[(w, d)][0] += h
            cu = customer[(w, d, c)]
            cu[0] -= h
            cu[1] += h
            cu[2] += 1
            seq += 1
            tx.append(f"UPDATE warehouse SET w_ytd = {warehouse[w][0]} WHERE w_id = {w}")
            tx.append(f"UPDATE district SET d_ytd = {district[(w, d)][0]} WHERE d_w_id = {w} "
                      f"AND d_id = {d}")
            tx.append(f"UPDATE customer SET c_balance = {cu[0]}, c_ytd_payment = {cu[1]}, "
                      f"c_payment_cnt = {cu[2]} WHERE c_w_id = {w} AND c_d_id = {d} "
                      f"AND c_id = {c}")
            tx.append(f"INSERT INTO history VALUES ({c}, {d}, {w}, {w}, {h}, {seq})")
        else:
            carrier = rng.randint(1, 10)
            for dd in range(1, DISTRICTS + 1):
                if not pending[(w, dd)]:
                    continue
                o = pending[(w, dd)].pop(0)
                c, total = order_of[(w, dd, o)]
                cu = customer[(w, dd, c)]
                cu[0] += total
                cu[3] += 1
                tx.append(f"DELETE FROM new_order WHERE no_w_id = {w} AND no_d_id = {dd} "
                          f"AND no_o_id = {o}")
                tx.append(f"UPDATE orders SET o_carrier_id = {carrier} WHERE o_w_id = {w} "
                          f"AND o_d_id = {dd} AND o_id = {o}")
                tx.append(f"UPDATE order_line SET ol_delivered = 1 WHERE ol_w_id = {w} "
                          f"AND ol_d_id = {dd} AND ol_o_id = {o}")
                tx.append(f"UPDATE customer SET c_balance = {cu[0]}, c_delivery_cnt = {cu[3]} "
                          f"WHERE c_w_id = {w} AND c_d_id = {dd} AND c_id = {c}")
        if tx:
            log.transactions.append(tx)
    return log
