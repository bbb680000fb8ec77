"""JSON-lines protocol between ``run.py`` and the runner subprocesses.

A runner prints one JSON object per line on stdout: ``{"type": "progress", "done",
"total"}`` while it works and exactly one ``{"type": "result", ...}`` at the end.
Anything else on stdout is ignored by the orchestrator.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any


def runner_args(description: str, systems: tuple[str, ...]) -> argparse.Namespace:
    """Command-line arguments shared by all runners."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--stream", type=Path, required=True, help="prepared stream directory")
    parser.add_argument("--query", required=True, help="query name from bench/tpch/queries.py")
    parser.add_argument("--system", choices=systems, default=systems[0])
    parser.add_argument("--batch", type=int, default=1000, help="batch size (DuckDB only)")
    return parser.parse_args()


class Emitter:
    """Writes progress and result messages, rate-limiting progress output."""

    def __init__(self, query: str, system: str, total: int) -> None:
        self.query = query
        self.system = system
        self.total = total
        self._last = 0.0

    def progress(self, done: int, force: bool = False) -> None:
        """Report ``done`` of ``total`` events (at most ~4 times per second)."""
        now = time.monotonic()
        if force or now - self._last >= 0.25:
            self._last = now
            _send({"type": "progress", "done": done, "total": self.total})

    def result(self, **fields: Any) -> None:
        """Report the final measurement."""
        _send({"type": "result", "query": self.query, "system": self.system, **fields})


def _send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def guarded(query: str, system: str, body: Callable[[], None]) -> None:
    """Run ``body``; on an exception report ``status="error"`` with the error text."""
    try:
        body()
    except Exception as exc:  # report any engine failure instead of crashing the suite
        tb = traceback.format_exc(limit=6)
        _send(
            {
                "type": "result",
                "query": query,
                "system": system,
                "status": "error",
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": tb,
            }
        )
