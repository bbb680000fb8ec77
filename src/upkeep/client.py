"""A Python client of ``upkeep serve``: SQL over HTTP, and subscriptions followed into a
local :class:`Replica` that resumes from its token after a disconnect or a server restart.

    client = Client("http://127.0.0.1:8765", token)
    client.sql("INSERT INTO orders VALUES (1, 'open')")
    replica = client.replica("SELECT o.id, o.status FROM orders o WHERE o.status = 'open'")
    replica.follow(until=lambda r: r.batch >= 10)
    replica.rows  # Counter of rows, equal to the query on the server's tables at r.batch
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx

from .codecs.json_values import from_json
from .errors import Error
from .types import SqlType, type_from_name


class ServiceError(Error):
    """The server refused a request (``status``: the HTTP status; ``record``: its error)."""

    fields = ("status",)

    def __init__(self, message: str, status: int | None = None, record: dict | None = None):
        super().__init__(message)
        self.status = status
        self.record = record or {}


class ReplicaError(Error):
    """A change that does not fit the replica (a row deleted that it does not hold, or
    inserted twice): a delta lost or doubled."""


@dataclass
class Result:
    columns: list[str]
    types: list[str]
    rows: list[tuple]
    rowcount: int


@dataclass
class SubscriptionInfo:
    id: str
    sql: str
    columns: list[tuple[str, str]]
    tables: list[str]
    created: int = -1  # the batch the subscription started after, where it is served


class Client:
    def __init__(self, url: str, token: str, timeout: float = 30.0) -> None:
        if not isinstance(token, str) or not token or not token.isascii() or \
                not token.isprintable():
            raise ServiceError("a token is one line of printable ASCII characters"
                               + ("" if token else ": this one is empty"))
        self.url = url.rstrip("/")
        self._http = httpx.Client(base_url=self.url, timeout=timeout,
                                  headers={"Authorization": f"Bearer {token}"})

    def _call(self, method: str, path: str, **kwargs) -> httpx.Response:
        response = self._http.request(method, path, **kwargs)
        if response.status_code >= 400:
            raise _error(response)
        return response

    def sql(self, sql: str, params: list | None = None) -> Result:
        """Run statements on the server (one atomic batch); rows decoded to Python values."""
        body = {"sql": sql} if params is None else {"sql": sql, "params": list(params)}
        data = self._call("POST", "/sql", json=body).json()
        types = [type_from_name(t) for t in data["types"]]
        rows = [decode_row(r, types) for r in data["rows"]]
        return Result(data["columns"], data["types"], rows, data["rowcount"])

    def subscribe(self, query: str) -> SubscriptionInfo:
        """The subscription to ``query`` (created on the server if no equal one exists)."""
        try:
            query.encode("utf-8")
        except UnicodeEncodeError as exc:  # bytes of no encoding, as a shell may pass them
            raise ServiceError(f"the query is not valid text: {exc.object[exc.start:exc.end]!r} "
                               f"at character {exc.start}") from None
        data = self._call("POST", "/subscriptions", json={"query": query}).json()
        return subscription_info(data)

    def subscription(self, sid: str) -> SubscriptionInfo:
        return subscription_info(self._call("GET", f"/subscriptions/{sid}").json())

    def unsubscribe(self, sid: str) -> None:
        self._call("DELETE", f"/subscriptions/{sid}")

    def tables(self) -> dict:
        """The tables and views this token may read: kind, columns, and a table's key."""
        return self._call("GET", "/tables").json()

    def status(self) -> dict:
        return self._call("GET", "/status").json()

    def events(self, sid: str, after: str | None = None,
               read_timeout: float | None = 60.0) -> Iterator[dict]:
        """The subscription's Server-Sent Events as dicts (``kind``, ``token``, ``batch``,
        ``rows`` or ``changes``), after ``after`` if given; ends when the server ends the
        stream."""
        params = {"after": after} if after else {}
        timeout = httpx.Timeout(10.0, read=read_timeout)
        with self._http.stream("GET", f"/subscriptions/{sid}/events", params=params,
                               timeout=timeout) as response:
            if response.status_code >= 400:
                response.read()
                raise _error(response)
            yield from parse_sse(response.iter_lines())

    def place(self, query: str, name: str | None = None, *, site: str | None = None,
              capacity: int | None = None, failed: list[str] = (),
              compose: bool = False) -> dict:
        """Join (or renew) member ``name`` at the server: ``{"name", "feed", "ttl",
        "subscription"}``, ``feed`` the sites to follow, nearest first; with ``compose``,
        possibly ``inputs`` and ``sql`` instead (fed by several relays)."""
        body: dict = {"query": query, "failed": list(failed), "compose": compose}
        for key, value in (("name", name), ("site", site), ("capacity", capacity)):
            if value is not None:
                body[key] = value
        return self._call("POST", "/placements", json=body).json()

    def leave(self, name: str) -> None:
        self._call("DELETE", f"/placements/{name}")

    def placement(self, name: str, known: str | None = None, wait: float = 0.0) -> dict:
        """Member ``name``'s assignment (``feed`` or ``inputs`` and ``sql``, ``ttl``,
        ``digest``); with ``known`` (a digest), answered once it differs or after ``wait``
        seconds: how a :class:`Lease` has its moves pushed."""
        params: dict = {"wait": wait}
        if known is not None:
            params["known"] = known
        return self._call("GET", f"/placements/{name}", params=params,
                          timeout=httpx.Timeout(10.0, read=wait + 10.0)).json()

    def at(self, url: str) -> Client:
        """A client of another site (a relay) with this client's token."""
        return Client(url, self._http.headers["Authorization"][7:], self._http.timeout.read
                      or 30.0)

    def replica(self, query: str, fallbacks: list[Client] = (), *, placed: bool = False,
                name: str | None = None) -> Replica:
        """Follow ``query``.  ``placed``: this client is the server's, which places the
        replica at a site that can feed it (``service/placement.py``) and moves it as sites
        come, go and are re-optimised.  Otherwise it follows here, and ``fallbacks`` (e.g.
        the source of this relay) must hold the same subscription: it resumes there if this
        site goes away."""
        if placed:
            lease = Lease(self, query, name, compose=True)
            data = lease.renew()
            return Replica(self, subscription_info(data["subscription"]), lease=lease)
        return Replica(self, self.subscribe(query), fallbacks)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


