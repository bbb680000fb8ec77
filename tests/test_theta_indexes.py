"""The sorted indexes of IEDyn edges (``dynamic-yannakakis-iedyn.txt`` section 4) against
brute force: a sorted run's interval scans and range sums, and the box index that serves two
inequalities on different sides of one edge; and that enumeration over such an edge examines
only matching tuples (the delay then depends on the index, not on the non-matches)."""

from __future__ import annotations

import duckdb
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import HYPOTHESIS_SETTINGS

import upkeep
from upkeep.theta import BoxIndex, SortedRun, _Box

OPS = ["<", "<=", ">", ">="]
PASSES = {"<": lambda v, p: v < p, "<=": lambda v, p: v <= p,
          ">": lambda v, p: v > p, ">=": lambda v, p: v >= p}

values = st.integers(-20, 20)
changes = st.lists(st.tuples(st.booleans(), values, values), max_size=80)
bound = st.tuples(st.sampled_from(OPS), values)


@settings(max_examples=60, **HYPOTHESIS_SETTINGS)
@given(changes=changes, first=bound, second=st.one_of(st.none(), bound))
def test_sorted_run_intervals_match_brute_force(changes, first, second) -> None:
    run, kept = SortedRun(), {}
    SortedRun.BLOCK = 4  # small blocks: scans and sums cross many of them
    try:
        for n, (add, v, _) in enumerate(changes):
            t = (v, n)
            if add or not kept:
                run.insert(v, t, 1 + n % 3)
                kept[t] = 1 + n % 3
            else:
                gone = sorted(kept)[n % len(kept)]
                run.remove(gone[0], gone)
                del kept[gone]
    finally:
        SortedRun.BLOCK = 512
    args = (*first, *(second or (None, None)))
    want = [t for t in sorted(kept) if PASSES[first[0]](t[0], first[1])
            and (second is None or PASSES[second[0]](t[0], second[1]))]
    got = list(run.scan(*args))
    assert sorted(got) == want
    assert [t[0] for t in got] == sorted(t[0] for t in got)
    assert run.total(*args) == (sum(kept[t] for t in want) if want else None)


@settings(max_examples=60, **HYPOTHESIS_SETTINGS)
@given(changes=changes, bounds=st.lists(bound, min_size=1, max_size=2), second=bound)
def test_box_index_matches_brute_force(changes, bounds, second) -> None:
    index = BoxIndex(lambda t: (), lambda t: t[0], lambda t: t[1])
    kept: set[tuple] = set()
    for n, (add, v, u) in enumerate(changes):
        if add or not kept:
            t = (v, u, n)
            index.insert(t, 1)
            kept.add(t)
        else:
            gone = sorted(kept)[n % len(kept)]
            index.remove(gone, 1)
            kept.discard(gone)
        if n % 7 == 0:  # scans between changes: the tree is rebuilt after each change
            list(index.scan((), bounds, *second))
    want = {t for t in kept if all(PASSES[op](t[0], p) for op, p in bounds)
            and PASSES[second[0]](t[1], second[1])}
    got = list(index.scan((), bounds, *second))
    assert len(got) == len(set(got)) and set(got) == want


def test_two_inequalities_on_one_edge_examine_only_matches(monkeypatch) -> None:
    """``x.v > y.w AND x.c < y.b`` on one edge: a y insert probing x's box index is handed
    only matching tuples, where a run sorted on ``x.v`` alone would hand out every
    ``x.v > y.w``."""
    examined: list = []
    for cls in (SortedRun, _Box):
        def counted(self, *args, _scan=cls.scan):
            for t in _scan(self, *args):
                examined.append(t)
                yield t
        monkeypatch.setattr(cls, "scan", counted)
    sql = "SELECT x.id, y.id FROM x, y WHERE x.v > y.w AND x.c < y.b"
    xs = [(i, i % 50, (i * 37) % 50) for i in range(300)]
    ys = [(j, j * 5, 10 + j) for j in range(10)]
    db, con = upkeep.connect(), duckdb.connect()
    for target in (db, con):
        target.execute("CREATE TABLE x(id INTEGER, v INTEGER, c INTEGER)")
        target.execute("CREATE TABLE y(id INTEGER, w INTEGER, b INTEGER)")
    db.create_view("pairs", sql, strategy="dyn")
    db.insert("x", xs)
    examined.clear()
    db.insert("y", ys)  # each y tuple probes x's index for its partners
    con.executemany("INSERT INTO x VALUES (?, ?, ?)", xs)
    con.executemany("INSERT INTO y VALUES (?, ?, ?)", ys)
    probed = len(examined)
    rows = db.view("pairs").rows()
    assert sorted(rows) == sorted(con.execute(sql).fetchall())
    assert 0 < probed <= len(rows)
