"""Aggregates kept under insertions and deletions.

Two ways to keep them, sharing :class:`AggregateSpec` and :class:`Finalizer`:

* :class:`DualWeight` is an annotation ring for Dynamic Yannakakis: a weight is a count
  plus one "sum channel" per SUM/AVG/COUNT(x) argument, multiplied like dual numbers
  (``(c1, v1) * (c2, v2) = (c1 c2, c1 v2 + c2 v1)``).  A leaf tuple carries its own
  argument values in the channels of its atom, so projecting the (T,N)-representation on
  the grouping variables yields COUNT and SUM per group by support counts alone
  (``dynamic-yannakakis-iedyn.txt`` section 2: GMRs over a semiring carry aggregates).
* :class:`GroupState` keeps one group for the general aggregate operator: counts, exact
  sums, and for MIN/MAX an ordered multiset (so deleting the current extreme needs no
  rescan; cf. ``lftj-incremental-maintenance.txt`` 2.3.3), and value counts for
  COUNT / SUM / AVG(DISTINCT) (a value enters the distinct sum when its count leaves 0).

Float sums are kept exactly (:mod:`upkeep.exact`), so no drift under +x/-x streams.
"""

from __future__ import annotations

import datetime
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from functools import partial
from operator import add as _add
from operator import neg as _neg
from operator import sub as _sub

from sortedcontainers import SortedDict, SortedList
from sqlglot import exp

try:  # Cython reads the class decorators below as it compiles this module
    import cython
except ImportError:  # run as plain Python without Cython installed: they change nothing
    from .compiled import cython_stand_in as cython

from .errors import EvaluationError, SchemaError, UnsupportedError
from .exact import exact_mean, exact_to_float, float_to_exact
from .expressions import Compiled, Descending, ExpressionCompiler, Scope, nan_order
from .types import (
    BIGINT,
    DOUBLE,
    HUGEINT,
    INT_RANGES,
    TIMESTAMP,
    VARCHAR,
    WIDE_CONTEXT,
    SqlType,
    epoch_microseconds,
)

KINDS = ("count_star", "count", "sum", "avg", "min", "max", "count_distinct", "sum_distinct",
         "avg_distinct", "var_samp", "var_pop", "stddev_samp", "stddev_pop", "quantile_cont",
         "quantile_disc", "arg_max", "arg_min", "string_agg")
DISTINCT_SUMS = ("sum_distinct", "avg_distinct")  # value counts plus a sum of the values
#: the variances and standard deviations: per group the count, exact sum and exact sum of
#: squares of the values as doubles, and a count of infinities and NaNs
STATISTICS = ("var_samp", "var_pop", "stddev_samp", "stddev_pop")
_STATISTIC_OF = {exp.Stddev: "stddev_samp", exp.StddevSamp: "stddev_samp",
                 exp.StddevPop: "stddev_pop", exp.Variance: "var_samp",
                 exp.VariancePop: "var_pop"}
#: MEDIAN, QUANTILE_CONT, QUANTILE_DISC / QUANTILE: per group its values in order (a sorted
#: list, so the value at a position is found in O(log n)), read as DuckDB reads them
QUANTILES = ("quantile_cont", "quantile_disc")
#: the argument types QUANTILE_CONT interpolates between (MEDIAN of any other type takes a
#: value, as QUANTILE_DISC does)
_INTERPOLATED = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "DOUBLE", "DECIMAL",
                 "DATE", "TIMESTAMP")
_EPOCH = datetime.datetime(1970, 1, 1)
_FINE = 1074  # a finite double is a whole number of 2**-1074 units


