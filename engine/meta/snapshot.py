"""The snapshot file ``snapshot/snapshot-<id>`` (format spec §5): a frozen dataclass and its JSON codec."""
from __future__ import annotations

import json
from dataclasses import dataclass, fields

from engine.errors import CorruptFile

COMMIT_KIND_APPEND = "APPEND"
COMMIT_KIND_COMPACT = "COMPACT"
COMMIT_KIND_OVERWRITE = "OVERWRITE"
COMMIT_KIND_ANALYZE = "ANALYZE"
COMMIT_KINDS = frozenset({COMMIT_KIND_APPEND, COMMIT_KIND_COMPACT, COMMIT_KIND_OVERWRITE, COMMIT_KIND_ANALYZE})

BATCH_COMMIT_IDENTIFIER = 2**63 - 1
"""``commitIdentifier`` of batch commits (Java ``Long.MAX_VALUE``)."""

CURRENT_VERSION = 3

# (attribute, JSON key, required, JSON type) in the order Java writes the keys.
_KEYS: tuple[tuple[str, str, bool, type], ...] = (
    ("version", "version", True, int),
    ("uuid", "uuid", False, str),
    ("id", "id", True, int),
    ("schema_id", "schemaId", True, int),
    ("base_manifest_list", "baseManifestList", True, str),
    ("base_manifest_list_size", "baseManifestListSize", False, int),
    ("delta_manifest_list", "deltaManifestList", True, str),
    ("delta_manifest_list_size", "deltaManifestListSize", False, int),
    ("changelog_manifest_list", "changelogManifestList", False, str),
    ("changelog_manifest_list_size", "changelogManifestListSize", False, int),
    ("index_manifest", "indexManifest", False, str),
    ("commit_user", "commitUser", True, str),
    ("writer_version", "writerVersion", False, str),
    ("commit_identifier", "commitIdentifier", True, int),
    ("commit_kind", "commitKind", True, str),
    ("time_millis", "timeMillis", True, int),
    ("total_record_count", "totalRecordCount", True, int),
    ("delta_record_count", "deltaRecordCount", True, int),
    ("changelog_record_count", "changelogRecordCount", False, int),
    ("watermark", "watermark", False, int),
    ("statistics", "statistics", False, str),
    ("properties", "properties", False, dict),
    ("next_row_id", "nextRowId", False, int),
    ("operation", "operation", False, str),
)


@dataclass(frozen=True, kw_only=True)
class Snapshot:
    """One snapshot (spec §5). Construct with keyword arguments.

    ``properties`` is a str→str map; an empty map is normalized to None (Java writes null for empty
    properties); because it is a dict, a snapshot with properties is not hashable. Manifest list fields hold
    file names, not paths. ``version`` is kept as read; callers decide whether to accept versions other
    than 3.
    """

    version: int = CURRENT_VERSION
    id: int
    schema_id: int
    base_manifest_list: str
    delta_manifest_list: str
    changelog_manifest_list: str | None = None
    commit_user: str
    commit_identifier: int
    commit_kind: str
    time_millis: int
    total_record_count: int
    delta_record_count: int
    changelog_record_count: int | None = None
    watermark: int | None = None
    index_manifest: str | None = None
    statistics: str | None = None
    properties: dict[str, str] | None = None
    base_manifest_list_size: int | None = None
    delta_manifest_list_size: int | None = None
    changelog_manifest_list_size: int | None = None
    next_row_id: int | None = None
    operation: str | None = None
    uuid: str | None = None
    writer_version: str | None = None

    def __post_init__(self) -> None:
        if self.commit_kind not in COMMIT_KINDS:
            raise ValueError(f"unknown commit kind {self.commit_kind!r}")
        if self.properties is not None and not self.properties:
            object.__setattr__(self, "properties", None)

    def to_json(self) -> str:
        """Serialize like Java's Jackson: camelCase keys in Java's order, None-valued optional keys omitted,
        pretty-printed. The caller encodes the text as UTF-8. ``logOffsets`` is never written."""
        out = {}
        for attr, key, required, _ in _KEYS:
            value = getattr(self, attr)
            if value is not None or required:
                out[key] = value
        return json.dumps(out, indent=2, separators=(",", " : "), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str | bytes, path: str = "") -> Snapshot:
        """Parse snapshot JSON. Unknown keys are ignored and missing optional keys read as None.

        Raises CorruptFile(path, ...) if the text is not a JSON object, a required key is missing or null,
        a value has the wrong JSON type, or the commit kind is unknown.
        """
        try:
            data = json.loads(text)
        except (ValueError, UnicodeDecodeError) as exc:
            raise CorruptFile(path, f"snapshot is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise CorruptFile(path, "snapshot JSON is not an object")
        kwargs = {}
        for attr, key, required, typ in _KEYS:
            value = data.get(key)
            if value is None:
                if required:
                    raise CorruptFile(path, f"snapshot has no {key!r}")
                continue
            if not isinstance(value, typ) or isinstance(value, bool):
                raise CorruptFile(path, f"snapshot key {key!r} has invalid value {value!r}")
            if typ is dict and not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
                raise CorruptFile(path, f"snapshot key {key!r} is not a string map")
            kwargs[attr] = value
        if kwargs["commit_kind"] not in COMMIT_KINDS:
            raise CorruptFile(path, f"snapshot has unknown commitKind {kwargs['commit_kind']!r}")
        return cls(**kwargs)


assert {f.name for f in fields(Snapshot)} == {k[0] for k in _KEYS}
