"""CPython's cyclic garbage collector paused while bulk work runs (a batch, a load, a build).

A many-row batch allocates objects that live past the young generation's threshold (its
delta rows, the views' deltas), so the collector runs during it, and each run walks every
container tracked as young: a table's or an index's dict that receives a newly created
tuple is tracked again as young, so one collection can walk millions of entries.  At
TPC-H SF 1 a 10,000-change transaction on FQ1 spent 0.21 s of its 0.57 s in ten such
collections, while single-row transactions, which free what they allocate, ran none.
upkeep's state holds no reference cycles, so pausing frees nothing later than it would
be freed; the collector resumes, as it was, when the work ends.

Resuming is not enough after bulk work: the state's dicts that received new tuples are
still tracked as young, so the first collections after the work walk them whole (at TPC-H
SF 0.1, FQ1's 10,000-change transaction paid 15% for it, and it grows with the state).
Bulk work therefore ends by moving everything young to the oldest generation
(``gc.freeze()`` then ``gc.unfreeze()``: two list splices, no traversal), where the next
full collection finds it as it would have found it after two young ones.  A caller's own
frozen objects are left frozen: then nothing is moved.  Only bulk work does this; a
single-row commit leaves the young generation to the collector (moving the caller's
young objects at every commit would keep its cyclic garbage from being collected until a
full collection).

Single-row work meets the same walk another way: the collector untracks a plain dict whose
keys and values are all untracked (tuples of numbers and strings are), and the next new
tuple put into it tracks it again, as young.  A state dict of 600,000 entries was then
walked by every young collection a stream of single-row inserts ran (FQ1 at SF 0.1: 38 us
per insert against 29 with the collector off).  State dicts are therefore ``StateDict``:
a dict subclass, which CPython never untracks, so it ages into the oldest generation once
and stays there.
"""

from __future__ import annotations

import gc

#: a batch of this many rows or more is bulk work (its young objects are promoted)
BULK_ROWS = 1_000
#: work on fewer rows leaves the collector running
PAUSE_ROWS = 64


class StateDict(dict):
    """A dict of maintained state that the collector keeps tracked, so it ages out of the
    young generations instead of being walked whole by their collections (module doc).

    The compiled hot paths call dict's own methods on it, as ``dict.get(d, k)``,
    ``dict.pop(d, k, None)``, ``dict.setdefault(d, k, w)`` and ``dict.__contains__(d,
    k)``: Cython makes those forms direct C calls (``PyDict_GetItemWithError`` and its
    kin), where ``d.get(k)`` on a field not typed ``dict`` (a subclass is not one) looks
    the method up by name, and an alias (``get = dict.get``) is a call of a Python object
    (about 150 instructions either way; a Dynamic Yannakakis change makes a dozen).  The C
    calls check for None only: what they are given must be a dict (this class, or a plain
    one), not another mapping, which would fail with a SystemError or worse."""

    __slots__ = ()


class gc_paused:  # noqa: N801 - used as a context manager, like contextlib's
    """Collector off while work on ``rows`` rows runs, then back as it was (nesting and a
    caller's own ``gc.disable()`` are respected); after bulk work (``BULK_ROWS``), what is
    young is promoted to the oldest generation first (module doc).  Work on fewer than
    ``PAUSE_ROWS`` rows runs with the collector as it is: pausing it buys nothing there and
    would cost a single-row commit a few percent.  Entering and leaving even a pause that
    does nothing costs the ``with`` statement's own calls (about 1k instructions), so the
    single-row path (a commit, its check, a statement staged in a transaction) tests
    ``PAUSE_ROWS`` itself and enters the pause only for bulk work."""

    __slots__ = ("rows", "paused")

    def __init__(self, rows: int) -> None:
        self.rows = rows
        self.paused = False

    def __enter__(self) -> None:
        if self.rows >= PAUSE_ROWS and gc.isenabled():
            gc.disable()
            self.paused = True

    def __exit__(self, *exc: object) -> None:
        if self.paused:
            if self.rows >= BULK_ROWS and not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()
