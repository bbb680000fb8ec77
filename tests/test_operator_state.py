"""The general operators' compact state: a join index keeps a key's lone row as the bucket
itself (of an input of the key and one more column, the payload values instead of the
rows), and an aggregate group of COUNT / SUM / AVG keeps its channels in one flat list
and its output row, which a view ending in GROUP BY reads instead of a dict of its rows
(docs/design.md, "State layout").  Checked against plain models under random changes."""

from __future__ import annotations

from collections import Counter

import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st

import upkeep
from upkeep.aggregates import GroupState, compile_aggregate
from upkeep.expressions import ExpressionCompiler, table_scope
from upkeep.operators import LIST_BUCKET_MAX, _IndexedState, bucket_items, join_state
from upkeep.types import BIGINT, DOUBLE
from upkeep.views import GroupedView, OperatorView

ROWS = st.tuples(st.integers(0, 3), st.integers(0, 11))  # up to 12 rows a key
DELTAS = st.lists(st.dictionaries(ROWS, st.sampled_from([-2, -1, 0, 1, 1, 1, 2]), max_size=6),
                  max_size=12)


def _model_apply(model: dict[tuple, dict[tuple, int]], delta: dict[tuple, int],
                 key_of) -> None:
    for t, w in delta.items():
        bucket = model.setdefault(key_of(t), {})
        bucket[t] = bucket.get(t, 0) + w
        if not bucket[t]:
            del bucket[t]
        if not bucket:
            del model[key_of(t)]


@settings(max_examples=300, deadline=None)
@given(DELTAS, st.sampled_from([(0,), (0, 1), (1,)]))
def test_indexed_state_equals_a_dict_of_dicts(deltas, positions):
    """Every bucket holds the rows and weights of the model; a key whose only row has
    weight 1 holds that row itself, a few rows of weight 1 a list of them, any other a
    dict; ``size`` counts distinct rows."""
    state = _IndexedState(positions)

    def key_of(t):
        return tuple(t[p] for p in positions)

    model: dict[tuple, dict[tuple, int]] = {}
    for delta in deltas:
        state.apply(delta)
        _model_apply(model, delta, key_of)
        got = {k: dict(bucket_items(b)) for k, b in state.buckets.items()}
        assert got == model
        for k, b in state.buckets.items():
            ones = set(model[k].values()) == {1}
            assert (type(b) is tuple) == (ones and len(model[k]) == 1), (k, b)
            assert type(b) is not list or (ones and 2 <= len(b) <= LIST_BUCKET_MAX)
        assert state.size == sum(len(b) for b in model.values())


def test_a_row_that_is_its_own_key_keys_its_bucket():
    """An input of the key columns alone (one join column) stores one tuple per key: the
    bucket's key is the row object itself."""
    state = _IndexedState((0,))
    row = (7,)
    state.apply({row: 1})
    (key, bucket), = state.buckets.items()
    assert key is row and bucket is row
    state.apply({(7,): -1})
    assert not state.buckets and state.size == 0


PAYLOAD_ROWS = st.tuples(st.integers(0, 3), st.one_of(st.none(), st.integers(0, 11)))
PAYLOAD_DELTAS = st.lists(
    st.dictionaries(PAYLOAD_ROWS, st.sampled_from([-2, -1, 0, 1, 1, 1, 2]), max_size=6),
    max_size=12)


@settings(max_examples=300, deadline=None)
@given(PAYLOAD_DELTAS, st.booleans())
def test_payload_state_equals_a_dict_of_dicts(deltas, key_first):
    """An input of the key and one more column keeps the payloads: every bucket rebuilds
    the model's rows and weights (NULL payloads too), a lone row of weight 1 is its bare
    value, a few rows of weight 1 a list of values, any other a dict; ``size`` counts
    distinct rows; a probe joins a delta with the rebuilt rows."""
    positions, payload = ((0,), 1) if key_first else ((1,), 0)
    state = join_state(positions, 2)
    assert state.payload == payload

    def row(t):  # the generated (key, payload) in the input's column order
        return t if key_first else (t[1], t[0])

    def key_of(t):
        return (t[positions[0]],)

    model: dict[tuple, dict[tuple, int]] = {}
    for delta in deltas:
        delta = {row(t): w for t, w in delta.items()}
        state.apply(delta)
        _model_apply(model, delta, key_of)
        got = {k: {state.restore(k, v): n for v, n in bucket_items(b)}
               for k, b in state.buckets.items()}
        assert got == model
        for k, b in state.buckets.items():
            ones = set(model[k].values()) == {1}
            assert (type(b) not in (list, dict)) == (ones and len(model[k]) == 1), (k, b)
            assert type(b) is not list or (ones and 2 <= len(b) <= LIST_BUCKET_MAX)
        assert state.size == sum(len(b) for b in model.values())
        probe = {(k,): w for k, w in enumerate((1, -1, 2, 1, 3))}
        out: dict[tuple, int] = {}
        state.probe(out, probe, lambda t: t, lambda t, s: t + s, True)
        expected: Counter = Counter()
        for (k,), w in probe.items():
            for r, n in model.get((k,), {}).items():
                expected[(k, *r)] += w * n
        assert out == {r: n for r, n in expected.items() if n}


