"""The Spark engine's own mechanics: bulk loads through Spark, warm shard engines (no
rebuild per micro-batch), restarts from the checkpoint, rejected statements."""

from __future__ import annotations

import datetime as dt
import errno
import os
import random
import re
import shutil
from collections import Counter
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import upkeep
from upkeep.spark.session import default_partitions
from upkeep.spark.shard_client import server_stats

TABLES = """
CREATE TABLE customers (ck INTEGER, segment VARCHAR, nation INTEGER);
CREATE TABLE orders (ok BIGINT, ck INTEGER, day DATE, price DECIMAL(12,2));
"""
VIEWS = {
    "revenue": "SELECT c.segment, SUM(o.price) AS total, COUNT(*) AS n "
               "FROM orders o JOIN customers c ON o.ck = c.ck GROUP BY c.segment",
    "per_customer": "SELECT o.ck, COUNT(*) AS n, MAX(o.day) AS last FROM orders o GROUP BY o.ck",
    "joined": "SELECT o.ok, c.segment FROM orders o, customers c WHERE o.ck = c.ck AND c.nation < 3",
}


def customers(n: int) -> list[tuple]:
    return [(i, ["AUTO", "BUILDING", None][i % 3], i % 5) for i in range(n)]


def orders(rnd: random.Random, start: int, n: int, customers_n: int) -> list[tuple]:
    return [(k, rnd.randrange(customers_n + 5), dt.date(2024, 1, 1) + dt.timedelta(rnd.randrange(90)),
             Decimal(rnd.randrange(100, 100000)) / 100) for k in range(start, start + n)]


def both(spark, tmp_path, **options):
    local = upkeep.connect()
    remote = upkeep.connect(engine="spark", spark=spark, shards=2, database=tmp_path / "spark",
                            **options)
    for db in (local, remote):
        db.execute(TABLES)
        for name, sql in VIEWS.items():
            db.create_view(name, sql)
    return local, remote


def assert_same(local, remote) -> None:
    for name in VIEWS:
        assert Counter(remote.view(name).rows()) == Counter(local.view(name).rows()), name


@pytest.mark.parametrize(("master", "partitions"), [
    ("local[2]", 2), ("local[3, 2]", 3), ("local", 1), ("local-cluster[2,1,1024]", 2),
    ("local-cluster[3, 2, 512]", 6), ("spark://host:7077", 4), ("yarn", 4)])
def test_shuffle_partitions_default_to_the_cores(master, partitions) -> None:
    """A state store per partition commits every micro-batch: as many as the cores."""
    assert default_partitions(master) == partitions


def test_an_unknown_state_or_commit_window_is_refused_before_spark_starts() -> None:
    for options, message in ((dict(state="rocks"),
                              "unknown state 'rocks'; choose one of ('keyed', 'shards')"),
                             (dict(commit_window=-1), "commit_window must be 0 to 60")):
        with pytest.raises(upkeep.UnsupportedError, match=re.escape(message)):
            upkeep.connect(engine="spark", **options)


def test_the_shared_session_has_room_for_its_compiled_code(spark) -> None:
    """The suite's JVMs run the client compiler alone (tests/conftest.py), whose default
    code cache (48 MB) filled after ten minutes of the shared session's queries: the JIT
    stopped and a query failed with "Out of space in CodeCache for adapters"."""
    jvm = spark.sparkContext._jvm
    pools = jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans()
    code_cache = sum(pool.getUsage().getMax() for pool in pools
                     if "code" in pool.getName().lower())
    assert code_cache >= 256 * 1024 * 1024


def test_an_idle_query_polls_every_fifty_milliseconds_unless_the_user_chose(spark) -> None:
    """Spark's default polling delay (10 ms) kept a quarter to half a core busy per idle
    connection (docs/spark.md): upkeep's sessions poll every 50 ms; a delay the user set
    stays."""
    from upkeep.spark.session import POLLING_DELAY, configure

    assert spark.conf.get(POLLING_DELAY) == "50ms"
    try:
        spark.conf.set(POLLING_DELAY, "2s")
        configure(spark)
        assert spark.conf.get(POLLING_DELAY) == "2s"
        spark.conf.unset(POLLING_DELAY)  # Spark's default again
        configure(spark)
        assert spark.conf.get(POLLING_DELAY) == "50ms"
    finally:
        spark.conf.set(POLLING_DELAY, "50ms")


