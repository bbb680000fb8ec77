"""An executor JVM killed in the middle of a micro-batch (``local-cluster[2,1,1024]``, views
in Spark's keyed state): Spark reruns the lost tasks from the state's checkpoint, and every
view still equals DuckDB's recomputation over the final tables (nothing lost, nothing
applied twice).

The Spark application runs in its own process (a ``local-cluster`` master needs its own
SparkContext; the suite's shared session is ``local[2]``): :data:`JOB` writes the views'
rows and the pid of the executor it killed as JSON."""

from __future__ import annotations

import json
import random
from collections import Counter

import duckdb
from oracle import insert_rows
from spark_app import run_spark_app

JOB = r'''
import json, os, sys, threading, time
from decimal import Decimal
from pathlib import Path

import upkeep
from upkeep.spark import spark_session

work = Path(sys.argv[1])
data = json.loads((work / "data.json").read_text())


def executors() -> list[int]:
    """Pids of this application's executor JVMs: children of the driver's JVM."""
    children = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append((int(entry.name), cmdline))
    jvms = [pid for pid, cmd in children.get(os.getpid(), []) if b"java" in cmd]
    return [pid for jvm in jvms for pid, cmd in children.get(jvm, [])
            if b"CoarseGrainedExecutorBackend" in cmd]


spark = spark_session("local-cluster[2,1,1024]",
                      config={"spark.sql.shuffle.partitions": "4",
                              "spark.python.worker.reuse": "true"})
db = upkeep.connect(engine="spark", spark=spark, state="keyed", database=work / "db")
db.execute(data["tables"])
for name, sql in data["views"].items():
    db.create_view(name, sql)
schemas = {"customer": "ck int, segment string", "orders": "ok int, ck int, price decimal(10,2)"}
for table in ("customer", "orders"):
    rows = [tuple(Decimal(v) if isinstance(v, str) and "." in v else v for v in r)
            for r in data["load"][table]]
    db.load(table, spark.createDataFrame(rows, schemas[table]))
db.view("per_segment").rows()
deadline = time.monotonic() + 120
while len(executors()) < 2:
    assert time.monotonic() < deadline, "the executors did not start"
    time.sleep(0.2)
killed = []


def kill_mid_batch() -> None:
    tracker = spark.sparkContext.statusTracker()
    end = time.monotonic() + 120
    while time.monotonic() < end:
        running = [s for s in tracker.getActiveStageIds()
                   if (info := tracker.getStageInfo(s)) and info.numActiveTasks > 0]
        if running:
            time.sleep(0.3)
            pid = executors()[0]
            os.kill(pid, 9)
            killed.append(pid)
            return
        time.sleep(0.05)


for i, batch in enumerate(data["batches"]):
    inserts = [(o, c, Decimal(p)) for o, c, p in batch["insert"]]
    deletes = [(o, c, Decimal(p)) for o, c, p in batch["delete"]]
    killer = threading.Thread(target=kill_mid_batch) if i == 1 else None
    if killer:
        killer.start()
    with db.transaction():
        db.insert("orders", inserts)
        db.delete("orders", deletes)
    if killer:
        killer.join()
views = {name: [list(map(str, r)) for r in db.view(name).rows()] for name in data["views"]}
(work / "result.json").write_text(json.dumps({"killed": killed, "after": executors(),
                                              "views": views}))
db.close()
os._exit(0)
'''

TABLES = """
CREATE TABLE customer (ck INTEGER PRIMARY KEY, segment VARCHAR);
CREATE TABLE orders (ok INTEGER PRIMARY KEY, ck INTEGER, price DECIMAL(10,2));
"""
VIEWS = {
    "per_segment": "SELECT c.segment, COUNT(*) AS n, SUM(o.price) AS total "
                   "FROM orders o JOIN customer c ON o.ck = c.ck GROUP BY c.segment",
    "per_customer": "SELECT c.ck, COUNT(*) AS n, MAX(o.price) AS top "
                    "FROM customer c JOIN orders o ON o.ck = c.ck GROUP BY c.ck",
}


def test_killed_executor_mid_batch_loses_and_doubles_nothing(tmp_path) -> None:
    rnd = random.Random(5)
    customers = [(k, ["AUTO", "HOUSE", "MACHINERY"][k % 3]) for k in range(300)]

    def order(k: int) -> tuple:
        return (k, rnd.randrange(300), f"{rnd.randrange(100, 90000) / 100:.2f}")

    orders = [order(k) for k in range(3000)]
    live = list(orders)
    batches, next_key = [], 3000
    for size in (200, 15000, 300):
        inserts = [order(k) for k in range(next_key, next_key + size)]
        next_key += size
        deletes = rnd.sample(live, size // 10)
        gone = set(deletes)
        live = [o for o in live if o not in gone] + inserts
        batches.append({"insert": inserts, "delete": deletes})
    (tmp_path / "data.json").write_text(json.dumps({
        "tables": TABLES, "views": VIEWS, "batches": batches,
        "load": {"customer": customers, "orders": orders}}))
    result = run_spark_app(JOB, tmp_path)
    assert result["killed"], "no executor was killed mid-batch"
    assert result["killed"][0] not in result["after"]
    con = duckdb.connect()
    con.execute(TABLES.replace("PRIMARY KEY", ""))
    insert_rows(con, "customer", customers)
    insert_rows(con, "orders", live)
    for name, sql in VIEWS.items():
        expected = Counter(tuple(str(v) for v in r) for r in con.execute(sql).fetchall())
        assert Counter(map(tuple, result["views"][name])) == expected, name
