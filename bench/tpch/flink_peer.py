"""Apache Flink SQL in streaming mode as the JVM peer of :mod:`bench.tpch.loaded`.

The same view as a continuous query over the same change stream, as a Flink user would run
it: every table is a filesystem source in Debezium JSON (a change-data-capture log, the form
a Flink job reads from Kafka); the fact table's log holds its loaded rows and then the
changes (each update a ``d`` record for the old row and a ``c`` record for the new one), read
in order by one reader.  The view's changelog, retractions included, goes to a ``blackhole``
sink: Flink computes every output change but nobody consumes it, which favours Flink over
upkeep's subscriber (a Python callback receiving every change).

Flink has no transactions, so it is timed as whole jobs (PyFlink's local mini-cluster,
default settings: heap state, parallelism = the machine's cores, no mini-batching):
``T(load)`` runs the job over the loaded rows alone, ``T(load + changes)`` over the loaded
rows and then ``--changes`` changes, and changes/s = changes / (T(load + changes) -
T(load)), each T the median of ``--repeats`` runs after one warm-up run, so job start-up and
JIT warm-up cancel out.  The change stream is large (a million changes by default) so that
the difference is well above the run-to-run noise.  Memory is the JVM's peak resident set
while the first load job runs minus its resident set before any job (the mini-cluster runs
in the JVM PyFlink starts; its state lives only while a job runs).  A last, untimed job
counts the view's rows after every change (``SELECT COUNT(*)`` over the view, mini-batched),
to check the run.

Runs in its own interpreter (``bench/.venv-flink``: apache-flink pins py4j, protobuf and
pyarrow versions that conflict with upkeep's), started by ``bench.tpch.loaded --systems
flink``; by hand::

    bench/.venv-flink/bin/python -m bench.tpch.flink_peer --scale 0.1 --query QH
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

from bench.tpch.data import load_table
from bench.tpch.queries import QUERIES
from bench.tpch.schema import COLUMNS, column_names

FLINK_TYPES = {"BIGINT": "BIGINT", "INTEGER": "INT", "DOUBLE": "DOUBLE", "VARCHAR": "STRING",
               "DATE": "DATE"}


def _plain(value: object) -> object:
    return value.isoformat() if isinstance(value, dt.date) else value


def write_changelog(path: Path, names: list[str], rows, changes=()) -> None:
    """Debezium JSON: ``rows`` as inserts, then ``changes`` ((weight, row) pairs) in order."""
    with path.open("w") as out:
        for row in rows:
            after = dict(zip(names, map(_plain, row), strict=True))
            out.write(json.dumps({"before": None, "after": after, "op": "c"}) + "\n")
        for weight, row in changes:
            image = dict(zip(names, map(_plain, row), strict=True))
            record = ({"before": None, "after": image, "op": "c"} if weight > 0
                      else {"before": image, "after": None, "op": "d"})
            out.write(json.dumps(record) + "\n")


def _ddl(table: str, path: Path) -> str:
    cols = ", ".join(f"{name} {FLINK_TYPES[typ]}" for name, typ in COLUMNS[table])
    return (f"CREATE TEMPORARY TABLE {table} ({cols}) WITH ('connector' = 'filesystem', "
            f"'path' = '{path}', 'format' = 'debezium-json')")


def _jvm_rss_mb() -> float:
    """Resident memory of this process's child processes (the JVM PyFlink started), MiB."""
    me, total = str(os.getpid()), 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            if stat[stat.rindex(")") + 2:].split()[1] != me:
                continue
            pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
        except (OSError, ValueError):
            continue
        total += pages * os.sysconf("SC_PAGE_SIZE")
    return total / 2**20


