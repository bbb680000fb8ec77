"""Counters of a pipeline run, shown live and in the summary."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class ViewStats:
    """Delta rows a view produced: in the last batch that changed it, and in total."""

    inserted: int = 0
    deleted: int = 0
    last_inserted: int = 0
    last_deleted: int = 0
    batches: int = 0

    def add(self, changes: list[tuple[tuple, int]]) -> None:
        plus = sum(w for _, w in changes if w > 0)
        minus = -sum(w for _, w in changes if w < 0)
        self.inserted += plus
        self.deleted += minus
        self.last_inserted, self.last_deleted = plus, minus
        self.batches += 1


@dataclass
class RunStats:
    """What a run did so far (this run only, except ``batch``: the last committed id)."""

    pipeline: str
    source: str
    state: str
    resumed_from: str | None = None
    read: int = 0
    applied: int = 0
    rejected: int = 0
    batches: int = 0
    batch: int = 0
    lag: int = 0
    caught_up: bool = False
    stopped: bool = False
    views: dict[str, ViewStats] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None

    @property
    def elapsed(self) -> float:
        return (self.finished or time.monotonic()) - self.started

    @property
    def rate(self) -> float:
        """Records per second (read, whether applied or rejected)."""
        return self.read / self.elapsed if self.elapsed > 0 else 0.0
