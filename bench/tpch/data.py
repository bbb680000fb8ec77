"""Generate TPC-H data with ``tpchgen-cli`` (Parquet) and load it as typed Arrow tables.

Files go to ``bench/data/sf<SF>/<table>.parquet`` and are generated only once per
scale factor.  Loaded tables are cast to the types of :mod:`schema`
(decimals become float64, strings plain utf8).
"""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bench.tpch.schema import COLUMNS, arrow_schema

DATA_ROOT = Path(__file__).resolve().parents[1] / "data"


def scale_dir(scale: float) -> Path:
    """Directory holding the data of one scale factor, e.g. ``bench/data/sf0.1``."""
    return DATA_ROOT / f"sf{scale:g}"


def _tpchgen_executable() -> str:
    """Path of ``tpchgen-cli``: next to the running interpreter, else on ``PATH``."""
    local = Path(sys.executable).parent / "tpchgen-cli"
    if local.exists():
        return str(local)
    found = shutil.which("tpchgen-cli")
    if found is None:
        raise RuntimeError("tpchgen-cli not found; pip install tpchgen-cli==4.0.0")
    return found


def generate(scale: float, tables: tuple[str, ...] | None = None) -> Path:
    """Generate the TPC-H ``tables`` (default: all) at ``scale`` as Parquet unless already
    present (a benchmark reading three tables at SF 10 need not write lineitem's 60 M)."""
    out = scale_dir(scale)
    wanted = tuple(tables or COLUMNS)
    missing = [t for t in wanted if not (out / f"{t}.parquet").exists()]
    if not missing:
        return out
    out.mkdir(parents=True, exist_ok=True)
    cmd = [
        _tpchgen_executable(),
        "parquet",
        "--scale-factor",
        f"{scale:g}",
        "--output-dir",
        str(out),
        "--overwrite",
        "--quiet",
    ]
    if tables is not None:
        cmd.append("--tables=" + ",".join(missing))
    subprocess.run(cmd, check=True)
    return out


def load_table(scale: float, table: str) -> pa.Table:
    """Read one generated table and cast it to the benchmark schema."""
    return _cast(pq.read_table(scale_dir(scale) / f"{table}.parquet"), table)


def _cast(batch: pa.RecordBatch | pa.Table, table: str) -> pa.Table:
    """Rows of a generated table cast to the benchmark schema."""
    target = arrow_schema(table)
    return pa.Table.from_arrays([batch.column(f.name).cast(f.type) for f in target],
                                schema=target)


def iter_table(scale: float, table: str, rows: int) -> Iterator[pa.Table]:
    """One generated table in chunks of about ``rows`` rows, each cast to the benchmark
    schema, read from Parquet as they are needed: a scale whose tables do not fit in
    memory beside the system under test can still be loaded."""
    parquet = pq.ParquetFile(scale_dir(scale) / f"{table}.parquet")
    for batch in parquet.iter_batches(batch_size=rows):
        yield _cast(batch, table)


def sample_rows(scale: float, table: str, count: int, seed: int) -> list[tuple]:
    """``count`` distinct rows of a generated table chosen at random (in random order),
    read a chunk at a time."""
    parquet = pq.ParquetFile(scale_dir(scale) / f"{table}.parquet")
    rng = random.Random(seed)
    order = rng.sample(range(parquet.metadata.num_rows), count)
    wanted = sorted(order)
    found: dict[int, tuple] = {}
    start = 0
    for batch in parquet.iter_batches(batch_size=1_000_000):
        end = start + batch.num_rows
        local = [i - start for i in wanted if start <= i < end]
        if local:
            picked = _cast(batch, table).take(local)
            for i, row in zip(local, picked.to_pylist(), strict=True):
                found[start + i] = tuple(row.values())
        start = end
    return [found[i] for i in order]
