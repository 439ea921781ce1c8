"""Files of one Spark job, found by a tag in their names.

A write or compaction job draws a random token; its tasks write data files named ``<data-file.prefix><tag>...``,
changelog files named ``<changelog-file.prefix><tag>...`` and deletion-vector index files (``index/``) named
``<deletion-vectors.index-file.prefix><tag>...`` (``tag`` = the token and a dash, plus the micro-batch for a
stream). The driver can then delete exactly the job's leftovers -- files of failed, retried or killed task attempts
that Spark never reports -- without touching any other job's files.
"""
from __future__ import annotations

import os
from dataclasses import replace

from engine.data_paths import external_bucket_dirs, external_twins
from engine.dynamic_bucket.index_files import index_dir
from engine.maintenance.orphans import delete_unreferenced
from engine.options import CHANGELOG_FILE_PREFIX, DATA_FILE_PREFIX, DELETION_VECTORS_INDEX_PREFIX
from engine.table import Table

_PREFIX_OPTIONS = (DATA_FILE_PREFIX, CHANGELOG_FILE_PREFIX, DELETION_VECTORS_INDEX_PREFIX)


def tagged_prefixes(table: Table, tag: str) -> tuple[str, ...]:
    """The (data, changelog, DV index) file-name prefixes of the job files tagged ``tag`` in ``table``."""
    opts = table.schema.table_options
    return tuple(f"{opts.get(option)}{tag}" for option in _PREFIX_OPTIONS)


def tag_files(table: Table, tag: str) -> Table:
    """``table`` (modified in place and returned) naming the data, changelog and DV index files it writes with
    ``tag``."""
    tagged = dict(zip(_PREFIX_OPTIONS, tagged_prefixes(table, tag)))
    table.schema = replace(table.schema, options={**table.schema.options, **tagged})
    return table


def job_dirs(table: Table, bucket_dirs) -> set[str]:
    """The directories a job writing ``bucket_dirs`` can leave files in: those, their twins under the external
    data paths, and the index directory."""
    opts = table.schema.options
    return {x for d in bucket_dirs for x in (d, *external_twins(d, opts))} | {index_dir(table.root)}


def remove_tagged_files(table: Table, tag: str, keep: set[str], dirs=None) -> int:
    """Delete the data, changelog and DV index files tagged ``tag`` except those named in ``keep``, looking in
    ``dirs`` (default: every directory under the table root); returns how many were deleted. A file that a
    snapshot, tag or decoupled changelog references is never deleted: a replayed batch's first commit may hold
    files with the same tag after its snapshot expired."""
    prefixes = tagged_prefixes(table, tag)
    if dirs is None:
        external = external_bucket_dirs(table.schema.options, len(table.schema.partition_keys))
        listing = [*((d, names) for d, _, names in os.walk(table.root)),
                   *((d, table.file_io.list_names(d)) for d in external)]
    else:
        listing = ((d, table.file_io.list_names(d)) for d in dirs if table.file_io.exists(d))
    candidates = [os.path.join(directory, name) for directory, names in listing for name in names
                  if name.startswith(prefixes) and name not in keep]
    return len(delete_unreferenced(table, candidates))
