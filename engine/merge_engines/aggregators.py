"""Paimon's field aggregate functions (``fields.<f>.aggregate-function``), reduced per key with the kernels.

Each function reduces one column over the rows of each key: ``reduce(seg, arr, agg, add, retract)`` where
``add`` / ``retract`` are per-row masks of the records that feed the function (oldest first in merged order).
Numeric, boolean, temporal, string and binary columns run in ``kernels.aggregate``; collections, maps, bitmaps,
sketches and nested tables fold in Python per key (they are object values). Retraction follows Paimon: only sum,
product, collect, merge_map, nested_update, last_value and last_non_null_value take -U/-D; any other (including
nested_partial_update and merge_map_with_keytime) raises unless ``fields.<f>.ignore-retract``.
"""
from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Context, Decimal

import numpy as np
import pyarrow as pa

from engine.errors import InvalidSchema, MergeFunctionError, UnsupportedFeature
from engine.merge_engines.segments import (Segments, decimal_from_unscaled, decimal_unscaled, order_values,
                                           take_or_null, valid_mask)
from kernels import aggregate as K

NUMERIC = ("TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL")
COMPARABLE = NUMERIC + ("BOOLEAN", "CHAR", "VARCHAR", "BINARY", "VARBINARY", "DATE", "TIME", "TIMESTAMP",
                        "TIMESTAMP_LTZ")
_ANY = None
# function -> (allowed type roots or None for any, takes retraction)
FUNCTIONS = {
    "sum": (NUMERIC, True), "product": (NUMERIC, True),
    "max": (COMPARABLE, False), "min": (COMPARABLE, False),
    "last_value": (_ANY, True), "last_non_null_value": (_ANY, True),
    "first_value": (_ANY, False), "first_non_null_value": (_ANY, False),
    "listagg": (("VARCHAR", "CHAR"), False),
    "bool_and": (("BOOLEAN",), False), "bool_or": (("BOOLEAN",), False),
    "collect": (("ARRAY",), True), "merge_map": (("MAP",), True), "nested_update": (("ARRAY",), True),
    "nested_partial_update": (("ARRAY",), False), "merge_map_with_keytime": (("MAP",), False),
    "rbm32": (("VARBINARY", "BINARY"), False), "rbm64": (("VARBINARY", "BINARY"), False),
    "theta_sketch": (("VARBINARY", "BINARY"), False), "hll_sketch": (("VARBINARY", "BINARY"), False),
}
_INT_RANGE = {"TINYINT": 7, "SMALLINT": 15, "INT": 31, "BIGINT": 63}


def check_function(agg, dtype, where: str = "") -> None:
    """Raise InvalidSchema if ``agg.function`` is unknown or does not accept the field's type."""
    fn = agg.function
    if fn == "count":
        raise InvalidSchema(where + f"field {agg.field!r}: Paimon has no 'count' aggregate function; "
                            "write 1 per record into the column and use 'sum'")
    if fn not in FUNCTIONS:
        raise InvalidSchema(where + f"field {agg.field!r}: unknown aggregate function {fn!r}; expected one of "
                            + ", ".join(sorted(FUNCTIONS)))
    roots, _ = FUNCTIONS[fn]
    if roots is not None and dtype.root not in roots:
        raise InvalidSchema(where + f"field {agg.field!r} has type {dtype.sql() if not dtype.is_nested else dtype.root}"
                            f", which aggregate function {fn!r} does not accept (allowed: {', '.join(roots)})")
    if fn == "nested_update":
        _NestedUpdate.check(agg, dtype, where)
    if fn == "nested_partial_update":
        _NestedPartialUpdate.check(agg, dtype, where)
    if fn == "merge_map_with_keytime":
        _MergeMapWithKeyTime.check(agg, dtype, where)
    if fn in ("theta_sketch", "hll_sketch"):
        try:
            import datasketches  # noqa: F401
        except ImportError:
            raise UnsupportedFeature(where + f"field {agg.field!r}: {fn} needs the 'datasketches' package "
                                     "(pip install lakemerge[aggregates])") from None
    if fn in ("rbm32", "rbm64"):
        try:
            import pyroaring  # noqa: F401
        except ImportError:
            raise UnsupportedFeature(where + f"field {agg.field!r}: {fn} needs the 'pyroaring' package "
                                     "(pip install lakemerge[aggregates])") from None


