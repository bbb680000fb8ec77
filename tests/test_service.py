"""``upkeep serve``: subscriptions followed by clients equal DuckDB's evaluation of their
queries on the served tables after every batch, across reconnects, a server restart and a
feed that no longer reaches back far enough; grants, tokens and bad requests."""

from __future__ import annotations

import json
import logging
import random
import subprocess
import sys
from collections import Counter
from decimal import Decimal

import duckdb
import httpx
import pytest
from oracle import insert_rows

from upkeep.client import Client, Replica, ServiceError
from upkeep.service import Server, Tokens

ADMIN, READER, WRITER = "admin-token-0123456789", "reader-token-0123456789", "writer-token-0123456789"
LOADER = "loader-token-0123456789"  # may write orders, read nothing
TOKENS = Tokens.from_dict({"tokens": {
    ADMIN: {"name": "ops", "read": "*", "write": "*", "admin": True},
    # the reader's token is also the relays' (a relay joins the placements as a site)
    READER: {"name": "reader", "read": ["customer", "orders"], "relay": True},
    WRITER: {"name": "writer", "read": ["customer", "orders"], "write": ["customer", "orders"]},
    LOADER: {"name": "loader", "write": ["orders"]},
}})
TABLES = """
CREATE TABLE customer (ck INTEGER PRIMARY KEY, segment VARCHAR, nation INTEGER);
CREATE TABLE orders (ok INTEGER PRIMARY KEY, ck INTEGER, status VARCHAR, price DECIMAL(10,2));
CREATE TABLE secret (id INTEGER PRIMARY KEY, note VARCHAR);
"""
QUERIES = [
    "SELECT o.ok, o.status FROM orders o WHERE o.status = 'open'",
    "SELECT c.segment, o.price FROM orders o JOIN customer c ON o.ck = c.ck WHERE c.nation = 1",
    "SELECT o.ok, o.price FROM orders o WHERE o.price > 50",
    "SELECT c.ck, c.segment FROM customer c",
]


class Kept(logging.Handler):
    """The messages logged at WARNING or above, kept for a test to read."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def start(directory, **options) -> Server:
    return Server(directory, TOKENS, port=options.pop("port", 0), fsync=False,
                  **options).start()


def expected(admin: Client, query: str) -> Counter:
    """``query`` evaluated by DuckDB on the server's tables as they are now."""
    con = duckdb.connect()
    con.execute(TABLES.replace("PRIMARY KEY", ""))
    for table in ("customer", "orders"):
        insert_rows(con, table, admin.sql(f"SELECT * FROM {table}").rows)
    return Counter(con.execute(query).fetchall())


def projected(replica, query: str) -> Counter:
    """The replica's rows without the key columns the language adds to the output."""
    width = len([c for c, _ in replica.info.columns if not c.startswith("__key_")])
    return Counter(r[:width] for r in replica.rows.elements())


class Changes:
    """A random stream of DML batches over customer and orders, with a model of the keys."""

    def __init__(self, seed: int) -> None:
        self.rnd = random.Random(seed)
        self.customers: set[int] = set()
        self.orders: set[int] = set()
        self.next_key = 0

    def batch(self) -> str:
        rnd, out = self.rnd, []
        for _ in range(rnd.randint(1, 4)):
            kind = rnd.choice(["customer", "order", "order", "update", "delete"])
            self.next_key += 1
            if kind == "customer" or not self.customers:
                k = self.next_key
                self.customers.add(k)
                out.append(f"INSERT INTO customer VALUES ({k}, '{rnd.choice('AB')}', "
                           f"{rnd.randint(0, 2)})")
            elif kind == "order" or not self.orders:
                k = self.next_key
                self.orders.add(k)
                out.append(f"INSERT INTO orders VALUES ({k}, {rnd.choice(sorted(self.customers))},"
                           f" '{rnd.choice(['open', 'done'])}', {rnd.randint(1, 9999) / 100})")
            elif kind == "update":
                k = rnd.choice(sorted(self.orders))
                out.append(f"UPDATE orders SET status = '{rnd.choice(['open', 'done'])}', "
                           f"price = {rnd.randint(1, 9999) / 100} WHERE ok = {k}")
            else:
                k = rnd.choice(sorted(self.orders))
                self.orders.discard(k)
                out.append(f"DELETE FROM orders WHERE ok = {k}")
        return ";\n".join(out)


def check_all(admin: Client, replicas: list, batch: int) -> None:
    for replica, query in replicas:
        replica.follow(until=lambda r: r.batch >= batch, timeout=30)
        assert replica.batch == batch
        assert projected(replica, query) == expected(admin, query), query


@pytest.mark.parametrize("seed", [1, 2])
def test_replicas_equal_duckdb_through_resumes_and_a_restart(tmp_path, seed) -> None:
    directory = tmp_path / "db"
    server = start(directory)
    port = server.port
    admin = Client(server.url, ADMIN)
    admin.sql(TABLES)
    writer, reader = Client(server.url, WRITER), Client(server.url, READER)
    stream = Changes(seed)
    for _ in range(3):
        writer.sql(stream.batch())
    replicas = [(reader.replica(q), q) for q in QUERIES]
    assert reader.replica(QUERIES[0]).info.id == replicas[0][0].info.id  # equal queries share
    try:
        for i in range(24):
            writer.sql(stream.batch())
            batch = admin.status()["batch"]
            if i % 3 == 0:  # every follow ends its stream; the next one resumes by token
                check_all(admin, replicas, batch)
            if i == 12:  # restart the server on the same directory and port
                server.stop()
                server = start(directory, port=port)
        check_all(admin, replicas, admin.status()["batch"])
        assert all(r.resets == 0 for r, _ in replicas)  # every resume came from the feed
    finally:
        server.stop()


