"""SQL text in, sqlglot statements out: parsing, parameters and constant rows.

Engine-neutral: both engines parse with these functions, so the same SQL is accepted and
rejected with the same :class:`ParseError` (line and column) on each.  DuckDB's own parser
checks the syntax first (sqlglot alone is lenient); sqlglot then gives the tree every
other layer reads (docs/design.md, "Layers").
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal

import duckdb
import sqlglot
from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB

from .duckdb_scratch import error_position, parse_statements, quote, scratch
from .errors import EvaluationError, ParseError, SchemaError, UnsupportedError
from .expressions import (
    HUGEINT_DIGITS,
    ExpressionCompiler,
    Scope,
    _where,
    bound_parameter,
    cast_value,
    literal_value,
)
from .types import SqlType, format_value, is_unicode


class Dialect(DuckDB):
    """DuckDB's SQL as sqlglot reads it, except ``?::``: sqlglot's tokenizer takes it for
    one operator of other dialects, where DuckDB reads a parameter and a cast
    (``?::INTEGER``).  Every parse of users' SQL reads this dialect."""

    class Tokenizer(DuckDB.Tokenizer):
        KEYWORDS = {k: v for k, v in DuckDB.Tokenizer.KEYWORDS.items() if k != "?::"}


_MATERIALIZED = re.compile(r"\bMATERIALIZED\s+VIEW\b", re.IGNORECASE)
# a view's options (``WITH (provenance = 'why')``), which DuckDB's CREATE VIEW lacks
_VIEW_OPTIONS = re.compile(r"(\bVIEW\s+[^\s(]+)\s+WITH\s*\([^()]*\)", re.IGNORECASE)


def check_syntax(sql: str) -> None:
    """Reject what DuckDB's own parser rejects, with a position."""
    if sql in _ACCEPTED:
        return
    try:
        parse_statements(_VIEW_OPTIONS.sub(r"\1", _MATERIALIZED.sub("VIEW", sql)))
    except duckdb.ParserException as exc:
        text = str(exc)
        first = text.split("\n", 1)[0].replace("Parser Error: ", "")
        raise ParseError(f"cannot parse SQL: {first}", *error_position(text)) from None
    except duckdb.Error as exc:  # e.g. a column defined twice, caught while parsing
        raise _parse_time_error(str(exc).split("\n", 1)[0]) from None
    if len(_ACCEPTED) >= _ACCEPTED_MAX:  # the texts statements repeat (with parameters)
        _ACCEPTED.clear()
    _ACCEPTED.add(sql)


_DUPLICATE_COLUMN = re.compile(r'Column with name "(.*)" already exists')


def _parse_time_error(first: str) -> SchemaError | UnsupportedError:
    """An error DuckDB's parser raises for valid syntax, in upkeep's words where it has
    them (DuckDB's first line where not)."""
    duplicate = _DUPLICATE_COLUMN.search(first)
    if duplicate:
        return SchemaError(f"column {duplicate[1]!r} is declared twice (column names are "
                           "not case-sensitive)")
    if "Can only drop one object at a time" in first:
        return UnsupportedError("DROP of several tables or views in one statement: drop "
                                "them one at a time")
    return SchemaError(first)


_ACCEPTED: set[str] = set()  # SQL texts DuckDB's parser accepted
_ACCEPTED_MAX = 1024


# DuckDB binder errors that mean a type mismatch (not a construct DuckDB lacks, such as the
# mutual recursion upkeep maintains)
_TYPE_ERRORS = ("No function matches", "Cannot compare values", "Cannot mix values",
                "Could not choose a best candidate")


def check_types(query: exp.Expression, schema_of) -> None:
    """Bind a view's query as DuckDB would, over empty tables shaped like the relations it
    reads, and refuse the type mismatches DuckDB's binder refuses (``round('x')``,
    ``trim(1)``): every such view is rejected at definition, with DuckDB's words."""
    names = {t.name.lower() for t in query.find_all(exp.Table)}
    names -= {cte.alias_or_name.lower() for cte in query.find_all(exp.CTE)}
    specs = []
    for name in sorted(names):
        try:
            columns = schema_of(name)
        except SchemaError:
            return  # an unknown relation: the planner names it
        specs.append((name, ", ".join(f'{quote(c)} {"INTEGER" if t.kind == "NULL" else t.sql()}'
                                      for c, t in columns)))
    with scratch() as con:  # its TEMP tables are its own and go with it
        try:
            for name, spec in specs:
                con.execute(f"CREATE TEMP TABLE {quote(name)} ({spec})")
            con.execute("DESCRIBE " + query.sql(dialect="duckdb"))
        except duckdb.Error as exc:
            text = str(exc)
            if isinstance(exc, duckdb.BinderException) and any(e in text for e in _TYPE_ERRORS):
                first = text.split("\n", 1)[0].replace("Binder Error: ", "")
                raise SchemaError(f"{first} (as DuckDB binds "
                                  f"{query.sql(dialect='duckdb')[:80]})") from None


