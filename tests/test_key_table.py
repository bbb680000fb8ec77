"""The compact key table under a table's row store: against a dict (the structure it
replaces), through growth, removals, compaction, copies and rows kept at 0."""

import datetime as dt
import importlib.util
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import upkeep.key_table
from upkeep.key_table import KeyTable, hash_of
from upkeep.row_store import RowStore
from upkeep.types import type_from_name

# short keys that collide often, and keys past one varint byte of length (128+)
keys = st.one_of(st.binary(max_size=6), st.binary(min_size=120, max_size=300),
                 st.integers(0, 40).map(lambda i: b"k%d" % i))

ops = st.lists(st.tuples(st.sampled_from(["add", "remove", "zero", "copy", "copy0"]),
                         keys, st.integers(1, 4)), max_size=120)


def _contents(table: KeyTable) -> list[tuple[bytes, int]]:
    return [(table.key_at(e), table.weight_at(e)) for e in table.entries()]


@settings(max_examples=300, deadline=None)
@given(ops)
def test_the_table_reads_as_a_dict_in_insertion_order(operations):
    """Adds, removals, entries kept at 0 and copies (with and without those) leave the
    table holding exactly what a dict would, in the dict's order."""
    table, model = KeyTable(), {}
    for op, key, w in operations:
        if op == "add":
            assert table.add(key, w) == model.get(key, 0)
            model[key] = model.get(key, 0) + w
        elif op == "remove" and key in model:
            assert table.add(key, -model[key]) == model.pop(key)
        elif op == "zero" and key in model:
            table.add(key, -model[key], True)
            model[key] = 0
        elif op == "copy":
            table = table.copy()
        elif op == "copy0":
            table = table.copy(drop_zeros=True)
            model = {k: n for k, n in model.items() if n}
        assert len(table) == len(model)
        assert table.zeros == sum(1 for n in model.values() if n == 0)
    assert _contents(table) == list(model.items())
    for key, n in model.items():
        assert table.get(key) == n
    assert table.get(b"never added") is None


def test_removals_compact_the_arena_and_keep_the_order():
    """Removing most entries, again and again, compacts the arena (the epoch counts it):
    the survivors keep their order and weights, and the arena shrinks back."""
    table, model = KeyTable(), {}
    epochs = set()
    for round_ in range(6):
        for i in range(3_000):
            key = b"%d-%d" % (round_, i)
            table.add(key, 1 + i % 3)
            model[key] = 1 + i % 3
        held = table.nbytes()
        for key in [k for k in model if int(k.split(b"-")[1]) % 10]:
            table.add(key, -model.pop(key))
        epochs.add(table.epoch)
        assert _contents(table) == list(model.items())
        assert table.nbytes() < held  # the arena and the index shrank with it
    assert len(epochs) > 1 and table.epoch >= 3
    assert table.garbage <= table.live or table.garbage <= 1_024


def test_a_key_only_equal_up_to_its_length_is_another_key():
    """Keys that are prefixes of each other, the empty key, and keys whose hashes share
    their low bits are told apart by their bytes."""
    table = KeyTable()
    for n in range(0, 300, 7):
        table.add(b"x" * n, n + 1)
    assert [table.get(b"x" * n) for n in range(0, 300, 7)] == [n + 1 for n in range(0, 300, 7)]
    assert table.get(b"x" * 3) is None
    assert hash_of(b"abcd", 0, 4) != hash_of(b"abce", 0, 4)


def test_a_checked_entry_is_not_used_once_its_row_was_removed_or_moved():
    """A batch's check remembers the entry it found for the apply; if an equal row was
    deleted in between (the entry removed, maybe a new one made) or the arena was
    compacted, the apply finds the row again instead of using the old entry."""
    store = RowStore([("k", type_from_name("INTEGER")), ("d", type_from_name("DATE"))])
    row = (1, dt.date(2020, 1, 1))
    store.add(row, 2)
    assert store.checked_count(row) == 2
    store.add((1, dt.date(2020, 1, 1)), -2)  # an equal tuple: the entry goes
    store.add((1, dt.date(2020, 1, 1)), 1)  # and comes back as a new one
    store.add(row, 3)  # the checked tuple itself
    assert store.get(row) == 4 and len(store) == 1
    many = [(i, dt.date(2020, 1, 1)) for i in range(2, 5_000)]
    for r in many:
        store.add(r, 1)
    assert store.get(row) == 4  # remembered as the last row looked up
    epoch = store._table.epoch
    for r in many:
        store.add(r, -1)
    assert store._table.epoch > epoch  # compacted: entry numbers moved
    store.add(row, -1)
    assert store.as_dict() == {row: 3}


