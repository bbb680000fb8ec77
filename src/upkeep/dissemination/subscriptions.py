"""Subscriptions as relational views, the relational version of Delta's view language
(``specs/delta-dissemination.md`` D.12 [OURS], from section 4.4 of
``papers/delta-pubsub-view-dissemination.txt``).

A subscription is a SELECT-PROJECT-JOIN query over published tables: equi-joins and
conjunctive constant predicates (``col = c``, ``col < c``, ``<=``, ``>``, ``>=``).  Every
table it reads must have a primary key, and the key of each FROM atom is added to its
output (the relational analogue of "every node carries an ID"): rewritings then join
subscriptions on keys, which is exact.  :func:`embeddings` maps one subscription's atoms
into another's (joins and predicates implied: the safe rule of D.9), and :func:`covers`
says which of a query's attributes an embedded view supplies (D.12's coverage).
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal

import sqlglot
from sqlglot import exp

from ..errors import Error, SchemaError
from ..expressions import Column as ScopeColumn
from ..expressions import ExpressionCompiler, Scope
from ..sql import Dialect, quiet_sqlglot
from ..types import DATE, SqlType, coerce_value, is_unicode

OPS = {exp.EQ: "=", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
FLIP = {"=": "=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


class SubscriptionError(Error):
    """A subscription outside the language; ``line`` and ``column`` locate the construct
    at fault in the query's text, where it has a place."""

    fields = ("line", "column")

    def __init__(self, message: str, at: exp.Expression | None = None,
                 line: int | None = None, column: int | None = None) -> None:
        while at is not None and line is None:  # NULL, ? and TRUE carry no position
            line, column = position(at)
            at = at.parent
        where = f" (line {line}, column {column})" if line is not None else ""
        super().__init__(message + where)
        self.line, self.column = line, column


def position(node: exp.Expression) -> tuple[int | None, int | None]:
    """Line and column (1-based) where ``node``'s text starts, from its tokens' positions."""
    best = None
    for n in node.walk():
        meta = getattr(n, "_meta", None) or {}
        if "start" in meta and (best is None or meta["start"] < best["start"]):
            best = meta
    if best is None:
        return None, None
    return best["line"], best["col"] - (best["end"] - best["start"])


Column = tuple[str, str]  # (atom alias, column)


@dataclass(frozen=True)
class Predicate:
    """``column op value``; ``value`` as the engine compares it with the column: a date
    for a DATE column written as text, a float for a DOUBLE column, else the literal's
    exact value (an int, or a Decimal for a decimal literal)."""

    column: Column
    op: str
    value: object


@dataclass
class Subscription:
    """A parsed subscription; ``outputs`` are (output name, column), keys last."""

    name: str
    sql: str
    atoms: dict[str, str]  # alias -> table
    outputs: list[tuple[str, Column]]
    joins: list[tuple[Column, Column]]
    predicates: list[Predicate]
    keys: dict[str, list[tuple[str, Column]]]  # alias -> its key's output names and columns
    _class: dict[Column, int] = field(default_factory=dict, repr=False)
    #: the join and predicate conjuncts as written (for errors that point into the text)
    conjuncts: list[exp.Expression] = field(default_factory=list, repr=False, compare=False)

    def tables(self) -> frozenset[str]:
        return frozenset(self.atoms.values())

    def same(self, a: Column, b: Column) -> bool:
        """Whether the joins make columns ``a`` and ``b`` equal."""
        return a == b or (a in self._class and self._class.get(b) == self._class[a])

    def implies_join(self, a: Column, b: Column) -> bool:
        """Whether every row of this subscription meets the join ``a = b``: the joins make
        the columns equal, and, where they are one column (a view's ``r.b = r.b``, or its
        two atoms mapped to one), that column is never NULL here, being joined or compared
        with a constant (a join drops the rows whose value is NULL)."""
        if a != b:
            return self.same(a, b)
        return a in self._class or bool(self.interval(a))

    def members(self, c: Column) -> list[Column]:
        """Every column the joins make equal to ``c`` (itself included)."""
        k = self._class.get(c)
        return [c] if k is None else [d for d, j in self._class.items() if j == k]

    def interval(self, c: Column) -> list[Predicate]:
        """The constant predicates on ``c``'s class."""
        cols = set(self.members(c))
        return [p for p in self.predicates if p.column in cols]

    def output_of(self, c: Column) -> str | None:
        """An output name holding column ``c`` (or one the joins make equal to it)."""
        for name, col in self.outputs:
            if self.same(col, c):
                return name
        return None

    def check_types(self, schema: Schema) -> None:
        """Raise SubscriptionError, at the conjunct, for a join or predicate comparing
        values of types the engine cannot compare (``o.status = 1`` on a VARCHAR):
        each conjunct is compiled by the engine's expression compiler, its rule."""
        scope = Scope([ScopeColumn(alias, c, t, 0) for alias, table in self.atoms.items()
                       for c, t in schema[table][0]])
        for conjunct in self.conjuncts:
            try:
                ExpressionCompiler(scope).compile(conjunct)
            except SchemaError as exc:
                raise SubscriptionError(f"subscription {self.name}: {exc}", at=conjunct) \
                    from None

    def select_sql(self) -> str:
        """The subscription's query with its atoms' keys in the output."""
        parts = [f'{a}."{c}" AS "{n}"' for n, (a, c) in self.outputs]
        where = [f'{a}."{c}" = {b}."{d}"' for (a, c), (b, d) in self.joins]
        where += [f'{p.column[0]}."{p.column[1]}" {p.op} {literal(p.value)}'
                  for p in self.predicates]
        sql = "SELECT " + ", ".join(parts) + " FROM " + ", ".join(
            f'"{t}" AS {a}' for a, t in self.atoms.items())
        return sql + (" WHERE " + " AND ".join(where) if where else "")


