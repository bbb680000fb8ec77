"""``upkeep run --engine spark``: pipelines on Spark give the local engine's results, and a
run stopped or killed at any micro-batch resumes from its checkpoint with no batch lost and
none applied twice."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from test_pipeline_errors import BAD, line_of
from test_pipeline_support import (
    VIEW_KINDS,
    WRITERS,
    Stream,
    expected_views,
    jsonl_lines,
    model_of,
    normalise,
    read_parquet_deltas,
    write_jsonl,
    write_pipeline,
)
from test_spark_sinks import mount

from upkeep.cli import main
from upkeep.io.errors import PipelineError
from upkeep.pipeline import load_config
from upkeep.spark.hadoop_files import files_for, local_uri
from upkeep.spark.pipeline import SparkPipelineRunner, _batch_files, write_concurrently
from upkeep.spark.query import make_plan
from upkeep.spark.sinks import batch_id

SPARK = '''engine = "spark"
[spark]
master = "local[2]"
shards = 2
files_per_batch = 1
conf = { "spark.sql.shuffle.partitions" = "2" }
'''


ALL_SINKS = ("jsonl", "parquet", "parquet-deltas")


def every_view(*kinds: str) -> dict[str, list[str]]:
    """Sinks of each of ``kinds`` for every view."""
    return {view: list(kinds) for view in VIEW_KINDS}


EVERY_KIND = every_view(*ALL_SINKS)
#: one sink per view, each kind once: for the tests of batches (resumed, killed, rejected
#: records), which ran nine sink writes per micro-batch; the tests of what the sinks hold
#: give every view every kind
ONE_OF_EACH = {view: [kind] for view, kind in zip(VIEW_KINDS, ALL_SINKS, strict=True)}


def spark_pipeline(tmp_path: Path, sinks: dict[str, list[str]] = EVERY_KIND) -> Path:
    """A Spark pipeline over the test stream with the ``sinks`` of each view."""
    return write_pipeline(tmp_path, state_dir="state", extra=SPARK, sinks=sinks)


def ran_keyed(tmp_path: Path, runner: SparkPipelineRunner) -> bool:
    """Whether ``runner``'s run (state dir ``tmp_path / "state"``, 2 shards) planned its
    views in keyed state (else in shards), by the plan its checkpoint was made with."""
    made = (tmp_path / "state" / "upkeep-plan.txt").read_text().strip()
    plans = {keyed: make_plan(runner.catalog.local_catalog, 2, keyed=keyed).plan_id
             for keyed in (True, False)}
    assert made in plans.values(), made
    return made == plans[True]


def read_parquet_snapshot(path: Path, view: str) -> Counter[tuple]:
    """A Spark ``parquet`` sink's snapshot of the view (the local engine's meaning of the
    sink): ``path`` links to the directory of the last micro-batch it includes."""
    assert path.is_symlink() and batch_id(Path(os.readlink(path)).name) >= 0
    table = pq.read_table(path)
    return Counter(normalise(view, [tuple(r.values()) for r in table.to_pylist()]))


def jsonl_batches(path: Path) -> dict[int, list[dict]]:
    """A Spark ``jsonl`` sink's lines, per micro-batch (each batch's part files in turn)."""
    batches = {int(d.name[6:]): [json.loads(line) for part in sorted(d.glob("part-*"))
                                 for line in part.read_text().splitlines()]
               for d in path.glob("batch=*")}
    for batch, lines in batches.items():
        assert all(line["batch"] == batch for line in lines)
    return dict(sorted(batches.items()))


def read_jsonl_batches(path: Path, view: str) -> Counter[tuple]:
    """Replay a Spark ``jsonl`` sink in batch order; within a batch each row has one sign."""
    state: Counter[tuple] = Counter()
    for lines in jsonl_batches(path).values():
        signs: dict[tuple, int] = {}
        for entry in lines:
            assert entry["weight"] in (1, -1)
            row = next(iter(normalise(view, [tuple(entry["row"].values())])))
            assert signs.setdefault(row, entry["weight"]) == entry["weight"], (path, row)
            state[row] += entry["weight"]
    assert all(n >= 0 for n in state.values()), f"{path}: a row deleted that was not there"
    return +state


def sink_views(tmp_path: Path, sinks: dict[str, list[str]] = EVERY_KIND
               ) -> dict[str, dict[str, Counter]]:
    """Each view's contents as each of its ``sinks`` holds it (all written by Spark's
    executors)."""
    out = tmp_path / "out"
    readers = {"jsonl": lambda v: read_jsonl_batches(out / f"{v}.jsonl", v),
               "parquet": lambda v: read_parquet_snapshot(out / f"{v}.parquet", v),
               "parquet-deltas": lambda v: read_parquet_deltas(out / f"{v}.deltas", v)}
    return {v: {kind: readers[kind](v) for kind in sinks[v]} for v in sinks}


def test_pipeline_on_spark_equals_the_model_and_its_rows_never_reach_the_driver(
        spark, tmp_path, monkeypatch) -> None:
    """Every file sink is written by the executors: the driver collects no view rows, and
    each sink still holds the model's views (views in keyed state, the default).  The
    delta sinks are written to another Hadoop file system (``viewfs``, mounted over
    ``out/``, as HDFS or an object store would be), named by URI in the pipeline file."""
    import upkeep.spark.pipeline as pipeline

    collected: list[str] = []
    decode = pipeline.decode_deltas

    def watched(rows, *args):
        rows = list(rows)
        collected.extend(view for view, _, _ in rows)
        return decode(rows, *args)

    monkeypatch.setattr(pipeline, "decode_deltas", watched)
    stream = Stream(seed=5).generate(600)
    WRITERS["parquet"](tmp_path / "changes", stream.records[:300], files=3)
    WRITERS["csv"](tmp_path / "changes", stream.records[300:], files=3, first=4)
    path = spark_pipeline(tmp_path)
    root = mount(spark, tmp_path / "out")
    text = path.read_text()
    for view in VIEW_KINDS:
        for local in (f"out/{view}.jsonl", f"out/{view}.deltas"):
            text = text.replace(f'path = "{local}"', f'path = "{root}/{local[4:]}"')
    path.write_text(text)
    assert text.count('path = "viewfs://') == 2 * len(VIEW_KINDS)
    runner = SparkPipelineRunner(load_config(path), spark=spark)
    assert runner.run() >= 6
    assert ran_keyed(tmp_path, runner)  # the default
    assert collected == []
    expected = expected_views(model_of(stream.records))
    for view, sinks in sink_views(tmp_path).items():
        for kind, rows in sinks.items():
            assert rows == expected[view], (view, kind)


def test_shards_pipeline_equals_the_model(spark, tmp_path) -> None:
    """``[spark] state = "shards"``: every view in shard servers (the default is Spark's
    keyed state, which the other pipeline tests run), and the sinks equal the model."""
    stream = Stream(seed=9).generate(400)
    WRITERS["jsonl"](tmp_path / "changes", stream.records, files=3)
    path = write_pipeline(tmp_path, state_dir="state",
                          extra=SPARK.replace("files_per_batch = 1", 'state = "shards"'),
                          sinks=EVERY_KIND)
    runner = SparkPipelineRunner(load_config(path), spark=spark)
    assert runner.run() >= 1
    assert not ran_keyed(tmp_path, runner)
    expected = expected_views(model_of(stream.records))
    for view, sinks in sink_views(tmp_path).items():
        for kind, rows in sinks.items():
            assert rows == expected[view], (view, kind)


def test_a_checkpoint_fits_the_state_and_with_shards_the_shard_count(spark, tmp_path) -> None:
    """The plan a pipeline's checkpoint is checked against (``upkeep-plan.txt``) changes
    with the state and, for views in shards, with the shard count; keyed state does not
    depend on the shard count."""
    (tmp_path / "changes").mkdir()
    config = load_config(spark_pipeline(tmp_path))
    assert config.spark_state == "keyed"  # the default
    runner = SparkPipelineRunner(config, spark=spark)
    catalog = runner.catalog.local_catalog

    def plan_id(shards: int, keyed: bool) -> str:
        plan = make_plan(catalog, shards, keyed=keyed)
        assert (plan.keyed is not None) == keyed
        return plan.plan_id
    assert plan_id(2, keyed=True) == plan_id(3, keyed=True)
    assert plan_id(2, keyed=False) != plan_id(3, keyed=False)
    assert plan_id(2, keyed=True) != plan_id(2, keyed=False)


def test_a_keyed_pipeline_names_the_row_a_rejected_batch_deletes(spark, tmp_path,
                                                                   capsys) -> None:
    """In keyed state a delete of a row the table does not hold stops the run naming the
    record's file and line, the row and its table (the message named the table only, then
    the row without the record)."""
    (tmp_path / "changes").mkdir()
    (tmp_path / "changes" / "changes-00001.jsonl").write_text(
        '{"table": "orders", "op": "insert", "row": [1, 1, "2024-01-01", "9.50", 2, null]}\n'
        '{"table": "orders", "op": "insert", "row": [7, 1, "2024-01-02", "1.00", 1, null]}\n')
    (tmp_path / "changes" / "changes-00002.jsonl").write_text(  # the second micro-batch
        '{"table": "orders", "op": "delete", "row": [7, 1, "2024-01-02", "1.00", 1, null]}\n'
        '{"table": "orders", "op": "delete", "row": [7, 1, "2024-01-02", "1.00", 1, null]}\n')
    path = write_pipeline(tmp_path, state_dir="state",
                          extra=SPARK.replace("files_per_batch = 1",
                                              'files_per_batch = 1\nstate = "keyed"'),
                          sinks=every_view("parquet-deltas"))
    assert main(["run", str(path)]) == 1
    err = capsys.readouterr().err
    # the first delete finds the row the first micro-batch committed; the second does not
    assert ("changes-00002.jsonl, line 2: cannot delete row (7, 1, 2024-01-02, 1.00, 1, NULL) "
            "from table orders" in err), err


KEYED_T = """engine = "spark"
state_dir = "state"
tables = ["tables.sql"]
views = ["views.sql"]
on_error = "{on_error}"
[source]
path = "changes"
[spark]
master = "local[2]"
shards = 2
files_per_batch = 1
state = "keyed"
conf = {{ "spark.sql.shuffle.partitions" = "2" }}
"""


def change_files(directory: Path, files: dict[str, list]) -> None:
    """Change files of inserts into ``t``, one per name."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, rows in files.items():
        (directory / name).write_text("".join(
            json.dumps({"table": "t", "op": "insert", "row": r}) + "\n" for r in rows))


