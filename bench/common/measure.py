"""Process memory and wall-clock measurement for the runner subprocesses.

Peak memory is the process's resident-set high-water mark.  On Linux,
``getrusage(RUSAGE_SELF).ru_maxrss`` survives ``fork`` + ``exec``: a fresh runner
starts with the orchestrator's RSS as its ``ru_maxrss``.  So the peak is read from
``VmHWM`` in ``/proc/self/status`` (the same high-water mark, but of this process's
own address space) and ``ru_maxrss`` is reported next to it.  A runner takes a
baseline after its imports and after loading the stream, so ``delta_mb`` is the
memory the system under test added on top of the shared input data.
"""

from __future__ import annotations

import gc
import os
import resource
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field


def ru_maxrss_mb() -> float:
    """``ru_maxrss`` of this process in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def peak_rss_mb() -> float:
    """High-water resident set size of this process's address space in MiB."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return ru_maxrss_mb()


def current_rss_mb() -> float:
    """Current resident set size of this process in MiB (from /proc/self/statm)."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
    except OSError:
        return float("nan")
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def settled_rss_mb() -> float:
    """:func:`current_rss_mb` once Arrow's memory pool has handed back what it holds unused:
    the pool keeps the buffers the harness read its Parquet input into for reuse, memory
    neither system under test holds."""
    import sys

    pyarrow = sys.modules.get("pyarrow")
    if pyarrow is not None:
        pyarrow.default_memory_pool().release_unused()
    return current_rss_mb()


@dataclass
class MemoryMeter:
    """Baseline-then-peak memory measurement of one process."""

    baseline_peak_mb: float = 0.0
    baseline_current_mb: float = 0.0
    extra: dict[str, float] = field(default_factory=dict)

    def baseline(self) -> None:
        """Record the baseline (call after imports and data loading)."""
        gc.collect()
        self.baseline_peak_mb = peak_rss_mb()
        self.baseline_current_mb = current_rss_mb()

    def report(self) -> dict[str, float]:
        """Baseline, peak and delta (peak minus baseline high-water mark) in MiB."""
        peak = peak_rss_mb()
        return {
            "baseline_mb": round(self.baseline_peak_mb, 1),
            "baseline_current_mb": round(self.baseline_current_mb, 1),
            "peak_mb": round(peak, 1),
            "delta_mb": round(max(0.0, peak - self.baseline_peak_mb), 1),
            "end_current_mb": round(current_rss_mb(), 1),
            "ru_maxrss_mb": round(ru_maxrss_mb(), 1),
        }


class Stopwatch:
    """Accumulates time only while running (``with sw:`` blocks)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._start = 0.0

    def __enter__(self) -> Stopwatch:
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds += time.perf_counter() - self._start


def run_while_feeding(run: Callable[[], None], feed: Callable[[], None]
                      ) -> tuple[MemoryMeter, float, float]:
    """A memory baseline, then ``run()`` (e.g. ``pw.run``) while a thread calls ``feed()``:
    the meter, the ``perf_counter`` at the start and the seconds ``run()`` took (the Pathway
    runners' timing)."""
    meter = MemoryMeter()
    meter.baseline()
    feeder = threading.Thread(target=feed, name="feeder", daemon=True)
    t0 = time.perf_counter()
    feeder.start()
    run()
    return meter, t0, time.perf_counter() - t0


def throughput(events: int, inserts: int, deletes: int, phases: dict) -> dict[str, object]:
    """The result fields every runner reports: counts, phase times and rates."""
    ins_s, del_s = phases["insert"].seconds, phases["delete"].seconds
    return {
        "events": events,
        "inserts": inserts,
        "deletes": deletes,
        "seconds": round(ins_s + del_s, 3),
        "insert_seconds": round(ins_s, 3),
        "delete_seconds": round(del_s, 3),
        "updates_per_s": round(events / (ins_s + del_s), 1),
        "insert_per_s": round(inserts / ins_s, 1) if ins_s else None,
        "delete_per_s": round(deletes / del_s, 1) if del_s else None,
    }


def distribution(values: list[float], scale: float = 1.0, digits: int = 2) -> dict[str, float]:
    """Count, mean, median, p90, p99, max and total of ``values`` (each times ``scale``).

    For per-update latencies (``scale=1e6`` gives microseconds) and operation counts.
    """
    if not values:
        return {"n": 0}
    xs = sorted(v * scale for v in values)
    n = len(xs)

    def pct(p: float) -> float:
        return round(xs[min(n - 1, int(p * n))], digits)

    return {
        "n": n,
        "mean": round(sum(xs) / n, digits),
        "median": pct(0.5),
        "p90": pct(0.9),
        "p99": pct(0.99),
        "max": round(xs[-1], digits),
        "total": round(sum(xs), digits),
    }
