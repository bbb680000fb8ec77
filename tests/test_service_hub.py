"""The subscription hub (``service/hub.py``) used directly, as the server uses it: live
deltas carry the batch the feed holds them under, a listener that raises does not keep a
change from the others, and a refused placement leaves nothing behind."""

from __future__ import annotations

import warnings

import pytest

import upkeep
from upkeep.service.grants import Principal
from upkeep.service.hub import Hub
from upkeep.service.placement import PlacementError, Placements

ADMIN = Principal("p", read="*", write="*", admin=True)


def _database():
    db = upkeep.connect()
    db.execute("CREATE TABLE r (a INTEGER PRIMARY KEY, b INTEGER)")
    return db


def test_a_delta_delivered_after_a_nested_commit_keeps_its_own_batch() -> None:
    """A view subscriber that commits while a batch is delivered makes the next batch
    before the hub hears of the first: each live delta is still labelled with the batch
    the feed holds it under, so a client resuming from its token misses nothing."""
    db = _database()
    db.execute("CREATE VIEW big AS SELECT a FROM r WHERE b > 100")

    def follow_up(changes) -> None:
        for (a,), w in changes:
            if w > 0:
                db.execute("INSERT INTO r VALUES (?, 0)", [a + 1000])

    db.view("big").subscribe(follow_up)  # attached before the hub's own subscriber
    hub = Hub(db)
    sid = hub.subscribe(ADMIN, "SELECT r.a, r.b FROM r").id
    events = []
    hub.listen(ADMIN, sid, None, events.append)
    db.execute("INSERT INTO r VALUES (1, 500)")
    feed = list(hub.feed.since(sid, 0))
    assert [(e.batch, list(e.changes)) for e in events] == feed
    assert [e.token for e in events] == [hub.token(b) for b, _ in feed]
    resumed = hub.listen(ADMIN, sid, events[0].token, lambda e: None)
    assert [(e.kind, e.batch) for e in resumed] == [("delta", 2), ("progress", 2)]
    assert list(resumed[0].changes) == feed[1][1]


def test_a_listener_that_raises_does_not_keep_the_delta_from_the_others() -> None:
    db = _database()
    hub = Hub(db)
    sid = hub.subscribe(ADMIN, "SELECT r.a, r.b FROM r").id
    got: list[int] = []

    def listener(i: int):
        def listen(event) -> None:
            got.append(i)
            if i % 2 == 0:
                raise RuntimeError(f"listener {i} failed")
        return listen

    for i in range(6):
        hub.listen(ADMIN, sid, None, listener(i))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        db.execute("INSERT INTO r VALUES (1, 2)")
    assert sorted(got) == list(range(6))
    messages = sorted(str(w.message) for w in caught)
    assert len(messages) == 3
    assert all(f"listener {i} failed" in m and sid in m
               for i, m in zip((0, 2, 4), messages, strict=True))


@pytest.mark.parametrize("options", [
    {"name": "bad name!"},
    {"name": "ok", "site": "ftp://x"},
    {"name": "ok", "site": "http://127.0.0.1:9", "capacity": -1},
])
def test_a_refused_placement_leaves_no_subscription(options) -> None:
    db = _database()
    hub = Hub(db, placements=Placements())
    kept = hub.subscribe(ADMIN, "SELECT r.a FROM r").id  # one that exists already stays
    for sql in ("SELECT r.a FROM r WHERE r.b = 1", "SELECT r.a FROM r"):
        with pytest.raises(PlacementError):
            hub.place(ADMIN, sql, **options)
    assert list(hub.subscriptions) == [kept]
    assert [v for v in db.views() if not v.endswith(kept)] == []
    assert not hub.placements.members