def takes_retract(agg) -> bool:
    """True if the field aggregator accepts retract (-U/-D) records, by ignoring them or by supporting them."""
    return agg.ignore_retract or FUNCTIONS.get(agg.function, (None, False))[1]


@dataclass
class Seed:
    """Accumulators that start from a record's values instead of null (Paimon's ``initRow`` on a -D with
    ``aggregation.remove-record-on-delete``): ``rows`` per key the seeding row or -1; ``before`` per row id, True
    for the add rows folded before the seed (they set the first_value / first_non_null_value state, which a
    seed does not reset)."""
    rows: np.ndarray
    before: np.ndarray


# functions whose agg(null, v) is v for every v: a seed folds like an add record of its values
SEED_IS_ADD = ("sum", "product", "max", "min", "bool_and", "bool_or", "last_value", "last_non_null_value",
               "merge_map", "merge_map_with_keytime", "rbm32", "rbm64", "theta_sketch", "hll_sketch")


def reduce(seg: Segments, arr: pa.Array, agg, add: np.ndarray, retract: np.ndarray,
           seed: Seed | None = None) -> pa.Array:
    """One value per key of ``seg``: ``agg.function`` folded over the key's ``add`` / ``retract`` rows, from
    the ``seed`` row's value for keys that have one (else from null). Raises MergeFunctionError for a retract
    the function cannot take."""
    if agg.ignore_retract:
        retract = np.zeros_like(retract)
    elif retract.any() and not FUNCTIONS[agg.function][1]:
        raise MergeFunctionError(
            (f"table {seg.table_name!r}: " if seg.table_name else "")
            + f"field {agg.field!r}: aggregate function {agg.function!r} cannot take a retraction (-U/-D); "
            f"set fields.{agg.field}.ignore-retract=true to ignore retractions")
    if seed is None or not (seed.rows >= 0).any():
        return _REDUCERS[agg.function](seg, arr, agg, add, retract)
    fn = agg.function
    if fn in SEED_IS_ADD or (fn == "collect" and not agg.distinct):
        is_seed = np.zeros(len(add), bool)
        is_seed[seed.rows[seed.rows >= 0]] = True
        return _REDUCERS[fn](seg, arr, agg, add | is_seed, retract)
    if fn in ("first_value", "first_non_null_value"):
        # Paimon: once initialised (by an add before the seed) the function keeps the accumulator, the seed's
        # value; otherwise the first (non-null) add after the seed replaces it
        counts = np.ones(len(add), bool) if fn == "first_value" else valid_mask(arr)
        initialised = K.segment_pick(seg.order, seg.key_starts, seed.before & counts, True) >= 0
        idx = K.segment_pick(seg.order, seg.key_starts, add & counts, True)
        idx = np.where((seed.rows >= 0) & (initialised | (idx < 0)), seed.rows, idx)
        return take_or_null(arr, idx)
    return _python_fold(seg, arr, add, retract, _object_fold(agg), seed.rows)


COMMUTATIVE = ("sum", "product", "max", "min", "bool_and", "bool_or")


# functions whose state or agg(null, v) makes a seeded accumulator differ from an add of the seed's value
_SEED_SENSITIVE = ("first_value", "first_non_null_value", "listagg", "collect", "nested_update",
                   "nested_partial_update")