@settings(max_examples=100, deadline=None)
@given(st.lists(keys, max_size=40), st.lists(keys, max_size=300))
def test_keys_added_after_their_room_is_reserved_grow_nothing_on_the_way(before, added):
    """``reserve`` makes room for a bulk insert's keys at once: while they are added the
    index is not rehashed and the arena is not grown, the table holds
    what it would have held without the reservation, and room is left after them."""
    table, plain = KeyTable(), KeyTable()
    for key in before:
        table.add(key, 1)
        plain.add(key, 1)
    for key in dict.fromkeys(before[::3]):  # removals leave tombstones behind
        table.add(key, -table.get(key))
        plain.add(key, -plain.get(key))
    table.reserve(len(added), sum(len(k) for k in added))
    sizes = (table.mask, len(table.arena))
    for key in added:
        table.add(key, 2)
        plain.add(key, 2)
        assert (table.mask, len(table.arena)) == sizes
    assert 10 * table.filled <= 7 * (table.mask + 1)
    assert _contents(table) == _contents(plain)


@settings(max_examples=60, deadline=None)
@given(st.lists(keys, max_size=40), st.lists(keys, min_size=1, max_size=12),
       st.integers(50, 400), st.booleans())
def test_room_a_reservation_made_and_its_keys_did_not_take_is_given_back(
        before, distinct, repeats, held):
    """A bulk insert of rows that repeat each other (or that the table ``held`` already)
    takes few entries of the room ``reserve`` made for all of them: ``settle`` gives it
    back, leaving the table about as big as one that never reserved, holding the same."""
    table, plain = KeyTable(), KeyTable()
    for key in before + (distinct if held else []):
        table.add(key, 1)
        plain.add(key, 1)
    added = [distinct[i % len(distinct)] for i in range(repeats * len(distinct))]
    table.reserve(len(added), sum(len(k) for k in added))
    for key in added:
        table.add(key, 1)
        plain.add(key, 1)
    table.settle()
    assert _contents(table) == _contents(plain)
    assert len(table.arena) - table.used <= 2 * max(table.used >> 3, 256) + table.used // 4
    assert 10 * table.filled <= 7 * (table.mask + 1)
    assert table.nbytes() <= 2 * plain.nbytes() + 4_096
    for key in distinct:  # and it goes on working as a table
        table.add(key, -1)
        plain.add(key, -1)
    assert _contents(table) == _contents(plain)


@settings(max_examples=60, deadline=None)
@given(st.lists(keys, max_size=40), st.lists(keys, max_size=300, unique=True))
def test_a_reservation_its_distinct_keys_took_is_kept(before, added):
    """A bulk insert of new distinct keys takes the room reserved for it: ``settle``
    copies nothing (a load of TPC-H line items is not copied a second time)."""
    table = KeyTable()
    for key in before:
        table.add(key, 1)
    added = [k for k in added if k not in set(before)]
    table.reserve(len(added), sum(len(k) for k in added))
    for key in added:
        table.add(key, 1)
    sizes = (table.mask, len(table.arena))
    table.settle()
    assert (table.mask, len(table.arena)) == sizes


def test_multiplicities_past_32_bits_are_kept_beside_their_keys():
    """A record holds its multiplicity in 8 bytes before its key: large counts, counts
    kept at 0 and removals read back exactly, and walking the records in order finds
    every live entry."""
    table = KeyTable()
    big = [(b"k%d" % i, (1 << 33) * (i + 1) + i) for i in range(50)]
    for key, n in big:
        table.add(key, n)
    table.add(b"k3", -table.get(b"k3"), True)  # kept in place at 0
    table.add(b"k4", -table.get(b"k4"))  # removed
    table.add(b"k5", (1 << 62) - table.get(b"k5"))
    expected = {key: n for key, n in big if key != b"k4"}
    expected[b"k3"], expected[b"k5"] = 0, 1 << 62
    assert _contents(table) == list(expected.items())
    walked, e = [], 0
    while e < table.used:
        walked.append(table.weight_at(e))
        e = table.next_entry(e)
    assert len(walked) == table.count == 50 and walked[4] == -1  # the removed one's mark


def test_a_record_past_what_a_slot_can_name_is_refused_and_the_table_kept():
    """A slot names a record by its offset + 1 in 40 bits (1 TB of keys): the record that
    would pass that is refused with OverflowError and the table goes on holding what it
    held.  Run on the module's source with a 16-bit offset, so the limit is reached in
    64 KB (the compiled module's constants are fixed when it is built)."""
    path = Path(upkeep.key_table.__file__).with_name("key_table.py")
    spec = importlib.util.spec_from_file_location("key_table_source", path)
    source = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(source)
    source._OFFSET_MASK = 0xFFFF
    table = source.KeyTable()
    held, i = {}, 0
    with pytest.raises(OverflowError):
        while True:
            key = b"%06d" % i
            table.add(key, 1)
            held[key] = 1
            i += 1
    assert len(table) == len(held) and table.get(b"%06d" % i) is None
    assert all(table.get(key) == 1 for key in held)
    assert [table.key_at(e) for e in table.entries()] == list(held)
