"""One scratch DuckDB database for upkeep's short internal queries: typing a view,
folding a constant, evaluating an ad-hoc SELECT over the current contents.

Opening a DuckDB connection costs ~15 ms; a cursor of an open one ~0.3 ms.  So the
in-memory database is opened once per process, and each use takes a cursor of it: a
connection of its own, whose registered relations and TEMP tables are its own and go when
it closes, so uses (from any thread) never see each other's tables.
"""

from __future__ import annotations

import atexit
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import duckdb

from .errors import Error, EvaluationError, ParseError, SchemaError, StatementTimeout

_LOCK = threading.Lock()
_DATABASE: dict[int, duckdb.DuckDBPyConnection] = {}  # pid -> the database (not across fork)


def _database() -> duckdb.DuckDBPyConnection:
    """The process's scratch database (the caller holds ``_LOCK``)."""
    database = _DATABASE.get(os.getpid())
    if database is None:
        _DATABASE.clear()
        database = _DATABASE[os.getpid()] = duckdb.connect()
    return database


@atexit.register
def _close() -> None:
    """Close the scratch database before the interpreter's teardown: left to it, DuckDB's
    bindings report the connection and its types as leaked (seen at the end of Spark runs,
    whose callback threads keep modules alive longer)."""
    with _LOCK:
        for database in _DATABASE.values():
            database.close()
        _DATABASE.clear()


_LIMIT = threading.local()  # .seconds: this thread's time limit for DuckDB work, or None


@contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """DuckDB work this thread starts inside the block (an ad-hoc query, a recomputed
    view) is interrupted after ``seconds`` each and raises :class:`StatementTimeout`: a
    server answering many clients cannot be held by one client's query.  None: no limit."""
    before = getattr(_LIMIT, "seconds", None)
    _LIMIT.seconds = seconds
    try:
        yield
    finally:
        _LIMIT.seconds = before


@contextmanager
def scratch() -> Iterator[duckdb.DuckDBPyConnection]:
    """A fresh connection to the scratch database, closed after the block (interrupted
    once the thread's :func:`time_limit` passes)."""
    with _LOCK:
        con = _database().cursor()
    seconds = getattr(_LIMIT, "seconds", None)
    timer = None if seconds is None else threading.Timer(seconds, con.interrupt)
    if timer is not None:
        timer.daemon = True
        timer.start()
    try:
        yield con
    except Exception as exc:
        if timer is not None and timer.finished.is_set():
            raise StatementTimeout(f"the statement ran past its time limit of {seconds:g} s "
                                   "and was stopped; it changed nothing"
                                   ) from exc
        raise
    finally:
        if timer is not None:
            timer.cancel()
        con.close()


def quote(name: str) -> str:
    """``name`` as a quoted SQL identifier (any character allowed)."""
    return '"' + name.replace('"', '""') + '"'


def parse_statements(sql: str) -> list:
    """DuckDB's parse of ``sql`` (its ParserException if it rejects it), on the database's
    own connection: a parse needs no connection of its own, and a cursor would cost ten
    times the parse."""
    with _LOCK:
        return _database().extract_statements(sql)


def error_position(text: str) -> tuple[int | None, int | None]:
    """The line and column DuckDB's message marks with ``LINE n: ...`` and a caret."""
    m = re.search(r"LINE (\d+): (.*)\n(\s*)\^", text)
    if m is None:
        return None, None
    return int(m.group(1)), len(m.group(3)) - len(f"LINE {m.group(1)}: ") + 1


def as_error(exc: duckdb.Error, doing: str) -> Error:
    """DuckDB's error as upkeep's family: a parse error with its position, an unknown name
    or a type mismatch as a :class:`SchemaError`, a value DuckDB cannot compute (a cast,
    an overflow, a division by zero) as an :class:`EvaluationError`."""
    text = str(exc)
    message = f"{doing}: {text}"
    if isinstance(exc, duckdb.ParserException):
        return ParseError(f"{doing}: {text.splitlines()[0]}", *error_position(text))
    if isinstance(exc, duckdb.BinderException | duckdb.CatalogException):
        return SchemaError(message)
    if isinstance(exc, duckdb.ConversionException | duckdb.OutOfRangeException
                  | duckdb.InvalidInputException):
        return EvaluationError(message)
    return Error(message)