def test_changes_committed_while_the_server_is_down_reach_resuming_clients(tmp_path) -> None:
    """Batches committed by another process while ``upkeep serve`` is down were never put
    in the feed: a client resuming after them gets the whole result, not stale rows."""
    import upkeep

    directory = tmp_path / "db"
    server = start(directory)
    port = server.port
    try:
        admin = Client(server.url, ADMIN)
        admin.sql(TABLES + "INSERT INTO orders VALUES (1, 1, 'open', 10)")
        replica = Client(server.url, READER).replica(QUERIES[0])
        replica.follow(until=lambda r: r.batch >= 0, timeout=10)
        server.stop()
        db = upkeep.connect(directory)
        db.execute("INSERT INTO orders VALUES (2, 1, 'open', 20)")
        db.execute("UPDATE orders SET status = 'done' WHERE ok = 1")
        with db.transaction(metadata={"by": "batch job"}):
            pass
        db.close()
        server = start(directory, port=port)
        batch = admin.status()["batch"]
        replica.follow(until=lambda r: r.batch >= batch, timeout=10)
        assert replica.resets == 1
        assert projected(replica, QUERIES[0]) == expected(admin, QUERIES[0])
        server.stop()  # stopped and started with nothing committed in between: resumed
        server = start(directory, port=port)
        admin.sql("INSERT INTO orders VALUES (3, 1, 'open', 30)")
        replica.follow(until=lambda r: r.batch >= admin.status()["batch"], timeout=10)
        assert replica.resets == 1
        assert projected(replica, QUERIES[0]) == expected(admin, QUERIES[0])
    finally:
        server.stop()


def test_a_token_older_than_the_feed_gets_the_whole_result(tmp_path) -> None:
    server = start(tmp_path / "db", retention=2)
    try:
        admin = Client(server.url, ADMIN)
        admin.sql(TABLES)
        writer, reader = Client(server.url, WRITER), Client(server.url, READER)
        stream = Changes(7)
        replica = reader.replica(QUERIES[0])
        replica.follow(until=lambda r: r.batch >= 0, timeout=10)
        for _ in range(12):
            writer.sql(stream.batch())
        batch = admin.status()["batch"]
        replica.follow(until=lambda r: r.batch >= batch, timeout=10)
        assert replica.resets == 1
        assert projected(replica, QUERIES[0]) == expected(admin, QUERIES[0])
    finally:
        server.stop()


def test_the_feed_keeps_its_retention_when_no_subscription_changes(tmp_path) -> None:
    """Every batch adds a feed record; the feed was trimmed only when a subscription
    changed, so batches changing none (or a server with no subscriptions) grew it and
    its file without bound."""
    server = start(tmp_path / "db", retention=3)
    try:
        admin = Client(server.url, ADMIN)
        admin.sql(TABLES)
        for i in range(20):  # no subscription at all
            admin.sql(f"INSERT INTO secret VALUES ({i}, 'x')")
        assert admin.status()["feed"]["records"] <= 2 * 3
        Client(server.url, READER).subscribe(QUERIES[0])
        for i in range(20, 40):  # a subscription none of them changes
            admin.sql(f"INSERT INTO secret VALUES ({i}, 'x')")
        feed = admin.status()["feed"]
        assert 3 <= feed["records"] <= 2 * 3 and feed["horizon"] > 30
        assert (tmp_path / "db" / "feed.log").stat().st_size < 2_000
    finally:
        server.stop()


def test_changes_of_a_failed_batch_reach_no_subscriber(tmp_path) -> None:
    server = start(tmp_path / "db")
    try:
        admin = Client(server.url, ADMIN)
        admin.sql(TABLES + "INSERT INTO orders VALUES (1, 1, 'open', 10)")
        replica = Client(server.url, READER).replica(QUERIES[0])
        replica.follow(until=lambda r: r.batch >= 0, timeout=10)
        before = admin.status()["batch"]
        with pytest.raises(ServiceError) as err:  # the second statement fails: nothing applies
            admin.sql("INSERT INTO orders VALUES (2, 1, 'open', 5); DELETE FROM orders WHERE ok = 1;"
                      " INSERT INTO orders VALUES (2, 1, 'open', 5)")
        assert err.value.status in (400, 409)
        assert admin.status()["batch"] == before
        admin.sql("INSERT INTO orders VALUES (3, 1, 'open', 7)")
        replica.follow(until=lambda r: r.batch > before, timeout=10)
        assert projected(replica, QUERIES[0]) == expected(admin, QUERIES[0])
        # one record per committed batch; the failed one has none
        assert [(b, bool(c)) for b, c in server.hub.feed.records] == [
            (before, False), (before + 1, True)]
    finally:
        server.stop()


def test_websocket_gets_the_snapshot_then_each_change(tmp_path) -> None:
    """Events as JSON messages; refused handshakes are HTTP errors, and the server logs
    no error for them (uvicorn would, unfiltered)."""
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    server = start(tmp_path / "db")
    logged = Kept()
    logging.getLogger("uvicorn.error").addHandler(logged)
    try:
        admin = Client(server.url, ADMIN)
        admin.sql(TABLES + "INSERT INTO orders VALUES (1, 1, 'open', 10)")
        sid = Client(server.url, READER).subscribe(QUERIES[0]).id
        url = server.url.replace("http", "ws") + f"/subscriptions/{sid}/ws"
        with connect(url, additional_headers={"Authorization": f"Bearer {READER}"}) as ws:
            first = json.loads(ws.recv(timeout=10))
            assert first["kind"] == "snapshot" and first["rows"] == [[1, "open", 1]]
            admin.sql("INSERT INTO orders VALUES (2, 1, 'open', 5); "
                      "UPDATE orders SET status = 'done' WHERE ok = 1")
            delta = json.loads(ws.recv(timeout=10))
            assert delta["kind"] == "delta"
            assert sorted(map(json.dumps, delta["changes"])) == sorted(
                map(json.dumps, [[[2, "open", 2], 1], [[1, "open", 1], -1]]))
        with connect(url + f"?after={first['token']}",
                     additional_headers={"Authorization": f"Bearer {READER}"}) as ws:
            assert json.loads(ws.recv(timeout=10))["changes"] == delta["changes"]
        with pytest.raises(InvalidStatus) as refused:  # no token: refused in the handshake
            connect(url)
        assert refused.value.response.status_code == 401
        with pytest.raises(InvalidStatus) as refused:  # a path with no WebSocket endpoint
            connect(server.url.replace("http", "ws") + "/nowhere",
                    additional_headers={"Authorization": f"Bearer {READER}"})
        assert refused.value.response.status_code == 404
        assert b"no WebSocket endpoint at /nowhere" in refused.value.response.body
        assert logged.messages == []
    finally:
        logging.getLogger("uvicorn.error").removeHandler(logged)
        server.stop()


