"""The SparkSession upkeep runs on, with the settings its streaming queries need."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def spark_session(master: str = "local[2]", app_name: str = "upkeep",
                  config: dict[str, str] | None = None) -> SparkSession:
    """A SparkSession (the active one if it exists) set up for upkeep.

    Python workers must run this interpreter (it has upkeep, pandas and pyarrow), so
    ``PYSPARK_PYTHON`` defaults to it.  On a real cluster, set ``PYSPARK_PYTHON`` to an
    interpreter with upkeep installed on every node (docs/spark.md).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.sql.session.timeZone", "UTC"))
    for key, value in (config or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("UPKEEP_SPARK_LOG_LEVEL", "ERROR"))
    configure(spark)
    return spark


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
