"""Micro-batch benchmark of upkeep's Spark engine with views in shard servers
(``upkeep.connect(engine="spark", state="shards")``, the default when it was written;
views in Spark's keyed state, the default now, are measured by :mod:`bench.spark.keyed_bench`).

One view, a join plus aggregate over TPC-H ``customer`` and ``orders``, kept fresh under
batches of order inserts.  Three parts, each configuration in its own process:

* ``growth``: fixed-size batches while the state grows from S to 10*S rows (bulk-loaded
  S, then inserts until every row of the scale factor is in).  Every batch's latency on
  upkeep-spark is recorded; Spark recomputing the view's SQL over the same tables (kept as
  Parquet, one file appended per batch) is timed at sampled batches.
* ``sizes``: latency and changes/s at each batch size (``--sizes``) for upkeep on Spark,
  Spark recomputation, and upkeep's local engine in one process.
* ``executors``: upkeep on ``local-cluster[1,1,1024]`` vs ``local-cluster[2,1,1024]``.

Every configuration ends with a correctness check: the view's rows equal DuckDB's answer
over the final tables.  Results go to ``bench/results/spark_latest.json``, the plot to
``docs/spark_bench.png`` and the tables to the "Spark engine (micro-batches)" section at
the end of ``docs/benchmarks.md``.

Usage::

    .venv/bin/python -m bench.spark.bench                       # SF 1, about 30 minutes
    .venv/bin/python -m bench.spark.bench --scale 0.01 --growth-batches 20 --batches 2 \\
        --sizes 100,1000 --executor-sizes 1000 --no-docs         # a quick check
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bench.tpch.data import generate, load_table
from bench.tpch.schema import create_table_sql

BENCH = Path(__file__).resolve().parent.parent  # bench/
ROOT = BENCH.parent
RESULTS = BENCH / "results" / "spark_latest.json"
DOCS = ROOT / "docs" / "benchmarks.md"
PLOT = ROOT / "docs" / "spark_bench.png"
LOGS = BENCH / "data" / "logs"
SECTION = "## Spark engine (micro-batches)"

VIEW = "cust_revenue"
VIEW_SQL = """SELECT c_custkey, c_nationkey, COUNT(*) AS order_count, SUM(o_totalprice) AS revenue
FROM customer JOIN orders ON c_custkey = o_custkey
GROUP BY c_custkey, c_nationkey"""
TABLES = ("customer", "orders")
SYSTEMS = ("upkeep-spark", "spark-recompute", "upkeep-local")
PARTS = ("growth", "sizes", "executors")
MASTERS = "local-cluster[1,1,1024];local-cluster[2,1,1024]"


# ---------------------------------------------------------------- shared helpers
def rows_of(table: pa.Table) -> list[tuple]:
    """Row tuples in column order (dates as datetime.date, doubles as float)."""
    return list(zip(*(c.to_pylist() for c in table.columns), strict=True))


def normalize(rows) -> list[tuple]:
    """View rows compared with a cent tolerance on the DOUBLE sum (sums are rounded
    differently by each system)."""
    return sorted((int(k), int(n), int(c), round(float(s), 2)) for k, n, c, s in rows)


def summary_of(rows: list[tuple]) -> dict:
    return {"rows": len(rows), "sum_count": sum(r[2] for r in rows),
            "sum_revenue": round(sum(r[3] for r in rows), 2)}


def expected(customer: pa.Table, orders: pa.Table) -> list[tuple]:
    """DuckDB's answer over the final tables."""
    import duckdb

    con = duckdb.connect()
    con.register("customer", customer)
    con.register("orders", orders)
    out = normalize(con.sql(VIEW_SQL).fetchall())
    con.close()
    return out


def check(got, want: list[tuple]) -> dict:
    """Count, checksums and exact equality (after rounding the sum to cents)."""
    got = normalize(got)
    return {"ok": got == want, "got": summary_of(got), "expected": summary_of(want)}


def load_sample() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


