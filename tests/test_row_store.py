"""The compact row store under base tables: every SQL type and NULL round-trips, equal rows
share one entry (so deletes find what inserts put), weights add up, and tables with types it
does not encode keep working."""

import datetime as dt
from collections import Counter
from decimal import Decimal
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from upkeep.row_store import RowStore, TupleStore, row_store
from upkeep.types import coerce_row, type_from_name

COLUMNS = [(name, type_from_name(sql)) for name, sql in [
    ("i", "INTEGER"), ("b", "BIGINT"), ("h", "HUGEINT"), ("d", "DOUBLE"),
    ("m", "DECIMAL(12,2)"), ("w", "DECIMAL(38,10)"), ("s", "VARCHAR"), ("f", "BOOLEAN"),
    ("day", "DATE")]]

values = st.tuples(
    st.none() | st.integers(-2**31, 2**31 - 1),
    st.none() | st.integers(-2**63, 2**63 - 1),
    st.none() | st.integers(-2**100, 2**100),
    st.none() | st.floats(allow_nan=False),
    st.none() | st.decimals(min_value=-10**9, max_value=10**9, places=2, allow_nan=False),
    st.none() | st.decimals(min_value=-10**27, max_value=10**27, places=10, allow_nan=False),
    st.none() | st.text(max_size=20),
    st.none() | st.booleans(),
    st.none() | st.dates(),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(values, st.integers(1, 3)), max_size=20))
def test_rows_round_trip_with_their_weights(rows):
    store = RowStore(COLUMNS)
    expected: dict[tuple, int] = {}
    for raw, weight in rows:
        row = coerce_row(raw, COLUMNS, "t", 0)
        store.add(row, weight)
        expected[row] = expected.get(row, 0) + weight
    assert store.as_dict() == expected
    assert len(store) == len(expected)
    for row, n in expected.items():
        assert store.get(row) == n
        assert [type(v) for v in row] == [type(v) for v in next(r for r in store if r == row)]
    for row, n in expected.items():
        store.add(row, -n)
    assert len(store) == 0 and store.as_dict() == {}


def test_equal_values_share_an_entry():
    """0.0 and -0.0 are one row, as in a dict of tuples (and SQL); a decimal's scale is its
    column's; a re-inserted row after a delete is counted again."""
    store = RowStore(COLUMNS)
    row = (1, 2, 3, 0.0, Decimal("1.50"), Decimal("0E-10"), "x", True, dt.date(2024, 2, 29))
    store.add(row, 1)
    store.add(row[:3] + (-0.0,) + row[4:], 1)
    assert store.get(row) == 2 and len(store) == 1
    store.add(row, -2)
    assert store.get(row) == 0
    store.add(row, 1)
    big = 10**12
    shared = (big, big, 3, 1.5, None, None, "y", None, None)
    store.add(shared, 1)  # one int object twice: equal bytes to two equal objects
    assert store.get((big, int(str(big)), 3, 1.5, None, None, "y", None, None)) == 1
    store.add(shared, -1)
    (back,) = list(store)
    assert back == row and str(back[4]) == "1.50" and str(back[5]) == "0E-10"


@settings(max_examples=40, deadline=None)
@given(st.lists(values, min_size=1, max_size=12), st.integers(1_000, 1_300))
def test_bulk_reads_share_repeated_values(pool, n):
    """Reading a whole store (what a view's build does) gives the same rows, with one object
    per value in the columns whose values repeat, and its own objects in a unique column."""
    columns = [*COLUMNS, ("id", type_from_name("BIGINT"))]
    pool = [coerce_row(raw, COLUMNS, "t", 0) for raw in pool]
    expected = {pool[i % len(pool)] + (10**12 + i,): 1 + i % 2 for i in range(n)}
    store = RowStore(columns)
    for row, weight in expected.items():
        store.add(row, weight)
    got = store.as_dict()
    assert got == expected
    decoded = {row: row for row in got}
    for row in expected:
        assert [type(v) for v in decoded[row]] == [type(v) for v in row]
    for col in range(len(COLUMNS)):
        objects = {}
        for row in got:
            objects.setdefault(_comparable(row[col]), set()).add(id(row[col]))
        assert all(len(ids) == 1 for ids in objects.values()), COLUMNS[col][0]
    assert len({id(row[-1]) for row in got}) == n


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(values, st.integers(1, 3)), max_size=20),
       st.frozensets(st.integers(0, len(COLUMNS) - 1)), st.sampled_from([0, 2, 1_024]),
       st.integers(0, 1_200))
