"""The benchmark queries written with Pathway's Table API (same semantics as the SQL).

Filters are applied before joins and inputs are projected to the columns a query
needs, as a Pathway user would write it.  Dates are ``DATE_TIME_NAIVE`` columns
compared with ``datetime`` constants; ``LIKE '%x'`` / ``LIKE '%x%'`` become
``str.endswith`` / ``str.find(...) >= 0``.  All joins are inner equi-joins.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable

import pathway as pw

from bench.tpch.queries import QUERIES

Tables = dict[str, pw.Table]


def _d(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text)


def _keep(table: pw.Table, query: str, *extra: str) -> pw.Table:
    """Project ``table`` to the output columns of ``query`` it owns, plus ``extra``."""
    wanted = set(QUERIES[query].columns) | set(extra)
    names = [c for c in table.column_names() if c in wanted]
    return table.select(*(table[c] for c in names))


def _join(left: pw.Table, right: pw.Table, *on: tuple[str, str]) -> pw.Table:
    """Inner equi-join on ``(left_col, right_col)`` pairs keeping all columns."""
    conditions = [left[a] == right[b] for a, b in on]
    return left.join(right, *conditions).select(*pw.left, *pw.right)


def _output(table: pw.Table, query: str) -> pw.Table:
    return table.select(*(table[c] for c in QUERIES[query].columns))


def _q3_join(t: Tables, query: str, *extra: str, filtered: bool = True) -> pw.Table:
    c, o, li = t["customer"], t["orders"], t["lineitem"]
    if filtered:  # TPC-H Q3's selections; the full join FQ1 has none
        c = c.filter(pw.this.c_mktsegment == "BUILDING")
        o = o.filter(pw.this.o_orderdate < _d("1995-03-15"))
        li = li.filter(pw.this.l_shipdate > _d("1995-03-15"))
    c = _keep(c, query, "c_custkey")
    o = _keep(o, query, "o_custkey", "o_orderkey")
    li = _keep(li, query, "l_orderkey", *extra)
    co = _join(c, o, ("c_custkey", "o_custkey"))
    return _join(co, li, ("o_orderkey", "l_orderkey"))


def fq1(t: Tables) -> pw.Table:
    """Full join of TPC-H Q3."""
    return _output(_q3_join(t, "FQ1", filtered=False), "FQ1")


def fq2(t: Tables) -> pw.Table:
    """Full join of TPC-H Q10."""
    q = "FQ2"
    o, li = t["orders"], t["lineitem"]
    cn = _join(_keep(t["customer"], q), _keep(t["nation"], q), ("c_nationkey", "n_nationkey"))
    cno = _join(cn, _keep(o, q), ("c_custkey", "o_custkey"))
    return _output(_join(cno, _keep(li, q), ("o_orderkey", "l_orderkey")), q)


def fq3(t: Tables) -> pw.Table:
    """Full join of TPC-H Q2 without the correlated subquery."""
    q = "FQ3"
    r, p = t["region"], t["part"]
    nr = _join(_keep(t["nation"], q), _keep(r, q), ("n_regionkey", "r_regionkey"))
    snr = _join(_keep(t["supplier"], q), nr, ("s_nationkey", "n_nationkey"))
    pps = _join(_keep(p, q), _keep(t["partsupp"], q), ("p_partkey", "ps_partkey"))
    return _output(_join(pps, snr, ("ps_suppkey", "s_suppkey")), q)


def fq4(t: Tables) -> pw.Table:
    """Full join of TPC-H Q9."""
    q = "FQ4"
    p = t["part"]
    pl = _join(_keep(p, q), _keep(t["lineitem"], q), ("p_partkey", "l_partkey"))
    plps = _join(
        pl, _keep(t["partsupp"], q), ("l_partkey", "ps_partkey"), ("l_suppkey", "ps_suppkey")
    )
    sn = _join(_keep(t["supplier"], q), _keep(t["nation"], q), ("s_nationkey", "n_nationkey"))
    plpss = _join(plps, sn, ("l_suppkey", "s_suppkey"))
    return _output(_join(plpss, _keep(t["orders"], q), ("l_orderkey", "o_orderkey")), q)


def q3(t: Tables) -> pw.Table:
    """TPC-H Q3 without ORDER BY / LIMIT."""
    joined = _q3_join(t, "Q3", "l_extendedprice", "l_discount")
    priced = joined.select(
        pw.this.l_orderkey,
        pw.this.o_orderdate,
        pw.this.o_shippriority,
        rev=pw.this.l_extendedprice * (1 - pw.this.l_discount),
    )
    grouped = priced.groupby(pw.this.l_orderkey, pw.this.o_orderdate, pw.this.o_shippriority)
    return grouped.reduce(
        pw.this.l_orderkey,
        revenue=pw.reducers.sum(pw.this.rev),
        o_orderdate=pw.this.o_orderdate,
        o_shippriority=pw.this.o_shippriority,
    )


def qh(t: Tables) -> pw.Table:
    """Per-order line count and total price (q-hierarchical)."""
    o = t["orders"].select(pw.this.o_orderkey)
    li = t["lineitem"].select(pw.this.l_orderkey, pw.this.l_extendedprice)
    joined = _join(o, li, ("o_orderkey", "l_orderkey"))
    return joined.groupby(pw.this.l_orderkey).reduce(
        pw.this.l_orderkey,
        line_count=pw.reducers.count(),
        total_price=pw.reducers.sum(pw.this.l_extendedprice),
    )


BUILDERS: dict[str, Callable[[Tables], pw.Table]] = {
    "FQ1": fq1,
    "FQ2": fq2,
    "FQ3": fq3,
    "FQ4": fq4,
    "Q3": q3,
    "QH": qh,
}
