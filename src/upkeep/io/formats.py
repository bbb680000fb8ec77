"""Readers of one change file each: JSON lines, CSV and Parquet.

A reader remembers how far it has read, so a file that grows (``follow``) is read on from
where it stopped; until a file is *final* (no more data will be appended) a trailing line
without its newline is left for later.  Records up to ``skip`` (a line or record number,
from the committed source offset) are passed over without being decoded.
"""

from __future__ import annotations

import csv
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .records import ChangeRecord, Position, decode_json_line, decode_mapping, json_cell

EXTENSIONS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".parquet": "parquet",
              ".pq": "parquet"}
_IMAGE_COLUMNS = ("row", "before", "after")


def format_of(path: Path) -> str | None:
    """The change format a file name implies (None for other files)."""
    return EXTENSIONS.get(path.suffix.lower())


class Reader(ABC):
    """Reads one file's change records, in order, resumably."""

    unit = "line"

    def __init__(self, path: Path, name: str, skip: int = 0):
        self.path = path
        self.name = name
        self.skip = skip
        self.seen = 0  # the line (or record) number of the last one read
        self.finished = False
        self._count_key: tuple[int, int] | None = None
        self._count = 0

    @abstractmethod
    def read(self, final: bool) -> Iterator[ChangeRecord]:
        """The records available now; ``final`` says the file will not grow any more."""

    def remaining(self) -> int:
        """Records (lines) in the file not read yet: the reader's part of the source's lag."""
        try:
            stat = self.path.stat()
        except OSError:
            return 0
        key = (stat.st_size, stat.st_mtime_ns)
        if key != self._count_key:
            self._count_key = key
            self._count = self._total()
        return max(0, self._count - max(self.seen, self.skip))

    @abstractmethod
    def _total(self) -> int:
        """Lines or records in the file as it is now."""

    def _position(self, number: int) -> Position:
        return Position(self.name, number, self.unit)


class _LineReader(Reader):
    """Shared by the line-based formats: complete lines from a byte offset on."""

    def __init__(self, path: Path, name: str, skip: int = 0):
        super().__init__(path, name, skip)
        self.offset = 0
        self._counted = (0, 0, b"\n")  # bytes counted, newlines in them, their last byte

    def _total(self) -> int:
        """Lines in the file; a file that grew is counted from where counting stopped."""
        done, lines, last = self._counted
        if self.path.stat().st_size < done:
            done, lines, last = 0, 0, b"\n"  # rewritten: count again
        with self.path.open("rb") as f:
            f.seek(done)
            while chunk := f.read(1 << 20):
                done += len(chunk)
                lines += chunk.count(b"\n")
                last = chunk[-1:]
        self._counted = (done, lines, last)
        return lines + (last != b"\n")


BOM = b"\xef\xbb\xbf"  # UTF-8's byte-order mark, which some editors write first


class JsonlReader(_LineReader):
    """JSON lines: one change record (a JSON object) per line; blank lines are skipped."""

    def read(self, final: bool) -> Iterator[ChangeRecord]:
        with self.path.open("rb") as f:
            f.seek(self.offset)
            for raw in f:
                if not raw.endswith(b"\n") and not final:
                    return
                first = self.offset == 0
                self.offset += len(raw)
                self.seen += 1
                if self.seen <= self.skip:
                    continue
                if first:
                    raw = raw.removeprefix(BOM)
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    yield ChangeRecord(self._position(self.seen), error=f"not UTF-8: {exc}",
                                       raw=raw.decode("utf-8", "replace"))
                    continue
                if text.strip():
                    yield decode_json_line(text, self._position(self.seen))
        self.finished = final


