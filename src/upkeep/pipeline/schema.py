"""The pipeline's tables and views, created from its SQL files when the database lacks them.

A durable database already holds them after the first run; they are then left as they are
(so changing a view's SQL needs a fresh state directory).  Errors name the SQL file and the
line of the statement at fault.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import sqlglot
from sqlglot import exp
from sqlglot.tokens import TokenType

from ..engine import Engine
from ..errors import Error, ParseError
from ..io.errors import PipelineError
from ..sql import Dialect, check_syntax, parse, quiet_sqlglot
from .config import PipelineConfig


@dataclass(frozen=True)
class Statement:
    """One SQL statement of a file: its text, first line, kind (TABLE/VIEW) and name."""

    file: Path
    line: int
    text: str
    kind: str
    name: str

    def where(self) -> str:
        return f"{self.file.name}, line {self.line}"


def split_statements(file: Path) -> list[tuple[int, str]]:
    """The statements of a SQL file as ``(first line, text)``, split at top-level semicolons."""
    try:
        sql = file.read_text()
    except OSError as exc:
        raise PipelineError(f"cannot read SQL file {file}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise PipelineError(f"SQL file {file} is not UTF-8 text (byte {exc.start})") from None
    try:
        tokens = sqlglot.Dialect.get_or_raise("duckdb").tokenize(sql)
    except sqlglot.errors.TokenError as exc:
        try:  # the parser names the line and column (an unterminated string's start)
            parse(sql)
        except Error as parsed:
            line = getattr(parsed, "line", None)
            if line is not None:
                raise PipelineError(f"{file.name}, line {line}: {parsed}") from None
        raise PipelineError(f"{file.name}: cannot tokenize SQL: {exc}") from None
    out: list[tuple[int, str]] = []
    first = None
    for tok in tokens:
        if tok.token_type == TokenType.SEMICOLON:
            if first is not None:
                out.append((first.line, sql[first.start:tok.start]))
            first = None
        elif first is None:
            first = tok
    if first is not None:
        out.append((first.line, sql[first.start:]))
    return out


def read_statements(file: Path, kind: str) -> list[Statement]:
    """The CREATE statements of ``file``; each must create a ``kind`` (TABLE or VIEW)."""
    what = "CREATE TABLE" if kind == "TABLE" else "CREATE [MATERIALIZED] VIEW"
    out = []
    for line, text in split_statements(file):
        try:  # DuckDB's parser first: its message and position are the user's dialect's
            check_syntax(text)
        except ParseError as exc:
            at = line + (exc.line or 1) - 1
            raise PipelineError(f"{file.name}, line {at}: {exc}") from None
        except Error as exc:
            raise PipelineError(f"{file.name}, line {line}: {exc}") from None
        try:
            with quiet_sqlglot():
                stmt = sqlglot.parse_one(text, read=Dialect)
        except sqlglot.errors.ParseError as exc:
            err = exc.errors[0] if exc.errors else {}
            at = line + (err.get("line") or 1) - 1
            raise PipelineError(f"{file.name}, line {at}: cannot parse SQL: "
                                f"{err.get('description', exc)}") from None
        if not isinstance(stmt, exp.Create) or (stmt.args.get("kind") or "").upper() != kind:
            raise PipelineError(f"{file.name}, line {line}: expected {what} statements only, got "
                                f"{text.strip().splitlines()[0][:60]!r}")
        target = stmt.this
        name = (target.this.name if isinstance(target, exp.Schema) else target.name).lower()
        out.append(Statement(file, line, text, kind, name))
    return out


def ensure_schema(db: Engine, config: PipelineConfig) -> list[str]:
    """Create the tables and views the database lacks; returns the names created.  All or
    nothing: if one fails, those created before it are dropped again (a table left behind
    would be kept as it was declared, and a corrected declaration ignored at the next
    run)."""
    statements = [s for f in config.tables for s in read_statements(f, "TABLE")]
    statements += [s for f in config.views for s in read_statements(f, "VIEW")]
    first: dict[str, Statement] = {}
    for stmt in statements:
        if stmt.name in first:
            raise PipelineError(f"{stmt.where()}: {stmt.name} is defined twice (first at "
                                f"{first[stmt.name].where()})")
        first[stmt.name] = stmt
    existing = set(db.tables()) | set(db.views())
    created: list[Statement] = []
    try:
        for stmt in statements:
            if stmt.name in existing:
                continue
            try:
                db.execute(stmt.text)
            except ParseError as exc:
                line = stmt.line + (exc.line or 1) - 1
                raise PipelineError(f"{stmt.file.name}, line {line}: {exc}") from None
            except Error as exc:
                raise PipelineError(f"{stmt.where()}: {exc}") from None
            existing.add(stmt.name)
            created.append(stmt)
    except BaseException:
        for stmt in reversed(created):
            db.execute(f'DROP {stmt.kind} "{stmt.name}"')
        raise
    return [stmt.name for stmt in created]


def pipeline_views(config: PipelineConfig) -> list[str]:
    """The names of the views the pipeline's SQL files define, in file order."""
    return [s.name for f in config.views for s in read_statements(f, "VIEW")]
