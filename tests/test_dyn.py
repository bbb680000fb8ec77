"""Dynamic Yannakakis internals: GJT pairs, query classes, the (T,N)-rep against brute force,
push-mode deltas, membership, and constant-delay enumeration measured by counting work."""

import random
from collections import Counter

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import view_follows_duckdb

import upkeep
from upkeep import zset
from upkeep.aggregates import DualWeight
from upkeep.dyn import LIST_BUCKET_MAX, NodeState, Representation
from upkeep.dyn_loops import ONE, anchor_key_vars, generate, walk
from upkeep.dyn_walk import ContextWalk, RowsWalk
from upkeep.failed_values import FailedCount
from upkeep.gjt import (
    build_gjt_pair,
    free_connex_approximation,
    is_acyclic,
    is_hierarchical,
)

X, Y, Z, W = 0, 1, 2, 3
NAMES = "xyzw"


def test_triangle_is_cyclic():
    edges = [(X, Y), (Y, Z), (X, Z)]
    assert not is_acyclic(edges)
    assert build_gjt_pair(edges, (X, Y, Z)) is None
    assert free_connex_approximation(edges, (X,)) is None


def test_path_projection_is_acyclic_but_not_free_connex():
    edges = [(X, Y), (Y, Z)]
    assert is_acyclic(edges)
    assert build_gjt_pair(edges, (X, Z)) is None
    assert free_connex_approximation(edges, (X, Z)) == (X, Y, Z)


def test_q_hierarchical_query_gets_a_simple_tree():
    # r(x, y) |x| s(x): q-hierarchical, so a simple GJT exists (section 3.2, Discussion)
    edges = [(X, Y), (X,)]
    pair = build_gjt_pair(edges, (X, Y))
    assert pair is not None and pair.is_simple()
    assert is_hierarchical(edges, {X, Y})[1]


def test_output_below_bound_variable_is_not_q_hierarchical():
    edges = [(X, Y), (X,)]
    hier, qh, _ = is_hierarchical(edges, {Y})
    assert hier and not qh
    pair = build_gjt_pair(edges, (Y,))
    assert pair is not None  # free-connex, but not simple
    assert not pair.is_simple()


def test_n_covers_exactly_the_output_variables():
    edges = [(X, Y), (Y, Z), (Z, W)]
    pair = build_gjt_pair(edges, (Y, Z))
    nodes = {n.id: n for n in pair.nodes}
    covered = set().union(*(set(nodes[i].vars) for i in pair.n_set))
    assert covered == {Y, Z}


def _repeats(pair) -> list[int]:
    """Interior nodes with one child labelled exactly as their parent."""
    return [n.id for n in pair.nodes if n.parent is not None and len(n.children) == 1
            and set(n.vars) == set(n.parent.vars)]


def test_nodes_repeating_their_parent_are_spliced_out():
    # TPC-H Q3's full join, customer(c, n) orders(o, c) lineitem(o, l): the reduction joins
    # projections under nodes of the same label ({o} under {o}, {c, o} under {c, o}),
    # which held their parent's contents again; with them out, the tree is still a GJT
    # pair for the query (each parent guarded by a child, N sibling-closed and covering
    # the output) and a line item's change reaches the root through one node
    edges = [(X, W), (Y, X), (Y, Z)]
    pair = build_gjt_pair(edges, (X, Y, Z, W))
    assert pair is not None and _repeats(pair) == []
    nodes = {n.id: n for n in pair.nodes}
    assert len(nodes) == 6
    for n in pair.nodes:
        if n.children:
            assert any(set(n.vars) <= set(c.vars) for c in n.children), n
            if n.id in pair.n_set:
                in_n = {c.id in pair.n_set for c in n.children}
                assert len(in_n) == 1, "N is not sibling-closed"
    lineitem = next(n for n in pair.nodes if n.atom == 2)
    assert lineitem.parent is pair.root
    covered = set().union(*(set(nodes[i].vars) for i in pair.n_set))
    assert covered == {X, Y, Z, W}


QUERIES = {
    "chain-full": ([(X, Y), (Y, Z), (Z, W)], (X, Y, Z, W)),
    "chain-proj": ([(X, Y), (Y, Z), (Z, W)], (Y, Z)),
    "star-full": ([(X, Y), (X, Z), (X, W)], (X, Y, Z, W)),
    "star-center": ([(X, Y), (X, Z), (X, W)], (X,)),
    "self-join": ([(X, Y), (X, Y)], (X, Y)),
    "count": ([(X, Y), (Y, Z)], ()),
}


def brute_force(edges, out, db):
    result, cols = db[0], [NAMES[v] for v in edges[0]]
    for i in range(1, len(edges)):
        result, cols = zset.join(result, cols, db[i], [NAMES[v] for v in edges[i]])
    return zset.project(result, cols, [NAMES[v] for v in out])


