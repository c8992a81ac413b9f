"""Member storage recovery: a crash between two writes of the Ready contract.

A local snapshot is written as a file, then recorded in the WAL. A crash between the two
leaves a snapshot file the WAL does not know; recovery must pass over it (the WAL and
the older snapshot still hold everything) instead of refusing to start. The file is
written in a worker thread once the backend is synced at its index, and holds no
database: a follower is sent a copy made then, and a start refuses a database behind
one. What needs the backend's file itself waits for that worker.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from etcdspec.impl.kv.backend import BackendError, check_snapshot
from etcdspec.impl.kv.member_backend import MemberBackend
from etcdspec.impl.raft.messages import ConfState, Entry, HardState, Snapshot, SnapshotMeta
from etcdspec.impl.server.recovery import MemberData, open_member_data
from etcdspec.impl.server.snapshots import database_for, start_snapshot
from etcdspec.impl.storage import snapfile

MEMBER = 0x1234


def _apply(storage: MemberData, first: int, last: int, commit: bool = True) -> None:
    """Apply leader no-ops first..last (they move the consistent index); commit them
    unless `commit` is False (group commit then holds them)."""
    storage.state.apply(tuple(Entry(term=1, index=i) for i in range(first, last + 1)))
    if commit:
        storage.state.backend.flush()


def _write_log(storage: MemberData, count: int) -> None:
    entries = tuple(Entry(term=1, index=i) for i in range(1, count + 1))
    storage.disk.persist(HardState(term=1, vote=MEMBER, commit=count), entries, None)


def test_snapshot_file_without_its_wal_record_is_passed_over(tmp_path: Path) -> None:
    storage, _ = open_member_data(tmp_path, MEMBER, quota_bytes=2**30)
    _write_log(storage, 5)
    blob = storage.state.backend.snapshot_bytes()
    recorded = Snapshot(SnapshotMeta(index=3, term=1, voters=(MEMBER,)), blob)
    snapfile.save(storage.disk.snap_dir, recorded)
    storage.disk.record_snapshot(recorded.meta)
    # The crash: the next snapshot's file is written, its WAL record is not.
    snapfile.save(
        storage.disk.snap_dir, Snapshot(SnapshotMeta(index=5, term=1, voters=(MEMBER,)), blob)
    )
    storage.close()

    reopened, recovered = open_member_data(tmp_path, MEMBER, quota_bytes=2**30)
    try:
        assert recovered.snapshot_index == 3
        assert recovered.persisted.snapshot is not None
        assert recovered.persisted.snapshot.meta.index == 3
        assert [e.index for e in recovered.persisted.entries] == [4, 5]
        assert recovered.persisted.hard_state.commit == 5
    finally:
        reopened.close()


def test_recorded_snapshot_is_used_on_restart(tmp_path: Path) -> None:
    storage, _ = open_member_data(tmp_path, MEMBER, quota_bytes=2**30)
    _write_log(storage, 4)
    recorded = Snapshot(
        SnapshotMeta(index=4, term=1, voters=(MEMBER,)), storage.state.backend.snapshot_bytes()
    )
    snapfile.save(storage.disk.snap_dir, recorded)
    storage.disk.record_snapshot(recorded.meta)
    storage.close()

    reopened, recovered = open_member_data(tmp_path, MEMBER, quota_bytes=2**30)
    try:
        assert recovered.snapshot_index == 4
        assert recovered.persisted.entries == ()
    finally:
        reopened.close()


def test_a_snapshot_is_taken_in_a_worker_at_what_the_backend_committed(tmp_path: Path) -> None:
    """The worker syncs the backend and writes a snapshot file for the position the file
    holds; the snapshot holds no database. Recorded, it is where the next start begins."""
    storage, _ = open_member_data(tmp_path, MEMBER, quota_bytes=2**30)
    _write_log(storage, 6)
    _apply(storage, 1, 4)
    _apply(storage, 5, 6, commit=False)  # held by group commit: not in the file yet
    assert storage.state.backend.consistent_index() == 6
    snapshot = start_snapshot(storage, ((0, ConfState((MEMBER,))),)).result(timeout=60)
    assert snapshot == Snapshot(SnapshotMeta(index=4, term=1, voters=(MEMBER,)), b"")
    # Its file is written, but a start ignores it until the WAL records it.
    assert [p.name for p in storage.disk.snap_dir.glob("*.snap")] == [
        snapfile.file_name(snapshot.meta)
    ]
    storage.disk.record_snapshot(snapshot.meta)
    storage.close()

    reopened, recovered = open_member_data(tmp_path, MEMBER, quota_bytes=2**30)
    try:
        assert recovered.snapshot_index == 4
        assert [e.index for e in recovered.persisted.entries] == [5, 6]
        assert recovered.applied == 6  # close committed what group commit held
    finally:
        reopened.close()


def test_a_follower_is_sent_a_copy_of_the_database_at_or_past_the_snapshot(
    tmp_path: Path,
) -> None:
    storage, _ = open_member_data(tmp_path, MEMBER, quota_bytes=2**30)
    try:
        _write_log(storage, 6)
        _apply(storage, 1, 4)
        local = start_snapshot(storage, ((0, ConfState((MEMBER,))),)).result(timeout=60)
        _apply(storage, 5, 6)
        sent = database_for(storage, local)
        assert sent.meta == local.meta and sent.data
        assert check_snapshot(sent.data)["consistent_index"] == 6  # the follower skips 5, 6
        received = Snapshot(local.meta, b"a database the leader sent")
        assert database_for(storage, received) is received
    finally:
        storage.close()


def test_a_database_behind_a_local_snapshot_refuses_to_start_and_says_why(
    tmp_path: Path,
) -> None:
    storage, _ = open_member_data(tmp_path, MEMBER, quota_bytes=2**30)
    _write_log(storage, 4)
    _apply(storage, 1, 4)
    storage.disk.record_snapshot(
        start_snapshot(storage, ((0, ConfState((MEMBER,))),)).result(timeout=60).meta
    )
    storage.close()
    # The database file is replaced by an empty one (a restore gone wrong, say).
    for leftover in storage.disk.snap_dir.glob("db*"):
        leftover.unlink()

    with pytest.raises(BackendError) as raised:
        open_member_data(tmp_path, MEMBER, quota_bytes=2**30)
    message = str(raised.value)
    assert "holds entries up to 0, behind the snapshot 1/4" in message
    assert snapfile.file_name(SnapshotMeta(index=4, term=1)) in message
    assert "etcdspec snapshot restore" in message
    assert list(storage.disk.wal_dir.glob("*.wal"))  # nothing was removed


def test_sync_committed_gives_the_position_the_file_holds(tmp_path: Path) -> None:
    backend = MemberBackend(tmp_path / "db")
    try:
        with backend.transaction():
            backend.set_applied(7, 2)
        assert backend.consistent_index() == 7
        assert backend.sync_committed() == (0, 0)  # held by group commit
        backend.flush()
        assert backend.sync_committed() == (7, 2)
    finally:
        backend.close()


def test_closing_the_backend_waits_for_its_worker(tmp_path: Path) -> None:
    backend = MemberBackend(tmp_path / "db")
    release = threading.Event()
    order: list[str] = []

    def job() -> int:
        release.wait(timeout=60)
        order.append("synced")
        return backend.sync_committed()[0]

    future = backend.in_worker(job)
    with pytest.raises(BackendError, match="already under way"):
        backend.in_worker(job)
    threading.Timer(0.05, release.set).start()
    backend.close()
    order.append("closed")
    assert order == ["synced", "closed"]
    assert future.result(timeout=0) == 0


def test_a_failure_in_the_worker_reaches_the_future(tmp_path: Path) -> None:
    backend = MemberBackend(tmp_path / "db")

    def job() -> None:
        raise OSError("no space left on device")

    try:
        with pytest.raises(OSError, match="no space left"):
            backend.in_worker(job).result(timeout=60)
        assert backend.in_worker(lambda: backend.sync_committed()).result(timeout=60) == (0, 0)
    finally:
        backend.close()


def test_a_worker_may_start_as_soon_as_the_last_one_has_given_its_result(
    tmp_path: Path,
) -> None:
    """A member starts its next snapshot once it sees the last one's future done (with a
    small --snapshot-count, at once), while that thread may still be returning."""
    backend = MemberBackend(tmp_path / "db")
    try:
        go = threading.Event()
        first = backend.in_worker(lambda: go.wait(timeout=60))
        # The worker runs the future's callbacks after giving its result: it lingers.
        first.add_done_callback(lambda _: time.sleep(0.2))
        go.set()
        assert first.result(timeout=60) is True
        assert backend.in_worker(lambda: "second").result(timeout=60) == "second"
    finally:
        backend.close()
