"""Subscriptions served from one database: each is a maintained view, its committed changes
go to a durable feed and to every connected listener, and a client resumes from a token.

A subscription is a query of the subscription language (``dissemination/subscriptions.py``,
``specs/delta-dissemination.md`` D.12: SELECT-PROJECT-JOIN, every FROM atom's key added to
the output, so its rows are a set).  Equal queries share one view, ``__sub_<id>``, where
``<id>`` hashes the normalised query.  The views live in the database like any view, so they
are maintained by the ordinary commit path and rebuilt when the database is reopened; the
list of subscriptions (``service.json``) is written after the view exists, and a view
without an entry is dropped when the hub opens.

Tokens are ``<instance>:<batch>``: the batch after which the client has every change.  The
instance is drawn once per database, so a token of another database is refused.  A client
that resumes gets, in order, the changes of every later batch from the feed
(``service/feed.py``), then the live ones; a token older than the feed keeps, or older
than the subscription, gets a ``reset``: the whole result at the current batch, which the
client puts in place of its own.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import threading
import warnings
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..dissemination.subscriptions import (
    Schema,
    Subscription,
    SubscriptionError,
    catalog_schema,
    parse,
    tables_named,
)
from ..duckdb_scratch import time_limit
from ..errors import Error, UnsupportedError
from ..local import Connection
from ..zset import Changes, Delta
from .feed import Feed
from .grants import Principal
from .placement import Assignment, Placements, reachable, site_url

if TYPE_CHECKING:
    from ..spark.connection import SparkConnection

PREFIX = "__sub_"


#: what building a subscription's view costs a row of its result (measured: 2-5 us on the
#: benchmark machine), so that its row count tells how long the build holds the server
BUILD_SECONDS_PER_ROW = 5e-6


class TokenError(Error):
    """A resume token that is malformed, of another database, or ahead of it."""


class UnknownSubscription(Error):
    """No subscription has this id."""


@dataclass
class Event:
    """What a listener receives: ``snapshot`` / ``reset`` (rows: the whole result),
    ``delta`` (changes: ``(row, weight)``), or ``progress`` (no change to this subscription
    up to ``batch``), each with the token to resume after it; ``end`` when the subscription
    is dropped, ``shutdown`` when the server stops, ``lagging`` when the client fell so far
    behind that its stream was ended (it resumes from its token)."""

    kind: str
    batch: int
    token: str
    rows: list[tuple] | None = None
    changes: Changes | None = None


@dataclass
class Served:
    """One subscription: its id, the query as first written, its view and tables."""

    id: str
    sql: str
    view: str
    tables: frozenset[str]
    created: int  # the batch the subscription started after
    owner: str


Listener = Callable[[Event], None]


def _tell(sid: str, listeners: Iterable[Listener], event: Event) -> None:
    """Give ``event`` to each listener; one that raises is reported as a warning and does
    not keep it from the others (as a view's subscribers, ``engine.deliver``)."""
    for listener in listeners:
        try:
            listener(event)
        except Exception as exc:
            warnings.warn(f"listener of subscription {sid} raised {exc!r}", stacklevel=3)


def _write_json(path: Path, data: dict) -> None:
    """Replace ``path`` with ``data`` whole (written, fsynced, renamed into place)."""
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _changes(delta: Delta | Changes) -> Changes:
    """A view's changes as ``(row, weight)`` pairs (the local engine passes a dict)."""
    return delta.items() if isinstance(delta, dict) else delta


def subscription_id(parsed: Subscription) -> str:
    """A subscription's id: a hash of its normalised query, the same on every server and
    relay, so a client can move between them with its token."""
    return hashlib.sha256(parsed.select_sql().encode()).hexdigest()[:16]


class Relay(Protocol):
    """What a hub needs from a relay (``service/relay.py``): the source's instance and the
    last source batch applied, the source's schema, and the view body that answers a query
    from what the relay holds."""

    instance: str
    batch: int
    schema: Schema

    def rewrite(self, parsed: Subscription) -> str: ...


class Hub:
    """The subscriptions of one database (local or Spark engine).  Every database call
    goes through :attr:`lock` (the server's request threads and its commits share the
    connection)."""

    def __init__(self, db: Connection | SparkConnection, retention: int = 100_000,
                 relay: Relay | None = None, placements: Placements | None = None) -> None:
        if not hasattr(db, "set_journal"):
            raise UnsupportedError(f"upkeep serve cannot serve a {type(db).__name__}: it "
                                   "needs the local or the Spark engine")
        self.db = db
        # the Spark engine journals after its log, every batch: a feed behind it lost some
        self._journal_follows_log = getattr(db, "journal_follows_log", False)
        self.relay = relay
        #: which site feeds which member (the server's; a relay places nobody)
        self.placements = placements if relay is None else None
        self.lock = threading.RLock()
        #: seconds one request may hold the server (``upkeep serve --statement-seconds``;
        #: None: no limit): a subscription whose build would take longer is refused
        self.statement_seconds: float | None = None
        directory = db.directory
        self._registry_path = directory / "service.json" if directory is not None else None
        registry = self._read_registry()
        self.instance: str = (relay.instance if relay is not None else
                              registry.get("instance") or secrets.token_hex(6))
        if relay is None and self._journal_follows_log:
            self._declare_views(registry)
            db.sync()  # built before the feed and the listeners attach
        self.subscriptions: dict[str, Served] = {
            sid: Served(sid, s["sql"], PREFIX + sid, frozenset(s["tables"]), s["created"],
                        s.get("owner", ""))
            for sid, s in registry.get("subscriptions", {}).items()
            if PREFIX + sid in db.views()}
        for view in db.views():
            if view.startswith(PREFIX) and view[len(PREFIX):] not in self.subscriptions:
                db.execute(f'DROP VIEW "{view}"')  # created, then the process died
        self._write_registry()
        self.feed = Feed(directory / "feed.log" if directory is not None else None,
                         self.now(), retention)
        if self.feed.last < self.now():
            # batches committed without the journal (the Spark engine journals after its
            # log; a local database opened without the server): their changes are not in
            # the feed, so resuming clients get a reset
            self.feed.restart_at(self.now())
        self._listeners: dict[str, set[Listener]] = {}
        #: called when the server stops (no lock), after the listeners got ``shutdown``
        self.on_shutdown: list[Callable[[], None]] = []
        #: set by shutting_down: listeners added after it get ``shutdown`` at once
        self.stopping = False
        self._unsubscribe: dict[str, Callable[[], None]] = {}
        #: per subscription, the batches journaled and not yet delivered, oldest first
        self._labels: dict[str, deque[int]] = {}
        for sid in self.subscriptions:
            self._attach(sid)
        db.set_journal(self._journal)
        self._placements_path = (directory / "placements.json" if directory is not None
                                 and self.placements is not None else None)
        if self._placements_path is not None:
            if self._placements_path.exists():
                self.placements.restore(json.loads(self._placements_path.read_text()),
                                        lambda name, sql: parse(name, sql, self.schema()))
            self.placements.on_change = lambda state: _write_json(self._placements_path,
                                                                  state)

    # ------------------------------------------------------------ the registry
    def _read_registry(self) -> dict:
        if self._registry_path is None or not self._registry_path.exists():
            return {}
        return json.loads(self._registry_path.read_text())

    def _declare_views(self, registry: dict) -> None:
        """Create the registered subscriptions' views again: a Spark connection opened on
        its directory has the tables its owner declared, not the views (they are rebuilt
        from the change files, so the feed goes on from where it was)."""
        for sid, entry in registry.get("subscriptions", {}).items():
            if PREFIX + sid not in self.db.views():
                parsed = parse("query", entry["sql"], self.schema())
                self.db.create_view(PREFIX + sid, parsed.select_sql())

    def _write_registry(self) -> None:
        if self._registry_path is None:
            return
        _write_json(self._registry_path, {"instance": self.instance, "subscriptions": {
            s.id: {"sql": s.sql, "tables": sorted(s.tables), "created": s.created,
                   "owner": s.owner} for s in self.subscriptions.values()}})

    # ------------------------------------------------------------ committing
    def _journal(self, batch: int, changed: dict[str, Delta]) -> Callable[[], None]:
        """The committer's hook: the batch's subscription changes, durable before the
        batch is logged (so no acknowledged batch lacks its feed record)."""
        subs = {name[len(PREFIX):]: list(_changes(d)) for name, d in changed.items()
                if name.startswith(PREFIX)}
        batch = batch if self.relay is None else self.relay.batch
        self.feed.compact()  # every batch adds a record, changing a subscription or not
        self.feed.append(batch, subs)
        for sid in subs:  # the live delivery that follows is labelled with this batch
            self._labels.setdefault(sid, deque()).append(batch)

        def take_back() -> None:
            self.feed.take_back(batch)
            for sid in subs:
                labels = self._labels.get(sid)
                if labels and labels[-1] == batch:
                    labels.pop()
        return take_back

    def _attach(self, sid: str) -> None:
        def committed(changes: Changes) -> None:
            # the batch the journal recorded these changes under: a subscriber that
            # commits while an earlier batch is delivered makes now() a later one
            labels = self._labels.get(sid)
            batch = labels.popleft() if labels else self.now()
            _tell(sid, list(self._listeners.get(sid, ())),
                  Event("delta", batch, self.token(batch), changes=changes))
        self._labels.pop(sid, None)  # a batch journaled before this heard of no change
        self._unsubscribe[sid] = self.db.view(PREFIX + sid).subscribe(committed)

    def now(self) -> int:
        """The batch the served results are current at: the database's last, or, on a
        relay, the last batch of the source it has applied."""
        return self.db.batches if self.relay is None else self.relay.batch

    def token(self, batch: int) -> str:
        return f"{self.instance}:{batch}"

    # ------------------------------------------------------------ subscriptions
    def schema(self) -> Schema:
        """Every table's typed columns and key columns (the subscription language's
        schema)."""
        if self.relay is not None:
            return self.relay.schema
        return catalog_schema(self.db.catalog()["tables"])

    def subscribe(self, principal: Principal, sql: str) -> Served:
        """The subscription to ``sql`` (created if no equal one exists); raises
        SubscriptionError outside the language, GrantError on a table not granted."""
        with self.lock:
            schema = self.schema()
            principal.check_read(tables_named(sql) & schema.keys())  # before the query
            parsed = parse("query", sql, schema)  # is checked against their columns
            principal.check_read(parsed.tables())
            sid = subscription_id(parsed)
            if sid in self.subscriptions:
                return self.subscriptions[sid]
            body = parsed.select_sql() if self.relay is None else self.relay.rewrite(parsed)
            self._check_build_time(body)
            self.db.create_view(PREFIX + sid, body)
            if self._journal_follows_log:
                self.db.sync()  # built now: its contents are no batch's change
            served = Served(sid, sql, PREFIX + sid, parsed.tables(), self.now(),
                            principal.name)
            self.subscriptions[sid] = served
            try:
                self._write_registry()
            except BaseException:
                del self.subscriptions[sid]
                self.db.execute(f'DROP VIEW "{served.view}"')
                raise
            self._attach(sid)
            return served

    def _check_build_time(self, body: str) -> None:
        """Refuse a subscription whose build would hold the server (and its lock) past the
        statement time limit: its rows, counted by DuckDB within that limit, times what a
        build costs a row (on the local engine; the Spark engine's driver reads no table). A reader's join that multiplies rows took every other request
        with it for as long as it ran, or the server's memory."""
        limit = self.statement_seconds
        if limit is None or not isinstance(self.db, Connection):  # Spark builds on executors
            return
        with time_limit(limit):
            (rows,) = self.db.execute(f"SELECT COUNT(*) FROM ({body})").fetchone()
        if rows * BUILD_SECONDS_PER_ROW > limit:
            raise SubscriptionError(
                f"the subscription holds {rows:,} rows: building it would hold the server "
                f"for about {rows * BUILD_SECONDS_PER_ROW:.0f} s, past the statement time "
                f"limit of {limit:g} s (upkeep serve --statement-seconds); narrow it")

    def place(self, principal: Principal, sql: str, name: str, *, site: str | None = None,
              capacity: int | None = None, failed: list[str] = (),
              compose: bool = False) -> tuple[Served, Assignment]:
        """Join (or renew) member ``name`` following ``sql``: the subscription is registered
        here too, so this server's feed is every member's exact fallback."""
        if site is not None:  # members placed there present their tokens to it
            principal.check_relay()
        failed = [site_url(url) for url in failed]
        up = {url: reachable(url) for url in failed}  # not under the lock
        with self.lock:
            if self.placements is None:
                raise UnsupportedError("placements are made by the server this relay follows")
            known = set(self.subscriptions)
            served = self.subscribe(principal, sql)
            try:
                parsed = parse(name, sql, self.schema())
                return served, self.placements.join(name, parsed, principal.name, url=site,
                                                    capacity=capacity, failed=list(failed),
                                                    sid=served.id, compose=compose, up=up)
            except BaseException:  # a refused join leaves no subscription of its own
                if served.id not in known:
                    self._forget(served.id)
                raise

    def get(self, principal: Principal, sid: str) -> Served:
        served = self.subscriptions.get(sid)
        if served is None:
            raise UnknownSubscription(f"no subscription {sid}")
        principal.check_read(served.tables)
        return served

    def drop(self, principal: Principal, sid: str) -> None:
        """End a subscription: its listeners get an ``end`` event, its view is dropped."""
        with self.lock:
            served = self.get(principal, sid)
            principal.check_owner(served.owner)
            self._forget(sid)
            _tell(sid, self._listeners.pop(sid, ()),
                  Event("end", self.now(), self.token(self.now())))

    def _forget(self, sid: str) -> None:
        """Take subscription ``sid`` out of the registry and drop its view."""
        self._unsubscribe.pop(sid)()
        self._labels.pop(sid, None)
        served = self.subscriptions.pop(sid)
        self._write_registry()
        self.db.execute(f'DROP VIEW "{served.view}"')

    def columns(self, served: Served) -> list[tuple[str, str]]:
        return self.db.view(served.view).schema

    def listen(self, principal: Principal, sid: str, after: str | None,
               listener: Listener) -> list[Event]:
        """Start delivering ``sid``'s changes to ``listener``; returns what the client
        must get first: the whole result (no token, or one that cannot be resumed) or the
        changes it missed.  Atomic with respect to commits: nothing missed or doubled."""
        with self.lock:
            served = self.get(principal, sid)
            now = self.now()
            batch = None if after is None else self._parse_token(after, now)
            if batch is None or batch < self.feed.horizon or batch < served.created:
                kind = "snapshot" if after is None else "reset"
                first = [Event(kind, now, self.token(now),
                               rows=self.db.view(served.view).rows())]
            else:
                first = [Event("delta", b, self.token(b), changes=c)
                         for b, c in self.feed.since(sid, batch)]
                first.append(Event("progress", now, self.token(now)))
            self._listeners.setdefault(sid, set()).add(listener)
            if self.stopping:  # checked once added: shutting_down sets it, then tells all
                listener(Event("shutdown", now, self.token(now)))
            return first

    def progress(self, listener: Listener) -> int:
        """Tell ``listener`` it has every change up to the current batch (a ``progress``
        event, queued after the deltas of that batch); returns the batch."""
        with self.lock:
            now = self.now()
            listener(Event("progress", now, self.token(now)))
            return now

    def unlisten(self, sid: str, listener: Listener) -> None:
        """Stop delivering to ``listener`` (no lock: called from the server's event loop;
        deliveries iterate over a copy)."""
        self._listeners.get(sid, set()).discard(listener)

    def listeners(self, sid: str) -> int:
        return len(self._listeners.get(sid, ()))

    def _parse_token(self, token: str, now: int) -> int:
        instance, _, batch = token.rpartition(":")
        if not instance or not (batch.isascii() and batch.isdigit()) or len(batch) > 20:
            raise TokenError(f"malformed resume token {token!r} (expected "
                             "<instance>:<batch>)")
        if instance != self.instance:
            raise TokenError(f"resume token {token!r} is of another database")
        if int(batch) > now:
            raise TokenError(f"resume token {token!r} is ahead of the database (batch {now})")
        return int(batch)

    def shutting_down(self) -> None:
        """Every listener gets a ``shutdown`` event (its client resumes from its token when
        the server is back).  No lock: called from a signal handler."""
        self.stopping = True  # a stream opened from now on is told at once (listen)
        now = self.now()
        for listeners in list(self._listeners.values()):
            for listener in list(listeners):
                listener(Event("shutdown", now, self.token(now)))
        for hook in list(self.on_shutdown):
            hook()

    def close(self) -> None:
        """Detach from the database (its journal and view subscribers)."""
        with self.lock:
            self._listeners.clear()
            self.db.set_journal(None)
            for unsubscribe in self._unsubscribe.values():
                unsubscribe()
            self._unsubscribe.clear()
            self.feed.close()


__all__ = ["PREFIX", "Event", "Hub", "Served", "SubscriptionError", "TokenError",
           "UnknownSubscription"]
