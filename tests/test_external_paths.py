"""Data files in ``data-file.external-paths`` (engine.data_paths): written round-robin under the external roots in
the table's relative bucket layout, recorded as Java's ``file:/...`` text, and read, compacted, expired, checked
and cleaned up like files in the table directory."""
from __future__ import annotations

import os
import pickle

import pyarrow as pa
import pytest

from engine.data_paths import (
    BucketDir,
    DataFilePlacer,
    data_file_path,
    external_roots,
    local_file_path,
)
from engine.errors import InvalidOption, UnsupportedFeature

SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("v", pa.string())])


def ext_options(tmp_path, **more):
    roots = [tmp_path / "ext1", tmp_path / "ext2"]
    return {"data-file.external-paths": f"file://{roots[0]},file:{roots[1]}",
            "data-file.external-paths.strategy": "round-robin", **more}, [str(r) for r in roots]


def rows(dt, ids, tag):
    return pa.table({"dt": [dt] * len(ids), "id": ids, "v": [f"{tag}{i}" for i in ids]}, schema=SCHEMA)


def live_files(table):
    return [(sp, f) for sp in table.plan() for f in sp.files]


def files_under(root):
    return sorted(os.path.join(d, n) for d, _, names in os.walk(root) for n in names)


def assert_all_external(table, roots):
    live = live_files(table)
    assert live
    for sp, f in live:
        assert f.external_path is not None and f.external_path.startswith("file:/")
        assert not f.external_path.startswith("file://")  # Java's Path.toString form
        path = local_file_path(f.external_path)
        assert os.path.isfile(path)
        root = next(r for r in roots if path.startswith(r + os.sep))
        assert os.path.relpath(path, root) == os.path.join(sp.bucket_dir.relative, f.file_name)
        assert not os.path.exists(os.path.join(sp.bucket_dir, f.file_name))
    return live


def test_local_file_path_forms():
    assert local_file_path("file:/a/b/c.parquet") == "/a/b/c.parquet"
    assert local_file_path("file:///a/b/c.parquet") == "/a/b/c.parquet"
    assert local_file_path("file://localhost/a/b") == "/a/b"
    assert local_file_path("/a//b/./c") == "/a/b/c"
    assert local_file_path("file:/a/dt=x%3Ay/b") == "/a/dt=x%3Ay/b"  # Paimon's escaped partition names stay
    for bad in ("s3://bucket/x.parquet", "oss://b/x", "hdfs://nn:8020/x", "file://otherhost/x"):
        with pytest.raises(UnsupportedFeature, match="x"):
            local_file_path(bad, "x.parquet")


def test_external_roots_follow_java_rules(tmp_path):
    assert external_roots({"data-file.external-paths": "file:/a"}) == []  # strategy defaults to none
    assert external_roots({"data-file.external-paths": "file:/a,file:/b",
                           "data-file.external-paths.strategy": "round-robin"}) == ["/a", "/b"]
    with pytest.raises(InvalidOption, match="scheme should not be null"):
        external_roots({"data-file.external-paths": "/a", "data-file.external-paths.strategy": "round-robin"})
    assert external_roots({"data-file.external-paths": "s3://x/y,file:///b",
                           "data-file.external-paths.strategy": "specific-fs",
                           "data-file.external-paths.specific-fs": "file"}) == ["/b"]
    with pytest.raises(InvalidOption):
        external_roots({"data-file.external-paths": "file:/a", "data-file.external-paths.strategy": "specific-fs"})
    with pytest.raises(UnsupportedFeature):
        external_roots({"data-file.external-paths": "s3://x/y", "data-file.external-paths.strategy": "round-robin"})
    with pytest.raises(UnsupportedFeature):
        external_roots({"data-file.external-paths": "file:/a", "data-file.external-paths.strategy": "entropy-inject"})


def test_placer_round_robins_and_bucket_dir_pickles(tmp_path):
    bd = BucketDir(str(tmp_path / "t"), "dt=a/bucket-0")
    assert pickle.loads(pickle.dumps(bd)).relative == "dt=a/bucket-0"
    opts, roots = ext_options(tmp_path)
    placer = DataFilePlacer(bd, opts)
    placed = [placer.place(f"f{i}") for i in range(4)]
    used = [next(r for r in roots if p.startswith(r)) for p, _ in placed]
    assert used[0] != used[1] and used[0] == used[2] and used[1] == used[3]
    assert all(ext == "file:" + p and p.endswith(f"/dt=a/bucket-0/f{i}") for i, (p, ext) in enumerate(placed))
    with pytest.raises(UnsupportedFeature):  # a plain string cannot be mirrored under the external roots
        DataFilePlacer(str(bd), opts)