# ------------------------------------------------------------------ security and bad requests
ENDPOINTS = [("GET", "/"), ("POST", "/sql"), ("GET", "/tables"), ("GET", "/status"),
             ("GET", "/subscriptions"), ("POST", "/subscriptions"),
             ("GET", "/subscriptions/x"), ("DELETE", "/subscriptions/x"),
             ("GET", "/subscriptions/x/events"), ("POST", "/placements"),
             ("POST", "/placements/optimise"), ("DELETE", "/placements/x")]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    server = start(tmp_path_factory.mktemp("served") / "db")
    admin = Client(server.url, ADMIN)
    admin.sql(TABLES + "INSERT INTO secret VALUES (1, 'hidden');"
              "CREATE MATERIALIZED VIEW leak AS SELECT note FROM secret")
    yield server
    server.stop()


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-token-0123456789",
                                           f"Bearer {ADMIN}x", f"Basic {ADMIN}"])
def test_no_endpoint_answers_without_a_valid_token(served, authorization) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    for method, path in ENDPOINTS:
        response = httpx.request(method, served.url + path, headers=headers,
                                 json={"sql": "SELECT 1"})
        assert response.status_code == 401, (method, path)
        assert "secret" not in response.text and "hidden" not in response.text


@pytest.mark.parametrize("sql", [
    "SELECT * FROM secret",
    "SELECT note FROM leak",
    "SELECT o.ok FROM orders o WHERE o.ck IN (SELECT id FROM secret)",
    "WITH s AS (SELECT * FROM secret) SELECT * FROM s",
    "WITH secret AS (SELECT * FROM secret) SELECT * FROM secret",  # the inner one is the table
    "WITH orders AS (SELECT * FROM secret) SELECT * FROM orders",
    "SELECT * FROM read_csv('/etc/passwd')",
    "INSERT INTO orders VALUES (9, 1, 'open', 1)",
    "CREATE TABLE mine (a INTEGER)",
    "DROP VIEW leak",
])
def test_a_reader_is_refused_what_it_is_not_granted(served, sql) -> None:
    with pytest.raises(ServiceError) as err:
        Client(served.url, READER).sql(sql)
    assert err.value.status == 403
    assert "hidden" not in str(err.value.record)


@pytest.mark.parametrize("sql, allowed", [
    ("INSERT INTO orders VALUES (901, 1, 'open', 1)", True),
    ("INSERT INTO orders SELECT ok + 1000, ck, status, price FROM orders", False),
    ("DELETE FROM orders WHERE price > 5", False),
    ("UPDATE orders SET status = 'x' WHERE ok = 901", False),
    ("UPDATE orders SET price = price + 1", False),
])
def test_a_write_that_reads_its_table_needs_the_read_grant_too(served, sql, allowed) -> None:
    """As PostgreSQL asks SELECT of an UPDATE with a WHERE: a principal that may write a
    table but not read it can write constants, and cannot learn its rows by writing."""
    loader = Client(served.url, LOADER)
    if allowed:
        loader.sql(sql)
        return
    with pytest.raises(ServiceError) as err:
        loader.sql(sql)
    assert err.value.status == 403 and "may not read table orders" in str(err.value)


def test_subscriptions_respect_grants(served) -> None:
    reader, admin = Client(served.url, READER), Client(served.url, ADMIN)
    with pytest.raises(ServiceError) as err:
        reader.subscribe("SELECT s.id, s.note FROM secret s")
    assert err.value.status == 403 and "secret" in err.value.record["message"]
    sid = admin.subscribe("SELECT s.id, s.note FROM secret s").id
    for call in (lambda: reader.subscription(sid), lambda: list(reader.events(sid)),
                 lambda: reader.unsubscribe(sid)):
        with pytest.raises(ServiceError) as err:
            call()
        assert err.value.status == 403
    assert sid not in [s["id"] for s in reader.status()["subscriptions"]]
    with pytest.raises(ServiceError) as err:  # its view is the server's, not the admin's
        admin.sql(f"DROP VIEW __sub_{sid}")
    assert err.value.status == 403 and "DELETE /subscriptions" in err.value.record["message"]
    own = Client(served.url, WRITER).subscribe("SELECT c.ck FROM customer c WHERE c.nation = 2")
    with pytest.raises(ServiceError) as err:  # only its creator or an admin ends it
        reader.unsubscribe(own.id)
    assert err.value.status == 403


def test_a_write_error_shows_no_value_of_a_table_the_writer_may_not_read(tmp_path) -> None:
    """A write's error names no stored value the principal may not read: an UPDATE's
    failing row and a NOT NULL violation of a write-only principal, a view's failing cast
    of a table the writer may not read (each showed the rows), as PostgreSQL leaves a key's
    values out of an error for a user without SELECT; a reader's errors keep them."""
    server = start(tmp_path / "db")
    try:
        admin = Client(server.url, ADMIN)
        admin.sql(TABLES + "INSERT INTO orders VALUES (1, 7, 'topsecret', 99.50);"
                  "INSERT INTO secret VALUES (1, 'hidden');"
                  "CREATE MATERIALIZED VIEW v AS SELECT c.ck, CAST(s.note AS INTEGER) AS n "
                  "FROM customer c JOIN secret s ON c.nation = s.id")
        for client, sql, status in [
                (Client(server.url, LOADER), "UPDATE orders SET ck = 'x'", 400),
                (Client(server.url, LOADER), "UPDATE orders SET ok = NULL", 409),
                (Client(server.url, WRITER), "INSERT INTO customer VALUES (5, 'a', 1)", 400)]:
            with pytest.raises(ServiceError) as err:
                client.sql(sql)
            assert err.value.status == status, sql
            text = json.dumps(err.value.record)
            assert "topsecret" not in text and "hidden" not in text, text
            assert "may not read table" in text, text
        with pytest.raises(ServiceError) as err:  # the admin reads both: the whole error
            admin.sql("UPDATE orders SET ck = 'x'")
        assert "topsecret" in err.value.record["message"]
        assert admin.sql("SELECT * FROM orders").rows == [(1, 7, "topsecret", Decimal("99.50"))]
        assert admin.sql("SELECT * FROM customer").rows == []
    finally:
        server.stop()


@pytest.mark.parametrize("query", ["SELECT s.nope FROM secret s",
                                   "SELECT s.id FROM secret s WHERE s.note = 1"])
def test_a_subscription_to_an_unreadable_table_tells_nothing_of_its_columns(served,
                                                                           query) -> None:
    """The grant is checked before the query is checked against the table's columns (a
    reader learned a column's name or type from a 400)."""
    with pytest.raises(ServiceError) as err:
        Client(served.url, READER).subscribe(query)
    assert err.value.status == 403 and "may not read table secret" in str(err.value)


