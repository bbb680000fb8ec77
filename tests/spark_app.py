"""A Spark application of its own for a test (a ``local-cluster`` master, or settings the
suite's shared ``local[2]`` session cannot take): ``job`` runs as a script in a child
process with ``work`` as its argument and writes ``result.json`` there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def run_spark_app(job: str, work: Path, timeout: float = 600) -> dict:
    """Run ``job`` (the script's text) in its own interpreter; its ``result.json``."""
    (work / "job.py").write_text(job)
    env = dict(os.environ)  # PYSPARK_PYTHON from tests/conftest.py
    done = subprocess.run([sys.executable, str(work / "job.py"), str(work)], env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads((work / "result.json").read_text())
