"""Reads that skip unreadable data files: Paimon's ``scan.ignore-corrupt-files`` and ``scan.ignore-lost-files``.

Semantics (Paimon's DataFileRecordReader): when decoding a data file fails, the file is *lost* if it does not exist
and *corrupt* otherwise. A lost file is skipped only with ``scan.ignore-lost-files``, a corrupt one only with
``scan.ignore-corrupt-files``; otherwise the error is raised. A skipped file is logged (``logging.warning`` naming
its path) and contributes only the rows of the batches decoded before the failure (none unless it failed part-way:
engine.read.split_read.rows_before_failure). Only data files are skipped: deletion-vector and index files still
fail.

Only reads that return rows to a user (batch, streaming, lookup, Spark) use a ``FileSkips``; writes, compaction and
row-level operations never do, so they fail rather than rewrite a bucket without the damaged file's rows.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from engine.errors import StorageError
from engine.io.file_io import FileIO
from engine.options import SCAN_IGNORE_CORRUPT_FILES, SCAN_IGNORE_LOST_FILES, TableOptions

log = logging.getLogger("lakemerge.read")


@dataclass(frozen=True)
class FileSkips:
    """Which unreadable data files a read skips."""
    corrupt: bool = False
    lost: bool = False

    @classmethod
    def of(cls, options: TableOptions, read_options: dict[str, str] | None = None) -> FileSkips | None:
        """The skips ``options`` ask for, a read option of the same name overriding the table's (Paimon's dynamic
        options); None when neither is on. Raises InvalidOption for a read option that is not true/false."""
        given = _skip_options(read_options)
        if given:
            options = TableOptions({**options.raw, **given}, table=options.table)
        skips = cls(options.get(SCAN_IGNORE_CORRUPT_FILES), options.get(SCAN_IGNORE_LOST_FILES))
        return skips if skips.corrupt or skips.lost else None

    def skip(self, io: FileIO, path: str, error: StorageError) -> bool:
        """Whether a read that failed on data file ``path`` with ``error`` goes on without the file (logging a
        warning) instead of raising. Raises StorageError if checking that the file exists fails."""
        if not io.exists(path):
            if self.lost:
                log.warning("skipping lost data file %s (scan.ignore-lost-files): %s", path, error)
                return True
            return False
        if self.corrupt:
            log.warning("skipping corrupt data file %s (scan.ignore-corrupt-files): %s", path, error)
            return True
        return False


def read_skips(table) -> FileSkips | None:
    """The ``FileSkips`` of a user's read of ``table`` (its table options)."""
    return FileSkips.of(table.schema.table_options)


def with_read_options(table, read_options: dict[str, str]):
    """``table`` as a read given ``read_options`` sees it: a copy whose schema options carry the read's
    ``scan.ignore-corrupt-files`` / ``scan.ignore-lost-files`` (Paimon's dynamic options; for that read only, nothing
    is stored), or ``table`` itself when the read sets neither. Raises InvalidOption for a value that is not
    true/false."""
    given = _skip_options(read_options)
    if not given:
        return table
    import copy
    import dataclasses
    view = copy.copy(table)
    view.schema = dataclasses.replace(table.schema, options={**table.schema.options, **given})
    TableOptions(view.schema.options, table=table.name)  # validates the read's values
    return view


def _skip_options(read_options: dict[str, str] | None) -> dict[str, str]:
    """The ``scan.ignore-corrupt-files`` / ``scan.ignore-lost-files`` entries of a read's options, as text."""
    return {k: str(v) for k, v in (read_options or {}).items() if k in (SCAN_IGNORE_CORRUPT_FILES,
                                                                        SCAN_IGNORE_LOST_FILES)}
