"""The ``upkeep`` command: explain, run, configuration errors, --engine, following, signals."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest
from rich.console import Console
from test_pipeline_support import (
    VIEW_KINDS,
    WRITERS,
    Stream,
    expected_views,
    model_of,
    read_all_sinks,
    write_jsonl,
    write_pipeline,
)

from upkeep.cli import main
from upkeep.io.errors import PipelineError
from upkeep.pipeline import ConfigError, PipelineRunner, load_config


def test_explain_prints_every_view_with_its_strategy_and_sinks(tmp_path, capsys):
    path = write_pipeline(tmp_path)
    assert main(["explain", str(path)]) == 0
    out = capsys.readouterr().out
    for view in VIEW_KINDS:
        assert f"view {view}: strategy" in out
    assert "join tree" in out and "GJT" in out
    assert "sinks: duckdb" in out and "terminal" in out


def test_explain_one_view_and_an_unknown_view(tmp_path, capsys):
    path = write_pipeline(tmp_path)
    assert main(["explain", str(path), "revenue"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("view revenue: strategy") and "view big_orders" not in out
    assert main(["explain", str(path), "nope"]) == 1
    err = capsys.readouterr().err
    assert "no view named 'nope'" in err and "revenue, big_orders, order_count" in err


@pytest.mark.parametrize(("text", "message"), [
    ('tables = ["tables.sql"]\n', "missing table [source]"),
    ('[source]\npath = "changes"\n', "missing key 'tables'"),
    ('tables = ["nope.sql"]\n[source]\npath = "c"\n', "key 'tables': SQL file 'nope.sql' does not exist"),
    ('tables = "tables.sql"\nsource = 3\n', "key 'source' must be a table"),
    ('tables = "tables.sql"\n[source]\npath = "c"\nfolow = true\n', "unknown key 'source.folow'"),
    ('tables = "tables.sql"\ncolour = 1\n[source]\npath = "c"\n', "unknown key 'colour'"),
    ('tables = "tables.sql"\n[source]\npath = "c"\npoll_interval = "1s"\n',
     "key 'source.poll_interval' must be a number, got '1s'"),
    ('tables = "tables.sql"\n[source]\npath = "c"\n[batch]\nrows_per_batch = 0\n',
     "key 'batch.rows_per_batch' must be at least 1"),
    ('tables = "tables.sql"\non_error = "ignore"\n[source]\npath = "c"\n',
     "key 'on_error' must be one of stop, skip, dead-letter, got 'ignore'"),
    ('tables = "tables.sql"\nengine = "spark"\n[source]\npath = "c"\n[spark]\nstate = "rocks"\n',
     "key 'spark.state' must be one of keyed, shards, got 'rocks'"),
    ('tables = "tables.sql"\n[source]\npath = "c"\n[[sinks]]\nview = "v"\ntype = "tabel"\n',
     "[[sinks]] #1 (view v): unknown sink type 'tabel' in key 'type'; expected one of duckdb, "
     "jsonl, parquet, parquet-deltas, sqlite, terminal"),
    ('tables = "tables.sql"\n[source]\npath = "c"\n[[sinks]]\ntype = "jsonl"\n',
     "[[sinks]] #1: missing key 'view'"),
    ('tables = "tables.sql"\n[source]\npath = "c"\n[[sinks]]\nview = "v"\ntype = "jsonl"\n',
     "[[sinks]] #1 (view v): missing key 'path' for a jsonl sink"),
    ('tables = "tables.sql"\n[source]\npath = "c"\n[[sinks]]\nview = "v"\ntype = "terminal"\n'
     'path = "x"\n', "[[sinks]] #1 (view v): unknown key 'path'"),
    ('tables = "tables.sql"\n[source]\npath = "c"\n[[sinks]]\nview = "v"\ntype = "duckdb"\n'
     'path = "a.db"\n[[sinks]]\nview = "w"\ntype = "duckdb"\npath = "a.db"\ntable = "v"\n',
     "[[sinks]] #2 (view w) writes to the same duckdb target as [[sinks]] #1 (view v)"),
    # one file, two writers: also what lets a Spark micro-batch's sinks write concurrently
    ('tables = "tables.sql"\n[source]\npath = "c"\n[[sinks]]\nview = "v"\ntype = "jsonl"\n'
     'path = "o/x"\n[[sinks]]\nview = "w"\ntype = "parquet-deltas"\npath = "o/../o/x"\n',
     "[[sinks]] #2 (view w) writes to the same parquet-deltas target as [[sinks]] #1 (view v)"),
    # a URI is one target, as a path is, however it is spelled
    ('tables = "tables.sql"\n[source]\npath = "c"\n[[sinks]]\nview = "v"\ntype = "jsonl"\n'
     'path = "hdfs://nn/o/x"\n[[sinks]]\nview = "w"\ntype = "parquet-deltas"\n'
     'path = "HDFS://nn//o/x/"\n',
     "[[sinks]] #2 (view w) writes to the same parquet-deltas target as [[sinks]] #1 (view v)"),
    # one file, two formats: the sqlite sink overwrote the jsonl lines
    ('tables = "tables.sql"\n[source]\npath = "c"\n[[sinks]]\nview = "v"\ntype = "sqlite"\n'
     'path = "o/v.db"\n[[sinks]]\nview = "w"\ntype = "jsonl"\npath = "o/v.db"\n',
     "[[sinks]] #2 (view w) writes to the file of the sqlite sink [[sinks]] #1 (view v)"),
    ('tables = "tables.sql"\n[source]\npath = "c"\n[[sinks]]\nview = "v"\ntype = "duckdb"\n'
     'path = "o/v.db"\n[[sinks]]\nview = "w"\ntype = "sqlite"\npath = "o/v.db"\n',
     "[[sinks]] #2 (view w) writes to the file of the duckdb sink [[sinks]] #1 (view v)"),
    ('tables = [\n', "invalid TOML"),
    # TOML's inf and nan are numbers: a timer cannot wait for them
    ('tables = "tables.sql"\n[source]\npath = "c"\npoll_interval = inf\n',
     "key 'source.poll_interval' must be a number of seconds above 0"),
    ('tables = "tables.sql"\n[source]\npath = "c"\npoll_interval = nan\n',
     "key 'source.poll_interval' must be a number of seconds above 0"),
    ('tables = "tables.sql"\n[source]\npath = "c"\n[batch]\ncommit_interval = nan\n',
     "key 'batch.commit_interval' must be a number of seconds above 0"),
    ('tables = []\n[source]\npath = "c"\n', "key 'tables' names no SQL file"),
    ('tables = "tables.sql"\ndead_letter = "o/x"\n[source]\npath = "c"\n[[sinks]]\n'
     'view = "v"\ntype = "jsonl"\npath = "o/x"\n',
     "[[sinks]] #1 (view v) writes to the dead-letter file x"),
])
def test_configuration_errors_name_the_file_and_the_key(tmp_path, capsys, text, message):
    (tmp_path / "tables.sql").write_text("CREATE TABLE t (a INTEGER);\n")
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}: ")
    assert message in str(info.value)
    assert main(["run", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"upkeep: error: {path}: " in err and message in err.replace("\n", "")


def test_paths_are_local_or_uris_the_local_engine_refuses(tmp_path, capsys, monkeypatch):
    """A sink's ``path``, ``[source] path`` and ``state_dir`` are relative to the pipeline
    file, or ``file://`` URIs, or any other URI: a Hadoop file system, which only the spark
    engine reads and writes; the local engine refuses each at start, naming it, before
    reading a record or writing a file."""
    path = write_pipeline(tmp_path, state_dir="state",
                          sinks={"revenue": ["jsonl"], "big_orders": ["jsonl"],
                                 "order_count": ["parquet-deltas"]})
    text = path.read_text().replace('path = "out/big_orders.jsonl"',
                                    f'path = "file://{tmp_path}/elsewhere/b.jsonl"')
    path.write_text(text.replace('path = "out/order_count.deltas"',
                                 'path = "hdfs://namenode:8020/out/count"'))
    config = load_config(path)
    assert [s.options["path"] for s in config.sinks] == [
        tmp_path / "out" / "revenue.jsonl", tmp_path / "elsewhere" / "b.jsonl",
        "hdfs://namenode:8020/out/count"]
    assert (config.source.path, config.state_dir) == (tmp_path / "changes",
                                                      str(tmp_path / "state"))
    (tmp_path / "changes").mkdir()
    write_jsonl(tmp_path / "changes", Stream(seed=1).generate(20).records, files=1)
    assert main(["run", str(path)]) == 1
    err = capsys.readouterr().err.replace("\n", "")
    assert ("(view order_count): hdfs://namenode:8020/out/count is a URI: the local engine "
            "keeps its files on local paths") in err
    for key, uri in (("state_dir", "s3a://bucket/state"),
                     ("source.path", "hdfs://namenode/changes")):
        other = dataclasses.replace(config, sinks=config.sinks[:1])
        other = (dataclasses.replace(other, state_dir=uri) if key == "state_dir" else
                 dataclasses.replace(other, source=dataclasses.replace(other.source,
                                                                       path=uri)))
        with pytest.raises(PipelineError, match=f"{key}: {uri} is a URI: the local engine"):
            PipelineRunner(other).run()
    assert not (tmp_path / "out").exists() and not (tmp_path / "state").exists()
    # served while it runs: refused before its database is opened (it was made as a local
    # directory named after the URI)
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(path), "--serve", str(tmp_path / "tokens.json"),
                 "--state-dir", "hdfs://namenode/upkeep/shop"]) == 1
    assert "state_dir: hdfs://namenode/upkeep/shop is a URI" in capsys.readouterr().err
    assert not (tmp_path / "hdfs:").exists()


@pytest.mark.parametrize(("sql", "message"), [
    ("CREATE TABLE t (a INTEGER);\nCREATE TABLE t (a INTEGER);", "tables.sql, line 2: t is "
                                                                "defined twice (first at tables.sql, line 1)"),
    ("CREATE TABLE t (a INTEGER);\n\nSELECT 1;", "tables.sql, line 3: expected CREATE TABLE "
                                                "statements only"),
    ("CREATE TABLE t (a INTEGER);\nCREATE TABLE u (a BLOB);", "tables.sql, line 2: column a of table u: column type BLOB"),
    # the parser's own message, not "expected CREATE TABLE" nor sqlglot's internals
    ("CREATE TABLE t (a INTEGER);\nCREATE TABEL u (a INTEGER);",
     'tables.sql, line 2: cannot parse SQL: syntax error at or near "TABEL"'),
    ("CREATE TABLE t (a INTEGER CHECK (;", 'tables.sql, line 1: cannot parse SQL: syntax error'),
    ("CREATE TABLE t (a TIMESTAMPTZ);", "column type TIMESTAMPTZ is not supported"),
    # a string left open: sqlglot's tokenizer says no line, the parser does
    ("CREATE TABLE t (a INTEGER);\n\nCREATE TABLE u (s VARCHAR CHECK (s = 'x));",
     "tables.sql, line 3: cannot parse SQL: unterminated string literal"),
])
def test_sql_file_errors_name_the_file_and_line(tmp_path, capsys, sql, message):
    (tmp_path / "tables.sql").write_text(sql)
    (tmp_path / "c").mkdir()
    path = tmp_path / "p.toml"
    path.write_text('state_dir = ":memory:"\ntables = "tables.sql"\n[source]\npath = "c"\n')
    assert main(["run", str(path)]) == 1
    assert message in capsys.readouterr().err


def test_files_that_are_not_utf8_or_hold_nothing_are_named_without_a_traceback(tmp_path,
                                                                              capsys):
    (tmp_path / "binary.toml").write_bytes(b"\x00\xff\xfe")
    (tmp_path / "binary.sql").write_bytes(b"\xff\xfe")
    (tmp_path / "tables.sql").write_text("CREATE TABLE t (a INTEGER PRIMARY KEY);\n")
    (tmp_path / "empty.sql").write_text("\n")
    (tmp_path / "c").mkdir()
    (tmp_path / "p.toml").write_text('state_dir = ":memory:"\ntables = "binary.sql"\n'
                                     '[source]\npath = "c"\n')
    for args, message in [
        (["run", str(tmp_path / "binary.toml")], "binary.toml: not UTF-8 text (byte 1)"),
        (["run", str(tmp_path / "p.toml")], "binary.sql is not UTF-8 text (byte 0)"),
        (["plan", str(tmp_path / "binary.sql"), "--tables", str(tmp_path / "tables.sql")],
         "binary.sql is not UTF-8 text"),
        (["plan", str(tmp_path / "empty.sql"), "--tables", str(tmp_path / "tables.sql")],
         "empty.sql holds no subscriptions"),
    ]:
        assert main(args) == 1
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, err


@pytest.mark.parametrize("port", ["99999999", "-5", "http"])
def test_a_port_out_of_range_is_a_usage_error(tmp_path, capsys, port):
    with pytest.raises(SystemExit) as exit_:
        main(["serve", str(tmp_path / "db"), "--tokens", "t.json", "--port", port])
    assert exit_.value.code == 2 and "is not a port (0-65535)" in capsys.readouterr().err


def test_a_sink_for_an_unknown_view(tmp_path, capsys):
    path = write_pipeline(tmp_path, sinks={"revenu": ["jsonl"]})
    (tmp_path / "changes").mkdir()
    assert main(["run", str(path)]) == 1
    assert "no view named 'revenu'" in capsys.readouterr().err


def test_a_dead_letter_option_naming_a_sinks_file_is_refused(tmp_path, capsys, monkeypatch):
    """The pipeline file's ``dead_letter`` naming a sink's file was refused, the same path
    given as ``--dead-letter`` was not: rejected records went into the sink's rows."""
    path = write_pipeline(tmp_path, sinks={"revenue": ["jsonl"]})
    (tmp_path / "changes").mkdir()
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(path), "--on-error", "dead-letter",
                 "--dead-letter", "out/revenue.jsonl"]) == 1
    err = capsys.readouterr().err
    assert "writes to the dead-letter file revenue.jsonl (--dead-letter)" in err
    assert not (tmp_path / "out" / "revenue.jsonl").exists()


