"""One exception family for everything a user can get wrong (docs/design.md, "Errors").

Every error says where: the SQL position (line/column) for statements, the table and
row (and its index in the batch) for data.  A statement or batch that raises leaves
every table and view exactly as it was before.
"""

from __future__ import annotations


class Error(Exception):
    """Base class of every error upkeep raises on purpose."""


class ParseError(Error):
    """The SQL text could not be parsed; carries ``line`` and ``column``."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        where = f" (line {line}, column {column})" if line is not None else ""
        super().__init__(message + where)
        self.line = line
        self.column = column


class UnsupportedError(Error):
    """The SQL is valid but uses a construct upkeep cannot maintain or evaluate."""


class SchemaError(Error):
    """Unknown table/column, or a row of the wrong shape or type; names the row at fault."""

    def __init__(self, message: str, row: object = None, index: int | None = None):
        super().__init__(message)
        self.row = row
        self.index = index


class ConstraintError(Error):
    """A change that cannot be applied, e.g. deleting a row that is not present."""

    def __init__(self, message: str, row: object = None, index: int | None = None):
        super().__init__(message)
        self.row = row
        self.index = index
