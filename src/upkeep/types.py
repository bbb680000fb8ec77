"""SQL column types, their Python values, and validation of incoming rows.

Values are plain Python objects so that rows are hashable tuples: ``int`` for the integer
types, ``float`` for DOUBLE, ``decimal.Decimal`` for DECIMAL, ``str``, ``datetime.date``,
``datetime.datetime`` (without a zone) for TIMESTAMP, ``bool`` and ``None`` for NULL.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from array import array
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation

import pyarrow as pa
from sqlglot import exp

from .errors import SchemaError, UnsupportedError

INTEGER_KINDS = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT")
INT_RANGES = {
    "TINYINT": 2**7,
    "SMALLINT": 2**15,
    "INTEGER": 2**31,
    "BIGINT": 2**63,
    "HUGEINT": 2**127,
}


# room for any DECIMAL(38, s) while quantizing; ties round away from zero, as DuckDB's
# casts to DECIMAL do (1.005 -> 1.01 in a DECIMAL(10,2), not Python's half-even 1.00)
WIDE_CONTEXT = Context(prec=80, rounding=ROUND_HALF_UP)


@dataclass(frozen=True)
class SqlType:
    """A column type: ``kind`` is one of INTEGER_KINDS, DOUBLE, DECIMAL, VARCHAR, DATE,
    TIMESTAMP, BOOLEAN (what tables hold), or another type DuckDB gives a computed value."""

    kind: str
    precision: int = 0
    scale: int = 0

    @property
    def is_integer(self) -> bool:
        return self.kind in INTEGER_KINDS

    @property
    def is_numeric(self) -> bool:
        return self.is_integer or self.kind in ("DOUBLE", "DECIMAL")

    def sql(self) -> str:
        if self.kind == "DECIMAL":
            return f"DECIMAL({self.precision},{self.scale})"
        return self.kind

    def arrow(self) -> pa.DataType | None:
        if self.kind == "NULL":
            return pa.null()
        if self.kind == "TIMESTAMP":
            return pa.timestamp("us")
        return {
            "TINYINT": pa.int8(),
            "SMALLINT": pa.int16(),
            "INTEGER": pa.int32(),
            "BIGINT": pa.int64(),
            "HUGEINT": pa.decimal128(38, 0),
            "DOUBLE": pa.float64(),
            "VARCHAR": pa.string(),
            "DATE": pa.date32(),
            "BOOLEAN": pa.bool_(),
            "TIME": pa.time64("us"),
            "INTERVAL": pa.duration("us"),
            "BLOB": pa.binary(),
            "UUID": pa.string(),
        }.get(self.kind) or (pa.decimal128(self.precision, self.scale)
                             if self.kind == "DECIMAL" else None)  # None: let Arrow infer

    def __str__(self) -> str:
        return self.sql()


INTEGER = SqlType("INTEGER")
BIGINT = SqlType("BIGINT")
HUGEINT = SqlType("HUGEINT")
DOUBLE = SqlType("DOUBLE")
VARCHAR = SqlType("VARCHAR")
DATE = SqlType("DATE")
TIMESTAMP = SqlType("TIMESTAMP")
BOOLEAN = SqlType("BOOLEAN")
NULLTYPE = SqlType("NULL")

TYPE_NAMES = {
    "TINYINT": "TINYINT",
    "SMALLINT": "SMALLINT",
    "INT": "INTEGER",
    "INTEGER": "INTEGER",
    "BIGINT": "BIGINT",
    "HUGEINT": "HUGEINT",
    "INT128": "HUGEINT",
    "DOUBLE": "DOUBLE",
    "DECIMAL": "DECIMAL",
    "VARCHAR": "VARCHAR",
    "CHAR": "VARCHAR",
    "TEXT": "VARCHAR",
    "NCHAR": "VARCHAR",
    "NVARCHAR": "VARCHAR",
    "DATE": "DATE",
    "TIMESTAMPNTZ": "TIMESTAMP",  # sqlglot's TIMESTAMP: microseconds, without a zone
    "TIMESTAMP": "TIMESTAMP",  # as sqlglot builds one outside a dialect
    "BOOLEAN": "BOOLEAN",
}


def type_from_sqlglot(node: exp.DataType) -> SqlType:
    """Map a parsed sqlglot type to an upkeep type; unsupported types raise UnsupportedError."""
    name = node.this.name if hasattr(node.this, "name") else str(node.this)
    kind = TYPE_NAMES.get(name.upper())
    spelled = node.sql(dialect="duckdb")  # TIMESTAMP, not sqlglot's TIMESTAMPNTZ
    if name.upper() in ("FLOAT", "REAL"):
        raise UnsupportedError(
            f"column type {spelled} (a 4-byte float) is not supported; use DOUBLE")
    if kind is None:
        raise UnsupportedError(f"column type {spelled} is not supported")
    if kind == "DECIMAL":
        params = [int(p.this.this) if isinstance(p.this, exp.Literal) else int(p.name)
                  for p in node.expressions]
        # DECIMAL alone is DECIMAL(18,3) and DECIMAL(p) is DECIMAL(p,0), as in DuckDB
        precision = params[0] if params else 18
        scale = params[1] if len(params) > 1 else (0 if params else 3)
        if not 1 <= precision <= 38 or not 0 <= scale <= precision:
            raise SchemaError(f"column type {node.sql()}: a DECIMAL's width is 1 to 38 and "
                              "its scale 0 to the width (as in DuckDB)")
        return SqlType("DECIMAL", precision, scale)
    if kind == "TIMESTAMP" and node.expressions and node.expressions[0].name != "6":
        # DuckDB reads TIMESTAMP(3) as TIMESTAMP_MS, TIMESTAMP(0) as TIMESTAMP_S: other
        # precisions than the microseconds a TIMESTAMP holds
        raise UnsupportedError(f"column type {spelled} (not microseconds) is not supported")
    return SqlType(kind)


def canonical_float(value: float) -> float:
    """``value``, with every NaN replaced by the one object ``math.nan``, and ``-0.0`` by
    ``0.0``.  Python's NaNs are unequal to each other and hash by identity, so rows holding
    two NaN objects would never merge in a Z-set or a dict; DuckDB treats NaN as one value,
    equal to itself.  ``-0.0`` equals ``0.0`` (in Python and DuckDB), and a table stores it
    as ``0.0`` (:mod:`upkeep.row_store`): a row must read back as it went in."""
    return value + 0.0 if value == value else math.nan


def double_to_decimal(value: float, scale: int) -> Decimal:
    """A DOUBLE cast to a DECIMAL of ``scale`` as DuckDB casts it: scaled in floating
    point, then rounded half away from zero (0.285 -> 0.28, as 28.499999... is; 1.685 ->
    1.69), all 38 digits kept, and no negative zero.  Neither the float's exact binary
    value nor its shortest text gives DuckDB's digits on every value."""
    scaled = Decimal(value * 10.0 ** scale).quantize(1, rounding=ROUND_HALF_UP,
                                                     context=WIDE_CONTEXT)
    return scaled.scaleb(-scale, context=WIDE_CONTEXT) if scaled else Decimal(0).scaleb(-scale)