class LoadMeter:
    """Min/max of the 1-minute load average over a configuration's run."""

    def __init__(self) -> None:
        self.samples: list[float] = []

    def sample(self) -> None:
        self.samples.append(os.getloadavg()[0])

    def report(self) -> dict:
        s = self.samples or [os.getloadavg()[0]]
        return {"load1_min": round(min(s), 2), "load1_max": round(max(s), 2)}


def shard_server_rss_mb() -> float:
    """Resident memory of the shard servers started by this process's executors (the local
    engine's state on Spark lives there, outside the JVMs)."""
    parents: dict[int, int] = {}
    servers: list[tuple[int, int]] = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            parents[int(d.name)] = int(stat.rsplit(")", 1)[1].split()[1])
            argv = [a for a in (d / "cmdline").read_bytes().split(b"\0") if a]
        except (OSError, ValueError, IndexError):
            continue
        if any(b"upkeep.spark.shards" in a for a in argv) and argv[-1].isdigit():
            servers.append((int(d.name), int(argv[-1])))
    mine = {os.getpid()}
    changed = True
    while changed:
        changed = False
        for pid, ppid in parents.items():
            if ppid in mine and pid not in mine:
                mine.add(pid)
                changed = True
    total = 0
    for pid, owner in servers:
        if owner in mine:
            try:
                pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
            except (OSError, ValueError):
                continue
            total += pages * os.sysconf("SC_PAGE_SIZE")
    return round(total / 2**20, 1)


class Data:
    """TPC-H customer and orders at one scale factor, typed by bench/tpch/schema.py."""

    def __init__(self, scale: float):
        generate(scale)
        self.customer = load_table(scale, "customer")
        self.orders = load_table(scale, "orders")

    def split(self, held_out: int) -> tuple[pa.Table, pa.Table]:
        """Initial orders (bulk-loaded) and the held-out rest (inserted in batches)."""
        n = self.orders.num_rows - held_out
        if n < 0:
            raise SystemExit(f"the batches need {held_out:,} orders; the scale factor has "
                             f"{self.orders.num_rows:,}")
        return self.orders.slice(0, n), self.orders.slice(n)


class ParquetTables:
    """The tables as Parquet directories, one file appended per batch (what Spark
    recomputation reads, and what upkeep-spark bulk-loads from)."""

    def __init__(self, root: Path, customer: pa.Table, orders: pa.Table):
        self.root = root
        (root / "customer").mkdir(parents=True)
        (root / "orders").mkdir(parents=True)
        pq.write_table(customer, root / "customer" / "part-00000.parquet")
        pq.write_table(orders, root / "orders" / "part-00000.parquet")
        self.files = 1

    @classmethod
    def in_temp_dir(cls, label: str, customer: pa.Table, orders: pa.Table) -> ParquetTables:
        """The tables under a fresh temporary directory named for the benchmark part."""
        work = Path(tempfile.mkdtemp(prefix=f"spark-bench-{label}-"))
        return cls(work / "tables", customer, orders)

    def path(self, table: str, first_file_only: bool = False) -> str:
        d = self.root / table
        return str(d / "part-00000.parquet") if first_file_only else str(d)

    def append(self, orders: pa.Table) -> float:
        t0 = time.perf_counter()
        pq.write_table(orders, self.root / "orders" / f"part-{self.files:05d}.parquet")
        self.files += 1
        return time.perf_counter() - t0


def open_spark(master: str, shards: int):
    from upkeep.spark import spark_session

    config = {"spark.sql.shuffle.partitions": str(shards),
              "spark.ui.showConsoleProgress": "false",
              "spark.driver.memory": "6g"}
    return spark_session(master, config=config)


def recompute(spark, tables: ParquetTables) -> tuple[float, pa.Table]:
    """Spark evaluates the view's SQL over the current Parquet tables and hands the
    result to the driver (as Arrow), like upkeep's driver-side copy of the view."""
    t0 = time.perf_counter()
    for name in TABLES:
        spark.read.parquet(tables.path(name)).createOrReplaceTempView(name)
    result = spark.sql(VIEW_SQL).toArrow()
    return time.perf_counter() - t0, result