def test_a_reading_of_some_columns_gives_their_values_and_none_elsewhere(
        rows, read, dictionary, filler):
    """What a view's build reads when it reads a few columns (``RowStore.reading``): every
    row's values in those columns, None in the others, each row with its multiplicity,
    past columns of every kind, strings with dictionary codes or written out, and
    stores big enough for the bulk read to share values."""
    import upkeep.row_store as row_store

    expected: Counter = Counter()
    with patch.object(row_store, "_DICTIONARY_MAX", dictionary):
        store = RowStore(COLUMNS)
        full: dict[tuple, int] = {}
        for raw, weight in rows:
            row = coerce_row(raw, COLUMNS, "t", 0)
            full[row] = full.get(row, 0) + weight
        for i in range(filler):  # rows of their own, so the bulk read samples and shares
            full[(i, None, None, None, None, None, f"f{i % 7}", True, None)] = 1
        for row, weight in full.items():
            store.add(row, weight)
        for row, weight in full.items():
            expected[tuple(v if i in read else None for i, v in enumerate(row)), weight] += 1
        reading = store.reading(read)
        assert len(reading) == len(full)
        got = Counter(reading.items())
    assert got == expected
    assert store.reading(frozenset(range(len(COLUMNS)))) is store


def test_a_bulk_read_skips_removed_rows_and_places_kept_at_zero_across_its_chunks():
    """A bulk read decodes the rows where their keys lie, a chunk of entries at a time:
    rows removed and rows kept in place at multiplicity 0 are left out wherever they fall,
    and the others come back with their multiplicities, in the order they were added."""
    columns = [(name, type_from_name(sql)) for name, sql in [
        ("k", "BIGINT"), ("x", "DOUBLE"), ("s", "VARCHAR"), ("day", "DATE")]]
    store = RowStore(columns)
    expected: dict[tuple, int] = {}
    for i in range(3_000):  # past the dictionary's size too: strings written out
        row = (i, i / 7, f"row {i}", dt.date(2000, 1, 1) + dt.timedelta(days=i % 400))
        store.add(row, 1 + i % 3)
        expected[row] = 1 + i % 3
    for i, row in enumerate(list(expected)):
        if i % 7 == 0:
            store.add(row, -expected.pop(row))
        elif i % 11 == 0:
            store.add(row, -expected.pop(row), keep_place=True)
    assert list(store.items()) == list(expected.items())
    assert list(store) == list(expected)


def test_the_sharing_sample_reads_live_rows_past_removed_and_zeroed_entries():
    """Which columns share their values is decided on a sample of the live rows: entries
    removed or kept at 0 in step with the sample's stride do not make an empty sample, which
    would mark even a column of unique values as shared."""
    columns = [("k", type_from_name("BIGINT")), ("flag", type_from_name("VARCHAR"))]
    store = RowStore(columns)
    rows = [(i, "ab"[i % 2]) for i in range(80_000)]  # a sample's stride of 2 and more
    for row in rows:
        store.add(row, 1)
    for row in rows[::2]:
        store.add(row, -1, keep_place=True)
    decoder = store._bulk_decoder()
    assert decoder.shares[0] is None and decoder.shares[1] is not None


def test_reading_a_store_while_it_is_compacted_stops_with_an_error():
    """Rows removed while the store is read in bulk may compact its arena (entry numbers
    move, arrays shrink): the read then stops with an error, as a dict's iteration does,
    instead of reading past the arrays' ends."""
    columns = [("k", type_from_name("BIGINT"))]
    store = RowStore(columns)
    for i in range(5_000):
        store.add((i,), 1)
    with pytest.raises(RuntimeError, match="changed while"):
        for row, n in store.items():
            store.add(row, -n)


