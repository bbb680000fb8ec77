"""Values a row could not compute, held until the row joins something.

SQL computes an aggregate's argument and a computed GROUP BY value over the join's rows, so
a row whose ``CAST(s AS INTEGER)`` fails fails the view only while it joins a row of the
other relations.  Dynamic Yannakakis computes them earlier, with the row's leaf
(``Core.lifted_leaf``; section 6 of the dynamic Yannakakis paper lifts a row's aggregate
arguments into its weight at the leaf), so a failure there is kept instead of raised:

* a GROUP BY value that failed is a :class:`FailedValue`, a group key of its own;
* an argument that failed makes its channel's non-NULL count a :class:`FailedCount`,
  which adds and scales like the count it stands for, as the weight ring needs
  (``DualWeight``), and cancels back to a plain count when the failing row is deleted.

A group whose key or weight holds one is a row the view cannot compute: reading it
raises the failure (``views.GroupRows``), which rejects the batch that made the group.
:class:`LeafSalvage` computes a failing row's leaf value by value.  Rare: the normal path
pays only a ``try``.  DuckDB itself may compute such values before its joins (it
pre-aggregates below a join), so whether it raises on a row that joins nothing depends
on its plan; docs/sql.md says which semantics upkeep keeps.
"""

from __future__ import annotations

from collections.abc import Callable

from .errors import EvaluationError


class FailedValue:
    """A value a row could not compute: equal to another by its message, so that a row
    deleted later meets the key it was inserted under."""

    __slots__ = ("message",)

    def __init__(self, message: str):
        self.message = message

    def __eq__(self, other: object) -> bool:
        return type(other) is FailedValue and other.message == self.message

    def __hash__(self) -> int:
        return hash(("FailedValue", self.message))

    def __repr__(self) -> str:
        return f"FailedValue({self.message!r})"


class FailedCount:
    """A sum channel's non-NULL count ``n`` plus rows whose argument failed: their weights
    by message.  Adds to ints and to other FailedCounts, negates and scales by ints; a sum
    whose failures cancel is the plain int ``n`` again."""

    __slots__ = ("n", "failures")

    def __init__(self, n: int, failures: dict[str, int]):
        self.n = n
        self.failures = failures

    @staticmethod
    def of(n: int, failures: dict[str, int]) -> int | FailedCount:
        kept = {m: w for m, w in failures.items() if w}
        return FailedCount(n, kept) if kept else n

    def __add__(self, other: int | FailedCount) -> int | FailedCount:
        if type(other) is not FailedCount:
            return FailedCount(self.n + other, self.failures)
        merged = dict(self.failures)
        for message, w in other.failures.items():
            merged[message] = merged.get(message, 0) + w
        return FailedCount.of(self.n + other.n, merged)

    __radd__ = __add__

    def __neg__(self) -> FailedCount:
        return FailedCount(-self.n, {m: -w for m, w in self.failures.items()})

    def __sub__(self, other: int | FailedCount) -> int | FailedCount:
        return self + -other

    def __rsub__(self, other: int) -> int | FailedCount:
        return -self + other

    def __mul__(self, k: int) -> int | FailedCount:
        return FailedCount(self.n * k, {m: w * k for m, w in self.failures.items()}) if k else 0

    __rmul__ = __mul__

    def __bool__(self) -> bool:
        return True  # never zero: its failures are not

    def __eq__(self, other: object) -> bool:
        return (type(other) is FailedCount and other.n == self.n
                and other.failures == self.failures)

    def __hash__(self) -> int:
        return hash((self.n, frozenset(self.failures.items())))

    def __repr__(self) -> str:
        return f"FailedCount({self.n}, {self.failures})"

    def error(self) -> EvaluationError:
        return EvaluationError(min(self.failures))


def raise_held_failure(key: tuple, channels: tuple) -> None:
    """Raise the failure a group's key or weight holds, if any (``views.GroupRows``)."""
    for value in key:
        if type(value) is FailedValue:
            raise EvaluationError(value.message)
    for value in channels:
        if type(value) is FailedCount:
            raise value.error()


class LeafSalvage:
    """Atom's leaf and its aggregate arguments for a row whose leaf raised, computed value
    by value: ``row -> (leaf values..., arguments...)`` with a :class:`FailedValue` where
    one fails, or None where the atom's own conditions drop the row (a condition that
    fails raises: DuckDB filters a relation before its joins).  ``held`` sums the weights
    of the rows it salvaged with a failure: while nonzero, the view reads every group it
    changes (push mode), so that a failing row that comes to join is seen."""

    def __init__(self, keep: Callable[[tuple], tuple | None],
                 values: list[Callable[[tuple], object]]):
        self.keep = keep
        self.values = values
        self.held = 0

    def __call__(self, row: tuple, w: int) -> tuple | None:
        if self.keep(row) is None:
            return None
        out = []
        failed = False
        for value in self.values:
            try:
                out.append(value(row))
            except EvaluationError as exc:
                out.append(FailedValue(str(exc)))
                failed = True
        if failed:
            self.held += w
        return tuple(out)
