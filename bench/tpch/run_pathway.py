"""Runner (d): Pathway on the same single-row update stream (streaming mode).

Usage (normally started by ``run.py`` with the Pathway interpreter)::

    bench/.venv-pathway/bin/python -m bench.tpch.run_pathway --stream DIR --query FQ1

Every table is a ``pw.io.python.read`` connector (a ``ConnectorSubject``).  One
feeder thread walks the stream in its exact global order and, for every event,
calls ``next(**row)`` (insert) or ``delete(**row)`` on that table's subject
followed by ``commit()``, so each update is its own single-row commit.
``autocommit_duration_ms=None`` (commits only when we say so) and
``max_backlog_size=10_000`` (bounded input queues) are used.  The result is kept in
a Python dict via ``pw.io.subscribe`` (Pathway's way of holding a queryable copy of
a view) and enumerated once after ``pw.run()`` returns.

Timed: ``pw.run()`` from start to finish, which includes building the per-row
keyword dicts in the feeder thread (about a microsecond per row).  DATE columns are
cast to timestamps before the baseline, since Pathway has no date type
(``DATE_TIME_NAIVE`` is used).  The insert/delete split is approximate: it is cut
where the feeder issues the first delete.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from typing import Any

import pyarrow as pa

from bench.common.measure import run_while_feeding
from bench.common.protocol import Emitter, guarded, runner_args
from bench.tpch.schema import COLUMNS, PRIMARY_KEYS
from bench.tpch.stream import Stream, load

BACKLOG = 10_000
TICK = 0.01
CHUNK = 10_000


def _dates_as_timestamps(stream: Stream) -> None:
    """Cast DATE columns to ``timestamp[us]`` so rows carry ``datetime`` values."""
    for name, table in stream.tables.items():
        fields = [
            pa.field(f.name, pa.timestamp("us")) if pa.types.is_date(f.type) else f
            for f in table.schema
        ]
        stream.tables[name] = table.cast(pa.schema(fields))


def run(args: argparse.Namespace) -> None:
    """Measure one query on Pathway and emit the result."""
    import pathway as pw

    from bench.tpch.pathway_queries import BUILDERS

    py_types: dict[str, Any] = {
        "BIGINT": int,
        "INTEGER": int,
        "DOUBLE": float,
        "VARCHAR": str,
        "DATE": pw.DateTimeNaive,
    }
    stream = load(args.stream)
    _dates_as_timestamps(stream)
    emit = Emitter(args.query, "pathway", len(stream))
    finished = threading.Event()
    marks: dict[str, float] = {}

    class Subject(pw.io.python.ConnectorSubject):
        """A table fed by the feeder thread; its own thread only ticks commits.

        While the feeder works on other tables this connector would sit idle and
        hold back Pathway's frontier (stalling ``max_backlog_size`` accounting), so
        it commits every ``TICK`` seconds until the stream ends.
        """

        def __init__(self, deletes: bool) -> None:
            super().__init__()
            self.deletes = deletes

        @property
        def _deletions_enabled(self) -> bool:
            # rows are deleted via delete() from the feeder, which Pathway's static
            # check of run() cannot see; tables without deletes stay append-only
            return self.deletes

        def run(self) -> None:
            while not finished.wait(TICK):
                self.commit()

    names = stream.table_names
    with_deletes = {names[t] for t in set(stream.table_id[stream.op < 0].tolist())}
    subjects = {name: Subject(name in with_deletes) for name in names}
    for subject in subjects.values():
        subject._set_max_backlog_size(BACKLOG)  # bounds only the Python-side queue
    columns = {name: [c for c, _ in COLUMNS[name]] for name in names}

    def feed() -> None:
        try:
            _feed()
        finally:
            finished.set()

    def _feed() -> None:
        done = 0
        for chunk in stream.chunks(CHUNK):
            for op, table, row in chunk:
                subject = subjects[table]
                values = dict(zip(columns[table], row, strict=True))
                if op > 0:
                    subject.next(**values)
                else:
                    if "first_delete" not in marks:
                        marks["first_delete"] = time.perf_counter()
                    subject.delete(**values)
                subject.commit()
            done += len(chunk)
            emit.progress(done)

    tables = {}
    for name in names:
        # row ids come from the TPC-H key, so a delete() retracts exactly its insert
        schema = pw.schema_builder(
            {
                c: pw.column_definition(dtype=py_types[t], primary_key=c in PRIMARY_KEYS[name])
                for c, t in COLUMNS[name]
            }
        )
        tables[name] = pw.io.python.read(
            subjects[name],
            schema=schema,
            autocommit_duration_ms=None,
            name=f"in_{name}",
        )
    result = BUILDERS[args.query](tables)
    state: dict[object, tuple] = {}

    def on_change(key: object, row: dict, time: int, is_addition: bool) -> None:
        if is_addition:
            state[key] = tuple(row.values())
        else:
            state.pop(key, None)

    pw.io.subscribe(result, on_change=on_change)
    meter, t0, total_s = run_while_feeding(
        lambda: pw.run(monitoring_level=pw.MonitoringLevel.NONE), feed)
    emit.progress(len(stream), force=True)

    t1 = time.perf_counter()
    rows = list(state.values())
    enumerate_s = time.perf_counter() - t1
    memory = meter.report()
    ins_s = marks.get("first_delete", t0 + total_s) - t0
    del_s = total_s - ins_s
    emit.result(
        status="ok",
        events=len(stream),
        inserts=stream.n_inserts,
        deletes=stream.n_deletes,
        seconds=round(total_s, 3),
        insert_seconds=round(ins_s, 3),
        delete_seconds=round(del_s, 3),
        updates_per_s=round(len(stream) / total_s, 1),
        insert_per_s=round(stream.n_inserts / ins_s, 1) if ins_s > 0 else None,
        delete_per_s=round(stream.n_deletes / del_s, 1) if del_s > 0 else None,
        view_rows=len(rows),
        enumerate_seconds=round(enumerate_s, 3),
        pathway_version=pw.__version__,
        pathway_threads=os.environ.get("PATHWAY_THREADS", "1 (default)"),
        **memory,
    )


def main() -> None:
    """Entry point."""
    args = runner_args("Pathway runner", ("pathway",))
    guarded(args.query, "pathway", lambda: run(args))


if __name__ == "__main__":
    main()