def test_join_inputs_of_the_key_and_one_column_keep_payloads():
    """The general strategy's join indexes its right input by payloads when that input
    is the join key and one more column (an aggregate's measure), a wider one by rows,
    and the view's rows are right under changes on both sides."""
    assert join_state((0,), 1).payload is None  # the row is its own key
    assert join_state((0,), 3).payload is None
    assert join_state((0, 2), 3).payload == 1
    assert join_state((0, 2), 3).restore((7, 9), "x") == (7, "x", 9)
    db = upkeep.connect()
    db.execute("CREATE TABLE o (k INTEGER PRIMARY KEY, c INTEGER)")
    db.execute("CREATE TABLE l (k INTEGER, price DOUBLE)")
    sql = "SELECT o.k, COUNT(*) AS n, SUM(price) AS s FROM o JOIN l ON o.k = l.k GROUP BY o.k"
    view = db.create_view("v", sql, strategy="general")
    join = db.local_catalog.runtime("v").root.child
    assert join.lstate.payload is None and join.rstate.payload == 1
    for change, table, rows in [(db.insert, "l", [(1, 2.5), (1, 2.5), (1, None), (2, 4.0),
                                                  (3, 1.0)]),
                                (db.insert, "o", [(1, 10), (2, 20)]),
                                (db.delete, "o", [(2, 20)]),
                                (db.insert, "l", [(2, 5.0), (1, 7.0)]),
                                (db.delete, "l", [(1, 2.5)]),
                                (db.insert, "o", [(2, 21), (3, 30)])]:
        change(table, rows)
        assert Counter(view.rows()) == Counter(db.execute(sql).fetchall())  # DuckDB's
    assert Counter(view.rows()) == Counter({(1, 3, 9.5): 1, (2, 2, 9.0): 1, (3, 1, 1.0): 1})


def test_a_joined_row_keeps_its_left_inputs_own_key_values():
    """0.0 and -0.0 join as equal keys, yet a row built by the join holds the left input's
    own value: a payload index on the left, rebuilding rows from the probing key, would
    put the right's 0.0 there, and the row's later delete (of -0.0) would miss it (found
    by review: the view kept a row the query no longer gives)."""
    db = upkeep.connect()
    db.execute("CREATE TABLE a (k DOUBLE, x INTEGER)")
    db.execute("CREATE TABLE b (k DOUBLE, y INTEGER, z INTEGER)")
    db.create_view("w", "SELECT k * -1 AS k, x FROM a")
    sql = "SELECT CAST(w.k AS VARCHAR) AS s, x, y, z FROM w JOIN b ON w.k = b.k"
    view = db.create_view("v", sql, strategy="general")
    db.insert("a", [(0.0, 10)])
    db.insert("b", [(0.0, 20, 30)])
    assert view.rows() == db.execute(sql).fetchall() == [("-0.0", 10, 20, 30)]
    db.delete("a", [(0.0, 10)])
    assert view.rows() == db.execute(sql).fetchall() == []


def _aggs(*sqls: str):
    compiler = ExpressionCompiler(table_scope("t", [("a", BIGINT), ("x", DOUBLE)]))
    return [compile_aggregate(sqlglot.parse_one(s), compiler) for s in sqls]


def test_a_group_of_sums_has_one_flat_channel_list_and_no_value_sets():
    aggs = _aggs("COUNT(*)", "SUM(x)", "AVG(a)", "COUNT(a)")
    state = GroupState(aggs)
    assert state.values is None and state.channels == [0] * 8
    for row, w in [((1, 2.5), 1), ((3, None), 2), ((1, 2.5), -1), ((5, 0.25), 1)]:
        state.add(aggs, row, w)
    count_star, total, mean, count = state.result(aggs)
    assert (count_star, total, mean, count) == (3, 0.25, (3 * 2 + 5) / 3, 3)
    with_min = _aggs("SUM(x)", "MIN(a)")
    assert GroupState(with_min).values is not None


def test_a_grouped_view_reads_its_rows_and_memberships_from_the_groups():
    """A general view ending in GROUP BY whose select list names the group key keeps no
    dict of its rows: they are read from the groups, and a row's membership is one
    group's lookup.  One whose select list leaves the key out (groups may share a row)
    keeps its dict of rows, so its memberships stay one lookup too."""
    db = upkeep.connect()
    db.execute("CREATE TABLE t (g INTEGER, x INTEGER)")
    by_g = db.create_view("by_g", "SELECT g, COUNT(*) AS n, SUM(x) AS s FROM t GROUP BY g",
                          strategy="general")
    counts = db.create_view("counts", "SELECT COUNT(*) AS n FROM t GROUP BY g",
                            strategy="general")
    total = db.create_view("total", "SELECT COUNT(*) AS n FROM t", strategy="general")
    db.insert("t", [(1, 1), (2, 1), (2, 2), (3, 5), (3, 6), (4, 7)])
    db.delete("t", [(4, 7)])
    views = db.local_catalog.views
    assert isinstance(views["by_g"], GroupedView) and not hasattr(views["by_g"], "output")
    assert isinstance(views["total"], GroupedView)
    assert isinstance(views["counts"], OperatorView)
    assert Counter(by_g.rows()) == Counter({(1, 1, 1): 1, (2, 2, 3): 1, (3, 2, 11): 1})
    assert Counter(counts.rows()) == Counter({(1,): 1, (2,): 2})
    assert total.rows() == [(5,)] and total.count((5,)) == 1 and total.count((6,)) == 0
    assert by_g.count((2, 2, 3)) == 1 and by_g.count((2, 2, 4)) == 0
    assert by_g.count((4, 1, 7)) == 0 and counts.count((2,)) == 2