@pytest.mark.parametrize("int_weights", [False, True])
@pytest.mark.parametrize("name", sorted(QUERIES))
def test_representation_matches_brute_force_under_random_updates(name, int_weights):
    """``int_weights``: the indexes keep counted totals (``Index``), else summed ones."""
    edges, out = QUERIES[name]
    pair = build_gjt_pair(edges, out)
    assert pair is not None
    rep = Representation(pair, int_weights=int_weights)
    twin = Representation(pair, int_weights=int_weights)  # the same changes, ``difference``
    # and again, its rows made straight from output-tuple positions (a plain select list):
    # when one node's tuples change, each changed tuple's rows come from one compiled walk
    placed = Representation(pair, int_weights=int_weights)
    backwards = tuple(range(len(out)))[::-1]
    rng = random.Random(name)
    db = [{} for _ in edges]
    for _ in range(60):
        leaf = {}
        for i, e in enumerate(edges):
            delta = {}
            for _ in range(rng.randrange(4)):
                present = [t for t, w in db[i].items() if w > 0]
                if present and rng.random() < 0.4:
                    zset.add_into(delta, rng.choice(present), -1)
                else:
                    zset.add_into(delta, tuple(rng.randrange(3) for _ in e), 1)
            # keep the database positive (section 2): never delete more than present
            delta = {t: w for t, w in delta.items() if db[i].get(t, 0) + w >= 0}
            leaf[i] = delta
        before = brute_force(edges, out, db)
        changes = rep.update(leaf, want_delta=True)
        difference = twin.difference({i: dict(d) for i, d in leaf.items()}, _reversed)
        by_positions = placed.difference({i: dict(d) for i, d in leaf.items()}, _reversed,
                                         backwards)
        for i, d in leaf.items():
            db[i] = zset.plus(db[i], d)
        after = brute_force(edges, out, db)
        assert dict(rep.enumerate()) == after
        assert dict(twin.enumerate()) == after
        expected_delta = zset.minus(after, before)
        got_delta = {}
        for t, (old, new) in changes.items():
            zset.add_into(got_delta, t, (new or 0) - (old or 0))
        assert got_delta == expected_delta
        assert difference == {t[::-1]: w for t, w in expected_delta.items()}
        assert by_positions == difference
        assert dict(placed.enumerate()) == after
        for t, w in after.items():
            assert rep.weight(t) == w
        assert rep.weight(tuple(99 for _ in out)) is None or not out


def _reversed(t: tuple) -> tuple:
    """A row function for ``Representation.difference``: the output tuple backwards."""
    return t[::-1]


