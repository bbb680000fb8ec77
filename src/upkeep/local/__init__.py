"""The local (in-process) engine: see :mod:`upkeep.local.connection`."""

from .connection import Connection, ViewHandle, from_catalog, open_local

__all__ = ["Connection", "ViewHandle", "from_catalog", "open_local"]
