"""An annotated relation: every tuple ever in the support with its UP[X] annotation.

Set semantics (spec U.1).  Deleted and modified tuples are never removed: their
annotation records why they are gone (``papers/update-provenance-hyperplane-transactions.txt``
section 3.1), so any part of the history can be undone hypothetically.  The current database
is the tuples whose annotation is true with every variable true (``Node.live``).

Queries run inside a :class:`RelationTransaction`: an overlay of working annotations over
the committed ones, so a transaction that fails changes nothing, and one whose query
annotation changes (a row loaded as input, with a variable of its own, between statements
of the transaction) closes the current normal-form segment first.  Equality conditions
are answered by hash indexes, built when a pattern first needs them (the paper's
prototype scans the relation for every query): on one column, or on the columns a
pattern fixes together (TPC-C's ``WHERE w_id = .. AND d_id = .. AND o_id = ..``), whose
candidates are then the rows matching those equalities, not every row of one column's
value.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator

from ..gc_pause import StateDict
from ..value_index import index_add, index_get, index_remove
from .annotators import Annotator
from .expression import VAR, Node
from .hyperplane import Delete, Insert, Modify, Pattern, Query

_MISSING = object()  # a journal's "there was no entry"
#: how many indexes over several columns a relation builds; a pattern fixing another set
#: of columns then goes through one of its columns' index (bounded memory)
MAX_COMPOSITE_INDEXES = 4


class ProvenanceRelation:
    """Committed annotations of one relation (``row -> annotation``) and its indexes."""

    def __init__(self, annotator: Annotator, arity: int):
        self.annotator = annotator
        self.arity = arity
        # StateDicts: the collector never untracks them, so a new row put into one does not
        # make it young again, to be walked whole by young collections (gc_pause.py)
        self.annotations: dict[tuple, object] = StateDict()
        # column, or tuple of columns -> value (tuple of values) -> row or set of rows
        self._indexes: dict[int | tuple[int, ...], dict[object, tuple | set[tuple]]] = {}
        self._distinct: dict[int, int] = {}  # column -> distinct values in a sample
        # which rows a valuation can change: a row annotated by one variable only when that
        # variable changes (``by_variable``: the row, or a set of rows when several share
        # the variable), any other row possibly (``compound``: each row appended once, when
        # its annotation first becomes compound; a tuple in the support stays, annotated,
        # and a compound annotation stays compound, so nothing is taken out.  A list, not a
        # set: a set growing with the history is rebuilt whole at every doubling, fresh
        # memory the log writes, where no provenance writes none)
        self.by_variable: dict[str, tuple | set[tuple]] = StateDict()
        self.compound: list[tuple] = []

    def __len__(self) -> int:
        return len(self.annotations)

    def get(self, row: tuple):
        return self.annotations.get(row, self.annotator.absent)

    def _index(self, col: int | tuple[int, ...]) -> dict[object, tuple | set[tuple]]:
        """The index on column ``col`` (or on the tuple of columns ``col``): value (hash of
        the values, :func:`_filed_under`) -> the one row holding it, or a set of rows."""
        index = self._indexes.get(col)
        if index is None:
            index = self._indexes[col] = StateDict()
            for row in self.annotations:
                index_add(index, _filed_under(col, row), row)
        return index

    def _distinct_in_sample(self, col: int, size: int = 1_000) -> int:
        got = self._distinct.get(col)
        if got is None:
            got = self._distinct[col] = len({row[col] for row in
                                             itertools.islice(self.annotations, size)})
        return got

    def probe(self, pattern: Pattern) -> tuple[int | tuple[int, ...], object] | None:
        """Which index answers ``pattern`` and what it looks up there (None without an
        equality: every row may match).  The index on the columns its equalities fix
        together when it fixes several, but not every one (a whole row is found through
        one column: no index holding every row twice), while the relation has fewer than
        :data:`MAX_COMPOSITE_INDEXES` of them; else the index of its equality column with
        the most distinct values in a sample."""
        equalities = pattern.equalities()
        if not equalities:
            return None
        if len(equalities) == 1:
            return equalities[0]
        fixed = dict(equalities)  # a column fixed twice: a matching row holds both values
        if 1 < len(fixed) < self.arity:
            cols = tuple(sorted(fixed))
            if cols in self._indexes or sum(
                    type(c) is tuple for c in self._indexes) < MAX_COMPOSITE_INDEXES:
                return cols, hash(tuple([fixed[c] for c in cols]))
        return max(equalities, key=lambda cv: self._distinct_in_sample(cv[0]))

    def candidates(self, pattern: Pattern) -> Iterable[tuple]:
        """Committed rows that may match ``pattern``, through :meth:`probe`."""
        probe = self.probe(pattern)
        if probe is None:
            return self.annotations
        return index_get(self._index(probe[0]), probe[1])

    def _unfile(self, row: tuple, old) -> bool:
        """Take ``row`` out of ``by_variable`` if ``old`` is one variable; whether ``old``
        is compound (the row is in ``compound`` already)."""
        if isinstance(old, Node):
            node = old  # (compiled: a Node, its fields read as C slots)
            if node.op != VAR:
                return True
            got = self.by_variable.get(node.name)
            if isinstance(got, set):
                got.discard(row)
            elif got == row:
                del self.by_variable[node.name]
        return False

    def _file(self, row: tuple, new, was_compound: bool) -> None:
        if isinstance(new, Node):
            node = new
            if node.op != VAR:
                if not was_compound:
                    self.compound.append(row)
                return
            got = self.by_variable.get(node.name)
            if got is None:
                self.by_variable[node.name] = row
            elif isinstance(got, set):
                got.add(row)
            elif got != row:
                self.by_variable[node.name] = {got, row}

    def affected_by(self, variables: set[str]) -> set[tuple]:
        """Rows whose annotation may mention one of ``variables``."""
        rows = set(self.compound)
        for v in variables:
            got = self.by_variable.get(v)
            if isinstance(got, set):
                rows |= got
            elif got is not None:
                rows.add(got)
        return rows

    def commit(self, finished: dict[tuple, object]) -> None:
        """Write a transaction's final annotations (tuples that left the support go)."""
        annotations, annotator = self.annotations, self.annotator
        for row, final in finished.items():
            new = row not in annotations
            was_compound = False
            if not new:
                was_compound = self._unfile(row, annotations[row])
            if annotator.dropped(final):
                if not new:
                    del annotations[row]
                    for col, index in self._indexes.items():
                        index_remove(index, _filed_under(col, row), row)
                continue
            annotations[row] = final
            self._file(row, final, was_compound)
            if new:
                for col, index in self._indexes.items():
                    index_add(index, _filed_under(col, row), row)

    def live_rows(self) -> Iterator[tuple]:
        """The current contents: tuples true with every variable true."""
        annotator = self.annotator
        return (row for row, a in self.annotations.items()
                if annotator.live(annotator.start(a)))

    def nodes(self) -> Iterator[Node]:
        return iter(self.annotations.values())


