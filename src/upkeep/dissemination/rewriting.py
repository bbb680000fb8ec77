"""Finding subscriptions' rewritings over other subscriptions: the embedding graph with its
set-trie prefilter (Algorithm 3) and cover-based greedy rewriting with minimisation
(Algorithm 4, CGR) of ``papers/delta-pubsub-view-dissemination.txt`` section 4, with the
fixes of ``specs/delta-dissemination.md`` D.11, over the relational subscriptions of
:mod:`.subscriptions` (D.12).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import chain, combinations, islice

from .subscriptions import (
    Mapping_,
    Subscription,
    attributes,
    covers,
    embeddings,
    labels,
    literal,
)

SEARCH_LIMIT = 5_000  # search nodes per view: CGR's backtracking is exponential at worst


class SetTrie:
    """Sets of labels in a trie over their sorted elements (Hoffmann and Koehler): which
    stored sets are subsets of a given set, without false negatives."""

    def __init__(self) -> None:
        self._root: dict = {}

    def insert(self, labels: Iterable[str], item: object) -> None:
        node = self._root
        for label in sorted(set(labels)):
            node = node.setdefault(label, {})
        node.setdefault(None, []).append(item)

    def subsets(self, labels: Iterable[str]) -> list:
        """Items stored under a subset of ``labels``."""
        wanted = sorted(set(labels))
        out: list = []

        def walk(node: dict, start: int) -> None:
            out.extend(node.get(None, ()))
            for i in range(start, len(wanted)):
                child = node.get(wanted[i])
                if child is not None:
                    walk(child, i + 1)

        walk(self._root, 0)
        return out


def embedding_graph(subscriptions: list[Subscription], limit: int | None = None
                    ) -> dict[str, list[str]]:
    """Algorithm 3: for each subscription, the others that embed into it (EG in-neighbours),
    tested only for those whose labels (tables, equality constants, constrained columns:
    :func:`.subscriptions.labels`) are a subset of its own (the set-trie lookup).

    ``limit`` bounds each subscription's in-neighbours to the ``limit`` most specific
    [OURS]: candidates are taken by label sets from the largest subset of the query's
    labels down, and within one label set those with most outputs first, and at most
    ``8 * limit`` embeddings are tested.  In the query's own label set the candidates are
    taken around the query's parent in a heap of fan-out ``limit`` over the set first:
    many equal subscriptions (popular constants) then name different neighbours and can
    feed each other as a shallow tree, where all naming the set's first ``limit`` left
    most of them to the publisher under a fan-out bound.  A join then keeps up to :func:`part_quota` more
    over each part of its tables, found the same way: it is also put together from
    subscriptions of its parts (D.12's ``s3 = s1 JOIN s2``), which have fewer labels than
    the join's own and were crowded out of the ``limit`` most specific.  The full graph grows with the square of the
    subscriptions (a general subscription embeds into every specific one of its kind);
    the bounded one grows linearly, and CGR needs only a few rewritings per subscription."""
    if limit is None:
        trie = SetTrie()
        for s in subscriptions:
            trie.insert(labels(s), s)
        return {q.name: sorted(u.name for u in trie.subsets(labels(q, implied=True))
                               if u is not q and embeddings(u, q))
                for q in subscriptions}
    buckets: dict[frozenset[str], list[Subscription]] = {}
    for s in subscriptions:
        buckets.setdefault(labels(s), []).append(s)
    for bucket in buckets.values():
        bucket.sort(key=lambda s: (-len(s.outputs), s.name))
    by_size = sorted(buckets, key=lambda b: (-len(b), sorted(b)))
    by_name = {s.name: s for s in subscriptions}
    place = {s.name: (key, i) for key, bucket in buckets.items()  # a subscription's bucket
             for i, s in enumerate(bucket)}
    into: dict[str, list[str]] = {}
    for q in subscriptions:
        mine = labels(q, implied=True)
        found: list[str] = []
        home = place[q.name]
        _most_specific(q, home, _label_sets(mine, buckets, by_size), buckets, None, limit,
                       found)
        own = q.tables()
        for n in range(1, len(own)):  # each part of a join keeps a few of its own
            for part in combinations(sorted(own), n):
                tables = frozenset(part)
                have = sum(1 for u in found if by_name[u].tables() == tables)
                _most_specific(q, home, _label_sets(mine, buckets, by_size), buckets, tables,
                               part_quota(limit) - have, found)
        into[q.name] = sorted(found)
    return into


def _label_sets(mine: frozenset[str], buckets: dict, by_size: list[frozenset[str]]
                ) -> Iterator[frozenset[str]]:
    """The label sets that may hold subscriptions embedding into a query labelled
    ``mine``, the largest first."""
    if 2 ** len(mine) <= len(buckets):  # enumerate the query's label subsets
        return (frozenset(c) for n in range(len(mine), -1, -1)
                for c in combinations(sorted(mine), n))
    return (b for b in by_size if b <= mine)  # or scan the label sets


def _most_specific(q: Subscription, home: tuple[frozenset[str], int],
                   label_sets: Iterable[frozenset[str]],
                   buckets: dict[frozenset[str], list[Subscription]],
                   tables: frozenset[str] | None, quota: int, found: list[str]) -> None:
    """Append to ``found`` up to ``quota`` more subscriptions embedding into ``q`` (of
    ``tables`` only, unless None), in the order of ``label_sets``, testing at most
    ``8 * quota``; ``home``: q's own bucket and its place there."""
    tests, taken, width = 8 * quota, set(found), max(quota, 1)
    for key in label_sets:
        if quota <= 0 or tests <= 0:
            return
        bucket = buckets.get(key)
        if not bucket or (tables is not None and bucket[0].tables() != tables):
            continue
        if key == home[0]:  # q's own bucket: its parents in a heap of fan-out limit first
            i = home[1]
            parent = (i - 1) // width if i else 0
            start = max(0, min(parent - width // 2, i - width))
            bucket = chain(islice(bucket, start, i), islice(bucket, i + 1, None),
                           islice(bucket, start))
        for u in bucket:
            if u is q or u.name in taken:
                continue
            tests -= 1
            if embeddings(u, q):
                found.append(u.name)
                quota -= 1
            if quota <= 0 or tests <= 0:
                return


def part_quota(limit: int) -> int:
    """How many in-neighbours a bounded embedding graph keeps per set of tables other than
    the query's own (a quarter of ``limit``, at least one)."""
    return max(1, limit // 4)


def break_ties(into: dict[str, list[str]]) -> dict[str, list[str]]:
    """The embedding graph without its 2-cycles: of two subscriptions embedding into each
    other (equivalent ones), only the one listed first feeds the other.  Relational
    containment is transitive, so every cycle runs through equivalent subscriptions and
    this leaves none in practice; the integer program's level constraints guard the rest
    (D.10 removes cycles with a feedback-arc-set heuristic instead)."""
    order = {v: i for i, v in enumerate(into)}
    return {v: [u for u in us if not (v in into.get(u, ()) and order[u] > order[v])]
            for v, us in into.items()}


@dataclass(frozen=True)
class Use:
    """One view in a rewriting, under one embedding into the query."""

    view: Subscription
    phi: Mapping_

    @property
    def id(self) -> tuple[str, tuple]:
        return self.view.name, tuple(sorted(self.phi.items()))


def rewritings(query: Subscription, candidates: list[Subscription], k: int) -> list[list[Use]]:
    """Up to ``k`` minimal rewritings of ``query`` over ``candidates`` (CGR), each a list of
    view uses whose covers together supply every attribute of the query (an EAC)."""
    need = frozenset(attributes(query))
    uses = [Use(v, phi) for v in candidates for phi in embeddings(v, query)]
    uses.sort(key=lambda u: u.id)
    cov = [frozenset(covers(u.view, query, u.phi)) & need for u in uses]
    nodes = [len(set(u.phi.values())) for u in uses]
    if not uses or frozenset().union(*cov) != need:
        return []
    found: list[tuple[int, ...]] = []
    visited: set[tuple[int, ...]] = set()
    seen: set[frozenset[int]] = set()
    budget = [SEARCH_LIMIT]

    def minimise(chosen: tuple[int, ...]) -> tuple[int, ...]:
        kept = list(chosen)
        for i in sorted(chosen):  # fix (f): removals in ascending id
            rest = [j for j in kept if j != i]
            if rest and frozenset().union(*(cov[j] for j in rest)) == need:
                kept = rest
        return tuple(sorted(kept))

    def search(chosen: tuple[int, ...], covered: frozenset) -> bool:
        """True once ``k`` rewritings are found (fix (a): a global stop)."""
        budget[0] -= 1
        if covered == need:  # fix (b): a cover is not extended further
            rw = minimise(chosen)
            if rw not in visited:  # fix (d): de-duplicated after minimisation
                visited.add(rw)
                found.append(rw)
            return len(found) >= k
        key = frozenset(chosen)
        if key in seen or budget[0] <= 0:
            return False
        seen.add(key)
        scored = [(len(cov[i] - covered), nodes[i], i) for i in range(len(uses))
                  if i not in chosen]
        scored.sort(key=lambda t: (-t[0], -t[1], t[2]))
        for interest, _, i in scored:
            if interest == 0:  # fix (c)
                break
            if search(chosen + (i,), covered | cov[i]):
                return True
        return False

    search((), frozenset())
    return [[uses[i] for i in rw] for rw in found]


def rewriting_sql(query: Subscription, rewriting: list[Use]) -> str:
    """The query over the subscriptions of ``rewriting`` (each read as a relation named like
    the subscription, with its keys): the views joined on the keys of atoms mapped to the
    same query atom, the query's joins and predicates no view enforces applied, the
    query's outputs (keys included) selected."""
    alias = [f"t{i}" for i in range(len(rewriting))]

    def exact(c) -> str | None:
        for i, use in enumerate(rewriting):
            for name, (a, col) in use.view.outputs:
                if (use.phi[a], col) == c:
                    return f'{alias[i]}."{name}"'
        return None

    def any_(c) -> str | None:
        for i, use in enumerate(rewriting):
            for name, (a, col) in use.view.outputs:
                if query.same((use.phi[a], col), c):
                    return f'{alias[i]}."{name}"'
        return None

    where: list[str] = []
    first_key: dict[str, list[str]] = {}
    for i, use in enumerate(rewriting):
        for a in use.view.atoms:
            mine = [f'{alias[i]}."{name}"' for name, _ in use.view.keys[a]]
            target = use.phi[a]
            if target in first_key:
                where += [f"{x} = {y}" for x, y in zip(mine, first_key[target], strict=True)]
            else:
                first_key[target] = mine
    for a, b in query.joins:  # a join no output supplies both sides of is enforced by a view
        left, right = exact(a), exact(b)
        if left is not None and right is not None:
            where.append(f"{left} = {right}")
    for p in query.predicates:  # likewise, a predicate no output carries is enforced
        col = any_(p.column)
        if col is not None:
            where.append(f"{col} {p.op} {literal(p.value)}")
    select = []
    for name, c in query.outputs:
        if name.startswith("__key_"):
            atom, key = c
            position = [k for _, (_, k) in query.keys[atom]].index(key)
            select.append(f'{first_key[atom][position]} AS "{name}"')
        else:
            select.append(f'{any_(c)} AS "{name}"')
    sql = "SELECT " + ", ".join(select) + " FROM " + ", ".join(
        f'"{use.view.name}" AS {alias[i]}' for i, use in enumerate(rewriting))
    return sql + (" WHERE " + " AND ".join(where) if where else "")
