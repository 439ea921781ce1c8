"""Dynamic bucket mode (bucket=-1 on a primary-key table): key-hash index, assignment rules, commits."""
from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.dynamic_bucket.assigner import PartitionIndex
from engine.dynamic_bucket.index_files import (
    HASH_INDEX,
    read_hashes,
    read_index_manifest,
)
from engine.errors import CommitConflict, InvalidSchema
from kernels.hashing import hash_codes

SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("v", pa.string())])


def rows(dt, ids, tag="v"):
    return pa.table({"dt": [dt] * len(ids), "id": ids, "v": [f"{tag}{i}" for i in ids]}, schema=SCHEMA)


def make(catalog, name="db.d", **opts):
    return catalog.create_table(name, SCHEMA, ["dt", "id"], ["dt"],
                                options={"bucket": "-1", **{k.replace("_", "-"): str(v) for k, v in opts.items()}})


def key_buckets(t) -> dict:
    """(dt, id) -> bucket, from the data files."""
    out = {}
    for sp in t.plan():
        for f in sp.files:
            ids = pq.ParquetFile(os.path.join(sp.bucket_dir, f.file_name)).read(columns=["id"]).column("id")
            for i in ids.to_pylist():
                out[(sp.partition_values[0], i)] = sp.bucket
    return out


def hash_index(t) -> dict:
    """(partition bytes, bucket) -> set of hashes, from the snapshot's index manifest."""
    recs = read_index_manifest(t.file_io, t.paths, t.snapshot().index_manifest)
    assert all(r["_INDEX_TYPE"] == HASH_INDEX for r in recs)
    scan = t.scan()
    return {(r["_PARTITION"], r["_BUCKET"]): set(read_hashes(t.file_io, scan.index_file_path(r), r).tolist())
            for r in recs}


def test_fills_buckets_to_target_then_opens_new_ones(catalog):
    t = make(catalog, **{"dynamic-bucket.target-row-num": 3})
    t.write(rows("a", [1, 2, 3, 4, 5]))
    t.write(rows("a", [1, 7, 8], "u"))
    t.write(rows("b", [1]))
    kb = key_buckets(t)
    assert [kb[("a", i)] for i in (1, 2, 3, 4, 5, 7, 8)] == [0, 0, 0, 1, 1, 1, 2]
    assert kb[("b", 1)] == 0
    assert all(sp.total_buckets == -1 for sp in t.plan())
    # every bucket's HASH index holds exactly the hash codes of its keys
    idx = hash_index(t)
    for (part, bucket), hashes in idx.items():
        dt = t.scan().partition_values(part)[0]
        keys = [i for (d, i), b in kb.items() if d == dt and b == bucket]
        assert hashes == set(hash_codes([pa.array(keys, pa.int64())]).tolist())
    got = sorted((r["dt"], r["id"], r["v"]) for r in t.read().to_pylist())
    assert got == [("a", 1, "u1"), ("a", 2, "v2"), ("a", 3, "v3"), ("a", 4, "v4"), ("a", 5, "v5"),
                   ("a", 7, "u7"), ("a", 8, "u8"), ("b", 1, "v1")]


def test_updates_and_deletes_stay_in_the_key_bucket(catalog):
    t = make(catalog, **{"dynamic-bucket.target-row-num": 2})
    t.write(rows("a", [1, 2, 3, 4]))
    before = key_buckets(t)
    t.write(rows("a", [4, 3], "u"))
    t.delete(pa.table({"dt": ["a"], "id": [1]}))
    assert key_buckets(t) == before
    assert sorted((r["id"], r["v"]) for r in t.read().to_pylist()) == [(2, "v2"), (3, "u3"), (4, "u4")]
    assert t.lookup(pa.table({"dt": ["a", "a"], "id": [3, 1]})).to_pylist() == [{"dt": "a", "id": 3, "v": "u3"}]
    assert t.read(filter=[("id", "=", 4)]).column("v").to_pylist() == ["u4"]


def test_initial_buckets_spread_first_keys_over_assigners(catalog):
    t = make(catalog, **{"dynamic-bucket.initial-buckets": 4})
    t.write(rows("a", list(range(200))))
    assert sorted({b for b in key_buckets(t).values()}) == [0, 1, 2, 3]


