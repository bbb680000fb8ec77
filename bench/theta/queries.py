"""GCQ1-GCQ8: the inequality-join queries of Table 2 (dynamic-yannakakis-iedyn.txt, 5.2)
and their synthetic insert streams.

=====  ==========================================================  ======  ===========
query  expression                                                  stream  paper output
=====  ==========================================================  ======  ===========
GCQ1   R(a,b,c) ⋈ S(d,e,f) | a < d                                 12k     18,017k
GCQ2   R(a,b,c) ⋈ S(d,e,f) ⋈ T(g,h,i) | a < d ∧ e < g              2.7k    178,847k
GCQ3   R(a,b,c) ⋈ S(d,e,f) ⋈ T(g,h,i) | a < d ∧ d < g              2.7k    90,425k
GCQ4   R(a,b,c) ⋈ S(d,e,f,k) ⋈ T(g,h,i,k) | a < d ∧ d < g          21k     297,873k
GCQ5   π a,b,d,e,f,g,h (GCQ3)                                      2.7k    114,561k
GCQ6   π d,e,f,g,h,k (GCQ4)                                        21k     99,043k
GCQ7   π b,c,e,f,h,i (GCQ3)                                        2.7k    114,561k
GCQ8   π b,c,e,f,h,i (GCQ4)                                        21k     297,873k
=====  ==========================================================  ======  ===========

The streams are single-tuple inserts only, as in the paper.  Each event goes to one of
the query's relations chosen uniformly at random; every column is drawn uniformly from
``[0, 10^6)`` (so ties are rare and ``a < d`` holds for about half of all pairs),
except the equi-join column ``k``, drawn from ``[0, 200)``.  That reproduces the
paper's output sizes at scale 1: about ``n^2/2`` rows for GCQ1 with ``n = 6k`` tuples per
relation (paper 18.0M), ``n^3/4`` for GCQ2 with ``n = 900`` (182M; paper 179M),
``n^3/6`` for GCQ3 (122M; paper 90M) and ``n^3/(6*200)`` for GCQ4 with ``n = 7k``
(286M; paper 298M).  ``--scale s`` multiplies the stream length by ``s``, so outputs
shrink like ``s^2`` (GCQ1) or ``s^3`` (the others).

Queries over the same relations share one stream (GCQ3/5/7 see identical tuples, as do
GCQ4/6/8), so their output sizes can be compared.  The views use SQL bag semantics
(no DISTINCT): a projection keeps one row per derivation, so GCQ5 and GCQ7 have exactly
as many rows as GCQ3 (the paper reports the projections' sizes from other runs).

This module depends on numpy only: the Pathway runner imports it from its own
interpreter.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

VALUE_RANGE = 1_000_000
K_RANGE = 200

SCHEMAS: dict[str, dict[str, tuple[str, ...]]] = {
    "rs": {"r": ("a", "b", "c"), "s": ("d", "e", "f")},
    "rst": {"r": ("a", "b", "c"), "s": ("d", "e", "f"), "t": ("g", "h", "i")},
    "rstk": {"r": ("a", "b", "c"), "s": ("d", "e", "f", "k"), "t": ("g", "h", "i", "k")},
}
# seeds per family, so that queries over the same relations see the same stream
FAMILY_SEED = {"rs": 1, "rst": 2, "rstk": 3}


@dataclass(frozen=True)
class GCQ:
    """One Table 2 query."""

    name: str
    expression: str  # as printed in Table 2
    family: str  # key of SCHEMAS: the relations and their columns
    sql: str
    columns: tuple[str, ...]  # output columns, in order
    predicates: str  # "<" or "<, =" (Table 2's "Join" column)
    kind: str  # "full", "free-connex" or "acyclic, not free-connex"
    stream: int  # Table 2 stream length
    paper_output: int  # Table 2 output size

    @property
    def tables(self) -> dict[str, tuple[str, ...]]:
        return SCHEMAS[self.family]


_RST = "FROM r, s, t WHERE r.a < s.d AND s.d < t.g"
_RSTK = "FROM r, s, t WHERE r.a < s.d AND s.d < t.g AND s.k = t.k"
_ALL_RST = ("a", "b", "c", "d", "e", "f", "g", "h", "i")
_ALL_RSTK = ("a", "b", "c", "d", "e", "f", "k", "g", "h", "i")


def _select(columns: tuple[str, ...]) -> str:
    return ", ".join("s.k" if c == "k" else c for c in columns)


QUERIES: dict[str, GCQ] = {
    q.name: q
    for q in (
        GCQ("GCQ1", "R(a,b,c) ⋈ S(d,e,f) | a < d", "rs",
            "SELECT a, b, c, d, e, f FROM r, s WHERE r.a < s.d",
            ("a", "b", "c", "d", "e", "f"), "<", "full", 12_000, 18_017_000),
        GCQ("GCQ2", "R(a,b,c) ⋈ S(d,e,f) ⋈ T(g,h,i) | a < d ∧ e < g", "rst",
            f"SELECT {_select(_ALL_RST)} FROM r, s, t WHERE r.a < s.d AND s.e < t.g",
            _ALL_RST, "<", "full", 2_700, 178_847_000),
        GCQ("GCQ3", "R(a,b,c) ⋈ S(d,e,f) ⋈ T(g,h,i) | a < d ∧ d < g", "rst",
            f"SELECT {_select(_ALL_RST)} {_RST}", _ALL_RST, "<", "full", 2_700, 90_425_000),
        GCQ("GCQ4", "R(a,b,c) ⋈ S(d,e,f,k) ⋈ T(g,h,i,k) | a < d ∧ d < g", "rstk",
            f"SELECT {_select(_ALL_RSTK)} {_RSTK}", _ALL_RSTK, "<, =", "full", 21_000,
            297_873_000),
        GCQ("GCQ5", "π a,b,d,e,f,g,h (GCQ3)", "rst",
            f"SELECT {_select(('a', 'b', 'd', 'e', 'f', 'g', 'h'))} {_RST}",
            ("a", "b", "d", "e", "f", "g", "h"), "<", "free-connex", 2_700, 114_561_000),
        GCQ("GCQ6", "π d,e,f,g,h,k (GCQ4)", "rstk",
            f"SELECT {_select(('d', 'e', 'f', 'g', 'h', 'k'))} {_RSTK}",
            ("d", "e", "f", "g", "h", "k"), "<, =", "free-connex", 21_000, 99_043_000),
        GCQ("GCQ7", "π b,c,e,f,h,i (GCQ3)", "rst",
            f"SELECT {_select(('b', 'c', 'e', 'f', 'h', 'i'))} {_RST}",
            ("b", "c", "e", "f", "h", "i"), "<", "acyclic, not free-connex", 2_700,
            114_561_000),
        GCQ("GCQ8", "π b,c,e,f,h,i (GCQ4)", "rstk",
            f"SELECT {_select(('b', 'c', 'e', 'f', 'h', 'i'))} {_RSTK}",
            ("b", "c", "e", "f", "h", "i"), "<, =", "acyclic, not free-connex", 21_000,
            297_873_000),
    )
}


def create_table_sql(name: str, columns: tuple[str, ...]) -> str:
    """``CREATE TABLE`` for one relation (all columns INTEGER; upkeep and DuckDB)."""
    return f"CREATE TABLE {name} ({', '.join(f'{c} INTEGER NOT NULL' for c in columns)})"


@dataclass
class Stream:
    """A query's insert stream.

    Event ``i`` inserts row ``pos[i]`` of relation ``names[table_id[i]]``; each
    relation's rows are stored in arrival order, so the events ``[lo, hi)`` of a batch
    insert a contiguous slice ``rows[name][start(name, lo):start(name, hi)]``.
    """

    names: list[str]
    columns: dict[str, tuple[str, ...]]
    table_id: np.ndarray
    rows: dict[str, np.ndarray]  # name -> (n_name, width) int64

    def __len__(self) -> int:
        return len(self.table_id)

    def start(self, name: str, event: int) -> int:
        """How many rows of ``name`` the events before ``event`` insert."""
        return int(np.count_nonzero(self.table_id[:event] == self.names.index(name)))

    def batch(self, lo: int, hi: int) -> dict[str, np.ndarray]:
        """Rows per relation inserted by events ``[lo, hi)`` (empty relations left out)."""
        out = {}
        for name in self.names:
            a, b = self.start(name, lo), self.start(name, hi)
            if b > a:
                out[name] = self.rows[name][a:b]
        return out

    def batches(self, size: int) -> list[tuple[int, int]]:
        """``[lo, hi)`` event ranges of at most ``size`` events."""
        return [(lo, min(lo + size, len(self))) for lo in range(0, len(self), size)]


def stream_length(query: GCQ, scale: float) -> int:
    """Table 2's stream length times ``scale`` (at least one event per relation)."""
    return max(len(query.tables), round(query.stream * scale))


def generate(query: GCQ, scale: float, seed: int = 0) -> Stream:
    """The deterministic insert stream of ``query`` at ``scale``."""
    n = stream_length(query, scale)
    schema = query.tables
    names = list(schema)
    rng = np.random.default_rng([seed, FAMILY_SEED[query.family], n])
    table_id = rng.integers(0, len(names), size=n, dtype=np.int8)
    rows = {}
    for i, name in enumerate(names):
        count = int(np.count_nonzero(table_id == i))
        cols = schema[name]
        data = rng.integers(0, VALUE_RANGE, size=(count, len(cols)), dtype=np.int64)
        if "k" in cols:
            data[:, cols.index("k")] = rng.integers(0, K_RANGE, size=count)
        rows[name] = data
    return Stream(names, dict(schema), table_id, rows)
