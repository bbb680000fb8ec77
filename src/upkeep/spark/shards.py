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

import os
import sys
import threading
import time
from collections import OrderedDict
from multiprocessing import AuthenticationError
from multiprocessing.connection import Connection, Listener, answer_challenge, deliver_challenge
from pathlib import Path

from ..errors import Error
from .errors import ShardError
from .fixpoint import FixpointShard
from .shard_engine import ShardEngine

CACHE_LIMIT = 256  # engines kept per server (least recently used are dropped)


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
                return ("error", exc.record)
            except Error as exc:
                return ("error", exc.to_record())

    def _dispatch(self, op: str, plan: str, key: tuple, args: tuple):
        cached = self.engines.get((plan, key))
        if op == "load":  # (spec, token, log chunks) -> a fresh engine at that token
            (catalog, views, fixpoint), token, chunks = args
            if fixpoint is None:
                engine = ShardEngine(catalog, views, chunks)
            else:
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
        """Accept clients until the owner is gone; each is authenticated in its own thread,
        so a client with a wrong key, or one that never speaks, cannot stop the server."""
        old_mask = os.umask(0o077)  # the socket is owner-only from its creation
        try:
            listener = Listener(address, "AF_UNIX")
        finally:
            os.umask(old_mask)
        threading.Thread(target=_watch_owner, args=(owner, address), daemon=True).start()
        while True:
            try:
                conn = listener.accept()
            except OSError:
                continue
            threading.Thread(target=self._serve_one, args=(conn, authkey), daemon=True).start()

    def _serve_one(self, conn: Connection, authkey: bytes) -> None:
        try:
            deliver_challenge(conn, authkey)
            answer_challenge(conn, authkey)
            while True:
                conn.send(self.handle(conn.recv()))
        except (EOFError, OSError, AuthenticationError):
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


def main() -> None:
    """``python -c 'from upkeep.spark.shards import main; main()' ADDRESS KEYFILE OWNER_PID``"""
    address, keyfile, owner = sys.argv[1:4]
    ShardServer().serve(address, Path(keyfile).read_bytes(), int(owner))
