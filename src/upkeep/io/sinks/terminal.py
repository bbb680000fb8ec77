"""The ``terminal`` sink: the top rows of a view, as a live table on the terminal.

It keeps a copy of the view's rows (from the view at start, then each delta) and shows the
first ``limit`` rows in ``order_by`` order ("col [ASC|DESC], ...", NULLs last; by default
the rows in the order of their columns).  Without a terminal the table is printed once, in
the summary at the end.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from decimal import Decimal
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..errors import PipelineError
from .base import Changes, Sink


class TerminalSink(Sink):
    """Shows the top ``limit`` rows of a view."""

    def start(self, batch: int) -> None:
        self.limit = int(self.options.get("limit") or 10)
        self.order = self._parse_order(self.options.get("order_by"))
        self.rows: Counter[tuple] = Counter(self.view.rows())
        self.batch = batch
        self._top: list[tuple] | None = None

    @property
    def label(self) -> str:
        return "terminal"

    def _parse_order(self, text: str | None) -> list[tuple[int, bool]]:
        if not text:
            return [(i, False) for i in range(len(self.names))]
        out = []
        for part in text.split(","):
            words = part.split()
            if not words or len(words) > 2 or (len(words) == 2 and
                                               words[1].upper() not in ("ASC", "DESC")):
                raise PipelineError(f"{self.config.label}: key 'order_by' must look like "
                                    f"'column [ASC|DESC], ...', got {text!r}")
            name = words[0]
            if len(name) > 1 and name[0] == name[-1] == '"':  # a quoted name
                name = name[1:-1]
            lowered = [n.lower() for n in self.names]  # matched regardless of case
            if name.lower() not in lowered:
                raise PipelineError(f"{self.config.label}: order_by column {name!r} is not a "
                                    f"column of view {self.view.name} ({', '.join(self.names)})")
            out.append((lowered.index(name.lower()),
                        len(words) == 2 and words[1].upper() == "DESC"))
        return out

    def deliver(self, changes: Changes, batch: int) -> None:
        for row, w in changes:
            self.rows[row] += w
            if self.rows[row] <= 0:
                del self.rows[row]
        self.batch = batch
        self._top = None

    def top(self) -> list[tuple]:
        """The first ``limit`` rows in ``order_by`` order (duplicates repeated)."""
        if self._top is None:
            rows = list(self.rows.elements())
            for index, desc in reversed(self.order):  # stable sorts, last key first
                present = [r for r in rows if r[index] is not None]
                nulls = [r for r in rows if r[index] is None]
                present.sort(key=lambda r, i=index: r[i], reverse=desc)
                rows = present + nulls
            self._top = rows[:self.limit]
        return self._top

    def renderable(self) -> Group:
        total = sum(self.rows.values())
        title = Text.assemble((self.view.name, "bold"),
                              f": top {min(self.limit, total):,} of {total:,} rows")
        table = Table()
        for name, typ in self.columns:
            table.add_column(name, justify="right" if typ.is_numeric else "left")
        for row in self.top():
            table.add_row(*(Text(_format(v)) for v in row))
        return Group(title, table)


def _format(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, Decimal):
        return f"{value:,}"
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value)
