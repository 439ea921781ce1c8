"""changelog-producer=input: every buffered input record (after ignore-delete / ignore-update-before filtering), as
given, sorted by (key, sequence order), not merged, written at each write-buffer flush."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from engine.changelog.files import write_changelog
from engine.merge import KEY_COLUMN_PREFIX, SEQUENCE_NUMBER, VALUE_KIND, schema_order_words
from kernels.keys import encode_keys
from kernels.merge import sort_indices


def write_input_changelog(table, partition_values: tuple, bucket: int, rows: pa.Table, seq: np.ndarray,
                          kinds: np.ndarray) -> list:
    """``rows`` (table columns), their sequence numbers and kinds, in input order -> changelog files of the bucket."""
    schema = table.schema
    cols = {KEY_COLUMN_PREFIX + k: rows.column(k) for k in schema.trimmed_primary_keys}
    cols[SEQUENCE_NUMBER] = pa.array(seq, pa.int64())
    cols[VALUE_KIND] = pa.array(kinds, pa.int8())
    normalized = pa.table(cols)
    for name in schema.field_names:
        normalized = normalized.append_column(rows.schema.field(name), rows.column(name))
    normalized = normalized.combine_chunks()
    words = schema_order_words(normalized, schema)
    perm = sort_indices(encode_keys([normalized.column(KEY_COLUMN_PREFIX + k) for k in schema.trimmed_primary_keys]),
                        words)
    return write_changelog(table, table.bucket_dir(partition_values, bucket), normalized.take(pa.array(perm)))
