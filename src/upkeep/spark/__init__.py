"""upkeep on Apache Spark: the local engine's views, partitioned across executors.

``upkeep.connect(engine="spark")`` returns a :class:`SparkConnection`;
``upkeep run --engine spark`` runs a pipeline as a Spark Structured Streaming query.
See docs/spark.md.

:class:`SparkConnection` is imported on first use: executors' Python workers import this
package to run the steps and shards, never the driver's connection (importing it costs
them about 0.7 s per process start).
"""

from .session import spark_session

__all__ = ["SparkConnection", "spark_session"]


def __getattr__(name: str):
    if name == "SparkConnection":
        from .connection import SparkConnection

        return SparkConnection
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
