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
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

import duckdb

from .bag_recursion import recursion_limit
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
    for call in list(_left_behind):  # a call left behind ends at its next interrupt
        call.join(60)
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
    """A fresh connection to the scratch database, closed after the block (under the
    thread's :func:`time_limit`, a :class:`_Limited` one)."""
    with _LOCK:
        con = _database().cursor()
    seconds = getattr(_LIMIT, "seconds", None)
    if seconds is None:
        try:
            yield con
        finally:
            con.close()
        return
    limited = _Limited(con, seconds)
    try:
        yield limited  # type: ignore[misc]
    except Exception as exc:
        if limited.timed_out:
            raise StatementTimeout(f"the statement ran past its time limit of {seconds:g} s "
                                   "and was stopped; it changed nothing") from exc
        raise
    finally:
        limited.close()


# how long past its deadline a call may take to heed the interrupt before it is left behind
_GRACE = 0.1
# calls left behind still planning at once, at most (each holds a core until it is done)
_LEFT_BEHIND = threading.BoundedSemaphore(2)


class _Limited:
    """A scratch connection whose ``execute`` stops at a deadline.  DuckDB heeds an
    interrupt only while it executes, not while it parses, binds and plans, which for a
    long statement (thousands of ``UNION ALL`` branches) takes seconds to minutes; a
    server holding its lock meanwhile made every other request wait.  So each call runs
    on a thread of its own and the caller waits until the deadline: a call still planning
    then is left to finish alone, reading only its own registered Arrow tables (which
    nothing changes), and closes its connection when it does; the caller gets
    :class:`StatementTimeout`.  At most ``_LEFT_BEHIND`` calls are left at once: past
    that, the caller waits for its call, as it did before."""

    def __init__(self, con: duckdb.DuckDBPyConnection, seconds: float):
        self._con = con
        self._deadline = time.monotonic() + seconds
        self._state = threading.Lock()
        self._left = False  # a call was left behind: it closes the connection
        self.timed_out = False
        self._timer = threading.Timer(seconds, self._interrupt)
        self._timer.daemon = True
        self._timer.start()

    def _interrupt(self) -> None:
        self.timed_out = True
        self._con.interrupt()

    def __getattr__(self, name: str):
        return getattr(self._con, name)

    def execute(self, *args, **kwargs):
        if self._left:  # its connection is still another thread's
            raise StatementTimeout("the statement ran past its time limit")
        done = threading.Event()
        out: dict = {}

        def call() -> None:
            try:
                out["value"] = self._con.execute(*args, **kwargs)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                out["error"] = exc
            with self._state:
                done.set()
                if self._left:
                    self._con.close()
                    _LEFT_BEHIND.release()

        worker = threading.Thread(target=call, name="upkeep-duckdb", daemon=True)
        worker.start()
        waited = done.wait(max(0.0, self._deadline - time.monotonic()) + _GRACE)
        if not waited:
            with self._state:
                if not done.is_set() and _LEFT_BEHIND.acquire(blocking=False):
                    self._left = self.timed_out = True
                    _left_behind.add(worker)
                    # the interrupt came while DuckDB planned: it is sent again until the
                    # call ends, so that the execution its plan starts stops at once
                    threading.Thread(target=_interrupt_until, args=(self._con, done),
                                     daemon=True).start()
                    raise StatementTimeout("DuckDB was still planning the statement at its "
                                           "time limit")
            done.wait()
        if "error" in out:
            raise out["error"]
        return self if out["value"] is self._con else out["value"]

    def close(self) -> None:
        self._timer.cancel()
        with self._state:
            if not self._left:
                self._con.close()


_left_behind: weakref.WeakSet[threading.Thread] = weakref.WeakSet()


def _interrupt_until(con: duckdb.DuckDBPyConnection, done: threading.Event) -> None:
    while not done.wait(0.05):
        con.interrupt()


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
        return recursion_limit(text) or EvaluationError(message)
    return Error(message)
