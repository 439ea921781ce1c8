"""Filters against a small model of Paimon's Java predicates (paimon-common org/apache/paimon/predicate: Equal,
NotEqual, LessThan, GreaterThan, In, NotIn, LeafBinaryFunction, CompareUtils; literals compared with
Comparable.compareTo, i.e. Double.compare / Float.compare for floats, BinaryString by UTF-8 bytes, byte[] by
unsigned bytes), and the pruning invariant: a pruned read returns exactly the unpruned rows the model keeps.

pypaimon 2.1 differs for floats (it compares with Python / Arrow, IEEE: NaN matches nothing, -0.0 == 0.0); these
tests follow Java."""
from __future__ import annotations

import datetime as dt
import math
import struct
import tempfile
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import Catalog
from engine.read import predicate as pred
from engine.write.stats import column_min_max
from engine.types import DataType

NAN = math.nan

SCHEMA = pa.schema([("p", pa.int32()), ("id", pa.int64()), ("f", pa.float64()), ("g", pa.float32()),
                    ("s", pa.string()), ("b", pa.binary()), ("d", pa.decimal128(10, 2)), ("dd", pa.date32()),
                    ("bo", pa.bool_()), ("ts", pa.timestamp("us"))])
FLOATS = [NAN, -0.0, 0.0, 1.5, -1.5, math.inf, -math.inf, 2.0]
POOLS = {
    "p": [0, 1],
    "f": FLOATS,
    "g": FLOATS,
    "s": ["", "a", "ab", "b", "\u00e9", "\uffff", "\U0001f600", "z"],
    "b": [b"", b"\x00", b"\x7f", b"\x80", b"\xff", b"a\xff"],
    "d": [Decimal("-1.50"), Decimal("0.00"), Decimal("1.25"), Decimal("99.99")],
    "dd": [dt.date(1969, 12, 31), dt.date(1970, 1, 1), dt.date(2024, 2, 29)],
    "bo": [False, True],
    "ts": [dt.datetime(1969, 12, 31, 23, 59, 59, 999999), dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 1, 0, 0, 1)],
}
COLUMNS = list(POOLS)


# ---- the model: Java's compareTo, written from its documented behaviour ------------------------------------

def _double_bits(x: float) -> int:
    """Double.doubleToLongBits: the signed 64-bit pattern, every NaN collapsed to the canonical one."""
    return 0x7FF8000000000000 if math.isnan(x) else struct.unpack("<q", struct.pack("<d", x))[0]


def java_compare(a, b) -> int:
    if isinstance(a, float):  # Double.compare: numeric order, ties (zeros, NaNs) broken by the bit patterns
        if a < b:
            return -1
        if a > b:
            return 1
        x, y = _double_bits(a), _double_bits(b)
        return (x > y) - (x < y)
    if isinstance(a, str):  # BinaryString.compareTo: unsigned UTF-8 bytes
        a, b = a.encode(), b.encode()
    if isinstance(a, bytes):
        for x, y in zip(a, b):
            if x != y:
                return x - y
        return len(a) - len(b)
    return (a > b) - (a < b)


def java_test(op: str, field, literal) -> bool:
    """One leaf predicate on one row value, as Paimon's LeafFunction.test."""
    if op == "is null":
        return field is None
    if op == "is not null":
        return field is not None
    if field is None:
        return False
    if op == "in":
        return any(v is not None and java_compare(v, field) == 0 for v in literal)
    if op == "not in":
        return all(v is not None and java_compare(v, field) != 0 for v in literal)
    c = java_compare(field, literal)
    return {"=": c == 0, "!=": c != 0, "<": c < 0, "<=": c <= 0, ">": c > 0, ">=": c >= 0}[op]


def model_keeps(dnf, row) -> bool:
    return any(all(java_test(op, row[col], lit) for col, op, lit in conj) for conj in dnf)


# ---- strategies -------------------------------------------------------------------------------------------

def _rows(draw, n):
    return [{"id": draw(st.integers(0, 5)), **{c: draw(st.sampled_from(POOLS[c] + [None])) for c in COLUMNS}}
            for _ in range(n)]


@st.composite
def terms(draw, columns=tuple(COLUMNS)):
    col = draw(st.sampled_from(columns))
    op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">=", "in", "not in", "is null", "is not null"]))
    if op in ("is null", "is not null"):
        return (col, op, None)
    if op in ("in", "not in"):
        return (col, op, tuple(draw(st.lists(st.sampled_from(POOLS[col] + [None]), max_size=3))))
    return (col, op, draw(st.sampled_from(POOLS[col])))


filters = st.lists(st.lists(terms(), min_size=1, max_size=2), min_size=1, max_size=2)


def _canonical(rows):
    """Rows comparable by value: NaN and the sign of zero kept visible."""
    return sorted(repr(sorted(r.items())) for r in rows)


