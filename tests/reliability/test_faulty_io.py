"""FaultyFileIO itself: faults fire on the n-th matching call, for the requested number of calls."""
from __future__ import annotations

import errno
import os

import pytest

from engine.errors import StorageError
from engine.io.faulty import Fault, FaultyFileIO


def test_nth_matching_call_and_times(tmp_path):
    io = FaultyFileIO(faults=[Fault("write_bytes", "*.bin", nth=2, kind="enospc", times=2)])
    io.write_bytes(str(tmp_path / "a.txt"), b"x")  # does not match
    io.write_bytes(str(tmp_path / "1.bin"), b"x")
    for name in ("2.bin", "3.bin"):
        with pytest.raises(StorageError) as err:
            io.write_bytes(str(tmp_path / name), b"x")
        assert err.value.errno == errno.ENOSPC and name in str(err.value)
        assert not os.path.exists(tmp_path / name)
    io.write_bytes(str(tmp_path / "4.bin"), b"x")
    assert [k for k, _, _ in io.fired] == ["enospc", "enospc"]
    assert len(io.calls) == 5


def test_torn_and_lost_ack(tmp_path):
    io = FaultyFileIO(faults=[Fault("write_bytes", kind="torn"), Fault("write_if_absent", kind="lost-ack")])
    with pytest.raises(StorageError, match="torn"):
        io.write_bytes(str(tmp_path / "t"), b"abcdef")
    assert (tmp_path / "t").read_bytes() == b"abc"
    with pytest.raises(StorageError, match="succeeded"):
        io.write_if_absent(str(tmp_path / "p"), b"data")
    assert (tmp_path / "p").read_bytes() == b"data"
    torn_read = FaultyFileIO(faults=[Fault("read_bytes", kind="torn")])
    assert torn_read.read_bytes(str(tmp_path / "p")) == b"da"


def test_torn_publish_never_publishes(tmp_path):
    io = FaultyFileIO(faults=[Fault("write_if_absent", kind="torn")])
    with pytest.raises(StorageError):
        io.write_if_absent(str(tmp_path / "snap"), b"abcdef")
    assert not (tmp_path / "snap").exists()
    assert [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]  # the half temp file, never linked


def test_unknown_kind_or_op():
    with pytest.raises(ValueError):
        Fault("write_bytes", kind="melt")
    with pytest.raises(ValueError):
        Fault("format_disk")
