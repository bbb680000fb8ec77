"""Arrow copies of tables and views, kept between ad-hoc queries while they do not change.

An ad-hoc SELECT is evaluated by DuckDB over the relations it reads, handed over as Arrow
(:func:`upkeep.views.query_duckdb`).  Building that Arrow table from a table's rows costs
about a microsecond a row (~110 ms for 100,000 rows), each query; DuckDB then scans it in
a millisecond.  A table's copy is kept, keyed by the table and its version
(:attr:`upkeep.table.Table.version`, bumped by every change applied), and a view's by its
runtime and the database's batch count (views change only when a batch commits), so that
queries between changes reuse them.  The copies held are bounded in bytes, least recently used
first out.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable

import pyarrow as pa

from ..table import Table
from ..types import SqlType
from ..views import duckdb_arrow

Columns = list[tuple[str, SqlType]]

#: the bytes of Arrow copies kept at most, over all relations
BUDGET_BYTES = 256 * 2**20


class ArrowSnapshots:
    """The latest Arrow copy of recently queried relations, within :data:`BUDGET_BYTES`."""

    def __init__(self, budget: int = BUDGET_BYTES) -> None:
        self.budget = budget
        self._kept: OrderedDict[str, tuple[object, int, pa.Table]] = OrderedDict()
        self.built = 0  # copies built (for tests: a reuse builds none)

    def of(self, table: Table) -> tuple[Columns, pa.Table]:
        """``table``'s columns and rows as Arrow (:meth:`kept`)."""
        return self.kept(table.name, table, table.version, table.columns, table.rows.items)

    def kept(self, name: str, owner: object, version: int, columns: Columns,
             weighted_rows: Callable[[], Iterable[tuple[tuple, int]]]
             ) -> tuple[Columns, pa.Table]:
        """Relation ``name``'s columns and rows as DuckDB is handed them
        (:func:`upkeep.views.duckdb_arrow`): the copy kept for the same ``owner`` (a table,
        or a view's runtime) at the same ``version``, else one built from ``weighted_rows``
        and kept."""
        kept = self._kept.get(name)
        if kept is not None and kept[0] is owner and kept[1] == version:
            self._kept.move_to_end(name)
            return columns, kept[2]
        copy = duckdb_arrow(columns, [r for r, w in weighted_rows() for _ in range(w)])
        self.built += 1
        self._kept.pop(name, None)
        if copy.nbytes <= self.budget:
            self._kept[name] = (owner, version, copy)
            while sum(entry[2].nbytes for entry in self._kept.values()) > self.budget:
                self._kept.popitem(last=False)
        return columns, copy