class FlinkRunner:
    """One table environment; each job reads a set of table files and runs the view."""

    def __init__(self, sql: str):
        from pyflink.table import EnvironmentSettings, TableEnvironment

        self.env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
        self.sql = sql
        self.jobs = 0

    def _register(self, files: dict[str, Path]) -> None:
        """Tables named after their TPC-H names, in a fresh catalog database per job."""
        self.jobs += 1
        database = f"run{self.jobs}"
        self.env.execute_sql(f"CREATE DATABASE {database}")
        self.env.use_database(database)
        for table, path in files.items():
            self.env.execute_sql(_ddl(table, path))

    def time_view(self, files: dict[str, Path]) -> tuple[float, float]:
        """Seconds from submitting the view's job to its end (every output change made), and
        the JVM's peak resident memory (MiB) sampled while it ran."""
        self._register(files)
        columns = self.env.sql_query(self.sql).get_schema()
        cols = ", ".join(f"`{n}` {t}" for n, t in zip(columns.get_field_names(),
                                                        columns.get_field_data_types(),
                                                        strict=True))
        self.env.execute_sql(f"CREATE TEMPORARY TABLE sink ({cols}) WITH ('connector' = 'blackhole')")
        peak, done = [0.0], threading.Event()

        def sample() -> None:
            while not done.wait(0.2):
                peak[0] = max(peak[0], _jvm_rss_mb())

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        t0 = time.perf_counter()
        self.env.execute_sql(f"INSERT INTO sink {self.sql}").wait()
        seconds = time.perf_counter() - t0
        done.set()
        sampler.join()
        return seconds, max(peak[0], _jvm_rss_mb())

    def count_rows(self, files: dict[str, Path]) -> int:
        """The view's row count after the whole log (the count's last changelog value)."""
        self._register(files)
        config = self.env.get_config()
        for key, value in (("table.exec.mini-batch.enabled", "true"),
                           ("table.exec.mini-batch.allow-latency", "5 s"),
                           ("table.exec.mini-batch.size", "1000000")):
            config.set(key, value)  # one count update per few seconds, not one per row
        last = 0
        with self.env.execute_sql(f"SELECT COUNT(*) FROM ({self.sql})").collect() as rows:
            for row in rows:
                if row.get_row_kind().name in ("INSERT", "UPDATE_AFTER"):
                    last = row[0]
        return last


def run_flink(scale: float, query_name: str, changes: int, seed: int, workdir: Path,
              repeats: int = 3) -> dict:
    """Write the logs, time the load and load+changes jobs, measure the JVM, count rows."""
    from bench.tpch.loaded import FACT, PRICE, updates

    query = QUERIES[query_name]
    load_files: dict[str, Path] = {}
    t0 = time.perf_counter()
    for table in query.tables:
        arrow = load_table(scale, table)
        rows = [tuple(r.values()) for r in arrow.to_pylist()]
        path = workdir / f"{table}.json"
        write_changelog(path, column_names(table), rows)
        load_files[table] = path
        if table == FACT:
            stream = updates(rows, changes, column_names(FACT).index(PRICE), seed)
            changed = workdir / f"{table}_changed.json"
            write_changelog(changed, column_names(table), rows, stream)
    prepare_s = time.perf_counter() - t0
    change_files = {**load_files, FACT: workdir / f"{FACT}_changed.json"}
    runner = FlinkRunner(query.sql)
    jvm_before = _jvm_rss_mb()
    _, load_peak = runner.time_view(load_files)  # also warms the JVM up
    load_runs, change_runs = [], []
    for _ in range(repeats):
        load_runs.append(runner.time_view(load_files)[0])
        seconds, change_peak = runner.time_view(change_files)
        change_runs.append(seconds)
    load_s, with_changes = statistics.median(load_runs), statistics.median(change_runs)
    change_s = with_changes - load_s
    return {
        "status": "ok",
        "prepare_seconds": round(prepare_s, 1),
        "load_seconds": round(load_s, 2),
        "load_runs": [round(t, 2) for t in load_runs],
        "with_changes_seconds": round(with_changes, 2),
        "with_changes_runs": [round(t, 2) for t in change_runs],
        "streamed_changes": len(stream),
        "stream_per_s": round(len(stream) / change_s) if change_s > 0 else None,
        "loaded_mb": round(load_peak - jvm_before, 1),
        "end_mb": round(change_peak - jvm_before, 1),
        "view_rows": runner.count_rows(change_files),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.1)
    parser.add_argument("--query", choices=sorted(QUERIES), default="QH")
    parser.add_argument("--changes", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="upkeep-flink-") as workdir:
        result = run_flink(args.scale, args.query, args.changes, args.seed, Path(workdir),
                           args.repeats)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
