"""Two writers on the same bucket: keep sequence numbers unambiguous ("the later commit wins").

A writer numbers its records from the largest ``_SEQUENCE_NUMBER`` of its bucket in the snapshot it started from.
Two writers that started from the same snapshot and both write bucket B therefore use the same numbers, and a key
written by both would be merged by an arbitrary tie. Paimon avoids this by having one writer per bucket; lakemerge
allows several and decides it at commit time:

If the latest snapshot holds a live file of bucket B with a sequence number >= the smallest number of the commit's
new level-0 files in B, those files are rewritten with every sequence number shifted past the bucket's largest
live one (same rows, same order, new file names) before the snapshot is published. Append-table files store no
sequence column: only their metadata is shifted (same file, nothing written). The commit therefore wins over
every commit that was published before it, exactly as if it had started after them. The rewrite happens only under
contention; without it the committed files are used as they are.
"""
from __future__ import annotations

import dataclasses
import os

import pyarrow as pa
import pyarrow.compute as pc

from engine.crash_points import crash_point
from engine.data_paths import data_file_path, placer_for
from engine.errors import CommitConflict
from engine.meta.data_file import FILE_SOURCE_APPEND
from engine.meta.manifest import ADD, ManifestEntry
from engine.options import DATA_FILE_PREFIX
from engine.postpone import POSTPONE_BUCKET
from engine.read.split_read import read_data_file
from engine.schema import SEQUENCE_NUMBER
from engine.write.formats import DataFileFormat, data_file_format, format_of_file


def _is_new_append(e: ManifestEntry) -> bool:
    """A new level-0 file of a real bucket (postponed files are never merged by sequence number: engine.postpone)."""
    return e.kind == ADD and e.file.level == 0 and e.file.file_source in (None, FILE_SOURCE_APPEND) \
        and e.bucket != POSTPONE_BUCKET


def rebase_sequences(table, entries: list[ManifestEntry], latest, base_id: int | None = None
                     ) -> tuple[list[ManifestEntry], list[str]]:
    """Return ``(entries, written paths)``; entries unchanged and ``[]`` when no bucket overlaps ``latest``.
    ``base_id``: the oldest snapshot the writers numbered from; nothing can overlap if it is still the latest."""
    if latest is None or (base_id is not None and latest.id <= base_id):
        return entries, []
    mine: dict[tuple[bytes, int], int] = {}
    for e in entries:
        if _is_new_append(e):
            key = (e.partition, e.bucket)
            mine[key] = min(mine.get(key, e.file.min_sequence_number), e.file.min_sequence_number)
    if not mine:
        return entries, []
    live_max: dict[tuple[bytes, int], int] = {}
    for e in table.manifests.live_entries(latest):
        key = (e.partition, e.bucket)
        if key in mine:
            live_max[key] = max(live_max.get(key, -1), e.file.max_sequence_number)
    shift = {key: live_max[key] - lo + 1 for key, lo in mine.items() if key in live_max and live_max[key] >= lo}
    if not shift:
        return entries, []
    out, written = [], []
    try:
        for e in entries:
            offset = shift.get((e.partition, e.bucket)) if _is_new_append(e) else None
            if offset is None:
                out.append(e)
                continue
            bucket_dir = table.bucket_dir(table.scan().partition_values(e.partition), e.bucket)
            meta = _rewrite(table, bucket_dir, e.file, offset, written)
            out.append(dataclasses.replace(e, file=meta))
    except BaseException:
        for p in written:
            table.file_io.delete(p)
        raise
    crash_point("commit.after-rebase")
    return out, written


def _rewrite(table, bucket_dir: str, meta, offset: int, written: list[str]):
    if table.schema.is_append_only:  # append files store no sequence numbers: only their metadata moves
        return dataclasses.replace(meta, min_sequence_number=meta.min_sequence_number + offset,
                                   max_sequence_number=meta.max_sequence_number + offset)
    io = table.file_io
    src = data_file_path(bucket_dir, meta)
    if not io.exists(src):  # e.g. a replay of messages committed before, whose files were compacted away
        raise CommitConflict(table.name, f"data file {src} of the commit being published no longer exists (were "
                             "these messages committed before, and their files compacted away?); nothing was "
                             "committed")
    rows = read_data_file(io, src, meta)
    idx = rows.column_names.index(SEQUENCE_NUMBER)
    rows = rows.set_column(idx, rows.schema.field(idx), pc.add(rows.column(idx), pa.scalar(offset, pa.int64())))
    fmt = data_file_format(table.schema, 0)  # the writer's own settings, in the file's format
    if fmt.name != format_of_file(meta.file_name):
        fmt = DataFileFormat(format_of_file(meta.file_name), "zstd", fmt.zstd_level)
    # the file keeps the columns of the schema it was written with (a schema change may have come in between)
    body = fmt.encode(rows, table.schema_manager.schema(meta.schema_id))
    prefix = table.schema.table_options.get(DATA_FILE_PREFIX)
    stem = meta.file_name[len(prefix):] if meta.file_name.startswith(prefix) else meta.file_name
    if stem.startswith("rebased-"):
        stem = stem[len("rebased-") + 9:]
    name = f"{prefix}rebased-{os.urandom(4).hex()}-{stem}"
    path, external = placer_for(bucket_dir, table.schema).place(name)
    io.mkdirs(os.path.dirname(path))
    io.write_bytes(path, body)
    written.append(path)
    return dataclasses.replace(meta, file_name=name, file_size=len(body), external_path=external,
                               min_sequence_number=meta.min_sequence_number + offset,
                               max_sequence_number=meta.max_sequence_number + offset)