def keyed_t(directory: Path, on_error: str, files: dict[str, list],
            mounted: tuple[str, Path] | None = None) -> Path:
    """A keyed pipeline over ``t (k INTEGER NOT NULL, a, b)`` and the view ``a * b``;
    ``mounted`` (a URI and the local directory under it): its source and state there,
    named by URI, with a ``parquet-deltas`` sink of the view."""
    uri, local = mounted or (None, directory)
    directory.mkdir(parents=True, exist_ok=True)
    change_files(local / "changes", files)
    (directory / "tables.sql").write_text(
        "CREATE TABLE t (k INTEGER NOT NULL, a INTEGER, b INTEGER);\n")
    (directory / "views.sql").write_text("CREATE MATERIALIZED VIEW prod AS SELECT k, a * b AS p "
                                         "FROM t;\n")
    path = directory / "pipeline.toml"
    text = KEYED_T.format(on_error=on_error)
    if uri is not None:
        text = text.replace('state_dir = "state"', f'state_dir = "{uri}/state"').replace(
            'path = "changes"', f'path = "{uri}/changes"') + (
            f'[[sinks]]\nview = "prod"\ntype = "parquet-deltas"\npath = "{uri}/prod.deltas"\n')
    path.write_text(text)
    return path


def test_a_keyed_pipeline_leaves_out_what_its_views_and_not_null_reject(spark, tmp_path) -> None:
    """Under dead-letter, a record whose view value overflows (the keyed steps, not the
    table's, fail on it) and one with NULL in a NOT NULL column alone in its micro-batch
    (which a keyed table step, keeping rows and keys, accepted) are dead-lettered, and the
    rest reach the view; under stop the NULL names its file and line.  The first
    pipeline's source, state and sink are named by URI on a Hadoop file system other than
    the local one (``viewfs`` mounted over a local directory, as HDFS or an object store
    would be): it reads its change files, keeps its checkpoint and judges the rejected
    batches' records again there, and a second run resumes from that checkpoint."""
    mounted = tmp_path / "mounted"
    path = keyed_t(tmp_path / "skip", "dead-letter", {
        "c-001.jsonl": [[1, 2, 3], [2, 5, 5], [3, 2**30, 4], [4, 1, 1]],
        "c-002.jsonl": [[None, 1, 1]],
        "c-003.jsonl": [[5, 6, 7]]}, (mount(spark, mounted), mounted))
    seen: Counter = Counter()

    def collect(batch_id, changes) -> None:
        for row, weight in changes.get("prod", []):
            seen[row] += weight

    runner = SparkPipelineRunner(load_config(path), spark=spark, on_batch=collect)
    runner.run()
    assert +seen == Counter({(1, 6): 1, (2, 25): 1, (4, 1): 1, (5, 42): 1})
    assert (mounted / "state" / "checkpoint" / "commits").is_dir()
    change_files(mounted / "changes", {"c-004.jsonl": [[6, 1, 2]]})
    assert SparkPipelineRunner(load_config(path), spark=spark, on_batch=collect).run() == 1
    assert +seen == Counter({(1, 6): 1, (2, 25): 1, (4, 1): 1, (5, 42): 1, (6, 2): 1})
    summed: Counter = Counter()
    for batch in (mounted / "prod.deltas").glob("batch=*"):
        for r in pq.read_table(batch).to_pylist():
            summed[r["k"], r["p"]] += r["weight"]
    assert summed == seen
    dead = {(e["_source"]["file"], e["_source"]["line"]): e["_error"]
            for e in jsonl_lines(tmp_path / "skip" / "pipeline.dead-letter.jsonl")}
    assert dead.keys() == {("c-001.jsonl", 3), ("c-002.jsonl", 1)}, dead
    assert "overflow" in dead[("c-001.jsonl", 3)].lower(), dead
    assert "NULL in NOT NULL column k of table t" in dead[("c-002.jsonl", 1)], dead
    stop = keyed_t(tmp_path / "stop", "stop", {"c-001.jsonl": [[1, 1, 1], [None, 2, 2]]})
    with pytest.raises(PipelineError, match=r"c-001\.jsonl, line 2: NULL in NOT NULL column k"):
        SparkPipelineRunner(load_config(stop), spark=spark).run()