@dataclass(slots=True)
class AggregateSpec:
    """One aggregate call of a block, compiled against the rows it aggregates.  Slotted,
    its derived fields set once: ``GroupState.add`` reads several of them per row."""

    node: exp.Expression
    kind: str
    arg: Compiled | None
    type: SqlType
    #: a quantile's fraction (MEDIAN: 0.5)
    fraction: float = 0.5
    #: ARG_MAX / ARG_MIN: the value the row of the extremum is chosen by; STRING_AGG: its
    #: ORDER BY's key
    by: Compiled | None = None
    #: STRING_AGG's separator
    separator: str = ","
    #: its argument's value in a row (None for COUNT(*))
    value_of: Callable[[tuple], object] | None = field(init=False)
    #: kept as a sum channel (count of non-NULLs and sum) rather than per-value state
    channel: bool = field(init=False)
    #: a variance or standard deviation (:data:`STATISTICS`): its state a list of sums
    statistic: bool = field(init=False)
    #: a quantile (:data:`QUANTILES`), ARG_MAX / ARG_MIN or STRING_AGG: its state the
    #: values in order
    ordered: bool = field(init=False)
    #: how a value enters the exact channel
    exact: Callable[[object], object] = field(init=False)
    #: a SUM's value from its exact channel (:func:`sum_reader`)
    sum_value: Callable[[object], object] = field(init=False)

    def __post_init__(self) -> None:
        self.value_of = self.arg.fn if self.arg is not None else None
        self.channel = self.kind in ("count", "sum", "avg")
        self.statistic = self.kind in STATISTICS
        self.ordered = self.kind in QUANTILES or self.by is not None
        # COUNT(x)'s channel counts x's non-NULLs; its sum is not read, whatever x's type
        self.exact = (_no_sum if self.kind == "count" else
                      exact_converter(self.arg.type) if self.arg is not None else int)
        self.sum_value = sum_reader(self.arg, self.type)


def compile_aggregate(node: exp.Expression, compiler: ExpressionCompiler) -> AggregateSpec:
    if isinstance(node, exp.Count):
        arg = node.this
        if arg is None or isinstance(arg, exp.Star):
            return AggregateSpec(node, "count_star", None, BIGINT)
        if isinstance(arg, exp.Distinct):
            if len(arg.expressions) != 1:
                raise UnsupportedError("COUNT(DISTINCT ...) over several expressions")
            return AggregateSpec(node, "count_distinct", compiler.compile(arg.expressions[0]), BIGINT)
        return AggregateSpec(node, "count", compiler.compile(arg), BIGINT)
    if isinstance(node, exp.GroupConcat):
        return _string_agg(node, compiler)
    arg_node = node.this
    distinct = isinstance(arg_node, exp.Distinct)
    if distinct:
        if not isinstance(node, (exp.Sum, exp.Avg, exp.Min, exp.Max)) or len(
                arg_node.expressions) != 1:
            raise UnsupportedError(f"{node.sql()}: DISTINCT in COUNT, SUM, AVG, MIN and MAX "
                                   "of one expression only")
        arg_node = arg_node.expressions[0]  # MIN / MAX: DISTINCT changes nothing
    arg = compiler.compile(arg_node)
    if isinstance(node, exp.Sum):
        if not arg.type.is_numeric and arg.type.kind != "NULL":
            raise UnsupportedError(f"SUM over {arg.type}")
        typ = HUGEINT if arg.type.is_integer else (
            SqlType("DECIMAL", 38, arg.type.scale) if arg.type.kind == "DECIMAL" else DOUBLE)
        return AggregateSpec(node, "sum_distinct" if distinct else "sum", arg, typ)
    if isinstance(node, exp.Avg):
        if not arg.type.is_numeric and arg.type.kind != "NULL":
            raise UnsupportedError(f"AVG over {arg.type}")
        return AggregateSpec(node, "avg_distinct" if distinct else "avg", arg, DOUBLE)
    if node.meta.get("boolean") and arg.type.kind not in ("BOOLEAN", "NULL"):
        # BOOL_AND / BOOL_OR, kept as MIN / MAX (plan._rewrite_bool_aggregate)
        raise SchemaError(f"{node.meta['boolean']}() needs a BOOLEAN, not {arg.type.sql()} "
                          "(as DuckDB binds it)")
    if isinstance(node, exp.Min):
        return AggregateSpec(node, "min", arg, arg.type)
    if isinstance(node, exp.Max):
        return AggregateSpec(node, "max", arg, arg.type)
    if isinstance(node, (exp.Median, exp.PercentileCont, exp.PercentileDisc, exp.Quantile)):
        return _quantile(node, arg)
    if isinstance(node, (exp.ArgMax, exp.ArgMin)):
        if node.args.get("count") is not None:
            raise UnsupportedError(f"{node.sql()}: the values of several rows are a list")
        by = compiler.compile(node.expression)
        if arg.type.kind == "NULL" or by.type.kind == "NULL":
            raise UnsupportedError(f"{node.sql()} of NULL")
        kind = "arg_max" if isinstance(node, exp.ArgMax) else "arg_min"
        return AggregateSpec(node, kind, arg, arg.type, by=by)
    kind = _STATISTIC_OF.get(type(node))
    if kind is not None:
        if not arg.type.is_numeric and arg.type.kind != "NULL":
            raise UnsupportedError(f"{node.sql()} over {arg.type}")
        return AggregateSpec(node, kind, arg, DOUBLE)
    raise UnsupportedError(f"aggregate {node.sql()}")


