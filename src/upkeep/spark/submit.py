"""``spark-submit`` of a pipeline: the application file a cluster runs.

``spark-submit`` takes a Python file, not a module, so this module prints its own path::

    spark-submit --master spark://host:7077 --conf spark.sql.shuffle.partitions=8 \\
        "$(python -m upkeep.spark.submit --path)" pipeline.toml [--follow] [--state-dir DIR]

It runs ``upkeep run --engine spark`` with the arguments after the file, on the session
``spark-submit`` configured (its master, deploy mode and ``--conf`` settings, so set
``spark.sql.shuffle.partitions`` there: Spark's default of 200 partitions makes every
stateful operator commit 200 stores per micro-batch; the pipeline's ``[spark] master``
and ``conf`` are not used), plus the settings upkeep's streaming queries need
(:func:`upkeep.spark.session.configure`).  Spark logs at ERROR unless
``UPKEEP_SPARK_LOG_LEVEL`` says otherwise, as with :func:`upkeep.spark.spark_session`.  docs/spark.md, "On a
real cluster".
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str]) -> int:
    if argv == ["--path"]:
        print(__file__)
        return 0
    from pyspark.sql import SparkSession

    # absolute imports: spark-submit runs this file as a script, not as a module
    from upkeep.cli import main as cli_main
    from upkeep.spark.session import configure

    spark = SparkSession.builder.appName("upkeep").getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("UPKEEP_SPARK_LOG_LEVEL", "ERROR"))
    configure(spark)
    return cli_main(["run", *argv, "--engine", "spark"], spark=spark)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
