# cython: boundscheck=False, wraparound=False
# (compiled without index checks: every position read or written is inside the arena or
# the slot array, as the methods below keep them sized)
"""A compact map from byte strings to multiplicities, in insertion order: a base table's
row keys (``row_store.RowStore``), without a Python object per row.

A dict of ``bytes`` keys costs, beside each key's own bytes, a bytes object's header (33
bytes, rounded up by the allocator) and a dict entry with its index (24 bytes, and 4 or 8
bytes of index per slot, at most 2/3 full): 70-100 bytes a row.  Here each entry is one
record of a byte arena, the records one after another in insertion order: the entry's
multiplicity (8 bytes, little-endian), its key's length (a varint), the key.  The index is
an open-addressing table of 8-byte slots (linear probing, at most 70% full), each holding
its record's offset + 1 (40 bits) and a tag (23 bits of the key's hash, so a lookup reads
the record of a slot it passes only when the tags agree): an entry costs its key, one
length byte, 8 bytes of multiplicity and 8 bytes a slot at 35-70% of the slots used, 19-31
bytes in all.  An entry is named by its record's offset.

A lookup that finds its key reads two places of memory, the slot and the record (the
multiplicity lies beside the key).  Where the state does not fit the caches, each is a
miss of its own: a layout with the tags, the entry numbers, the offsets and the
multiplicities in four separate arrays read five places (docs/benchmarks.md, "What one
cold lookup costs").  The arena grows in place (``array.frombytes`` of zeroes, an eighth
of it and at most a megabyte at a time: the system's ``realloc`` moves a large block
without copying it), so memory does not double while a table loads.

A key is looked up from a typed memoryview of its bytes (``row_store.RowEncoder`` writes a
row's key into a scratch buffer and the lookup reads it there: no ``bytes`` object per
change) and hashed four bytes at a time.  A removed entry leaves its record (marked
removed) and a tombstone slot until removed entries outnumber live ones; the arena is then
compacted in place (in order, so iteration stays in insertion order), the index rebuilt
and ``epoch`` increased: entries are kept across lookups (``RowStore``'s
check-then-apply) only within an epoch.  Entries at multiplicity 0 stay where they are
(``keep_place``): only removal takes an entry out.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator

_GONE = -1  # the multiplicity of a removed entry
_EMPTY = 0  # a slot no entry ever took
_TOMB = -1  # a slot whose entry was removed
_FIRST_SLOTS = 16
_MULTIPLIER = 0x9E3779B97F4A7C15  # odd, 2**64 / golden ratio
_MIX = 0xBF58476D1CE4E5B9  # splitmix64's finalizer constant
_MASK64 = 0xFFFFFFFFFFFFFFFF
_OFFSET_BITS = 40  # a slot: its record's offset + 1 in the low bits, the tag above
_OFFSET_MASK = 0xFF_FFFF_FFFF  # (1 << _OFFSET_BITS) - 1
_TAG_SHIFT = 41  # the tag: a hash's top 23 bits (a slot stays positive, never _TOMB)
_HEADER = 8  # a record's multiplicity, before its key's length
# removed entries are compacted away once they outnumber the live ones and are at least
# this many
_COMPACT_MIN = 1_024
_ZEROS = memoryview(bytes(1 << 20))  # the arena grows by at most this at a time


def hash_of(data: memoryview, start: int, n: int) -> int:
    """The hash of ``n`` bytes of ``data`` from ``start``: four bytes at a time into a
    64-bit state by multiplication, then splitmix64's finalizer, so every input bit moves
    the low bits the index uses."""
    h = (_MULTIPLIER ^ n) & _MASK64
    j = start
    end = start + n
    while j + 4 <= end:
        u = data[j + 3]
        u = (u << 8) | data[j + 2]
        u = (u << 8) | data[j + 1]
        u = (u << 8) | data[j]
        h = ((h ^ u) * _MULTIPLIER) & _MASK64
        j += 4
    while j < end:
        u = data[j]
        h = ((h ^ u) * _MULTIPLIER) & _MASK64
        j += 1
    h ^= h >> 31
    h = (h * _MIX) & _MASK64
    h ^= h >> 29
    return h


class KeyTable:
    """bytes -> int, insertion-ordered, as records in one arena and an index (see the
    module)."""

    def __init__(self):
        self.arena = array("B")
        self.arena_view = self.arena
        self.used = 0  # bytes of the arena written
        self.count = 0  # entries, removed ones included
        self.live = 0  # entries not removed
        self.zeros = 0  # live entries held at multiplicity 0
        self.garbage = 0  # removed entries not yet compacted away
        self.epoch = 0  # compactions so far: entries are named by offset within one
        self.spot = 0  # the slot ``find`` stopped at
        self.hash = 0  # the hash of the key ``find`` looked up
        self.length = 0  # the key length ``_start`` read
        self._new_slots(_FIRST_SLOTS)

    # -- storage ---------------------------------------------------------------------------

    def _new_slots(self, size: int) -> None:
        """An empty index of ``size`` slots (a power of two)."""
        self.slot_array = array("q", bytes(8 * size))
        self.slots = self.slot_array
        self.mask = size - 1
        self.filled = 0  # slots holding an entry or a tombstone
        self.spot = 0

    def _make_room(self, need: int) -> None:
        """An arena with room for ``need`` more bytes, grown in place."""
        self.arena_view = None  # an array with a view of itself open cannot grow
        size = len(self.arena)
        target = self.used + need + min(max(size >> 3, 256), len(_ZEROS))
        while size < target:
            self.arena.frombytes(_ZEROS[:min(len(_ZEROS), target - size)])
            size = len(self.arena)
        self.arena_view = self.arena

    def _append(self, key: memoryview, weight: int) -> int:
        """Write a record of ``key`` and ``weight`` at the arena's end; its offset."""
        n = len(key)
        if self.used + n + _HEADER + 10 > len(self.arena):
            self._make_room(n + _HEADER + 10)
        offset = self.used
        if offset + 1 >= _OFFSET_MASK:  # a slot names a record by its offset + 1, in 40 bits
            raise OverflowError("a table's row keys pass 1 TB, past what a slot can name")
        self._set_weight(offset, weight)
        view = self.arena_view
        pos = offset + _HEADER
        u = n
        # the varint loop of RowEncoder._write_into, written out here too: a shared cdef
        # function would take a memoryview argument per value on the encoder's hot path
        while u >= 128:
            view[pos] = (u & 127) | 128
            pos += 1
            u >>= 7
        view[pos] = u
        pos += 1
        for j in range(n):
            view[pos + j] = key[j]
        self.used = pos + n
        return offset

    def _start(self, e: int) -> int:
        """Where entry ``e``'s key starts in the arena (after its multiplicity and length);
        its length is then ``self.length``."""
        view = self.arena_view
        pos = e + _HEADER
        n = 0
        shift = 0
        byte = view[pos]
        pos += 1
        while byte >= 128:
            n |= (byte & 127) << shift
            shift += 7
            byte = view[pos]
            pos += 1
        n |= byte << shift
        self.length = n
        return pos

    def _set_weight(self, e: int, weight: int) -> None:
        """Write entry ``e``'s multiplicity (two's complement, little-endian)."""
        view = self.arena_view
        u = weight & _MASK64
        for j in range(_HEADER):
            view[e + j] = u & 255
            u >>= 8

    def key_at(self, e: int) -> bytes:
        """The key of entry ``e``."""
        pos = self._start(e)
        return self.arena[pos:pos + self.length].tobytes()

    def weight_at(self, e: int) -> int:
        """The multiplicity of entry ``e`` (``_GONE``, -1, once removed)."""
        view = self.arena_view
        w = view[e + 7]
        if w >= 128:
            w -= 256
        for j in range(6, -1, -1):
            w = w * 256 + view[e + j]
        return w

    def next_entry(self, e: int) -> int:
        """The entry after ``e`` in insertion order (removed ones included), or ``used``
        after the last."""
        pos = self._start(e)
        return pos + self.length

    # -- the index -------------------------------------------------------------------------

    def find(self, key: memoryview) -> int:
        """The entry holding ``key``, or -1.  ``self.spot`` is then the slot holding it, or
        the slot a new entry for it takes (``insert``), and ``self.hash`` its hash."""
        n = len(key)
        h = hash_of(key, 0, n)
        self.hash = h
        slots = self.slots
        view = self.arena_view
        mask = self.mask
        tag = h >> _TAG_SHIFT
        i = h & mask
        spot = -1
        while True:
            s = slots[i]
            if s == _EMPTY:
                self.spot = i if spot < 0 else spot
                return -1
            if s == _TOMB:
                if spot < 0:
                    spot = i
            elif (s >> _OFFSET_BITS) == tag:  # else another key's: its record is not read
                e = (s & _OFFSET_MASK) - 1
                pos = self._start(e)
                if self.length == n:
                    j = 0
                    while j < n and view[pos + j] == key[j]:
                        j += 1
                    if j == n:
                        self.spot = i
                        return e
            i = (i + 1) & mask

    def _slot_of(self, e: int) -> int:
        """The slot holding entry ``e``: where the last :meth:`find` stopped when it found
        ``e`` there (a delete finds its row, then takes it out), else looked up by its
        key's hash."""
        slots = self.slots
        if (slots[self.spot] & _OFFSET_MASK) == e + 1:  # (a tombstone, -1, never matches)
            return self.spot
        pos = self._start(e)
        mask = self.mask
        i = hash_of(self.arena_view, pos, self.length) & mask
        while (slots[i] & _OFFSET_MASK) != e + 1:
            i = (i + 1) & mask
        return i

    def reserve(self, keys: int, size: int) -> None:
        """Room for ``keys`` more keys of ``size`` bytes in all, made at once: a bulk
        insert's keys then go in with no rehash of the index, and no copy of the arena, on
        the way."""
        slots = self.mask + 1
        if 10 * (self.filled + keys) > 7 * slots:  # tombstones count until a rehash
            need = self.live + keys
            while 10 * need > 7 * slots:
                slots *= 2
            self._rehash(slots)
        # each record's multiplicity and key length before the key (a varint of at most 3
        # bytes below 2 MB: a longer key grows the arena as usual), and the headroom
        # ``_append`` wants after the last
        room = size + (_HEADER + 3) * keys + _HEADER + 10
        if self.used + room > len(self.arena):
            self._make_room(room)

    def settle(self) -> None:
        """Give back what a :meth:`reserve` made room for and its keys did not take: a
        bulk insert of rows that repeat each other, or that the table held already, adds
        few entries (2 M rows of 10 distinct ones kept 89 MB of arena and index for 10
        keys).  Room a batch of new keys mostly took stays, so a load of distinct rows
        copies nothing here."""
        headroom = min(max(self.used >> 3, 256), len(_ZEROS))  # as ``_make_room`` leaves
        if len(self.arena) - self.used > 2 * headroom + (self.used >> 2):
            self.arena_view = None  # an array with a view of itself open cannot shrink
            del self.arena[self.used + headroom:]
            self.arena_view = self.arena
        slots = self.mask + 1
        # under a quarter of the 70% load a rehash allows (17.5% of the slots)
        if slots > _FIRST_SLOTS and 40 * self.filled < 7 * slots:
            size = _FIRST_SLOTS
            while 10 * (self.live + 1) > 5 * size:  # half full at most, as ``compact``
                size *= 2
            if size < slots:
                self._rehash(size)

    def _rehash(self, size: int) -> None:
        """A new index of ``size`` slots over the entries not removed."""
        self._new_slots(size)
        slots = self.slots
        mask = self.mask
        view = self.arena_view
        e = 0
        used = self.used
        while e < used:
            pos = self._start(e)
            following = pos + self.length
            if self.weight_at(e) != _GONE:
                h = hash_of(view, pos, self.length)
                i = h & mask
                while slots[i] != _EMPTY:
                    i = (i + 1) & mask
                slots[i] = ((h >> _TAG_SHIFT) << _OFFSET_BITS) | (e + 1)
            e = following
        self.filled = self.live

    # -- the map ---------------------------------------------------------------------------

    def get(self, key: bytes, default: object = None) -> object:
        """The multiplicity held for ``key`` (0 for an entry kept at 0), else ``default``."""
        e = self.find(key)
        if e < 0:
            return default
        return self.weight_at(e)

    def add(self, key: memoryview, weight: int, keep_place: bool = False) -> int:
        """Add ``weight`` to ``key``'s multiplicity (the caller checked it stays >= 0); see
        :meth:`change`.  A key not held yet gets an entry of its own, last.  The
        multiplicity before (0 for a new key)."""
        e = self.find(key)
        if e >= 0:
            return self.change(e, weight, keep_place)
        if weight:
            self.insert(key, weight)
        return 0

    def change(self, e: int, weight: int, keep_place: bool = False) -> int:
        """Add ``weight`` to entry ``e``'s multiplicity: taken to 0 it is removed, or with
        ``keep_place`` stays where it is at 0, so that the row coming back takes its old
        place.  The multiplicity before."""
        old = self.weight_at(e)
        n = old + weight
        if n:
            self._set_weight(e, n)
            if old == 0:
                self.zeros -= 1
        elif keep_place:
            if old:
                self._set_weight(e, 0)
                self.zeros += 1
        else:
            self._take_out(e, self._slot_of(e))
        return old

    def insert(self, key: memoryview, weight: int) -> None:
        """A new entry, last, for ``key``, which :meth:`find` just looked up and did not
        find (its slot and hash are still ``self.spot`` and ``self.hash``)."""
        if 10 * (self.filled + 1) > 7 * (self.mask + 1):  # at most 70% of slots taken
            self._rehash(2 * (self.mask + 1) if 20 * (self.live + 1) > 7 * (self.mask + 1)
                         else self.mask + 1)  # mostly tombstones: the same size again
            self.find(key)
        e = self._append(key, weight)
        if weight == 0:
            self.zeros += 1
        if self.slots[self.spot] == _EMPTY:
            self.filled += 1
        self.slots[self.spot] = ((self.hash >> _TAG_SHIFT) << _OFFSET_BITS) | (e + 1)
        self.count += 1
        self.live += 1

    def _take_out(self, e: int, slot: int) -> None:
        """Remove entry ``e``, held in ``slot``."""
        if self.weight_at(e) == 0:
            self.zeros -= 1
        self._set_weight(e, _GONE)
        self.slots[slot] = _TOMB
        self.live -= 1
        self.garbage += 1
        if self.garbage > _COMPACT_MIN and self.garbage > self.live:
            self.compact(False)

    def __len__(self) -> int:
        return self.live

    def entries(self) -> Iterator[int]:
        """The entries not removed, in insertion order (compacting ends the iteration's
        validity, as changing a dict does)."""
        e = 0
        end = self.used  # the records held when the iteration began
        while e < end:
            following = self.next_entry(e)
            if self.weight_at(e) != _GONE:
                yield e
            e = following

    def copy(self, drop_zeros: bool = False) -> KeyTable:
        """Another table holding the same entries in the same order (without those held at
        0, with ``drop_zeros``), compacted if this one holds removed entries."""
        other = KeyTable()
        other.arena = array("B", self.arena)
        other.arena_view = other.arena
        other.used = self.used
        other.count, other.live, other.zeros = self.count, self.live, self.zeros
        other.garbage = self.garbage
        other.slot_array = array("q", self.slot_array)
        other.slots = other.slot_array
        other.mask, other.filled = self.mask, self.filled
        if other.garbage or (drop_zeros and other.zeros):
            other.compact(drop_zeros)
        return other

    def compact(self, drop_zeros: bool) -> None:
        """Move the entries not removed (and not at 0, with ``drop_zeros``) to the front of
        the arena, in order, shrink it and rebuild the index.  In place: a record's bytes
        only ever move towards the front."""
        view = self.arena_view
        out = 0  # entries kept
        used = 0  # the next byte
        e = 0
        end = self.used
        while e < end:
            following = self.next_entry(e)
            w = self.weight_at(e)
            if w != _GONE and not (drop_zeros and w == 0):
                need = following - e
                if e != used:
                    for j in range(need):
                        view[used + j] = view[e + j]
                used += need
                out += 1
            e = following
        view = self.arena_view = None  # an array with a view of itself open cannot shrink
        del self.arena[used:]
        self.arena_view = self.arena
        self.used = used
        self.count = self.live = out
        if drop_zeros:
            self.zeros = 0
        self.garbage = 0
        self.epoch += 1
        size = _FIRST_SLOTS
        while 10 * (out + 1) > 5 * size:  # half full at most, after compacting
            size *= 2
        self._rehash(size)

    def nbytes(self) -> int:
        """The bytes held by the arena and the index."""
        return len(self.arena) + 8 * (self.mask + 1)