class _Quiet(logging.Filter):
    """Drops sqlglot's warnings on the threads inside :func:`quiet_sqlglot`: its "falling
    back to parsing as a Command" goes to stderr, where upkeep answers a statement it
    cannot run with an :class:`UnsupportedError` of its own (:func:`unsupported`)."""

    inside = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(self.inside, "on", False)


logging.getLogger("sqlglot").addFilter(_Quiet())


@contextmanager
def quiet_sqlglot() -> Iterator[None]:
    """sqlglot's warnings silenced on this thread while the block runs."""
    was = getattr(_Quiet.inside, "on", False)
    _Quiet.inside.on = True
    try:
        yield
    finally:
        _Quiet.inside.on = was


# what to use instead of a statement upkeep does not run, by its first keyword
_INSTEAD = {
    "EXPLAIN": "use db.explain(view) or `upkeep explain`",
    "BEGIN": "use `with db.transaction():` (a block that raises is rolled back)",
    "COMMIT": "a `with db.transaction():` block commits when it ends",
    "ROLLBACK": "a `with db.transaction():` block that raises is rolled back",
    "SHOW": "use db.tables() and db.views()",
    "DESCRIBE": "use cursor.description of a SELECT, or db.explain(view)",
    "PRAGMA": "upkeep's settings are arguments of upkeep.connect()",
    "SET": "upkeep's settings are arguments of upkeep.connect()",
}


def unsupported(stmt: exp.Expression, engine: str = "") -> UnsupportedError:
    """The error for a statement upkeep does not run: its keyword and what to use instead."""
    if isinstance(stmt, exp.Command):
        keyword = str(stmt.this).upper()
    else:
        keyword = {"Transaction": "BEGIN"}.get(type(stmt).__name__, type(stmt).__name__.upper())
    instead = _INSTEAD.get(keyword)
    where = f" on the {engine} engine" if engine else ""
    return UnsupportedError(f"{keyword} statements are not supported{where}"
                            + (f": {instead}" if instead else ""))


#: the functions whose first argument sqlglot reads as a unit keyword whatever it is
_UNIT_FIRST = ("date_trunc", "datetrunc", "date_diff", "datediff")
_UNIT_FUNCTION = re.compile(r"(?i)\b(?:date_?trunc|date_?diff)\s*\(")


def _refuse_computed_units(sql: str) -> None:
    """Refuse ``date_trunc(s, ts)`` / ``date_diff(s, a, b)`` whose unit is not a text
    literal (a column, an expression): sqlglot reads the column's name as a unit (``s``
    as seconds), which the view, its recomputation by DuckDB and an ad hoc query would
    all compute (found by a review); a bound parameter is a literal."""
    if not _UNIT_FUNCTION.search(sql):
        return
    try:
        tokens = sqlglot.tokenize(sql, read=Dialect)
    except sqlglot.errors.TokenError:
        return  # parse() names it
    kinds = sqlglot.tokens.TokenType
    for i, token in enumerate(tokens[:-2]):
        if (token.text.lower() in _UNIT_FIRST and tokens[i + 1].token_type == kinds.L_PAREN
                and tokens[i + 2].token_type not in (kinds.STRING, kinds.PLACEHOLDER,
                                                     kinds.PARAMETER)):
            arg = tokens[i + 2]
            raise UnsupportedError(f"{token.text}(..) with a unit that is not a text literal "
                                   f"({arg.text}, line {arg.line}, column {arg.col}): write "
                                   "the unit as text, e.g. date_trunc('hour', ts)")


def parse(sql: str) -> list[exp.Expression]:
    """The statements of ``sql`` (at least one), or a :class:`ParseError`."""
    if not isinstance(sql, str):
        raise ParseError(f"SQL must be a string, got {type(sql).__name__}")
    if not (sql.isascii() or is_unicode(sql)):
        bad = next(i for i, c in enumerate(sql) if not is_unicode(c))
        raise ParseError(f"SQL must be valid Unicode: a lone surrogate {sql[bad]!r} at "
                         f"character {bad}")
    check_syntax(sql)
    _refuse_computed_units(sql)
    if _GLUED_EXPONENT.search(sql) or _GLUED_PARAMETER.search(sql):
        sql = _unglue(sql)
    try:
        with quiet_sqlglot():
            # a comment after the last ``;`` is a statement of its own to sqlglot
            statements = [s for s in sqlglot.parse(sql, read=Dialect)
                          if s is not None and not isinstance(s, exp.Semicolon)]
    except sqlglot.errors.ParseError as exc:
        err = exc.errors[0] if exc.errors else {}
        raise ParseError(f"cannot parse SQL: {err.get('description', exc)}",
                         err.get("line"), err.get("col")) from None
    except sqlglot.errors.TokenError as exc:
        raise ParseError(f"cannot tokenize SQL: {exc}") from None
    except RecursionError:  # sqlglot's parser recurses per bracket
        raise ParseError("cannot parse SQL: brackets or expressions nested too deeply "
                         "(beyond Python's recursion limit)") from None
    if not statements:
        raise ParseError("empty SQL statement")
    for stmt in statements:
        _unqualify(stmt)
    return [_dml(s) if isinstance(s, (exp.Insert, exp.Update, exp.Delete)) else s
            for s in statements]


