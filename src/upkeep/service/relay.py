"""A subscriber that serves other subscribers: one of Delta's sites
(``papers/delta-pubsub-view-dissemination.txt`` section 2; ``specs/delta-dissemination.md``
D.12, "sites").

A relay follows one subscription ``s`` of its source (a server or another relay) and keeps
its rows in a table of an in-memory database, keyed by the key columns the language adds.
It serves, with the same endpoints as ``upkeep serve``, every subscription ``q`` that can be
computed from ``s``: the view of ``q`` at the relay is the CGR rewriting of ``q`` over ``s``
(``dissemination/rewriting.py``), maintained like any view as the relay applies each of the
source's batches as one transaction.

Tokens stay the source's.  The relay's hub counts in source batches (a relay applies source
batch ``b`` as its own commit, and its feed records it as ``b``) and speaks with the source's
instance, and a subscription's id is a hash of its normalised query.  So a client can move
between the source and its relays with the token it holds: when a relay leaves or fails,
its subscribers resume at the source (``upkeep.client.Replica`` with fallbacks), which
keeps a feed of ``q`` when ``q`` is registered there.
"""

from __future__ import annotations

import threading
import time
from contextlib import nullcontext

import httpx

from ..client import Client, ServiceError, SubscriptionInfo, decode_row
from ..dissemination.rewriting import rewriting_sql, rewritings
from ..dissemination.subscriptions import Subscription, SubscriptionError, parse
from ..local import Connection
from ..types import type_from_name
from .grants import Tokens
from .server import Server


class RelaySite:
    """Follows ``query`` at ``source`` (with ``token``) and serves what can be computed from
    it to the principals of ``tokens``."""

    def __init__(self, source: str, token: str, query: str, tokens: Tokens, *,
                 host: str = "127.0.0.1", port: int = 0) -> None:
        self.client = Client(source, token)
        tables = self.client.tables()
        self.schema = {name: ([c for c, _ in t["columns"]], t.get("key", []))
                       for name, t in tables.items() if t["kind"] == "table"}
        self.info: SubscriptionInfo = self.client.subscribe(query)
        self.table = f"source_{self.info.id}"
        self.source: Subscription = parse(self.table, query, self.schema)
        self.types = [type_from_name(t) for _, t in self.info.columns]
        self.db = Connection()
        columns = ", ".join(f'"{c}" {t}' for c, t in self.info.columns)
        key = ", ".join(f'"{c}"' for c, _ in self.info.columns if c.startswith("__key_"))
        self.db.execute(f'CREATE TABLE "{self.table}" ({columns}, PRIMARY KEY ({key}))')
        self.rows: set[tuple] = set()
        self.token: str | None = None
        self.batch = -1
        self.instance = ""
        self._stop = threading.Event()
        events = self.client.events(self.info.id)
        self._apply(next(events))  # the snapshot: the instance and batch to count from
        self.server = Server(self.db, tokens, host=host, port=port, relay=self)
        self._thread = threading.Thread(target=self._follow, args=(events,), daemon=True,
                                        name=f"upkeep-relay-{self.info.id}")

    # ------------------------------------------------------------ what the hub asks
    def rewrite(self, parsed: Subscription) -> str:
        """The view of ``parsed`` over the relay's table, or SubscriptionError."""
        found = rewritings(parsed, [self.source], k=1)
        if not found:
            raise SubscriptionError(f"this relay holds {self.info.sql!r}; the query cannot "
                                    "be computed from it: subscribe at the source")
        return rewriting_sql(parsed, found[0])

    # ------------------------------------------------------------ following the source
    def _apply(self, event: dict) -> None:
        kind = event["kind"]
        if kind not in ("snapshot", "reset", "delta", "progress"):
            return
        server = getattr(self, "server", None)  # None while the snapshot is applied
        with server.hub.lock if server is not None else nullcontext():
            before = self.batch
            self.batch = event["batch"]
            try:
                if kind in ("snapshot", "reset"):
                    new = {decode_row(r, self.types) for r in event["rows"]}
                    gone, added = self.rows - new, new - self.rows
                elif kind == "delta":
                    changes = [(decode_row(r, self.types), w) for r, w in event["changes"]]
                    gone = {r for r, w in changes if w < 0}
                    added = {r for r, w in changes if w > 0}
                else:
                    gone = added = set()
                if gone or added:
                    with self.db.transaction(metadata={"source": event["token"]}):
                        self.db.delete(self.table, sorted(gone, key=repr))
                        self.db.insert(self.table, sorted(added, key=repr))
                    self.rows = (self.rows - gone) | added
            except BaseException:
                self.batch = before
                raise
            self.token = event["token"]
            self.instance = self.token.rpartition(":")[0]

    def _follow(self, events) -> None:
        while not self._stop.is_set():
            try:
                for event in events:
                    if self._stop.is_set():
                        return
                    self._apply(event)
            except (httpx.TransportError, httpx.StreamError, ServiceError):
                pass
            if self._stop.wait(0.2):
                return
            events = self._resume()

    def _resume(self):
        while not self._stop.is_set():
            try:
                return self.client.events(self.info.id, self.token)
            except (httpx.TransportError, ServiceError):
                time.sleep(0.2)
        return iter(())

    # ------------------------------------------------------------ lifetime
    @property
    def url(self) -> str:
        return self.server.url

    def start(self) -> RelaySite:
        self.server.start()
        self._thread.start()
        return self

    def stop(self) -> None:
        """Leave: the relay's subscribers get ``shutdown`` and move to their fallbacks."""
        self._stop.set()
        self.server.stop()
        self.client.close()

