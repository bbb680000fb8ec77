"""Where a pipeline's files are: a local path, or the URI of a Hadoop file system.

A pipeline file names its source, its ``state_dir`` and its sinks' paths relative to itself;
the spark engine also takes any Hadoop file system's URI for them (``hdfs://``, ``s3a://``,
...: its executors and driver reach them through Hadoop, :mod:`upkeep.spark.hadoop_files`),
which the local engine refuses.  A database (``upkeep.connect(dir)``, either engine) is a
local or mounted directory: :func:`upkeep.engine.connect` takes a ``file:`` URI as its path
and refuses any other.
"""

from __future__ import annotations

import re
from pathlib import Path

#: a URI's scheme and ``://`` (two characters at least: ``C:`` is a drive, not a scheme)
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+)://")
#: a local file URI: ``file:/path``, ``file:///path`` or ``file://localhost/path``
_FILE = re.compile(r"[Ff][Ii][Ll][Ee]:(?://(?:localhost)?(?=/)|(?=/[^/]))")


def is_uri(value: str | Path) -> bool:
    """Whether ``value`` is a URI (a Hadoop file system's) rather than a local path."""
    return isinstance(value, str) and _SCHEME.match(value) is not None


def local_file(value: str) -> str | None:
    """The path a local ``file:`` URI names, taken as it is (no ``%`` escape is decoded, a
    ``#`` or ``?`` is part of a name, as Hadoop takes it); None for anything else."""
    local = _FILE.match(value)
    return None if local is None else value[local.end():]


def location(base: Path, value: str) -> Path | str:
    """``value`` as a pipeline file gives it: a local path (relative to ``base``, or a
    local ``file:`` URI's, :func:`local_file`), or, for any other URI (a ``file:`` URI
    naming another host included), the URI as it is."""
    local = local_file(value)
    if local is not None:
        return Path(local)
    if _SCHEME.match(value) is None:
        return base / value
    return value


def same_location(uri: str) -> str:
    """A URI spelled one way for comparing: scheme and host in lower case, repeated and
    trailing slashes dropped (``HDFS://nn//o/x/`` and ``hdfs://nn/o/x`` are one
    directory)."""
    scheme, _, rest = uri.partition("://")
    host, slash, path = rest.partition("/")
    path = "/".join(part for part in path.split("/") if part)
    return f"{scheme.lower()}://{host.lower()}{slash}{path}"
