"""Bytes per row of each structure upkeep keeps, measured with tracemalloc on TPC-H data.

For each TPC-H table: the table's row store (:class:`upkeep.row_store.RowStore`) against
the dict of tuples it replaced, and its PRIMARY KEY's counts (``Table.keys``, a row store
of the key's columns) against the dict of key tuples they replaced.  For the views QH, FQ1 and Q3 under strategies dyn and
general: the view's maintenance state (dyn: node reducts and indexes; general: the
operators' join indexes and aggregate groups, and the materialized output) per base row
it reads.

Usage::

    python -m bench.tpch.bytes_per_row --scale 0.1
    python -m bench.tpch.bytes_per_row --scale 0.1 --nodes FQ1   # per GJT node, dyn
"""

from __future__ import annotations

import argparse
import gc
import sys
import tracemalloc

from bench.tpch.data import generate, load_table
from bench.tpch.queries import QUERIES
from bench.tpch.schema import PRIMARY_KEYS, create_table_sql

TABLES = ("orders", "lineitem", "customer", "part", "partsupp")


def _allocated(build) -> tuple[object, int]:
    """What ``build()`` returns and the bytes it left allocated."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = build()
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return kept, after - before


def table_bytes(scale: float) -> list[tuple[str, int, float, float, float, float]]:
    """(table, rows, bytes/row as dict of tuples, bytes/row in the row store, bytes/row of
    the PRIMARY KEY's counts as a dict of key tuples, and as the table keeps them)."""
    import upkeep
    from upkeep.row_store import row_store
    from upkeep.rows import iter_rows

    out = []
    for name in TABLES:
        arrow = load_table(scale, name)
        db = upkeep.connect()
        db.execute(create_table_sql(name))
        table = db.local_catalog.table(name)
        rows = [table.coerce(r, i) for i, r in enumerate(iter_rows(arrow, name, table.columns))]
        del arrow

        def as_tuples(rows=rows):
            return {tuple(map(_copy, r)): 1 for r in rows}

        def as_store(rows=rows, table=table):
            for r in rows:
                table.rows.add(r, 1)
            return table.rows

        key = [table.column_names.index(c) for c in PRIMARY_KEYS[name]]

        def key_tuples(rows=rows, key=key):
            return {tuple(_copy(r[i]) for i in key): 1 for r in rows}

        def key_store(rows=rows, key=key, table=table):
            store = row_store([table.columns[i] for i in key])
            for r in rows:
                store.add(tuple([r[i] for i in key]), 1)
            return store

        tuples, tuple_bytes = _allocated(as_tuples)
        del tuples
        _, store_bytes = _allocated(as_store)
        keys, key_tuple_bytes = _allocated(key_tuples)
        del keys
        _, key_store_bytes = _allocated(key_store)
        n = len(rows)
        out.append((name, n, tuple_bytes / n, store_bytes / n, key_tuple_bytes / n,
                    key_store_bytes / n))
    return out


def _copy(value: object) -> object:
    """A fresh object equal to ``value``, as a row read from a file would hold."""
    if isinstance(value, str):
        return "".join(list(value))
    if isinstance(value, float):
        return float(repr(value))
    if isinstance(value, int) and not isinstance(value, bool):
        return int(str(value))
    return value


def view_bytes(scale: float, query: str, strategy: str) -> tuple[int, float]:
    """(base rows read, bytes of the view's state under ``strategy`` per base row)."""
    import upkeep

    q = QUERIES[query]
    db = upkeep.connect()
    base = 0
    for name in q.tables:
        arrow = load_table(scale, name)
        db.execute(create_table_sql(name))
        db.insert(name, arrow)
        base += arrow.num_rows
    _, state = _allocated(lambda: db.create_view("v", q.sql, strategy=strategy))
    return base, state / base


def _deep_size(value: object, seen: set[int]) -> int:
    """``sys.getsizeof`` of ``value`` and of the tuples, lists, dicts and values inside it
    not in ``seen`` (which it adds them to)."""
    if id(value) in seen:
        return 0
    seen.add(id(value))
    size = sys.getsizeof(value)
    if type(value) in (tuple, list):
        size += sum(_deep_size(v, seen) for v in value)
    elif isinstance(value, dict):
        size += sum(_deep_size(k, seen) + _deep_size(v, seen) for k, v in value.items())
    return size


def node_bytes(scale: float, query: str) -> list[tuple[str, int, float, float, float]]:
    """Per GJT node of ``query``'s (T,N)-rep under dyn: (its variables, tuples, bytes per
    tuple of the reduct dict, of the tuples with the values first met in that node, of its
    indexes' buckets with their keys), by ``sys.getsizeof`` (tracemalloc gives only the
    whole)."""
    import upkeep

    q = QUERIES[query]
    db = upkeep.connect()
    for name in q.tables:
        db.execute(create_table_sql(name))
        db.insert(name, load_table(scale, name))
    db.create_view("v", q.sql, strategy="dyn")
    out = []
    for state in db._catalog.runtime("v").rep.states.values():
        n = max(len(state.rho), 1)
        seen: set[int] = set()
        tuples = sum(_deep_size(t, seen) + _deep_size(w, seen) for t, w in state.rho.items())
        indexes = sum(sys.getsizeof(index.buckets) + sum(
            _deep_size(k, seen) + sys.getsizeof(b) for k, b in index.buckets.items())
            for index in state.indexes.values())
        out.append((str(state.node.vars), len(state.rho), sys.getsizeof(state.rho) / n,
                    tuples / n, indexes / n))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.1)
    parser.add_argument("--nodes", metavar="QUERY",
                        help="only the bytes of each GJT node of QUERY's state under dyn")
    args = parser.parse_args()
    generate(args.scale)
    if args.nodes:
        print("| GJT node variables | tuples | reduct entry, B | tuple and values, B | "
              "indexes, B | B per tuple |")
        print("|---|---:|---:|---:|---:|---:|")
        for variables, n, rho, tuples, indexes in node_bytes(args.scale, args.nodes):
            print(f"| {variables} | {n:,} | {rho:.0f} | {tuples:.0f} | {indexes:.0f} | "
                  f"{rho + tuples + indexes:.0f} |")
        return
    print("| table | rows | dict of tuples, B/row | row store, B/row | ratio | PRIMARY KEY "
          "as a dict of key tuples, B/row | PRIMARY KEY store, B/row | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, n, tuples, store, key_tuples, key_store in table_bytes(args.scale):
        print(f"| {name} | {n:,} | {tuples:,.0f} | {store:,.0f} | {tuples / store:.1f}x | "
              f"{key_tuples:,.0f} | {key_store:,.0f} | {key_tuples / key_store:.1f}x |")
    print()
    print("| view | base rows read | dyn, B per base row | general, B per base row |")
    print("|---|---:|---:|---:|")
    for query in ("QH", "FQ1", "Q3"):
        base, dyn = view_bytes(args.scale, query, "dyn")
        _, general = view_bytes(args.scale, query, "general")
        print(f"| {query} | {base:,} | {dyn:,.0f} | {general:,.0f} |")


if __name__ == "__main__":
    main()