@pytest.mark.parametrize("kind", ["append", "pk", "float-key"])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_pruned_read_is_the_unpruned_read_filtered_by_the_java_model(kind, data):
    """The invariant for every column type: what a filtered (partition-, bucket- and stats-pruned) read returns is
    the unfiltered read's rows that Java's predicates keep, NaN, -0.0, nulls in IN lists and all."""
    batches = [_rows(data.draw, data.draw(st.integers(1, 5))) for _ in range(data.draw(st.integers(1, 3)))]
    dnf = data.draw(filters)
    with tempfile.TemporaryDirectory() as wh:
        cat = Catalog(wh)
        cat.create_database("db")
        keys = {"pk": ["p", "id"], "float-key": ["p", "f"]}.get(kind)
        if keys:  # key statistics prune files, bucket hashing prunes buckets
            t = cat.create_table("db.t", SCHEMA, primary_key=keys, partition_keys=["p"], options={"bucket": "2"})
        else:
            t = cat.create_table("db.t", SCHEMA, partition_keys=["p"])
        for rows in batches:
            t.write(pa.Table.from_pylist([r for r in rows if not keys or None not in (r[k] for k in keys)],
                                         SCHEMA))
        everything = t.read().to_pylist()
        expected = [r for r in everything if model_keeps(dnf, r)]
        assert _canonical(t.read(filter=dnf).to_pylist()) == _canonical(expected), dnf


@settings(max_examples=300, deadline=None)
@given(values=st.lists(st.sampled_from(FLOATS + [None]), min_size=1, max_size=6), term=terms(("f",)),
       width=st.sampled_from([pa.float64(), pa.float32()]))
def test_row_level_floats_follow_java_and_stats_never_prune_a_match(values, term, width):
    """Row by row, a float filter gives Double.compare's answer; and min/max statistics of the same values prove
    nothing false, whoever wrote them: lakemerge (no bounds with a NaN, zeros widened), pypaimon (Arrow's
    min / max, which leave NaNs out and return either zero) or Java's collector (NaN greatest, -0.0 < 0.0)."""
    _, op, lit = term
    term = ("x", op, lit)
    schema = pa.schema([("x", width)])
    table = pa.table({"x": pa.array(values, width)})
    dnf = pred.normalize([term], schema, "t")
    got = table.filter(pred.to_expression(dnf)).column("x").to_pylist()
    want = [v for v in values if java_test(op, v, lit)]
    assert [repr(v) for v in got] == [repr(v) for v in want], term

    present = [v for v in values if v is not None]
    nulls = len(values) - len(present)
    java_order = sorted(present, key=_double_bits_order)
    candidates = [column_min_max(table.column("x"), DataType("DOUBLE"), "full")[:2]]
    if present:
        arrow = pa.array(present, width)
        candidates.append((pa.compute.min(arrow).as_py(), pa.compute.max(arrow).as_py()))  # pypaimon's writer
        candidates.append((java_order[0], java_order[-1]))
    for lo, hi in candidates:
        if want:
            assert pred.may_match(dnf, lambda c: (lo, hi, nulls), row_count=len(values)), (lo, hi, term)


def _double_bits_order(x: float):
    """Sort key of Double.compare (negative patterns reversed, as for a sign-magnitude number)."""
    bits = _double_bits(x)
    return bits if bits >= 0 else -(bits & 0x7FFFFFFFFFFFFFFF) - 1


def test_zero_bounds_of_written_stats_cover_both_zeros():
    """Arrow's min/max returns whichever zero it met first, so a file holding 0.0 then -0.0 recorded min 0.0, and
    Java's pruning of 'x < 0.0' (true for -0.0 under Double.compare) skipped it; the bounds are widened."""
    lo, hi, _ = column_min_max(pa.array([0.0, -0.0]), DataType("DOUBLE"), "full")
    assert math.copysign(1, lo) == -1 and lo == 0
    lo, hi, _ = column_min_max(pa.array([-0.0, -0.0, -1.0]), DataType("DOUBLE"), "full")
    assert lo == -1.0 and hi == 0 and math.copysign(1, hi) == 1


def test_float_equality_and_in_agree_on_zeros_and_nan(catalog):
    """'= 0.0' matched -0.0 (IEEE) while 'in (0.0)' did not (Arrow's is_in compares bits); Java's Equal and In
    both say -0.0 is not 0.0, and NaN equals NaN (so '= NaN' and '> 1' match a NaN row)."""
    t = catalog.create_table("db.f", pa.schema([("k", pa.int64()), ("x", pa.float64())]))
    t.write(pa.table({"k": [1, 2, 3, 4], "x": [-0.0, 0.0, NAN, 1.0]}))
    ks = lambda flt: sorted(t.read(filter=flt).column("k").to_pylist())  # noqa: E731
    assert ks([("x", "=", 0.0)]) == ks([("x", "in", [0.0])]) == [2]
    assert ks([("x", "=", -0.0)]) == [1]
    assert ks([("x", "<", 0.0)]) == [1]
    assert ks([("x", "=", NAN)]) == ks([("x", "in", [NAN])]) == [3]
    assert ks([("x", ">", 1.0)]) == [3]
    assert ks([("x", "!=", NAN)]) == [1, 2, 4]


