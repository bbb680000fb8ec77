"""Directories and Hadoop's glob syntax.

Hadoop matches a path given to a Spark reader as a glob pattern, in which ``[]{}*?\\`` are
syntax: a sink or database under a directory such as ``runs[1]`` or ``{a,b}`` read nothing
and failed with PATH_NOT_FOUND.  A Parquet read of a directory upkeep names itself turns
globbing off (:func:`read_parquet_literally`).  Spark's file-stream source does not take an escaped path
cleanly (a database reopened under ``db[1]`` counted a change three times), so a change
directory holding them is refused instead (:func:`glob_characters`).  A path the user hands
to ``db.load`` stays a pattern, as in Spark; writers take paths as they are.
"""

from __future__ import annotations

import os
import re
from functools import reduce

from pyspark.sql import DataFrame, SparkSession

_GLOB = re.compile(r"([\\\[\]{}*?])")


def read_parquet_literally(spark: SparkSession, paths: list[str | os.PathLike]) -> DataFrame:
    """The Parquet files under ``paths`` (directories upkeep names itself), each path taken
    as it is, not as a glob pattern.

    Escaping the glob characters is not enough: Hadoop's globber then resolves the path
    one component at a time, and a component holding both ``:`` and a glob character
    (``run:[1]``) parses as a URI with a scheme and fails ("Relative path in absolute
    URI").  Spark's data sources skip the globber when the reader's ``__globPaths__``
    option is false (``DataSource.GLOB_PATHS_KEY``, what Spark's own file-stream source
    sets for the files it lists, SPARK-43343).  Each path is read on its own and the reads
    unioned: given several paths under such a component at once, Spark 4.3 read every
    file once per path."""
    reader = spark.read.option("__globPaths__", "false")
    return reduce(DataFrame.unionByName, [reader.parquet(str(p)) for p in paths])


def glob_characters(path: str | os.PathLike) -> str:
    """The glob characters ``path`` holds, in order of first appearance ('' if none)."""
    return "".join(dict.fromkeys(_GLOB.findall(str(path))))
