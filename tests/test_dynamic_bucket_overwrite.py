"""Overwrites of dynamic-bucket tables: the overwrite writer (new_write(overwrite=True)) starts the index of every
partition it writes empty, as Paimon's overwrite writer does (SimpleHashBucketAssigner, no restored files), so the
HASH index of an overwritten partition holds only the keys written, its buckets fill from 0 again and a replaced
key written later is a new key."""
from __future__ import annotations

import pyarrow as pa
import pytest

from engine.errors import InvalidInput
from engine.meta import binary_row
from kernels.hashing import hash_codes
from tests.test_dynamic_bucket import hash_index, key_buckets, make, rows


def hashes(ids) -> set[int]:
    return set(hash_codes([pa.array(ids, pa.int64())]).tolist())


def part(t, dt: str) -> bytes:
    return binary_row.serialize_row([dt], t.schema.types_of(["dt"]))


def overwrite(t, data, partitions="dynamic"):
    with t.new_write(overwrite=True) as w:
        w.write(data)
        messages = w.prepare_commit()
    return t.commit_overwrite(messages, partitions)


def model(t) -> list[tuple]:
    return sorted((r["dt"], r["id"], r["v"]) for r in t.read().to_pylist())


@pytest.mark.parametrize("partitions", ["dynamic", [("a",)]], ids=["dynamic", "static"])
def test_partition_overwrite_writes_an_index_of_only_its_rows(catalog, partitions):
    t = make(catalog, **{"dynamic-bucket.target-row-num": 3})
    t.write(rows("a", [1, 2, 3, 4, 5]))  # a: bucket 0 = {1, 2, 3}, bucket 1 = {4, 5}
    t.write(rows("b", [1, 2]))
    before_b = hash_index(t)[(part(t, "b"), 0)]
    overwrite(t, rows("a", [5, 8], "o"), partitions)
    # fresh index: 5 and 8 fill bucket 0 (before: 5 kept bucket 1, 8 joined it, and bucket 0 kept 1, 2, 3)
    assert hash_index(t) == {(part(t, "a"), 0): hashes([5, 8]), (part(t, "b"), 0): before_b}
    assert {k: b for k, b in key_buckets(t).items() if k[0] == "a"} == {("a", 5): 0, ("a", 8): 0}
    # gone keys are new keys: 1 fills bucket 0 to the target, 2 opens bucket 1
    t.write(rows("a", [1, 2], "n"))
    assert {k: b for k, b in key_buckets(t).items() if k[0] == "a"} == {("a", 5): 0, ("a", 8): 0, ("a", 1): 0,
                                                                           ("a", 2): 1}
    assert hash_index(t)[(part(t, "a"), 0)] == hashes([1, 5, 8]) and hash_index(t)[(part(t, "a"), 1)] == hashes([2])
    assert model(t) == [("a", 1, "n1"), ("a", 2, "n2"), ("a", 5, "o5"), ("a", 8, "o8"), ("b", 1, "v1"),
                        ("b", 2, "v2")]


def test_full_overwrite_and_upserts_after_it(catalog):
    t = make(catalog, **{"dynamic-bucket.target-row-num": 2})
    t.write(rows("a", [1, 2, 3, 4]))
    t.write(rows("b", [7]))
    overwrite(t, rows("a", [4, 9], "o"), None)
    assert hash_index(t) == {(part(t, "a"), 0): hashes([4, 9])}  # b's index went with its files
    t.write(rows("a", [4, 1], "u"))  # 4 is known (bucket 0), 1 is new: bucket 0 is full, so bucket 1
    assert key_buckets(t) == {("a", 4): 0, ("a", 9): 0, ("a", 1): 1}
    assert model(t) == [("a", 1, "u1"), ("a", 4, "u4"), ("a", 9, "o9")]
    assert not t.check().orphan_files


def test_overwrite_is_not_refused_by_a_concurrent_append_to_the_partition(catalog):
    """The OVERWRITE replaces whatever the partition holds when it lands: a concurrent writer's index of it goes
    with its files instead of making the overwrite conflict."""
    t = make(catalog, **{"dynamic-bucket.target-row-num": 3})
    t.write(rows("a", [1, 2]))
    w = t.new_write(overwrite=True)
    w.write(rows("a", [3], "o"))
    t.write(rows("a", [6, 7]))
    t.commit_overwrite(w.prepare_commit(), "dynamic")
    assert hash_index(t) == {(part(t, "a"), 0): hashes([3])}
    assert model(t) == [("a", 3, "o3")]


def test_overwrite_messages_of_a_normal_writer_are_refused(catalog):
    t = make(catalog, **{"dynamic-bucket.target-row-num": 3})
    t.write(rows("a", [1, 2, 3, 4]))
    sid, index = t.latest_snapshot_id(), hash_index(t)
    with t.new_write() as w:
        w.write(rows("a", [4, 8], "o"))
        messages = w.prepare_commit()
    with pytest.raises(InvalidInput, match=r"new_write\(overwrite=True\)") as e:
        t.commit_overwrite(messages, "dynamic")
    assert e.value.table == t.name
    assert t.latest_snapshot_id() == sid and hash_index(t) == index
    assert not t.check().orphan_files  # the refused messages' data and index files were deleted


def test_overwrite_writer_messages_are_refused_by_commit(catalog):
    """Its index lacks the partition's other keys: published by an APPEND it would place them in two buckets."""
    t = make(catalog, **{"dynamic-bucket.target-row-num": 3})
    t.write(rows("a", [1, 2]))
    sid = t.latest_snapshot_id()
    with t.new_write(overwrite=True) as w:
        w.write(rows("a", [3]))
        messages = w.prepare_commit()
    with pytest.raises(InvalidInput, match="commit_overwrite"):
        t.commit(messages)
    assert t.latest_snapshot_id() == sid and not t.check().orphan_files
