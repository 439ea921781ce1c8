"""Paimon table options as one typed registry: names, types, defaults and validation in one place.

Options are stored as Paimon stores them, a ``str -> str`` map in the schema file. ``TableOptions`` parses that map
once and exposes typed attributes. Unknown keys are kept (Paimon keeps them) and logged as a warning; a known key with
an invalid value raises ``InvalidOption`` naming the key.
"""
from __future__ import annotations

import datetime
import logging
import numbers
import re
from dataclasses import dataclass
from typing import Any, Callable

from engine import refused_options
from engine.errors import InvalidOption, UnsupportedFeature
from engine.refused_options import REFUSED_KEYS

log = logging.getLogger("lakemerge.options")


def parse_bool(v: str) -> bool:
    """'true' or 'false' (any case, surrounding blanks ignored) as a bool; ValueError otherwise."""
    s = v.strip().lower()
    if s in ("true", "false"):
        return s == "true"
    raise ValueError("expected true or false")


def parse_int(v: str) -> int:
    """A decimal integer (surrounding blanks ignored; no digit separators, which Java's parseInt refuses);
    ValueError otherwise."""
    if "_" in v:
        raise ValueError(f"invalid literal for an integer: {v!r}")
    return int(v.strip())


_SIZE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
               "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tb": 1 << 40}


def parse_memory_size(v: str) -> int:
    """Paimon MemorySize strings: '128 mb', '64kb', '1048576'."""
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", v)
    if not m or m.group(2).lower() not in _SIZE_UNITS:
        raise ValueError("expected a size such as '128 mb'")
    return int(m.group(1)) * _SIZE_UNITS[m.group(2).lower()]


_DURATION_UNITS = {"ms": 1, "milli": 1, "millis": 1, "s": 1000, "sec": 1000, "second": 1000, "seconds": 1000,
                   "min": 60_000, "m": 60_000, "minute": 60_000, "minutes": 60_000, "h": 3_600_000,
                   "hour": 3_600_000, "hours": 3_600_000, "d": 86_400_000, "day": 86_400_000, "days": 86_400_000}


def parse_duration_ms(v: str) -> int:
    """Paimon Duration strings ('10 s', '1h', '500', bare numbers are milliseconds) as milliseconds; ValueError for
    another form or an unknown unit.
    """
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", v)
    if not m:
        raise ValueError("expected a duration such as '10 s'")
    unit = m.group(2).lower() or "ms"
    if unit not in _DURATION_UNITS:
        raise ValueError(f"unknown duration unit {unit!r}")
    return int(m.group(1)) * _DURATION_UNITS[unit]


def _enum(*values: str) -> Callable[[str], str]:
    def parse(v: str) -> str:
        s = v.strip().lower()
        if s not in values:
            raise ValueError("expected one of " + ", ".join(values))
        return s
    return parse


def _field_list(v: str) -> tuple[str, ...]:
    return tuple(s.strip() for s in v.split(",") if s.strip())


@dataclass(frozen=True)
class Option:
    """One registered option: its key, the parser of its string value (raises ValueError for a bad value), the typed
    default and a one-line description.
    """
    key: str
    parse: Callable[[str], Any]
    default: Any
    doc: str


_REGISTRY: dict[str, Option] = {}


def _opt(key: str, parse: Callable[[str], Any], default: Any, doc: str) -> str:
    _REGISTRY[key] = Option(key, parse, default, doc)
    return key


BUCKET = _opt("bucket", parse_int, -1, "fixed bucket count (> 0); -1 dynamic, -2 postpone")
BUCKET_KEY = _opt("bucket-key", _field_list, (), "bucket key fields; default: primary key minus partition keys")
MERGE_ENGINE = _opt("merge-engine", _enum("deduplicate", "partial-update", "aggregation", "first-row"),
                    "deduplicate", "how records of one key are merged")
def _file_format(v: str) -> str:
    """A Paimon data file format name, lower-cased as Paimon normalizes it (lakemerge writes parquet, orc, avro)."""
    from engine.write.formats import PAIMON_FORMATS
    return _enum(*PAIMON_FORMATS)(v)


def _compression(v: str) -> str:
    """A codec name of some data file format (which format has it is checked when writing)."""
    from engine.write.formats import ALL_CODECS
    return _enum(*ALL_CODECS)(v)


def _stats_mode(v: str) -> str:
    """A Paimon statistics mode (none, counts, full or truncate(N)), lower-cased as Paimon reads it."""
    mode = v.strip().lower()
    if not re.fullmatch(r"none|counts|full|truncate\(\d+\)", mode):
        raise ValueError("expected none, counts, full or truncate(N)")
    return mode


def _per_level(parse_value: Callable[[str], Any]) -> Callable[[str], dict[int, Any]]:
    """Paimon's map option form ``'0:avro,5:parquet'``: level -> parsed value (blanks around parts ignored)."""
    def parse(v: str) -> dict[int, Any]:
        out: dict[int, Any] = {}
        for entry in v.split(","):
            if not entry.strip():
                continue
            level, sep, value = entry.partition(":")
            if not sep or not level.strip() or not value.strip():
                raise ValueError(f"entry {entry.strip()!r} is not of the form '<level>:<value>', e.g. '0:avro'")
            try:
                out[parse_int(level)] = parse_value(value)
            except ValueError as e:
                raise ValueError(f"entry {entry.strip()!r}: {e}") from None
        return out
    return parse


FILE_FORMAT = _opt("file.format", _file_format, "parquet", "data file format (lakemerge writes parquet, orc, avro)")
FILE_COMPRESSION = _opt("file.compression", _compression, "zstd",
                        "data file compression (parquet: zstd snappy lz4 gzip none; orc: zstd snappy lz4 zlib none; "
                        "avro: zstd snappy deflate null)")
FILE_FORMAT_PER_LEVEL = _opt("file.format.per.level", _per_level(_file_format), {},
                             "primary-key tables: data file format by LSM level, e.g. '0:avro,5:parquet'")
FILE_COMPRESSION_PER_LEVEL = _opt("file.compression.per.level", _per_level(_compression), {},
                                  "primary-key tables: data file compression by LSM level, e.g. '0:lz4,1:zstd'")
ZSTD_LEVEL = _opt("file.compression.zstd-level", parse_int, 1, "zstd level of data files")
TARGET_FILE_SIZE = _opt("target-file-size", parse_memory_size, 128 << 20, "rolling size of data files")
WRITE_BUFFER_SIZE = _opt("write-buffer-size", parse_memory_size, 256 << 20, "in-memory write buffer per writer")
SEQUENCE_FIELD = _opt("sequence.field", _field_list, (), "user fields ordering records of one key")
SEQUENCE_SORT_ORDER = _opt("sequence.field.sort-order", _enum("ascending", "descending"), "ascending",
                           "order of sequence.field")
ROWKIND_FIELD = _opt("rowkind.field", str.strip, None, "string column holding +I/-U/+U/-D")
IGNORE_DELETE = _opt("ignore-delete", parse_bool, False, "drop -U/-D input rows")
IGNORE_UPDATE_BEFORE = _opt("ignore-update-before", parse_bool, False, "drop -U input rows")
CHANGELOG_PRODUCER = _opt("changelog-producer", _enum("none", "input", "lookup", "full-compaction"), "none",
                          "how changelog files are produced")
