"""One error hierarchy for everything lakemerge raises on purpose.

Every error names what it is about (table, file, column, option) in its message and keeps it as a field,
so callers can branch on the type and read the details without parsing text.

Outcome classes for commits follow pyiceberg's split: an error raised before publishing means the commit
did not land (staged files may be deleted, a retry is safe); ``CommitConflict`` means it cannot land as
planned; ``CommitOutcomeUnknown`` means the outcome must be checked before anything is deleted.
"""
from __future__ import annotations


class LakemergeError(Exception):
    """Base class of every error lakemerge raises deliberately.

    Picklable whatever its ``__init__`` takes: an error raised in a worker process (multiprocessing, Spark)
    arrives in the parent with its type, message and fields."""

    def __reduce__(self):
        # Exception's own __reduce__ would call ``cls(*self.args)``, but args holds the formatted message, not the
        # constructor's parameters: unpickling raised TypeError (and killed multiprocessing.Pool's result thread).
        return _restore_error, (type(self), self.args, self.__dict__)


def _restore_error(cls: type[LakemergeError], args: tuple, fields: dict) -> LakemergeError:
    """The error ``cls`` with ``args`` and ``fields``, built without calling its ``__init__``."""
    error = cls.__new__(cls, *args)
    error.__dict__.update(fields)
    return error


# --- catalog -------------------------------------------------------------------------------------------
class CatalogError(LakemergeError):
    """A catalog operation failed."""


class DatabaseNotFound(CatalogError):
    """The named database does not exist in the warehouse (``.database`` holds its name)."""

    def __init__(self, database: str):
        super().__init__(f"database {database!r} does not exist")
        self.database = database


class DatabaseAlreadyExists(CatalogError):
    """A database of that name exists already (``.database``); nothing was changed."""

    def __init__(self, database: str):
        super().__init__(f"database {database!r} already exists")
        self.database = database


class TableNotFound(CatalogError):
    """The named table does not exist, or has no schema file (``.table``)."""

    def __init__(self, table: str, detail: str = ""):
        super().__init__(f"table {table!r} does not exist" + (f": {detail}" if detail else ""))
        self.table = table


class TableAlreadyExists(CatalogError):
    """A table of that name exists already (``.table``); nothing was changed."""

    def __init__(self, table: str):
        super().__init__(f"table {table!r} already exists")
        self.table = table


class SnapshotNotFound(LakemergeError):
    """The table has no snapshot with that id: never committed or already expired (``.table``, ``.snapshot_id``)."""

    def __init__(self, table: str, snapshot_id: int, detail: str = ""):
        super().__init__(f"table {table!r} has no snapshot {snapshot_id}" + (f": {detail}" if detail else ""))
        self.table = table
        self.snapshot_id = snapshot_id


# --- input ---------------------------------------------------------------------------------------------
class InvalidInput(LakemergeError):
    """Data handed to a write, delete or lookup does not fit the table. Nothing was written."""

    def __init__(self, message: str, *, table: str | None = None, column: str | None = None):
        prefix = f"table {table!r}: " if table else ""
        super().__init__(prefix + message)
        self.table = table
        self.column = column


class SchemaMismatch(InvalidInput):
    """Columns or types of the input do not match the table schema."""


class NullPrimaryKey(InvalidInput):
    """A primary-key (or partition) column holds a null."""


class InvalidRowKind(InvalidInput):
    """A row kind is not one of +I, -U, +U, -D (or 0..3)."""


class MergeCardinalityViolation(InvalidInput):
    """Several source rows of a MERGE match one target row, which would be changed more than once (Spark's
    MERGE_CARDINALITY_VIOLATION). ``.key`` maps the target row's primary-key and ``on`` columns to its values."""

    def __init__(self, message: str, *, table: str, key: dict):
        super().__init__(message, table=table)
        self.key = key


class InvalidSchema(LakemergeError):
    """A table definition is not valid (e.g. a primary key column that does not exist)."""


class InvalidOption(LakemergeError):
    """A table option has a value that is not valid for it (``.key``, ``.value``, ``.table``); nothing was written."""

    def __init__(self, key: str, value: object, reason: str, *, table: str | None = None):
        where = f"table {table!r}: " if table else ""
        super().__init__(f"{where}invalid value {value!r} for option {key!r}: {reason}")
        self.key = key
        self.value = value
        self.table = table


class UnsupportedFeature(LakemergeError):
    """A valid Paimon feature that lakemerge does not implement (yet). Nothing was changed."""


# --- commit --------------------------------------------------------------------------------------------
class CommitError(LakemergeError):
    """A commit did not land. The table is unchanged."""


class CommitConflict(CommitError):
    """The commit conflicts with the table's current state (e.g. it deletes a file that is gone)."""

    def __init__(self, table: str, detail: str):
        super().__init__(f"commit to table {table!r} conflicts with the latest snapshot: {detail}")
        self.table = table
        self.detail = detail


class CommitRetriesExhausted(CommitError):
    """The commit lost the race for the next snapshot id ``.attempts`` times (commit.max-retries); nothing was
    committed (``Table.commit`` also deletes the commit's staged files), so retrying is safe.
    """

    def __init__(self, table: str, attempts: int):
        super().__init__(
            f"commit to table {table!r} lost the race for a snapshot id {attempts} times; "
            "nothing was committed, retry later"
        )
        self.table = table
        self.attempts = attempts


class CommitOutcomeUnknown(LakemergeError):
    """The publish step failed in a way that leaves its outcome unknown; staged files are kept."""

    def __init__(self, table: str, snapshot_id: int, cause: BaseException):
        super().__init__(
            f"commit to table {table!r}: publishing snapshot {snapshot_id} failed with {cause!r}; "
            "the snapshot may or may not exist, re-open the table and check before retrying"
        )
        self.table = table
        self.snapshot_id = snapshot_id


# --- storage -------------------------------------------------------------------------------------------
class StorageError(LakemergeError):
    """The storage layer failed on ``.path`` (``.errno`` when the OS reported one); the operation did not complete."""

    def __init__(self, path: str, message: str, errno: int | None = None):
        super().__init__(f"{path}: {message}")
        self.path = path
        self.errno = errno


class CorruptFile(StorageError):
    """A file referenced by table metadata is missing, truncated or unreadable."""

    def __init__(self, path: str, message: str):
        super().__init__(path, f"corrupt or unreadable: {message}")


# --- merge engines (issue 3) -----------------------------------------------------------------------------
class MergeFunctionError(LakemergeError):
    """Records of one key cannot be merged (e.g. integer overflow in ``sum``, a retraction a function cannot
    take found in files written by another tool). Names the table and field; nothing was changed."""


# --- issue 4 -------------------------------------------------------------------------------------------
class TagNotFound(LakemergeError):
    """The table has no tag of that name (``.table``, ``.tag``)."""

    def __init__(self, table: str, tag: str):
        super().__init__(f"table {table!r} has no tag {tag!r}")
        self.table = table
        self.tag = tag
