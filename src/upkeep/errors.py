"""One exception family for everything a user can get wrong (docs/design.md, "Errors").

Every error says where: the SQL position (line/column) for statements, the table and
row (and its index in the batch) for data.  A statement or batch that raises leaves
every table and view exactly as it was before.

Errors cross process boundaries (a Spark executor to the driver) as structured records:
:meth:`Error.to_record` gives a JSON-safe dict of the class, the message and every field,
and :func:`error_from_record` rebuilds the same class with the same fields.  Row values
keep their Python types through a tagged encoding (Decimal, date, datetime, NaN, bytes).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal


class Error(Exception):
    """Base class of every error upkeep raises on purpose."""

    #: the attributes that locate the fault, carried by :meth:`to_record`
    fields: tuple[str, ...] = ()

    def in_parameters(self, index: int) -> Error:
        """This error, said of ``executemany``'s parameter tuple ``index`` (a statement
        run once per tuple names its row 0 otherwise): the message says which, and a
        row's ``index`` is the tuple's."""
        self.args = (f"executemany parameter tuple {index}: {self}", *self.args[1:])
        if "index" in self.fields:
            self.index = index
        return self

    def to_record(self, **extra) -> dict:
        """The error as a JSON-safe dict: class, message, fields (and ``extra``)."""
        record = {"class": type(self).__name__, "message": str(self)}
        for name in self.fields:
            record[name] = encode_value(getattr(self, name, None))
        record.update(extra)
        return record


class ParseError(Error):
    """The SQL text could not be parsed; carries ``line`` and ``column``."""

    fields = ("line", "column")

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        where = f" (line {line}, column {column})" if line is not None else ""
        super().__init__(message + where)
        self.line = line
        self.column = column


class UnsupportedError(Error):
    """The SQL is valid but uses a construct upkeep cannot maintain or evaluate."""


@contextmanager
def refusing_deep_nesting() -> Iterator[None]:
    """Turn a RecursionError (SQL nested deeper than Python's recursion limit: a few
    hundred brackets or chained operators, which the planner walks recursively) into an
    :class:`UnsupportedError`, raised where a failed statement's or view's changes are
    taken back as for any other error."""
    try:
        yield
    except RecursionError:
        raise UnsupportedError("the SQL nests expressions too deeply (beyond Python's "
                               "recursion limit): flatten it, or split it into "
                               "views") from None


class StrategyError(UnsupportedError):
    """A forced strategy that cannot maintain a view; ``strategy`` names it."""

    fields = ("strategy",)

    def __init__(self, message: str, strategy: str | None = None):
        super().__init__(message)
        self.strategy = strategy


class SchemaError(Error):
    """Unknown table/column, or a row of the wrong shape or type; names the row at fault."""

    fields = ("row", "index")

    def __init__(self, message: str, row: object = None, index: int | None = None):
        super().__init__(message)
        self.row = row
        self.index = index


class EvaluationError(Error):
    """A value a view cannot compute for some row, where DuckDB raises too: division by zero
    in ``//`` or ``%``, integer overflow, a failed cast.  The batch that produced the row is
    rejected whole, subscribed or not; ``view`` names the view that failed."""

    fields = ("view",)

    def __init__(self, message: str, view: str | None = None):
        super().__init__(message)
        self.view = view

    def in_view(self, view: str) -> EvaluationError:
        """This error, said of ``view`` (itself if it already names one)."""
        if self.view is not None:
            return self
        return EvaluationError(f"view {view}: {self}", view)


class StatementTimeout(EvaluationError):
    """A statement's DuckDB work ran past its time limit (``upkeep serve
    --statement-seconds``) and was interrupted; what it would have changed is not."""


class ProvenanceError(Error):
    """A provenance request naming what does not exist: an unknown transaction, a row that
    is not an input row or not in the view asked about (``row``), a table that keeps no
    update provenance."""

    fields = ("row",)

    def __init__(self, message: str, row: object = None):
        super().__init__(message)
        self.row = row


class RecursionLimit(Error):
    """A recursive query did not converge within its budget: a fixpoint engine's derivation
    steps, or the iterations of a bag (``UNION ALL``) recursion DuckDB evaluates
    (``bag_recursion.py``); the query or batch is refused whole."""


class ConstraintError(Error):
    """A change that cannot be applied, e.g. deleting a row that is not present."""

    fields = ("row", "index")

    def __init__(self, message: str, row: object = None, index: int | None = None):
        super().__init__(message)
        self.row = row
        self.index = index


class DuplicateKeyError(ConstraintError):
    """A change that would hold a PRIMARY KEY value twice: ``row`` is the key, ``index``
    (where known) the position of the inserted row that repeats it."""


def _family() -> dict[str, type[Error]]:
    out: dict[str, type[Error]] = {}
    todo: list[type[Error]] = [Error]
    while todo:
        cls = todo.pop()
        out.setdefault(cls.__name__, cls)
        todo.extend(cls.__subclasses__())
    return out


def error_from_record(record: dict) -> Error:
    """The exception :meth:`Error.to_record` described: the same class (``Error`` for a
    class this process does not know) with the same message and fields."""
    cls = _family().get(str(record.get("class")), Error)
    exc = cls.__new__(cls)
    Exception.__init__(exc, str(record.get("message", "")))
    for name in cls.fields:
        setattr(exc, name, decode_value(record.get(name)))
    return exc


# ---------------------------------------------------------------- values of fields
def encode_value(value: object) -> object:
    """A field value as JSON, tagged where JSON alone would lose its type."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value if abs(value) < 2**53 else {"int": str(value)}
    if isinstance(value, float):
        return value if math.isfinite(value) else {"float": repr(value)}
    if isinstance(value, Decimal):
        return {"decimal": str(value)}
    if isinstance(value, dt.datetime):
        return {"datetime": value.isoformat()}
    if isinstance(value, dt.date):
        return {"date": value.isoformat()}
    if isinstance(value, dt.time):
        return {"time": value.isoformat()}
    if isinstance(value, (bytes, bytearray)):
        return {"bytes": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, (tuple, list)):
        return {"tuple" if isinstance(value, tuple) else "list":
                [encode_value(v) for v in value]}
    return {"repr": repr(value)}


_DECODERS = {
    "int": int,
    "float": float,
    "decimal": Decimal,
    "datetime": dt.datetime.fromisoformat,
    "date": dt.date.fromisoformat,
    "time": dt.time.fromisoformat,
    "bytes": base64.b64decode,
    "tuple": lambda items: tuple(decode_value(v) for v in items),
    "list": lambda items: [decode_value(v) for v in items],
    "repr": str,
}


def decode_value(value: object) -> object:
    """The inverse of :func:`encode_value`."""
    if isinstance(value, dict) and len(value) == 1:
        ((tag, inner),) = value.items()
        return _DECODERS[tag](inner)
    return value


# ---------------------------------------------------------------- errors inside text
_MARK = re.compile(r"\[upkeep-error:([A-Za-z0-9+/=]+)\]")


def error_marker(record: dict) -> str:
    """``record`` as one marker that survives any text channel (base64 JSON: nothing in
    a message can close it early or forge another)."""
    payload = base64.b64encode(json.dumps(record, sort_keys=True).encode()).decode()
    return f"[upkeep-error:{payload}]"


def record_in_text(text: str) -> dict | None:
    """The record of the last marker in ``text`` (None if there is none)."""
    found = _MARK.findall(text)
    return json.loads(base64.b64decode(found[-1])) if found else None
