"""The LSM tree of one bucket (paimon-semantics §4): level 0 holds one sorted run per file, each level >= 1 one
sorted run whose files have disjoint key ranges.

Guarantees: ``Levels.runs()`` lists sorted runs in Paimon's pick order (level-0 files newest first, then levels 1..max);
``Levels`` refuses (CorruptFile) a level >= 1 whose files overlap in key range.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from engine.errors import CorruptFile
from engine.meta import binary_row
from engine.meta.data_file import DataFileMeta


def key_decoder(key_types, *, upper: bool = False):
    """A function turning a serialized key BinaryRow into a Python tuple ordered like Paimon's key comparator.
    ``upper``: for a _MAX_KEY where a bound that is too low would lose rows (which files to merge or search),
    with binary_row.upper_bound_of_floored applied (pypaimon's floored nanosecond keys); never for checking that
    a level's files are disjoint."""
    types = list(key_types)

    def decode(row: bytes) -> tuple:
        values = binary_row.deserialize_row(row, types)
        if upper:
            values = binary_row.upper_bound_of_floored(values, types)
        return binary_row.order_key(values, types)
    return decode


def level0_order(f: DataFileMeta):
    """Paimon's level-0 order, newest first: max sequence desc, then min sequence, creation time, file name."""
    return (-f.max_sequence_number, f.min_sequence_number, f.creation_time_millis or 0, f.file_name)


@dataclass(frozen=True)
class SortedRun:
    """Files of one sorted run (disjoint key ranges, in key order) at ``level``."""
    level: int
    files: tuple[DataFileMeta, ...]

    @property
    def total_size(self) -> int:
        """Bytes of the run's files (their recorded file sizes)."""
        return sum(f.file_size for f in self.files)


def find_overlap(files: Sequence[DataFileMeta], decode) -> tuple[DataFileMeta, DataFileMeta] | None:
    """Two files of ``files`` whose [min_key, max_key] ranges intersect, or None. Ranges must be strictly
    ordered: ``max_key_i < min_key_(i+1)`` after sorting by min key."""
    ordered = sorted(files, key=lambda f: (decode(f.min_key), decode(f.max_key)))
    for a, b in zip(ordered, ordered[1:]):
        if not decode(a.max_key) < decode(b.min_key):
            return a, b
    return None


class Levels:
    """Files of one bucket arranged by level. ``num_levels`` grows to cover any file found at a higher level."""

    def __init__(self, files: Iterable[DataFileMeta], num_levels: int, key_types, where: str = ""):
        files = list(files)
        self.key_types = list(key_types)
        self.decode = key_decoder(self.key_types)
        self.decode_max = key_decoder(self.key_types, upper=True)
        self.num_levels = max([num_levels] + [f.level + 1 for f in files])
        self.where = where
        self.level0: list[DataFileMeta] = sorted((f for f in files if f.level == 0), key=level0_order)
        self.levels: dict[int, list[DataFileMeta]] = {}
        for f in files:
            if f.level > 0:
                self.levels.setdefault(f.level, []).append(f)
        for level, level_files in self.levels.items():
            level_files.sort(key=lambda f: self.decode(f.min_key))
            clash = find_overlap(level_files, self.decode)
            if clash is not None:
                raise CorruptFile(where, f"level {level} holds overlapping files {clash[0].file_name} and "
                                  f"{clash[1].file_name}")

    @property
    def max_level(self) -> int:
        """The highest level of the tree (``num_levels - 1``), where full compaction writes."""
        return self.num_levels - 1

    def all_files(self) -> list[DataFileMeta]:
        """Every file of the bucket: level 0 newest first, then levels 1.. in key order."""
        return self.level0 + [f for level in sorted(self.levels) for f in self.levels[level]]

    def non_empty_highest_level(self) -> int:
        """The highest level holding a file; -1 for an empty tree."""
        if self.levels:
            return max(self.levels)
        return 0 if self.level0 else -1

    def runs(self) -> list[SortedRun]:
        """The sorted runs in Paimon's pick order: one per level-0 file (newest first), then one per non-empty level
        >= 1, lowest level first.
        """
        out = [SortedRun(0, (f,)) for f in self.level0]
        out += [SortedRun(level, tuple(self.levels[level])) for level in sorted(self.levels)]
        return out

    def number_of_sorted_runs(self) -> int:
        """Sorted runs of the bucket: the level-0 files plus the non-empty levels >= 1."""
        return len(self.level0) + len(self.levels)

    def update(self, before: Iterable[DataFileMeta], after: Iterable[DataFileMeta]) -> "Levels":
        """A new tree with ``before`` removed and ``after`` added (a compaction result)."""
        gone = {(f.file_name, f.level) for f in before}
        kept = [f for f in self.all_files() if (f.file_name, f.level) not in gone]
        return Levels(kept + list(after), self.num_levels, self.key_types, self.where)
