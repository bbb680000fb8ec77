"""Subscribers served by another subscriber (a relay, one of Delta's sites): a subscription
computed at the relay from the one it follows equals DuckDB's evaluation on the server's
tables after every batch, and when the relay leaves, its subscriber resumes at the server
with the token it holds, nothing missed or doubled."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_service import (
    ADMIN,
    READER,
    TABLES,
    TOKENS,
    WRITER,
    Changes,
    _free_port,
    expected,
    projected,
    start,
)

from upkeep.client import Client, ServiceError
from upkeep.service.relay import RelaySite


def relay_process(server: str, query: str, tmp_path, *options: str
                  ) -> tuple[subprocess.Popen, str]:
    """``upkeep relay`` in its own process, its subscribers granted ``orders``: the process
    and its URL."""
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tokens": {READER: {"name": "reader", "read": ["orders"]}}}))
    port = _free_port()
    process = subprocess.Popen([sys.executable, "-m", "upkeep.cli", "relay", server, query,
                                "--token", READER, "--tokens", str(tokens), "--port",
                                str(port), *options],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return process, f"http://127.0.0.1:{port}"


FOLLOWED = "SELECT o.ok, o.status, o.price FROM orders o WHERE o.status = 'open'"
DERIVED = "SELECT o.ok, o.price FROM orders o WHERE o.status = 'open' AND o.price > 50"


def test_a_relay_serves_what_it_can_compute_and_its_subscribers_move_when_it_leaves(
        tmp_path) -> None:
    server = start(tmp_path / "db")
    relay = None
    try:
        admin = Client(server.url, ADMIN)
        admin.sql(TABLES)
        writer = Client(server.url, WRITER)
        stream = Changes(3)
        for _ in range(3):
            writer.sql(stream.batch())
        relay = RelaySite(server.url, READER, FOLLOWED, TOKENS).start()
        at_server = Client(server.url, READER).subscribe(DERIVED)  # where it may move to
        replica = Client(relay.url, READER).replica(DERIVED, fallbacks=[Client(server.url,
                                                                               READER)])
        assert replica.info.id == at_server.id  # one id everywhere: tokens carry over
        subs = {s["id"]: s for s in admin.status()["subscriptions"]}
        for i in range(18):
            writer.sql(stream.batch())
            batch = admin.status()["batch"]
            replica.follow(until=lambda r, b=batch: r.batch >= b, timeout=30)
            assert projected(replica, DERIVED) == expected(admin, DERIVED)
            if i == 5:  # the relay feeds the subscriber: the server does not
                subs = {s["id"]: s for s in admin.status()["subscriptions"]}
                assert subs[at_server.id]["listeners"] == 0
                assert subs[relay.info.id]["listeners"] == 1
            if i == 11:
                relay.stop()  # it leaves; the subscriber resumes at the server
                relay = None
        assert replica.rehomed == 1 and replica.resets == 0
    finally:
        if relay is not None:
            relay.stop()
        server.stop()


def test_a_relay_refuses_what_it_cannot_compute_or_the_caller_may_not_read(tmp_path) -> None:
    server = start(tmp_path / "db")
    relay = None
    try:
        Client(server.url, ADMIN).sql(TABLES)
        relay = RelaySite(server.url, READER, FOLLOWED, TOKENS).start()
        at_relay = Client(relay.url, READER)
        for query in ("SELECT c.ck FROM customer c",  # another table
                      "SELECT o.ok FROM orders o",  # more rows than it holds
                      "SELECT o.ok, o.ck FROM orders o WHERE o.status = 'open'"):  # a column
            with pytest.raises(ServiceError) as err:
                at_relay.subscribe(query)
            assert err.value.status == 400 and "subscribe at the source" in str(err.value)
        with pytest.raises(ServiceError) as err:  # the relay's own grants hold
            Client(relay.url, "nobody-token-0123456789").subscribe(DERIVED)
        assert err.value.status == 401
    finally:
        if relay is not None:
            relay.stop()
        server.stop()


def test_kill_nine_of_a_relay_process_moves_its_subscriber_to_the_server(tmp_path) -> None:
    """``upkeep relay`` in its own process, killed with SIGKILL while a writer commits: its
    subscriber resumes at the server from its token, and equals DuckDB once caught up."""
    import signal

    from test_service import _wait_for

    server, relay = start(tmp_path / "db"), None
    try:
        admin = Client(server.url, ADMIN)
        admin.sql(TABLES)
        writer = Client(server.url, WRITER)
        stream = Changes(5)
        relay, url = relay_process(server.url, FOLLOWED, tmp_path)
        at_relay = Client(url, READER)

        def up() -> bool:
            assert relay.poll() is None, relay.stderr.read().decode()[-2000:]
            try:
                at_relay.status()
                return True
            except Exception:  # noqa: BLE001 - not listening yet
                return False
        _wait_for(up, 60, "the relay did not answer")
        Client(server.url, READER).subscribe(DERIVED)
        replica = at_relay.replica(DERIVED, fallbacks=[Client(server.url, READER)])
        for i in range(12):
            writer.sql(stream.batch())
            if i == 6:
                replica.follow(until=lambda r: r.batch >= admin.status()["batch"], timeout=30)
                assert replica.rehomed == 0
                relay.send_signal(signal.SIGKILL)
                relay.wait()
        replica.follow(until=lambda r: r.batch >= admin.status()["batch"], timeout=30)
        assert replica.rehomed == 1 and replica.resets == 0
        assert projected(replica, DERIVED) == expected(admin, DERIVED)
    finally:
        if relay is not None and relay.poll() is None:
            relay.kill()
            relay.wait()
        server.stop()