def literal(value: object) -> str:
    """``value`` written as a SQL literal (a decimal in full, never in exponent form)."""
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, dt.date):
        return f"'{value.isoformat()}'"
    return repr(value)


# table -> (its columns with their types, its key columns)
Schema = Mapping[str, tuple[list[tuple[str, SqlType]], list[str]]]


def catalog_schema(tables: list[tuple]) -> dict[str, tuple[list[tuple[str, SqlType]], list[str]]]:
    """The subscription language's schema of a database's tables (``db.catalog()["tables"]``
    rows: name, columns, ..., key column indexes)."""
    return {name: (list(columns), [columns[i][0] for i in (key or ())])
            for name, columns, *_, key in tables}


def tables_named(sql: str) -> set[str]:
    """The table names ``sql`` mentions (lower case; none if it does not parse): a
    principal's read grant is checked on them before :func:`parse` checks the query
    against their columns, whose errors would tell an unreadable table's columns."""
    try:
        with quiet_sqlglot():
            tree = sqlglot.parse_one(sql, read=Dialect)
    except (sqlglot.errors.ParseError, RecursionError, ValueError):
        return set()
    return {t.name.lower() for t in tree.find_all(exp.Table)}


def parse(name: str, sql: str, schema: Schema) -> Subscription:
    """``sql`` as a subscription over the tables of ``schema``, or SubscriptionError
    naming the construct outside the language or comparing values the engine cannot
    compare.  Constants are read as the engine reads them against their column's type
    (:class:`Predicate`), so that comparing two subscriptions' constants (:func:`implies`)
    compares what the engine compares."""
    if not (sql.isascii() or is_unicode(sql)):  # it is hashed as UTF-8 (its id)
        bad = next(i for i, c in enumerate(sql) if not is_unicode(c))
        raise SubscriptionError(f"subscription {name}: SQL must be valid Unicode: a lone "
                                f"surrogate {sql[bad]!r} at character {bad}")
    try:
        with quiet_sqlglot():
            tree = sqlglot.parse_one(sql, read=Dialect)
    except sqlglot.errors.ParseError as exc:
        first = exc.errors[0] if exc.errors else {}
        raise SubscriptionError(f"subscription {name}: {first.get('description', exc)}",
                                line=first.get("line"), column=first.get("col")) from None
    except RecursionError:
        raise SubscriptionError(f"subscription {name}: cannot parse SQL: expressions nested "
                                "too deeply") from None
    if isinstance(tree, exp.Block):  # statements separated by ';'
        raise SubscriptionError(f"subscription {name}: a subscription is one SELECT "
                                "statement", at=tree.expressions[1])
    if not isinstance(tree, exp.Select):
        raise SubscriptionError(f"subscription {name}: a subscription is one SELECT block "
                                f"(not {tree.key.upper()})", at=tree)
    for arg, value in tree.args.items():  # every clause but the language's own
        if value and arg not in ("expressions", "from", "from_", "joins", "where"):
            clause = _CLAUSES.get(arg, arg.strip("_").upper())
            raise SubscriptionError(f"subscription {name}: {clause} is not in the "
                                    "subscription language (SELECT-PROJECT-JOIN)",
                                    at=_node(value) or tree)
    from_ = tree.args.get("from_") or tree.args.get("from")
    if from_ is None:
        raise SubscriptionError(f"subscription {name}: no FROM", at=tree)
    types = {table: dict(columns) for table, (columns, _) in schema.items()}
    atoms: dict[str, str] = {}
    conditions: list[exp.Expression] = []
    for holder in [from_, *(tree.args.get("joins") or [])]:
        source = holder.this
        if not isinstance(source, exp.Table):
            raise SubscriptionError(f"subscription {name}: {source.sql()[:60]!r} is not a table",
                                    at=source)
        if holder is not from_ and (
                any(v for k, v in holder.args.items() if k not in ("this", "on", "kind"))
                or (holder.args.get("kind") or "").upper() not in ("", "INNER", "CROSS")):
            raise SubscriptionError(f"subscription {name}: {holder.sql()[:60]!r}: only inner "
                                    "equi-joins", at=holder)
        alias = source.args.get("alias")
        if any(v for k, v in source.args.items() if k not in ("this", "alias")) or (
                alias is not None and alias.columns):
            raise SubscriptionError(f"subscription {name}: {source.sql()[:60]!r}: a table is "
                                    "named by itself or an alias (no schema, sample, version "
                                    "or column aliases)", at=source)
        table = source.name.lower()
        if table not in schema:
            raise SubscriptionError(f"subscription {name}: unknown table {table}", at=source)
        if not schema[table][1]:
            raise SubscriptionError(f"subscription {name}: table {table} has no primary key",
                                    at=source)
        alias = source.alias_or_name.lower()
        if alias in atoms:
            raise SubscriptionError(f"subscription {name}: {alias} appears twice in FROM",
                                    at=source)
        atoms[alias] = table
        if holder.args.get("on") is not None:
            conditions.append(holder.args["on"])
    if tree.args.get("where") is not None:
        conditions.append(tree.args["where"].this)

    def column(node: exp.Expression) -> Column:
        col = node.name.lower()
        if node.table:
            alias = node.table.lower()
            if alias not in atoms:
                raise SubscriptionError(f"subscription {name}: unknown table {alias} in "
                                        f"{node.sql()}", at=node)
            if col not in types[atoms[alias]]:
                raise SubscriptionError(f"subscription {name}: {atoms[alias]} has no column "
                                        f"{col}", at=node)
            return alias, col
        owners = [a for a, t in atoms.items() if col in types[t]]
        if len(owners) != 1:
            raise SubscriptionError(f"subscription {name}: column {col} is "
                                    f"{'ambiguous' if owners else 'unknown'}", at=node)
        return owners[0], col

    joins: list[tuple[Column, Column]] = []
    predicates: list[Predicate] = []
    conjuncts: list[exp.Expression] = []
    for condition in conditions:
        for conjunct in condition.flatten() if isinstance(condition, exp.And) else [condition]:
            while isinstance(conjunct, exp.Paren):
                conjunct = conjunct.this
            op = OPS.get(type(conjunct))
            left, right = conjunct.this, conjunct.expression
            conjuncts.append(conjunct)
            if op is None:
                raise SubscriptionError(f"subscription {name}: {conjunct.sql()[:60]!r} is not "
                                        "an equi-join or a constant comparison", at=conjunct)
            if isinstance(left, exp.Column) and isinstance(right, exp.Column):
                if op != "=":
                    raise SubscriptionError(f"subscription {name}: {conjunct.sql()[:60]!r}: "
                                            "joins are equalities", at=conjunct)
                joins.append((column(left), column(right)))
                continue
            if isinstance(right, exp.Column):
                left, right, op = right, left, FLIP[op]
            if not isinstance(left, exp.Column):
                raise SubscriptionError(f"subscription {name}: {conjunct.sql()[:60]!r} compares "
                                        "no column", at=conjunct)
            at = column(left)
            predicates.append(Predicate(at, op, _constant(name, right,
                                                          types[atoms[at[0]]][at[1]])))
    outputs: list[tuple[str, Column]] = []
    for e in tree.expressions:
        target = e.unalias() if isinstance(e, exp.Alias) else e
        if not isinstance(target, exp.Column) or isinstance(target.this, exp.Star):
            raise SubscriptionError(f"subscription {name}: output {e.sql()[:60]!r} is not a "
                                    "column", at=e)
        outputs.append((e.alias_or_name.lower(), column(target)))
    keys: dict[str, list[tuple[str, Column]]] = {}
    for alias, table in atoms.items():
        keys[alias] = [(f"__key_{alias}_{k}", (alias, k)) for k in schema[table][1]]
        outputs += keys[alias]
    names = [n for n, _ in outputs]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        twice = [e for e in tree.expressions if e.alias_or_name.lower() == dup]
        raise SubscriptionError(f"subscription {name}: output {dup} appears twice",
                                at=twice[-1] if twice else tree)
    sub = Subscription(name, sql, atoms, outputs, joins, predicates, keys,
                       conjuncts=conjuncts)
    for k, cls in enumerate(_classes(joins)):
        for c in cls:
            sub._class[c] = k
    sub.check_types(schema)
    return sub


