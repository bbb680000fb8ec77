"""The SparkSession upkeep runs on, with the settings its streaming queries need."""

from __future__ import annotations

import os
import re
import sys

from pyspark.sql import SparkSession

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
POLLING_DELAY = "spark.sql.streaming.pollingDelay"
SPARK_POLLING_DELAY = "10ms"  # Spark's default
#: how often an idle query looks for new change files, where the session leaves Spark's
#: default (10 ms) in place: docs/spark.md, "Performance"
IDLE_POLLING_DELAY = "50ms"


def spark_session(master: str = "local[2]", app_name: str = "upkeep",
                  config: dict[str, str] | None = None) -> SparkSession:
    """A SparkSession (the active one if it exists) set up for upkeep.

    Python workers must run this interpreter (it has upkeep, pandas and pyarrow), so
    ``PYSPARK_PYTHON`` defaults to it.  On a real cluster, set ``PYSPARK_PYTHON`` to an
    interpreter with upkeep installed on every node (docs/spark.md).  Shuffle partitions
    default to :func:`default_partitions` of ``master``.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", str(default_partitions(master)))
               .config("spark.sql.session.timeZone", "UTC"))
    for key, value in (config or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("UPKEEP_SPARK_LOG_LEVEL", "ERROR"))
    if "UPKEEP_SPARK_LOG_LEVEL" not in os.environ:
        quiet_rejections(spark)
    configure(spark)
    return spark


# loggers that report a micro-batch upkeep rejected (a bad record, a broken constraint) as
# a failed task, job and query, each with its stack: the rejection reaches the caller as
# upkeep's own error, which names the record
REJECTION_LOGGERS = ("org.apache.spark.executor.Executor",
                     "org.apache.spark.scheduler.TaskSetManager",
                     # a failed task's listeners (a keyed DELETE's read of the state)
                     "org.apache.spark.TaskContextImpl",
                     "org.apache.spark.sql.execution.streaming",
                     "org.apache.spark.api.python")


def quiet_rejections(spark: SparkSession) -> None:
    """Silence the driver JVM's (in local mode, also the executors') and py4j's reports of
    rejected micro-batches, so a bad record prints one message, not hundreds of lines of
    stack traces (``UPKEEP_SPARK_LOG_LEVEL`` set: Spark logs at that level, these too)."""
    import logging

    jvm = spark.sparkContext._jvm
    configurator = jvm.org.apache.logging.log4j.core.config.Configurator
    for name in REJECTION_LOGGERS:
        configurator.setLevel(name, jvm.org.apache.logging.log4j.Level.OFF)
    logging.getLogger("py4j").setLevel(logging.CRITICAL)


def default_partitions(master: str) -> int:
    """Shuffle partitions for ``master``: its cores for ``local[N]``, ``local[*]`` and
    ``local-cluster[executors,cores,MB]``, else 4.  Every stateful operator commits each
    partition's state store every micro-batch, so partitions beyond the cores only add
    commits (on ``local[2]``, 2 instead of 4 take a 1-row keyed batch from about 1.7 s to
    1.1 s: docs/benchmarks.md)."""
    local = re.fullmatch(r"local\[(\d+|\*)(?:,\s*\d+)?\]", master.strip())
    if local:
        return (os.cpu_count() or 4) if local.group(1) == "*" else int(local.group(1))
    cluster = re.fullmatch(r"local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*\d+\s*\]",
                           master.strip())
    if cluster:
        return int(cluster.group(1)) * int(cluster.group(2))
    return 1 if master.strip() == "local" else 4


def configure(spark: SparkSession) -> None:
    """Settings every upkeep query needs on any session (a user's own, too)."""
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
    # a micro-batch commits its state changes as a changelog, not a new snapshot of the
    # store: commit cost follows the keys the batch wrote
    spark.conf.set("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled",
                   "true")
    # counting the store's rows makes RocksDB read a key's whole value on every write (an
    # append to a log reads the log): writes must cost what they write
    spark.conf.set("spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows", "false")
    # each attempt of a micro-batch writes its state files under an id of its own, and the
    # commit log names the ids committed: a rejected attempt's files (a snapshot the
    # maintenance thread uploaded from them included) are never read as that version's
    # state when the batch id is used again (tests/test_spark_rejected_state.py)
    spark.conf.set("spark.sql.streaming.stateStore.checkpointFormatVersion", "2")
    # an idle query lists its source directory every polling delay: at Spark's 10 ms that
    # kept a quarter to half a core busy per open, idle connection; at 50 ms, a twentieth,
    # for at most 50 ms more per micro-batch (a delay the user set is kept)
    if spark.conf.get(POLLING_DELAY) == SPARK_POLLING_DELAY:
        spark.conf.set(POLLING_DELAY, IDLE_POLLING_DELAY)
