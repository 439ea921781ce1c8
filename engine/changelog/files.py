"""Writing changelog files: data-file layout, ``changelog-file.prefix`` names, level 0, FILE_SOURCE_APPEND.

Contract: ``write_changelog`` takes a *normalized* table (``__key_<k>`` columns, _SEQUENCE_NUMBER, _VALUE_KIND,
then every table column) already in key order (a key may repeat) and returns the files' metadata (empty input ->
no file). Row kinds are kept as given. ``changelog-file.format`` / ``changelog-file.compression`` /
``changelog-file.stats-mode`` apply when set (else the data-file settings of the level the changelog is for:
``file.format.per.level``, ``metadata.stats-mode.per.level``, ...).
"""
from __future__ import annotations

import pyarrow as pa

from engine.merge import SEQUENCE_NUMBER, VALUE_KIND
from engine.options import CHANGELOG_FILE_PREFIX
from engine.write.file_writer import physical_table, write_sorted_run
from engine.write.formats import data_file_format

ROW_KIND_COLUMN = "_row_kind"
ROW_KIND_TEXT = ("+I", "-U", "+U", "-D")


def write_changelog(table, bucket_dir: str, rows: pa.Table, level: int = 0) -> list:
    """Write ``rows`` as level-0 changelog files in ``bucket_dir`` using the changelog file options; ``level`` is the
    level whose format (and stats mode) they take when ``changelog-file.format`` (``changelog-file.stats-mode``) is
    not set (a compaction's output level, as in Paimon). Returns the written file metas; None or empty input writes
    nothing and returns []."""
    if rows is None or rows.num_rows == 0:
        return []
    schema = table.schema
    physical = physical_table(rows.select(list(schema.field_names)), rows.column(SEQUENCE_NUMBER).to_numpy(),
                              rows.column(VALUE_KIND).to_numpy(), schema)
    opts = schema.table_options
    stats_mode, stats_mode_key = opts.stats_mode_of(level, changelog=True)
    # Changelog files are written once and scanned in order: plain encodings (no dictionary attempt on the
    # mostly high-cardinality columns) cost a third of the default's write time; any Parquet reader reads them.
    return write_sorted_run(table.file_io, bucket_dir, physical, schema, level=0,
                            prefix=opts.get(CHANGELOG_FILE_PREFIX),
                            file_format=data_file_format(schema, level, changelog=True),
                            stats_mode=stats_mode, stats_mode_key=stats_mode_key,
                            dictionary=False,
                            row_target=False)  # Paimon rolls changelog files by size only


def row_kind_text(kinds) -> pa.Array:
    """_VALUE_KIND bytes (0..3) -> '+I' / '-U' / '+U' / '-D' strings."""
    import numpy as np
    k = np.asarray(kinds, dtype=np.int64)
    return pa.array(np.array(ROW_KIND_TEXT, dtype=object)[k], pa.string())
