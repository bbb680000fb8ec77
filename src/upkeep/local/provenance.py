"""Provenance tables of the local engine: update provenance kept beside the tables' rows.

A table created ``WITH (provenance = 'update')`` (or ``'update-naive'``) keeps, besides its
current rows, a :class:`~upkeep.update_provenance.relation.ProvenanceRelation`: every tuple
ever in it with its UP[X] annotation (``papers/update-provenance-hyperplane-transactions.txt``,
``shared/specs/update-provenance.md``).  Each committed transaction that changes a
provenance table gets a variable ``T<id>``; each row given to ``db.insert`` is an *input
row* with a variable of its own (``<table>#<n>``), inserted by a one-row query under that
variable inside its transaction, so a what-if can remove one input row or one whole
transaction.  INSERT / DELETE / UPDATE statements are hyperplane queries annotated by their
transaction.  The tables' rows stay the ordinary table contents, so views over provenance
tables are maintained as over any table.

What-if worlds are valuations: aborting ``T3`` sets ``T3`` (and the variables of the input
rows T3 loaded) to false; removing an input row sets its variable to false; access control
and trust evaluate the annotations in their structures.  The hypothetical contents differ
from the real ones on few rows, and :meth:`.Committer.hypothetical` pushes that difference
through the views' own maintenance code and takes it back.

Durability: each committed batch's log record carries the transaction's queries; a
snapshot carries the history of all of them, replayed on recovery (the annotations are a
function of the queries).
"""

from __future__ import annotations

import bisect
import copy
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..errors import ConstraintError, ProvenanceError, UnsupportedError
from ..gc_pause import StateDict
from ..table import Table
from ..types import canonical_float, format_row
from ..update_provenance.annotators import ANNOTATORS
from ..update_provenance.expression import Node, dag_size, tree_size, var, variable_mask
from ..update_provenance.hyperplane import Delete, Insert, Modify, Pattern, Query
from ..update_provenance.relation import ProvenanceRelation, RelationTransaction
from ..update_provenance.structures import (
    AccessControl,
    Trust,
    UpdateStructure,
    evaluate,
    falsified,
)
from ..zset import Delta


def txn_name(txn: int) -> str:
    return f"T{txn}"


def txn_of(name: str) -> int | None:
    """The transaction id of a transaction variable (``T3`` -> 3), else None."""
    return int(name[1:]) if name[:1] == "T" and name[1:].isdigit() else None


def _encode(query: Query) -> tuple:
    """A query annotated by its transaction, for the log (input rows are one ``inputs``
    record per statement: the rows and the number of the first one's variable)."""
    if isinstance(query, Insert):
        return ("insert", query.row)
    if isinstance(query, Delete):
        return ("delete", query.pattern.conditions)
    return ("modify", query.pattern.conditions, query.sets)


def _canonical(value: object) -> object:
    """``value`` read back from the log with every NaN made the one ``math.nan``
    (:func:`~upkeep.types.canonical_float`), inside tuples and lists too: NaNs hash by
    identity, so a decoded NaN would never find the row a later lookup names."""
    if isinstance(value, float):
        return canonical_float(value)
    if isinstance(value, (tuple, list)):
        return type(value)(_canonical(v) for v in value)
    return value


def _decode(op: tuple) -> Query:
    kind = op[0]
    if kind == "insert":
        return Insert(tuple(op[1]))
    conditions = Pattern(tuple(tuple(c) for c in op[1]))
    if kind == "delete":
        return Delete(conditions)
    return Modify(conditions, tuple(tuple(s) for s in op[2]))


@dataclass
class OpenTransaction:
    """The provenance work of the transaction being staged."""

    txn: int
    p: Node
    relations: dict[str, RelationTransaction] = field(default_factory=dict)
    ops: list[tuple] = field(default_factory=list)  # (table, encoded query)