@pytest.mark.parametrize("kind", ["pk", "pk-dv", "append", "append-dv"])
def test_write_read_compact_expire_check(catalog, tmp_path, kind):
    opts, roots = ext_options(tmp_path, **{"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1",
                                           "snapshot.time-retained": "1 ms", "write-only": "true"})
    if kind.startswith("append"):
        if kind == "append-dv":
            opts["deletion-vectors.enabled"] = "true"
        t = catalog.create_table("db.t", SCHEMA, partition_keys=["dt"],
                                 options={**opts, "compaction.min.file-num": "2"})
    else:
        if kind == "pk-dv":
            opts["deletion-vectors.enabled"] = "true"  # batch reads skip level 0 until compaction
        t = catalog.create_table("db.t", SCHEMA, primary_key=["dt", "id"], partition_keys=["dt"],
                                 options={**opts, "bucket": "2"})
    expected = {}
    for i in range(4):
        batch = rows("a" if i % 2 else "b", list(range(i, i + 6)), f"w{i}-")
        t.write(batch)
        for r in batch.to_pylist():
            key = (r["dt"], r["id"]) if kind.startswith("pk") else (r["dt"], r["id"], r["v"])
            expected[key] = r
    before = assert_all_external(t, roots)
    assert files_under(t.root) and not [p for p in files_under(t.root) if p.endswith(".parquet")]

    def got():
        out = t.read().to_pylist()
        return sorted((r["dt"], r["id"], r["v"]) for r in out)
    want = sorted((r["dt"], r["id"], r["v"]) for r in expected.values())
    if kind != "pk-dv":
        assert got() == want
    if kind.startswith("pk"):
        t.delete(pa.table({"dt": ["a"], "id": [1]}, schema=SCHEMA.remove(2)))
        want = [w for w in want if w[:2] != ("a", 1)]
        if kind != "pk-dv":
            assert got() == want
    assert t.compact(full=True) is not None
    after = assert_all_external(t, roots)
    assert got() == want
    assert t.check().ok, t.check().summary()
    ever = {p for r in roots for p in files_under(r)}
    assert {local_file_path(f.external_path) for _, f in before} <= ever
    removal = t.expire_snapshots(retain_min=1, retain_max=1, time_retained=0)
    gone = ever - {local_file_path(f.external_path) for _, f in after}
    assert gone and gone <= set(removal.data_files)
    assert not any(os.path.exists(p) for p in gone)
    assert got() == want
    report = t.check()
    assert report.ok, report.summary()
    # orphan cleanup looks under the external roots too, and never deletes a live file
    stray = os.path.join(roots[0], "dt=a", "bucket-0", "data-stray.parquet")
    os.makedirs(os.path.dirname(stray), exist_ok=True)
    with open(stray, "wb") as f:
        f.write(b"x")
    removed = t.remove_orphan_files(older_than=0)
    assert stray in removed
    assert not any(p == local_file_path(f.external_path) for p in removed for _, f in after)
    assert got() == want
    # row-level delete of rows in external files (deletion vectors / rewrites / -D records), then compaction
    assert t.delete_where([("id", "=", 4)]) is not None
    want = [w for w in want if w[1] != 4]
    if kind == "pk-dv":
        t.compact(full=True)
    assert got() == want
    if kind == "append-dv":
        assert any(sp.vectors.files for sp in t.plan())
    assert_all_external(t, roots)
    t.compact(full=True)
    assert got() == want
    assert_all_external(t, roots)
    assert t.check().ok


def test_data_file_path_prefers_external(tmp_path):
    class Meta:
        file_name = "data-1.parquet"
        external_path = "file:///x/dt=a/bucket-0/data-1.parquet"
        extra_files = ()
    assert data_file_path("/t/dt=a/bucket-0", Meta) == "/x/dt=a/bucket-0/data-1.parquet"
    Meta.external_path = None
    assert data_file_path("/t/dt=a/bucket-0", Meta) == "/t/dt=a/bucket-0/data-1.parquet"


@pytest.mark.parametrize("producer", ["input", "lookup"])
def test_changelog_files_go_external_and_are_read(catalog, tmp_path, producer):
    opts, _ = ext_options(tmp_path)
    t = catalog.create_table("db.t", SCHEMA, primary_key=["dt", "id"], partition_keys=["dt"],
                             options={**opts, "bucket": "1", "changelog-producer": producer})
    t.write(rows("a", [1, 2], "x"))
    t.write(rows("a", [2, 3], "y"))
    lists = [t.snapshot(sid).changelog_manifest_list for sid in t.snapshot_manager.ids()]
    log = [e.file for name in lists if name for m in t.manifests.manifest_list(name)
           for e in t.manifests.manifest(m.file_name)]
    assert log and all(f.external_path and os.path.isfile(local_file_path(f.external_path)) for f in log)
    changes = [(r["_row_kind"], r["id"], r["v"]) for r in t.read_changes().to_pylist()]
    assert ("+I", 1, "x1") in changes and ("+I", 3, "y3") in changes  # the changelog files were read
    assert t.check().ok
