"""Plots of the serving benchmarks for docs/benchmarks.md: the server's bytes sent and the
p99 delta latency per layout (``bench/results/service.json``), and the planner's time and
share of subscriptions fed by others per size and fan-out bound
(``bench/results/dissemination_planner.json``).

    python -m bench.service.plot
"""

from __future__ import annotations

import json
from pathlib import Path

from bench.common.doc_format import save_figure

ROOT = Path(__file__).resolve().parents[2]
SERVICE = ROOT / "bench" / "results" / "service.json"
PLANNER = ROOT / "bench" / "results" / "dissemination_planner.json"
SERVICE_PLOT = ROOT / "docs" / "img" / "service.png"
PLANNER_PLOT = ROOT / "docs" / "img" / "dissemination_planner.png"


def plot_service() -> None:
    import matplotlib.pyplot as plt

    results = json.loads(SERVICE.read_text())["results"]
    layouts = list(dict.fromkeys(r["layout"] for r in results))
    sizes = sorted({r["subscribers"] for r in results})
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    width = 0.8 / len(layouts)
    for i, layout in enumerate(layouts):
        rows = {r["subscribers"]: r for r in results if r["layout"] == layout}
        xs = [j + i * width for j in range(len(sizes))]
        left.bar(xs, [rows[n]["server_bytes_sent"] / 1024 for n in sizes], width,
                 label=layout)
        # a run that delivered nothing has no latency: no bar
        right.bar(xs, [rows[n]["latency_p99_ms"] or 0 for n in sizes], width, label=layout)
    for ax, title in ((left, "server KiB sent"), (right, "p99 delta latency, ms")):
        ax.set_xticks([j + width * (len(layouts) - 1) / 2 for j in range(len(sizes))],
                      [f"{n:,} subscribers" for n in sizes])
        ax.set_title(title)
        ax.legend()
    save_figure(fig, SERVICE_PLOT)


def plot_planner() -> None:
    import matplotlib.pyplot as plt

    runs = json.loads(PLANNER.read_text())["runs"]
    sizes = [r["subscriptions"] for r in runs]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot(sizes, [r["seconds"]["end_to_end"] for r in runs], marker="o")
    left.axhline(300, linestyle="--", color="grey", label="target: 5 min")
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("subscriptions")
    left.set_title("planner end to end, s")
    left.legend()
    for bound in runs[0]["bounds"]:
        right.plot(sizes, [100 * r["bounds"][bound]["fed_by_others"] for r in runs],
                   marker="o", label=f"B_out {'unbounded' if bound == 'None' else bound}")
    right.axhline(94, linestyle="--", color="grey", label="target: 94%")
    right.set_xscale("log")
    right.set_xlabel("subscriptions")
    right.set_title("fed by other subscriptions, %")
    right.legend()
    save_figure(fig, PLANNER_PLOT)


if __name__ == "__main__":
    import argparse

    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    plot_service()
    plot_planner()
