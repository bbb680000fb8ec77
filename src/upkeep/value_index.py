"""A hash index from a column's value to the entries holding it, for the keyed lookups of
ordinary tables (:meth:`upkeep.table.Table.rows_with`) and provenance relations
(:meth:`upkeep.update_provenance.relation.ProvenanceRelation.candidates`).

Most columns a statement fixes are keys, so a value's lone entry is stored as itself and
becomes a set only when a second one arrives: no set per row for unique columns.
"""

from __future__ import annotations


def column_value(row: tuple, col: int | tuple[int, ...]) -> object:
    """What an index on ``col`` files ``row`` under: its value in that column, or, for an
    index on several columns (a composite PRIMARY KEY), the tuple of their values."""
    return row[col] if type(col) is int else tuple(row[c] for c in col)


def index_add(index: dict, value: object, entry: object) -> None:
    """Record ``entry`` (a row or a row's stored key; never a set) under ``value``."""
    got = index.get(value)
    if got is None:
        index[value] = entry
    elif isinstance(got, set):
        got.add(entry)
    elif got != entry:
        index[value] = {got, entry}


def index_remove(index: dict, value: object, entry: object) -> None:
    got = index.get(value)
    if isinstance(got, set):
        got.discard(entry)
        if len(got) == 1:
            index[value] = got.pop()
    elif got == entry:
        del index[value]


def index_get(index: dict, value: object) -> tuple | set:
    """The entries under ``value``."""
    got = index.get(value)
    if got is None:
        return ()
    return got if isinstance(got, set) else (got,)
