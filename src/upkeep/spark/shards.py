"""The local engine inside Spark: one engine per shard, kept warm by executor-local servers.

Spark's state store is the durable truth of a shard (its log of changes, see
:mod:`upkeep.spark.processor`); the local engine's derived state (join trees, indexes,
aggregates) is a cache of it.  Python workers are pooled by Spark and a shard's micro-batches
land on whichever worker is free, so the engines live in a few long-lived *shard servers* per
executor (shard ``k`` always on server ``k % n``), which the workers call over a Unix socket.
Every cached engine carries the token of the state version it reflects; a worker whose state
token differs (a restart, a retried batch, a shard that moved executors) has the engine
rebuilt from the state store's log first.  So a warm micro-batch costs work proportional to
the batch, and a cold one is still exact.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from multiprocessing.connection import Client, Connection, Listener
from pathlib import Path

from ..errors import Error
from ..local import from_catalog
from ..pipeline.apply import Applier, Change

Changes = list[tuple[str, tuple, int]]  # (table, row, weight)
Deltas = list[tuple[str, tuple, int]]  # (view, row, weight)
CACHE_LIMIT = 256  # engines kept per server (least recently used are dropped)


class ShardError(Exception):
    """A batch the engine rejects; the message names the record at fault."""


class ShardEngine:
    """The local engine over one shard: the group's tables and views, in memory."""

    def __init__(self, catalog: dict, views: list[str], log: Iterable[Changes] = ()):
        """The shard's engine from its log (chunks of committed changes), built in bulk."""
        self.db = from_catalog(catalog, views, (c for chunk in log for c in chunk))
        self.views = views
        self.applier = Applier(self.db)
        self._out: Deltas = []
        for name in views:
            self.db.view(name).subscribe(
                lambda changes, name=name: self._out.extend((name, r, w) for r, w in changes))

    def apply(self, changes: Changes, where: list | None = None,
              tolerant: bool = False) -> tuple[Deltas, list[tuple[int, str]]]:
        """Apply one batch atomically (net change per table, as the local pipeline does).

        ``where`` names each change's record.  A rejected batch raises :class:`ShardError`
        naming the first bad record, unless ``tolerant``: then every change of each bad
        record is left out, the rest applied, and ``(index, error)`` of the changes left out
        is returned with the deltas (the local pipeline's skip / dead-letter).
        """
        rejected: list[tuple[int, str]] = []
        keep = list(range(len(changes)))
        while True:
            batch = [Change(None, changes[i][0], [(changes[i][1], changes[i][2])])  # type: ignore[arg-type]
                     for i in keep]
            self._out = []
            try:
                with self.db.transaction():
                    self.applier.apply(batch)
                break
            except Error as exc:
                bad = self.applier.find_bad(batch)
                if not bad:
                    raise ShardError(str(exc)) from None
                first = keep[batch.index(bad[0][0])]
                if not (tolerant and where):
                    raise ShardError(f"{where[first]}: {bad[0][1]}" if where else bad[0][1]
                                     ) from None
                records = {where[keep[batch.index(change)]]: error for change, error in bad}
                rejected += [(i, records[where[i]]) for i in keep if where[i] in records]
                keep = [i for i in keep if where[i] not in records]
        out, self._out = self._out, []
        return out, sorted(rejected)

    def report(self, deltas: Deltas, key: tuple, token: str) -> Deltas:
        """What the shard outputs for a batch: its views' deltas."""
        return deltas

    def contents(self) -> Deltas:
        """Every view's rows, as insertions."""
        return [(name, row, w) for name in self.views
                for row, w in self.db.weighted_rows(name)]

    def dump(self) -> Changes:
        """Every table's rows, as insertions (a compacted log)."""
        return [(t, row, w) for t in self.db.tables() for row, w in self.db.weighted_rows(t)]

    def size(self) -> int:
        return sum(self.db.distinct_rows(t) for t in self.db.tables())