def test_stopped_run_resumes_from_its_checkpoint(spark, tmp_path) -> None:
    stream = Stream(seed=8).generate(360)
    WRITERS["jsonl"](tmp_path / "changes", stream.records, files=6)
    config = load_config(spark_pipeline(tmp_path, sinks=ONE_OF_EACH))
    stop = threading.Event()
    seen: dict[int, dict] = {}

    def stop_after_three(batch_id: int, changes) -> None:
        seen[batch_id] = changes
        if len(seen) == 3:
            stop.set()

    first = SparkPipelineRunner(config, spark=spark, stop=stop, on_batch=stop_after_three).run()
    assert 3 <= first < 7
    resumed: dict[int, dict] = {}
    rest = SparkPipelineRunner(config, spark=spark,
                               on_batch=lambda batch_id, c: resumed.setdefault(batch_id, c)).run()
    # The resumed run starts after the last committed batch and reads every file left. A
    # batch delivered while the stop came may not be committed yet: it is delivered again,
    # with the same id and the same changes (the callback is at least once; the sinks below
    # are exactly once). How Spark groups the files left after a stop is its own choice.
    last = max(seen)
    assert rest >= 1 and min(resumed) in (last, last + 1)
    if min(resumed) == last:
        assert resumed[last] == seen[last]
    assert sorted(resumed) == list(range(min(resumed), min(resumed) + rest))
    # six change files and the start tick, at most one batch each
    assert len(seen.keys() | resumed.keys()) <= 7
    expected = expected_views(model_of(stream.records))
    for view, sinks in sink_views(tmp_path, sinks=ONE_OF_EACH).items():
        for kind, rows in sinks.items():
            assert rows == expected[view], (view, kind)
    # the checkpoint was made with views in keyed state (the default): views in shards
    # would be routed otherwise, so resuming it with them is refused, whatever the count
    for other in (dict(spark_state="shards"), dict(spark_state="shards", spark_shards=3)):
        with pytest.raises(PipelineError, match="spark.state or shard count changed"):
            SparkPipelineRunner(dataclasses.replace(config, **other), spark=spark).run()


