"""Compile SQL scalar expressions (sqlglot trees) into Python functions over row tuples.

The generated function follows DuckDB's semantics, since DuckDB is the oracle: NULL
propagates through arithmetic and comparisons, AND/OR/NOT are three-valued, integer
``//`` and ``%`` truncate toward zero, ``/`` is floating division.  Subtrees without
column references are evaluated once by DuckDB itself (constant folding), which gives
exact DuckDB semantics for date and interval literals, casts of constants and so on.
"""

from __future__ import annotations

import calendar
import datetime as dt
import functools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from operator import itemgetter

import duckdb
from sqlglot import exp

from .duckdb_scratch import as_error, scratch
from .errors import EvaluationError, SchemaError, UnsupportedError
from .types import (
    BIGINT,
    BOOLEAN,
    DATE,
    DOUBLE,
    HUGEINT,
    INT_RANGES,
    INTEGER,
    INTEGER_KINDS,
    NULLTYPE,
    TIMESTAMP,
    VARCHAR,
    WIDE_CONTEXT,
    OutsideDates,
    SqlType,
    canonical_float,
    coerce_value,
    common_numeric,
    double_fits_decimal,
    double_to_decimal,
    epoch_microseconds,
    max_numeric,
    parse_date,
    parse_timestamp,
    type_from_name,
    type_from_sqlglot,
)

AGGREGATE_TYPES = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max, exp.Stddev, exp.StddevSamp,
                   exp.StddevPop, exp.Variance, exp.VariancePop, exp.Median, exp.PercentileCont,
                   exp.PercentileDisc, exp.Quantile, exp.ArgMax, exp.ArgMin, exp.GroupConcat)


@dataclass(frozen=True)
class Column:
    """A column visible in a scope: its qualifier (table alias), name, type and slot."""

    qualifier: str
    name: str
    type: SqlType
    slot: int


class Scope:
    """Name resolution for column references: ``alias.col`` or an unambiguous ``col``."""

    def __init__(self, columns: list[Column], record: bool = False):
        self.columns = columns
        # with ``record``, the slots of every column resolved, which is every column a
        # function compiled over this scope can read (``Core.atom_reads``)
        self.resolved: set[int] | None = set() if record else None
        # names are matched as SQL matches them, whatever the case a column keeps
        # (DuckDB names ``SUM(b) OVER (ORDER BY g)`` so)
        self._qualified = {(c.qualifier.lower(), c.name.lower()): c for c in columns}
        self._by_name: dict[str, list[Column]] = {}
        for c in columns:
            self._by_name.setdefault(c.name.lower(), []).append(c)

    def resolve(self, node: exp.Column) -> Column:
        col = self._resolved(node)
        if self.resolved is not None:
            self.resolved.add(col.slot)
        return col

    def _resolved(self, node: exp.Column) -> Column:
        name = node.name.lower()
        table = node.table.lower() if node.table else ""
        if table:
            col = self._qualified.get((table, name))
            if col is None:
                raise SchemaError(f"unknown column {table}.{name}{_where(node)}")
            return col
        matches = self._by_name.get(name, [])
        if not matches:
            raise SchemaError(f"unknown column {name}{_where(node)}")
        if len({(c.qualifier, c.name) for c in matches}) > 1:
            raise SchemaError(f"column reference {name} is ambiguous{_where(node)}")
        return matches[0]


def table_scope(name: str, columns: list[tuple[str, SqlType]]) -> Scope:
    """The scope of one table's rows (``name.column`` or ``column``, slots in order)."""
    return Scope([Column(name, n, t, i) for i, (n, t) in enumerate(columns)])


def _where(node: exp.Expression) -> str:
    meta = node.meta if hasattr(node, "meta") else {}
    if meta and "line" in meta:
        return f" (line {meta['line']}, column {meta.get('col')})"
    return ""


@dataclass
class Compiled:
    """A compiled expression: ``fn(row) -> value`` and its SQL result type."""

    fn: Callable[[tuple], object]
    type: SqlType
    source: str


# ---------------------------------------------------------------- runtime helpers


def _nan_compare(a, b, op: str) -> bool:
    """A comparison with a NaN operand as DuckDB orders doubles: NaN equals NaN and is
    greater than every other number."""
    ka, kb = (a != a, 0.0 if a != a else a), (b != b, 0.0 if b != b else b)
    return {"==": ka == kb, "!=": ka != kb, "<": ka < kb, "<=": ka <= kb, ">": ka > kb,
            ">=": ka >= kb}[op]