def reduce_in_group(seg: Segments, arr: pa.Array, agg, add: np.ndarray, retract: np.ndarray,
                    newer: np.ndarray, seeds: np.ndarray | None = None) -> pa.Array:
    """Partial-update aggregator inside a sequence group: add rows with ``newer`` (their group sequence took the
    group) fold as ``agg(acc, in)``, older add rows as ``agg(in, acc)`` (Paimon's ``aggReversed``). Commutative
    functions run in the kernels; the others fold per key in Python. ``seeds`` (per row id, optional) marks add
    rows that set the accumulator to their value without calling the function (Paimon's ``initRow``: a
    first_value seeded so is not initialised)."""
    seeded = seeds is not None and agg.function in _SEED_SENSITIVE and bool((seeds & add).any())
    if not seeded and (agg.function in COMMUTATIVE or not (add & ~newer).any()):
        return reduce(seg, arr, agg, add, retract)
    if agg.ignore_retract:
        retract = np.zeros_like(retract)
    elif retract.any() and not FUNCTIONS[agg.function][1]:
        return reduce(seg, arr, agg, add, retract)  # raises the error
    fn = _scalar(agg, arr.type)
    values = arr.to_pylist()
    out = []
    for j in range(seg.n_keys):
        acc, state = None, {}
        for r in seg.order[seg.key_starts[j]:seg.key_starts[j + 1]]:
            if seeded and seeds[r] and add[r]:
                acc = values[r]
            elif add[r]:
                acc = fn.agg(acc, values[r], state) if newer[r] else fn.agg_reversed(acc, values[r], state)
            elif retract[r]:
                acc = fn.retract(acc, values[r])
        out.append(acc)
    return pa.array(out, type=arr.type)


class _Scalar:
    """Per-value fold of a non-commutative function, with Paimon's reversed form for older records."""

    def __init__(self, name, agg):
        self.name, self.cfg = name, agg
        self.obj = {"collect": lambda: _Collect(agg.distinct), "merge_map": _MergeMap,
                    "nested_partial_update": lambda: _NestedPartialUpdate(agg),
                    "merge_map_with_keytime": lambda: _MergeMapWithKeyTime(agg),
                    "nested_update": lambda: _NestedUpdate(agg), "rbm32": lambda: _Roaring(False),
                    "rbm64": lambda: _Roaring(True), "theta_sketch": _Theta, "hll_sketch": _Hll,
                    "listagg": lambda: _ListaggDistinct(agg.delimiter) if agg.distinct else None}.get(name,
                                                                                                   lambda: None)()

    def agg(self, acc, x, state):
        n = self.name
        if n == "last_value":
            return x
        if n == "last_non_null_value":
            return acc if x is None else x
        if n == "first_value":
            if not state.get("init"):
                state["init"] = True
                return x
            return acc
        if n == "first_non_null_value":
            if not state.get("init") and x is not None:
                state["init"] = True
                return x
            return acc
        if n == "listagg" and self.obj is None:
            if _blank(x):
                return acc
            return x if _blank(acc) else acc + self.cfg.delimiter + x
        return self.obj.agg(acc, x)

    def agg_reversed(self, acc, x, state):
        n = self.name
        if n in ("first_value", "first_non_null_value"):
            # Paimon's default aggReversed, agg(in, acc), through the stateful function: before the function is
            # initialised it keeps acc (and initialises, for first_non_null_value only on a non-null acc);
            # after, it takes the older record's value, a null one too
            return self.agg(x, acc, state)
        if n == "last_value":
            return acc
        if n == "last_non_null_value":
            return x if acc is None else acc
        # only FieldCollectAgg has its own aggReversed (agg(acc, in)); ignore-retract wraps it in
        # FieldIgnoreRetractAgg, which falls back to the default agg(in, acc)
        if n == "collect" and not self.cfg.ignore_retract:
            return self.obj.agg(acc, x)
        return self.agg(x, acc, state)

    def retract(self, acc, x):
        if self.name == "last_value":
            return None
        if self.name == "last_non_null_value":
            return None if x is not None else acc
        return self.obj.retract(acc, x)


