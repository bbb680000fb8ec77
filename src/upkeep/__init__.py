"""upkeep: SQL views kept fresh over changing data, without recomputation.

``upkeep.connect()`` opens an engine (the embedded one by default); see README.md for a
tour and docs/design.md for the layers.

The engine, the embedded connection and the cursor are imported on first use: Spark's
Python workers import this package to run keyed steps, and start one process per keyed
level at each query start; the embedded engine's modules cost each about 0.4 s of CPU.
"""

from .compiled import check_compiled

check_compiled()

from typing import TYPE_CHECKING

from .errors import (
    ConstraintError,
    DuplicateKeyError,
    Error,
    EvaluationError,
    ParseError,
    ProvenanceError,
    RecursionLimit,
    SchemaError,
    StatementTimeout,
    StrategyError,
    UnsupportedError,
)
from .storage import DamagedStorageError, StorageError, StorageWarning

if TYPE_CHECKING:
    from .cursor import Cursor
    from .engine import Engine, ViewHandle, connect, register_engine
    from .local import Connection

__version__ = "0.1.0"

__all__ = [
    "Connection",
    "ConstraintError",
    "Cursor",
    "DamagedStorageError",
    "DuplicateKeyError",
    "Engine",
    "Error",
    "EvaluationError",
    "ParseError",
    "ProvenanceError",
    "RecursionLimit",
    "SchemaError",
    "StatementTimeout",
    "StorageError",
    "StrategyError",
    "StorageWarning",
    "UnsupportedError",
    "ViewHandle",
    "connect",
    "register_engine",
]

_ON_FIRST_USE = {"Cursor": "cursor", "Engine": "engine", "ViewHandle": "engine",
                 "connect": "engine", "register_engine": "engine", "Connection": "local"}


def __getattr__(name: str):
    if name in _ON_FIRST_USE:
        from importlib import import_module

        value = getattr(import_module(f".{_ON_FIRST_USE[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
