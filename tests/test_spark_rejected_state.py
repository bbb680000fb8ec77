"""A micro-batch the engine rejects leaves no state behind, even when Spark's state-store
maintenance uploads a snapshot of the rejected attempt before the batch id is used again.

The rejected attempt's partitions that did not fail still write their state version; the
maintenance thread may save it as a RocksDB snapshot, which the version's next (good)
attempt does not replace.  Table reads (``SELECT`` over tables, ``DELETE ... WHERE``) and
the next restart of the query then saw the rejected rows as committed.  The Spark
application runs in its own process, its maintenance every second, snapshotting every
version, and waits for such a snapshot before the batch id is used again (with each
attempt's files under an id of their own, as upkeep now has them, none is uploaded)."""

from __future__ import annotations

from spark_app import run_spark_app

JOB = r'''
import json, sys, time
from pathlib import Path

import upkeep
from upkeep.spark import spark_session

work = Path(sys.argv[1])
spark = spark_session("local[2]", config={
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.streaming.stateStore.maintenanceInterval": "1s",
    "spark.sql.streaming.stateStore.minDeltasForSnapshot": "1"})
db = upkeep.connect(engine="spark", spark=spark, state="keyed", database=work / "db")
db.execute("CREATE TABLE a (id INTEGER PRIMARY KEY, v INTEGER)")
db.execute("CREATE TABLE b (k INTEGER)")
db.create_view("ca", "SELECT COUNT(*) AS n, SUM(v) AS s FROM a")
db.create_view("cb", "SELECT COUNT(*) AS n FROM b")
db.view("ca").rows()
for i in range(1, 4):
    db.insert("b", [(i,)])
out = {"rejected": []}


def rejected() -> None:
    try:
        with db.transaction():
            db.insert("a", [(i, 100) for i in range(100, 116)])
            db.delete("b", [(999,)])  # not present: the micro-batch is rejected
    except upkeep.ConstraintError as exc:
        out["rejected"].append(str(exc)[:80])


checkpoint = next(work.glob("db/checkpoint-*"))
committed = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
rejected()
version = committed + 2  # the rejected batch's state version (batch id + 1)
deadline = time.monotonic() + 10  # the worst case, if maintenance gets to it (in 1-2 s)
while time.monotonic() < deadline and not any(
        p.name.split("_")[0].split(".")[0] == str(version)
        for p in (checkpoint / "state").rglob("*.zip")):
    time.sleep(0.2)
db.insert("a", [(1, 1)])
out["ids"] = sorted(r[0] for r in db.execute("SELECT id FROM a").fetchall())
out["deleted"] = db.execute("DELETE FROM a WHERE v = 100").rowcount
rejected()  # the query starts again from its checkpoint
db.insert("a", [(i, 7) for i in range(100, 116)])
out["ca"] = [list(r) for r in db.view("ca").rows()]
(work / "result.json").write_text(json.dumps(out))
db.close()
'''


def test_a_rejected_batch_leaves_no_state_a_snapshot_could_bring_back(tmp_path) -> None:
    result = run_spark_app(JOB, tmp_path)
    assert len(result["rejected"]) == 2, result
    assert result["ids"] == [1]
    assert result["deleted"] == 0
    assert result["ca"] == [[17, 1 + 16 * 7]]
