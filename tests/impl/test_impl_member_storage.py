"""Member storage recovery: a crash between two writes of the Ready contract.

A local snapshot is written as a file, then recorded in the WAL. A crash between the two
leaves a snapshot file the WAL does not know; recovery must pass over it (the WAL and
the older snapshot still hold everything) instead of refusing to start. The file is
written in a worker thread, from a copy of what the backend has committed, and what
needs the backend's file itself waits for that worker.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from etcdspec.impl import snapfile
from etcdspec.impl.backend import BackendCopy, BackendError
from etcdspec.impl.member_storage import MemberBackend, MemberStorage
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
    recorded = Snapshot(SnapshotMeta(index=3, term=1, voters=(MEMBER,)), blob)
    snapfile.save(storage.snap_dir, recorded)
    storage.record_snapshot(recorded)
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
    recorded = Snapshot(SnapshotMeta(index=4, term=1, voters=(MEMBER,)), storage.snapshot_blob())
    snapfile.save(storage.snap_dir, recorded)
    storage.record_snapshot(recorded)
    storage.close()

    reopened = MemberStorage(tmp_path, MEMBER)
    recovered = reopened.open(quota_bytes=2**30)
    try:
        assert recovered.snapshot_index == 4
        assert recovered.persisted.entries == ()
    finally:
        reopened.close()


def test_a_snapshot_is_taken_in_a_worker_from_what_the_backend_committed(tmp_path: Path) -> None:
    storage = MemberStorage(tmp_path, MEMBER)
    storage.open(quota_bytes=2**30)
    _write_log(storage, 6)
    entries = tuple(Entry(term=1, index=i) for i in range(1, 7))
    storage.apply(entries[:4])
    storage.backend.flush()  # committed through 4
    storage.apply(entries[4:])  # held by group commit: not in the file yet
    assert storage.backend.consistent_index() == 6
    snapshot = storage.start_snapshot((MEMBER,)).result(timeout=60)
    assert snapshot.meta == SnapshotMeta(index=4, term=1, voters=(MEMBER,))
    # Its file is written, but a start ignores it until the WAL records it.
    assert [p.name for p in storage.snap_dir.glob("*.snap")] == [snapfile.file_name(snapshot.meta)]
    storage.record_snapshot(snapshot)
    storage.close()

    reopened = MemberStorage(tmp_path, MEMBER)
    recovered = reopened.open(quota_bytes=2**30)
    try:
        assert recovered.snapshot_index == 4
        assert [e.index for e in recovered.persisted.entries] == [5, 6]
        assert recovered.applied == 6  # close committed what group commit held
    finally:
        reopened.close()


def test_closing_the_backend_waits_for_a_copy_under_way(tmp_path: Path) -> None:
    backend = MemberBackend(tmp_path / "db")
    release = threading.Event()
    order: list[str] = []

    def then(copy: BackendCopy) -> int:
        release.wait(timeout=60)
        order.append("copied")
        return copy.index

    future = backend.copy_in_worker(then)
    with pytest.raises(BackendError, match="already under way"):
        backend.copy_in_worker(then)
    threading.Timer(0.05, release.set).start()
    backend.close()
    order.append("closed")
    assert order == ["copied", "closed"]
    assert future.result(timeout=0) == 0


def test_a_failure_in_the_worker_reaches_the_future(tmp_path: Path) -> None:
    backend = MemberBackend(tmp_path / "db")

    def then(copy: BackendCopy) -> None:
        raise OSError(f"no space left for {len(copy.data)} bytes")

    try:
        with pytest.raises(OSError, match="no space left"):
            backend.copy_in_worker(then).result(timeout=60)
        assert backend.copy_in_worker(lambda copy: copy.term).result(timeout=60) == 0
    finally:
        backend.close()
