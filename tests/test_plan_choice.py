"""The planner's decision is a structure, not text: every view carries a
:class:`~upkeep.views.PlanChoice` (strategy, reasons, explanation) that EXPLAIN renders,
and a forced strategy that cannot apply raises :class:`StrategyError` naming it."""

from __future__ import annotations

import pytest

import upkeep
from upkeep.errors import StrategyError, UnsupportedError

TABLES = ("CREATE TABLE r (a INTEGER, b INTEGER); CREATE TABLE s (b INTEGER, c INTEGER); "
          "CREATE TABLE t (c INTEGER, a INTEGER)")
TRIANGLE = "SELECT r.a, s.b, t.c FROM r, s, t WHERE r.b = s.b AND s.c = t.c AND t.a = r.a"


@pytest.fixture
def db():
    db = upkeep.connect()
    db.execute(TABLES)
    return db


@pytest.mark.parametrize("sql, strategy", [
    ("SELECT r.a, r.b, s.c FROM r JOIN s ON r.b = s.b", "dyn"),
    ("SELECT r.a, s.c FROM r JOIN s ON r.b = s.b", "dyn+operators"),
    ("SELECT r.a, COUNT(*) AS n FROM r JOIN s ON r.b = s.b GROUP BY r.a", "dyn-aggregate"),
    (TRIANGLE, "lftj"),
    ("SELECT DISTINCT a FROM r", "operators"),
])
def test_the_automatic_choice_is_recorded(db, sql, strategy) -> None:
    db.create_view("v", sql)
    choice = db.runtime("v").choice
    assert choice.strategy == strategy == db.runtime("v").strategy
    assert choice.reasons and "first strategy that applies" in choice.reasons[0]
    assert "\n".join(choice.explanation) in db.explain("v")


def test_a_fallback_names_its_reason(db) -> None:
    db.create_view("w", "SELECT a, COUNT(DISTINCT b) OVER (PARTITION BY a) AS k FROM r")
    choice = db.runtime("w").choice
    assert choice.strategy == "recompute"
    assert len(choice.reasons) == 1 and "window function" in choice.reasons[0]


@pytest.mark.parametrize("sql, strategy, says", [
    (TRIANGLE, "dyn", "cyclic"),
    ("SELECT a FROM r", "absorption", "WITH RECURSIVE"),
    ("SELECT a, RANK() OVER (ORDER BY b) AS k FROM r", "general", "window function"),
    ("SELECT a FROM r", "fastest", "unknown strategy"),
])
def test_a_forced_strategy_that_cannot_apply_says_which(db, sql, strategy, says) -> None:
    with pytest.raises(StrategyError) as caught:
        db.create_view("v", sql, strategy=strategy)
    assert caught.value.strategy == strategy and says in str(caught.value)
    assert isinstance(caught.value, UnsupportedError)
    assert "v" not in db.views()


def test_a_forced_strategy_is_the_reason(db) -> None:
    db.create_view("v", TRIANGLE, strategy="general")
    assert db.runtime("v").choice.reasons == ("strategy general was requested",)


def test_a_failing_replace_keeps_the_view(db) -> None:
    """CREATE OR REPLACE that cannot plan its new definition leaves the old view in place,
    still maintained and still subscribed."""
    db.create_view("v", "SELECT a, COUNT(*) AS n FROM r GROUP BY a")
    seen = []
    db.view("v").subscribe(seen.extend)
    with pytest.raises(upkeep.Error):
        db.execute("CREATE OR REPLACE MATERIALIZED VIEW v AS SELECT nope FROM r")
    db.insert("r", [(1, 2)])
    assert db.view("v").rows() == [(1, 1)] and seen == [((1, 1), 1)]
    assert "v" in db.views()


def test_a_recursive_view_names_its_default(db) -> None:
    db.create_view("reach", "WITH RECURSIVE p(a, b) AS (SELECT a, b FROM r UNION "
                            "SELECT p.a, r.b FROM p JOIN r ON p.b = r.a) SELECT * FROM p")
    choice = db.runtime("reach").choice
    assert choice.strategy == "absorption"
    assert choice.reasons == ("WITH RECURSIVE: the default strategy absorption",)
