"""Paimon's fixed-bucket assignment written as Spark column expressions, so placement needs no Python round trip.

Paimon hashes a key as a ``BinaryRow``: for one INT or BIGINT field the row is 16 bytes (an 8-byte header that is
zero for an insert row without nulls, then the value in an 8-byte slot, little-endian) hashed with Murmur3-32 over
4-byte words, seed 42; the bucket is Java's ``Math.abs(hash % buckets)``. ``kernels.hashing`` is the reference
implementation; tests/spark/test_bucketing.py checks that this expression gives the same bucket for every value.
All arithmetic stays below 2^63 in BIGINT (32-bit products are split in 16-bit halves), so it is exact with ANSI
mode on or off. Other key layouts return None: callers then use the hashing kernel in an Arrow UDF.
"""
from __future__ import annotations

import pyarrow as pa

MASK = 0xFFFFFFFF
_C1, _C2, _C3 = 0xCC9E2D51, 0x1B873593, 0xE6546B64
_F1, _F2 = 0x85EBCA6B, 0xC2B2AE35
SEED = 42
ROW_BYTES = 16  # header word pair + one 8-byte field slot


def _rotl_int(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & MASK


def _mix_int(h: int, word: int) -> int:
    k = _rotl_int((word * _C1) & MASK, 15) * _C2 & MASK
    return (_rotl_int(h ^ k, 13) * 5 + _C3) & MASK


_AFTER_HEADER = _mix_int(_mix_int(SEED, 0), 0)  # the two header words are zero: a constant


class _Stages:
    """Builds the hash as one ``selectExpr`` of named SQL steps. Each step refers to earlier steps by name (Spark's
    lateral column aliases), so every intermediate is computed once (one expression tree would repeat shared
    sub-expressions and grow exponentially), and the whole projection is one call for Spark to parse and analyse."""

    def __init__(self, prefix: str):
        self.prefix, self.names, self.sql = prefix, [], []

    def step(self, expression: str) -> str:
        name = f"`{self.prefix}{len(self.names)}`"
        self.sql.append(f"{expression} AS {name}")
        self.names.append(name.strip("`"))
        return name

    def mul32(self, x: str, c: int) -> str:
        """(x * c) mod 2^32 for 0 <= x < 2^32 and a constant c, without leaving BIGINT."""
        return self.step(f"(({x} * {c & 0xFFFF}) + shiftleft(({x} * {c >> 16}) & 65535, 16)) & {MASK}")

    def rotl(self, x: str, r: int) -> str:
        return self.step(f"(shiftleft({x}, {r}) | shiftright({x}, {32 - r})) & {MASK}")

    def xor_shift(self, h: str, r: int) -> str:
        return self.step(f"{h} ^ shiftright({h}, {r})")

    def mix(self, h: str, word: str) -> str:
        k = self.mul32(self.rotl(self.mul32(word, _C1), 15), _C2)
        h = self.rotl(self.step(f"{h} ^ {k}"), 13)
        return self.step(f"({h} * 5 + {_C3}) & {MASK}")

    def fmix(self, h: str) -> str:
        h = self.xor_shift(self.step(f"{h} ^ {ROW_BYTES}"), 16)
        h = self.xor_shift(self.mul32(h, _F1), 13)
        return self.xor_shift(self.mul32(h, _F2), 16)


def bucket_sql(key: str, arrow_type: pa.DataType, num_buckets: int, prefix: str) -> tuple[list[str], str] | None:
    """Paimon's bucket of the one-field key in column ``key`` of ``arrow_type`` as SQL: (named steps for one
    ``selectExpr``, each ``<expression> AS <prefix><i>``; the final expression over them), or None when the type
    is not INT or BIGINT. A null key gives null."""
    stages = _Stages(prefix)
    column = "`" + key.replace("`", "``") + "`"
    if pa.types.is_int64(arrow_type):
        value = stages.step(f"CAST({column} AS BIGINT)")
        low = stages.step(f"{value} & {MASK}")
        high = stages.step(f"shiftrightunsigned({value}, 32) & {MASK}")
    elif pa.types.is_int32(arrow_type):
        low = stages.step(f"CAST({column} AS BIGINT) & {MASK}")
        high = "CAST(0 AS BIGINT)"
    else:
        return None
    h = stages.fmix(stages.mix(stages.mix(f"CAST({_AFTER_HEADER} AS BIGINT)", low), high))
    signed = f"CASE WHEN {h} >= {1 << 31} THEN {h} - {1 << 32} ELSE {h} END"
    return stages.sql, f"abs(({signed}) % {int(num_buckets)})"


def with_bucket_column(df, key: str, arrow_type: pa.DataType, num_buckets: int, name: str, *,
                       modulo: int | None = None):
    """``df`` with column ``name`` = Paimon's bucket (0..num_buckets-1) of the one-field key in column ``key`` of
    ``arrow_type`` (an INT; with ``modulo``: the bucket modulo that, nulls as 0), or None when the type is not INT
    or BIGINT. Null keys give null (the writer rejects them). One ``selectExpr`` and one ``select``: each extra
    DataFrame call re-analyses the ~20 projections (tens of ms per call on the driver)."""
    sql = bucket_sql(key, arrow_type, num_buckets, f"{name}_h")
    if sql is None:
        return None
    steps, bucket = sql
    if modulo is not None:
        bucket = f"coalesce(({bucket}) % {int(modulo)}, 0)"
    keep = ["`" + c.replace("`", "``") + "`" for c in df.columns] + [f"`{name}`"]
    return df.selectExpr("*", *steps, f"CAST({bucket} AS INT) AS `{name}`").select(*keep)