#: the statements of the texts parsed lately, and the placeholder order of a text of one
#: statement once it was bound: an application runs one text again and again, with new
#: parameters.  Texts up to PARSED_LONGEST characters (a long one, a bulk INSERT of
#: literal rows, is not run again; its tree is big).
_PARSED: dict[str, list] = {}
_PARSED_MAX = 256
PARSED_LONGEST = 4_096


def _keep(sql: str, statements: tuple[exp.Expression, ...]) -> None:
    """Keep ``sql``'s statements (the cache emptied when full: texts that repeat come
    back at once)."""
    if len(_PARSED) >= _PARSED_MAX:
        _PARSED.clear()
    _PARSED[sql] = [statements, None, None]


def parsed_once(sql: str) -> tuple[exp.Expression, ...]:
    """:func:`parse` of ``sql``, made once while the text repeats: shared trees, which the
    caller copies before changing them or handing them on (parsing is about 140 us of a
    keyed UPDATE, a copy about 30 us)."""
    if type(sql) is not str:  # (a list is no key: parse says what is wrong)
        return tuple(parse(sql))
    got = _PARSED.get(sql)
    if got is not None:
        return got[0]
    statements = tuple(parse(sql))
    if len(sql) <= PARSED_LONGEST:
        _keep(sql, statements)
    return statements


def parse_repeated(sql: str) -> list[exp.Expression]:
    """:func:`parse`, the caller's trees: copies of the ones kept for a text parsed lately.
    A text is kept from its second parse on (DuckDB's syntax check remembers the texts it
    passed), so a text run once pays no copy."""
    if type(sql) is not str:
        return parse(sql)
    got = _PARSED.get(sql)
    if got is not None:
        return [stmt.copy() for stmt in got[0]]
    again = sql in _ACCEPTED
    statements = parse(sql)
    if again and len(sql) <= PARSED_LONGEST:
        _keep(sql, tuple(stmt.copy() for stmt in statements))
    return statements


def without_places(tree: exp.Expression) -> exp.Expression:
    """``tree``, changed in place, without the token places sqlglot keeps on its nodes
    (``_meta``; sqlglot's own attribute, pinned in pyproject.toml): a copy of it then
    skips deep-copying each node's place (a keyed UPDATE's copy 33 -> 14 us).  Errors name
    those places, so a statement made from such a tree that raises is run again from one
    with them (:meth:`upkeep.engine.Engine.execute`)."""
    for node in tree.walk():
        if node._meta:
            node._meta.clear()
    return tree


def placeless_once(sql: str, statements: tuple[exp.Expression, ...]
                   ) -> tuple[exp.Expression, ...]:
    """``statements``, the kept ones of ``sql`` (:func:`parsed_once`), without token
    places (:func:`without_places`), made once while the text is kept: what parameters
    are bound into; ``statements`` themselves when the text is not kept."""
    got = _PARSED.get(sql)
    if got is None or got[0] is not statements:
        return statements
    if got[2] is None:
        got[2] = tuple(without_places(stmt.copy()) for stmt in statements)
    return got[2]


def kept_placeholder_order(sql: str, stmt: exp.Expression) -> list[int]:
    """:func:`placeholder_order` of ``stmt``, the one statement of ``sql``
    (:func:`parsed_once`), found once while the text is kept."""
    got = _PARSED.get(sql)
    if got is None:
        return placeholder_order(stmt)
    if got[1] is None:
        got[1] = placeholder_order(stmt)
    return got[1]


#: a number in exponent notation followed by ``+`` / ``-`` with no space (``1e3+1``),
#: which sqlglot's tokenizer reads as one number literal (or as ``1e3-1`` then ``e2``)
_GLUED_EXPONENT = re.compile(r"\d[eE][+-]?\d+[+-]")
#: a ``$n`` parameter followed by no space (``$1,$2``), which sqlglot's tokenizer reads as
#: the start of a ``$tag$`` string
_GLUED_PARAMETER = re.compile(r"\$\d+[^\s\d]")
#: what a space may not go into (quoted strings, ``E'..'`` and ``$tag$..$tag$`` ones
#: included, quoted names, comments), and such numbers
_QUOTED_OR_GLUED = re.compile(
    r"\b[eE]'(?:[^'\\]|\\.|'')*'|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|\$(\w*)\$.*?\$\1\$"
    r"|--[^\n]*|/\*.*?\*/|(\d[eE][+-]?\d+)(?=[+-])|(\$\d+)(?=[^\s\d])",
    re.DOTALL)


def _unglue(sql: str) -> str:
    """``sql`` with a space after each number in exponent notation that an operator
    follows (``1e3+1`` is 1001.0 in DuckDB) and after each ``$n`` parameter that a
    character other than a space follows, outside quotes and comments."""
    return _QUOTED_OR_GLUED.sub(lambda m: m[0] + " " if m[2] or m[3] else m[0], sql)


