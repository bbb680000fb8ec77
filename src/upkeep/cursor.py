"""DB-API style cursors over a materialized result."""

from __future__ import annotations

import functools
from collections.abc import Iterator

import pyarrow as pa

from .codecs.arrow_values import to_arrow
from .errors import SchemaError
from .types import SqlType


class Cursor:
    """The result of :meth:`Connection.execute`: rows plus ``description``, like sqlite3/duckdb."""

    arraysize = 1

    def __init__(self, columns: list[tuple[str, SqlType]] | None = None,
                 rows: list[tuple] | None = None, rowcount: int = -1):
        self._columns = columns or []
        self._rows = rows or []
        self._pos = 0
        self.rowcount = rowcount if rowcount >= 0 else (len(self._rows) if columns else -1)

    @property
    def description(self) -> list[tuple] | None:
        if not self._columns:
            return None
        return [(name, typ.sql(), None, None, None, None, None) for name, typ in self._columns]

    def fetchone(self) -> tuple | None:
        if self._pos >= len(self._rows):
            return None
        row = self._rows[self._pos]
        self._pos += 1
        return row

    def fetchmany(self, size: int | None = None) -> list[tuple]:
        size = self.arraysize if size is None else size
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise SchemaError(f"fetchmany takes a number of rows (an integer >= 0), not "
                              f"{size!r}")
        out = self._rows[self._pos:self._pos + size]
        self._pos += len(out)
        return out

    def fetchall(self) -> list[tuple]:
        out = self._rows[self._pos:]
        self._pos = len(self._rows)
        return out

    def __iter__(self) -> Iterator[tuple]:
        while (row := self.fetchone()) is not None:
            yield row

    def arrow(self) -> pa.Table:
        """The remaining rows as a pyarrow Table with the result's column types."""
        return to_arrow(self._columns, self.fetchall())

    fetch_arrow_table = arrow

    def df(self):
        """The remaining rows as a pandas DataFrame, typed as DuckDB's ``df()`` types them:
        an integer or BOOLEAN column holding a NULL is of pandas' nullable type (``Int64``,
        ``boolean``), so its values stay exact (not floats with NaN); a HUGEINT column holds
        Python ints (exact, also beyond the 38 digits Arrow holds, where DuckDB's ``df()``
        gives floats); the other columns come through Arrow."""
        import pandas as pd

        rows = self.fetchall()
        huge = [i for i, (_, typ) in enumerate(self._columns) if typ.kind == "HUGEINT"]
        rest = [i for i in range(len(self._columns)) if i not in huge]
        table = to_arrow([self._columns[i] for i in rest],
                         [tuple(r[i] for i in rest) for r in rows] if huge else rows)
        frame = table.to_pandas()
        nullable = _nullable_dtypes()
        for j, column in enumerate(table.columns):
            if column.null_count and column.type in nullable:
                frame.isetitem(j, column.to_pandas(types_mapper=nullable.get))
        for i in huge:
            frame.insert(i, self._columns[i][0], pd.Series([r[i] for r in rows], dtype=object),
                         allow_duplicates=True)
        return frame

    fetchdf = df

    def close(self) -> None:
        self._rows = []


@functools.cache
def _nullable_dtypes() -> dict[pa.DataType, object]:
    """Arrow's integer and boolean types -> pandas' nullable dtypes of the same width."""
    import pandas as pd

    widths = {8: (pa.int8(), pa.uint8()), 16: (pa.int16(), pa.uint16()),
              32: (pa.int32(), pa.uint32()), 64: (pa.int64(), pa.uint64())}
    found: dict[pa.DataType, object] = {pa.bool_(): pd.BooleanDtype()}
    for bits, (signed, unsigned) in widths.items():
        found[signed] = getattr(pd, f"Int{bits}Dtype")()
        found[unsigned] = getattr(pd, f"UInt{bits}Dtype")()
    return found
