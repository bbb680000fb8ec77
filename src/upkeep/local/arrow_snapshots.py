"""Arrow copies of tables, kept between ad-hoc queries while the tables do not change.

An ad-hoc SELECT is evaluated by DuckDB over the relations it reads, handed over as Arrow
(:func:`upkeep.views.query_duckdb`).  Building that Arrow table from a table's rows costs
about a microsecond a row (~110 ms for 100,000 rows), each query; DuckDB then scans it in
a millisecond.  A table's copy is kept, keyed by the table and its version
(:attr:`upkeep.table.Table.version`, bumped by every change applied), so that queries
between changes reuse it.  The copies held are bounded in bytes, least recently used
first out.
"""

from __future__ import annotations

from collections import OrderedDict

import pyarrow as pa

from ..codecs.arrow_values import to_arrow
from ..table import Table

#: the bytes of Arrow copies kept at most, over all tables
BUDGET_BYTES = 256 * 2**20


class ArrowSnapshots:
    """The latest Arrow copy of recently queried tables, within :data:`BUDGET_BYTES`."""

    def __init__(self, budget: int = BUDGET_BYTES) -> None:
        self.budget = budget
        self._kept: OrderedDict[str, tuple[Table, int, pa.Table]] = OrderedDict()
        self.built = 0  # copies built (for tests: a reuse builds none)

    def of(self, table: Table) -> pa.Table | None:
        """``table``'s rows as Arrow, built now or kept from an earlier query at the same
        version; None for a table with a HUGEINT column (handed over as text, cast back:
        :func:`upkeep.views.register`)."""
        if any(t.kind == "HUGEINT" for _, t in table.columns):
            return None
        kept = self._kept.get(table.name)
        if kept is not None and kept[0] is table and kept[1] == table.version:
            self._kept.move_to_end(table.name)
            return kept[2]
        rows = [r for r, w in table.rows.items() for _ in range(w)]
        copy = to_arrow(table.columns, rows)
        self.built += 1
        self._kept.pop(table.name, None)
        if copy.nbytes <= self.budget:
            self._kept[table.name] = (table, table.version, copy)
            while sum(entry[2].nbytes for entry in self._kept.values()) > self.budget:
                self._kept.popitem(last=False)
        return copy