def _scalar(agg, _type):
    """The per-value fold of any function outside COMMUTATIVE (those run in ``reduce``)."""
    return _Scalar(agg.function, agg)


# ---- kernels --------------------------------------------------------------------------------------------

def _pick_last(seg, eligible, every_row: bool):
    """Last eligible row per key; when every row is eligible that is simply each key's newest row."""
    return seg.last_rows if every_row else K.segment_pick(seg.order, seg.key_starts, eligible, False)


def _null_where_retract(idx, retract):
    if not retract.any():
        return None
    return retract[np.maximum(idx, 0)] & (idx >= 0)


def _last_value(seg, arr, agg, add, retract):
    feeds = add | retract
    idx = _pick_last(seg, feeds, bool(feeds.all()))
    return take_or_null(arr, idx, _null_where_retract(idx, retract))


def _last_non_null(seg, arr, agg, add, retract):
    feeds = add | retract
    every = bool(feeds.all())
    idx = _pick_last(seg, feeds if arr.null_count == 0 else feeds & valid_mask(arr), every and arr.null_count == 0)
    return take_or_null(arr, idx, _null_where_retract(idx, retract))


def _first_value(seg, arr, agg, add, retract):
    return take_or_null(arr, K.segment_pick(seg.order, seg.key_starts, add, True))


def _first_non_null(seg, arr, agg, add, retract):
    return take_or_null(arr, K.segment_pick(seg.order, seg.key_starts, add & valid_mask(arr), True))


def _extreme(want_max):
    def run(seg, arr, agg, add, retract):
        eligible = add & valid_mask(arr) if arr.null_count else add
        if pa.types.is_floating(arr.type):
            values = arr.cast(pa.float64()).to_numpy(zero_copy_only=False)
            idx = K.segment_arg_extreme_float(seg.order, seg.key_starts, values, eligible, want_max)
        else:
            idx = K.segment_arg_extreme(seg.order, seg.key_starts, order_values(arr), eligible, want_max)
        return take_or_null(arr, idx)
    return run


def _sum(product):
    def run(seg, arr, agg, add, retract):
        t = arr.type
        valid = valid_mask(arr)
        if pa.types.is_decimal(t) and (product or t.precision > 18):
            return _python_fold(seg, arr, add, retract, _DecimalArith(t, product))
        if pa.types.is_decimal(t):
            values, lo, hi = decimal_unscaled(arr), -(2 ** 63), 2 ** 63 - 1
        elif pa.types.is_floating(t):
            values, lo, hi = arr.to_numpy(zero_copy_only=False), 0, 0  # nulls: not read; FLOAT stays float32
        else:
            bits = t.bit_width - 1
            filled = arr if arr.null_count == 0 else arr.fill_null(0)
            values = filled.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
            lo, hi = -(2 ** bits), 2 ** bits - 1
        out, out_valid, err, key = K.segment_sum(seg.order, seg.key_starts, values, valid, add, retract, product,
                                                 lo, hi)
        if err:
            what = "overflow" if err == K.OVERFLOW else "division by zero in a product retraction"
            raise MergeFunctionError((f"table {seg.table_name!r}: " if seg.table_name else "")
                                     + f"field {agg.field!r}: {agg.function} {what} ({t})")
        if pa.types.is_decimal(t):
            return decimal_from_unscaled(out, out_valid, t)
        return pa.array(out, mask=~out_valid).cast(t)
    return run


def _listagg(seg, arr, agg, add, retract):
    if agg.distinct:
        return _python_fold(seg, arr, add, retract, _ListaggDistinct(agg.delimiter))
    s = arr.cast(pa.large_string()) if not pa.types.is_large_string(arr.type) else arr
    offsets = np.frombuffer(s.buffers()[1], np.int64)[s.offset:s.offset + len(s) + 1]
    data = np.frombuffer(s.buffers()[2], np.uint8) if s.buffers()[2] is not None else np.zeros(0, np.uint8)
    off, out, valid = K.segment_listagg(seg.order, seg.key_starts, offsets, data, add & valid_mask(arr),
                                        np.frombuffer(agg.delimiter.encode(), np.uint8))
    validity = pa.array(valid, pa.bool_()).buffers()[1] if not valid.all() else None
    res = pa.Array.from_buffers(pa.large_string(), len(valid),
                                [validity, pa.py_buffer(off.tobytes()), pa.py_buffer(out.tobytes())],
                                null_count=int((~valid).sum()))
    return res.cast(arr.type)


