"""Where a benchmark ran: machine, library versions, git revision, Pathway interpreter.

Shared by the command-line entry points (``run.py``, ``gcq_bench.py``,
``triangle_bench.py``) so every result file describes its run the same way.
"""

from __future__ import annotations

import datetime
import importlib.util
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent.parent  # bench/
REPO = BENCH_DIR.parent


def peer_python(module: str, venv: str) -> str | None:
    """Interpreter that can import a peer's ``module``: ``bench/<venv>`` (peers whose
    pins conflict with upkeep's live there, see bench/README.md), else this interpreter if
    it can import the module, else None."""
    local = BENCH_DIR / venv / "bin" / "python"
    if local.exists():
        return str(local)
    if importlib.util.find_spec(module) is not None:
        return sys.executable
    return None


def pathway_python(explicit: str | None) -> str | None:
    """Interpreter to run a Pathway runner with: ``explicit``, else
    ``bench/.venv-pathway`` (pathway 0.33.0 pins ``pyarrow<26``), else this one."""
    return explicit or peer_python("pathway", ".venv-pathway")


def flink_python() -> str | None:
    """Interpreter with PyFlink: ``bench/.venv-flink`` (apache-flink 2.3.0 pins py4j,
    protobuf and pyarrow), else this one."""
    return peer_python("pyflink", ".venv-flink")


def git_rev() -> str:
    """Short HEAD revision, marked when ``src/`` has uncommitted changes."""
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
        rev = out.stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "src"],
            capture_output=True,
            text=True,
            check=True,
        )
        return rev + ("+uncommitted src changes" if dirty.stdout.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "no commit"


def machine() -> str:
    """CPU count, RAM and platform in one line."""
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kib = int(f.readline().split()[1])
        mem = f", {kib / 2**20:.0f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    return f"{os.cpu_count()} CPUs{mem}, {platform.system()} {platform.machine()}"


def versions(results: list[dict[str, Any]]) -> str:
    """Python, DuckDB, pyarrow, upkeep (with git revision) and, if measured, Pathway."""
    import duckdb
    import pyarrow as pa

    parts = [f"Python {platform.python_version()}", f"duckdb {duckdb.__version__}"]
    parts.append(f"pyarrow {pa.__version__}")
    try:
        from importlib.metadata import version

        parts.append(f"upkeep {version('upkeep')} (git {git_rev()})")
    except Exception:  # upkeep metadata missing is not fatal for a report
        parts.append(f"upkeep (git {git_rev()})")
    pw = next((r.get("pathway_version") for r in results if r.get("pathway_version")), None)
    if pw:
        parts.append(f"pathway {pw}")
    return ", ".join(parts)


def now() -> str:
    """Local date and time with the time zone, as the reports print it."""
    return datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
