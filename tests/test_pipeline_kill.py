"""`upkeep run` killed with SIGKILL at random points and restarted until it finishes:
after every kill the committed state is exactly a prefix of the stream (as far as the stored
offset says), and the final tables, views and sinks equal an uninterrupted run's."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter

from test_pipeline_support import (
    VIEW_KINDS,
    WRITERS,
    Stream,
    expected_views,
    model_of,
    read_all_sinks,
    write_pipeline,
)

import upkeep


def committed_tables(state) -> tuple[int, dict[str, Counter]]:
    with upkeep.connect(state) as db:
        applied = db.metadata().get("applied", 0)
        tables = {t: Counter(db.execute(f"SELECT * FROM {t}").fetchall()) for t in db.tables()}
    return applied, tables


def sink_bytes(out) -> int:
    """How much the jsonl sinks hold: grows with every delivered batch."""
    return sum(p.stat().st_size for p in out.glob("*.jsonl")) if out.exists() else 0


def test_kill_nine_at_random_points_then_resume_to_the_end(tmp_path):
    stream = Stream(seed=11).generate(3000)
    WRITERS["jsonl"](tmp_path / "changes", stream.records, files=6)
    path = write_pipeline(tmp_path, state_dir="state", rows_per_batch=20,
                          sinks={view: ["duckdb", "jsonl", "parquet-deltas"] for view in VIEW_KINDS})
    rng = random.Random(3)
    command = [sys.executable, "-m", "upkeep.cli", "run", str(path)]
    kills = 0
    out = tmp_path / "out"
    for _ in range(40):
        before = sink_bytes(out)
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if kills < 8:  # kill once a random amount of output was delivered: mid-run however
            until = before + rng.randint(1, 6_000)  # fast or slow the machine is
            deadline = time.monotonic() + 120
            while (proc.poll() is None and sink_bytes(out) < until
                   and time.monotonic() < deadline):
                time.sleep(rng.uniform(0.0, 0.02))
        if proc.poll() is None and kills < 8:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            kills += 1
            applied, tables = committed_tables(tmp_path / "state")
            prefix = model_of(stream.records[:applied])
            # killed before the first commit, the state holds no tables yet: as empty ones
            committed = {t: +rows for t, rows in tables.items() if rows}
            assert committed == {t: rows for t, rows in prefix.items() if rows}, applied
            continue
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode()
        break
    assert kills >= 3, "the stream ended before the process could be killed a few times"
    applied, tables = committed_tables(tmp_path / "state")
    assert applied == len(stream.records)
    assert {t: +rows for t, rows in tables.items()} == stream.model
    expected = expected_views(stream.model)
    for view in VIEW_KINDS:
        for kind, rows in read_all_sinks(tmp_path / "out", view).items():
            assert rows == expected[view], f"{kind} sink of {view} after {kills} kills"