#: how clauses the subscription language leaves out are spelled in SQL
_CLAUSES = {"windows": "WINDOW", "laterals": "LATERAL", "sample": "USING SAMPLE",
            "with_": "WITH", "group": "GROUP BY", "order": "ORDER BY"}


def _node(arg: object) -> exp.Expression | None:
    """The expression of a clause's argument (DISTINCT is a flag, a boolean)."""
    return arg if isinstance(arg, exp.Expression) else None


def _constant(name: str, node: exp.Expression, typ: SqlType) -> object:
    """The constant ``node`` as the engine compares it with a column of type ``typ``
    (``ExpressionCompiler._compare``): text against a DATE is a date, a number against a
    DOUBLE a float; other numbers keep their exact value (a decimal literal is a Decimal,
    never rounded to a double)."""
    negative = isinstance(node, exp.Neg)
    if negative:
        node = node.this
    if isinstance(node, exp.Literal):
        if node.is_string:
            if negative:
                raise SubscriptionError(f"subscription {name}: -{node.sql()}", at=node)
            if typ.kind != "DATE":
                return node.this
            try:
                return coerce_value(node.this, DATE)
            except ValueError:
                raise SubscriptionError(f"subscription {name}: {node.sql()} is not a DATE",
                                        at=node) from None
        text = node.this
        if any(ch in text for ch in "eE"):
            value: object = float(text)
        elif "." in text:
            value = Decimal(text)
        else:
            value = int(text)
        if typ.kind == "DOUBLE":
            value = float(value)
        if value in (math.inf, -math.inf):
            raise SubscriptionError(f"subscription {name}: {text} is out of range", at=node)
        return -value if negative else value
    if isinstance(node, exp.Boolean) and not negative:
        return node.this
    if isinstance(node, exp.Null):
        raise SubscriptionError(f"subscription {name}: a comparison with NULL is never "
                                "true; compare with a constant", at=node)
    if isinstance(node, exp.Placeholder):
        raise SubscriptionError(f"subscription {name}: a subscription takes no parameters "
                                f"({node.sql()}); write the constant", at=node)
    raise SubscriptionError(f"subscription {name}: {node.sql()[:60]!r} is not a constant",
                            at=node)


