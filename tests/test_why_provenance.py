"""Why-provenance of ordinary views (``WITH (provenance = 'why')``, :mod:`upkeep.why`):
every derivation of every row, under every strategy, equal to brute-force enumeration of
the combinations of input rows after every batch of random changes (also through derived
tables, down to base rows)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import upkeep
from upkeep.errors import UnsupportedError

# view -> (SQL, relations in FROM order, condition on one row per relation, key of a match)
VIEWS = {
    "by_a": ("SELECT r.a, COUNT(*) AS n, SUM(s.c) AS total FROM r JOIN s ON r.b = s.b "
             "GROUP BY r.a", ("r", "s"), lambda x, y: x[1] == y[0], lambda x, y: (x[0],)),
    "pairs": ("SELECT DISTINCT r.a, s.c FROM r, s WHERE r.b = s.b AND s.c > 1", ("r", "s"),
              lambda x, y: x[1] == y[0] and y[1] > 1, lambda x, y: (x[0], y[1])),
    "chain": ("SELECT x.a, y.b AS b2 FROM r x JOIN r y ON x.b = y.a", ("r", "r"),
              lambda x, y: x[1] == y[0], lambda x, y: (x[0], y[1])),
    "total": ("SELECT COUNT(*) AS n FROM r WHERE a <> 2", ("r",),
              lambda x: x[0] != 2, lambda x: ()),
    "below": ("SELECT r.a, s.c FROM r JOIN s ON r.b < s.b", ("r", "s"),
              lambda x, y: x[1] < y[0], lambda x, y: (x[0], y[1])),
    # several blocks: a derivation goes through the derived tables' rows to base rows
    "nested": ("SELECT y.a, y.c FROM (SELECT x.a, s.c FROM (SELECT a, b FROM r WHERE a <> 1) x "
               "JOIN s ON x.b = s.b) y WHERE y.c > 0", ("r", "s"),
               lambda x, y: x[0] != 1 and x[1] == y[0] and y[1] > 0,
               lambda x, y: (x[0], y[1])),
    "exists": ("SELECT r.a FROM r WHERE EXISTS (SELECT 1 FROM s WHERE s.b = r.b AND s.c > 0)",
               ("r", "s"), lambda x, y: x[1] == y[0] and y[1] > 0, lambda x, y: (x[0],)),
    "member": ("SELECT a FROM r WHERE b IN (SELECT b FROM s WHERE c < 3)", ("r", "s"),
               lambda x, y: x[1] == y[0] and y[1] < 3, lambda x, y: (x[0],)),
    "distinct_inside": ("SELECT d.b, s.c FROM (SELECT DISTINCT b FROM r) d JOIN s ON d.b = s.b",
                        ("r", "s"), lambda x, y: x[1] == y[0], lambda x, y: (x[1], y[1])),
}
STRATEGIES = [None, "dyn", "general", "lftj"]


def brute_force(contents: dict[str, list[tuple]], view: str) -> dict[tuple, set]:
    """Output key -> every combination of distinct input rows that derives it."""
    _, relations, holds, key = VIEWS[view]
    out: dict[tuple, set] = {}
    for combo in itertools.product(*(sorted(set(contents[r])) for r in relations)):
        if holds(*combo):
            out.setdefault(key(*combo), set()).add(tuple(zip(relations, combo, strict=True)))
    return out


def make_db(strategy):
    db = upkeep.connect()
    db.execute("CREATE TABLE r (a INTEGER, b INTEGER)")
    db.execute("CREATE TABLE s (b INTEGER, c INTEGER)")
    made = []
    for name, (sql, *_) in VIEWS.items():
        try:
            if strategy is None:
                db.execute(f"CREATE MATERIALIZED VIEW {name} WITH (provenance = 'why') AS {sql}")
            else:
                db.create_view(name, sql, strategy, provenance="why")
            made.append(name)
        except UnsupportedError:  # a forced strategy that does not fit the view
            assert strategy is not None
    return db, made


def check(db, views):
    contents = {t: [r for r, n in db.weighted_rows(t) for _ in range(n)] for t in ("r", "s")}
    for view in views:
        expected = brute_force(contents, view)
        [(_, layout)] = db._catalog.witnesses[view]
        rows = db.view(view).rows()
        assert {tuple(row[p] for p in layout.key_positions) for row in rows} <= set(expected) \
            | {()}
        for row in rows:
            key = tuple(row[p] for p in layout.key_positions)
            got = {tuple(p) for p in db.why(view, row).products}
            assert got == expected.get(key, set()), (view, row)


values = st.integers(0, 3)
batches = st.lists(st.lists(st.tuples(st.sampled_from("rs"), values, values), min_size=1,
                            max_size=6), min_size=1, max_size=4)


def apply_batch(db, batch, data) -> None:
    """One transaction: each entry inserts its row, or deletes a present row of its table."""
    with db.transaction():
        for table, x, y in batch:
            present = [r for r, _ in db.weighted_rows(table)]
            if present and data.draw(st.booleans()):
                db.delete(table, [data.draw(st.sampled_from(sorted(present)))])
            else:
                db.insert(table, [(x, y)])


@pytest.mark.parametrize("strategy", STRATEGIES)
@settings(max_examples=12, deadline=None)
@given(batches=batches, data=st.data())
def test_why_equals_brute_force_after_every_batch(strategy, batches, data):
    db, views = make_db(strategy)
    assert views
    for batch in batches:
        apply_batch(db, batch, data)
        check(db, views)


def test_why_names_the_transactions_of_provenance_rows():
    db = upkeep.connect()
    db.execute("CREATE TABLE p (k INTEGER, v INTEGER) WITH (provenance = 'update')")
    db.insert("p", [(1, 10), (2, 10)])
    db.execute("CREATE MATERIALIZED VIEW by_v WITH (provenance = 'why') AS "
               "SELECT v, COUNT(*) AS n FROM p GROUP BY v")
    db.execute("UPDATE p SET v = 20 WHERE k = 2")
    why = db.why("by_v", (20, 1))
    assert why.products == [[("p", (2, 20))]]
    assert str(why.annotations[("p", (2, 20))]) == "p#2 ·M T2"
    assert "made by: p#2 ·M T2" in str(why)


def test_why_refusals_and_errors():
    db = upkeep.connect()
    db.execute("CREATE TABLE r (a INTEGER, b INTEGER)")
    db.insert("r", [(1, 2)])
    db.execute("CREATE MATERIALIZED VIEW plain AS SELECT a FROM r")
    with pytest.raises(UnsupportedError, match="WITH \\(provenance = 'why'\\)"):
        db.why("plain", (1,))
    for sql in ("SELECT a FROM r INTERSECT SELECT b FROM r",
                "SELECT a FROM r UNION SELECT COUNT(*) FROM r",
                "SELECT a FROM r WHERE b IN (SELECT a FROM r)",  # r inside and out
                "SELECT a FROM r WHERE a = 1 OR EXISTS (SELECT 1 FROM r r2 WHERE r2.b = r.a)",
                "SELECT * FROM r",
                # two groups may show the same row: its group cannot be told from it
                "SELECT a, COUNT(*) AS n FROM r GROUP BY a, b",
                "SELECT COUNT(*) AS n FROM r GROUP BY b"):
        with pytest.raises(UnsupportedError, match="why-provenance of view w"):
            db.execute(f"CREATE MATERIALIZED VIEW w WITH (provenance = 'why') AS {sql}")
        assert "w" not in db.views() and not any("__why" in v for v in db._catalog.views)
    with pytest.raises(upkeep.errors.SchemaError, match="must be 'why'"):
        db.execute("CREATE MATERIALIZED VIEW w WITH (provenance = 'update') AS SELECT a FROM r")
    db.execute("CREATE MATERIALIZED VIEW w WITH (provenance = 'why') AS SELECT a FROM r")
    with pytest.raises(upkeep.ProvenanceError, match="not in view w"):
        db.why("w", (7,))
    with pytest.raises(upkeep.errors.SchemaError,
                       match="row 0 for view w has 2 values, the view has 1 columns"):
        db.why("w", (1, 2))
    hidden = next(v for v in db._catalog.views if v.startswith("w__"))
    for ask in (db.view, db.explain, lambda n: db.why(n, (1,))):  # helpers are not the user's
        with pytest.raises(upkeep.errors.SchemaError, match=f"unknown table or view {hidden}"):
            ask(hidden)
    db.execute("DROP VIEW w")
    assert "w__why" not in db._catalog.views


def test_why_provenance_survives_reopening(tmp_path):
    db = upkeep.connect(tmp_path / "db")
    db.execute("CREATE TABLE r (a INTEGER, b INTEGER)")
    db.execute("CREATE MATERIALIZED VIEW w WITH (provenance = 'why') AS "
               "SELECT a, COUNT(*) AS n FROM r GROUP BY a")
    db.insert("r", [(1, 2), (1, 3)])
    db.checkpoint()
    db.execute("CREATE MATERIALIZED VIEW v WITH (provenance = 'why') AS SELECT b FROM r")
    db.close()
    again = upkeep.connect(tmp_path / "db")
    assert again.why("w", (1, 2)).products == [[("r", (1, 2))], [("r", (1, 3))]]
    assert again.why("v", (3,)).products == [[("r", (1, 3))]]
    again.close()


def test_the_spark_engine_refuses_why_views(spark, tmp_path):
    db = upkeep.connect(engine="spark", spark=spark, database=tmp_path / "spark")
    try:
        db.execute("CREATE TABLE r (a INTEGER, b INTEGER)")
        with pytest.raises(UnsupportedError, match="why-provenance"):
            db.execute("CREATE MATERIALIZED VIEW w WITH (provenance = 'why') AS SELECT a FROM r")
        assert db.views() == []
    finally:
        db.close()


def test_why_follows_a_replaced_view():
    """db.why's key index (built on the first question, kept from the witness view's
    deltas) goes with the view it was built for when that view is replaced."""
    db = upkeep.connect()
    db.execute("CREATE TABLE r (a INTEGER, b INTEGER)")
    db.insert("r", [(1, 2)])
    db.execute("CREATE MATERIALIZED VIEW w WITH (provenance = 'why') AS "
               "SELECT a, COUNT(*) AS n FROM r GROUP BY a")
    assert db.why("w", (1, 1)).products == [[("r", (1, 2))]]
    db.insert("r", [(1, 5), (2, 2)])
    assert db.why("w", (1, 2)).products == [[("r", (1, 2))], [("r", (1, 5))]]
    db.execute("CREATE OR REPLACE MATERIALIZED VIEW w AS SELECT a, COUNT(*) AS n FROM r "
               "GROUP BY a")
    with pytest.raises(UnsupportedError, match="WITH \\(provenance = 'why'\\)"):
        db.why("w", (1, 2))
    db.execute("CREATE OR REPLACE MATERIALIZED VIEW w WITH (provenance = 'why') AS "
               "SELECT b, COUNT(*) AS n FROM r GROUP BY b")
    assert db.why("w", (2, 2)).products == [[("r", (1, 2))], [("r", (2, 2))]]
    db.delete("r", [(2, 2)])
    assert db.why("w", (2, 1)).products == [[("r", (1, 2))]]


def test_replacing_a_why_view_replaces_its_derived_tables_witnesses():
    """A replaced view's derived table's own witness view went with it: ``why`` answered
    from the old derived table's (rows the new WHERE rejects were derivations), and a
    replaced-then-dropped view left it maintained, so the name could not be made again."""
    db = upkeep.connect()
    db.execute("CREATE TABLE s (b INTEGER, c INTEGER)")
    db.insert("s", [(3, 7), (3, 8), (3, 9)])
    query = "SELECT y.b, y.n FROM (SELECT b, COUNT(*) AS n FROM s {} GROUP BY b) y"
    db.create_view("v", query.format(""), provenance="why")
    db.execute("CREATE OR REPLACE MATERIALIZED VIEW v WITH (provenance = 'why') AS "
               + query.format("WHERE c > 7"))
    assert db.view("v").rows() == [(3, 2)]
    assert db.why("v", (3, 2)).products == [[("s", (3, 8))], [("s", (3, 9))]]
    db.execute("CREATE OR REPLACE VIEW v AS " + query.format(""))
    db.execute("DROP VIEW v")
    assert db.views() == [] and sorted(db.local_catalog.views) == []
    db.create_view("v", query.format(""), provenance="why")
    assert db.why("v", (3, 3)).products == [[("s", (3, 7))], [("s", (3, 8))], [("s", (3, 9))]]


@pytest.mark.parametrize("condition", ["s.b = r.b AND s.c < r.a", "s.b < r.b",
                                       "NOT EXISTS (SELECT 1 FROM s WHERE s.c > r.a)"])
def test_a_subquery_correlated_by_an_inequality_is_refused_not_misexplained(condition):
    """Such a subquery is kept as a comparison with its group's MIN / MAX, whose witness
    listed every row of the group (``s(2, 3)`` for ``s.c < 1``): refused by name, the
    view not made; the same view without why-provenance is made."""
    db = upkeep.connect()
    db.execute("CREATE TABLE r (a INTEGER, b INTEGER)")
    db.execute("CREATE TABLE s (b INTEGER, c INTEGER)")
    db.insert("r", [(1, 2)])
    db.insert("s", [(2, 0), (2, 3), (9, 9)])
    where = condition if condition.startswith("NOT") else f"EXISTS (SELECT 1 FROM s WHERE {condition})"
    sql = f"SELECT r.a FROM r WHERE {where}"
    with pytest.raises(UnsupportedError, match="correlated by an inequality"):
        db.create_view("v", sql, provenance="why")
    assert db.views() == [] and sorted(db.local_catalog.views) == []
    db.create_view("v", sql)
    db.create_view("w", "SELECT r.a FROM r WHERE EXISTS (SELECT 1 FROM s WHERE s.b = r.b)",
                   provenance="why")
    assert db.why("w", (1,)).products == [[("r", (1, 2)), ("s", (2, 0))],
                                          [("r", (1, 2)), ("s", (2, 3))]]


@pytest.mark.parametrize("sql", [
    "SELECT r.a, s.c FROM r LEFT JOIN s ON s.b = r.b AND s.c < r.a",
    "SELECT t.a FROM (SELECT r.a FROM r WHERE NOT EXISTS "
    "(SELECT 1 FROM s WHERE s.b = r.b AND s.c < r.a)) t"])
def test_rows_kept_by_an_extremum_through_a_helper_are_refused_not_misexplained(sql):
    """An outer join whose ON compares the sides keeps its unmatched rows in a hidden
    helper by comparing with the matches' MAX, as a derived table's subquery correlated by
    an inequality does: why-provenance over it named the helper's rows as inputs (a hidden
    view in a derivation); refused by name, the view not made, and made without it."""
    import duckdb

    tables = ["CREATE TABLE r (a INTEGER, b INTEGER)", "CREATE TABLE s (b INTEGER, c INTEGER)"]
    rows = {"r": [(1, 2), (5, 2)], "s": [(2, 0), (2, 3)]}
    db, con = upkeep.connect(), duckdb.connect()
    for ddl in tables:
        db.execute(ddl)
        con.execute(ddl)
    for table, data in rows.items():
        db.insert(table, data)
        con.executemany(f"INSERT INTO {table} VALUES (?, ?)", data)
    with pytest.raises(UnsupportedError, match="MIN or MAX"):
        db.create_view("v", sql, provenance="why")
    assert db.views() == [] and sorted(db.local_catalog.views) == []
    db.create_view("v", sql)
    assert "recompute" not in db.explain("v")
    assert sorted(db.view("v").rows(), key=repr) == sorted(con.execute(sql).fetchall(),
                                                            key=repr)


UNION_VIEW = ("SELECT r.a AS x FROM r WHERE r.b > 1 UNION "
              "SELECT s.c FROM s JOIN r ON s.b = r.a")


def union_brute_force(contents: dict[str, list[tuple]]) -> dict[tuple, set]:
    out: dict[tuple, set] = {}
    for r in set(contents["r"]):
        if r[1] > 1:
            out.setdefault((r[0],), set()).add((("r", r),))
    for s, r in itertools.product(set(contents["s"]), set(contents["r"])):
        if s[0] == r[0]:
            out.setdefault((s[1],), set()).add((("s", s), ("r", r)))
    return out


@pytest.mark.parametrize("strategy", STRATEGIES)
@settings(max_examples=10, deadline=None)
@given(batches=batches, data=st.data())
def test_why_of_a_union_equals_brute_force(strategy, batches, data):
    """A UNION of blocks: a witness view per block; a row's derivations are every
    block's that yield it."""
    db = upkeep.connect()
    db.execute("CREATE TABLE r (a INTEGER, b INTEGER)")
    db.execute("CREATE TABLE s (b INTEGER, c INTEGER)")
    db.create_view("u", UNION_VIEW, strategy, provenance="why")
    assert [h for h, _ in db._catalog.witnesses["u"]] == ["u__why0", "u__why1"]
    for batch in batches:
        apply_batch(db, batch, data)
        contents = {t: [r for r, n in db.weighted_rows(t) for _ in range(n)] for t in "rs"}
        expected = union_brute_force(contents)
        rows = db.view("u").rows()
        assert set(rows) == set(expected)
        for row in rows:
            assert {tuple(p) for p in db.why("u", row).products} == expected[row]
    db.execute("DROP VIEW u")
    assert not any("__why" in v for v in db._catalog.views)


