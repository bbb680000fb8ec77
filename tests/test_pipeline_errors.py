"""Bad change records: each named by file and line; --on-error stop, skip and dead-letter."""

from __future__ import annotations

import datetime as dt
import io
import json
import math
from decimal import Decimal
from pathlib import Path

import pytest
from rich.console import Console
from test_pipeline_support import (
    VIEW_KINDS,
    WRITERS,
    Stream,
    expected_views,
    jsonl_lines,
    model_of,
    normalise,
    read_all_sinks,
    write_jsonl,
    write_pipeline,
)

import upkeep
from upkeep.cli import main
from upkeep.pipeline import PipelineRunner, RecordError, load_config

ORDER = [1, 2, "2024-01-01", "1.00", 3, "n"]
# name -> (the bad record as a JSONL line, what the error says)
BAD = {
    "wrong column count": (
        {"table": "orders", "op": "insert", "row": [1, 2, "2024-01-01"]},
        "'row' has 3 values, table orders has 6 columns"),
    "wrong type": (
        {"table": "orders", "op": "insert", "row": [1, 2, "2024-01-01", "1.00", "many", None]},
        "column qty of table orders: expected INTEGER, got 'many'"),
    "bad date": (
        {"table": "orders", "op": "update", "before": ORDER, "after": [1, 2, "yesterday", 1, 1, "n"]},
        "'after' column day of table orders: expected DATE"),
    "unknown table": (
        {"table": "ordrs", "op": "insert", "row": ORDER},
        "unknown table 'ordrs'"),
    "unknown operation": (
        {"table": "orders", "op": "upsert", "row": ORDER},
        "unknown operation 'upsert'"),
    "op of the wrong type": (
        {"table": "orders", "op": 3, "row": ORDER},
        "'op' must be insert, delete or update, got 3"),
    "table of the wrong type": (
        {"table": ["orders"], "op": "insert", "row": ORDER},
        "'table' must be a string, got [\"orders\"]"),
    "a column named twice": (
        {"table": "customers", "op": "insert", "row": {"ck": 99, "CK": 98, "name": "x",
                                                         "segment": "A"}},
        "'row' names column 'ck' twice ('CK', 'ck'; names are case-insensitive)"),
    "missing column": (
        {"table": "customers", "op": "insert", "row": {"ck": 99, "name": "x"}},
        "'row' lacks column(s) segment of table customers"),
    "unknown column": (
        {"table": "customers", "op": "insert", "row": {"ck": 99, "name": "x", "segment": "A",
                                                         "age": 3}},
        "'row' has unknown column 'age'"),
    "update without after": (
        {"table": "orders", "op": "update", "before": ORDER},
        "an update needs 'after'"),
    "malformed JSON": ('{"table": "orders", "op": "insert", "row": [1, 2', "invalid JSON"),
    "not an object": ('[1, 2, 3]', "a change record must be a JSON object"),
    "a key given twice": ('{"table": "orders", "op": "insert", "op": "delete", "row": '
                          + json.dumps(ORDER) + "}",
                          "invalid JSON: the key 'op' appears twice in one object"),
    "a row's key given twice": (
        '{"table": "customers", "op": "insert", "row": {"ck": 99, "name": "x", '
        '"segment": "A", "ck": 98}}', "the key 'ck' appears twice in one object"),
    "delete of an absent row": (
        {"table": "orders", "op": "delete", "row": [999999, 1, "2024-01-01", "1.00", 3, None]},
        "cannot delete row (999999, 1"),
    "duplicate primary key": (
        {"table": "customers", "op": "insert", "row": [1, "again", "AUTO"]},
        "duplicate primary key (1) in table customers"),
    "NULL in a NOT NULL column": (
        {"table": "customers", "op": "insert", "row": [77, None, "AUTO"]},
        "NULL in NOT NULL column name of table customers"),
}
BATCH = 10


def line_of(record) -> str:
    return record if isinstance(record, str) else json.dumps(record)


