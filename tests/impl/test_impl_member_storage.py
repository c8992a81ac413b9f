"""Member storage recovery: a crash between two writes of the Ready contract.

A local snapshot is written as a file, then recorded in the WAL. A crash between the two
leaves a snapshot file the WAL does not know; recovery must pass over it (the WAL and
the older snapshot still hold everything) instead of refusing to start.
"""

from __future__ import annotations

from pathlib import Path

from etcdspec.impl import snapfile
from etcdspec.impl.member_storage import MemberStorage
from etcdspec.impl.raft_messages import Entry, HardState, Snapshot, SnapshotMeta

MEMBER = 0x1234


def _write_log(storage: MemberStorage, count: int) -> None:
    entries = tuple(Entry(term=1, index=i) for i in range(1, count + 1))
    storage.persist(HardState(term=1, vote=MEMBER, commit=count), entries, None)


def test_snapshot_file_without_its_wal_record_is_passed_over(tmp_path: Path) -> None:
    storage = MemberStorage(tmp_path, MEMBER)
    storage.open(quota_bytes=2**30)
    _write_log(storage, 5)
    blob = storage.snapshot_blob()
    storage.save_snapshot(Snapshot(SnapshotMeta(index=3, term=1, voters=(MEMBER,)), blob))
    # The crash: the next snapshot's file is written, its WAL record is not.
    snapfile.save(storage.snap_dir, Snapshot(SnapshotMeta(index=5, term=1, voters=(MEMBER,)), blob))
    storage.close()

    reopened = MemberStorage(tmp_path, MEMBER)
    recovered = reopened.open(quota_bytes=2**30)
    try:
        assert recovered.snapshot_index == 3
        assert recovered.persisted.snapshot is not None
        assert recovered.persisted.snapshot.meta.index == 3
        assert [e.index for e in recovered.persisted.entries] == [4, 5]
        assert recovered.persisted.hard_state.commit == 5
    finally:
        reopened.close()


def test_recorded_snapshot_is_used_on_restart(tmp_path: Path) -> None:
    storage = MemberStorage(tmp_path, MEMBER)
    storage.open(quota_bytes=2**30)
    _write_log(storage, 4)
    storage.save_snapshot(
        Snapshot(SnapshotMeta(index=4, term=1, voters=(MEMBER,)), storage.snapshot_blob())
    )
    storage.close()

    reopened = MemberStorage(tmp_path, MEMBER)
    recovered = reopened.open(quota_bytes=2**30)
    try:
        assert recovered.snapshot_index == 4
        assert recovered.persisted.entries == ()
    finally:
        reopened.close()
