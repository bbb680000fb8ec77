"""The general operators' compact state: a join index keeps a key's lone row as the bucket
itself, and an aggregate group of COUNT / SUM / AVG keeps its channels in one flat list
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
from upkeep.operators import LIST_BUCKET_MAX, _IndexedState, bucket_items
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