@pytest.mark.parametrize("size", [2_000, 20_000])
def test_enumeration_work_per_output_row_is_constant(size):
    """R(x,y) |x| S(y,z) with most S tuples dangling: a hash join would visit them all;
    ENUM visits only joining tuples, so work per output row stays bounded as |db| grows."""
    pair = build_gjt_pair([(X, Y), (Y, Z)], (X, Y, Z))
    rep = Representation(pair)
    r = {(i, i % 100): 1 for i in range(size // 10)}
    s = {(j, k): 1 for j in range(size) for k in range(1)}  # y in 0..size-1, mostly dangling
    rep.update({0: r, 1: s}, want_delta=False)
    work = rep.counters()["enum_work"]
    rows = sum(1 for _ in rep.enumerate())
    assert rows == len(r)  # every r tuple joins exactly one s tuple (y < 100)
    per_row = (rep.counters()["enum_work"] - work) / rows
    assert per_row <= 8, per_row


@pytest.mark.parametrize("size", [1_000, 10_000])
def test_push_mode_work_per_update_does_not_grow_with_the_database(size):
    """Delta enumeration anchored at a deep leaf finds its ancestors bottom-up through indexes,
    so the work per single-row update stays flat as |db| grows 10x (it once scanned the root)."""
    # the full chain a(x, y) |x| b(y, z) |x| c(z, w); a streams in one row at a time
    edges = [(X, Y), (Y, Z), (Z, W)]
    pair = build_gjt_pair(edges, (X, Y, Z, W))
    rep = Representation(pair)
    rep.update({1: {(j, j): 1 for j in range(size)},
                2: {(k, k): 1 for k in range(size)}}, want_delta=False)
    work = rep.counters()["enum_work"]
    updates = 200
    for i in range(updates):
        changes = rep.update({0: {(i, i % size): 1}}, want_delta=True)
        assert sum((new or 0) - (old or 0) for old, new in changes.values()) == 1
    per_update = (rep.counters()["enum_work"] - work) / updates
    assert 0 < per_update <= 12, per_update


def test_parent_indexes_are_maintained_from_the_start():
    """P_n for every non-root node of N exists before the first read (section 3.2), so a read
    costs O(output) instead of first indexing the whole reduct."""
    pair = build_gjt_pair([(X, Y), (Y, Z), (Z, W)], (X, Y, Z, W))
    rep = Representation(pair)
    rep.update({0: {(1, 2): 1}, 1: {(2, 3): 1}, 2: {(3, 4): 1}}, want_delta=False)
    for n in pair.nodes:
        if n.id in pair.n_set and n.parent is not None:
            shared = tuple(v for v in n.vars if v in n.parent.vars)
            if 0 < len(shared) < len(n.vars):
                assert shared in rep.states[n.id].indexes, n
    assert dict(rep.enumerate()) == {(1, 2, 3, 4): 1}


@pytest.mark.parametrize("size", [1_000, 10_000])
def test_push_mode_enumerates_each_changed_output_row_once(size):
    """A single-row change that alters k output rows enumerates exactly k output tuples in
    push mode (the counter ``push_outputs``), whatever the view's size: an insert, a
    multiplicity change and a delete of an a-tuple each alter the k rows it joins with."""
    k = 7
    pair = build_gjt_pair([(X, Y), (Y, Z)], (X, Y, Z))
    rep = Representation(pair)
    a = {(x, x % 10): 1 for x in range(size)}
    b = {(y, z): 1 for y in range(10) for z in range(k if y == 3 else 50)}
    rep.update({0: a, 1: b}, want_delta=False)
    before = dict(rep.enumerate())
    for change in ({(size, 3): 1}, {(size, 3): 1}, {(size, 3): -2}):
        outputs = rep.counters()["push_outputs"]
        changes = rep.update({0: change}, want_delta=True)
        assert rep.counters()["push_outputs"] - outputs == k
        after = dict(rep.enumerate())
        assert len(changes) == k
        for key in set(before) | set(after):
            got = changes.get(key, (before.get(key), before.get(key)))
            assert got == (before.get(key), after.get(key)), key
        before = after


@pytest.mark.parametrize("positions", [None, (2, 0, 1, 0)])
@pytest.mark.parametrize("size", [1_000, 10_000])
def test_difference_combines_each_changed_output_row_once(size, positions):
    """``difference`` (what plain join views use) does the same k outputs per single-row
    change as ``update``, whatever the database size, and hands each row's change of weight;
    also when it makes the rows straight from the select list's positions (repeats
    allowed), as a view of plain columns asks."""
    k = 7
    pair = build_gjt_pair([(X, Y), (Y, Z)], (X, Y, Z))
    rep = Representation(pair)
    rep.update({0: {(x, x % 10): 1 for x in range(size)},
                1: {(y, z): 1 for y in range(10) for z in range(k if y == 3 else 50)}},
               want_delta=False)

    def rows() -> dict:
        out: dict = {}
        for t, w in rep.enumerate():
            zset.add_into(out, t if positions is None else tuple(t[p] for p in positions), w)
        return out

    before = rows()
    for change in ({(size, 3): 1}, {(size, 3): 1}, {(size, 3): -2}):
        outputs = rep.counters()["push_outputs"]
        got = rep.difference({0: change}, positions=positions)
        assert rep.counters()["push_outputs"] - outputs == k
        after = rows()
        assert got == zset.minus(after, before) and len(got) == k
        before = after


def test_push_mode_of_a_root_only_n_reads_the_root():
    """Grouped by the join key (q-hierarchical, N = the root alone), an output tuple is a root
    tuple: push mode reports each changed root tuple's old and new weight, equal to brute
    force, one output per changed key."""
    edges, out = [(X, Y), (X, Z)], (X,)
    pair = build_gjt_pair(edges, out)
    rep = Representation(pair)
    assert rep._root_out is not None
    rnd = random.Random(3)
    db = [{}, {}]
    rep.update({0: {}, 1: {}}, want_delta=False)
    for _ in range(200):
        i = rnd.randrange(2)
        row = (rnd.randrange(5), rnd.randrange(4))
        w = -1 if db[i].get(row) and rnd.random() < 0.4 else 1
        before = brute_force(edges, out, db)
        db[i] = zset.plus(db[i], {row: w})
        changes = rep.update({i: {row: w}}, want_delta=True)
        after = brute_force(edges, out, db)
        for key in set(before) | set(after):
            if before.get(key) != after.get(key):
                assert changes[key] == (before.get(key), after.get(key))
        assert len(changes) <= 1


def test_a_batch_enumerates_each_anchor_keys_context_once():
    """Delta enumeration of a batch groups the changed frontier tuples by the variables they
    share with their parent: m new a-tuples joining the same b-tuples enumerate that context
    once (``enum_work`` as for one tuple), and the delta equals brute force."""
    edges, out = [(X, Y), (Y, Z)], (X, Y, Z)
    pair = build_gjt_pair(edges, out)
    db = [{(x, x % 10): 1 for x in range(100)}, {(y, z): 1 for y in range(10) for z in range(5)}]
    singles, batched = Representation(pair), Representation(pair)
    for rep in (singles, batched):
        rep.update({0: dict(db[0]), 1: dict(db[1])}, want_delta=False)
    work = singles.counters()["enum_work"]
    singles.update({0: {(1000, 3): 1}}, want_delta=True)
    one = singles.counters()["enum_work"] - work
    batch = {(1000 + i, 3): 1 for i in range(50)} | {(3, 3): -1}
    before = brute_force(edges, out, db)
    work = batched.counters()["enum_work"]
    changes = batched.update({0: batch}, want_delta=True)
    assert batched.counters()["enum_work"] - work == one
    db[0] = zset.plus(db[0], batch)
    expected = zset.minus(brute_force(edges, out, db), before)
    got = {}
    for t, (old, new) in changes.items():
        zset.add_into(got, t, (new or 0) - (old or 0))
    assert got == expected
    assert len(expected) == 51 * 5


@pytest.mark.parametrize("select", ["a.z, b.w", "*"])
@pytest.mark.parametrize("strategy", ["dyn", "general"])
def test_column_only_leaves_drop_nulls_and_unequal_repeated_variables(strategy, select):
    """An atom read by columns only (``operators.ColumnLeaf``): a NULL join key, and a row
    whose two columns of one join variable differ (``a.x = b.y AND a.y = b.y`` puts
    ``a.x`` and ``a.y`` in one variable), join nothing, as in DuckDB; a row read whole is
    the table's own."""
    view_follows_duckdb(
        ["CREATE TABLE a (x INTEGER, y INTEGER, z VARCHAR)",
         "CREATE TABLE b (y INTEGER, w DOUBLE)",
         "INSERT INTO a VALUES (1, 1, 'p'), (1, NULL, 'q'), (2, 3, 'r'), (NULL, NULL, 's')",
         "INSERT INTO b VALUES (1, 1.5), (2, 2.5), (3, 1.0), (NULL, 4.0)"],
        ["INSERT INTO a VALUES (3, 3, 't'), (2, 2, 'u')",
         "DELETE FROM b WHERE y = 1",
         "INSERT INTO b VALUES (1, 0.5), (NULL, 1.0)",
         "DELETE FROM a WHERE z = 'u'"],
        query=f"SELECT {select} FROM a JOIN b ON a.x = b.y AND a.y = b.y", strategy=strategy)


@pytest.mark.parametrize("where", [
    "a.z > 1 AND b.w <= 2.5",           # a column against a literal: one NULL test a row
    "2 < a.z AND a.z - 1 <> 0",         # the literal on the left; arithmetic with one
    "a.z > NULL OR b.w = 1.0",          # a NULL literal is tested, never TRUE
    "a.z > CAST(NULL AS INTEGER) + 0 OR a.z = 1",  # a constant folded to NULL: tested too
    "a.z * 2.0 >= b.w AND 10 - a.z > 0",  # INTEGER against DOUBLE: the literal as a double
])
@pytest.mark.parametrize("strategy", ["dyn", "general"])
def test_leaves_with_conditions_follow_duckdb(strategy, where):
    """An atom with conditions of its own is one generated filter-and-project
    (``ExpressionCompiler.compile_filtered_tuple``), where a comparison or arithmetic with a
    non-NULL constant tests only the other operand for NULL: rows with a NULL there, and
    NULL literals, filter as in DuckDB."""
    view_follows_duckdb(
        ["CREATE TABLE a (x INTEGER, z INTEGER)",
         "CREATE TABLE b (x INTEGER, w DOUBLE)",
         "INSERT INTO a VALUES (1, 1), (1, 2), (2, 3), (2, NULL), (3, 5)",
         "INSERT INTO b VALUES (1, 1.0), (2, 2.5), (2, NULL), (3, 9.0)"],
        ["INSERT INTO a VALUES (3, 3), (1, NULL), (1, 4)",
         "DELETE FROM b WHERE w = 1.0",
         "INSERT INTO b VALUES (1, 0.5), (3, 1.0), (1, NULL)",
         "DELETE FROM a WHERE z = 2"],
        query=f"SELECT a.x, a.z, b.w FROM a JOIN b ON a.x = b.x WHERE {where}",
        strategy=strategy)


_LOADED = [
    "CREATE TABLE o (k INTEGER, note VARCHAR, urgent BOOLEAN, total DOUBLE)",
    "CREATE TABLE l (k INTEGER, n INTEGER, p DECIMAL(10,2), d DOUBLE, flag VARCHAR, "
    "day DATE, comment VARCHAR)",
    "INSERT INTO o VALUES (1, 'first', true, 1.5), (2, NULL, false, 2.5), (3, 'third', NULL, "
    "NULL), (NULL, 'none', true, 0.0)",
    "INSERT INTO l VALUES (1, 1, 10.50, 0.1, 'R', DATE '2024-01-01', 'a long comment'), "
    "(1, 2, 3.25, 0.0, 'A', DATE '2024-01-03', NULL), (2, 1, 7.00, NULL, 'R', "
    "DATE '2024-01-05', 'x'), (3, 1, NULL, 0.5, NULL, NULL, 'y'), (NULL, 1, 1.00, 0.2, 'R', "
    "DATE '2024-01-02', 'z'), (2, 1, 7.00, NULL, 'R', DATE '2024-01-05', 'x')",
]
_LATER = [
    "DELETE FROM l WHERE n = 2",
    "INSERT INTO l VALUES (2, 3, 4.75, 0.25, 'A', DATE '2024-01-04', 'later')",
    "DELETE FROM o WHERE k = 2",
    "INSERT INTO o VALUES (2, 'again', true, 9.5), (4, 'new', false, 1.0)",
    "DELETE FROM l WHERE comment = 'x'",
]


@pytest.mark.parametrize(("query", "strategy", "read"), [
    ("SELECT o.k, COUNT(*) AS lines, SUM(l.p) AS value FROM o JOIN l ON o.k = l.k "
     "GROUP BY o.k", "dyn", {"o": {"k"}, "l": {"k", "p"}}),
    ("SELECT l.k, SUM(l.p * (1 - l.d)) AS net FROM o JOIN l ON o.k = l.k "
     "WHERE l.flag = 'R' AND o.urgent GROUP BY l.k", "dyn",
     {"o": {"k", "urgent"}, "l": {"k", "p", "d", "flag"}}),
    ("SELECT o.k, o.note, l.p FROM o JOIN l ON o.k = l.k WHERE l.day > DATE '2024-01-02'",
     "dyn", {"o": {"k", "note"}, "l": {"k", "p", "day"}}),
    ("SELECT o.k, l.k, l.p + 1 AS q FROM o JOIN l ON o.k = l.k", "dyn",
     {"o": {"k"}, "l": {"k", "p"}}),
    ("SELECT a.k, b.p FROM l a JOIN l b ON a.k = b.k WHERE a.flag = 'R'", "dyn",
     {"l": {"k", "flag", "p"}}),
    ("SELECT COUNT(*) AS n FROM o JOIN l ON o.k = l.k", "dyn", {"o": {"k"}, "l": {"k"}}),
    ("SELECT o.note, l.p FROM o JOIN l ON o.k = l.k AND l.day > DATE '2024-01-02'", "dyn",
     {"o": {"k", "note"}, "l": {"k", "p", "day"}}),
    ("SELECT o.k, COUNT(*) AS lines, SUM(l.p) AS value FROM o JOIN l ON o.k = l.k "
     "GROUP BY o.k", "general", {"o": {"k"}, "l": {"k", "p"}}),
    ("SELECT o.note, MAX(l.day) AS last FROM o JOIN l ON o.k = l.k WHERE l.n < 3 "
     "GROUP BY o.note", "lftj", {"o": {"k", "note"}, "l": {"k", "day", "n"}}),
    ("SELECT * FROM o JOIN l ON o.k = l.k", "dyn", {}),
])
def test_a_view_built_over_loaded_tables_makes_only_the_columns_it_reads(
        monkeypatch, query, strategy, read):
    """A view built over tables holding rows reads each table through its atoms' sources,
    and each source makes only the columns its leaf and the aggregate arguments over its
    rows read (``Core.atom_reads``, ``RowStore.reading``), the others None; the view then
    follows DuckDB through the full rows of later changes.  A view that reads every
    column (``*``) reads the rows whole."""
    from upkeep.row_store import PartialRows

    handed: list[tuple[object, frozenset[int], list]] = []
    items = PartialRows.items

    def spy(reading):
        rows = list(items(reading))
        handed.append((reading.store, reading.read, rows))
        return iter(rows)

    monkeypatch.setattr(PartialRows, "items", spy)
    db, con = upkeep.connect(), duckdb.connect()
    for statement in _LOADED:
        db.execute(statement)
        con.execute(statement)
    db.create_view("v", query, strategy=strategy)
    tables = {id(db._catalog.tables[t].rows): t for t in ("o", "l")}
    made: dict[str, set[str]] = {}
    for store, columns, rows in handed:
        table = tables[id(store)]
        names = [d[0] for d in con.execute(f"SELECT * FROM {table}").description]
        made.setdefault(table, set()).update(names[i] for i in columns)
        expected = Counter(tuple(v if i in columns else None for i, v in enumerate(r))
                           for r in con.execute(f"SELECT * FROM {table}").fetchall())
        got: Counter = Counter()
        for row, n in rows:
            got[row] += n
        assert got == expected, table
    assert made == read
    monkeypatch.undo()
    view_follows_duckdb(_LOADED, _LATER, query=query, strategy=strategy)


@pytest.mark.parametrize(("query", "lifted"), [
    # a filtered leaf and computed arguments: one generated function for both
    ("SELECT l.k, SUM(l.p * (1 - l.d)) AS net, COUNT(l.d) AS nd, AVG(l.d + 1) AS ad "
     "FROM o JOIN l ON o.k = l.k WHERE l.flag = 'R' GROUP BY l.k", {"l"}),
    # an unfiltered leaf of columns and bare-column arguments: C already, left apart
    ("SELECT o.k, SUM(l.p) AS value, AVG(l.d) AS ad FROM o JOIN l ON o.k = l.k "
     "GROUP BY o.k", set()),
    # one computed argument is enough; the other atom's bare column is left apart
    ("SELECT o.note, SUM(o.total) AS t, SUM(l.d * 2) AS d2 FROM o JOIN l ON o.k = l.k "
     "GROUP BY o.note", {"l"}),
    # a filtered leaf with a bare-column argument
    ("SELECT o.k, SUM(l.p) AS value FROM o JOIN l ON o.k = l.k "
     "WHERE l.day > DATE '2024-01-02' GROUP BY o.k", {"l"}),
])
def test_an_aggregate_over_a_join_reads_its_arguments_with_its_leaf(query, lifted):
    """A dyn aggregate's source lifts a row into its leaf tuple and this atom's aggregate
    arguments in one function (``Core.lifted_leaf``) where the leaf or an argument is
    generated code, and keeps them apart where both are C; either way the view follows
    DuckDB through changes that bring NULL arguments, filtered rows and deletes."""
    db = upkeep.connect()
    for statement in _LOADED:
        db.execute(statement)
    db.create_view("v", query, strategy="dyn")
    sources = [s for group in db._catalog.views["v"].by_relation.values() for _, s in group]
    assert {s.relation for s in sources if s.lift is not None} == lifted
    for s in sources:
        if s.lift is None:
            continue
        kept = 0
        for row, _ in db._catalog.tables[s.relation].rows.items():
            got, t = s.lift(row), s.leaf(row)
            assert (got is None) == (t is None), row
            if t is not None:  # the leaf tuple, then one value per argument of this atom
                kept += 1
                assert got[:s.width] == t and len(got) > s.width, row
        assert kept
    view_follows_duckdb(_LOADED, _LATER, query=query, strategy="dyn")


def _channels(n: int):
    return st.tuples(*[st.sampled_from([0, 0, 1, -1, 2**70, -(2**70)])] * (2 * n))


@settings(max_examples=300, deadline=None)
@given(st.integers(-2, 2), st.integers(-2, 2),
       st.integers(1, 3).flatmap(lambda n: st.tuples(_channels(n), _channels(n))))
def test_a_dual_weight_is_true_when_a_part_is_and_adds_part_by_part(c, d, channels):
    """A dyn aggregate's weight (count, sum channels) is zero only when every part is, and
    ``plus`` (the C call a source's batch uses) is ``+``: part by part."""
    from upkeep.aggregates import DualWeight

    v, u = channels
    a, b = DualWeight(c, v), DualWeight(d, u)
    assert bool(a) == (c != 0 or any(x != 0 for x in v))
    for total in (a + b, a.plus(b)):
        assert (total.c, total.v) == (c + d, tuple(x + y for x, y in zip(v, u, strict=True)))


class _Leaf:
    """The fields of a GJT node a :class:`NodeState` reads: a two-variable leaf, no parent."""
    id, parent, vars = 0, None, (X, Y)


@pytest.mark.parametrize("counted", [False, True])
@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(st.tuples(st.integers(0, 2), st.integers(0, 11)),
                                st.sampled_from([-2, -1, 1, 1, 2, 3]), max_size=8),
                max_size=14))