# ---- object folds ---------------------------------------------------------------------------------------

def _python_fold(seg, arr, add, retract, fn, seed_rows: np.ndarray | None = None) -> pa.Array:
    """Per key: ``fn.agg`` / ``fn.retract`` over the key's rows, from the value of its ``seed_rows`` row (if
    given and >= 0) or from null."""
    values = arr.to_pylist()
    out = []
    for j in range(seg.n_keys):
        acc = None if seed_rows is None or seed_rows[j] < 0 else values[seed_rows[j]]
        for r in seg.order[seg.key_starts[j]:seg.key_starts[j + 1]]:
            if add[r]:
                acc = fn.agg(acc, values[r])
            elif retract[r]:
                acc = fn.retract(acc, values[r])
        out.append(acc)
    return pa.array(out, type=arr.type)


class _DecimalArith:
    def __init__(self, t, product):
        self.t, self.product = t, product
        self.ctx = Context(prec=max(t.precision * 2 + 2, 40), rounding=ROUND_HALF_UP)
        self.quant = Decimal(1).scaleb(-t.scale)

    def _fit(self, v):
        v = v.quantize(self.quant, rounding=ROUND_HALF_UP, context=self.ctx)
        return v if abs(v) < Decimal(10) ** (self.t.precision - self.t.scale) else None

    def agg(self, acc, x):
        if acc is None or x is None:
            return x if acc is None else acc
        return self._fit(self.ctx.multiply(acc, x) if self.product else self.ctx.add(acc, x))

    def retract(self, acc, x):
        if self.product:
            if acc is None or x is None or x == 0:
                return acc
            return self._fit(self.ctx.divide(acc, x))
        if x is None:
            return acc
        return self._fit(-x if acc is None else self.ctx.subtract(acc, x))


def _blank(s) -> bool:
    """Paimon's ``StringUtils.isBlank``: null, empty or Java whitespace only."""
    return s is None or all(ord(ch) in K.JAVA_WHITESPACE for ch in s)


class _Listagg:
    def __init__(self, delimiter):
        self.delimiter = delimiter

    def agg(self, acc, x):
        if _blank(x):
            return acc
        return x if _blank(acc) else acc + self.delimiter + x


class _ListaggDistinct:
    def __init__(self, delimiter):
        self.delimiter = delimiter
        self.sep = delimiter if delimiter else " "

    def agg(self, acc, x):
        if _blank(x):
            return acc
        if _blank(acc):
            return x
        tokens = acc.split(self.sep)
        seen = set(tokens)
        added = []
        for t in x.split(self.sep):
            if not _blank(t) and t not in seen:
                seen.add(t)
                added.append(t)
        return self.delimiter.join([acc] + added) if added else acc

    def retract(self, acc, x):
        return acc


class _Collect:
    def __init__(self, distinct):
        self.distinct = distinct

    def agg(self, acc, x):
        if acc is None and x is None:
            return None
        if not self.distinct:
            if acc is None or x is None:
                return list(x if acc is None else acc)
            return list(acc) + list(x)
        out = []
        for e in (acc or []) + (x or []):
            if e not in out:
                out.append(e)
        return out

    def retract(self, acc, x):
        if acc is None or not x:
            return acc
        out = list(acc)
        for e in x:
            if e in out:
                out.remove(e)
        return out