NEGATED = {
    # a negated subquery derives nothing: a row's derivation is its outer row alone
    "absent": "SELECT r.a, r.b FROM r WHERE NOT EXISTS (SELECT 1 FROM s WHERE s.b = r.b)",
    "not_in": "SELECT r.a, r.b FROM r WHERE r.b NOT IN (SELECT s.b FROM s WHERE s.c > 1)",
    # an outer join: a matched row's derivation is both rows, a padded row's its left row
    "outer": "SELECT r.a, r.b, s.c FROM r LEFT JOIN s ON r.b = s.b",
}


def negated_brute_force(contents: dict[str, list[tuple]], view: str) -> dict[tuple, set]:
    """Output row -> every derivation, from the definitions above."""
    rs, ss = sorted(set(contents["r"])), sorted(set(contents["s"]))
    out: dict[tuple, set] = {}
    for r in rs:
        if view == "absent" and not any(s[0] == r[1] for s in ss):
            out.setdefault(r, set()).add((("r", r),))
        if view == "not_in" and r[1] is not None and not any(
                s[0] is None or s[0] == r[1] for s in ss if s[1] is not None and s[1] > 1):
            out.setdefault(r, set()).add((("r", r),))
        if view == "outer":
            matches = [s for s in ss if s[0] == r[1] and r[1] is not None]
            for s in matches:
                out.setdefault((*r, s[1]), set()).add((("r", r), ("s", s)))
            if not matches:
                out.setdefault((*r, None), set()).add((("r", r),))
    return out


