"""Machine instructions counted by valgrind's callgrind, for the instruction benchmarks.

A counted process runs under ``valgrind --tool=callgrind --instr-atstart=no``: nothing is
counted until it switches counting on around the part measured (:func:`counting`), so
loading data and building state cost nothing.  Each runs with a fixed string-hash seed:
with Python's random seed per process, dict probes (and so the counts) move by 1-3%
between runs of the same code.  Needs valgrind (Debian's ``valgrind`` package).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_TOTAL = re.compile(r"Collected : (\d+)")


def have_valgrind() -> bool:
    return shutil.which("valgrind") is not None


@contextmanager
def counting() -> Iterator[None]:
    """In the counted process: count the instructions of the block only."""
    control = ["callgrind_control", "-i"]
    subprocess.run([*control, "on", str(os.getpid())], check=True, capture_output=True)
    try:
        yield
    finally:
        subprocess.run([*control, "off", str(os.getpid())], check=True, capture_output=True)


def run_counted(module: str, arguments: list[str], profile: Path, hash_seed: str = "0",
                timeout: float = 1_800) -> tuple[int, str]:
    """Run ``python -m module arguments`` under callgrind, its profile written to
    ``profile``: the instructions its :func:`counting` blocks executed, and its output.
    ``hash_seed``: the process's PYTHONHASHSEED, or ``random`` for Python's own."""
    command = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
               f"--callgrind-out-file={profile}", sys.executable, "-m", module, *arguments]
    env = dict(os.environ)
    if hash_seed == "random":
        env.pop("PYTHONHASHSEED", None)
    else:
        env["PYTHONHASHSEED"] = hash_seed
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{module} {' '.join(arguments)} failed:\n{done.stderr[-3000:]}")
    return int(_TOTAL.findall(done.stderr)[-1]), done.stdout