class _MergeMap:
    def agg(self, acc, x):
        if acc is None or x is None:
            return x if acc is None else acc
        merged = dict(acc)
        merged.update(dict(x))
        return list(merged.items())

    def retract(self, acc, x):
        if acc is None or x is None:
            return acc
        drop = {k for k, _ in x}
        return [(k, v) for k, v in acc if k not in drop]


class _Roaring:
    def __init__(self, wide):
        import pyroaring
        self.cls = pyroaring.BitMap64 if wide else pyroaring.BitMap

    def agg(self, acc, x):
        if acc is None or x is None:
            return x if acc is None else acc
        return (self.cls.deserialize(acc) | self.cls.deserialize(x)).serialize()

    retract = None


class _Theta:
    def agg(self, acc, x):
        if acc is None or x is None:
            return x if acc is None else acc
        import datasketches as ds
        u = ds.theta_union()
        u.update(ds.compact_theta_sketch.deserialize(acc))
        u.update(ds.compact_theta_sketch.deserialize(x))
        return u.get_result().serialize()

    retract = None


class _Hll:
    def agg(self, acc, x):
        if acc is None or x is None:
            return x if acc is None else acc
        import datasketches as ds
        a, b = ds.hll_sketch.deserialize(acc), ds.hll_sketch.deserialize(x)
        u = ds.hll_union(12)  # Java: new Union() (lgMaxK 12), result HLL_4, compact bytes
        u.update(a)
        u.update(b)
        return u.get_result(ds.tgt_hll_type.HLL_4).serialize_compact()

    retract = None


class _NestedUpdate:
    """ARRAY<ROW> as a nested table: rows upserted by ``fields.<f>.nested-key`` (appended when no key), newer
    rows replace older ones of the same key unless ``fields.<f>.nested-sequence-field`` says they are older;
    ``fields.<f>.count-limit`` caps the rows; ``nested-key-null-strategy`` merge/ignore/error. Retraction
    removes the retracted rows (by key, or equal rows without a key)."""

    def __init__(self, agg):
        x = agg.extra
        self.key = [s.strip() for s in x.get("nested-key", "").split(",") if s.strip()]
        self.seq = [s.strip() for s in x.get("nested-sequence-field", "").split(",") if s.strip()]
        self.nulls = x.get("nested-key-null-strategy", "merge").strip().lower()
        self.limit = int(x.get("count-limit", "2147483647"))

    @staticmethod
    def check(agg, dtype, where):
        if dtype.element is None or dtype.element.root != "ROW":
            raise InvalidSchema(where + f"field {agg.field!r}: nested_update needs ARRAY<ROW>, not {dtype.root}")
        me = _NestedUpdate(agg)
        names = {f.name for f in dtype.element.fields}
        for f in me.key + me.seq:
            if f not in names:
                raise InvalidSchema(where + f"field {agg.field!r}: nested field {f!r} is not in the ROW type")
        if (me.seq or "nested-key-null-strategy" in agg.extra) and not me.key:
            raise InvalidSchema(where + f"field {agg.field!r}: nested-sequence-field and nested-key-null-strategy "
                                "need fields.<f>.nested-key")
        if me.nulls not in ("merge", "ignore", "error"):
            raise InvalidSchema(where + f"field {agg.field!r}: nested-key-null-strategy must be merge, ignore or "
                                "error")

    def _keep(self, key) -> bool:
        if all(v is not None for v in key) or self.nulls == "merge":
            return True
        if self.nulls == "ignore":
            return False
        raise MergeFunctionError(f"nested_update: a nested key {key} contains nulls (nested-key-null-strategy=error)")

    def _upsert(self, rows, table: dict, new_keys_limited: bool):
        for row in rows or []:
            if row is None:
                continue
            key = tuple(row[k] for k in self.key)
            if not self._keep(key):
                continue
            old = table.get(key)
            if old is not None:
                if not self.seq or tuple(row[s] for s in self.seq) >= tuple(old[s] for s in self.seq):
                    table[key] = row
            elif not new_keys_limited or len(table) < self.limit:
                table[key] = row

    def agg(self, acc, x):
        if x is None:
            return acc
        if not self.key:
            rows = [r for r in (acc or []) if r is not None]
            if len(rows) >= self.limit:
                return rows if acc is not None else rows[:self.limit]
            return rows + [r for r in x if r is not None][:self.limit - len(rows)]
        table: dict = {}
        self._upsert(acc, table, False)
        self._upsert(x, table, True)
        return list(table.values())

    def retract(self, acc, x):
        if acc is None or x is None:
            return acc
        if not self.key:
            rows = [r for r in acc if r is not None]
            for gone in x:
                if gone is not None:
                    rows = [r for r in rows if r != gone]
            return rows
        table: dict = {}
        for row in acc:
            if row is not None and self._keep(key := tuple(row[k] for k in self.key)):
                table[key] = row
        for row in x:
            if row is not None and self._keep(key := tuple(row[k] for k in self.key)):
                table.pop(key, None)
        return list(table.values())