def test_bulk_load_then_changes(spark, tmp_path) -> None:
    rnd = random.Random(1)
    local, remote = both(spark, tmp_path)
    cust, ords = customers(40), orders(rnd, 0, 3000, 40)
    path = tmp_path / "orders.parquet"
    pq.write_table(pa.table({"ok": [r[0] for r in ords], "ck": [r[1] for r in ords],
                             "day": [r[2] for r in ords],
                             "price": pa.array([r[3] for r in ords], pa.decimal128(12, 2))}), path)
    remote.load("orders", str(path))
    with pytest.raises(upkeep.SchemaError, match="takes a Spark DataFrame"):
        remote.load("customers", cust)  # a list of tuples: db.insert's, not a load's
    # an Arrow table (and a pandas frame) become a Spark DataFrame on the driver: they
    # were a raw AttributeError
    remote.load("customers", pa.table({
        "ck": pa.array([c[0] for c in cust], pa.int32()), "segment": [c[1] for c in cust],
        "nation": pa.array([c[2] for c in cust], pa.int32())}))
    local.insert("orders", ords)
    local.insert("customers", cust)
    assert_same(local, remote)
    for step in range(3):
        gone = rnd.sample(ords, 50)
        new = orders(rnd, 10_000 + 100 * step, 60, 40)
        for db in (local, remote):
            with db.transaction():
                db.delete("orders", gone)
                db.insert("orders", new)
        ords = [o for o in ords if o not in gone] + new
        assert_same(local, remote)
    with pytest.raises(upkeep.UnsupportedError, match="before the first change"):
        remote.load("orders", str(path))
    remote.close()


def test_engines_stay_warm_and_survive_a_restart(spark, tmp_path) -> None:
    """Shard servers (``state="shards"``) keep their engines between micro-batches."""
    rnd = random.Random(2)
    local, remote = both(spark, tmp_path, state="shards")
    for db in (local, remote):
        db.insert("customers", customers(20))
    before = server_stats(spark)
    for step in range(4):
        batch = orders(rnd, 100 * step, 30, 20)
        for db in (local, remote):
            db.insert("orders", batch)
    after = server_stats(spark)
    assert after["applies"] - before["applies"] >= 4
    assert after["loads"] == before["loads"], "a warm micro-batch rebuilt a shard engine"
    assert_same(local, remote)
    remote.stop()  # the next change restarts the query from its checkpoint
    batch = orders(rnd, 1000, 30, 20)
    for db in (local, remote):
        db.insert("orders", batch)
    assert_same(local, remote)
    remote.close()


def test_statements_the_driver_cannot_run(spark, tmp_path) -> None:
    _, remote = both(spark, tmp_path)
    files = len(list(remote.changes.iterdir()))
    assert remote.insert("orders", []) == 0
    assert len(list(remote.changes.iterdir())) == files  # no empty micro-batch
    remote.execute("INSERT INTO customers VALUES (1, 'AUTO', 2), (2, NULL, 1)")
    assert sorted(remote.view("joined").rows()) == []
    remote.execute("INSERT INTO orders VALUES (7, 1, DATE '2024-03-01', 2.50)")
    assert remote.view("joined").rows() == [(7, "AUTO")]
    # read from the tables' keyed state by a Spark job (the driver holds no table)
    assert remote.execute("UPDATE orders SET price = 3.00 WHERE ok = 7").rowcount == 1
    with pytest.raises(upkeep.UnsupportedError,
                       match="EXPLAIN statements are not supported on the spark engine: "
                             "use db.explain"):
        remote.execute("EXPLAIN SELECT * FROM joined")
    with pytest.raises(upkeep.SchemaError):
        remote.insert("orders", [("x", 1, None, None)])
    with pytest.raises(upkeep.ParseError):
        remote.execute("CREATE VIEW broken AS SELEC 1")
    assert "spark: Spark keyed state" in remote.explain("joined")  # the default
    remote.close()
    for change in (lambda: remote.insert("orders", [(8, 1, None, None)]),
                   lambda: remote.execute("CREATE TABLE later (a INTEGER)"),
                   lambda: remote.transaction().__enter__()):
        with pytest.raises(upkeep.StorageError, match="closed"):  # as the local engine
            change()
    assert remote.view("joined").rows() == [(7, "AUTO")]  # what it holds stays readable


