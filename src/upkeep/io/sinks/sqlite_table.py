"""The ``sqlite`` sink: a table in a SQLite database file kept equal to a view.

At start the table is dropped and refilled with the view's current rows (with an index on
all columns); after each batch that changes the view its delta is applied in one SQLite
transaction: one occurrence deleted per -1 row (``rowid ... LIMIT``, NULL-safe ``IS``
matching), one row inserted per +1.  Values: :mod:`upkeep.codecs.sqlite_values`.
"""

from __future__ import annotations

import sqlite3

from ...codecs.sqlite_values import sqlite_type, to_sqlite
from ...duckdb_scratch import quote
from ..errors import PipelineError
from .base import Changes, Sink


class SQLiteSink(Sink):
    """Keeps ``table`` in the SQLite file ``path`` equal to the view."""

    def start(self, batch: int) -> None:
        self.path = self.options["path"]
        name = self.options["table"]
        self.table = quote(name)
        cols = ", ".join(quote(n) for n in self.names)
        marks = ", ".join("?" for _ in self.names)
        self._insert_sql = f"INSERT INTO {self.table} ({cols}) VALUES ({marks})"
        match = " AND ".join(f"{quote(n)} IS ?" for n in self.names)
        # SQLite's row id by a name no column of the view hides (a column named rowid
        # takes that name over, and the delete picked every row holding its value)
        taken = {n.lower() for n in self.names}
        rowid = next((a for a in ("rowid", "_rowid_", "oid") if a not in taken), None)
        if rowid is None:
            raise PipelineError(f"sqlite sink {self.path}: view {self.view.name} has columns "
                                f"named rowid, _rowid_ and oid, which hide SQLite's row ids "
                                f"the sink deletes by: rename one in the view (AS ...)")
        self._delete_sql = (f"DELETE FROM {self.table} WHERE {rowid} IN (SELECT {rowid} FROM "
                            f"{self.table} WHERE {match} LIMIT ?)")
        columns = ", ".join(f"{quote(n)} {sqlite_type(t)}".rstrip() for n, t in self.columns)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.con = sqlite3.connect(str(self.path), isolation_level=None)
            self._transaction([f"DROP TABLE IF EXISTS {self.table}",
                               f"CREATE TABLE {self.table} ({columns})",
                               f"CREATE INDEX {quote(name + '__upkeep_rows')} ON "
                               f"{self.table} ({cols})"],
                              self.view.rows(), [])
        except (sqlite3.Error, OSError) as exc:
            raise PipelineError(f"sqlite sink {self.path}: {exc}") from None

    @property
    def label(self) -> str:
        return f"sqlite {self.path} table {self.options['table']}"

    def deliver(self, changes: Changes, batch: int) -> None:
        inserts = [row for row, w in changes if w > 0 for _ in range(w)]
        deletes = [(row, -w) for row, w in changes if w < 0]
        try:
            self._transaction([], inserts, deletes)
        except sqlite3.Error as exc:
            raise PipelineError(f"sqlite sink {self.path}: {exc}") from None

    def _transaction(self, statements: list[str], inserts: list[tuple],
                     deletes: list[tuple[tuple, int]]) -> None:
        con = self.con
        con.execute("BEGIN")
        try:
            for sql in statements:
                con.execute(sql)
            for row, n in deletes:
                cur = con.execute(self._delete_sql, [*map(to_sqlite, row), n])
                if cur.rowcount != n:
                    raise PipelineError(
                        f"sqlite sink {self.path}: table {self.options['table']} is out of step "
                        f"with view {self.view.name} (row {row!r} not found); was it changed by "
                        f"someone else? Restart the pipeline to rebuild it")
            if inserts:
                con.executemany(self._insert_sql, [list(map(to_sqlite, r)) for r in inserts])
            con.execute("COMMIT")
        except BaseException:
            try:
                con.execute("ROLLBACK")
            except sqlite3.Error:  # the interruption came after COMMIT ended it: nothing to undo
                pass
            raise

    def close(self) -> None:
        if hasattr(self, "con"):
            self.con.close()
