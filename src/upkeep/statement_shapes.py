"""Statements that differ only in their constants share one parse.

Applications and logs send DML with the constants written in the text (``UPDATE stock SET
s_quantity = 42 WHERE s_w_id = 1 AND s_i_id = 77``): every text is new, so the cache of
texts parsed lately (:func:`upkeep.sql.parse_repeated`) never hits, and parsing (DuckDB's
syntax check, then sqlglot) was about half of running such a statement (200 of 400 us for
a keyed UPDATE).  This module gives such a text its *shape*: the text with each string and
number literal replaced by ``?`` (a lexical scan, a few microseconds).  The second time a
shape is seen, it is parsed once with its placeholders and kept, if binding the literals
of that text into it gives exactly the tree parsing the text gives; from then on a text of
that shape is the kept tree, copied, with its literals bound as parameters are
(:func:`~upkeep.sql.bind_parameters`, each in its own place by
:func:`~upkeep.sql.placeholder_order`, whatever order the tree holds them in), about
30 us against about 200 us to parse.

Only what binding cannot change is shaped: INSERT, UPDATE and DELETE of one statement,
whose literals all stand where a value stands (a comparison, a SET, a VALUES row, an IN
list, a sign or arithmetic).  A literal in a cast, a type, an INTERVAL or a LIMIT, a text
with comments, parameters or escape strings, or a number glued to a word keeps the text
out (it is parsed as before).  A statement bound from a shape that raises an
:class:`~upkeep.errors.Error` is run again from its own parse (it changed nothing), so
errors name positions in the text as written (not a storage error or a timeout: those are
raised as they are).
"""

from __future__ import annotations

import re

from sqlglot import exp

from .errors import Error
from .sql import PARSED_LONGEST, bind_parameters, parse, placeholder_order, without_places
from .types import is_unicode

#: the lexemes of a text that matter to its shape, leftmost first: a string literal, a
#: quoted identifier (kept as it is), a number literal standing alone (no letter, digit,
#: dot or quote against it: ``1e5``, ``t1`` and ``1.2.3`` stay text), and what keeps a text
#: unshaped: comments, parameters (``?``, ``$1``, ``:name``, ``@x``), backquotes,
#: backslashes, and a letter against a quote (``E'..'``, ``X'..'``, ``N'..'``)
_LEXEME = re.compile(r"""'(?:[^']|'')*'|"(?:[^"]|"")*"|(?<![\w.$])\d{1,18}(?:\.\d{1,18})?"""
                     r"""(?![\w.'"])|--|/\*|[?$:@`\\]|\w'""")

#: where a placeholder may stand in a kept shape: places whose literal is a value only
_VALUE_PLACES = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Tuple, exp.In,
                 exp.Between, exp.Neg, exp.Paren, exp.Add, exp.Sub, exp.Mul, exp.Like,
                 exp.ILike)

_SHAPES_MAX = 256  # shapes remembered (all forgotten when full, as the texts' cache is)

_SEEN_ONCE = object()  # a shape seen once: kept when seen again
_REFUSED = object()  # a shape binding cannot serve

Literals = list[tuple[str, bool]]  # each literal's text (unescaped) and whether a string


_DML = (exp.Insert, exp.Update, exp.Delete)


def scan(sql: str) -> tuple[str, Literals] | None:
    """``sql``'s shape and its literals in order, or None when the text is not shaped
    (also a text longer than the texts' cache keeps, a bulk INSERT's big tree, and one
    that is not valid Unicode, which :func:`~upkeep.sql.parse` refuses)."""
    if len(sql) > PARSED_LONGEST or not (sql.isascii() or is_unicode(sql)):
        return None
    literals: Literals = []
    refused = False

    def placeholder(m: re.Match) -> str:
        nonlocal refused
        token = m.group()
        first = token[0]
        if first == "'":
            if "\\" in token:  # (read alike by every parser only without backslashes)
                refused = True
            literals.append((token[1:-1].replace("''", "'"), True))
            return "?"
        if first == '"':
            return token
        if first.isdigit():
            literals.append((token, False))
            return "?"
        refused = True
        return token

    shape = _LEXEME.sub(placeholder, sql)
    if refused or not literals:
        return None
    return shape, literals


class Shapes:
    """The shapes seen lately: each one seen once, kept (its parsed tree with
    placeholders, and their order), or refused."""

    def __init__(self) -> None:
        self._kept: dict[str, object] = {}
        self.bound = 0  # statements made from a kept shape (an operation count, for tests)

    def __len__(self) -> int:
        """How many shapes are remembered (seen once, kept or refused)."""
        return len(self._kept)

    def statement(self, shape: str, literals: Literals) -> exp.Expression | None:
        """The statement of a text of ``shape`` with ``literals``, bound into a copy of
        the kept tree; None unless the shape is kept."""
        kept = self._kept.get(shape)
        if type(kept) is not tuple:  # (seen once, refused, or not seen)
            return None
        self.bound += 1
        tree, order = kept
        return _bind(tree, order, literals)

    def learn(self, shape: str, literals: Literals, statements: list[exp.Expression]) -> None:
        """``statements``, parsed from a text of ``shape`` with ``literals``: the shape is
        kept on its second sighting if binding those literals into its own parse gives
        these statements exactly.  Other statements are not remembered: ad-hoc queries
        would push the DML's shapes out."""
        if len(statements) != 1 or not isinstance(statements[0], _DML):
            return
        got = self._kept.get(shape)
        if got is _SEEN_ONCE:
            self._kept[shape] = _kept_tree(shape, literals, statements)
        elif got is None:
            if len(self._kept) >= _SHAPES_MAX:
                self._kept.clear()
            self._kept[shape] = _SEEN_ONCE


def _kept_tree(shape: str, literals: Literals, statements: list[exp.Expression]) -> object:
    """The parse of ``shape`` to keep with its placeholders' order
    (:func:`~upkeep.sql.placeholder_order`: a WITH before an INSERT is moved into its
    query, so the tree may hold them in another order than the text), or _REFUSED."""
    try:
        parsed = parse(shape)
        if len(parsed) != 1:
            return _REFUSED
        (tree,) = parsed
        order = placeholder_order(tree)
    except Error:
        return _REFUSED
    if len(order) != len(literals) or not all(
            isinstance(p.parent, _VALUE_PLACES) for p in tree.find_all(exp.Placeholder)):
        return _REFUSED
    if _bind(tree, order, literals) != statements[0]:
        return _REFUSED
    # the tokens' places, which errors name, are the shape's, not a bound text's (whose
    # errors come from its own parse): without them each statement's copy costs less
    return without_places(tree), order


def _literal(literal: tuple[str, bool]) -> exp.Literal:
    """The node of a text's literal, as sqlglot parses it (not a bound parameter's)."""
    text, is_string = literal
    return exp.Literal(this=text, is_string=is_string)


def _bind(tree: exp.Expression, order: list[int], literals: Literals) -> exp.Expression:
    """A copy of ``tree`` with its placeholders replaced by ``literals`` (in the text's
    order; ``order``: each placeholder's place among them)."""
    return bind_parameters(tree, literals, order, _literal)


#: the shapes of every connection in the process (a shape's tree depends on the text only)
SHAPES = Shapes()
