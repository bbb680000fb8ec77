"""Pipelines end to end: each source format, every sink checked against a DuckDB oracle."""

from __future__ import annotations

import io
import shutil
from collections import Counter
from decimal import Decimal

import pyarrow.parquet as pq
import pytest
from rich.console import Console
from test_pipeline_support import (
    VIEW_KINDS,
    WRITERS,
    Stream,
    expected_views,
    jsonl_lines,
    normalise,
    read_all_sinks,
    write_pipeline,
)

import upkeep
from upkeep.io.errors import PipelineError
from upkeep.io.sinks import TerminalSink
from upkeep.pipeline import PipelineRunner, RecordError, load_config


def run(path, **options):
    """Run a pipeline file quietly into a fresh in-memory database; returns (runner, stats)."""
    db = upkeep.connect()
    console = Console(file=io.StringIO(), width=200)
    runner = PipelineRunner(load_config(path), db=db, console=console,
                            progress=options.pop("progress", "none"), **options)
    return runner, runner.run()


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_every_sink_matches_duckdb_on_the_final_tables(tmp_path, fmt):
    stream = Stream(seed={"jsonl": 1, "csv": 2, "parquet": 3}[fmt]).generate(600)
    WRITERS[fmt](tmp_path / "changes", stream.records, files=3)
    runner, stats = run(write_pipeline(tmp_path, rows_per_batch=45))

    assert stats.applied == len(stream.records) and stats.rejected == 0
    assert stats.batches == -(-len(stream.records) // 45)
    expected = expected_views(stream.model)
    for view in VIEW_KINDS:
        assert normalise(view, runner.db.view(view).rows()) == expected[view], view
        sinks = read_all_sinks(tmp_path / "out", view)
        assert set(sinks) == {"duckdb", "sqlite", "parquet", "jsonl", "parquet-deltas"}
        for kind, rows in sinks.items():
            assert rows == expected[view], f"{kind} sink of {view}"
        terminal = next(s for s in runner.sinks
                        if isinstance(s, TerminalSink) and s.view.name == view)
        assert normalise(view, terminal.rows.elements()) == expected[view]
    # the committed offset is the last record of the last file
    last = {"jsonl": "line", "csv": "line", "parquet": "record"}[fmt]
    meta = runner.db.metadata()
    assert meta["source"]["file"] == f"changes-003.{fmt}"
    assert meta["source"]["unit"] == last
    assert meta["batch"] == stats.batches and meta["applied"] == len(stream.records)


def test_jsonl_sink_lines_are_per_batch_with_deletions_first(tmp_path):
    stream = Stream(seed=4).generate(300)
    WRITERS["jsonl"](tmp_path / "changes", stream.records, files=2)
    run(write_pipeline(tmp_path, rows_per_batch=20, sinks={"revenue": ["jsonl"],
                                                           "order_count": ["jsonl"]}))
    for view in ("revenue", "order_count"):
        lines = jsonl_lines(tmp_path / "out" / f"{view}.jsonl")
        batches = [line["batch"] for line in lines]
        assert batches == sorted(batches)
        for batch in set(batches):
            weights = [line["weight"] for line in lines if line["batch"] == batch
                       and "weight" in line]
            assert weights == sorted(weights)  # -1 lines before +1 lines
    # the global aggregate has a row before any change: the file starts with it
    first = jsonl_lines(tmp_path / "out" / "order_count.jsonl")[:2]
    assert first == [{"batch": 0, "reset": True},
                     {"batch": 0, "weight": 1, "row": {"n": 0, "q": None}}]


def test_terminal_sink_shows_the_top_rows_in_order(tmp_path):
    stream = Stream(seed=5).generate(400)
    WRITERS["jsonl"](tmp_path / "changes", stream.records, files=1)
    path = write_pipeline(tmp_path, sinks={})
    with path.open("a") as f:
        f.write('[[sinks]]\nview = "big_orders"\ntype = "terminal"\nlimit = 4\n'
                'order_by = "ok DESC, note"\n')
    out = io.StringIO()
    runner = PipelineRunner(load_config(path), db=upkeep.connect(), progress="plain",
                            console=Console(file=out, width=120))
    runner.run()
    (sink,) = runner.sinks
    want = sorted(stream.model["orders"].elements(), key=lambda r: -r[0])
    want = [(r[0], r[1], r[2], r[5]) for r in want if r[4] >= 5][:4]
    assert sink.top() == want
    text = out.getvalue()
    assert "big_orders: top 4 of" in text and "done:" in text
    assert str(want[0][0]) in text


def test_updates_and_deletes_of_rows_inserted_in_the_same_batch(tmp_path):
    row = {"ok": 1, "ck": 1, "day": "2024-01-01", "price": "1.50", "qty": 7, "note": None}
    records = [
        {"table": "customers", "op": "insert", "row": [1, "a", "AUTO"]},
        {"table": "orders", "op": "insert", "row": row},
        {"table": "orders", "op": "update", "before": row, "after": {**row, "qty": 8}},
        {"table": "orders", "op": "insert", "row": row},
        {"table": "orders", "op": "delete", "row": row},
        {"table": "customers", "op": "update", "before": [1, "a", "AUTO"],
         "after": [1, "a", "BUILDING"]},
    ]
    WRITERS["jsonl"](tmp_path / "changes", records, files=1)
    runner, stats = run(write_pipeline(tmp_path, rows_per_batch=100, sinks={}))
    assert stats.batches == 1 and stats.rejected == 0
    assert runner.db.view("revenue").rows() == [("BUILDING", Decimal("12.00"), 1)]


def test_a_restart_with_a_durable_state_resumes_after_the_last_batch(tmp_path):
    stream = Stream(seed=6).generate(500)
    changes = tmp_path / "changes"
    first, second = stream.records[:260], stream.records[260:]
    WRITERS["jsonl"](changes, first, files=2)
    path = write_pipeline(tmp_path, state_dir="state", rows_per_batch=40)
    config = load_config(path)
    quiet = Console(file=io.StringIO())
    stats1 = PipelineRunner(config, console=quiet, progress="none").run()
    assert stats1.applied == 260 and stats1.resumed_from is None

    WRITERS["jsonl"](changes, second, files=2, first=3)
    stats2 = PipelineRunner(config, console=quiet, progress="none").run()
    assert stats2.applied == len(second)
    assert stats2.resumed_from == "changes-002.jsonl, line 130"
    assert stats2.batch == stats1.batch + stats2.batches

    expected = expected_views(stream.model)
    for view in VIEW_KINDS:
        for kind, rows in read_all_sinks(tmp_path / "out", view).items():
            assert rows == expected[view], f"{kind} sink of {view}"
        # the jsonl sink was consistent at the restart: no reset after the first one
        resets = [e for e in jsonl_lines(tmp_path / "out" / f"{view}.jsonl") if e.get("reset")]
        assert len(resets) <= 1 and all(e["batch"] == 0 for e in resets)

    # a third run finds nothing new and changes nothing
    stats3 = PipelineRunner(config, console=quiet, progress="none").run()
    assert stats3.read == 0 and stats3.batches == 0
    with upkeep.connect(tmp_path / "state") as db:
        assert db.metadata()["batch"] == stats2.batch
        assert db.metadata()["applied"] == len(stream.records)


def test_stopping_mid_stream_and_resuming_applies_every_record_once(tmp_path):
    stream = Stream(seed=7).generate(400)
    WRITERS["csv"](tmp_path / "changes", stream.records, files=4)
    config = load_config(write_pipeline(tmp_path, state_dir="state", rows_per_batch=30))

    class StopAfterThree(PipelineRunner):
        def _commit(self, changes, last):
            super()._commit(changes, last)
            if self.stats.batches == 3:
                self.stop.set()

    quiet = Console(file=io.StringIO())
    stats1 = StopAfterThree(config, console=quiet, progress="none").run()
    assert stats1.stopped and stats1.applied == 90
    # a sink file lost between runs is rebuilt from the view
    (tmp_path / "out" / "revenue.jsonl").unlink()
    stats2 = PipelineRunner(config, console=quiet, progress="none").run()
    assert stats2.applied == len(stream.records) - 90 and not stats2.stopped
    expected = expected_views(stream.model)
    for view in VIEW_KINDS:
        for kind, rows in read_all_sinks(tmp_path / "out", view).items():
            assert rows == expected[view], f"{kind} sink of {view}"


def _run_damaged(tmp_path, seed: int, view: str, kind: str, damage) -> Stream:
    """Run the first 120 records into a ``kind`` sink of ``view``, ``damage(out)`` the sink
    as a crash would, then run the rest of the stream; returns the stream."""
    stream = Stream(seed=seed).generate(200)
    WRITERS["jsonl"](tmp_path / "changes", stream.records[:120], files=1)
    config = load_config(write_pipeline(tmp_path, state_dir="state", rows_per_batch=25,
                                        sinks={view: [kind]}))
    quiet = Console(file=io.StringIO())
    PipelineRunner(config, console=quiet, progress="none").run()
    damage(tmp_path / "out")
    WRITERS["jsonl"](tmp_path / "changes", stream.records[120:], files=1, first=2)
    PipelineRunner(config, console=quiet, progress="none").run()
    return stream


def test_a_truncated_jsonl_sink_is_repaired_with_a_reset(tmp_path):
    def truncate(out):
        sink = out / "big_orders.jsonl"
        text = sink.read_text()
        sink.write_text(text[: len(text) // 2])  # lose the tail, including a torn line

    stream = _run_damaged(tmp_path, 8, "big_orders", "jsonl", truncate)
    lines = jsonl_lines(tmp_path / "out" / "big_orders.jsonl")
    assert any(e.get("reset") for e in lines[1:])
    assert read_all_sinks(tmp_path / "out", "big_orders")["jsonl"] == \
        expected_views(stream.model)["big_orders"]


def test_a_parquet_deltas_sink_missing_a_batch_is_corrected_at_start(tmp_path):
    """A batch committed but never written (a crash between the two): the next run writes
    the difference as a correction file, and the directory adds up to the view again."""
    def lose_a_batch(out):
        batches = sorted((out / "revenue.deltas").glob("batch=*"),
                         key=lambda d: int(d.name[6:]))
        assert len(batches) >= 3
        shutil.rmtree(batches[-2])  # lose a batch in the middle

    stream = _run_damaged(tmp_path, 9, "revenue", "parquet-deltas", lose_a_batch)
    assert list((tmp_path / "out" / "revenue.deltas").glob("batch=*/correction-*.parquet"))
    assert read_all_sinks(tmp_path / "out", "revenue")["parquet-deltas"] == \
        expected_views(stream.model)["revenue"]


@pytest.mark.parametrize("kind", ["parquet-deltas", "jsonl", "parquet", "duckdb"])
def test_sinks_add_up_to_the_view_after_starting_over_with_a_fresh_state(tmp_path, kind):
    """What docs/pipelines.md says to do to change a view: delete the state directory and
    run again.  Batch ids begin again; a parquet-deltas directory holding the old run's
    batches is rebuilt (its batch 1 was replaced by the new run's, so it summed wrong)."""
    def start_over(out):
        shutil.rmtree(tmp_path / "state")

    stream = _run_damaged(tmp_path, 5, "revenue", kind, start_over)
    assert read_all_sinks(tmp_path / "out", "revenue")[kind] == \
        expected_views(stream.model)["revenue"]


def test_a_parquet_deltas_sink_refuses_a_view_column_named_like_its_own(tmp_path):
    (tmp_path / "changes").mkdir()
    path = write_pipeline(tmp_path, sinks={"weights": ["parquet-deltas"]})
    path.with_name("views.sql").write_text(
        path.with_name("views.sql").read_text()
        + "\nCREATE VIEW weights AS SELECT ck, COUNT(*) AS weight FROM orders GROUP BY ck;\n")
    with pytest.raises(PipelineError, match="column named 'weight'"):
        PipelineRunner(load_config(path), console=Console(file=io.StringIO()),
                       progress="none").run()
    assert not list((tmp_path / "out").glob("weights.deltas/batch=*"))


def test_plain_progress_lines_and_summary_without_a_terminal(tmp_path):
    stream = Stream(seed=9).generate(150)
    WRITERS["jsonl"](tmp_path / "changes", stream.records, files=2)
    out = io.StringIO()
    runner = PipelineRunner(load_config(write_pipeline(tmp_path, sinks={})),
                            db=upkeep.connect(), console=Console(file=out, width=300),
                            progress="auto", progress_interval=0.0)
    stats = runner.run()
    text = out.getvalue()
    assert "\x1b[" not in text  # no live display, no colours: not a terminal
    lines = [line for line in text.splitlines() if line.startswith("[")]
    assert len(lines) >= stats.batches
    assert "records" in lines[-1] and "lag 0" in lines[-1]
    assert f"done: {len(stream.records):,} records applied" in text
    assert Counter(line.split()[0] for line in text.splitlines() if "view" in line)["view"] == 3


def test_a_duckdb_sink_holds_every_hugeint_and_parquet_says_what_to_do(tmp_path):
    """HUGEINT goes to 2**127 - 1 (39 digits), Arrow's decimal128 to 38: the duckdb sink
    now passes such values as text and casts them back (the sink failed at every restart);
    a parquet sink, whose format cannot hold them, names the way out."""
    import duckdb

    (tmp_path / "changes").mkdir()
    (tmp_path / "t.sql").write_text("CREATE TABLE t (k INTEGER PRIMARY KEY, h HUGEINT);\n")
    (tmp_path / "v.sql").write_text("CREATE VIEW s AS SELECT k, h FROM t;\n")
    big = 2**127 - 1
    (tmp_path / "changes" / "c-001.jsonl").write_text(
        f'{{"table": "t", "op": "insert", "row": [1, {big}]}}\n'
        f'{{"table": "t", "op": "insert", "row": [2, {-big}]}}\n')
    text = ('tables = "t.sql"\nviews = "v.sql"\nstate_dir = "state"\n[source]\n'
            'path = "changes"\n[[sinks]]\nview = "s"\ntype = "duckdb"\npath = "o.duckdb"\n')
    (tmp_path / "p.toml").write_text(text)
    quiet = Console(file=io.StringIO())

    def sink_rows():
        with duckdb.connect(str(tmp_path / "o.duckdb"), read_only=True) as con:
            return sorted(con.execute("SELECT * FROM s").fetchall())

    PipelineRunner(load_config(tmp_path / "p.toml"), console=quiet, progress="none").run()
    assert sink_rows() == [(1, big), (2, -big)]
    (tmp_path / "changes" / "c-002.jsonl").write_text(
        f'{{"table": "t", "op": "delete", "row": [1, {big}]}}\n')
    PipelineRunner(load_config(tmp_path / "p.toml"), console=quiet, progress="none").run()
    assert sink_rows() == [(2, -big)]
    (tmp_path / "p.toml").write_text(text.replace('type = "duckdb"\npath = "o.duckdb"',
                                                  'type = "parquet"\npath = "o.parquet"'))
    with pytest.raises(PipelineError, match="of 39 digits.*cast it to VARCHAR or DOUBLE where it is computed"):
        PipelineRunner(load_config(tmp_path / "p.toml"), console=quiet,
                       progress="none").run()


def test_a_parquet_deltas_directory_of_another_view_is_an_error_not_a_traceback(tmp_path):
    """A sink pointed at a directory another view's sink wrote (or other Parquet files)
    is refused naming the file and the column it lacks (pyarrow's KeyError escaped)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from upkeep.io.sinks.parquet_deltas import read_deltas
    from upkeep.types import type_from_name

    (tmp_path / "batch=1").mkdir()
    pq.write_table(pa.table({"g": ["a"], "n": [1], "weight": [1]}),
                   tmp_path / "batch=1" / "part-0.parquet")
    columns = [("k", type_from_name("INTEGER")), ("g", type_from_name("VARCHAR"))]
    with pytest.raises(ValueError, match="batch=1/part-0.parquet has no column 'k'"):
        read_deltas(tmp_path, columns)


@pytest.mark.parametrize("output", ["sink", "dead_letter"])
def test_an_output_written_over_a_change_file_of_the_source_is_refused(tmp_path, output):
    """A sink (or the dead-letter file) pointed at one of the source's change files would
    replace or append to that input and never read it; the run is refused, the input
    left as it was."""
    changes = tmp_path / "changes"
    changes.mkdir()
    first = '{"table": "t", "op": "insert", "row": [1]}\n'
    (changes / "a.jsonl").write_text(first)
    (changes / "b.jsonl").write_text('{"table": "t", "op": "insert", "row": [2]}\n')
    (tmp_path / "tables.sql").write_text("CREATE TABLE t (k INTEGER);")
    (tmp_path / "views.sql").write_text("CREATE VIEW v AS SELECT k FROM t;")
    target = "changes/a.jsonl"
    sink = target if output == "sink" else "out/v.jsonl"
    dead = target if output == "dead_letter" else "dead.jsonl"
    (tmp_path / "p.toml").write_text(
        f'state_dir = ":memory:"\ntables = "tables.sql"\nviews = "views.sql"\n'
        f'dead_letter = "{dead}"\n[source]\npath = "changes"\n'
        f'[[sinks]]\nview = "v"\ntype = "jsonl"\npath = "{sink}"\n')
    with pytest.raises(PipelineError, match="changes/a.jsonl, a change file of the source"):
        PipelineRunner(load_config(tmp_path / "p.toml"), console=Console(file=io.StringIO()),
                       progress="none").run()
    assert (changes / "a.jsonl").read_text() == first


def test_a_dead_letter_path_over_an_unread_input_is_refused_after_a_commit(tmp_path):
    """After batches were committed, a dead-letter path naming a change file of the source
    that still holds unread records was taken for the pipeline's own file: the source
    skipped it, the run reported success, and the rest of that file was lost.  It is
    refused as before the first commit, and nothing changes."""
    changes = tmp_path / "changes"
    changes.mkdir()
    lines = [f'{{"table": "t", "op": "insert", "row": [{k}]}}\n' for k in (1, 2, 3)]
    bad = '{"table": "t", "op": "delete", "row": [99]}\n'
    (changes / "a.jsonl").write_text(lines[0] + lines[1] + lines[2] + bad)
    (changes / "b.jsonl").write_text('{"table": "t", "op": "insert", "row": [5]}\n')
    (tmp_path / "tables.sql").write_text("CREATE TABLE t (k INTEGER);")
    (tmp_path / "views.sql").write_text("CREATE VIEW v AS SELECT k FROM t;")

    def run(dead_letter: str, on_error: str):
        (tmp_path / "p.toml").write_text(
            f'state_dir = "state"\ntables = "tables.sql"\nviews = "views.sql"\n'
            f'dead_letter = "{dead_letter}"\non_error = "{on_error}"\n'
            '[source]\npath = "changes"\n[batch]\nrows_per_batch = 2\n')
        return PipelineRunner(load_config(tmp_path / "p.toml"),
                              console=Console(file=io.StringIO()), progress="none").run()

    with pytest.raises(RecordError, match="cannot delete row"):
        run("dead.jsonl", "stop")  # the first batch (two rows) is committed
    with pytest.raises(PipelineError, match="changes/a.jsonl, a change file of the source"):
        run("changes/a.jsonl", "dead-letter")
    assert (changes / "a.jsonl").read_text() == lines[0] + lines[1] + lines[2] + bad
    stats = run("dead.jsonl", "dead-letter")  # the rest of a.jsonl, then b.jsonl
    assert stats.applied == 2 and stats.rejected == 1


def test_a_parquet_sink_whose_path_is_a_directory_leaves_no_temporary_file(tmp_path):
    changes = tmp_path / "changes"
    changes.mkdir()
    (changes / "a.jsonl").write_text('{"table": "t", "op": "insert", "row": [1]}\n')
    (tmp_path / "tables.sql").write_text("CREATE TABLE t (k INTEGER);")
    (tmp_path / "views.sql").write_text("CREATE VIEW v AS SELECT k FROM t;")
    (tmp_path / "out" / "v.parquet").mkdir(parents=True)
    (tmp_path / "p.toml").write_text(
        'state_dir = ":memory:"\ntables = "tables.sql"\nviews = "views.sql"\n'
        '[source]\npath = "changes"\n'
        '[[sinks]]\nview = "v"\ntype = "parquet"\npath = "out/v.parquet"\n')
    with pytest.raises(PipelineError, match="parquet sink"):
        PipelineRunner(load_config(tmp_path / "p.toml"), console=Console(file=io.StringIO()),
                       progress="none").run()
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["v.parquet"]


@pytest.mark.parametrize("state", [":memory:", "state"])
def test_the_pipelines_own_outputs_in_the_source_directory_do_not_refuse_a_rerun(tmp_path,
                                                                               state):
    """A rerun that starts fresh (an in-memory state directory, or a first run that stopped
    at a bad record before committing) finds its own sinks' and dead letters' files in the
    source directory: they are not change files of the source (a Parquet sink's start
    snapshot refused every such rerun), while a change file there still is."""
    changes = tmp_path / "changes"
    changes.mkdir()
    (changes / "a.jsonl").write_text('{"table": "t", "op": "insert", "row": [1]}\n'
                                     '{"table": "t", "op": "delete", "row": [9]}\n')
    (tmp_path / "tables.sql").write_text("CREATE TABLE t (k INTEGER);")
    (tmp_path / "views.sql").write_text("CREATE VIEW v AS SELECT k FROM t;")
    pipeline = (f'state_dir = "{state}"\ntables = "tables.sql"\nviews = "views.sql"\n'
                'dead_letter = "changes/dead.jsonl"\non_error = "{on_error}"\n'
                '[source]\npath = "changes"\n'
                '[[sinks]]\nview = "v"\ntype = "parquet"\npath = "changes/v.parquet"\n'
                '[[sinks]]\nview = "v"\ntype = "jsonl"\npath = "changes/v.jsonl"\n')

    def run(on_error: str):
        (tmp_path / "p.toml").write_text(pipeline.replace("{on_error}", on_error))
        return PipelineRunner(load_config(tmp_path / "p.toml"),
                              console=Console(file=io.StringIO()), progress="none").run()

    with pytest.raises(RecordError, match="cannot delete row"):
        run("stop")  # nothing committed; the sinks have started
    assert (changes / "v.parquet").stat().st_size
    assert run("dead-letter").applied == 1  # a fresh run: the sinks' files are there
    assert (changes / "dead.jsonl").stat().st_size
    if state == ":memory:":
        assert run("dead-letter").applied == 1  # and the dead letter too
    assert pq.read_table(changes / "v.parquet").to_pylist() == [{"k": 1}]
    (changes / "v.jsonl").write_text('{"table": "t", "op": "insert", "row": [2]}\n')
    # an input at a sink's path is still refused, also after batches were committed
    # (then the source skipped it, and its records were lost without a word)
    with pytest.raises(PipelineError, match="v.jsonl, a change file of the source"):
        run("dead-letter")



def test_plain_progress_prints_its_last_line_once():
    """A refresh right before the run's closing one printed the same line again (after a
    long batch: nothing for 20 s, then the line twice)."""
    from upkeep.pipeline.progress import Progress
    from upkeep.pipeline.stats import RunStats

    stats = RunStats("p", "changes", ":memory:", read=600_000, batches=1)
    out = io.StringIO()
    with Progress(stats, [], "plain", Console(file=out, width=300), interval=0) as progress:
        stats.finished = stats.started + 20.0
        progress.update()  # after the batch
        progress.update(force=True)  # the run's end
    assert len(out.getvalue().splitlines()) == 1, out.getvalue()
