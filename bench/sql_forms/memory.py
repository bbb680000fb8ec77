"""What the ordered SQL forms hold: a view's resident memory and build time over loaded orders.

Top-k, per-group top-k (``ROW_NUMBER``) and window (``LAG``) views keep every row of their
input in sorted lists, ordered by the ORDER BY and then by the rows' own values
(``upkeep.topk.row_order``); this measures what that state costs.  Each view is built in
its own process over TPC-H ``orders`` loaded first; reported: the build's seconds and the
resident memory it added (``current_rss_mb`` after a collection, before and after).

Usage::

    python -m bench.sql_forms.memory [--scale 0.1] [--views topk,per_group,lag]
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import time

VIEWS = {
    "topk": "SELECT o_orderkey, o_totalprice FROM orders ORDER BY o_totalprice DESC LIMIT 10",
    "per_group": "SELECT * FROM (SELECT o_custkey, o_orderkey, o_totalprice, row_number() "
                 "OVER (PARTITION BY o_custkey ORDER BY o_totalprice DESC) AS rn FROM orders) "
                 "WHERE rn <= 3",
    "lag": "SELECT o_custkey, o_orderkey, o_totalprice, o_totalprice - lag(o_totalprice) "
           "OVER (PARTITION BY o_custkey ORDER BY o_orderdate, o_orderkey) AS change "
           "FROM orders",
}


def measure(view: str, scale: float) -> dict:
    """Load ``orders``, build ``view``; its build seconds and the memory it added."""
    import upkeep
    from bench.common.measure import current_rss_mb
    from bench.tpch.data import generate, iter_table
    from bench.tpch.schema import create_table_sql

    generate(scale, ("orders",))
    db = upkeep.connect()
    db.execute(create_table_sql("orders"))
    for chunk in iter_table(scale, "orders", 1_000_000):
        with db.transaction():
            db.insert("orders", chunk)
    gc.collect()
    before = current_rss_mb()
    t0 = time.perf_counter()
    db.create_view("v", VIEWS[view])
    build_s = time.perf_counter() - t0
    gc.collect()
    return {"view": view, "scale": scale, "build_s": round(build_s, 2),
            "view_mb": round(current_rss_mb() - before, 1), "rows": len(db.view("v").rows())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.1)
    parser.add_argument("--views", default=",".join(VIEWS))
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a child process's view
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.scale)))
        return
    for view in args.views.split(","):
        if view not in VIEWS:
            parser.error(f"unknown view {view!r}: one of {', '.join(VIEWS)}")
        out = subprocess.run([sys.executable, "-m", "bench.sql_forms.memory", "--scale",
                              str(args.scale), "--one", view],
                             check=True, capture_output=True, text=True).stdout
        print(out.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
