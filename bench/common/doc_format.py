"""Formatting and section surgery shared by the benchmark reports in ``docs/benchmarks.md``.

``bench/tpch/run.py`` writes the TPC-H part (the top of the file); ``theta_plot.py``,
``spark_plot.py`` and ``recursive_bench.py`` each own one ``## `` section below it, which
every writer keeps.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def is_ok(result: dict[str, Any] | None) -> bool:
    """A configuration that ran to the end (not a timeout, memory limit or error)."""
    return bool(result) and result.get("status") == "ok"


def ratio_of(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den <= 0:
        return None
    return num / den


def fmt_number(x: float | None, digits: int = 0) -> str:
    return "–" if x is None else f"{x:,.{digits}f}"


def fmt(x: float | None, spec: str) -> str:
    """``format(x, spec)``, or a dash for a missing value."""
    return "–" if x is None else format(x, spec)


def load_range(loads: list[float]) -> str:
    """The range of 1-minute load averages seen during a run (other work distorts times)."""
    return f"{min(loads):.1f}–{max(loads):.1f}" if loads else "–"


def save_figure(fig, path: Path) -> None:
    """Write a matplotlib figure next to the docs and release it."""
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def fmt_times(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:.2f}×" if x < 10 else f"{x:,.0f}×"


def replace_section(path: Path, heading: str, text: str, before: str | None = None,
                    owns: tuple[str, ...] = ()) -> None:
    """Put ``text`` (starting with ``heading``) in place of that section, which runs to the
    next ``## `` heading not in ``owns`` (the further sections the same writer writes); a
    new section goes before the ``before`` heading, else at the end.  Every other section
    stays as it is."""
    doc = path.read_text() if path.exists() else ""
    text = text.rstrip("\n") + "\n"
    at = doc.find(heading)
    if at >= 0:
        end = doc.find("\n## ", at + len(heading))
        while end >= 0 and any(doc.startswith(h, end + 1) for h in owns):
            end = doc.find("\n## ", end + 1)
        doc = doc[:at] + text + ("" if end < 0 else "\n" + doc[end + 1:])
    elif before is not None and doc.find(before) >= 0:
        at = doc.find(before)
        doc = doc[:at] + text + "\n" + doc[at:]
    else:
        doc = (doc.rstrip("\n") + "\n\n" if doc else "") + text
    path.write_text(doc)