@settings(max_examples=12, deadline=None)
@given(batches=batches, data=st.data())
def test_why_of_negated_subqueries_and_outer_joins_equals_brute_force(batches, data):
    db = upkeep.connect()
    db.execute("CREATE TABLE r (a INTEGER, b INTEGER)")
    db.execute("CREATE TABLE s (b INTEGER, c INTEGER)")
    for name, sql in NEGATED.items():
        db.create_view(name, sql, provenance="why")
    for batch in batches:
        apply_batch(db, batch, data)
        contents = {t: [r for r, n in db.weighted_rows(t) for _ in range(n)] for t in "rs"}
        for name in NEGATED:
            expected = negated_brute_force(contents, name)
            rows = db.view(name).rows()
            assert set(rows) == set(expected), name
            for row in rows:
                assert {tuple(p) for p in db.why(name, row).products} == expected[row], name


def test_why_of_a_grouped_view_finds_the_group_however_the_key_is_written():
    """The select list holds the whole GROUP BY (by name, ordinal, alias, expression):
    each row's derivations are its own group's rows, never another group's."""
    db = upkeep.connect()
    db.execute("CREATE TABLE r (a INTEGER, b INTEGER)")
    db.insert("r", [(1, 10), (1, 10), (1, 20), (2, 10)])
    for name, sql, row, want in [
        ("by_both", "SELECT r.a, b, COUNT(*) AS n FROM r GROUP BY a, r.b", (1, 20, 1),
         [[("r", (1, 20))]]),
        ("by_ordinal", "SELECT b AS x, COUNT(*) AS n FROM r GROUP BY 1", (20, 1),
         [[("r", (1, 20))]]),
        ("by_alias", "SELECT b AS x, COUNT(*) AS n FROM r GROUP BY x", (10, 3),
         [[("r", (1, 10))], [("r", (2, 10))]]),
        ("by_expression", "SELECT a + b AS s, COUNT(*) AS n FROM r GROUP BY a + b", (21, 1),
         [[("r", (1, 20))]]),
    ]:
        db.execute(f"CREATE MATERIALIZED VIEW {name} WITH (provenance = 'why') AS {sql}")
        assert db.why(name, row).products == want, name


