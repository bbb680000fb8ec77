"""Directories and Hadoop's glob syntax.

Hadoop matches a path given to a Spark reader as a glob pattern, in which ``[]{}*?\\`` are
syntax: a sink or database under a directory such as ``runs[1]`` or ``{a,b}`` read nothing
and failed with PATH_NOT_FOUND.  A Parquet read of a directory upkeep names itself escapes
them (:func:`literal_path`).  Spark's file-stream source does not take an escaped path
cleanly (a database reopened under ``db[1]`` counted a change three times), so a change
directory holding them is refused instead (:func:`glob_characters`).  A path the user hands
to ``db.load`` stays a pattern, as in Spark; writers take paths as they are.
"""

from __future__ import annotations

import os
import re

_GLOB = re.compile(r"([\\\[\]{}*?])")


def literal_path(path: str | os.PathLike) -> str:
    """``path`` with Hadoop's glob characters escaped by a backslash."""
    return _GLOB.sub(r"\\\1", str(path))


def glob_characters(path: str | os.PathLike) -> str:
    """The glob characters ``path`` holds, in order of first appearance ('' if none)."""
    return "".join(dict.fromkeys(_GLOB.findall(str(path))))
