"""A statement's rows counted into a batch, and a bulk insert staged as keys.

Rows handed to ``db.insert`` / ``db.delete`` become a delta (row -> weight) a part at a
time (:func:`add_part`).  A bulk insert of Arrow data that already has the table's column
types (:func:`upkeep.rows.arrow_typed`) into a table no view reads need not become
Python rows at all: :func:`prepare` checks it (NOT NULL, the PRIMARY KEY's values) and
writes its rows' keys straight from the columns (:mod:`upkeep.arrow_keys`), and the commit
adds the keys to the table (:meth:`upkeep.table.Table.apply_keys`).  Whoever needs the
rows after all (a statement or query in the same transaction) gets them decoded from the
keys, as the table would give them once committed (:meth:`BulkInsert.delta`).  A
database on disk keeps a copy of the Arrow parts beside the keys and logs them as one
Arrow table (:meth:`BulkInsert.arrow`, an Arrow IPC stream in the record); recovery adds
their keys again (:func:`replay`).
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

from ..arrow_keys import EncodedKeys
from ..bulk_progress import STEP
from ..codecs.arrow_values import column_values
from ..errors import DuplicateKeyError
from ..rows import row_parts
from ..table import Table
from ..zset import Delta


def add_part(delta: Delta, part: list, start: int, weight: int, t: Table, typed: bool) -> None:
    """Add ``weight`` to ``delta`` for each row of ``part`` (rows ``start``... of a statement)
    once checked.  A part whose rows are all valid as they are (``typed``: Arrow data of the
    columns' own types, :func:`upkeep.rows.arrow_typed`) and distinct from each other and
    from ``delta`` is checked and counted by C loops (``map`` over the row check,
    ``dict.fromkeys``), with no Python step per row (about 1k instructions a line item
    less).  Any other part goes row by row, where coercion converts a row or names the
    one at fault by its index."""
    if typed or all(map(t.valid, part)):
        fresh = dict.fromkeys(part, weight)
        if len(fresh) == len(part) and (not delta or delta.keys().isdisjoint(fresh)):
            delta.update(fresh)
            return
    coerce = _as_is if typed else t.coerce
    for i, row in enumerate(part, start):
        r = coerce(row, i)
        before = len(delta)
        w = delta.setdefault(r, weight)  # a new row is hashed once
        if len(delta) == before:
            delta[r] = w + weight


def placed(exc: DuplicateKeyError, t: Table, rows) -> DuplicateKeyError:
    """``exc``, of inserting ``rows`` (a list or Arrow data, read again on this error's
    path) into ``t``, naming the rows that hold its key: two or more of them, or one the
    table (with the transaction's changes) holds already.  Rows that cannot be read again
    (an iterator, consumed) leave it as it is."""
    if t.key is None or not (type(rows) is list or isinstance(rows, pa.Table | pa.RecordBatch)):
        return exc
    key, positions, start = exc.row, [], 0
    for part in row_parts(rows, t.name, t.columns, STEP):
        for i, row in enumerate(part, start):
            if tuple(t.coerce(row, i)[k] for k in t.key) == key:
                positions.append(i)
        start += len(part)
        if len(positions) > 3:
            break
    if not positions:
        return exc
    if len(positions) == 1:
        where = (f"row {positions[0]} of the inserted rows repeats a key the table (or the "
                 f"open transaction) holds already")
    else:
        shown = ", ".join(map(str, positions[:3]))
        where = f"rows {shown}{', ...' if len(positions) > 3 else ''} of the inserted rows hold it"
    return DuplicateKeyError(f"{exc}: {where}", key, positions[min(1, len(positions) - 1)])


def _as_is(row: tuple, index: int) -> tuple:
    """The coercion of rows known to be valid already (:func:`upkeep.rows.arrow_typed`)."""
    return row


class BulkInsert:
    """One table's bulk insert, staged as keys: each part's ``keys``, the Arrow ``parts``
    themselves for the log of a database on disk (of the table's columns, in order, of
    their own types; none in memory), and how many of its rows hold each PRIMARY KEY value
    (empty without a key), with each part's key columns written as keys too (``key_parts``,
    for the table's key counts, ``Table.keys``; empty where those do not take Arrow)."""

    __slots__ = ("table", "parts", "keys", "key_counts", "key_parts", "rows")

    def __init__(self, table: Table):
        self.table = table
        self.parts: list[pa.Table] = []
        self.keys: list[EncodedKeys] = []
        self.key_counts: dict[tuple, int] = {}
        self.key_parts: list[EncodedKeys] = []
        self.rows = 0

    def __len__(self) -> int:
        return self.rows

    def extend(self, other: BulkInsert) -> None:
        """Stage ``other``'s rows after these (a later statement of the transaction)."""
        self.parts += other.parts
        self.keys += other.keys
        self.key_parts += other.key_parts
        counts = self.key_counts
        for k, n in other.key_counts.items():
            counts[k] = counts.get(k, 0) + n
        self.rows += other.rows

    def arrow(self) -> pa.Table:
        """The rows as one Arrow table, as the log holds them (``record_codec.py``)."""
        return pa.concat_tables(self.parts)

    def delta(self) -> Delta:
        """The rows, decoded from their keys, as the row-by-row path stages them: row ->
        how many times inserted."""
        t = self.table
        delta: Delta = {}
        n = 0
        for keys in self.keys:
            part = t.rows.rows_of(keys)
            add_part(delta, part, n, 1, t, True)
            n += len(part)
        return delta


def prepare(t: Table, data: pa.Table | pa.RecordBatch, advance: Callable[[int], None],
            logged: bool) -> BulkInsert | None:
    """``data`` (the table's columns, in order, of their own Arrow types) as a bulk insert
    into ``t``, ``advance`` called with each part's rows; None when a value has no Python
    form (the row-by-row path then names it).  A NULL in a NOT NULL column raises the
    row-by-row path's :class:`~upkeep.errors.ConstraintError` naming the first row that
    holds one.  Nothing staged refers to the caller's buffers, which it may reuse once
    the statement returns: the keys are written out, and for a database that ``logged``
    its batches (on disk) each part is copied, under the table's own column names, for
    the log."""
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    schema = pa.schema([(name, typ.arrow()) for name, typ in t.columns])
    data = pa.Table.from_arrays(data.columns, schema=schema)
    bulk = BulkInsert(t)
    for start in range(0, data.num_rows, STEP):
        part = data.slice(start, STEP)
        keys = t.rows.keys_of(part)
        if keys is None:
            return None
        if logged:
            bulk.parts.append(_copied(part))
        bulk.keys.append(keys)
        if t.key is not None:
            if t.keys.takes_arrow():  # (typed key columns: their keys are written alike)
                key_part = t.keys.keys_of(part.select(list(t.key)))
                if key_part is None:
                    return None
                bulk.key_parts.append(key_part)
            counts = bulk.key_counts
            values = [column_values(part.column(i), t.columns[i][1]) for i in t.key]
            for k in zip(*values, strict=True):
                counts[k] = counts.get(k, 0) + 1
        bulk.rows += part.num_rows
        advance(part.num_rows)
    nulls = [data.column(i).is_null().index(True).as_py() for i in t.not_null
             if data.column(i).null_count]
    if nulls:  # the first row the row-by-row path would refuse, refused with its words
        t.check_not_null(next(iter(_rows(t, data.slice(min(nulls), 1)))))
    return bulk


def _copied(part: pa.Table) -> pa.Table:
    """``part`` in buffers of its own (an Arrow IPC stream written and read back)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, part.schema) as writer:
        writer.write_table(part)
    return pa.ipc.open_stream(sink.getvalue()).read_all()


def replay(t: Table, data: pa.Table) -> None:
    """Apply a logged bulk insert (:meth:`BulkInsert.arrow`) to ``t`` again, as keys (its
    rows were checked when it was committed), or as rows if ``t`` no longer takes keys."""
    bulk = prepare(t, data, lambda n: None, False)
    if bulk is not None and t.takes_keys():
        t.apply_keys(bulk.keys, bulk.key_counts, bulk.key_parts)
    else:
        t.apply(_rows(t, data))


def _rows(t: Table, data: pa.Table) -> Delta:
    """``data``'s rows made by the row-by-row path: row -> how many times inserted."""
    delta: Delta = {}
    n = 0
    for part in row_parts(data, t.name, t.columns, STEP):
        add_part(delta, part, n, 1, t, True)
        n += len(part)
    return delta
