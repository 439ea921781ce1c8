"""The file-IO layer every engine read and write goes through.

``LocalFileIO`` guarantees:
- ``write_if_absent`` is an atomic put-if-absent: the content is written to a temporary file in the same directory,
  fsynced, then hard-linked to the final name with ``os.link`` (which fails if the name exists, across processes),
  so a reader sees either no file or the complete file, and two writers can never both win a name.
- ``overwrite`` replaces a file atomically (temp file + ``os.replace``); used only for hints.
- OS errors surface as ``StorageError`` naming the path; a missing file read raises ``FileNotFoundError``.
"""
from __future__ import annotations

import errno as errno_mod
import os
import shutil
import uuid
from typing import Protocol

from engine.errors import StorageError


def local_path(uri: str) -> str:
    """Accept a local path or a file:// URI and return an absolute local path."""
    if uri.startswith("file://"):
        uri = uri[len("file://"):]
    elif uri.startswith("file:"):
        uri = uri[len("file:"):]
    if "://" in uri:
        raise StorageError(uri, "only local paths and file:// URIs are supported")
    return os.path.abspath(uri)


class FileIO(Protocol):
    """What the engine needs from storage. Implementations keep these contracts (LocalFileIO: see the module
    docstring; engine.io.faulty injects failures): a missing file raises FileNotFoundError on read and size; any
    other failure raises StorageError naming the path.
    """

    def read_bytes(self, path: str) -> bytes:
        """The whole content of ``path``. Raises FileNotFoundError, StorageError."""

    def write_bytes(self, path: str, data: bytes) -> None:
        """Create the new immutable file ``path`` with ``data``; fails (StorageError) if it exists and leaves no
        partial file behind on failure.
        """

    def write_if_absent(self, path: str, data: bytes) -> bool:
        """Atomically publish ``data`` as ``path`` unless a file has that name: True if this call created it, False if
        one existed (readers never see a partial file). Raises StorageError.
        """

    def overwrite(self, path: str, data: bytes) -> None:
        """Atomically replace (or create) ``path`` with ``data``; only for hints and progress files. Raises
        StorageError.
        """

    def exists(self, path: str) -> bool:
        """True if a file or directory ``path`` exists."""

    def is_dir(self, path: str) -> bool:
        """True if ``path`` is an existing directory."""

    def size(self, path: str) -> int:
        """Size of file ``path`` in bytes. Raises FileNotFoundError, StorageError."""

    def modified_millis(self, path: str) -> int:
        """When file ``path`` was last written (epoch milliseconds). Raises FileNotFoundError, StorageError."""

    def list_names(self, directory: str) -> list[str]:
        """Names (not paths) of the entries of ``directory``, in no particular order; empty for a missing directory.
        Raises StorageError.
        """

    def mkdirs(self, directory: str) -> None:
        """Create ``directory`` and its parents; no error if it exists. Raises StorageError."""

    def delete(self, path: str) -> None:
        """Delete file ``path``; a missing file is not an error. Raises StorageError."""

    def delete_tree(self, directory: str) -> None:
        """Delete ``directory`` and everything under it; a missing directory is not an error. Raises StorageError."""

    def delete_empty_dir(self, directory: str) -> bool:
        """Delete ``directory`` only if it is empty, in one step (a file created meanwhile keeps it); True if it was
        deleted, False if it holds something or is missing."""

    def rename_dir(self, source: str, target: str) -> None:
        """Rename directory ``source`` to ``target`` in one step (readers see the old name or the new one, never
        both or neither). Raises FileNotFoundError if ``source`` is missing, StorageError if ``target`` exists."""


