"""Relational subscriptions and their rewritings over other subscriptions
(``specs/delta-dissemination.md`` D.9-D.12): the positions example, the set-trie, the
embedding graph, CGR's fixes, and random subscriptions whose every rewriting gives, in
DuckDB, exactly the rows of the subscription itself."""

from __future__ import annotations

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from upkeep.dissemination.rewriting import (
    SetTrie,
    embedding_graph,
    part_quota,
    rewriting_sql,
    rewritings,
)
from upkeep.dissemination.subscriptions import SubscriptionError, embeddings, labels, parse
from upkeep.types import type_from_name

INT, TEXT = type_from_name("INTEGER"), type_from_name("VARCHAR")
SCHEMA = {"positions": ([("id", INT), ("region", TEXT), ("dept", TEXT), ("title", TEXT)],
                        ["id"]),
          "r": ([("id", INT), ("a", INT), ("b", INT)], ["id"]),
          "s": ([("id", INT), ("b", INT), ("c", INT)], ["id"]),
          "nokey": ([("x", INT)], [])}
DDL = ["CREATE TABLE positions (id INTEGER PRIMARY KEY, region VARCHAR, dept VARCHAR, "
       "title VARCHAR)", "CREATE TABLE r (id INTEGER PRIMARY KEY, a INTEGER, b INTEGER)",
       "CREATE TABLE s (id INTEGER PRIMARY KEY, b INTEGER, c INTEGER)"]


def subs(**sql):
    return {name: parse(name, text, SCHEMA) for name, text in sql.items()}


def results_equal(query, rewriting, con) -> None:
    for use in rewriting:
        con.execute(f'CREATE OR REPLACE TABLE "{use.view.name}" AS {use.view.select_sql()}')
    got = con.execute(rewriting_sql(query, rewriting)).fetchall()
    want = con.execute(query.select_sql()).fetchall()
    assert sorted(got) == sorted(want), rewriting_sql(query, rewriting)
    assert len(set(want)) == len(want)  # keys make a subscription's rows a set


def positions_db(seed: int = 0):
    import random

    rng = random.Random(seed)
    con = duckdb.connect()
    for ddl in DDL:
        con.execute(ddl)
    for i in range(200):
        con.execute("INSERT INTO positions VALUES (?, ?, ?, ?)",
                    [i, rng.choice(["Asia", "Europe"]), rng.choice(["Sales", "IT"]),
                     f"title{rng.randrange(20)}"])
    return con


def test_positions_example_of_d12():
    s = subs(s1="SELECT id, title FROM positions WHERE region = 'Asia'",
             s2="SELECT id, title FROM positions WHERE dept = 'Sales'",
             s3="SELECT id, title FROM positions WHERE region = 'Asia' AND dept = 'Sales'")
    assert embedding_graph(list(s.values())) == {"s1": [], "s2": [], "s3": ["s1", "s2"]}
    found = rewritings(s["s3"], [s["s1"], s["s2"]], k=3)
    assert [[u.view.name for u in rw] for rw in found] == [["s1", "s2"]]
    assert not rewritings(s["s3"], [s["s1"]], k=3)  # s1 does not carry dept
    results_equal(s["s3"], found[0], positions_db())


def test_boolean_constants_and_their_rewritings_equal_duckdb():
    schema = {"flags": ([("id", INT), ("on", type_from_name("BOOLEAN")), ("n", INT)], ["id"])}
    con = duckdb.connect()
    con.execute('CREATE TABLE flags (id INTEGER PRIMARY KEY, "on" BOOLEAN, n INTEGER)')
    con.execute("INSERT INTO flags VALUES (1, TRUE, 1), (2, FALSE, 1), (3, NULL, 2), "
                "(4, TRUE, 2)")
    wide = parse("wide", 'SELECT id, "on" FROM flags WHERE n = 2', schema)
    narrow = parse("narrow", 'SELECT id FROM flags WHERE "on" = TRUE AND n = 2', schema)
    assert con.execute(narrow.select_sql()).fetchall() == [(4, 4)]
    [rw] = rewritings(narrow, [wide], k=2)
    results_equal(narrow, rw, con)


