"""What an open, idle Spark connection costs: its streaming query polls its source
directory every ``spark.sql.streaming.pollingDelay`` between batches.

Per polling delay and log length: a database directory whose log holds ``--logs`` change
files (copies of one single-row change file, replayed when the database opens), then
``--batches`` single-row batches (their mean latency), then ``--idle`` seconds of nothing,
over which the driver JVM's CPU is read from ``/proc``.

    .venv/bin/python -m bench.spark.idle_poll --logs 1 3000 --delays 10ms 100ms
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import upkeep
from upkeep.spark import spark_session


def jvm_cpu_seconds(spark) -> float:
    """The driver JVM's CPU time so far (user and system, from ``/proc``)."""
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_cost(spark, log: int, batches: int, idle: float, work: Path
              ) -> tuple[float, float]:
    """(cores the JVM used while the connection idled, seconds per batch)."""
    def connect():
        db = upkeep.connect(engine="spark", spark=spark, database=work)
        db.execute("CREATE TABLE t (a INTEGER)")
        db.create_view("v", "SELECT COUNT(*) AS n, SUM(a) AS s FROM t")
        return db

    db = connect()
    db.insert("t", [(1,)])
    db.close()
    (first,) = work.glob("changes/changes-*.jsonl")
    for seq in range(2, log + 1):
        shutil.copy(first, first.with_name(first.name.replace("00000001", f"{seq:08d}")))
    db = connect()
    assert db.view("v").rows() == [(log, log)]
    start = time.perf_counter()
    for i in range(batches):
        db.insert("t", [(i,)])
    per_batch = (time.perf_counter() - start) / batches
    time.sleep(2)  # the last batch's trailing work
    cpu, wall = jvm_cpu_seconds(spark), time.perf_counter()
    time.sleep(idle)
    cores = (jvm_cpu_seconds(spark) - cpu) / (time.perf_counter() - wall)
    db.close()
    return cores, per_batch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logs", type=int, nargs="+", default=[1, 3000])
    parser.add_argument("--delays", nargs="+", default=["10ms"])
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--idle", type=float, default=20.0)
    parser.add_argument("--master", default="local[2]")
    options = parser.parse_args()
    spark = spark_session(options.master)
    print("| polling delay | change files in the log | idle JVM cores | s per batch |")
    print("|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        runs = ((delay, n) for delay in options.delays for n in options.logs)
        for i, (delay, n) in enumerate(runs):
            spark.conf.set("spark.sql.streaming.pollingDelay", delay)
            cores, per_batch = idle_cost(spark, n, options.batches, options.idle,
                                         Path(tmp) / str(i))
            print(f"| {delay} | {n} | {cores:.3f} | {per_batch:.3f} |", flush=True)


if __name__ == "__main__":
    main()
