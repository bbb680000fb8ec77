"""The Spark pipeline's file sinks, written by the executors (``upkeep.spark.sinks``): each
micro-batch lands exactly once whatever Spark replays, a stopped run's uncommitted output is
removed at start, and a ``parquet`` snapshot keeps duplicates and the batch it includes.
Micro-batches are given as the delta stream's frames, so no streaming query is needed."""

from __future__ import annotations

import json
import os
import uuid
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from upkeep.codecs.spark_rows import encode_row
from upkeep.io.errors import PipelineError
from upkeep.io.sinks.base import SinkConfig
from upkeep.local import Connection
from upkeep.spark.codec import OUTPUT_SCHEMA
from upkeep.spark.hadoop_files import HadoopFiles, files_for
from upkeep.spark.pipeline import _emitted_counts
from upkeep.spark.sinks import batch_id, open_sink

VIEW = "v"


@pytest.fixture
def catalog() -> Connection:
    """A view whose columns clash with the sinks' own names (``weight``, ``row``)."""
    db = Connection()
    db.execute("CREATE TABLE t (k INTEGER, weight DECIMAL(6,2), \"row\" VARCHAR)")
    db.execute(f"CREATE VIEW {VIEW} AS SELECT k, weight, \"row\" FROM t")
    return db


def frame(spark, changes: list[tuple[tuple, int]]):
    """A micro-batch of the delta stream: the view's changes, spread over partitions and
    with each change split in two (+2 as +1 +1), as shards emit them."""
    rows = [(VIEW, encode_row(row), w // abs(w)) for row, w in changes for _ in range(abs(w))]
    rows.append(("other", encode_row((1,)), 1))  # another view's change: not this sink's
    return spark.createDataFrame(rows, OUTPUT_SCHEMA).repartition(3)


BATCHES = [
    [((1, Decimal("1.50"), "a"), 2), ((2, None, "b"), 1)],
    [((1, Decimal("1.50"), "a"), -1), ((3, Decimal("0.10"), None), 1)],
    [((2, None, "b"), -1), ((4, Decimal("9.99"), "d"), 3)],
    [((4, Decimal("9.99"), "d"), -1), ((1, Decimal("1.50"), "a"), 1)],
]


def model(upto: int) -> Counter:
    state: Counter = Counter()
    for changes in BATCHES[:upto + 1]:
        for row, w in changes:
            state[row] += w
    return +state


def no_late_start(view: str) -> list[tuple]:
    """The fill of these tests' sinks: none starts late (the pipeline tests fill some)."""
    raise AssertionError(f"a sink of {view} started late")


def sink(catalog, kind: str, path: Path, committed: int, spark, **options):
    return open_sink(SinkConfig(VIEW, kind, f"sink {kind}", {"path": path, **options}),
                     catalog, committed, spark, no_late_start)


def snapshot(path: Path) -> tuple[int, Counter]:
    """The batch a parquet snapshot includes, and its rows."""
    rows = pq.read_table(path).to_pylist()
    return batch_id(Path(os.readlink(path)).name), Counter(tuple(r.values()) for r in rows)


def test_parquet_snapshot_every_replay_and_restart(spark, catalog, tmp_path) -> None:
    path = tmp_path / "v.parquet"
    first = sink(catalog, "parquet", path, -1, spark, every=2)
    assert snapshot(path) == (-1, Counter())  # there from the start, empty
    first.write(frame(spark, BATCHES[0]), 0)
    assert snapshot(path) == (-1, Counter())  # every 2 batches
    first.write(frame(spark, BATCHES[1]), 1)
    assert snapshot(path) == (1, model(1))
    first.write(frame(spark, BATCHES[0]), 1)  # a replay of a batch it includes: skipped
    assert snapshot(path) == (1, model(1))
    first.write(frame(spark, BATCHES[2]), 2)  # pending; the run stops before Spark commits
    # a new run: batch 2 was never committed, so Spark replays it; its pending delta goes
    second = sink(catalog, "parquet", path, 1, spark, every=1)
    assert snapshot(path) == (1, model(1))
    second.write(frame(spark, BATCHES[2]), 2)
    second.write(frame(spark, BATCHES[3]), 3)
    assert snapshot(path) == (3, model(3))
    # merged and linked, but killed before Spark committed batch 3: the replay is skipped
    third = sink(catalog, "parquet", path, 2, spark)
    third.write(frame(spark, BATCHES[3]), 3)
    third.close()
    assert snapshot(path) == (3, model(3))
    store = tmp_path / "v.parquet.snapshots"
    assert sorted(p.name for p in store.iterdir()) == ["batch=3", "pending"]
    assert list((store / "pending").iterdir()) == []


def test_parquet_snapshot_merges_what_is_pending_at_close(spark, catalog, tmp_path) -> None:
    path = tmp_path / "v.parquet"
    s = sink(catalog, "parquet", path, -1, spark, every=10)
    for b in range(3):
        s.write(frame(spark, BATCHES[b]), b)
    assert snapshot(path) == (-1, Counter())
    s.close()
    assert snapshot(path) == (2, model(2))


def test_parquet_snapshot_of_a_view_that_empties_and_fills_again(spark, catalog,
                                                                   tmp_path) -> None:
    path = tmp_path / "v.parquet"
    s = sink(catalog, "parquet", path, -1, spark)
    s.write(frame(spark, BATCHES[0]), 0)
    s.write(frame(spark, [(row, -w) for row, w in BATCHES[0]]), 1)
    assert snapshot(path) == (1, Counter())  # a snapshot of no rows, still readable
    s.write(frame(spark, BATCHES[0]), 2)
    assert snapshot(path) == (2, model(0))


def test_jsonl_batches_are_exactly_once(spark, catalog, tmp_path) -> None:
    path = tmp_path / "v.jsonl"
    first = sink(catalog, "jsonl", path, -1, spark)
    for b in range(3):
        first.write(frame(spark, BATCHES[b]), b)
    first.write(frame(spark, BATCHES[1]), 1)  # Spark replays batch 1: overwritten, not added
    sink(catalog, "jsonl", path, 1, spark)  # batch 2 never committed: removed at start
    assert sorted(p.name for p in path.iterdir()) == ["batch=0", "batch=1"]
    state: Counter = Counter()
    for b in (0, 1):
        for part in sorted((path / f"batch={b}").glob("part-*")):
            for line in part.read_text().splitlines():
                entry = json.loads(line)
                assert entry["batch"] == b and entry["weight"] in (1, -1)
                row = entry["row"]
                assert list(row) == ["k", "weight", "row"]  # the view's own names
                state[(row["k"], None if row["weight"] is None else Decimal(row["weight"]),
                       row["row"])] += entry["weight"]
    assert +state == model(1)


@pytest.mark.parametrize("kind", ["jsonl", "parquet", "parquet-deltas"])
def test_a_file_in_the_way_is_refused(spark, catalog, tmp_path, kind) -> None:
    path = tmp_path / "v.out"
    path.write_text("written by the local engine\n")
    with pytest.raises(PipelineError, match="is a file; on the spark engine"):
        sink(catalog, kind, path, -1, spark)
    assert path.read_text() == "written by the local engine\n"


def test_a_directory_in_the_way_of_a_snapshot_is_refused(spark, catalog, tmp_path) -> None:
    path = tmp_path / "v.parquet"
    (path / "batch=0").mkdir(parents=True)  # say, a parquet-deltas sink's directory
    with pytest.raises(PipelineError, match="is a directory; on the spark engine"):
        sink(catalog, "parquet", path, -1, spark)
    assert [p.name for p in path.iterdir()] == ["batch=0"]


def test_a_fresh_run_starts_a_snapshot_afresh(spark, catalog, tmp_path) -> None:
    """A checkpoint that has committed nothing (a new or in-memory state_dir) is a new run:
    its batch 0 is not skipped as one the old snapshot includes, and the old rows go, as
    the local sink overwrites its file."""
    path = tmp_path / "v.parquet"
    old = sink(catalog, "parquet", path, -1, spark)
    for b in range(3):
        old.write(frame(spark, BATCHES[b]), b)
    assert snapshot(path) == (2, model(2))
    new = sink(catalog, "parquet", path, -1, spark)
    assert snapshot(path) == (-1, Counter())
    new.write(frame(spark, BATCHES[1]), 0)
    assert snapshot(path) == (0, +Counter(dict(BATCHES[1])))
    # a checkpoint behind the snapshot by more than one batch is another run's, too
    later = sink(catalog, "parquet", tmp_path / "w.parquet", -1, spark)
    for b in range(3):
        later.write(frame(spark, BATCHES[b]), b)
    sink(catalog, "parquet", tmp_path / "w.parquet", 0, spark)
    assert snapshot(tmp_path / "w.parquet") == (-1, Counter())


def test_the_snapshot_before_the_latest_stays_for_readers(spark, catalog, tmp_path) -> None:
    """A reader that followed the link just before a swap still finds its snapshot."""
    path = tmp_path / "v.parquet"
    s = sink(catalog, "parquet", path, -1, spark)
    for b in range(3):
        s.write(frame(spark, BATCHES[b]), b)
        assert snapshot(path) == (b, model(b))
    store = tmp_path / "v.parquet.snapshots"
    assert sorted(p.name for p in store.iterdir()) == ["batch=1", "batch=2", "pending"]
    assert Counter(tuple(r.values()) for r in pq.read_table(store / "batch=1").to_pylist()) \
        == model(1)


@pytest.mark.parametrize("kind", ["jsonl", "parquet-deltas"])
def test_a_half_written_batch_is_never_in_place(spark, catalog, tmp_path, kind) -> None:
    """A batch is written under a hidden name and renamed into place; one a stopped run
    left half-written is removed at start."""
    if kind == "parquet-deltas":  # which adds a weight column of its own
        catalog = Connection()
        catalog.execute("CREATE TABLE t (k INTEGER, amount DECIMAL(6,2), label VARCHAR)")
        catalog.execute(f"CREATE VIEW {VIEW} AS SELECT k, amount, label FROM t")
    path = tmp_path / "v.out"
    s = sink(catalog, kind, path, -1, spark)
    s.write(frame(spark, BATCHES[0]), 0)
    assert [p.name for p in path.iterdir()] == ["batch=0"]
    (path / ".batch=1.writing").mkdir()
    (path / ".batch=1.writing" / "part-0").write_text("half\n")
    sink(catalog, kind, path, 0, spark)
    assert [p.name for p in path.iterdir()] == ["batch=0"]


def test_sink_errors_are_pipeline_errors(spark, catalog, tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(PipelineError, match="sink jsonl: cannot prepare"):
        sink(catalog, "jsonl", blocker / "v.jsonl", -1, spark)
    path = tmp_path / "v.parquet"
    s = sink(catalog, "parquet", path, -1, spark, every=10)
    s.write(frame(spark, BATCHES[0]), 0)
    pending = tmp_path / "v.parquet.snapshots" / "pending" / "batch=0"
    for part in pending.iterdir():
        part.unlink()
    pending.rmdir()
    with pytest.raises(PipelineError, match="sink parquet: the last snapshot could not be"):
        s.close()
    assert snapshot(path) == (-1, Counter())


def test_a_row_removed_and_added_back_is_no_change(spark) -> None:
    """Whether an executor sink writes a batch: counted net, as the driver's decoded
    changes are, so a batch that removes a row and adds it back changes nothing."""
    row = encode_row((1, Decimal("1.50"), "a"))
    changes = [(VIEW, row, -1), (VIEW, row, 1), ("w", row, 1), ("w", row, 1),
               ("w", encode_row((2, None, None)), -1)]
    counts = _emitted_counts(spark.createDataFrame(changes, OUTPUT_SCHEMA), {VIEW, "w"})
    assert counts.get(VIEW, (0, 0)) == (0, 0)
    assert counts["w"] == (2, 1)


@pytest.mark.parametrize("directory", ["runs[1]/{a,b}*?", "run:[1]", "at:{x,y}/x:y*?"])
def test_a_snapshot_under_a_path_with_glob_characters(spark, catalog, tmp_path,
                                                      directory: str) -> None:
    """Hadoop reads a path as a glob pattern: a snapshot under ``runs[1]`` or ``{a,b}``
    once failed its first merge with PATH_NOT_FOUND (a raw AnalysisException), and with
    the glob characters escaped, one under ``run:[1]`` (a ``:`` and a glob character in
    one component) failed with "Relative path in absolute URI"."""
    path = tmp_path / directory / "v.parquet"
    out = sink(catalog, "parquet", path, -1, spark, every=2)
    for batch, changes in enumerate(BATCHES):
        out.write(frame(spark, changes), batch)
    out.close()
    assert snapshot(path) == (len(BATCHES) - 1, model(len(BATCHES) - 1))


def mount(spark, directory: Path) -> str:
    """A URI on a Hadoop file system other than the local one (``viewfs``, mounting
    ``directory`` at ``/out``): a sink that handled its files as local paths fails there,
    as it would on HDFS or an object store."""
    table = f"upkeep-{uuid.uuid4().hex[:12]}"  # Hadoop caches a file system per authority
    directory.mkdir(parents=True, exist_ok=True)
    spark.sparkContext._jsc.hadoopConfiguration().set(
        f"fs.viewfs.mounttable.{table}.link./out", directory.as_uri())
    return f"viewfs://{table}/out"


def delta_sink_rows(kind: str, path: Path) -> dict[int, Counter]:
    """Each micro-batch's net delta as a ``jsonl`` or ``parquet-deltas`` sink holds it."""
    out: dict[int, Counter] = {}
    for directory in sorted(path.iterdir()):
        rows: Counter = out.setdefault(batch_id(directory.name), Counter())
        if kind == "parquet-deltas":
            for r in pq.read_table(directory).to_pylist():
                rows[r["k"], r["amount"], r["label"]] += r["weight"]
            continue
        for part in sorted(directory.glob("part-*")):
            for line in part.read_text().splitlines():
                entry = json.loads(line)
                assert entry["batch"] == batch_id(directory.name)
                amount = entry["row"]["amount"]
                rows[entry["row"]["k"], None if amount is None else Decimal(amount),
                     entry["row"]["label"]] += entry["weight"]
    return out


@pytest.mark.parametrize("kind", ["jsonl", "parquet-deltas"])
def test_delta_sinks_on_another_hadoop_file_system(spark, tmp_path, kind) -> None:
    """A sink at a URI (HDFS, an object store: here ``viewfs``) is written there by the
    executors, and the driver renames, removes and fills its batches through Hadoop, as on
    a local path: each batch once, a replay replacing its own, uncommitted and half-written
    batches removed at start, a late sink filled with its view's rows."""
    db = Connection()
    db.execute("CREATE TABLE t (k INTEGER, amount DECIMAL(6,2), label VARCHAR)")
    db.execute(f"CREATE VIEW {VIEW} AS SELECT k, amount, label FROM t")
    root = mount(spark, tmp_path / "mounted")
    local = tmp_path / "mounted" / "v.out"
    first = sink(db, kind, f"{root}/v.out", -1, spark)
    for b in range(3):
        first.write(frame(spark, BATCHES[b]), b)
    first.write(frame(spark, BATCHES[1]), 1)  # a replay: replaces batch 1, adds nothing
    (local / ".batch=3.writing").mkdir()  # a batch a stopped run left half-written
    sink(db, kind, f"{root}/v.out", 1, spark)  # batch 2 was never committed: removed
    assert sorted(p.name for p in local.iterdir()) == ["batch=0", "batch=1"]
    assert delta_sink_rows(kind, local) == {b: Counter(dict(BATCHES[b])) for b in (0, 1)}
    # a sink new to a pipeline that has committed batch 1 starts from the view's rows
    rows = [r for r, n in model(1).items() for _ in range(n)]
    late = open_sink(SinkConfig(VIEW, kind, f"sink {kind}", {"path": f"{root}/late.out"}),
                     db, 1, spark, lambda view: rows)
    late.write(frame(spark, BATCHES[2]), 2)
    assert delta_sink_rows(kind, tmp_path / "mounted" / "late.out") == {
        1: model(1), 2: Counter(dict(BATCHES[2]))}


@pytest.mark.parametrize(("uri", "said"), [
    ("s3a://bucket/v", "S3AFileSystem not found"),  # s3a's connector is hadoop-aws
    ("nofs://host/v", 'No FileSystem for scheme "nofs"')])
def test_a_file_system_hadoop_does_not_have_is_a_pipeline_error(spark, catalog, uri,
                                                                said) -> None:
    """A scheme with no file system on Spark's classpath is said at start, naming the sink,
    the path and what to add."""
    with pytest.raises(PipelineError, match=f"sink jsonl: cannot prepare {uri}: .*{said}.*"
                                            f"connector JARs go on Spark's classpath"):
        sink(catalog, "jsonl", uri, -1, spark)


def test_a_snapshot_needs_a_local_path(spark, catalog, tmp_path) -> None:
    """The ``parquet`` sink's snapshot is a symbolic link, which an object store has not:
    at a URI it is refused, pointing to ``parquet-deltas``."""
    root = mount(spark, tmp_path / "mounted")
    with pytest.raises(PipelineError, match="symbolic link .* parquet-deltas sink"):
        sink(catalog, "parquet", f"{root}/v.parquet", -1, spark)
    assert list((tmp_path / "mounted").iterdir()) == []


def test_the_driver_never_renames_into_a_directory_left_in_the_way(spark, tmp_path) -> None:
    """Hadoop's rename of a directory onto an existing one moves (or copies) it inside:
    a replayed batch whose old directory could not be removed whole would land under a
    hidden name no reader reads.  The driver refuses a rename onto anything, on a Hadoop
    file system as on the local disk, so such a batch fails and is retried."""
    root = mount(spark, tmp_path / "mounted")
    for where, files in ((root, files_for(spark, root)),
                         (f"file://{tmp_path}/local", files_for(spark, f"file://{tmp_path}/local"))):
        assert isinstance(files, HadoopFiles) == where.startswith("viewfs:")
        files.mkdirs(f"{where}/new")
        files.write_bytes(f"{where}/new/part-0", b"new rows")
        files.mkdirs(f"{where}/old")
        with pytest.raises(OSError, match="something is in the way there"):
            files.rename(f"{where}/new", f"{where}/old")
        files.remove(f"{where}/old")
        files.remove(f"{where}/old")  # absent: nothing to do
        files.rename(f"{where}/new", f"{where}/old")
        assert files.names(where) == ["old"]
        assert files.read_bytes(f"{where}/old/part-0") == b"new rows"


def test_a_file_is_read_from_a_hadoop_file_system_in_chunks(spark, tmp_path,
                                                          monkeypatch) -> None:
    """A change file read again on the driver comes from the JVM a chunk at a time, whole
    and checked against its length (one Java array of a big file filled the driver's heap
    and came back empty)."""
    import upkeep.spark.hadoop_files as hadoop_files

    monkeypatch.setattr(hadoop_files, "CHUNK", 1000)
    root = mount(spark, tmp_path / "mounted")
    data = bytes(range(256)) * 20  # 5,120 bytes: six chunks
    (tmp_path / "mounted" / "changes.jsonl").write_bytes(data)
    assert files_for(spark, root).read_bytes(f"{root}/changes.jsonl") == data


def test_a_sink_at_a_file_systems_root_is_refused(spark, catalog) -> None:
    """A sink writes a directory of its own, beside which its first rows are built under
    a hidden name: a bucket's root has no such place."""
    with pytest.raises(PipelineError, match="s3a://bucket/ is the root of its file system"):
        sink(catalog, "jsonl", "s3a://bucket/", -1, spark)