@pytest.mark.parametrize(("state", "reader"), [("shards", "committed_shard_rows"),
                                               ("keyed", "committed_rows")])
def test_a_sink_added_to_a_pipeline_starts_from_its_views_rows(spark, tmp_path, state,
                                                                reader) -> None:
    """A sink new to a pipeline that has run is filled with its view's rows as of the last
    committed micro-batch, as a local sink is at start, then takes the later batches: each
    kind ends equal to the model.  The rows are read by a Spark job from the tables' keyed
    state, or, with views in shards, from the shards' logs (a partitioned table from every
    shard, a copied one from one); before, a shards pipeline refused such a sink."""
    stream = Stream(seed=6).generate(240)
    records = stream.records
    WRITERS["jsonl"](tmp_path / "changes", records[:120], files=2)
    extra = SPARK.replace("files_per_batch = 1", f'state = "{state}"')

    def config(kinds: tuple[str, ...]):
        return load_config(write_pipeline(tmp_path, state_dir="state", extra=extra,
                                          sinks=every_view(*kinds)))

    assert SparkPipelineRunner(config(("parquet-deltas",)), spark=spark).run()
    # a fill that fails is the sink's PipelineError and leaves nothing at its path, so the
    # next run fills it again (an empty directory left behind had made it a started sink)
    import upkeep.spark.dml as spark_dml

    def failing(*args):
        raise RuntimeError("the tables could not be read")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(spark_dml, reader, failing)
        with pytest.raises(PipelineError, match="could not be read"):
            SparkPipelineRunner(config(ALL_SINKS), spark=spark).run()
    assert not (tmp_path / "out" / f"{next(iter(VIEW_KINDS))}.jsonl").exists()
    # every kind is filled as of the same batch: the run below adds no change file first
    assert SparkPipelineRunner(config(ALL_SINKS), spark=spark).run() == 0
    expected = expected_views(model_of(records[:120]))
    for view, sinks in sink_views(tmp_path).items():
        for kind, rows in sinks.items():
            assert rows == expected[view], (view, kind)
    WRITERS["jsonl"](tmp_path / "changes", records[120:], files=2, first=3)
    assert SparkPipelineRunner(config(ALL_SINKS), spark=spark).run() >= 1
    expected = expected_views(model_of(records))
    for view, sinks in sink_views(tmp_path).items():
        for kind, rows in sinks.items():
            assert rows == expected[view], (view, kind)