def test_index_buckets_hold_rhos_tuples_under_each_key(counted, deltas):
    """A node's index on its first variable, through random weight changes (up to 12 tuples
    a key): each bucket holds exactly the key's tuples of rho, one as a 1-tuple, 2 to
    LIST_BUCKET_MAX as a list, more as a dict (a dict stays one until one tuple is left),
    and each key's total is the sum of its tuples' weights: kept as that sum, or
    (``counted``, integer weights) as the bucket's length plus an excess kept only where
    it is not 0."""
    state = NodeState(_Leaf())
    state.counted = counted
    index = state.index((X,), with_totals=True)
    assert index.counted is counted
    grown: set[tuple] = set()  # keys whose bucket became a dict and has not shrunk to one
    for delta in deltas:
        for t, w in delta.items():
            state.add(t, w)
            k = t[:1]
            size = sum(1 for s in state.rho if s[:1] == k)
            if size > LIST_BUCKET_MAX:
                grown.add(k)
            elif size <= 1:
                grown.discard(k)
        model: dict[tuple, dict[tuple, int]] = {}
        for t, w in state.rho.items():
            model.setdefault(t[:1], {})[t] = w
        assert {k: set(b) for k, b in index.buckets.items()} == {
            k: set(b) for k, b in model.items()}
        for k, bucket in index.buckets.items():
            assert len(bucket) == len(set(bucket)), bucket  # no tuple twice
            kind = tuple if len(bucket) == 1 else dict if k in grown else list
            assert type(bucket) is kind, (k, bucket)
        sums = {k: sum(b.values()) for k, b in model.items()}
        for k in [(x,) for x in range(4)]:
            assert index.total(k) == (sums.get(k) or None), k
        if counted:
            assert dict(index.totals) == {k: sums[k] - len(b) for k, b in model.items()
                                          if sums[k] != len(b)}
        else:
            assert dict(index.totals) == {k: v for k, v in sums.items() if v}