def _unqualify(stmt: exp.Expression) -> None:
    """Tables and views live in DuckDB's default schema ``main``: ``main.t`` names ``t``;
    any other schema or catalog is a :class:`SchemaError` naming it (read as ``t``, as it
    was, ``DROP TABLE nosuch.t`` dropped ``t``)."""
    for table in stmt.find_all(exp.Table):
        schema, catalog = table.args.get("db"), table.args.get("catalog")
        if schema is None and catalog is None:
            continue
        if catalog is None and schema.name.lower() == "main":
            table.set("db", None)
            continue
        parts = [part for part in (catalog, schema) if part is not None]
        qualifier = ".".join(part.name for part in parts)
        where = located(parts[0]) or located(table)
        raise SchemaError(f"schema {qualifier} does not exist{where}: tables and "
                          "views live in schema main")


# clauses of DuckDB's INSERT / UPDATE / DELETE that neither engine runs: refused whole,
# before anything of the batch runs (silently dropped, they would change the wrong rows)
_DML_CLAUSES = {
    exp.Insert: {"returning": "RETURNING", "conflict": "ON CONFLICT",
                 "alternative": "INSERT OR ...", "default": "INSERT ... DEFAULT VALUES",
                 "by_name": "INSERT ... BY NAME (name the columns: INSERT INTO t (a, b) ...)",
                 "overwrite": "INSERT OVERWRITE"},
    exp.Update: {"from_": "UPDATE ... FROM", "joins": "UPDATE ... JOIN",
                 "returning": "RETURNING", "order": "UPDATE ... ORDER BY",
                 "limit": "UPDATE ... LIMIT"},
    exp.Delete: {"using": "DELETE ... USING", "returning": "RETURNING",
                 "order": "DELETE ... ORDER BY", "limit": "DELETE ... LIMIT"},
}


def located(node: exp.Expression) -> str:
    """`` (line L, column C)`` of the first token under ``node`` that sqlglot placed."""
    for child in node.walk():
        where = _where(child)
        if where:
            return where
    return ""


def _dml(stmt: exp.Insert | exp.Update | exp.Delete) -> exp.Expression:
    """An INSERT / UPDATE / DELETE as both engines run it: a clause they do not run is a
    :class:`UnsupportedError` naming it; ``WITH ... INSERT ... SELECT`` gives its CTEs to
    the query; an alias of an UPDATE's or DELETE's table is replaced by the table's name
    (kept where a subquery may shadow it: DuckDB evaluates those statements);
    a column assigned twice is a :class:`SchemaError` (as in DuckDB)."""
    for arg, what in _DML_CLAUSES[type(stmt)].items():
        value = stmt.args.get(arg)
        if value:
            if arg == "alternative":
                what = f"INSERT OR {value}"
            node = value[0] if isinstance(value, list) else value
            where = located(node) if isinstance(node, exp.Expression) else ""
            if not where:  # a flag (OR REPLACE, BY NAME) or a clause of keywords only
                where = located(stmt).replace(" (", " (in the statement at ", 1)
            raise UnsupportedError(f"{what} is not supported{where}")
    if isinstance(stmt, exp.Insert):
        if isinstance(stmt.expression, exp.Values):
            for row in stmt.expression.expressions:
                for value in row.expressions if isinstance(row, exp.Tuple) else [row]:
                    if _is_default(value):  # tables hold no DEFAULT: the column's NULL
                        value.replace(exp.Null())
        ctes = stmt.args.get("with_")
        if ctes is not None:
            query = stmt.expression
            if not isinstance(query, exp.Query) or query.args.get("with_") is not None:
                raise UnsupportedError("WITH before an INSERT whose rows are not a query")
            stmt.set("with_", None)
            query.set("with_", ctes)
        return stmt
    target = stmt.this
    alias = target.alias if isinstance(target, exp.Table) else ""
    if isinstance(target, exp.Table) and not reads_subquery(stmt):
        _check_qualifiers(stmt, target)
    if alias and not reads_subquery(stmt):  # with subqueries DuckDB reads the alias's scopes
        for column in stmt.find_all(exp.Column):
            if column.table.lower() == alias.lower():
                column.set("table", exp.to_identifier(target.name))
        target.set("alias", None)
    if isinstance(stmt, exp.Update):
        stmt.set("expressions", [one for assignment in stmt.expressions
                                 for one in _assignments(assignment)])
        assigned: set[str] = set()
        for assignment in stmt.expressions:
            name = assignment.this.name.lower()
            if name in assigned:
                raise SchemaError(f"column {name} is assigned twice{located(assignment)}")
            assigned.add(name)
    return stmt


def _is_default(value: exp.Expression) -> bool:
    """Whether ``value`` is the keyword DEFAULT (sqlglot reads it as a Var in VALUES, as an
    unquoted column in SET)."""
    if isinstance(value, exp.Var):
        return value.name.upper() == "DEFAULT"
    return (isinstance(value, exp.Column) and not value.table
            and not value.this.quoted and value.name.upper() == "DEFAULT")


