"""``upkeep serve`` / ``upkeep.serve(...)``: the service on uvicorn, in this process.

:class:`Server` owns the hub and the HTTP server; ``start()`` runs it on a background
thread (tests, notebooks, an application that also writes through :meth:`Server.execute`),
``run()`` in the foreground until interrupted (the command line).  It listens on
127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import uvicorn

from ..cursor import Cursor
from ..engine import Engine
from ..errors import Error
from ..local.connection import open_local
from .app import STATEMENT_SECONDS, RefusedHandshakes, Service
from .grants import Tokens
from .hub import Hub, Relay
from .placement import Placements

log = logging.getLogger("upkeep.service")
NEVER = 1e9  # seconds (31 years): a longer period or limit is none at all


class ServiceError(Error):
    """The service could not start (address in use, bad options)."""


class Server:
    """A served database.  ``database``: a directory of the local engine (opened and
    closed by the server) or an open connection of the local or the Spark engine (left
    open)."""

    def __init__(self, database: str | os.PathLike | Engine, tokens: Tokens | str | Path,
                 *, host: str = "127.0.0.1", port: int = 8765, retention: int = 100_000,
                 fsync: bool = True, relay: Relay | None = None, fanout: int | None = None,
                 capacity: int = 20, ttl: float = 45.0, replan: float = 60.0,
                 statement_seconds: float | None = STATEMENT_SECONDS) -> None:
        self.owns_db = isinstance(database, (str, os.PathLike))
        self._db_closed = False
        # the tokens first: a bad tokens file must not leave a new, empty database behind
        self.tokens = tokens if isinstance(tokens, Tokens) else Tokens.load(tokens)
        self.db = open_local(database, fsync=fsync) if self.owns_db else database
        try:
            placements = None if relay is not None else Placements(
                source_bound=fanout, default_capacity=capacity, ttl=ttl)
            self.hub = Hub(self.db, retention=retention, relay=relay, placements=placements)
        except BaseException:
            if self.owns_db:
                self.db.close()
            raise
        self.service = Service(self.hub, self.tokens)
        # 0 or inf: no limit (a timer cannot wait past the platform's time_t)
        self.service.statement_seconds = (statement_seconds if statement_seconds
                                          and statement_seconds < NEVER else None)
        self.hub.statement_seconds = self.service.statement_seconds
        try:
            self.socket = socket.create_server((host, port))
            self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError as exc:
            self.close_db()
            raise ServiceError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
        self.host, self.port = self.socket.getsockname()[:2]
        self._uvicorn = _Uvicorn(self.hub, uvicorn.Config(
            self.service.app, log_level="warning", lifespan="off", ws="websockets-sansio",
            timeout_graceful_shutdown=2))
        uvicorn_errors = logging.getLogger("uvicorn.error")
        if not any(isinstance(f, RefusedHandshakes) for f in uvicorn_errors.filters):
            uvicorn_errors.addFilter(RefusedHandshakes())
        self._thread: threading.Thread | None = None
        #: seconds between re-optimisations of the placements (0: only when asked)
        self.replan = replan
        self._stopping = threading.Event()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def execute(self, sql: str, parameters=None) -> Cursor:
        """Run SQL on the served database from this process (no grants: the owner)."""
        with self.hub.lock:
            return self.db.execute(sql, parameters)

    def start(self) -> Server:
        """Serve on a background thread; returns once requests are answered."""
        self._thread = threading.Thread(target=self._uvicorn.run,
                                        kwargs={"sockets": [self.socket]}, daemon=True,
                                        name="upkeep-serve")
        self._thread.start()
        while not self._uvicorn.started:
            if not self._thread.is_alive():
                raise ServiceError("the server stopped while starting")
            self._thread.join(0.01)
        self._start_replanning()
        return self

    def _start_replanning(self) -> None:
        if self.hub.placements is None or not self.replan or self.replan >= NEVER:
            return  # 0 or inf: never

        def loop() -> None:
            while not self._stopping.wait(self.replan):
                try:
                    self.service.reoptimise()
                except Exception:  # noqa: BLE001 - logged; the current placements stay
                    log.exception("re-optimising the placements failed")
        threading.Thread(target=loop, daemon=True, name="upkeep-replan").start()

    def run(self) -> None:
        """Serve in the foreground until interrupted (Ctrl-C, SIGTERM)."""
        self._start_replanning()
        try:
            self._uvicorn.run(sockets=[self.socket])
        finally:
            self.stop()

    def stop(self) -> None:
        """Stop serving: listeners get ``shutdown``, then the database is closed (if the
        server opened it)."""
        self._stopping.set()
        if self._thread is not None:
            self.hub.shutting_down()
            self._uvicorn.should_exit = True
            self._thread.join(10)
            self._thread = None
        self.hub.close()
        self.socket.close()
        self.close_db()

    def close_db(self) -> None:
        if self.owns_db and not self._db_closed:
            self._db_closed = True
            self.db.close()

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


class _Uvicorn(uvicorn.Server):
    """uvicorn, telling the streams to end when a signal stops it (they would otherwise
    hold the graceful shutdown until it times out)."""

    def __init__(self, hub: Hub, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.hub = hub

    def handle_exit(self, sig: int, frame) -> None:
        self.hub.shutting_down()
        super().handle_exit(sig, frame)


def serve(database: str | os.PathLike | Engine, tokens: Tokens | str | Path, *,
          host: str = "127.0.0.1", port: int = 8765, retention: int = 100_000,
          fanout: int | None = None, capacity: int = 20, replan: float = 60.0,
          block: bool = True, on_ready: Callable[[Server], None] | None = None,
          statement_seconds: float | None = STATEMENT_SECONDS) -> Server:
    """Serve ``database`` over HTTP (see :mod:`upkeep.service.app` for the endpoints);
    blocks until interrupted unless ``block=False`` (then returns the started server).
    ``fanout``: how many members the server feeds before it places them at sites only
    (None: no bound); ``capacity``: a site's default fan-out bound; ``replan``: seconds
    between re-optimisations of the placements; ``statement_seconds``: how long one
    request's DuckDB work may run before it is stopped (0 or None: no limit);
    ``on_ready(server)``: called once the
    database is open and the port bound (``server.url`` names the port port 0 chose)."""
    server = Server(database, tokens, host=host, port=port, retention=retention,
                    fanout=fanout, capacity=capacity, replan=replan,
                    statement_seconds=statement_seconds)
    if on_ready is not None:
        on_ready(server)
    if not block:
        return server.start()
    server.run()
    return server