def test_run_from_the_command_line_with_overrides(tmp_path, capsys):
    stream = Stream(seed=21).generate(200)
    WRITERS["parquet"](tmp_path / "changes", stream.records, files=2)
    path = write_pipeline(tmp_path, state_dir="state-from-file")
    status = main(["run", str(path), "--state-dir", str(tmp_path / "state"), "--progress", "plain",
                   "--on-error", "skip"])
    assert status == 0
    out = capsys.readouterr().out
    assert f"done: {len(stream.records):,} records applied, 0 rejected" in out
    assert (tmp_path / "state").is_dir() and not (tmp_path / "state-from-file").exists()
    expected = expected_views(stream.model)
    for view in VIEW_KINDS:
        for kind, rows in read_all_sinks(tmp_path / "out", view).items():
            assert rows == expected[view], f"{kind} sink of {view}"


def test_follow_picks_up_appended_lines_and_new_files_until_stopped(tmp_path):
    stream = Stream(seed=22).generate(300)
    records = [json.dumps(r) for r in stream.records]
    changes = tmp_path / "changes"
    write_jsonl(changes, records[:100], files=1)
    path = write_pipeline(tmp_path, state_dir="state", rows_per_batch=1000,
                          sinks={"revenue": ["duckdb"], "big_orders": ["jsonl"]})
    config = load_config(path).replace(follow=True)
    config = config.replace(source=config.source.__class__(
        path=config.source.path, follow=True, poll_interval=0.05))
    stop = threading.Event()
    runner = PipelineRunner(config, stop=stop, progress="none",
                            console=Console(file=io.StringIO()))
    thread = threading.Thread(target=runner.run)
    thread.start()

    def wait_for(n: int) -> None:
        deadline = time.monotonic() + 20
        while runner.stats.applied < n or not runner.stats.caught_up:
            assert time.monotonic() < deadline, f"only {runner.stats.applied} of {n} applied"
            time.sleep(0.02)

    try:
        wait_for(100)
        first = changes / "changes-001.jsonl"
        with first.open("a") as f:  # appended lines; the last one is torn for now
            f.write("\n".join(records[100:150]) + "\n" + records[150][:20])
        wait_for(150)
        time.sleep(0.2)
        assert runner.stats.applied == 150  # the torn line waits for its end
        with first.open("a") as f:
            f.write(records[150][20:] + "\n")
        wait_for(151)
        write_jsonl(changes, records[151:], files=2, first=2)  # new files
        wait_for(len(records))
    finally:
        stop.set()
        thread.join(timeout=20)
    assert not thread.is_alive()
    assert runner.stats.stopped and runner.stats.applied == len(records)
    expected = expected_views(stream.model)
    for view in ("revenue", "big_orders"):
        for kind, rows in read_all_sinks(tmp_path / "out", view).items():
            assert rows == expected[view], f"{kind} sink of {view}"