def _assignments(assignment: exp.Expression) -> list[exp.Expression]:
    """An UPDATE's ``SET`` item as one assignment per column: ``(a, b) = (x, y)`` is
    ``a = x, b = y`` and ``(a) = (x)`` is ``a = x``, as DuckDB reads them; DEFAULT is NULL
    (tables hold no DEFAULT)."""
    target, value = assignment.this, assignment.expression
    if isinstance(target, exp.Paren):
        target = target.this
        value = value.this if isinstance(value, exp.Paren) else value
    if isinstance(target, exp.Tuple):
        if not isinstance(value, exp.Tuple) or len(value.expressions) != len(target.expressions):
            raise SchemaError(f"SET {target.sql()} needs a list of {len(target.expressions)} "
                              f"values, not {value.sql()}{located(assignment)}")
        pairs = list(zip(target.expressions, value.expressions, strict=True))
    else:
        pairs = [(target, value)]
    return [exp.EQ(this=column, expression=exp.Null() if _is_default(v) else v)
            for column, v in pairs]


def _check_qualifiers(stmt: exp.Update | exp.Delete, target: exp.Table) -> None:
    """A column qualified by a table the statement does not name is a :class:`SchemaError`,
    as DuckDB binds it: under an alias only the alias names the table (``DELETE FROM t AS z
    WHERE t.id = 1`` is refused), and a schema part must be the table's own."""
    alias = target.alias.lower()
    schema = (target.db or "main").lower()
    for column in stmt.find_all(exp.Column):
        if not column.table:
            continue
        db = column.args.get("db")
        if (column.table.lower() != (alias or target.name.lower())
                or (db is not None and (alias or db.name.lower() != schema))):
            named = ".".join(p.name for p in column.parts[:-1])
            raise SchemaError(f"unknown table {named} in {column.sql()}{located(column)}: "
                              f"the statement's table is {alias or target.name}")


def parse_one(sql: str) -> exp.Expression:
    """The one statement of ``sql``."""
    statements = parse(sql)
    if len(statements) != 1:
        raise ParseError("expected exactly one query")
    return statements[0]


def names_cte(table: exp.Table) -> bool:
    """Whether ``table`` names a CTE in scope where it stands, as DuckDB binds it: a WITH's
    CTEs are seen by its query and by the CTEs after them, a CTE's own name inside its
    body only under WITH RECURSIVE (``WITH t AS (SELECT .. FROM t)`` reads the table t)."""
    if table.args.get("db") is not None or not isinstance(table.this, exp.Identifier):
        return False
    name = table.name.lower()
    child, node = table, table.parent
    while node is not None:
        if isinstance(node, exp.With):  # come up from the body of one of its CTEs
            ctes = list(node.expressions)
            at = next((i for i, c in enumerate(ctes) if c is child), len(ctes))
            seen = ctes[:at + 1] if node.args.get("recursive") else ctes[:at]
            if any(c.alias_or_name.lower() == name for c in seen):
                return True
        else:
            with_ = node.args.get("with") or node.args.get("with_")
            if isinstance(with_, exp.With) and child is not with_ and any(
                    c.alias_or_name.lower() == name for c in with_.expressions):
                return True
        child, node = node, node.parent
    return False


def relations_read(query: exp.Expression) -> set[str]:
    """The tables and views ``query`` reads (not its CTEs, nor table functions)."""
    return {t.name.lower() for t in query.find_all(exp.Table)
            if isinstance(t.this, exp.Identifier) and not names_cte(t)}


def single_table_select(stmt: exp.Expression) -> tuple[exp.Table, exp.Where] | None:
    """``SELECT ... FROM t [AS z] WHERE ...`` with no joins, subqueries or CTEs: its table
    and WHERE.  Rows that fail the WHERE are seen by nothing else in such a query,
    so an engine may hand DuckDB only the rows that can pass it."""
    if not isinstance(stmt, exp.Select) or stmt.args.get("joins") or stmt.args.get("with"):
        return None
    where = stmt.args.get("where")
    source = _plain_table(stmt)
    if where is None or source is None:
        return None
    if stmt.args.get("sample") or any(s is not stmt for s in stmt.find_all(exp.Select)):
        return None
    return source, where


def _plain_table(stmt: exp.Select) -> exp.Table | None:
    """The table ``stmt`` reads FROM when it reads one as it is: a named relation, not a
    table function (``range(3)``), a sample (drawn from the whole table, before any
    WHERE or LIMIT) or an alias renaming its columns (``t AS q(v, k)``)."""
    from_ = stmt.args.get("from_") or stmt.args.get("from")
    source = from_.this if from_ is not None else None
    if not isinstance(source, exp.Table) or not isinstance(source.this, exp.Identifier):
        return None
    alias = source.args.get("alias")
    if source.args.get("sample") or (alias is not None and alias.columns):
        return None
    return source


