"""upkeep on Apache Spark: the local engine's views, partitioned across executors.

``upkeep.connect(engine="spark")`` returns a :class:`SparkConnection`;
``upkeep run --engine spark`` runs a pipeline as a Spark Structured Streaming query.
See docs/spark.md.
"""

from .connection import SparkConnection
from .session import spark_session

__all__ = ["SparkConnection", "spark_session"]