#: how long one watch of a lease's assignment waits at the server (then it asks again)
WATCH_SECONDS = 30.0


class Lease:
    """A member's place at the server, renewed within its lease (a member that stops
    renewing is dropped, and the members it fed are placed again).  Once :meth:`watch`
    runs, a move the server makes is pushed: :attr:`moved` is set, so :meth:`due` asks
    for a renewal at the follower's next event instead of a third of the lease later."""

    def __init__(self, server: Client, query: str, name: str | None = None, *,
                 site: str | None = None, capacity: int | None = None,
                 compose: bool = False) -> None:
        self.server = server
        self.query = query
        self.name = name
        self.site = site
        self.capacity = capacity
        self.compose = compose  # it may be fed by several relays (Composite)
        self.feed: list[str] = []
        self.inputs: list[dict] | None = None  # fed by several relays: each input
        self.sql: str | None = None  # and the rewriting over them
        self.ttl = 45.0
        self.renewed = -math.inf
        self.joined = False
        self.left = False  # after leave(): never renewed again
        self.digest: str | None = None  # of the assignment renewed last
        self.moved = threading.Event()  # the server's assignment differs from it
        self._watcher: Client | None = None  # watch() was called: the watch's own client
        self._watching: threading.Thread | None = None
        # one renewal or leave at a time: a renewal in flight when the member leaves (a
        # follower thread's, as a relay stops) would join it again after it left
        self._turn = threading.Lock()

    def renew(self, failed: list[str] = ()) -> dict:
        with self._turn:
            if self.left:
                raise ServiceError(f"member {self.name} left the placements")
            self.moved.clear()  # before the call: a move made during it is pushed again
            data = self.server.place(self.query, self.name, site=self.site,
                                     capacity=self.capacity, failed=failed,
                                     compose=self.compose)
            self.name, self.feed, self.ttl = data["name"], data["feed"], data["ttl"]
            self.inputs, self.sql = data.get("inputs"), data.get("sql")
            self.digest = data.get("digest")
            self.renewed = time.monotonic()
            self.joined = True
            self._start_watching()
            return data

    def due(self) -> bool:
        return self.moved.is_set() or time.monotonic() - self.renewed >= self.ttl / 3

    def watch(self) -> None:
        """Have moves pushed (idempotent): while the lease is held, a daemon thread
        long-polls the server for this member's assignment and sets :attr:`moved` when it
        differs from the one renewed last."""
        with self._turn:  # not while a leave closes the watch's client
            if self._watcher is None and not self.left:
                self._watcher = self.server.at(self.server.url)
            self._start_watching()

    def _start_watching(self) -> None:
        if (self._watcher is None or self.left or not self.joined
                or (self._watching is not None and self._watching.is_alive())):
            return
        self._watching = threading.Thread(target=self._watch, args=(self._watcher,),
                                          daemon=True, name=f"upkeep-lease-{self.name}")
        self._watching.start()

    def _watch(self, client: Client) -> None:
        """Until the lease is left or lapses (a renewal starts the watch again)."""
        known = self.digest
        while not self.left and time.monotonic() - self.renewed < self.ttl:
            try:
                data = client.placement(self.name, known, wait=min(WATCH_SECONDS, self.ttl))
            except (httpx.HTTPError, ServiceError, RuntimeError):
                # the server is away, or no longer knows this member (a lapsed lease):
                # renewing joins it again; asked again a second later
                if self.left:
                    return
                self.moved.set()
                time.sleep(1.0)
                known = None
                continue
            known = data.get("digest")
            if known != self.digest:
                self.moved.set()

    def leave(self) -> None:
        """Leave the placements, once a renewal in flight has ended (:attr:`_turn`)."""
        with self._turn:
            self.left = True
            if self._watcher is not None:
                self._watcher.close()
            if self.joined:
                self.joined = False
                try:
                    self.server.leave(self.name)
                except (httpx.TransportError, ServiceError, RuntimeError):
                    pass  # the lease lapses by itself (RuntimeError: the client closed)


