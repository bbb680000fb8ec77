"""The update stream of one query: single-row inserts, then deletes of 10% of the facts.

Order of the insert phase: whole dimension tables first (``schema.DIMENSION_ORDER``,
each sorted by its key), then the fact rows.  When a query uses ``orders`` and
``lineitem`` they are interleaved by order key (each order directly followed by its
line items) so that joins produce output while the stream runs.  FQ3 has neither
table; its fact table is ``partsupp``.  ``limit`` keeps only the first ``limit`` fact
rows of that sequence (dimension tables are always complete).  The delete phase
removes a seeded random 10% of the inserted fact rows, in random order.

A prepared stream is cached on disk as Arrow IPC files (one per table, rows in
insertion order, plus ``events.arrow`` with ``op`` (+1/-1), ``table`` and ``row``
columns) so every runner process reads exactly the same events cheaply.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from bench.tpch.queries import Query
from bench.tpch.schema import DIMENSION_ORDER, PRIMARY_KEYS

DELETE_FRACTION = 0.1

Event = tuple[int, str, tuple]


@dataclass
class Stream:
    """A loaded stream: typed tables plus the event arrays indexing into them."""

    tables: dict[str, pa.Table]
    table_names: list[str]
    op: np.ndarray
    table_id: np.ndarray
    row: np.ndarray
    meta: dict

    def __len__(self) -> int:
        return int(self.op.shape[0])

    @property
    def n_inserts(self) -> int:
        """Number of insert events (the first ``n_inserts`` events)."""
        return int((self.op > 0).sum())

    @property
    def n_deletes(self) -> int:
        """Number of delete events."""
        return int((self.op < 0).sum())

    def chunks(
        self, size: int = 10_000, start: int = 0, stop: int | None = None
    ) -> Iterator[list[Event]]:
        """Yield events ``[start, stop)`` as lists of ``(op, table, row_tuple)``.

        Row tuples hold plain Python values (int, float, str, datetime.date) and are
        created chunk by chunk, so callers can exclude conversion from timings.
        """
        stop = len(self) if stop is None else stop
        for lo in range(start, stop, size):
            hi = min(lo + size, stop)
            yield self._materialize(lo, hi)

    def _materialize(self, lo: int, hi: int) -> list[Event]:
        ops = self.op[lo:hi].tolist()
        tids = self.table_id[lo:hi]
        rows = self.row[lo:hi]
        out: list[Event] = [(0, "", ())] * (hi - lo)
        for tid in np.unique(tids).tolist():
            name = self.table_names[tid]
            positions = np.nonzero(tids == tid)[0]
            taken = self.tables[name].take(pa.array(rows[positions]))
            tuples = zip(*(col.to_pylist() for col in taken.columns), strict=True)
            for pos, tup in zip(positions.tolist(), tuples, strict=True):
                out[pos] = (ops[pos], name, tup)
        return out

    def final_tables(self) -> dict[str, pa.Table]:
        """Contents of every table after the whole stream (inserts minus deletes)."""
        result = {}
        for tid, name in enumerate(self.table_names):
            keep = np.ones(self.tables[name].num_rows, dtype=bool)
            deleted = self.row[(self.table_id == tid) & (self.op < 0)]
            keep[deleted] = False
            result[name] = self.tables[name].filter(pa.array(keep))
        return result


def stream_key(query: Query, limit: int | None, seed: int) -> str:
    """Cache key: streams depend only on the table set, the limit and the seed."""
    tables = "-".join(sorted(query.tables))
    return f"{tables}_n{limit if limit is not None else 'all'}_seed{seed}"


def _sorted(table: pa.Table, name: str) -> pa.Table:
    return table.sort_by([(key, "ascending") for key in PRIMARY_KEYS[name]])


def _fact_sequence(facts: dict[str, pa.Table]) -> list[tuple[str, int]]:
    """Insertion order of the fact rows as ``(table, row)`` pairs."""
    if set(facts) == {"orders", "lineitem"}:
        okeys = facts["orders"].column("o_orderkey").to_numpy()
        lkeys = facts["lineitem"].column("l_orderkey").to_numpy()
        primary = np.concatenate([okeys, lkeys])
        secondary = np.concatenate([np.zeros(len(okeys)), np.ones(len(lkeys))])
        # rows of each table are already key-sorted, so a stable sort keeps them in order
        rowno = np.concatenate([np.arange(len(okeys)), np.arange(len(lkeys))])
        order = np.lexsort((rowno, secondary, primary))
        names = np.array(["orders"] * len(okeys) + ["lineitem"] * len(lkeys))
        return list(zip(names[order].tolist(), rowno[order].tolist(), strict=True))
    (name,) = facts
    return [(name, i) for i in range(facts[name].num_rows)]


def build(
    query: Query,
    load: Callable[[str], pa.Table],
    out_root: Path,
    limit: int | None,
    seed: int,
) -> Path:
    """Prepare (or reuse) the stream of ``query`` under ``out_root``; return its directory.

    ``load(table_name) -> pa.Table`` supplies the typed TPC-H tables.
    """
    out = out_root / stream_key(query, limit, seed)
    if (out / "meta.json").exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    facts = query.fact_tables
    dims = [t for t in DIMENSION_ORDER if t in query.tables and t not in facts]
    names = dims + list(facts)
    tables = {name: _sorted(load(name), name) for name in names}

    sequence = _fact_sequence({name: tables[name] for name in facts})
    if limit is not None:
        sequence = sequence[:limit]
    for name in facts:  # keep only the fact rows that are streamed (a prefix of each)
        used = sum(1 for t, _ in sequence if t == name)
        tables[name] = tables[name].slice(0, used)

    tid = {name: i for i, name in enumerate(names)}
    ev_table: list[int] = []
    ev_row: list[int] = []
    for name in dims:
        ev_table += [tid[name]] * tables[name].num_rows
        ev_row += list(range(tables[name].num_rows))
    ev_table += [tid[t] for t, _ in sequence]
    ev_row += [r for _, r in sequence]
    n_inserts = len(ev_row)

    rng = np.random.default_rng(seed)
    n_delete = round(DELETE_FRACTION * len(sequence))
    picks = rng.choice(len(sequence), size=n_delete, replace=False)
    ev_table += [tid[sequence[i][0]] for i in picks.tolist()]
    ev_row += [sequence[i][1] for i in picks.tolist()]
    ops = [1] * n_inserts + [-1] * n_delete

    for name, table in tables.items():
        _write_ipc(out / f"{name}.arrow", table)
    events = pa.table(
        {
            "op": pa.array(ops, pa.int8()),
            "table": pa.array(ev_table, pa.int8()),
            "row": pa.array(ev_row, pa.int32()),
        }
    )
    _write_ipc(out / "events.arrow", events)
    meta = {
        "tables": names,
        "facts": list(facts),
        "rows": {name: tables[name].num_rows for name in names},
        "inserts": n_inserts,
        "deletes": n_delete,
        "limit": limit,
        "seed": seed,
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=2))
    return out


def _write_ipc(path: Path, table: pa.Table) -> None:
    tmp = path.with_suffix(".tmp")
    with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    tmp.replace(path)


def _read_ipc(path: Path) -> pa.Table:
    with pa.OSFile(str(path), "rb") as source:
        return pa.ipc.open_file(source).read_all()


def load(path: Path) -> Stream:
    """Load a prepared stream directory into memory."""
    meta = json.loads((path / "meta.json").read_text())
    names = meta["tables"]
    tables = {name: _read_ipc(path / f"{name}.arrow") for name in names}
    events = _read_ipc(path / "events.arrow")
    return Stream(
        tables=tables,
        table_names=names,
        op=events.column("op").to_numpy(),
        table_id=events.column("table").to_numpy(),
        row=events.column("row").to_numpy(),
        meta=meta,
    )
