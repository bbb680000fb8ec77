"""The HTTP interface of ``upkeep serve`` (Starlette): SQL over HTTP and subscriptions.

Every endpoint needs ``Authorization: Bearer <token>`` (or ``?access_token=``, for a
browser's EventSource, which cannot set headers); errors are JSON, ``{"error": {"class",
"message", ...fields}}`` with the position where there is one, never a traceback.

* ``POST /sql`` ``{"sql": "...", "params": [...]}``: the statements run as one atomic
  batch (with a CREATE or DROP among them: one after the other); the last one's result as ``{"columns", "types", "rows", "rowcount"}``, or as an
  Arrow IPC stream when the request accepts ``application/vnd.apache.arrow.stream``.
* ``GET /tables``: the tables and views the caller may read, with their columns.
* ``POST /subscriptions`` ``{"query": "..."}``: a subscription (``service/hub.py``);
  ``GET /subscriptions`` lists those the caller may read; ``DELETE /subscriptions/<id>``.
* ``GET /subscriptions/<id>/events``: Server-Sent Events, ``id:`` the resume token;
  resume with ``?after=<token>`` or the ``Last-Event-ID`` header.
* ``WS /subscriptions/<id>/ws?after=<token>``: the same events as JSON messages.
* ``POST /placements`` ``{"query", "name", "site", "capacity", "failed", "compose"}``:
  join (or renew) a member: where it is fed (``feed``, or ``inputs`` and ``sql``), its
  ``ttl`` and ``digest``; ``GET /placements/<name>?known=<digest>&wait=<s>``: the same
  once it differs from ``known`` or after ``wait`` seconds (moves pushed by long poll);
  ``DELETE /placements/<name>``: leave; ``POST /placements/optimise`` (admin).
* ``GET /status``: subscriptions with their listeners and lag, the last batch, the feed.
* ``GET /``: the status page (views, the dissemination tree, each subscription's lag, and
  a subscription's rows live).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import secrets
from collections.abc import AsyncIterator, Callable
from contextvars import ContextVar
from decimal import Decimal
from http import HTTPStatus
from pathlib import Path

import pyarrow as pa
from sqlglot import exp
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from ..codecs.json_values import to_json
from ..duckdb_scratch import time_limit
from ..errors import ConstraintError, Error, EvaluationError, SchemaError, StatementTimeout
from ..sql import is_query, located, names_cte, parse
from .grants import GrantError, Principal, Tokens
from .hub import PREFIX, Event, Hub, UnknownSubscription
from .placement import Assignment, NameTaken, UnknownMember

ARROW = "application/vnd.apache.arrow.stream"
PAGE = Path(__file__).with_name("page.html")
KEEPALIVE_SECONDS = 15.0
PROGRESS_SECONDS = 1.0
MAX_QUEUED = 10_000
#: the default of :attr:`Service.statement_seconds` (``upkeep serve --statement-seconds``)
STATEMENT_SECONDS = 60.0
#: the longest a member's watch of its assignment is held open (``GET /placements/{name}``)
MAX_WATCH_SECONDS = 60.0
log = logging.getLogger("upkeep.service")

#: set in the task of a WebSocket connection this app refused with an HTTP response
_refused_handshake: ContextVar[bool] = ContextVar("upkeep_refused_handshake", default=False)


class RefusedHandshakes(logging.Filter):
    """uvicorn's sans-I/O WebSocket protocol logs "ASGI callable returned without
    completing handshake" after a handshake the app refused with an HTTP response (a
    denial response), as if the app had left it hanging.  This drops that line for the
    connections this app refused, and only for them (attached to ``uvicorn.error``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (_refused_handshake.get() and
                    record.getMessage().startswith("ASGI callable returned without"))


def _target(stmt: exp.Insert | exp.Update | exp.Delete) -> str:
    """The table a write changes (lower case)."""
    target = stmt.this
    while isinstance(target, exp.Schema):
        target = target.this
    return target.name.lower()


def _reads_its_target(stmt: exp.Insert | exp.Update | exp.Delete, target: str) -> bool:
    """Whether a write reads its target's rows, so that writing needs reading too (as
    PostgreSQL asks for SELECT): an INSERT whose query reads it, an UPDATE or DELETE with a
    WHERE, or a SET computed from columns (RETURNING is refused when parsed)."""
    if sum(t.name.lower() == target for t in stmt.find_all(exp.Table)) > 1:
        return True
    if isinstance(stmt, exp.Insert):
        return False
    sets = stmt.expressions if isinstance(stmt, exp.Update) else []
    return (stmt.args.get("where") is not None
            or any(a.expression.find(exp.Column) is not None for a in sets))


async def _refuse(websocket: WebSocket, response: Response) -> None:
    """Refuse a WebSocket handshake with ``response`` (an HTTP status and a JSON body)."""
    _refused_handshake.set(True)  # the connection's task: seen by RefusedHandshakes
    await websocket.send_denial_response(response)

#: statements that change the catalog: an admin's (the engine refuses ALTER itself)
_DDL = (exp.Create, exp.Drop, exp.Alter)
#: DuckDB table functions that read files or the network: never reachable over HTTP
_FILE_FUNCTIONS = ("read_", "glob", "parquet_", "sniff_csv", "iceberg_", "delta_scan",
                   "sqlite_scan", "postgres_scan", "mysql_scan")


def _parameter(value: object) -> object:
    """A JSON parameter as the engine takes it: a number with a fraction or an exponent is
    a DOUBLE where a double holds it as written (``0.1``), else a DECIMAL of its digits
    (``123456789012345678.0123456789``: JSON carries them exactly, a double would not)."""
    if isinstance(value, Decimal):
        as_float = float(value)
        exact = math.isfinite(as_float) and Decimal(repr(as_float)) == value
        return as_float if exact else value
    if isinstance(value, list):
        return [_parameter(v) for v in value]
    if isinstance(value, dict):
        return {k: _parameter(v) for k, v in value.items()}
    return value


#: the largest request body read (SQL text, a subscription, a placement): a larger one is
#: refused with 413 before it is read whole
MAX_BODY_BYTES = 16 * 1024 * 1024


class BadRequest(Error):
    """A request that is not of the documented shape."""


class TooLarge(BadRequest):
    """A request body over :data:`MAX_BODY_BYTES`."""


def status_of(error: Exception) -> int:
    if isinstance(error, TooLarge):
        return 413
    if isinstance(error, GrantError):
        return 403
    if isinstance(error, (UnknownSubscription, UnknownMember)):
        return 404
    if isinstance(error, (ConstraintError, NameTaken)):
        return 409
    return 400


def error_response(error: Exception) -> JSONResponse:
    if isinstance(error, Error):
        return JSONResponse({"error": error.to_record()}, status_of(error))
    if isinstance(error, ClientDisconnect):  # the client hung up mid-request: nobody to
        return JSONResponse({"error": {"class": "ClientDisconnect",  # answer, nothing
                                       "message": "the client went away"}}, 400)  # to log
    log.exception("internal error", exc_info=error)
    return JSONResponse({"error": {"class": "InternalError",
                                   "message": f"{type(error).__name__}: {error}"}}, 500)


async def http_error(request: Request, exc: HTTPException) -> Response:
    """Starlette's own answers (no such path, a method the path does not take) in the
    service's JSON error shape."""
    if exc.status_code < 400:
        return Response(status_code=exc.status_code, headers=exc.headers)
    name = "".join(w.capitalize() for w in HTTPStatus(exc.status_code).phrase.split())
    return JSONResponse({"error": {"class": name, "message":
                                   f"{exc.detail}: {request.method} {request.url.path}"}},
                        exc.status_code, headers=exc.headers)


def event_json(event: Event) -> dict:
    out: dict = {"kind": event.kind, "token": event.token, "batch": event.batch}
    if event.rows is not None:
        out["rows"] = [[to_json(v) for v in r] for r in event.rows]
    if event.changes is not None:
        out["changes"] = [[[to_json(v) for v in r], w] for r, w in event.changes]
    return out


class Service:
    """The Starlette app over one hub, with its tokens."""

    def __init__(self, hub: Hub, tokens: Tokens) -> None:
        self.hub = hub
        self.tokens = tokens
        #: open streams: id -> (subscription, [the last batch sent to it])
        self.streams: dict[int, tuple[str, list[int]]] = {}
        #: bytes of events sent to subscribers (the dissemination's cost at this server)
        self.bytes_sent = 0
        #: events queued for one stream beyond which it is ended with ``lagging``
        self.max_queued = MAX_QUEUED
        #: seconds a statement's DuckDB work may take before it is stopped (None: no
        #: limit): requests run one at a time, so one client's query holds every other
        self.statement_seconds: float | None = STATEMENT_SECONDS
        # members watching their assignments wait on _moved, set and replaced (in the
        # server's loop) whenever the placements change or the server stops
        self._moved: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False
        if hub.placements is not None:
            hub.placements.on_moved = self._placements_changed
        hub.on_shutdown.append(self._shutting_down)
        self.app = Starlette(routes=[
            Route("/", self.page, methods=["GET"]),
            Route("/sql", self.sql, methods=["POST"]),
            Route("/tables", self.tables, methods=["GET"]),
            Route("/status", self.status, methods=["GET"]),
            Route("/subscriptions", self.subscriptions, methods=["GET", "POST"]),
            Route("/subscriptions/{sid}", self.subscription, methods=["GET", "DELETE"]),
            Route("/subscriptions/{sid}/events", self.events, methods=["GET"]),
            Route("/placements", self.place, methods=["POST"]),
            Route("/placements/optimise", self.optimise, methods=["POST"]),
            Route("/placements/{name}", self.member, methods=["GET", "DELETE"]),
            WebSocketRoute("/subscriptions/{sid}/ws", self.websocket),
            WebSocketRoute("/{path:path}", self.no_websocket),
        ], exception_handlers={HTTPException: http_error})

    # ------------------------------------------------------------ helpers
    def _count(self, message: bytes | str) -> bytes | str:
        self.bytes_sent += len(message)
        return message

    def principal(self, conn: Request | WebSocket) -> Principal | None:
        header = conn.headers.get("authorization", "")
        token = header[7:].strip() if header.lower().startswith("bearer ") else None
        return self.tokens.principal(token or conn.query_params.get("access_token"))

    @staticmethod
    async def body(request: Request) -> dict:
        declared = request.headers.get("content-length", "")
        if declared.isascii() and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
            raise TooLarge(f"the request body ({declared} bytes) is over the limit of "
                           f"{MAX_BODY_BYTES} bytes")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                raise TooLarge(f"the request body is over the limit of {MAX_BODY_BYTES} bytes")
            chunks.append(chunk)
        try:
            data = json.loads(b"".join(chunks) or b"null", parse_float=Decimal)
        except (ValueError, RecursionError) as exc:
            raise BadRequest(f"the request body is not JSON: {str(exc)[:200]}") from None
        if not isinstance(data, dict):
            raise BadRequest("the request body must be a JSON object")
        return data

    async def guarded(self, request: Request, handler: Callable) -> Response:
        principal = self.principal(request)
        if principal is None:
            return JSONResponse({"error": {"class": "Unauthorized", "message":
                                           "a valid bearer token is required"}}, 401,
                                headers={"WWW-Authenticate": "Bearer"})
        try:
            return await handler(principal)
        except Exception as exc:  # noqa: BLE001 - every error becomes a JSON answer
            return error_response(exc)

    def readable_tables(self, names: set[str]) -> set[str]:
        """The base tables under ``names`` (a view stands for the tables it reads)."""
        catalog = self.hub.db.local_catalog
        return {t for name in names for t in catalog.reads(name) if t not in catalog.views}

    def authorize(self, principal: Principal, stmt: exp.Expression) -> None:
        """Refuse a statement outside the principal's grants (or reading files)."""
        db = self.hub.db
        known = set(db.tables()) | set(db.views())
        for func in stmt.find_all(exp.Func):
            name = (func.sql_name() if not isinstance(func, exp.Anonymous) else
                    str(func.this)).lower()
            if name.startswith(_FILE_FUNCTIONS):
                raise GrantError(f"{principal.name} may not call {name} (it reads files)")
        names = set()
        for table in stmt.find_all(exp.Table):
            name = table.name.lower()
            if names_cte(table):
                continue
            if name.startswith(PREFIX) and not is_query(stmt):
                raise GrantError(f"{name} is a subscription's view: end the subscription with "
                                 "DELETE /subscriptions/<id>")
            if isinstance(table.this, exp.GenerateSeries):  # range(), generate_series()
                continue
            if not isinstance(table.this, exp.Identifier) or name not in known:
                if isinstance(stmt, _DDL):  # an admin's, naming what it makes or ends
                    continue
                if isinstance(table.this, exp.Identifier):  # as upkeep.connect says it
                    raise SchemaError(f"unknown table or view {name}{located(table)}")
                raise GrantError(f"{principal.name} may not read {table.sql()[:60]}")
            names.add(name)
        if isinstance(stmt, _DDL):
            principal.check_admin(f"run {stmt.key.upper()}")
            return
        if isinstance(stmt, (exp.Insert, exp.Update, exp.Delete)):
            target = _target(stmt)
            principal.check_write(target)
            if not _reads_its_target(stmt, target):
                names.discard(target)
        elif not is_query(stmt):
            principal.check_admin(f"run {stmt.key.upper()}")
        principal.check_read(self.readable_tables(names))

    # ------------------------------------------------------------ endpoints
    async def page(self, request: Request) -> Response:
        """The status page, opened as ``/?access_token=...``: its script reads the API with
        that token."""
        async def handle(principal: Principal) -> Response:
            return HTMLResponse(PAGE.read_text(), headers={"Cache-Control": "no-store"})
        return await self.guarded(request, handle)

    async def sql(self, request: Request) -> Response:
        async def handle(principal: Principal) -> Response:
            data = await self.body(request)
            text, params = data.get("sql"), data.get("params")
            if not isinstance(text, str):
                raise BadRequest('"sql" must be a string of SQL')
            if params is not None and not isinstance(params, list):
                raise BadRequest('"params" must be a list')
            params = None if params is None else [_parameter(p) for p in params]
            cursor = await run_in_threadpool(self._run_sql, principal, text, params)
            if ARROW in request.headers.get("accept", ""):
                sink = pa.BufferOutputStream()
                table = cursor.arrow() if cursor.description else pa.table({})
                with pa.ipc.new_stream(sink, table.schema) as writer:
                    writer.write_table(table)
                return Response(sink.getvalue().to_pybytes(), media_type=ARROW)
            description = cursor.description or []
            return JSONResponse({
                "columns": [d[0] for d in description], "types": [d[1] for d in description],
                "rows": [[to_json(v) for v in r] for r in cursor.fetchall()],
                "rowcount": cursor.rowcount})
        return await self.guarded(request, handle)

    def _run_sql(self, principal: Principal, text: str, params: list | None):
        statements = parse(text)
        db = self.hub.db
        with self.hub.lock:
            if params is not None and len(statements) > 1:
                raise BadRequest("params with several statements")
            if any(isinstance(s, _DDL) for s in statements):
                for stmt in statements:  # each checked when the ones before it have run
                    self.authorize(principal, stmt)
                    cursor = db.execute_parsed(stmt)
                return cursor
            for stmt in statements:
                self.authorize(principal, stmt)
            try:
                with time_limit(self.statement_seconds):
                    if len(statements) == 1:
                        return db.execute(text, params)
                    with db.transaction():
                        for stmt in statements:
                            cursor = db.execute_parsed(stmt)
                    return cursor
            except (ConstraintError, EvaluationError, SchemaError) as exc:
                raise self._withheld(principal, statements, exc) from None

    def _withheld(self, principal: Principal, statements: list[exp.Expression],
                  error: Error) -> Error:
        """``error`` of a write, without the values it shows where they could come from a
        table the principal may not read: the rows a written table holds (an UPDATE's
        failing row, a NOT NULL or key violation) or what a view over the change read (a
        view's failing cast), as PostgreSQL leaves a key's values out of an error for a
        user without SELECT.  Errors that show no stored value pass unchanged."""
        if isinstance(error, StatementTimeout):
            return error
        names = {_target(stmt) for stmt in statements
                 if isinstance(stmt, (exp.Insert, exp.Update, exp.Delete))}
        view = getattr(error, "view", None)
        if view is not None:
            names.add(view)
        hidden = sorted(t for t in self.readable_tables(names) if not principal.may_read(t))
        if not hidden:
            return error
        what = "a view over the change could not be maintained" if view is not None else \
            "the change was rejected"
        return type(error)(f"{what} ({type(error).__name__}); its values are not shown: "
                           f"{principal.name} may not read table {', '.join(hidden)}")

    async def tables(self, request: Request) -> Response:
        def listing(principal: Principal) -> dict:
            db, out = self.hub.db, {}
            with self.hub.lock:
                keys = {t: key for t, (_, key) in self.hub.schema().items()}
                for name in [*db.tables(), *db.views()]:
                    under = self.readable_tables({name})
                    if not name.startswith("__") and all(map(principal.may_read, under)):
                        out[name] = {"kind": "table" if name in db.tables() else "view",
                                     "columns": [[c, t.sql()] for c, t in db.schema_of(name)]}
                        if name in keys:
                            out[name]["key"] = keys[name]
            return out

        async def handle(principal: Principal) -> Response:
            return JSONResponse(await run_in_threadpool(listing, principal))
        return await self.guarded(request, handle)

    async def status(self, request: Request) -> Response:
        def report(principal: Principal) -> dict:
            hub = self.hub
            with hub.lock:
                now, sent = hub.now(), {}
                for sid, position in list(self.streams.values()):
                    sent.setdefault(sid, []).append(position[0])
                subs = [{"id": s.id, "sql": s.sql, "tables": sorted(s.tables),
                         "listeners": hub.listeners(s.id), "created": s.created,
                         "lag": max(0, now - min(sent[s.id])) if s.id in sent else None}
                        for s in hub.subscriptions.values()
                        if all(map(principal.may_read, s.tables))]
                out = {"batch": now, "subscriptions": subs, "bytes_sent": self.bytes_sent,
                       "feed": {"records": len(hub.feed.records), "horizon": hub.feed.horizon}}
                if hub.placements is not None:
                    hub.placements.expire()
                    tree = hub.placements.describe()
                    tree["members"] = [m for m in tree["members"]
                                       if all(map(principal.may_read, m["tables"]))]
                    out["placement"] = tree
                return out

        async def handle(principal: Principal) -> Response:
            return JSONResponse(await run_in_threadpool(report, principal))
        return await self.guarded(request, handle)

    def _describe(self, principal: Principal, sid: str) -> dict:
        with self.hub.lock:
            served = self.hub.get(principal, sid)
            return {"id": served.id, "sql": served.sql, "tables": sorted(served.tables),
                    "columns": [[c, t] for c, t in self.hub.columns(served)],
                    "created": served.created}

    def _listing(self, principal: Principal) -> list[dict]:
        with self.hub.lock:
            return [self._describe(principal, s.id) for s in self.hub.subscriptions.values()
                    if all(map(principal.may_read, s.tables))]

    async def subscriptions(self, request: Request) -> Response:
        async def handle(principal: Principal) -> Response:
            if request.method == "GET":
                return JSONResponse(await run_in_threadpool(self._listing, principal))
            query = (await self.body(request)).get("query")
            if not isinstance(query, str):
                raise BadRequest('"query" must be a string of SQL')
            served = await run_in_threadpool(self.hub.subscribe, principal, query)
            return JSONResponse(await run_in_threadpool(self._describe, principal, served.id),
                                201)
        return await self.guarded(request, handle)

    async def subscription(self, request: Request) -> Response:
        sid = request.path_params["sid"]

        async def handle(principal: Principal) -> Response:
            if request.method == "DELETE":
                await run_in_threadpool(self.hub.drop, principal, sid)
                return Response(status_code=204)
            return JSONResponse(await run_in_threadpool(self._describe, principal, sid))
        return await self.guarded(request, handle)

    async def place(self, request: Request) -> Response:
        """Join or renew a member (``service/placement.py``): where it is fed."""
        async def handle(principal: Principal) -> Response:
            data = await self.body(request)
            query, name = data.get("query"), data.get("name")
            if name is None:  # absent or null: the server names the member
                name = secrets.token_hex(8)
            site, capacity, failed = data.get("site"), data.get("capacity"), data.get("failed", [])
            if not isinstance(query, str):
                raise BadRequest('"query" must be a string of SQL')
            if not (isinstance(name, str) and name) or (site is not None
                                                        and not isinstance(site, str)):
                raise BadRequest('"name" must be a non-empty string and "site" a string')
            if capacity is not None and (not isinstance(capacity, int) or
                                         isinstance(capacity, bool)):
                raise BadRequest('"capacity" must be an integer')
            if not isinstance(failed, list) or not all(isinstance(u, str) for u in failed):
                raise BadRequest('"failed" must be a list of URLs')
            compose = data.get("compose", False)
            if not isinstance(compose, bool):
                raise BadRequest('"compose" must be true or false')
            served, assignment = await run_in_threadpool(
                self.hub.place, principal, query, name, site=site, capacity=capacity,
                failed=failed, compose=compose)
            out = assignment_json(assignment)
            out["subscription"] = await run_in_threadpool(self._describe, principal, served.id)
            return JSONResponse(out)
        return await self.guarded(request, handle)

    async def member(self, request: Request) -> Response:
        """``GET``: watch the member's assignment (moves pushed); ``DELETE``: leave."""
        name = request.path_params["name"]

        async def handle(principal: Principal) -> Response:
            if request.method == "GET":
                return JSONResponse(await self._watch(principal, name, request.query_params))

            def run() -> None:
                with self.hub.lock:
                    if self.hub.placements is not None:
                        self.hub.placements.leave(name, principal.name)
            await run_in_threadpool(run)
            return Response(status_code=204)
        return await self.guarded(request, handle)

    async def _watch(self, principal: Principal, name: str, params) -> dict:
        """The member's assignment once its digest differs from ``known``, or after
        ``wait`` seconds (a long poll: how the server pushes moves to its members, who
        would otherwise learn them at their next lease renewal)."""
        try:
            wait = float(params.get("wait", 0))
        except ValueError:
            raise BadRequest('"wait" must be a number of seconds') from None
        if not 0 <= wait <= MAX_WATCH_SECONDS:
            raise BadRequest(f'"wait" must be between 0 and {MAX_WATCH_SECONDS:g} seconds')
        known = params.get("known")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait

        def read() -> Assignment:
            with self.hub.lock:
                if self.hub.placements is None:
                    raise BadRequest("placements are made by the server this relay follows")
                return self.hub.placements.assignment_of(name, principal.name)
        while True:
            changed = self._moved_event(loop)  # taken first: a change after the read wakes it
            out = assignment_json(await run_in_threadpool(read))
            remaining = deadline - loop.time()
            if out["digest"] != known or remaining <= 0 or self._stopping:
                return out
            try:
                await asyncio.wait_for(changed.wait(), remaining)
            except TimeoutError:
                pass

    def _moved_event(self, loop: asyncio.AbstractEventLoop) -> asyncio.Event:
        if self._loop is not loop:  # first watch (or a server started again)
            self._loop, self._moved = loop, asyncio.Event()
        return self._moved

    def _wake_watchers(self) -> None:
        """In the server's loop: wake every watch (each reads its assignment again)."""
        if self._moved is not None:
            self._moved.set()
            self._moved = asyncio.Event()

    def _placements_changed(self) -> None:
        """Called by the placements, from any thread, after they changed."""
        loop = self._loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(self._wake_watchers)
            except RuntimeError:  # the server's loop is closed: nobody is watching
                pass

    def _shutting_down(self) -> None:
        self._stopping = True
        self._placements_changed()

    async def optimise(self, request: Request) -> Response:
        """Re-optimise the whole configuration now (admin): Table 1's ILP, then LOGA."""
        async def handle(principal: Principal) -> Response:
            principal.check_admin("re-optimise the placements")
            moved = await run_in_threadpool(self.reoptimise)
            return JSONResponse({"moved": moved})
        return await self.guarded(request, handle)

    def reoptimise(self) -> int:
        with self.hub.lock:
            if self.hub.placements is None:
                raise BadRequest("placements are made by the server this relay follows")
            return self.hub.placements.reoptimise()

    async def _listen(self, principal: Principal, sid: str, after: str | None
                      ) -> tuple[list[Event], asyncio.Queue, Callable[[Event], None]]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()
        dropped = [False]
        queued: list[Event | None] = [None]  # the last event the client will be sent

        def listener(event: Event) -> None:
            if dropped[0]:
                return
            if queue.qsize() >= self.max_queued and event.kind != "shutdown":
                # a subscriber this far behind is cut off instead of growing the server's
                # memory: the stream ends with "lagging", whose token is that of the last
                # event the client gets (not of this one, which it never gets), so that
                # it resumes from there; none queued: an empty token, a fresh snapshot
                dropped[0] = True
                last = queued[0]
                event = (Event("lagging", last.batch, last.token) if last is not None
                         else Event("lagging", event.batch, ""))
            queued[0] = event
            try:
                loop.call_soon_threadsafe(queue.put_nowait, event)
            except RuntimeError:  # the server's loop is closed: the stream is over
                pass
        first = await run_in_threadpool(self.hub.listen, principal, sid, after, listener)
        return first, queue, listener

    async def _next(self, queue: asyncio.Queue, listener: Callable[[Event], None],
                    sent: list[int]) -> Event | None:
        """The next event.  When none comes for PROGRESS_SECONDS while batches commit, a
        ``progress`` event is queued (so a client knows how current it is); None after
        KEEPALIVE_SECONDS of nothing at all."""
        waited = 0.0
        while waited < KEEPALIVE_SECONDS:
            try:
                event = await asyncio.wait_for(queue.get(), PROGRESS_SECONDS)
                sent[0] = event.batch
                return event
            except TimeoutError:
                waited += PROGRESS_SECONDS
                if self.hub.now() > sent[0]:
                    sent[0] = await run_in_threadpool(self.hub.progress, listener)
        return None

    async def events(self, request: Request) -> Response:
        sid = request.path_params["sid"]

        async def handle(principal: Principal) -> Response:
            after = request.query_params.get("after") or request.headers.get("last-event-id")
            first, queue, listener = await self._listen(principal, sid, after)

            async def stream() -> AsyncIterator[bytes]:
                sent = [first[-1].batch if first else -1]
                self.streams[id(sent)] = (sid, sent)
                try:
                    for event in first:
                        yield self._count(_sse(event))
                    while True:
                        event = await self._next(queue, listener, sent)
                        if event is None:
                            yield b": keep-alive\n\n"
                            continue
                        yield self._count(_sse(event))
                        if event.kind in ("end", "shutdown", "lagging"):
                            return
                finally:
                    self.streams.pop(id(sent), None)
                    self.hub.unlisten(sid, listener)
            return StreamingResponse(stream(), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-store"})
        return await self.guarded(request, handle)

    async def no_websocket(self, websocket: WebSocket) -> None:
        """A WebSocket to any other path: refused in the handshake as an HTTP 404 with a
        JSON error, as HTTP requests to unknown paths are (not Starlette's bare 403)."""
        await _refuse(websocket, JSONResponse(
            {"error": {"class": "NotFound", "message": f"no WebSocket endpoint at "
                       f"{websocket.url.path} (subscriptions stream at "
                       f"/subscriptions/<id>/ws)"}}, 404))

    async def websocket(self, websocket: WebSocket) -> None:
        sid = websocket.path_params["sid"]
        principal = self.principal(websocket)
        if principal is None:  # refused in the handshake, as an HTTP 401
            await _refuse(websocket, JSONResponse(
                {"error": {"class": "Unauthorized",
                           "message": "a valid bearer token is required"}}, 401))
            return
        await websocket.accept()
        try:
            first, queue, listener = await self._listen(
                principal, sid, websocket.query_params.get("after"))
        except Exception as exc:  # noqa: BLE001 - sent as the error message, then closed
            record = exc.to_record() if isinstance(exc, Error) else {"message": str(exc)}
            await websocket.send_json({"kind": "error", "status": status_of(exc),
                                       "error": record})
            await websocket.close(code=4000 + status_of(exc))
            return
        sent = [first[-1].batch if first else -1]
        self.streams[id(sent)] = (sid, sent)
        # the stream is the server's to send; what the client sends is read and dropped,
        # so the socket keeps being read (pongs, the client's close): left unread, one
        # client message stopped the reading and the ping timeout cut the stream
        reader = asyncio.create_task(_ignore_messages(websocket))
        try:
            for event in first:
                await websocket.send_text(self._count(json.dumps(event_json(event))))
            while not reader.done():
                event = await self._next(queue, listener, sent)
                if event is None:
                    await websocket.send_json({"kind": "keep-alive"})
                    continue
                await websocket.send_text(self._count(json.dumps(event_json(event))))
                if event.kind in ("end", "shutdown", "lagging"):
                    await websocket.close()
                    return
        except WebSocketDisconnect:
            pass
        finally:
            reader.cancel()
            self.streams.pop(id(sent), None)
            self.hub.unlisten(sid, listener)


async def _ignore_messages(websocket: WebSocket) -> None:
    """Read a subscription stream's incoming messages until the client goes."""
    try:
        while (await websocket.receive())["type"] != "websocket.disconnect":
            pass
    except (WebSocketDisconnect, RuntimeError):  # gone, or closed by the stream
        pass


def assignment_json(assignment: Assignment) -> dict:
    """A member's assignment as it is answered, with the digest it watches."""
    out = {"name": assignment.name, "feed": assignment.feed, "ttl": assignment.ttl,
           "digest": assignment.digest()}
    if assignment.inputs is not None:
        out["inputs"], out["sql"] = assignment.inputs, assignment.sql
    return out


def _sse(event: Event) -> bytes:
    return (f"id: {event.token}\nevent: {event.kind}\n"
            f"data: {json.dumps(event_json(event), allow_nan=False)}\n\n").encode()