def test_why_views_over_derived_tables_reopen_from_a_checkpoint(tmp_path):
    """A checkpoint names the views keeping why-provenance; their hidden helpers get
    theirs again with them, not a second time (reopening failed: "a table or view named
    dg__sub1__why already exists")."""
    db = upkeep.connect(tmp_path / "db")
    db.execute("CREATE TABLE r (a INTEGER, b INTEGER)")
    db.create_view("dg", "SELECT g.b FROM (SELECT DISTINCT b FROM r) g", provenance="why")
    db.insert("r", [(1, 2), (3, 2)])
    db.checkpoint()
    db.close()
    db = upkeep.connect(tmp_path / "db")
    assert db.views() == ["dg"]
    assert sorted(map(tuple, db.why("dg", (2,)).products)) == [
        (("r", (1, 2)),), (("r", (3, 2)),)]


def test_why_reaches_base_rows_through_a_helper_read_by_another_helper():
    """A subquery's helper read by the padded or correlated helper that reads it keeps its
    witnesses too, so a derivation names base rows, never a hidden view."""
    db = upkeep.connect()
    db.execute("CREATE TABLE r (a INTEGER, b INTEGER)")
    db.execute("CREATE TABLE t (c INTEGER, d INTEGER)")
    db.insert("r", [(2, 5)])
    db.insert("t", [(2, 1), (2, 9)])
    expected = {(("r", (2, 5)), ("t", (2, 1))), (("r", (2, 5)), ("t", (2, 9)))}
    db.create_view("cs", "SELECT r.a FROM r WHERE r.b > "
                   "(SELECT COUNT(*) FROM t WHERE t.c = r.a)", provenance="why")
    assert {tuple(p) for p in db.why("cs", (2,)).products} == expected
    db.create_view("lg", "SELECT r.a, g.n FROM r LEFT JOIN "
                   "(SELECT c, COUNT(*) AS n FROM t GROUP BY c) g ON r.a = g.c",
                   provenance="why")
    assert {tuple(p) for p in db.why("lg", (2, 2)).products} == expected


