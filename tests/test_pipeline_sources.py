"""Change sources: record formats, positions, resuming after an offset, batching."""

from __future__ import annotations

import json
import threading
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from upkeep.pipeline import PipelineError
from upkeep.pipeline.batching import batches
from upkeep.pipeline.config import BatchConfig, SourceConfig
from upkeep.pipeline.source import CAUGHT_UP, FileSource


def records(source):
    return [r for r in source if r is not CAUGHT_UP]


def test_csv_records_start_where_their_first_line_is(tmp_path):
    row = json.dumps({"a": 1, "s": "two\nlines"})  # JSON escapes the newline...
    text = ("table,op,row\n"
            f't,insert,"{json.dumps([1, "x"]).replace(chr(34), chr(34) * 2)}"\n'
            't,insert,"[2,\n 3]"\n'  # ...but a quoted CSV field may span lines
            f't,delete,"{row.replace(chr(34), chr(34) * 2)}"\n'
            "\n"
            "t,INSERT,[3]\n")
    (tmp_path / "c.csv").write_text(text)
    got = records(FileSource(SourceConfig(tmp_path / "c.csv")))
    assert [(r.position.number, r.op, r.row) for r in got] == [
        (2, "insert", [1, "x"]), (3, "insert", [2, 3]),
        (5, "delete", {"a": 1, "s": "two\nlines"}), (7, "insert", [3])]
    assert all(r.error is None for r in got)
    resumed = records(FileSource(SourceConfig(tmp_path / "c.csv"),
                                 resume={"file": "c.csv", "position": 3}))
    assert [r.position.number for r in resumed] == [5, 7]


def test_jsonl_positions_skip_blank_lines_and_resume_across_files(tmp_path):
    for name, lines in (("b.jsonl", ['{"table": "t", "op": "insert", "row": [1]}', "",
                                     '{"table": "t", "op": "delete", "row": [1]}']),
                        ("a.jsonl", ['{"table": "t", "op": "insert", "row": [0]}']),
                        ("notes.txt", ["ignored"]), (".hidden.jsonl", ["ignored"])):
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    got = records(FileSource(SourceConfig(tmp_path)))
    assert [str(r.position) for r in got] == ["a.jsonl, line 1", "b.jsonl, line 1",
                                              "b.jsonl, line 3"]
    source = FileSource(SourceConfig(tmp_path), resume={"file": "b.jsonl", "position": 1})
    assert source.lag() == 2  # lines not read yet (an estimate: the blank one counts)
    assert [str(r.position) for r in records(source)] == ["b.jsonl, line 3"]
    assert source.lag() == 0


def test_parquet_rows_may_be_json_text_or_structs(tmp_path):
    table = pa.table({"table": ["t", "t"], "op": ["insert", "update"],
                      "row": [json.dumps({"a": 1}), None],
                      "before": [None, json.dumps([1])], "after": [None, json.dumps([2])]})
    pq.write_table(table, tmp_path / "x.parquet")
    structs = pa.table({"table": ["t"], "op": ["insert"],
                        "row": pa.array([{"a": 5, "d": "2024-01-01"}])})
    pq.write_table(structs, tmp_path / "y.parquet")
    got = records(FileSource(SourceConfig(tmp_path)))
    assert [(str(r.position), r.op, r.row, r.before, r.after) for r in got] == [
        ("x.parquet, record 1", "insert", {"a": 1}, None, None),
        ("x.parquet, record 2", "update", None, [1], [2]),
        ("y.parquet, record 1", "insert", {"a": 5, "d": "2024-01-01"}, None, None)]


def test_a_single_file_with_an_unknown_extension_needs_a_format(tmp_path):
    (tmp_path / "changes.log").write_text('{"table": "t", "op": "insert", "row": [1]}\n')
    with pytest.raises(PipelineError, match="set source.format"):
        FileSource(SourceConfig(tmp_path / "changes.log"))
    got = records(FileSource(SourceConfig(tmp_path / "changes.log", format="jsonl")))
    assert len(got) == 1
    with pytest.raises(PipelineError, match="does not exist"):
        FileSource(SourceConfig(tmp_path / "missing"))
    with pytest.raises(PipelineError, match="delete the state directory"):
        FileSource(SourceConfig(tmp_path / "changes.log", format="jsonl"),
                   resume={"file": "other.jsonl", "position": 3})