def arrow_rows(result: pa.Table) -> list[tuple]:
    return rows_of(result)


class SparkUpkeep:
    """upkeep on Spark: tables, the view, the bulk load and timed micro-batches."""

    def __init__(self, spark, shards: int):
        import upkeep

        self.db = upkeep.connect(engine="spark", spark=spark, shards=shards, state="shards")
        for name in TABLES:
            self.db.execute(create_table_sql(name))
        self.db.create_view(VIEW, VIEW_SQL)
        self.explain = self.db.explain(VIEW).splitlines()[-1]

    def bulk_load(self, tables: ParquetTables) -> dict:
        """``db.load`` both tables, then wait until the view is readable."""
        t0 = time.perf_counter()
        self.db.load("customer", tables.path("customer"))
        self.db.load("orders", tables.path("orders", first_file_only=True))
        rows = self.db.view(VIEW).rows()
        return {"seconds": round(time.perf_counter() - t0, 3), "view_rows": len(rows)}

    def engine_stats(self) -> dict:
        """Cold engine loads vs warm applies in the shard servers (local mode only)."""
        try:
            from upkeep.spark.shard_client import server_stats

            return server_stats(self.db.spark)
        except Exception as exc:  # informative only (and only in newer upkeep versions)
            return {"error": f"{type(exc).__name__}: {exc}"[:200]}

    def batch(self, rows: list[tuple]) -> tuple[float, dict]:
        t0 = time.perf_counter()
        with self.db.transaction():
            self.db.insert("orders", rows)
        seconds = time.perf_counter() - t0
        return seconds, self._progress()

    def _progress(self) -> dict:
        """Spark's own timing of the micro-batch (StreamingQueryProgress)."""
        try:
            p = self.db._query.lastProgress or {}
        except Exception:  # informative only
            return {}
        out = {k: p.get("durationMs", {}).get(k) for k in ("triggerExecution", "addBatch")}
        ops = p.get("stateOperators") or [{}]
        out["state_commit_ms"] = ops[0].get("commitTimeMs")
        out["state_updates_ms"] = ops[0].get("allUpdatesTimeMs")
        return out

    def rows(self) -> list[tuple]:
        return self.db.view(VIEW).rows()

    def close(self) -> None:
        self.db.close()


def batches_of(orders: pa.Table, sizes: list[int], count: int):
    """``count`` consecutive slices of each size, in order."""
    pos = 0
    for size in sizes:
        for i in range(count):
            yield size, i, orders.slice(pos, size)
            pos += size