def test_a_row_derived_from_nothing_does_not_erase_the_derivations_it_joins():
    """An aggregate over no rows (``COUNT(*)`` of an empty table) is derived from nothing:
    joined to a row of r, the derivation is r's row alone."""
    db = upkeep.connect()
    db.execute("CREATE TABLE r (a INTEGER, b INTEGER)")
    db.execute("CREATE TABLE t (c INTEGER)")
    db.insert("r", [(1, 5)])
    db.create_view("v", "SELECT r.a FROM r JOIN (SELECT COUNT(*) AS k FROM t) n "
                   "ON r.b > n.k", provenance="why")
    assert db.why("v", (1,)).products == [[("r", (1, 5))]]
    db.create_view("n", "SELECT COUNT(*) AS k FROM t", provenance="why")
    db.create_view("w", "SELECT r.a, n.k FROM r, n WHERE r.b > n.k", provenance="why")
    assert db.why("w", (1, 0)).products == [[("r", (1, 5))]]
    db.insert("t", [(7,)])
    assert db.why("w", (1, 1)).products == [[("r", (1, 5)), ("t", (7,))]]


def test_a_derivation_two_blocks_of_a_union_share_is_listed_once():
    db = upkeep.connect()
    db.execute("CREATE TABLE r (a INTEGER, b INTEGER)")
    db.insert("r", [(1, 1)])
    db.create_view("u", "SELECT a FROM r UNION SELECT b FROM r", provenance="why")
    assert db.why("u", (1,)).products == [[("r", (1, 1))]]


def test_a_recursive_view_takes_why_provenance_as_the_one_it_keeps(tmp_path):
    """``provenance = 'why'`` on a recursive view was refused as "WITH is not supported",
    though such a view answers why anyway: it is made (and reopened), unless DRed keeps it,
    which keeps no provenance."""
    query = ("WITH RECURSIVE p(a, b) AS (SELECT a, b FROM e UNION SELECT p.a, e.b FROM p "
             "JOIN e ON p.b = e.a) SELECT * FROM p")
    db = upkeep.connect(tmp_path / "db")
    db.execute("CREATE TABLE e (a INTEGER, b INTEGER)")
    db.insert("e", [(1, 2), (2, 3)])
    db.execute(f"CREATE MATERIALIZED VIEW r WITH (provenance = 'why') AS {query}")
    with pytest.raises(UnsupportedError, match="DRed"):
        db.create_view("d", query, strategy="dred", provenance="why")
    assert db.views() == ["r"]
    db.close()
    db = upkeep.connect(tmp_path / "db")
    assert db.why("r", (1, 3)).products == [[("e", (1, 2)), ("e", (2, 3))]]