def test_a_hugeint_spark_cannot_hold_stops_the_run(spark, tmp_path, capsys) -> None:
    """An integer of 39 digits in a view that Spark's sinks write as ``decimal(38,0)`` stops
    the run saying so (it was written as NULL, and rows holding two such values merged)."""
    (tmp_path / "tables.sql").write_text("CREATE TABLE k (id INTEGER, h HUGEINT);")
    (tmp_path / "views.sql").write_text("CREATE VIEW v AS SELECT * FROM k;")
    (tmp_path / "changes").mkdir()
    (tmp_path / "changes" / "changes-001.jsonl").write_text(
        '{"table": "k", "op": "insert", "row": [1, 99999999999999999999999999999999999999]}\n'
        '{"table": "k", "op": "insert", "row": [2, 100000000000000000000000000000000000001]}\n')
    sinks = "".join(f'[[sinks]]\nview = "v"\ntype = "{kind}"\npath = "out/v.{kind}"\n'
                    for kind in ALL_SINKS)
    path = tmp_path / "pipeline.toml"
    path.write_text('state_dir = "state"\ntables = ["tables.sql"]\nviews = ["views.sql"]\n'
                    f'{SPARK}\n[source]\npath = "changes"\n{sinks}')
    assert main(["run", str(path)]) == 1
    err = capsys.readouterr().err
    assert "column h holds an integer of more than 38 digits" in err, err[-2000:]


def test_killed_run_resumes_with_nothing_lost_or_doubled(tmp_path) -> None:
    """SIGKILL the whole Spark application mid-stream, then run it again to the end."""
    stream = Stream(seed=13).generate(480)
    WRITERS["jsonl"](tmp_path / "changes", stream.records, files=6)
    path = spark_pipeline(tmp_path, sinks=ONE_OF_EACH)
    env = dict(os.environ)  # PYSPARK_PYTHON from tests/conftest.py
    command = [sys.executable, "-m", "upkeep.cli", "run", str(path)]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    commits = tmp_path / "state" / "checkpoint" / "commits"
    deadline = time.monotonic() + 240
    while len(list(commits.glob("[0-9]*"))) < 3 and proc.poll() is None:
        assert time.monotonic() < deadline, "the first run made no progress"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_at = len(list(commits.glob("[0-9]*")))
    # six change files and the start tick: at most seven batches
    assert 3 <= killed_at < 7, "the kill came too late to test anything"
    finish = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert finish.returncode == 0, finish.stderr[-3000:]
    assert "nanobind: leaked" not in finish.stderr, finish.stderr[-3000:]
    expected = expected_views(model_of(stream.records))
    for view, sinks in sink_views(tmp_path, sinks=ONE_OF_EACH).items():
        for kind, rows in sinks.items():
            assert rows == expected[view], (view, kind)


