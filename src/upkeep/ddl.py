"""``CREATE TABLE`` statements turned into :class:`~upkeep.table.Table` definitions.

Engine-neutral: both engines declare tables through :func:`table_from_create`, so columns,
NOT NULL, PRIMARY KEY and ``WITH (ttl_seconds = N)`` mean the same on each.
"""

from __future__ import annotations

from sqlglot import exp

from .errors import SchemaError, UnsupportedError
from .expiry import Expiry
from .table import Table
from .types import TYPE_NAMES, SqlType, type_from_sqlglot

# what a table's column may hold: the types CREATE TABLE takes, and NULL (a CREATE TABLE AS
# column of NULLs, as DuckDB types it)
TABLE_KINDS = frozenset(TYPE_NAMES.values()) | {"NULL"}


def check_table_column(table: str, column: str, typ: SqlType) -> None:
    """Refuse a column type no table holds (a ``CREATE TABLE .. AS SELECT`` of a TIMESTAMP
    or an INTERVAL), naming the column, as ``CREATE TABLE`` refuses it."""
    if typ.kind not in TABLE_KINDS:
        raise UnsupportedError(f"column {column} of table {table} would be {typ.sql()}, a type "
                               "tables do not hold: cast it to one they do (docs/sql.md)")


def created_name(stmt: exp.Create) -> str:
    """The name a CREATE statement defines."""
    target = stmt.this
    return (target.this.name if isinstance(target, exp.Schema) else target.name).lower()


def refuse_replace(stmt: exp.Create, name: str) -> None:
    """``CREATE OR REPLACE TABLE`` is refused: replacing a table would drop its rows and
    the views over it in one statement that could not be all or nothing (it was read as
    a plain ``CREATE TABLE``)."""
    if stmt.args.get("replace"):
        raise UnsupportedError(f"CREATE OR REPLACE TABLE {name}: DROP TABLE {name} first, "
                               "then CREATE TABLE")


def table_from_create(stmt: exp.Create) -> Table:
    """The table a ``CREATE TABLE name (columns ...) [WITH (ttl_seconds = N)]`` declares."""
    name = created_name(stmt)
    refuse_replace(stmt, name)
    if not isinstance(stmt.this, exp.Schema):
        raise SchemaError(f"table {name} has no columns")
    return with_properties(table_from_schema(name, stmt.this), stmt)


def declared_names(stmt: exp.Create) -> list[str]:
    """The column names of a ``CREATE TABLE name (columns ...)`` as written (the table's
    own are in lower case: names are matched regardless of case, as DuckDB matches
    them, and shown as written)."""
    return [item.this.name for item in stmt.this.expressions
            if isinstance(item, exp.ColumnDef)]


def with_properties(table: Table, stmt: exp.Create) -> Table:
    """``table`` with the ``WITH (...)`` properties of the statement creating it (also
    ``CREATE TABLE ... WITH (...) AS SELECT``)."""
    properties = table_properties(stmt, table.name)
    ttl = properties.get("ttl_seconds")
    table.expiry = Expiry(ttl) if ttl else None
    table.provenance = properties.get("provenance")
    return table


def _one_key(declared: list[str], table: str) -> None:
    """A second PRIMARY KEY is refused, as DuckDB refuses it (the first one would
    otherwise go unenforced)."""
    if declared:
        raise SchemaError(f"table {table} has more than one PRIMARY KEY (the first: "
                          f"{', '.join(declared)})")


def table_from_schema(name: str, schema: exp.Schema) -> Table:
    """A table from a column list with NOT NULL and PRIMARY KEY constraints."""
    columns: list[tuple[str, SqlType]] = []
    not_null: set[int] = set()
    key: tuple[int, ...] | None = None
    pk_names: list[str] = []
    for item in schema.expressions:
        if isinstance(item, exp.ColumnDef):
            cname = item.this.name.lower()
            if any(cname == c for c, _ in columns):
                raise SchemaError(f"column {cname} is defined twice in table {name}")
            if item.args.get("kind") is None:
                raise SchemaError(f"column {cname} of table {name} has no type")
            try:
                columns.append((cname, type_from_sqlglot(item.args["kind"])))
            except UnsupportedError as exc:
                raise UnsupportedError(f"column {cname} of table {name}: {exc}") from None
            for c in item.args.get("constraints") or []:
                kind = c.args.get("kind")
                if isinstance(kind, exp.NotNullColumnConstraint):
                    if not kind.args.get("allow_null"):  # NULL alone says nothing
                        not_null.add(len(columns) - 1)
                elif isinstance(kind, exp.PrimaryKeyColumnConstraint):
                    _one_key(pk_names, name)
                    pk_names = [cname]
                else:  # accepted and not enforced would be worse than refused
                    raise UnsupportedError(f"column constraint {c.sql()} of {name}.{cname}: "
                                           "tables enforce NOT NULL and PRIMARY KEY only")
        elif isinstance(item, exp.PrimaryKey):
            _one_key(pk_names, name)
            pk_names = [e.name.lower() for e in item.expressions]
        else:
            raise UnsupportedError(f"table element {item.sql()}")
    if pk_names:
        names = [c for c, _ in columns]
        missing = [n for n in pk_names if n not in names]
        if missing:
            raise SchemaError(f"PRIMARY KEY of {name} names {', '.join(missing)}, which "
                              f"{'is not a column' if len(missing) == 1 else 'are not columns'}"
                              f" of {name}")
        key = tuple(names.index(n) for n in pk_names)
        not_null |= set(key)
    return Table(name, columns, not_null, key)


PROVENANCE_MODES = ("update", "update-naive")


def table_properties(stmt: exp.Create, table: str) -> dict[str, object]:
    """``WITH (ttl_seconds = N, provenance = 'update')``: the table's rows expire N seconds
    after insertion; the table keeps update provenance (normal form, or ``update-naive``)."""
    props = stmt.args.get("properties")
    out: dict[str, object] = {}
    for prop in props.expressions if props is not None else []:
        name = prop.name.lower() if isinstance(prop, exp.Property) else ""
        if name == "ttl_seconds":
            out[name] = ttl_property(prop, table)
        elif name == "provenance":
            value = prop.args.get("value")
            mode = value.this.lower() if isinstance(value, exp.Literal) and value.is_string else None
            if mode not in PROVENANCE_MODES:
                raise SchemaError(f"provenance of table {table} must be one of "
                                  f"{', '.join(map(repr, PROVENANCE_MODES))}, not "
                                  f"{value.sql() if value is not None else 'nothing'}")
            out[name] = mode
        else:
            raise UnsupportedError(f"table property {prop.sql()} of table {table} "
                                   "(ttl_seconds and provenance are known)")
    if "provenance" in out and "ttl_seconds" in out:
        raise UnsupportedError(f"table {table}: ttl_seconds with provenance (expiry is not a "
                               "hyperplane update)")
    return out


def ttl_property(prop: exp.Property, table: str) -> float:
    """The value of ``ttl_seconds = N``: a positive number of seconds."""
    value = prop.args.get("value")
    try:
        ttl = float(value.this) if isinstance(value, exp.Literal) and not value.is_string else -1
    except ValueError:
        ttl = -1
    if ttl <= 0:
        raise SchemaError(f"ttl_seconds of table {table} must be a positive number, "
                          f"not {value.sql() if value is not None else 'nothing'}")
    return ttl
