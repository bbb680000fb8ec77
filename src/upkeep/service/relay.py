"""A subscriber that serves other subscribers: one of Delta's sites
(``papers/delta-pubsub-view-dissemination.txt`` section 2; ``specs/delta-dissemination.md``
D.12, "sites").

A relay follows one subscription ``s`` and keeps its rows in a table of an in-memory
database, keyed by the key columns the language adds.  It serves, with the same endpoints as
``upkeep serve``, every subscription ``q`` that can be computed from ``s``: the view of ``q``
at the relay is the CGR rewriting of ``q`` over ``s`` (``dissemination/rewriting.py``),
maintained like any view as the relay applies each of the source's batches as one
transaction.

The relay is a member of its server's placements (``service/placement.py``): it follows the
feeder the server places it at (the server, or another relay: a tree of any depth), or,
since relays compose, several relays whose subscriptions a rewriting combines (computed by
:class:`upkeep.client.Composite`, its result applied to the relay's table batch by batch, as
a single feeder's changes are).  Once it serves, it is offered as a site, so the server places members whose queries it can compute
at it, up to its ``capacity``.

Tokens stay the server's.  The relay's hub counts in source batches (a relay applies source
batch ``b`` as its own commit, and its feed records it as ``b``) and speaks with the server's
instance, and a subscription's id is a hash of its normalised query.  So a client moves
between the server and its relays with the token it holds (``upkeep.client.Replica``): when a
relay leaves or fails, its subscribers resume at the server, which keeps a feed of every
placed subscription, and are placed again.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import Counter
from collections.abc import Callable
from contextlib import nullcontext

from ..client import Client, Lease, Replica, SubscriptionInfo, decode_row, subscription_info
from ..dissemination.rewriting import rewriting_sql, rewritings
from ..dissemination.subscriptions import Schema, Subscription, SubscriptionError, parse
from ..local import Connection
from ..types import type_from_name
from .grants import Tokens
from .server import Server

log = logging.getLogger("upkeep.service")


class RelaySite:
    """Follows ``query`` from ``source`` (the server, with ``token``), placed by it
    (``service/placement.py``), and serves what can be computed from it to the principals
    of ``tokens``; a site of fan-out ``capacity`` (None: the server's default).  With
    ``compose`` (the default) the server may feed it by a rewriting over several relays."""

    def __init__(self, source: str, token: str, query: str, tokens: Tokens, *,
                 host: str = "127.0.0.1", port: int = 0, name: str | None = None,
                 capacity: int | None = None, compose: bool = True) -> None:
        self.client = Client(source, token)
        tables = self.client.tables()
        self.schema: Schema = {name: ([(c, type_from_name(k)) for c, k in t["columns"]],
                                      t.get("key", []))
                               for name, t in tables.items() if t["kind"] == "table"}
        self.lease = Lease(self.client, query, name, capacity=capacity, compose=compose)
        self.info: SubscriptionInfo = subscription_info(self.lease.renew()["subscription"])
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
        self.follower = _Follower(self)
        # the first snapshot: the instance and batch to count from
        self.follower.follow(until=lambda r: r.token is not None, timeout=60.0)
        self.server = Server(self.db, tokens, host=host, port=port, relay=self)
        self._thread = threading.Thread(target=self._follow, daemon=True,
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
        if kind in ("snapshot", "reset"):
            def changes() -> tuple[set, set]:
                new = {decode_row(r, self.types) for r in event["rows"]}
                return self.rows - new, new - self.rows
        elif kind == "delta":
            def changes() -> tuple[set, set]:
                rows = [(decode_row(r, self.types), w) for r, w in event["changes"]]
                return {r for r, w in rows if w < 0}, {r for r, w in rows if w > 0}
        elif kind == "progress":
            def changes() -> tuple[set, set]:
                return set(), set()
        else:
            return
        self._apply_rows(changes, event["batch"], event["token"])

    def _apply_rows(self, changes: Callable[[], tuple[set, set]], batch: int, token: str) -> None:
        """Bring the relay's table to ``batch``: ``changes()`` (the rows gone and the rows
        added, taken under the hub's lock) in one transaction, or nothing."""
        server = getattr(self, "server", None)  # None while the snapshot is applied
        with server.hub.lock if server is not None else nullcontext():
            before = self.batch
            self.batch = batch
            try:
                gone, added = changes()
                if gone or added:
                    with self.db.transaction(metadata={"source": token}):
                        self.db.delete(self.table, sorted(gone, key=repr))
                        self.db.insert(self.table, sorted(added, key=repr))
                    self.rows = (self.rows - gone) | added
            except BaseException:
                self.batch = before
                raise
            self.token = token
            self.instance = token.rpartition(":")[0]

    def _follow(self) -> None:
        while not self._stop.is_set():
            try:
                self.follower.follow(timeout=math.inf, stop=self._stop)
            except Exception:  # noqa: BLE001 - logged, then followed again from the token
                if self._stop.is_set():
                    return
                log.exception("relay %s: following the source failed", self.info.id)
                self._stop.wait(1.0)

    # ------------------------------------------------------------ lifetime
    @property
    def url(self) -> str:
        return self.server.url

    def start(self) -> RelaySite:
        """Serve, and offer this relay to the server as a site."""
        self.server.start()
        self.lease.site = self.server.url
        self.lease.renew()
        self._thread.start()
        return self

    def stop(self) -> None:
        """Leave: the server places the relay's subscribers elsewhere, and they get
        ``shutdown`` and resume at the server meanwhile."""
        self._stop.set()
        self.lease.leave()
        self.server.stop()
        self.client.close()
        self.follower.close()


class _Follower(Replica):
    """The relay's replica of its subscription: applied to the relay's table, not held."""

    def __init__(self, site: RelaySite) -> None:
        super().__init__(site.client, site.info, lease=site.lease)
        self.site = site

    def apply(self, event: dict) -> None:
        if event["kind"] in ("snapshot", "reset", "delta", "progress"):
            self.site._apply(event)
            self.token, self.batch = event["token"], event["batch"]

    def _held(self) -> Counter:
        return Counter(self.site.rows)

    def _composed(self, changes: Counter, token: str, batch: int) -> None:
        """A composite's changes (the relay is fed by several relays) go to its table."""
        gone = {r for r, w in changes.items() if w < 0}
        added = {r for r, w in changes.items() if w > 0}
        self.site._apply_rows(lambda: (gone, added), batch, token)
        self.token, self.batch = token, batch