def test_spark_submit_runs_a_pipeline_on_a_cluster(tmp_path) -> None:
    """``spark-submit`` of :mod:`upkeep.spark.submit` on a ``local-cluster`` master (two
    executor JVMs): the master and settings come from spark-submit (the pipeline's
    ``[spark] master`` names another), and the sinks equal the model.  The source, the
    state and the delta sinks are named by URI on a Hadoop file system (``viewfs``, its
    mount table given to spark-submit as a cluster's HDFS settings would be), so the
    executors and the driver reach them through Hadoop."""
    stream = Stream(seed=23).generate(200)
    WRITERS["jsonl"](tmp_path / "changes", stream.records, files=2)
    path = write_pipeline(tmp_path, state_dir="state",
                          extra=SPARK.replace("local[2]", "spark://nowhere:7077"),
                          sinks=ONE_OF_EACH)
    root = "viewfs://cluster/out"
    text = path.read_text().replace('state_dir = "state"', f'state_dir = "{root}/state"')
    text = text.replace('path = "changes"', f'path = "{root}/changes"')
    for local in [f"out/{v}.{kind}" for v in VIEW_KINDS for kind in ("jsonl", "deltas")]:
        text = text.replace(f'path = "{local}"', f'path = "{root}/{local}"')
    path.write_text(text)
    assert text.count(f'"{root}/') == 4  # source, state, a jsonl and a deltas sink
    app = subprocess.run([sys.executable, "-m", "upkeep.spark.submit", "--path"],
                         capture_output=True, text=True, check=True).stdout.strip()
    env = {**os.environ, "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = subprocess.run([str(Path(sys.executable).parent / "spark-submit"), "--master",
                           "local-cluster[2,1,1024]", "--conf", "spark.ui.enabled=false",
                           "--conf", "spark.sql.shuffle.partitions=2", "--conf",
                           f"spark.hadoop.fs.viewfs.mounttable.cluster.link./out="
                           f"{tmp_path.as_uri()}", app, str(path)],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (tmp_path / "state" / "checkpoint" / "commits").is_dir()
    expected = expected_views(model_of(stream.records))
    for view, sinks in sink_views(tmp_path, sinks=ONE_OF_EACH).items():
        for kind, rows in sinks.items():
            assert rows == expected[view], (view, kind)


def test_sinks_write_a_batch_concurrently_and_a_failure_is_raised_when_all_have_ended() -> None:
    """The executor sinks of one micro-batch write at once (each waits here for the others:
    one after another they would never meet), and one sink's failure is raised only after
    the others have written (a retried batch rewrites them all)."""
    meeting = threading.Barrier(3, timeout=30)
    wrote: list[str] = []

    class Meeting:
        def __init__(self, view: str, fails: bool = False):
            self.view, self.fails = view, fails

        def write(self, frame, batch: int) -> None:
            meeting.wait()
            if self.fails:
                raise OSError(f"{self.view}: disk full")
            time.sleep(0.2)
            wrote.append(f"{self.view}@{batch}")

    with pytest.raises(OSError, match="b: disk full"):
        write_concurrently([Meeting("a"), Meeting("b", fails=True), Meeting("c")], None, 4)
    assert sorted(wrote) == ["a@4", "c@4"]


def test_a_bad_record_stops_the_run_naming_it(spark, tmp_path, capsys) -> None:
    (tmp_path / "changes").mkdir()
    (tmp_path / "changes" / "changes-00001.jsonl").write_text(
        '{"table": "orders", "op": "insert", "row": [1, 1, "2024-01-01", "9.50", 2, null]}\n'
        '{"table": "orders", "op": "insert", "row": [2, 1, "not a date", "1.00", 1, null]}\n')
    path = spark_pipeline(tmp_path)
    assert main(["run", str(path)]) == 1
    err = capsys.readouterr().err
    assert "changes-00001.jsonl, line 2" in err and "day" in err
    assert jsonl_batches(tmp_path / "out" / "revenue.jsonl") == {}  # no batch changed it


def test_of_two_equal_records_the_one_at_fault_is_named(spark, tmp_path, capsys) -> None:
    """A row deleted twice: the second delete is the bad record (the first equal change's
    record was named, and in a dead-letter run the good delete was left out)."""
    (tmp_path / "changes").mkdir()
    row = '[1, 1, "2024-01-01", "9.50", 2, null]'
    (tmp_path / "changes" / "changes-00001.jsonl").write_text(
        f'{{"table": "orders", "op": "insert", "row": {row}}}\n'
        '{"table": "orders", "op": "insert", "row": [2, 1, "2024-01-02", "1.00", 1, null]}\n'
        f'{{"table": "orders", "op": "delete", "row": {row}}}\n'
        f'{{"table": "orders", "op": "delete", "row": {row}}}\n')
    path = spark_pipeline(tmp_path)
    assert main(["run", str(path)]) == 1
    err = capsys.readouterr().err
    assert "changes-00001.jsonl, line 4" in err, err


@pytest.mark.parametrize("on_error, state", [("skip", "shards"), ("dead-letter", "shards"),
                                             ("dead-letter", "keyed")])