def reads_subquery(stmt: exp.Delete | exp.Update) -> bool:
    """Whether a DELETE's or UPDATE's WHERE or SET holds a subquery (``IN (SELECT ..)``,
    ``EXISTS``, a scalar subquery)."""
    parts = [stmt.args.get("where"), *stmt.expressions]
    return any(p is not None and p.find(exp.Select) is not None for p in parts)


def is_query(stmt: exp.Expression) -> bool:
    """A statement that returns rows (SELECT and set operations)."""
    return isinstance(stmt, (exp.Select, exp.Union, exp.Intersect, exp.Except, exp.Subquery))


def constant(node: exp.Expression) -> object:
    """The value of a constant expression in VALUES (fast paths, else compiled and run)."""
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        text = node.this
        if text.isdigit() and len(text) <= HUGEINT_DIGITS:  # (else beyond: literal_value)
            return int(text)
        return literal_value(node)[0]  # a DECIMAL of up to 38 digits, else a DOUBLE
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        value = constant(node.this)  # a Decimal's digits all kept (not the context's 28)
        return value.copy_negate() if isinstance(value, Decimal) and value else -value
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    bound = bound_parameter(node)  # a float, decimal, date or datetime parameter
    if bound is not None:
        return bound[0]
    if any(True for _ in node.find_all(exp.Column)):
        raise SchemaError(f"VALUES may not reference columns: {node.sql()}")
    return ExpressionCompiler(Scope([])).compile(node).fn(())


def literal(value: object) -> exp.Expression:
    """A bound parameter's value as a SQL literal, marked as a parameter (:func:`assigned`)."""
    node = _parameter_node(value)
    node.meta[_PARAMETER] = True
    return node


#: the mark :func:`literal` leaves on a bound parameter's node
_PARAMETER = "upkeep_parameter"


def is_parameter(node: exp.Expression) -> bool:
    """Whether ``node`` is a bound parameter's value (:func:`literal`)."""
    return bool(node.meta.get(_PARAMETER))


def assigned(value: object, typ: SqlType, parameter: bool) -> object:
    """The value an INSERT's VALUES item or an UPDATE's SET expression gives a column of
    type ``typ``: cast as DuckDB's INSERT and UPDATE cast it (``'1'`` and ``2.5`` into an
    INTEGER are 1 and 3, ``1`` into a VARCHAR is ``'1'``; an EvaluationError where the
    cast fails), except a bound ``parameter``'s (:func:`is_parameter`), a Python value,
    which is checked as ``db.insert`` checks it (``'7'`` is no number: docs/sql.md)."""
    if value is None or parameter:
        return value
    if type(value) is (int if typ.is_integer else _STORED_AS.get(typ.kind)):
        return value  # already the column's value (its range is checked when stored)
    return cast_value(value, typ)


#: the Python type a column of each kind (but integers and DECIMAL) stores its values as
_STORED_AS = {"DOUBLE": float, "VARCHAR": str, "BOOLEAN": bool, "DATE": dt.date,
              "TIMESTAMP": dt.datetime}


def _parameter_node(value: object) -> exp.Expression:
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        value = value.item()  # a numpy scalar (np.int64, np.float64): its Python value,
        # as db.insert takes it (a pandas frame's rows hold them)
    if value is None:
        return exp.Null()
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, Decimal) and not value.is_finite():
        if value.is_snan():
            raise SchemaError(f"parameter {value!r}: not a number a column can hold")
        value = float(value)  # NaN and infinities bind as floating point, as in DuckDB
    if isinstance(value, float):  # a DOUBLE, as DuckDB binds it (0.1 is not DECIMAL 0.1)
        return exp.cast(exp.Literal.string(repr(value)), "DOUBLE")
    if isinstance(value, Decimal):
        return _decimal_parameter(value)
    if isinstance(value, int):
        if not -2**127 <= value < 2**127:
            raise SchemaError(f"parameter {format_value(value)}: outside HUGEINT's range (-2**127 to "
                              "2**127 - 1), the widest integer upkeep holds")
        if value < 0:
            return exp.Neg(this=exp.Literal.number(str(-value)))
        return exp.Literal.number(str(value))
    if isinstance(value, str):
        if not (value.isascii() or is_unicode(value)):
            raise SchemaError(f"parameter {value!r}: VARCHAR must be valid Unicode (it "
                              "holds a lone surrogate)")
        return exp.Literal.string(value)
    if type(value).__name__ == "NaTType":  # pandas' missing time: NULL, as DuckDB binds it
        return exp.Null()
    if isinstance(value, dt.datetime):  # before date: a datetime is a date too
        if value.utcoffset() is not None:
            raise SchemaError(f"parameter {value!r}: a datetime with a time zone (give it "
                              "in UTC without one)")
        return exp.cast(exp.Literal.string(value.isoformat(sep=" ")), "TIMESTAMP")
    if isinstance(value, dt.date):
        return exp.cast(exp.Literal.string(value.isoformat()), "DATE")
    raise SchemaError(f"unsupported parameter value {value!r}")