def setup(tmp_path, good, bad_at: dict[int, object], on_error="stop", files=2, **kw):
    """Write ``good`` records with bad ones inserted at the given indexes; returns the
    pipeline file and, per bad record, its (file, line)."""
    lines: list[object] = [json.dumps(r) for r in good]
    for index in sorted(bad_at):
        lines.insert(index, line_of(bad_at[index]))
    size = -(-len(lines) // files)
    write_jsonl(tmp_path / "changes", lines, files=files)
    where = {i: f"changes-{i // size + 1:03d}.jsonl, line {i % size + 1}"
             for i in range(len(lines))}
    path = write_pipeline(tmp_path, rows_per_batch=BATCH, extra=f'on_error = "{on_error}"',
                          sinks={"revenue": ["duckdb", "jsonl"], "big_orders": ["sqlite"],
                                 "order_count": ["parquet"]}, **kw)
    return path, where


def run(path, db=None, **kw):
    runner = PipelineRunner(load_config(path), db=db or upkeep.connect(), progress="none",
                            console=Console(file=io.StringIO(), width=200), **kw)
    return runner, runner.run


def assert_views(runner, tmp_path, model):
    expected = expected_views(model)
    for view in VIEW_KINDS:
        assert normalise(view, runner.db.view(view).rows()) == expected[view], view
        for kind, rows in read_all_sinks(tmp_path / "out", view).items():
            assert rows == expected[view], f"{kind} sink of {view}"


@pytest.mark.parametrize("case", list(BAD))
def test_stop_names_file_and_line_and_applies_nothing_of_the_batch(tmp_path, case):
    good = Stream(seed=11).generate(70).records
    record, text = BAD[case]
    k = 43  # inside the fifth batch (records 40..49)
    path, where = setup(tmp_path, good, {k: record})
    runner, go = run(path)
    with pytest.raises(RecordError) as info:
        go()
    message = str(info.value)
    assert message.startswith(where[k] + ": "), message
    assert text in message
    assert "Nothing of its batch" in message and "--on-error skip or dead-letter" in message
    # exactly the four batches before the failing one are committed
    committed = k // BATCH * BATCH
    source = runner.db.metadata()["source"]
    assert f"{source['file']}, line {source['position']}" == where[committed - 1]
    assert runner.db.metadata()["batch"] == committed // BATCH
    assert_views(runner, tmp_path, model_of(good[:committed]))


def test_stop_from_the_command_line_exits_non_zero_with_the_message(tmp_path, capsys):
    good = Stream(seed=12).generate(30).records
    record, text = BAD["delete of an absent row"]
    path, where = setup(tmp_path, good, {5: record})
    assert main(["run", str(path), "--progress", "none"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"upkeep: error: {where[5]}: cannot delete row")
    assert "Traceback" not in err


def test_stop_names_the_first_bad_record_when_a_later_one_cannot_be_decoded(tmp_path):
    """A record the engine rejects (a delete of an absent row) before one that cannot be
    decoded (an unknown table): the first is named, and both are counted."""
    good = Stream(seed=13).generate(30).records
    path, where = setup(tmp_path, good, {4: BAD["delete of an absent row"][0],
                                         6: BAD["unknown table"][0]})
    runner, go = run(path)
    with pytest.raises(RecordError) as info:
        go()
    message = str(info.value)
    assert message.startswith(f"{where[4]}: cannot delete row"), message
    assert "1 more bad record(s) in the batch" in message


def all_bad(count=None):
    """Every bad case at spread-out positions, several in one batch."""
    positions = [3, 15, 17, 18, 40, 41, 42, 43, 44, 45, 46, 71, 99]
    cases = list(BAD.values())
    return {p: cases[i % len(cases)][0] for i, p in enumerate(positions[:count])}


@pytest.mark.parametrize("on_error", ["skip", "dead-letter"])
def test_skip_and_dead_letter_commit_the_good_records_once(tmp_path, on_error):
    good = Stream(seed=13).generate(120).records
    bad = all_bad()
    path, where = setup(tmp_path, good, bad, on_error=on_error)
    runner, go = run(path)
    stats = go()
    assert stats.rejected == len(bad)
    assert stats.applied == len(good)
    assert runner.db.metadata()["rejected"] == len(bad)
    assert_views(runner, tmp_path, model_of(good))
    dead = tmp_path / "pipeline.dead-letter.jsonl"
    if on_error == "skip":
        assert not dead.exists()
        return
    entries = jsonl_lines(dead)
    sources = [f"{e['_source']['file']}, line {e['_source']['line']}" for e in entries]
    assert sources == [where[i] for i in sorted(bad)]
    for entry, index in zip(entries, sorted(bad), strict=True):
        record = bad[index]
        text = next(t for r, t in BAD.values() if r == record)
        assert text in entry["_error"]
        if isinstance(record, str):
            assert entry["_raw"].strip() == record
        else:
            assert {k: v for k, v in entry.items() if not k.startswith("_")} == record


def test_dead_letter_file_can_be_fixed_and_replayed(tmp_path):
    good = Stream(seed=14).generate(40).records
    fixable = {"table": "customers", "op": "insert", "row": [42, None, "AUTO"]}
    path, _ = setup(tmp_path, good, {20: fixable}, on_error="dead-letter", files=1)
    db = upkeep.connect()
    run(path, db=db)[1]()
    (entry,) = jsonl_lines(tmp_path / "pipeline.dead-letter.jsonl")
    entry["row"][1] = "fixed"
    replay = tmp_path / "replay"
    replay.mkdir()
    (replay / "fixed.jsonl").write_text(json.dumps(entry) + "\n")
    config = load_config(path).replace(source=load_config(path).source.__class__(path=replay))
    PipelineRunner(config, db=db, progress="none", console=Console(file=io.StringIO())).run()
    assert (42, "fixed", "AUTO") in db.execute("SELECT * FROM customers").fetchall()


def test_a_replayed_dead_letter_says_its_new_error_and_a_csv_cell_replays(tmp_path):
    """A dead letter replayed while still bad kept its old ``_error`` / ``_source`` (the
    first file's); a CSV record whose ``row`` cell is not JSON is dead-lettered with the
    cell's text, which a fixed line now replays (it was "must be a JSON object")."""
    from upkeep.io.deadletter import DeadLetter
    from upkeep.io.records import Position, decode_mapping

    old = {"_error": "unknown operation 'upsert'", "_source": {"file": "c-001.jsonl",
                                                              "line": 1},
           "table": "t", "op": "insert"}
    record = decode_mapping(old, Position("r-001.jsonl", 1))
    assert record.error == "an insert needs 'row'"
    letters = DeadLetter(tmp_path / "dl.jsonl")
    letters.write([(record, record.error)])
    letters.close()
    (line,) = jsonl_lines(tmp_path / "dl.jsonl")
    assert line == {"_error": "an insert needs 'row'",
                    "_source": {"file": "r-001.jsonl", "line": 1}, "table": "t",
                    "op": "insert"}
    fixed = decode_mapping({"table": "t", "op": "insert", "row": "[1, 1]",
                            "_error": "column 'row' is not valid JSON"},
                           Position("fixed.jsonl", 1))
    assert fixed.error is None and fixed.row == [1, 1]


def test_many_bad_records_in_one_batch(tmp_path):
    """More engine rejections in one batch than bisection handles: one-by-one replay."""
    good = Stream(seed=15).generate(60).records
    ghost = BAD["delete of an absent row"][0]
    bad = {}
    for i in range(12):
        bad[20 + 2 * i] = {**ghost, "row": [900000 + i, *ghost["row"][1:]]}
    path, where = setup(tmp_path, good, bad, on_error="dead-letter")
    path.write_text(path.read_text().replace(f"rows_per_batch = {BATCH}", "rows_per_batch = 100"))
    runner, go = run(path)
    stats = go()
    assert stats.batches == 1 and stats.rejected == 12
    assert_views(runner, tmp_path, model_of(good))
    assert len(jsonl_lines(tmp_path / "pipeline.dead-letter.jsonl")) == 12


def test_a_bad_record_that_later_records_depend_on(tmp_path):
    """Skipping a bad insert makes a later delete of its row bad too (sequential semantics)."""
    records = [
        {"table": "customers", "op": "insert", "row": [1, "a", "AUTO"]},
        {"table": "orders", "op": "insert", "row": [1, 1, "2024-01-01", "9.99", 5, None]},
        {"table": "orders", "op": "insert", "row": [2, 1, "2024-01-01", "oops", 5, None]},
        {"table": "orders", "op": "delete", "row": [1, 1, "2024-01-01", "9.99", 5, None]},
        {"table": "orders", "op": "delete", "row": [2, 1, "2024-01-01", "1.00", 5, None]},
        {"table": "orders", "op": "insert", "row": [3, 1, "2024-01-02", "2.50", 6, "x"]},
    ]
    write_jsonl(tmp_path / "changes", [json.dumps(r) for r in records], files=1)
    path = write_pipeline(tmp_path, rows_per_batch=100, extra='on_error = "skip"', sinks={})
    runner, go = run(path)
    stats = go()
    assert stats.rejected == 2
    assert runner.db.execute("SELECT ok FROM orders").fetchall() == [(3,)]


def test_csv_and_parquet_positions(tmp_path):
    good = Stream(seed=16).generate(12).records
    WRITERS["csv"](tmp_path / "changes", good, files=1)
    with (tmp_path / "changes" / "changes-001.csv").open("a") as f:
        f.write('orders,insert,"[1, 2]",,,extra\n')
    path = write_pipeline(tmp_path, sinks={})
    with pytest.raises(RecordError, match=rf"changes-001\.csv, line {len(good) + 2}: the CSV "
                                          r"record has 6 fields, the header has 5"):
        run(path)[1]()

    pq_dir = tmp_path / "pq"
    WRITERS["parquet"](pq_dir, good + [{"table": "nope", "op": "insert", "row": [1]}], files=1)
    config = load_config(path)
    config = config.replace(source=config.source.__class__(path=pq_dir))
    runner = PipelineRunner(config, db=upkeep.connect(), progress="none",
                            console=Console(file=io.StringIO()))
    with pytest.raises(RecordError, match=rf"changes-001\.parquet, record {len(good) + 1}: "
                                          r"unknown table 'nope'"):
        runner.run()



def _damage(path, how: str) -> None:
    """Ruin a Parquet file: its footer (unreadable whole) or its second row group's page."""
    import pyarrow.parquet as pq

    data = bytearray(path.read_bytes())
    if how == "footer":
        del data[-12:]
    else:
        column = pq.ParquetFile(path).metadata.row_group(1).column(2)
        start = column.data_page_offset
        data[start:start + column.total_compressed_size] = b"\xff" * column.total_compressed_size
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["footer", "row group"])
@pytest.mark.parametrize("on_error", ["stop", "skip", "dead-letter"])
def test_a_damaged_parquet_file_is_a_bad_record_for_on_error(tmp_path, on_error, how):
    """A Parquet file that cannot be read whole, or from a damaged row group on, is one bad
    record at the first record not read: stop names it, skip and dead-letter go on with
    the next file, and a restarted run does not meet it again."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    good = Stream(seed=18).generate(12).records
    later = [{"table": "customers", "op": "insert", "row": [2000 + i, f"c{i}", "B"]}
             for i in range(3)]
    WRITERS["parquet"](tmp_path / "changes", good, files=1)
    lost = [f'[{1000 + i}, "lost{i}", "A"]' for i in range(6)]
    damaged = tmp_path / "changes" / "changes-002.parquet"
    pq.write_table(pa.table({"table": ["customers"] * 6, "op": ["insert"] * 6, "row": lost}),
                   damaged, row_group_size=2)
    _damage(damaged, how)
    WRITERS["parquet"](tmp_path / "changes", later, files=1, first=3)
    first_lost = 1 if how == "footer" else 3
    path = write_pipeline(tmp_path, sinks={}, state_dir="state",
                          extra=f'on_error = "{on_error}"')
    where = rf"changes-002\.parquet, record {first_lost}: cannot read Parquet file"
    if on_error == "stop":
        with pytest.raises(RecordError, match=where):
            run(path, db=upkeep.connect(tmp_path / "state"))[1]()
        return
    runner, go = run(path, db=upkeep.connect(tmp_path / "state"))
    assert go().rejected == 1
    read = good + [{"table": "customers", "op": "insert", "row": json.loads(row)}
                   for row in lost[:first_lost - 1]] + later
    expected = expected_views(model_of(read))
    for view in VIEW_KINDS:
        assert normalise(view, runner.db.view(view).rows()) == expected[view], view
    runner.db.close()
    if on_error == "dead-letter":
        [entry] = jsonl_lines(tmp_path / "pipeline.dead-letter.jsonl")
        assert entry["_source"] == {"file": "changes-002.parquet", "record": first_lost}
        assert "cannot read Parquet file" in entry["_error"]
    runner, go = run(path, db=upkeep.connect(tmp_path / "state"))  # resumed: nothing new
    stats = go()
    assert (stats.applied, stats.rejected) == (0, 0)
    runner.db.close()


def test_csv_dead_letter_keeps_the_lines_as_written(tmp_path):
    """A CSV record that cannot be split into the header's fields is dead-lettered as the
    text of its lines (quoting and line breaks as in the file), not re-joined fields."""
    good = Stream(seed=17).generate(12).records
    WRITERS["csv"](tmp_path / "changes", good, files=1)
    wrong_count = 'orders,insert,"[1, 2, ""a,b""]",,,extra'
    unclosed = 'orders,insert,"[3, 4]"x,,'
    split = 'orders,insert,"[5,\n 6]",,,extra'
    with (tmp_path / "changes" / "changes-001.csv").open("a") as f:
        f.write("\n".join([wrong_count, unclosed, split]) + "\n")
    path = write_pipeline(tmp_path, sinks={}, extra='on_error = "dead-letter"')
    stats = run(path)[1]()
    assert (stats.applied, stats.rejected) == (len(good), 3)
    entries = jsonl_lines(tmp_path / "pipeline.dead-letter.jsonl")
    assert [e["_raw"] for e in entries] == [wrong_count, unclosed, split]
    assert [e["_source"]["line"] for e in entries] == [len(good) + 2, len(good) + 3,
                                                        len(good) + 4]
    assert "malformed CSV" in entries[1]["_error"]

@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_csv_or_parquet_record_with_a_bad_image_replays_once_fixed(tmp_path, fmt):
    """A CSV (Parquet) record whose ``row`` is not JSON is dead-lettered without its empty
    (null) cells: they were kept as ``"before": ""`` / ``None``, so the fixed line
    replayed as "an insert takes 'row', not 'before'"."""
    import pyarrow as pa
    import pyarrow.csv as pa_csv
    import pyarrow.parquet as pq

    (tmp_path / "changes").mkdir()
    columns = {"table": ["customers", "customers"], "op": ["insert", "insert"],
               "row": ['[41, "a", "AUTO"]', '[42, "b", "AUTO"'],  # the second lacks its ]
               "before": ["", ""] if fmt == "csv" else [None, None],
               "after": ["", ""] if fmt == "csv" else [None, None]}
    if fmt == "csv":
        pa_csv.write_csv(pa.table(columns), tmp_path / "changes" / "c.csv")
    else:
        pq.write_table(pa.table(columns, schema=pa.schema(
            [(n, pa.string()) for n in columns])), tmp_path / "changes" / "c.parquet")
    path = write_pipeline(tmp_path, sinks={}, extra='on_error = "dead-letter"')
    db = upkeep.connect()
    run(path, db=db)[1]()
    (entry,) = jsonl_lines(tmp_path / "pipeline.dead-letter.jsonl")
    assert {k for k in entry if not k.startswith("_")} == {"table", "op", "row"}
    entry["row"] = '[42, "b", "AUTO"]'
    assert _replayed(path, db, entry, tmp_path)
    assert (42, "b", "AUTO") in db.execute("SELECT * FROM customers").fetchall()


def _replayed(path, db, entry: dict, tmp_path) -> bool:
    """Run pipeline ``path`` again over one fixed dead letter ``entry``: whether it was
    applied, and nothing rejected."""
    replay = tmp_path / "replay"
    replay.mkdir()
    (replay / "fixed.jsonl").write_text(json.dumps(entry) + "\n")
    config = load_config(path).replace(source=load_config(path).source.__class__(path=replay))
    stats = PipelineRunner(config, db=db, progress="none",
                           console=Console(file=io.StringIO())).run()
    return (stats.applied, stats.rejected) == (1, 0)


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_column_named_twice_is_a_bad_record_not_a_dropped_cell(tmp_path, fmt):
    """``table,op,row,ROW``: the last ``row`` cell was applied and the first dropped
    without a word."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "changes").mkdir()
    if fmt == "csv":
        (tmp_path / "changes" / "c.csv").write_text(
            'table,op,row,ROW\ncustomers,insert,"[1, ""a"", ""AUTO""]","[2, ""b"", ""AUTO""]"\n')
    else:
        pq.write_table(pa.Table.from_arrays(
            [pa.array(["customers"]), pa.array(["insert"]), pa.array(['[1, "a", "AUTO"]']),
             pa.array(['[2, "b", "AUTO"]'])], names=["table", "op", "row", "ROW"]),
            tmp_path / "changes" / "c.parquet")
    path = write_pipeline(tmp_path, sinks={})
    db = upkeep.connect()
    with pytest.raises(RecordError, match="names column 'row' twice"):
        run(path, db=db)[1]()
    assert db.execute("SELECT * FROM customers").fetchall() == []


def test_a_parquet_file_of_an_unknown_column_dead_letters_its_records_whole(tmp_path):
    """A Parquet file refused as a whole (a column no change record has) dead-lettered each
    record as ``{"table": null, "op": null}``: nothing left to fix and replay."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "changes").mkdir()
    pq.write_table(pa.table({"table": ["customers"], "op": ["insert"],
                             "row": ['[43, "c", "AUTO"]'], "note": ["x"]}),
                   tmp_path / "changes" / "c.parquet")
    path = write_pipeline(tmp_path, sinks={}, extra='on_error = "dead-letter"')
    db = upkeep.connect()
    run(path, db=db)[1]()
    (entry,) = jsonl_lines(tmp_path / "pipeline.dead-letter.jsonl")
    assert "unknown column 'note'" in entry["_error"]
    assert {k: v for k, v in entry.items() if not k.startswith("_")} == {
        "table": "customers", "op": "insert", "row": [43, "c", "AUTO"], "note": "x"}
    del entry["note"]
    assert _replayed(path, db, entry, tmp_path)


VIEW_CAST = "CREATE MATERIALIZED VIEW v AS SELECT a, CAST(s AS INTEGER) AS n FROM t;\n"


@pytest.mark.parametrize("on_error", ["stop", "skip"])
def test_a_record_that_fails_only_when_the_views_are_updated(tmp_path, on_error):
    """Errors at commit time (a view's expression fails) are found one record at a time."""
    (tmp_path / "t.sql").write_text("CREATE TABLE t (a INTEGER, s VARCHAR);\n")
    (tmp_path / "v.sql").write_text(VIEW_CAST)
    rows = [[1, "5"], [2, "x"], [3, "7"], [4, "8"]]
    write_jsonl(tmp_path / "c", [json.dumps({"table": "t", "op": "insert", "row": r})
                                 for r in rows], files=1)
    path = tmp_path / "p.toml"
    path.write_text(f'state_dir = ":memory:"\ntables = "t.sql"\nviews = "v.sql"\n'
                    f'on_error = "{on_error}"\n[source]\npath = "c"\n'
                    f'[[sinks]]\nview = "v"\ntype = "jsonl"\npath = "v.jsonl"\n')
    runner, go = run(path)
    if on_error == "stop":
        with pytest.raises(upkeep.Error, match=r"the batch of records changes-001\.jsonl, line 1 "
                                               r"to changes-001\.jsonl, line 4 failed: view v: could "
                                               r"not cast 'x' to INTEGER; nothing of it was "
                                               r"applied"):
            go()
        assert runner.db.view("v").rows() == []
        return
    stats = go()
    assert stats.rejected == 1 and stats.applied == 3
    assert sorted(runner.db.view("v").rows()) == [(1, 5), (3, 7), (4, 8)]
    assert runner.db.metadata()["source"]["position"] == 4
    lines = jsonl_lines(tmp_path / "v.jsonl")
    assert sorted(tuple(e["row"].values()) for e in lines) == [(1, 5), (3, 7), (4, 8)]


POISON_TABLES = "CREATE TABLE t (k INTEGER, a INTEGER, b INTEGER, d DOUBLE, m DECIMAL(10,2), " \
                "s VARCHAR);\n"
POISON_VIEWS = """
CREATE MATERIALIZED VIEW prod AS SELECT k, a * b AS p FROM t;
CREATE MATERIALIZED VIEW sums AS SELECT SUM(d) AS sd, AVG(d) AS ad, SUM(m) AS sm, COUNT(*) AS n
FROM t;
CREATE MATERIALIZED VIEW strs AS SELECT k, s, d FROM t;
"""


def poison_lines() -> tuple[list[str], list[int], list[str]]:
    """Good records, poison records (issue 18, case 4) and rows that look odd but are valid
    DOUBLEs (NaN, infinities, sums beyond the double range); the poison lines' numbers."""
    def rec(k, a=1, b=1, d=1.5, m="1.00", s="x"):
        return json.dumps({"table": "t", "op": "insert", "row": [k, a, b, d, m, s]})

    def raw(k, d="1.0", m='"1.00"', s='"x"'):
        return f'{{"table":"t","op":"insert","row":[{k},1,1,{d},{m},{s}]}}'

    lines = [rec(k) for k in range(10)]
    poison = {
        "nested": '{"table":"t","op":"insert","row":' + "[" * 100_000 + "]" * 100_000 + "}",
        "401 digits into DOUBLE": raw(100, d="9" * 401),
        "NaN into DECIMAL": rec(101, m="NaN"),
        "lone surrogate": raw(102, s='"\\udc80"'),
        "INTEGER overflow in a view": rec(103, a=2**30, b=4),
        "Infinity into DECIMAL": rec(104, m="Infinity"),
    }
    valid = [raw(110, d="NaN"), raw(111, d="Infinity"), raw(112, d="1e400"),
             raw(113, d="1e308"), raw(114, d="1e308"), raw(115, s='"\\ud800\\udc00"')]
    numbers = []
    for i, line in enumerate(poison.values()):
        lines.append(line)
        numbers.append(len(lines))
        lines.append(valid[i])
    lines += [rec(k) for k in range(20, 30)]
    return lines, numbers, list(poison)


def test_poison_records_go_to_the_dead_letter_file_and_never_block_a_restart(tmp_path):
    lines, numbers, names = poison_lines()
    (tmp_path / "changes").mkdir()
    (tmp_path / "changes" / "c-001.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "tables.sql").write_text(POISON_TABLES)
    (tmp_path / "views.sql").write_text(POISON_VIEWS)
    sinks = [("prod", "duckdb", "out/views.duckdb"), ("sums", "duckdb", "out/views.duckdb"),
             ("strs", "duckdb", "out/views.duckdb"), ("strs", "parquet", "out/strs.parquet"),
             ("sums", "parquet", "out/sums.parquet"), ("strs", "sqlite", "out/views.sqlite"),
             ("strs", "jsonl", "out/strs.jsonl")]
    (tmp_path / "pipeline.toml").write_text(
        'state_dir = "state"\ntables = ["tables.sql"]\nviews = ["views.sql"]\n'
        'on_error = "dead-letter"\n[source]\npath = "changes"\n[batch]\nrows_per_batch = 5\n'
        + "".join(f'[[sinks]]\nview = "{v}"\ntype = "{k}"\npath = "{p}"\n' for v, k, p in sinks))
    for attempt in range(2):  # the restart finds everything done, and nothing blocks it
        assert main(["run", str(tmp_path / "pipeline.toml"), "--progress", "none"]) == 0
        entries = jsonl_lines(tmp_path / "pipeline.dead-letter.jsonl")
        assert [e["_source"]["line"] for e in entries] == numbers, (attempt, names)
    good = [json.loads(line)["row"] for i, line in enumerate(lines, 1) if i not in numbers]
    import duckdb

    con = duckdb.connect()
    con.execute(POISON_TABLES)
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)", good)
    sink = duckdb.connect(str(tmp_path / "out" / "views.duckdb"), read_only=True)
    for view, sql in {"prod": "SELECT k, a * b FROM t", "strs": "SELECT k, s, d FROM t",
                      "sums": "SELECT SUM(d), AVG(d), SUM(m), COUNT(*) FROM t"}.items():
        want = sorted(map(repr, con.execute(sql).fetchall()))
        got = sorted(map(repr, sink.execute(f"SELECT * FROM {view}").fetchall()))
        assert got == want, view


def test_a_dead_letter_line_is_json_and_replays_non_finite_doubles(tmp_path):
    """A dead-lettered record holding NaN or an infinity (JSON lines may hold the bare
    tokens) is written as strict JSON, spelled as the jsonl sink spells them, and a change
    record with those spellings applies as the DOUBLE values."""
    from upkeep.io.apply import Applier
    from upkeep.io.deadletter import DeadLetter
    from upkeep.io.records import Position, decode_json_line

    def strict(text: str):
        return json.loads(text, parse_constant=lambda token: pytest.fail(f"bare {token}"))

    db = upkeep.connect()
    db.execute("CREATE TABLE m (k INTEGER, x DOUBLE)")
    record = decode_json_line('{"table": "m", "op": "delete", "row": [1, NaN]}',
                              Position("changes-001.jsonl", 3))
    letters = DeadLetter(tmp_path / "dead.jsonl")
    letters.write([(record, "not present")])
    letters.close()
    (line,) = (tmp_path / "dead.jsonl").read_text().splitlines()
    entry = strict(line)
    assert entry["row"] == [1, "NaN"] and entry["_source"] == {"file": "changes-001.jsonl",
                                                               "line": 3}
    applier = Applier(db)
    rows = [(1, "NaN"), (2, "Infinity"), (3, "-Infinity"), (4, 1.5)]
    for n, row in enumerate(rows):
        change = applier.prepare(decode_json_line(
            json.dumps({"table": "m", "op": "insert", "row": list(row)}),
            Position("fixed.jsonl", n + 1)))
        applier.apply([change])
    assert repr(sorted(db.execute("SELECT * FROM m").fetchall())) == repr(
        [(1, math.nan), (2, math.inf), (3, -math.inf), (4, 1.5)])


def test_records_nested_too_deeply_are_bad_records_under_every_policy(tmp_path, capsys):
    """A row image that is JSON text of 3,000 nested arrays (a CSV cell holds images so)
    and an image of 600 nested arrays, whose dead letter cannot be written out, are bad
    records: ``stop`` names the line, ``skip`` and ``dead-letter`` go past them (both ended
    the run with a RecursionError traceback, and every rerun stopped at the same record);
    the dead letter of the deep one says where to read it."""
    deep_text = '"' + "[" * 3000 + "]" * 3000 + '"'
    deep_image = "[2, 7, " + "[" * 600 + "]" * 600 + "]"
    (tmp_path / "changes").mkdir()
    (tmp_path / "changes" / "a.jsonl").write_text(
        '{"table": "t", "op": "insert", "row": [1, 7]}\n'
        f'{{"table": "t", "op": "insert", "row": {deep_text}}}\n'
        f'{{"table": "t", "op": "insert", "row": {deep_image}}}\n'
        '{"table": "t", "op": "insert", "row": [3, 7]}\n')
    (tmp_path / "tables.sql").write_text("CREATE TABLE t (k INTEGER, c INTEGER);")
    (tmp_path / "views.sql").write_text("CREATE VIEW v AS SELECT k FROM t;")
    for on_error in ("stop", "skip", "dead-letter"):
        (tmp_path / "p.toml").write_text(
            'state_dir = ":memory:"\ntables = ["tables.sql"]\nviews = ["views.sql"]\n'
            f'on_error = "{on_error}"\ndead_letter = "dead.jsonl"\n[source]\n'
            'path = "changes"\n[[sinks]]\nview = "v"\ntype = "jsonl"\npath = "v.jsonl"\n')
        (tmp_path / "v.jsonl").unlink(missing_ok=True)  # (a rerun appends a reset)
        code = main(["run", str(tmp_path / "p.toml"), "--progress", "none"])
        err = capsys.readouterr().err
        assert "Traceback" not in err and "RecursionError" not in err, err[-1500:]
        if on_error == "stop":
            assert code == 1 and "a.jsonl, line 2" in err and "nested too deeply" in err, err
            continue
        assert code == 0, err
        rows = [json.loads(line)["row"] for line in (tmp_path / "v.jsonl").read_text()
                .splitlines()]
        assert sorted(rows, key=json.dumps) == [{"k": 1}, {"k": 3}], (on_error, rows)
    entries = jsonl_lines(tmp_path / "dead.jsonl")
    assert [e["_source"]["line"] for e in entries] == [2, 3]
    assert "nested too deeply" in entries[0]["_error"]
    assert "read it at _source" in entries[1]["_error"]


def test_change_record_values_read_as_duckdb_reads_them():
    """A DECIMAL(38, s) value of more than 28 digits fits its column (it was refused: the
    text was rounded in Python's 28-digit context); a week date is no DATE (it read as a
    day)."""
    from upkeep.io.apply import Applier, BadRecord
    from upkeep.io.records import Position, decode_json_line

    db = upkeep.connect()
    db.execute("CREATE TABLE m (k INTEGER, x DECIMAL(38,10), d DATE)")
    applier = Applier(db)

    def prepared(row):
        return applier.prepare(decode_json_line(
            json.dumps({"table": "m", "op": "insert", "row": row}), Position("c.jsonl", 1)))

    change = prepared([1, "1234567890123456789.5", "2020-01-31"])
    applier.apply([change])
    assert db.execute("SELECT x, d FROM m").fetchall() == [
        (Decimal("1234567890123456789.5000000000"), dt.date(2020, 1, 31))]
    with pytest.raises(BadRecord, match="expected DATE"):
        prepared([2, "1", "2020-W01-1"])


@pytest.mark.parametrize(("sql_type", "text"), [
    ("DECIMAL(10,2)", "\u0661\u0662"), ("DECIMAL(10,2)", "\uff11\uff12.5"),
    ("DATE", "\u0662\u0660\u0662\u0664-01-02"), ("INTEGER", "\u0661\u0662"),
    ("DOUBLE", "\u0661\u0662"), ("DECIMAL(10,2)", "1_000"), ("DECIMAL(10,2)", " 12 "),
    ("DATE", "2024-01-02")])
def test_a_record_value_is_read_as_duckdb_casts_its_text(sql_type, text):
    """Python's ``Decimal`` and ``int`` read any script's digits (``'١٢'`` is 12); DuckDB
    reads 0-9 only, and so does a record's value (it was stored as 12.00)."""
    import duckdb

    from upkeep.io.apply import converter
    from upkeep.types import type_from_name

    try:
        with duckdb.connect() as oracle:
            expected = oracle.execute(f"SELECT ?::{sql_type}", [text]).fetchone()[0]
    except duckdb.Error:
        expected = None
    convert = converter(type_from_name(sql_type))
    if expected is None:
        with pytest.raises(ValueError):
            convert(text)
    elif sql_type.startswith("DECIMAL") or sql_type == "DATE":
        assert convert(text) == expected


def test_a_sqlite_sink_keeps_a_double_nan_apart_from_null(tmp_path):
    """SQLite has no NaN: bound as a REAL it is stored as NULL, so the sink held NULL for
    the view's NaN (and a NaN row's delete matched a NULL row). NaN is the text 'NaN', as
    in JSON; infinities are REAL."""
    import sqlite3

    (tmp_path / "t.sql").write_text("CREATE TABLE t (k INTEGER, x DOUBLE);")
    (tmp_path / "v.sql").write_text("CREATE VIEW v AS SELECT x FROM t;")
    (tmp_path / "p.toml").write_text(
        'tables = "t.sql"\nviews = "v.sql"\n[source]\npath = "c.jsonl"\n'
        '[[sinks]]\nview = "v"\ntype = "sqlite"\npath = "v.sqlite"\n')
    records = [("insert", [1, "NaN"]), ("insert", [2, None]), ("insert", [3, "Infinity"]),
               ("insert", [4, "NaN"]), ("delete", [1, "NaN"]), ("insert", [5, 1.5])]
    (tmp_path / "c.jsonl").write_text("".join(
        json.dumps({"table": "t", "op": op, "row": row}) + "\n" for op, row in records))
    assert main(["run", str(tmp_path / "p.toml"), "--progress", "none"]) == 0
    con = sqlite3.connect(tmp_path / "v.sqlite")
    got = sorted(con.execute("SELECT x, typeof(x) FROM v").fetchall(), key=repr)
    assert got == sorted([("NaN", "text"), (None, "null"), (math.inf, "real"),
                          (1.5, "real")], key=repr)


def _rowid_pipeline(tmp_path, kind: str) -> Path:
    (tmp_path / "t.sql").write_text("CREATE TABLE t (rowid INTEGER, v VARCHAR);")
    (tmp_path / "v.sql").write_text("CREATE VIEW v AS SELECT rowid, v FROM t;")
    (tmp_path / "p.toml").write_text(
        'tables = "t.sql"\nviews = "v.sql"\n[source]\npath = "c.jsonl"\n'
        '[batch]\nrows_per_batch = 1\n'
        f'[[sinks]]\nview = "v"\ntype = "{kind}"\npath = "v.{kind}"\n')
    records = [("insert", [7, "a"]), ("insert", [7, "b"]), ("delete", [7, "a"])]
    (tmp_path / "c.jsonl").write_text("".join(
        json.dumps({"table": "t", "op": op, "row": row}) + "\n" for op, row in records))
    return tmp_path / "p.toml"


def test_a_sqlite_sink_of_a_view_with_a_column_named_rowid_deletes_one_row(tmp_path):
    """The sink deletes one occurrence by SQLite's row id, which a column named rowid hides:
    every row holding that value was picked and the run stopped."""
    import sqlite3

    assert main(["run", str(_rowid_pipeline(tmp_path, "sqlite")), "--progress", "none"]) == 0
    con = sqlite3.connect(tmp_path / "v.sqlite")
    assert con.execute("SELECT * FROM v").fetchall() == [(7, "b")]


def test_a_duckdb_sink_refuses_a_view_with_a_column_named_rowid(tmp_path, capsys):
    """DuckDB's row ids, which the sink deletes by, cannot be read past a column named
    rowid: refused at start with the column named, not a run stopped at the first delete."""
    assert main(["run", str(_rowid_pipeline(tmp_path, "duckdb")), "--progress", "none"]) == 1
    err = capsys.readouterr().err
    assert "rowid" in err and "rename" in err
