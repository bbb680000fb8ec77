"""A commit keeps, per changed table, the views it reaches with their steps bound
(``commit._steps``, ``LocalCatalog.plans``) until the catalog changes: views made,
replaced, dropped, subscribed to, or rebuilt after a failed batch must each be stepped as
they are then, not as a plan made before.  Checked against DuckDB over the same rows."""

from __future__ import annotations

from collections import Counter

import duckdb
import pytest

import upkeep

VIEWS = {
    "j": "SELECT o.ck, l.q FROM o, l WHERE o.ok = l.ok",  # dyn
    "a": "SELECT o.ck, SUM(l.q) AS sq, COUNT(*) AS n FROM o, l WHERE o.ok = l.ok "
         "GROUP BY o.ck",  # dyn-aggregate
    "c": "SELECT l.ok, CAST(l.s AS INTEGER) + 1 AS si FROM l",  # eager: a row can fail
}
OVER = "SELECT ck, sq FROM a WHERE sq > 3"


class Twins:
    """An upkeep database and a DuckDB one given the same statements."""

    def __init__(self) -> None:
        self.db, self.con = upkeep.connect(), duckdb.connect()
        for sql in ("CREATE TABLE o (ok INTEGER, ck INTEGER)",
                    "CREATE TABLE l (ok INTEGER, q INTEGER, s VARCHAR)"):
            self.db.execute(sql)
            self.con.execute(sql)

    def insert(self, table: str, rows: list[tuple]) -> None:
        self.db.insert(table, rows)
        self.con.executemany(f"INSERT INTO {table} VALUES (?, ?{', ?' * (len(rows[0]) - 2)})",
                             rows)

    def delete_one(self, row: tuple) -> None:
        self.db.delete("l", [row])
        self.con.execute("DELETE FROM l WHERE rowid = (SELECT min(rowid) FROM l WHERE ok = ? "
                         "AND q = ? AND s = ?)", list(row))

    def check(self) -> None:
        views = set(self.db.views())
        for name, sql in VIEWS.items():
            if name in views:
                assert Counter(self.db.view(name).rows()) == Counter(
                    self.con.execute(sql).fetchall()), name
        if "over" in views:
            sql = OVER.replace("FROM a", f"FROM ({VIEWS['a']})")
            assert Counter(self.db.view("over").rows()) == Counter(
                self.con.execute(sql).fetchall())


def test_views_are_stepped_as_they_are_after_the_catalog_changes():
    t = Twins()
    t.insert("o", [(1, 10), (2, 20), (3, 10)])
    t.insert("l", [(1, 1, "1"), (2, 2, "2")])
    for name, sql in VIEWS.items():
        t.db.execute(f"CREATE VIEW {name} AS {sql}")
    t.insert("l", [(1, 3, "3")])  # a plan made for l
    t.insert("o", [(4, 30)])  # and for o
    t.check()
    seen: list = []
    t.db.view("j").subscribe(seen.extend)
    t.insert("l", [(4, 5, "5")])
    assert seen == [((30, 5), 1)]
    with pytest.raises(upkeep.EvaluationError):  # view c cannot cast 'x': views rebuilt
        t.db.insert("l", [(2, 7, "x")])
    t.check()
    seen.clear()
    t.insert("l", [(2, 9, "9")])
    t.delete_one((1, 1, "1"))
    t.check()
    assert sorted(seen) == [((10, 1), -1), ((20, 9), 1)]
    t.db.execute(f"CREATE VIEW over AS {OVER}")  # a view over a view
    t.insert("l", [(3, 4, "4")])
    t.check()
    t.db.execute("DROP VIEW over")
    t.db.execute(f"CREATE OR REPLACE VIEW j AS {VIEWS['j']}")
    t.insert("o", [(5, 50)])
    t.insert("l", [(5, 6, "6")])
    t.check()
    with pytest.raises(upkeep.EvaluationError), t.db.transaction():
        t.db.insert("o", [(6, 60)])
        t.db.insert("l", [(6, 1, "y")])
    t.check()
    t.insert("o", [(6, 60)])
    t.insert("l", [(6, 1, "1")])
    t.check()
