"""Start one runner subprocess per (query, system) and collect its JSON result.

Each runner is its own process, so its ``ru_maxrss`` is the peak memory of that
configuration alone.  Progress lines are forwarded to a callback; the process is
killed (by its own pid) when it exceeds the time limit.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent

RUNNER_SCRIPTS: dict[str, str] = {
    "dyn": "run_upkeep.py",
    "general": "run_upkeep.py",
    "tables": "run_upkeep.py",
    "duckdb": "run_duckdb.py",
    "pathway": "run_pathway.py",
}


def run_config(
    python: str,
    system: str,
    query: str,
    stream_dir: Path,
    timeout_s: float,
    log_path: Path,
    on_progress: Callable[[int, int], None],
    batch: int = 1000,
) -> dict[str, Any]:
    """Run one configuration and return its result record (never raises)."""
    cmd = [
        python,
        str(BENCH_DIR / RUNNER_SCRIPTS[system]),
        "--stream",
        str(stream_dir),
        "--query",
        query,
        "--system",
        system,
        "--batch",
        str(batch),
    ]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    result: dict[str, Any] | None = None
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=log, text=True, cwd=BENCH_DIR, bufsize=1
        )
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            proc.kill()

        timer = threading.Timer(timeout_s, kill)
        timer.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                message = _parse(line)
                if message is None:
                    continue
                if message.get("type") == "progress":
                    on_progress(int(message["done"]), int(message["total"]))
                elif message.get("type") == "result":
                    result = message
            proc.wait()
        finally:
            timer.cancel()
    wall = round(time.perf_counter() - started, 1)
    if result is None:
        status = "timeout" if killed.is_set() else "crashed"
        detail = f"exceeded {timeout_s:.0f}s" if killed.is_set() else f"exit code {proc.returncode}"
        result = {"query": query, "system": system, "status": status, "error": detail}
        result["stderr_tail"] = _tail(log_path)
    result.pop("type", None)
    result["process_wall_seconds"] = wall
    # other processes competing for the CPUs distort timings; keep the evidence
    result["load_avg_1min"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    result["log"] = str(log_path)
    return result


def _parse(line: str) -> dict[str, Any] | None:
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        return None


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