def _decimal_parameter(value: Decimal) -> exp.Expression:
    """A finite Decimal typed as DuckDB types one: DECIMAL(width, scale) of its own digits
    (``Decimal('1.50')`` is DECIMAL(3,2), ``Decimal('1E+2')`` DECIMAL(3,0)), a DOUBLE
    beyond 38 digits."""
    _, digits, exponent = value.as_tuple()
    scale = max(-exponent, 0)
    width = len(digits) + max(exponent, 0)
    if scale > width:  # 0.001: DECIMAL(4,3), as DuckDB makes it
        width = scale + 1
    if width > 38:
        return exp.cast(exp.Literal.string(repr(float(value))), "DOUBLE")
    return exp.cast(exp.Literal.string(format(value, "f")), f"DECIMAL({width},{scale})")


def placeholder_order(stmt: exp.Expression) -> list[int]:
    """For each placeholder of ``stmt`` in the tree's depth-first order, the place of its
    value among the parameters: a ``$n``'s is ``n - 1`` (it may appear more than once), a
    ``?``'s is its place in the statement's text, where DuckDB numbers them: the tree holds
    an INSERT's or a SELECT's CTEs after its query, the text before it (``WITH x AS (SELECT
    ? AS v) INSERT INTO t SELECT v, ? FROM x`` bound its values the other way round).
    Named parameters (``$name``, ``:name``) and ``$n`` mixed with ``?`` are a
    :class:`SchemaError`: parameters are a sequence."""
    nodes = [n for n in stmt.dfs() if isinstance(n, exp.Placeholder)]
    names = [n.name for n in nodes if n.this]
    if names:
        named = next((name for name in names if not name.isdigit() or int(name) < 1), None)
        if named is not None:
            raise SchemaError(f"parameter ${named}: parameters are a sequence, bound to ? "
                              "or to $1, $2, ... by number, not by name")
        if len(names) < len(nodes):
            raise SchemaError("a statement's parameters are all ? or all numbered ($1, "
                              "$2, ...), not both")
        return [int(n.name) - 1 for n in nodes]
    if stmt.find(exp.With) is None:  # the tree's depth-first order is the text's
        return list(range(len(nodes)))
    labelled = stmt.copy()
    nodes = [n for n in labelled.dfs() if isinstance(n, exp.Placeholder)]
    for i, node in enumerate(nodes):
        node.set("this", f"upkeep_p{i:06d}")
    text = labelled.sql(dialect="duckdb")
    positions = [text.find(f"$upkeep_p{i:06d}") for i in range(len(nodes))]
    if -1 in positions:  # not written out once each: keep the tree's order
        return list(range(len(nodes)))
    by_text = sorted(range(len(nodes)), key=positions.__getitem__)
    order = [0] * len(nodes)
    for place, i in enumerate(by_text):
        order[i] = place
    return order


def bind_parameters(stmt: exp.Expression, params: list, order: list[int] | None = None,
                    make: Callable[[object], exp.Expression] | None = None
                    ) -> exp.Expression:
    """``stmt`` with its placeholders replaced by ``params`` (``order``:
    :func:`placeholder_order` of ``stmt``, when it is bound many times); every parameter
    must be used, as DuckDB requires.  ``make``: a value's node, a bound parameter's
    :func:`literal` by default (a statement shape binds its text's own literals,
    :mod:`upkeep.statement_shapes`)."""
    if order is None:
        order = placeholder_order(stmt)
    needed = max(order, default=-1) + 1
    if needed != len(params):
        raise SchemaError(f"statement has {needed} parameters, got {len(params)}")
    unused = sorted(set(range(needed)).difference(order))
    if unused:
        raise SchemaError(f"statement has no parameter ${unused[0] + 1} of the {needed} "
                          "given: every parameter must be used, as in DuckDB")
    if make is None:
        make = literal
    stmt = stmt.copy()
    nodes = [n for n in stmt.dfs() if isinstance(n, exp.Placeholder)]
    for node, place in zip(nodes, order, strict=True):  # in place: the copy is ours
        node.replace(make(params[place]))
    return stmt