def _classes(joins: list[tuple[Column, Column]]) -> list[set[Column]]:
    parent: dict[Column, Column] = {}

    def find(c: Column) -> Column:
        while parent.setdefault(c, c) != c:
            c = parent[c]
        return c

    for a, b in joins:
        parent[find(a)] = find(b)
    groups: dict[Column, set[Column]] = {}
    for c in list(parent):
        groups.setdefault(find(c), set()).add(c)
    return list(groups.values())


def implies(have: list[Predicate], want: Predicate) -> bool:
    """Whether the conjunction ``have`` (on one column) implies ``want``."""
    def comparable(a: object, b: object) -> bool:
        """Both numbers (compared exactly), or both of one other kind."""
        return _number(a) == _number(b) and (_number(a) or type(a) is type(b))

    for p in have:
        if not comparable(p.value, want.value):
            continue
        v, w = p.value, want.value
        if p.op == "=":
            if {"=": v == w, "<": v < w, "<=": v <= w, ">": v > w, ">=": v >= w}[want.op]:
                return True
        elif want.op in ("<", "<=") and p.op in ("<", "<="):
            if v < w or (v == w and (want.op == "<=" or p.op == "<")):
                return True
        elif want.op in (">", ">=") and p.op in (">", ">="):
            if v > w or (v == w and (want.op == ">=" or p.op == ">")):
                return True
    return False