def test_a_table_declared_again_must_be_declared_as_before(spark, tmp_path) -> None:
    """Change files hold rows by position: after a reopen, a table declared with its
    columns in another order (or of other types) is refused, not read under the wrong
    names; declared the same way, or dropped first, it is accepted."""
    first = upkeep.connect(engine="spark", spark=spark, shards=2, database=tmp_path / "d")
    first.execute("CREATE TABLE t (a INTEGER, b INTEGER NOT NULL)")
    first.close()
    again = upkeep.connect(engine="spark", spark=spark, shards=2, database=tmp_path / "d")
    for other in ("(b INTEGER NOT NULL, a INTEGER)", "(a INTEGER, b VARCHAR NOT NULL)",
                  "(a INTEGER, b INTEGER)", "(a INTEGER PRIMARY KEY, b INTEGER NOT NULL)"):
        with pytest.raises(upkeep.SchemaError, match="declare it the same way"):
            again.execute(f"CREATE TABLE t {other}")
        assert again.tables() == []
    again.execute("CREATE TABLE t (a INTEGER, b INTEGER NOT NULL)")
    again.execute("DROP TABLE t")
    again.execute("CREATE TABLE t (b VARCHAR, a INTEGER)")  # a new table now
    assert [(n, t.sql()) for n, t in again.schema_of("t")] == [("b", "VARCHAR"), ("a", "INTEGER")]
    again.close()


def test_reopening_keeps_bulk_loaded_rows(spark, tmp_path) -> None:
    """Rows loaded with ``db.load`` are part of the database: a connection opened again on
    the directory sees them with every change made after them (issue: it saw only the
    changes)."""
    rnd = random.Random(5)
    cust, ords = customers(30), orders(rnd, 0, 1000, 30)
    local, remote = both(spark, tmp_path)
    remote.load("orders", spark.createDataFrame(
        ords, "ok long, ck int, day date, price decimal(12,2)"))
    remote.load("customers", spark.createDataFrame(cust, "ck int, segment string, nation int"))
    extra = orders(rnd, 5000, 1, 30)
    local.insert("orders", ords + extra)
    local.insert("customers", cust)
    remote.insert("orders", extra)
    assert_same(local, remote)
    remote.stop()
    again = upkeep.connect(engine="spark", spark=spark, shards=2, database=tmp_path / "spark")
    again.execute(TABLES)
    for name, sql in VIEWS.items():
        again.create_view(name, sql)
    assert_same(local, again)
    more = orders(rnd, 6000, 20, 30)
    for db in (local, again):
        db.insert("orders", more)
    assert_same(local, again)
    with pytest.raises(upkeep.UnsupportedError, match="before the first change"):
        again.load("orders", spark.createDataFrame(more, "ok long, ck int, day date, "
                                                         "price decimal(12,2)"))
    again.close()


def test_subscribers_are_not_sent_a_replay(spark, tmp_path) -> None:
    """A new view restarts the query, which replays every change file to build it; a
    subscriber of an existing view must receive only what changed, not its whole contents
    again (measured: after a second CREATE VIEW a subscriber held every row twice)."""
    db = upkeep.connect(engine="spark", spark=spark, shards=2, database=tmp_path / "db")
    db.execute("CREATE TABLE t (a INTEGER, b INTEGER)")
    db.create_view("v", "SELECT a, b FROM t WHERE b > 0")
    received: Counter = Counter()
    db.view("v").subscribe(lambda changes: received.update(dict(changes)))
    db.insert("t", [(1, 1), (2, 2), (3, -1)])
    db.create_view("w", "SELECT a FROM t")
    db.insert("t", [(4, 4)])
    assert +received == Counter(db.view("v").rows()) == Counter({(1, 1): 1, (2, 2): 1, (4, 4): 1})
    assert sorted(db.view("w").rows()) == [(1,), (2,), (3,), (4,)]
    db.close()


def test_a_journal_that_fails_takes_its_batch_back(spark, tmp_path) -> None:
    """The journal (the service's feed) is called before a commit returns; if it raises,
    the batch is taken back whole: the commit raises, the view and the change files are as
    before, subscribers hear nothing, and the next batch commits."""
    db = upkeep.connect(engine="spark", spark=spark, shards=2, database=tmp_path / "db")
    db.execute("CREATE TABLE t (a INTEGER, b INTEGER)")
    db.create_view("v", "SELECT a, b FROM t WHERE b > 0")
    db.insert("t", [(1, 1)])
    received: Counter = Counter()
    db.view("v").subscribe(lambda changes: received.update(dict(changes)))
    journaled = []

    def journal(batch, changed):
        if any(row == (2, 2) for row, _ in changed.get("v", [])):
            raise OSError("disk full")
        journaled.append((batch, changed))
        return lambda: None

    db.set_journal(journal)
    def change_files() -> list[str]:  # (a restart adds a tick file of its own)
        return sorted(p.name for p in db.changes.glob("*.jsonl"))

    batches, files = db.batches, change_files()
    with pytest.raises(OSError, match="disk full"):
        db.insert("t", [(2, 2)])
    assert db.batches == batches
    assert change_files() == files
    assert db.view("v").rows() == [(1, 1)] and not received
    db.insert("t", [(3, 3)])
    assert sorted(db.view("v").rows()) == [(1, 1), (3, 3)]
    assert +received == Counter({(3, 3): 1})
    assert journaled == [(db.batches, {"v": [((3, 3), 1)]})]
    db.close()


