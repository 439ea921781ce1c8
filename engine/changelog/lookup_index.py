"""Lookup index for changelog-producer=lookup: find keys' current records in the deeper levels of a bucket.

``LookupIndex(table, split, levels, from_level).get(probes)`` returns, for the probe keys (a normalized table,
sorted by key, unique), the newest record found in levels ``from_level`` and above: levels are searched in
ascending order (a lower level is newer) and a key found stops there. Per level, files are ordered by min key;
key-range pruning uses ``lower_bound`` of each file's [min key, max key] over the sorted probes, so only the probes
inside a file's range are searched (``search_sorted``, the Numba binary-search kernel). Files are read whole and
kept with their encoded keys in a cache on the table object (files are immutable, so a cached file is never stale);
the cache holds at most ``CACHE_FILES`` files and ``CACHE_BYTES`` of rows. Writers of lookup tables also put the
level-0 files they write there (``remember_written``), so compaction and lookup never read them back. An entry may
also hold a file's encoded keys only (no rows: ``engine.deletion_vectors.position_index``); ``LookupIndex`` and
``cached_rows`` treat such an entry as a miss.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np
import pyarrow as pa

from engine.changelog.emit import key_columns
from engine.meta import binary_row
from kernels.keys import encode_keys
from kernels.lookup import lower_bound, search_sorted

CACHE_FILES = 256
CACHE_BYTES = 512 << 20


class FileCache:
    """file path -> [normalized rows, encoded keys or None (computed on first lookup)] or [None, encoded keys] (a
    keys-only entry), least recently used evicted first once more than ``capacity`` files or ``max_bytes`` are
    held (an entry weighs its rows, or a keys-only entry its keys). Thread-safe (buckets compact on parallel
    threads)."""

    def __init__(self, capacity: int = CACHE_FILES, max_bytes: int = CACHE_BYTES):
        self.capacity = capacity
        self.max_bytes = max_bytes
        self.entries: OrderedDict = OrderedDict()
        self.nbytes = 0
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()

    def peek(self, path: str):
        """The cached entry (marked recently used) or None."""
        with self._lock:
            entry = self.entries.get(path)
            if entry is not None:
                self.entries.move_to_end(path)
                self.hits += 1
            return entry

    def put(self, path: str, rows: pa.Table | None, enc=None) -> list:
        """Cache ``rows`` (and ``enc``; rows None: a keys-only entry, ``enc`` required) for ``path``, replacing any
        old entry and evicting the oldest beyond the count/byte limits.
        Returns the stored [rows, enc] entry; the newest entry is never evicted."""
        entry = [rows, enc]
        with self._lock:
            old = self.entries.pop(path, None)
            if old is not None:
                self.nbytes -= _weight(old)
            self.entries[path] = entry
            self.nbytes += _weight(entry)
            while len(self.entries) > 1 and (len(self.entries) > self.capacity or self.nbytes > self.max_bytes):
                _, evicted = self.entries.popitem(last=False)
                self.nbytes -= _weight(evicted)
        return entry

    def keep_keys_only(self, path: str, encode) -> None:
        """Replace a cached entry's rows by their encoded keys (``encode(rows)`` unless already computed); no-op
        when ``path`` is not cached or holds keys only."""
        with self._lock:
            entry = self.entries.get(path)
            if entry is None or entry[0] is None:
                return
            enc = entry[1] if entry[1] is not None else encode(entry[0])
            self.nbytes -= _weight(entry)
            entry[0], entry[1] = None, enc
            self.nbytes += _weight(entry)

    def forget(self, path: str) -> None:
        """Drop ``path``'s entry, if any."""
        with self._lock:
            old = self.entries.pop(path, None)
            if old is not None:
                self.nbytes -= _weight(old)

    def get(self, path: str, load):
        """The entry for ``path`` with its rows; ``load()`` -> (rows, encoded keys) fills a miss (a keys-only entry
        is one: its keys are kept when ``load`` returns none)."""
        entry = self.peek(path)
        if entry is not None and entry[0] is not None:
            return entry
        with self._lock:
            self.misses += 1
        rows, enc = load()
        return self.put(path, rows, enc if enc is not None or entry is None else entry[1])


    def get_keys(self, path: str, load, encode):
        """The encoded keys for ``path``: a cached entry's (``encode(rows)`` once if not yet computed), else
        ``load()``'s, cached as a keys-only entry."""
        entry = self.peek(path)
        if entry is not None:
            if entry[1] is None:
                entry[1] = encode(entry[0])
            return entry[1]
        with self._lock:
            self.misses += 1
        return self.put(path, None, load())[1]


