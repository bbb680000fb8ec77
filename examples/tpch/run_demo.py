"""The TPC-H demo: generate a change stream, run the pipeline, show what landed in DuckDB.

1. TPC-H data at scale factor 0.01 is generated with tpchgen-cli into work/tpch/ and turned
   into a change stream in work/stream/ (see make_stream.py); both are kept for later runs.
2. The state directory and the outputs are cleared, and examples/tpch/pipeline.toml runs
   through the same code path as ``upkeep run`` (upkeep.cli.main).
3. The DuckDB sink file is read back, and each view is checked against DuckDB evaluating
   the view's SQL from scratch over the final base tables.

Run it with ``.venv/bin/python examples/tpch/run_demo.py`` (``make demo``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import duckdb

import upkeep
from upkeep.cli import main as upkeep_main

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from make_stream import make_stream  # noqa: E402

WORK = HERE / "work"
TPCH = WORK / "tpch"
STREAM = WORK / "stream"
STATE = WORK / "state"
OUT = WORK / "out"
PIPELINE = HERE / "pipeline.toml"
SCALE = "0.01"
TABLES = ("nation", "customer", "supplier", "orders", "lineitem")
VIEWS = ("revenue_by_nation_segment", "top_customers", "late_shipments")


def tpchgen() -> str:
    """The tpchgen-cli executable: next to this Python's, or on PATH."""
    local = Path(sys.executable).parent / "tpchgen-cli"
    if local.exists():
        return str(local)
    found = shutil.which("tpchgen-cli")
    if found is None:
        sys.exit("tpchgen-cli is not installed: pip install tpchgen-cli==4.0.0")
    return found


def generate() -> None:
    """TPC-H tables and the change stream, unless they are already there."""
    if not all((TPCH / f"{t}.csv").exists() for t in TABLES):
        print(f"generating TPC-H data (scale factor {SCALE}) with tpchgen-cli ...")
        tmp = WORK / "tpch.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        subprocess.run([tpchgen(), "csv", "-s", SCALE, "-o", str(tmp), "--tables",
                        ",".join(TABLES), "--no-progress", "-q"], check=True)
        shutil.rmtree(TPCH, ignore_errors=True)
        tmp.rename(TPCH)
    if not STREAM.exists():
        print("turning it into a change stream ...")
        n = make_stream(TPCH, STREAM)
        files = len(list(STREAM.glob("*.jsonl")))
        print(f"  {n:,} change records in {files} files in {STREAM.relative_to(HERE.parent.parent)}")


def report() -> None:
    """What the sinks hold, and a check of every view against DuckDB from scratch."""
    con = duckdb.connect(str(OUT / "tpch.duckdb"), read_only=True)
    print("\nread back from the DuckDB sink file work/out/tpch.duckdb:")
    queries = {
        "revenue_by_nation_segment": "SELECT nation, segment, revenue, lineitems "
                                     "FROM revenue_by_nation_segment ORDER BY revenue DESC",
        "top_customers": "SELECT customer, revenue, lineitems FROM top_customers "
                         "ORDER BY revenue DESC",
        "late_shipments": "SELECT supplier, late_lineitems FROM late_shipments "
                          "ORDER BY late_lineitems DESC, supplier",
    }
    for view, sql in queries.items():
        (count,) = con.execute(f"SELECT COUNT(*) FROM {view}").fetchone()
        print(f"\n  {view}: {count:,} rows; the first 3 of {sql!r}:")
        for row in con.execute(sql + " LIMIT 3").fetchall():
            print("    " + ", ".join(f"{v:,.2f}" if not isinstance(v, (str, int)) else str(v)
                                     for v in row))
    for path in sorted(p for p in OUT.glob("*.jsonl") if p.name != "dead-letter.jsonl"):
        lines = path.read_text().splitlines()
        batches = {json.loads(line)["batch"] for line in lines}
        print(f"\n  {path.name}: {len(lines):,} lines over {len(batches):,} batches")
    dead = OUT / "dead-letter.jsonl"
    if dead.exists():
        print("\n  dead-lettered records (deliberately bad ones in the stream):")
        for line in dead.read_text().splitlines():
            entry = json.loads(line)
            print(f"    {entry['_source']}: {entry['_error']}")
    check(con)


def check(sink: duckdb.DuckDBPyConnection) -> None:
    """Compare each sink table with DuckDB evaluating the view SQL on the final tables."""
    print("\nchecking every view against DuckDB recomputing it from the final base tables ...")
    with upkeep.connect(STATE) as db:
        oracle = duckdb.connect()
        for table in TABLES:
            frame = db.execute(f"SELECT * FROM {table}").arrow()
            oracle.register(f"{table}_arrow", frame)
            oracle.execute(f"CREATE TABLE {table} AS SELECT * FROM {table}_arrow")
    views_sql = (HERE / "sql" / "views.sql").read_text().replace("MATERIALIZED VIEW", "VIEW")
    oracle.execute(views_sql)
    for view in VIEWS:
        expected = sorted(oracle.execute(f"SELECT * FROM {view}").fetchall())
        actual = sorted(sink.execute(f"SELECT * FROM {view}").fetchall())
        verdict = "same rows" if expected == actual else "DIFFERENT"
        print(f"  {view}: {len(actual):,} rows, {verdict}")
        if expected != actual:
            sys.exit(f"view {view} differs from DuckDB's result")


def main() -> int:
    started = time.monotonic()
    WORK.mkdir(exist_ok=True)
    generate()
    for stale in (STATE, OUT):
        shutil.rmtree(stale, ignore_errors=True)
    print(f"\nupkeep run {PIPELINE.relative_to(HERE.parent.parent)}\n")
    status = upkeep_main(["run", str(PIPELINE)])
    if status != 0:
        return status
    report()
    print(f"\ndemo finished in {time.monotonic() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
