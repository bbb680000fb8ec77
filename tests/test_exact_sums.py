"""Floating-point SUM/AVG kept under +x/-x streams do not drift (exact accumulation)."""

import math
import random
from fractions import Fraction

import pytest

import upkeep
from upkeep.exact import exact_to_float, float_to_exact


def test_exact_roundtrip_of_extreme_doubles():
    for x in (0.1, -1e-300, 5e-324, 1.7976931348623157e308, 3.0):
        assert exact_to_float(float_to_exact(x)) == x


@pytest.mark.parametrize("strategy", ["dyn", "general"])
def test_million_plus_minus_pairs_leave_the_exact_sum(strategy):
    rng = random.Random(strategy)
    db = upkeep.connect()
    db.execute("CREATE TABLE t (g INTEGER, x DOUBLE)")
    db.execute("CREATE TABLE k (g INTEGER)")
    db.insert("k", [(0,)])
    db.create_view("s", "SELECT k.g, SUM(t.x) AS total, AVG(t.x) AS mean "
                        "FROM t JOIN k ON t.g = k.g GROUP BY k.g", strategy=strategy)
    kept = []
    pairs = 0
    while pairs < 1_000_000:
        batch = [(0, rng.choice((1, -1)) * 10.0 ** rng.uniform(-12, 12)) for _ in range(100_000)]
        db.insert("t", batch)
        rng.shuffle(batch)
        doomed, stay = batch[:99_990], batch[99_990:]
        db.delete("t", doomed)  # each deleted value was inserted: a +x/-x pair
        pairs += len(doomed)
        kept.extend(x for _, x in stay)
    ((g, total, mean),) = db.view("s").rows()
    exact = sum(Fraction(x) for x in kept)
    assert total == float(exact)  # correctly rounded exact sum, not merely close
    assert total == math.fsum(kept)
    assert mean == pytest.approx(float(exact / len(kept)), rel=1e-15)
