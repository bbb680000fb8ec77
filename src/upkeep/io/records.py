"""Change records: what a source yields, where it came from, and how a record decodes.

A record names a table, an operation (``insert``, ``delete`` or ``update``) and row images:
``row`` for inserts and deletes, ``before`` and ``after`` for updates.  A row image is a
JSON object (column -> value) or array (values in column order).  An optional ``txn`` (a
string or integer) names the source transaction the record belongs to: the records of one
transaction are contiguous, are never split between batches, and on provenance tables each
transaction is committed as its own annotated transaction.  Keys starting with ``_`` are
ignored, so dead-letter files (which add ``_error`` and ``_source``) can be replayed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

OPS = ("insert", "delete", "update")
_IMAGES = {"insert": ("row",), "delete": ("row",), "update": ("before", "after")}
_KEYS = {"table", "op", "row", "before", "after", "txn"}


@dataclass(frozen=True, order=True)
class Position:
    """Where a record is: its file (relative to the source) and line or record number."""

    file: str
    number: int
    unit: str = "line"  # "line" (JSONL, CSV) or "record" (Parquet)

    def __str__(self) -> str:
        return f"{self.file}, {self.unit} {self.number}"

    def offset(self) -> dict[str, Any]:
        """The resumable source offset committed with a batch ending at this record."""
        return {"file": self.file, "position": self.number, "unit": self.unit}


@dataclass
class ChangeRecord:
    """One decoded change record, or the reason it could not be decoded (``error``)."""

    position: Position
    table: str | None = None
    op: str | None = None
    row: Any = None
    before: Any = None
    after: Any = None
    txn: str | None = None  # the source transaction's id, as text
    error: str | None = None
    raw: str | None = None  # the record's text, kept only when it is not a JSON object
    original: dict[str, Any] | None = None  # the object as read, kept only when it is bad

    def images(self) -> dict[str, Any]:
        """The record in the JSONL change format (for dead-letter files)."""
        if self.original is not None:
            return dict(self.original)
        out: dict[str, Any] = {"table": self.table, "op": self.op}
        for key in _IMAGES.get(self.op or "", ("row", "before", "after")):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.txn is not None:
            out["txn"] = self.txn
        return out


def decode_mapping(data: Any, position: Position) -> ChangeRecord:
    """A record from a decoded JSON object (or a CSV/Parquet row turned into one)."""
    if not isinstance(data, dict):
        return ChangeRecord(position, error=f"a change record must be a JSON object, got "
                                            f"{_short(data)}", raw=json.dumps(data, default=str))
    unknown = sorted(k for k in data if k not in _KEYS and not str(k).startswith("_"))
    rec = ChangeRecord(position, table=data.get("table"), op=data.get("op"), row=data.get("row"),
                       before=data.get("before"), after=data.get("after"))
    txn = data.get("txn")
    bad_txn = txn is not None and (isinstance(txn, bool) or not isinstance(txn, (str, int))
                                   or txn == "")
    if txn is not None and not bad_txn:  # also on a bad record: it stays in its
        rec.txn = str(txn)  # transaction, which then commits (or fails) whole
    if unknown:
        rec.error = f"unknown key {unknown[0]!r} (expected table, op, row, before, after, txn)"
    elif bad_txn:
        got = json.dumps(txn) if txn == "" else _short(txn)  # an empty string shown as ""
        rec.error = f"'txn' must be a non-empty string or an integer, got {got}"
    elif not isinstance(rec.table, str) or not rec.table:
        rec.error = ("missing or empty 'table'" if rec.table in (None, "") else
                     f"'table' must be a string, got {_short(rec.table)}")
    elif not isinstance(rec.op, str):
        rec.error = ("missing 'op' (insert, delete or update)" if rec.op is None else
                     f"'op' must be insert, delete or update, got {_short(rec.op)}")
    else:
        rec.table = rec.table.lower()
        rec.op = rec.op.lower()
        if rec.op not in OPS:
            rec.error = f"unknown operation {data['op']!r} (expected insert, delete or update)"
        else:
            rec.error = _check_images(rec, data)
    if rec.error is not None:
        rec.original = data
    return rec


def _check_images(rec: ChangeRecord, data: dict[str, Any]) -> str | None:
    """Why the record's row images do not fit its operation (None if they do)."""
    op = rec.op or ""
    article = "an" if op[0] in "aeiou" else "a"
    wanted = _IMAGES[op]
    for key in wanted:
        value = getattr(rec, key)
        if value is None:
            return f"{article} {op} needs '{key}'"
        if isinstance(value, str):  # JSON text, as a CSV cell (and its dead letter) holds it
            try:
                value = strict_json(value)
            except DuplicateKeyError as exc:
                return f"'{key}' is not valid JSON: {exc}"
            except ValueError:
                pass
            except RecursionError:  # (as decode_json_line and json_cell say it)
                return f"'{key}' is JSON text nested too deeply"
            else:
                setattr(rec, key, value)
        if not isinstance(value, (dict, list)):
            return f"'{key}' must be a JSON object or array, got {_short(value)}"
    for key in ("row", "before", "after"):
        if key not in wanted and data.get(key) is not None:
            return f"{article} {op} takes {' and '.join(repr(k) for k in wanted)}, not '{key}'"
    return None


class DuplicateKeyError(ValueError):
    """A JSON object that names a key twice."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's members, refusing a key given twice (which value was meant?)."""
    data = dict(pairs)
    if len(data) != len(pairs):  # the common case costs one comparison
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(f"the key {key!r} appears twice in one object")
            seen.add(key)
    return data


def strict_json(text: str) -> Any:
    """``json.loads``, but an object naming a key twice is invalid: Python's decoder would
    keep the last value silently, and a change record must say one thing."""
    return json.loads(text, object_pairs_hook=_unique_keys)


def decode_json_line(text: str, position: Position) -> ChangeRecord:
    """A record from one line of a JSONL file."""
    try:
        data = strict_json(text)
    except ValueError as exc:
        return ChangeRecord(position, error=f"invalid JSON: {exc}", raw=text.rstrip("\r\n"))
    except RecursionError:
        return ChangeRecord(position, error="invalid JSON: nested too deeply",
                            raw=text.rstrip("\r\n"))
    record = decode_mapping(data, position)
    if record.raw is not None:
        record.raw = text.rstrip("\r\n")
    return record


def json_cell(value: Any, column: str) -> Any:
    """A ``row``/``before``/``after`` cell of CSV or Parquet: JSON text (or a struct)."""
    if value is None or value == "":
        return None
    if isinstance(value, (dict, list)):
        return value
    if not isinstance(value, str):
        raise ValueError(f"column {column!r} must hold JSON text, got {_short(value)}")
    try:
        return strict_json(value)
    except ValueError as exc:
        raise ValueError(f"column {column!r} is not valid JSON: {exc}") from None
    except RecursionError:
        raise ValueError(f"column {column!r} is not valid JSON: nested too deeply") from None


def _short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[:limit] + "..."
