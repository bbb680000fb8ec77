"""Floating-point SUM/AVG kept under +x/-x streams do not drift (exact accumulation)."""

import math
import random
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import upkeep
from upkeep.exact import exact_mean, exact_to_float, float_to_exact


def test_exact_roundtrip_of_extreme_doubles():
    for x in (0.1, -1e-300, 5e-324, 1.7976931348623157e308, 3.0):
        assert exact_to_float(float_to_exact(x)) == x


@settings(max_examples=500, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False)
       | st.sampled_from([2.0**-12, 2.0**-12 * 3, 2.0**-13, 2.0**40 + 0.5, 2.0**52 * -1.0,
                          2.0**-64, 2.0**-65, 1234.56 * (1 - 0.04), -0.0]))
def test_a_double_is_exact_at_the_coarse_scale_exactly_when_it_is_whole_there(x):
    """A double that is a whole number of ``2**-64`` units is that many units (an int);
    any other is a fine sum of ``2**-1074`` units: one representation per value, whichever
    way the conversion tells whole scaled values apart."""
    units = Fraction(x) * 2**64
    got = float_to_exact(x)
    if units.denominator == 1:
        assert type(got) is int and got == units.numerator
    else:
        assert type(got) is not int and got.n == Fraction(x) * 2**1074
    assert exact_to_float(got) == x


@pytest.mark.parametrize("strategy", ["dyn", "general"])
def test_tens_of_thousands_of_plus_minus_pairs_leave_the_exact_sum(strategy):
    """60,000 inserted-then-deleted values from 1e-12 to 1e12 in magnitude: a float
    running sum is already off in the first batch (1,000 such pairs leave it ~0.01 from
    zero); the exact one keeps the ten values per batch that stay to the last bit."""
    rng = random.Random(strategy)
    db = upkeep.connect()
    db.execute("CREATE TABLE t (g INTEGER, x DOUBLE)")
    db.execute("CREATE TABLE k (g INTEGER)")
    db.insert("k", [(0,)])
    db.create_view("s", "SELECT k.g, SUM(t.x) AS total, AVG(t.x) AS mean "
                        "FROM t JOIN k ON t.g = k.g GROUP BY k.g", strategy=strategy)
    kept = []
    pairs = 0
    while pairs < 60_000:
        batch = [(0, rng.choice((1, -1)) * 10.0 ** rng.uniform(-12, 12)) for _ in range(20_000)]
        db.insert("t", batch)
        rng.shuffle(batch)
        doomed, stay = batch[:19_990], batch[19_990:]
        db.delete("t", doomed)  # each deleted value was inserted: a +x/-x pair
        pairs += len(doomed)
        kept.extend(x for _, x in stay)
    ((g, total, mean),) = db.view("s").rows()
    exact = sum(Fraction(x) for x in kept)
    assert total == float(exact)  # correctly rounded exact sum, not merely close
    assert total == math.fsum(kept)
    assert mean == pytest.approx(float(exact / len(kept)), rel=1e-15)