class _NestedPartialUpdate:
    """Paimon's nested_partial_update: ARRAY<ROW> as a nested table keyed by ``fields.<f>.nested-key``
    (required); the rows of the accumulator, then of the input, are folded per nested key by partial update
    (each non-null field overwrites, nulls never do), so rows of one key merge field by field.
    ``fields.<f>.nested-key-null-strategy``: merge (default) / ignore (drop rows whose key has a null) / error.
    Null elements are dropped. Rows come out in the order their keys first appear (Paimon's order is its hash
    map's). No retraction (as in Paimon)."""

    retract = None

    def __init__(self, agg):
        x = agg.extra
        self.key = [s.strip() for s in x.get("nested-key", "").split(",") if s.strip()]
        self.nulls = x.get("nested-key-null-strategy", "merge").strip().lower()

    @staticmethod
    def check(agg, dtype, where):
        if dtype.element is None or dtype.element.root != "ROW":
            raise InvalidSchema(where + f"field {agg.field!r}: nested_partial_update needs ARRAY<ROW>, not "
                                f"ARRAY<{dtype.element.root if dtype.element else '?'}>")
        me = _NestedPartialUpdate(agg)
        if not me.key:
            raise InvalidSchema(where + f"field {agg.field!r}: nested_partial_update needs "
                                f"fields.{agg.field}.nested-key (the nested table's key fields)")
        names = {f.name for f in dtype.element.fields}
        for f in me.key:
            if f not in names:
                raise InvalidSchema(where + f"field {agg.field!r}: nested field {f!r} is not in the ROW type")
        if me.nulls not in ("merge", "ignore", "error"):
            raise InvalidSchema(where + f"field {agg.field!r}: nested-key-null-strategy must be merge, ignore or "
                                "error")

    def agg(self, acc, x):
        if x is None:
            return acc
        table: dict = {}
        for row in list(acc or []) + list(x):
            if row is None:
                continue
            key = tuple(_hashable(row[k]) for k in self.key)
            if any(v is None for v in key) and self.nulls != "merge":
                if self.nulls == "ignore":
                    continue
                raise MergeFunctionError(f"nested_partial_update: nested key {dict(zip(self.key, key))} contains "
                                         "nulls (nested-key-null-strategy=error)")
            merged = table.get(key)
            if merged is None:
                merged = table[key] = dict.fromkeys(row)
            for name, value in row.items():
                if value is not None:
                    merged[name] = value
        return list(table.values())