def test_a_write_beside_a_following_pipeline_reaches_its_sinks_at_once(tmp_path):
    """Another writer of the pipeline's database (``upkeep run --serve``: ``POST /sql``,
    taking turns on the server's lock) changes a view while the source is idle: the
    change reaches the sinks at once, not with the next record, under a batch id of its
    own, so that a run that starts again from the database neither repeats nor loses it."""
    from upkeep.pipeline.runner import open_database

    stream = Stream(seed=25).generate(80)
    write_jsonl(tmp_path / "changes", [json.dumps(r) for r in stream.records], files=1)
    sinks = {"order_count": ["jsonl", "parquet-deltas"], "big_orders": ["sqlite"]}
    path = write_pipeline(tmp_path, state_dir="state", sinks=sinks)
    config = load_config(path)
    config = config.replace(follow=True, source=config.source.__class__(
        path=config.source.path, follow=True, poll_interval=0.05))
    db, lock, stop = open_database(config), threading.RLock(), threading.Event()
    runner = PipelineRunner(config, db=db, lock=lock, stop=stop, progress="none",
                            console=Console(file=io.StringIO()))
    thread = threading.Thread(target=runner.run)
    thread.start()
    model = {t: Counter(rows) for t, rows in stream.model.items()}

    def sinks_hold_the_model() -> bool:
        expected = expected_views(model)
        return all(read_all_sinks(tmp_path / "out", view).get(kind) == expected[view]
                   for view, kinds in sinks.items() for kind in kinds)

    def wait_until(condition, what: str) -> None:
        deadline = time.monotonic() + 30
        while not condition():
            assert thread.is_alive() and time.monotonic() < deadline, what
            time.sleep(0.05)

    try:
        wait_until(lambda: runner.stats.caught_up and sinks_hold_the_model(), "caught up")
        batches = runner.stats.batch
        with lock:
            db.execute("INSERT INTO orders VALUES (9001, 1, DATE '2024-01-02', 3.50, 7, "
                       "'beside')")
        model["orders"][(9001, 1, date(2024, 1, 2), Decimal("3.50"), 7, "beside")] += 1
        wait_until(sinks_hold_the_model, "the write did not reach the sinks")
        assert runner.stats.batch == batches + 1
    finally:
        stop.set()
        thread.join(timeout=30)
        db.close()
    assert not thread.is_alive()
    assert PipelineRunner(config.replace(follow=False, source=config.source.__class__(
        path=config.source.path)), progress="none", console=Console(file=io.StringIO())).run()
    assert sinks_hold_the_model(), "a run after it repeated or lost the write"


