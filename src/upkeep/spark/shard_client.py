"""Reaching the shard servers of this executor (:mod:`upkeep.spark.shards`) from Spark's
Python workers: server ``k % n`` holds shard ``k``; the first worker to need a server starts
it.  A server's error comes back as :class:`~upkeep.spark.errors.ShardError` with the
error's structured record."""

from __future__ import annotations

import fcntl
import os
import secrets
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Client, Connection
from pathlib import Path

from .errors import ShardError

_clients: dict[int, Connection] = {}


def _executor_pid() -> int:
    """The nearest ancestor process that is a JVM (the Spark executor), else our parent."""
    pid = os.getpid()
    for _ in range(8):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            pid = int(stat.rsplit(")", 1)[1].split()[1])
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except (OSError, ValueError, IndexError):
            break
        if comm == "java":
            return pid
    return os.getppid()


def _address(index: int, owner: int | None = None) -> tuple[str, Path]:
    owner = owner or _executor_pid()
    base = Path(tempfile.gettempdir()) / f"upkeep-{os.getuid()}-{owner}-{index}"
    return str(base) + ".sock", Path(str(base) + ".key")


def _connect(index: int) -> Connection:
    address, keyfile = _address(index)
    for attempt in range(20):
        try:
            return Client(address, "AF_UNIX", authkey=keyfile.read_bytes())
        except (OSError, EOFError):
            if attempt == 0:
                _spawn(index, address, keyfile)
            else:
                time.sleep(0.1)
    raise ShardError(f"cannot reach the shard server at {address}")


def _spawn(index: int, address: str, keyfile: Path) -> None:
    """Start server ``index`` of this executor unless another worker just did."""
    with open(str(keyfile) + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            Client(address, "AF_UNIX", authkey=keyfile.read_bytes()).close()
            return
        except (OSError, EOFError):
            pass
        Path(address).unlink(missing_ok=True)
        keyfile.unlink(missing_ok=True)  # created owner-only: never readable by others
        fd = os.open(keyfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(32))
        subprocess.Popen(
            [sys.executable, "-c", "from upkeep.spark.shards import main; main()", address,
             str(keyfile), str(_executor_pid())],
            start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while not os.path.exists(address):
            if time.monotonic() > deadline:
                raise ShardError(f"the shard server at {address} did not start")
            time.sleep(0.05)


def server_stats(spark) -> dict[str, int]:
    """Engine loads and warm applies summed over the shard servers of a local-mode
    SparkSession (its one JVM is the executor): a diagnostic for tests and benchmarks."""
    owner = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    total = {"loads": 0, "applies": 0}
    for index in range(64):
        address, keyfile = _address(index, owner)
        if not os.path.exists(address):
            continue
        with Client(address, "AF_UNIX", authkey=keyfile.read_bytes()) as conn:
            conn.send(("stats", None, None))
            for key, value in conn.recv()[1].items():
                total[key] += value
    return total


def servers() -> int:
    """Shard servers per executor: one per core this process may use (counted where it
    runs, so each executor of a cluster gets its own number)."""
    return max(1, len(os.sched_getaffinity(0)))


def call(shard: int, request: tuple):
    """Send one request about ``shard`` to its server on this executor (server
    ``shard mod servers()``); returns the result (None when the engine is stale) or raises
    :class:`ShardError`."""
    index = shard % servers()
    for attempt in range(2):
        conn = _clients.get(index)
        if conn is None:
            conn = _clients[index] = _connect(index)
        try:
            conn.send(request)
            status, value = conn.recv()
            break
        except (OSError, EOFError):
            _clients.pop(index, None)
            if attempt == 1:
                raise
    if status == "error":
        raise ShardError(value)
    return value
