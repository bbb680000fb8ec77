"""A sink's directories on any Hadoop file system, handled from the driver.

Spark's executors write a sink's micro-batches wherever Hadoop reaches: a local path, HDFS,
an object store (``s3a://``, ``abfss://``, ``gs://``, with the store's connector JARs on
Spark's classpath).  The driver's own steps around them (renaming a batch into place,
removing the batches a checkpoint never committed, a late sink's first rows) go through
the same Hadoop ``FileSystem`` over Spark's JVM, with the session's Hadoop settings (what
Spark's writers use), so a sink works on each of them.  Locations are strings: a URI, or a
local path as a ``file:`` URI (:func:`local_uri`).  Names are matched in Python, never as
Hadoop glob patterns (:mod:`.paths`).
"""

from __future__ import annotations

import errno
import fnmatch
import os
from collections.abc import Iterator
from contextlib import contextmanager

from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from ..io.locations import is_uri

#: bytes sent to the JVM per call when the driver writes a file (a late sink's rows)
CHUNK = 1 << 20


def local_uri(path: str | os.PathLike) -> str:
    """A local path as the ``file:`` URI Hadoop takes it as, characters as they are (an
    escaped ``[`` would name another file: Hadoop does not decode a path)."""
    return "file://" + os.path.abspath(os.fspath(path))


def location_of(path: str | os.PathLike) -> str:
    """A pipeline's location (:func:`upkeep.io.locations.location`) as Hadoop takes it."""
    return path if is_uri(path) else local_uri(path)


def name_of(location: str) -> str:
    """The last component of ``location``."""
    return location.rstrip("/").rpartition("/")[2]


def child(location: str, name: str) -> str:
    """``location``'s entry ``name``."""
    return f"{location.rstrip('/')}/{name}"


@contextmanager
def _as_os_error(location: str) -> Iterator[None]:
    """Hadoop's failures (no file system for a scheme, access refused, ...) as the
    ``OSError`` a local file operation raises, naming ``location``."""
    try:
        yield
    except Py4JJavaError as exc:
        message = str(exc.java_exception.getMessage() or exc.java_exception.toString())
        message = message.splitlines()[0]
        if "No FileSystem for scheme" in message or "ClassNotFoundException" in message:
            message += (" (a file system's connector JARs go on Spark's classpath, e.g. "
                        "spark.jars.packages = org.apache.hadoop:hadoop-aws:<Hadoop's "
                        "version> for s3a://)")
        raise OSError(errno.EIO, message, location) from None


class HadoopFiles:
    """The file system of a location, as Spark's writers see it; its failures are
    ``OSError``."""

    def __init__(self, spark: SparkSession, location: str):
        jvm = spark.sparkContext._jvm
        self._path = jvm.org.apache.hadoop.fs.Path
        self._io = jvm.org.apache.commons.io.IOUtils
        with _as_os_error(location):
            conf = spark._jsparkSession.sessionState().newHadoopConf()
            self._fs = self._path(location).getFileSystem(conf)

    def exists(self, location: str) -> bool:
        with _as_os_error(location):
            return bool(self._fs.exists(self._path(location)))

    def is_dir(self, location: str) -> bool:
        with _as_os_error(location):
            return bool(self._fs.getFileStatus(self._path(location)).isDirectory())

    def mkdirs(self, location: str) -> None:
        with _as_os_error(location):
            made = self._fs.mkdirs(self._path(location))
        if not made:
            raise OSError(errno.EIO, "cannot make the directory", location)

    def remove(self, location: str) -> None:
        """Remove a file or a directory with everything in it (nothing if absent)."""
        with _as_os_error(location):
            self._fs.delete(self._path(location), True)

    def rename(self, source: str, target: str) -> None:
        """Move ``source`` to ``target``, which must not exist (Hadoop would move a
        directory into an existing one)."""
        with _as_os_error(source):
            moved = self._fs.rename(self._path(source), self._path(target))
        if not moved:
            raise OSError(errno.EIO, f"cannot rename it to {target}", source)

    def names(self, location: str, pattern: str = "*") -> list[str]:
        """The names of ``location``'s entries that match ``pattern`` (``fnmatch``)."""
        with _as_os_error(location):
            statuses = self._fs.listStatus(self._path(location))
            return [name for status in statuses
                    if fnmatch.fnmatchcase(name := status.getPath().getName(), pattern)]

    def file_times(self, location: str) -> list[tuple[str, int]]:
        """The files (not directories) in ``location``, with their modification times in
        milliseconds."""
        with _as_os_error(location):
            return [(status.getPath().getName(), int(status.getModificationTime()))
                    for status in self._fs.listStatus(self._path(location))
                    if status.isFile()]

    def set_modified(self, location: str, millis: int) -> None:
        """Set a file's modification time (a store that keeps none ignores it: S3)."""
        with _as_os_error(location):
            self._fs.setTimes(self._path(location), millis, -1)

    def read_bytes(self, location: str) -> bytes:
        with _as_os_error(location):
            stream = self._fs.open(self._path(location))
            try:
                return bytes(self._io.toByteArray(stream))
            finally:
                stream.close()

    def read_text(self, location: str) -> str:
        return self.read_bytes(location).decode("utf-8")

    def write_bytes(self, location: str, data: bytes) -> None:
        """A file of ``data`` at ``location`` (replaced if there)."""
        with _as_os_error(location):
            out = self._fs.create(self._path(location), True)
            try:
                for start in range(0, len(data), CHUNK):
                    out.write(bytearray(data[start:start + CHUNK]))
            finally:
                out.close()