def _weight(entry: list) -> int:
    """Bytes an entry counts for: its rows, or (keys-only) its encoded keys."""
    rows, enc = entry
    if rows is not None:
        return rows.nbytes
    return enc.words.nbytes if enc.is_fixed else enc.offsets.nbytes + enc.data.nbytes


def table_cache(table) -> FileCache:
    """The table object's cache; rows are normalized to the table's current schema, so a schema change (which
    replaces ``table.schema``) starts a new cache."""
    held = table.__dict__.get("_changelog_lookup_cache")
    if held is None or held[0] != table.schema.id:
        held = table.__dict__["_changelog_lookup_cache"] = (table.schema.id, FileCache())
    return held[1]


def remember_written(table, bucket_dir: str, files, physical: pa.Table) -> None:
    """Cache the rows of level-0 files a writer just wrote (``physical``: the rows of ``files`` in order, data-file
    layout), so that the commit's lookup compaction merges them without reading them back. Only for tables with
    lookup compaction (changelog-producer=lookup, deletion vectors, force-lookup)."""
    if not table.schema.table_options.lookup_compaction:
        return
    from engine.read.split_read import SplitReader
    normalize = SplitReader(table.file_io, table.schema).normalize
    start = 0
    for f in files:
        part = physical.slice(start, f.row_count)
        start += f.row_count
        path = f"{bucket_dir}/{f.file_name}"
        table_cache(table).put(path, normalize(part, path, list(table.schema.field_names)).combine_chunks())


def cached_rows(table, bucket_dir: str, meta) -> pa.Table | None:
    """A file's normalized rows (all table columns) if the table's cache holds them."""
    held = table.__dict__.get("_changelog_lookup_cache")
    if held is None or held[0] != table.schema.id:
        return None
    entry = held[1].peek(f"{bucket_dir}/{meta.file_name}")
    return None if entry is None else entry[0]  # None too for a keys-only entry


