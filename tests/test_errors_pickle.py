"""Engine errors cross process boundaries intact (multiprocessing pools, Spark tasks): an error whose constructor
takes other arguments than its message once failed to unpickle and killed multiprocessing.Pool's result thread,
which hung the caller instead of raising."""
from __future__ import annotations

import multiprocessing as mp
import pickle

import pytest

from engine import errors as E

SAMPLES = [
    E.DatabaseNotFound("db"), E.TableNotFound("db.t", "no schema"), E.TableAlreadyExists("db.t"),
    E.SnapshotNotFound("db.t", 7), E.InvalidInput("bad", table="db.t", column="k"),
    E.NullPrimaryKey("null key", table="db.t", column="k"), E.InvalidOption("bucket", 0, "must be > 0", table="db.t"),
    E.CommitConflict("db.t", "files gone"), E.CommitRetriesExhausted("db.t", 10),
    E.CommitOutcomeUnknown("db.t", 3, OSError("io")), E.StorageError("/x/y", "disk full", 28),
    E.CorruptFile("/x/data.parquet", "bad checksum"), E.TagNotFound("db.t", "v1"),
]


@pytest.mark.parametrize("err", SAMPLES, ids=lambda e: type(e).__name__)
def test_errors_survive_pickling_with_type_message_and_fields(err):
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err) and str(back) == str(err)
    assert {k: repr(v) for k, v in vars(back).items()} == {k: repr(v) for k, v in vars(err).items()}


def _raise_not_found(table: str) -> None:
    raise E.SnapshotNotFound(table, 3)


def test_an_error_raised_in_a_pool_worker_reaches_the_parent():
    with mp.get_context("spawn").Pool(1) as pool:
        with pytest.raises(E.SnapshotNotFound, match="db.t"):
            pool.apply_async(_raise_not_found, ("db.t",)).get(timeout=120)
