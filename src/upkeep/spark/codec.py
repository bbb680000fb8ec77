"""The Spark delta stream's rows: all views of a streaming query share one output schema
``(view, row, weight)``, ``row`` being a view row in the Spark-rows spelling of the value
layer (:mod:`upkeep.codecs.spark_rows`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

from ..codecs.spark_rows import decode_row
from ..types import SqlType

OUTPUT_SCHEMA = "view string, row string, weight long"


def decode_deltas(rows: Iterable[tuple[str, str, int]],
                  schema_of: Callable[[str], list[tuple[str, SqlType]]],
                  dead_letter_view: str) -> tuple[dict[str, list[tuple[tuple, int]]], list[str]]:
    """A micro-batch's output rows ``(view, row, weight)`` as each view's consolidated
    ``(row, weight)`` changes, and the dead-letter lines (rows of ``dead_letter_view``)."""
    per_view: dict[str, Counter] = {}
    types: dict[str, list[SqlType]] = {}
    dead: list[str] = []
    for view, text, weight in rows:
        if view == dead_letter_view:
            dead.append(text)
            continue
        if view not in types:
            types[view] = [t for _, t in schema_of(view)]
        per_view.setdefault(view, Counter())[decode_row(text, types[view])] += weight
    changes = {v: [(r, w) for r, w in c.items() if w] for v, c in per_view.items()}
    return {v: c for v, c in changes.items() if c}, dead
