"""Filters in the DNF tuple form of pyarrow.parquet / deltalake, and what statistics can prove about them.

``[("a", "=", 1), ("b", ">", 2)]`` is a conjunction; ``[[...], [...]]`` is a disjunction of conjunctions.
Operators: = == != < <= > >= in "not in" "is null" "is not null" (their value is ignored: give None). Literals
are cast to the column's type once, up front.

Semantics are those of Paimon's Java predicates (paimon-common org/apache/paimon/predicate: LeafBinaryFunction,
Equal, NotEqual, LessThan, ..., In, NotIn, CompareUtils), not IEEE's or pypaimon's:

- a null satisfies no comparison: not ``!=`` and not ``not in``; only ``is null``;
- ``in`` ignores null literals; ``not in`` with a null literal matches no row (SQL's ``x NOT IN (1, NULL)``);
- floats compare as Java's Double.compare / Float.compare: every NaN equals every NaN and lies above +inf, and
  -0.0 lies below (so differs from) 0.0. ``x = NaN`` matches NaN rows, ``x > 1`` matches them too, ``x = 0.0``
  does not match -0.0;
- strings compare by UTF-8 bytes (the same order as code points), binaries by unsigned bytes.

Contract: ``may_match`` answers False only when no row whose values lie within the given [min, max] ranges can
satisfy the filter; pruning with it never drops a matching row. Float statistics are trusted for non-NaN values
only (pypaimon's and Parquet's leave NaNs out), so a term that a NaN satisfies never prunes by min/max; a NaN
bound proves nothing, and zero bounds are widened to [-0.0, 0.0] (Arrow's min/max does not order the zeros). The
exact filter is applied to merged rows afterwards (``to_expression``).
"""
from __future__ import annotations

import math
import numbers
import operator
from decimal import Decimal
from functools import reduce
from typing import Any, Callable, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import InvalidInput

OPS = {"=", "==", "!=", "<", "<=", ">", ">=", "in", "not in", "is null", "is not null"}
NULL_OPS = ("is null", "is not null")
Conj = list[tuple[str, str, Any]]
_COMPARE = {"=": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
            ">=": operator.ge}


def normalize(filter_, arrow_schema: pa.Schema, table: str) -> list[Conj] | None:
    """Validate a DNF filter and cast its literals. Raises InvalidInput naming the column or operator."""
    if filter_ is None:
        return None
    if isinstance(filter_, tuple):
        filter_ = [filter_]
    if not isinstance(filter_, list) or not filter_:
        raise InvalidInput(f"filter must be a non-empty list of (column, op, value) tuples, got {filter_!r}",
                           table=table)
    disjunction = filter_ if isinstance(filter_[0], list) else [filter_]
    out = []
    for conj in disjunction:
        norm = []
        for term in conj:
            if not isinstance(term, tuple) or len(term) != 3:
                raise InvalidInput(f"filter term {term!r} is not a (column, op, value) tuple", table=table)
            col, op, value = term
            op = op.lower() if isinstance(op, str) else op
            if op not in OPS:
                raise InvalidInput(f"filter on {col!r}: operator {op!r} is not one of {sorted(OPS)}", table=table, column=col)
            if col not in arrow_schema.names:
                raise InvalidInput(f"filter column {col!r} is not in the table", table=table, column=col)
            typ = arrow_schema.field(col).type
            if op in NULL_OPS:
                value = None
            elif op in ("in", "not in"):
                # Paimon's In skips null literals; its NotIn matches nothing when one is listed (kept as None)
                value = tuple(None if v is None else _cast(v, typ, col, table) for v in value
                              if v is not None or op == "not in")
            else:
                value = _cast(value, typ, col, table)
            norm.append((col, "=" if op == "==" else op, value))
        out.append(norm)
    return out


