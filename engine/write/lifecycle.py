"""The life cycle every table writer shares: open -> (write ...) -> prepare_commit once -> closed.

Used as a context manager, a writer that leaves its block by an exception, or without having prepared its commit,
aborts (deletes the files it wrote); nothing it wrote becomes visible unless its messages are committed.
"""
from __future__ import annotations

from engine.errors import InvalidInput


class WriterLifecycle:
    """Base of TableWrite and AppendWrite. Subclasses set ``self.table``, call ``_start_lifecycle()`` in their
    constructor, mark ``self._prepared = True`` in ``prepare_commit`` and implement ``abort()``."""

    def _start_lifecycle(self) -> None:
        self._prepared = False
        self._closed = False

    def abort(self) -> None:  # pragma: no cover - every writer overrides it
        """Delete every file this writer created (only safe before its messages were committed)."""
        raise NotImplementedError

    def close(self) -> None:
        """Mark the writer closed; does not flush, commit or delete files."""
        self._closed = True

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None or not self._prepared:
            self.abort()
        self.close()
        return False

    def _check_open(self) -> None:
        """Raises InvalidInput if the writer is closed or has already prepared its commit."""
        if self._closed:
            raise InvalidInput("this writer is closed", table=self.table.name)
        if self._prepared:
            raise InvalidInput("prepare_commit() was already called on this writer; start a new_write()",
                               table=self.table.name)
