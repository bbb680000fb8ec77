"""The dead-letter file: rejected change records, with the error, as JSON lines.

Each line is the record in the JSONL change format plus ``_error`` (why it was rejected)
and ``_source`` (file and line or record number); a record that was not even a JSON object
is kept as text in ``_raw``.  Since readers ignore keys starting with ``_``, a fixed
dead-letter file can be fed back as a change source.  Lines are written (and fsynced)
before the batch they were rejected from commits, so after a crash a record may be
dead-lettered twice (at least once); ``_source`` identifies duplicates.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO, Any

from ..codecs.json_values import dumps, to_json
from .errors import PipelineError
from .records import ChangeRecord


class DeadLetter:
    """Appends rejected records to ``path`` (created on first use)."""

    def __init__(self, path: Path):
        self.path = path
        self.written = 0
        self._file: IO[str] | None = None

    def write(self, entries: list[tuple[ChangeRecord, str]]) -> None:
        """Append ``(record, error text)`` entries and make them durable."""
        if not entries:
            return
        try:
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file = self.path.open("a", encoding="utf-8")
            lines = []
            for record, error in entries:
                pos = record.position
                line: dict[str, Any] = {}
                if record.raw is not None and record.original is None and record.table is None:
                    line["_raw"] = record.raw
                else:  # a replayed dead letter's own _error and _source are old news
                    line.update((k, v) for k, v in record.images().items()
                                if k not in ("_error", "_source"))
                source = {"file": pos.file, pos.unit: pos.number}
                try:
                    text = _json_line({"_error": error, "_source": source, **line})
                except RecursionError:  # its images stay in the source, at _source
                    text = _json_line({"_error": f"{error}; the record is nested too deeply "
                                                 "to copy here: read it at _source",
                                       "_source": source})
                lines.append(text + "\n")
            self._file.write("".join(lines))
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError as exc:
            raise PipelineError(f"cannot write the dead-letter file {self.path}: {exc}") from None
        self.written += len(entries)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _json_line(entry: dict[str, Any]) -> str:
    """One dead-letter line, valid JSON: values spelled as the jsonl sink spells them
    (``"NaN"``, ``"Infinity"``, decimals and dates as strings), which change records read
    back, so a fixed line can be replayed; a value of any other type as its ``str``."""
    return dumps(_spelled(entry))


def _spelled(value: Any) -> Any:
    try:
        return to_json(value)
    except TypeError:
        pass
    if isinstance(value, dict):
        return {str(k): _spelled(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_spelled(v) for v in value]
    return str(value)
