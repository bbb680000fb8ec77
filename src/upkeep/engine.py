"""The engine contract: one connection type and one view handle type over every engine.

``upkeep.connect(engine=...)`` opens an implementation from :data:`ENGINES` (the local,
in-process engine by default; Apache Spark with ``engine="spark"``).  Higher layers (the
pipeline runner, the command line) speak only to :class:`Engine` and :class:`ViewHandle`.
Every method exists on every engine with the same name, signature and return type; where
an engine cannot do something, the method raises :class:`~upkeep.errors.UnsupportedError`
saying so.  ``tests/test_conformance.py`` runs one suite against every engine.

This module imports no engine: :data:`ENGINES` names each implementation by module path,
imported when first asked for, so the local engine never imports Spark (docs/design.md,
"Layers").
"""

from __future__ import annotations

import importlib
import math
import os
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from functools import cached_property

from sqlglot import exp

from .cursor import Cursor
from .errors import Error, SchemaError, StatementTimeout, UnsupportedError, refusing_deep_nesting
from .io.locations import is_uri, local_file
from .provenance_arguments import check_metadata
from .sql import (
    bind_parameters,
    insert_target,
    insert_template,
    kept_placeholder_order,
    parse_repeated,
    parsed_once,
    placeless_once,
)
from .statement_shapes import SHAPES, scan
from .storage import StorageError
from .types import SqlType
from .zset import Changes

Subscriber = Callable[[Changes], object]


class ViewHandle(ABC):
    """``db.view(name)``: read a maintained view's rows and subscribe to its changes."""

    def __init__(self, name: str):
        self.name = name

    @property
    @abstractmethod
    def columns(self) -> list[str]:
        """The view's column names, in order."""

    @property
    @abstractmethod
    def schema(self) -> list[tuple[str, str]]:
        """Column names with their SQL types."""

    @abstractmethod
    def rows(self) -> list[tuple]:
        """The view's rows (a row appears as often as its multiplicity)."""

    @abstractmethod
    def count(self, row: tuple) -> int:
        """The multiplicity of ``row`` in the view."""

    def __contains__(self, row: tuple) -> bool:
        return self.count(row) > 0

    def looked_up(self, row: object) -> tuple:
        """``row`` as the tuple :meth:`count` looks up (any iterable of values but a
        string); a :class:`SchemaError` for what cannot be a row of the view (not a
        sequence, or of another length than its columns; a row of other types is simply
        not there)."""
        try:
            if isinstance(row, (str, bytes)):
                raise TypeError
            # a NaN as the one NaN object views hold (another never equals it)
            row = tuple(math.nan if type(v) is float and v != v else v for v in row)
            hash(row)
        except TypeError as exc:
            raise SchemaError(f"a row of view {self.name} is a tuple of its column values, "
                              f"not {row!r}: {str(exc) or type(row).__name__}"[:200]) from None
        if len(row) != len(self.columns):
            raise SchemaError(f"a row of view {self.name} has {len(self.columns)} values, "
                              f"not {len(row)}: {row!r}"[:200], row)
        return row

    @abstractmethod
    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        """Call ``fn(changes)`` after every committed batch that changes the view;
        ``changes`` is a list of ``(row, weight)`` (positive: inserted, negative: deleted).
        Returns a function that unsubscribes."""

    @abstractmethod
    def explain(self) -> str:
        """The view's strategy, query class and plan, in words."""

    @abstractmethod
    def why(self, row: tuple):
        """Why ``row`` is in the view (:class:`upkeep.recursive.view.Explanation`)."""

    @abstractmethod
    def counters(self) -> dict[str, int]:
        """Cumulative work counters of the view's maintenance (empty if it keeps none)."""