def double_fits_decimal(value: float, typ: SqlType) -> bool:
    """Whether a DOUBLE is inside a DECIMAL's range, checked on the double as DuckDB checks
    it (1.0 is outside DECIMAL(38,38), though scaling it rounds to 0.999...)."""
    return abs(value) < 10.0 ** (typ.precision - typ.scale)


def coerce_value(value: object, typ: SqlType) -> object:
    """Validate and normalise one value for a column of type ``typ``; raise ValueError if bad."""
    if value is None:
        return None
    kind = typ.kind
    if typ.is_integer:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            elif (isinstance(value, Decimal) and value.is_finite()
                  and value == value.to_integral_value()):  # 1.0, not 1.5 (docs/sql.md)
                if value.adjusted() >= 40:  # beyond every integer kind: not expanded
                    raise ValueError(f"{value} is out of range for {kind}")
                value = int(value)
            elif hasattr(value, "__index__") and not isinstance(value, bool):
                value = int(value)  # numpy integers
            else:
                raise ValueError(f"expected {kind}, got {value!r}")
        elif type(value) is not int:
            value = int(value)  # an IntEnum member: its number, as every engine stores it
        bound = INT_RANGES[kind]
        if not -bound <= value < bound:
            raise ValueError(f"{format_value(value)} is out of range for {kind}")
        return value
    if kind == "DOUBLE":
        if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
            if hasattr(value, "__float__") and not isinstance(value, (str, bool)):
                return canonical_float(float(value))
            raise ValueError(f"expected DOUBLE, got {value!r}")
        try:
            return canonical_float(float(value))
        except OverflowError:
            raise ValueError(f"{value!r} is out of range for DOUBLE") from None
    if kind == "DECIMAL":  # text is no number ('7'): the codecs read a DECIMAL's digits
        if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
            raise ValueError(f"expected {typ.sql()}, got {value!r}")
        try:
            if isinstance(value, float) and math.isfinite(value):
                if not double_fits_decimal(value, typ):
                    raise ValueError(f"{value!r} does not fit {typ.sql()}")
                dec = double_to_decimal(value, typ.scale)
            else:
                dec = Decimal(str(value)) if not isinstance(value, Decimal) else value
            if not dec.is_finite():  # NaN and Infinity have no DECIMAL value
                raise ValueError(f"expected {typ.sql()}, got {value!r}")
            quantum = Decimal(1).scaleb(-typ.scale)
            dec = dec.quantize(quantum, context=WIDE_CONTEXT)  # DECIMAL(38, s) has > 28 digits
            if not dec:
                dec = dec.copy_abs()  # -0.00 is 0.00, as DuckDB stores it
        except InvalidOperation as exc:
            raise ValueError(f"expected {typ.sql()}, got {value!r}") from exc
        if len(dec.as_tuple().digits) > typ.precision and dec != 0:
            raise ValueError(f"{value!r} does not fit {typ.sql()}")
        return dec
    if kind == "VARCHAR":
        if not isinstance(value, str):
            raise ValueError(f"expected VARCHAR, got {value!r}")
        if type(value) is not str:
            value = str.__str__(value)  # numpy's str_, a StrEnum member: the text itself
        if not is_unicode(value):
            raise ValueError(f"VARCHAR must be valid Unicode, got {value!r} (a lone "
                             "surrogate)")
        return value
    if kind in ("DATE", "TIMESTAMP"):
        if type(value).__name__ == "NaTType":  # pandas' missing time: NULL, as DuckDB reads it
            return None
        return _coerce_temporal(value, kind)
    if kind == "BOOLEAN":
        if not isinstance(value, bool):
            raise ValueError(f"expected BOOLEAN, got {value!r}")
        return value
    raise ValueError(f"unknown type {kind}")