# ---------------------------------------------------------------- part 1: growth
def run_growth(args: argparse.Namespace) -> dict:
    """Fixed-size batches while the state grows from S to 10*S."""
    systems = args.systems
    data = Data(args.scale)
    total = data.customer.num_rows + data.orders.num_rows
    start = total // 10  # S
    init_orders = start - data.customer.num_rows
    grow = data.orders.num_rows - init_orders
    size = math.ceil(grow / args.growth_batches)
    initial, rest = data.split(grow)
    tables = ParquetTables.in_temp_dir("growth", data.customer, initial)
    spark = open_spark(args.master, args.shards)
    meter = LoadMeter()
    out: dict = {"master": args.master, "shards": args.shards, "start_rows": start,
                 "final_rows": total, "batch_changes": size, "batches": [], "recompute": [],
                 "initial_orders": initial.num_rows}
    up = None
    if "upkeep-spark" in systems:
        up = SparkUpkeep(spark, args.shards)
        out["explain"] = up.explain
        out["load"] = up.bulk_load(tables)
        out["load"]["rows"] = start
        print(f"  growth: bulk load of {start:,} rows in {out['load']['seconds']:.1f} s",
              flush=True)
    if "spark-recompute" in systems:
        out["first_recompute_s"] = round(recompute(spark, tables)[0], 3)
    n_batches = math.ceil(rest.num_rows / size)
    every = max(1, n_batches // max(1, args.recompute_samples))
    state = start
    result = None
    t_start = time.perf_counter()
    for i in range(n_batches):
        batch = rest.slice(i * size, size)
        rows = rows_of(batch)
        write_s = tables.append(batch)
        state += batch.num_rows
        meter.sample()
        rec = {"i": i, "changes": batch.num_rows, "state_rows": state,
               "load1": round(os.getloadavg()[0], 2)}
        if up is not None:
            seconds, progress = up.batch(rows)
            rec.update(seconds=round(seconds, 4), spark=progress)
        out["batches"].append(rec)
        sample = i % every == every - 1 or i == n_batches - 1 or i == 0
        if "spark-recompute" in systems and sample:
            seconds, result = recompute(spark, tables)
            out["recompute"].append({"i": i, "state_rows": state,
                                     "load1": round(os.getloadavg()[0], 2),
                                     "seconds": round(seconds + write_s, 4),
                                     "query_s": round(seconds, 4), "write_s": round(write_s, 4),
                                     "shard_rss_mb": shard_server_rss_mb()})
        if i % max(1, n_batches // 10) == 0 or i == n_batches - 1:
            last = rec.get("seconds")
            print(f"  growth: batch {i + 1}/{n_batches}, state {state:,} rows"
                  + (f", upkeep {last:.2f} s" if last is not None else "")
                  + (f", recompute {out['recompute'][-1]['seconds']:.2f} s"
                     if out["recompute"] and out["recompute"][-1]["i"] == i else ""),
                  flush=True)
    out["wall_s"] = round(time.perf_counter() - t_start, 1)
    want = expected(data.customer, data.orders)
    out["checks"] = {}
    if up is not None:
        out["checks"]["upkeep-spark"] = check(up.rows(), want)
        out["shard_rss_mb"] = shard_server_rss_mb()
        out["engine_stats"] = up.engine_stats()
        up.close()
    if result is not None:
        out["checks"]["spark-recompute"] = check(arrow_rows(result), want)
    out.update(meter.report())
    return out


# ---------------------------------------------------------------- part 2: batch sizes
def run_sizes_spark(args: argparse.Namespace) -> dict:
    """upkeep on Spark and Spark recomputation, batch by batch, on one session."""
    data = Data(args.scale)
    held = args.batches * sum(args.sizes)
    initial, rest = data.split(held)
    tables = ParquetTables.in_temp_dir("sizes", data.customer, initial)
    spark = open_spark(args.master, args.shards)
    meter = LoadMeter()
    start = data.customer.num_rows + initial.num_rows
    out: dict = {"master": args.master, "shards": args.shards, "start_rows": start,
                 "systems": {}}
    up = None
    if "upkeep-spark" in args.systems:
        up = SparkUpkeep(spark, args.shards)
        out["explain"] = up.explain
        load = up.bulk_load(tables)
        out["systems"]["upkeep-spark"] = {"load_s": load["seconds"], "batches": []}
        print(f"  sizes: upkeep-spark bulk load of {start:,} rows in {load['seconds']:.1f} s",
              flush=True)
    rec_out = None
    if "spark-recompute" in args.systems:
        first, _ = recompute(spark, tables)
        rec_out = out["systems"]["spark-recompute"] = {"first_recompute_s": round(first, 3),
                                                       "batches": []}
    result = None
    for size, i, batch in batches_of(rest, args.sizes, args.batches):
        rows = rows_of(batch)
        write_s = tables.append(batch)
        meter.sample()
        line = f"  sizes: {size:,} changes, batch {i + 1}/{args.batches}:"
        if up is not None:
            seconds, progress = up.batch(rows)
            out["systems"]["upkeep-spark"]["batches"].append(
                {"size": size, "seconds": round(seconds, 4), "spark": progress,
                 "load1": round(os.getloadavg()[0], 2)})
            line += f" upkeep-spark {seconds:.2f} s"
        if rec_out is not None:
            seconds, result = recompute(spark, tables)
            rec_out["batches"].append({"size": size, "seconds": round(seconds + write_s, 4),
                                       "query_s": round(seconds, 4), "write_s": round(write_s, 4),
                                       "load1": round(os.getloadavg()[0], 2)})
            line += f" spark-recompute {seconds + write_s:.2f} s"
        print(line, flush=True)
    want = expected(data.customer, data.orders)
    if up is not None:
        out["systems"]["upkeep-spark"]["check"] = check(up.rows(), want)
        out["systems"]["upkeep-spark"]["shard_rss_mb"] = shard_server_rss_mb()
        out["systems"]["upkeep-spark"]["engine_stats"] = up.engine_stats()
        up.close()
    if rec_out is not None and result is not None:
        rec_out["check"] = check(arrow_rows(result), want)
    out.update(meter.report())
    return out


def run_sizes_local(args: argparse.Namespace) -> dict:
    """upkeep's local engine in this process: the same initial tables and batches, once
    with a subscriber on the view (its changes are computed in every batch, as the Spark
    engine's shards do) and once without (pull mode: the view is only read at the end)."""
    import gc

    import upkeep
    from bench.common.measure import current_rss_mb

    data = Data(args.scale)
    held = args.batches * sum(args.sizes)
    initial, rest = data.split(held)
    meter = LoadMeter()
    systems: dict = {}
    for system, subscribed in (("upkeep-local", True), ("upkeep-local-pull", False)):
        db = upkeep.connect()
        for name in TABLES:
            db.execute(create_table_sql(name))
        view = db.create_view(VIEW, VIEW_SQL)
        delivered = [0]
        if subscribed:
            def count(changes: list, delivered: list = delivered) -> None:
                delivered[0] += len(changes)

            view.subscribe(count)
        rss0 = current_rss_mb()
        t0 = time.perf_counter()
        with db.transaction():
            db.insert("customer", data.customer)
            db.insert("orders", initial)
        load_s = time.perf_counter() - t0
        print(f"  sizes: {system} load of {data.customer.num_rows + initial.num_rows:,} rows "
              f"in {load_s:.1f} s", flush=True)
        res: dict = {"load_s": round(load_s, 3), "batches": [], "subscribed": subscribed}
        for size, i, batch in batches_of(rest, args.sizes, args.batches):
            rows = rows_of(batch)
            meter.sample()
            before = delivered[0]
            t0 = time.perf_counter()
            with db.transaction():
                db.insert("orders", rows)
            seconds = time.perf_counter() - t0
            res["batches"].append({"size": size, "seconds": round(seconds, 5),
                                   "load1": round(os.getloadavg()[0], 2),
                                   "view_changes": delivered[0] - before})
            print(f"  sizes: {size:,} changes, batch {i + 1}/{args.batches}: {system} "
                  f"{seconds:.3f} s", flush=True)
        res["check"] = check(db.view(VIEW).rows(), expected(data.customer, data.orders))
        res["rss_mb"] = round(current_rss_mb() - rss0, 1)
        systems[system] = res
        db.close()
        del db, view
        gc.collect()
    return {"systems": systems, **meter.report()}


# ---------------------------------------------------------------- part 3: executors
def run_executors(args: argparse.Namespace) -> dict:
    """upkeep on one ``local-cluster`` master: bulk load and batches."""
    data = Data(args.scale)
    held = args.batches * sum(args.executor_sizes)
    initial, rest = data.split(held)
    tables = ParquetTables.in_temp_dir("exec", data.customer, initial)
    meter = LoadMeter()
    t0 = time.perf_counter()
    spark = open_spark(args.master, args.shards)
    out: dict = {"master": args.master, "shards": args.shards,
                 "session_s": round(time.perf_counter() - t0, 1),
                 "start_rows": data.customer.num_rows + initial.num_rows, "batches": []}
    up = SparkUpkeep(spark, args.shards)
    out["load"] = up.bulk_load(tables)
    # executors that registered with the driver (the driver itself is one more entry)
    out["executors"] = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
    print(f"  executors {args.master}: bulk load in {out['load']['seconds']:.1f} s", flush=True)
    for size, i, batch in batches_of(rest, args.executor_sizes, args.batches):
        rows = rows_of(batch)
        meter.sample()
        seconds, progress = up.batch(rows)
        out["batches"].append({"size": size, "seconds": round(seconds, 4), "spark": progress,
                               "load1": round(os.getloadavg()[0], 2)})
        print(f"  executors {args.master}: {size:,} changes, batch {i + 1}/{args.batches}: "
              f"{seconds:.2f} s", flush=True)
    out["check"] = check(up.rows(), expected(data.customer, data.orders))
    out["shard_rss_mb"] = shard_server_rss_mb()
    up.close()
    out.update(meter.report())
    return out


CHILDREN = {"growth": run_growth, "sizes-spark": run_sizes_spark,
            "sizes-local": run_sizes_local, "executors": run_executors}


# ---------------------------------------------------------------- orchestration
def child_args(args: argparse.Namespace, name: str, master: str | None = None) -> list[str]:
    argv = [sys.executable, "-m", "bench.spark.bench", "--child", name,
            "--scale", f"{args.scale:g}", "--batches", str(args.batches),
            "--sizes", ",".join(map(str, args.sizes)),
            "--executor-sizes", ",".join(map(str, args.executor_sizes)),
            "--systems", ",".join(args.systems), "--shards", str(args.shards),
            "--growth-batches", str(args.growth_batches),
            "--recompute-samples", str(args.recompute_samples),
            "--master", master or args.master]
    return argv


def run_child(args: argparse.Namespace, name: str, master: str | None = None) -> dict:
    """One configuration in its own process (its own JVM and shard servers)."""
    LOGS.mkdir(parents=True, exist_ok=True)
    tag = name + ("" if master is None else "-" + "".join(c for c in master if c.isalnum()))
    log = LOGS / f"spark_bench-{tag}.log"
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        result_path = Path(f.name)
    argv = child_args(args, name, master) + ["--out", str(result_path)]
    print(f"[{tag}] started (Spark log: {log.relative_to(ROOT)})", flush=True)
    t0 = time.perf_counter()
    with open(log, "w") as err:
        try:
            proc = subprocess.run(argv, stderr=err, timeout=args.timeout, cwd=ROOT)
            code = proc.returncode
        except subprocess.TimeoutExpired:
            code = "timeout"
    wall = round(time.perf_counter() - t0, 1)
    try:
        result = json.loads(result_path.read_text())
    except (OSError, json.JSONDecodeError):
        tail = log.read_text(errors="replace").strip().splitlines()[-15:]
        errors = [ln for ln in tail if "Error" in ln or "Exception" in ln] or tail[-3:]
        result = {"status": "failed", "exit": code, "error": "\n".join(errors)[-3000:]}
    result_path.unlink(missing_ok=True)
    result.setdefault("status", "ok" if code == 0 else f"exit {code}")
    result["process_wall_s"] = wall
    print(f"[{tag}] {result['status']} in {wall:.0f} s", flush=True)
    return result


def versions() -> dict:
    import duckdb
    import pyspark

    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                             capture_output=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "src"], cwd=ROOT, text=True,
                               capture_output=True).stdout.strip()
    except OSError:
        rev, dirty = "?", ""
    java = subprocess.run(["java", "-version"], text=True, capture_output=True).stderr
    return {"python": platform.python_version(), "pyspark": pyspark.__version__,
            "duckdb": duckdb.__version__, "pyarrow": pa.__version__,
            "java": (java.splitlines() or ["?"])[0], "upkeep_git": rev,
            "src_modified": bool(dirty)}