def test_a_database_directory_with_glob_characters_is_refused(spark, tmp_path) -> None:
    """Spark reads a database's change files through a Hadoop glob pattern: under ``db[1]``
    a reopened database counted a change three times (measured), so such a directory is
    refused by name, and nothing is created."""
    path = tmp_path / "db{a,b}[1]"
    with pytest.raises(upkeep.UnsupportedError, match=r"holding '\{\}\[\]'.*db\{a,b\}\[1\]"):
        upkeep.connect(engine="spark", spark=spark, shards=2, database=path)
    assert not path.exists()


def test_reads_after_close_start_no_query(spark, tmp_path) -> None:
    """A closed database's views stay readable (as copies) without a streaming query: one
    a read restarted ran on after close, listing the change directory every few ms; nor
    does a read expire rows.  Views created after the last batch were never built: a read
    says so."""
    now = [0.0]
    db = upkeep.connect(engine="spark", spark=spark, shards=2, database=tmp_path / "db",
                        clock=lambda: now[0])
    db.execute("CREATE TABLE t (a INTEGER) WITH (ttl_seconds = 10)")
    db.create_view("v", "SELECT a FROM t")
    db.insert("t", [(1,), (2,)])
    db.close()
    active = {q.id for q in spark.streams.active}
    now[0] = 60.0  # the rows are due, but a closed database commits nothing
    assert sorted(db.execute("SELECT a FROM v").fetchall()) == [(1,), (2,)]
    assert sorted(db.view("v").rows()) == [(1,), (2,)]
    assert {q.id for q in spark.streams.active} == active
    late = upkeep.connect(engine="spark", spark=spark, shards=2, database=tmp_path / "late")
    late.execute("CREATE TABLE t (a INTEGER)")
    late.create_view("w", "SELECT a FROM t")
    late.close()
    with pytest.raises(upkeep.StorageError, match=r"closed before its views \['w'\]"):
        late.view("w").rows()
    assert {q.id for q in spark.streams.active} == active


def test_the_query_lists_only_the_change_files_it_has_yet_to_read(spark, tmp_path) -> None:
    """Between batches the streaming query polls its source directory, listing it every
    few ms: the change log itself grows by a file per batch, so the query reads an inbox
    of links to the files not yet processed, empty between batches.  A rejected batch
    leaves no file in either; a reopened database replays the whole log."""
    db = upkeep.connect(engine="spark", spark=spark, shards=2, database=tmp_path / "db")
    db.execute("CREATE TABLE t (a INTEGER)")
    db.create_view("v", "SELECT COUNT(*) AS n, SUM(a) AS s FROM t")
    for i in range(3):
        db.insert("t", [(i,)])
    with pytest.raises(upkeep.ConstraintError):
        db.delete("t", [(99,)])  # not there: the micro-batch is rejected
    db.insert("t", [(10,)])
    assert len(list(db.changes.glob("changes-*.jsonl"))) == 4
    assert list(db.inbox.iterdir()) == []
    db.close()
    again = upkeep.connect(engine="spark", spark=spark, shards=2, database=tmp_path / "db")
    again.execute("CREATE TABLE t (a INTEGER)")
    again.create_view("v", "SELECT COUNT(*) AS n, SUM(a) AS s FROM t")
    assert again.view("v").rows() == [(4, 13)]
    again.close()


def test_a_query_stopped_from_outside_restarts_and_misses_nothing(spark, tmp_path) -> None:
    """A connection's streaming query stopped through ``spark.streams`` (not by upkeep):
    the next change restarts it from its checkpoint, and the change is in the view."""
    db = upkeep.connect(engine="spark", spark=spark, shards=2, database=tmp_path / "db")
    db.execute("CREATE TABLE t (a INTEGER)")
    db.create_view("v", "SELECT COUNT(*) AS n, SUM(a) AS s FROM t")
    db.insert("t", [(1,)])
    mine = [q for q in spark.streams.active if q.id == db._query.id]
    assert len(mine) == 1
    mine[0].stop()
    db.insert("t", [(2,)])
    assert db.view("v").rows() == [(2, 3)]
    db.insert("t", [(3,)])
    assert db.view("v").rows() == [(3, 6)]
    db.close()


