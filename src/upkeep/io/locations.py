"""Where a pipeline's files are: a local path, or the URI of a Hadoop file system.

A pipeline file names its source, its ``state_dir`` and its sinks' paths relative to itself;
the spark engine also takes any Hadoop file system's URI for them (``hdfs://``, ``s3a://``,
...: its executors and driver reach them through Hadoop, :mod:`upkeep.spark.hadoop_files`),
which the local engine refuses.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlparse

#: a URI's scheme and ``://`` (two characters at least: ``C:`` is a drive, not a scheme)
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+)://")


def is_uri(value: str | Path) -> bool:
    """Whether ``value`` is a URI (a Hadoop file system's) rather than a local path."""
    return isinstance(value, str) and _SCHEME.match(value) is not None


def location(base: Path, value: str) -> Path | str:
    """``value`` as a pipeline file gives it: a local path (relative to ``base``, or a
    ``file://`` URI), or, for any other URI, the URI as it is."""
    found = _SCHEME.match(value)
    if found is None:
        return base / value
    if found[1].lower() == "file":
        return Path(urlparse(value).path)
    return value