def test_a_view_outputting_the_predicate_column_rewrites_alone():
    s = subs(wide="SELECT id, title, dept FROM positions WHERE region = 'Asia'",
             narrow="SELECT title FROM positions WHERE region = 'Asia' AND dept = 'IT'")
    [rw] = rewritings(s["narrow"], [s["wide"]], k=2)
    assert [u.view.name for u in rw] == ["wide"]
    results_equal(s["narrow"], rw, positions_db(1))


def test_a_more_selective_view_does_not_embed():
    s = subs(tight="SELECT id, dept FROM positions WHERE region = 'Asia' AND dept = 'IT'",
             loose="SELECT id, dept FROM positions WHERE region = 'Asia'",
             ranged="SELECT id FROM positions WHERE id >= 10",
             point="SELECT id FROM positions WHERE id = 12")
    eg = embedding_graph(list(s.values()))
    assert eg["loose"] == [] and eg["tight"] == ["loose"]
    assert eg["point"] == ["ranged"] and eg["ranged"] == []


def test_a_join_of_a_column_with_itself_drops_nulls_so_it_embeds_only_where_they_are_gone():
    s = subs(nonnull="SELECT r.id, r.a, r.b FROM r WHERE r.b = r.b",
             pair="SELECT x.id, x.b FROM r AS x JOIN r AS y ON x.b = y.b",
             every="SELECT r.id, r.a, r.b FROM r",
             some="SELECT r.id, r.a, r.b FROM r WHERE r.b >= 1",
             joined="SELECT r.id, r.b FROM r JOIN s ON r.b = s.b")
    con = duckdb.connect()
    for ddl in DDL:
        con.execute(ddl)
    con.execute("INSERT INTO r VALUES (1, 1, 10), (2, 2, NULL), (3, 3, 1)")
    con.execute("INSERT INTO s VALUES (1, 10, 0), (2, NULL, 0)")
    assert not embeddings(s["nonnull"], s["every"]) and not embeddings(s["pair"], s["every"])
    assert embeddings(s["nonnull"], s["some"]) and embeddings(s["pair"], s["joined"])
    for query, views in (("every", ["nonnull", "pair"]), ("some", ["nonnull"]),
                         ("joined", ["pair"])):
        for rw in rewritings(s[query], [s[v] for v in views], k=3):
            results_equal(s[query], rw, con)


def test_set_trie_finds_every_subset():
    trie = SetTrie()
    for i, members in enumerate([{"a"}, {"a", "b"}, {"b", "c"}, set(), {"a", "b", "c", "d"}]):
        trie.insert(members, i)
    assert sorted(trie.subsets({"a", "b", "c"})) == [0, 1, 2, 3]
    assert sorted(trie.subsets({"c"})) == [3]


@pytest.mark.parametrize("sql, message", [
    ("SELECT x FROM nokey", "has no primary key"),
    ("SELECT a FROM r WHERE a + 1 = 2", "compares no column"),
    ("SELECT a FROM r LEFT JOIN s ON r.b = s.b", "only inner equi-joins"),
    ("SELECT a, COUNT(*) FROM r GROUP BY a", "GROUP BY is not in the subscription language"),
    # joins and clauses whose rows are not the inner join's (they were read as one)
    ("SELECT r.a FROM r ANTI JOIN s ON r.b = s.b", "only inner equi-joins"),
    ("SELECT r.a FROM r SEMI JOIN s ON r.b = s.b", "only inner equi-joins"),
    ("SELECT r.a FROM r NATURAL JOIN s", "only inner equi-joins"),
    ("SELECT r.a FROM r POSITIONAL JOIN s", "only inner equi-joins"),
    ("SELECT r.a FROM r ASOF JOIN s ON r.b >= s.b", "only inner equi-joins"),
    ("SELECT a FROM r QUALIFY a = 1", "QUALIFY is not in the subscription language"),
    ("SELECT a FROM r WINDOW w AS (ORDER BY a)", "WINDOW is not in the subscription"),
    ("SELECT a FROM r USING SAMPLE 1 ROWS", "USING SAMPLE is not in the subscription"),
    ("SELECT a FROM r TABLESAMPLE (1 ROWS)", "a table is named by itself or an alias"),
    ("SELECT a FROM other.r", "a table is named by itself or an alias"),
    ("SELECT a FROM r AT (VERSION => 1)", "a table is named by itself or an alias"),
    ("SELECT x.p FROM r AS x(p, q)", "a table is named by itself or an alias"),
    ("SELECT b FROM r, s WHERE r.b = s.b", "column b is ambiguous"),
    ("SELECT r.a FROM r JOIN s ON r.b < s.b", "joins are equalities"),
    ("SELECT a FROM r WHERE a = 1 OR a = 2", "not an equi-join or a constant comparison"),
    ("SELECT a FROM zz", "unknown table zz"),
    ("SELEC a FROM r", "subscription bad"),
])
def test_subscriptions_outside_the_language_are_refused(sql, message):
    with pytest.raises(SubscriptionError, match=message):
        parse("bad", sql, SCHEMA)