class Engine(ABC):
    """A database of tables and maintained views: the DB-API style connection.

    A change (a statement, :meth:`insert` / :meth:`delete`, or a :meth:`transaction`
    block) commits as one atomic batch: checked whole, then applied to the tables and every
    view, or not at all.  Subclasses implement the staging hooks; :meth:`transaction` is
    the same on every engine.
    """

    name = ""

    # ------------------------------------------------------------ statements and rows
    def execute(self, sql: str, parameters: Iterable | None = None) -> Cursor:
        """Run one or more SQL statements; a cursor over the last one's result.  Several
        statements commit as one atomic batch, unless a CREATE, DROP or ALTER is among
        them: then each runs on its own, in order, as DDL cannot be part of a batch.
        Inside a transaction each is a statement of it: one that raises changes nothing
        itself, and those before it stay staged (docs/sql.md)."""
        if parameters is None:
            scanned = scan(sql) if type(sql) is str else None
            if scanned is not None:  # constants in the text: one parse per shape
                stmt = SHAPES.statement(*scanned)
                if stmt is not None:
                    cursor = self._execute_placeless(stmt)
                    if cursor is not None:
                        return cursor  # (else again from the text's own parse, below)
            parsed = parse_repeated(sql)
            if scanned is not None:
                SHAPES.learn(*scanned, parsed)
        else:
            statements = parsed_once(sql)  # a text's errors before its parameters'
            _positional(parameters)
            if len(statements) != 1:
                raise UnsupportedError("parameters with several statements")
            return self._execute_bound(placeless_once(sql, statements)[0], statements[0],
                                       list(parameters),
                                       kept_placeholder_order(sql, statements[0]))
        atomic = len(parsed) > 1 and not self.in_transaction() and not any(
            isinstance(stmt, (exp.Create, exp.Drop, exp.Alter)) for stmt in parsed)
        with refusing_deep_nesting(), self.transaction() if atomic else nullcontext(self):
            for stmt in parsed:
                cursor = self.execute_parsed(stmt)
        return cursor

    def executemany(self, sql: str, seq_of_parameters: Iterable[Iterable]) -> Cursor:
        """Run one statement once per parameter tuple, all in one atomic batch.  An
        ``INSERT .. VALUES (..)`` runs as one statement of all the tuples' rows, so inside
        a transaction too it stages all or nothing; an UPDATE or DELETE there is one
        statement per tuple (one that raises changes nothing itself, those before it
        stay staged)."""
        parsed = parsed_once(sql)  # shared: each tuple is bound into a copy
        if len(parsed) != 1:
            raise UnsupportedError("executemany takes exactly one statement")
        (stmt,) = parsed
        if not isinstance(stmt, (exp.Insert, exp.Update, exp.Delete)):
            raise UnsupportedError(f"executemany runs INSERT, UPDATE or DELETE, not "
                                   f"{stmt.key.upper()}: run it with execute")
        if isinstance(seq_of_parameters, (str, bytes)) or not isinstance(seq_of_parameters,
                                                                         Iterable):
            raise SchemaError(f"executemany takes a sequence of parameter sequences, not "
                              f"{type(seq_of_parameters).__name__}")
        seq_of_parameters = [_positional(p) for p in seq_of_parameters]
        # INSERT INTO t [(cols)] VALUES (?, 'const', ...): the rows in one call (a
        # provenance table's INSERT statements are hyperplane queries of the
        # transaction, not input rows)
        table = insert_target(stmt) if isinstance(stmt, exp.Insert) else None
        if table in self.tables() and not self.has_update_provenance(table):
            row = insert_template(stmt, self.schema_of(table))
            if row is not None:
                return Cursor(rowcount=self.insert(
                    table, [row(list(p), i) for i, p in enumerate(seq_of_parameters)]))
        if seq_of_parameters and _one_values_row(stmt):
            # INSERT .. VALUES (..) once per tuple: one statement of all the rows, which
            # changes nothing if any row fails, inside a transaction too (a provenance
            # table's rows are then one statement's queries, annotated as separate ones)
            order = kept_placeholder_order(sql, stmt)
            bound = [bind_parameters(stmt, list(p), order) for p in seq_of_parameters]
            combined = bound[0]
            combined.expression.set("expressions", [b.expression.expressions[0] for b in bound])
            with refusing_deep_nesting():
                return self.execute_parsed(combined)
        total = 0
        order = kept_placeholder_order(sql, stmt)
        fast = placeless_once(sql, parsed)[0]
        with refusing_deep_nesting(), (
                nullcontext(self) if self.in_transaction() else self.transaction()):
            for i, params in enumerate(seq_of_parameters):
                try:
                    total += max(self._execute_bound(fast, stmt, list(params), order)
                                 .rowcount, 0)
                except Error as exc:
                    raise exc.in_parameters(i) from exc.__cause__
        return Cursor(rowcount=total)

    def _execute_bound(self, fast: exp.Expression, stmt: exp.Expression, params: list,
                       order: list[int]) -> Cursor:
        """``stmt`` with ``params`` bound, run: bound into ``fast`` first (the same
        statement without token places, copied in half the time), and into ``stmt`` and
        run again if that raised an error naming places (:meth:`_execute_placeless`)."""
        if fast is not stmt:
            cursor = self._execute_placeless(bind_parameters(fast, params, order))
            if cursor is not None:
                return cursor
        with refusing_deep_nesting():
            return self.execute_parsed(bind_parameters(stmt, params, order))

    def _execute_placeless(self, stmt: exp.Expression) -> Cursor | None:
        """Run ``stmt``, a statement without the token places errors name
        (:func:`~upkeep.sql.without_places`); None if it raised an :class:`Error` (it
        changed nothing: a statement that raises changes nothing itself), for the caller
        to run it again from a tree with places, whose error names them in the text.  A
        storage error or a statement timeout is raised as it is: neither names a place,
        and a log that could not be written is not retried."""
        try:
            with refusing_deep_nesting():
                return self.execute_parsed(stmt)
        except (StatementTimeout, StorageError):
            raise
        except Error:
            return None

    @abstractmethod
    def execute_parsed(self, stmt: exp.Expression) -> Cursor:
        """Run one statement sqlglot has parsed already."""

    @abstractmethod
    def insert(self, table: str, rows) -> int:
        """Insert rows (iterable of tuples or dicts, pandas DataFrame or Arrow table)."""

    @abstractmethod
    def delete(self, table: str, rows) -> int:
        """Delete one occurrence of each row; a row not present raises ConstraintError."""

    # ------------------------------------------------------------ batches
    def transaction(self, metadata: dict | None = None) -> Transaction:
        """All changes inside commit as one atomic batch; an exception discards them all.

        ``metadata`` (e.g. source offsets) is committed with the batch, atomically, even if
        the batch is empty; :meth:`metadata` returns the latest committed one.  The block
        returned runs once: each ``with`` needs its own ``db.transaction()``."""
        return Transaction(self._transaction_block(metadata))

    @contextmanager
    def _transaction_block(self, metadata: dict | None) -> Iterator[Engine]:
        if self.in_transaction():
            raise Error("transactions do not nest")
        if metadata is not None and not isinstance(metadata, dict):
            raise SchemaError(f"transaction metadata must be a dict, not "
                              f"{type(metadata).__name__}")
        if metadata:
            check_metadata(metadata)
        self.expire()
        self._begin()
        try:
            yield self
        except BaseException:
            self._discard()
            raise
        self._finish(metadata)

    @abstractmethod
    def in_transaction(self) -> bool:
        """Whether a :meth:`transaction` block is open."""

    @abstractmethod
    def _begin(self) -> None:
        """Open a transaction: changes are staged from now on."""

    @abstractmethod
    def _discard(self) -> None:
        """Drop the open transaction's staged changes."""

    @abstractmethod
    def _finish(self, metadata: dict | None) -> None:
        """Commit the open transaction's staged changes (and metadata) as one batch."""

    @abstractmethod
    def metadata(self) -> dict:
        """The metadata committed with the latest batch that carried some ({} if none)."""

    @abstractmethod
    def expire(self) -> int:
        """Delete rows whose time-to-live has passed, as one batch; how many expired."""

    # ------------------------------------------------------------ catalog and views
    @abstractmethod
    def create_view(self, name: str, sql: str, strategy: str | None = None,
                    provenance: str | None = None) -> ViewHandle:
        """``CREATE MATERIALIZED VIEW name AS sql``, optionally forcing a strategy;
        ``provenance="why"`` keeps the view's why-provenance (``db.why``)."""

    @abstractmethod
    def view(self, name: str) -> ViewHandle:
        """The handle of a view (SchemaError if there is none)."""

    @abstractmethod
    def views(self) -> list[str]:
        """The user views, in definition order."""

    @abstractmethod
    def tables(self) -> list[str]:
        """The base tables, in definition order."""

    @abstractmethod
    def schema_of(self, name: str) -> list[tuple[str, SqlType]]:
        """A table's or view's columns with their types, named in lower case (names are
        matched regardless of case, as DuckDB matches them)."""

    @abstractmethod
    def display_schema_of(self, name: str) -> list[tuple[str, SqlType]]:
        """:meth:`schema_of` with the column names as the user wrote them, and as DuckDB
        names a view's columns: what results show."""

    @abstractmethod
    def explain(self, name: str) -> str:
        """A view's strategy, query class and plan, in words."""

    @abstractmethod
    def why(self, view: str, row: tuple):
        """Why ``row`` is in ``view``: its provenance over base rows."""

    # ------------------------------------------------------------ update provenance
    # Provenance tables (``WITH (provenance = 'update')``) and what-if over transactions,
    # ``papers/update-provenance-hyperplane-transactions.txt``; engines without them say so.
    def _no_update_provenance(self) -> UnsupportedError:
        return UnsupportedError(f"update provenance on the {self.name} engine: provenance "
                                "tables are kept by the local engine only")

    def has_update_provenance(self, table: str) -> bool:
        """Whether ``table`` keeps update provenance."""
        return False

    def provenance(self, table: str, row: tuple):
        """The UP[X] annotation of ``row`` in a provenance table, in normal form (printable;
        ``.as_tuple()`` gives it as nested tuples); ``0`` for a row never in the table."""
        raise self._no_update_provenance()

    def transactions(self) -> dict[int, dict]:
        """Committed transactions that changed provenance tables: id -> metadata."""
        raise self._no_update_provenance()

    def what_if(self, name: str, abort: Iterable[int] = (),
                without: Iterable[tuple[str, tuple]] = ()) -> WhatIf:
        """The table or view ``name`` in the world where the transactions ``abort`` had not
        run and the input rows ``without`` (``(table, row)``) had never been loaded.  Only
        provenance tables' changes are taken back: what an aborted transaction did to
        ordinary tables stays (docs/design.md, "Update provenance: what-if over
        transactions")."""
        raise self._no_update_provenance()

    def visible(self, name: str, principal: str,
                grants: dict[str, Iterable[str]] | None = None) -> WhatIf:
        """The table or view ``name`` as ``principal`` may see it: rows derived only from
        transactions whose metadata ``principals`` include it (all, where absent)."""
        raise self._no_update_provenance()

    def trusted(self, name: str, threshold: float,
                scores: dict[str, float] | None = None) -> WhatIf:
        """The table or view ``name`` keeping the rows certified at ``threshold`` from the
        transactions' metadata ``trust`` scores (certified, where absent)."""
        raise self._no_update_provenance()

    def specialise(self, name: str, structure, valuation: Callable[[str], object]) -> WhatIf:
        """The table or view ``name`` over the rows whose annotation ``structure`` (an
        :class:`~upkeep.update_provenance.UpdateStructure`) accepts under ``valuation``."""
        raise self._no_update_provenance()

    @abstractmethod
    def checkpoint(self) -> None:
        """Make recovery start from the current state (no-op where nothing is kept)."""

    @abstractmethod
    def close(self) -> None:
        """Release the database."""

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def database_directory(database: str) -> str:
    """A database is a local (or mounted) directory: a local ``file:`` URI names one; any
    other URI (``hdfs://``, ``s3a://``, ...) is refused, where it would have made a local
    directory of that name (``s3a:/bucket/...``) and kept the data there."""
    path = local_file(database)
    if path is not None:
        return path
    if is_uri(database):
        raise UnsupportedError(
            f"database {database} is a URI: a database is a local or mounted directory; "
            f"Hadoop file systems hold a Spark pipeline's source, state_dir and sinks "
            f"(docs/spark.md, \"Where sinks live\")")
    return database


