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
    """A sum channel's non-NULL count ``n`` plus the weight ``failed`` of rows whose
    argument failed, and one of their messages.  Adds to ints and to other FailedCounts,
    negates and scales by ints, each in constant time (a join key that many failing rows
    share sums them all); a sum whose failures cancel is the plain int ``n`` again.  The
    message is a failure's that was added, perhaps one deleted since: the error raised
    names one still held (:func:`raise_held_failure`)."""

    __slots__ = ("n", "failed", "message")

    def __init__(self, n: int, failed: int, message: str):
        self.n = n
        self.failed = failed
        self.message = message

    def __add__(self, other: int | FailedCount) -> int | FailedCount:
        if type(other) is not FailedCount:
            return FailedCount(self.n + other, self.failed, self.message)
        failed = self.failed + other.failed
        n = self.n + other.n
        return FailedCount(n, failed, self.message) if failed else n

    __radd__ = __add__

    def __neg__(self) -> FailedCount:
        return FailedCount(-self.n, -self.failed, self.message)

    def __sub__(self, other: int | FailedCount) -> int | FailedCount:
        return self + -other

    def __rsub__(self, other: int) -> int | FailedCount:
        return -self + other

    def __mul__(self, k: int) -> int | FailedCount:
        return FailedCount(self.n * k, self.failed * k, self.message) if k else 0

    __rmul__ = __mul__

    def __bool__(self) -> bool:
        return True  # never zero: its failures are not

    def __eq__(self, other: object) -> bool:
        return (type(other) is FailedCount and other.n == self.n
                and other.failed == self.failed)

    def __hash__(self) -> int:
        return hash((self.n, self.failed))

    def __repr__(self) -> str:
        return f"FailedCount({self.n}, {self.failed}, {self.message!r})"


def raise_held_failure(key: tuple, channels: tuple, salvages: tuple) -> None:
    """Raise the failure a group's key or weight holds, if any (``views.GroupRows``): a
    failed argument's error names its count's message if a row of ``salvages`` still
    holds it, else one that is held."""
    for value in key:
        if type(value) is FailedValue:
            raise EvaluationError(value.message)
    for value in channels:
        if type(value) is FailedCount:
            held = [m for s in salvages for m, w in s.messages.items() if w]
            message = value.message
            if held and message not in held:
                message = min(held)
            raise EvaluationError(message)


class LeafSalvage:
    """Atom's leaf and its aggregate arguments for a row whose leaf raised, computed value
    by value: ``row -> (leaf values..., arguments...)`` with a :class:`FailedValue` where
    one fails, or None where the atom's own conditions drop the row (a condition that
    fails raises: DuckDB filters a relation before its joins).  ``messages`` sums the
    weights of the rows it salvaged by failure: while any row is held (a row's weight is
    never negative once a batch is in, so the dict is empty exactly when none is), the view
    reads every group a batch changes (push mode), so that a failing row that comes to join
    is seen."""

    def __init__(self, keep: Callable[[tuple], tuple | None],
                 values: list[Callable[[tuple], object]]):
        self.keep = keep
        self.values = values
        self.messages: dict[str, int] = {}

    def __call__(self, row: tuple, w: int) -> tuple | None:
        if self.keep(row) is None:
            return None
        out = []
        for value in self.values:
            try:
                out.append(value(row))
            except EvaluationError as exc:
                message = str(exc)
                out.append(FailedValue(message))
                left = self.messages.get(message, 0) + w
                if left:
                    self.messages[message] = left
                else:
                    del self.messages[message]
        return tuple(out)