def _number(value: object) -> bool:
    return isinstance(value, (int, float, Decimal)) and not isinstance(value, bool)


def _label_value(value: object) -> str:
    """An equality constant as a label: equal numbers (``1``, ``1.0``, ``1.00``) alike."""
    if _number(value):
        exact = Decimal(value)
        return str(exact.to_integral_value()) if exact == exact.to_integral_value() \
            else str(exact.normalize())
    return repr(value)


def labels(s: Subscription, implied: bool = False) -> frozenset[str]:
    """The labels of Corollary 4.1 for relational subscriptions: tables, equality constants
    and constrained columns, so that a view embeds into a query only if the view's labels
    are a subset of the query's ``implied`` labels (those of every column the query's joins
    make equal to a constrained one): the set-trie prefilter then loses no embedding."""
    out = {f"T:{t}" for t in s.atoms.values()}
    for p in s.predicates:
        for alias, col in s.members(p.column) if implied else [p.column]:
            column = f"{s.atoms[alias]}.{col}"
            out.add(f"C:{column}")
            if p.op == "=":
                out.add(f"E:{column}={_label_value(p.value)}")
    return frozenset(out)


Mapping_ = dict[str, str]  # view alias -> query alias


def embeddings(view: Subscription, query: Subscription) -> list[Mapping_]:
    """Every mapping of ``view``'s atoms to ``query``'s atoms over the same tables under
    which ``query`` implies each of ``view``'s joins and predicates (D.12)."""
    choices = [[qa for qa, qt in query.atoms.items() if qt == vt]
               for vt in view.atoms.values()]
    out = []
    for image in itertools.product(*choices):
        phi = dict(zip(view.atoms, image, strict=True))
        if all(query.implies_join((phi[a], c), (phi[b], d))
               for (a, c), (b, d) in view.joins) and all(
                implies(query.interval((phi[p.column[0]], p.column[1])),
                        Predicate((phi[p.column[0]], p.column[1]), p.op, p.value))
                for p in view.predicates):
            out.append(phi)
    return out


Attribute = tuple  # ("key", alias) | ("col", alias, column) | ("pred", i) | ("join", i, side)


def attributes(query: Subscription) -> set[Attribute]:
    """What a rewriting of ``query`` must supply: each atom's key, each output column, and
    each predicate and each side of each join (enforced by a view, or its column output
    so that the rewriting can apply it)."""
    out: set[Attribute] = {("key", a) for a in query.atoms}
    out |= {("col", *c) for _, c in query.outputs if not _.startswith("__key_")}
    out |= {("pred", i) for i in range(len(query.predicates))}
    out |= {("join", i, side) for i in range(len(query.joins)) for side in (0, 1)}
    return out


def covers(view: Subscription, query: Subscription, phi: Mapping_) -> set[Attribute]:
    """The attributes of ``query`` that ``view`` supplies under the embedding ``phi``.

    A join of ``query`` is supplied exactly: ``view`` joins those very columns, or outputs
    the side's column, so the rewriting applies it.  Every join then holds in the
    rewriting's result, so an output or a predicate may be supplied by any column the
    joins make equal to it."""
    image = {(phi[a], c) for _, (a, c) in view.outputs}

    def output(c: Column) -> bool:
        return any(query.same(c, d) for d in image)

    got: set[Attribute] = {("key", phi[a]) for a in view.atoms}
    got |= {("col", *c) for n, c in query.outputs if not n.startswith("__key_") and output(c)}
    enforced = [Predicate((phi[q.column[0]], q.column[1]), q.op, q.value)
                for q in view.predicates]
    for i, p in enumerate(query.predicates):
        if output(p.column) or implies(
                [e for e in enforced if query.same(e.column, p.column)], p):
            got.add(("pred", i))
    pairs = {((phi[x], c), (phi[y], d)) for (x, c), (y, d) in _view_pairs(view)}
    for i, (a, b) in enumerate(query.joins):
        joined = (a, b) in pairs
        for side, col in enumerate((a, b)):
            if joined or col in image:
                got.add(("join", i, side))
    return got


def _view_pairs(view: Subscription) -> list[tuple[Column, Column]]:
    """Every pair of columns ``view``'s joins make equal."""
    return [(c, d) for c in view._class for d in view._class
            if c != d and view.same(c, d)]
