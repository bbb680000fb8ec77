"""The GMR operations of Figure 2 of dynamic-yannakakis-iedyn.txt, as unit tests.

Expected values are the figure's, typed in from the paper.
"""

from upkeep import zset
from upkeep.dyn import Representation
from upkeep.gjt import build_gjt_pair

R = {(1, 2, 2): 2, (2, 4, 6): 3, (1, 2, 3): 3}
S = {(4, 5): 5, (2, 3): 4, (1, 4): 2}
T = {(4, 5): -4, (2, 1): 6, (1, 4): 3}


def test_join_multiplies_weights():
    joined, cols = zset.join(S, ["u", "v"], T, ["u", "v"])
    assert cols == ["u", "v"]
    assert joined == {(4, 5): -20, (1, 4): 6}


def test_projection_sums_weights():
    assert zset.project(R, ["x", "y", "z"], ["y"]) == {(2,): 5, (4,): 3}


def test_union_and_minus():
    assert zset.plus(S, T) == {(4, 5): 1, (2, 3): 4, (1, 4): 5, (2, 1): 6}
    assert zset.minus(S, T) == {(4, 5): 9, (2, 3): 4, (1, 4): -1, (2, 1): -6}


def test_selection_over_a_product():
    product, cols = zset.join(R, ["x", "y", "z"], S, ["u", "v"])
    selected = zset.select(product, lambda t: t[cols.index("y")] < t[cols.index("u")])
    assert selected == {(1, 2, 2, 4, 5): 10, (1, 2, 3, 4, 5): 15}


def test_dynamic_yannakakis_join_agrees_with_figure():
    """The (T,N)-rep of S(u,v) |x| T(u,v) enumerates the same GMR, negative weights included."""
    pair = build_gjt_pair([(0, 1), (0, 1)], (0, 1))
    rep = Representation(pair)
    rep.update({0: dict(S), 1: dict(T)}, want_delta=False)
    assert dict(rep.enumerate()) == {(4, 5): -20, (1, 4): 6}
    assert rep.weight((4, 5)) == -20
    assert rep.weight((2, 3)) is None