class CsvReader(_LineReader):
    """CSV with a header: ``table``, ``op`` and JSON text in ``row`` / ``before`` / ``after``.

    A record's position is the line it starts on (the header is line 1).
    """

    def __init__(self, path: Path, name: str, skip: int = 0):
        super().__init__(path, name, skip)
        self.header: list[str] | None = None
        self.header_error: str | None = None

    def read(self, final: bool) -> Iterator[ChangeRecord]:
        with self.path.open("rb") as f:
            f.seek(self.offset)
            state = [self.offset, self.seen]
            exhausted = [False]
            taken: list[str] = []  # the lines of the record being read, as written
            undecodable: list[str] = []  # why a line of the record is not UTF-8

            def lines() -> Iterator[str]:
                for raw in f:
                    if not raw.endswith(b"\n") and not final:
                        break
                    if state[0] == 0 and raw.startswith(BOM):  # Excel's byte-order mark
                        raw = raw[len(BOM):]
                        state[0] += len(BOM)
                    state[0] += len(raw)
                    state[1] += 1
                    try:
                        text = raw.decode("utf-8")
                    except UnicodeDecodeError as exc:
                        undecodable.append(f"not UTF-8: {exc}")
                        text = raw.decode("utf-8", "replace")
                    taken.append(text)
                    yield text
                exhausted[0] = True

            reader = csv.reader(lines(), strict=True)
            while True:
                start = state[1] + 1
                taken.clear()
                undecodable.clear()
                try:
                    fields = next(reader)
                except StopIteration:
                    break
                except csv.Error as exc:
                    if not final and exhausted[0]:
                        return  # a quoted field continues on lines not written yet
                    self.offset, self.seen = state
                    if start > self.skip:
                        yield ChangeRecord(self._position(start), error=f"malformed CSV: {exc}",
                                           raw=_text_of(taken))
                    continue
                self.offset, self.seen = state
                if self.header is None:
                    self._set_header(fields)
                    if self.header_error:  # said even if no record follows it
                        yield ChangeRecord(self._position(start), error=self.header_error,
                                           raw=_text_of(taken))
                    continue
                if start <= self.skip or not fields:
                    continue
                if undecodable:  # never committed with its bytes replaced
                    yield ChangeRecord(self._position(start), error=undecodable[0],
                                       raw=_text_of(taken))
                    continue
                yield self._decode(fields, self._position(start), taken)
        self.finished = final

    def _set_header(self, fields: list[str]) -> None:
        self.header = [f.strip().lower() for f in fields]
        for need in ("table", "op"):
            if need not in self.header:
                self.header_error = f"the CSV header (line 1) has no column {need!r}"
        twice = _named_twice(self.header)
        if twice:  # one of its cells would be dropped unseen
            self.header_error = f"the CSV header (line 1) names column {twice!r} twice"
        for col in self.header:
            if col not in ("table", "op", "txn", *_IMAGE_COLUMNS) and not col.startswith("_"):
                self.header_error = (f"the CSV header (line 1) has an unknown column {col!r} "
                                     f"(expected table, op, row, before, after, txn)")

    def _decode(self, fields: list[str], position: Position, lines: list[str]) -> ChangeRecord:
        assert self.header is not None
        if self.header_error:
            return ChangeRecord(position, error=self.header_error, raw=_text_of(lines))
        if len(fields) != len(self.header):
            return ChangeRecord(position, raw=_text_of(lines),
                                error=f"the CSV record has {len(fields)} fields, the header "
                                      f"has {len(self.header)}")
        return _decode_cells(dict(zip(self.header, fields, strict=True)), position)


def _text_of(lines: list[str]) -> str:
    """A CSV record's text as the file holds it (its lines, without the last line break),
    for the dead-letter file."""
    text = "".join(lines)
    return text[:-2] if text.endswith("\r\n") else text.removesuffix("\n")