_ROW_QUERIES = {  # plain join views: full joins, rows made from select-list positions
    "chain-full": [(X, Y), (Y, Z), (Z, W)],
    "star-full": [(X, Y), (X, Z), (X, W)],
    "fq1-shape": [(X, W), (Y, X), (Y, Z)],  # customer, orders, lineitem
}


@pytest.mark.parametrize("int_weights", [False, True])
@settings(max_examples=150, deadline=None)
@given(st.sampled_from(sorted(_ROW_QUERIES)),
       st.lists(st.tuples(st.integers(0, 2), st.tuples(*[st.integers(0, 2)] * 2),
                          st.sampled_from([-1, 1, 1, 2])), min_size=1, max_size=40))
def test_single_row_changes_with_repeated_tuples_make_the_rows_of_brute_force(
        int_weights, name, changes):
    """Single-row changes of a plain join view, rows made at the select list's positions
    (``difference``'s ``emit``: the compiled rows walk), with tuples inserted more than
    once (weight 2 and more): each change's rows equal brute force's difference, and every
    node whose weights the rows walk reads only while some differ from 1 counts those
    exactly; under both kinds of totals (``int_weights``: counted, else summed)."""
    edges = _ROW_QUERIES[name]
    out = tuple(sorted({v for e in edges for v in e}))
    positions = (len(out) - 1, 0, 1, 0)
    rep = Representation(build_gjt_pair(edges, out), int_weights=int_weights)
    rep.update({i: {} for i in range(len(edges))}, want_delta=False)
    db = [{} for _ in edges]
    for atom, t, w in changes:
        if db[atom].get(t, 0) + w < 0:  # keep the database positive (section 2)
            w = 1
        before = brute_force(edges, out, db)
        got = rep.difference({atom: {t: w}}, lambda r: tuple(r[p] for p in positions),
                             positions)
        db[atom] = zset.plus(db[atom], {t: w})
        expected: dict = {}
        for row, weight in zset.minus(brute_force(edges, out, db), before).items():
            zset.add_into(expected, tuple(row[p] for p in positions), weight)
        assert got == expected
        for state in rep.states.values():
            if state.other_weights is not None:
                assert state.other_weights == [
                    sum(1 for v in state.rho.values() if v != 1)], state.node_id


