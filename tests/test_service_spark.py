"""``upkeep serve`` over the Spark engine: subscribers get the snapshot and every committed
batch's changes, resume from the feed across a restart of the server and of the Spark
connection (nothing lost or doubled), and get a reset when the feed missed batches."""

from __future__ import annotations

import random
from collections import Counter

import duckdb
from test_service import ADMIN, READER, TOKENS, WRITER, projected

import upkeep
from upkeep.client import Client
from upkeep.service import Server

TABLES = """
CREATE TABLE customer (ck INTEGER PRIMARY KEY, segment VARCHAR, nation INTEGER);
CREATE TABLE orders (ok INTEGER PRIMARY KEY, ck INTEGER, status VARCHAR, price DECIMAL(10,2));
"""
QUERIES = [
    "SELECT o.ok, o.status FROM orders o WHERE o.status = 'open'",
    "SELECT c.segment, o.price FROM orders o JOIN customer c ON o.ck = c.ck WHERE c.nation = 1",
]


class Model:
    """The tables as DuckDB holds them, changed as the server's are."""

    def __init__(self) -> None:
        self.con = duckdb.connect()
        self.con.execute(TABLES)
        self.rnd = random.Random(5)
        self.next_key = 0

    def inserts(self) -> str:
        """A batch of INSERT statements (customers, then their orders), applied here too."""
        rnd, out = self.rnd, []
        for _ in range(2):
            self.next_key += 1
            ck = self.next_key
            out.append(f"INSERT INTO customer VALUES ({ck}, '{rnd.choice('AB')}', "
                       f"{rnd.randint(0, 2)})")
            for _ in range(rnd.randint(1, 3)):
                self.next_key += 1
                out.append(f"INSERT INTO orders VALUES ({self.next_key}, {ck}, "
                           f"'{rnd.choice(['open', 'done'])}', {rnd.randint(1, 9999) / 100})")
        for statement in out:
            self.con.execute(statement)
        return ";\n".join(out)

    def some_orders(self, n: int) -> list[tuple]:
        rows = self.con.execute("SELECT * FROM orders ORDER BY ok").fetchall()
        gone = self.rnd.sample(rows, min(n, len(rows)))
        for row in gone:
            self.con.execute("DELETE FROM orders WHERE ok = ?", [row[0]])
        return gone

    def expected(self, query: str) -> Counter:
        return Counter(self.con.execute(query).fetchall())


def check(replicas, admin: Client, model: Model) -> None:
    batch = admin.status()["batch"]
    for replica, query in replicas:
        replica.follow(until=lambda r: r.batch >= batch, timeout=120)
        assert replica.batch == batch
        assert projected(replica, query) == model.expected(query), query


def test_spark_database_served_through_a_restart(spark, tmp_path) -> None:
    directory = tmp_path / "db"
    db = upkeep.connect(directory, engine="spark", spark=spark, shards=2)
    db.execute(TABLES)
    model = Model()
    server = Server(db, TOKENS, port=0).start()
    port = server.port
    try:
        admin, writer = Client(server.url, ADMIN), Client(server.url, WRITER)
        writer.sql(model.inserts())
        replicas = [(Client(server.url, READER).replica(q), q) for q in QUERIES]
        for step in range(3):
            writer.sql(model.inserts())
            with server.hub.lock:
                server.db.delete("orders", model.some_orders(1 + step))
            check(replicas, admin, model)
        # the server and its Spark connection restart on the same directory: every replica
        # resumes from its token out of the feed
        server.stop()
        db.close()
        db = upkeep.connect(directory, engine="spark", spark=spark, shards=2)
        db.execute(TABLES)  # a Spark connection's owner declares its tables
        server = Server(db, TOKENS, port=port).start()
        writer.sql(model.inserts())
        check(replicas, admin, model)
        assert [r.resets for r, _ in replicas] == [0, 0]
        # a batch committed while nobody served: the feed lacks it, so resuming clients
        # get the whole result instead of a gap
        server.stop()
        db.insert("customer", [(10_000, "A", 1)])
        model.con.execute("INSERT INTO customer VALUES (10000, 'A', 1)")
        server = Server(db, TOKENS, port=port).start()
        check(replicas, admin, model)
        assert [r.resets for r, _ in replicas] == [1, 1]
    finally:
        server.stop()
        db.close()