_EPOCH = dt.datetime(1970, 1, 1)
_MICROSECOND = dt.timedelta(microseconds=1)


def epoch_microseconds(v: dt.date) -> int:
    """A date's midnight or a timestamp as microseconds since 1970-01-01 (Arrow's and the
    row store's count; the arithmetic of quantiles, EXTRACT(epoch) and date_diff)."""
    if not isinstance(v, dt.datetime):
        v = dt.datetime(v.year, v.month, v.day)
    return (v - _EPOCH) // _MICROSECOND


def plain_datetime(value: dt.datetime) -> dt.datetime:
    """Python's own ``datetime`` of a subclass's value (a pandas ``Timestamp``), its
    nanoseconds rounded to the nearest microsecond (half up), as DuckDB 2.0 reads them."""
    plain = dt.datetime(value.year, value.month, value.day, value.hour, value.minute,
                        value.second, value.microsecond)
    if getattr(value, "nanosecond", 0) >= 500:
        plain += dt.timedelta(microseconds=1)
    return plain


def _coerce_temporal(value: object, kind: str) -> dt.date:
    """A DATE (a datetime loses its time) or a TIMESTAMP (a date is its midnight), also
    from text as DuckDB reads it; a subclass (pandas' ``Timestamp``) becomes Python's own
    value, nanoseconds dropped as DuckDB drops them."""
    as_date = kind == "DATE"
    if isinstance(value, dt.datetime):
        if value.utcoffset() is not None:  # no type holds a zone: which day is it?
            raise ValueError(f"expected {kind}, got {value!r}: a datetime with a time zone "
                             "(give it in UTC without one)")
        if as_date:
            return dt.date(value.year, value.month, value.day)
        if type(value) is not dt.datetime:
            return plain_datetime(value)
        return value
    if isinstance(value, dt.date):
        if as_date:
            return value if type(value) is dt.date else dt.date(value.year, value.month,
                                                                   value.day)
        return dt.datetime(value.year, value.month, value.day)
    if isinstance(value, str):
        return parse_date(value) if as_date else parse_timestamp(value)
    raise ValueError(f"expected {kind}, got {value!r}")