class ParquetReader(Reader):
    """Parquet with string columns ``table``, ``op`` and JSON text (or structs) in ``row`` /
    ``before`` / ``after``; positions are 1-based record numbers.  A Parquet file cannot
    grow: it is read once it is complete (its footer is written)."""

    unit = "record"

    def _open(self) -> Any:
        """The file, or the exception pyarrow raised (still being written, or damaged)."""
        import pyarrow.parquet as pq

        try:
            return pq.ParquetFile(self.path)
        except Exception as exc:  # noqa: BLE001 - pyarrow raises several types
            return exc

    def _total(self) -> int:
        pf = self._open()
        return 0 if isinstance(pf, Exception) else pf.metadata.num_rows

    def _unreadable(self, number: int, exc: Exception) -> Iterator[ChangeRecord]:
        """A damaged file's unreadable rest as one bad record, at the first record not
        read: ``on_error`` then stops on it, skips it or dead-letters it like any bad
        record, and a resumed run does not meet it again."""
        number += 1
        self.seen = number
        if number > self.skip:
            yield ChangeRecord(self._position(number), error=(
                f"cannot read Parquet file {self.path.name} from record {number} on: "
                f"{str(exc).splitlines()[0].rstrip('.') if str(exc) else type(exc).__name__}"))
        self.finished = True

    def read(self, final: bool) -> Iterator[ChangeRecord]:
        pf = self._open()
        if isinstance(pf, Exception):
            if final:  # complete, yet no Parquet file: damaged
                yield from self._unreadable(0, pf)
            return
        names = [n.lower() for n in pf.schema_arrow.names]
        problem = None
        for need in ("table", "op"):
            if need not in names:
                problem = f"the Parquet file has no column {need!r}"
        for col in names:
            if col not in ("table", "op", "txn", *_IMAGE_COLUMNS) and not col.startswith("_"):
                problem = f"the Parquet file has an unknown column {col!r}"
        if _named_twice(names):
            problem = f"the Parquet file names column {_named_twice(names)!r} twice"
        number = 0
        # row group by row group, so that a damaged one loses only itself and what follows
        batches = (batch for group in range(pf.metadata.num_row_groups)
                   for batch in pf.iter_batches(batch_size=4096, row_groups=[group]))
        while True:
            try:
                batch = next(batches, None)
                if batch is None:
                    break
                columns = {n.lower(): v for n, v in batch.to_pydict().items()}
            except Exception as exc:  # noqa: BLE001 - a damaged row group or page
                yield from self._unreadable(number, exc)
                return
            for i in range(batch.num_rows):
                number += 1
                self.seen = number
                if number <= self.skip:
                    continue
                position = self._position(number)
                if problem:  # the row's cells kept, for its dead letter to be fixed
                    held = {n: v[i] for n, v in columns.items() if v[i] not in (None, "")}
                    yield ChangeRecord(position, error=problem, original=_images_read(held))
                    continue
                yield _decode_cells({n: v[i] for n, v in columns.items()}, position)
        self.finished = True


def _named_twice(names: list[str]) -> str | None:
    """A column named twice (names lowered), or None."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            return name
        seen.add(name)
    return None


def _images_read(cells: dict[str, Any]) -> dict[str, Any]:
    """Cells with their JSON row images read where they are JSON, as a dead letter holds
    them (a replayed one then carries lists, not their text)."""
    out = dict(cells)
    for key in _IMAGE_COLUMNS:
        if key in out:
            try:
                out[key] = json_cell(out[key], key)
            except ValueError:
                pass  # kept as text, for the reader of the dead letter to fix
    return out


def _decode_cells(cells: dict[str, Any], position: Position) -> ChangeRecord:
    """A CSV/Parquet row: plain ``table`` and ``op``, JSON row images.  A record whose
    image is not JSON keeps, for its dead letter, only the cells that hold something: an
    empty CSV cell (a null Parquet one) is an absent key in the JSONL change format, so
    the dead letter, once fixed, replays as a change record."""
    data: dict[str, Any] = {}
    for key, value in cells.items():
        if key.startswith("_"):
            continue
        if key in _IMAGE_COLUMNS:
            try:
                value = json_cell(value, key)
            except ValueError as exc:
                held = {k: v for k, v in cells.items() if v is not None and v != ""}
                return ChangeRecord(position, error=str(exc), original=held)
        elif value == "":
            value = None
        if value is not None:
            data[key] = value
    return decode_mapping(data, position)


READERS: dict[str, type[Reader]] = {"jsonl": JsonlReader, "csv": CsvReader,
                                    "parquet": ParquetReader}