def check_subscriber(fn: object) -> None:
    """A subscriber must be callable: refused when it subscribes, not at every commit."""
    if not callable(fn):
        raise SchemaError(f"a subscriber must be callable (changes -> None), not "
                          f"{type(fn).__name__}")


def _one_values_row(stmt: exp.Expression) -> bool:
    """``INSERT INTO t [(cols)] VALUES (..)``: one row of values."""
    values = stmt.expression if isinstance(stmt, exp.Insert) else None
    return isinstance(values, exp.Values) and len(values.expressions) == 1


def _positional(parameters):
    """``parameters`` for one statement's ``?`` placeholders: a sequence (a mapping's
    keys would bind silently in its place)."""
    if isinstance(parameters, (str, bytes, Mapping)) or not isinstance(parameters, Iterable):
        raise SchemaError(f"parameters must be a sequence of values for the statement's "
                          f"placeholders, not {type(parameters).__name__}")
    return parameters


@dataclass
class WhatIf:
    """A table or view in a hypothetical world: ``changes`` against the real contents
    (``(row, weight)``, what a what-if computes) and ``rows``, the hypothetical contents
    with duplicates repeated, built from ``real`` (the real contents, row -> count) only
    when read."""

    name: str
    changes: list[tuple[tuple, int]]
    real: Callable[[], dict[tuple, int]] = field(repr=False)

    @cached_property
    def rows(self) -> list[tuple]:
        rows = self.real()
        for row, w in self.changes:
            n = rows.get(row, 0) + w
            if n:
                rows[row] = n
            else:
                rows.pop(row, None)
        return [r for r, n in rows.items() for _ in range(n)]

    @property
    def added(self) -> list[tuple]:
        return [r for r, w in self.changes if w > 0 for _ in range(w)]

    @property
    def removed(self) -> list[tuple]:
        return [r for r, w in self.changes if w < 0 for _ in range(-w)]