_ROWS = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), max_size=10)


def _totals_of(rep: Representation) -> list:
    """The indexes of a representation that keep totals."""
    return [idx for state in rep.states.values() for idx in state.indexes.values()
            if getattr(idx, "totals", None) is not None]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("rst"), st.booleans(), st.integers(0, 2),
                          st.integers(0, 2)), min_size=1, max_size=16))
def test_join_views_keep_counted_totals_and_aggregate_views_summed_ones(changes):
    """The planner gives a dyn join view and a ``COUNT(*)`` view (integer weights)
    counted totals and a dyn aggregate view with a sum (ring weights) summed ones
    (``Index``); through repeated rows (weight 2 and more) and deletes, each counted total
    is its key's summed weight and every view holds DuckDB's rows.  (Summed totals are
    checked against brute force by
    ``test_representation_matches_brute_force_under_random_updates``.)"""
    join = "SELECT r.a, s.b, t.c, t.d FROM r, s, t WHERE r.b = s.b AND s.c = t.c"
    grouped = "SELECT t.c, COUNT(*) AS n, SUM(t.d) AS d FROM s, t WHERE s.c = t.c GROUP BY t.c"
    db, con = upkeep.connect(), duckdb.connect()
    columns = {"r": ("a", "b"), "s": ("b", "c"), "t": ("c", "d")}
    for name, (first, second) in columns.items():
        for target in (db, con):
            target.execute(f"CREATE TABLE {name} ({first} INTEGER, {second} INTEGER)")
        rows = [(0, 0), (0, 0), (1, 1)]  # a row twice: weight 2
        db.insert(name, rows)
        con.executemany(f"INSERT INTO {name} VALUES (?, ?)", rows)
    counts = ("SELECT s.b, COUNT(*) AS n FROM r, s, t WHERE r.b = s.b AND s.c = t.c "
              "GROUP BY s.b")
    db.create_view("j", join, strategy="dyn")
    db.create_view("g", grouped, strategy="dyn")
    db.create_view("c", counts, strategy="dyn")  # COUNT(*) alone: integer weights
    views = db._catalog.views
    assert all(state.counted for state in views["j"].rep.states.values())
    assert not any(state.counted for state in views["g"].rep.states.values())
    assert all(state.counted for state in views["c"].rep.states.values())
    counted = _totals_of(views["j"].rep)
    assert counted and all(idx.counted for idx in counted)
    weights = {id(idx): state.rho for state in views["j"].rep.states.values()
               for idx in state.indexes.values()}
    for name, insert, x, y in [("", True, 0, 0), *changes]:
        if name and insert:
            db.insert(name, [(x, y)])
            con.execute(f"INSERT INTO {name} VALUES (?, ?)", [x, y])
        elif name and (x, y) in con.execute(f"SELECT * FROM {name}").fetchall():
            db.delete(name, [(x, y)])
            first, second = columns[name]
            con.execute(f"DELETE FROM {name} WHERE rowid = (SELECT min(rowid) FROM {name} "
                        f"WHERE {first} = ? AND {second} = ?)", [x, y])
        for idx in counted:
            sums: dict = {}
            for t, w in weights[id(idx)].items():
                sums[idx.key(t)] = sums.get(idx.key(t), 0) + w
            assert {k: idx.total(k) for k in idx.buckets} == sums
        for view, sql in (("j", join), ("g", grouped), ("c", counts)):
            assert sorted(db.view(view).rows()) == sorted(con.execute(sql).fetchall()), view