PARTITION_DEFAULT_NAME = _opt("partition.default-name", str, "__DEFAULT_PARTITION__",
                              "directory name of a null or blank partition value")
PARTITION_LEGACY_NAME = _opt("partition.legacy-name", parse_bool, True, "render partition values as Java toString")
STATS_MODE = _opt("metadata.stats-mode", str.strip, "truncate(16)", "value statistics: none|counts|truncate(N)|full")
STATS_DENSE_STORE = _opt("metadata.stats-dense-store", parse_bool, True,
                         "value statistics keep only the columns whose stats mode is not none (value_stats_cols "
                         "names them); false stores every column, a none column as nulls")
STATS_MODE_PER_LEVEL = _opt("metadata.stats-mode.per.level", _per_level(_stats_mode), {},
                            "primary-key tables: metadata.stats-mode by LSM level, e.g. '0:none'")
STATS_KEEP_FIRST_N_COLUMNS = _opt("metadata.stats-keep-first-n-columns", parse_int, -1,
                                  "columns after the first N without fields.<f>.stats-mode get stats mode none "
                                  "(-1: every column keeps metadata.stats-mode)")
COMMIT_MAX_RETRIES = _opt("commit.max-retries", parse_int, 10, "attempts to win a snapshot id")
COMMIT_MIN_RETRY_WAIT = _opt("commit.min-retry-wait", parse_duration_ms, 10, "first back-off (ms)")
COMMIT_MAX_RETRY_WAIT = _opt("commit.max-retry-wait", parse_duration_ms, 10_000, "largest back-off (ms)")
DATA_FILE_PREFIX = _opt("data-file.prefix", str, "data-", "data file name prefix")
DATA_FILE_EXTERNAL_PATHS = _opt("data-file.external-paths", str, None,
                                "comma-separated roots (with scheme) for new data files (engine.data_paths)")
DATA_FILE_EXTERNAL_PATHS_STRATEGY = _opt("data-file.external-paths.strategy", str, "none",
                                         "none|round-robin|specific-fs (entropy-inject, weight-robin: read only)")
DATA_FILE_EXTERNAL_PATHS_SPECIFIC_FS = _opt("data-file.external-paths.specific-fs", str, None,
                                            "the scheme of the external roots specific-fs keeps")
DATA_FILE_EXTERNAL_PATHS_WEIGHTS = _opt("data-file.external-paths.weights", str, None,
                                        "weights of the external roots for weight-robin (not written by lakemerge)")
THIN_MODE = _opt("data-file.thin-mode", parse_bool, False, "omit the _KEY_* columns from data files")
PK_NULLABLE = _opt("primary-key.nullable", parse_bool, False, "allow nulls in primary-key columns (not supported)")

# --- issue 4 ---
def parse_float(v: str) -> float:
    """A decimal number (surrounding blanks ignored) as a float; ValueError otherwise."""
    return float(v.strip())


