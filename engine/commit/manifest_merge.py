"""Manifest compaction at commit time, as Paimon's ManifestFileMerger does.

The new base manifest list of a commit is the previous snapshot's base + delta manifests, merged:

- **Full compaction** when the manifests after the leading run of large delete-free ones ("base") add up to at least
  ``manifest.full-compaction-threshold-size``: every ADD/DELETE pair cancels; base manifests none of whose files
  were deleted are kept as they are, the others and the rest are rewritten with only live ADD entries.
- Otherwise **minor merge**: consecutive manifests are grouped until a group reaches ``manifest.target-file-size``;
  a group of several manifests is rewritten as one, cancelling ADD/DELETE pairs inside it (a DELETE whose ADD is in
  an earlier manifest is kept). A trailing group is merged only if it has ``manifest.merge-min-count`` manifests.

Merging only removes entries that cancel, so the folded live file set of the list never changes. New manifests roll
at the target size. Returns the merged list and the names of the manifests it wrote (the caller deletes them if
the commit does not land).
"""
from __future__ import annotations

from typing import Callable, Sequence

from engine.meta.manifest import ADD, DELETE, ManifestEntry, ManifestFileMeta
from engine.options import MANIFEST_FULL_COMPACTION_SIZE, MANIFEST_MERGE_MIN_COUNT, MANIFEST_TARGET_FILE_SIZE

WriteManifest = Callable[[list[ManifestEntry], int], tuple[str, ManifestFileMeta]]


def cancel_pairs(entries: Sequence[ManifestEntry]) -> list[ManifestEntry]:
    """Entries in order, minus every ADD that a later DELETE of the same file cancels (and that DELETE)."""
    out: list[ManifestEntry | None] = []
    added: dict = {}  # identifier -> position of its ADD in out
    for e in entries:
        if e.kind == DELETE and e.identifier in added:
            out[added.pop(e.identifier)] = None
            continue
        if e.kind == ADD:
            added[e.identifier] = len(out)
        out.append(e)
    return [e for e in out if e is not None]


class ManifestMerger:
    """Merges small manifest files (or rewrites them all past the full-compaction size) using the table's manifest
    options.
    Names of files it writes are kept in ``created``."""
    def __init__(self, table, read_entries: Callable[[str], list[ManifestEntry]], write: WriteManifest,
                 delete: Callable[[str], None]):
        opts = table.schema.table_options
        self.target = opts.get(MANIFEST_TARGET_FILE_SIZE)
        self.min_count = opts.get(MANIFEST_MERGE_MIN_COUNT)
        self.full_threshold = opts.get(MANIFEST_FULL_COMPACTION_SIZE)
        self.read_entries = read_entries
        self.write = write
        self.delete = delete
        self.created: list[str] = []

    def merge(self, metas: Sequence[ManifestFileMeta]) -> list[ManifestFileMeta]:
        """Return the manifest list after a full compaction if one is due, otherwise after merging small manifests."""
        metas = list(metas)
        full = self._try_full(metas)
        return full if full is not None else self._minor(metas)

    # --- full ---------------------------------------------------------------------------------------
    def _try_full(self, metas: list[ManifestFileMeta]) -> list[ManifestFileMeta] | None:
        i = 0
        while i < len(metas) and metas[i].num_deleted_files == 0 and metas[i].file_size >= self.target:
            i += 1
        base, delta = metas[:i], metas[i:]
        if sum(m.file_size for m in delta) < self.full_threshold:
            return None
        delta_entries = [e for m in delta for e in self.read_entries(m.file_name)]
        deleted = {e.identifier for e in delta_entries if e.kind == DELETE}
        out: list[ManifestFileMeta] = []
        for m in base:
            entries = self.read_entries(m.file_name)
            if any(e.identifier in deleted for e in entries):
                out += self._write_rolling([e for e in entries if e.identifier not in deleted], m.schema_id)
            else:
                out.append(m)
        live = [e for e in cancel_pairs(delta_entries) if e.kind == ADD]
        schema_id = max((m.schema_id for m in delta), default=0)
        return out + self._write_rolling(live, schema_id)

    # --- minor --------------------------------------------------------------------------------------
    def _minor(self, metas: list[ManifestFileMeta]) -> list[ManifestFileMeta]:
        out: list[ManifestFileMeta] = []
        group: list[ManifestFileMeta] = []
        size = 0
        for m in metas:
            group.append(m)
            size += m.file_size
            if size >= self.target:
                out += self._merge_group(group)
                group, size = [], 0
        if len(group) >= self.min_count:
            out += self._merge_group(group)
        else:
            out += group
        return out

    def _merge_group(self, group: list[ManifestFileMeta]) -> list[ManifestFileMeta]:
        if len(group) == 1:
            return group
        entries = cancel_pairs([e for m in group for e in self.read_entries(m.file_name)])
        return self._write_rolling(entries, max(m.schema_id for m in group))

    def _write_rolling(self, entries: list[ManifestEntry], schema_id: int) -> list[ManifestFileMeta]:
        if not entries:
            return []
        out = []
        per_file = max(1, len(entries))
        name, meta = self.write(entries[:per_file], schema_id)
        self.created.append(name)
        if meta.file_size > self.target and len(entries) > 1:  # roll: split by the observed entry size
            per_file = max(1, int(len(entries) * self.target / meta.file_size))
            self.created.pop()
            self.delete(name)
            for start in range(0, len(entries), per_file):
                name, meta = self.write(entries[start:start + per_file], schema_id)
                self.created.append(name)
                out.append(meta)
            return out
        return [meta]