class Descending:
    """A value ordered the other way round (for ``DESC`` keys of any type)."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def __lt__(self, other: Descending) -> bool:
        return other.value < self.value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Descending) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"Descending({self.value!r})"


def nan_order(value: object) -> tuple:
    """A sort key ordering doubles as DuckDB does: NaN after every number."""
    return (True, 0.0) if value != value else (False, value)


def _div(a, b):
    if a is None or b is None:
        return None
    a, b = float(a), float(b)
    if b == 0.0:
        if a == 0.0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _intdiv(a, b, bound=0):
    """``a // b`` as DuckDB's: truncated toward zero; ``bound``: the integer result type's
    (``-bound // -1`` does not fit it)."""
    if a is None or b is None:
        return None
    if b == 0:
        raise EvaluationError(f"division by zero in ({a} // {b})")
    if bound and b == -1 and a == -bound:
        raise EvaluationError(f"overflow in division ({a} // {b})")
    if not (type(a) is int and type(b) is int):  # DuckDB: // of non-integers is /
        return float(a) / float(b)
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _mod(a, b, bound=0):
    """``a % b`` as DuckDB's: the sign of ``a``; ``-bound % -1`` overflows there too."""
    if a is None or b is None:
        return None
    if bound and b == -1 and a == -bound:
        raise EvaluationError(f"overflow in division ({a} % {b})")
    if isinstance(a, float) or isinstance(b, float):
        try:  # DuckDB: a DOUBLE % 0, and inf % x, are NaN
            return math.fmod(a, b) if b != 0 else math.nan
        except ValueError:
            return math.nan
    if b == 0:
        raise EvaluationError(f"division by zero in ({a} % {b})")
    if isinstance(a, Decimal) or isinstance(b, Decimal):  # all 38 digits, not Python's 28
        r = WIDE_CONTEXT.remainder(WIDE_CONTEXT.abs(Decimal(a)), WIDE_CONTEXT.abs(Decimal(b)))
        return r if a >= 0 else WIDE_CONTEXT.minus(r)
    r = abs(a) % abs(b)
    return r if a >= 0 else -r


def _not_distinct(a, b) -> bool:
    """``a IS NOT DISTINCT FROM b``: NULL equals NULL, NaN equals NaN (as in DuckDB)."""
    if a is None or b is None:
        return a is None and b is None
    return a == b or (a != a and b != b)


def _fail(message: str):
    """A constant DuckDB cannot compute, raised where a row evaluates it (a CASE branch no
    row takes is never evaluated, as in DuckDB)."""
    raise EvaluationError(message)


def _in(x, options):
    """``x IN (options)`` as DuckDB: NULL if x is NULL, or if nothing matched and an option
    is NULL; NaN matches NaN."""
    if x is None:
        return None
    saw_null = False
    for o in options:
        if o is None:
            saw_null = True
        elif x == o or (x != x and o != o):
            return True
    return None if saw_null else False


_NAN = object()  # NaN's stand-in in a set of IN options (NaN is unequal to itself)


def _in_set(x, options: frozenset, saw_null: bool):
    """:func:`_in` over constant options, one hash lookup instead of a scan: ``options``
    are the non-NULL constants with NaN as ``_NAN``; equal numbers of other types hash
    alike, so they match by value as ``==`` does."""
    if x is None:
        return None
    if x in options or (x != x and _NAN in options):
        return True
    return None if saw_null else False


def _like(pattern: str, case_insensitive: bool = False) -> Callable[[object], object]:
    """LIKE; ILIKE matches both sides lowered, as DuckDB does (Python's case-insensitive
    matching also folds 'ſ' to 's')."""
    if case_insensitive:
        pattern = _lower(pattern)
    regex = "".join(
        ".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in pattern
    )
    compiled = re.compile(regex, re.S)

    def match(s):
        if s is None:
            return None
        return compiled.fullmatch(_lower(s) if case_insensitive else s) is not None

    return match


_TO_END = object()  # substring without a length (a NULL length gives NULL)
_SUBSTRING_RANGE = 2**32 - 1  # DuckDB's largest substring offset and length


def _substring(s, start, length=_TO_END):
    """DuckDB's substring: 1-based ``start`` (negative counts from the end, 0 is before the
    first character), the window ``[start, start + length)`` (a negative length reaches
    back), clipped to the string."""
    if s is None or start is None or length is None:
        return None
    for what, value in (("offset", start), ("length", length)):
        if value is not _TO_END and not -_SUBSTRING_RANGE - 1 <= value <= _SUBSTRING_RANGE:
            raise EvaluationError(f"substring {what} {value} outside of the supported range "
                                  f"({-_SUBSTRING_RANGE - 1} to {_SUBSTRING_RANGE}), as in "
                                  "DuckDB")
    n = len(s)
    at = start if start > 0 else n + start + 1 if start < 0 else 0
    if length is _TO_END:
        lo, hi = at, n + 1
    else:
        lo, hi = (at, at + length) if length >= 0 else (at + length, at)
    lo, hi = max(lo, 1), min(hi, n + 1)
    return s[lo - 1:hi - 1] if hi > lo else ""


def _overflow(op: str, a, b, typ: SqlType):
    raise EvaluationError(f"overflow in {op} of {typ.sql()} ({a} {_SYMBOL[op]} {b})")


_SYMBOL = {"addition": "+", "subtraction": "-", "multiplication": "*", "negation": "-"}
_OPERATION = {"+": "addition", "-": "subtraction", "*": "multiplication"}  # for _overflow
_DECIMAL_OPS = {"+": WIDE_CONTEXT.add, "-": WIDE_CONTEXT.subtract, "*": WIDE_CONTEXT.multiply}
#: the digits of an integer type as DuckDB's decimal arithmetic counts them
_DECIMAL_WIDTHS = {"TINYINT": 3, "SMALLINT": 5, "INTEGER": 10, "BIGINT": 19, "HUGEINT": 38,
                   "NULL": 0}


def _decimal(op: str, a, b, typ: SqlType):
    """DECIMAL ``a op b``, exact (Python's default context keeps 28 digits, DECIMAL(38)
    needs 38), or an overflow beyond ``typ``'s digits (38, or 18: see ``_arith``), as
    DuckDB's."""
    z = _DECIMAL_OPS[op](a, b)
    if not z:
        return z.copy_abs()  # 0.00 * -1 is 0.00 in DuckDB, not -0.00
    if z.adjusted() >= typ.precision - typ.scale:
        _overflow(_OPERATION[op], a, b, typ)
    return z


def _abs(v, bound=0):
    """ABS, exact for DECIMAL; ``bound``: an integer type's (ABS of its least value does
    not fit it, as in DuckDB)."""
    if v is None:
        return None
    if type(v) is Decimal:
        return WIDE_CONTEXT.abs(v)
    if bound and v == -bound:
        raise EvaluationError(f"overflow in ABS({v})")
    return abs(v)


#: what DuckDB's TRIM takes off without characters given: Unicode's space separators
#: (category Zs: the space, no-break, en / em and ideographic spaces, ...), not tabs or
#: line breaks
SPACES = ("\u0020\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
          "\u2009\u200a\u202f\u205f\u3000")


def _trim(s, chars=SPACES, left=True, right=True):
    """DuckDB's TRIM / LTRIM / RTRIM: any of ``chars`` (:data:`SPACES` unless given) off
    the ends."""
    if s is None or chars is None:
        return None
    if left:
        s = s.lstrip(chars)
    return s.rstrip(chars) if right else s


def _text(v) -> str:
    """A value as DuckDB's concatenation reads it (``true``, not ``True``)."""
    return v if type(v) is str else _cast(v, VARCHAR)


def _concat_ws(separator, *values):
    """CONCAT_WS: the non-NULL values joined by ``separator``; NULL if it is NULL."""
    if separator is None:
        return None
    return _text(separator).join(_text(v) for v in values if v is not None)


def _integer_literal(node: exp.Expression) -> int | None:
    """The value of ``5`` or ``-5`` written as a literal, else None."""
    text = node.sql()
    return int(text) if re.fullmatch(r"-?\d+", text) else None


def _round(x, digits=0, bound=0):
    """ROUND as DuckDB's: half away from zero; ``bound``: an integer type's (rounding to
    tens may leave it: ROUND(2147483647, -1))."""
    if x is None or digits is None:
        return None
    if isinstance(x, Decimal):  # WIDE_CONTEXT rounds half up, and keeps 38 digits
        exponent = x.as_tuple().exponent
        if isinstance(exponent, int) and digits >= -exponent:
            return x  # no digit that far right: the value at its own scale, as DuckDB's
        if digits < -38:  # left of every digit a DECIMAL holds
            return Decimal(0)
        rounded = x.quantize(Decimal(1).scaleb(-digits), context=WIDE_CONTEXT)
        if digits < 0:  # to tens: 10, not 1E+1
            rounded = rounded.quantize(Decimal(1), context=WIDE_CONTEXT)
        return rounded if rounded else rounded.copy_abs()  # no -0.00, as in DuckDB
    if isinstance(x, float):
        if not math.isfinite(x) or digits > 308:  # no digit of a double that far right
            return x
        if digits < -308:
            return math.copysign(0.0, x) + 0.0
        # to tens, hundreds...: divided and multiplied back by 10 ** -digits, as DuckDB
        # does (10.0 ** -5 is inexact: 55555 came back as 99999.99999999999)
        modifier = 10.0 ** abs(digits)
        v = abs(x) / modifier if digits < 0 else abs(x) * modifier
        if not math.isfinite(v):  # digits past the double's own: nothing to round
            return x
        r = math.floor(v)  # half away from zero by the exact fraction (floor(v + 0.5)
        if v - r >= 0.5:  # rounded 0.49999999999999994 up)
            r += 1.0
        r = r * modifier if digits < 0 else r / modifier
        if not math.isfinite(r):  # rounded up past the largest double: DuckDB keeps x
            return x
        return math.copysign(r, x)  # -0.0 stays, as DuckDB's
    if isinstance(x, int) and not isinstance(x, bool) and digits < 0:
        if digits < -40:  # beyond a HUGEINT's digits: 0, without computing 10 ** -digits
            return 0
        unit = 10 ** -digits  # to tens, hundreds...: half away from zero, as DuckDB
        r = (abs(x) + unit // 2) // unit * unit
        r = r if x >= 0 else -r
        if bound and not -bound <= r < bound:
            raise EvaluationError(f"overflow in ROUND({x}, {digits})")
        return r
    return x


#: functions named by the part they extract (``hour(ts)``), as sqlglot parses them
_PART_FUNCTIONS = {exp.Year: "year", exp.Month: "month", exp.Day: "day",
                   exp.DayOfMonth: "day", exp.Quarter: "quarter", exp.DayOfWeek: "dow",
                   exp.DayOfWeekIso: "isodow", exp.DayOfYear: "doy", exp.Week: "week",
                   exp.Hour: "hour", exp.Minute: "minute", exp.Second: "second",
                   exp.TimeToUnix: "epoch"}
_PART_NAMES = frozenset({"millisecond", "microsecond", "isoyear", "yearweek", "decade",
                         "century", "millennium", "era", "weekofyear"})
def _time_part(time_part: Callable) -> Callable:
    """A part of the time of day: 0 for a DATE (its midnight), as DuckDB gives it."""
    return lambda d: time_part(d) if isinstance(d, dt.datetime) else 0


#: each part's value of a DATE or TIMESTAMP as DuckDB computes it (dow: Sunday is 0;
#: week and isoyear ISO 8601's; second, millisecond and microsecond count the seconds of
#: the minute: 58.75 s is 58, 58750 and 58750000; epoch the microseconds as a double,
#: then divided by 1e6, as DuckDB divides)
_PART_OF: dict[str, Callable] = {
    "year": lambda d: d.year, "month": lambda d: d.month, "day": lambda d: d.day,
    "dayofmonth": lambda d: d.day, "quarter": lambda d: (d.month - 1) // 3 + 1,
    "dow": lambda d: d.isoweekday() % 7, "dayofweek": lambda d: d.isoweekday() % 7,
    "isodow": lambda d: d.isoweekday(), "doy": lambda d: d.timetuple().tm_yday,
    "dayofyear": lambda d: d.timetuple().tm_yday, "week": lambda d: d.isocalendar()[1],
    "weekofyear": lambda d: d.isocalendar()[1], "isoyear": lambda d: d.isocalendar()[0],
    "yearweek": lambda d: d.isocalendar()[0] * 100 + d.isocalendar()[1],
    "decade": lambda d: d.year // 10, "century": lambda d: (d.year - 1) // 100 + 1,
    "millennium": lambda d: (d.year - 1) // 1000 + 1, "era": lambda d: 1,
    "epoch": lambda d: float(epoch_microseconds(d)) / 1_000_000.0,
    "hour": _time_part(lambda d: d.hour), "minute": _time_part(lambda d: d.minute),
    "second": _time_part(lambda d: d.second),
    "millisecond": _time_part(lambda d: d.second * 1_000 + d.microsecond // 1_000),
    "microsecond": _time_part(lambda d: d.second * 1_000_000 + d.microsecond),
}


def _extract(part: str, d):
    """EXTRACT / date_part of a DATE or TIMESTAMP (:data:`_PART_OF`)."""
    return None if d is None else _PART_OF[part](d)


#: date_diff's units by the names DuckDB takes for them
_DIFF_UNITS = {
    **dict.fromkeys(("year", "years", "y", "yr", "yrs"), "year"),
    **dict.fromkeys(("quarter", "quarters"), "quarter"),
    **dict.fromkeys(("month", "months", "mon", "mons"), "month"),
    **dict.fromkeys(("week", "weeks", "w", "weekofyear"), "week"),
    **dict.fromkeys(("day", "days", "d", "dayofmonth"), "day"),
    **dict.fromkeys(("decade", "decades", "dec", "decs"), "decade"),
    **dict.fromkeys(("century", "centuries", "cent", "c"), "century"),
    **dict.fromkeys(("millennium", "millennia", "millenniums", "mil", "mils"), "millennium"),
    **dict.fromkeys(("hour", "hours", "h", "hr", "hrs"), "hour"),
    **dict.fromkeys(("minute", "minutes", "m", "min", "mins"), "minute"),
    **dict.fromkeys(("second", "seconds", "s", "sec", "secs"), "second"),
    **dict.fromkeys(("millisecond", "milliseconds", "ms", "msec", "msecs"), "millisecond"),
    **dict.fromkeys(("microsecond", "microseconds", "us", "usec", "usecs"), "microsecond"),
}
#: microseconds per unit of date_diff's time units
_DIFF_MICROS = {"hour": 3_600_000_000, "minute": 60_000_000, "second": 1_000_000,
                "millisecond": 1_000, "microsecond": 1}


def _date_among_timestamps(types: list[SqlType]) -> bool:
    """Whether DATEs meet TIMESTAMPs among a BETWEEN's or an IN list's operands: DuckDB
    binds them all as TIMESTAMPs, so a text literal among them keeps its time of day
    (``d BETWEEN '2024-01-01 10:30' AND ts``), where the DATE alone would cut it."""
    kinds = {t.kind for t in types}
    return "DATE" in kinds and "TIMESTAMP" in kinds


def _date_diff(unit: str, start, end):
    """``date_diff(unit, start, end)`` of DATEs or TIMESTAMPs (a DATE at its midnight) as
    DuckDB counts it: the unit's boundaries crossed from start to end (years, quarters,
    months and decades by the calendar, days by the dates, hours and finer by the
    microseconds since 1970 divided down), but weeks the whole weeks between the two dates
    (the days' difference divided by 7, toward zero); found equal to DuckDB's on 3,000
    random pairs of timestamps of the years 1 to 9998 per unit."""
    if start is None or end is None:
        return None
    a = start if isinstance(start, dt.datetime) else _at_midnight(start)
    b = end if isinstance(end, dt.datetime) else _at_midnight(end)
    if unit == "year":
        return b.year - a.year
    if unit == "quarter":
        return (b.year * 12 + b.month - 1) // 3 - (a.year * 12 + a.month - 1) // 3
    if unit == "month":
        return (b.year * 12 + b.month) - (a.year * 12 + a.month)
    if unit == "day":
        return (b.date() - a.date()).days
    if unit == "week":
        days = (b.date() - a.date()).days
        return days // 7 if days >= 0 else -(-days // 7)
    if unit == "decade":
        return b.year // 10 - a.year // 10
    if unit == "century":
        return b.year // 100 - a.year // 100
    if unit == "millennium":
        return b.year // 1000 - a.year // 1000
    per = _DIFF_MICROS[unit]
    return epoch_microseconds(b) // per - epoch_microseconds(a) // per


def _date_plus(d, days, minus=False):
    """DATE + INTEGER days (``minus``: - INTEGER), as DuckDB computes it."""
    if d is None or days is None:
        return None
    try:
        return d + dt.timedelta(days=-days if minus else days)
    except OverflowError:
        raise EvaluationError(f"date out of range ({d} {'-' if minus else '+'} {days} days)"
                              ) from None


_TRUNCATED = ("year", "quarter", "month", "week", "day")
#: the finer parts date_trunc takes of a TIMESTAMP, in microseconds
_TRUNCATED_TIME = {"hour": 3_600_000_000, "minute": 60_000_000, "second": 1_000_000,
                   "millisecond": 1_000, "microsecond": 1}
_MICROSECOND = dt.timedelta(microseconds=1)


def _truncate(part, d, as_timestamp):
    """date_trunc of a DATE or TIMESTAMP (``as_timestamp``: a DATE's result at midnight,
    as DuckDB returns it; a TIMESTAMP's is one)."""
    if d is None:
        return None
    unit = _TRUNCATED_TIME.get(part)
    if unit is not None:  # a TIMESTAMP's hour, minute, ...: whole units of its day
        into_day = d - dt.datetime(d.year, d.month, d.day)
        return d - dt.timedelta(microseconds=(into_day // _MICROSECOND) % unit)
    if isinstance(d, dt.datetime):
        d = d.date()
        as_timestamp = True
    if part == "year":
        d = d.replace(month=1, day=1)
    elif part == "quarter":
        d = d.replace(month=(d.month - 1) // 3 * 3 + 1, day=1)
    elif part == "month":
        d = d.replace(day=1)
    elif part == "week":
        d = d - dt.timedelta(days=d.weekday())
    return dt.datetime.combine(d, dt.time()) if as_timestamp else d


def _is_interval(node: exp.Expression) -> bool:
    """A constant INTERVAL (possibly negated or in brackets)."""
    return isinstance(node, (exp.Interval, exp.Neg, exp.Paren)) and node.find(
        exp.Interval) is not None and node.find(exp.Column) is None


def _plus_interval(value, months, days, micros):
    """A DATE (at midnight) or TIMESTAMP plus an interval, as DuckDB adds one."""
    if value is None:
        return None
    t = value if isinstance(value, dt.datetime) else dt.datetime.combine(value, dt.time())
    try:
        if months:
            year, month = divmod(t.year * 12 + t.month - 1 + months, 12)
            day = min(t.day, calendar.monthrange(year, month + 1)[1])
            t = t.replace(year=year, month=month + 1, day=day)
        return t + dt.timedelta(days=days, microseconds=micros)
    except (OverflowError, ValueError):
        raise EvaluationError(f"timestamp out of range ({value} + {months} months "
                              f"{days} days {micros} us)") from None


def _days_between(a, b):
    """DATE - DATE: the days between them (BIGINT)."""
    return None if a is None or b is None else (a - b).days


def _replace(s, old, new):
    """DuckDB's replace: every occurrence, left to right; an empty pattern changes
    nothing (Python's would insert between characters)."""
    if s is None or old is None or new is None:
        return None
    return s.replace(old, new) if old else s


def _simple_upper(c: str) -> str:
    """One character's upper case as DuckDB maps it: one character for one (Unicode's
    simple mapping), where Python's full mapping may give several ('ß' -> 'SS')."""
    u = c.upper()
    if len(u) == 1:
        return u
    t = c.title()
    return t if len(t) == 1 else ("\u1e9e" if c == "\xdf" else c)


def _upper(s: str) -> str:
    """DuckDB's UPPER (per character, :func:`_simple_upper`); ASCII text as Python's."""
    if s.isascii():
        return s.upper()
    return "".join(map(_simple_upper, s))


def _lower(s: str) -> str:
    """DuckDB's LOWER: as Python's, except 'İ', which DuckDB maps to 'i' alone, and 'Σ',
    always 'σ' (Python's gives 'ς' at a word's end)."""
    if s.isascii():
        return s.lower()
    s = s.replace("\u0130", "i")
    return "".join(map(str.lower, s)) if "\u03a3" in s else s.lower()


def _at_midnight(d):
    """A DATE compared with a TIMESTAMP: DuckDB promotes it to the timestamp at 00:00."""
    return None if d is None else dt.datetime.combine(d, dt.time())


# the text DuckDB casts to a BOOLEAN (any case; no spaces around it)
_BOOLEAN_TEXT = {"true": True, "t": True, "1": True, "yes": True, "y": True,
                 "false": False, "f": False, "0": False, "no": False, "n": False}


#: the kinds whose arithmetic beyond ``DATE +/- INTERVAL`` is left to DuckDB
_TEMPORAL = frozenset({"TIMESTAMP", "INTERVAL"})


def _varchar(value) -> str:
    """A value as DuckDB's ``CAST(.. AS VARCHAR)`` spells it: a TIMESTAMP with a space and
    no trailing zeros of its fraction (``2000-01-02 12:00:00.5``), a DECIMAL in fixed
    point at its scale (``0.0000000001``, never ``1E-10``), booleans in lower case."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        text = value.strftime("%H:%M:%S")
        if value.microsecond:
            text += f".{value.microsecond:06d}".rstrip("0")
        return f"{value.date().isoformat()} {text}"
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return format(value, "f")
    return str(value)


#: an underscore not between two digits, which DuckDB's number casts refuse
_LOOSE_UNDERSCORE = re.compile(r"(?<![0-9])_|_(?![0-9])")


def _cast(value, typ: SqlType):
    if value is None:
        return None
    kind = typ.kind
    try:
        if isinstance(value, str) and typ.is_numeric and not value.isascii():
            raise ValueError(f"not a number: {value!r}")  # Python reads '١٢' as 12
        if isinstance(value, str) and "_" in value and _LOOSE_UNDERSCORE.search(value) and (
                typ.is_numeric):  # DuckDB: one underscore between two digits ('1_000')
            raise ValueError(f"not a number: {value!r}")
        if typ.is_integer:  # DuckDB rounds: half to even from DOUBLE, half away otherwise
            if isinstance(value, str):
                text = value.strip()
                digits = text.lstrip("+-")
                if digits[:2].lower() in ("0x", "0b"):  # hexadecimal, binary: as DuckDB
                    if digits != text or value.rstrip() != value:  # reads them: no sign,
                        raise ValueError(f"not a number: {value!r}")  # no space after
                    number = int(text, 0)
                else:
                    number = int(text) if digits.isdigit() else int(_round(Decimal(text), 0))
            elif isinstance(value, float):
                number = round(value)
            elif isinstance(value, Decimal):
                number = int(_round(value, 0))
            else:
                number = int(value)
            bound = INT_RANGES[kind]
            if not -bound <= number < bound:
                raise EvaluationError(f"could not cast {value!r} to {typ.sql()}: out of range")
            return number
        if kind == "DOUBLE":
            return canonical_float(float(value))
        if kind == "DECIMAL":
            if isinstance(value, bool):  # TRUE is 1, as DuckDB casts it
                value = int(value)
            if isinstance(value, float):
                if not math.isfinite(value) or not double_fits_decimal(value, typ):
                    raise EvaluationError(f"could not cast {value!r} to {typ.sql()}: out "
                                          "of range")
                number = double_to_decimal(value, typ.scale)
            else:
                number = Decimal(str(value)).quantize(Decimal(1).scaleb(-typ.scale),
                                                      context=WIDE_CONTEXT)  # half up
                number = number if number else number.copy_abs()  # no -0.00
            if not number.is_finite() or (
                    number and number.adjusted() >= typ.precision - typ.scale):
                raise EvaluationError(f"could not cast {value!r} to {typ.sql()}: out of range")
            return number
        if kind == "VARCHAR":
            return _varchar(value)
        if kind == "TIMESTAMP" and isinstance(value, dt.date):  # a DATE at its midnight
            return value if isinstance(value, dt.datetime) else _at_midnight(value)
        if kind == "TIMESTAMP" and isinstance(value, str):
            return parse_timestamp(value)
        if kind == "DATE":
            if isinstance(value, dt.datetime):  # a TIMESTAMP's day, as DuckDB casts it
                return value.date()
            return value if isinstance(value, dt.date) else parse_date(str(value))
        if kind == "BOOLEAN":
            if isinstance(value, str):
                return _BOOLEAN_TEXT[value.lower()]
            if isinstance(value, dt.date):  # no number: DuckDB has no such cast
                raise ValueError(f"no cast of {value!r} to BOOLEAN")
            return bool(value)
    except (ValueError, KeyError, ArithmeticError, TypeError) as exc:  # int(date): TypeError
        why = f": {exc}" if isinstance(exc, OutsideDates) else ""
        raise EvaluationError(f"could not cast {value!r} to {typ.sql()}{why}") from exc
    raise UnsupportedError(f"cast to {typ.sql()}")


def cast_value(value: object, typ: SqlType) -> object:
    """``CAST(value AS typ)`` as DuckDB computes it (EvaluationError where it fails)."""
    return _cast(value, typ)


def _try_cast(value, typ: SqlType):
    """TRY_CAST: NULL where CAST fails; a value DuckDB's cast gives and upkeep cannot hold
    (a date past 9999, infinity) is still an EvaluationError, not NULL."""
    try:
        return _cast(value, typ)
    except EvaluationError as exc:
        if isinstance(exc.__cause__, OutsideDates):
            raise
        return None


def _bound(typ: SqlType) -> int:
    """An integer type's bound (its values are ``-bound <= v < bound``); 0 for others."""
    return INT_RANGES[typ.kind] if typ.is_integer else 0


def _null_or(fn):
    def wrapped(*args):
        if any(a is None for a in args):
            return None
        return fn(*args)

    return wrapped


_HELPERS: dict[str, object] = {
    "_div": _div,
    "_nan_compare": _nan_compare,
    "_at_midnight": _at_midnight,
    "_nan": math.nan,
    "_intdiv": _intdiv,
    "_mod": _mod,
    "_in": _in,
    "_in_set": _in_set,
    "_not_distinct": _not_distinct,
    "_fail": _fail,
    "_substring": _substring,
    "_overflow": _overflow,
    "_round": _round,
    "_extract": _extract,
    "_date_diff": _date_diff,
    "_date_plus": _date_plus,
    "_plus_interval": _plus_interval,
    "_truncate": _truncate,
    "_replace": _replace,
    "_days_between": _days_between,
    "_cast": _cast,
    "_upper": _null_or(_upper),
    "_lower": _null_or(_lower),
    "_length": _null_or(len),
    "_abs": _abs,
    "_trim": _trim,
    "_spaces": SPACES,
    "_concat": _null_or(lambda *xs: "".join(map(_text, xs))),
    "_concat_ws": _concat_ws,
    "_decimal": _decimal,
    "_try_cast": _try_cast,
    "_WIDE": WIDE_CONTEXT,
    "Decimal": Decimal,
    "date": dt.date,
}

def _decimal_parts(t: SqlType) -> tuple[int, int]:
    """A numeric type's integer digits and scale as DuckDB's decimal arithmetic counts
    them (an integer type as its digits: INTEGER 10, BIGINT 19)."""
    if t.kind == "DECIMAL":
        return t.precision - t.scale, t.scale
    return _DECIMAL_WIDTHS.get(t.kind, 0), 0


def _modulo_digits(a: SqlType, b: SqlType) -> int:
    """The digits of DuckDB's DECIMAL type for ``a % b``: the larger integer part and the
    larger scale; past 38 DuckDB computes the remainder of the two as DOUBLEs
    (``HUGEINT % DECIMAL(5,2)`` is a DOUBLE)."""
    (ia, sa), (ib, sb) = _decimal_parts(a), _decimal_parts(b)
    return max(ia, ib) + max(sa, sb)


def _literal_typed(node: exp.Expression, typ: SqlType, other: SqlType) -> SqlType:
    """The type of arithmetic operand ``node`` (of type ``typ``) beside one of type
    ``other``: an integer literal, negated or in brackets (:func:`_literals`), is of the
    other side's narrower integer type where its value fits it, as DuckDB binds it
    (``a + 1`` of a TINYINT is a TINYINT, and overflows past 127; ``a + 1000`` an
    INTEGER)."""
    if not (typ.is_integer and other.is_integer) or \
            INTEGER_KINDS.index(other.kind) >= INTEGER_KINDS.index(typ.kind):
        return typ
    (value,) = _literals([node])
    return typ if value is None else integer_literal_type(value, other)


def integer_literal_type(value: int, other: SqlType) -> SqlType:
    """The type DuckDB gives integer literal ``value`` met beside a value of integer type
    ``other``: that type where the value fits it, else the literal's own
    (:func:`literal_value`)."""
    if _fits(value, other):
        return other
    return literal_value(exp.Literal.number(abs(value)))[1]


_ARITH = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*"}
_COMPARE = {exp.EQ: "==", exp.NEQ: "!=", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}


#: the digits of the widest integer upkeep holds (HUGEINT, below 2**127): a literal of more
#: is beyond it and is not converted (Python refuses to convert over 4,300 digits)
HUGEINT_DIGITS = 39


def literal_value(node: exp.Literal) -> tuple[object, SqlType]:
    """A literal's Python value and its type, as DuckDB types it."""
    if node.is_string:
        return node.this, VARCHAR
    text = node.this
    if re.fullmatch(r"\d+", text):
        # beyond: DuckDB's UHUGEINT and BIGNUM (2**127 is -HUGEINT's least)
        value = int(text) if len(text.lstrip("0")) <= HUGEINT_DIGITS else None
        if value is None or value > 2**127:
            raise UnsupportedError(f"the integer literal {text[:50]} (beyond HUGEINT)"
                                   f"{_where(node)}")
        return value, INTEGER if value < 2**31 else BIGINT if value < 2**63 else HUGEINT
    if re.fullmatch(r"\d*\.\d*", text):  # DuckDB: one digit of width per digit written
        width, scale = len(text) - 1, len(text.split(".")[1])
        if width <= 38:
            return Decimal(text), SqlType("DECIMAL", width, scale)
    return float(text), DOUBLE  # 1e400 is inf, as in DuckDB; so are over 38 digits


#: the casts :func:`upkeep.sql.literal` writes for a bound float, date or datetime, in
#: exactly the text it writes (anything else is DuckDB's to cast, in ``_fold``)
_BOUND_TEXT = {
    "DOUBLE": (re.compile(r"-?(?:\d+\.\d+(?:e[-+]\d+)?|\d+e[-+]\d+|inf|nan)", re.ASCII), float,
               DOUBLE),
    "DATE": (re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII), dt.date.fromisoformat, DATE),
    "TIMESTAMP": (re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{6})?", re.ASCII),
                  dt.datetime.fromisoformat, TIMESTAMP),
}


def bound_parameter(node: exp.Expression) -> tuple[object, SqlType] | None:
    """The value and type of a bound parameter's cast (``CAST('0.5' AS DOUBLE)``), read
    here: folding it with DuckDB took ~0.6 ms of every statement that binds one."""
    if not (isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal)
            and node.this.is_string):
        return None
    if node.to.this == exp.DataType.Type.DECIMAL:
        return _bound_decimal(node.this.this, node.to)
    found = _BOUND_TEXT.get(node.to.this.name)
    if found is None or not found[0].fullmatch(node.this.this):
        return None
    try:
        return found[1](node.this.this), found[2]
    except ValueError:  # 2021-02-30: DuckDB's error, from _fold
        return None


def _bound_decimal(text: str, to: exp.DataType) -> tuple[Decimal, SqlType] | None:
    """A Decimal parameter's cast as :func:`upkeep.sql.literal` writes it
    (``CAST('1.50' AS DECIMAL(3,2))``: its digits, at the cast's scale and within its
    width), read without DuckDB; other text is DuckDB's to cast."""
    m = _DECIMAL_TEXT.fullmatch(text)
    if m is None:
        return None
    typ = type_from_sqlglot(to)
    whole, fraction = m.group(1), m.group(2) or ""
    if len(fraction) != typ.scale or len(whole.lstrip("0")) > typ.precision - typ.scale:
        return None
    value = Decimal(text)
    return (value.copy_abs() if not value else value), typ  # a zero has no sign


_DECIMAL_TEXT = re.compile(r"-?(\d+)(?:\.(\d+))?", re.ASCII)


#: the source of a bare column (``r[3]``) or of a tuple of bare columns (``(r[3], r[1], )``)
_COLUMNS = re.compile(r"r\[\d+\]|\((?:r\[\d+\], )+\)")
_COLUMN = re.compile(r"r\[(\d+)\]")


@functools.lru_cache(maxsize=4096)
def _code(src: str):
    """The compiled code of ``lambda r: src``: compiling is most of what a generated
    function costs (~50 us), and a keyed statement run again with other constants generates
    the same source."""
    try:
        return compile(f"lambda r: {src}", "<upkeep expression>", "eval")
    except (SyntaxError, RecursionError, MemoryError):  # Python's parser nests 200 deep
        raise UnsupportedError("an expression nested too deeply to compile (DuckDB "
                               "evaluates it)") from None


#: expressions whose DOUBLE value is the one NaN object already: stored values, literals
#: and what :meth:`ExpressionCompiler._arith` computes
_CANONICAL_DOUBLES = (exp.Column, exp.Literal, exp.Add, exp.Sub, exp.Mul)


class ExpressionCompiler:
    """Turns sqlglot expressions into :class:`Compiled` functions over a :class:`Scope`."""

    def __init__(self, scope: Scope, slots: Callable[[exp.Expression], int | None] | None = None):
        self.scope = scope
        # ``slots`` lets a caller map whole sub-expressions (e.g. aggregates) to row slots.
        self.slots = slots
        self._consts: dict[str, object] = {}
        self._counter = 0

    # -- public ---------------------------------------------------------------
    def compile(self, node: exp.Expression) -> Compiled:
        src, typ = self._valued(node)
        return Compiled(self._function(src), typ, src)

    def compile_condition(self, node: exp.Expression) -> Compiled:
        """A condition that filters rows (WHERE, ON, HAVING): ``row -> bool``, True exactly
        where it is TRUE, evaluated as DuckDB filters (:meth:`_holds`)."""
        src = self._holds(node)
        return Compiled(self._function(src), BOOLEAN, src)

    def compile_tuple(self, nodes: list[exp.Expression]) -> Callable[[tuple], tuple]:
        """``row -> (value of each node, ...)`` as one generated function: a select list or
        grouping key costs one call per row instead of one per column."""
        parts = [self._valued(node)[0] for node in nodes]
        return self._function("(" + "".join(f"{src}, " for src in parts) + ")")

    def compile_filtered_tuple(self, values: list[exp.Expression | int] | None,
                               conditions: list[exp.Expression], nonnull: Sequence[int] = (),
                               equal: Sequence[tuple[int, int]] = ()
                               ) -> Callable[[tuple], tuple | None]:
        """``row -> (each value, ...)`` (an expression, or an int: the row's column at that
        position; the row itself when ``values`` is None) for the rows where every condition
        holds, no column at ``nonnull`` is NULL and the two columns of each pair in
        ``equal`` are equal; None for the others.  One generated function: a one-relation
        block's filter and select list, a join atom's filter-and-project (where a function
        per condition cost one more interpreter frame a row)."""
        body = "r"
        if values is not None:
            parts = [f"r[{v}]" if isinstance(v, int) else self._valued(v)[0] for v in values]
            body = "(" + "".join(f"{src}, " for src in parts) + ")"
        tests = [self._holds(c) for c in conditions]  # each True or False
        tests += [f"r[{k}] is not None" for k in nonnull]
        tests += [f"(r[{a}] == r[{b}] or (r[{a}] != r[{a}] and r[{b}] != r[{b}]))"
                  for a, b in equal]  # NaN = NaN, as DuckDB joins them
        if not tests:
            return self._function(body)
        return self._function(f"{body} if {' and '.join(tests)} else None")

    def _function(self, src: str) -> Callable[[tuple], object]:
        """``lambda r: src`` with the runtime helpers and this compiler's constants (every
        literal is one, so statements that differ only in their constants share the
        compiled code: :func:`_code`).  A bare column, or a tuple of two or more bare
        columns, is an ``operator.itemgetter`` instead: C, where a generated lambda costs an
        interpreter frame per row (about 1k instructions)."""
        columns = _COLUMNS.fullmatch(src)
        if columns is not None:
            positions = [int(k) for k in _COLUMN.findall(src)]
            if src.startswith("r[") or len(positions) > 1:
                return itemgetter(*positions)
        namespace = dict(_HELPERS)
        namespace.update(self._consts)
        return eval(_code(src), namespace)  # noqa: S307 - generated from a typed AST

    def type_of(self, node: exp.Expression) -> SqlType:
        return self._gen(node)[1]

    def _valued(self, node: exp.Expression) -> tuple[str, SqlType]:
        """The code of a value a row, key or sort key holds: a computed DOUBLE's NaN is
        the one NaN object (:func:`~upkeep.types.canonical_float`), as stored values are;
        ``c / 2``, ``c % 2``, ``abs(c)`` or a cast of ``'nan'`` make a new NaN object per
        row, and NaNs that are not one object never meet in a group, a Z-set or a sorted
        list (unequal to each other).  Stored columns, literals and ``+ - *`` (made the
        one NaN by :meth:`_arith`) need no second look."""
        src, typ = self._gen(node)
        if typ.kind != "DOUBLE" or isinstance(unparen(node), _CANONICAL_DOUBLES):
            return src, typ
        z = self._tmp()
        return f"(_nan if ({z} := {src}) != {z} else {z})", typ

    # -- generation -----------------------------------------------------------
    def _const(self, value: object) -> str:
        self._counter += 1
        name = f"_k{self._counter}"
        self._consts[name] = value
        return name

    def _gen(self, node: exp.Expression) -> tuple[str, SqlType]:
        if self.slots is not None:
            slot = self.slots(node)
            if slot is not None:
                return f"r[{slot[0]}]", slot[1]
        if isinstance(node, exp.Paren):
            return self._gen(node.this)
        if isinstance(node, exp.Column):
            if isinstance(node.this, exp.Star):
                raise UnsupportedError("* is only allowed as a whole select list or in COUNT(*)")
            col = self.scope.resolve(node)
            return f"r[{col.slot}]", col.type
        if isinstance(node, AGGREGATE_TYPES):
            raise UnsupportedError(f"aggregate {node.sql()} is not allowed here{_where(node)}")
        if isinstance(node, exp.Boolean):
            return ("True" if node.this else "False"), BOOLEAN
        if isinstance(node, exp.Null):
            return "None", NULLTYPE
        if isinstance(node, exp.Literal):
            value, typ = literal_value(node)
            return self._const(value), typ
        bound = bound_parameter(node)
        if bound is not None:
            return self._const(bound[0]), bound[1]
        if isinstance(node, exp.Collate):  # folded, 'a' COLLATE NOCASE would be plain 'a'
            raise UnsupportedError(f"expression {node.sql()} (Collate) is not supported"
                                   f"{_where(node)}")
        if isinstance(node, exp.Window):  # a row's value depends on the others: no constant
            raise UnsupportedError(f"window function {node.sql()} here{_where(node)}")
        if not any(isinstance(n, exp.Column) for n in node.find_all(exp.Column)) and not any(
            isinstance(n, (*AGGREGATE_TYPES, exp.Window))
            for n in node.find_all(*AGGREGATE_TYPES, exp.Window)
        ):
            return self._fold(node)
        return self._gen_operator(node)

    def _fold(self, node: exp.Expression) -> tuple[str, SqlType]:
        """Evaluate a column-free expression once, with DuckDB, for exact semantics (a
        negated number without it, typed as DuckDB types it)."""
        if (isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal)
                and not node.this.is_string):
            value, typ = literal_value(node.this)
            if typ.is_integer and value <= 2**63:
                return self._const(-value), INTEGER if value <= 2**31 else BIGINT
            if typ.kind == "DOUBLE":
                return self._const(-value), typ
            if not typ.is_integer:  # exact at any width; a DECIMAL zero keeps no sign
                return self._const(value.copy_negate() if value else value), typ
        sql = node.sql(dialect="duckdb")
        try:
            with scratch() as con:
                value, type_name = con.execute(f"SELECT {sql} AS v, typeof({sql})").fetchone()
        except duckdb.Error as exc:
            error = as_error(exc, f"cannot evaluate constant {sql}")
            if not isinstance(error, EvaluationError):
                raise error from exc
            try:  # typed all the same; raised by the rows that evaluate it
                with scratch() as con:
                    type_name = con.execute(f"SELECT typeof({sql})").fetchone()[0]
            except duckdb.Error:
                raise error from exc
            return f"_fail({self._const(str(error))})", type_from_name(type_name)
        if isinstance(value, str) and type_name in ("DATE", "TIMESTAMP"):
            # DuckDB's Python client gives a date outside Python's years 1-9999 as text
            message = (f"{type_name.lower()} {value} is outside the years 1 to 9999 "
                       f"that upkeep's dates hold: {sql}")
            if isinstance(node, exp.Cast) and node.this.is_string:  # a literal
                raise SchemaError(message + _where(node))
            return f"_fail({self._const(message)})", type_from_name(type_name)
        if isinstance(value, dt.datetime):
            value = value.date() if type_name == "DATE" else value
        if type_name == "DATE" and value in (dt.date.max, dt.date.min):
            with scratch() as con:  # DuckDB's Python client gives infinity as 9999-12-31
                if con.execute(f"SELECT isinf({sql})").fetchone()[0]:
                    raise EvaluationError(f"cannot evaluate constant {sql}: an infinite "
                                          "date has no value here")
        typ = type_from_name(type_name)
        return self._const(value), typ

    def _gen_operator(self, node: exp.Expression) -> tuple[str, SqlType]:
        if node.args.get("negate"):  # sqlglot marks NOT LIKE / NOT ILIKE this way
            positive = node.copy()
            positive.set("negate", None)
            return self._gen(exp.Not(this=positive))
        if isinstance(node, (exp.NullSafeEQ, exp.NullSafeNEQ)):
            a, b, _ = self._comparable(node.this, node.expression, "IS NOT DISTINCT FROM")
            test = f"_not_distinct({a}, {b})"
            return (test if isinstance(node, exp.NullSafeEQ) else f"(not {test})"), BOOLEAN
        for cls, op in _ARITH.items():
            if type(node) is cls:
                return self._arith(node, op)
        if isinstance(node, exp.Div):
            (a, ta), (b, tb) = self._numbers(node, node.this, node.expression)
            ta, tb = _literal_typed(node.this, ta, tb), _literal_typed(node.expression, tb, ta)
            if node.args.get("typed") and ta.is_integer and tb.is_integer:
                typ = common_numeric(ta, tb)
                return f"_intdiv({a}, {b}, {_bound(typ)})", typ
            return f"_div({a}, {b})", DOUBLE
        if isinstance(node, exp.IntDiv):
            (a, ta), (b, tb) = self._numbers(node, node.this, node.expression)
            ta, tb = _literal_typed(node.this, ta, tb), _literal_typed(node.expression, tb, ta)
            typ = common_numeric(ta, tb)
            return (f"_intdiv({a}, {b}, {_bound(typ)})",
                    typ if typ.is_integer or typ.kind == "NULL" else DOUBLE)
        if isinstance(node, exp.Mod):
            (a, ta), (b, tb) = self._numbers(node, node.this, node.expression)
            ta, tb = _literal_typed(node.this, ta, tb), _literal_typed(node.expression, tb, ta)
            typ = common_numeric(ta, tb)
            if typ.kind == "DECIMAL" and _modulo_digits(ta, tb) > 38:  # DuckDB: as DOUBLEs
                x, y = self._tmp(), self._tmp()
                return (f"_mod((None if ({x} := {a}) is None else float({x})), "
                        f"(None if ({y} := {b}) is None else float({y})))"), DOUBLE
            if typ.kind == "DECIMAL":
                typ = SqlType("DECIMAL", _modulo_digits(ta, tb), typ.scale)
            return f"_mod({a}, {b}, {_bound(typ)})", typ
        if isinstance(node, exp.Neg):
            ((a, ta),) = self._numbers(node, node.this)
            v = self._tmp()
            if ta.is_integer:  # -(-2**31) does not fit an INTEGER
                return (f"(None if ({v} := {a}) is None else -{v} if {v} != "
                        f"{-INT_RANGES[ta.kind]} else _overflow('negation', 0, {v}, "
                        f"{self._const(ta)}))"), ta
            if ta.kind == "DECIMAL":  # exact: a 38-digit value keeps its digits
                return f"(None if ({v} := {a}) is None else _WIDE.minus({v}))", ta
            return f"(None if ({v} := {a}) is None else -{v})", ta
        for cls, op in _COMPARE.items():
            if type(node) is cls:
                return self._compare(node.this, node.expression, op)
        if isinstance(node, exp.And):
            return self._connective([self._truth(x) for x in _flatten(node, exp.And)],
                                    "False"), BOOLEAN
        if isinstance(node, exp.Or):
            return self._connective([self._truth(x) for x in _flatten(node, exp.Or)],
                                    "True"), BOOLEAN
        if isinstance(node, exp.Not):
            a = self._truth(node.this)
            v = self._tmp()
            return f"(None if ({v} := {a}) is None else not {v})", BOOLEAN
        if isinstance(node, exp.Is):
            a, _ = self._gen(node.this)
            if isinstance(node.expression, exp.Null):
                return f"(({self._tmp()} := {a}) is None)", BOOLEAN
            raise UnsupportedError(f"IS {node.expression.sql()}")
        if isinstance(node, exp.Between):  # numbers compared in the type all three share
            items = [node.this, node.args["low"], node.args["high"]]
            types = [self.type_of(n) for n in items]
            if all(t.is_numeric for t in types) and any(t.kind == "DOUBLE" for t in types):
                items = [n if t.kind == "DOUBLE" else exp.cast(n, "DOUBLE")
                         for n, t in zip(items, types, strict=True)]
            elif _date_among_timestamps(types):  # all TIMESTAMPs, a literal's time kept
                items = [exp.cast(n, "TIMESTAMP") if t.kind == "DATE" else n
                         for n, t in zip(items, types, strict=True)]
            lo = exp.GTE(this=items[0], expression=items[1])
            hi = exp.LTE(this=items[0], expression=items[2])
            return self._gen(exp.And(this=lo, expression=hi))
        if isinstance(node, exp.In):
            if node.args.get("query") or node.args.get("unnest"):
                raise UnsupportedError(f"IN with a subquery{_where(node)}")
            types = [self.type_of(n) for n in (node.this, *node.expressions)]
            if _date_among_timestamps(types):  # all TIMESTAMPs, a literal's time kept
                node = node.copy()
                node.set("this", exp.cast(node.this, "TIMESTAMP"))
            a, ta = self._gen(node.this)
            for option in node.expressions:  # comparable as ``=`` is, or a SchemaError
                self._compare(node.this, option, "==")
            opts, types = zip(*(self._coerce_literal(o, ta) for o in node.expressions),
                              strict=True)
            if ta.is_numeric and all(t.is_numeric or t.kind == "NULL" for t in types):
                common = ta
                for t in types:  # compared in the type of all of them, as ``=`` compares
                    common = common_numeric(common, t) if t.is_numeric else common
                a = self._compared_as(a, ta, common)
                opts = [o if o == "None" else self._folded_as(o, t, common)
                        for o, t in zip(opts, types, strict=True)]
            elif {"DATE", "TIMESTAMP"} <= {ta.kind, *(t.kind for t in types)}:
                # DuckDB compares them all as TIMESTAMPs, a DATE at midnight (as ``=``)
                a = f"_at_midnight({a})" if ta.kind == "DATE" else a
                opts = [f"_at_midnight({o})" if t.kind == "DATE" else o
                        for o, t in zip(opts, types, strict=True)]
            if all(o == "None" or o in self._consts for o in opts):
                values = [None if o == "None" else self._consts[o] for o in opts]
                try:
                    options = frozenset(_NAN if v != v else v for v in values if v is not None)
                except TypeError:  # an unhashable constant: compared one by one
                    pass
                else:
                    return (f"_in_set({a}, {self._const(options)}, {None in values})",
                            BOOLEAN)
            return f"_in({a}, ({', '.join(opts)},))", BOOLEAN
        if isinstance(node, (exp.Like, exp.ILike)):
            a = self._string(node.this, node)  # DuckDB's binder refuses ``1 LIKE '1'``
            pattern = node.expression
            if not (isinstance(pattern, exp.Literal) and pattern.is_string):
                raise UnsupportedError(f"LIKE with a non-constant pattern{_where(node)}")
            matcher = self._const(_like(pattern.this, isinstance(node, exp.ILike)))
            return f"{matcher}({a})", BOOLEAN
        if isinstance(node, exp.Case):
            return self._case(node)
        if isinstance(node, exp.If):
            case = exp.Case(ifs=[exp.If(this=node.this, true=node.args["true"])],
                            default=node.args.get("false"))
            return self._case(case)
        if isinstance(node, (exp.Cast, exp.TryCast)):
            call = "_try_cast" if isinstance(node, exp.TryCast) else "_cast"
            a, have = self._gen(node.this)
            typ = type_from_sqlglot(node.to)
            temporal = ("DATE", "TIMESTAMP")
            if (have.kind in temporal and (typ.is_numeric or typ.kind == "BOOLEAN")) or (
                    typ.kind in temporal and (have.is_numeric or have.kind == "BOOLEAN")):
                raise SchemaError(f"no cast from {have.sql()} to {typ.sql()} (as in DuckDB): "
                                  f"{node.sql()}{_where(node)}")
            return f"{call}({a}, {self._const(typ)})", typ
        if isinstance(node, exp.DPipe):
            a, _ = self._gen(node.this)
            b, _ = self._gen(node.expression)
            return f"_concat({a}, {b})", VARCHAR
        if isinstance(node, exp.ConcatWs):  # the separator text, as DuckDB binds it
            separator, *rest = node.expressions
            parts = [self._string(separator, node), *(self._gen(x)[0] for x in rest)]
            return f"_concat_ws({', '.join(parts)})", VARCHAR
        if isinstance(node, exp.Concat):  # CONCAT skips NULLs (|| does not)
            parts = [self._gen(x)[0] for x in node.expressions]
            return f"_concat_ws('', {', '.join(parts)})", VARCHAR
        if isinstance(node, exp.Upper):
            return f"_upper({self._string(node.this, node)})", VARCHAR
        if isinstance(node, exp.Lower):
            return f"_lower({self._string(node.this, node)})", VARCHAR
        if isinstance(node, exp.Replace):
            args = [self._string(node.args[k], node) for k in ("this", "expression",
                                                                 "replacement")]
            return f"_replace({', '.join(args)})", VARCHAR
        if isinstance(node, exp.Length):
            return f"_length({self._string(node.this, node)})", BIGINT
        if isinstance(node, exp.Trim):
            position = (node.args.get("position") or "BOTH").upper()
            chars = node.args.get("expression")
            args = [self._string(node.this, node),
                    "_spaces" if chars is None else self._string(chars, node),
                    str(position != "TRAILING"), str(position != "LEADING")]
            return f"_trim({', '.join(args)})", VARCHAR
        if isinstance(node, exp.Abs):
            ((a, ta),) = self._numbers(node, node.this)
            return f"_abs({a}, {_bound(ta)})", ta
        if isinstance(node, exp.Substring):
            args = [self._string(node.this, node)]
            for key in ("start", "length"):
                if node.args.get(key) is not None:
                    src, typ = self._gen(node.args[key])
                    if not (typ.is_integer or typ.kind == "NULL"):
                        raise SchemaError(f"substring's {key} must be an integer, not "
                                          f"{typ.sql()}: {node.sql()}{_where(node)}")
                    args.append(src)
            return f"_substring({', '.join(args)})", VARCHAR
        if isinstance(node, exp.Round):
            ((a, ta),) = self._numbers(node, node.this)
            digits = node.args.get("decimals")
            d = self._gen(digits)[0] if digits is not None else "0"
            if ta.kind == "DECIMAL":  # DuckDB: the scale of the digits kept, at most s
                n = _integer_literal(digits) if digits is not None else 0
                typ = ta if n is None else SqlType("DECIMAL", ta.precision,
                                                   min(ta.scale, max(n, 0)))
                return f"_round({a}, {d})", typ
            return f"_round({a}, {d}, {_bound(ta)})", DOUBLE if ta.kind == "DOUBLE" else ta
        if isinstance(node, exp.Coalesce):
            items = self._typed_literals([node.this, *node.expressions])
            gens = [self._gen(x) for x in items]
            typ = value_type([t for _, t in gens], _literals(items))
            srcs = [self._as(s, t, typ, value=True) for s, t in gens]
            src = srcs[-1]
            for s in reversed(srcs[:-1]):
                v = self._tmp()
                src = f"({v} if ({v} := {s}) is not None else {src})"
            return src, typ
        if isinstance(node, exp.Nullif):  # equal as ``=`` compares: NaN = NaN, 1 = 1.0
            a, ta = self._gen(node.this)
            equal, _ = self._compare(node.this, node.expression, "==")
            v = self._tmp()
            return f"(None if ({v} := {a}) is None or {equal} is True else {v})", ta
        if isinstance(node, exp.Extract) or (
                isinstance(node, exp.Anonymous) and str(node.this).lower() in (
                    "date_part", "datepart") and len(node.expressions) == 2
                and isinstance(node.expressions[0], exp.Literal)):
            part, arg = ((node.this.name.lower(), node.expression)
                         if isinstance(node, exp.Extract) else
                         (node.expressions[0].this.lower(), node.expressions[1]))
            return self._part(node, part, arg)
        if type(node) in _PART_FUNCTIONS:
            return self._part(node, _PART_FUNCTIONS[type(node)], node.this)
        if (isinstance(node, exp.Anonymous) and str(node.this).lower() in _PART_NAMES
                and len(node.expressions) == 1):
            return self._part(node, str(node.this).lower(), node.expressions[0])
        if isinstance(node, (exp.TimestampTrunc, exp.DateTrunc)):
            return self._truncate(node)
        if isinstance(node, exp.DateDiff):
            return self._date_diff(node)
        if isinstance(node, (exp.Greatest, exp.Least)):
            items = self._typed_literals([node.this, *node.expressions])
            gens = [self._gen(x) for x in items]
            typ = value_type([t for _, t in gens], _literals(items))
            fn = "max" if isinstance(node, exp.Greatest) else "min"
            srcs = ", ".join(self._as(s, t, typ, value=True) for s, t in gens)
            return f"{self._const(_null_skip(fn))}({srcs})", typ
        raise UnsupportedError(
            f"expression {node.sql()} ({type(node).__name__}) is not supported{_where(node)}")

    def _numbers(self, call: exp.Expression, *args: exp.Expression
                 ) -> list[tuple[str, SqlType]]:
        """The code and type of an arithmetic operator's operands, which must be numbers
        (DuckDB's binder refuses ``'x' / 2`` and ``abs(s)`` the same way)."""
        out = [self._gen(arg) for arg in args]
        for _, typ in out:
            if not (typ.is_numeric or typ.kind == "NULL"):
                raise SchemaError(f"{call.sql()} needs numbers, not {typ.sql()}{_where(call)}")
        return out

    def _holds(self, node: exp.Expression) -> str:
        """The code of ``node`` is TRUE, as DuckDB filters rows by it (a WHERE, a WHEN): an
        AND goes no further than its first part that is not TRUE (a NULL drops the row as
        FALSE does, so ``a > 0 AND 10 % b = 0`` never divides where ``a`` is NULL), an OR
        no further than its first TRUE part; other parts are values (:meth:`_truth`)."""
        if isinstance(node, exp.Paren):
            return self._holds(node.this)
        for cls, word in ((exp.And, " and "), (exp.Or, " or ")):
            if isinstance(node, cls):
                return "(" + word.join(self._holds(x) for x in _flatten(node, cls)) + ")"
        return f"(({self._truth(node)}) is True)"

    def _truth(self, node: exp.Expression) -> str:
        """The code of a condition (WHEN, AND, OR, NOT, HAVING; see :func:`as_condition`)."""
        src, typ = self._gen(node)
        condition = as_condition(node, typ)
        return src if condition is node else self._gen(condition)[0]

    def _string(self, arg: exp.Expression, call: exp.Expression) -> str:
        """The code of a string function's argument, which must be a VARCHAR (DuckDB's
        binder refuses ``trim(1)`` the same way)."""
        src, typ = self._gen(arg)
        if typ.kind not in ("VARCHAR", "NULL"):
            raise SchemaError(f"{type(call).__name__.lower()}() needs a VARCHAR, not "
                              f"{typ.sql()}: {call.sql()}{_where(call)}")
        return src

    def _tmp(self) -> str:
        self._counter += 1
        return f"_t{self._counter}"

    def _arith(self, node: exp.Expression, op: str) -> tuple[str, SqlType]:
        if op in "+-" and _is_interval(node.expression):
            return self._plus_interval(node, node.this, node.expression, op == "-")
        if op == "+" and _is_interval(node.this):
            return self._plus_interval(node, node.expression, node.this, False)
        a, ta = self._gen(node.this)
        b, tb = self._gen(node.expression)
        ta, tb = _literal_typed(node.this, ta, tb), _literal_typed(node.expression, tb, ta)
        if ta.kind == "DATE" or tb.kind == "DATE":
            return self._date_arith(node, op, (a, ta), (b, tb))
        if ta.kind in _TEMPORAL or tb.kind in _TEMPORAL:  # TIMESTAMP - TIMESTAMP, i * INTERVAL
            raise UnsupportedError(f"{op} of {ta} and {tb}{_where(node)} (DuckDB evaluates it)")
        if not (ta.is_numeric or ta.kind == "NULL") or not (tb.is_numeric or tb.kind == "NULL"):
            raise SchemaError(f"cannot apply {op} to {ta} and {tb}{_where(node)}")
        typ = common_numeric(ta, tb)
        if op in "+-" and typ.kind == "DECIMAL":  # DuckDB's width: one digit for the carry
            (ia, sa), (ib, sb) = _decimal_parts(ta), _decimal_parts(tb)
            typ = SqlType("DECIMAL", min(38, max(ia, ib) + max(sa, sb) + 1), max(sa, sb))
        if op == "*" and typ.kind == "DECIMAL":  # scales and widths add (DuckDB)
            scale = sum(t.scale for t in (ta, tb) if t.kind == "DECIMAL")
            widths = [_DECIMAL_WIDTHS.get(t.kind, t.precision) for t in (ta, tb)]
            # DuckDB keeps a product of two 18-digit-or-less decimals in 18 digits (its
            # 64-bit decimals) while the scale fits, and raises past them
            narrow = max(widths) <= 18 < sum(widths) and scale < 18
            typ = SqlType("DECIMAL", 18 if narrow else min(38, sum(widths)), scale)
        a, b = self._as(a, ta, typ), self._as(b, tb, typ)
        x, y, null = self._bind_operands(a, b)
        value = f"{x} {op} {y}"
        if typ.kind == "DECIMAL":
            value = f"_decimal({op!r}, {x}, {y}, {self._const(typ)})"
        elif typ.is_integer:  # DuckDB raises on overflow of the result type
            bound, z = INT_RANGES[typ.kind], self._tmp()
            name = _OPERATION[op]
            value = (f"({z} if {-bound} <= ({z} := {value}) < {bound} else "
                     f"_overflow({name!r}, {x}, {y}, {self._const(typ)}))")
        elif typ.kind == "DOUBLE":  # inf - inf and the like: the one NaN (canonical_float)
            z = self._tmp()
            value = f"({z} if ({z} := {value}) == {z} else _nan)"
        # both operands evaluated, as DuckDB evaluates them: a NULL on the left does not
        # hide an error on the right (``NULL + 10 // 0`` is a division by zero)
        return f"(None if {null} else {value})", typ

    def _part(self, node: exp.Expression, part: str, arg: exp.Expression
              ) -> tuple[str, SqlType]:
        """EXTRACT(part FROM x), date_part('part', x) or the part's own function of a DATE
        or TIMESTAMP: a BIGINT (``epoch`` a DOUBLE), as DuckDB types it."""
        if part not in _PART_OF:
            raise UnsupportedError(f"EXTRACT({part.upper()} ...){_where(node)}")
        a, typ = self._gen(arg)
        if typ.kind not in ("DATE", "TIMESTAMP", "NULL"):
            raise UnsupportedError(f"EXTRACT of a {typ.sql()}{_where(node)}")
        return f"_extract({part!r}, {a})", DOUBLE if part == "epoch" else BIGINT

    def _date_diff(self, node: exp.DateDiff) -> tuple[str, SqlType]:
        """``date_diff('unit', start, end)`` / ``datediff`` of DATEs or TIMESTAMPs: a
        BIGINT (:func:`_date_diff`)."""
        given = node.args.get("unit")
        unit = _DIFF_UNITS.get((given.name if given is not None else "").lower())
        if unit is None:
            raise UnsupportedError(f"date_diff('{given.name if given else ''}', ..)"
                                   f"{_where(node)}")
        end, te = self._gen(node.this)
        start, ts = self._gen(node.expression)
        for typ in (ts, te):
            if typ.kind not in ("DATE", "TIMESTAMP", "NULL"):
                raise UnsupportedError(f"date_diff of a {typ.sql()}{_where(node)}")
        return f"_date_diff({unit!r}, {start}, {end})", BIGINT

    def _truncate(self, node: exp.Expression) -> tuple[str, SqlType]:
        """``date_trunc(part, d)`` on a DATE: the first day of its year, quarter, month or
        (Monday) week; on a TIMESTAMP also its hour, minute, second, millisecond or
        microsecond; typed as DuckDB types it."""
        unit = node.args.get("unit")
        part = (unit.name if unit is not None else "").lower()
        a, typ = self._gen(node.this)
        if typ.kind == "TIMESTAMP" and part in _TRUNCATED_TIME:
            return f"_truncate({part!r}, {a}, True)", TIMESTAMP
        if part not in _TRUNCATED:
            raise UnsupportedError(f"date_trunc('{part}', ..){_where(node)}: year, quarter, "
                                   "month, week and day are kept (of a TIMESTAMP also hour, "
                                   "minute, second, millisecond and microsecond)")
        if typ.kind == "TIMESTAMP":
            return f"_truncate({part!r}, {a}, True)", TIMESTAMP
        if typ.kind not in ("DATE", "NULL"):
            raise UnsupportedError(f"date_trunc of a {typ.sql()}{_where(node)}")
        _, result = self._fold(exp.func("date_trunc", exp.Literal.string(part),
                                        exp.cast(exp.Literal.string("2000-01-01"), "DATE")))
        return f"_truncate({part!r}, {a}, {result.kind == 'TIMESTAMP'})", result

    def _plus_interval(self, node: exp.Expression, value: exp.Expression,
                       interval: exp.Expression, minus: bool) -> tuple[str, SqlType]:
        """DATE or TIMESTAMP +/- a constant INTERVAL: a TIMESTAMP, as in DuckDB (months
        first, the day clamped to the month's last, then days and microseconds)."""
        a, ta = self._gen(value)
        if ta.kind not in ("DATE", "TIMESTAMP", "NULL"):
            raise SchemaError(f"cannot add an interval to {ta}{_where(node)}")
        sql = interval.sql(dialect="duckdb")
        try:
            with scratch() as con:
                months, days, micros = con.execute(
                    "SELECT 12 * datepart('year', i) + datepart('month', i), "
                    "datepart('day', i), datepart('hour', i) * 3600000000 + "
                    "datepart('minute', i) * 60000000 + "
                    f"datepart('microsecond', i) FROM (SELECT ({sql}) AS i)").fetchone()
        except duckdb.Error as exc:
            raise as_error(exc, f"cannot evaluate interval {sql}") from exc
        sign = -1 if minus else 1
        return (f"_plus_interval({a}, {sign * months}, {sign * days}, {sign * micros})",
                TIMESTAMP)

    def _date_arith(self, node: exp.Expression, op: str, left: tuple[str, SqlType],
                    right: tuple[str, SqlType]) -> tuple[str, SqlType]:
        """DuckDB's date arithmetic: DATE +/- an integer number of days is a DATE (also
        INTEGER + DATE), DATE - DATE the days between them (BIGINT)."""
        (a, ta), (b, tb) = left, right
        integral = ("NULL", *INTEGER_KINDS)
        if op == "-" and ta.kind == "DATE" and tb.kind == "DATE":
            return f"_days_between({a}, {b})", BIGINT
        if ta.kind == "DATE" and tb.kind in integral and op in "+-":
            return f"_date_plus({a}, {b}, {op == '-'})", DATE
        if tb.kind == "DATE" and ta.kind in integral and op == "+":
            return f"_date_plus({b}, {a})", DATE
        raise UnsupportedError(f"date arithmetic {node.sql()} ({ta} {op} {tb}; DATE +/- an "
                               f"integer and DATE - DATE are kept){_where(node)}")

    def _as(self, src: str, have: SqlType, want: SqlType, value: bool = False) -> str:
        """Convert a value to the representation of the wanted numeric type.  As an
        operand an integer may stay an int (Decimal op int is exact in Python); as a
        ``value`` (a CASE branch, COALESCE, GREATEST) it becomes the type's own value, as
        DuckDB returns it: 1 in a DECIMAL(6,2) column is Decimal('1.00'), in a DOUBLE 1.0."""
        if want.kind == "DOUBLE" and have.kind == "DECIMAL":
            v = self._tmp()
            return f"(None if ({v} := {src}) is None else float({v}))"
        if value and want.kind == "TIMESTAMP" and have.kind == "DATE":
            return f"_at_midnight({src})"
        if value and want.is_numeric and have.is_numeric and have != want:
            return f"_cast({src}, {self._const(want)})"
        return src

    def _coerce_literal(self, node: exp.Expression, target: SqlType) -> tuple[str, SqlType]:
        """A side of a comparison: a string literal compared with a DATE, TIMESTAMP,
        number or BOOLEAN is cast to that type once, as DuckDB binds it (``a = '1'``,
        ``c > '1.5'``, ``b = 'true'``; text that does not cast is refused, as DuckDB
        refuses it)."""
        src, typ = self._gen(node)
        if target.kind == "DATE" and typ.kind == "VARCHAR" and isinstance(node, exp.Literal):
            try:
                return self._const(coerce_value(node.this, DATE)), DATE
            except ValueError:
                raise SchemaError(f"{node.sql()} is not a DATE{_where(node)}") from None
        if (typ.kind == "VARCHAR" and isinstance(node, exp.Literal) and node.is_string
                and (target.is_numeric or target.kind in ("BOOLEAN", "TIMESTAMP"))):
            try:
                return self._const(cast_value(node.this, target)), target
            except EvaluationError:
                raise SchemaError(f"{node.sql()} cannot be cast to {target.sql()}{_where(node)}"
                                  ) from None
        if target.kind == "DOUBLE" and typ.kind == "DECIMAL":
            return self._as(src, typ, target), DOUBLE
        return src, typ

    def _comparable(self, left: exp.Expression, right: exp.Expression,
                    op: str) -> tuple[str, str, bool]:
        """Both sides' code in the type DuckDB compares them in (numbers in their common
        type, a BIGINT against a DOUBLE as a DOUBLE; a DATE against a TIMESTAMP at
        midnight), and whether a DOUBLE is among them; a SchemaError for types that do not
        compare."""
        ta = self.type_of(left)
        tb = self.type_of(right)
        a, ta = self._coerce_literal(left, tb)
        b, tb = self._coerce_literal(right, ta)
        if ta.is_numeric and tb.is_numeric:
            typ = common_numeric(ta, tb)
            # a constant side is converted once here, not per row
            a, b = self._folded_as(a, ta, typ), self._folded_as(b, tb, typ)
        elif {ta.kind, tb.kind} == {"DATE", "TIMESTAMP"}:  # DuckDB casts the DATE
            a = f"_at_midnight({a})" if ta.kind == "DATE" else a
            b = f"_at_midnight({b})" if tb.kind == "DATE" else b
        elif ta.kind != tb.kind and "NULL" not in (ta.kind, tb.kind):
            raise SchemaError(f"cannot compare {ta} with {tb}: {left.sql()} {op} {right.sql()}")
        return a, b, "DOUBLE" in (ta.kind, tb.kind)

    def _folded_as(self, src: str, have: SqlType, want: SqlType) -> str:
        """:meth:`_compared_as` of a constant, converted now when ``src`` names one."""
        if src in self._consts and want.kind == "DOUBLE" and have.kind != "DOUBLE":
            value = self._consts[src]
            return self._const(None if value is None else float(value))
        return self._compared_as(src, have, want)

    def _connective(self, parts: list[str], decides: str) -> str:
        """AND (``decides`` False) / OR (True) of three-valued parts as a value (a select
        list's; a filtering condition is :meth:`_holds`), left to right and no further
        than the first part that decides it (``i > 100 AND b * 2 > 0`` computes ``b * 2``
        only where ``i > 100`` holds); otherwise NULL if a part is NULL."""
        temps = [self._tmp() for _ in parts]
        undecided = "True" if decides == "False" else "False"  # every part the other way
        src = f"(None if ({' or '.join(f'{t} is None' for t in temps)}) else {undecided})"
        for t, part in reversed(list(zip(temps, parts, strict=True))):
            src = f"({decides} if ({t} := {part}) is {decides} else {src})"
        return src

    def _compared_as(self, src: str, have: SqlType, want: SqlType) -> str:
        """A number as compared in ``want``: as a DOUBLE when ``want`` is one (DuckDB
        compares 2^53 + 1 = 2^53::DOUBLE as equal; Python compares an int exactly)."""
        if want.kind == "DOUBLE" and have.kind != "DOUBLE":
            v = self._tmp()
            return f"(None if ({v} := {src}) is None else float({v}))"
        return self._as(src, have, want)

    def _compare(self, left: exp.Expression, right: exp.Expression, op: str) -> tuple[str, SqlType]:
        a, b, double = self._comparable(left, right, op)
        x, y, null = self._bind_operands(a, b)
        test = f"{x} {op} {y}"
        if double:  # DuckDB: NaN = NaN, NaN > numbers
            test = f"({test} if {x} == {x} and {y} == {y} else _nan_compare({x}, {y}, {op!r}))"
        return f"(None if {null} else {test})", BOOLEAN

    def _bind_operands(self, a: str, b: str) -> tuple[str, str, str]:
        """``(x, y, null)`` for a binary operator's operands ``a`` and ``b``: the names of
        their values, and the code that binds them and is true where either is NULL.  Both
        are evaluated, left first, as DuckDB does (a NULL on the left hides no error on the
        right: ``NULL + 10 // 0`` is a division by zero).  A non-NULL constant is its own
        name with nothing to test: ``c > DATE '1995-03-15'`` tests one operand a row."""
        names, tests = [], []
        for src in (a, b):
            if src in self._consts and self._consts[src] is not None:
                names.append(src)
                continue
            t = self._tmp()
            names.append(t)
            tests.append(f"(({t} := {src}) is None)")
        return names[0], names[1], " | ".join(tests) or "False"

    def _typed_literals(self, items: list[exp.Expression]) -> list[exp.Expression]:
        """COALESCE's, GREATEST's or LEAST's values with each string literal cast to the
        type the other values share when that is not text (``COALESCE(ts, '2024-01-01')``
        is a TIMESTAMP, ``COALESCE(n, '5')`` an INTEGER), as DuckDB binds them; where the
        text does not cast, the rows that reach it fail, as other constants do."""
        literal = [isinstance(x, exp.Literal) and x.is_string for x in items]
        if not any(literal) or all(literal):
            return items
        others = [self.type_of(x) for x, lit in zip(items, literal, strict=True) if not lit]
        target = value_type(others, _literals(
            [x for x, lit in zip(items, literal, strict=True) if not lit]))
        if target.kind in ("VARCHAR", "NULL"):
            return items
        return [exp.Cast(this=x, to=exp.DataType.build(target.sql(), dialect="duckdb"))
                if lit else x for x, lit in zip(items, literal, strict=True)]

    def _case(self, node: exp.Case) -> tuple[str, SqlType]:
        subject = node.this
        branches = []
        values = []
        ifs = node.args.get("ifs") or []
        default = node.args.get("default")
        # a text literal among the results takes the others' type, as in COALESCE
        typed = self._typed_literals([cond.args["true"] for cond in ifs]
                                     + ([default] if default is not None else []))
        if default is not None:
            default = typed.pop()
        for cond, then in zip(ifs, typed, strict=True):
            when = cond.this
            if subject is not None:
                when = exp.EQ(this=subject, expression=when)
            branches.append((self._holds(when), self._gen(then)))
            values.append(then)
        dflt = self._gen(default) if default is not None else ("None", NULLTYPE)
        # DuckDB folds the ELSE's type first, then each THEN's
        typ = value_type([dflt[1], *(t for _, (_, t) in branches)],
                         _literals([default if default is not None else exp.null(), *values]))
        src = self._as(dflt[0], dflt[1], typ, value=True)
        for when, (then, t) in reversed(branches):
            src = f"({self._as(then, t, typ, value=True)} if {when} else {src})"
        return src, typ


def as_condition(node: exp.Expression, typ: SqlType) -> exp.Expression:
    """``node`` (of type ``typ``) as a BOOLEAN condition, as DuckDB casts it: a number is
    true when it is not zero; a string, date or any other value is refused.  The one rule
    for WHERE / ON (the binder rewrites them) and WHEN, AND, OR, NOT, HAVING (compiled)."""
    if typ.kind in ("BOOLEAN", "NULL"):
        return node
    if typ.is_numeric:
        return exp.NEQ(this=exp.Paren(this=node), expression=exp.Literal.number(0))
    raise SchemaError(f"a condition must be a BOOLEAN, not {typ.sql()}: "
                      f"{node.sql()}{_where(node)}")


def _null_skip(fn_name: str) -> Callable[..., object]:
    """GREATEST / LEAST: NULLs skipped, NaN above every number (as DuckDB orders it,
    whatever the order of the arguments)."""
    fn = max if fn_name == "max" else min

    def pick(*xs):
        vals = [x for x in xs if x is not None]
        return fn(vals, key=nan_order) if vals else None

    return pick


def _flatten(node: exp.Expression, cls: type) -> list[exp.Expression]:
    """The operands of a chain of ``cls`` (AND or OR), left to right, brackets around a
    link dropped; iteratively, since a generated ``a OR b OR ...`` nests one level a term."""
    operands: list[exp.Expression] = []
    todo = [node]
    while todo:
        node = todo.pop()
        if isinstance(node, exp.Paren) and isinstance(node.this, cls):
            node = node.this
        if isinstance(node, cls):
            todo += (node.expression, node.this)
        else:
            operands.append(node)
    return operands


#: a comparison with its sides swapped: ``a < b`` is ``b > a``
FLIPPED_COMPARISON = {exp.LT: exp.GT, exp.GT: exp.LT, exp.LTE: exp.GTE, exp.GTE: exp.LTE,
                      exp.EQ: exp.EQ, exp.NEQ: exp.NEQ}


def unparen(node: exp.Expression) -> exp.Expression:
    """``node`` without the brackets around it."""
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def conjuncts(node: exp.Expression | None) -> list[exp.Expression]:
    """Split a WHERE/ON condition into its AND-ed parts."""
    if node is None:
        return []
    return _flatten(node, exp.And)


def value_type(types: list[SqlType], literals: list[int | None] | None = None) -> SqlType:
    """:func:`common_type` of the values one expression picks from (CASE, COALESCE,
    GREATEST, LEAST), where a DATE meets a TIMESTAMP as a TIMESTAMP, as DuckDB casts it.
    ``literals``: each value's integer if it is written as one (``0``, ``-1``)."""
    kinds = {t.kind for t in types}
    if "DATE" in kinds and "TIMESTAMP" in kinds and kinds <= {"DATE", "TIMESTAMP", "NULL"}:
        return SqlType("TIMESTAMP")
    return common_type(types, literals)


def _literals(nodes: list[exp.Expression]) -> list[int | None]:
    """Each node's integer if it is written as one, as DuckDB reads one: ``0``, ``(0)``,
    ``-1``, ``-(1)``, ``- -1``."""
    def value(n: exp.Expression) -> int | None:
        if isinstance(n, exp.Paren):
            return value(n.this)
        if isinstance(n, exp.Neg):
            v = value(n.this)
            return None if v is None else -v
        if isinstance(n, exp.Literal) and not n.is_string and n.this.isdigit():
            return int(n.this)
        return None

    return [value(n) for n in nodes]


def _fits(value: int, t: SqlType) -> bool:
    return t.is_integer and -INT_RANGES[t.kind] <= value < INT_RANGES[t.kind]


def common_type(types: list[SqlType], literals: list[int | None] | None = None) -> SqlType:
    """The type values of ``types`` share (a CASE's branches, ELSE first; a UNION's
    column), folded left to right as DuckDB folds it: numbers by :func:`max_numeric`, an
    integer literal (``literals``) taking the integer type it meets where its value fits
    (``COALESCE(s, 0)`` of a SMALLINT is a SMALLINT; a literal meeting a NULL first is of
    its own type), else the one kind (NULL fits any); SchemaError for kinds DuckDB would
    cast implicitly (upkeep casts only where written)."""
    out, literal, started = NULLTYPE, None, False
    for i, t in enumerate(types):
        value = literals[i] if literals is not None else None
        if t.kind == "NULL":
            started, literal = True, None
        elif out.kind == "NULL":
            out, literal = t, None if started else value
            started = True
        elif out.is_numeric and t.is_numeric:
            if literal is not None and value is None and _fits(literal, t):
                out = t  # the literal so far fits the integer type it meets
            elif not (value is not None and literal is None and _fits(value, out)):
                out = max_numeric(out, t)
            literal = None
        elif t.kind != out.kind:
            raise SchemaError(f"incompatible types {out} and {t}")
    return out


def column_refs(node: exp.Expression) -> list[exp.Column]:
    """All column references in an expression (not descending into subqueries)."""
    return [c for c in node.find_all(exp.Column) if not isinstance(c.this, exp.Star)]