class SiteGone(Exception):
    """A site said it is stopping (its ``shutdown`` event)."""


class Replica:
    """A subscription's result kept locally: ``rows`` (a Counter), the ``token`` and
    ``batch`` it is current at.

    It follows one feeder at a time (:attr:`client`).  Every feeder serves the same
    subscription with the same tokens, so moving resumes exactly.  A placed replica (with
    a :class:`Lease`) moves *make before break*: it subscribes at its new site first, and
    switches once its token is past the batch that site's subscription started at. When
    its site fails or leaves, it resumes at the server at once (whose feed holds every
    placed subscription), reports the site, and is placed again."""

    def __init__(self, client: Client, info: SubscriptionInfo,
                 fallbacks: list[Client] = (), *, lease: Lease | None = None) -> None:
        self.client = client
        self.server = client if lease is None else lease.server
        self.lease = lease
        #: manual chains: where to resume, in order, when the current feeder cannot be
        #: reached (a relay that left or failed)
        self.fallbacks = list(fallbacks)
        self.info = info
        self.types: list[SqlType] = [type_from_name(t) for _, t in info.columns]
        self.rows: Counter[tuple] = Counter()
        self.token: str | None = None
        self.batch = -1
        self.resets = 0
        self.reconnects = 0
        self.rehomed = 0  # resumed elsewhere because its feeder failed or left
        self.moves = 0  # moved to the site the server placed it at
        self.failed: set[str] = set()
        self._composite: Composite | None = None  # when fed by several relays
        self._sites: dict[str, Client] = {}
        self._created: dict[str, int] = {}

    def apply(self, event: dict) -> None:
        kind = event["kind"]
        if kind in ("snapshot", "reset"):
            self.rows = Counter(decode_row(r, self.types) for r in event["rows"])
            self.resets += kind == "reset"
        elif kind == "delta":
            for row, weight in event["changes"]:
                key = decode_row(row, self.types)
                count = self.rows[key] + weight
                if count < 0 or count > 1:
                    raise ReplicaError(f"batch {event['batch']}: row {key} would be held "
                                       f"{count} times (a change lost or doubled)")
                if count:
                    self.rows[key] = count
                else:
                    del self.rows[key]
        elif kind != "progress":
            return
        self.token, self.batch = event["token"], event["batch"]

    def follow(self, until: Callable[[Replica], bool] | None = None, timeout: float = 60.0,
               retry: float = 0.2, on_event: Callable[[dict], object] | None = None,
               stop: threading.Event | None = None) -> None:
        """Apply events until ``until(self)`` holds, the subscription ends or ``stop`` is
        set; reconnects from the token after a dropped connection or a server restart, and
        moves between sites as placed.  ``on_event`` is called after each event is
        applied.  Raises TimeoutError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        if self.lease is not None:
            self.lease.watch()
            if self.token is None:
                self.client = self._placed()
        while stop is None or not stop.is_set():
            if self.lease is not None and self.lease.inputs:
                if self._follow_inputs(until, deadline, on_event, stop):
                    return
                continue
            feeder = self.client
            try:
                if feeder is not self.server and self.lease is not None:
                    self._enter(feeder)
                wait = min(max(deadline - time.monotonic(), 0.1), 60.0)  # keep-alives: 15 s
                for event in feeder.events(self.info.id, self.token, read_timeout=wait):
                    if event["kind"] == "shutdown" and feeder is not self.server:
                        raise SiteGone(feeder.url)
                    self.apply(event)
                    if on_event is not None and event["kind"] != "keep-alive":
                        on_event(event)
                    moving = self.lease is not None and self._move()
                    if event["kind"] == "end" or (until is not None and until(self)):
                        return
                    if stop is not None and stop.is_set():
                        return
                    if moving:
                        break
                    if time.monotonic() > deadline:
                        break
            except (httpx.TransportError, httpx.StreamError, SiteGone):
                self._lost(feeder)
            except ServiceError as exc:
                if feeder is self.server:
                    raise
                if exc.record.get("class") == "TokenError" and self.lease is not None:
                    self.client = self.server  # the site is behind this replica: not a fault
                else:
                    self._lost(feeder)
            if time.monotonic() > deadline:
                raise TimeoutError(f"subscription {self.info.id}: not done after {timeout} s "
                                   f"(at batch {self.batch})")
            if self.client is feeder:
                self.reconnects += 1
                if stop is not None:
                    stop.wait(retry)
                else:
                    time.sleep(retry)

    # ------------------------------------------------------------ fed by several relays
    def _follow_inputs(self, until, deadline: float, on_event, stop) -> bool:
        """Follow the :class:`Composite` the lease names until ``until``
        holds, ``stop`` is set or the deadline passes (True), or the server places this
        replica otherwise (False: the caller follows the new way, from this token)."""
        from .codecs.json_values import to_json

        key = (tuple(i["id"] for i in self.lease.inputs), self.lease.sql)
        if self._composite is None or self._composite.key != key:
            if self._composite is not None:
                self._composite.close()
            self._composite = Composite(self.server, self.lease.inputs, self.lease.sql)
            self.moves += 1
            fresh = True
        else:
            fresh = False
        composite = self._composite
        while stop is None or not stop.is_set():
            wait = max(deadline - time.monotonic(), 0.1)
            t = composite.step(min(wait, 60.0))
            if t is not None and t >= self.batch:
                changes = composite.take(self._held() if fresh else None)
                fresh = False
                self._composed(changes, f"{composite.instance()}:{t}", t)
                if on_event is not None:
                    on_event({"kind": "delta", "token": self.token, "batch": t,
                              "changes": [[[to_json(v) for v in r], w]
                                          for r, w in changes.items()]})
                if until is not None and until(self):
                    return True
            if time.monotonic() > deadline:
                raise TimeoutError(f"subscription {self.info.id}: not done (at batch "
                                   f"{self.batch})")
            if self.lease.due():
                failed = [i.client.url for i in composite.inputs if i.rehomed]
                try:
                    self.lease.renew(failed=failed)
                except (httpx.TransportError, ServiceError):
                    pass
                if (tuple(i["id"] for i in self.lease.inputs or ()), self.lease.sql) != key:
                    composite.close()
                    self._composite = None
                    self.client = self.server  # exact from this token; moved on from there
                    return False
        return True

    def _held(self) -> Counter:
        """The rows held now (a composite this replica starts following is diffed
        against them, so the switch brings changes, not a reset)."""
        return self.rows

    def _composed(self, changes: Counter, token: str, batch: int) -> None:
        """Apply a composite's net changes (rows as Python values) up to ``batch``."""
        for row, weight in changes.items():
            count = self.rows[row] + weight
            if count < 0 or count > 1:
                raise ReplicaError(f"batch {batch}: row {row} would be held {count} "
                                   "times (a change lost or doubled)")
            if count:
                self.rows[row] = count
            else:
                del self.rows[row]
        self.token, self.batch = token, batch

    # ------------------------------------------------------------ moving between sites
    def _site(self, url: str) -> Client:
        if url not in self._sites:
            self._sites[url] = self.server.at(url)
        return self._sites[url]

    def _placed(self) -> Client:
        """The feeder the server placed this replica at (the server if none answers)."""
        url = next((u for u in self.lease.feed if u not in self.failed), None)
        return self.server if url is None else self._site(url)

    def _enter(self, site: Client) -> int:
        """Subscribe at ``site`` (once): the batch its subscription started after."""
        if site.url not in self._created:
            info = site.subscribe(self.info.sql)
            if info.id != self.info.id:
                raise ServiceError(f"{site.url} serves another subscription ({info.id})")
            self._created[site.url] = info.created
        return self._created[site.url]

    def _move(self) -> bool:
        """Renew the lease when due; switch to the placed feeder when it differs from the
        current one and holds the changes after this replica's token."""
        if self.lease.due():
            try:
                self.lease.renew()
            except (httpx.TransportError, ServiceError):
                pass  # the server is away: keep following; renewed at the next event
        if self.lease.inputs:
            return True  # fed by several relays now: follow's loop switches to them
        want = self._placed()
        if want is self.client:
            return False
        if want is not self.server:
            try:
                if self.batch < self._enter(want) or want.status()["batch"] < self.batch:
                    return False  # make before break: not yet
            except (httpx.TransportError, ServiceError):
                self._lost(want)
                return False
        self.client = want
        self.moves += 1
        return True

    def _lost(self, feeder: Client) -> None:
        """``feeder`` failed, left or refused: resume elsewhere."""
        if self.lease is None:
            if self.fallbacks and not self._reachable():
                self.client = self.fallbacks.pop(0)
                self.rehomed += 1
            return
        if feeder is self.server:
            return  # restarting: resume at it
        self.failed.add(feeder.url)
        try:
            self.lease.renew(failed=[feeder.url])
        except (httpx.TransportError, ServiceError):
            pass
        if self.client is feeder:
            self.client = self.server  # exact at once; moved on when the new site is ready
            self.rehomed += 1

    def _reachable(self) -> bool:
        try:
            self.client.status()
            return True
        except (httpx.TransportError, ServiceError):
            return False

    def close(self) -> None:
        """Leave the server's placements (a placed replica) and close the clients."""
        if self.lease is not None:
            self.lease.leave()
        if self._composite is not None:
            self._composite.close()
        for site in self._sites.values():
            site.close()


