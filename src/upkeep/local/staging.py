"""Changes staged inside an open transaction, checked as they arrive.

Each statement's change is checked against the committed table plus what is staged
before it (a delete must find its row, a key must stay unique, NOT NULL holds) and then
merged in, touching only the rows and keys that change: staging n rows costs O(n)
whatever the number of calls that bring them (``rows_examined`` counts the work).
A change that fails its check stages nothing.
"""

from __future__ import annotations

from ..errors import ConstraintError
from ..table import Table
from ..types import format_row
from ..zset import Delta


class Staging:
    """The open transaction's net change per table, and per keyed table its key counts."""

    def __init__(self) -> None:
        self.deltas: dict[str, Delta] = {}
        self._keys: dict[str, dict[tuple, int]] = {}
        self.rows_examined = 0

    def of(self, table: str) -> Delta | None:
        return self.deltas.get(table)

    def stage(self, table: Table, delta: Delta) -> None:
        """Check ``delta`` against the table as staged so far, then merge it in."""
        pending = self.deltas.setdefault(table.name, {})
        merged: Delta = {}
        for row, w in delta.items():
            merged[row] = pending.get(row, 0) + w
        self.rows_examined += len(delta)
        for row, w in merged.items():
            if w > 0:
                for i in table.not_null:
                    if row[i] is None:
                        raise ConstraintError(
                            f"NULL in NOT NULL column {table.columns[i][0]} of table "
                            f"{table.name}: {format_row(row)}", row)
            elif table.rows.get(row, 0) + w < 0:
                raise ConstraintError(
                    f"cannot delete row {format_row(row)} from table {table.name}: it is not "
                    f"present (present {table.rows.get(row, 0)} time(s), deleting {-w})", row)
        keys = None
        if table.key is not None:
            keys = self._keys.setdefault(table.name, {})
            touched: dict[tuple, int] = {}
            for row, w in delta.items():
                k = tuple(row[i] for i in table.key)
                touched[k] = touched.get(k, keys.get(k, 0)) + w
            for k, w in touched.items():
                if table.keys.get(k, 0) + w > 1:
                    raise ConstraintError(
                        f"duplicate primary key {format_row(k)} in table {table.name}", k)
            keys.update(touched)
        for row, w in merged.items():
            if w:
                pending[row] = w
            else:
                pending.pop(row, None)
