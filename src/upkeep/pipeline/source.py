"""The change source: one file, or a directory of files read in file-name order.

Iterating a source yields change records in order, starting right after a committed
offset.  With ``follow`` it never ends on its own: when everything available is read it
yields :data:`CAUGHT_UP`, waits ``poll_interval`` seconds (or until ``stop`` is set) and
looks again, for lines appended to the newest file and for new files.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from ..io.errors import PipelineError
from ..io.formats import READERS, Reader, format_of
from ..io.records import ChangeRecord
from .config import SourceConfig


class _CaughtUp:
    def __repr__(self) -> str:
        return "CAUGHT_UP"


CAUGHT_UP = _CaughtUp()
"""Yielded by a following source when it has nothing more to read for now."""


class FileSource:
    """Change records from ``config.path``, resumed after ``resume`` (a committed offset)."""

    def __init__(self, config: SourceConfig, resume: dict[str, Any] | None = None,
                 follow: bool | None = None, stop: threading.Event | None = None,
                 warn: Callable[[str], None] | None = None, outputs: Iterable[Path] = ()):
        self.root = config.path
        #: the pipeline's own files (dead letters, file sinks): never read back as records
        self.outputs = {p.resolve() for p in outputs}
        self.format = config.format
        self.follow = config.follow if follow is None else follow
        self.poll_interval = config.poll_interval
        self.stop = stop or threading.Event()
        self.warn = warn or (lambda message: None)
        if not self.root.exists():
            raise PipelineError(f"the change source {self.root} does not exist (key source.path)")
        self.single = self.root.is_file()
        if self.single and (self.format or format_of(self.root)) is None:
            raise PipelineError(f"cannot tell the format of {self.root} from its name; set "
                                f"source.format to jsonl, csv or parquet")
        self.start_file: str | None = None
        self.start_position = 0
        if resume:
            self.start_file = str(resume.get("file"))
            self.start_position = int(resume.get("position", 0))
            if self.single and self.start_file != self.root.name:
                raise PipelineError(
                    f"the state directory holds an offset in {self.start_file!r}, but the source "
                    f"is the file {self.root.name!r}; delete the state directory to start over")
        self._entries: list[tuple[str, Path, str]] = []
        self._readers: dict[str, Reader] = {}
        self._done: set[str] = set()
        self._newest: str | None = None
        self._started: set[str] = set()
        self.files_read = 0

    def describe(self) -> str:
        kind = "file" if self.single else "directory"
        return f"{kind} {self.root}" + (" (following)" if self.follow else "")

    def _list(self) -> list[tuple[str, Path, str]]:
        if self.single:
            entries = [(self.root.name, self.root, self.format or format_of(self.root) or "")]
        else:
            entries = []
            for path in sorted(self.root.iterdir(), key=lambda p: p.name):
                fmt = format_of(path)
                if (path.name.startswith(".") or fmt is None or not path.is_file()
                        or path.resolve() in self.outputs):
                    continue
                if self.format is None or fmt == self.format:
                    entries.append((path.name, path, fmt))
        self._entries = entries
        return entries

    def _reader(self, name: str, path: Path, fmt: str) -> Reader:
        reader = self._readers.get(name)
        if reader is None:
            skip = self.start_position if name == self.start_file else 0
            reader = self._readers[name] = READERS[fmt](path, name, skip)
        return reader

    def _skipped(self, name: str) -> bool:
        """Files before the committed offset, and files that arrive out of name order."""
        if self.start_file is not None and name < self.start_file:
            return True
        if self._newest is not None and name < self._newest and name not in self._started:
            self.warn(f"ignoring {name}: it arrived after {self._newest}, which sorts later "
                      f"(files must arrive in name order)")
            return True
        return False

    def __iter__(self) -> Iterator[ChangeRecord | _CaughtUp]:
        while True:
            entries = self._list()
            for i, (name, path, fmt) in enumerate(entries):
                if name in self._done:
                    continue
                if self._skipped(name):
                    self._done.add(name)
                    self._readers.pop(name, None)
                    continue
                final = not self.follow or (not self.single and i < len(entries) - 1)
                reader = self._reader(name, path, fmt)
                self._newest = max(self._newest or name, name)
                self._started.add(name)
                yield from reader.read(final)
                if reader.finished:
                    self._done.add(name)
                    del self._readers[name]
                    self.files_read += 1
                else:
                    break  # the newest file, or one not complete yet: wait for more
            if not self.follow:
                return
            yield CAUGHT_UP
            if self.stop.wait(self.poll_interval):
                return

    def lag(self) -> int:
        """Records known to be in the source but not read yet (an estimate: lines)."""
        total = 0
        for name, path, fmt in self._entries or self._list():
            if name in self._done or (self.start_file is not None and name < self.start_file):
                continue
            total += self._reader(name, path, fmt).remaining()
        return total