def test_rejected_records_are_left_out_whole(spark, tmp_path, on_error, state) -> None:
    """Every kind of bad record of the local pipeline's tests, on Spark: the good records give
    the model's views, each bad one is reported once with its file and line.  In keyed
    state the failed micro-batch is judged again on the driver and run without them."""
    good = Stream(seed=17).generate(200).records
    lines = [json.dumps(r) for r in good]
    bad_at = {}
    gap = (len(good) - 20) // len(BAD)  # every bad record lands inside the stream
    for k, (record, _text) in enumerate(BAD.values()):
        bad_at[15 + gap * k] = record
        lines.insert(15 + gap * k, line_of(record))
    write_jsonl(tmp_path / "changes", lines, files=3)
    # keyed: two micro-batches with bad records, the second judged over committed state
    spark_table = SPARK + 'state = "shards"\n' if state == "shards" else SPARK.replace(
        "files_per_batch = 1", 'files_per_batch = 2')
    path = write_pipeline(tmp_path, state_dir="state",
                          extra=f'on_error = "{on_error}"\n' + spark_table,
                          sinks=ONE_OF_EACH)
    runner = SparkPipelineRunner(load_config(path), spark=spark)
    if state == "keyed":
        plan = make_plan(runner.catalog.local_catalog, 2, keyed=True)
        assert plan.keyed is not None and plan.keyed.views, plan.unkeyed
    runner.run()
    assert ran_keyed(tmp_path, runner) == (state == "keyed")
    assert runner.rejected == len(BAD)
    expected = expected_views(model_of(good))
    for view, sinks in sink_views(tmp_path, sinks=ONE_OF_EACH).items():
        for kind, rows in sinks.items():
            assert rows == expected[view], (view, kind)
    dead = tmp_path / "pipeline.dead-letter.jsonl"
    if on_error == "skip":
        assert not dead.exists()
        return
    size = -(-len(lines) // 3)
    entries = {(e["_source"]["file"], e["_source"]["line"]): e for e in jsonl_lines(dead)}
    assert len(entries) == len(BAD)
    for index, record in bad_at.items():
        entry = entries[(f"changes-{index // size + 1:03d}.jsonl", index % size + 1)]
        text = next(t for r, t in BAD.values() if r == record)
        assert text in entry["_error"], (text, entry)


def test_a_batch_files_are_read_from_the_file_source_log_compacted_or_not(spark,
                                                                          tmp_path) -> None:
    """The log's lines as Spark 4 writes them (percent-encoded URIs; every tenth batch a
    ``.compact`` file listing all batches so far), read through Hadoop: each file's
    location, decoded as Hadoop takes a path."""
    log = tmp_path / "sources" / "0"
    log.mkdir(parents=True)

    def entry(name: str, batch: int) -> str:
        return json.dumps({"path": f"file://{tmp_path}/in/{name}", "timestamp": 1,
                           "batchId": batch})

    (log / "9.compact").write_text("v1\n" + "\n".join(
        entry(f"f%20{b:02d}%25.jsonl", b) for b in range(9)) + "\n" + entry("b.jsonl", 9)
        + "\n" + entry("a.jsonl", 9) + "\n")
    (log / "10").write_text("v1\n" + entry("c%2310.jsonl", 10) + "\n")
    files = files_for(spark, local_uri(tmp_path))
    checkpoint = local_uri(tmp_path)
    assert _batch_files(files, checkpoint, 9) == [f"file://{tmp_path}/in/a.jsonl",
                                                  f"file://{tmp_path}/in/b.jsonl"]
    assert _batch_files(files, checkpoint, 10) == [f"file://{tmp_path}/in/c#10.jsonl"]
    (log / "3").write_text("v1\n" + entry("f%20x%25.jsonl", 3) + "\n")
    assert _batch_files(files, checkpoint, 3) == [f"file://{tmp_path}/in/f x%.jsonl"]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "f x%.jsonl").write_text("read through Hadoop\n")
    assert files.read_text(_batch_files(files, checkpoint, 3)[0]) == "read through Hadoop\n"


def test_the_rows_a_stopping_batch_is_judged_over_are_read_by_a_where_that_compiles() -> None:
    """``_meeting``'s WHERE, through the executors' compiler (``dml.predicate``), keeps
    the rows sharing a value of the batch's rows' first key column; a NaN, which has no
    SQL literal, reads every row; a table named by a keyword compiles too."""
    from upkeep.spark.dml import predicate
    from upkeep.spark.pipeline import _meeting
    from upkeep.types import SqlType

    columns = [("v", SqlType("DOUBLE")), ("n", SqlType("INTEGER"))]
    where = _meeting(columns, None, [(1.5, 1), (None, 2)])
    test = predicate("order", columns, where)
    assert [test(row) is True for row in [(1.5, 9), (None, 9), (2.5, 1)]] == [True, True, False]
    assert _meeting(columns, None, [(float("nan"), 1), (1.5, 1)]) is None
    assert _meeting(columns, (1,), [(1.5, 7)]) == '"n" IN (7)'