# DuckDB's text for a DATE: year-month-day split by '-' or '/' (the same twice), one or
# two digit months and days, optionally a time of day and a zone after it, which it drops
_DATE_TEXT = re.compile(
    r"\s*(\d{1,6})([-/])(\d{1,2})\2(\d{1,2})"
    r"(?:(?:T| +)(\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d*))?)?"
    r"\s*(?:Z|[+-]\d{1,2}(?::?\d{2}(?::?\d{2})?)?|[A-Za-z][A-Za-z_/+-]*)?)?\s*",
    re.ASCII)  # digits 0-9 only, as DuckDB reads them (not '٢٠٢٤')


class OutsideDates(ValueError):
    """A date DuckDB holds and Python's dates do not: infinity, years 0 or past 9999."""


def parse_date(text: str) -> dt.date:
    """A DATE from text as DuckDB reads it (``'2020-1-31'``, ``'2020/01/31'``,
    ``'2020-01-31 10:00'``, ``'epoch'``), not as Python's ``fromisoformat`` does (which
    also reads week dates and ``'20200131'``); ``'infinity'`` (``'inf'``) and a date before
    Christ (``'-2024-01-01'``) have no Python date, so they are refused (OutsideDates, which
    TRY_CAST raises too) rather than held as 9999-12-31 or read as NULL."""
    date, time = _parse_temporal(text, "DATE")
    if time is not None and time != (24, 0, 0, 0) and not (
            time[0] < 24 and time[1] < 60 and time[2] < 60):
        raise ValueError(f"expected DATE, got {text!r}: time of day out of range")
    return date


def parse_timestamp(text: str) -> dt.datetime:
    """A TIMESTAMP from text as DuckDB reads it: a date as :func:`parse_date` reads one,
    then optionally a time of day ``H:M[:S[.fraction]]`` after a space or ``T``, its
    fraction cut to microseconds, ``24:00:00`` the next day's midnight, and a zone or
    offset, which DuckDB drops (``'2020-01-01 10:00+02'`` is 10:00); ``'epoch'``. A date
    followed by spaces and no time is refused, as DuckDB refuses it."""
    date, time = _parse_temporal(text, "TIMESTAMP")
    if time is None:
        if text[-1:].isspace() and text.strip().lower() != "epoch":
            # DuckDB reads a space after a date as the start of a time of day
            raise ValueError(f"expected TIMESTAMP, got {text!r}: a date and spaces")
        return dt.datetime(date.year, date.month, date.day)
    hour, minute, second, micros = time
    if (hour, minute, second, micros) == (24, 0, 0, 0) and date < dt.date.max:
        date += dt.timedelta(days=1)
        hour = 0
    if not (hour < 24 and minute < 60 and second < 60):
        raise ValueError(f"expected TIMESTAMP, got {text!r}: time of day out of range")
    return dt.datetime(date.year, date.month, date.day, hour, minute, second, micros)