def _comparable(value):
    """A dict key for a decoded value: by its representation, so that 0.0 and -0.0, or
    Decimal 1.50 and 1.5, would count as different objects' values."""
    return (type(value).__name__, repr(value))


def test_unencoded_types_keep_tuples():
    columns = [("t", type_from_name("TIMESTAMP WITH TIME ZONE")), ("k", type_from_name("INTEGER"))]
    store = row_store(columns)
    assert isinstance(store, TupleStore)
    row = (dt.datetime(2024, 1, 1, 12, tzinfo=dt.UTC), 1)
    store.add(row, 2)
    assert store.as_dict() == {row: 2}
    assert store.copy().as_dict() == {row: 2} and len(store) == 1


@pytest.mark.parametrize("sql", ["INTEGER", "VARCHAR", "DATE", "DECIMAL(10,3)", "DOUBLE"])
def test_a_row_costs_fewer_bytes_than_a_tuple(sql):
    """The point of the store: one bytes object per row instead of a tuple of boxed values."""
    import sys

    columns = [(f"c{i}", type_from_name(sql)) for i in range(8)]
    value = {"INTEGER": lambda i: 123456 + i, "VARCHAR": lambda i: f"shipping {i}",
             "DATE": lambda i: dt.date(1995, 3, 1 + i), "DOUBLE": lambda i: 1234.5 + i,
             "DECIMAL(10,3)": lambda i: Decimal(f"{1234 + i}.500")}[sql]
    row = tuple(value(i) for i in range(8))
    key = RowStore(columns)._encode(row)
    assert sys.getsizeof(key) < sys.getsizeof(row) + sum(sys.getsizeof(v) for v in row)


def test_integers_beyond_64_bits_round_trip_at_the_boundaries():
    """Integers within 64 bits are varints; HUGEINT and DECIMAL(38) values are kept as
    their text. At each side of the boundaries, rows come back equal and with int/Decimal
    types, and one value always gets one key."""
    store = RowStore(COLUMNS)
    for h in (2**63 - 1, -2**63, -2**63 - 1, 2**64 - 1, 2**64, -2**127, 2**127 - 1):
        wide = Decimal(h % 10**28).scaleb(-10)
        row = coerce_row((1, 2, h, 1.0, Decimal("1.00"), wide, "s", False, None), COLUMNS, "t", 0)
        store.add(row, 1)
        store.add(coerce_row(row, COLUMNS, "t", 0), 1)
        assert store.get(row) == 2
        (back,) = [r for r in store if r == row]
        assert type(back[2]) is int and back[2] == h and back[5] == wide
        store.add(row, -2)
    assert len(store) == 0


@pytest.mark.parametrize("coded", [True, False])
def test_strings_with_lone_surrogates_round_trip_beside_plain_ones(coded, monkeypatch):
    """A string holding a lone surrogate is written with ``surrogatepass``; the row's other
    strings keep the bytes a plain row gives them, so equal rows share one entry, whether
    the strings get dictionary codes or (past the dictionary's size) are written out."""
    import upkeep.row_store as row_store

    if not coded:
        monkeypatch.setattr(row_store, "_DICTIONARY_MAX", 0)
    columns = [("a", type_from_name("VARCHAR")), ("b", type_from_name("VARCHAR"))]
    store = RowStore(columns)
    odd = ("caf\u00e9", "x\udc80y")
    plain = ("caf\u00e9", "xy")
    store.add(odd, 1)
    store.add(plain, 1)
    store.add(("caf\u00e9", "x\udc80y"), 1)  # an equal row, another object
    assert store.get(odd) == 2 and store.get(plain) == 1 and len(store) == 2
    first = 2 if coded else 7  # the NULL bitmap, then "café" as a code or as 1 + 5 bytes
    assert store.key(odd)[:first] == store.key(plain)[:first]
    assert store.key(odd) != store.key(plain)
    assert sorted(store.as_dict().items()) == sorted({odd: 2, plain: 1}.items())


