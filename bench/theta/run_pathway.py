"""Runner for one GCQ query on Pathway (streaming mode), started by ``gcq_bench.py``
with the Pathway interpreter (``bench/.venv-pathway``, see bench/README.md).

Usage::

    bench/.venv-pathway/bin/python -m bench.theta.run_pathway --query GCQ1 --scale 0.3

Every relation is a ``pw.io.python.read`` connector fed by one feeder thread that
walks the stream batch by batch (``--batch`` events): ``next(**row)`` for each of the
batch's rows, then ``commit()`` on every subject, so one batch is one commit per input.
``autocommit_duration_ms=None`` (commits only when the feeder says so); the subjects'
own threads only tick empty commits so that an idle input does not hold back Pathway's
frontier (as in ``run_pathway.py``).  The query is written as in
``gcq_pathway_queries.py`` (cross joins + filters, since Pathway joins on equality
only) and its rows are folded into the fingerprint inside the dataflow; the final
fingerprint is read with ``pw.io.subscribe``.  Timed: ``pw.run()`` from start to end.
"""

from __future__ import annotations

import argparse
import os
import threading

from bench.common.measure import run_while_feeding
from bench.common.protocol import Emitter, guarded
from bench.theta.queries import QUERIES, generate, stream_length

TICK = 0.01


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="one GCQ query on Pathway")
    p.add_argument("--query", required=True, choices=list(QUERIES))
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def run(args: argparse.Namespace, emit: Emitter) -> None:
    import pathway as pw

    from bench.theta.pathway_queries import NOTE, fingerprint, view

    query = QUERIES[args.query]
    stream = generate(query, args.scale, args.seed)
    rows = {name: data.tolist() for name, data in stream.rows.items()}
    finished = threading.Event()

    class Subject(pw.io.python.ConnectorSubject):
        """An input fed by the feeder thread; its own thread only ticks commits."""

        def run(self) -> None:
            while not finished.wait(TICK):
                self.commit()

    subjects = {name: Subject() for name in stream.names}
    tables = {}
    for name in stream.names:
        schema = pw.schema_builder(
            {c: pw.column_definition(dtype=int) for c in stream.columns[name]}
        )
        tables[name] = pw.io.python.read(
            subjects[name], schema=schema, autocommit_duration_ms=None, name=f"in_{name}"
        )
    result = fingerprint(view(args.query, tables), query.columns)
    latest: dict[str, int] = {"rows": 0, "checksum": 0}

    def on_change(key: object, row: dict, time: int, is_addition: bool) -> None:
        if is_addition:
            latest["rows"] = int(row["rows"])
            latest["checksum"] = int(row["checksum"])

    pw.io.subscribe(result, on_change=on_change)

    def feed() -> None:
        try:
            starts = dict.fromkeys(stream.names, 0)
            for lo, hi in stream.batches(args.batch):
                for name, data in stream.batch(lo, hi).items():
                    subject, cols = subjects[name], stream.columns[name]
                    for row in rows[name][starts[name] : starts[name] + len(data)]:
                        subject.next(**dict(zip(cols, row, strict=True)))
                    starts[name] += len(data)
                for subject in subjects.values():
                    subject.commit()
                emit.progress(hi)
        finally:
            finished.set()

    meter, _, total = run_while_feeding(lambda: pw.run(monitoring_level=pw.MonitoringLevel.NONE),
                                     feed)
    emit.progress(len(stream), force=True)
    emit.result(
        status="ok",
        strategy="cross join + filter",
        note=NOTE,
        events=len(stream),
        batches=len(stream.batches(args.batch)),
        batch_size=args.batch,
        seconds=round(total, 6),
        events_per_s=round(len(stream) / total, 1),
        view_rows=latest["rows"],
        fingerprint=dict(latest),
        pathway_version=pw.__version__,
        pathway_threads=os.environ.get("PATHWAY_THREADS", "1 (default)"),
        **meter.report(),
    )


def main() -> None:
    args = parse_args()
    emit = Emitter(args.query, "pathway", stream_length(QUERIES[args.query], args.scale))
    guarded(args.query, "pathway", lambda: run(args, emit))


if __name__ == "__main__":
    main()