def _quantile(node: exp.Expression, arg: Compiled) -> AggregateSpec:
    """MEDIAN(x), QUANTILE_CONT(x, q), QUANTILE_DISC(x, q) and QUANTILE(x, q) (the discrete
    one) of a constant fraction 0 <= q <= 1, typed as DuckDB types them: an interpolated
    quantile of integers or doubles is a DOUBLE, of a DECIMAL that DECIMAL, of dates or
    timestamps a TIMESTAMP; a discrete one is of its argument's type."""
    kind = arg.type.kind
    if isinstance(node, exp.Median):
        fraction = 0.5
        cont = kind in _INTERPOLATED
        if not cont and kind not in ("VARCHAR", "BOOLEAN"):
            raise UnsupportedError(f"{node.sql()} over {arg.type}")
    else:
        q = node.args.get("quantile") if isinstance(node, exp.Quantile) else node.expression
        if not (isinstance(q, exp.Literal) and not q.is_string) or not 0 <= float(
                q.this) <= 1:
            raise UnsupportedError(f"{node.sql()}: a quantile other than one constant from "
                                   "0 to 1")
        fraction = float(q.this)
        cont = isinstance(node, exp.PercentileCont)
        if cont and kind not in _INTERPOLATED:
            raise UnsupportedError(f"{node.sql()} over {arg.type}")
    if kind == "NULL":
        raise UnsupportedError(f"{node.sql()} over NULL")
    if not cont:
        return AggregateSpec(node, "quantile_disc", arg, arg.type, fraction)
    if kind == "DECIMAL" and arg.type.precision > 18:
        raise UnsupportedError(f"{node.sql()} over {arg.type}: DuckDB interpolates DECIMALs "
                               "wider than 18 digits otherwise")
    typ = (arg.type if kind == "DECIMAL" else TIMESTAMP if kind in ("DATE", "TIMESTAMP")
           else DOUBLE)
    return AggregateSpec(node, "quantile_cont", arg, typ, fraction)


def _string_agg(node: exp.GroupConcat, compiler: ExpressionCompiler) -> AggregateSpec:
    """STRING_AGG / GROUP_CONCAT / LISTAGG(text, 'separator' ORDER BY ...): kept as its
    (order key, value) pairs in order, joined when read.  Without an ORDER BY DuckDB joins
    the values in the order it reads them, which no maintained state reproduces: such a
    call, DISTINCT, a separator that is no text literal, or a value that is not VARCHAR
    is refused here (and the view recomputed).  Values tied in the ORDER BY are joined in
    the order of their own values, where DuckDB takes them as it reads them."""
    this = node.this
    items = this.expressions if isinstance(this, exp.Order) else []
    value = this.this if isinstance(this, exp.Order) else this
    separator = node.args.get("separator")
    if not items or isinstance(value, exp.Distinct) or not (
            separator is None or isinstance(separator, exp.Literal) and separator.is_string):
        raise UnsupportedError(f"aggregate {node.sql()} (kept with an ORDER BY and a text "
                               "separator; DuckDB evaluates it)")
    arg = compiler.compile(value)
    if arg.type.kind != "VARCHAR":
        raise UnsupportedError(f"{node.sql()} of a {arg.type.sql()} (DuckDB evaluates it)")
    parts = [(compiler.compile(item.this), bool(item.args.get("desc")),
              bool(item.args.get("nulls_first"))) for item in items]

    def order_key(row: tuple) -> tuple:
        """The row's place as DuckDB's ORDER BY puts it (NULLs last unless told, NaN
        after every number, DESC reversed)."""
        out = []
        for compiled, descending, nulls_first in parts:
            v = compiled.fn(row)
            if v is None:
                out.append((0 if nulls_first else 2,))
                continue
            if compiled.type.kind == "DOUBLE":
                v = nan_order(v)
            out.append((1, Descending(v) if descending else v))
        return tuple(out)

    by = Compiled(order_key, VARCHAR, "")
    return AggregateSpec(node, "string_agg", arg, VARCHAR, by=by,
                         separator=separator.this if separator is not None else ",")


