"""Files of one Spark job, found by a tag in their names.

A write or compaction job draws a random token; its tasks write data files named ``<data-file.prefix><tag>...``
and changelog files named ``<changelog-file.prefix><tag>...`` (``tag`` = the token and a dash, plus the micro-batch
for a stream). The driver can then delete exactly the job's leftovers -- files of failed, retried or killed task
attempts that Spark never reports -- without touching any other job's files.
"""
from __future__ import annotations

import os
from dataclasses import replace

from engine.maintenance.orphans import delete_unreferenced
from engine.options import CHANGELOG_FILE_PREFIX, DATA_FILE_PREFIX
from engine.table import Table


def tagged_prefixes(table: Table, tag: str) -> tuple[str, str]:
    """The (data, changelog) file-name prefixes of the job files tagged ``tag`` in ``table``."""
    opts = table.schema.table_options
    return f"{opts.get(DATA_FILE_PREFIX)}{tag}", f"{opts.get(CHANGELOG_FILE_PREFIX)}{tag}"


def tag_files(table: Table, tag: str) -> Table:
    """``table`` (modified in place and returned) naming the data and changelog files it writes with ``tag``."""
    data, changelog = tagged_prefixes(table, tag)
    table.schema = replace(table.schema, options={**table.schema.options, DATA_FILE_PREFIX: data,
                                                  CHANGELOG_FILE_PREFIX: changelog})
    return table


def remove_tagged_files(table: Table, tag: str, keep: set[str], dirs=None) -> int:
    """Delete the data and changelog files tagged ``tag`` except those named in ``keep``, looking in ``dirs``
    (default: every directory under the table root); returns how many were deleted. A file that a snapshot, tag
    or decoupled changelog references is never deleted: a replayed batch's first commit may hold files with the
    same tag after its snapshot expired."""
    prefixes = tagged_prefixes(table, tag)
    if dirs is None:
        listing = ((d, names) for d, _, names in os.walk(table.root))
    else:
        listing = ((d, table.file_io.list_names(d)) for d in dirs if table.file_io.exists(d))
    candidates = [os.path.join(directory, name) for directory, names in listing for name in names
                  if name.startswith(prefixes) and name not in keep]
    return len(delete_unreferenced(table, candidates))