def test_sigterm_ends_a_following_run_cleanly(tmp_path):
    stream = Stream(seed=23).generate(120)
    WRITERS["jsonl"](tmp_path / "changes", stream.records, files=2)
    path = write_pipeline(tmp_path, state_dir="state", sinks={"order_count": ["jsonl"]})
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "upkeep.cli", "run", str(path), "--follow", "--progress", "plain"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    sink = tmp_path / "out" / "order_count.jsonl"
    deadline = time.monotonic() + 60
    expected = expected_views(stream.model)["order_count"]
    while not (sink.exists() and read_all_sinks(tmp_path / "out", "order_count").get("jsonl")
               == expected):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the pipeline did not catch up"
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "stopped:" in out and f"{len(stream.records):,} records applied" in out
    assert "Traceback" not in err


def test_a_served_pipeline_feeds_subscribers_while_it_runs(tmp_path):
    """``upkeep run --serve``: the pipeline's database is served while the pipeline
    follows its source; a subscriber's replica equals the customers the records lead to,
    after the first records and after records appended later; SIGTERM ends both."""
    import socket

    from upkeep.client import Client

    stream = Stream(seed=24).generate(200)
    records = [json.dumps(r) for r in stream.records]
    changes = tmp_path / "changes"
    write_jsonl(changes, records[:120], files=1)
    path = write_pipeline(tmp_path, state_dir="state", sinks={"order_count": ["jsonl"]})
    token = "reader-token-0123456789"
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tokens": {token: {"name": "reader", "read": ["customers"]}}}))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "upkeep.cli", "run", str(path), "--follow", "--progress", "none",
         "--serve", str(tokens), "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    query = "SELECT c.ck, c.segment FROM customers c WHERE c.segment = 'AUTO'"

    def expected(lines: list[str]) -> Counter:
        rows = model_of([json.loads(line) for line in lines])["customers"]
        return Counter({(r[0], r[2]): n for r, n in rows.items() if r[2] == "AUTO"})

    def projected(replica) -> Counter:
        return Counter(r[:2] for r in replica.rows.elements())

    try:
        client = Client(f"http://127.0.0.1:{port}", token)
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.communicate()
            try:
                replica = client.replica(query)
                break
            except Exception:  # noqa: BLE001 - not listening yet
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.2)
        for upto in (120, len(records)):
            if upto > 120:
                write_jsonl(changes, records[120:], files=1, first=2)
            want = expected(records[:upto])
            assert want, "the stream has AUTO customers"
            if projected(replica) != want:
                replica.follow(until=lambda r, want=want: projected(r) == want, timeout=60)
            assert projected(replica) == want
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "serving the pipeline's database" in out and "Traceback" not in err