def test_cgr_returns_each_minimal_rewriting_once():
    s = subs(q="SELECT r.a, s.c FROM r JOIN s ON r.b = s.b WHERE r.a = 1",
             rs="SELECT r.a, s.c FROM r JOIN s ON r.b = s.b",
             ra="SELECT r.a, r.b FROM r", sc="SELECT s.b, s.c FROM s",
             dup="SELECT r.a, s.c FROM r JOIN s ON r.b = s.b")
    found = rewritings(s["q"], [s["rs"], s["ra"], s["sc"], s["dup"]], k=10)
    names = [sorted(u.view.name for u in rw) for rw in found]
    assert sorted(names) == [["dup"], ["ra", "sc"], ["rs"]]
    assert len({tuple(n) for n in names}) == len(names)
    con = duckdb.connect()
    for ddl in DDL:
        con.execute(ddl)
    con.execute("INSERT INTO r SELECT i, i % 3, i % 5 FROM range(40) t(i)")
    con.execute("INSERT INTO s SELECT i, i % 5, i % 7 FROM range(30) t(i)")
    for rw in found:
        results_equal(s["q"], rw, con)
    assert len(rewritings(s["q"], [s["rs"], s["ra"], s["sc"], s["dup"]], k=1)) == 1


FORMS = ["FROM r", "FROM s", "FROM r JOIN s ON r.b = s.b"]
COLUMNS = {"FROM r": ["r.a", "r.b"], "FROM s": ["s.b", "s.c"],
           "FROM r JOIN s ON r.b = s.b": ["r.a", "r.b", "s.b", "s.c"]}


@st.composite
def subscription_sql(draw):
    form = draw(st.sampled_from(FORMS))
    cols = COLUMNS[form]
    outputs = draw(st.lists(st.sampled_from(cols), min_size=1, max_size=4, unique=True))
    preds = draw(st.lists(st.tuples(st.sampled_from(cols), st.sampled_from(["=", "<", ">="]),
                                    st.integers(0, 3)), max_size=draw(st.integers(0, 2))))
    where = " AND ".join(f"{c} {op} {v}" for c, op, v in preds)
    select = ", ".join(f"{c} AS {c.replace('.', '_')}" for c in outputs)
    return f"SELECT {select} {form}" + (f" WHERE {where}" if where else "")


@settings(max_examples=60, deadline=None)
@given(st.lists(subscription_sql(), min_size=2, max_size=8), st.integers(0, 1000))
def test_every_rewriting_equals_its_subscription_in_duckdb(sqls, seed):
    subscriptions = [parse(f"v{i}", sql, SCHEMA) for i, sql in enumerate(sqls)]
    eg = embedding_graph(subscriptions)
    assert eg == {q.name: sorted(u.name for u in subscriptions  # the labels lose nothing
                                 if u is not q and embeddings(u, q)) for q in subscriptions}
    con = duckdb.connect()
    for ddl in DDL:
        con.execute(ddl)
    con.execute(f"INSERT INTO r SELECT i, (i * {seed + 7}) % 4, (i * 3 + {seed}) % 4 "
                "FROM range(25) t(i)")
    con.execute(f"INSERT INTO s SELECT i, (i + {seed}) % 4, (i * 5) % 4 FROM range(20) t(i)")
    for q in subscriptions:
        others = [s for s in subscriptions if s is not q]
        found = rewritings(q, others, k=3)
        for rw in found:
            assert {u.view.name for u in rw} <= set(eg[q.name])  # the EG loses nothing
            results_equal(q, rw, con)
        twin = parse("twin", q.sql, SCHEMA)  # a copy always rewrites it alone
        assert any(len(rw) == 1 for rw in rewritings(q, [twin], k=1))


