"""Generate TPC-H data with ``tpchgen-cli`` (Parquet) and load it as typed Arrow tables.

Files go to ``bench/data/sf<SF>/<table>.parquet`` and are generated only once per
scale factor.  Loaded tables are cast to the types of :mod:`schema`
(decimals become float64, strings plain utf8).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
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


def generate(scale: float) -> Path:
    """Generate all TPC-H tables at ``scale`` as Parquet unless already present."""
    out = scale_dir(scale)
    if all((out / f"{t}.parquet").exists() for t in COLUMNS):
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
    subprocess.run(cmd, check=True)
    return out


def load_table(scale: float, table: str) -> pa.Table:
    """Read one generated table and cast it to the benchmark schema."""
    raw = pq.read_table(scale_dir(scale) / f"{table}.parquet")
    target = arrow_schema(table)
    columns = [raw.column(field.name).cast(field.type) for field in target]
    return pa.Table.from_arrays(columns, schema=target)
