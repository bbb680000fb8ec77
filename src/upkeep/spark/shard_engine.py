"""The local engine over one shard of a view group (:class:`ShardEngine`), as the shard
servers (:mod:`upkeep.spark.shards`) keep it: built in bulk from the shard's log, applying
each micro-batch atomically, reporting its views' deltas."""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import Error
from ..io.apply import Applier, Change
from ..local import from_catalog
from ..zset import TableChanges
from .errors import ShardError


class ShardEngine:
    """The local engine over one shard: the group's tables and views, in memory."""

    def __init__(self, catalog: dict, views: list[str], log: Iterable[TableChanges] = ()):
        """The shard's engine from its log (chunks of committed changes), built in bulk."""
        self.db = from_catalog(catalog, views, (c for chunk in log for c in chunk))
        self.views = views
        self.applier = Applier(self.db)
        self._out: TableChanges = []
        for name in views:
            self.db.view(name).subscribe(
                lambda changes, name=name: self._out.extend((name, r, w) for r, w in changes))

    def apply(self, changes: TableChanges, where: list | None = None,
              tolerant: bool = False) -> tuple[TableChanges, list[tuple[int, str]]]:
        """Apply one batch atomically (net change per table, as the local pipeline does).

        ``where`` names each change's record.  A rejected batch raises :class:`ShardError`
        naming the first bad record, unless ``tolerant``: then every change of each bad
        record is left out, the rest applied, and ``(index, error)`` of the changes left out
        is returned with the deltas (the local pipeline's skip / dead-letter).
        """
        rejected: list[tuple[int, str]] = []
        keep = list(range(len(changes)))
        while True:
            batch = [Change(None, changes[i][0], [(changes[i][1], changes[i][2])])  # type: ignore[arg-type]
                     for i in keep]
            self._out = []
            try:
                with self.db.transaction():
                    self.applier.apply(batch)
                break
            except Error as exc:
                bad = self.applier.find_bad(batch)
                if not bad:
                    raise ShardError.of(exc) from None
                # by identity: two equal changes (a row deleted twice) are different records
                position = {id(change): k for k, change in enumerate(batch)}
                first = keep[position[id(bad[0][0])]]
                if not (tolerant and where):
                    raise ShardError.of(bad[0][1], where[first] if where else None) from None
                records = {where[keep[position[id(change)]]]: str(error)
                           for change, error in bad}
                rejected += [(i, records[where[i]]) for i in keep if where[i] in records]
                keep = [i for i in keep if where[i] not in records]
        out, self._out = self._out, []
        return out, sorted(rejected)

    def report(self, deltas: TableChanges, key: tuple, token: str) -> TableChanges:
        """What the shard outputs for a batch: its views' deltas."""
        return deltas

    def contents(self) -> TableChanges:
        """Every view's rows, as insertions."""
        return [(name, row, w) for name in self.views
                for row, w in self.db.weighted_rows(name)]

    def dump(self) -> TableChanges:
        """Every table's rows, as insertions (a compacted log)."""
        return [(t, row, w) for t in self.db.tables() for row, w in self.db.weighted_rows(t)]

    def size(self) -> int:
        return sum(self.db.distinct_rows(t) for t in self.db.tables())
