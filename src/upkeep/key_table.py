# cython: boundscheck=False, wraparound=False
# (compiled without index checks: every position read or written is inside the arena, an
# entry array or the slot array, as the methods below keep them sized)
"""A compact map from byte strings to multiplicities, in insertion order: a base table's
row keys (``row_store.RowStore``), without a Python object per row.

A dict of ``bytes`` keys costs, beside each key's own bytes, a bytes object's header (33
bytes, rounded up by the allocator) and a dict entry with its index (24 bytes, and 4 or 8
bytes of index per slot, at most 2/3 full): 70-100 bytes a row.  Here the keys are written
one after another into one byte arena, each after its length as a varint.  Per entry there
is an 8-byte offset and an 8-byte multiplicity in flat arrays (grown by a quarter), and
the index is an open-addressing table of 4-byte slots (entry number + 1; linear probing,
at most 70% full) and a tag byte per slot (the hash's top 8 bits, so a lookup reads the
key of an entry it passes only when the tags agree): an entry costs its key, one length
byte and 23-34 bytes.  The arena
grows in place (``array.frombytes`` of zeroes, an eighth of it and at most a megabyte at a
time: the system's ``realloc`` moves a large block without copying it), so memory does not
double while a table loads.

A key is looked up from a typed memoryview of its bytes (``row_store.RowEncoder`` writes a
row's key into a scratch buffer and the lookup reads it there: no ``bytes`` object per
change) and hashed four bytes at a time.  A removed entry leaves its bytes and a tombstone
slot until removed entries outnumber live ones; the arena is then compacted in place (in
order, so iteration stays in insertion order), the index rebuilt and ``epoch`` increased:
entry numbers are kept across lookups (``RowStore``'s check-then-apply) only within an
epoch.  Entries at multiplicity 0 stay where they are (``keep_place``): only removal takes
an entry out.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator

_GONE = -1  # the multiplicity of a removed entry
_EMPTY = 0  # a slot no entry ever took
_TOMB = -1  # a slot whose entry was removed
_FIRST_SLOTS = 16
_FIRST_ENTRIES = 16
_MULTIPLIER = 0x9E3779B97F4A7C15  # odd, 2**64 / golden ratio
_MIX = 0xBF58476D1CE4E5B9  # splitmix64's finalizer constant
_MASK64 = 0xFFFFFFFFFFFFFFFF
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
    """bytes -> int, insertion-ordered, in one arena and flat arrays (see the module)."""

    def __init__(self):
        self.arena = array("B")
        self.arena_view = self.arena
        self.used = 0  # bytes of the arena written
        self.count = 0  # entries, removed ones included
        self.live = 0  # entries not removed
        self.zeros = 0  # live entries held at multiplicity 0
        self.garbage = 0  # removed entries not yet compacted away
        self.epoch = 0  # compactions so far: entry numbers hold within one
        self.spot = 0  # the slot ``find`` stopped at
        self.hash = 0  # the hash of the key ``find`` looked up
        self.length = 0  # the key length ``_start`` read
        self.capacity = 0
        self._resize_entries(_FIRST_ENTRIES)
        self._new_slots(_FIRST_SLOTS)

    # -- storage ---------------------------------------------------------------------------

    def _resize_entries(self, capacity: int) -> None:
        """Entry arrays of ``capacity`` entries holding the first ``count``."""
        offsets = array("q", bytes(8 * capacity))
        weights = array("q", bytes(8 * capacity))
        if self.count:
            offsets[:self.count] = self.offset_array[:self.count]
            weights[:self.count] = self.weight_array[:self.count]
        self.offset_array, self.weight_array = offsets, weights
        self.offsets, self.weights = offsets, weights
        self.capacity = capacity

    def _new_slots(self, size: int) -> None:
        """An empty index of ``size`` slots (a power of two), with a tag per slot."""
        self.slot_array = array("i", bytes(4 * size))
        self.slots = self.slot_array
        self.tag_array = array("B", bytes(size))
        self.tags = self.tag_array
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

    def _append(self, key: memoryview) -> int:
        """Write ``key`` (its length first) at the arena's end; its offset."""
        n = len(key)
        if self.used + n + 10 > len(self.arena):
            self._make_room(n + 10)
        view = self.arena_view
        offset = self.used
        pos = offset
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
        """Where entry ``e``'s key starts in the arena (after its length); its length is
        then ``self.length``."""
        view = self.arena_view
        pos = self.offsets[e]
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

    def key_at(self, e: int) -> bytes:
        """The key of entry ``e``."""
        pos = self._start(e)
        return self.arena[pos:pos + self.length].tobytes()

    def weight_at(self, e: int) -> int:
        """The multiplicity of entry ``e``."""
        return self.weights[e]

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
        tags = self.tags
        tag = h >> 56
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
            elif tags[i] == tag:  # else another key's: its bytes are not read
                pos = self._start(s - 1)
                if self.length == n:
                    j = 0
                    while j < n and view[pos + j] == key[j]:
                        j += 1
                    if j == n:
                        self.spot = i
                        return s - 1
            i = (i + 1) & mask

    def _slot_of(self, e: int) -> int:
        """The slot holding entry ``e``: where the last :meth:`find` stopped when it found
        ``e`` there (a delete finds its row, then takes it out), else looked up by its
        key's hash."""
        if self.slots[self.spot] == e + 1:
            return self.spot
        pos = self._start(e)
        slots = self.slots
        mask = self.mask
        i = hash_of(self.arena_view, pos, self.length) & mask
        while slots[i] != e + 1:
            i = (i + 1) & mask
        return i

    def reserve(self, keys: int, size: int) -> None:
        """Room for ``keys`` more keys of ``size`` bytes in all, made at once: a bulk
        insert's keys then go in with no rehash of the index, and no copy of the entry
        arrays or the arena, on the way (grown a step at a time, committing TPC-H SF 1's
        line items copied the entry arrays at every quarter: 15% of the commit).  The
        entry arrays keep the slack a step of growth leaves, so that the first insert
        after a load does not copy them whole (a 100 ms pause at SF 1)."""
        slots = self.mask + 1
        if 10 * (self.filled + keys) > 7 * slots:  # tombstones count until a rehash
            need = self.live + keys
            while 10 * need > 7 * slots:
                slots *= 2
            self._rehash(slots)
        need = self.count + keys
        if need > self.capacity:  # with the slack a step of growth leaves (a quarter), or
            self._resize_entries(need + (need >> 2))  # the next insert copies them all
        # each key's length before it (a varint of at most 3 bytes below 2 MB: a longer key
        # grows the arena as usual), and the headroom ``_append`` wants after the last
        room = size + 3 * keys + 10
        if self.used + room > len(self.arena):
            self._make_room(room)

    def settle(self) -> None:
        """Give back what a :meth:`reserve` made room for and its keys did not take: a
        bulk insert of rows that repeat each other, or that the table held already, adds
        few entries (2 M rows of 10 distinct ones kept 89 MB of entry arrays, arena and
        index for 10 keys).  Room a batch of new keys mostly took (within the growth
        slack) stays, so a load of distinct rows copies nothing here."""
        need = max(_FIRST_ENTRIES, self.count + (self.count >> 2))
        if self.capacity > 2 * need:
            self._resize_entries(need)
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
        tags = self.tags
        mask = self.mask
        weights = self.weights
        view = self.arena_view
        for e in range(self.count):
            if weights[e] == _GONE:
                continue
            pos = self._start(e)
            h = hash_of(view, pos, self.length)
            i = h & mask
            while slots[i] != _EMPTY:
                i = (i + 1) & mask
            slots[i] = e + 1
            tags[i] = h >> 56
        self.filled = self.live

    # -- the map ---------------------------------------------------------------------------

    def get(self, key: bytes, default: object = None) -> object:
        """The multiplicity held for ``key`` (0 for an entry kept at 0), else ``default``."""
        e = self.find(key)
        if e < 0:
            return default
        return self.weights[e]

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
        old = self.weights[e]
        n = old + weight
        if n:
            self.weights[e] = n
            if old == 0:
                self.zeros -= 1
        elif keep_place:
            if old:
                self.weights[e] = 0
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
        if self.count == self.capacity:
            self._resize_entries(self.capacity + (self.capacity >> 2) + _FIRST_ENTRIES)
        e = self.count
        self.offsets[e] = self._append(key)
        self.weights[e] = weight
        if weight == 0:
            self.zeros += 1
        if self.slots[self.spot] == _EMPTY:
            self.filled += 1
        self.slots[self.spot] = e + 1
        self.tags[self.spot] = self.hash >> 56
        self.count = e + 1
        self.live += 1

    def _take_out(self, e: int, slot: int) -> None:
        """Remove entry ``e``, held in ``slot``."""
        if self.weights[e] == 0:
            self.zeros -= 1
        self.weights[e] = _GONE
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
        for e in range(self.count):
            if self.weights[e] != _GONE:
                yield e

    def copy(self, drop_zeros: bool = False) -> KeyTable:
        """Another table holding the same entries in the same order (without those held at
        0, with ``drop_zeros``), compacted if this one holds removed entries."""
        other = KeyTable()
        other.arena = array("B", self.arena)
        other.arena_view = other.arena
        other.used = self.used
        other.count, other.live, other.zeros = self.count, self.live, self.zeros
        other.garbage = self.garbage
        other.offset_array = array("q", self.offset_array)
        other.weight_array = array("q", self.weight_array)
        other.offsets, other.weights = other.offset_array, other.weight_array
        other.capacity = self.capacity
        other.slot_array = array("i", self.slot_array)
        other.slots = other.slot_array
        other.tag_array = array("B", self.tag_array)
        other.tags = other.tag_array
        other.mask, other.filled = self.mask, self.filled
        if other.garbage or (drop_zeros and other.zeros):
            other.compact(drop_zeros)
        return other

    def compact(self, drop_zeros: bool) -> None:
        """Move the entries not removed (and not at 0, with ``drop_zeros``) to the front of
        the arena and of the entry arrays, in order, shrink them and rebuild the index.  In
        place: an entry's bytes only ever move towards the front."""
        weights = self.weights
        offsets = self.offsets
        view = self.arena_view
        out = 0  # the next entry number
        used = 0  # the next byte
        for e in range(self.count):
            w = weights[e]
            if w == _GONE or (drop_zeros and w == 0):
                continue
            start = offsets[e]
            need = self._start(e) + self.length - start
            if start != used:
                for j in range(need):
                    view[used + j] = view[start + j]
            offsets[out] = used
            weights[out] = w
            used += need
            out += 1
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
        if self.capacity > 2 * max(_FIRST_ENTRIES, out):
            self._resize_entries(max(_FIRST_ENTRIES, out))

    def nbytes(self) -> int:
        """The bytes held by the arena, the entry arrays and the index."""
        return len(self.arena) + 16 * self.capacity + 5 * (self.mask + 1)
