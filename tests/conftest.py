"""Shared pytest configuration for the upkeep test suite."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

# Every JVM the suite starts (the shared SparkSession, `upkeep run` and `spark-submit`
# subprocesses, local-cluster executors) lives for minutes and runs tiny micro-batches:
# there, the client compiler alone and the serial collector cost 30-40% less CPU than
# the JVM's server defaults (docs/design.md, "The test suite").  The client compiler's
# default code cache (48 MB) fills in the shared session's ten minutes of queries, so it
# gets the server default's room.  Production sessions keep the defaults.  Set here,
# before any JVM starts, so child processes inherit it.
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ReservedCodeCacheSize=256m"
if JVM_OPTIONS not in os.environ.get("JAVA_TOOL_OPTIONS", ""):
    os.environ["JAVA_TOOL_OPTIONS"] = " ".join(
        filter(None, [os.environ.get("JAVA_TOOL_OPTIONS"), JVM_OPTIONS]))

# Spark's Python workers start from the interpreter's installed PySpark instead of Spark's
# pyspark.zip, which Python recompiles at every process start (tests/spark_worker_python;
# docs/design.md, "The test suite").  Child processes (`upkeep run`, `spark-submit`)
# inherit both variables.
os.environ.setdefault("UPKEEP_TEST_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_PYTHON", str(Path(__file__).with_name("spark_worker_python")))

# No per-example deadline anywhere: the suite must not fail by timing on a busy machine.
settings.register_profile("upkeep", deadline=None)
settings.load_profile("upkeep")


def _first_chunk(items: int, workers: int) -> int:
    """How many tests pytest-xdist 3.8's ``--dist load`` hands each worker before any has
    finished one (``LoadScheduling.schedule``): a quarter of a worker's share."""
    return max(items // workers // 4, 2)


def _uses_shared_session(item: pytest.Item) -> bool:
    """Whether ``item`` runs on its worker's SparkSession (the ``spark`` fixture, or a
    ``spark`` parameter that asks for it)."""
    return ("spark" in getattr(item, "fixturenames", ())
            or "spark" in item.name.partition("[")[2].rstrip("]").split("-"))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Order the suite for ``make test`` (``-n auto --dist load``, two workers on CI) so
    that the Spark tests, the longest run of work, start at once and run beside the rest
    of the suite, one SparkSession's worth per worker at a time (two sessions' tests at
    once cost a sixth more CPU than beside local tests; the suite is CPU-bound):

    - the first worker's first chunk (:func:`_first_chunk`) starts with every test on the
      shared session (one session, started on first use), then local tests;
    - the second worker's first chunk starts with the Spark tests that start applications
      of their own (a killed ``upkeep run``, ``spark-submit`` to ``local-cluster``, a
      killed executor) and the other tests of the Spark files, then local tests;
    - the rest of the suite goes to whichever worker is free.

    Until 2026-12-02 the Spark tests simply came first: xdist's first chunk (about 490
    tests) handed all of them, the applications' too, to one worker, which ran two
    minutes longer than the other.  Run without workers, or with chunks too small to
    hold the shared-session tests, they just come first."""
    shared = [i for i in items if _uses_shared_session(i)]
    own = [i for i in items if i.path.name.startswith("test_spark") and i not in shared]
    first = set(shared) | set(own)
    rest = [i for i in items if i not in first]
    workers = getattr(config, "workerinput", {}).get("workercount", 1)
    chunk = _first_chunk(len(items), workers)
    if workers < 2 or len(shared) > chunk or len(own) > chunk:
        items[:] = shared + own + rest
        return
    fill = chunk - len(shared)
    items[:] = shared + rest[:fill] + own + rest[fill:]


def pytest_terminal_summary(terminalreporter) -> None:
    """Print which forced strategies the engine declared not applicable."""
    oracle = sys.modules.get("oracle")
    table = getattr(oracle, "APPLICABILITY", None)
    if not table:
        return
    na = sorted((q, s, note) for (q, s), (ok, note) in table.items() if not ok)
    odd = sorted(
        (q, note) for (q, s), (ok, note) in table.items() if s is None and "error" in note.lower()
    )
    tr = terminalreporter
    tr.section("upkeep strategy applicability")
    tr.write_line(f"{len(na)} forced (query, strategy) combinations not applicable")
    for q, s, note in na:
        tr.write_line(f"  n/a  {q:28s} {s:8s} {note[:90]}")
    for q, note in odd:
        tr.write_line(f"  AUTO {q:28s} {note[:100]}")


@pytest.fixture(scope="session")
def spark():
    """This worker's SparkSession, which its tests share (local[2]; started on first use)."""
    from upkeep.spark import spark_session

    return spark_session("local[2]", config={"spark.sql.shuffle.partitions": "2"})