def _filed_under(col: int | tuple[int, ...], row: tuple) -> object:
    """What the index on ``col`` files ``row`` under: :func:`~upkeep.value_index.column_value`
    hashed for several columns (an int, not a tuple kept per row: half the memory; rows
    whose values only share a hash are candidates the pattern then refuses).  Written out
    here, compiled: the interpreted call of ``column_value`` per row filed or checked took
    TPC-C's log from 65k to 87k instructions a statement."""
    if type(col) is int:
        return row[col]
    return hash(tuple([row[c] for c in col]))


class RelationTransaction:
    """One transaction's work on one relation: working annotations over the committed
    ones, in segments of one query annotation each."""

    def __init__(self, relation: ProvenanceRelation):
        self.relation = relation
        self.annotator = relation.annotator
        self.finished: dict[tuple, object] = {}  # final annotations of closed segments
        # rows the transaction's queries wrote that the relation does not hold: what a
        # pattern may match beyond the relation's index candidates (a superset after a
        # rollback); rows a bulk load added are in ``finished`` (``loaded``), not copied here
        self.new_rows: set[tuple] = set()
        self.loaded = False
        self.working: dict[tuple, object] = {}   # the open segment's working annotations
        self.p: Node | None = None
        self.matched = 0  # current rows the last query inserted, deleted or modified
        self._journal: list[tuple] | None = None  # undo records since the savepoint

    def savepoint(self) -> None:
        """Start recording what the following queries overwrite, for :meth:`rollback`."""
        self._journal = [("p", self.p)]

    def release(self) -> None:
        """Keep what was done since :meth:`savepoint` (the statement succeeded)."""
        self._journal = None

    def rollback(self) -> None:
        """Undo every change since :meth:`savepoint` (a failed statement)."""
        for record in reversed(self._journal or ()):
            kind = record[0]
            if kind == "p":
                self.p = record[1]
            elif kind == "working":
                self.working = record[1]
            elif kind == "fresh":
                for row in record[2]:
                    record[1].pop(row, None)
            else:
                _, target, row, old = record
                if old is _MISSING:
                    target.pop(row, None)
                else:
                    target[row] = old
        self._journal = None
    def _segment(self, p: Node) -> None:
        if self.p is not None and self.p is not p:
            self.close()
        self.p = p

    def close(self) -> None:
        """End the open segment: its annotations become final (zero post-processing)."""
        annotator, p, finished, journal = self.annotator, self.p, self.finished, self._journal
        for row, w in self.working.items():
            if journal is not None:
                journal.append(("set", finished, row, finished.get(row, _MISSING)))
            finished[row] = annotator.finish(w, p)
        if journal is not None:
            journal.append(("working", self.working))
        self.working = {}

    def _current(self, row: tuple):
        w = self.working.get(row)
        if w is None:
            base = self.finished.get(row)
            w = self.annotator.start(self.relation.get(row) if base is None else base)
        return w

    def matching(self, pattern: Pattern) -> list[tuple]:
        """Rows in the support that satisfy ``pattern``, as of now in the transaction:
        the relation's candidates (a row the transaction rewrote keeps its values) and the
        rows it added (after a bulk load, every row it wrote)."""
        annotator, relation = self.annotator, self.relation
        probe = relation.probe(pattern)
        if probe is None:
            rows = set(relation.annotations)
            rows.update(self.new_rows)
        else:  # an added row is filed as the index files it: only those under the value
            col, value = probe
            rows = set(index_get(relation._index(col), value))
            for r in self.new_rows:
                v = _filed_under(col, r)
                if v is value or v == value:  # (a NaN is one object: as a dict finds it)
                    rows.add(r)
        if self.loaded:
            rows.update(self.finished)
        out = []
        for r in rows:
            if pattern.matches(r) and annotator.in_support(self._current(r)):
                out.append(r)
        return out

    def apply(self, query: Query, p: Node) -> dict[tuple, int]:
        """Run one query annotated ``p``; returns the change of the current contents
        (row -> +1 / -1).  Nothing is written if the query raises."""
        self._segment(p)
        ann = self.annotator
        updates: dict[tuple, object] = {}
        if isinstance(query, Insert):
            updates[query.row] = ann.insert(self._current(query.row), p)
            self.matched = 1
        elif isinstance(query, Delete):
            matched = self.matching(query.pattern)
            live = 0
            for row in matched:
                w = self._current(row)
                live += ann.live(w)
                updates[row] = ann.delete(w, p)
            self.matched = live
        elif isinstance(query, Modify):
            sources = self.matching(query.pattern)
            live = 0
            before = {}
            for row in sources:
                w = before[row] = self._current(row)
                live += ann.live(w)
            self.matched = live
            targets: dict[tuple, list] = {}
            for row in sources:
                updates[row] = ann.delete(before[row], p)  # Rule 2: -M = -D
                targets.setdefault(query.image(row), []).append(before[row])
            for target, flowing in targets.items():
                w = updates.get(target)
                updates[target] = ann.modify_target(self._current(target) if w is None else w,
                                                    flowing, p)
        change: dict[tuple, int] = {}
        for row, w in updates.items():
            was, now = ann.live(self._current(row)), ann.live(w)
            if was != now:
                change[row] = 1 if now else -1
        journal, working = self._journal, self.working
        if journal is not None:
            for row in updates:
                journal.append(("set", working, row, working.get(row, _MISSING)))
        known, new_rows = self.relation.annotations, self.new_rows
        for row in updates:
            if row not in known:
                new_rows.add(row)
        working.update(updates)
        return change

    def insert_inputs(self, rows: list[tuple], variables: list[Node]) -> dict[tuple, int]:
        """Insert input rows, each annotated by its own variable: what :meth:`apply` with
        an :class:`Insert` per row would do (each row its own segment), without the
        segment and journal traffic for rows nothing annotates yet, which is every row of a
        bulk load.  Returns the change of the current contents."""
        self.close()
        ann, finished, working = self.annotator, self.finished, self.working
        relation = self.relation
        known = relation.annotations
        journal = self._journal
        change: dict[tuple, int] = {}
        fresh: list[tuple] = []  # filled below; recorded first so rollback undoes it last
        if journal is not None:
            journal.append(("fresh", finished, fresh))
        absent_live = ann.live(ann.start(ann.absent))
        for row, p in zip(rows, variables, strict=True):
            if row in known or row in finished or row in working:
                for r, w in self.apply(Insert(row), p).items():
                    n = change.get(r, 0) + w
                    if n:
                        change[r] = n
                    else:
                        change.pop(r)
                self.close()
                continue
            w = ann.insert(ann.start(ann.absent), p)
            finished[row] = ann.finish(w, p)
            fresh.append(row)
            if ann.live(w) != absent_live:
                change[row] = 1 if not absent_live else -1
        if fresh:
            self.loaded = True
        self.matched = len(rows)
        return change

    def is_live(self, row: tuple) -> bool:
        """Whether ``row`` is in the current contents, as of now in the transaction."""
        return self.annotator.live(self._current(row))

    def result(self) -> dict[tuple, object]:
        """The transaction's final annotations, to :meth:`ProvenanceRelation.commit`."""
        self.close()
        return self.finished

    def peek(self, row: tuple):
        """The row's annotation as of now in the transaction (final form)."""
        w = self.working.get(row)
        if w is not None:
            return self.annotator.finish(w, self.p)
        got = self.finished.get(row)
        return self.relation.get(row) if got is None else got


def run_log(relation: ProvenanceRelation, transactions: Iterable[tuple[Node, list[Query]]]
            ) -> None:
    """Apply whole transactions, each ``(annotation, queries)``, committing each."""
    for p, queries in transactions:
        tx = RelationTransaction(relation)
        for q in queries:
            tx.apply(q, p)
        relation.commit(tx.result())
