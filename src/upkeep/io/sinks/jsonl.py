"""The ``jsonl`` sink: every committed delta row of a view, appended as a JSON line.

Lines are ``{"batch": id, "weight": 1 | -1, "row": {column: value}}``, one per row
occurrence, deletions of a batch before its insertions, flushed after every batch.  At
start the sink replays the file (from its last reset line); if that does not add up to the
view's current contents (a new file while the view already has rows, a crash between a
commit and the write, a truncated file), it appends ``{"batch": id, "reset": true}`` and
then the view's whole contents as weight-1 lines.  A reader that applies lines in order,
clearing its state at each reset, therefore always ends at the view's contents.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import IO

from ...codecs.json_values import dumps, row_object
from ..errors import PipelineError
from .base import Changes, Sink


def encode_row(names: list[str], row: tuple) -> str:
    """A view row as the JSON object of a sink line (column -> JSON value)."""
    return dumps(row_object(names, row))


def delta_lines(names: list[str], changes: Changes, batch: int) -> list[str]:
    """A batch's delta lines, one per row occurrence, deletions before insertions."""
    lines = []
    for sign in (-1, 1):
        for row, w in changes:
            if (w > 0) == (sign > 0):
                line = f'{{"batch": {batch}, "weight": {sign}, "row": {encode_row(names, row)}}}\n'
                lines.extend([line] * abs(w))
    return lines


class JsonlSink(Sink):
    """Appends a view's deltas to a JSON-lines file."""

    def start(self, batch: int) -> None:
        self.path = self.options["path"]
        if self.path.exists() and not self.path.is_file():  # a device would be read forever
            raise PipelineError(f"jsonl sink {self.path}: not a regular file (the sink "
                                f"reads its file back when it starts)")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            replayed = self._replay()
            current = Counter(self._encode(row) for row in self.view.rows())
            self._file: IO[str] = self.path.open("a", encoding="utf-8")
        except OSError as exc:
            raise PipelineError(f"jsonl sink {self.path}: {exc}") from None
        if replayed != current:
            lines = [json.dumps({"batch": batch, "reset": True}) + "\n"]
            for text, n in sorted(current.items()):
                lines.extend([f'{{"batch": {batch}, "weight": 1, "row": {text}}}\n'] * n)
            self._write(lines)

    def _encode(self, row: tuple) -> str:
        return encode_row(self.names, row)

    def _replay(self) -> Counter[str]:
        """The contents the file describes; cuts a torn (newline-less) last line."""
        if not self.path.exists():
            return Counter()
        data = self.path.read_bytes()
        end = data.rfind(b"\n") + 1
        if end < len(data):
            with self.path.open("r+b") as f:
                f.truncate(end)
        state: Counter[str] = Counter()
        for line in data[:end].splitlines():
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                if entry.get("reset"):
                    state.clear()
                else:
                    state[dumps(entry["row"])] += int(entry["weight"])
            except (ValueError, KeyError, TypeError, AttributeError):
                return Counter({"<unreadable>": 1})  # forces a reset
        if any(n < 0 for n in state.values()):
            return Counter({"<inconsistent>": 1})
        return +state

    def deliver(self, changes: Changes, batch: int) -> None:
        self._write(delta_lines(self.names, changes, batch))

    def _write(self, lines: list[str]) -> None:
        try:
            self._file.write("".join(lines))
            self._file.flush()
        except OSError as exc:
            raise PipelineError(f"jsonl sink {self.path}: {exc}") from None

    def close(self) -> None:
        if hasattr(self, "_file"):
            self._file.close()