class _MergeMapWithKeyTime:
    """Paimon's merge_map_with_keytime: MAP<K, ROW<..., ts>>, each map key kept with its newest timestamp.
    ``fields.<f>.ts-field`` names the ROW's timestamp field (default: its last field; a string type). Merging an
    input map into the accumulator: a null value removes the key; an entry with a null timestamp is skipped; an
    entry replaces the accumulator's when the key is absent (or its value or timestamp is null) or its timestamp
    is greater as a string. The first non-null map is taken as is. No retraction (as in Paimon)."""

    retract = None

    def __init__(self, agg, dtype=None):
        self.ts_name = agg.extra.get("ts-field", "").strip() or None

    @staticmethod
    def check(agg, dtype, where):
        value = dtype.value
        if value is None or value.root != "ROW":
            raise InvalidSchema(where + f"field {agg.field!r}: merge_map_with_keytime needs MAP<K, ROW<...>>, "
                                f"not a MAP of {value.root if value else '?'}")
        if len(value.fields) < 2:
            raise InvalidSchema(where + f"field {agg.field!r}: merge_map_with_keytime needs a ROW of at least 2 "
                                f"fields (value fields and a timestamp), not {len(value.fields)}")
        ts = agg.extra.get("ts-field", "").strip() or value.fields[-1].name
        by_name = {f.name: f for f in value.fields}
        if ts not in by_name:
            raise InvalidSchema(where + f"field {agg.field!r}: ts-field {ts!r} is not in the ROW type (fields: "
                                f"{', '.join(by_name)})")
        if not by_name[ts].type.is_string:
            raise InvalidSchema(where + f"field {agg.field!r}: the timestamp field {ts!r} of merge_map_with_keytime "
                                f"must be a string (STRING/VARCHAR/CHAR), not {by_name[ts].type.root}")

    def agg(self, acc, x):
        if acc is None or x is None:
            return x if acc is None else acc
        if not x:
            return acc
        ts = self.ts_name
        if ts is None:  # the ROW's last field: any non-null value row names it
            for _, v in list(x) + list(acc):
                if v is not None:
                    ts = list(v)[-1]
                    break
        out = {_hashable(k): (k, v) for k, v in acc}
        for k, v in x:
            h = _hashable(k)
            if v is None:
                out.pop(h, None)
                continue
            if v[ts] is None:
                continue
            old = out.get(h)
            if old is None or old[1] is None or old[1][ts] is None or v[ts] > old[1][ts]:
                out[h] = (k, v)
        return list(out.values())


def _hashable(v):
    if isinstance(v, list):
        return tuple(_hashable(e) for e in v)
    if isinstance(v, dict):
        return tuple((k, _hashable(e)) for k, e in v.items())
    return v


def _object_fold(agg):
    """The per-value fold object of a function folded in Python (listagg, collect, nested_*)."""
    fn = agg.function
    if fn == "listagg":
        return _ListaggDistinct(agg.delimiter) if agg.distinct else _Listagg(agg.delimiter)
    if fn == "collect":
        return _Collect(agg.distinct)
    if fn == "nested_update":
        return _NestedUpdate(agg)
    if fn == "nested_partial_update":
        return _NestedPartialUpdate(agg)
    raise ValueError(f"no Python fold for aggregate function {fn!r}")


def _fold(make):
    def run(seg, arr, agg, add, retract):
        return _python_fold(seg, arr, add, retract, make(agg))
    return run


_REDUCERS = {
    "sum": _sum(False), "product": _sum(True),
    "max": _extreme(True), "min": _extreme(False), "bool_or": _extreme(True), "bool_and": _extreme(False),
    "last_value": _last_value, "last_non_null_value": _last_non_null,
    "first_value": _first_value, "first_non_null_value": _first_non_null,
    "listagg": _listagg,
    "collect": _fold(lambda a: _Collect(a.distinct)), "merge_map": _fold(lambda a: _MergeMap()),
    "nested_update": _fold(_NestedUpdate), "nested_partial_update": _fold(_NestedPartialUpdate),
    "merge_map_with_keytime": _fold(_MergeMapWithKeyTime),
    "rbm32": _fold(lambda a: _Roaring(False)), "rbm64": _fold(lambda a: _Roaring(True)),
    "theta_sketch": _fold(lambda a: _Theta()), "hll_sketch": _fold(lambda a: _Hll()),
}
