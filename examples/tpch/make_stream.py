"""Turn TPC-H tables (CSV from tpchgen-cli) into a change stream of JSON-lines files.

The stream replays the business in order-date order: first the nations, customers and
suppliers, then each order with its line items as inserts.  Interleaved, later in the
stream, come the changes a real order system sees:

- status changes: an order is inserted open (``O``) and later updated to its final status;
- price changes: a line item's price and discount are corrected (update);
- delivery delays: a line item's receipt date moves later, often past its commit date
  (update; this is what the ``late_shipments`` view counts);
- cancellations: an order and all its line items are deleted.

Plus two deliberately bad records (a delete of an order that does not exist and a line
item with a malformed price) to show ``on_error = "dead-letter"``.  Everything is seeded,
so the same TPC-H data gives the same stream.  Usable as a module (:func:`make_stream`) or
as ``python make_stream.py TPCH_CSV_DIR OUT_DIR``.
"""

from __future__ import annotations

import csv
import datetime as dt
import heapq
import json
import random
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

RECORDS_PER_FILE = 5000
_INT = {"n_nationkey", "n_regionkey", "c_custkey", "c_nationkey", "s_suppkey", "s_nationkey",
        "o_orderkey", "o_custkey", "o_shippriority", "l_orderkey", "l_partkey", "l_suppkey",
        "l_linenumber"}
_DECIMAL = {"c_acctbal", "s_acctbal", "o_totalprice", "l_quantity", "l_extendedprice",
            "l_discount", "l_tax"}


def read_table(tpch: Path, name: str) -> list[dict[str, Any]]:
    """A tpchgen-cli CSV table as JSON-ready rows (integers, decimals as numbers, dates as text)."""
    with (tpch / f"{name}.csv").open(newline="") as f:
        rows = []
        for raw in csv.DictReader(f):
            row: dict[str, Any] = {}
            for key, value in raw.items():
                if key in _INT:
                    row[key] = int(value)
                elif key in _DECIMAL:
                    row[key] = float(value)
                else:
                    row[key] = value
            rows.append(row)
        return rows


def _insert(table: str, row: dict[str, Any]) -> dict[str, Any]:
    return {"table": table, "op": "insert", "row": dict(row)}


def changes(tpch: Path, seed: int = 42) -> Iterator[dict[str, Any]]:
    """The change records, in stream order."""
    rng = random.Random(seed)
    for table in ("nation", "customer", "supplier"):
        for row in read_table(tpch, table):
            yield _insert(table, row)
    orders = sorted(read_table(tpch, "orders"), key=lambda o: (o["o_orderdate"], o["o_orderkey"]))
    items: dict[int, list[dict[str, Any]]] = {}
    for item in read_table(tpch, "lineitem"):
        items.setdefault(item["l_orderkey"], []).append(item)

    live_orders: dict[int, dict[str, Any]] = {}
    live_items: dict[tuple[int, int], dict[str, Any]] = {}
    pending: list[tuple[int, int, str, Any]] = []  # (due step, tie-break, kind, key)
    seq = 0

    def later(step: int, low: int, high: int, kind: str, key: Any) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(pending, (step + rng.randint(low, high), seq, kind, key))

    def due(step: int) -> Iterator[dict[str, Any]]:
        while pending and pending[0][0] <= step:
            _, _, kind, key = heapq.heappop(pending)
            yield from _event(kind, key)

    def _event(kind: str, key: Any) -> Iterator[dict[str, Any]]:
        if kind == "status":
            okey, final = key
            before = live_orders.get(okey)
            if before is not None:
                after = {**before, "o_orderstatus": final}
                live_orders[okey] = after
                yield {"table": "orders", "op": "update", "before": before, "after": after}
        elif kind in ("price", "delay"):
            before = live_items.get(key)
            if before is None:
                return
            if kind == "price":
                price = round(before["l_extendedprice"] * rng.uniform(0.9, 1.1), 2)
                after = {**before, "l_extendedprice": price,
                         "l_discount": rng.choice([0.0, 0.02, 0.04, 0.06, 0.08, 0.1])}
            else:
                received = dt.date.fromisoformat(before["l_receiptdate"])
                received += dt.timedelta(days=rng.randint(5, 45))
                after = {**before, "l_receiptdate": received.isoformat()}
            live_items[key] = after
            yield {"table": "lineitem", "op": "update", "before": before, "after": after}
        elif kind == "cancel":
            order = live_orders.pop(key, None)
            if order is None:
                return
            for item in items.get(key, []):
                row = live_items.pop((key, item["l_linenumber"]), None)
                if row is not None:
                    yield {"table": "lineitem", "op": "delete", "row": row}
            yield {"table": "orders", "op": "delete", "row": order}

    for step, order in enumerate(orders):
        yield from due(step)
        okey = order["o_orderkey"]
        final = order["o_orderstatus"]
        row = {**order, "o_orderstatus": "O"}
        live_orders[okey] = row
        yield _insert("orders", row)
        for item in items.get(okey, []):
            live_items[(okey, item["l_linenumber"])] = item
            yield _insert("lineitem", item)
            if rng.random() < 0.05:
                later(step, 10, 1500, "price", (okey, item["l_linenumber"]))
            if rng.random() < 0.08:
                later(step, 10, 1500, "delay", (okey, item["l_linenumber"]))
        if final != "O":
            later(step, 50, 3000, "status", (okey, final))
        if rng.random() < 0.02:
            later(step, 5, 800, "cancel", okey)
        if step == len(orders) // 3:
            yield {"table": "orders", "op": "delete",  # deliberately bad: no such order
                   "row": {**order, "o_orderkey": 999_999_999}}
        if step == 2 * len(orders) // 3:
            yield {"table": "lineitem", "op": "insert",  # deliberately bad: malformed price
                   "row": {**items[okey][0], "l_linenumber": 99, "l_extendedprice": "12,50"}}
    yield from due(sys.maxsize)


def make_stream(tpch: Path, out: Path, per_file: int = RECORDS_PER_FILE) -> int:
    """Write the stream to ``out`` as changes-00001.jsonl, ... (atomically: the directory
    appears only when complete); returns the number of records."""
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    n = 0
    f = None
    for record in changes(tpch):
        if n % per_file == 0:
            if f is not None:
                f.close()
            f = (tmp / f"changes-{n // per_file + 1:05d}.jsonl").open("w")
        f.write(json.dumps(record) + "\n")
        n += 1
    if f is not None:
        f.close()
    tmp.rename(out)
    return n


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python make_stream.py TPCH_CSV_DIR OUT_DIR")
    print(f"{make_stream(Path(sys.argv[1]), Path(sys.argv[2])):,} change records written")
