"""Consumer progress files ``consumer/consumer-<id>`` holding ``{"nextSnapshot": n}`` (Paimon's format).

lakemerge's streams add ``"lakemerge.previousSnapshotTime"``: the commit time of snapshot n - 1 when it was read,
by which a resumed stream recognises a rollback that re-used that id (engine.changelog.position). Paimon and
pypaimon ignore the extra field (Paimon's Consumer is ``@JsonIgnoreProperties(ignoreUnknown = true)``) and drop it
when they rewrite the file; a file without it is resumed without that check.

Contract: ``next_snapshot(id)`` is None for an unknown consumer; ``record(id, n)`` replaces the file atomically;
``min_next_snapshot()`` is the smallest ``nextSnapshot`` over every consumer (None without consumers) -- snapshot
expiration keeps every snapshot from there on; ``expire(t)`` removes consumers not updated since ``t``
(``consumer.expiration-time``). A damaged file raises CorruptFile naming it.
"""
from __future__ import annotations

import json
import os
import re

from engine.errors import CorruptFile, InvalidInput

CONSUMER_DIR = "consumer"
CONSUMER_PREFIX = "consumer-"
PREVIOUS_TIME = "lakemerge.previousSnapshotTime"
_VALID_ID = re.compile(r"^[A-Za-z0-9_.\-]+$")


class ConsumerManager:
    """Reads and writes the per-consumer progress files (next snapshot to read) under the table's consumer
    directory (of a branch table, its branch's: ``branch/branch-<name>/consumer``, as Paimon's ConsumerManager)."""
    def __init__(self, table):
        self.table = table
        self.directory = os.path.join(table.paths.meta_root, CONSUMER_DIR)

    def path(self, consumer_id: str) -> str:
        """Return the file path for ``consumer_id``; raises InvalidInput if the id is empty or not letters,
        digits, '_', '.' or '-'."""
        if not consumer_id or not _VALID_ID.match(consumer_id):
            raise InvalidInput(f"consumer id {consumer_id!r} must be letters, digits, '_', '.' or '-'",
                               table=self.table.name)
        return os.path.join(self.directory, CONSUMER_PREFIX + consumer_id)

    def next_snapshot(self, consumer_id: str) -> int | None:
        """Return the recorded next snapshot id for ``consumer_id``, or None if it has no record."""
        found = self.progress(consumer_id)
        return None if found is None else found[0]

    def progress(self, consumer_id: str) -> tuple[int, int | None] | None:
        """(next snapshot id, commit time of the snapshot before it as recorded -- None when not recorded) for
        ``consumer_id``, or None if it has no record."""
        path = self.path(consumer_id)
        try:
            raw = self.table.file_io.read_bytes(path)
        except FileNotFoundError:
            return None
        return _parse_progress(raw, path)

    def record(self, consumer_id: str, next_snapshot: int, previous_time: int | None = None) -> None:
        """Store ``next_snapshot`` as the consumer's next snapshot id (with ``previous_time``, the commit time of
        snapshot ``next_snapshot - 1`` as the consumer read it), replacing any previous record. Raises
        TableNotFound when the table's line has no schema directory any more (its branch was deleted or renamed,
        or the table dropped): recording would recreate a schema-less branch directory, which every cleanup of the
        table refuses (engine.branches.other_lines)."""
        from engine.errors import TableNotFound
        path = self.path(consumer_id)
        if not self.table.file_io.exists(self.table.paths.schema_dir):
            raise TableNotFound(self.table.name, f"{self.table.paths.meta_root} no longer holds its schema (was the "
                                "branch deleted or renamed, or the table dropped?); consumer progress not recorded")
        self.table.file_io.mkdirs(self.directory)
        content = {"nextSnapshot": int(next_snapshot)}
        if previous_time is not None:
            content[PREVIOUS_TIME] = int(previous_time)
        self.table.file_io.overwrite(path, json.dumps(content).encode())

    def delete(self, consumer_id: str) -> None:
        """Remove the consumer's record."""
        self.table.file_io.delete(self.path(consumer_id))

    def expire(self, older_than_millis: int) -> list[str]:
        """Delete the progress files last written before ``older_than_millis`` (epoch ms; Paimon's
        ConsumerManager.expire, run by commits with ``consumer.expiration-time``); returns the removed ids."""
        io = self.table.file_io
        if not io.exists(self.directory):
            return []
        removed = []
        for name in io.list_names(self.directory):
            if not name.startswith(CONSUMER_PREFIX) or name.startswith("."):
                continue
            path = os.path.join(self.directory, name)
            try:
                written = io.modified_millis(path)
            except FileNotFoundError:
                continue
            if written < older_than_millis:
                io.delete(path)
                removed.append(name[len(CONSUMER_PREFIX):])
        return removed

    def all(self) -> dict[str, int]:
        """Return {consumer id: next snapshot id} for every recorded consumer; {} if there are none."""
        io = self.table.file_io
        if not io.exists(self.directory):
            return {}
        out = {}
        for name in io.list_names(self.directory):
            if name.startswith(CONSUMER_PREFIX) and not name.startswith("."):
                path = os.path.join(self.directory, name)
                try:
                    out[name[len(CONSUMER_PREFIX):]] = _parse(io.read_bytes(path), path)
                except FileNotFoundError:
                    continue
        return out

    def min_next_snapshot(self) -> int | None:
        """Return the smallest next snapshot id over all consumers, or None if there are none."""
        values = self.all().values()
        return min(values) if values else None


def _parse(raw: bytes, path: str) -> int:
    return _parse_progress(raw, path)[0]


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _parse_progress(raw: bytes, path: str) -> tuple[int, int | None]:
    try:
        content = json.loads(raw)
        nxt = content.get("nextSnapshot")
    except (ValueError, AttributeError):
        raise CorruptFile(path, "consumer file is not a JSON object") from None
    if not _is_int(nxt):
        raise CorruptFile(path, f"consumer has no integer nextSnapshot (got {nxt!r})")
    previous = content.get(PREVIOUS_TIME)
    if previous is not None and not _is_int(previous):
        raise CorruptFile(path, f"consumer's {PREVIOUS_TIME} is not an integer (got {previous!r})")
    return nxt, previous