def test_in_ignores_null_literals_and_not_in_with_a_null_matches_nothing(catalog):
    """Paimon's In skips null literals; its NotIn returns false for every row when a literal is null (SQL's
    'x NOT IN (1, NULL)'). Both used to be refused as comparisons with None."""
    t = catalog.create_table("db.n", pa.schema([("k", pa.int64()), ("v", pa.int64())]))
    t.write(pa.table({"k": [1, 2, 3], "v": [10, None, 30]}))
    ks = lambda flt: sorted(t.read(filter=flt).column("k").to_pylist())  # noqa: E731
    assert ks([("v", "in", [10, None])]) == [1]
    assert ks([("v", "in", [None])]) == []
    assert ks([("v", "not in", [10, None])]) == []
    assert ks([("v", "not in", [10])]) == [3]
    dnf = pred.normalize([("v", "not in", [99, None])], t.arrow_schema, "n")
    assert not pred.may_match(dnf, lambda c: (10, 30, 0), row_count=2)


def test_nan_keys_are_found_whatever_their_bits(catalog):
    """Bucket pruning hashes the pinned key value's bits; NaNs with other bits (a negative NaN) are equal to the
    literal NaN under Double.compare but hash elsewhere, so a NaN literal pins no bucket."""
    nans = np.array([0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001], np.uint64).view(np.float64)
    t = catalog.create_table("db.k", pa.schema([pa.field("x", pa.float64(), False), ("v", pa.int64())]),
                             primary_key=["x"], options={"bucket": "8"})
    for i, x in enumerate(nans):
        t.write(pa.table({"x": pa.array([x]), "v": [i]}, t.arrow_schema))
    t.write(pa.table({"x": [1.0, 2.0, 3.0], "v": [7, 8, 9]}, t.arrow_schema))
    # NaNs hashed to different buckets stay different rows (within a bucket Double.compare makes them one key)
    nan_rows = sorted(r["v"] for r in t.read().to_pylist() if math.isnan(r["x"]))
    assert len(nan_rows) >= 2
    assert sorted(t.read(filter=[("x", "=", NAN)]).column("v").to_pylist()) == nan_rows
    assert sorted(t.read(filter=[("x", "in", [NAN, 2.0])]).column("v").to_pylist()) == nan_rows + [8]


def test_a_float_literal_on_a_decimal_column_is_taken_as_written(catalog):
    """Arrow casts a float into a decimal by rounding silently: 'd >= 1.005' on DECIMAL(10, 2) became
    'd >= 1.00' and returned 1.00. The literal is read as the decimal it prints as, and refused when the column's
    scale cannot hold it (Paimon's PredicateBuilder takes only BigDecimal literals for a DECIMAL column)."""
    from engine.errors import InvalidInput

    t = catalog.create_table("db.d", pa.schema([("k", pa.int64()), ("d", pa.decimal128(10, 2))]))
    t.write(pa.table({"k": [1, 2], "d": pa.array([Decimal("1.00"), Decimal("1.01")], pa.decimal128(10, 2))}))
    assert t.read(filter=[("d", ">=", 1.01)]).column("k").to_pylist() == [2]
    with pytest.raises(InvalidInput, match="1.005"):
        t.read(filter=[("d", ">=", 1.005)])


def test_an_integer_literal_on_a_decimal_column(catalog):
    """'amount > 10' on DECIMAL(10, 2) (the README's CLI example) was refused: Arrow casts an int through
    DECIMAL(19, 0), which needs precision 21 at scale 2. An integer is the decimal it denotes (as SQL's literal 10
    compared with a DECIMAL column); one too large for the column is still refused naming it."""
    import numpy as np

    from engine.errors import InvalidInput

    t = catalog.create_table("db.d", pa.schema([("k", pa.int64()), ("d", pa.decimal128(10, 2))]))
    t.write(pa.table({"k": [1, 2], "d": pa.array([Decimal("10.00"), Decimal("10.01")], pa.decimal128(10, 2))}))
    assert t.read(filter=[("d", ">", 10)]).column("k").to_pylist() == [2]
    assert t.read(filter=[("d", "in", [np.int64(10), 11])]).column("k").to_pylist() == [1]
    with pytest.raises(InvalidInput, match="'d'"):
        t.read(filter=[("d", ">", 10**9)])


