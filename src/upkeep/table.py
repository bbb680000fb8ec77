"""Base tables: a schema and a bag of rows (row tuple -> multiplicity, kept compactly by
:class:`upkeep.row_store.RowStore`)."""

from __future__ import annotations

from .arrow_keys import EncodedKeys
from .errors import ConstraintError, DuplicateKeyError
from .expiry import Expiry
from .gc_pause import StateDict
from .row_store import RowStore, row_store
from .types import RowCheck, SqlType, coerce_row, format_row
from .value_index import column_value, index_add, index_get, index_remove


class Table:
    """A base relation under bag semantics, with optional NOT NULL and PRIMARY KEY checks."""

    def __init__(self, name: str, columns: list[tuple[str, SqlType]],
                 not_null: set[int] | None = None, key: tuple[int, ...] | None = None):
        self.name = name
        self.columns = columns
        self.column_names = [n for n, _ in columns]
        self.rows = row_store(columns)
        self.not_null = not_null or set()
        self.key = key
        # PRIMARY KEY value -> how many rows hold it (1, or 2 in a what-if's world), kept
        # as a row store of the key's columns: compact keys in one arena, not a dict of
        # tuples (32-37 against 105-137 bytes a key on TPC-H's tables, docs/design.md,
        # "State layout")
        self.keys: RowStore | None = (
            None if key is None else row_store([columns[i] for i in key]))
        self.expiry: Expiry | None = None  # rows' time-to-live (expiry.py)
        self.provenance: str | None = None  # "update" / "update-naive" (local/provenance.py)
        # column (or the tuple of a composite PRIMARY KEY's columns) -> value -> the stored
        # key of the row holding it (one) or a set of keys; built by rows_with on first use
        # (keyed DELETE / UPDATE), then kept by apply
        self._by_column: dict[int | tuple[int, ...], dict] = {}
        self._distinct: dict[int, int] = {}  # column -> distinct values in a sample
        self.version = 0  # bumped by every apply (local/arrow_snapshots.py)
        # whether a row is valid as it is; :meth:`coerce` converts or refuses the others
        self.row_check = RowCheck(columns)

    def valid(self, row: object) -> bool:
        """Whether ``row`` is a tuple of the columns' Python types as it is
        (:class:`~upkeep.types.RowCheck`)."""
        return self.row_check.valid(row)

    def coerce(self, row: object, index: int) -> tuple:
        """``row`` validated (row ``index`` of a statement, for the error): a tuple whose
        values are of the columns' Python types already passes untouched (a direct call on
        every single-row change), the others are converted or refused."""
        if self.row_check.valid(row):
            return row
        return coerce_row(row, self.columns, self.name, index)

    def column_index(self, name: str) -> int:
        for i, (n, _) in enumerate(self.columns):
            if n == name:
                return i
        from .errors import SchemaError

        raise SchemaError(f"table {self.name} has no column {name}")

    def check_constraints(self, delta: dict[tuple, int]) -> None:
        """Reject a delta that would break NOT NULL, PRIMARY KEY or delete absent rows."""
        self.check_rows(delta)
        if self.key is not None:
            changed: dict[tuple, int] = {}
            for row, w in delta.items():
                k = tuple([row[i] for i in self.key])
                changed[k] = changed.get(k, 0) + w
            self.check_keys(changed)

    def check_rows(self, delta: dict[tuple, int]) -> None:
        """Reject inserted rows with NULL in a NOT NULL column, and deletes of rows the
        table does not hold that many times (``delta``: row -> net weight)."""
        rows = self.rows
        batch = len(delta) > 1  # its rows' entries kept for the apply (checked_count)
        for row, w in delta.items():
            if w > 0:
                self.check_not_null(row)
            elif (rows.checked_count(row) if batch else rows.get(row)) + w < 0:
                raise ConstraintError(
                    f"cannot delete row {format_row(row)} from table {self.name}: it is not present "
                    f"(present {self.rows.get(row, 0)} time(s), deleting {-w})", row)

    def check_not_null(self, row: tuple) -> None:
        """Reject a row with NULL in a NOT NULL column (a PRIMARY KEY's columns are NOT
        NULL)."""
        for i in self.not_null:
            if row[i] is None:
                raise ConstraintError(
                    f"NULL in NOT NULL column {self.columns[i][0]} of table {self.name}: "
                    f"{format_row(row)}", row)

    def check_keys(self, changed: dict[tuple, int]) -> None:
        """Reject a change of key counts (key -> net count added) that would hold a primary
        key more than once."""
        keys = self.keys
        if keys is None:  # (no key: nothing counted; a typed None is not called)
            return
        for k, w in changed.items():
            if keys.get(k, 0) + w > 1:
                raise self.duplicate_key(k)

    def duplicate_key(self, key: tuple) -> DuplicateKeyError:
        """The error of a change that would hold PRIMARY KEY value ``key`` twice."""
        return DuplicateKeyError(
            f"duplicate primary key {format_row(key)} in table {self.name}", key)

    def check_new_keys(self, changed: dict[tuple, int], key_parts: list[EncodedKeys]
                       ) -> None:
        """:meth:`check_keys` for a bulk insert staged as keys: ``changed`` (key -> rows the
        transaction adds with it, this insert's included; a transaction that changes the
        table's rows otherwise stages this insert as rows) may add each key once, and
        ``key_parts`` (this insert's keys, written from Arrow) may hold none the table
        holds, looked up without a tuple encoded per row; without them, :meth:`check_keys`."""
        if not key_parts:
            self.check_keys(changed)
            return
        for k, w in changed.items():
            if w > 1:
                raise self.duplicate_key(k)
        keys = self.keys
        for part in key_parts:
            i = keys.first_held(part)
            if i >= 0:
                raise self.duplicate_key(keys.row_at(part, i))

    def apply(self, delta: dict[tuple, int], keep_places: bool = False) -> None:
        """Add ``delta`` to the rows; ``keep_places``: rows it deletes keep their place
        (``RowStore.add``), for a what-if that adds them back."""
        self.version += 1
        rows = self.rows
        key = self.key
        keys = self.keys
        for row, w in delta.items():
            rows.add(row, w, keep_places)
            if key is not None:
                keys.add(tuple([row[i] for i in key]), w)
        rows.forget()
        if self._by_column:
            self._reindex(delta)

    def takes_keys(self) -> bool:
        """Whether a bulk insert may add its rows as keys written straight from Arrow
        (:mod:`upkeep.arrow_keys`): the rows are kept as keys the encoder writes for every
        column, and no column index (:meth:`rows_with`), time-to-live or update provenance
        needs the rows themselves."""
        return (not self._by_column and self.expiry is None and self.provenance is None
                and self.rows.takes_arrow())

    def apply_keys(self, parts: list[EncodedKeys], key_counts: dict[tuple, int],
                   key_parts: list[EncodedKeys] | None = None, weight: int = 1) -> None:
        """Add a bulk insert's rows, as ``parts`` of keys, ``weight`` times each (-1
        takes a failed batch's insert back), and its PRIMARY KEY values: as ``key_parts``
        (the key columns' keys, written from Arrow as ``parts`` are) where given, else
        counted in ``key_counts`` (a key store that does not take Arrow)."""
        self.version += 1
        rows = self.rows
        rows.add_parts(parts, weight)
        keys = self.keys
        if keys is not None:  # (no key: nothing counted; a typed None is not called)
            if key_parts:
                keys.add_parts(key_parts, weight)
            else:
                for k, n in key_counts.items():
                    keys.add(k, n * weight)
        rows.forget()

    def rows_with(self, col: int | tuple[int, ...], value: object) -> list[tuple]:
        """The distinct rows whose column ``col`` holds ``value`` (Python equality; for a
        tuple of columns, a tuple of values), from a hash index built on the first call for
        that column and kept by :meth:`apply`: a DELETE or UPDATE whose WHERE fixes a column
        (or a composite PRIMARY KEY) costs the rows it matches, not a scan."""
        index = self._by_column.get(col)
        store = self.rows
        if index is None:
            index = self._by_column[col] = StateDict()
            for key in store.keys():
                index_add(index, column_value(store.row(key), col), key)
        return [store.row(key) for key in index_get(index, value)]

    def distinct_in_sample(self, col: int, size: int = 1_000) -> int:
        """How many distinct values column ``col`` holds among ``size`` rows (taken once):
        which column's index will narrow a keyed statement most, without building them
        all."""
        got = self._distinct.get(col)
        if got is None:
            index = self._by_column.get(col)
            if index is not None:
                got = len(index) * size // max(len(self.rows), 1)
            else:
                seen = set()
                for i, row in enumerate(self.rows):
                    if i >= size:
                        break
                    seen.add(row[col])
                got = len(seen)
            self._distinct[col] = got
        return got

    def _reindex(self, delta: dict[tuple, int]) -> None:
        store = self.rows
        for row in delta:
            key = store.key(row)  # encoded once for the check and every column's index
            present = store.count(key) > 0
            for col, index in self._by_column.items():
                if present:
                    index_add(index, column_value(row, col), key)
                else:
                    index_remove(index, column_value(row, col), key)