@settings(max_examples=60, deadline=None)
@given(_ROWS, _ROWS, _ROWS,
       st.lists(st.tuples(st.sampled_from("rst"), st.booleans(), st.integers(0, 2),
                          st.integers(0, 2)), max_size=12))
def test_a_join_view_counts_its_frontier_weights_from_its_build(r_rows, s_rows, t_rows,
                                                                 changes):
    """A dyn join view (FQ1's shape: a chain of three tables) keeps each frontier node's
    count of weights other than 1 from before its build
    (``Representation.count_frontier_weights``), so its first single-row change after
    subscribing makes no pass over the nodes' tuples: right after the build (rows loaded
    more than once, so weights of 2 and more) and after every single-row change, each
    frontier node holds a count and it is exact, and the view holds DuckDB's rows."""
    sql = "SELECT r.a, s.b, t.c, t.d FROM r, s, t WHERE r.b = s.b AND s.c = t.c"
    db, con = upkeep.connect(), duckdb.connect()
    columns = {"r": ("a", "b"), "s": ("b", "c"), "t": ("c", "d")}
    for name, rows in (("r", r_rows), ("s", s_rows), ("t", t_rows)):
        for target in (db, con):
            target.execute(f"CREATE TABLE {name} ({columns[name][0]} INTEGER, "
                           f"{columns[name][1]} INTEGER)")
        db.insert(name, rows)
        if rows:
            con.executemany(f"INSERT INTO {name} VALUES (?, ?)", rows)
    db.create_view("v", sql, strategy="dyn")
    db.view("v").subscribe(lambda changes: None)
    frontier = [st for st in db._catalog.views["v"].rep.states.values() if st.frontier]
    assert frontier

    def follows() -> None:
        for state in frontier:
            assert state.other_weights == [sum(1 for w in state.rho.values() if w != 1)]
        assert sorted(db.view("v").rows()) == sorted(con.execute(sql).fetchall())

    follows()  # counted through the build, not by a pass at the first change
    for name, insert, x, y in changes:
        held = con.execute(f"SELECT * FROM {name}").fetchall()
        if insert:
            db.insert(name, [(x, y)])
            con.execute(f"INSERT INTO {name} VALUES (?, ?)", [x, y])
        elif (x, y) in held:  # one occurrence, as db.delete takes it
            db.delete(name, [(x, y)])
            first_column, second_column = columns[name]
            con.execute(f"DELETE FROM {name} WHERE rowid = (SELECT min(rowid) FROM {name} "
                        f"WHERE {first_column} = ? AND {second_column} = ?)", [x, y])
        follows()


#: the walks' shapes: a one-variable atom under a join gives steps that bind a node whole
#: by its key, weighted, and membership tests on the anchor's path
_WALK_SHAPES = {**_ROW_QUERIES, "sub-atom": [(X, Y), (Y, Z), (Y,)]}