def test_a_change_file_the_query_cannot_be_handed_is_not_kept(spark, tmp_path) -> None:
    """A change file is written to the log, then linked into the query's inbox: if the link
    fails, the change fails (a StorageError) and the log drops the file, so that no later
    reopening replays a change its writer was told had failed."""
    def connect():
        db = upkeep.connect(engine="spark", spark=spark, shards=2, database=tmp_path / "db")
        db.execute("CREATE TABLE t (a INTEGER)")
        db.create_view("v", "SELECT COUNT(*) AS n, SUM(a) AS s FROM t")
        return db

    db = connect()
    db.insert("t", [(1,)])
    shutil.rmtree(db.inbox)
    db.inbox.write_text("")  # no directory to link into
    with pytest.raises(upkeep.StorageError, match="cannot write the change file"):
        db.insert("t", [(2,)])
    db.inbox.unlink()
    db.inbox.mkdir()
    assert db.view("v").rows() == [(1, 1)]
    db.close()
    again = connect()
    assert again.view("v").rows() == [(1, 1)]
    again.close()


def test_a_change_file_is_fsynced_with_its_directory_before_it_is_handed_on(tmp_path,
                                                                           monkeypatch):
    """A commit's change file is the record of what it committed: its bytes and its name
    are fsynced before the query is handed it."""
    import upkeep.spark.connection as spark_connection

    synced: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)  # the module both the file and the directory use
    path = spark_connection._write_durably(tmp_path / "changes-00000001.jsonl", "line\n")
    assert path.read_text() == "line\n"
    assert synced == [str(tmp_path / ".changes-00000001.jsonl.tmp"), str(tmp_path)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["changes-00000001.jsonl"]

    def refused(errno_: int):
        def sync(path) -> None:
            raise OSError(errno_, os.strerror(errno_))
        return sync

    # a directory fsync that fails leaves no file (the commit fails, a reopening does not
    # replay it); a file system that cannot fsync directories (EINVAL) keeps it
    monkeypatch.setattr(spark_connection, "sync_directory", refused(errno.EIO))
    with pytest.raises(OSError):
        spark_connection._write_durably(tmp_path / "changes-00000002.jsonl", "x\n")
    monkeypatch.setattr(spark_connection, "sync_directory", refused(errno.EINVAL))
    spark_connection._write_durably(tmp_path / "changes-00000003.jsonl", "y\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["changes-00000001.jsonl",
                                                          "changes-00000003.jsonl"]


def test_transaction_metadata_commits_with_its_change_file(spark, tmp_path) -> None:
    """A transaction's metadata is the first line of its change file: it commits with the
    batch and survives a reopen (the newest change file carrying some); metadata JSON
    cannot hold is a SchemaError, and nothing of that transaction commits."""
    db = upkeep.connect(engine="spark", spark=spark, shards=2, database=tmp_path / "db")
    db.execute("CREATE TABLE t (a INTEGER)")
    db.create_view("v", "SELECT a FROM t")
    seen: list = []  # what a subscriber reads of the metadata as its batch arrives
    db.view("v").subscribe(lambda changes: seen.append(db.metadata()))
    with db.transaction(metadata={"offset": 3, "topic": "t"}):
        db.insert("t", [(1,)])
    assert seen == [{"offset": 3, "topic": "t"}]
    db.insert("t", [(2,)])
    with pytest.raises(upkeep.SchemaError, match="JSON"):
        with db.transaction(metadata={"at": object()}):
            db.insert("t", [(5,)])
    assert db.metadata() == {"offset": 3, "topic": "t"}
    db.close()
    # the views' copies stay readable after close, by SQL too
    assert sorted(db.execute("SELECT a FROM v").fetchall()) == [(1,), (2,)]
    again = upkeep.connect(engine="spark", spark=spark, shards=2, database=tmp_path / "db")
    again.execute("CREATE TABLE t (a INTEGER)")
    again.create_view("v", "SELECT a FROM t")
    assert again.metadata() == {"offset": 3, "topic": "t"}
    assert sorted(again.view("v").rows()) == [(1,), (2,)]
    again.close()
