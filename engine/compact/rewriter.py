"""Executing one compaction unit of a bucket (paimon-semantics §7.3), streaming with bounded memory.

``CompactRewriter.run(unit, levels)`` returns a ``CompactResult``: ``before`` (input files, at their old levels) and
``after`` (new files at the output level, and upgraded files: same file, new level). The unit's files are split into
sections of overlapping key ranges; sections with several runs, and small files, are merged and rewritten; big files
of single-run sections are upgraded by metadata only (unless a max-level upgrade would keep deletes).

Merging uses ``engine.merge.merge_runs`` (the one merge implementation) over key ranges: each input run is read a
batch at a time, and only the rows up to the smallest "last key read" among runs still being read are merged and
streamed into rolling output files (engine.compact.output). Memory holds one read batch per run, one Parquet row
group of output rows and one encoded output file, never the whole bucket. On error, files this
rewriter wrote are deleted.

Lookup compaction (changelog-producer=lookup, deletion vectors, force-lookup; Paimon's
LookupMergeTreeCompactRewriter): a key with level-0 records whose previous record is not among the unit's inputs is
looked up in the levels below the output level and merged with it, so the output holds the key's full state. In
deletion-vector mode the row found is marked deleted (``CompactResult.deletions``), inputs are read without the rows
the bucket's vectors mark deleted, and deletes are always dropped above level 0. Where the row found cannot change
the merge (deduplicate without changelog, engine.deletion_vectors.position_index) only its position is looked up,
and the unit's inputs leave the lookup cache once it is done (an upgraded input keeps its keys there).

First-row tables always compact level 0 with a lookup, changelog or not (Paimon's LookupStrategy: first-row needs
lookup): a level-0 key whose first row lies below the output level is dropped (engine.changelog.producers), looking
up keys only (``PositionIndex.contains``). So each key has one record above level 0, which Paimon's batch read
(raw files above level 0, no merge) relies on. Without changelog and with nothing below the output level, the unit
merges plainly, unless ``file.format.per.level`` gives the output level another format than level 0 (Paimon's
lookup rewriter then rewrites level-0 files instead of upgrading them).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from engine.compact.levels import Levels
from engine.data_paths import data_file_path
from engine.deletion_vectors.maintainer import drop_deleted
from engine.crash_points import crash_point
from engine.compact.picker import CompactUnit, CompactionSettings
from engine.merge import KEY_COLUMN_PREFIX, SEQUENCE_NUMBER, VALUE_KIND, merge_runs
from engine.meta.data_file import DataFileMeta
from engine.options import COMPACTION_READ_BATCH_ROWS
from engine.read.scan import Split
from engine.read.split_read import SplitReader
from engine.compact.output import RollingRunWriter
from engine.write.file_writer import physical_table


@dataclass
class CompactResult:
    """What one compaction unit did: ``before`` the files it removed, ``after`` the files it added (new files and
    upgraded copies of untouched files at the output level), ``changelog`` the changelog files it wrote.
    """
    before: list[DataFileMeta] = field(default_factory=list)
    after: list[DataFileMeta] = field(default_factory=list)
    changelog: list[DataFileMeta] = field(default_factory=list)  # lookup / full-compaction producers (issue 5)
    deletions: dict = field(default_factory=dict)  # deletion-vector mode: data file name -> [row positions]

    def rewritten(self) -> list[DataFileMeta]:
        """Files this result created (``after`` minus upgrades of existing files)."""
        old = {f.file_name for f in self.before}
        return [f for f in self.after if f.file_name not in old]


def sections(files: Sequence[DataFileMeta], decode, decode_max=None) -> list[list[list[DataFileMeta]]]:
    """Files grouped into sections of transitively overlapping key ranges, in key order; each section is split
    into sorted runs (disjoint files in key order), as Paimon's IntervalPartition does. ``decode_max`` (default
    ``decode``) decodes _MAX_KEYs: levels.key_decoder(..., upper=True) so that pypaimon's floored nanosecond keys
    still make their files overlap."""
    decode_max = decode_max or decode
    ordered = sorted(files, key=lambda f: (decode(f.min_key), decode_max(f.max_key)))
    groups: list[list[DataFileMeta]] = []
    bound = None
    for f in ordered:
        lo, hi = decode(f.min_key), decode_max(f.max_key)
        if groups and lo <= bound:
            groups[-1].append(f)
            bound = max(bound, hi)
        else:
            groups.append([f])
            bound = hi
    out = []
    for group in groups:
        runs: list[list[DataFileMeta]] = []
        for f in group:  # first run whose last file ends before f starts
            lo = decode(f.min_key)
            for run in runs:
                if decode_max(run[-1].max_key) < lo:
                    run.append(f)
                    break
            else:
                runs.append([f])
        out.append(runs)
    return out


class CompactRewriter:
    """Runs compaction units of one bucket: overlapping files are merged with ``engine.merge.merge_runs`` a batch at a
    time into rolling files at the output level; files that need no rewrite are upgraded (metadata only). With
    changelog-producer lookup or full-compaction the merge also writes changelog.
    """

    def __init__(self, table, partition_values: tuple, bucket: int, settings: CompactionSettings, dv=None):
        """``dv``: the bucket's BucketDeletionVectors in deletion-vector mode (read here, never changed: the caller
        applies ``CompactResult.deletions`` once the unit succeeded), else None."""
        self.table = table
        self.dv = dv
        self.schema = table.schema
        self.settings = settings
        self.bucket_dir = table.bucket_dir(partition_values, bucket)
        self.split = Split(b"", partition_values, bucket, 0, self.bucket_dir, ())
        self.reader = SplitReader(table.file_io, self.schema, table.schema_manager.schema)
        self.columns = list(self.schema.field_names)
        self.key_columns = [KEY_COLUMN_PREFIX + k for k in self.schema.trimmed_primary_keys]
        self.batch_rows = max(1, self.schema.table_options.get(COMPACTION_READ_BATCH_ROWS))
        self._max_level = 0
        from engine.options import CHANGELOG_PRODUCER
        self.producer = self.schema.table_options.get(CHANGELOG_PRODUCER)
        self.lookup = self.schema.table_options.lookup_compaction
        self.first_row = self.schema.table_options.merge_engine == "first-row"
        self._deletions: dict[str, list] = {}
        self._changelog = None  # a ChangelogMerger while a unit produces changelog (issue 5)
        self._log_parts: list[pa.Table] = []
        from engine.compact.record_expire import RecordExpire
        self.expire = RecordExpire.of(self.schema)  # record-level.expire-time: rows dropped from every input

    # --- the unit ----------------------------------------------------------------------------------
    def run(self, unit: CompactUnit, levels: Levels) -> CompactResult:
        """Compact ``unit`` of the bucket whose tree is ``levels`` and return the CompactResult. Deletes are dropped
        when the output is a level >= 1 and the highest non-empty level. Input files are never modified or
        deleted; on any error every file this call wrote (data and changelog) is deleted and the error is raised.
        """
        out = unit.output_level
        drop_delete = out != 0 and (out >= levels.non_empty_highest_level() or self.dv is not None)
        min_size = self.settings.target_file_size * self.settings.small_file_ratio
        self._max_level = levels.max_level
        self._deletions = {}
        self._changelog = self._changelog_merger(out, levels, unit)
        result = CompactResult()
        pending: list[list[list[DataFileMeta]]] = []
        try:
            if unit.file_rewrite:  # each file alone, at its level (Paimon's FileRewriteCompactTask)
                for f in unit.files:
                    self._rewrite_sections([[[f]]], out, drop_delete, result)
            for section in (() if unit.file_rewrite else sections(unit.files, levels.decode, levels.decode_max)):
                if len(section) > 1:
                    pending.append(section)
                    continue
                for f in section[0]:
                    if f.file_size < min_size or self._must_rewrite(f, out):
                        pending.append([[f]])
                    else:
                        self._rewrite(pending, out, drop_delete, result)
                        pending = []
                        self._upgrade(f, out, drop_delete, result)
            self._rewrite(pending, out, drop_delete, result)
            if self._log_parts:
                from engine.changelog.files import write_changelog
                log = pa.concat_tables(self._log_parts)
                result.changelog.extend(write_changelog(self.table, self.bucket_dir, log, out))
            result.deletions = self._deletions
            if self._changelog is not None and self._changelog.index is not None \
                    and self._changelog.index.positions_only:
                from engine.deletion_vectors.position_index import release_inputs
                release_inputs(self.table, self.bucket_dir, result.before, result.after)
        except BaseException:
            self._log_parts = []
            for f in result.rewritten() + result.changelog:
                self.table.file_io.delete(data_file_path(self.bucket_dir, f))
            raise
        finally:
            self._log_parts = []
            self._deletions = {}
        crash_point("compact.after-rewrite")
        return result

    # --- changelog producers (issue 5) -------------------------------------------------------------
    def _changelog_merger(self, out: int, levels: Levels, unit: CompactUnit):
        from engine.changelog.producers import FULL_COMPACTION, LOOKUP, ChangelogMerger
        if self.first_row and out > 0:
            opts = self.schema.table_options
            if self.producer != LOOKUP and not any(lv > out for lv in levels.levels) \
                    and opts.file_format_of(0)[0] == opts.file_format_of(out)[0]:
                return None  # nothing deeper to look up and no changelog: the plain merge is the result
            from engine.deletion_vectors.position_index import PositionIndex
            index = PositionIndex(self.table, self.split, self.reader, levels, out + 1)
            return ChangelogMerger(self.schema, LOOKUP, levels.max_level, index, self.table.name,
                                   produce_changelog=self.producer == LOOKUP)
        if self.lookup and out > 0:
            from engine.changelog.lookup_index import LookupIndex
            from engine.deletion_vectors import position_index as pos
            opts = self.schema.table_options
            deleted = self.dv.deleted if self.dv is not None else None
            if self.dv is not None and pos.positions_suffice(opts) and pos.unit_allows_positions(
                    opts, unit.files, levels, out + 1):
                index = pos.PositionIndex(self.table, self.split, self.reader, levels, out + 1, deleted=deleted)
            else:
                index = LookupIndex(self.table, self.split, self.reader, levels, out + 1, self.columns,
                                    deleted=deleted, expire=self.expire,
                                    on_expired=self._found if self.dv is not None else None)
            return ChangelogMerger(self.schema, LOOKUP, levels.max_level, index, self.table.name,
                                   produce_changelog=self.producer == LOOKUP,
                                   found=self._found if self.dv is not None else None)
        if self.producer == FULL_COMPACTION and out == levels.max_level:
            return ChangelogMerger(self.schema, FULL_COMPACTION, levels.max_level, None, self.table.name)
        return None

    def _upgrade_keeps_content(self, files, out: int) -> bool:
        """Lookup on a deduplicate table without sequence fields: merge(before, level-0 records) is the level-0
        record itself, so an isolated level-0 file can be upgraded and only its lookups run (changelog, deletion
        vector marks; Paimon's CHANGELOG_NO_REWRITE upgrade). Not when the upgrade must rewrite to drop deletes:
        at the max level, or at any level in deletion-vector mode; nor when the output level has another file format
        (``file.format.per.level``: Paimon's lookup rewriter then rewrites)."""
        opts = self.schema.table_options
        if self._changelog is None or self._changelog.mode != "lookup" or opts.merge_engine != "deduplicate" \
                or opts.sequence_fields:
            return False
        if any(opts.file_format_of(f.level)[0] != opts.file_format_of(out)[0] for f in files):
            return False
        if self.settings.force_rewrite_all or (self.expire is not None and any(
                self.expire.file_expired(f, self.table.schema_manager.schema) for f in files)):
            return False  # _upgrade rewrites these
        deletes = any(f.delete_row_count != 0 for f in files)
        return not (deletes and (out == self._max_level or self.dv is not None))

    def _found(self, file_name: str, positions) -> None:
        """Lookup found rows of a deeper file: in deletion-vector mode they are superseded by this unit's output."""
        self._deletions.setdefault(file_name, []).append(positions)

    def _changelog_only(self, rows: pa.Table, drop_delete: bool) -> None:
        """The lookups and changelog of a level-0 file upgraded as it is (``rows``: all its rows). The caller
        rewrites a file holding expired rows instead: those rows look nothing up, so an upgraded file keeping them
        would leave the key's older row live next to them (deletion vectors) or shadowed without changelog."""
        _, log = self._changelog.merge([rows], [0], drop_delete)
        if log is not None and log.num_rows:
            self._log_parts.append(log)

    def _must_rewrite(self, f: DataFileMeta, out: int) -> bool:
        """Files whose records must pass the changelog merge: level-0 files (lookup), files below the max level
        (full-compaction)."""
        if self._changelog is None:
            return False
        return f.level == 0 if self._changelog.mode == "lookup" else f.level != out

    def _upgrade(self, f: DataFileMeta, out: int, drop_delete: bool, result: CompactResult) -> None:
        """Move ``f`` to level ``out`` by metadata, or rewrite it when it must not keep its rows as they are:
        compaction.force-rewrite-all-files or expired records (both even at its own level, as Paimon's
        MergeTreeCompactTask.upgrade), or deletes reaching the max level."""
        if self.settings.force_rewrite_all or (
                self.expire is not None and self.expire.file_expired(f, self.table.schema_manager.schema)):
            self._rewrite_sections([[[f]]], out, drop_delete, result)
            return
        if f.level == out:
            return
        if out == self._max_level and f.delete_row_count != 0:  # deletes must not survive at the max level
            self._rewrite_sections([[[f]]], out, drop_delete, result)
            return
        result.before.append(f)
        result.after.append(f.upgrade(out))

    def _rewrite(self, pending, out: int, drop_delete: bool, result: CompactResult) -> None:
        if not pending:
            return
        if len(pending) == 1 and len(pending[0]) == 1:  # one single-run section: upgrading is enough ...
            files = pending[0][0]
            if not any(self._must_rewrite(f, out) for f in files):
                for f in files:
                    self._upgrade(f, out, drop_delete, result)
                return
            if self._upgrade_keeps_content(files, out):  # ... lookup changelog read from the file, no rewrite
                for f in files:
                    rows = self._cached(f)
                    if rows is None:
                        rows = self.reader.read_file(self.split, f, self.columns)
                    if self.expire is not None and self.expire.expired(rows).any():
                        # expired rows the statistics did not show: the file must not keep them (see _changelog_only)
                        self._rewrite_sections([[[f]]], out, drop_delete, result)
                        continue
                    self._changelog_only(rows, drop_delete)
                    self._upgrade(f, out, drop_delete, result)
                return
        self._rewrite_sections(pending, out, drop_delete, result)

    def _rewrite_sections(self, pending, out: int, drop_delete: bool, result: CompactResult) -> None:
        crash_point("compact.before-rewrite")
        writer = RollingRunWriter(self.table.file_io, self.bucket_dir, self.schema, out)
        try:
            for section in pending:
                for merged in self._merge_section(section, drop_delete):
                    writer.add(physical_table(merged.select(self.columns), merged.column(SEQUENCE_NUMBER).to_numpy(),
                                              merged.column(VALUE_KIND).to_numpy(), self.schema))
            files = writer.finish()
        except BaseException:
            writer.abort()
            raise
        result.before.extend(f for section in pending for run in section for f in run)
        result.after.extend(files)

    # --- streaming merge ---------------------------------------------------------------------------
    def _cached(self, meta: DataFileMeta) -> pa.Table | None:
        """The file's rows if the writer or the lookup index left them in the table's cache (lookup compaction)."""
        if not self.lookup:
            return None
        from engine.changelog.lookup_index import cached_rows
        return cached_rows(self.table, self.bucket_dir, meta)

    def _batches(self, run: list[DataFileMeta]) -> Iterator[pa.Table]:
        """The run's rows a batch at a time, without the rows the bucket's deletion vectors mark deleted."""
        for meta in run:
            dead = self.dv.deleted(meta.file_name) if self.dv is not None else None
            rows = self._cached(meta)
            if rows is None:
                batches = self.reader.iter_file(self.split, meta, self.columns, self.batch_rows)
            else:
                batches = (rows.slice(start, self.batch_rows) for start in range(0, rows.num_rows, self.batch_rows))
            start = 0
            for batch in batches:
                n = batch.num_rows
                batch = drop_deleted(batch, dead, start)
                start += n
                yield batch if self.expire is None else self.expire.keep(batch)

    def _merge_section(self, section: list[list[DataFileMeta]], drop_delete: bool) -> Iterator[pa.Table]:
        if self._changelog is not None:  # the changelog merge needs each record's level: one level per run
            section = [[f for f in run if f.level == lv] for run in section for lv in sorted({f.level for f in run})]
        cursors = [_Cursor(self._batches(run)) for run in section]
        run_levels = [run[0].level for run in section]
        while True:
            for c in cursors:
                c.fill()
            live = [c for c in cursors if c.buffer is not None]
            if not live:
                return
            open_ = [c for c in live if not c.exhausted]
            levels_now = [lv for c, lv in zip(cursors, run_levels) if c.buffer is not None]
            if open_:
                bound = min((c.last_key(self.key_columns) for c in open_), key=_order)
                parts = [c.take_through(bound, self.key_columns) for c in live]
            else:
                parts = [c.take_all() for c in live]
            if self._changelog is not None:
                merged, log = self._changelog.merge(parts, levels_now, drop_delete)
                if log is not None and log.num_rows:
                    self._log_parts.append(log)
            else:
                merged = merge_runs(parts, self.schema, drop_retracts=drop_delete, sorted_output=True)
            if merged is not None and merged.num_rows:
                yield merged


def _order(key: tuple) -> tuple:
    return tuple((v is not None, v) for v in key)


class _Cursor:
    """One input run read a batch at a time; ``buffer`` holds rows read but not yet merged."""

    def __init__(self, batches: Iterator[pa.Table]):
        self.batches = batches
        self.buffer: pa.Table | None = None
        self.exhausted = False
        self._peeked: pa.Table | None = None

    def fill(self) -> None:
        if self.buffer is None and not self.exhausted:
            self.buffer = self._next()
        if self._peeked is None and not self.exhausted:
            self._peeked = self._next()  # knowing whether more follows lets the last batch merge with no bound

    def _next(self) -> pa.Table | None:
        if self._peeked is not None:
            out, self._peeked = self._peeked, None
            return out
        for batch in self.batches:
            if batch.num_rows:
                return batch
        self.exhausted = True
        return None

    def last_key(self, key_columns) -> tuple:
        n = self.buffer.num_rows - 1
        return tuple(self.buffer.column(c)[n].as_py() for c in key_columns)

    def take_through(self, bound: tuple, key_columns) -> pa.Table:
        """Rows with key <= bound (a prefix: the run is sorted); the rest stays buffered."""
        mask = _at_most(self.buffer, key_columns, bound)
        n = int(pc.sum(mask).as_py() or 0)
        part = self.buffer.slice(0, n)
        rest = self.buffer.slice(n)
        self.buffer = rest if rest.num_rows else None
        if self.buffer is None and self._peeked is not None:
            self.buffer, self._peeked = self._peeked, None
        return part

    def take_all(self) -> pa.Table:
        part, self.buffer = self.buffer, None
        return part


def _at_most(table: pa.Table, key_columns, bound: tuple) -> pa.ChunkedArray:
    """Boolean mask: key (lexicographic over ``key_columns``) <= ``bound``. Keys are never null."""
    result = None
    for col, value in reversed(list(zip(key_columns, bound))):
        column = table.column(col)
        scalar = pa.scalar(value, type=column.type)
        if result is None:
            result = pc.less_equal(column, scalar)
        else:
            result = pc.or_(pc.less(column, scalar), pc.and_(pc.equal(column, scalar), result))
    return result
