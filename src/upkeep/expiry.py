"""Time-to-live for base rows: soft state that expires by a clock.

``recursive-views-absorption-provenance.txt`` section III-A: a base tuple may carry a
timeout after which it is deleted, and everything derived from it must go too.  A table
declared ``WITH (ttl_seconds = N)`` keeps one timer per inserted copy of a row; a copy
expires N seconds after the commit that inserted it, and an expiry is an ordinary delete
batch, so every view (recursive ones by restricting provenance) follows.  Deleting a row
by hand removes the timer of its copy due soonest.  Timers are kept in order of due time,
not of commit: a clock that steps back (an NTP correction) makes a later commit due
sooner.
"""

from __future__ import annotations

from bisect import insort
from collections import deque


class Expiry:
    """The timers of one table, soonest due first."""

    def __init__(self, ttl: float):
        self.ttl = ttl
        self.timers: deque[tuple[float, tuple]] = deque()
        self.skip: dict[tuple, int] = {}  # copies deleted by hand whose timers are still queued

    def committed(self, delta: dict[tuple, int], now: float) -> None:
        """Record a committed batch's inserts and hand deletes of this table."""
        at = now + self.ttl
        for row, w in delta.items():
            if w < 0:
                self.skip[row] = self.skip.get(row, 0) - w
            elif not self.timers or self.timers[-1][0] <= at:
                self.timers.extend([(at, row)] * w)
            else:  # the clock stepped back: rare, so searches of the deque will do
                self._cancel_skipped(row)
                for _ in range(w):
                    insort(self.timers, (at, row), key=lambda timer: timer[0])

    def _cancel_skipped(self, row: tuple) -> None:
        """Remove the queued timers of ``row``'s copies deleted by hand before a timer
        due sooner than theirs joins them (the skip would take the newcomer's instead)."""
        left = self.skip.pop(row, 0)
        if left:
            kept = deque()
            for timer in self.timers:
                if left and timer[1] == row:
                    left -= 1
                else:
                    kept.append(timer)
            self.timers = kept

    def due(self, now: float) -> tuple[dict[tuple, int], int]:
        """The delete batch of copies due at ``now``, and how many timers it consumes
        (pass that to :meth:`expired` once the batch is committed)."""
        delta: dict[tuple, int] = {}
        skip = dict(self.skip)
        n = 0
        for at, row in self.timers:
            if at > now:
                break
            n += 1
            if skip.get(row, 0) > 0:
                skip[row] -= 1
                continue
            delta[row] = delta.get(row, 0) - 1
        return delta, n

    def expired(self, n: int) -> None:
        for _ in range(n):
            _, row = self.timers.popleft()
            left = self.skip.get(row, 0)
            if left > 0:
                if left == 1:
                    del self.skip[row]
                else:
                    self.skip[row] = left - 1

    def next_due(self) -> float | None:
        return self.timers[0][0] if self.timers else None

    def state(self) -> tuple[float, list[tuple[float, tuple]], dict[tuple, int]]:
        return self.ttl, list(self.timers), dict(self.skip)

    @classmethod
    def restore(cls, state: tuple[float, list, dict]) -> Expiry:
        ttl, timers, skip = state
        out = cls(ttl)
        out.timers.extend(timers)
        out.skip.update(skip)
        return out


def due_changes(expiries: dict[str, Expiry], now: float) -> tuple[dict[str, dict[tuple, int]],
                                                                 dict[str, int]]:
    """Every table's delete batch of copies due at ``now``, and how many timers each
    consumes (pass them to :meth:`Expiry.expired` once the batch is committed).  Both
    engines expire rows through this one function."""
    deltas: dict[str, dict[tuple, int]] = {}
    consumed: dict[str, int] = {}
    for name, expiry in expiries.items():
        due = expiry.next_due()
        if due is None or due > now:
            continue
        delta, consumed[name] = expiry.due(now)
        if delta:
            deltas[name] = delta
    return deltas, consumed
