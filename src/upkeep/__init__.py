"""upkeep: SQL views kept fresh over changing data, without recomputation.

``upkeep.connect()`` opens an engine (the embedded one by default); see README.md for a
tour and docs/design.md for the layers.
"""

from .compiled import check_compiled

check_compiled()

from .cursor import Cursor
from .engine import Engine, ViewHandle, connect, register_engine
from .errors import (
    ConstraintError,
    Error,
    EvaluationError,
    ParseError,
    SchemaError,
    UnsupportedError,
)
from .local import Connection
from .storage import DamagedStorageError, StorageError, StorageWarning

__version__ = "0.1.0"

__all__ = [
    "Connection",
    "ConstraintError",
    "Cursor",
    "DamagedStorageError",
    "Engine",
    "Error",
    "EvaluationError",
    "ParseError",
    "SchemaError",
    "StorageError",
    "StorageWarning",
    "UnsupportedError",
    "ViewHandle",
    "connect",
    "register_engine",
]