@pytest.mark.parametrize("target", ["/dev/null", "out"])
def test_a_jsonl_sink_on_what_is_not_a_regular_file_is_refused(tmp_path, capsys, target):
    """A jsonl sink reads its file back when it starts: a device (``/dev/full`` is read
    forever) or a directory is refused with the sink named, before anything runs."""
    path = write_pipeline(tmp_path, sinks={})
    (tmp_path / "out").mkdir()
    path.write_text(path.read_text() + f'[[sinks]]\nview = "revenue"\ntype = "jsonl"\n'
                                       f'path = "{target}"\n')
    assert main(["run", str(path), "--progress", "none"]) == 1
    err = capsys.readouterr().err
    assert "jsonl sink" in err and "not a regular file" in err


def test_a_directory_given_as_the_pipeline_file_says_so(tmp_path, capsys):
    assert main(["run", str(tmp_path)]) == 1
    assert "is a directory, not a pipeline file" in capsys.readouterr().err


def test_a_sink_option_at_fault_names_the_pipeline_file(tmp_path, capsys):
    path = write_pipeline(tmp_path, sinks={})
    path.write_text(path.read_text() + '[[sinks]]\nview = "revenue"\ntype = "terminal"\n'
                                       'order_by = "nope"\n')
    assert main(["run", str(path), "--progress", "none"]) == 1
    assert (f"upkeep: error: {path}: [[sinks]] #1 (view revenue): order_by column 'nope'"
            in capsys.readouterr().err.replace("\n", ""))