class ProvenanceTracker:
    """Every provenance table's annotated relation, the transactions, the input rows."""

    def __init__(self) -> None:
        self.relations: dict[str, ProvenanceRelation] = {}
        self.transactions: dict[int, dict] = {}  # id -> metadata
        # input rows: table -> row -> its variable (a list if loaded more than once); the
        # numbers of a table's input variables each transaction loaded, as ranges
        self.inputs: dict[str, dict[tuple, str | list[str]]] = {}
        self.input_ranges: dict[str, list[tuple[int, int]]] = {}  # table -> (first n, txn)
        self.txn_inputs: dict[int, list[tuple[str, int, int]]] = {}  # txn -> (table, n, m)
        self.next_txn = 1
        self.next_input: dict[str, int] = {}
        self.history: list[tuple[int, dict | None, list[tuple]]] = []  # for snapshots
        self.open: OpenTransaction | None = None

    # ------------------------------------------------------------ tables
    def add_table(self, table: Table) -> None:
        if table.provenance is not None:
            self.relations[table.name] = ProvenanceRelation(ANNOTATORS[table.provenance](),
                                                            len(table.columns))
            self.inputs[table.name] = StateDict()  # row -> its variable(s): see gc_pause.py
            self.next_input.setdefault(table.name, 1)

    def drop_table(self, name: str) -> None:
        """Forget a dropped table's annotations, input rows and logged queries (a snapshot
        replays the history of the tables that exist)."""
        self.relations.pop(name, None)
        self.inputs.pop(name, None)
        self.input_ranges.pop(name, None)  # its variables are no longer known (as on reopening)
        for txn, loaded in list(self.txn_inputs.items()):
            kept = [entry for entry in loaded if entry[0] != name]
            if kept:
                self.txn_inputs[txn] = kept
            else:
                del self.txn_inputs[txn]
        self.history = [(txn, meta, [(t, op) for t, op in ops if t != name])
                        for txn, meta, ops in self.history]

    def tracks(self, table: str) -> bool:
        return table in self.relations

    def relation(self, table: str) -> ProvenanceRelation:
        rel = self.relations.get(table)
        if rel is None:
            raise ProvenanceError(f"table {table} keeps no update provenance (create it WITH "
                                  "(provenance = 'update'))")
        return rel

    # ------------------------------------------------------------ the open transaction
    def _transaction(self) -> OpenTransaction:
        if self.open is None:
            self.open = OpenTransaction(self.next_txn, var(txn_name(self.next_txn)))
        return self.open

    def _relation_tx(self, tx: OpenTransaction, table: str) -> RelationTransaction:
        rtx = tx.relations.get(table)
        if rtx is None:
            rtx = tx.relations[table] = RelationTransaction(self.relations[table])
        return rtx

    def run(self, table: str, queries: Iterable[Query], stage: Callable[[Delta], None],
            input_rows: bool = False, present: bool = False) -> int:
        """Run one statement's queries on ``table`` inside the open transaction and stage
        the change of its current rows with ``stage``; all or nothing.  ``input_rows``: the
        queries are inserts of input rows, each under a fresh variable.  ``present``: each
        query deletes one given row, which must be in the table (``db.delete``).  Returns
        the rows inserted, deleted or updated."""
        tx = self._transaction()
        rtx = self._relation_tx(tx, table)
        rtx.savepoint()
        saved = (len(tx.ops), self.next_input[table])
        delta: Delta = {}
        count = 0
        loaded: list[tuple] = []
        try:
            if input_rows:
                first = self.next_input[table]
                loaded = [query.row for query in queries]
                self.next_input[table] = first + len(loaded)
                delta = rtx.insert_inputs(
                    loaded, [var(f"{table}#{n}") for n in range(first, first + len(loaded))])
                count = rtx.matched
            for query in () if input_rows else queries:
                p = tx.p
                if present:
                    row = tuple(v for _, _, v in query.pattern.conditions)
                    if not rtx.is_live(row):
                        raise ConstraintError(f"cannot delete row {format_row(row)} from "
                                              f"table {table}: it is not present", row)
                for row, w in rtx.apply(query, p).items():
                    n = delta.get(row, 0) + w
                    if n:
                        delta[row] = n
                    else:
                        delta.pop(row)
                count += rtx.matched
                tx.ops.append((table, _encode(query)))
            if loaded:  # one record for the statement's input rows, numbered from ``first``
                tx.ops.append((table, ("inputs", loaded, saved[1])))
            stage(delta)
            rtx.release()
        except BaseException:
            rtx.rollback()
            del tx.ops[saved[0]:]
            self.next_input[table] = saved[1]
            raise
        return count

    def discard(self) -> None:
        if self.open is not None:
            for table, op in self.open.ops:
                if op[0] == "inputs":
                    self.next_input[table] = min(self.next_input[table], op[2])
        self.open = None

    def pending(self) -> tuple | None:
        """The open transaction's log payload, or None if it touched no provenance table."""
        tx = self.open
        return None if tx is None or not tx.ops else (tx.txn, tx.ops)

    def committed(self, metadata: dict | None) -> None:
        """The open transaction committed: its annotations become the relations'.  Its
        metadata is copied whole: the caller's dict may change after the commit, and what
        is kept must stay what the log holds."""
        tx, self.open = self.open, None
        if tx is None or not tx.ops:
            return
        for table, rtx in tx.relations.items():
            self.relations[table].commit(rtx.result())
        self._record(tx.txn, copy.deepcopy(metadata), tx.ops)

    def _record(self, txn: int, metadata: dict | None, ops: list[tuple]) -> None:
        self.transactions[txn] = metadata if metadata is not None else {}
        for table, op in ops:
            if op[0] == "inputs":
                _, rows, first = op
                inputs = self.inputs.setdefault(table, StateDict())
                for n, row in enumerate(rows, first):
                    name = f"{table}#{n}"
                    got = inputs.get(row)
                    inputs[row] = name if got is None else (
                        [*got, name] if isinstance(got, list) else [got, name])
                self.input_ranges.setdefault(table, []).append((first, txn))
                self.txn_inputs.setdefault(txn, []).append((table, first, first + len(rows)))
        self.next_txn = max(self.next_txn, txn + 1)
        self.history.append((txn, metadata, ops))

    def input_transaction(self, name: str) -> int | None:
        """The transaction that loaded input variable ``name`` (``<table>#<n>``)."""
        table, _, number = name.rpartition("#")
        ranges = self.input_ranges.get(table)
        if not ranges or not number.isdigit() or int(number) >= self.next_input.get(table, 1):
            return None
        i = bisect.bisect_right(ranges, (int(number), float("inf"))) - 1
        return ranges[i][1] if i >= 0 else None

    # ------------------------------------------------------------ recovery
    def replay(self, txn: int, metadata: dict | None, ops: list) -> None:
        """Apply a committed transaction read back from the log or a snapshot."""
        p = var(txn_name(txn))
        work: dict[str, RelationTransaction] = {}
        ops = [(table, _canonical(tuple(op))) for table, op in ops]
        for table, op in ops:
            rtx = work.get(table)
            if rtx is None:
                rtx = work[table] = RelationTransaction(self.relations[table])
            if op[0] == "inputs":
                _, rows, first = op
                for n, row in enumerate(rows, first):
                    rtx.apply(Insert(tuple(row)), var(f"{table}#{n}"))
                self.next_input[table] = max(self.next_input.get(table, 1), first + len(rows))
            else:
                rtx.apply(_decode(op), p)
        for table, rtx in work.items():
            self.relations[table].commit(rtx.result())
        self._record(txn, metadata, ops)

    # ------------------------------------------------------------ reading
    def annotation(self, table: str, row: tuple) -> Node:
        return self.relation(table).get(row)

    def check_txns(self, txns: Iterable[int]) -> list[int]:
        out = []
        for t in txns:
            if not isinstance(t, int) or t not in self.transactions:
                raise ProvenanceError(
                    f"unknown transaction {t!r}: committed provenance transactions are "
                    f"{_ids(self.transactions)}")
            out.append(t)
        return out

    def input_variables(self, table: str, row: tuple) -> list[str]:
        self.relation(table)
        got = self.inputs.get(table, {}).get(row)
        if isinstance(got, str):
            return [got]
        if not got:
            raise ProvenanceError(
                f"row {format_row(row)} is not an input row of table {table} (input rows are "
                "the rows given to db.insert; rows written by INSERT statements belong to "
                "their transaction: abort it instead)", row=row)
        return got

    def boolean_delta(self, false_vars: set[str]) -> dict[str, Delta]:
        """Per provenance table, how its contents change when ``false_vars`` are false
        (deletion propagation and abort, section 4.1): only rows whose annotation may
        mention them (``ProvenanceRelation.affected_by``: the rows transactions wrote, and
        those annotated by a falsified variable alone) whose variable mask meets theirs are
        evaluated, so the cost follows the history, not the table's size."""
        for txn in [t for t in map(txn_of, false_vars) if t is not None]:
            for table, first, end in self.txn_inputs.get(txn, ()):
                false_vars |= {f"{table}#{n}" for n in range(first, end)}
        mask = 0
        for v in false_vars:
            mask |= variable_mask(v)
        value = falsified(mask, frozenset(false_vars))
        out: dict[str, Delta] = {}
        memo: dict = {}
        for table, rel in self.relations.items():
            delta: Delta = {}
            annotations = rel.annotations
            for row in rel.affected_by(false_vars):
                node = annotations[row]
                if node.mask & mask and value(node, memo) != node.live:
                    delta[row] = -1 if node.live else 1
            if delta:
                out[table] = delta
        return out

    def structure_delta(self, structure: UpdateStructure, valuation: Callable[[str], object]
                        ) -> dict[str, Delta]:
        """Per provenance table, the change from its contents to the rows whose annotation
        the structure accepts under ``valuation`` (Proposition 4.2's homomorphism)."""
        out: dict[str, Delta] = {}
        memo: dict = {}
        for table, rel in self.relations.items():
            delta: Delta = {}
            for row, node in rel.annotations.items():
                accepted = structure.accepts(evaluate(node, structure, valuation, memo))
                if accepted != node.live:
                    delta[row] = 1 if accepted else -1
            if delta:
                out[table] = delta
        return out

    def metadata_valuation(self, key: str, convert: Callable[[object], object],
                           default: object, overrides: dict[str, object]
                           ) -> Callable[[str], object]:
        """Variables valued from their transaction's metadata ``key`` (an input row's
        variable from the transaction that loaded it), ``overrides`` first: the variable's
        own, then its transaction's (``T<id>`` stands for the input rows it loaded too, as
        its metadata does)."""
        for name in overrides:
            txn = txn_of(name)
            if (txn not in self.transactions if txn is not None
                    else self.input_transaction(name) is None):
                raise ProvenanceError(
                    f"unknown variable {name!r}: keys are T<id> of a committed provenance "
                    f"transaction ({_ids(self.transactions)}) or an input row's <table>#<n> "
                    f"(db.provenance names them)")

        def value(name: str) -> object:
            if name in overrides:
                return overrides[name]
            txn = self.input_transaction(name)
            if txn is None:
                txn = txn_of(name)
            if txn is not None and txn_name(txn) in overrides:
                return overrides[txn_name(txn)]
            meta = self.transactions.get(txn, {}) if txn is not None else {}
            return convert(meta[key]) if key in meta else default
        return value

    def access_control(self, principal: str, overrides: dict[str, Iterable[str]]
                       ) -> tuple[AccessControl, Callable[[str], object]]:
        """The access-control structure over the principals named anywhere, accepting the
        rows ``principal`` may see, and each variable's principals: its transaction's
        metadata ``principals`` (everyone if absent)."""
        named = {principal}
        for meta in self.transactions.values():
            named.update(meta.get("principals", ()))
        for ps in overrides.values():
            named.update(ps)
        structure = AccessControl(frozenset(named), principal)
        return structure, self.metadata_valuation(
            "principals", frozenset, structure.universe,
            {k: frozenset(v) for k, v in overrides.items()})

    def trust(self, threshold: float, overrides: dict[str, float]
              ) -> tuple[Trust, Callable[[str], object]]:
        """The trust structure at ``threshold``; each variable's score is its transaction's
        metadata ``trust`` (certified if absent)."""
        if not 0 <= threshold <= 1:
            raise UnsupportedError(f"trust threshold must be in [0, 1], not {threshold!r}")
        structure = Trust(threshold)
        return structure, self.metadata_valuation(
            "trust", lambda s: (float(s), "U"), structure.one,
            {k: (float(v), "U") for k, v in overrides.items()})

    def size(self) -> dict[str, int]:
        """Tuples kept (deleted ones included), distinct expression nodes (what is
        stored), and the expressions' size written out as trees (spec U.14, 7)."""
        nodes = [n for rel in self.relations.values() for n in rel.annotations.values()]
        return {"tuples": sum(len(r) for r in self.relations.values()),
                "nodes": dag_size(nodes), "tree": sum(tree_size(n) for n in nodes)}


def _ids(transactions: dict[int, dict]) -> str:
    ids = sorted(transactions)
    if not ids:
        return "none"
    return ", ".join(map(str, ids[:10])) + (" ..." if len(ids) > 10 else "")


def delete_queries(rows: Iterable[tuple]) -> list[Query]:
    """``db.delete`` of given rows as hyperplane deletions (``run(..., present=True)``)."""
    return [Delete(Pattern.of_row(row)) for row in rows]
