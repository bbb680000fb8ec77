"""Bar charts of updates/s and memory per query and system (``docs/bench_tpch.png``).

Needs matplotlib (the ``bench`` extra); without it the plot is skipped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.common.doc_format import save_figure
from bench.tpch.report import SYSTEM_LABELS, index


def write_plot(results: list[dict[str, Any]], path: Path) -> bool:
    """Draw the chart to ``path``; return False when matplotlib is unavailable."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False

    by = index(results)
    queries = list(dict.fromkeys(r["query"] for r in results))
    systems = [s for s in SYSTEM_LABELS if any((q, s) in by for q in queries)]
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    width = 0.8 / max(1, len(systems))
    metrics = (("updates_per_s", "updates/s (log)"), ("delta_mb", "peak − baseline MB (log)"))
    for ax, (metric, title) in zip(axes, metrics, strict=True):
        for i, system in enumerate(systems):
            values = []
            for q in queries:
                r = by.get((q, system))
                ok = r is not None and r.get("status") == "ok"
                values.append(max(float(r[metric]), 0.1) if ok else 0.0)
            xs = [j + (i - (len(systems) - 1) / 2) * width for j in range(len(queries))]
            ax.bar(xs, values, width, label=SYSTEM_LABELS[system])
        ax.set_xticks(range(len(queries)), queries)
        ax.set_yscale("log")
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("TPC-H single-row insert/delete streams")
    fig.tight_layout()
    save_figure(fig, path)
    return True