@pytest.mark.parametrize("strategy", ["dyn", "general"])
def test_sums_with_infinities_and_nan_follow_duckdb_as_they_come_and_go(strategy):
    """A NaN or an infinity in a group makes SUM / AVG non-finite as DuckDB does, and
    deleting it again restores the exact finite sum; a finite sum beyond the double range
    is an infinity."""
    import duckdb

    rng = random.Random(7)
    db = upkeep.connect()
    db.execute("CREATE TABLE t (g INTEGER, x DOUBLE)")
    db.execute("CREATE TABLE k (g INTEGER)")
    db.insert("k", [(0,), (1,), (2,)])
    sql = ("SELECT k.g, SUM(t.x) AS total, AVG(t.x) AS mean, COUNT(*) AS n "
           "FROM t JOIN k ON t.g = k.g GROUP BY k.g")
    db.create_view("s", sql, strategy=strategy)
    if strategy == "dyn":  # the select list is the groups' values: rows made without a call
        assert db.runtime("s").group_rows.finish is None
    con = duckdb.connect()
    con.execute("CREATE TABLE t (g INTEGER, x DOUBLE)")
    con.execute("CREATE TABLE k (g INTEGER)")
    con.execute("INSERT INTO k VALUES (0), (1), (2)")
    values = [math.nan, math.inf, -math.inf, 1e308, 1.5, -2.25, 0.5]  # float sums exact
    present: list[tuple] = []
    for step in range(60):
        gone = rng.sample(present, min(len(present), rng.randint(0, 2)))
        new = [(rng.randrange(3), rng.choice(values)) for _ in range(rng.randint(0, 3))]
        with db.transaction():
            if gone:
                db.delete("t", gone)
            if new:
                db.insert("t", new)
        for row in gone:
            present.remove(row)
            con.execute("DELETE FROM t WHERE rowid = (SELECT MIN(rowid) FROM t WHERE g = ? "
                        "AND (x = ? OR (isnan(x) AND isnan(?))))", [row[0], row[1], row[1]])
        present += new
        con.executemany("INSERT INTO t VALUES (?, ?)", new) if new else None
        want = {r[0]: r[1:] for r in con.execute(sql).fetchall()}
        got = {r[0]: r[1:] for r in db.view("s").rows()}
        assert got.keys() == want.keys(), step
        for g, (total, mean, n) in want.items():
            t, m, c = got[g]
            assert c == n, step
            for a, b in ((t, total), (m, mean)):
                assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-12), (
                    step, g, got[g], want[g])
                # a NaN is the one NaN object, as stored values are (rows with NaNs meet
                # in a view over this one only so)
                assert not math.isnan(a) or a is math.nan, (step, g, got[g])


_DOUBLES = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(min_value=-1e-300, max_value=1e-300),  # the fine scale
    st.sampled_from([5e-324, -5e-324, 2.0**-64, 2.0**-65, 0.1, -0.0, 1e308]),
    st.sampled_from([math.inf, -math.inf, math.nan]),
)


def _value(terms: list[float]) -> float:
    """What SUM over ``terms`` is (IEEE / DuckDB), from exact fractions."""
    if any(math.isnan(x) for x in terms) or {math.inf, -math.inf} <= set(terms):
        return math.nan
    if math.inf in terms or -math.inf in terms:
        return math.inf if math.inf in terms else -math.inf
    exact = sum(Fraction(x) for x in terms)
    try:
        return float(exact)
    except OverflowError:  # a finite sum beyond the double range
        return math.inf if exact > 0 else -math.inf


@settings(max_examples=300, deadline=None)
@given(st.lists(_DOUBLES, max_size=12), st.lists(_DOUBLES, max_size=12), st.randoms())
def test_exact_sums_are_exact_and_have_one_representation(kept, removed, rng):
    """Terms at both scales added, then some of them removed again in another order: the
    value is the exact sum's, and equal sums are equal (and hash equal) however they were
    reached, so a group whose tiny values are gone is back on the small coarse scale."""
    total = 0
    for x in kept + removed:
        total = total + float_to_exact(x)
    shuffled = removed[:]
    rng.shuffle(shuffled)
    for x in shuffled:
        total = total - float_to_exact(x)
    direct = 0
    for x in reversed(kept):
        direct = float_to_exact(x) + direct
    assert total == direct and hash(total) == hash(direct)
    got, want = exact_to_float(total), _value(kept)
    assert (math.isnan(got) and math.isnan(want)) or got == want
    if all(x == 0 or abs(x) >= 2.0**-12 for x in kept if math.isfinite(x)):
        assert type(total) is int  # all terms coarse: a plain, small integer
    if kept and all(math.isfinite(x) for x in kept):  # AVG: exact mean, correctly rounded
        assert exact_mean(total * 3, 3 * len(kept)) == float(
            sum(Fraction(x) for x in kept) / len(kept))


def test_a_price_sum_is_a_small_integer():
    """The coarse scale is what keeps per-group sums small in a view's state."""
    total = sum(float_to_exact(p) for p in (901.0, 1234.56, 99999.99) * 1000)
    assert type(total) is int and total.bit_length() < 100
    assert exact_to_float(total) == float(sum(Fraction(p) for p in (901.0, 1234.56, 99999.99)) * 1000)
