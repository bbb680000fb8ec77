"""The ``duckdb`` sink: a table in a DuckDB database file kept equal to a view.

At start the table is replaced by the view's current rows; after each batch that changes
the view its delta is applied in one DuckDB transaction: one occurrence deleted per -1 row
(matched on all columns, NULL-safe), one row inserted per +1.  Other tables in the file are
left alone, so several sinks (and your own tables) can share one file.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa

from ...codecs.arrow_values import to_arrow
from ...duckdb_scratch import quote
from ...errors import SchemaError
from ...types import VARCHAR
from ..errors import PipelineError
from .base import Changes, Sink

_DELTA = "__upkeep_delta"


class DuckDBSink(Sink):
    """Keeps ``table`` in the DuckDB file ``path`` equal to the view."""

    def start(self, batch: int) -> None:
        self.path = self.options["path"]
        self.table = quote(self.options["table"])
        if any(n.lower() == "rowid" for n, _ in self.columns):
            raise PipelineError(f"duckdb sink {self.path}: view {self.view.name} has a column "
                                f"named rowid, which hides DuckDB's row ids the sink deletes "
                                f"by: rename it in the view (AS ...)")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.con = duckdb.connect(str(self.path))
            columns = ", ".join(f"{quote(n)} {t.sql()}" for n, t in self.columns)
            self._transaction([f"CREATE OR REPLACE TABLE {self.table} ({columns})"],
                              self.view.rows(), [])
        except (duckdb.Error, OSError) as exc:
            raise PipelineError(f"duckdb sink {self.path}: {exc}") from None

    @property
    def label(self) -> str:
        return f"duckdb {self.path} table {self.options['table']}"

    def deliver(self, changes: Changes, batch: int) -> None:
        inserts = [row for row, w in changes if w > 0 for _ in range(w)]
        deletes = [(row, -w) for row, w in changes if w < 0]
        try:
            self._transaction([], inserts, deletes)
        except duckdb.Error as exc:
            raise PipelineError(f"duckdb sink {self.path}: {exc}") from None

    def _arrow(self, rows: list[tuple], extra: dict[str, list[int]] | None = None) -> pa.Table:
        """The rows as Arrow; HUGEINT columns as text (Arrow's decimal128 holds 38 digits,
        a HUGEINT 39), cast back by :meth:`_value`."""
        columns = self.columns
        huge = {k for k, (_, t) in enumerate(columns) if t.kind == "HUGEINT"}
        if huge:
            columns = [(n, VARCHAR if t.kind == "HUGEINT" else t) for n, t in columns]
            rows = [tuple(str(v) if k in huge and v is not None else v
                          for k, v in enumerate(r)) for r in rows]
        try:
            return to_arrow(columns, rows, extra)
        except SchemaError as exc:
            raise PipelineError(f"duckdb sink {self.path} (view {self.view.name}): {exc} "
                                f"as the engine reports it") from None

    def _value(self, name: str, relation: str) -> str:
        """Column ``name`` of the registered delta, of the view's type (see :meth:`_arrow`)."""
        column = f"{relation}.{quote(name)}"
        huge = dict(self.columns)[name].kind == "HUGEINT"
        return f"CAST({column} AS HUGEINT)" if huge else column

    def _transaction(self, statements: list[str], inserts: list[tuple],
                     deletes: list[tuple[tuple, int]]) -> None:
        con = self.con
        con.execute("BEGIN TRANSACTION")
        try:
            for sql in statements:
                con.execute(sql)
            if deletes:
                self._delete(deletes)
            if inserts:
                con.register(_DELTA, self._arrow(inserts))
                try:
                    cols = ", ".join(quote(n) for n in self.names)
                    values = ", ".join(self._value(n, _DELTA) for n in self.names)
                    con.execute(f"INSERT INTO {self.table} ({cols}) SELECT {values} "
                                f"FROM {_DELTA}")
                finally:
                    con.unregister(_DELTA)
            con.execute("COMMIT")
        except BaseException:
            try:
                con.execute("ROLLBACK")
            except duckdb.Error:  # the interruption came after COMMIT ended it: nothing to undo
                pass
            raise

    def _delete(self, deletes: list[tuple[tuple, int]]) -> None:
        rows = [row for row, _ in deletes]
        counts = [n for _, n in deletes]
        self.con.register(_DELTA, self._arrow(rows, {"__upkeep_n": counts,
                                                     "__upkeep_k": list(range(len(rows)))}))
        try:
            match = " AND ".join(f"t.{quote(n)} IS NOT DISTINCT FROM {self._value(n, 'd')}"
                                 for n in self.names)
            (deleted,) = self.con.execute(
                f"DELETE FROM {self.table} WHERE rowid IN (SELECT rid FROM ("
                f"SELECT t.rowid AS rid, d.__upkeep_n AS n, row_number() OVER ("
                f"PARTITION BY d.__upkeep_k ORDER BY t.rowid) AS rn "
                f"FROM {self.table} AS t JOIN {_DELTA} AS d ON {match}) WHERE rn <= n)"
            ).fetchone()
        finally:
            self.con.unregister(_DELTA)
        if deleted != sum(counts):
            raise PipelineError(
                f"duckdb sink {self.path}: table {self.options['table']} is out of step with "
                f"view {self.view.name} (deleted {deleted} of {sum(counts)} rows); was it "
                f"changed by someone else? Restart the pipeline to rebuild it")

    def close(self) -> None:
        if hasattr(self, "con"):
            self.con.close()