def test_a_subscription_too_big_to_build_within_the_time_limit_is_refused(tmp_path) -> None:
    """A reader's subscription to a join that multiplies rows was built under the server's
    lock with no limit: every other request waited as long as it ran (2,000 orders of one
    customer: 4 M rows, 25 s at --statement-seconds 1), or the server ran out of memory."""
    server = start(tmp_path / "db", statement_seconds=1)
    try:
        admin = Client(server.url, ADMIN)
        admin.sql(TABLES + "INSERT INTO orders SELECT i, 1, 'open', 1 FROM range(500) t(i)")
        reader = Client(server.url, READER)
        joined = "SELECT o.ok FROM orders o JOIN orders p ON o.ck = p.ck"  # 250,000 rows
        with pytest.raises(ServiceError) as refused:
            reader.subscribe(joined)
        assert refused.value.status == 400 and "250,000 rows" in str(refused.value)
        assert admin.sql("SELECT COUNT(*) FROM orders").rows == [(500,)]
        assert admin.status()["subscriptions"] in (0, [], {})  # nothing was built
        reader.subscribe("SELECT o.ok FROM orders o")  # a small one is built
        assert admin.status()["subscriptions"] not in (0, [], {})
    finally:
        server.stop()


def test_a_json_number_parameter_keeps_the_digits_it_was_sent_with(tmp_path) -> None:
    """JSON carries a decimal exactly, but the body was read into binary floats:
    ``123456789012345678.0123456789`` was stored as ``123456789012345685.0245451776``. A
    number a double holds as written stays a DOUBLE (``SELECT ?`` of 0.5)."""
    server = start(tmp_path / "db")
    try:
        headers = {"Authorization": f"Bearer {ADMIN}"}

        def post(body: bytes) -> dict:
            response = httpx.post(server.url + "/sql", content=body, headers=headers)
            assert response.status_code == 200, response.text
            return response.json()

        post(b'{"sql": "CREATE TABLE m (k INTEGER, d DECIMAL(38,10), x DOUBLE)"}')
        post(b'{"sql": "INSERT INTO m VALUES (?, ?, ?)", '
             b'"params": [1, 123456789012345678.0123456789, 0.1]}')
        assert post(b'{"sql": "SELECT d, x FROM m"}')["rows"] == [
            ["123456789012345678.0123456789", 0.1]]
        assert post(b'{"sql": "SELECT ? AS h", "params": [0.5]}')["types"] == ["DOUBLE"]
    finally:
        server.stop()


def test_an_unknown_table_is_a_400_and_range_is_answered(served) -> None:
    """A table that does not exist was a 403 "ops may not read nosuch" even to an admin
    granted every table, and ``range(3)`` was refused as if it read one."""
    admin = Client(served.url, ADMIN)
    with pytest.raises(ServiceError) as err:
        admin.sql("SELECT * FROM nosuch")
    assert err.value.status == 400 and "unknown table or view nosuch" in str(err.value)
    with duckdb.connect() as oracle:
        for sql in ["SELECT * FROM range(3)", "SELECT * FROM generate_series(1, 3, 2)"]:
            assert admin.sql(sql).rows == oracle.sql(sql).fetchall()
    with pytest.raises(ServiceError) as err:  # a table function that reads tables
        Client(served.url, READER).sql("SELECT * FROM query_table('secret')")
    assert err.value.status == 403


def test_an_alter_statement_is_refused_as_the_engine_refuses_it(served) -> None:
    """``ALTER TABLE orders RENAME TO ...`` was a 400 "unknown table or view" naming the
    new name; it is the engine's "not supported", to an admin, and a grant error to
    others."""
    admin = Client(served.url, ADMIN)
    before = admin.sql("SELECT * FROM orders").rows
    for sql in ["ALTER TABLE orders RENAME TO purchases",
                "ALTER TABLE orders ADD COLUMN extra INTEGER"]:
        with pytest.raises(ServiceError) as err:
            admin.sql(sql)
        assert err.value.status == 400 and "ALTER statements are not supported" in \
            str(err.value), str(err.value)
        with pytest.raises(ServiceError) as err:
            Client(served.url, READER).sql(sql)
        assert err.value.status == 403, str(err.value)
    assert admin.sql("SELECT * FROM orders").rows == before  # nothing renamed or added


@pytest.mark.parametrize("body, status, where", [
    (b"{not json", 400, "not JSON"),
    (b"[1, 2]", 400, "JSON object"),
    (b'{"sql": 5}', 400, "string of SQL"),
    (b'{"sql": "SELEC ok FROM orders"}', 400, "line"),
    (b'{"sql": "SELECT ok FROM orders WHERE"}', 400, "line"),
    (b'{"sql": "SELECT nope FROM orders"}', 400, "nope"),
])
def test_malformed_sql_requests_get_clear_errors(served, body, status, where) -> None:
    response = httpx.post(served.url + "/sql", content=body,
                          headers={"Authorization": f"Bearer {ADMIN}"})
    assert response.status_code == status
    error = response.json()["error"]
    assert where in json.dumps(error) and "Traceback" not in response.text


@pytest.mark.parametrize("path", ["/sql", "/subscriptions", "/placements"])
def test_a_lone_surrogate_in_a_query_is_a_bad_request(served, path) -> None:
    """Valid JSON may carry a lone surrogate; as a subscription's query it failed when
    hashed for the subscription's id: 500 and a traceback in the server's log."""
    sql = b"SELECT o.ok FROM orders o WHERE o.status = '\\ud800'"
    field = b"sql" if path == "/sql" else b"query"
    response = httpx.post(served.url + path, content=b'{"' + field + b'": "' + sql + b'"}',
                          headers={"Authorization": f"Bearer {ADMIN}"})
    assert response.status_code == 400, response.text
    assert "lone surrogate" in response.json()["error"]["message"]