def joined(a: AggregateSpec, pairs: SortedList) -> str | None:
    """STRING_AGG's text: its values in order, NULLs left out (none: NULL)."""
    return a.separator.join(v for _, v in pairs) if pairs else None


def ordered_add(state: list, value: object, weight: int) -> None:
    """Add ``weight`` copies of ``value`` to the state ``[sorted values, owed]`` of a
    quantile or of ARG_MAX / ARG_MIN (their ``(by, value)`` pairs);
    a copy removed that the values lack is owed (a partial state of a Spark task may
    hold a row's delete before the insert it cancels) and settled by a later insert."""
    values, owed = state
    if weight > 0:
        settled = min(owed.get(value, 0), weight)
        if settled:
            owed[value] -= settled
            if not owed[value]:
                del owed[value]
            weight -= settled
        if weight == 1:  # a row's insert: no list of copies
            values.add(value)
        elif weight:
            values.update([value] * weight)
        return
    for _ in range(-weight):
        try:
            values.remove(value)
        except ValueError:
            owed[value] = owed.get(value, 0) + 1


def quantile_result(a: AggregateSpec, values: SortedList) -> object:
    """The quantile of ``values`` (in order; NULL when none) as DuckDB computes it: the
    discrete one the value at position ``max(1, n - floor(n - q n)) - 1``; the
    interpolated one at ``RN = (n - 1) q`` between the values at ``floor(RN)`` and
    ``ceil(RN)`` with ``d = RN - floor(RN)``: doubles (integers cast first) as
    ``lo (1 - d) + hi d``, timestamps' microseconds so and rounded half away from zero, a
    DECIMAL's units as ``lo + (hi - lo) d`` truncated, each multiply-add rounded once, as
    DuckDB's build fuses them (:func:`_fused`)."""
    n = len(values)
    if not n:
        return None
    q = a.fraction
    double = a.arg.type.kind == "DOUBLE"
    if a.kind == "quantile_disc":
        v = values[max(1, n - math.floor(n - q * n)) - 1]
        return (math.nan if v[0] else v[1]) if double else v
    rn = (n - 1) * q
    below = math.floor(rn)
    lo = values[below]
    if double:
        lo = math.nan if lo[0] else lo[1]
    kind = a.arg.type.kind
    if below == math.ceil(rn):
        return (lo if kind == "DECIMAL" else _timestamp(epoch_microseconds(lo))
                if kind in ("DATE", "TIMESTAMP") else float(lo))
    hi = values[below + 1]
    if double:
        hi = math.nan if hi[0] else hi[1]
    d = rn - below
    if kind == "DECIMAL":
        unit = 10 ** a.arg.type.scale
        low, high = decimal_units(lo, unit), decimal_units(hi, unit)
        units = int(_fused(float(high - low), d, float(low)))  # truncated, as C++ casts
        return Decimal(units).scaleb(-a.arg.type.scale)
    if kind in ("DATE", "TIMESTAMP"):
        low, high = float(epoch_microseconds(lo)), float(epoch_microseconds(hi))
        return _timestamp(_round_half_away(_fused(low, 1.0 - d, high * d)))
    low, high = float(lo), float(hi)
    return _fused(low, 1.0 - d, high * d)


def _fused(x: float, y: float, z: float) -> float:
    """``x * y + z`` rounded once (C's ``fma``), as DuckDB's build computes its quantiles'
    multiply-adds; infinities and NaNs as the plain expression gives them."""
    plain = x * y + z
    if not math.isfinite(plain) or not plain:
        return plain
    return float(Fraction(x) * Fraction(y) + Fraction(z))


def chosen_value(a: AggregateSpec, pairs: SortedList) -> object:
    """ARG_MAX's value (ARG_MIN's): that of the row whose ``by`` is the greatest (least),
    rows with either NULL left out, as DuckDB reads them; among rows tied in ``by`` the
    greatest (least) value, where DuckDB takes the first it reads."""
    if not pairs:
        return None
    v = pairs[-1 if a.kind == "arg_max" else 0][1]
    return (math.nan if v[0] else v[1]) if a.arg.type.kind == "DOUBLE" else v