def _parse_temporal(text: str, kind: str) -> tuple[dt.date, tuple[int, int, int, int] | None]:
    """The date of DuckDB's text for a DATE or TIMESTAMP (``kind``, for the messages) and
    its time of day (hours, minutes, seconds, microseconds), if it has one."""
    found = _DATE_TEXT.fullmatch(text)
    if found is None:
        word = text.strip(" \t\n\r\f\v").lower()  # ASCII spaces only, as DuckDB
        if word == "epoch":
            return dt.date(1970, 1, 1), None
        if text.lstrip(" \t\n\r\f\v").lower() in ("inf", "-inf", "infinity", "-infinity"):
            raise OutsideDates(f"expected {kind}, got {text!r}: an infinite "
                               f"{kind.lower()} has no value here")
        before_christ = word.removesuffix(" (bc)") if word.endswith(" (bc)") else (
            word[1:] if word.startswith("-") else None)  # DuckDB: '-2024-01-01', '.. (BC)'
        if before_christ is not None and _DATE_TEXT.fullmatch(before_christ):
            raise OutsideDates(f"expected {kind}, got {text!r}: a date before Christ has no "
                               "value here")
        raise ValueError(f"expected {kind}, got {text!r}")
    year, _, month, day, hour, minute, second, fraction = found.groups()
    year = int(year)
    try:  # a year past 9999 checked on one of the same leap-ness (they repeat every 400)
        date = dt.date(year if 0 < year <= 9999 else 2000 + year % 400, int(month), int(day))
    except ValueError:
        raise ValueError(f"expected {kind}, got {text!r}: out of range") from None
    if date.year != year:
        raise OutsideDates(f"expected {kind}, got {text!r}: a date outside the years 1 to "
                           "9999 has no value here")
    if hour is None:
        return date, None
    micros = int((fraction or "")[:6].ljust(6, "0"))
    return date, (int(hour), int(minute), int(second or 0), micros)


def format_value(v: object) -> str:
    """A value as SQL would print it: strings quoted, dates and decimals bare, NULL."""
    if v is None:
        return "NULL"
    if isinstance(v, str):
        if not is_unicode(v):  # a lone surrogate would break any terminal or file
            v = v.encode("utf-8", "backslashreplace").decode("utf-8")
        return "'" + v.replace("'", "''") + "'"
    if isinstance(v, (dt.date, Decimal)):
        return str(v)
    if type(v) is int and v.bit_length() > 13_000:  # Python prints at most 4,300 digits
        return f"an integer of about {v.bit_length() * 0.30103:.0f} digits"
    return repr(v)


def format_row(row: object) -> str:
    """A row for error messages: ``(1, 'x', 2024-01-01, NULL)``."""
    if isinstance(row, (tuple, list)):
        return "(" + ", ".join(format_value(v) for v in row) + ")"
    return repr(row)


# how RowCheck.valid tests a column's value (RowCheck.kinds)
_CHECK_SMALL_INT = 0  # an int within the kind's bounds, all within 64 bits
_CHECK_HUGE_INT = 1  # an int within HUGEINT's bounds
_CHECK_TEXT = 2
_CHECK_DOUBLE = 3
_CHECK_BOOLEAN = 4
_CHECK_DATE = 5
_CHECK_DECIMAL = 6  # also every other kind (NULL), whose values all fail it
_CHECK_TIMESTAMP = 7  # a datetime without a zone
_HUGE_BOUND = INT_RANGES["HUGEINT"]
_DATE = dt.date
_DATETIME = dt.datetime
_NAN, _copysign = math.nan, math.copysign