def test_following_a_directory_warns_about_files_arriving_out_of_order(tmp_path):
    line = '{"table": "t", "op": "insert", "row": [1]}\n'
    (tmp_path / "002.jsonl").write_text(line)
    (tmp_path / "003.jsonl").write_text(line)
    warnings: list[str] = []
    stop = threading.Event()
    source = FileSource(SourceConfig(tmp_path, follow=True, poll_interval=0.01), stop=stop,
                        warn=warnings.append)
    it = iter(source)
    assert str(next(it).position) == "002.jsonl, line 1"
    assert str(next(it).position) == "003.jsonl, line 1"
    assert next(it) is CAUGHT_UP
    (tmp_path / "001.jsonl").write_text(line)  # too late: sorts before 003
    (tmp_path / "004.jsonl").write_text(line)
    assert str(next(it).position) == "004.jsonl, line 1"
    assert warnings == ["ignoring 001.jsonl: it arrived after 003.jsonl, which sorts later "
                        "(files must arrive in name order)"]
    stop.set()
    assert list(it) in ([], [CAUGHT_UP])


def test_batches_close_on_size_on_caught_up_and_on_time(tmp_path):
    items = list(range(7))
    cut = [len(b) for b in batches(_records(items), BatchConfig(rows_per_batch=3))]
    assert cut == [3, 3, 1]
    stream = [*_records(range(2)), CAUGHT_UP, CAUGHT_UP, *_records(range(4))]
    assert [len(b) for b in batches(stream, BatchConfig(rows_per_batch=3))] == [2, 0, 3, 1]

    def slow():
        for r in _records(range(6)):
            time.sleep(0.03)
            yield r
    sizes = [len(b) for b in batches(slow(), BatchConfig(rows_per_batch=None,
                                                          commit_interval=0.05))]
    assert sum(sizes) == 6 and len(sizes) >= 2 and max(sizes) < 6


def test_batches_never_split_a_source_transaction():
    txns = ["a", "a", "a", None, "b", "b", "c", "c", "c", "c"]
    stream = _records(range(len(txns)), txns)
    cut = [[r.txn for r in b] for b in batches(stream, BatchConfig(rows_per_batch=2))]
    assert cut == [["a", "a", "a"], [None, "b", "b"], ["c", "c", "c", "c"]]
    # caught up inside a transaction: its records wait for the next record (or the end)
    stream = [*_records(range(3), ["a", "b", "b"]), CAUGHT_UP,
              *_records(range(3, 5), ["b", "c"])]
    cut = [[r.txn for r in b] for b in batches(stream, BatchConfig(rows_per_batch=10))]
    assert cut == [["a"], ["b", "b", "b", "c"]]
    # a stop leaves an open transaction to be read again
    stop = threading.Event()

    def stopping():
        yield from _records(range(3), ["a", "b", "b"])
        stop.set()
        yield from _records(range(3, 4), ["b"])
    cut = [[r.txn for r in b] for b in batches(stopping(), BatchConfig(rows_per_batch=10),
                                               stop)]
    assert cut == [["a"]]
    # also when the stop comes while the source is caught up (a following source then
    # ends): the open transaction was committed before
    stop = threading.Event()

    def idle_then_stopped():
        yield from _records(range(2), ["a", "b"])
        yield CAUGHT_UP
        stop.set()
    cut = [[r.txn for r in b] for b in batches(idle_then_stopped(),
                                               BatchConfig(rows_per_batch=10), stop)]
    assert cut == [["a"]]


def test_a_bad_record_stays_in_its_transaction():
    """A record rejected as it is decoded (an unknown key, a bad op) keeps its ``txn``, so
    the batches never cut its transaction: a view never shows part of it (the batch
    closed at the bad record, and ``skip`` / ``stop`` then committed the part before)."""
    from upkeep.io.records import Position, decode_mapping

    bad = [{"table": "t", "op": "insert", "row": [2], "txn": "A", "oops": 1},
           {"table": "t", "op": "upsert", "row": [2], "txn": "A"},
           {"table": 5, "op": "insert", "row": [2], "txn": "A"}]
    for middle in bad:
        records = [decode_mapping(d, Position("f", i + 1)) for i, d in enumerate([
            {"table": "t", "op": "insert", "row": [1], "txn": "A"}, middle,
            {"table": "t", "op": "insert", "row": [3], "txn": "A"}])]
        assert records[1].error is not None and records[1].txn == "A"
        cut = [[r.position.number for r in b]
               for b in batches(records, BatchConfig(rows_per_batch=1))]
        assert cut == [[1, 2, 3]], middle