def _timestamp(microseconds: int) -> datetime.datetime:
    return _EPOCH + datetime.timedelta(microseconds=microseconds)


def _round_half_away(x: float) -> int:
    """C's ``llround``: the nearest integer, halves away from zero."""
    whole = math.floor(abs(x))
    if abs(x) - whole >= 0.5:
        whole += 1
    return -whole if x < 0 else whole


def statistic_add(state: list, value: object, weight: int) -> None:
    """Add ``weight`` copies of ``value`` (as a double, as DuckDB casts it) to a variance's
    state ``[count, sum, sum of squares, non-finite count]``, exactly: the sums in
    ``2**-1074`` and ``2**-2148`` units, so deletes leave no trace (cf. :mod:`upkeep.exact`)."""
    x = float(value)
    try:
        num, den = x.as_integer_ratio()
    except (OverflowError, ValueError):  # an infinity or NaN: the result is NaN
        state[3] += weight
        return
    units = num << (_FINE - (den.bit_length() - 1))
    state[0] += weight
    state[1] += units * weight
    state[2] += units * units * weight


def statistic_result(kind: str, state: list) -> float | None:
    """A variance or standard deviation from its state, the variance correctly rounded
    (``(n q - s^2) / (n (n - 1))``, or ``/ n^2`` for the population's, in exact integers):
    NULL below two values (one for the population's), 0 for the population's of one
    value, NaN with an infinity or NaN among more, as DuckDB gives (a variance beyond the
    largest double is infinite, where DuckDB's running computation may give -inf or NaN)."""
    n, total, squares, special = state
    sample = kind in ("var_samp", "stddev_samp")
    if n + special < (2 if sample else 1):
        return None
    if n + special == 1:  # the population's of one value, whatever it is (DuckDB's 0)
        return 0.0
    if special:
        return math.nan
    try:
        var = (n * squares - total * total) / ((n * (n - 1) if sample else n * n) << 2 * _FINE)
    except OverflowError:  # beyond the largest double
        var = math.inf
    if var < 0:  # only a state with rows deleted that were not there (a batch rejected)
        return math.nan
    return math.sqrt(var) if kind.startswith("stddev") else var


def _no_sum(value: object) -> int:
    return 0


def exact_converter(arg_type: SqlType) -> Callable[[object], object]:
    """How a SUM/AVG argument of this type enters an exact channel: an int (a DECIMAL's in
    units of its scale: Decimal sums would round to the default context's 28 digits)."""
    if arg_type.kind == "DOUBLE":
        return float_to_exact  # a C function taking a double: no lambda's frame a value
    if arg_type.kind == "DECIMAL":
        return partial(decimal_units, unit=10 ** arg_type.scale)
    return int


def decimal_units(v: object, unit: int) -> int:
    """``v * unit`` as an int, exactly (``unit``: 10 ** the DECIMAL's scale)."""
    numerator, denominator = v.as_integer_ratio()
    units, rest = divmod(numerator * unit, denominator)
    if rest:
        raise EvaluationError(f"{v} has more decimal places than its type")
    return units


def may_overflow(arg_type: SqlType) -> bool:
    """Whether a SUM over ``arg_type`` can exceed its result type (DuckDB's: HUGEINT,
    DECIMAL(38, s)) before 2**64 rows: only over HUGEINT or DECIMAL wider than 18 digits."""
    return arg_type.kind == "HUGEINT" or (arg_type.kind == "DECIMAL" and arg_type.precision > 18)


def from_exact(total: object, typ: SqlType) -> object:
    if typ.kind == "DOUBLE":
        return exact_to_float(total)
    if typ.kind == "DECIMAL":
        return Decimal(total).scaleb(-typ.scale, context=WIDE_CONTEXT)
    return total


def sum_reader(arg: Compiled | None, typ: SqlType) -> Callable[[object], object]:
    """How a SUM of ``arg`` with result type ``typ`` is read off its exact channel, chosen
    once by the type: the per-group result is on the per-change path.  Checked for
    overflow only where it can overflow; a SUM of doubles is :func:`exact_to_float`
    itself (a C function, no dispatch on the type per row read)."""
    if arg is not None and may_overflow(arg.type):
        return partial(fitted_sum, typ=typ)
    if typ.kind == "DOUBLE":
        return exact_to_float
    return partial(from_exact, typ=typ)