def test_timestamp_literals_finer_than_the_column_compare_exactly(catalog):
    """Paimon compares a Timestamp literal with a TIMESTAMP(3) value exactly (Timestamp.compareTo; its
    PredicateBuilder keeps the literal's nanoseconds); such literals were refused as not fitting the column. Rows,
    statistics, partitions and bucket keys all see the exact literal."""
    import pandas as pd

    ms = pa.timestamp("ms")
    schema = pa.schema([pa.field("ts", ms, False), ("p", ms), ("v", ms)])
    t = catalog.create_table("db.ts", schema, primary_key=["ts"], options={"bucket": "4"})
    base = dt.datetime(2024, 1, 1)
    stamps = [base + dt.timedelta(milliseconds=i) for i in (1, 2, 3)]
    for s in stamps:  # one file each: stats and buckets can tell them apart
        t.write(pa.table({"ts": [s], "p": [s], "v": [s]}, schema))
    a_half = base + dt.timedelta(microseconds=1500)
    ns_half = pd.Timestamp(base) + pd.Timedelta(nanoseconds=2_000_001)
    for col in ("ts", "v"):
        got = lambda flt: sorted(t.read(filter=flt).column("v").to_pylist())  # noqa: E731
        assert got([(col, ">", a_half)]) == stamps[1:]
        assert got([(col, "<=", a_half)]) == stamps[:1]
        assert got([(col, "=", a_half)]) == []
        assert got([(col, "in", [a_half, stamps[2]])]) == stamps[2:]
        assert got([(col, "not in", [a_half, stamps[2]])]) == stamps[:2]
        assert got([(col, ">=", ns_half)]) == stamps[2:]
        assert got([(col, "in", [ns_half, stamps[0]])]) == stamps[:1]
    parted = catalog.create_table("db.tp", schema, partition_keys=["p"])
    for s in stamps:
        parted.write(pa.table({"ts": [s], "p": [s], "v": [s]}, schema))
    assert sorted(parted.read(filter=[("p", ">", a_half)]).column("v").to_pylist()) == stamps[1:]


@pytest.mark.parametrize("keys", [None, ["k"]])
def test_stats_of_a_column_widened_to_double_prune_as_the_values_read(catalog, keys):
    """After INT -> DOUBLE and DECIMAL -> DOUBLE, older files keep int / decimal statistics while their values
    are read cast to double. Compared raw, DECIMAL 1.10 lies below the double 1.1 it reads as ('d = 1.1' pruned
    its file), an int bound is never NaN-like ('x < NaN', true for every number under Double.compare, pruned
    everything) and a decimal bound against NaN raised decimal.InvalidOperation."""
    schema = pa.schema([pa.field("k", pa.int64(), False), ("x", pa.int32()), ("d", pa.decimal128(10, 2))])
    kw = {"primary_key": keys, "options": {"bucket": "1"}} if keys else {}
    t = catalog.create_table("db.w", schema, **kw)
    for k, x, d in ((1, 1, "1.10"), (2, 5, "0.30")):  # one file each: statistics can tell them apart
        t.write(pa.table({"k": [k], "x": pa.array([x], pa.int32()), "d": pa.array([Decimal(d)], schema[2].type)},
                         schema))
    t.alter().update_column_type("x", "DOUBLE").update_column_type("d", "DOUBLE").commit()
    t = catalog.get_table("db.w")
    ks = lambda flt: sorted(t.read(filter=flt).column("k").to_pylist())  # noqa: E731
    assert ks([("d", "=", 1.1)]) == ks([("d", "in", [1.1])]) == [1]
    assert ks([("d", "<=", 0.3)]) == [2]
    assert ks([("x", "<", NAN)]) == ks([("d", "<", NAN)]) == [1, 2]
    assert ks([("x", "<=", NAN)]) == [1, 2]
    assert ks([("x", "=", NAN)]) == ks([("d", ">", 1.1)]) == []


def test_a_numpy_float_literal_on_a_decimal_column_is_taken_as_written():
    """numpy.float64 is a float whose repr is 'np.float64(1.01)': read as a decimal's text it raised
    decimal.InvalidOperation (not InvalidInput) for a literal Arrow used to accept."""
    from engine.errors import InvalidInput

    schema = pa.schema([("d", pa.decimal128(10, 2))])
    rows = pa.table({"d": pa.array([Decimal("1.00"), Decimal("1.01")], schema[0].type)})
    dnf = pred.normalize([("d", ">=", np.float64(1.01))], schema, "t")
    assert rows.filter(pred.to_expression(dnf)).column("d").to_pylist() == [Decimal("1.01")]
    with pytest.raises(InvalidInput, match="1.005"):
        pred.normalize([("d", "in", [np.float64(1.005)])], schema, "t")