@dataclass(eq=False, slots=True)
class Subscription:
    """A view's subscriber and the last batch committed when it subscribed: it starts from
    the view's rows then, so it is told only of later batches (one attached while batches
    are being told must not hear of those its first rows hold)."""

    fn: Subscriber
    since: int


def deliver(subscribers: dict[str, list[Subscriber | Subscription]],
            changed: dict[str, Changes],
            batch: int | None = None) -> None:
    """Call each view's subscribers with its committed changes (those of ``batch``, the
    number a :class:`Subscription` counts ``since`` in: the batch on the local engine, the
    delivery on Spark; one made since is left out).  The batch is committed already, so a
    subscriber that raises is reported as a warning, not undone, and the other
    subscribers still get their changes (the same on every engine); each subscriber gets
    a list of its own."""
    interrupted: BaseException | None = None  # KeyboardInterrupt, SystemExit: after all
    for name, changes in changed.items():
        told = list(dict.get(subscribers, name, ()))
        for fn in told:
            if isinstance(fn, Subscription):
                if batch is not None and fn.since >= batch:
                    continue
                fn = fn.fn
            try:  # each its own list: one that edits its own must not change the others'
                fn(changes if len(told) == 1 else list(changes))
            except Exception as exc:
                warnings.warn(f"subscriber of view {name} raised {exc!r}", stacklevel=3)
            except BaseException as exc:
                interrupted = interrupted or exc
    if interrupted is not None:
        raise interrupted