def insert_template(stmt: exp.Expression, columns: list[tuple[str, SqlType]]
                    ) -> Callable[[list, int], tuple] | None:
    """For ``INSERT INTO t [(cols)] VALUES (..)`` whose values are ``?`` placeholders
    and literals: a function of one parameter tuple (and its place) to the full row the statement
    inserts, as :func:`insert_rows` builds it (columns not named are NULL, literals cast
    to their column's type once, parameters left for ``db.insert`` to check), so
    executemany inserts all its rows in one call.  None where the statement is any other
    (an expression, a function such as ``random()`` that differs per row, a column named
    wrongly: :func:`insert_rows` says what is wrong)."""
    if not isinstance(stmt, exp.Insert) or not isinstance(stmt.expression, exp.Values):
        return None
    if len(stmt.expression.expressions) != 1:
        return None
    tup = stmt.expression.expressions[0]
    items = tup.expressions if isinstance(tup, exp.Tuple) else [tup]
    try:
        positions = _named_positions(stmt, [n for n, _ in columns]) or range(len(columns))
    except SchemaError:
        return None
    if len(positions) != len(items):
        return None
    slots: list[tuple[int | None, object]] = [(None, None)] * len(columns)
    parameters = 0
    for column, item in zip(positions, items, strict=True):
        if isinstance(item, exp.Placeholder) and not item.this:
            slots[column] = (parameters, None)
            parameters += 1
            continue
        if not isinstance(item, (exp.Literal, exp.Null, exp.Boolean)) and not (
                isinstance(item, exp.Neg) and isinstance(item.this, exp.Literal)):
            return None
        try:
            slots[column] = (None, assigned(constant(item), columns[column][1], False))
        except EvaluationError:
            return None

    def row(params: list, i: int) -> tuple:
        if len(params) != parameters:
            raise SchemaError(f"parameter tuple {i}: the statement has {parameters} "
                              f"parameters, got {len(params)}", params, i)
        return tuple(params[k] if k is not None else value for k, value in slots)
    return row


def simple_scan(stmt: exp.Expression) -> tuple[str, int | None] | None:
    """``SELECT * FROM rel [LIMIT n]``: served directly from the relation (enumeration)."""
    if not isinstance(stmt, exp.Select):
        return None
    star = stmt.expressions[0] if len(stmt.expressions) == 1 else None
    if not isinstance(star, exp.Star) or any(star.args.values()):  # * EXCLUDE (..) etc.
        return None
    source = _plain_table(stmt)
    if source is None:
        return None
    for key, value in stmt.args.items():
        if key in ("expressions", "from_", "from", "limit") or not value:
            continue
        return None
    limit = stmt.args.get("limit")
    n = None
    if limit is not None:
        lit = limit.expression
        if not (isinstance(lit, exp.Literal) and lit.this.isdigit()) or any(
                limit.args.get(key) for key in limit.args if key != "expression"):
            return None  # LIMIT 5% and the like
        n = int(lit.this)
    return source.name.lower(), n


def insert_target(stmt: exp.Insert) -> str:
    """The table an INSERT writes."""
    target = stmt.this
    return (target.this.name if isinstance(target, exp.Schema) else target.name).lower()


def _named_positions(stmt: exp.Insert, column_names: list[str]) -> list[int]:
    """The positions of the columns an INSERT's column list names, in its order (empty
    without a list); a SchemaError for a column the table lacks or one named twice."""
    target = stmt.this
    positions: list[int] = []
    for ident in target.expressions if isinstance(target, exp.Schema) else ():
        name = ident.name.lower()
        if name not in column_names:
            raise SchemaError(f"table {insert_target(stmt)} has no column {name}")
        if column_names.index(name) in positions:
            raise SchemaError(f"column {name} is named twice in the INSERT's column list")
        positions.append(column_names.index(name))
    return positions


def insert_rows(stmt: exp.Insert, columns: list[tuple[str, SqlType]],
                select: Callable[[exp.Expression], list[tuple]]) -> list[tuple]:
    """The full rows an INSERT adds: its VALUES, or ``select`` of its query, placed into
    the table's ``columns`` (columns it does not name are NULL), each value cast to its
    column's type as DuckDB's INSERT casts it (``'1'`` and ``2.5`` into an INTEGER are 1
    and 3, ``1`` into a VARCHAR is ``'1'``; text that is no number is a SchemaError naming
    the row and column)."""
    column_names = [n for n, _ in columns]
    positions = _named_positions(stmt, column_names)
    source = stmt.expression
    if isinstance(source, exp.Values):
        tuples = [tup.expressions if isinstance(tup, exp.Tuple) else [tup]
                  for tup in source.expressions]
        # a row with a subquery is DuckDB's to evaluate, over the contents before the INSERT
        rows = [tuple(select(exp.select(*(v.copy() for v in tup)))[0])
                if any(v.find(exp.Select) for v in tup) else tuple(constant(v) for v in tup)
                for tup in tuples]
        parameters = [[is_parameter(v) for v in tup] for tup in tuples]
    else:
        rows = select(source)
        parameters = None  # a query's values are SQL values: cast
    positions = positions or list(range(len(columns)))
    full = []
    for i, r in enumerate(rows):
        if len(r) != len(positions):
            raise SchemaError(f"row {i} has {len(r)} values for {len(positions)} columns", r, i)
        given = parameters[i] if parameters is not None else [False] * len(r)
        out: list[object] = [None] * len(column_names)
        for p, v, parameter in zip(positions, r, given, strict=True):
            try:
                out[p] = assigned(v, columns[p][1], parameter)
            except EvaluationError as exc:  # a value of the wrong type: the row's fault
                raise SchemaError(f"row {i} for table {insert_target(stmt)}, column "
                                  f"{column_names[p]}: {exc}", r, i) from None
        full.append(tuple(out))
    return full
