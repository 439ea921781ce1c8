"""A FileIO that injects storage faults, for tests and for users who want to see how a job behaves on bad storage.

``FaultyFileIO(inner, [Fault(...), ...])`` forwards every call to ``inner`` (default ``LocalFileIO``) and counts the
calls that match each ``Fault`` (operation name and an ``fnmatch`` pattern on the path). When a fault's ``nth``
matching call arrives it fires, for ``times`` consecutive matching calls (0 = every call from then on):

- ``eio`` / ``enospc``: the call raises ``StorageError`` with that errno; nothing happens on storage.
- ``torn``: a write leaves the first half of its bytes behind and raises EIO. ``write_bytes`` and ``overwrite``
  leave the half file under the target name (``overwrite`` thus models a non-atomic store); ``write_if_absent``
  leaves it under a temporary name and never publishes (its publish is atomic). A torn ``read_bytes`` returns
  the first half of the file without an error.
- ``lost-ack``: the call is performed, then raises EIO ("succeeded but reported failure").
- ``delay``: sleeps ``delay`` seconds, then performs the call.
- ``crash``: for writes, leaves the first half of the bytes under the target name and ends the process with
  ``os._exit(CRASH_EXIT_CODE)``; for other calls ends the process before performing it.

Every call is logged in ``calls`` as ``(op, path)``; fired faults in ``fired`` as ``(kind, op, path)``.
Thread-safe (writers flush buckets on threads).
"""
from __future__ import annotations

import errno
import fnmatch
import os
import threading
import time
import uuid
from dataclasses import dataclass

from engine.errors import StorageError
from engine.io.file_io import FileIO, LocalFileIO

KINDS = ("eio", "enospc", "torn", "lost-ack", "delay", "crash")
OPS = ("read_bytes", "write_bytes", "write_if_absent", "overwrite", "exists", "is_dir", "size", "list_names",
       "mkdirs", "delete", "delete_tree", "delete_empty_dir", "rename_dir")
WRITE_OPS = ("write_bytes", "write_if_absent", "overwrite")
CRASH_EXIT_CODE = 86


@dataclass
class Fault:
    """Fire ``kind`` on the ``nth`` call of ``op`` (or ``"*"``) whose path matches the glob ``path``."""
    op: str
    path: str = "*"
    nth: int = 1
    kind: str = "eio"
    times: int = 1
    delay: float = 0.0
    seen: int = 0
    fired: int = 0

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; expected one of {KINDS}")
        if self.op != "*" and self.op not in OPS:
            raise ValueError(f"unknown FileIO operation {self.op!r}; expected one of {OPS} or '*'")
        if self.nth < 1:
            raise ValueError("nth counts from 1")

    def matches(self, op: str, path: str) -> bool:
        """True if this fault applies to ``op`` (or is '*') and ``path`` matches its glob."""
        return (self.op == "*" or self.op == op) and fnmatch.fnmatch(path, self.path)

    def step(self) -> bool:
        """Count one matching call; True if the fault fires on it."""
        self.seen += 1
        if self.seen < self.nth:
            return False
        if self.times and self.fired >= self.times:
            return False
        self.fired += 1
        return True