def test_strings_past_the_dictionary_are_written_out_and_keep_their_keys(monkeypatch):
    """A column's first ``_DICTIONARY_MAX`` distinct strings get codes, later ones are
    written whole; either way a string keeps its key, and a copy of the store (which
    shares the encoder) reads and finds rows whose strings got codes after it was made."""
    import upkeep.row_store as row_store

    monkeypatch.setattr(row_store, "_DICTIONARY_MAX", 3)
    columns = [("s", type_from_name("VARCHAR")), ("k", type_from_name("INTEGER"))]
    store = RowStore(columns)
    words = ["red", "green", "blue", "cyan", "red", "magenta", "cyan", ""]
    for i, w in enumerate(words):
        store.add((w, i % 2), 1)
    copy = store.copy()
    store.add(("late", 5), 1)
    copy.add(("later", 6), 1)
    expected: dict[tuple, int] = {}
    for i, w in enumerate(words):
        expected[(w, i % 2)] = expected.get((w, i % 2), 0) + 1
    assert copy.as_dict() == expected | {("later", 6): 1}
    assert store.as_dict() == expected | {("late", 5): 1}
    coded = {w for w in words if store.key((w, 0))[1] & 1}
    assert coded == {"red", "green", "blue"}
    assert all(store.get((w, i % 2)) == expected[(w, i % 2)] for i, w in enumerate(words))
    assert copy.get(("late", 5)) == 0 and store.get(("later", 6)) == 0


def test_integers_round_trip_at_every_varint_length_and_nan_is_one_row():
    """Integers at each side of every 7-bit boundary of the varint, and the ends of BIGINT,
    come back equal; NaN rows share one entry and read back as the one ``math.nan``."""
    import math

    columns = [("b", type_from_name("BIGINT")), ("d", type_from_name("DOUBLE"))]
    store = RowStore(columns)
    edges = {-2**63, 2**63 - 1, 0, -1}
    for bits in range(6, 63, 7):
        edges |= {2**bits - 1, 2**bits, -2**bits, -2**bits - 1}
    for v in edges:
        store.add((v, float(v)), 1)
    assert store.as_dict() == {(v, float(v)): 1 for v in edges}
    store.add((7, math.nan), 1)
    store.add((7, float("nan")), 1)
    store.add((7, -math.nan), 1)
    (back,) = [r for r in store if r[0] == 7]
    assert back[1] is math.nan and store.get(back) == 3


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 9), min_size=1, max_size=10, unique=True),
       st.lists(st.integers(0, 9), max_size=10, unique=True))
def test_rows_deleted_keeping_their_places_come_back_where_they_were(present, deleted):
    """A what-if deletes rows keeping their places and adds them back: the store then reads
    exactly as before, in the same order; meanwhile deleted rows read as absent."""
    columns = [("a", type_from_name("INTEGER"))]
    store = RowStore(columns)
    for a in present:
        store.add((a,), 2 if a % 3 == 0 else 1)
    before = list(store.items())
    gone = [a for a in deleted if a in present]
    new = [a for a in deleted if a not in present]
    for a in gone:
        store.add((a,), -store.get((a,)), keep_place=True)
    for a in new:
        store.add((a,), 1, keep_place=True)
    expected = {(a,): n for (a,), n in before if a not in gone} | {(a,): 1 for a in new}
    assert dict(store.items()) == expected
    assert len(store) == len(expected)
    assert sorted(store) == sorted(expected)
    assert [store.row(k) for k in store.keys()] == list(store)
    assert dict(store.copy().items()) == expected
    assert all(store.get((a,)) == 0 for a in gone)
    for a in gone:  # the inverse, as Committer.hypothetical applies it
        store.add((a,), dict(before)[(a,)])
    for a in new:
        store.add((a,), -1)
    assert list(store.items()) == before
    assert len(store) == len(before)