def test_a_bad_transaction_id_is_a_bad_record():
    from upkeep.io.records import Position, decode_mapping

    good = decode_mapping({"table": "T", "op": "insert", "row": [1], "txn": 42}, Position("f", 1))
    assert good.error is None and good.txn == "42" and good.images()["txn"] == "42"
    for bad in (True, 1.5, "", {"id": 1}):
        rec = decode_mapping({"table": "t", "op": "insert", "row": [1], "txn": bad},
                             Position("f", 2))
        assert "'txn' must be a non-empty string or an integer" in rec.error
        assert not rec.error.endswith("got ")  # the bad value is shown, "" as ""


def _records(values, txns=None):
    from upkeep.io.records import ChangeRecord, Position

    values = list(values)
    txns = txns or [None] * len(values)
    return [ChangeRecord(Position("f", i + 1), table="t", op="insert", row=[v], txn=txn)
            for i, (v, txn) in enumerate(zip(values, txns, strict=True))]


@pytest.mark.parametrize(("header", "says"), [
    ("table,op,rows", "unknown column 'rows'"), ("table,row", "no column 'op'")])
@pytest.mark.parametrize("records_after", [0, 1])
def test_a_csv_header_at_fault_is_an_error_at_line_1_even_with_no_records(
        tmp_path, header, says, records_after):
    (tmp_path / "c.csv").write_text(header + "\n" + 't,insert,"[1]"\n' * records_after)
    got = records(FileSource(SourceConfig(tmp_path / "c.csv")))
    assert got and got[0].position.number == 1 and says in got[0].error
    assert all(r.error for r in got)  # no record is read under a header at fault


def test_a_byte_order_mark_is_skipped_and_bytes_not_utf8_are_a_bad_record(tmp_path):
    """Excel writes a BOM before a CSV's header; a line whose bytes are not UTF-8 is a bad
    record in CSV as in JSON lines, not committed with its bytes replaced."""
    bom = b"\xef\xbb\xbf"
    (tmp_path / "a.csv").write_bytes(bom + b'table,op,row\nt,insert,"[1, ""caf\xe9""]"\n'
                                     b't,insert,"[2, ""ok""]"\n')
    (tmp_path / "b.jsonl").write_bytes(bom + b'{"table": "t", "op": "insert", "row": [3]}\n')
    got = records(FileSource(SourceConfig(tmp_path)))
    assert [(str(r.position), r.row) for r in got] == [
        ("a.csv, line 2", None), ("a.csv, line 3", [2, "ok"]), ("b.jsonl, line 1", [3])]
    assert got[0].error.startswith("not UTF-8") and got[1].error is got[2].error is None
    resumed = records(FileSource(SourceConfig(tmp_path / "a.csv"),
                                 resume={"file": "a.csv", "position": 2}))
    assert [r.row for r in resumed] == [[2, "ok"]]


def test_the_pipelines_own_files_in_the_source_directory_are_not_read(tmp_path):
    """A source directory that also holds the dead-letter file or a jsonl sink's file
    (``source.path = "."``): read back, a dead letter was rejected again on every run."""
    line = '{"table": "t", "op": "insert", "row": [1]}\n'
    for name in ("c-001.jsonl", "p.dead-letter.jsonl", "out.jsonl"):
        (tmp_path / name).write_text(line)
    source = FileSource(SourceConfig(tmp_path),
                        outputs=[tmp_path / "p.dead-letter.jsonl", tmp_path / "x" / ".." /
                                 "out.jsonl"])
    assert [str(r.position) for r in records(source)] == ["c-001.jsonl, line 1"]


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"])
def test_lines_appended_to_a_followed_csv_file_are_read_whole(tmp_path, bom):
    """A followed CSV file is read again from where the last read ended: that offset
    counts a byte-order mark only when the file has one (it skipped three bytes of the
    next line, ``orders`` read as ``ers``)."""
    path = tmp_path / "c.csv"
    path.write_bytes(bom + b'table,op,row\norders,insert,"[1, ""a""]"\n')
    stop = threading.Event()
    it = iter(FileSource(SourceConfig(path, follow=True, poll_interval=0.01), stop=stop))
    first = next(it)
    assert (first.table, first.row, first.error) == ("orders", [1, "a"], None)
    assert next(it) is CAUGHT_UP
    with path.open("ab") as f:
        f.write(b'orders,insert,"[2, ""b""]"\n')
    second = next(it)
    assert (str(second.position), second.table, second.row, second.error) == (
        "c.csv, line 3", "orders", [2, "b"], None)
    stop.set()
