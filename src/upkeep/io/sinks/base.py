"""What every sink does: start from the view's rows, then take each committed batch's delta.

The runner subscribes :meth:`Sink.collect` to the view (it runs while the engine commits)
and calls :meth:`Sink.flush` with the batch id once the commit has returned, so a sink's
own I/O never runs inside the engine's commit.  :meth:`Sink.start` runs before the first
batch, with the view as the durable database recovered it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...engine import ViewHandle
from ...types import SqlType
from ...zset import Changes


@dataclass(frozen=True)
class SinkConfig:
    """One ``[[sinks]]`` entry: a view delivered somewhere."""

    view: str
    type: str
    label: str
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def path(self) -> Path | str | None:
        """A local path, or a URI (:func:`upkeep.io.locations.location`)."""
        return self.options.get("path")


class Sink(ABC):
    """Delivers one view's contents or deltas somewhere."""

    def __init__(self, config: SinkConfig, view: ViewHandle, columns: list[tuple[str, SqlType]]):
        self.config = config
        self.view = view
        self.columns = columns
        self.names = [n for n, _ in columns]
        self.options: dict[str, Any] = config.options
        self._pending: Changes = []

    @property
    def label(self) -> str:
        target = self.config.path or ""
        return f"{self.config.type} {target}".strip()

    @abstractmethod
    def start(self, batch: int) -> None:
        """Bring the target up to date with the view (``batch``: the last committed id)."""

    def collect(self, changes: Changes) -> None:
        """The view's delta of the batch being committed (called by the engine)."""
        self._pending.extend(changes)

    def flush(self, batch: int) -> None:
        """Deliver what :meth:`collect` gathered for the committed batch ``batch``."""
        pending, self._pending = self._pending, []
        net: dict[tuple, int] = {}
        for row, w in pending:
            net[row] = net.get(row, 0) + w
        changes = [(row, w) for row, w in net.items() if w]
        if changes:
            self.deliver(changes, batch)

    @abstractmethod
    def deliver(self, changes: Changes, batch: int) -> None:
        """Apply one committed batch's delta (net weights per row) to the target."""

    def close(self) -> None:
        """Finish writing and release the target."""
        return None

    def renderable(self) -> Any:
        """A rich renderable for the live display (only the terminal sink has one)."""
        return None