def parse_sse(lines: Iterator[str]) -> Iterator[dict]:
    """Events of a Server-Sent Events stream (``data`` as JSON); a comment (the server's
    keep-alive) as ``{"kind": "keep-alive"}``."""
    data: list[str] = []
    for line in lines:
        if line == "":
            if data:
                yield json.loads("\n".join(data))
                data = []
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())
        elif line.startswith(":"):
            yield {"kind": "keep-alive"}


def decode_row(values: list, types: list[SqlType]) -> tuple:
    return tuple(from_json(v, t) for v, t in zip(values, types, strict=True))


def subscription_info(data: dict) -> SubscriptionInfo:
    return SubscriptionInfo(data["id"], data["sql"], [tuple(c) for c in data["columns"]],
                            data["tables"], data.get("created", -1))


def _error(response: httpx.Response) -> ServiceError:
    try:
        record = response.json().get("error", {})
    except ValueError:
        record = {"message": response.text[:200]}
    return ServiceError(f"HTTP {response.status_code}: {record.get('message', '')}",
                        response.status_code, record)

# ------------------------------------------------------------------ fed by several relays
# A subscriber fed by several relays: its query computed locally from their subscriptions
# (a rewriting with several inputs, Delta's ∧ nodes, section 3; specs D.12), with a barrier
# per server batch.  The server's placements (service/placement.py) may feed a member that
# can compose by a rewriting over several relays' subscriptions: each input is a relay's own
# query, and the rewriting is SQL over the inputs, named by the relays' member names.
# Composite keeps one table per input in an embedded upkeep database and the rewriting as a
# maintained view over them.  Every input counts in server batches; the composite reads
# from the input furthest behind and applies every input's changes up to batch t as one
# transaction once all inputs have reached t, so the view is only ever read in states that
# all inputs held at the same batch, and the result at t equals the query on the server's
# tables at t.


