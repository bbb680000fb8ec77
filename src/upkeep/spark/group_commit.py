"""Group commit: statements committed close together by several threads share one
micro-batch, each still atomic.

A micro-batch on Spark costs about a second whatever it holds, so committing every
autocommitted statement alone caps a connection shared by many writers at about one
statement per second.  Here the first thread to commit becomes the *leader*: it waits
``window`` seconds (default 0: none), takes every statement queued by then (its own first)
and commits them together; the others wait for the outcome of their own statement.
Statements arriving while a group is being committed form the next group.  The leader's
``commit`` callback gets the group's units in arrival order and returns each unit's error
(or None): it commits them as one batch and, if that batch is rejected, each alone, so
one bad statement fails only itself.  A statement returns only once its batch is
committed (or raises its own error): nothing acknowledged is lost.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

Unit = TypeVar("Unit")


@dataclass
class _Ticket(Generic[Unit]):
    unit: Unit
    done: bool = False
    error: BaseException | None = None


class GroupCommit(Generic[Unit]):
    """Leader / follower group commit over ``commit(units) -> [error or None per unit]``."""

    def __init__(self, commit: Callable[[list[Unit]], list[BaseException | None]],
                 window: float = 0.0):
        if window < 0:
            raise ValueError(f"commit window must be >= 0 seconds, not {window}")
        self.commit = commit
        self.window = window
        self._queue: list[_Ticket[Unit]] = []
        self._leading = False
        self._changed = threading.Condition()

    def submit(self, unit: Unit) -> None:
        """Commit ``unit`` in the next group; returns once it is committed, or raises the
        error that rejected it."""
        ticket = _Ticket(unit)
        with self._changed:
            self._queue.append(ticket)
            while self._leading and not ticket.done:
                self._changed.wait()
            if not ticket.done:
                self._leading = True
        if not ticket.done:
            self._lead(ticket)
        if ticket.error is not None:
            raise ticket.error

    def _lead(self, own: _Ticket[Unit]) -> None:
        """Commit the queued group, then hand leadership to whoever is still waiting."""
        try:
            if self.window:
                try:
                    time.sleep(self.window)
                except BaseException:  # interrupted: its own statement is not committed
                    with self._changed:
                        self._queue.remove(own)
                    raise
            with self._changed:
                group, self._queue = self._queue, []
            try:
                errors = self.commit([t.unit for t in group])
            except BaseException as exc:  # nothing of the group was committed
                errors = [exc] * len(group)
            for ticket, error in zip(group, errors, strict=True):
                ticket.error, ticket.done = error, True
        finally:
            with self._changed:
                self._leading = False
                self._changed.notify_all()
