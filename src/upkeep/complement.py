"""Ordered key sets with interval counts, and counting-based complement iteration.

``lftj-incremental-maintenance.txt`` section 3.1.2: given ``S`` a subset of ``T``, both
kept with a 'count' scan over their keys, the complement ``T \\ S`` is empty on any key
interval where ``S`` and ``T`` hold the same number of keys.  Splitting ``T`` in halves and
skipping such intervals lists the complement with ``O(|T \\ S| log n)`` count queries instead
of the ``O(|T|)`` lookups of iterating ``T`` and probing ``S``.

A sorted list (``sortedcontainers``) serves as the scan tree: the count of keys in
``[k1, k2]`` is two bisections, ``O(log n)``.  SQL keys may hold NULL, which Python cannot
order against values, so keys are ordered by :func:`sort_key` (NULL first).
"""

from __future__ import annotations

from collections.abc import Iterator

from sortedcontainers import SortedKeyList


def sort_key(key: tuple) -> tuple:
    """A total order on key tuples whose fields may be NULL (``None`` sorts first) or NaN
    (after every number, as DuckDB orders it; NaN compares false both ways)."""
    return tuple((False, False, 0) if v is None else (True, True, 0) if v != v
                 else (True, False, v) for v in key)


class CountedKeys:
    """A set of key tuples in key order, counting the keys in any interval in O(log n)."""

    def __init__(self) -> None:
        self._keys = SortedKeyList(key=sort_key)

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[tuple]:
        return iter(self._keys)

    def __getitem__(self, position: int) -> tuple:
        """The key at ``position`` in key order (O(log n))."""
        return self._keys[position]

    def between_positions(self, start: int, stop: int) -> Iterator[tuple]:
        """The keys at positions ``start`` to ``stop - 1``, in key order."""
        return self._keys.islice(start, stop)

    def add(self, key: tuple) -> None:
        self._keys.add(key)

    def remove(self, key: tuple) -> None:
        self._keys.remove(key)

    def count_between(self, low: tuple, high: tuple) -> int:
        """Number of keys ``k`` with ``low <= k <= high`` (0 for an empty interval)."""
        keys = self._keys
        return max(keys.bisect_key_right(sort_key(high)) - keys.bisect_key_left(sort_key(low)), 0)


class ComplementScan:
    """Lists ``universe \\ subset`` (``subset`` must be a subset of ``universe``) by counting,
    and counts the interval-count queries it made (``count_queries``)."""

    def __init__(self, universe: CountedKeys, subset: CountedKeys) -> None:
        self.universe = universe
        self.subset = subset
        self.count_queries = 0

    def __iter__(self) -> Iterator[tuple]:
        keys = self.universe
        if not self.subset:
            yield from keys
            return
        stack = [(0, len(keys))]
        while stack:
            lo, hi = stack.pop()
            self.count_queries += 1
            covered = self.subset.count_between(keys[lo], keys[hi - 1])
            if covered == hi - lo:
                continue  # every key of the interval is in the subset
            if covered == 0 or hi - lo == 1:
                yield from keys.between_positions(lo, hi)
                continue
            mid = (lo + hi) // 2
            stack.append((mid, hi))
            stack.append((lo, mid))