class RowCheck:
    """A test that a row is a tuple already holding valid Python values for every column;
    rows that fail it go through :func:`coerce_row` (which converts or names the error).

    One loop over the columns, each tested by its kind code (this module is compiled, and
    ``types.pxd`` makes this an extension type whose codes and integer bounds are C arrays:
    a line item is checked in 1.2k instructions, where a loop per kind over Python tuples
    of columns took 5.8k)."""

    def __init__(self, columns: list[tuple[str, SqlType]]):
        kinds, lows, highs = array("i"), array("q"), array("q")
        for _, t in columns:
            bound = INT_RANGES[t.kind] if t.is_integer and t.kind != "HUGEINT" else 1
            if t.kind == "HUGEINT":
                kind = _CHECK_HUGE_INT
            elif t.is_integer:
                kind = _CHECK_SMALL_INT
            else:
                kind = {"VARCHAR": _CHECK_TEXT, "DOUBLE": _CHECK_DOUBLE,
                        "BOOLEAN": _CHECK_BOOLEAN, "DATE": _CHECK_DATE,
                        "TIMESTAMP": _CHECK_TIMESTAMP}.get(t.kind, _CHECK_DECIMAL)
            kinds.append(kind)
            lows.append(-bound)
            highs.append(bound - 1)  # inclusive: BIGINT's 2**63 - 1 is a C long long
        self.width = len(columns)
        self.kinds, self.lows, self.highs = kinds, lows, highs
        self.precisions = tuple(t.precision for _, t in columns)
        self.scales = tuple(t.scale for _, t in columns)

    def valid(self, r: object) -> bool:
        if type(r) is not tuple or len(r) != self.width:
            return False
        row = r
        for k in range(self.width):
            v = row[k]
            if v is None:
                continue
            kind = self.kinds[k]
            if kind == _CHECK_SMALL_INT:
                if type(v) is not int:
                    return False
                try:
                    small = v  # a C long long when compiled: OverflowError beyond 64 bits
                except OverflowError:
                    return False
                if not self.lows[k] <= small <= self.highs[k]:
                    return False
            elif kind == _CHECK_TEXT:  # ASCII is valid Unicode; the rest is checked
                if type(v) is not str:
                    return False
                text = v
                if not (text.isascii() or is_unicode(text)):
                    return False
            elif kind == _CHECK_DOUBLE:  # a NaN other than math.nan, and -0.0, are made canonical
                if type(v) is not float:
                    return False
                x = v
                if (x != x and v is not _NAN) or (x == 0.0 and _copysign(1.0, x) < 0):
                    return False
            elif kind == _CHECK_DATE:
                if type(v) is not _DATE:
                    return False
            elif kind == _CHECK_TIMESTAMP:
                if type(v) is not _DATETIME or v.tzinfo is not None:
                    return False
            elif kind == _CHECK_BOOLEAN:
                if type(v) is not bool:
                    return False
            elif kind == _CHECK_HUGE_INT:
                if type(v) is not int or not -_HUGE_BOUND <= v < _HUGE_BOUND:
                    return False
            elif (type(v) is not Decimal or (not v and v.is_signed())  # (and not -0, made 0)
                  or not _decimal_fits(v, self.precisions[k], self.scales[k])):
                return False  # a DECIMAL already of the column's scale and precision
        return True