def test_a_failed_first_run_leaves_no_tables_behind(tmp_path, capsys):
    """A view that fails used to leave the tables created before it, kept as declared:
    the corrected table file was then ignored and the same error came back."""
    (tmp_path / "c").mkdir()
    (tmp_path / "tables.sql").write_text("CREATE TABLE orders (ok INTEGER);")
    (tmp_path / "views.sql").write_text("CREATE VIEW v AS SELECT ok, discount FROM orders;")
    path = tmp_path / "p.toml"
    path.write_text('state_dir = "state"\ntables = "tables.sql"\nviews = "views.sql"\n'
                    '[source]\npath = "c"\n')
    assert main(["run", str(path)]) == 1
    assert "unknown column discount" in capsys.readouterr().err
    (tmp_path / "tables.sql").write_text("CREATE TABLE orders (ok INTEGER, discount INTEGER);")
    assert main(["run", str(path)]) == 0


@pytest.mark.parametrize(("subscriptions", "message"), [
    ("-- only a comment\n", "holds no subscriptions"),
    ("CREATE VIEW a AS SELECT o.ok FROM o o WHERE " + "(" * 3000 + "o.ok > 1" + ")" * 3000
     + ";", "nested too deeply"),
])
def test_plan_input_without_subscriptions_or_too_deep_is_named(tmp_path, capsys,
                                                               subscriptions, message):
    (tmp_path / "t.sql").write_text("CREATE TABLE o (ok INTEGER PRIMARY KEY);")
    (tmp_path / "s.sql").write_text(subscriptions)
    assert main(["plan", str(tmp_path / "s.sql"), "--tables", str(tmp_path / "t.sql")]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_row_argument_with_an_over_long_integer_is_refused_as_json(tmp_path, capsys):
    import upkeep

    db = upkeep.connect(tmp_path / "db")
    db.execute("CREATE TABLE p (k VARCHAR, n INTEGER) WITH (provenance = 'update')")
    db.close()
    assert main(["provenance", str(tmp_path / "db"), "p", '["a", ' + "9" * 5000 + "]"]) == 1
    assert "the row must be a JSON array" in capsys.readouterr().err


def test_python_dash_m_upkeep_is_the_upkeep_command(tmp_path):
    """``python -m upkeep`` runs the CLI and returns its exit status."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    shown = subprocess.run([sys.executable, "-m", "upkeep", "--help"], capture_output=True,
                           text=True, env=env, timeout=60)
    assert shown.returncode == 0 and "what-if" in shown.stdout
    failed = subprocess.run([sys.executable, "-m", "upkeep", "run", str(tmp_path / "none.toml")],
                            capture_output=True, text=True, env=env, timeout=60)
    assert failed.returncode == 1 and "upkeep: error:" in failed.stderr


def _replayed_jsonl(path: Path) -> Counter:
    state: Counter = Counter()
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        if entry.get("reset"):
            state.clear()
        else:
            state[tuple(entry["row"].values())] += entry["weight"]
    return state


def test_rows_that_expire_while_the_pipeline_is_down_leave_the_sinks_once(tmp_path):
    """A restart's sinks start from the views' rows, and reading them ran the due expiry:
    its delta reached the runner's buffers too, so the first batch deleted the rows again
    (a jsonl replay went negative, the sqlite and duckdb sinks stopped the run)."""
    import sqlite3

    import duckdb
    (tmp_path / "tables.sql").write_text(
        "CREATE TABLE t (k INTEGER, v INTEGER) WITH (ttl_seconds = 1);")
    (tmp_path / "views.sql").write_text("CREATE MATERIALIZED VIEW tv AS SELECT k, v FROM t;")
    changes = tmp_path / "changes"
    changes.mkdir()
    (changes / "c-001.jsonl").write_text("".join(
        json.dumps({"table": "t", "op": "insert", "row": [i, i]}) + "\n" for i in (1, 2, 3)))
    sinks = "".join(f'[[sinks]]\nview = "tv"\ntype = "{kind}"\npath = "out/{name}"\n'
                    for kind, name in [("jsonl", "tv.jsonl"), ("parquet-deltas", "tv.deltas"),
                                       ("sqlite", "tv.sqlite"), ("duckdb", "tv.duckdb")])
    path = tmp_path / "p.toml"
    path.write_text('state_dir = "state"\ntables = ["tables.sql"]\nviews = ["views.sql"]\n'
                    f'[source]\npath = "changes"\n{sinks}')
    assert main(["run", str(path), "--progress", "none"]) == 0
    time.sleep(1.3)  # the three rows expire while it is down
    (changes / "c-002.jsonl").write_text(
        json.dumps({"table": "t", "op": "insert", "row": [9, 9]}) + "\n")
    assert main(["run", str(path), "--progress", "none"]) == 0
    out = tmp_path / "out"
    assert +_replayed_jsonl(out / "tv.jsonl") == Counter({(9, 9): 1})
    assert -_replayed_jsonl(out / "tv.jsonl") == Counter()  # nothing deleted twice
    deltas = duckdb.sql(f"SELECT k, v, SUM(weight) FROM read_parquet('{out}/tv.deltas/batch=*/"
                        f"*.parquet', hive_partitioning = true) GROUP BY ALL "
                        f"HAVING SUM(weight) <> 0").fetchall()
    assert deltas == [(9, 9, 1)]
    assert sqlite3.connect(out / "tv.sqlite").execute("SELECT * FROM tv").fetchall() == [(9, 9)]
    with duckdb.connect(str(out / "tv.duckdb"), read_only=True) as con:
        assert con.execute("SELECT * FROM tv").fetchall() == [(9, 9)]


@pytest.mark.parametrize(("value", "expected"), [
    ("rel/x", Path("/base/rel/x")),
    ("file:///tmp/a#b/out", Path("/tmp/a#b/out")),  # taken as it is, as Hadoop takes it
    ("file:///tmp/a?x=1/out", Path("/tmp/a?x=1/out")),
    ("file:///tmp/my%20dir", Path("/tmp/my%20dir")),
    ("file:/tmp/x", Path("/tmp/x")),  # the spelling Hadoop prints
    ("file://localhost/tmp/x", Path("/tmp/x")),
    ("file://otherhost/x", "file://otherhost/x"),  # not this machine's: Hadoop's to judge
    ("hdfs://nn:8020/x", "hdfs://nn:8020/x"),
    ("s3a://bucket/out", "s3a://bucket/out")])
def test_a_location_is_a_local_path_or_a_uri(value, expected):
    from upkeep.io.locations import location

    assert location(Path("/base"), value) == expected


@pytest.mark.parametrize("command", [["serve", "s3a://bucket/db", "--tokens", "t.json"],
                                     ["provenance", "hdfs://nn/db", "t", "1"],
                                     ["what-if", "s3a://bucket/db", "v"],
                                     ["repair", "s3a://bucket/db"]])
def test_a_database_named_by_a_uri_on_the_command_line_is_refused(
        tmp_path, monkeypatch, capsys, command) -> None:
    """As ``upkeep.connect`` refuses it: the command stops at its arguments, naming the
    URI, and makes no local directory named like it (``s3a:/bucket/db``)."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stopped:
        main(command)
    assert stopped.value.code == 2
    assert f"database {command[1]} is a URI" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
