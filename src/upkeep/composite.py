"""A subscriber fed by several relays: its query computed locally from their subscriptions
(a rewriting with several inputs, Delta's ∧ nodes, ``papers/delta-pubsub-view-dissemination.txt``
section 3; ``specs/delta-dissemination.md`` D.12), with a barrier per server batch.

The server's placements (``service/placement.py``) may feed a member that can compose by a
rewriting over several relays' subscriptions: each input is a relay's own query, and the
rewriting is SQL over the inputs, named by the relays' member names.  :class:`Composite`
keeps one table per input in an embedded upkeep database and the rewriting as a maintained
view over them.  Every input counts in server batches.  The composite reads from the input
that is furthest behind, and applies every input's changes up to batch ``t`` as one
transaction once all inputs have reached ``t``.  So the view is only ever read in states
that all inputs held at the same batch, and the member's result at ``t`` equals its query
on the server's tables at ``t``.
"""

from __future__ import annotations

from collections import Counter

import httpx

from .client import Client, Replica, ServiceError, SubscriptionInfo, decode_row
from .local import Connection


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