def fitted_sum(total: object, typ: SqlType) -> object:
    """:func:`from_exact` of a SUM that may not fit its result type: then an
    :class:`EvaluationError`, as DuckDB's overflow is (the batch is rejected)."""
    if typ.kind == "HUGEINT" and not -INT_RANGES["HUGEINT"] <= total < INT_RANGES["HUGEINT"]:
        raise EvaluationError(f"overflow in SUM of HUGEINT: {total} does not fit")
    if typ.kind == "DECIMAL":
        if abs(total) >= 10 ** typ.precision:
            raise EvaluationError(f"overflow in SUM of {typ.sql()}: "
                                  f"{from_exact(total, typ):f} does not fit")
        return from_exact(total, typ)
    return total


class Finalizer:
    """Computes a block's output row from (group key values, aggregate values), with HAVING."""

    def __init__(self, select: list[exp.Expression], having: exp.Expression | None,
                 group_by: list[exp.Expression], group_types: list[SqlType],
                 aggs: list[AggregateSpec], base_scope: Scope):
        slot_of: dict[str, tuple[int, SqlType]] = {}
        for i, g in enumerate(group_by):
            slot_of.setdefault(g.sql(), (i, group_types[i]))
        for j, a in enumerate(aggs):
            slot_of.setdefault(a.node.sql(), (len(group_by) + j, a.type))
        group_cols = {base_scope.resolve(g): (i, group_types[i])
                      for i, g in enumerate(group_by) if isinstance(g, exp.Column)}

        def slots(node: exp.Expression):
            hit = slot_of.get(node.sql())
            if hit is not None:
                return hit
            if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
                return group_cols.get(base_scope.resolve(node))
            return None

        # where each group key value stands in the output row, when the select list names
        # every GROUP BY item plainly: a row's group is then read off the row (membership)
        placed: dict[int, int] = {}
        for position, item in enumerate(select):
            hit = slots(item.this if isinstance(item, exp.Alias) else item)
            if hit is not None and hit[0] < len(group_by):
                placed.setdefault(hit[0], position)
        self.key_positions: list[int] | None = (
            [placed[i] for i in range(len(group_by))] if len(placed) == len(group_by) else None)
        compiler = ExpressionCompiler(base_scope, slots)
        self.types = [compiler.type_of(e) for e in select]
        self.having = compiler.compile_condition(having) if having is not None else None
        row_of = compiler.compile_tuple(select)
        having_fn = self.having.fn if self.having else None
        # the select list is the group key's and the aggregates' values in order, with no
        # HAVING: the row is those values as they are (a dyn-aggregate view then makes no
        # call; its COUNT, SUM and AVG values are never a NaN other than math.nan, the one
        # ``row_of`` would make them)
        hits = [slots(item.this if isinstance(item, exp.Alias) else item) for item in select]
        self.identity = having is None and [hit and hit[0] for hit in hits] == list(
            range(len(group_by) + len(aggs)))

        def finish(values: tuple) -> tuple | None:
            if having_fn is not None and having_fn(values) is not True:
                return None
            return row_of(values)

        self.finish: Callable[[tuple], tuple | None] = finish