def _cast(value, typ: pa.DataType, col: str, table: str):
    if value is None:
        raise InvalidInput(f"filter on {col!r} compares with None, which no row satisfies (Paimon's comparisons "
                           "are false for a null literal); use 'is null'", table=table, column=col)
    given = value
    if isinstance(value, Decimal) and pa.types.is_floating(typ):
        value = float(value)  # the nearest float (Arrow's cast loses -0.0's sign)
    if isinstance(value, float) and pa.types.is_decimal(typ) and math.isfinite(value):
        value = Decimal(repr(float(value)))  # 1.005 as written (Arrow rounds silently); float(): numpy.float64
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and pa.types.is_decimal(typ):
        value = Decimal(int(value))  # Arrow would cast an int through int64's DECIMAL(19, 0) and refuse DECIMAL(10, 2)
    try:
        scalar = _literal(value)  # a pandas.Timestamp keeps its nanoseconds
        if not isinstance(scalar, pa.Scalar):
            scalar = pa.scalar(scalar)
        try:
            return scalar.cast(typ).as_py()
        except pa.ArrowInvalid:
            if not (pa.types.is_timestamp(typ) and pa.types.is_timestamp(scalar.type)):
                raise
            # finer than the column: Paimon compares Timestamps exactly ('> 00:00:00.0015' keeps .002, not .001)
            return scalar.cast(pa.timestamp(scalar.type.unit, typ.tz)).as_py()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, TypeError) as e:
        raise InvalidInput(f"filter literal {given!r} does not fit column {col!r} of type {typ}: {e}",
                           table=table, column=col) from None


def to_expression(dnf: list[Conj]):
    """The normalized filter as a ``pyarrow.compute.Expression`` for exact row filtering. A null never satisfies
    a term, ``not in`` included (Paimon's NotIn, SQL's NULL NOT IN (...)): the same answer as ``may_match``."""
    return reduce(operator.or_, (reduce(operator.and_, (_term_expression(*term) for term in conj)) for conj in dnf))


def _literal(value):
    """``value`` as Arrow compares it exactly: a pandas.Timestamp (a nanosecond literal) as a nanosecond scalar,
    since Arrow would otherwise convert it through datetime and drop its sub-microsecond digits."""
    if hasattr(value, "nanosecond") and hasattr(value, "value"):
        return pa.scalar(value.value, pa.timestamp("ns", tz="UTC" if value.tzinfo is not None else None))
    return value


def _term_expression(col: str, op: str, value):
    field = pc.field(col)
    if op in NULL_OPS:
        return field.is_null() if op == "is null" else field.is_valid()
    if op == "not in" and None in value:
        return pc.scalar(False)
    if isinstance(value, float) or (op in ("in", "not in") and value and isinstance(value[0], float)):
        return _float_expression(field, op, value)
    if op in ("in", "not in"):
        if not value:  # Java's In of no literal holds for no row, its NotIn for every non-null one
            return pc.scalar(False) if op == "in" else field.is_valid()
        values = [_literal(v) for v in value]
        scalar_type = next((v.type for v in values if isinstance(v, pa.Scalar)), None)
        if scalar_type is not None:  # nanosecond literals, maybe beside coarser ones (a millisecond column's)
            values = pa.array([(v if isinstance(v, pa.Scalar) else pa.scalar(v)).cast(scalar_type).value
                               for v in values], scalar_type)
        found = field.isin(values)
        # is_in is false for a null, so its negation alone would keep null rows
        return found if op == "in" else field.is_valid() & ~found
    return _COMPARE[op](field, _literal(value))


def _float_eq(field, v: float):
    """``field`` equals ``v`` as Java's Double.compare sees it: NaN equals NaN, -0.0 differs from 0.0."""
    if math.isnan(v):
        return pc.Expression._call("is_nan", [field])
    if v == 0:
        negative = pc.Expression._call("divide", [pc.scalar(1.0), field]) < 0  # 1/-0.0 is -inf
        return (field == 0) & (negative if math.copysign(1.0, v) < 0 else ~negative)
    return field == v


def _float_lt(field, v: float):
    """``field`` below ``v`` in Java's order (-inf < ... < -0.0 < 0.0 < ... < +inf < NaN)."""
    if math.isnan(v):
        return ~pc.Expression._call("is_nan", [field])
    if v == 0 and math.copysign(1.0, v) > 0:
        return (field < 0) | _float_eq(field, -0.0)
    return field < v  # IEEE's < is false for a NaN, which Java orders above every number


def _float_expression(field, op: str, value):
    if op in ("in", "not in"):
        plain = [v for v in value if v == v and v != 0]
        special = {_java_key(v): v for v in value if v != v or v == 0}  # one of each: -0.0, 0.0, NaN
        found = [_float_eq(field, v) for v in special.values()]
        if plain:  # is_in: plain equality for numbers other than zeros and NaN
            found.append(field.isin(pa.array(plain, pa.float64())))
        found = reduce(operator.or_, found) if found else pc.scalar(False)
        return found if op == "in" else field.is_valid() & ~found
    eq, lt = _float_eq(field, value), _float_lt(field, value)
    return {"=": eq, "!=": field.is_valid() & ~eq, "<": lt, "<=": lt | eq,
            ">": field.is_valid() & ~(lt | eq), ">=": field.is_valid() & ~lt}[op]


