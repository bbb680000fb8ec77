"""What the update-provenance requests take, checked before anything is evaluated.

``db.provenance``, ``db.what_if``, ``db.visible``, ``db.trusted`` and ``db.specialise``
(``papers/update-provenance-hyperplane-transactions.txt`` section 4: each a valuation of
the annotations in a structure) and the transaction metadata they read (``principals``,
``trust``).  A wrong argument is a :class:`SchemaError` naming it, never a ``TypeError``
from deep inside an evaluation, and never a value taken with another meaning: a string
as principals would be its characters, ``True`` as a transaction id would be ``T True``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from numbers import Integral, Real

from .errors import SchemaError


def _many(value: object, what: str) -> list:
    """``value`` as a list of its items: a sequence or set, not a string or a mapping."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise SchemaError(f"{what} must be a list, not {type(value).__name__} {value!r:.60}")
    return list(value)


def name_of(value: object, what: str = "name") -> str:
    """A table's, view's or principal's name."""
    if not isinstance(value, str):
        raise SchemaError(f"the {what} must be a string, not {type(value).__name__}")
    return value


def row_of(value: object) -> tuple:
    """A row: a sequence of values."""
    return tuple(_many(value, "a row"))


def transaction_ids(abort: object) -> list[int]:
    """Transaction ids (``T<id>``): integers (numpy's too), not booleans."""
    ids = []
    for t in _many(abort, "abort (transaction ids)"):
        if isinstance(t, bool) or not isinstance(t, Integral):
            raise SchemaError(f"a transaction id is an integer, not {type(t).__name__} {t!r}")
        ids.append(int(t))
    return ids


def input_rows(without: object) -> list[tuple[str, tuple]]:
    """Input rows as ``(table, row)`` pairs."""
    out = []
    for i, pair in enumerate(_many(without, "without ((table, row) pairs)")):
        items = _many(pair, f"without[{i}]")
        if len(items) != 2:
            raise SchemaError(f"without[{i}] must be a (table, row) pair, not {pair!r:.60}")
        out.append((name_of(items[0], f"table of without[{i}]"), row_of(items[1])))
    return out


def fraction(value: object, what: str) -> float:
    """A number in [0, 1] (a trust score or threshold)."""
    if isinstance(value, bool) or not isinstance(value, Real) or not 0 <= value <= 1 \
            or math.isnan(value):
        raise SchemaError(f"{what} must be a number in [0, 1], not {value!r:.60}")
    return float(value)


def principals(value: object, what: str) -> frozenset[str]:
    """A set of principals' names."""
    names = _many(value, what)
    for p in names:
        name_of(p, f"principal in {what}")
    return frozenset(names)


def overrides(value: object, what: str) -> dict[str, object]:
    """``grants`` / ``scores``: a mapping from variable names (``T<id>``, ``table#n``)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SchemaError(f"{what} must be a dict keyed by T<transaction id> or an input "
                          f"row's variable, not {type(value).__name__}")
    for key in value:
        name_of(key, f"key of {what}")
    return dict(value)


def check_metadata(metadata: Mapping) -> None:
    """The metadata keys update provenance reads, checked when the transaction begins:
    ``principals`` a list of names, ``trust`` a score in [0, 1]."""
    if "principals" in metadata:
        principals(metadata["principals"], "metadata 'principals'")
    if "trust" in metadata:
        fraction(metadata["trust"], "metadata 'trust'")