def test_max_buckets_caps_new_buckets(catalog):
    t = make(catalog, **{"dynamic-bucket.target-row-num": 2, "dynamic-bucket.max-buckets": 3})
    t.write(rows("a", list(range(20))))
    assert sorted(set(key_buckets(t).values())) == [0, 1, 2]
    assert t.read().num_rows == 20


def test_bucket_key_refused_in_dynamic_mode(catalog):
    with pytest.raises(InvalidSchema, match="dynamic bucket"):
        catalog.create_table("db.x", SCHEMA, ["dt", "id"], ["dt"], options={"bucket": "-1", "bucket-key": "id"})


def test_concurrent_writers_on_one_partition_conflict(catalog):
    t = make(catalog, **{"dynamic-bucket.target-row-num": 2})
    t.write(rows("a", [1]))
    w1, w2 = t.new_write(), t.new_write()
    w1.write(rows("a", [10, 11, 12]))
    w2.write(rows("a", [20, 21, 22]))
    m1, m2 = w1.prepare_commit(), w2.prepare_commit()
    t.commit(m1)
    files_before = sorted(os.listdir(os.path.join(t.root, "index")))
    with pytest.raises(CommitConflict, match="dynamic-bucket index"):
        t.commit(m2)
    loser = {os.path.basename(p) for m in m2 for p in m.index_paths}
    assert loser and loser <= set(files_before)
    assert sorted(os.listdir(os.path.join(t.root, "index"))) == sorted(set(files_before) - loser)
    assert sorted(t.read().column("id").to_pylist()) == [1, 10, 11, 12]
    # a writer on another partition is independent
    w3 = t.new_write()
    w3.write(rows("b", [1]))
    t.commit(w3.prepare_commit())
    assert t.read().num_rows == 5


def test_fixed_bucket_commit_keeps_the_index_manifest(catalog):
    t = make(catalog)
    t.write(rows("a", [1]))
    name = t.snapshot().index_manifest
    assert name is not None
    t.alter().add_column("x", pa.int8()).commit()
    t.write(pa.table({"dt": ["b"], "id": [2], "v": ["q"], "x": pa.array([1], pa.int8())}))
    assert len(hash_index(t)) == 2


@settings(max_examples=30, deadline=None)
@given(batches=st.lists(st.lists(st.integers(-2**31, 2**31 - 1), max_size=30), min_size=1, max_size=5),
       target=st.integers(1, 5), k=st.integers(1, 3))
def test_partition_index_properties(batches, target, k):
    idx = PartitionIndex(0, np.zeros(0, np.int32), np.zeros(0, np.int32), {}, target, k, -1)
    seen: dict[int, int] = {}
    for b in batches:
        got = idx.assign(np.array(b, np.int32))
        for h, bucket in zip(b, got.tolist()):
            assert seen.setdefault(h, bucket) == bucket  # a hash keeps its bucket
            assert bucket % k == (abs(h) % k) % k  # owned by the key's assigner (partition hash 0)
    counts: dict[int, int] = {}
    for bucket in seen.values():
        counts[bucket] = counts.get(bucket, 0) + 1
    assert all(c <= target for c in counts.values())
    for a in range(k):  # per assigner, buckets are opened densely: a, a+k, a+2k, ...
        owned = sorted(b for b in counts if b % k == a)
        assert owned == list(range(a, a + k * len(owned), k))
        assert all(counts[b] == target for b in owned[:-1])  # only the newest bucket may be partly full


def test_lookup_uses_the_hash_index(catalog):
    from engine.dynamic_bucket.lookup import probe_groups

    t = make(catalog, **{"dynamic-bucket.target-row-num": 3})
    t.write(rows("a", list(range(10))))
    t.write(rows("a", [4, 8], "u"))
    kb = key_buckets(t)
    part = t.plan()[0].partition
    probe = pa.chunked_array([pa.array([8, 4, 0, 77], pa.int64())])
    groups = probe_groups(t, t.snapshot(), part, [probe], sorted(set(kb.values())))
    keys = [8, 4, 0, 77]
    probed = [(b, keys[i]) for b, ix in groups for i in ix.tolist()]
    # each written key is probed in exactly its bucket; key 77 was never written: no bucket is read for it
    assert sorted(probed) == sorted((kb[("a", k)], k) for k in (8, 4, 0))
    got = t.lookup(pa.table({"dt": ["a"] * 4, "id": [8, 4, 0, 77]}))
    assert sorted((r["id"], r["v"]) for r in got.to_pylist()) == [(0, "v0"), (4, "u4"), (8, "u8")]
