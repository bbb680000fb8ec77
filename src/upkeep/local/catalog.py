"""The local engine's catalog: base tables, maintained views and their definitions.

A view is planned (:func:`upkeep.planner.plan_view`) and built from its inputs' contents
when it is created; derived tables and non-recursive CTEs become hidden helper views, so
each part gets its own strategy.  The catalog also orders views for a batch (those that
depend on the changed relations, in definition order) and knows whose deltas someone
needs (subscribers, or views reading them).  It holds no transaction state: reads of a
table inside a transaction see its staged rows through ``overlay``.

The Spark engine keeps one of these, without rows, to check and plan the same SQL.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import duckdb
from sqlglot import exp

from .. import zset
from ..bulk_progress import bulk_progress
from ..ddl import created_name, declared_names, refuse_replace, table_from_create
from ..distinct_on import rewrite_distinct_on
from ..engine import Subscriber, Subscription
from ..errors import (
    ConstraintError,
    Error,
    EvaluationError,
    ProvenanceError,
    SchemaError,
    StrategyError,
    UnsupportedError,
)
from ..expiry import Expiry
from ..gc_pause import gc_paused
from ..grouping_sets import expand_grouping_sets
from ..lateral import rewrite_laterals
from ..outer_joins import rewrite_outer_joins
from ..padded_joins import is_pad
from ..plan import (
    column_list,
    compared_as_doubles,
    count_if_as_sum,
    ctes_as_relations,
    derived_table_body,
    derived_tables,
    distinct_names_as_written,
    read_relation,
    table_alias_list_as_derived,
    unordered,
)
from ..planner import as_written, describe, duckdb_types, plan_view, result_names
from ..ranked import qualify_as_derived, rank_bound, ranked_view, split_ranking
from ..recursive.view import Explanation, RecursiveView
from ..row_store import RowStore
from ..scalar_subqueries import rewrite_scalar_subqueries
from ..sql import check_types, parse_one, relations_read
from ..subquery_predicates import (
    exists_of_one_row,
    isolate_subquery_bodies,
    rewrite_subquery_predicates,
)
from ..table import Table
from ..threshold import ThresholdView, one_relation_block, scalar_strategy, split_threshold
from ..topk import TopKError, TopKView, sort_key, split_top_k
from ..types import SqlType, coerce_row, format_row, type_from_name
from ..value_index import column_value
from ..views import ViewRuntime
from ..why import WitnessLayout, witness_queries
from ..windows import (
    WINDOWED,
    WindowView,
    window_aliases_resolved,
    window_view,
    windowing_of,
    windows_as_derived,
)
from ..zset import Delta
from .arrow_snapshots import ArrowSnapshots
from .provenance import ProvenanceTracker

Overlay = Callable[[str], Delta | None]


def _no_log(record: tuple) -> None:
    """The log of a catalog that keeps none (shards, the Spark driver's copy)."""


_SET_OPERATIONS = (exp.Union, exp.Except, exp.Intersect)


def _operand(node: exp.Expression, rewritten: exp.Expression) -> exp.Expression:
    """``rewritten``, what a rewrite made of ``node``, parenthesized where it is a set
    operation (a FULL JOIN's inner join ``UNION ALL`` its anti-joins, GROUPING SETS' union
    of groupings) taking the place of an operand of another: written out unparenthesized,
    ``a EXCEPT b UNION ALL c`` reads as ``(a EXCEPT b) UNION ALL c`` (the SQL that a
    recomputed view hands DuckDB)."""
    if (rewritten is not node and isinstance(rewritten, _SET_OPERATIONS)
            and isinstance(node.parent, _SET_OPERATIONS)):
        return exp.Subquery(this=rewritten)
    return rewritten


def _rename_columns(view: ViewRuntime, names: list[str]) -> None:
    """Give ``view``'s columns ``names`` (one each), repeated names made distinct as
    DuckDB's view makes them; its rows are read by position, so nothing else changes."""
    view.columns = [(n, t) for n, (_, t) in zip(distinct_names_as_written(names),
                                                  view.columns, strict=True)]


def _with_column_list(stmt: exp.Create) -> exp.Expression:
    """``CREATE VIEW v(a, b) AS q``: ``q`` with its columns named ``a, b``."""
    target = stmt.this
    if not (isinstance(target, exp.Schema) and target.expressions):
        return stmt.expression
    names = [exp.to_identifier(c.name) for c in target.expressions]
    return exp.select("*").from_(exp.Subquery(
        this=stmt.expression.copy(),
        alias=exp.TableAlias(this=exp.to_identifier("__columns"), columns=names)))


class LocalCatalog:
    """Tables and views of one database, with the planner's view of them (what
    :class:`upkeep.planner.Catalog` asks; an extension type, ``catalog.pxd``, so not a
    subclass of it)."""

    def __init__(self, bdd_ordering: str = "sifting", fixpoint_partitions: int = 1,
                 overlay: Overlay | None = None) -> None:
        self.bdd_ordering = bdd_ordering  # read by the recursive planner
        self.fixpoint_partitions = fixpoint_partitions
        self.tables: dict[str, Table] = {}
        self.views: dict[str, ViewRuntime] = {}
        self.subscribers: dict[str, list[Subscription]] = {}
        self.user_views: dict[str, tuple[str, str | None]] = {}  # name -> (sql, strategy)
        self._definitions: dict[str, tuple[exp.Expression, str | None]] = {}
        self._helpers: dict[str, list[str]] = {}  # view -> hidden views of its subqueries
        self._overlay = overlay or (lambda name: None)
        self._listening: set[str] | None = None
        self._affected: dict[frozenset[str], list[str]] = {}
        #: what a commit needs of the catalog's shape, by the tables it changes (a table's
        #: name when it is one, else their frozenset): the views the change reaches, in
        #: order, each as its name, inputs and step (:meth:`affected`, ``commit._steps``),
        #: and the views someone reads (:meth:`listening`).  Kept by
        #: ``Committer._commit`` and emptied by :meth:`changed`, so a single-row commit
        #: finds both with one probe, not two method calls and a frozenset
        self.plans: dict[str | frozenset[str], tuple[list[tuple], set[str]]] = {}
        self.last_batch: Callable[[], int] = lambda: 0  # the Committer's last batch id
        #: the tables whose rows expire, by name: read by every commit, so a plain
        #: attribute (not a property's call), made again whenever the catalog changes
        #: (a table's time-to-live is set before it is added: ``ddl.with_properties``)
        self.expiring: dict[str, Expiry] = {}
        self.provenance = ProvenanceTracker()  # update provenance of provenance tables
        # views WITH (provenance = 'why') -> their witness views (one per UNION block)
        self.witnesses: dict[str, list[tuple[str, WitnessLayout]]] = {}
        # witness view -> output key -> its witnesses with multiplicities; built by the
        # first db.why on the view, then kept by a subscription to the witness view
        self._why_index: dict[str, dict[tuple, dict[tuple, int]]] = {}
        # views whose subquery predicates compare with a group's MIN / MAX (an EXISTS
        # correlated by an inequality): their subquery's rows derive nothing a witness
        # view could list (set by each planning of the view)
        self._by_extremum: set[str] = set()
        self.snapshots = ArrowSnapshots()  # relations as Arrow, between ad-hoc queries
        #: tables' and user views' column names as written where they differ from the
        #: lower-case names the catalog matches on (``display_schema_of``)
        self.display_names: dict[str, tuple[str, ...]] = {}

    @classmethod
    def from_description(cls, description: dict, **options) -> LocalCatalog:
        """The tables of :meth:`describe`'s output, without rows and without views."""
        catalog = cls(description.get("bdd_ordering", "sifting"), **options)
        for name, columns, not_null, key in description["tables"]:
            catalog.tables[name] = Table(name, columns, not_null, key)
        for name, names in description.get("display", {}).items():
            catalog.set_display(name, names)
        return catalog

    def describe(self) -> dict:
        """The schema without rows: tables (columns, NOT NULL, key), user views (SQL,
        strategy) and the BDD variable order of recursive views."""
        return {"tables": [(t.name, t.columns, t.not_null, t.key) for t in self.tables.values()],
                "views": dict(self.user_views), "bdd_ordering": self.bdd_ordering,
                "display": {t: list(self.display_names[t]) for t in self.tables
                            if t in self.display_names}}

    # ------------------------------------------------------------ lookups
    def schema_of(self, name: str) -> list[tuple[str, SqlType]]:
        name = _name(name, "table or view")
        if name in self.tables:
            return self.tables[name].columns
        if name in self.views:
            return self.views[name].columns
        raise SchemaError(f"unknown table or view {name}")

    def display_schema_of(self, name: str) -> list[tuple[str, SqlType]]:
        """:meth:`schema_of` with the column names as the user wrote them (``CREATE TABLE
        t (Id INTEGER)`` gives ``Id``) and as DuckDB names a view's columns over such
        tables: what a result shows (a cursor's description, Arrow, pandas, a sink).  The
        catalog matches names in lower case, as DuckDB matches them."""
        columns = self.schema_of(name)
        names = self.display_names.get(name.lower())
        if names is None:
            return columns
        return [(n, t) for n, (_, t) in zip(names, columns, strict=True)]

    def set_display(self, name: str, names) -> None:
        """Keep ``names`` as relation ``name``'s column names as written, when they name
        its columns (the same names but for case) and differ from them."""
        kept = [n for n, _ in self.schema_of(name)]
        names = tuple(names)
        if names == tuple(kept) or [n.lower() for n in names] != [n.lower() for n in kept]:
            self.display_names.pop(name, None)
        else:
            self.display_names[name] = names

    def _name_as_written(self, name: str, query: exp.Expression) -> None:
        """A user view's column names as DuckDB names them over the tables' names as
        written (``SELECT id AS OrderId`` gives ``OrderId``, ``SELECT iD FROM t`` the
        table's ``Id``); where DuckDB cannot describe the query, the catalog's names."""
        self.display_names.pop(name, None)
        read = relations_read(query)
        if not any(r in self.display_names for r in read) and not any(
                any(c.isupper() for c in n.name) for n in query.find_all(exp.Identifier)):
            return  # nothing written in upper case: the names are the catalog's
        try:
            names = result_names(query.sql(dialect="duckdb"), read, self.display_schema_of)
        except (duckdb.Error, Error):
            return
        self.set_display(name, distinct_names_as_written(names))

    def table(self, name: str) -> Table:
        """The base table ``name`` (a view or an unknown name is an error)."""
        # a name as the catalog keys it is found without being lowered (every single-row
        # change asks)
        table = self.tables.get(name) if type(name) is str else None
        if table is None:
            table = self.tables.get(_name(name, "table"))
        if table is None:
            if name.lower() in self.views:
                raise UnsupportedError(f"{name} is a view; views cannot be changed directly")
            raise SchemaError(f"unknown table {name}")
        return table

    def runtime(self, name: str) -> ViewRuntime:
        """The maintained view ``name`` (its strategy's runtime object)."""
        view = self.views.get(_name(name, "view"))
        if view is None:
            raise SchemaError(f"unknown view {name}")
        return view

    def reads(self, name: str) -> set[str]:
        """``name`` and every table and view it reads, directly or through other views."""
        out, todo = set(), [name]
        while todo:
            n = todo.pop()
            if n not in out:
                out.add(n)
                if n in self.views:
                    todo.extend(self.views[n].inputs)
        return out

    def view_names(self) -> list[str]:
        """User-visible views (not the hidden helpers of subqueries)."""
        hidden = self._hidden()
        return [v for v in self.views if v not in hidden]

    def _hidden(self) -> set[str]:
        """The hidden helper views: of subqueries, and the witness views of why-provenance."""
        return {h for hs in self._helpers.values() for h in hs}

    def owner_of(self, name: str) -> str:
        """The user's view a hidden helper serves (through helpers of helpers); a user's
        table or view is its own."""
        for view, helpers in self._helpers.items():
            if name in helpers:
                return self.owner_of(view)
        return name

    def check_name_free(self, name: str) -> None:
        """A SchemaError if ``name`` is a table, a view or a hidden helper's name."""
        if name in self.views and name in self._hidden():
            raise SchemaError(f"the name {name} is taken by a hidden helper view of view "
                              f"{self.owner_of(name)} (it keeps a subquery, a CTE or "
                              "why-provenance)")
        if name in self.tables or name in self.views:
            raise SchemaError(f"a table or view named {name} already exists")

    def user_named(self, name: str) -> str:
        """``name`` (lower case) if it is a user's table or view; a hidden helper's name is
        as unknown to the user's API as a name nobody defined."""
        name = _name(name, "table or view")
        if name in self._hidden():
            raise SchemaError(f"unknown table or view {name}")
        return name

    def ttl_of(self, table: str) -> float | None:
        """The table's ``ttl_seconds``, or None if its rows do not expire."""
        expiry = self.tables[table].expiry
        return expiry.ttl if expiry is not None else None

    def staged_rows(self, table: Table) -> dict[tuple, int]:
        """A table's rows with the open transaction's staged changes applied."""
        pending = self._overlay(table.name)
        return zset.plus(table.rows.items(), pending) if pending else table.rows.as_dict()

    def staged_rows_with(self, table: Table, col: int | tuple[int, ...], value: object
                         ) -> dict[tuple, int]:
        """:meth:`staged_rows` restricted to rows whose column ``col`` holds ``value`` (or
        whose columns ``col`` hold the tuple ``value``), found through the table's index
        (:meth:`Table.rows_with`)."""
        get = table.rows.get
        rows = {r: get(r, 0) for r in table.rows_with(col, value)}
        for r, w in (self._overlay(table.name) or {}).items():
            if column_value(r, col) == value:
                rows[r] = rows.get(r, 0) + w
        return {r: w for r, w in rows.items() if w}

    def weighted_rows(self, name: str) -> Iterator[tuple[tuple, int]]:
        """A table's (as staged) or view's distinct rows with their multiplicities."""
        name = name.lower()
        if name in self.tables:
            return iter(self.staged_rows(self.tables[name]).items())
        if name in self.views:
            return self.views[name].weighted_rows()
        raise SchemaError(f"unknown table or view {name}")

    def arrow_of(self, name: str, batch: int):
        """A table's committed rows, or a view's rows as of ``batch`` (the last committed
        batch), as Arrow, kept between queries while they do not change
        (:class:`ArrowSnapshots`); None for a table the open transaction has changed (its
        staged rows are read through :meth:`contents_of`)."""
        name = name.lower()
        table = self.tables.get(name)
        if table is not None:
            return None if self._overlay(table.name) else self.snapshots.of(table)
        view = self.views[name]
        return self.snapshots.kept(name, view, batch, self.schema_of(name),
                                   view.weighted_rows)

    def contents_of(self, name: str) -> tuple[list[tuple[str, SqlType]], list[tuple]]:
        rows = []
        for row, w in self.weighted_rows(name):
            rows.extend([row] * w)
        return self.schema_of(name), rows

    def explain(self, name: str) -> str:
        """The view's strategy, query class and join tree, in words (with its helper views)."""
        parts = [self.runtime(name).explain()]
        for hidden in self._helpers.get(name.lower(), []):
            parts.append("helper " + self.explain(hidden))
        return "\n\n".join(parts)

    def why(self, view: str, row) -> Explanation:
        """Why ``row`` is in ``view``: recursive views from their absorption provenance,
        views created ``WITH (provenance = 'why')`` from their witness view."""
        runtime = self.runtime(view)
        row = coerce_row(row, runtime.columns, view, 0, kind="view")
        if isinstance(runtime, RecursiveView):
            return runtime.why(row)
        layouts = self.witnesses.get(view)
        if layouts is None:
            raise UnsupportedError(
                f"why-provenance of view {view}: create it WITH (provenance = 'why') to keep "
                "it (recursive views keep theirs always)")
        if runtime.multiplicity(row) <= 0:
            raise ProvenanceError(f"row {format_row(row)} is not in view {view}", row)
        # a set of derivations: blocks of a UNION may each derive the row from the same rows
        products = [list(p) for p in dict.fromkeys(tuple(p) for p in
                                                    self._derivations(view, row))]
        annotations = {(rel, base): self.provenance.annotation(rel, base)
                       for rows in products for rel, base in rows
                       if self.provenance.tracks(rel)}
        products.sort(key=repr)
        return Explanation(view, row, products, None, False, annotations)

    def _derivations(self, view: str, row: tuple) -> list[list[tuple[str, tuple]]]:
        """Every derivation of ``row`` in ``view`` (one with witnesses) over base rows: a
        witness's row of a view that keeps witnesses too is replaced by each of its own
        derivations."""
        products = []
        for hidden, layout in self.witnesses[view]:
            key = tuple(row[p] for p in layout.key_positions)
            for witness in self._witnesses_of(hidden, len(layout.key_positions)).get(key, ()):
                _, rows = layout.split(witness)
                combined: list[list[tuple[str, tuple]]] = [[]]
                for rel, used in rows:
                    if rel in self.views and is_pad(self.views[rel].columns, used):
                        continue  # a LEFT join's NULL row: derived from nothing
                    # a row of a view with none (an aggregate over no rows) is derived
                    # from nothing too, and takes nothing from the others it joins
                    options = ((self._derivations(rel, used) or [[]]) if rel in self.witnesses
                               else [[(rel, used)]])
                    combined = [done + more for done in combined for more in options]
                products.extend(combined)
        return products

    def _witnesses_of(self, hidden: str, width: int) -> dict[tuple, dict[tuple, int]]:
        """A witness view's rows by output key (their first ``width`` columns): one scan on
        the first question, then kept from its committed deltas, so each later ``why``
        costs the row's derivations, not the view's size."""
        index = self._why_index.get(hidden)
        if index is not None:
            return index
        index = {}

        def add(changes) -> None:
            for witness, w in changes:
                bucket = index.setdefault(witness[:width], {})
                n = bucket.get(witness, 0) + w
                if n:
                    bucket[witness] = n
                else:
                    del bucket[witness]
                    if not bucket:
                        del index[witness[:width]]

        add(self.weighted_rows(hidden))
        self.subscribe(hidden, add)
        self._why_index[hidden] = index
        return index

    def dependents(self, name: str) -> list[str]:
        """Views that read ``name`` directly."""
        return [v for v, rt in self.views.items() if name in rt.inputs]

    # ------------------------------------------------------------ DDL
    def execute_ddl(self, stmt: exp.Create | exp.Drop,
                    log: Callable[[tuple], None] = _no_log) -> None:
        """Run a CREATE TABLE / CREATE VIEW / DROP statement (not ``CREATE TABLE AS``;
        ``IF [NOT] EXISTS`` may make it a no-op).  ``log`` writes each change's record once
        every check passed and before the change becomes visible; if it raises (a full
        disk), the catalog is as before."""
        if isinstance(stmt, exp.Drop):
            self._drop(stmt, log)
            return
        kind = (stmt.args.get("kind") or "").upper()
        name = created_name(stmt)
        if kind == "TABLE":
            refuse_replace(stmt, name)
            if name in self.tables or name in self.views:
                if stmt.args.get("exists") and name not in self._hidden():
                    return
                self.check_name_free(name)
            if stmt.expression is not None:
                raise UnsupportedError(f"CREATE TABLE {name} AS SELECT on this engine")
            table = table_from_create(stmt)
            log(table_record(table))
            display = declared_names(stmt)
            if (record := display_record(table, display)) is not None:
                log(record)
            self.add_table(table, display)
        elif kind == "VIEW":
            if stmt.args.get("exists") and (name in self.views or name in self.tables) and (
                    name not in self._hidden()):
                return  # IF NOT EXISTS: a table of the name is enough, as in DuckDB
            self.define_view(name, _with_column_list(stmt), None,
                             replace=bool(stmt.args.get("replace")), log=log,
                             why=view_provenance(stmt, name))
        else:
            raise UnsupportedError(f"CREATE {kind}")

    def _drop(self, stmt: exp.Drop, log: Callable[[tuple], None]) -> None:
        kind = (stmt.args.get("kind") or "").upper()
        if kind not in ("TABLE", "VIEW"):
            raise UnsupportedError(f"DROP {kind}")
        for t in stmt.args.get("tables") or [stmt.this]:
            name = t.name.lower()
            if name not in (self.tables if kind == "TABLE" else self.views) or (
                    name in self._hidden()):
                if stmt.args.get("exists"):
                    continue
                raise SchemaError(f"unknown {kind.lower()} {name}")
            self._check_unread(name, "drop")
            log(("drop", kind.lower(), name))
            if kind == "VIEW":
                self.drop_view(name)
            else:
                self.drop_table(name)

    # ------------------------------------------------------------ changes to the catalog
    def add_table(self, table: Table, display: list[str] | None = None) -> None:
        """Add ``table``; ``display``: its column names as written."""
        self.check_name_free(table.name)
        self.tables[table.name] = table
        if display is not None:
            self.set_display(table.name, display)
        self.provenance.add_table(table)
        self.changed()

    def drop_table(self, name: str) -> None:
        self._check_unread(name, "drop")
        del self.tables[name]
        self.display_names.pop(name, None)
        self.provenance.drop_table(name)
        self.changed()

    def define_view(self, name: str, query: exp.Expression, strategy: str | None,
                    replace: bool = False, log: Callable[[tuple], None] = _no_log,
                    why: bool = False) -> None:
        """Create a user-visible view (replacing one of that name if ``replace``) and log
        its SQL.  A view that fails to plan or build, or whose record ``log`` cannot write,
        changes nothing: the view it would replace stays.  ``why``: keep its
        why-provenance (a witness view, :mod:`upkeep.why`)."""
        if name in self.tables or name in self._hidden() or (name in self.views and not replace):
            self.check_name_free(name)
        check_types(query, self.schema_of)
        old = None
        if replace and name in self.views:
            self._check_unread(name, "replace view")
            old = self._detach(name)
        sql = query.sql(dialect="duckdb")
        try:
            try:
                self.create_view(name, query, strategy)
            except SchemaError as exc:
                taken = getattr(exc, "taken", None)
                if taken is None or taken == name:
                    raise
                raise SchemaError(f"view {name} needs a hidden helper view named {taken} (for "
                                  "a subquery, a CTE or why-provenance), and a table or view of "
                                  "that name exists: rename one of them") from None
            try:
                if why:
                    self.add_witnesses(name)
                # one record: a crash cannot leave the view without its why-provenance
                log(("view", name, sql, strategy, True) if why else ("view", name, sql, strategy))
            except BaseException:
                self._drop_view(name)
                raise
        except BaseException:
            if old is not None:
                self._reattach(name, old)
            raise
        self.user_views.pop(name, None)
        self.user_views[name] = (sql, strategy)
        self._name_as_written(name, query)

    def add_witnesses(self, name: str, strict: bool = True) -> None:
        """Keep ``name``'s why-provenance: its witness view, maintained like a helper.  A
        hidden helper it reads without witnesses of its own stays an input row, except one
        kept by an extremum comparison, which ``strict`` refuses (a database reopened
        keeps the views it was made with: ``strict`` False)."""
        query, strategy = self._definitions[name]
        recursive = self.views[name]
        if isinstance(recursive, RecursiveView):  # keeps its own provenance (absorption)
            if recursive.strategy == "dred":
                raise UnsupportedError(f"why-provenance of view {name}: it is maintained by "
                                       "DRed, which keeps no provenance; create it with "
                                       "strategy 'absorption'")
            return
        if name in self._by_extremum:  # the subquery's rows are not in its derivations
            raise UnsupportedError(
                f"why-provenance of view {name}: an EXISTS / IN / ANY / ALL subquery "
                "correlated by an inequality is kept as a comparison with its group's MIN "
                "or MAX, whose derivations are not the subquery's rows")
        witnesses = witness_queries(name, query, self.schema_of)
        # the hidden helper views it reads (derived tables, subqueries) keep theirs too, so
        # a derivation reaches base rows; a helper whose form has none stays an input row.
        # A helper may read one registered under the user's view (a subquery's helper read
        # by the helper that pads or correlates it), so every hidden view read counts.
        read = {rel for _, _, layout in witnesses for rel, _ in layout.relations}
        hidden = self._hidden()
        helpers = [h for h in sorted(read) if h in hidden and h not in self.witnesses]
        if strict and any(h in self._by_extremum for h in helpers):
            raise _ReadsExtremum(
                f"why-provenance of view {name}: it reads rows kept by comparing with a "
                "group's MIN or MAX (a subquery correlated by an inequality in a derived "
                "table, or an outer join whose ON compares the sides), whose derivations "
                "are not the rows that satisfy the comparison")
        made = []
        try:
            for hidden_view, witness, _ in witnesses:
                try:
                    self.create_view(hidden_view, witness, strategy)
                except StrategyError:  # the view's forced strategy may not fit a plain join
                    self.create_view(hidden_view, witness, None)
                made.append(hidden_view)
        except BaseException:
            for hidden_view in made:
                self._drop_view(hidden_view)
            raise
        self._helpers.setdefault(name, []).extend(made)
        self.witnesses[name] = [(hidden_view, layout) for hidden_view, _, layout in witnesses]
        for helper in helpers:
            if helper in self.witnesses:  # given theirs by a helper before it
                continue
            try:
                self.add_witnesses(helper, strict)
            except _ReadsExtremum:
                raise
            except UnsupportedError:
                pass

    def drop_view(self, name: str) -> None:
        self._check_unread(name, "drop")
        self._drop_view(name)
        self.user_views.pop(name, None)

    def create_view(self, name: str, query: exp.Expression, strategy: str | None) -> None:
        """Plan and build a view (and its hidden helpers) from its inputs' contents."""
        if name in self.tables or name in self.views:
            error = SchemaError(f"a table or view named {name} already exists")
            error.taken = name  # define_view names the user's view it was a helper of
            raise error
        created: list[str] = []
        original = query
        query = window_aliases_resolved(query, self.schema_of)
        self._by_extremum.discard(name)  # a replaced view's, planned again here
        try:
            view = as_written(name, query, self, strategy) or self._windowed(
                name, query, strategy, created)
            if view is None:
                threshold: list = []
                query = self._hoist_subqueries(name, query, strategy, created,
                                               threshold if strategy is None else None)
                view = (self._threshold(name, threshold, created) if threshold else
                        self._top_k(name, query, strategy, created) or plan_view(
                            name, query, self, strategy))
            self._name_as_duckdb(original, view)
            contents = self.contents(view.inputs)
            rows = sum(len(d) for d in contents.values())
            with gc_paused(rows), bulk_progress(f"building view {name}", rows, counted=False):
                try:
                    view.build(contents)
                except EvaluationError as exc:
                    raise exc.in_view(name) from exc.__cause__
        except BaseException:
            for hidden in reversed(created):
                self._drop_view(hidden)
            raise
        self.views[name] = view
        self._definitions[name] = (query, strategy)
        self._helpers[name] = created
        self.changed()

    def _name_as_duckdb(self, query: exp.Expression, view) -> None:
        """Columns of unaliased expressions named as DuckDB names them (``count(*)`` is
        ``count_star()``, ``sum(y.c)`` is ``sum(c)``), so a query over the view, or over a
        derived table, finds them by DuckDB's names."""
        first = query
        while isinstance(first, (exp.Union, exp.Except, exp.Intersect)):
            first = first.this  # a set operation's columns are named by its first block
        if not isinstance(first, exp.Select) or (view.strategy != "recompute" and all(
                isinstance(e, (exp.Alias, exp.Column, exp.Star)) for e in first.expressions)):
            return  # (a recomputed view was described after the rewrites: named again)
        try:
            names = [n for n, _ in describe(query.sql(dialect="duckdb"),
                                            relations_read(query), self.schema_of)]
        except (duckdb.Error, Error):
            return
        if len(names) == len(view.columns):
            _rename_columns(view, names)

    def _top_k(self, name: str, query: exp.Expression, strategy: str | None,
               created: list[str]) -> TopKView | None:
        """``ORDER BY .. LIMIT k`` kept in order over a helper view of the rest of the query
        (``topk.py``); None when the query is no such top-k (it is planned as usual)."""
        parts = split_top_k(query) if strategy is None else None
        if parts is None:
            return None
        body, order, limit, offset, hidden = parts
        helper = f"{name}__topk"
        self.create_view(helper, body, None)
        try:
            key = sort_key(order, self.views[helper].columns)
        except TopKError:
            self._drop_view(helper)
            return None
        created.append(helper)
        return TopKView(name, self.views[helper].columns, helper, query.sql(dialect="duckdb"),
                        key, limit, offset, hidden)

    def _windowed(self, name: str, query: exp.Expression, strategy: str | None,
                  created: list[str]) -> WindowView | None:
        """A select with window functions in its select list kept as window view ``name``
        itself (``windows.py``) over a helper view of the rest; None when the query is no
        such select (it is planned as usual)."""
        if strategy is not None:
            return None
        split = windowing_of(query)
        if split is None:
            return None
        windowing, outer = split
        base = f"{name}__base"
        self.create_view(base, windowing.base, None)
        try:
            view = window_view(name, windowing, base, self.views[base].columns,
                               query.sql(dialect="duckdb"), outer)
        except (TopKError, Error):
            self._drop_view(base)
            return None
        created.append(base)
        return view

    def _threshold(self, name: str, split: list, created: list[str]) -> ThresholdView:
        """A comparison with an uncorrelated scalar subquery as a moving threshold over the
        block's rows (``threshold.py``): the subquery is a helper view, and so is the block
        unless it is one relation's filter and select list, which the view applies itself."""
        block, scalar, op = _compared_as_duckdb_compares(*split, self._types_of)
        scalar_name = f"{name}__scalar"
        try:
            self.create_view(scalar_name, scalar, scalar_strategy(scalar))
        except StrategyError:
            self.create_view(scalar_name, scalar, None)
        created.append(scalar_name)
        sql = block.sql(dialect="duckdb")
        direct = one_relation_block(block, self.schema_of)
        if direct is not None:  # the block's rows come straight from its one relation
            relation, columns, rows = direct
            return ThresholdView(name, columns, relation, scalar_name, op, sql, rows)
        self.create_view(f"{name}__block", block, None)
        created.append(f"{name}__block")
        return ThresholdView(name, self.views[f"{name}__block"].columns, f"{name}__block",
                             scalar_name, op, sql)

    def _ranked(self, name: str, select: exp.Select, sub: exp.Subquery, strategy: str | None,
                created: list[str]) -> bool:
        """Keep derived table ``sub`` of ``select`` as a per-group top-k view ``name``
        (``ranked.py``) when it ranks its rows and ``select`` bounds the rank, or as a
        window view (``windows.py``) when it is a select with windows set apart by
        :func:`~upkeep.windows.windows_as_derived`; False when it is neither (it is a
        helper view as usual)."""
        if strategy is not None:
            return False
        alias = (sub.alias or "").lower()
        ranking = split_ranking(sub.this)
        limit = rank_bound(select, alias, ranking.names[0]) if ranking else None
        if limit is None:
            if alias != WINDOWED:
                return False
            view = self._windowed(name, sub.this, None, created)
            if view is None:  # windows the view cannot keep: DuckDB computes them
                self.create_view(name, sub.this, "recompute")
                return True
        else:
            base = f"{name}__base"
            self.create_view(base, ranking.base, None)
            try:
                view = ranked_view(name, ranking, limit, base, self.views[base].columns,
                                   sub.this.sql(dialect="duckdb"))
            except TopKError:
                self._drop_view(base)
                return False
            created.append(base)
        view.build(self.contents(view.inputs))
        self.views[name] = view
        self._definitions[name] = (sub.this, strategy)
        self._helpers[name] = []
        self.changed()
        return True

    def restore_views(self, views: dict[str, tuple[str, str | None]]) -> None:
        """Re-create user views from their logged SQL, in order (recovery, shards)."""
        for name, (sql, strategy) in views.items():
            query = parse_one(sql)
            self.create_view(name, query, strategy)
            self.user_views[name] = (sql, strategy)
            self._name_as_written(name, query)

    def _check_unread(self, name: str, what: str) -> None:
        """Refuse to change what views read; named as the user's views (a helper reading
        ``name`` stands for the view it serves)."""
        dependents = list(dict.fromkeys(self.owner_of(v) for v in self.dependents(name)))
        if dependents:
            raise ConstraintError(f"cannot {what} {name}: views {dependents} depend on it")

    def _detach(self, name: str) -> tuple:
        """Take a view and its helpers out of the catalog, keeping them to put back."""
        names, todo = [], [name]  # with its helpers' own helpers (a helper's witness view)
        while todo:
            names.append(todo.pop())
            todo.extend(self._helpers.get(names[-1], ()))
        kept = (list(self.views), {n: self.views.pop(n) for n in names},
                {n: self._definitions.pop(n) for n in names if n in self._definitions},
                {n: self._helpers.pop(n) for n in names if n in self._helpers},
                {n: self.subscribers.pop(n) for n in names if n in self.subscribers},
                {n: self.witnesses.pop(n) for n in names if n in self.witnesses},
                {n: self._why_index.pop(n) for n in names if n in self._why_index})
        self.changed()
        return kept

    def _reattach(self, name: str, kept: tuple) -> None:
        """Put back what :meth:`_detach` took, each view in its place: the order of
        ``views`` is the order views are stepped in (:meth:`affected`), helpers first."""
        order, views, definitions, helpers, subscribers, layouts, why_index = kept
        merged = {**self.views, **views}
        self.views.clear()
        self.views.update({n: merged.pop(n) for n in order if n in merged})
        self.views.update(merged)
        self._definitions.update(definitions)
        self._helpers.update(helpers)
        self.subscribers.update(subscribers)
        self.witnesses.update(layouts)
        self._why_index.update(why_index)
        self.changed()

    def _hoist_subqueries(self, name: str, query: exp.Expression, strategy: str | None,
                          created: list[str], threshold: list | None = None
                          ) -> exp.Expression:
        """Maintain each derived table and non-recursive CTE as a hidden helper view, so the
        outer block sees it as an ordinary relation (and each part gets its own strategy).
        When the query compares with an uncorrelated scalar subquery (``threshold.py``)
        and ``threshold`` is a list, its split is put there and the query returned with
        only its relations hoisted."""
        bodies, query = ctes_as_relations(query, name, self.schema_of)
        query = query.transform(table_alias_list_as_derived)
        for hidden, body in bodies:
            self.create_view(hidden, body, strategy)
            created.append(hidden)

        def hoist(node: exp.Expression, nested: bool = False) -> None:
            if isinstance(node, (exp.Union, exp.Except, exp.Intersect)):
                hoist(node.this, nested)
                hoist(node.expression, nested)
                return
            if not isinstance(node, exp.Select):
                return
            for holder in derived_tables(node):
                sub = holder.this
                hidden = f"{name}__sub{len(created) + 1}"
                try:
                    if not self._ranked(hidden, node, sub, strategy, created):
                        self.create_view(hidden, derived_table_body(sub, self.schema_of),
                                         strategy)
                        self._name_first_columns(hidden, column_list(sub), sub)
                except Error:
                    if not nested:
                        raise
                    continue  # correlated with an enclosing block: left to DuckDB
                created.append(hidden)
                read_relation(holder, hidden)
            if not has_recursion:  # subqueries' own derived tables, as helper views too
                for key in ("where", "having", "expressions"):
                    value = node.args.get(key)
                    for part in value if isinstance(value, list) else [value]:
                        if part is None:
                            continue
                        for inner in list(part.walk(prune=lambda n: isinstance(
                                n, (exp.Select, exp.Union, exp.Except, exp.Intersect)))):
                            hoist(inner, nested=True)

        def each(rewrite) -> exp.Expression:
            """``query`` with every node rewritten, each an operand still (:func:`_operand`)."""
            return query.transform(lambda n: _operand(n, rewrite(n)))

        def each_select(rewrite) -> exp.Expression:
            return each(lambda n: rewrite(n, self.schema_of) if isinstance(n, exp.Select)
                        else n)

        with_ = query.args.get("with_" if "with_" in query.args else "with")  # if recursive
        has_recursion = with_ is not None and bool(with_.args.get("recursive"))
        for rewrite in (unordered, count_if_as_sum, exists_of_one_row,
                        lambda n: expand_grouping_sets(n, self._types_of),
                        lambda n: rewrite_laterals(n, self.schema_of)):
            query = each(rewrite)
        if strategy is None:  # a first row per group: a ranked view, as windows below
            query = each(lambda n: rewrite_distinct_on(n, self.schema_of))
            query = windows_as_derived(each(qualify_as_derived))
        hoist(query)  # derived tables first: the rewrites below read relations only
        if threshold is not None and not has_recursion:
            threshold.extend(split_threshold(query, self.schema_of) or [])
            if threshold:
                return query
        query = each_select(isolate_subquery_bodies)
        hoist(query)
        extrema = sum(1 for _ in query.find_all(exp.Min, exp.Max))
        query = each_select(rewrite_subquery_predicates)
        if sum(1 for _ in query.find_all(exp.Min, exp.Max)) > extrema:
            self._by_extremum.add(name)
        query = each_select(rewrite_scalar_subqueries)
        hoist(query)
        query = each_select(lambda select, schema_of: rewrite_outer_joins(
            select, schema_of, padded=strategy != "lftj"))
        hoist(query)
        return query

    def _name_first_columns(self, hidden: str, names: list[exp.Identifier],
                            sub: exp.Subquery) -> None:
        """Name the first columns of a derived table's helper view by its column list
        (already so where :func:`named_columns` could spell the body's ``*``)."""
        if not names:
            return
        view = self.views[hidden]
        if len(names) > len(view.columns):
            self._drop_view(hidden)
            raise SchemaError(f"derived table {sub.alias_or_name} has {len(view.columns)} "
                              f"columns, but {len(names)} names are given for them")
        rest = [c for c, _ in view.columns[len(names):]]
        if rest:  # the body's own names, before they were made distinct: a name the list
            try:  # renames frees it for a later column (``v(x, y)`` over ``k, a, a``)
                raw = result_names(sub.this.sql(dialect="duckdb"), relations_read(sub.this),
                                   self.schema_of)
                if len(raw) == len(view.columns):
                    rest = [n.lower() for n in raw[len(names):]]
            except (duckdb.Error, Error):
                pass
        _rename_columns(view, [n.name.lower() for n in names] + rest)

    def _types_of(self, select: exp.Select) -> list[str]:
        """DuckDB's types of ``select``'s columns (duckdb.Error if it cannot bind it)."""
        return duckdb_types(select, self.schema_of)

    def _drop_view(self, name: str) -> None:
        self.changed()
        del self.views[name]
        self.display_names.pop(name, None)
        self._by_extremum.discard(name)
        self.witnesses.pop(name, None)
        self._why_index.pop(name, None)
        self._definitions.pop(name, None)
        self.subscribers.pop(name, None)
        for hidden in reversed(self._helpers.pop(name, [])):
            self._drop_view(hidden)

    # ------------------------------------------------------------ batches
    def subscribe(self, view: str, fn: Subscriber) -> Callable[[], None]:
        """Tell ``fn`` of the view's batches committed from now on (its first rows, read
        now, hold those before, also while they are being told)."""
        subs = self.subscribers.setdefault(view, [])
        subscription = Subscription(fn, self.last_batch())
        subs.append(subscription)
        self.changed()

        def unsubscribe() -> None:
            if subscription in subs:
                subs.remove(subscription)
                self.changed()

        return unsubscribe

    def listening(self) -> set[str]:
        """Views whose deltas someone needs: subscribers or views reading them (cached)."""
        if self._listening is None:
            out = {n for n, subs in self.subscribers.items() if subs}
            for view in self.views.values():
                out |= view.inputs & self.views.keys()
            self._listening = out
        return self._listening

    def affected(self, tables: frozenset[str]) -> list[str]:
        """Views that depend, directly or through other views, on these tables, in order."""
        hit = self._affected.get(tables)
        if hit is None:
            reached = set(tables)
            hit = []
            for name, view in self.views.items():
                if not view.inputs.isdisjoint(reached):
                    hit.append(name)
                    reached.add(name)
            self._affected[tables] = hit
        return hit

    def changed(self) -> None:
        """Forget what was cached about the catalog's shape."""
        self._listening = None
        self._affected = {}
        self.plans = {}
        self.expiring = {n: t.expiry for n, t in self.tables.items() if t.expiry is not None}

    def rebuild_views(self) -> None:
        """Plan and build every view anew from the tables (after a failed batch)."""
        self.changed()
        old, self.views = self.views, {}
        for name in old:
            query, strategy = self._definitions[name]
            fresh = getattr(old[name], "fresh", None)  # a view kept over a helper view
            view = fresh() if fresh is not None else (
                as_written(name, query, self, strategy) or plan_view(name, query, self,
                                                                     strategy))
            view.build(self.contents(view.inputs))
            self.views[name] = view

    def contents(self, names: set[str]) -> dict[str, Delta | RowStore]:
        """The committed contents of tables and views, as one batch from empty (a table's
        :class:`RowStore` as is: its rows are decoded as the build reads them, by each
        source only the columns it reads: ``operators.rows_read``)."""
        return {n: self.tables[n].rows if n in self.tables
                else dict(self.views[n].weighted_rows())
                for n in names}


class _ReadsExtremum(UnsupportedError):
    """A view asked to keep why-provenance reads a helper kept by an extremum comparison."""


def view_provenance(stmt: exp.Create, view: str) -> bool:
    """``CREATE MATERIALIZED VIEW v WITH (provenance = 'why') AS ...``: keep why-provenance."""
    props = stmt.args.get("properties")
    why = False
    for prop in props.expressions if props is not None else []:
        if isinstance(prop, exp.MaterializedProperty):
            continue
        name = prop.name.lower() if isinstance(prop, exp.Property) else ""
        value = prop.args.get("value")
        if name != "provenance":
            raise UnsupportedError(f"view property {prop.sql()} of view {view} is not "
                                   "supported: the one a view takes is provenance = 'why'")
        if not (isinstance(value, exp.Literal) and value.is_string
                and value.this.lower() == "why"):
            raise SchemaError(f"provenance of view {view} must be 'why', not "
                              f"{value.sql() if value is not None else 'nothing'}")
        why = True
    return why


def table_record(table: Table) -> tuple:
    """The log record that declares ``table``."""
    record = ("table", table.name, table.columns, table.not_null, table.key,
              table.expiry.ttl if table.expiry else None)
    return record if table.provenance is None else (*record, table.provenance)


def display_record(table: Table, display: list[str]) -> tuple | None:
    """The log record of ``table``'s column names as written, which recovery reads after
    its ``table`` record; None where they are its own."""
    return None if display == [n for n, _ in table.columns] else (
        "display", table.name, display)


def new_view_name(name: object, sql: object) -> str:
    """The name ``create_view(name, sql)`` defines (lower case): both must be strings and
    the name not empty, else a :class:`SchemaError` (on either engine)."""
    if not isinstance(name, str) or not isinstance(sql, str):
        raise SchemaError(f"create_view takes a name and SQL as strings, not "
                          f"{type(name).__name__} and {type(sql).__name__}")
    if not name.strip():
        raise SchemaError("a view's name must not be empty")
    return name.lower()


def _name(name: object, kind: str) -> str:
    """A table's or view's name as the catalog keys it (lower case); a name that is not a
    string is a :class:`SchemaError`, not an ``AttributeError`` from deep inside."""
    if not isinstance(name, str):
        raise SchemaError(f"a {kind} name must be a string, not {type(name).__name__}")
    return name.lower()


def _compared_as_duckdb_compares(block: exp.Select, scalar: exp.Select, op: str,
                                 types_of: Callable[[exp.Select], list[str]]
                                 ) -> tuple[exp.Select, exp.Select, str]:
    """A threshold's block and scalar with one side cast where DuckDB casts it, since the
    view compares the two values in Python: the side that is not a DOUBLE to one when the
    other is (:func:`~upkeep.plan.compared_as_doubles`: ``Decimal('0.10') >= 0.1`` is False
    in Python, True in DuckDB), a DATE to the TIMESTAMP at its midnight; a SchemaError for
    types that do not compare (text and a number), as a comparison in an expression is."""
    try:
        mine, theirs = (type_from_name(types_of(block)[-1]),
                        type_from_name(types_of(scalar)[0]))
    except (duckdb.Error, Error):
        return block, scalar, op
    if {mine.kind, theirs.kind} == {"DATE", "TIMESTAMP"}:
        if mine.kind == "DATE":
            return _last_cast(block, "TIMESTAMP"), scalar, op
        return block, _last_cast(scalar, "TIMESTAMP"), op
    if mine.kind != theirs.kind and "NULL" not in (mine.kind, theirs.kind) and not (
            mine.is_numeric and theirs.is_numeric):
        item = block.expressions[-1]
        value = item.this if isinstance(item, exp.Alias) else item
        raise SchemaError(f"cannot compare {mine} with {theirs}: "
                          f"{value.sql()} {op} ({scalar.sql()})")
    if not compared_as_doubles(mine, theirs):
        return block, scalar, op
    if theirs.kind == "DOUBLE":
        return _last_cast(block, "DOUBLE"), scalar, op
    return block, _last_cast(scalar, "DOUBLE"), op


def _last_cast(select: exp.Select, to: str) -> exp.Select:
    """``select`` with its last item cast to ``to`` (its name kept)."""
    select = select.copy()
    item = select.expressions[-1]
    value = item.this if isinstance(item, exp.Alias) else item
    cast = exp.cast(value.copy(), to)
    item.replace(cast.as_(item.alias) if isinstance(item, exp.Alias) else cast)
    return select