class GroupState:
    """The state of one group in the general aggregate operator: its row count; two
    channels per aggregate in one flat list, ``channels[2 i]`` the count of non-NULL
    values and ``channels[2 i + 1]`` their exact sum (of a DISTINCT sum: the distinct
    values and their sum); and, only when some aggregate needs them, value counts per
    aggregate (MIN/MAX: an ordered multiset; COUNT / SUM / AVG(DISTINCT): a dict), else
    ``values`` is None.  A group of COUNT / SUM / AVG is so one object and one list
    besides its sums (docs/design.md, "State layout").  ``output`` is the group's output
    row now (None when it has none), kept there by the general aggregate operator."""

    __slots__ = ("rows", "channels", "values", "output")  # no functions: Spark pickles it

    def __init__(self, aggs: list[AggregateSpec]):
        self.rows = 0
        self.output: tuple | None = None
        self.channels = [0] * (2 * len(aggs))
        self.values: list[SortedDict | dict | None] | None = None
        if not all(a.channel or a.kind == "count_star" for a in aggs):
            self.values = [
                SortedDict() if a.kind in ("min", "max") else
                {} if a.kind == "count_distinct" or a.kind in DISTINCT_SUMS else
                [0, 0, 0, 0] if a.statistic else
                [SortedList(), {}] if a.ordered else None
                for a in aggs
            ]

    def add(self, aggs: list[AggregateSpec], row: tuple, weight: int) -> None:
        self.rows += weight
        channels = self.channels
        for i, a in enumerate(aggs):
            value_of = a.value_of
            if value_of is None:  # COUNT(*)
                continue
            v = value_of(row)
            if v is None:
                continue
            if a.channel:
                channels[2 * i] += weight
                if a.kind != "count":
                    channels[2 * i + 1] += a.exact(v) * weight
            elif a.statistic:
                statistic_add(self.values[i], v, weight)
            elif a.ordered:
                if a.arg.type.kind == "DOUBLE":
                    v = nan_order(v)
                if a.by is not None:  # ARG_MAX / ARG_MIN: (by, value) pairs in order
                    by = a.by.fn(row)
                    if by is None:
                        continue
                    v = (nan_order(by) if a.by.type.kind == "DOUBLE" else by, v)
                ordered_add(self.values[i], v, weight)
            else:
                counts = self.values[i]
                if a.kind in ("min", "max") and a.arg.type.kind == "DOUBLE":
                    v = nan_order(v)  # NaN sorts above every number, as in DuckDB
                before = counts.get(v, 0)
                n = before + weight
                if n:
                    counts[v] = n
                else:
                    del counts[v]
                if a.kind in DISTINCT_SUMS and (before == 0) != (n == 0):
                    self._count_distinct(i, a, v, 1 if n else -1)

    def _count_distinct(self, i: int, a: AggregateSpec, v: object, sign: int) -> None:
        """Value ``v`` entered (``sign`` 1) or left (-1) the distinct values of a sum."""
        self.channels[2 * i] += sign
        self.channels[2 * i + 1] += a.exact(v) * sign

    def merge(self, other: GroupState, aggs: list[AggregateSpec]) -> None:
        """Add another state of the same aggregates (a partial aggregate of more rows)."""
        self.rows += other.rows
        mine, theirs = self.channels, other.channels
        for i, a in enumerate(aggs):
            if a.kind not in DISTINCT_SUMS:
                mine[2 * i] += theirs[2 * i]
                mine[2 * i + 1] += theirs[2 * i + 1]
        if self.values is None:
            return
        for i, (a, counts, more) in enumerate(zip(aggs, self.values, other.values,
                                                  strict=True)):
            if a.statistic:
                for k in range(4):
                    counts[k] += more[k]
                continue
            if a.ordered:
                for v, c in Counter(more[0]).items():
                    ordered_add(counts, v, c)
                for v, c in more[1].items():
                    ordered_add(counts, v, -c)
                continue
            for v, c in (more or {}).items():
                before = counts.get(v, 0)
                n = before + c
                if n:
                    counts[v] = n
                else:
                    del counts[v]
                if a.kind in DISTINCT_SUMS and (before == 0) != (n == 0):
                    self._count_distinct(i, a, v, 1 if n else -1)

    def result(self, aggs: list[AggregateSpec]) -> tuple:
        out = []
        channels = self.channels
        for i, a in enumerate(aggs):
            k = a.kind
            if k == "count_star":
                out.append(self.rows)
            elif k == "count":
                out.append(channels[2 * i])
            elif k in ("sum", "sum_distinct"):
                n, s = channels[2 * i], channels[2 * i + 1]
                out.append(a.sum_value(s) if n else None)
            elif k in ("avg", "avg_distinct"):
                n, s = channels[2 * i], channels[2 * i + 1]
                out.append(average_of(s, n, a.arg.type) if n else None)
            elif k == "count_distinct":
                out.append(len(self.values[i]))
            elif k in STATISTICS:
                out.append(statistic_result(k, self.values[i]))
            elif k == "string_agg":
                out.append(joined(a, self.values[i][0]))
            elif a.by is not None:
                out.append(chosen_value(a, self.values[i][0]))
            elif a.ordered:
                out.append(quantile_result(a, self.values[i][0]))
            else:
                vals = self.values[i]
                if not vals:
                    out.append(None)
                else:
                    v = vals.peekitem(0 if k == "min" else -1)[0]
                    out.append((math.nan if v[0] else v[1]) if type(v) is tuple else v)
        return tuple(out)


