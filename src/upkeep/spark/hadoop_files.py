"""A pipeline's files from the driver, on the driver's disk or any Hadoop file system.

Spark's executors write a sink's micro-batches, and Spark's file source and checkpoint
read and write a pipeline's source and state, wherever Hadoop reaches: a local path, HDFS,
an object store (``s3a://``, ``abfss://``, ``gs://``, with the store's connector JARs on
Spark's classpath).  The driver's own steps on those files (renaming a batch into place,
removing the batches a checkpoint never committed, a late sink's first rows, the plan file,
the committed batch ids, the change files' times, a rejected batch's files read again) go
through :func:`files_for`: Python's own file operations for a local path (``file:``), and
Hadoop's ``FileSystem`` over Spark's JVM, with the session's Hadoop settings (what Spark's
writers use), for any other, so each step meets the executors' files where they are.
Locations are strings: a URI, or a local path as a ``file:`` URI (:func:`local_uri`), taken
as it is (no ``%`` escape decoded).  Names are matched in Python, never as Hadoop glob
patterns (:mod:`.paths`).  Both kinds raise ``OSError`` naming the location.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager

from py4j.protocol import Py4JJavaError
from pyspark.errors.exceptions.captured import CapturedException
from pyspark.sql import SparkSession

from ..io.locations import is_uri

#: bytes moved between Python and the JVM per call when the driver reads or writes a file
#: on a Hadoop file system (a late sink's rows, a rejected batch's change file)
CHUNK = 1 << 20
_LOCAL = "file://"


def local_uri(path: str | os.PathLike) -> str:
    """A local path as the ``file:`` URI Hadoop takes it as, characters as they are (an
    escaped ``[`` would name another file: Hadoop does not decode a path)."""
    return _LOCAL + os.path.abspath(os.fspath(path))


def location_of(path: str | os.PathLike) -> str:
    """A pipeline's location (:func:`upkeep.io.locations.location`) as Hadoop takes it."""
    return path if is_uri(path) else local_uri(path)


def name_of(location: str) -> str:
    """The last component of ``location``."""
    return location.rstrip("/").rpartition("/")[2]


def child(location: str, name: str) -> str:
    """``location``'s entry ``name``."""
    return f"{location.rstrip('/')}/{name}"


def files_for(spark: SparkSession, location: str) -> Files:
    """The file operations for ``location``: the driver's own for a local path (as fast as
    Python's, whatever the directory's size), Hadoop's for any other."""
    if location.startswith(_LOCAL + "/"):
        return LocalFiles()
    return HadoopFiles(spark, location)


class LocalFiles:
    """:class:`HadoopFiles`' operations on the driver's disk (``file:`` locations)."""

    @staticmethod
    def _path(location: str) -> str:
        return location[len(_LOCAL):]

    def exists(self, location: str) -> bool:
        return os.path.exists(self._path(location))

    def is_dir(self, location: str) -> bool:
        return os.path.isdir(self._path(location))

    def mkdirs(self, location: str) -> None:
        os.makedirs(self._path(location), exist_ok=True)

    def remove(self, location: str) -> None:
        """Remove a file or a directory with everything in it (nothing if absent)."""
        path = self._path(location)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.unlink(path)

    def rename(self, source: str, target: str) -> None:
        """Move ``source`` to ``target``, which must not exist."""
        if os.path.lexists(self._path(target)):
            raise OSError(errno.EEXIST, "something is in the way there", target)
        os.rename(self._path(source), self._path(target))

    def names(self, location: str, pattern: str = "*") -> list[str]:
        """The names of ``location``'s entries that match ``pattern`` (``fnmatch``)."""
        with os.scandir(self._path(location)) as entries:
            return [e.name for e in entries if fnmatch.fnmatchcase(e.name, pattern)]

    def file_times(self, location: str) -> list[tuple[str, int]]:
        """The files (not directories) in ``location``, with their modification times in
        milliseconds."""
        with os.scandir(self._path(location)) as entries:
            return [(e.name, e.stat().st_mtime_ns // 1_000_000) for e in entries
                    if e.is_file()]

    def set_modified(self, location: str, millis: int) -> None:
        os.utime(self._path(location), ns=(millis * 1_000_000, millis * 1_000_000))

    def read_bytes(self, location: str) -> bytes:
        with open(self._path(location), "rb") as f:
            return f.read()

    def read_text(self, location: str) -> str:
        return self.read_bytes(location).decode("utf-8")

    def write_bytes(self, location: str, data: bytes) -> None:
        """A file of ``data`` at ``location`` (replaced if there)."""
        with open(self._path(location), "wb") as f:
            f.write(data)


@contextmanager
def _as_os_error(location: str) -> Iterator[None]:
    """Hadoop's failures (no file system for a scheme, an unknown host, access refused,
    a wrong file system, ...) as the ``OSError`` a local file operation raises, naming
    ``location``.  PySpark hands some Java exceptions over as its own classes."""
    try:
        yield
    except (Py4JJavaError, CapturedException) as exc:
        if isinstance(exc, Py4JJavaError):
            message = str(exc.java_exception.getMessage() or exc.java_exception.toString())
        else:
            message = str(exc)
        message = (message.strip().splitlines() or [type(exc).__name__])[0]
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
        """Remove a file or a directory with everything in it (nothing if absent); one
        that stays (a file the store refused to delete) raises."""
        with _as_os_error(location):
            path = self._path(location)
            if not self._fs.delete(path, True) and self._fs.exists(path):
                raise OSError(errno.EIO, "cannot remove it whole", location)

    def rename(self, source: str, target: str) -> None:
        """Move ``source`` to ``target``, which must not exist (Hadoop would move or copy
        it into an existing directory)."""
        with _as_os_error(source):
            if self._fs.exists(self._path(target)):
                raise OSError(errno.EEXIST, "something is in the way there", target)
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
        """The file's bytes, moved from the JVM a chunk at a time (a whole file in one
        Java array would fill the driver's heap), and checked against its length."""
        with _as_os_error(location):
            path = self._path(location)
            size = int(self._fs.getFileStatus(path).getLen())
            stream = self._fs.open(path)
            try:
                parts = []
                done = 0
                while done < size:
                    part = bytes(self._io.toByteArray(stream, min(CHUNK, size - done)))
                    if not part:
                        break
                    parts.append(part)
                    done += len(part)
            finally:
                stream.close()
        if done != size:
            raise OSError(errno.EIO, f"read {done} of its {size} bytes", location)
        return b"".join(parts)

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


#: what :func:`files_for` gives
Files = LocalFiles | HadoopFiles
