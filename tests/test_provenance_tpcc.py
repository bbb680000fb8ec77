"""The TPC-C hyperplane log of the update-provenance benchmark (bench/provenance/tpcc.py),
small: every statement is in the fragment, the provenance tables follow DuckDB running the
same log, and aborting a transaction equals DuckDB re-running the log without it."""

from __future__ import annotations

import random
from collections import Counter

import duckdb
import pyarrow as pa

import upkeep
from bench.provenance.tpcc import TABLES, create_sql, generate

VIEW = ("SELECT o.o_w_id, o.o_d_id, COUNT(*) AS lines, SUM(ol.ol_amount) AS amount "
        "FROM orders o JOIN order_line ol ON o.o_w_id = ol.ol_w_id AND o.o_d_id = ol.ol_d_id "
        "AND o.o_id = ol.ol_o_id WHERE o.o_carrier_id = 0 GROUP BY o.o_w_id, o.o_d_id")


def rerun(log, skip: int | None = None) -> dict[str, Counter]:
    con = duckdb.connect()
    for table, rows in log.rows.items():
        con.execute(create_sql(table))
        if rows:
            columns = list(zip(*rows, strict=True))
            con.register("input", pa.table({c: list(v) for c, v in zip(TABLES[table], columns,
                                                                        strict=True)}))
            con.execute(f"INSERT INTO {table} SELECT * FROM input")
            con.unregister("input")
    for k, tx in enumerate(log.transactions, 1):
        if k != skip:
            for sql in tx:
                con.execute(sql)
    out = {t: Counter(con.execute(f"SELECT * FROM {t}").fetchall()) for t in TABLES}
    out["v"] = Counter(con.execute(VIEW).fetchall())
    return out


def test_the_tpcc_log_through_provenance_tables():
    log = generate(warehouses=2, scale=0.005, statements=150, seed=3)
    assert log.statements >= 150
    db = upkeep.connect()
    for table in TABLES:
        db.execute(create_sql(table, "update"))
    with db.transaction():
        for table, rows in log.rows.items():
            db.insert(table, rows)
    db.create_view("v", VIEW)
    for tx in log.transactions:
        with db.transaction():
            for sql in tx:
                db.execute(sql)  # refused if it left the hyperplane fragment
    expected = rerun(log)
    for name in (*TABLES, "v"):
        assert Counter(db.execute(f"SELECT * FROM {name}").fetchall()) == expected[name], name
    txns = sorted(db.transactions())  # txns[0] loaded the input rows
    for k in random.Random(3).sample(range(1, len(txns)), 3):
        skipped = rerun(log, skip=k)
        for name in ("orders", "stock", "customer", "v"):
            world = db.what_if(name, abort=[txns[k]])
            assert Counter(world.rows) == skipped[name], (name, k)