def _java_key(v):
    """A sort key of ``v`` in Paimon's (Java's) order: for floats Double.compare's, where -0.0 < 0.0 and every NaN
    is equal and above +inf; other values are their own key."""
    if isinstance(v, float):
        return (1, 0.0, 0.0) if v != v else (0, v, math.copysign(1.0, v))
    return v


def _java_test(op: str, field, value) -> bool:
    """One non-null ``field`` value against a term, as Paimon's LeafFunction.test does."""
    f = _java_key(field)
    if op in ("in", "not in"):
        if op == "not in" and None in value:
            return False
        found = any(f == _java_key(v) for v in value if v is not None)
        return found if op == "in" else not found
    return _COMPARE[op](f, _java_key(value))


def columns_of(dnf: list[Conj] | None) -> set[str]:
    """Every column a filter mentions (empty for None)."""
    return {c for conj in dnf or [] for c, _, _ in conj}


def _term_may_match(op: str, value, lo, hi, null_count, row_count) -> bool:
    if op == "is null":
        return null_count is None or null_count > 0
    if op == "is not null":
        return null_count is None or row_count is None or null_count < row_count
    if op == "not in" and None in value:
        return False  # Paimon's NotIn: a null literal makes every row fail
    if row_count is not None and null_count is not None and null_count >= row_count:
        return False  # only nulls: no comparison can be true
    if lo is None or hi is None or lo != lo or hi != hi:
        return True  # unknown, or a NaN bound (Java's collector puts NaN last, ORC's sticks on a first NaN)
    if isinstance(lo, float) or isinstance(hi, float):
        if _java_test(op, math.nan, value):
            return True  # float stats may leave NaNs out (pypaimon's, Parquet's): a NaN row is never bounded
        # zeros: Arrow's min/max does not order -0.0 and 0.0, so a 0.0 minimum may hide a -0.0
        lo, hi = _java_key(-0.0 if lo == 0 else lo), _java_key(0.0 if hi == 0 else hi)
        value = tuple(_java_key(v) for v in value) if op in ("in", "not in") else _java_key(value)
    try:
        if op == "=":
            return lo <= value <= hi
        if op == "!=":
            return not (lo == hi == value)
        if op == "<":
            return lo < value
        if op == "<=":
            return lo <= value
        if op == ">":
            return hi > value
        if op == ">=":
            return hi >= value
        if op == "in":
            return any(lo <= v <= hi for v in value)
        if op == "not in":
            return not (lo == hi and lo in value)
    except TypeError:
        return True
    return True


def may_match(dnf: list[Conj] | None, ranges: Callable[[str], tuple | None], row_count: int | None = None) -> bool:
    """``ranges(col)`` returns (min, max, null_count) or None when nothing is known about ``col``."""
    if not dnf:
        return True
    for conj in dnf:
        ok = True
        for col, op, value in conj:
            r = ranges(col)
            if r is not None and not _term_may_match(op, value, r[0], r[1], r[2], row_count):
                ok = False
                break
        if ok:
            return True
    return False


def equality_values(dnf: list[Conj] | None, columns: tuple[str, ...]) -> list[tuple] | None:
    """All value combinations of ``columns`` the filter allows, if every conjunction pins every column with
    = or in and no pinned value is a NaN; otherwise None (no pruning possible)."""
    if not dnf or not columns:
        return None
    combos: list[tuple] = []
    for conj in dnf:
        per_col: Mapping[str, tuple] = {}
        for col, op, value in conj:
            if col in columns and op in ("=", "in"):
                vals = (value,) if op == "=" else tuple(value)
                if any(isinstance(v, float) and v != v for v in vals):
                    return None  # NaNs are equal whatever their bits, but hash by their bits
                per_col = {**per_col, col: tuple(v for v in vals if v in per_col[col]) if col in per_col else vals}
        if any(c not in per_col for c in columns):
            return None
        conj_combos = [()]
        for c in columns:
            conj_combos = [prefix + (v,) for prefix in conj_combos for v in per_col[c]]
        combos.extend(conj_combos)
        if len(combos) > 10_000:
            return None
    return combos