def test_spark_only_offers_what_it_can_keep(tmp_path, capsys) -> None:
    path = write_pipeline(tmp_path, extra=SPARK, sinks={"revenue": ["duckdb"]})
    (tmp_path / "changes").mkdir()
    assert main(["run", str(path)]) == 1
    assert "sink type 'duckdb' is not available on the spark engine" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["run", str(path), "--engine", "flink"])


def test_rate_source_for_load_tests(spark, tmp_path) -> None:
    """Generated orders (Spark's rate source) flow through the views like change files."""
    rate = '''run_seconds = 180
[[spark.rate]]
table = "orders"
rows_per_second = 50
columns = { ok = "value", ck = "value % 7", day = "date_add(DATE'2024-01-01', CAST(value % 30 AS INT))", price = "CAST((value % 1000) / 10 AS DECIMAL(10,2))", qty = "CAST(value % 9 AS INT)", note = "NULL" }
'''
    (tmp_path / "changes").mkdir()
    path = write_pipeline(tmp_path, extra=SPARK + rate,
                          sinks=every_view("jsonl"))
    stop = threading.Event()

    def stop_once_orders_arrived(batch_id: int, changes) -> None:
        if any(row[0] for row, w in changes.get("order_count", []) if w > 0):
            stop.set()

    SparkPipelineRunner(load_config(path), spark=spark, stop=stop,
                        on_batch=stop_once_orders_arrived).run()
    assert stop.is_set(), "no generated rows arrived within run_seconds"
    (tmp_path / "keyed" / "changes").mkdir(parents=True)
    keyed = load_config(write_pipeline(
        tmp_path / "keyed", extra='on_error = "skip"\n' + SPARK.replace(
            "files_per_batch = 1", 'state = "keyed"') + rate, sinks=every_view("jsonl")))
    with pytest.raises(PipelineError, match="a rate source stops at a rejected record"):
        SparkPipelineRunner(keyed, spark=spark)
    views = {v: read_jsonl_batches(tmp_path / "out" / f"{v}.jsonl", v) for v in VIEW_KINDS}
    [(n, _)] = views["order_count"]
    assert n > 0
    import datetime as dt
    from decimal import Decimal
    orders = Counter((v, v % 7, dt.date(2024, 1, 1) + dt.timedelta(v % 30),
                      Decimal(v % 1000) / 10, v % 9, None) for v in range(n))
    expected = expected_views({"customers": Counter(), "orders": orders})
    assert views == {v: expected[v] for v in VIEW_KINDS}


def test_explain_shows_each_views_shard_layout(tmp_path, capsys) -> None:
    path = write_pipeline(tmp_path, extra=SPARK, sinks={})
    assert main(["explain", str(path)]) == 0
    out = capsys.readouterr().out
    assert "spark: 2 shards, orders by column" in out  # big_orders: orders partitioned
    assert "spark: one shard" in out  # order_count: a global aggregate


def test_a_source_directory_with_glob_characters_is_refused(spark, tmp_path) -> None:
    """Spark's file-stream source reads its directory as a Hadoop glob pattern: a source
    under ``runs[1]`` is refused by name before anything runs."""
    base = tmp_path / "runs[1]"
    base.mkdir()
    (base / "changes").mkdir()
    config = load_config(spark_pipeline(base))
    with pytest.raises(PipelineError, match=r"holds '\[\]', which Spark reads as a Hadoop glob"):
        SparkPipelineRunner(config, spark=spark)
    assert sorted(p.name for p in base.iterdir()) == ["changes", "pipeline.toml", "tables.sql",
                                                      "views.sql"]


def test_a_source_or_state_hadoop_cannot_reach_is_refused_at_start(spark, tmp_path) -> None:
    """A URI whose scheme Spark has no file system for, or a source directory that is not
    there, stops the run before any query starts, naming the location."""
    (tmp_path / "changes").mkdir()
    config = load_config(spark_pipeline(tmp_path, sinks={}))
    root = mount(spark, tmp_path / "mounted")
    for other, said in (
            (dataclasses.replace(config, state_dir="nofs://host/state"),
             'nofs://host/state: No FileSystem for scheme "nofs"'),
            # PySpark hands this one over as its own IllegalArgumentException
            (dataclasses.replace(config, state_dir="file://otherhost/state"),
             "file://otherhost/state: Wrong FS"),
            (dataclasses.replace(config, source=dataclasses.replace(
                config.source, path=f"{root}/missing")),
             f"{root}/missing is not a directory")):
        with pytest.raises(PipelineError, match=re.escape(said)):
            SparkPipelineRunner(other, spark=spark).run()
    assert not (tmp_path / "state").exists()