class LookupIndex:
    """Finds the current rows for given keys in the split's files at or above ``from_level``, searching lower
    levels first. ``deleted(file name)``, if given, returns the sorted positions of rows a deletion vector marks
    deleted: such a row is not found (the key's live record, if any, is in a lower level). ``expire`` (a
    RecordExpire), if given: expired rows are not found either, as Paimon's lookup reads through its
    record-level-expire reader, and the search goes on in deeper levels; ``on_expired(file name, positions)`` is
    called with the positions of expired rows skipped (deletion-vector mode marks them deleted)."""

    positions_only = False  # engine.deletion_vectors.position_index.PositionIndex: locate() instead of get()
    def __init__(self, table, split, reader, levels, from_level: int, columns: list[str], deleted=None,
                 expire=None, on_expired=None):
        self.deleted = deleted
        self.expire = expire
        self.on_expired = on_expired
        self._expired: dict[str, np.ndarray] = {}  # file name -> mask of its expired rows
        self.table = table
        self.schema = table.schema
        self.split = split
        self.reader = reader
        self.columns = columns
        self.cache = table_cache(table)
        key_names = list(self.schema.trimmed_primary_keys)
        self.key_types = self.schema.types_of(key_names)
        self.arrow_key_types = [self.schema.arrow_schema.field(k).type for k in key_names]
        self.by_level = []
        for level in sorted(levels.levels):
            if level >= from_level:
                files = sorted(levels.levels[level], key=lambda f: levels.decode(f.min_key))
                self.by_level.append(files)

    def _load(self, f) -> list:
        """[rows, encoded keys] of file ``f`` (all its rows, in file order), from the cache or read."""
        def load():
            rows = self.reader.read_file(self.split, f, self.columns, live_only=False).combine_chunks()
            return rows, encode_keys(key_columns(rows, self.schema))
        entry = self.cache.get(f"{self.split.bucket_dir}/{f.file_name}", load)
        if entry[1] is None:  # rows cached by the writer: encode the keys once
            entry[1] = encode_keys(key_columns(entry[0], self.schema))
        return entry

    def _bounds(self, f, probes_enc):
        """[lo, hi) of the sorted probes inside the file's key range (its _MAX_KEY read as an upper bound:
        binary_row.upper_bound_of_floored, for pypaimon's floored nanosecond keys)."""
        lo_hi = [binary_row.deserialize_row(f.min_key, self.key_types),
                 binary_row.upper_bound_of_floored(binary_row.deserialize_row(f.max_key, self.key_types),
                                                   self.key_types)]
        cols = [pa.array([row[i] for row in lo_hi], t) for i, t in enumerate(self.arrow_key_types)]
        bounds_enc = encode_keys(cols)
        lo, hi_first = lower_bound(probes_enc, bounds_enc)
        hi = hi_first
        if hi < probes_enc.n and search_sorted(bounds_enc, _slice(probes_enc, hi))[0] >= 0:
            hi += 1  # the max key itself is a probe
        return int(lo), int(hi)

    def _matches(self, probes: pa.Table):
        """Yield ``(file, probe indexes, row positions, the file's rows from _load)`` per file holding some of
        ``probes`` (live rows only), levels in ascending order; a probe is matched at most once (in the lowest
        level holding it)."""
        probes_enc = encode_keys(key_columns(probes, self.schema))
        found_at = np.zeros(probes.num_rows, bool)
        for files in self.by_level:
            for f in files:
                lo, hi = self._bounds(f, probes_enc)
                if lo >= hi:
                    continue
                window = np.arange(lo, hi)
                window = window[~found_at[window]]
                if not len(window):
                    continue
                rows, enc = self._load(f)
                hit = search_sorted(enc, _take(probes_enc, window))
                ok = hit >= 0
                dead = self.deleted(f.file_name) if self.deleted is not None else None
                if dead is not None and len(dead) and ok.any():
                    ok &= ~np.isin(hit, dead)
                if self.expire is not None and rows is not None and ok.any():
                    gone = np.zeros(len(hit), bool)
                    if f.file_name not in self._expired:
                        self._expired[f.file_name] = self.expire.expired(rows)
                    gone[ok] = self._expired[f.file_name][hit[ok]]
                    if gone.any() and self.on_expired is not None:
                        self.on_expired(f.file_name, hit[gone].astype(np.int64))
                    ok &= ~gone
                if ok.any():
                    found_at[window[ok]] = True
                    yield f, window[ok], hit[ok].astype(np.int64), rows

    def get(self, probes: pa.Table, found=None) -> pa.Table | None:
        """Return the stored rows for the keys in ``probes`` (the first level holding a key wins).
        Returns None when there are no probes or no files to search. ``found(file name, positions)``, if given, is
        called with the row positions (in the data file) of the rows returned from each file."""
        if probes is None or probes.num_rows == 0 or not self.by_level:
            return None
        pieces, piece_pos = [], []
        for f, at, positions, rows in self._matches(probes):
            if found is not None:
                found(f.file_name, positions)
            pieces.append(rows.take(pa.array(positions)))
            piece_pos.append(at)
        if not pieces:
            return None
        out = pa.concat_tables(pieces)
        return out.take(pa.array(np.argsort(np.concatenate(piece_pos), kind="stable")))


def _take(enc, idx: np.ndarray):
    from kernels.keys import EncodedKeys
    if enc.is_fixed:
        return EncodedKeys(words=np.ascontiguousarray(enc.words[idx]), layout=enc.layout)
    starts, ends = enc.offsets[idx], enc.offsets[idx + 1]
    lengths = ends - starts
    offsets = np.zeros(len(idx) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    gather = np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1])
    data = enc.data[gather]
    return EncodedKeys(offsets=offsets, data=data.astype(np.uint8, copy=False), layout=enc.layout)


def _slice(enc, i: int):
    return _take(enc, np.array([i], np.int64))