def average_of(total: object, count: int, arg_type: SqlType) -> float:
    """AVG from an exact channel; doubles' channels are scaled by 2**1074 (see exact.py).
    DuckDB sums HUGEINT and DECIMAL values (in units of the scale) in a HUGEINT: a sum
    beyond it is an :class:`EvaluationError`, as DuckDB's overflow is."""
    if arg_type.kind == "DOUBLE":
        return exact_mean(total, count)
    if arg_type.kind in ("HUGEINT", "DECIMAL") and not (
            -INT_RANGES["HUGEINT"] <= total < INT_RANGES["HUGEINT"]):
        raise EvaluationError(f"overflow in AVG of {arg_type.sql()}: its sum does not fit "
                              "a HUGEINT")
    if arg_type.kind == "DECIMAL":  # in units of the scale: int / int rounds once
        return total / (count * 10 ** arg_type.scale)
    return total / count


def _dual(c: int, v: tuple) -> DualWeight:
    """``DualWeight(c, v)`` without the call of ``__init__`` (compiled: one allocation and
    two slot stores), for the ring's sums and products, which make one per operation."""
    w = DualWeight.__new__(DualWeight)
    w.c = c
    w.v = v
    return w


@cython.no_gc
@cython.cclass
class DualWeight:
    """Ring element ``(count, channels)``; channels multiply like dual numbers (see module doc).

    Compiled, not tracked by CPython's cyclic collector (``no_gc``): it holds a count and a
    tuple of numbers (or :class:`~upkeep.failed_values.FailedCount`), so it cannot be in a
    cycle, and a dyn aggregate keeps one per group: tracked, each (and each tuple holding
    one) was walked by every full collection."""

    __slots__ = ("c", "v")

    def __init__(self, c: int, v: tuple):
        self.c = c
        self.v = v

    # one sum channel (a count and a sum: two values) is the common case, spelled out: a
    # tuple built from its items, not through map or a generator (add 0.39 -> 0.24 us,
    # multiply by a DualWeight 0.92 -> 0.30 us)
    def __add__(self, other: DualWeight) -> DualWeight:
        return self.plus(other)

    def plus(self, other: DualWeight) -> DualWeight:
        """``self + other``; compiled, ``other``'s fields are read as C slots, not by name."""
        v, u = self.v, other.v
        if len(v) == 2:
            return _dual(self.c + other.c, (v[0] + u[0], v[1] + u[1]))
        return _dual(self.c + other.c, tuple(map(_add, v, u)))

    def __sub__(self, other: DualWeight) -> DualWeight:
        return _dual(self.c - other.c, tuple(map(_sub, self.v, other.v)))

    def __neg__(self) -> DualWeight:
        return _dual(-self.c, tuple(map(_neg, self.v)))

    def __mul__(self, other: DualWeight | int) -> DualWeight:
        v = self.v
        if type(other) is int:
            if len(v) == 2:
                return _dual(self.c * other, (v[0] * other, v[1] * other))
            return _dual(self.c * other, tuple([a * other for a in v]))
        return self.times(other)

    def times(self, other: DualWeight) -> DualWeight:
        """``self * other`` for two weights (compiled: fields read as C slots)."""
        v = self.v
        c1, c2, u = self.c, other.c, other.v
        if c2 == 1:  # times the ring's one (a join's sibling without sums): self
            for b in u:  # (a loop: ``any`` called through its generic path cost 500)
                if b:
                    break
            else:
                return self
        if len(v) == 2:
            return _dual(c1 * c2, (c1 * u[0] + c2 * v[0], c1 * u[1] + c2 * v[1]))
        return _dual(c1 * c2, tuple([c1 * b + c2 * a for a, b in zip(v, u, strict=True)]))

    def __rmul__(self, other: int) -> DualWeight:
        return self.__mul__(other)  # an int times a weight (the product commutes)

    def __bool__(self) -> bool:
        # a loop, not ``any``: a builtin's call through its generic path took about 500
        # instructions a test, asked of every changed anchor tuple in a batch
        if self.c:
            return True
        for x in self.v:
            if x:
                return True
        return False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DualWeight) and self.c == other.c and self.v == other.v

    def __hash__(self) -> int:
        return hash((self.c, self.v))

    def __repr__(self) -> str:
        return f"DualWeight({self.c}, {self.v})"