def test_a_batch_of_deletes_encodes_each_row_once():
    """A batch's deletes are checked when staged (is the row there?) and applied at
    commit: the key the check made serves the apply (operation counts, not timings)."""
    import upkeep

    db = upkeep.connect()
    db.execute("CREATE TABLE t (k INTEGER, s VARCHAR, day DATE)")
    rows = [(k, f"s{k % 7}", dt.date(2024, 1, 1 + k % 28)) for k in range(500)]
    db.insert("t", rows + rows[:100])  # 100 rows held twice
    db.create_view("v", "SELECT s, COUNT(*) AS n FROM t GROUP BY s")
    store = db._catalog.tables["t"].rows
    before = store.encodes
    with db.transaction():
        db.delete("t", rows[:300])
    assert store.encodes - before == 300
    left = rows[:100] + rows[300:]
    assert sorted(db.execute("SELECT * FROM t").fetchall()) == sorted(left)
    assert dict(db.execute("SELECT s, n FROM v").fetchall()) == {
        s: sum(1 for r in left if r[1] == s) for s in {r[1] for r in left}}


def test_a_rejected_batch_of_deletes_leaves_no_key_behind():
    """A batch whose check fails (a row not there) is rejected whole; the keys its check
    made are dropped by the next apply, and that apply is exact."""
    import upkeep
    from upkeep.errors import ConstraintError

    db = upkeep.connect()
    db.execute("CREATE TABLE t (k INTEGER, s VARCHAR)")
    rows = [(k, str(k)) for k in range(50)]
    db.insert("t", rows)
    with pytest.raises(ConstraintError, match="not present"):
        db.delete("t", rows[:20] + [(99, "99")])
    assert sorted(db.execute("SELECT * FROM t").fetchall()) == rows
    db.delete("t", rows[10:30])
    assert sorted(db.execute("SELECT * FROM t").fetchall()) == rows[:10] + rows[30:]
    assert not db._catalog.tables["t"].rows._checked


def test_dates_and_decimals_beyond_the_encoders_memo_keep_their_keys(monkeypatch):
    """An encoder remembers a bounded number of a date or decimal column's values
    (``_MEMO_MAX``); past it the memo starts again, and every row still finds its
    entry: the same value encodes the same way before and after, a different one not."""
    import upkeep.row_store as row_store

    monkeypatch.setattr(row_store, "_MEMO_MAX", 8)
    columns = [("k", type_from_name("INTEGER")), ("m", type_from_name("DECIMAL(12,2)")),
               ("d", type_from_name("DATE"))]
    store = RowStore(columns)

    def row(i: int) -> tuple:
        return (i, Decimal(i) / 4, dt.date(2000, 1, 1) + dt.timedelta(days=i))

    rows = [coerce_row(row(i), columns, "t", 0) for i in range(50)]
    for r in rows:
        store.add(r, 1)
    assert len(store) == 50
    assert all(store.get(coerce_row(row(i), columns, "t", 0)) == 1 for i in range(50))
    assert store.get((1, Decimal("0.26"), dt.date(2000, 1, 2))) == 0
    assert store.get((1, Decimal("0.25"), dt.date(2000, 1, 3))) == 0
    assert store.as_dict() == {r: 1 for r in rows}


def test_an_encoder_entered_again_writes_the_same_keys_through_a_twin():
    """An encoder that is busy (entered by another thread before it returned) writes the
    key through a twin sharing its dictionaries: the same bytes, codes still shared."""
    columns = [("s", type_from_name("VARCHAR")), ("d", type_from_name("DATE")),
               ("x", type_from_name("DOUBLE"))]
    store = RowStore(columns)
    rows = [("a" * n, dt.date(2020, 1, 1 + n), n / 3) for n in range(1, 20)]
    keys = [store.key(r) for r in rows]
    encoder = store._encoder
    encoder.busy = True
    try:
        assert [encoder.encode(r) for r in rows] == keys
        assert encoder.encode(("new", None, None)) != encoder.encode(("newer", None, None))
    finally:
        encoder.busy = False
    assert store.key(("new", None, None))[1] & 1  # the twin's code, in the shared dictionary
    assert store.row(store.key(("new", None, None))) == ("new", None, None)