@settings(max_examples=120, deadline=None)
@given(st.sampled_from(sorted(_WALK_SHAPES)),
       st.lists(st.tuples(st.integers(0, 2), st.tuples(*[st.integers(0, 2)] * 2),
                          st.sampled_from([1, 1, 2])), min_size=1, max_size=30),
       st.tuples(st.integers(0, 2), st.tuples(*[st.integers(0, 2)] * 2),
                 st.sampled_from([-1, 1, 3])))
def test_the_compiled_walks_make_the_generated_codes_rows_contexts_and_work(name, loaded,
                                                                            change):
    """``dyn_walk`` follows the steps of ``dyn_loops.walk`` as the generated code does: for
    any anchor tuple, ``RowsWalk`` makes the generated ``emit``'s rows at the select list's
    positions with the same weights, returns the same count and visits the same tuples
    (work); ``ContextWalk`` gives the generated ``context``'s list for the tuple's key."""
    edges = _WALK_SHAPES[name]
    out = tuple(sorted({v for e in edges for v in e}))
    positions = (len(out) - 1, 0, 1, 0, 2)
    rep = Representation(build_gjt_pair(edges, out))
    by_atom: list[dict] = [{} for _ in edges]
    for atom, t, w in loaded:
        zset.add_into(by_atom[atom], t[:len(edges[atom])], w)
    rep.update(dict(enumerate(by_atom)), want_delta=False)
    atom, s, w = change
    s = s[:len(edges[atom])]
    anchor = rep.leaf_of_atom[atom].node
    steps = walk(rep, anchor)

    def run(fn, *args):
        before = rep.enum_work[0]
        got = fn(*args)
        return got, rep.enum_work[0] - before

    walked, generated = {}, {}
    assert ((walked, *run(RowsWalk(rep, anchor, positions, steps).emit, s, w, walked))
            == (generated, *run(generate(rep, anchor, positions), s, w, generated)))
    key_vars = anchor_key_vars(rep, anchor)
    key = tuple(s[anchor.vars.index(v)] for v in key_vars)
    values = tuple(v for v in rep.pair.out if v not in anchor.vars)
    assert (run(ContextWalk(rep, key_vars, values, steps, ONE).context, key)
            == run(generate(rep, anchor), key))


def test_a_compiled_walk_refuses_a_tuple_of_another_length_instead_of_reading_past_it():
    """The compiled walk reads tuples without bounds checks, so it checks their length
    first: a tuple too short or too long is a ValueError, not a crash or a cut tuple."""
    edges = _ROW_QUERIES["fq1-shape"]
    rep = Representation(build_gjt_pair(edges, (X, Y, Z, W)))
    rep.update({0: {(1, 2): 1}, 1: {(3, 1): 1}, 2: {(3, 4): 1}}, want_delta=False)
    anchor = rep.leaf_of_atom[2].node
    rows = RowsWalk(rep, anchor, (0, 1), walk(rep, anchor))
    for wrong in ((3,), (3, 4, 5)):
        with pytest.raises(ValueError, match="binds 2 values"):
            rows.emit(wrong, 1, {})
    out: dict = {}
    assert rows.emit((3, 4), 1, out) == 1 and out == {(1, 3): 1}


_FAILED_TERMS = st.lists(st.tuples(st.integers(-3, 3), st.integers(-2, 2),
                                   st.sampled_from(["cast", "overflow"])), max_size=8)


@settings(max_examples=300, deadline=None)
@given(_FAILED_TERMS, st.integers(-2, 2))
def test_a_failed_count_adds_and_scales_as_its_parts_do(terms, k):
    """``FailedCount`` (``failed_values``) stands for a count plus failing rows' weight: a
    sum of counts, some holding failures, in any order and through a ``DualWeight``, is
    the sum of the counts and of the failed weights, a plain int exactly when the
    failures cancel; negating and scaling by ``k`` act on both."""
    total, failed = 0, 0
    acc: object = 0
    weight = DualWeight(0, (0, 0))
    for n, f, message in terms:
        term = FailedCount(n, f, message) if f else n
        acc = acc + term if len(terms) % 2 else term + acc
        weight = weight.plus(DualWeight(1, (term, 0)))
        total += n
        failed += f
    for value in (acc, weight.v[0]):
        if failed:
            assert type(value) is FailedCount and (value.n, value.failed) == (total, failed)
            assert value.message in {m for _, f, m in terms if f}
            assert -value == FailedCount(-total, -failed, "")
            assert (value * k == 0) if k == 0 else (value * k) == FailedCount(
                total * k, failed * k, "")
            assert value - value == 0 and bool(value)
        else:
            assert type(value) is int and value == total


def test_weights_compiled_are_left_to_reference_counting() -> None:
    """Compiled, a ``DualWeight`` is not tracked by the cyclic collector (it holds numbers
    and cannot be in a cycle): a dyn aggregate keeps one per group, which every full
    collection walked, and so did the tuples holding them."""
    import gc

    from upkeep import aggregates

    compiled = aggregates.__file__.endswith(".so")
    weight = DualWeight(1, (2, FailedCount(1, 1, "cast")))
    assert gc.is_tracked(weight) is not compiled
    assert gc.is_tracked(weight.plus(weight)) is not compiled
    held = (weight, weight)
    gc.collect()  # a tuple of untracked objects is untracked by the next collection
    assert gc.is_tracked(held) is not compiled