class ShardServer:
    """Serves ``apply`` / ``load`` / ``contents`` / ``dump`` for the shards mapped to it."""

    def __init__(self) -> None:
        self.engines: OrderedDict[tuple, tuple[str | None, ShardEngine]] = OrderedDict()
        self.locks: dict[tuple, threading.Lock] = {}
        self.guard = threading.Lock()
        self.counts = {"loads": 0, "applies": 0}

    def handle(self, request: tuple) -> tuple:
        op, plan, key = request[0], request[1], request[2]
        if op == "stats":
            return ("ok", dict(self.counts))
        with self.guard:
            lock = self.locks.setdefault((plan, key), threading.Lock())
        with lock:
            try:
                return ("ok", self._dispatch(op, plan, key, request[3:]))
            except ShardError as exc:
                return ("error", str(exc))
            except Error as exc:
                return ("error", f"{type(exc).__name__}: {exc}")

    def _dispatch(self, op: str, plan: str, key: tuple, args: tuple):
        cached = self.engines.get((plan, key))
        if op == "load":  # (spec, token, log chunks) -> a fresh engine at that token
            (catalog, views, fixpoint), token, chunks = args
            if fixpoint is None:
                engine = ShardEngine(catalog, views, chunks)
            else:
                from .fixpoint import FixpointShard
                engine = FixpointShard(catalog, fixpoint, key[1], chunks, token is not None)
            self.counts["loads"] += 1
            self._put(plan, key, token, engine)
            return engine.size()
        if op == "apply":  # (expected token, new token, changes, positions, tolerant)
            expected, token, changes, where, tolerant = args
            if cached is None or cached[0] != expected:
                return None  # stale: the caller loads the engine from its state first
            engine = cached[1]
            deltas, rejected = engine.apply(changes, where, tolerant)
            self.counts["applies"] += 1
            self._put(plan, key, token, engine)
            return engine.report(deltas, key, token), engine.size(), rejected
        if cached is None or cached[0] != args[0]:
            if op == "fixpoint":
                raise ShardError(f"fixpoint partition {key[1]} of {key[0]} lost its state "
                                 "between the shard processor and the supersteps")
            return None
        if op == "fixpoint":  # (token, call id, operation, its arguments)
            _, call_id, what, what_args = args
            return cached[1].superstep(call_id, what, what_args)
        if op == "contents":
            return cached[1].contents()
        if op == "dump":
            return cached[1].dump()
        raise ValueError(op)

    def _put(self, plan: str, key: tuple, token: str | None, engine: ShardEngine) -> None:
        with self.guard:
            self.engines[(plan, key)] = (token, engine)
            self.engines.move_to_end((plan, key))
            while len(self.engines) > CACHE_LIMIT:
                old, _ = self.engines.popitem(last=False)
                self.locks.pop(old, None)

    def serve(self, address: str, authkey: bytes, owner: int) -> None:
        listener = Listener(address, "AF_UNIX", authkey=authkey)
        threading.Thread(target=_watch_owner, args=(owner, address), daemon=True).start()
        while True:
            conn = listener.accept()
            threading.Thread(target=self._serve_one, args=(conn,), daemon=True).start()

    def _serve_one(self, conn: Connection) -> None:
        try:
            while True:
                conn.send(self.handle(conn.recv()))
        except (EOFError, OSError):
            conn.close()


def _watch_owner(owner: int, address: str) -> None:
    """End the server when the Spark executor (JVM) that started it is gone."""
    while True:
        time.sleep(2)
        try:
            os.kill(owner, 0)
        except ProcessLookupError:
            Path(address).unlink(missing_ok=True)
            os._exit(0)
        except PermissionError:
            pass


# ---------------------------------------------------------------- client side
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
        keyfile.write_bytes(secrets.token_bytes(32))
        keyfile.chmod(0o600)
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


def main() -> None:
    """``python -c 'from upkeep.spark.shards import main; main()' ADDRESS KEYFILE OWNER_PID``"""
    address, keyfile, owner = sys.argv[1:4]
    ShardServer().serve(address, Path(keyfile).read_bytes(), int(owner))