def test_a_constant_reaching_a_column_through_a_join_keeps_the_edge():
    s = subs(v="SELECT r.a, r.b FROM r WHERE r.b = 2 AND r.a > 0",
             q="SELECT r.a FROM r JOIN s ON r.b = s.b WHERE s.b = 2 AND r.a = 1")
    assert embedding_graph(list(s.values()))["q"] == ["v"]


@settings(max_examples=60, deadline=None)
@given(st.lists(subscription_sql(), min_size=2, max_size=12), st.integers(1, 8))
def test_a_bounded_embedding_graph_keeps_the_most_specific_embeddings(sqls, limit):
    """``limit`` in-neighbours, plus ``part_quota(limit)`` over each part of a join's
    tables, each a true embedding, taken from the largest label sets down: per set of
    tables, a dropped one never has more labels than a kept one (when the test budget was
    not what stopped it), and a limit above every degree gives the full graph."""
    subscriptions = [parse(f"v{i}", sql, SCHEMA) for i, sql in enumerate(sqls)]
    full = embedding_graph(subscriptions)
    bounded = embedding_graph(subscriptions, limit)
    assert embedding_graph(subscriptions, len(subscriptions)) == full
    by_name = {s.name: s for s in subscriptions}
    for q in subscriptions:
        kept, every = set(bounded[q.name]), set(full[q.name])
        parts = 2 ** len(q.tables()) - 2  # proper, non-empty sets of the query's tables
        assert kept <= every and len(kept) <= limit + parts * part_quota(limit)
        tested = [u for u in subscriptions if u is not q
                  and labels(u) <= labels(q, implied=True)]
        if len(tested) > 8 * part_quota(limit):  # the test budget may have stopped it
            continue
        assert len(kept) >= min(limit, len(every))
        for tables in {by_name[u].tables() for u in every}:
            mine = {u for u in kept if by_name[u].tables() == tables}
            rest = {u for u in every - kept if by_name[u].tables() == tables}
            if tables != q.tables():
                assert len(mine) >= min(part_quota(limit), len(mine | rest))
            if mine and rest:
                fewest = min(len(labels(by_name[u])) for u in mine)
                assert all(len(labels(by_name[u])) <= fewest for u in rest)


@pytest.mark.parametrize("sql, construct", [
    ("SELECT a, COUNT(*) FROM r GROUP BY a", "a"),
    ("SELECT a FROM r\nORDER BY a", "a"),
    ("SELECT a FROM r LIMIT 3", "3"),
    ("WITH w AS (SELECT 1) SELECT a FROM r", "w AS"),
    ("SELECT a, b AS a FROM r", "b AS a"),
])
def test_a_refused_clause_is_located_in_the_text(sql, construct):
    """The error's line and column point at the clause at fault (its first token)."""
    with pytest.raises(SubscriptionError) as refused:
        parse("bad", sql, SCHEMA)
    at = sql.rindex(construct)
    line = sql.count("\n", 0, at) + 1
    column = at - (sql.rfind("\n", 0, at) + 1) + 1
    assert (refused.value.line, refused.value.column) == (line, column)


def test_the_benchmark_workload_rewrites_joins_from_items_and_sellers_in_duckdb():
    """The planner benchmark's generator (``bench/dissemination/planner.py``): a join
    subscription is fed by an items subscription joined with a sellers subscription (D.12's
    ``s3 = s1 JOIN s2``), and every rewriting CGR finds for its subscriptions gives, in
    DuckDB, exactly their rows."""
    import random

    from bench.dissemination.planner import SCHEMA as BENCH
    from bench.dissemination.planner import subscriptions

    generated = subscriptions(300, seed=3)
    rng = random.Random(3)
    con = duckdb.connect()
    con.execute("CREATE TABLE sellers (id INTEGER PRIMARY KEY, country VARCHAR, "
                "rating INTEGER)")
    con.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, category VARCHAR, "
                "region VARCHAR, seller INTEGER, price INTEGER)")
    con.executemany("INSERT INTO sellers VALUES (?, ?, ?)",
                    [[i, f"k{rng.randrange(4)}", rng.randrange(6)] for i in range(40)])
    con.executemany("INSERT INTO items VALUES (?, ?, ?, ?, ?)",
                    [[i, f"c{rng.randrange(5)}", f"r{rng.randrange(3)}", rng.randrange(40),
                      rng.choice([5, 20, 80, 200, 900])] for i in range(400)])
    assert set(BENCH) == {"items", "sellers"}
    eg = embedding_graph(generated)
    by_name = {q.name: q for q in generated}
    covers = 0
    for q in generated:
        for rw in rewritings(q, [by_name[n] for n in eg[q.name]], k=3):
            results_equal(q, rw, con)
            tables = [set(u.view.tables()) for u in rw]
            covers += len(q.tables()) == 2 and {"items"} in tables and {"sellers"} in tables
    assert covers > 0