class FaultyFileIO:
    """A FileIO wrapper for tests that records every call and injects the configured faults (errors, delays, torn
    writes,
    crashes) into matching operations; otherwise it delegates to ``inner``."""
    def __init__(self, inner: FileIO | None = None, faults: list[Fault] | tuple = ()):
        self.inner = inner or LocalFileIO()
        self.faults = list(faults)
        self.calls: list[tuple[str, str]] = []
        self.fired: list[tuple[str, str, str]] = []
        self._lock = threading.Lock()

    def add(self, fault: Fault) -> Fault:
        """Add ``fault`` and return it."""
        with self._lock:
            self.faults.append(fault)
        return fault

    def clear(self) -> None:
        """Remove all faults; later calls pass straight through."""
        with self._lock:
            self.faults.clear()

    # --- dispatch -----------------------------------------------------------------------------------
    def _fault(self, op: str, path: str) -> Fault | None:
        with self._lock:
            self.calls.append((op, path))
            hit = None
            for f in self.faults:
                if f.matches(op, path) and f.step() and hit is None:
                    hit = f
            if hit is not None:
                self.fired.append((hit.kind, op, path))
            return hit

    def _call(self, op: str, path: str, data: bytes | None = None):
        fault = self._fault(op, path)
        run = getattr(self.inner, op)
        args = (path,) if data is None else (path, data)
        if fault is None:
            return run(*args)
        kind = fault.kind
        if kind in ("eio", "enospc"):
            code = errno.EIO if kind == "eio" else errno.ENOSPC
            raise StorageError(path, f"injected {os.strerror(code)}", code)
        if kind == "delay":
            time.sleep(fault.delay)
            return run(*args)
        if kind == "lost-ack":
            run(*args)
            raise StorageError(path, "injected: operation succeeded but reported an I/O error", errno.EIO)
        if kind == "torn":
            if op == "read_bytes":
                full = run(path)
                return full[: len(full) // 2]
            if op in WRITE_OPS:
                self._leave_half(op, path, data)
            raise StorageError(path, "injected torn write", errno.EIO)
        if kind == "crash":
            if op in WRITE_OPS:
                self._leave_half(op, path, data)
            os._exit(CRASH_EXIT_CODE)
        raise AssertionError(kind)

    def _leave_half(self, op: str, path: str, data: bytes) -> None:
        half = data[: len(data) // 2]
        if op == "write_if_absent":
            path = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.{uuid.uuid4()}.tmp")
        elif op == "overwrite":
            self.inner.delete(path)
        self.inner.write_bytes(path, half)

    # --- FileIO -------------------------------------------------------------------------------------
    def read_bytes(self, path: str) -> bytes:
        """Delegate read_bytes, unless a matching fault fires."""
        return self._call("read_bytes", path)

    def write_bytes(self, path: str, data: bytes) -> None:
        """Delegate write_bytes, unless a matching fault fires."""
        return self._call("write_bytes", path, data)

    def write_if_absent(self, path: str, data: bytes) -> bool:
        """Delegate write_if_absent, unless a matching fault fires."""
        return self._call("write_if_absent", path, data)

    def overwrite(self, path: str, data: bytes) -> None:
        """Delegate overwrite, unless a matching fault fires."""
        return self._call("overwrite", path, data)

    def exists(self, path: str) -> bool:
        """Delegate exists, unless a matching fault fires."""
        return self._call("exists", path)

    def is_dir(self, path: str) -> bool:
        """Delegate is_dir, unless a matching fault fires."""
        return self._call("is_dir", path)

    def size(self, path: str) -> int:
        """Delegate size, unless a matching fault fires."""
        return self._call("size", path)

    def modified_millis(self, path: str) -> int:
        """Delegate modified_millis, unless a matching fault fires."""
        return self._call("modified_millis", path)

    def list_names(self, directory: str) -> list[str]:
        """Delegate list_names, unless a matching fault fires."""
        return self._call("list_names", directory)

    def mkdirs(self, directory: str) -> None:
        """Delegate mkdirs, unless a matching fault fires."""
        return self._call("mkdirs", directory)

    def delete(self, path: str) -> None:
        """Delegate delete, unless a matching fault fires."""
        return self._call("delete", path)

    def rename_dir(self, source: str, target: str) -> None:
        """Delegate rename_dir, unless a matching fault (matched on ``source``) fires."""
        return self._call("rename_dir", source, target)

    def delete_tree(self, directory: str) -> None:
        """Delegate delete_tree, unless a matching fault fires."""
        return self._call("delete_tree", directory)

    def delete_empty_dir(self, directory: str) -> bool:
        """Delegate delete_empty_dir, unless a matching fault fires."""
        return self._call("delete_empty_dir", directory)
