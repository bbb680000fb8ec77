"""A small tour of upkeep: orders and line items, a revenue view kept fresh, deltas printed.

Run with ``make demo``.
"""

from __future__ import annotations

import random

import upkeep


def main() -> None:
    rng = random.Random(7)
    db = upkeep.connect()
    db.execute("CREATE TABLE orders (ok INTEGER PRIMARY KEY, ck INTEGER, prio INTEGER)")
    db.execute("CREATE TABLE lineitem (ok INTEGER, qty INTEGER, price DOUBLE)")
    db.execute("""
        CREATE MATERIALIZED VIEW revenue AS
        SELECT o.ck, SUM(l.qty * l.price) AS value, COUNT(*) AS n
        FROM orders o JOIN lineitem l ON o.ok = l.ok
        WHERE o.prio <= 2
        GROUP BY o.ck""")
    print(db.explain("revenue"))
    changes = []
    db.view("revenue").subscribe(changes.append)
    for ok in range(1, 2001):
        with db.transaction():
            db.insert("orders", [(ok, rng.randrange(50), rng.randrange(5))])
            db.insert("lineitem", [(ok, rng.randrange(1, 10), round(rng.uniform(1, 100), 2))
                                   for _ in range(rng.randrange(1, 5))])
    db.execute("DELETE FROM orders WHERE ok % 10 = 0")
    top = db.execute("SELECT * FROM revenue ORDER BY value DESC LIMIT 5").fetchall()
    print(f"\n{db.batches} batches committed, {len(changes)} delta batches pushed")
    print("top customers by revenue:")
    for ck, value, n in top:
        print(f"  customer {ck:3d}: {value:12.2f} over {n} line items")


if __name__ == "__main__":
    main()