def test_equal_subscriptions_name_different_candidates_so_they_can_feed_a_tree():
    """Many equal subscriptions (a popular query): each names candidates around its
    parent in a heap of fan-out ``limit``, not all the same first ``limit`` of them, whose
    fan-out bounds would leave the rest to the publisher."""
    subscriptions = [parse(f"v{i:03d}", "SELECT id, a FROM r WHERE a = 1", SCHEMA)
                     for i in range(200)]
    bounded = embedding_graph(subscriptions, 4)
    feeders = {u for us in bounded.values() for u in us}
    assert all(len(us) == 4 for us in bounded.values())
    assert len(feeders) >= 200 // 4  # every parent of the heap, not just four


def test_date_constants_are_compared_as_dates_not_as_text():
    """'2020-1-5' < '2020-01-10' as dates but not as text: the narrower view must not
    answer the wider query (it would miss the rows of 5-9 January)."""
    schema = {"ev": ([("id", INT), ("d", type_from_name("DATE"))], ["id"])}
    narrow = parse("narrow", "SELECT e.id, e.d FROM ev e WHERE e.d >= '2020-01-10'", schema)
    wide = parse("wide", "SELECT e.id, e.d FROM ev e WHERE e.d >= '2020-1-5'", schema)
    assert not embeddings(narrow, wide)
    assert not rewritings(wide, [narrow], k=1)
    [rw] = rewritings(narrow, [wide], k=1)  # the other way round, it does answer
    con = duckdb.connect()
    con.execute("CREATE TABLE ev (id INTEGER PRIMARY KEY, d DATE)")
    con.execute("INSERT INTO ev VALUES (1, DATE '2020-01-05'), (2, DATE '2020-01-07'), "
                "(3, DATE '2020-01-12')")
    results_equal(narrow, rw, con)
    with pytest.raises(SubscriptionError, match="is not a DATE"):
        parse("bad", "SELECT e.id FROM ev e WHERE e.d > '2020-13-45'", schema)


def test_decimal_constants_keep_their_exact_value():
    """A decimal literal is not rounded to a double: on a DECIMAL column the maintained
    view compares the constant written, and constants that round to one double differ."""
    schema = {"acct": ([("id", INT), ("bal", type_from_name("DECIMAL(38,18)"))], ["id"])}
    sub = parse("s", "SELECT a.id FROM acct a WHERE a.bal > 1.000000000000000001", schema)
    con = duckdb.connect()
    con.execute("CREATE TABLE acct (id INTEGER PRIMARY KEY, bal DECIMAL(38,18))")
    con.execute("INSERT INTO acct VALUES (1, 1.000000000000000001), (2, 1.000000000000000002)")
    assert con.execute(sub.select_sql()).fetchall() == [(2, 2)]
    narrow = parse("n", "SELECT a.id, a.bal FROM acct a WHERE a.bal >= 0.30000000000000001",
                   schema)
    wide = parse("w", "SELECT a.id, a.bal FROM acct a WHERE a.bal > 0.3", schema)
    assert not embeddings(narrow, wide)
    # on a DOUBLE column the engine compares doubles: 0.3 and 0.30000000000000001 are one
    doubles = {"acct": ([("id", INT), ("bal", type_from_name("DOUBLE"))], ["id"])}
    assert parse("d", "SELECT a.id FROM acct a WHERE a.bal > 0.30000000000000001",
                 doubles).predicates[0].value == 0.3