class LocalFileIO:
    """FileIO on the local filesystem (see the module docstring for guarantees)."""

    def read_bytes(self, path: str) -> bytes:
        """The whole content of ``path``. Raises FileNotFoundError, or StorageError for another OS error."""
        try:
            with open(path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            raise
        except OSError as e:
            raise StorageError(path, f"read failed: {e.strerror}", e.errno) from e

    def write_bytes(self, path: str, data: bytes) -> None:
        """Create a new immutable file (data, manifest). Fails if it exists; a failed write removes its partial file."""
        def run():
            try:
                self._write_new(path, data)
            except FileExistsError:
                raise
            except OSError:
                try:
                    os.unlink(path)
                except OSError:
                    pass
                raise
        self._guard(path, run)

    def write_if_absent(self, path: str, data: bytes) -> bool:
        """Publish ``data`` under ``path`` only if no file has that name. Returns False if one existed."""
        directory = os.path.dirname(path)
        tmp = os.path.join(directory, f".{os.path.basename(path)}.{uuid.uuid4()}.tmp")
        try:
            self._write_new(tmp, data, fsync=True)
            try:
                os.link(tmp, path)
            except FileExistsError:
                return False
            self._fsync_dir(directory)
            return True
        except OSError as e:
            raise StorageError(path, f"publish failed: {e.strerror}", e.errno) from e
        finally:
            try:
                os.unlink(tmp)
            except OSError:
                pass

    def overwrite(self, path: str, data: bytes) -> None:
        """Replace (or create) ``path`` atomically: written to a temporary file beside it, then ``os.replace``d.
        Readers see the old or the new content. Raises StorageError; the temporary file is removed.
        """
        tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.{uuid.uuid4()}.tmp")
        def run():
            self._write_new(tmp, data)
            os.replace(tmp, path)
        try:
            self._guard(path, run)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def open_new(self, path: str):
        """Open a new file for streamed binary writing (fails if it exists); the caller closes it. Optional
        capability: writers fall back to ``write_bytes`` on FileIOs without it."""
        return self._guard(path, lambda: open(path, "xb"))

    def exists(self, path: str) -> bool:
        """True if a file or directory ``path`` exists."""
        return os.path.exists(path)

    def is_dir(self, path: str) -> bool:
        """True if ``path`` is an existing directory."""
        return os.path.isdir(path)

    def size(self, path: str) -> int:
        """Size of file ``path`` in bytes. Raises FileNotFoundError, StorageError."""
        return self._guard(path, lambda: os.stat(path).st_size)

    def modified_millis(self, path: str) -> int:
        """When file ``path`` was last written (epoch milliseconds). Raises FileNotFoundError, StorageError."""
        return self._guard(path, lambda: int(os.stat(path).st_mtime * 1000))

    def list_names(self, directory: str) -> list[str]:
        """Names of the entries of ``directory`` (empty if it does not exist). Raises StorageError."""
        try:
            return os.listdir(directory)
        except FileNotFoundError:
            return []
        except OSError as e:
            raise StorageError(directory, f"list failed: {e.strerror}", e.errno) from e

    def mkdirs(self, directory: str) -> None:
        """Create ``directory`` and its parents; no error if it exists. Raises StorageError."""
        self._guard(directory, lambda: os.makedirs(directory, exist_ok=True))

    def delete(self, path: str) -> None:
        """Delete file ``path``; a missing file is not an error. Raises StorageError."""
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise StorageError(path, f"delete failed: {e.strerror}", e.errno) from e

    def rename_dir(self, source: str, target: str) -> None:
        """Rename directory ``source`` to ``target`` with one ``os.rename`` (atomic on a POSIX file system). Raises
        FileNotFoundError if ``source`` is missing, StorageError if ``target`` exists (an existing empty directory
        included, which a bare ``os.rename`` would replace)."""
        if not os.path.isdir(source):
            raise FileNotFoundError(source)
        if os.path.lexists(target):
            raise StorageError(target, "file already exists", errno_mod.EEXIST)
        self._guard(target, lambda: os.rename(source, target))

    def delete_tree(self, directory: str) -> None:
        """Delete ``directory`` recursively; a missing directory is not an error. Raises StorageError."""
        self._guard(directory, lambda: shutil.rmtree(directory, ignore_errors=False)
                    if os.path.exists(directory) else None)

    def delete_empty_dir(self, directory: str) -> bool:
        """``os.rmdir``: deletes ``directory`` only when empty; False when it is not empty, missing or not a
        directory."""
        try:
            os.rmdir(directory)
            return True
        except OSError:
            return False

    # ---------------------------------------------------------------------------------------------------
    @staticmethod
    def _write_new(path: str, data: bytes, fsync: bool = False) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)

    @staticmethod
    def _fsync_dir(directory: str) -> None:
        try:
            fd = os.open(directory, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)

    @staticmethod
    def _guard(path: str, fn):
        try:
            return fn()
        except FileNotFoundError:
            raise
        except FileExistsError as e:
            raise StorageError(path, "file already exists", errno_mod.EEXIST) from e
        except OSError as e:
            raise StorageError(path, e.strerror or str(e), e.errno) from e