class Input(Replica):
    """One input: a relay's subscription followed like any replica (falling back along its
    feed to the server), its events held until the barrier lets them through."""

    def __init__(self, client: Client, info: SubscriptionInfo, fallbacks: list[Client],
                 table: str) -> None:
        super().__init__(client, info, fallbacks)
        self.table = table
        self.pending: list[tuple[str, int, list]] = []  # (kind, batch, rows or changes)

    def apply(self, event: dict) -> None:
        kind = event["kind"]
        if kind in ("snapshot", "reset"):
            self.pending.append(("rows", event["batch"],
                                 [decode_row(r, self.types) for r in event["rows"]]))
        elif kind == "delta":
            self.pending.append(("delta", event["batch"],
                                 [(decode_row(r, self.types), w) for r, w in event["changes"]]))
        elif kind != "progress":
            return
        self.token, self.batch = event["token"], event["batch"]

    def floor(self) -> int:
        """The earliest batch this input can be brought to: that of its last pending
        snapshot or reset (its state before that is gone)."""
        return max((b for kind, b, _ in self.pending if kind == "rows"), default=-1)


class Composite:
    """The inputs of one assignment (``inputs``: each ``{"name", "sql", "id", "feed"}``)
    and the rewriting ``sql`` over them, kept in an embedded database."""

    def __init__(self, server: Client, inputs: list[dict], sql: str) -> None:
        from .local import Connection  # the client needs the engine only to compose

        self.key = (tuple(i["id"] for i in inputs), sql)
        self.db = Connection()
        self.inputs: list[Input] = []
        for spec in inputs:
            chain = [server.at(url) for url in spec["feed"]] + [server]
            info, at = None, 0
            while info is None:  # the nearest feeder that answers
                try:
                    info = chain[at].subscribe(spec["sql"])
                except (httpx.TransportError, ServiceError):
                    if chain[at] is server:
                        raise
                    at += 1
            if info.id != spec["id"]:
                raise ServiceError(f"{chain[at].url} serves another subscription ({info.id})")
            self.inputs.append(Input(chain[at], info, chain[at + 1:], spec["name"]))
            columns = ", ".join(f'"{c}" {t}' for c, t in info.columns)
            key = ", ".join(f'"{c}"' for c, _ in info.columns if c.startswith("__key_"))
            self.db.execute(f'CREATE TABLE "{spec["name"]}" ({columns}, PRIMARY KEY ({key}))')
        self.db.create_view("result", sql)
        self.view = self.db.view("result")
        self.changes: Counter = Counter()
        self.view.subscribe(self._changed)
        self.batch = -1  # the batch every input's table is at

    def _changed(self, changes) -> None:
        for row, weight in changes:
            self.changes[row] += weight

    def step(self, timeout: float) -> int | None:
        """Read from the input furthest behind (at least one event), then apply what the
        barrier lets through; returns the batch the view is now at, or None."""
        lagging = min(self.inputs, key=lambda i: i.batch)
        before = lagging.batch
        lagging.follow(until=lambda r: r.batch > before, timeout=timeout)
        return self._flush()

    def _flush(self) -> int | None:
        t = min(i.batch for i in self.inputs)
        if t <= self.batch or t < max(i.floor() for i in self.inputs):
            return None
        with self.db.transaction():
            for i in self.inputs:
                later = []
                for kind, batch, payload in i.pending:
                    if batch > t:
                        later.append((kind, batch, payload))
                    elif kind == "rows":
                        self.db.execute(f'DELETE FROM "{i.table}"')
                        self.db.insert(i.table, payload)
                    else:
                        self.db.delete(i.table, [r for r, w in payload if w < 0])
                        self.db.insert(i.table, [r for r, w in payload if w > 0])
                i.pending = later
        self.batch = t
        return t

    def take(self, rows: Counter | None) -> Counter:
        """The view's net changes since the last call; with ``rows`` (the replica's rows
        when it starts following this composite), the difference from them."""
        if rows is not None:
            self.changes = Counter(self.view.rows())
            self.changes.subtract(rows)
        out = Counter({r: w for r, w in self.changes.items() if w})
        self.changes = Counter()
        return out

    def instance(self) -> str:
        return self.inputs[0].token.rpartition(":")[0]

    def close(self) -> None:
        for i in self.inputs:
            i.close()
        self.db.close()
