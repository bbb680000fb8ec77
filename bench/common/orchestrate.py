"""Start one runner subprocess per configuration and collect its JSON result.

Each runner is its own process, so its ``ru_maxrss`` is the peak memory of that
configuration alone.  Progress lines are forwarded to a callback; the process is
killed (by its own pid) when it exceeds the time limit or, if one is given, when its
resident set grows past a memory limit (so one configuration cannot exhaust the
machine for the others).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from bench.common.environment import REPO, machine, now, versions

MEMORY_POLL_S = 0.2

RUNNER_SCRIPTS: dict[str, str] = {
    "dyn": "bench.tpch.run_upkeep",
    "general": "bench.tpch.run_upkeep",
    "tables": "bench.tpch.run_upkeep",
    "duckdb": "bench.tpch.run_duckdb",
    "pathway": "bench.tpch.run_pathway",
}


def run_each(configs: Sequence[Any], describe: Callable[[Any], str],
             execute: Callable[[Any, Callable[[int, int], None]], dict[str, Any]],
             one_line: Callable[[dict[str, Any]], str], console: Console) -> list[dict[str, Any]]:
    """Run the configurations in order under a progress display: ``execute(config,
    on_progress)`` gives each result, printed as ``one_line(result)`` when it ends."""
    results = []
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        overall = progress.add_task("all configurations", total=len(configs))
        for config in configs:
            task = progress.add_task(describe(config), total=None)

            def on_progress(done: int, total: int, task: int = task) -> None:
                progress.update(task, completed=done, total=total or None)

            result = execute(config, on_progress)
            results.append(result)
            progress.remove_task(task)
            progress.advance(overall)
            console.print(one_line(result))
    return results


def save_results(path: Path, data: dict[str, Any]) -> None:
    """The results of a whole run as JSON (the input of the report writers)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")


def run_meta(module: str, argv: list[str] | None, started: float,
             results: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    """What every results file says about its run: the command that reproduces it
    (``python -m module ...`` from the repository root), the date, the run's own
    parameters (``fields``), the machine, versions and total time."""
    return {
        "command": shlex.join(["python", "-m", module,
                               *(sys.argv[1:] if argv is None else argv)]),
        "date": now(),
        **fields,
        "machine": machine(),
        "versions": versions(results),
        "total_seconds": round(time.perf_counter() - started, 1),
    }


def publish(data: dict[str, Any], out: Path, print_summary: Callable[[dict[str, Any]], None],
            write_docs: Callable[[], str] | None, console: Console) -> None:
    """Save a run's results, print its summary and (unless ``write_docs`` is None) rewrite
    its section of docs/benchmarks.md."""
    save_results(out, data)
    console.print(f"wrote {out}")
    print_summary(data)
    if write_docs is not None:
        console.print(write_docs())


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
    """Run one TPC-H configuration and return its result record (never raises)."""
    cmd = [
        python,
        "-m", RUNNER_SCRIPTS[system],
        "--stream",
        str(stream_dir),
        "--query",
        query,
        "--system",
        system,
        "--batch",
        str(batch),
    ]
    return run_command(cmd, {"query": query, "system": system}, timeout_s, log_path, on_progress)


def run_command(
    cmd: list[str],
    identity: dict[str, Any],
    timeout_s: float,
    log_path: Path,
    on_progress: Callable[[int, int], None],
    memory_limit_mb: float | None = None,
) -> dict[str, Any]:
    """Run one runner command and return its result record (never raises).

    ``identity`` (e.g. query and system) is copied into the record when the runner
    reports nothing itself (timeout, memory limit, crash), with the last progress it
    reported (``progress``: done, total) so a run that did not finish still says how far
    it got.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    result: dict[str, Any] | None = None
    progress: tuple[int, int] | None = None
    with open(log_path, "w") as log:
        try:
            proc = subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=log, text=True, cwd=REPO, bufsize=1
            )
        except OSError as exc:
            return {**identity, "status": "error", "error": f"cannot start {cmd[0]}: {exc}",
                    "process_wall_seconds": 0.0, "log": str(log_path)}
        killed = threading.Event()
        watch = _MemoryWatch(proc, memory_limit_mb)

        def kill() -> None:
            killed.set()
            proc.kill()

        timer = threading.Timer(timeout_s, kill)
        timer.start()
        watch.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                message = _parse(line)
                if message is None:
                    continue
                if message.get("type") == "progress":
                    progress = (int(message["done"]), int(message["total"]))
                    on_progress(*progress)
                elif message.get("type") == "result":
                    result = message
            proc.wait()
        finally:
            timer.cancel()
            watch.stop()
    wall = round(time.perf_counter() - started, 1)
    if result is None:
        if watch.exceeded:
            status = "memory limit"
            detail = (
                f"resident set reached {watch.peak_mb:,.0f} MB, over the limit of "
                f"{memory_limit_mb:,.0f} MB"
            )
        elif killed.is_set():
            status, detail = "timeout", f"exceeded {timeout_s:.0f}s"
        else:
            status, detail = "crashed", f"exit code {proc.returncode}"
        result = {**identity, "status": status, "error": detail, "progress": progress}
        result["stderr_tail"] = _tail(log_path)
    result.pop("type", None)
    result["process_wall_seconds"] = wall
    if memory_limit_mb is not None:
        result["watched_peak_rss_mb"] = round(watch.peak_mb, 1)
    # other processes competing for the CPUs distort timings; keep the evidence
    result["load_avg_1min"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    result["log"] = str(log_path)
    return result


class _MemoryWatch:
    """Polls a child's resident set and kills the child above ``limit_mb`` (if set)."""

    def __init__(self, proc: subprocess.Popen, limit_mb: float | None) -> None:
        self.proc = proc
        self.limit_mb = limit_mb
        self.peak_mb = 0.0
        self.exceeded = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memory-watch", daemon=True)

    def start(self) -> None:
        if self.limit_mb is not None:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        status = Path(f"/proc/{self.proc.pid}/status")
        while not self._stop.wait(MEMORY_POLL_S):
            rss = _rss_mb(status)
            if rss is None:
                return
            self.peak_mb = max(self.peak_mb, rss)
            if self.limit_mb is not None and rss > self.limit_mb:
                self.exceeded = True
                self.proc.kill()
                return


def _rss_mb(status: Path) -> float | None:
    try:
        for line in status.read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except (OSError, ValueError):
        return None
    return None


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