@pytest.mark.parametrize("query, where, column", [
    ("SELECT o.status, COUNT(*) FROM orders o GROUP BY o.status", "GROUP", 50),
    ("SELECT o.ok FROM orders o LEFT JOIN customer c ON o.ck = c.ck", "inner", 37),
    ("SELECT o.ok FROM orders o WHERE o.price * 2 > 5", "compares no column", 33),
    ("SELECT o.ok FROM nowhere o", "unknown table nowhere", 18),
    ("SELECT o.nope FROM orders o", "no column nope", 8),
    ("SELECT FROM", "Expected", 11),
    ("SELECT o.ok FROM orders o WHERE o.status = NULL", "NULL is never true", 33),
    ("SELECT o.ok FROM orders o WHERE o.status = ?", "no parameters", 33),
    ("SELECT o.ok FROM orders o;\nSELECT 1", "one SELECT statement", 8),
    ("SELECT o.ok FROM orders o WHERE o.ok = 1 AND o.status = 1",
     "cannot compare VARCHAR with INTEGER", 46),
    ("SELECT o.ok FROM orders o JOIN customer c ON o.status = c.ck", "cannot compare", 46),
    ("SELECT o.ok FROM orders o WHERE o.ok = 1e400", "out of range", 40),
    ("SELECT o.ok FROM orders o WHERE o.ok = TRUE", "INTEGER with BOOLEAN", 33),
])
def test_queries_outside_the_language_are_refused(served, query, where, column) -> None:
    with pytest.raises(ServiceError) as err:
        Client(served.url, READER).subscribe(query)
    record = err.value.record
    assert err.value.status == 400 and where in record["message"]
    assert record["column"] == column
    assert record["line"] == (2 if "\n" in query else column and 1)


def test_oversized_deeply_nested_and_misrouted_requests_get_json_errors(
        served, monkeypatch) -> None:
    from upkeep.service import app

    auth = {"Authorization": f"Bearer {ADMIN}"}
    monkeypatch.setattr(app, "MAX_BODY_BYTES", 1000)
    big = json.dumps({"sql": "SELECT 1 -- " + "a" * 2000}).encode()
    declared = httpx.post(served.url + "/sql", content=big, headers=auth)
    streamed = httpx.post(served.url + "/sql", content=iter([big[:600], big[600:]]),
                          headers=auth)  # chunked: no Content-Length to go by
    for response in (declared, streamed):
        assert response.status_code == 413, response.text
        assert "over the limit of 1000 bytes" in response.json()["error"]["message"]
    monkeypatch.undo()
    deep = httpx.post(served.url + "/sql", content=b"[" * 100_000 + b"]" * 100_000, headers=auth)
    assert deep.status_code == 400 and deep.json()["error"]["class"] == "BadRequest"
    for method, path, status in [("GET", "/nowhere", 404), ("GET", "/sql", 405),
                                 ("PUT", "/subscriptions", 405)]:
        response = httpx.request(method, served.url + path, headers=auth)
        assert response.status_code == status
        assert path in response.json()["error"]["message"]
    assert Client(served.url, ADMIN).sql("SELECT 1 AS one").rows == [(1,)]  # still serving


def test_values_beyond_the_tables_types_are_spelled_in_json(served) -> None:
    rows = Client(served.url, ADMIN).sql(
        "SELECT [1, 2] AS l, {'a': 1} AS s, TIME '12:00:01' AS t, INTERVAL 90 MINUTE AS i, "
        "'ab'::BLOB AS b, '00000000-0000-0000-0000-000000000005'::UUID AS u").rows
    assert rows == [([1, 2], {"a": 1}, "12:00:01", "P0DT5400S", "YWI=",
                     "00000000-0000-0000-0000-000000000005")]


@pytest.mark.parametrize("failed", ["http://[::1", "http://127.0.0.1:99999", "not a url"])
def test_placements_refuse_malformed_failed_urls(served, failed) -> None:
    response = httpx.post(served.url + "/placements", headers={"Authorization": f"Bearer {READER}"},
                          json={"query": "SELECT o.ok FROM orders o", "failed": [failed]})
    assert response.status_code == 400 and failed in response.json()["error"]["message"]


@pytest.mark.parametrize("name", [0, False, [], {}, "", {"a": 1}])
def test_placements_refuse_a_name_that_is_no_string(served, name) -> None:
    """A name the client gave must be a non-empty string; a falsy one (0, [], "") was
    replaced by a name the server made up, so the client could not find its placement."""
    response = httpx.post(served.url + "/placements", headers={"Authorization": f"Bearer {READER}"},
                          json={"query": "SELECT o.ok FROM orders o", "name": name})
    assert response.status_code == 400 and '"name"' in response.json()["error"]["message"]


def test_bad_resume_tokens_and_unknown_subscriptions(served) -> None:
    reader = Client(served.url, READER)
    sid = reader.subscribe(QUERIES[0]).id
    for token, where in [("garbage", "malformed"), ("other:1", "another database"),
                         (f"{served.hub.instance}:999999", "ahead"),
                         (f"{served.hub.instance}:\u00b2", "malformed"),
                         (f"{served.hub.instance}:\u0669", "malformed"),
                         (f"{served.hub.instance}:{'9' * 5000}", "malformed")]:
        with pytest.raises(ServiceError) as err:
            list(reader.events(sid, after=token))
        assert err.value.status == 400 and where in err.value.record["message"]
    with pytest.raises(ServiceError) as err:
        reader.subscription("0123456789abcdef")
    assert err.value.status == 404


def test_arrow_results(served) -> None:
    import pyarrow as pa

    response = httpx.post(served.url + "/sql", json={"sql": "SELECT ck, segment FROM customer"},
                          headers={"Authorization": f"Bearer {ADMIN}",
                                   "Accept": "application/vnd.apache.arrow.stream"})
    assert response.status_code == 200
    table = pa.ipc.open_stream(response.content).read_all()
    assert table.column_names == ["ck", "segment"]
    assert table.num_rows == len(Client(served.url, ADMIN).sql("SELECT * FROM customer").rows)


def test_arrow_results_hold_maps_as_duckdb_exports_them(served) -> None:
    """A MAP whose keys are not text was a 400 in Arrow (Arrow reads a dict as a MAP only
    with string keys), and one with text keys became a struct."""
    import pyarrow as pa

    sql = ("SELECT MAP {1: 'a'} AS m, [MAP {2: 'b'}, NULL] AS l, MAP {'k': 1} AS t, "
           "MAP {DATE '2020-01-01': [1.5]} AS d")
    response = httpx.post(served.url + "/sql", json={"sql": sql},
                          headers={"Authorization": f"Bearer {ADMIN}",
                                   "Accept": "application/vnd.apache.arrow.stream"})
    assert response.status_code == 200, response.text
    table = pa.ipc.open_stream(response.content).read_all()
    with duckdb.connect() as oracle:
        expected = oracle.sql(sql).to_arrow_table()
    assert table.schema == expected.schema and table.to_pylist() == expected.to_pylist()