#: where the Spark engine keeps views' state (``connect(engine="spark", state=...)``, a
#: pipeline's ``[spark] state``): Spark's keyed state, the default, or shard servers
SPARK_STATES = ("keyed", "shards")
SPARK_DEFAULT_STATE = SPARK_STATES[0]

#: engine name -> "module:factory"; the factory takes connect()'s arguments.
ENGINES: dict[str, str] = {
    "local": "upkeep.local.connection:open_local",
    "spark": "upkeep.spark.connection:open_spark",
}


def register_engine(name: str, factory: str) -> None:
    """Make ``connect(engine=name)`` open ``factory`` ("package.module:function")."""
    ENGINES[name] = factory


class Transaction:
    """The block :meth:`Engine.transaction` returns: entered once (a generator's context
    manager cannot run twice and would fail with Python's own AttributeError)."""

    __slots__ = ("_block", "_entered")

    def __init__(self, block: AbstractContextManager[Engine]):
        self._block, self._entered = block, False

    def __enter__(self) -> Engine:
        if self._entered:
            raise Error("this transaction block was entered already: each `with` needs its "
                        "own db.transaction()")
        self._entered = True
        return self._block.__enter__()

    def __exit__(self, kind, error, trace) -> bool | None:
        return self._block.__exit__(kind, error, trace)


def connect(database: str | os.PathLike = ":memory:", *, engine: str = "local",
            **options) -> Engine:
    """Open an engine: in memory (the default), or durable in the directory ``database``.

    Options for every engine: ``bdd_ordering`` ("sifting", "dfs" or "arrival": the
    variable order of recursive views' provenance BDDs), ``clock`` (seconds, default
    ``time.time``; times the expiry of tables declared ``WITH (ttl_seconds = N)``).

    Local engine: ``fsync`` (default True: every committed batch is fsynced before the
    commit returns), ``snapshot_bytes`` (snapshot the tables when the log passes this),
    ``fixpoint_partitions`` (> 1 runs recursive views' fixpoints over that many
    partitions in this process, counting tuples and bytes shipped between them).

    Spark engine (docs/spark.md): ``spark`` (a SparkSession) or ``master`` (default
    ``local[2]``), ``shards`` (partitions per view group in shards), ``state`` ("keyed", the
    default: views in Spark's keyed state; or "shards": every view in shard servers),
    ``commit_window`` (seconds a group commit waits for more threads' statements, default
    0); ``database`` is the working directory of change files and checkpoints.
    """
    if database is not None and not isinstance(database, (str, os.PathLike)):
        raise StorageError(f"database must be a directory path or ':memory:', not "
                           f"{type(database).__name__}")
    if database is not None and "\0" in os.fsdecode(database):
        raise StorageError(f"database path {os.fsdecode(database)!r} holds a NUL character, "
                           "which no file name may hold", path=os.fsdecode(database))
    target = ENGINES.get(engine)
    if target is None:
        raise UnsupportedError(f"unknown engine {engine!r} (one of {', '.join(ENGINES)})")
    if isinstance(database, str):
        database = database_directory(database)
    module, _, factory = target.partition(":")
    opened = getattr(importlib.import_module(module), factory)(database, **options)
    if not isinstance(opened, Engine):
        raise Error(f"engine {engine} did not open an upkeep Engine")
    return opened