def machine() -> dict:
    mem = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) // 1024
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "memory_mib": mem,
            "platform": f"{platform.system()} {platform.machine()}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="TPC-H scale factor (1)")
    parser.add_argument("--batches", type=int, default=5,
                        help="batches per batch size in the sizes/executors parts (5)")
    parser.add_argument("--sizes", default="1000,10000,100000",
                        help="changes per batch in the sizes part")
    parser.add_argument("--executor-sizes", default="10000,100000",
                        help="changes per batch in the executors part")
    parser.add_argument("--systems", default=",".join(SYSTEMS),
                        help="upkeep-spark,spark-recompute,upkeep-local")
    parser.add_argument("--parts", default=",".join(PARTS), help="growth,sizes,executors")
    parser.add_argument("--growth-batches", type=int, default=150,
                        help="batches that grow the state from S to 10*S (150)")
    parser.add_argument("--recompute-samples", type=int, default=30,
                        help="batches of the growth part also timed with Spark recompute")
    parser.add_argument("--master", default="local[2]", help="master for growth and sizes")
    parser.add_argument("--masters", default=MASTERS,
                        help="';'-separated masters of the executors part")
    parser.add_argument("--shards", type=int, default=4, help="shards (= shuffle partitions)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per process")
    parser.add_argument("--no-docs", action="store_true",
                        help="only write bench/results/spark_latest.json")
    parser.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.sizes = [int(x) for x in args.sizes.split(",") if x]
    args.executor_sizes = [int(x) for x in args.executor_sizes.split(",") if x]
    args.systems = [s for s in args.systems.split(",") if s]
    unknown = set(args.systems) - set(SYSTEMS)
    if unknown:
        parser.error(f"unknown systems {sorted(unknown)}")

    if args.child:
        os.environ.setdefault("UPKEEP_SPARK_LOG_LEVEL", "ERROR")
        t0 = time.perf_counter()
        result = CHILDREN[args.child](args)
        result["child_s"] = round(time.perf_counter() - t0, 1)
        Path(args.out).write_text(json.dumps(result))
        # Spark's JVM (and its Python workers) can take a while to stop; results are saved.
        sys.stdout.flush()
        os._exit(0)

    parts = [p for p in args.parts.split(",") if p]
    started = time.perf_counter()
    command = "python -m bench.spark.bench" + "".join(
        " " + shlex.quote(a) for a in sys.argv[1:])
    data: dict = {"command": command, "date": dt.datetime.now(dt.UTC).strftime(
        "%Y-%m-%d %H:%M UTC"), "machine": machine(), "versions": versions(),
        "load_at_start": load_sample(), "scale": args.scale, "view_sql": VIEW_SQL,
        "config": {"batches": args.batches, "sizes": args.sizes,
                   "executor_sizes": args.executor_sizes, "systems": args.systems,
                   "growth_batches": args.growth_batches, "master": args.master,
                   "shards": args.shards}}
    generate(args.scale)
    if "growth" in parts and {"upkeep-spark", "spark-recompute"} & set(args.systems):
        data["growth"] = run_child(args, "growth")
    if "sizes" in parts:
        sizes: dict = {"systems": {}}
        if {"upkeep-spark", "spark-recompute"} & set(args.systems):
            sizes = run_child(args, "sizes-spark")
            sizes.setdefault("systems", {})
        if "upkeep-local" in args.systems:
            local = run_child(args, "sizes-local")
            if local.get("status") == "ok":
                sizes["systems"].update(local["systems"])
                sizes["local_load1"] = [local.get("load1_min"), local.get("load1_max")]
            else:
                sizes["systems"]["upkeep-local"] = local
        data["sizes"] = sizes
    if "executors" in parts and "upkeep-spark" in args.systems:
        data["executors"] = {m: run_child(args, "executors", m)
                             for m in args.masters.split(";") if m}
    data["total_wall_s"] = round(time.perf_counter() - started, 1)
    data["upkeep_git_end"] = versions()["upkeep_git"]
    data["load_at_end"] = load_sample()

    from bench.spark.plot import summarize, write_docs, write_plot

    data["summary"] = summarize(data)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(data, indent=1) + "\n")
    print(f"results: {RESULTS.relative_to(ROOT)} ({data['total_wall_s'] / 60:.1f} min)")
    print(json.dumps(data["summary"], indent=1))
    if not args.no_docs:
        if write_plot(data, PLOT):
            print(f"plot: {PLOT.relative_to(ROOT)}")
        write_docs(data, DOCS)
        print(f"docs: {DOCS.relative_to(ROOT)} (section {SECTION!r})")


if __name__ == "__main__":
    main()