def test_values_keep_their_types(served) -> None:
    admin = Client(served.url, ADMIN)
    admin.sql("INSERT INTO orders VALUES (77, 3, 'typed', 12.50)")
    rows = admin.sql("SELECT price FROM orders WHERE ok = 77").rows
    assert rows == [(Decimal("12.50"),)]


def test_upkeep_subscribe_reports_bad_input_and_unreachable_servers(served, tmp_path,
                                                                    capsys) -> None:
    """``upkeep subscribe`` ends with one line naming what is wrong, never a traceback;
    ``--timeout`` alone is a normal stop."""
    from upkeep.cli import main

    def run(*argv: str) -> tuple[int, str, list[dict]]:
        status = main(["subscribe", *argv])
        out, err = capsys.readouterr()
        assert "Traceback" not in err
        return status, err, [json.loads(line) for line in out.splitlines()]

    status, err, _ = run(served.url, QUERIES[0], "--token", f"@{tmp_path / 'missing'}")
    assert status == 1 and "cannot read" in err and "missing" in err
    gone = f"http://127.0.0.1:{_free_port()}"
    status, err, _ = run(gone, QUERIES[0], "--token", READER, "--timeout", "1")
    assert status == 1 and f"cannot reach {gone}" in err
    status, err, _ = run(served.url, "SELECT nope FROM orders o", "--token", READER)
    assert status == 1 and "nope" in err
    (tmp_path / "token").write_text(READER + "\n")
    # timeouts long enough for the snapshot on a busy machine (0.5 s once left none)
    status, err, events = run(served.url, QUERIES[0], "--token", f"@{tmp_path / 'token'}",
                              "--timeout", "3", "--no-placed")
    assert status == 0 and events[0]["kind"] == "snapshot"
    status, err, _ = run(served.url, QUERIES[0], "--token", READER, "--timeout", "2",
                         "--batches", "999", "--no-placed")
    assert status == 1 and "not at batch 999" in err


# ------------------------------------------------------------------ kill -9
def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(predicate, seconds: float, what: str) -> None:
    import time

    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"{what} after {seconds} s"
        time.sleep(0.1)