def is_unicode(text: str) -> bool:
    """Whether ``text`` has no lone surrogate (what UTF-8, and so DuckDB, cannot hold)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _decimal_fits(v: Decimal, precision: int, scale: int) -> bool:
    t = v.as_tuple()
    return t.exponent == -scale and len(t.digits) <= precision


def coerce_row(row: object, columns: list[tuple[str, SqlType]], table: str, index: int,
               kind: str = "table") -> tuple:
    """Validate one row against a table schema (a view's, with ``kind="view"``);
    SchemaError names the table, row and index."""
    if isinstance(row, dict):
        given = row
        names = {name for name, _ in columns}
        if not row.keys() <= names:  # keys found as SQL finds names, whatever their case
            given = {key.lower() if isinstance(key, str) else key: value
                     for key, value in row.items()}
            unknown = set(given) - names
            if unknown or len(given) < len(row):
                raise SchemaError(
                    f"row {index} for {kind} {table} has unknown or repeated columns "
                    f"{sorted(map(str, unknown or row))}: {row!r}", row, index)
        row = tuple(given.get(name) for name, _ in columns)
    elif not isinstance(row, (tuple, list)):
        raise SchemaError(f"row {index} for {kind} {table} is not a tuple: {row!r}", row, index)
    if len(row) != len(columns):
        raise SchemaError(
            f"row {index} for {kind} {table} has {len(row)} values, the {kind} has "
            f"{len(columns)} columns: {format_row(row)}", row, index)
    out = []
    for value, (name, typ) in zip(row, columns, strict=True):
        try:
            out.append(coerce_value(value, typ))
        except ValueError as exc:
            raise SchemaError(
                f"row {index} for {kind} {table}, column {name}: {exc}: {format_row(row)}",
                row, index) from None
    return tuple(out)


def type_from_name(name: str) -> SqlType:
    """The upkeep type of a DuckDB type name (as printed by ``typeof`` or ``DESCRIBE``)."""
    name = name.upper()
    m = re.fullmatch(r"DECIMAL\((\d+),\s*(\d+)\)", name)
    if m:
        return SqlType("DECIMAL", int(m.group(1)), int(m.group(2)))
    return {
        "INTEGER": INTEGER, "BIGINT": BIGINT, "HUGEINT": SqlType("HUGEINT"),
        "SMALLINT": SqlType("SMALLINT"), "TINYINT": SqlType("TINYINT"),
        "DOUBLE": DOUBLE, "FLOAT": DOUBLE, "VARCHAR": VARCHAR, "DATE": DATE,
        "BOOLEAN": BOOLEAN, '"NULL"': NULLTYPE, "NULL": NULLTYPE,
        "TIMESTAMP": TIMESTAMP,
    }.get(name, VARCHAR if name.startswith("VARCHAR") else SqlType(name))


#: the digits of each integer type as a DECIMAL, as DuckDB widens one to meet a DECIMAL
INTEGER_DIGITS = {"TINYINT": 3, "SMALLINT": 5, "INTEGER": 10, "BIGINT": 19, "HUGEINT": 38}


def max_numeric(a: SqlType, b: SqlType) -> SqlType:
    """The type two numeric types' values share (a UNION's column, COALESCE, CASE,
    GREATEST): DuckDB's "max logical type", the narrowest that holds both: the wider
    integer type, DOUBLE beside a DOUBLE, and a DECIMAL holding both sides' integer
    digits and the larger scale (an integer type counting as its digits), at most 38
    digits.  Two DECIMALs needing more keep the larger scale, where DuckDB keeps their
    integer digits and cuts decimals: arithmetic here is typed DECIMAL(38, s)
    (:func:`common_numeric`), wider than DuckDB's, and cutting its decimals would round
    values DuckDB keeps."""
    if a.kind == "NULL":
        return b
    if b.kind == "NULL" or a == b:
        return a
    if a.kind == "DOUBLE" or b.kind == "DOUBLE":
        return DOUBLE
    if a.is_integer and b.is_integer:
        return max(a, b, key=lambda t: INTEGER_KINDS.index(t.kind))
    (pa_, sa), (pb, sb) = ((t.precision, t.scale) if t.kind == "DECIMAL"
                           else (INTEGER_DIGITS[t.kind], 0) for t in (a, b))
    scale, digits = max(sa, sb), max(pa_ - sa, pb - sb)
    return SqlType("DECIMAL", min(38, digits + scale), scale)


def common_numeric(a: SqlType, b: SqlType) -> SqlType:
    """The result type of arithmetic on two numeric types, DuckDB style (simplified)."""
    if a.kind == "NULL":
        return b
    if b.kind == "NULL":
        return a
    if a.kind == "DOUBLE" or b.kind == "DOUBLE":
        return DOUBLE
    if a.kind == "DECIMAL" or b.kind == "DECIMAL":
        scale = max(a.scale if a.kind == "DECIMAL" else 0, b.scale if b.kind == "DECIMAL" else 0)
        return SqlType("DECIMAL", 38, scale)
    if a.is_integer and b.is_integer:  # the wider: TINYINT + TINYINT is a TINYINT
        return SqlType(max(a.kind, b.kind, key=INTEGER_KINDS.index))
    return a
