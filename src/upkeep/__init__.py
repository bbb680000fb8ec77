"""upkeep: SQL views kept fresh over changing data, without recomputation.

``upkeep.connect()`` opens an embedded engine; see README.md for a tour.
"""

from .connection import Connection, ViewHandle, connect
from .cursor import Cursor
from .errors import ConstraintError, Error, ParseError, SchemaError, UnsupportedError

__version__ = "0.1.0"

__all__ = [
    "Connection",
    "ConstraintError",
    "Cursor",
    "Error",
    "ParseError",
    "SchemaError",
    "UnsupportedError",
    "ViewHandle",
    "connect",
]