def test_kill_nine_of_the_server_and_of_a_subscriber_loses_and_doubles_nothing(tmp_path) -> None:
    """The server and a subscriber agent (``upkeep subscribe --state``) are killed with
    SIGKILL while a writer commits batches; both come back, and every replica, the agent's
    file included, equals DuckDB's evaluation of its query once caught up."""
    import os
    import signal
    import threading
    import time

    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tokens": {
        ADMIN: {"name": "ops", "read": "*", "write": "*", "admin": True},
        READER: {"name": "reader", "read": ["customer", "orders"]}}}))
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "upkeep.cli"]

    def server() -> subprocess.Popen:
        process = subprocess.Popen([*command, "serve", str(tmp_path / "db"), "--tokens",
                                    str(tokens), "--port", str(port)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

        def up() -> bool:
            assert process.poll() is None, process.stderr.read().decode()[-2000:]
            try:
                return httpx.get(url + "/status", headers={"Authorization": f"Bearer {ADMIN}"},
                                 timeout=1).status_code == 200
            except httpx.TransportError:
                return False
        _wait_for(up, 60, "the server did not answer")
        return process

    def agent() -> subprocess.Popen:
        return subprocess.Popen([*command, "subscribe", url, QUERIES[1], "--token", READER,
                                 "--state", str(tmp_path / "agent.json")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    serving = server()
    admin = Client(url, ADMIN)
    admin.sql(TABLES)
    subscriber = agent()
    replica = Client(url, READER).replica(QUERIES[0])
    stream, committed, done = Changes(11), [0], threading.Event()

    def write() -> None:
        writer = Client(url, ADMIN, timeout=5)
        while committed[0] < 40 and not done.is_set():
            batch = stream.batch()
            try:
                writer.sql(batch)
                committed[0] += 1
            except (httpx.TransportError, ServiceError):
                # unknown whether it committed: the oracle reads the tables as they are; a
                # retried batch's statements may now fail (a key inserted twice), so draw anew
                time.sleep(0.05)
        done.set()

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    try:
        _wait_for(lambda: committed[0] >= 8, 60, "the writer did not start")
        serving.send_signal(signal.SIGKILL)
        serving.wait()
        serving = server()
        _wait_for(lambda: committed[0] >= 20, 60, "the writer did not go on")
        subscriber.send_signal(signal.SIGKILL)
        subscriber.wait()
        subscriber = agent()
        assert done.wait(120), "the writer did not finish"
        final = admin.status()["batch"]
        replica.follow(until=lambda r: r.batch >= final, timeout=60)
        assert projected(replica, QUERIES[0]) == expected(admin, QUERIES[0])

        def caught_up() -> bool:
            assert subscriber.poll() is None, subscriber.stderr.read().decode()[-2000:]
            path = tmp_path / "agent.json"
            return path.exists() and json.loads(path.read_text())["batch"] >= final
        _wait_for(caught_up, 60, "the subscriber agent did not catch up")
        state = json.loads((tmp_path / "agent.json").read_text())
        width = len([c for c in QUERIES[1].split("FROM")[0].split(",")])
        rows = Counter()
        for row, n in state["rows"]:
            rows[(row[0], Decimal(row[1]))[:width]] += n
        assert rows == expected(admin, QUERIES[1])
    finally:
        done.set()
        for process in (serving, subscriber):
            if process.poll() is None:
                os.kill(process.pid, signal.SIGKILL)
                process.wait()
        thread.join(10)


def test_ending_a_subscription_ends_its_streams_and_survives_a_restart(tmp_path) -> None:
    import threading

    server = start(tmp_path / "db")
    port = server.port
    try:
        admin = Client(server.url, ADMIN)
        admin.sql(TABLES + "INSERT INTO orders VALUES (1, 1, 'open', 10)")
        writer = Client(server.url, WRITER)
        sid = writer.subscribe(QUERIES[0]).id
        kept = writer.subscribe(QUERIES[2]).id
        kinds: list[str] = []
        listening = threading.Thread(target=lambda: kinds.extend(
            e["kind"] for e in writer.events(sid) if e["kind"] != "keep-alive"))
        listening.start()
        _wait_for(lambda: server.hub.listeners(sid) == 1, 10, "no listener")
        writer.unsubscribe(sid)
        listening.join(10)
        assert kinds == ["snapshot", "end"]
        assert f"__sub_{sid}" not in server.db.views()
        server.stop()
        server = start(tmp_path / "db", port=port)
        assert [s["id"] for s in admin.status()["subscriptions"]] == [kept]
        with pytest.raises(ServiceError) as err:
            writer.subscription(sid)
        assert err.value.status == 404
    finally:
        server.stop()


def test_a_stream_too_far_behind_is_ended_and_its_client_resumes_from_the_feed(tmp_path) -> None:
    """A stream whose events pile up (its client reads too slowly) is ended with
    ``lagging`` after ``max_queued`` events, instead of growing without bound; the client
    resumes from the last event it got and misses nothing."""
    import asyncio
    import threading

    server = start(tmp_path / "db")
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def on_loop(coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result(10)

    try:
        admin = Client(server.url, ADMIN)
        admin.sql(TABLES)
        reader = Client(server.url, READER)
        sid = reader.subscribe(QUERIES[3]).id
        service, principal = server.service, TOKENS.principal(READER)
        service.max_queued = 3
        first, queue, listener = on_loop(service._listen(principal, sid, None))
        for k in range(8):  # nobody drains the queue meanwhile
            admin.sql(f"INSERT INTO customer VALUES ({k}, 'A', 1)")
            on_loop(asyncio.sleep(0))  # the loop has queued what the commit sent

        async def drain() -> list:
            return [queue.get_nowait() for _ in range(queue.qsize())]
        events = on_loop(drain())
        server.hub.unlisten(sid, listener)
        assert [e.kind for e in events] == ["delta"] * 3 + ["lagging"]
        # its token (an SSE client's Last-Event-ID) is the last delta's, the one it got
        assert (events[3].token, events[3].batch) == (events[2].token, events[2].batch)
        replica = Replica(reader, reader.subscription(sid))
        assert first[0].kind == "snapshot" and first[0].rows == []
        replica.apply({"kind": "snapshot", "token": first[0].token, "batch": first[0].batch,
                       "rows": []})
        for e in events[:3]:
            replica.apply({"kind": "delta", "token": e.token, "batch": e.batch,
                           "changes": [[list(r), w] for r, w in e.changes]})
        replica.follow(until=lambda r: r.batch >= admin.status()["batch"], timeout=10)
        assert replica.resets == 0
        assert projected(replica, QUERIES[3]) == expected(admin, QUERIES[3])
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        server.stop()


def test_serve_refuses_a_schema_file_for_a_local_database(tmp_path) -> None:
    """``--schema`` declares a Spark connection's tables; a local database keeps its own,
    so the option is an error there, before anything is served."""
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tokens": {ADMIN: {"name": "ops", "read": "*"}}}))
    run = subprocess.run([sys.executable, "-m", "upkeep.cli", "serve", str(tmp_path / "db"),
                          "--tokens", str(tokens), "--schema", str(tmp_path / "t.sql"),
                          "--port", "0"], capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert "--schema is for --engine spark" in run.stderr
    assert "serving" not in run.stdout


@pytest.mark.parametrize(("token", "message"), [
    ("short-token", "shorter than 16"), ("clé-secrète-0123456789", "not printable ASCII"),
    ("tab\tin-the-token-0123", "not printable ASCII")])
def test_a_tokens_file_with_a_token_no_header_carries_is_refused(token, message) -> None:
    """A non-ASCII token was accepted, and every request presenting it was a 500
    (``hmac.compare_digest`` refuses non-ASCII text)."""
    from upkeep.service.grants import TokensFileError

    with pytest.raises(TokensFileError, match=message):
        Tokens.from_dict({"tokens": {token: {"name": "ops", "read": "*"}}})


@pytest.mark.parametrize("flag", ["admin", "relay"])
@pytest.mark.parametrize("value", ["false", 0, 1, None])
def test_a_tokens_file_whose_flag_is_not_true_or_false_is_refused(flag, value) -> None:
    """``"admin": "false"`` is a string, which bool() reads as true: refused, not a grant."""
    from upkeep.service.grants import TokensFileError

    with pytest.raises(TokensFileError, match=f'"{flag}" must be true or false'):
        Tokens.from_dict({"tokens": {READER: {"name": "viewer", "read": ["orders"],
                                              flag: value}}})


@pytest.mark.parametrize("entry", [{"name": "viewer", "reads": ["orders"]},
                                   {"name": "viewer", "read": ["orders"], "Admin": True}])
def test_a_tokens_file_with_a_key_it_does_not_know_is_refused(entry) -> None:
    """A misspelt key (``"reads"``) was ignored: the principal silently got no grant, or
    not the one its operator wrote."""
    from upkeep.service.grants import TokensFileError

    unknown = next(k for k in entry if k not in ("name", "read"))
    with pytest.raises(TokensFileError, match=f"viewer's entry has a key \"{unknown}\""):
        Tokens.from_dict({"tokens": {READER: entry}})


def test_a_tokens_file_with_a_key_beside_tokens_is_refused() -> None:
    from upkeep.service.grants import TokensFileError

    with pytest.raises(TokensFileError, match="a key \"colour\""):
        Tokens.from_dict({"tokens": {READER: {"name": "viewer"}}, "colour": "red"})


@pytest.mark.parametrize(("content", "where", "message"), [
    ("{broken", "agent.json", "is not one upkeep subscribe wrote"),
    ('{"subscription": null}', "agent.json", None),  # another query's: started afresh
    (None, "missing/agent.json", "does not exist"),
])
def test_a_state_file_that_cannot_be_read_or_written_is_one_clear_error(
        served, tmp_path, content, where, message) -> None:
    """``upkeep subscribe --state``: a damaged file or a missing directory is named, not a
    traceback; a file of another subscription is left for a fresh snapshot."""
    import upkeep
    from upkeep.agent import follow_subscription

    state = tmp_path / where
    if content is not None:
        state.write_text(content)
    follow = lambda: follow_subscription(served.url, QUERIES[3], READER,  # noqa: E731
                                         state=state, batches=0, timeout=120)
    if message is None:
        assert follow().batch >= 0
        assert json.loads(state.read_text())["subscription"]
    else:
        with pytest.raises(upkeep.Error, match=message):
            follow()


def test_serve_on_port_zero_announces_the_port_it_got_and_nothing_before_it_serves(
        tmp_path) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tokens": {ADMIN: {"name": "ops", "read": "*"}}}))
    command = [sys.executable, "-m", "upkeep.cli", "serve", str(tmp_path / "db")]
    refused = subprocess.run([*command, "--tokens", str(tmp_path / "none.json"), "--port",
                              "0"], capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1 and "serving" not in refused.stdout
    process = subprocess.Popen([*command, "--tokens", str(tokens), "--port", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        url = line.split(" on ")[-1].strip()
        assert line.startswith("upkeep: serving") and not url.endswith(":0"), line
        status = httpx.get(url + "/status", headers={"Authorization": f"Bearer {ADMIN}"},
                           timeout=120)
        assert status.status_code == 200
    finally:
        process.terminate()
        process.wait(30)


def test_a_query_past_the_statement_time_limit_is_stopped_and_the_server_goes_on(
        tmp_path) -> None:
    """Requests run one at a time: a client's endless query is stopped at the limit (a
    400 ``StatementTimeout``), not left holding every other request."""
    import time

    server = Server(tmp_path / "db", TOKENS, port=0, fsync=False,
                    statement_seconds=1).start()
    try:
        admin = Client(server.url, ADMIN)
        admin.sql("CREATE TABLE o (a INTEGER); INSERT INTO o VALUES "
                  + ", ".join(f"({i})" for i in range(1000)))
        started = time.monotonic()
        answer = httpx.post(server.url + "/sql", headers={"Authorization": f"Bearer {ADMIN}"},
                            json={"sql": "SELECT count(*) FROM o a, o b, o c, o d"},
                            timeout=120)
        assert answer.status_code == 400
        assert answer.json()["error"]["class"] == "StatementTimeout"
        assert time.monotonic() - started < 60  # stopped, not run to its end
        admin.sql("INSERT INTO o VALUES (1000)")
        assert admin.sql("SELECT count(*) FROM o").rows == [(1001,)]
    finally:
        server.stop()


@pytest.mark.parametrize("token", ["", "tökenéééééééééééééé", "line\nbreak-0123456789"])
def test_a_token_that_cannot_be_sent_is_refused_before_any_request(token) -> None:
    """An empty token was reported as an unreachable server, a non-ASCII one raised
    UnicodeEncodeError from the HTTP library."""
    with pytest.raises(ServiceError, match="printable ASCII"):
        Client("http://127.0.0.1:9", token)


def test_a_query_that_is_no_text_is_refused_before_any_request() -> None:
    client = Client("http://127.0.0.1:9", "a-long-random-secret-1")  # nothing listens
    with pytest.raises(ServiceError, match="not valid text"):
        client.subscribe("SELECT t.a FROM t t WHERE t.b = '\udcff'")


def test_a_bad_tokens_file_leaves_no_database_behind(tmp_path) -> None:
    from upkeep.errors import Error

    with pytest.raises(Error):
        Server(tmp_path / "db", tmp_path / "no-such-tokens.json", port=0)
    assert not (tmp_path / "db").exists()


def test_a_websocket_subscriber_that_sends_a_message_keeps_its_stream(tmp_path) -> None:
    """The stream is the server's to send; what a client sends is read and ignored, so
    the connection's pings and pongs keep flowing (a client that sent one message was cut
    by the keep-alive ping timeout: the server had stopped reading its socket)."""
    import time

    from websockets.sync.client import connect

    server = Server(tmp_path / "db", TOKENS, port=0, fsync=False)
    # pings every second, a second to answer: under load the client's pong may take a while
    server._uvicorn.config.ws_ping_interval = server._uvicorn.config.ws_ping_timeout = 1.0
    server.start()
    try:
        admin = Client(server.url, ADMIN)
        admin.sql(TABLES + "INSERT INTO orders VALUES (1, 1, 'open', 10)")
        sid = Client(server.url, READER).subscribe(QUERIES[0]).id
        url = server.url.replace("http", "ws") + f"/subscriptions/{sid}/ws"
        with connect(url, additional_headers={"Authorization": f"Bearer {READER}"},
                     ping_interval=None) as ws:
            assert json.loads(ws.recv(timeout=10))["kind"] == "snapshot"
            ws.send("hello")
            time.sleep(4.5)  # more than two of the server's ping intervals and timeouts
            admin.sql("INSERT INTO orders VALUES (2, 1, 'open', 5)")
            delta = json.loads(ws.recv(timeout=10))
            assert delta["kind"] == "delta" and delta["changes"] == [[[2, "open", 2], 1]]
    finally:
        server.stop()


def test_a_client_that_hangs_up_mid_request_is_not_logged_as_an_internal_error(tmp_path):
    """A request body cut short by the client is an ordinary disconnect, not a traceback
    in the server's log (any client could fill the log with them)."""
    import socket
    import time

    server = start(tmp_path / "db")
    logged = Kept()
    logging.getLogger("upkeep.service").addHandler(logged)
    try:
        for path in ("/sql", "/subscriptions"):
            with socket.create_connection((server.host, server.port)) as s:
                s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n"
                          f"Authorization: Bearer {ADMIN}\r\n\r\n{{\"sql\":".encode())
                time.sleep(0.2)
        time.sleep(0.5)
        assert Client(server.url, ADMIN).sql("SELECT 1 AS one").rows == [(1,)]
        assert logged.messages == []
    finally:
        logging.getLogger("upkeep.service").removeHandler(logged)
        server.stop()


def test_a_stream_opened_while_the_server_stops_gets_shutdown(tmp_path) -> None:
    """Once the server has told its listeners ``shutdown``, a stream opened on a kept-alive
    connection gets its first events and ``shutdown`` at once, not a stream cut off when
    the server's graceful shutdown runs out (its clients resume from their tokens)."""
    from websockets.sync.client import connect

    server = start(tmp_path / "db")
    try:
        admin = Client(server.url, ADMIN)
        admin.sql(TABLES + "INSERT INTO orders VALUES (1, 1, 'open', 10)")
        reader = Client(server.url, READER)
        sid = reader.subscribe(QUERIES[0]).id
        server.hub.shutting_down()  # what stop() does first
        kinds = [e["kind"] for e in reader.events(sid, read_timeout=5)
                 if e["kind"] != "keep-alive"]
        assert kinds == ["snapshot", "shutdown"]
        url = server.url.replace("http", "ws") + f"/subscriptions/{sid}/ws"
        with connect(url, additional_headers={"Authorization": f"Bearer {READER}"}) as ws:
            assert [json.loads(ws.recv(timeout=5))["kind"] for _ in range(2)] == [
                "snapshot", "shutdown"]
    finally:
        server.stop()