def _optional(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    return lambda v: None if v.strip().lower() in ("", "null", "none") else parse(v)


COMPACTION_TRIGGER = _opt("num-sorted-run.compaction-trigger", parse_int, 5,
                          "sorted runs of a bucket that trigger a compaction")
COMPACTION_STOP_TRIGGER = _opt("num-sorted-run.stop-trigger", _optional(parse_int), None,
                               "sorted runs at which the writer compacts synchronously (default trigger + 3)")
NUM_LEVELS = _opt("num-levels", _optional(parse_int), None, "LSM levels per bucket (default trigger + 1)")
MAX_SIZE_AMPLIFICATION = _opt("compaction.max-size-amplification-percent", parse_int, 200,
                              "full compaction when newer runs exceed this percent of the oldest run")
COMPACTION_SIZE_RATIO = _opt("compaction.size-ratio", parse_int, 1, "size-ratio slack (percent) of universal picking")
FORCE_UP_LEVEL_0 = _opt("compaction.force-up-level-0", parse_bool, False, "every compaction takes all level-0 files")
SMALL_FILE_RATIO = _opt("compaction.small-file-ratio", parse_float, 0.7,
                        "files below target-file-size x ratio are rewritten, not upgraded")
FULL_COMPACTION_DELTA_COMMITS = _opt("full-compaction.delta-commits", _optional(parse_int), None,
                                     "full compaction every N commits")
FORCE_REWRITE_ALL_FILES = _opt("compaction.force-rewrite-all-files", parse_bool, False,
                                "full compaction rewrites every file, top-level files too, instead of upgrading "
                                "files by metadata")
TOTAL_SIZE_THRESHOLD = _opt("compaction.total-size-threshold", _optional(parse_memory_size), None,
                            "a compaction becomes full while the bucket's runs total less than this size")
INCREMENTAL_SIZE_THRESHOLD = _opt("compaction.incremental-size-threshold", _optional(parse_memory_size), None,
                                  "a compaction becomes full once the runs below the top level exceed this size")
OPTIMIZATION_INTERVAL = _opt("compaction.optimization-interval", _optional(parse_duration_ms), None,
                             "a compaction becomes full when the last full one is older than this")
OFFPEAK_START_HOUR = _opt("compaction.offpeak.start.hour", parse_int, -1,
                          "first local hour (0-23) of off-peak hours; -1 disables")
OFFPEAK_END_HOUR = _opt("compaction.offpeak.end.hour", parse_int, -1,
                        "local hour (0-23) off-peak hours end before; -1 disables")
OFFPEAK_RATIO = _opt("compaction.offpeak-ratio", parse_int, 0,
                     "percent added to compaction.size-ratio during off-peak hours")
LOOKUP_COMPACT = _opt("lookup-compact", _enum("radical", "gentle"), "radical",
                      "lookup tables: radical compacts level 0 up at every compaction, gentle every "
                      "lookup-compact.max-interval compactions that found nothing else to do")
LOOKUP_COMPACT_MAX_INTERVAL = _opt("lookup-compact.max-interval", _optional(parse_int), None,
                                   "gentle lookup compaction: compactions between forced level-0 compactions "
                                   "(default 2 x num-sorted-run.compaction-trigger, at least the trigger)")
WRITE_ONLY = _opt("write-only", parse_bool, False, "writers neither compact nor run maintenance after commits "
                  "(snapshot, changelog, consumer and partition expiration)")
COMPACTION_READ_BATCH_ROWS = _opt("compaction.read-batch-rows", parse_int, 64 * 1024,
                                  "rows read per file at a time while compacting (lakemerge)")
SNAPSHOT_NUM_RETAINED_MIN = _opt("snapshot.num-retained.min", parse_int, 10, "snapshots always kept")
SNAPSHOT_NUM_RETAINED_MAX = _opt("snapshot.num-retained.max", parse_int, 2**31 - 1, "snapshots kept at most")
SNAPSHOT_TIME_RETAINED = _opt("snapshot.time-retained", parse_duration_ms, 3_600_000, "snapshot retention time")
SNAPSHOT_EXPIRE_LIMIT = _opt("snapshot.expire.limit", parse_int, 50, "snapshots expired per run at most")
MANIFEST_TARGET_FILE_SIZE = _opt("manifest.target-file-size", parse_memory_size, 8 << 20,
                                 "manifests smaller than this are merged")
MANIFEST_MERGE_MIN_COUNT = _opt("manifest.merge-min-count", parse_int, 30,
                                "small manifests that trigger a minor merge")
MANIFEST_FULL_COMPACTION_SIZE = _opt("manifest.full-compaction-threshold-size", parse_memory_size, 16 << 20,
                                     "delete-entry volume that triggers a full manifest compaction")

# --- issue 3 ---
PARTIAL_UPDATE_IGNORE_DELETE = _opt("partial-update.ignore-delete", parse_bool, False, "alias of ignore-delete")
FIRST_ROW_IGNORE_DELETE = _opt("first-row.ignore-delete", parse_bool, False, "alias of ignore-delete")
DEDUPLICATE_IGNORE_DELETE = _opt("deduplicate.ignore-delete", parse_bool, False, "alias of ignore-delete")
PARTIAL_UPDATE_REMOVE_ON_DELETE = _opt("partial-update.remove-record-on-delete", parse_bool, False,
                                       "partial-update: a -D removes the whole record")
PARTIAL_UPDATE_REMOVE_ON_SEQUENCE_GROUP = _opt("partial-update.remove-record-on-sequence-group", _field_list, (),
                                               "partial-update: a -D winning one of these groups removes the record")
DELETE_FORCE_PRODUCE_CHANGELOG = _opt("delete.force-produce-changelog", parse_bool, False,
                                      "DELETE over partition columns only writes delete records instead of truncating")
AGGREGATION_REMOVE_ON_DELETE = _opt("aggregation.remove-record-on-delete", parse_bool, False,
                                    "aggregation: a -D removes the whole record")
DEFAULT_AGGREGATE_FUNCTION = _opt("fields.default-aggregate-function", str.strip, None,
                                  "aggregate function of fields without fields.<f>.aggregate-function")
SEQUENCE_AUTO_PADDING = _opt("sequence.auto-padding", _field_list, (),
                             "legacy: row-kind-flag, second-to-micro, millis-to-micro (comma separated)")

# --- issue 8 (append tables, dynamic bucket) ---
COMPACTION_MIN_FILE_NUM = _opt("compaction.min.file-num", parse_int, 5,
                               "append tables: small files of a bucket that trigger a compaction")
COMPACTION_DELETE_RATIO_THRESHOLD = _opt("compaction.delete-ratio-threshold", parse_float, 0.2,
                                         "append tables: a file with more of its rows deleted (deletion vectors) "
                                         "is compacted whatever its size")
COMPACTION_FILE_NUM_LIMIT = _opt("compaction.file-num-limit", parse_int, 100_000,
                                 "append tables: Paimon's bound on files scanned per compaction plan (memory); "
                                 "accepted, lakemerge plans per bucket and has no such batch")
DYNAMIC_BUCKET_TARGET_ROW_NUM = _opt("dynamic-bucket.target-row-num", parse_int, 2_000_000,
                                     "dynamic bucket mode: keys per bucket before a new bucket is opened")
DYNAMIC_BUCKET_INITIAL_BUCKETS = _opt("dynamic-bucket.initial-buckets", parse_int, None,
                                      "dynamic bucket mode: initial buckets of a partition (assigner count)")
DYNAMIC_BUCKET_MAX_BUCKETS = _opt("dynamic-bucket.max-buckets", parse_int, -1,
                                  "dynamic bucket mode: most buckets of a partition (-1: unlimited)")
POSTPONE_BATCH_WRITE_FIXED_BUCKET = _opt(
    "postpone.batch-write-fixed-bucket", parse_bool, True,
    "postpone bucket mode: batch writes go to the partition's real buckets (else to bucket-postpone)")
POSTPONE_DEFAULT_BUCKET_NUM = _opt("postpone.default-bucket-num", parse_int, None,
                                   "postpone bucket mode: bucket count of a partition getting real buckets first")
POSTPONE_TARGET_ROW_NUM_PER_BUCKET = _opt("postpone.target-row-num-per-bucket", parse_int, None,
                                          "postpone bucket mode: rows per bucket when a bucket count is estimated")
POSTPONE_TARGET_SIZE_PER_BUCKET = _opt("postpone.target-size-per-bucket", parse_memory_size, 1 << 30,
                                       "postpone bucket mode: bytes per bucket when a bucket count is estimated")
POSTPONE_MAX_PARALLELISM = _opt("postpone.batch-write-fixed-bucket.max-parallelism", parse_int, 2048,
                                "postpone bucket mode: most buckets an estimate gives a partition")
POSTPONE_RESCALE_LOAD_FACTOR = _opt("postpone.batch-write-fixed-bucket.rescale-load-factor", parse_int, 32,
                                    "postpone bucket mode: how many times the existing count a staged batch "
                                    "must need before its write rescales the partition")
POSTPONE_MERGE_ON_READ = _opt("postpone.merge-on-read", parse_bool, False,
                              "postpone bucket mode: batch reads merge postponed records (not supported here)")
CROSS_PARTITION_INDEX_TTL = _opt("cross-partition-upsert.index-ttl", parse_duration_ms, None,
                                 "cross-partition upsert: only keys of files newer than this are indexed")
ADD_COLUMN_BEFORE_PARTITION = _opt("add-column-before-partition", parse_bool, False,
                                   "schema evolution: new columns go before the first partition column")

# --- issue 5 ---
CHANGELOG_ROW_DEDUPLICATE = _opt("changelog-producer.row-deduplicate", parse_bool, False,
                                 "lookup/full-compaction: no -U/+U pair when the value did not change")
CHANGELOG_ROW_DEDUPLICATE_IGNORE_FIELDS = _opt("changelog-producer.row-deduplicate-ignore-fields", _field_list, (),
                                               "fields ignored when comparing values for row-deduplicate")
CHANGELOG_FILE_PREFIX = _opt("changelog-file.prefix", str, "changelog-", "changelog file name prefix")
CHANGELOG_NUM_RETAINED_MIN = _opt("changelog.num-retained.min", _optional(parse_int), None,
                                  "changelogs always kept (default: snapshot.num-retained.min)")
CHANGELOG_NUM_RETAINED_MAX = _opt("changelog.num-retained.max", _optional(parse_int), None,
                                  "changelogs kept at most (default: snapshot.num-retained.max)")
CHANGELOG_TIME_RETAINED = _opt("changelog.time-retained", _optional(parse_duration_ms), None,
                               "changelog retention time (default: snapshot.time-retained)")
INCREMENTAL_BETWEEN_TAG_TO_SNAPSHOT = _opt("incremental-between-tag-to-snapshot", parse_bool, False,
                                          "an incremental read between two tags reads the changes of the snapshots "
                                          "between them instead of the difference of the tagged states")
CONSUMER_EXPIRATION_TIME = _opt("consumer.expiration-time", _optional(parse_duration_ms), None,
                                "after a commit, consumers whose progress was not updated for this long are removed "
                                "(before snapshots expire) so they stop holding snapshots back")
CONSUMER_IGNORE_PROGRESS = _opt("consumer.ignore-progress", parse_bool, False,
                                "a stream with a consumer id starts from its scan mode, not the saved progress")
# --- issue 5 (round 2): changelog file settings, Paimon's names; unset -> the data-file settings ---
CHANGELOG_FILE_COMPRESSION = _opt("changelog-file.compression", _compression, None,
                                  "changelog file compression (default: the data files' of level 0)")
CHANGELOG_FILE_FORMAT = _opt("changelog-file.format", _file_format, None,
                             "changelog file format (default: the data files' of level 0)")
CHANGELOG_FILE_STATS_MODE = _opt("changelog-file.stats-mode", _stats_mode, None,
                                 "changelog file value statistics: none|counts|truncate(N)|full "
                                 "(default: metadata.stats-mode)")
# --- record-level expiration (engine.compact.record_expire) ---
RECORD_LEVEL_EXPIRE_TIME = _opt("record-level.expire-time", _optional(parse_duration_ms), None,
                                "primary-key tables: compaction drops rows whose time field is older than this")
RECORD_LEVEL_TIME_FIELD = _opt("record-level.time-field", _optional(str.strip), None,
                               "the INT (seconds), BIGINT (seconds or milliseconds) or TIMESTAMP column "
                               "record-level.expire-time applies to")

# --- deletion vectors ("merge on write", paimon-semantics §9) and lookup compaction ---
DELETION_VECTORS_ENABLED = _opt("deletion-vectors.enabled", parse_bool, False,
                                "compaction marks superseded rows in deletion vectors; batch reads skip level 0 "
                                "and read files without merging")
DELETION_VECTORS_BITMAP64 = _opt("deletion-vectors.bitmap64", parse_bool, False,
                                 "write deletion vectors in the 64-bit (Iceberg-compatible) format")
DELETION_VECTORS_MERGE_ON_READ = _opt("deletion-vectors.merge-on-read", parse_bool, False,
                                      "batch reads of a deletion-vector table also merge its level-0 files")
DELETION_VECTORS_INDEX_PREFIX = _opt("deletion-vectors.index-file.prefix", str, "index-",
                                     "name prefix of new deletion-vector index files (lakemerge; Spark jobs tag "
                                     "the files they write with it)")
FORCE_LOOKUP = _opt("force-lookup", parse_bool, False,
                    "compaction looks keys up in older levels, as changelog-producer=lookup does")
OVERWRITE_UPGRADE = _opt("overwrite-upgrade", parse_bool, True,
                         "primary-key tables: an overwrite commits each bucket's new files at the top level when "
                         "they do not overlap (engine.commit.overwrite_upgrade)")
# --- OVERWRITE snapshots in streaming reads (engine.changelog.overwrite) ---
STREAMING_READ_OVERWRITE = _opt("streaming-read-overwrite", parse_bool, False,
                                "primary-key tables: streaming reads emit the rows OVERWRITE snapshots replaced (-D) "
                                "and wrote (+I); not with changelog-producer lookup or full-compaction")
STREAMING_READ_APPEND_OVERWRITE = _opt("streaming-read-append-overwrite", parse_bool, False,
                                       "append tables: streaming reads emit the rows OVERWRITE snapshots wrote (+I)")

# --- maintenance after commits (engine.maintenance.auto, engine.maintenance.partition_expire) ---
PARTITION_EXPIRATION_TIME = _opt("partition.expiration-time", _optional(parse_duration_ms), None,
                                 "after commits, partitions older than this are dropped (unset: never)")
PARTITION_EXPIRATION_CHECK_INTERVAL = _opt("partition.expiration-check-interval", parse_duration_ms, 3_600_000,
                                           "least time between two partition expiration checks of a process")
PARTITION_EXPIRATION_STRATEGY = _opt("partition.expiration-strategy", _enum("values-time", "update-time"),
                                     "values-time", "partition time: read from its values, or its newest file")
PARTITION_EXPIRATION_MAX_NUM = _opt("partition.expiration-max-num", parse_int, 100,
                                    "partitions expired per check at most")
PARTITION_EXPIRATION_BATCH_SIZE = _opt("partition.expiration-batch-size", _optional(parse_int), None,
                                       "expired partitions dropped per snapshot (default: all in one)")
PARTITION_TIMESTAMP_FORMATTER = _opt("partition.timestamp-formatter", _optional(str), None,
                                     "Java DateTimeFormatter pattern of the partition time (default yyyy-MM-dd "
                                     "[HH:mm:ss])")
PARTITION_TIMESTAMP_PATTERN = _opt("partition.timestamp-pattern", _optional(str), None,
                                   "partition time from several columns, e.g. '$dt $hour:00:00' (default: the "
                                   "first partition value)")
END_INPUT_CHECK_PARTITION_EXPIRE = _opt("end-input.check-partition-expire", parse_bool, False,
                                        "batch commits check partition expiration whatever the check interval")

# --- automatic tags after commits (engine.maintenance.auto_tags, Paimon's TagAutoManager / TagBatchCreation) ---
def _zone_id(v: str):
    """A Java ZoneId text ('UTC', 'Asia/Shanghai', 'GMT+08:00', '+08:00') as a tzinfo."""
    from engine.maintenance.auto_tags import parse_zone_id
    return parse_zone_id(v)


def _positive_duration_ms(v: str) -> int:
    ms = parse_duration_ms(v)
    if ms <= 0:
        raise ValueError("must be a positive duration")
    return ms


def _non_negative_int(v: str) -> int:
    n = parse_int(v)
    if n < 0:
        raise ValueError("must be >= 0")
    return n


TAG_AUTOMATIC_CREATION = _opt("tag.automatic-creation", _enum("none", "process-time", "watermark", "batch"), "none",
                              "after commits: tags per period of the snapshot time (process-time), or the latest "
                              "snapshot after each batch commit (batch); watermark is refused (no watermarks here)")
TAG_CREATION_PERIOD = _opt("tag.creation-period", _enum("daily", "hourly", "two-hours"), "daily",
                           "period of automatic tags")
TAG_CREATION_PERIOD_DURATION = _opt("tag.creation-period-duration", _optional(_positive_duration_ms), None,
                                    "period of automatic tags as a duration (overrides tag.creation-period; names "
                                    "yyyyMMddHHmm)")
TAG_CREATION_DELAY = _opt("tag.creation-delay", parse_duration_ms, 0,
                          "a period is tagged by the first snapshot at least this long after its end")
TAG_PERIOD_FORMATTER = _opt("tag.period-formatter", _enum("with_dashes", "without_dashes",
                                                          "without_dashes_and_spaces"), "with_dashes",
                            "names of daily and hourly tags: yyyy-MM-dd[ HH], yyyyMMdd[ HH] or yyyyMMdd[HH]")
TAG_NUM_RETAINED_MAX = _opt("tag.num-retained-max", _optional(_non_negative_int), None,
                            "automatic tags kept at most (process-time: only period-named tags count; batch: all)")
TAG_DEFAULT_TIME_RETAINED = _opt("tag.default-time-retained", _optional(parse_duration_ms), None,
                                 "retention of new tags (automatic and create_tag): expired after commits")
TAG_TIME_EXPIRE_ENABLED = _opt("tag.time-expire-enabled", parse_bool, True,
                               "after commits, tags older than their time retained are deleted")
TAG_AUTOMATIC_COMPLETION = _opt("tag.automatic-completion", parse_bool, False,
                                "process-time: missed periods are tagged one per later snapshot")
TAG_BATCH_CUSTOMIZED_NAME = _opt("tag.batch.customized-name", _optional(str), None,
                                 "batch mode: the tag name (default batch-write-yyyy-MM-dd)")
TAG_CREATE_SUCCESS_FILE = _opt("tag.create-success-file", parse_bool, False,
                               "new tags get tag/tag-success-file/<name>_SUCCESS")
SINK_PROCESS_TIME_ZONE = _opt("sink.process-time-zone", _optional(_zone_id), None,
                              "zone of snapshot times in automatic tag names (default: the local zone)")
SINK_WATERMARK_TIME_ZONE = _opt("sink.watermark-time-zone", _zone_id, datetime.timezone.utc,
                                "zone of snapshot watermarks in automatic tag names (default UTC)")

# A streaming read's start time (epoch ms; Paimon's CoreOptions.SCAN_TIMESTAMP_MILLIS, a long): a read option here
# (Table.stream's timestamp_millis, Spark's option), only validated as a table option (check_new_schema).
SCAN_TIMESTAMP_MILLIS = "scan.timestamp-millis"


def parse_timestamp_millis(value, *, table: str | None = None) -> int:
    """``scan.timestamp-millis`` as an int: an int, or a string of a decimal integer. Raises InvalidOption naming
    the option for anything else (a bool, a float, a date-time string)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, str):
        try:
            return parse_int(value)
        except ValueError:
            pass
    raise InvalidOption(SCAN_TIMESTAMP_MILLIS, value, "expected epoch milliseconds (an integer)", table=table)


# --- empty commits, emptied directories, file rolling and naming, batch-read narrowing ---
SNAPSHOT_IGNORE_EMPTY_COMMIT = _opt("snapshot.ignore-empty-commit", _optional(parse_bool), None,
                                    "false: a commit with nothing to commit still creates an (empty) APPEND snapshot "
                                    "(unset: true, Paimon's batch default)")
SNAPSHOT_CLEAN_EMPTY_DIRECTORIES = _opt("snapshot.clean-empty-directories", parse_bool, False,
                                        "snapshot expiration deletes the bucket and partition directories it "
                                        "emptied (fallback key snapshot.expire.clean-empty-directories)")
SNAPSHOT_EXPIRE_CLEAN_EMPTY_DIRECTORIES = _opt("snapshot.expire.clean-empty-directories", parse_bool, False,
                                               "old name of snapshot.clean-empty-directories")
TARGET_FILE_ROW_NUM = _opt("target-file-row-num", parse_int, 2**63 - 1,
                           "new data files roll after this many rows (or target-file-size, whichever comes first)")
FILE_SUFFIX_INCLUDE_COMPRESSION = _opt("file.suffix.include.compression", parse_bool, False,
                                       "new data and changelog file names end in .<compression>.<format>")
SCAN_BUCKET = _opt("scan.bucket", _optional(parse_int), None, "batch reads read this bucket only")
SCAN_IGNORE_CORRUPT_FILES = _opt("scan.ignore-corrupt-files", parse_bool, False,
                                 "reads skip (with a warning) a data file that exists but cannot be decoded; "
                                 "writes, compaction and row-level operations still fail")
SCAN_IGNORE_LOST_FILES = _opt("scan.ignore-lost-files", parse_bool, False,
                              "reads skip (with a warning) a data file that does not exist; writes, compaction and "
                              "row-level operations still fail")
SCAN_FILE_CREATION_TIME_MILLIS = _opt("scan.file-creation-time-millis", _optional(parse_int), None,
                                      "batch reads of the latest snapshot read only files created at or after this "
                                      "epoch time (time travel is refused, as in Paimon)")
DATA_FILE_PATH_DIRECTORY = _opt("data-file.path-directory", _optional(str.strip), None,
                                "data files live under <table>/<this directory>/<partition>/bucket-N")


# Paimon options that lakemerge knows by name but that do not change what this version writes or reads.
# They are kept in the schema (and honoured by Paimon's own readers and writers) without a warning.
KNOWN_PAIMON_KEYS = frozenset({
    "num-sorted-run.compaction-trigger", "num-sorted-run.stop-trigger", "num-levels",
    "compaction.max-size-amplification-percent", "compaction.size-ratio", "compaction.force-up-level-0",
    "full-compaction.delta-commits", "manifest.target-file-size", "manifest.merge-min-count",
    "manifest.compression", "manifest.format",
    "changelog-producer.row-deduplicate",
    "deletion-vector.index-file.target-size", "deletion-vectors.modifiable", "dynamic-bucket.target-row-num",
    "path", "type", "comment", "owner",
    "scan.mode", "scan.snapshot-id", "scan.timestamp-millis", "scan.tag-name", "consumer-id",
    "lookup-wait", "snapshot.expire.execution-mode", "commit.force-compact", "local-merge-buffer-size",
    "write-buffer-spillable", "sort-spill-buffer-size", "file-index.read.enabled", "bucket-function.type",
    "sequence.snapshot-ordering", "partial-update.ignore-delete", "first-row.ignore-delete",
    "deduplicate.ignore-delete", "fields.default-aggregate-function",
})
# Task z (options triage): Paimon options that cannot change what lakemerge writes or reads -- engine runtime and
# memory tuning (Flink/Spark parallelism, spill, caches, lookup joins), metastore and materialized-table metadata,
# manifest and statistics tuning, options honoured elsewhere from the raw map (engine.read.fallback_branch,
# spark_glue.reading, engine.read.scan), and the settings of features engine.refused_options refuses anyway.
KNOWN_PAIMON_KEYS = KNOWN_PAIMON_KEYS | frozenset({
    "bucket-append-ordered", "file.block-size", "file-index.in-manifest-threshold", "manifest-sort.enabled",
    "manifest-sort.partition-field", "manifest-sort.max-rewrite-size", "manifest.merge-optimize.enabled",
    "manifest.delete-file-drop-stats",
    "scan.max-splits-per-task", "scan.manifest.parallelism", "scan.plan-sort-partition", "sort-engine",
    "sort-spill-threshold", "spill-compression", "spill-compression.zstd-level", "write-buffer-spill.max-disk-size",
    "write-buffer-for-append", "write-max-writers-to-spill", "local-sort.max-num-file-handles", "page-size",
    "cache-page-size", "read.batch-size", "write.batch-size", "write.batch-memory", "write.sequence-number-init-mode",
    "file-reader-async-threshold", "async-file-write", "file-operation.thread-num", "local-kv-db.block-size",
    "source.split.target-size", "source.split.open-file-cost", "scan.timestamp", "scan.version",
    "scan.fallback-branch", "scan.primary-branch", "index-file-in-data-file-dir",
    "table-read.sequence-number.enabled", "stream-scan-mode", "batch-scan-mode", "auto-create",
    "commit.force-create-snapshot", "commit.user-prefix", "dynamic-bucket.assigner-parallelism",
    "cross-partition-upsert.bootstrap-parallelism", "partition.sink-strategy", "sink.watermark-time-zone",
    "sink.process-time-zone", "snapshot.watermark-idle-timeout", "zorder.var-length-contribution",
    "sort-compaction.range-strategy", "sort-compaction.local-sample.magnification", "visibility-callback.enabled",
    "visibility-callback.timeout", "visibility-callback.check-interval", "query-auth.enabled",
    "metastore.partitioned-table", "metastore.tag-to-partition", "metastore.tag-to-partition.preview",
    "partition.idle-time-to-report-statistic", "format-table.scan.list-parallelism", "format-table.implementation",
    "format-table.partition-path-only-value", "format-table.file.compression", "format-table.commit-hive-sync-url",
    "lookup.hash-load-factor", "lookup.cache-rows", "lookup.continuous.discovery-interval",
    "lookup.cache-file-retention", "lookup.cache-max-disk-size", "lookup.cache-spill-compression",
    "lookup.cache-max-memory-size", "lookup.blob-as-descriptor", "lookup.cache.high-priority-pool-ratio",
    "lookup.cache.bloom.filter.enabled", "lookup.cache.bloom.filter.fpp", "lookup.remote-file.enabled",
    "lookup.remote-file.level-threshold", "lookup.merge-buffer-size", "lookup.merge-records-threshold",
    "materialized-table.definition-query", "materialized-table.interval-freshness",
    "materialized-table.interval-freshness.time-unit", "materialized-table.logical-refresh-mode",
    "materialized-table.refresh-mode", "materialized-table.refresh-status",
    "materialized-table.refresh-handler-description", "materialized-table.refresh-handler-bytes",
    # settings of refused features (engine.refused_options: the feature's own switch is what is refused)
    "chain-table.chain-partition-keys", "chain-table.streaming.merge-snapshot", "chain-table.split.key-range-enabled",
    "scan.fallback-snapshot-branch", "scan.fallback-delta-branch", "variant.shreddingSchema",
    "variant.inferShreddingSchema", "variant.shredding.inferenceMode", "variant.shredding.maxSchemaWidth",
    "variant.shredding.maxSchemaDepth", "variant.shredding.minFieldCardinalityRatio",
    "variant.shredding.maxInferBufferRow", "variant.shredding.adaptive.maxInferBufferRow",
    "variant.shredding.adaptive.retentionRatio", "blob.target-file-size", "blob.split-by-file-size",
    "blob.copy-buffer-size", "blob-view.resolve.enabled", "blob-as-descriptor", "blob-write-null-on-missing-file",
    "blob-write-null-on-fetch-failure", "blob-compaction.enabled", "vector.target-file-size",
    "vector.file.format",  # moves VECTOR columns only, a type lakemerge cannot read (InvalidSchema) anyway
    "vector-search.distribute.enabled", "vector-search.lateral-join.batch-size",
    "row-tracking.partition-group-on-commit",
    "data-evolution.reassign.skip-contiguous-row-count", "data-evolution.row-id-conflict-rewrite.max-size",
    "data-evolution.row-sidecar.enabled", "data-evolution.row-sidecar.max-selected-rows",
    "data-evolution.row-sidecar.max-selection-ratio", "data-evolution.merge-into.file-pruning",
    "data-evolution.merge-into.source-persist", "data-evolution.compaction.rewrite-row-ids",
    "global-index.external-path", "global-index.column-update-action", "global-index.row-count-per-shard",
    "global-index.build.max-shard", "global-index.build.max-parallelism", "global-index.enabled",
    "global-index.search-mode", "scalar-index.search-mode", "vector-index.search-mode", "full-text-index.search-mode",
    "global-index.thread-num", "clustering.columns", "clustering.strategy", "clustering.history-partition.limit",
    "clustering.history-partition.idle-to-full-sort", "clustering.incremental.optimize-write",
    "clustering.incremental.mode",
    "dynamic-partition-overwrite",  # honoured by Spark overwrites (spark_glue.writing); the Python API says per call
    # consumed when a table is created (engine.schema.TableSchema.create), never stored
    "primary-key", "partition",
    # settings of partition.mark-done-action (NOT_HONOURED warns about the action itself)
    "partition.mark-done-action.custom.class", "partition.mark-done-action.http.url",
    "partition.mark-done-action.http.params",
}) | REFUSED_KEYS

# Paimon options with an effect lakemerge does not implement: kept, with a warning saying what is not done.
NOT_HONOURED = {
    "partition.end-input-to-done": "no partition is marked done",
    "partition.mark-done-action": "no partition is marked done (no _SUCCESS file, no done partition)",
    "partition.timestamp-format.strict": "partition values are not checked against the timestamp formatter",
    "commit.callbacks": "Java commit callbacks are not called",
    "commit.timeout": "commits retry by commit.max-retries only",
    "commit.discard-duplicate-files": "a commit adding a file the table already holds is not filtered",
    "scan.creation-time-millis": "batch reads do not filter by snapshot creation time",
}
_PER_FIELD = re.compile(r"^fields\.[^.]+\.[a-z0-9.-]+$")
# Options of a data file format, passed to its writer by Paimon (``orc.*``, ``parquet.*``, ``avro.*``). lakemerge
# honours the codec ones (FORMAT_CODEC_KEYS) and keeps the others without a warning.
_FORMAT_OPTION = re.compile(r"^(orc|parquet|avro)\.")
FORMAT_CODEC_KEYS = {"orc": "orc.compress", "avro": "avro.codec"}

# Merge engines / producers this version implements; the others are valid Paimon values but unsupported here.
SUPPORTED_MERGE_ENGINES = ("deduplicate", "partial-update", "aggregation", "first-row")
SUPPORTED_CHANGELOG_PRODUCERS = ("none", "input", "lookup", "full-compaction")


class TableOptions:
    """Typed, validated view of a table's option map.

    Raises:
        InvalidOption: a known option has a value Paimon would reject.
    """

    def __init__(self, raw: dict[str, str], *, table: str | None = None):
        self.raw = {str(k): str(v) for k, v in raw.items()}
        self.table = table
        self._values: dict[str, Any] = {}
        for key, value in self.raw.items():
            opt = _REGISTRY.get(key)
            if opt is None:
                continue
            try:
                self._values[key] = opt.parse(value)
            except ValueError as e:
                raise InvalidOption(key, value, str(e), table=table) from None
        self._check()

    def unknown_keys(self) -> list[str]:
        """Sorted keys that are neither registered here, nor known Paimon options, nor per-field options
        (``fields.<name>.*``).
        """
        return sorted(k for k in self.raw if k not in _REGISTRY and k not in KNOWN_PAIMON_KEYS
                      and k not in NOT_HONOURED and not _PER_FIELD.match(k) and not _FORMAT_OPTION.match(k))

    def warn_unknown(self) -> None:
        """Log one warning per key of ``unknown_keys()`` and per Paimon option lakemerge does not implement
        (``NOT_HONOURED``, saying what is not done); the options are kept as given."""
        for k in self.unknown_keys():
            log.warning("table %s: option %r is not a Paimon option lakemerge knows; it is kept as given",
                        self.table, k)
        for k in sorted(set(self.raw) & set(NOT_HONOURED)):
            log.warning("table %s: option %r is not implemented by lakemerge (%s); it is kept as given",
                        self.table, k, NOT_HONOURED[k])

    def get(self, key: str) -> Any:
        """The typed value of registered option ``key``: the parsed stored value, else its default. Raises KeyError
        for a key that is not registered.
        """
        if key in self._values:
            return self._values[key]
        return _REGISTRY[key].default

    def _check(self) -> None:
        bucket = self.get(BUCKET)
        if bucket == 0 or bucket < -2:
            raise InvalidOption(BUCKET, self.raw.get(BUCKET), "must be a positive bucket count, -1 or -2",
                                table=self.table)
        if self.get(TARGET_FILE_SIZE) <= 0:
            raise InvalidOption(TARGET_FILE_SIZE, self.raw.get(TARGET_FILE_SIZE), "must be positive",
                                table=self.table)
        if self.get(TARGET_FILE_ROW_NUM) < 1:  # Paimon's SchemaValidation
            raise InvalidOption(TARGET_FILE_ROW_NUM, self.raw.get(TARGET_FILE_ROW_NUM), "should be at least 1",
                                table=self.table)
        if self.get(COMMIT_MAX_RETRIES) < 0:
            raise InvalidOption(COMMIT_MAX_RETRIES, self.raw.get(COMMIT_MAX_RETRIES), "must be >= 0",
                                table=self.table)
        producer = self.get(CHANGELOG_PRODUCER)
        if self.merge_engine == "first-row" and producer not in ("none", "lookup"):
            raise InvalidOption(CHANGELOG_PRODUCER, producer, "the first-row merge engine only supports "
                                "changelog-producer none or lookup", table=self.table)
        if producer == "lookup" and self.get(FULL_COMPACTION_DELTA_COMMITS):
            raise InvalidOption(FULL_COMPACTION_DELTA_COMMITS, self.raw.get(FULL_COMPACTION_DELTA_COMMITS),
                                "cannot be combined with changelog-producer=lookup", table=self.table)
        mode = self.get(STATS_MODE)
        if not re.fullmatch(r"none|counts|full|truncate\(\d+\)", mode):
            raise InvalidOption(STATS_MODE, mode, "expected none, counts, full or truncate(N)", table=self.table)

    def check_new_schema(self, *, has_primary_key: bool, previous: dict | None = None) -> None:
        """Checks Paimon's SchemaValidation makes only when a schema is created or altered (a table written
        by a tool that skips them, such as pypaimon, still opens); ``previous``: the options of the schema being
        altered (None when creating). Raises InvalidOption naming the option."""
        self._check_retention(SNAPSHOT_NUM_RETAINED_MIN, SNAPSHOT_NUM_RETAINED_MAX)
        self._check_retention(CHANGELOG_NUM_RETAINED_MIN, CHANGELOG_NUM_RETAINED_MAX)
        if self.bucket == -2 and not has_primary_key:  # Paimon's SchemaValidation.validateBucket
            raise InvalidOption(BUCKET, self.raw.get(BUCKET), "postpone bucket mode (-2) needs a primary key; an "
                                "append table takes a positive bucket count or -1", table=self.table)
        self._check_deletion_vectors()
        self.check_streaming_read_overwrite(has_primary_key=has_primary_key)
        if SCAN_TIMESTAMP_MILLIS in self.raw:  # Paimon's SchemaValidation.validateStartupMode parses it as a long
            parse_timestamp_millis(self.raw[SCAN_TIMESTAMP_MILLIS], table=self.table)
        refused_options.check_new_schema(self.raw, self.table, has_primary_key=has_primary_key)
        self._check_auto_tags(previous)

    def _check_auto_tags(self, previous: dict | None) -> None:
        """A new schema cannot turn ``tag.automatic-creation=watermark`` on (``previous``: the altered schema's
        options): lakemerge writes no snapshot watermark of its own and Paimon's watermark mode skips snapshots
        without one, so no tag would come. Paimon validates no mode, so a table another engine (Flink) created
        with it stays alterable, and its commits tag as Paimon's do. A period-based mode needs
        ``tag.creation-delay`` shorter than the period (Paimon's TagPeriodHandler.validateDelay). Raises
        InvalidOption."""
        mode = self.get(TAG_AUTOMATIC_CREATION)
        was = None if previous is None else TableOptions(previous, table=self.table).get(TAG_AUTOMATIC_CREATION)
        if mode == "watermark" and was != "watermark":
            raise InvalidOption(TAG_AUTOMATIC_CREATION, self.raw.get(TAG_AUTOMATIC_CREATION), "lakemerge writes no "
                                "snapshot watermarks, so watermark-based tags would never be created (Paimon skips "
                                "snapshots without a watermark); use process-time or batch", table=self.table)
        if mode == "process-time":
            from engine.maintenance.auto_tags import TagPeriod
            period = TagPeriod.of(self)
            if self.get(TAG_CREATION_DELAY) >= period.period_ms:
                raise InvalidOption(TAG_CREATION_DELAY, self.raw.get(TAG_CREATION_DELAY), "must be shorter than "
                                    f"the tag period ({period.period_ms} ms)", table=self.table)

    def check_streaming_read_overwrite(self, *, has_primary_key: bool) -> None:
        """Paimon's SchemaValidation of ``streaming-read-overwrite``: not with changelog-producer lookup or
        full-compaction (the compaction after an overwrite emits its changes again), and not on an append table
        (which has ``streaming-read-append-overwrite``). Raises InvalidOption."""
        if not self.get(STREAMING_READ_OVERWRITE):
            return
        producer = self.get(CHANGELOG_PRODUCER)
        if producer in ("lookup", "full-compaction"):
            raise InvalidOption(STREAMING_READ_OVERWRITE, self.raw.get(STREAMING_READ_OVERWRITE),
                                f"cannot be true with changelog-producer={producer}: it would read duplicated "
                                "changes", table=self.table)
        if not has_primary_key:
            raise InvalidOption(STREAMING_READ_OVERWRITE, self.raw.get(STREAMING_READ_OVERWRITE),
                                "an append table (no primary key) reads overwrites with "
                                f"{STREAMING_READ_APPEND_OVERWRITE}", table=self.table)

    def _check_deletion_vectors(self) -> None:
        """Paimon's SchemaValidation for deletion vectors: changelog producer none, input or lookup; not the
        first-row merge engine (it never deletes old rows)."""
        if not self.deletion_vectors:
            return
        producer = self.get(CHANGELOG_PRODUCER)
        if producer not in ("none", "input", "lookup"):
            raise InvalidOption(DELETION_VECTORS_ENABLED, "true", "deletion vectors work only with "
                                f"changelog-producer none, input or lookup, not {producer}", table=self.table)
        if self.merge_engine == "first-row":
            raise InvalidOption(DELETION_VECTORS_ENABLED, "true", "the first-row merge engine does not need "
                                "deletion vectors (it never deletes old rows)", table=self.table)

    def _check_retention(self, min_key: str, max_key: str) -> None:
        """min >= 1 and min <= max, checked on the effective values (the changelog options default to the
        snapshot ones)."""
        lo, hi = self.get(min_key), self.get(max_key)
        lo = self.get(SNAPSHOT_NUM_RETAINED_MIN) if lo is None else lo
        hi = self.get(SNAPSHOT_NUM_RETAINED_MAX) if hi is None else hi
        if lo < 1:
            raise InvalidOption(min_key, self.raw.get(min_key), "should be at least 1", table=self.table)
        if lo > hi:
            key = min_key if min_key in self.raw or max_key not in self.raw else max_key
            raise InvalidOption(key, self.raw.get(key), f"{min_key} ({lo}) should not be larger than {max_key} "
                                f"({hi})", table=self.table)

    def require_writable(self, *, allow_dynamic_bucket: bool = False, allow_postpone_bucket: bool = False) -> None:
        """Raise UnsupportedFeature for valid Paimon settings this version cannot write (``bucket=-1`` is
        writable when ``allow_dynamic_bucket``: engine.dynamic_bucket; ``bucket=-2`` when ``allow_postpone_bucket``:
        engine.postpone)."""
        refused_options.require_writable(self.raw, self.table)
        where = f"table {self.table!r}: "
        if self.bucket <= 0 and not (allow_dynamic_bucket and self.bucket == -1) \
                and not (allow_postpone_bucket and self.bucket == -2):
            raise UnsupportedFeature(
                where + f"bucket={self.bucket} (dynamic/postpone bucket mode) cannot be written by lakemerge yet; "
                "create the table with a fixed bucket count, e.g. options={'bucket': '4'}")
        if self.merge_engine not in SUPPORTED_MERGE_ENGINES:
            raise UnsupportedFeature(where + f"merge-engine={self.merge_engine} is not supported yet")
        if self.get(CHANGELOG_PRODUCER) not in SUPPORTED_CHANGELOG_PRODUCERS:
            raise UnsupportedFeature(where + f"changelog-producer={self.get(CHANGELOG_PRODUCER)} is not supported yet")
        if self.get(PK_NULLABLE):
            raise UnsupportedFeature(where + "primary-key.nullable=true is not supported")
        self._check_deletion_vectors()
        self.check_file_formats()

    def file_format_of(self, level: int, *, changelog: bool = False, per_level: bool = True) -> tuple[str, str]:
        """(format, compression) of a primary-key table's file at ``level``, as Paimon's KeyValueFileWriterFactory
        picks them: a changelog file takes ``changelog-file.format`` / ``changelog-file.compression`` when set;
        otherwise ``file.format.per.level`` / ``file.compression.per.level`` for the level (not with
        ``per_level=False``: append tables), else ``file.format`` / ``file.compression``. The format's own codec
        option (``orc.compress``, ``avro.codec``) overrides the compression, as in Paimon's ORC and Avro writers."""
        fmt = self.get(CHANGELOG_FILE_FORMAT) if changelog else None
        codec = self.get(CHANGELOG_FILE_COMPRESSION) if changelog else None
        fmt = fmt or (self.get(FILE_FORMAT_PER_LEVEL).get(level) if per_level else None) or self.get(FILE_FORMAT)
        codec = codec or (self.get(FILE_COMPRESSION_PER_LEVEL).get(level) if per_level else None) \
            or self.get(FILE_COMPRESSION)
        own = FORMAT_CODEC_KEYS.get(fmt)
        if own in self.raw:
            codec = self.raw[own].strip().lower()
        return fmt, codec

    def stats_mode_of(self, level: int, *, changelog: bool = False) -> tuple[str, str]:
        """(stats mode, the option it comes from) of a primary-key table's file at ``level``, as Paimon's
        KeyValueFileWriterFactory picks the file's default value statistics mode: a changelog file takes
        ``changelog-file.stats-mode`` when set; otherwise ``metadata.stats-mode.per.level`` for the level, else
        ``metadata.stats-mode``. ``fields.<f>.stats-mode`` and ``metadata.stats-keep-first-n-columns`` still apply
        per column on top (``engine.write.stats.stats_modes``); append tables use ``metadata.stats-mode`` only."""
        if changelog and self.get(CHANGELOG_FILE_STATS_MODE) is not None:
            return self.get(CHANGELOG_FILE_STATS_MODE), CHANGELOG_FILE_STATS_MODE
        per_level = self.get(STATS_MODE_PER_LEVEL)
        if level in per_level:
            return per_level[level], STATS_MODE_PER_LEVEL
        return self.get(STATS_MODE), STATS_MODE

    def check_file_formats(self) -> None:
        """Every format the options choose for some file is one lakemerge writes (UnsupportedFeature naming the
        option otherwise) and its compression is a codec of that format (InvalidOption naming the option)."""
        from engine.write.formats import CODECS, WRITABLE_FORMATS
        per_fmt, per_codec = self.get(FILE_FORMAT_PER_LEVEL), self.get(FILE_COMPRESSION_PER_LEVEL)
        fmt, codec = self.file_format_of(0, per_level=False)
        choices = [(FILE_FORMAT, fmt, FILE_COMPRESSION, codec)]
        for level in sorted(set(per_fmt) | set(per_codec)):
            fmt, codec = self.file_format_of(level)
            choices.append((FILE_FORMAT_PER_LEVEL if level in per_fmt else FILE_FORMAT, fmt,
                            FILE_COMPRESSION_PER_LEVEL if level in per_codec else FILE_COMPRESSION, codec))
        if self.get(CHANGELOG_FILE_FORMAT) or self.get(CHANGELOG_FILE_COMPRESSION):
            for level in sorted(set(per_fmt) | set(per_codec) | {0}):
                fmt, codec = self.file_format_of(level, changelog=True)
                choices.append((CHANGELOG_FILE_FORMAT if self.get(CHANGELOG_FILE_FORMAT) else FILE_FORMAT, fmt,
                                CHANGELOG_FILE_COMPRESSION if self.get(CHANGELOG_FILE_COMPRESSION)
                                else FILE_COMPRESSION, codec))
        for fmt_key, fmt, codec_key, codec in choices:
            codec_key = FORMAT_CODEC_KEYS[fmt] if FORMAT_CODEC_KEYS.get(fmt) in self.raw else codec_key
            if fmt not in WRITABLE_FORMATS:
                raise UnsupportedFeature(f"table {self.table!r}: {fmt_key}={self.raw.get(fmt_key)}: lakemerge "
                                         f"cannot write {fmt} data files (it writes {', '.join(WRITABLE_FORMATS)})")
            if codec not in CODECS[fmt]:
                raise InvalidOption(codec_key, self.raw.get(codec_key, codec), f"{codec} is not a {fmt} codec "
                                    f"(use one of {', '.join(CODECS[fmt])})", table=self.table)

    # Frequently used, typed.
    @property
    def bucket(self) -> int:
        """Option ``bucket``: a fixed bucket count (> 0), -1 (dynamic) or -2 (postpone)."""
        return self.get(BUCKET)

    @property
    def deletion_vectors(self) -> bool:
        """Option ``deletion-vectors.enabled``: merge-on-write mode."""
        return self.get(DELETION_VECTORS_ENABLED)

    @property
    def lookup_compaction(self) -> bool:
        """True when compaction of level 0 looks keys up in the older levels (Paimon's LookupMergeTreeCompactRewriter):
        changelog-producer=lookup, deletion vectors or force-lookup. Such tables keep each key's full state in
        its newest record above level 0, so reads take only that record (Paimon's LookupMergeFunction)."""
        return (self.get(CHANGELOG_PRODUCER) == "lookup" or self.deletion_vectors or self.get(FORCE_LOOKUP))

    @property
    def merge_engine(self) -> str:
        """Option ``merge-engine``: deduplicate, partial-update, aggregation or first-row."""
        return self.get(MERGE_ENGINE)

    @property
    def sequence_fields(self) -> tuple[str, ...]:
        """Option ``sequence.field`` as column names (empty when not set)."""
        return self.get(SEQUENCE_FIELD)

    @property
    def sequence_descending(self) -> bool:
        """True when ``sequence.field.sort-order`` is descending (the smallest sequence value wins)."""
        return self.get(SEQUENCE_SORT_ORDER) == "descending"

    @property
    def rowkind_field(self) -> str | None:
        """Option ``rowkind.field``: the column holding each input row's kind, or None."""
        return self.get(ROWKIND_FIELD)

    @property
    def ignore_delete(self) -> bool:
        """True when deletes in the input are dropped: ``ignore-delete`` or its per-engine aliases (deduplicate.,
        partial-update., first-row.ignore-delete).
        """
        return bool(self.get(IGNORE_DELETE) or self.get(DEDUPLICATE_IGNORE_DELETE)
                    or self.get(PARTIAL_UPDATE_IGNORE_DELETE) or self.get(FIRST_ROW_IGNORE_DELETE))
