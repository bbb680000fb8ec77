"""Sinks: where a pipeline delivers its views (one module per kind of target)."""

from __future__ import annotations

from ...engine import Engine
from .base import Changes, Sink, SinkConfig
from .duckdb_table import DuckDBSink
from .jsonl import JsonlSink
from .parquet import ParquetSink
from .parquet_deltas import ParquetDeltasSink
from .sqlite_table import SQLiteSink
from .terminal import TerminalSink

SINKS: dict[str, type[Sink]] = {
    "terminal": TerminalSink,
    "jsonl": JsonlSink,
    "parquet": ParquetSink,
    "parquet-deltas": ParquetDeltasSink,
    "duckdb": DuckDBSink,
    "sqlite": SQLiteSink,
}


def make_sink(config: SinkConfig, db: Engine) -> Sink:
    """The sink ``config`` describes, for its view in ``db`` (not started yet)."""
    return SINKS[config.type](config, db.view(config.view),
                              list(db.display_schema_of(config.view)))


__all__ = ["SINKS", "Changes", "DuckDBSink", "JsonlSink", "ParquetDeltasSink", "ParquetSink",
           "SQLiteSink", "Sink", "TerminalSink", "make_sink"]
