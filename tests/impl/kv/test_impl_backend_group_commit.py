"""The backend's group commit: transaction() blocks share one SQLite commit.

Checked: a block's writes are visible at once; a block that raises is undone alone; the
file (as a crash would leave it, read by another connection) holds a prefix of the
blocks, described by its consistent index; commits happen at the block limit, at the
age limit, and before anything that needs the file (snapshot, checkpoint, close); and a
member that crashes with blocks held applies them again from its WAL on start.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from etcdspec.impl.kv.backend import Backend, BackendError
from etcdspec.impl.kv.member_backend import MemberBackend
from etcdspec.impl.kv.mvcc import KVStore
from etcdspec.impl.pb import raft_internal_pb2, rpc_pb2
from etcdspec.impl.raft.messages import Entry, HardState
from etcdspec.impl.server.recovery import open_member_data

MEMBER = 0x77


class _Grouped(Backend):
    group_commit_limit = 3
    group_commit_s = 3600.0  # only the block limit or an explicit flush commits


def _on_file(path: Path) -> int:
    """The consistent index the file holds for another connection (a crash's view)."""
    conn = sqlite3.connect(path)
    try:
        return int(
            conn.execute("SELECT value FROM meta WHERE name = 'consistent_index'").fetchone()[0]
        )
    finally:
        conn.close()


def _block(backend: Backend, index: int) -> None:
    with backend.transaction():
        backend.set_current_revision(index + 1)
        backend.set_applied(index, 1)


def test_blocks_are_visible_at_once_and_reach_the_file_at_the_block_limit(tmp_path: Path) -> None:
    backend = _Grouped(tmp_path / "db")
    try:
        _block(backend, 1)
        _block(backend, 2)
        assert (backend.consistent_index(), backend.current_revision()) == (2, 3)
        assert _on_file(tmp_path / "db") == 0  # held: a crash now loses blocks 1 and 2
        _block(backend, 3)  # the third block commits all three
        assert _on_file(tmp_path / "db") == 3
        _block(backend, 4)
        assert _on_file(tmp_path / "db") == 3
        backend.flush()
        assert _on_file(tmp_path / "db") == 4
    finally:
        backend.close()


def test_a_block_that_raises_is_undone_alone(tmp_path: Path) -> None:
    backend = _Grouped(tmp_path / "db")
    try:
        _block(backend, 1)
        with pytest.raises(RuntimeError, match="refused"), backend.transaction():
            backend.set_applied(2, 1)
            raise RuntimeError("refused")
        assert backend.consistent_index() == 1
        backend.flush()
        assert _on_file(tmp_path / "db") == 1
    finally:
        backend.close()


def test_held_meta_values_survive_a_rolled_back_savepoint_and_count_in_the_hash(
    tmp_path: Path,
) -> None:
    """The meta values a block sets are held until the COMMIT: a savepoint rolled back
    inside the block keeps the ones set before it, and the hash (which reads the meta
    table) sees them, as it does with a backend that writes every value at once."""

    class _Direct(Backend):
        group_commit_limit = 1

    grouped, direct = _Grouped(tmp_path / "grouped"), _Direct(tmp_path / "direct")
    try:
        for backend in (grouped, direct):
            _block(backend, 1)
            with backend.transaction():
                backend.set_current_revision(5)
                backend.set_applied(2, 1)
                with pytest.raises(RuntimeError, match="refused"), backend.savepoint():
                    backend.set_current_revision(6)
                    backend.set_applied(3, 1)
                    raise RuntimeError("refused")
                assert (backend.current_revision(), backend.consistent_index()) == (5, 2)
        assert _on_file(tmp_path / "grouped") == 0  # nothing committed yet
        assert grouped.hash() == direct.hash()
        grouped.flush()
        assert _on_file(tmp_path / "grouped") == 2
        assert grouped.hash() == direct.hash()
    finally:
        grouped.close()
        direct.close()


def test_the_quotas_size_is_the_size_at_the_last_commit(tmp_path: Path) -> None:
    """`committed_size()`, which the quota reads, stays at the last commit's figure while
    group commit holds blocks that grew the file, and follows the next commit."""
    backend = _Grouped(tmp_path / "db")
    store = KVStore(backend)
    try:
        before = backend.committed_size()
        for block in range(2):
            with backend.transaction():
                wtx = store.write(lambda lease: False)
                for index in range(100):
                    wtx.put(rpc_pb2.PutRequest(key=b"k%d.%d" % (block, index), value=bytes(500)))
                wtx.finish()
        grown = backend.size()
        assert grown > before
        assert backend.committed_size() == before  # nothing committed yet
        backend.flush()
        assert backend.committed_size() == backend.size() >= grown
    finally:
        backend.close()


def test_a_nested_transaction_or_a_flush_inside_one_is_refused(tmp_path: Path) -> None:
    backend = _Grouped(tmp_path / "db")
    try:
        with backend.transaction():
            with pytest.raises(BackendError, match="nested"), backend.transaction():
                pass
            with pytest.raises(BackendError, match="flush inside"):
                backend.flush()
    finally:
        backend.close()


@pytest.mark.parametrize(
    "operation",
    [
        lambda backend: backend.snapshot_bytes(),
        lambda backend: backend.checkpoint(),
        lambda backend: backend.defragment(),
        lambda backend: backend.close(),
    ],
    ids=["snapshot_bytes", "checkpoint", "defragment", "close"],
)
def test_what_needs_the_file_commits_first(tmp_path: Path, operation: object) -> None:
    backend = _Grouped(tmp_path / "db")
    try:
        _block(backend, 1)
        assert _on_file(tmp_path / "db") == 0
        operation(backend)  # type: ignore[operator]
        assert _on_file(tmp_path / "db") == 1
    finally:
        backend.close()


def test_the_age_limit_commits_at_the_next_block_or_flush_if_due(tmp_path: Path) -> None:
    class Aged(Backend):
        group_commit_limit = 1000
        group_commit_s = 0.0  # every held block is already due

    backend = Aged(tmp_path / "db")
    try:
        assert backend.flush_if_due() is False  # nothing held
        _block(backend, 1)
        assert _on_file(tmp_path / "db") == 1  # due at its own end
    finally:
        backend.close()
    held = _Grouped(tmp_path / "db2")
    try:
        _block(held, 1)
        assert held.flush_due() is False
        assert held.flush_if_due() is False  # not old enough
        held.group_commit_s = 0.0
        assert held.flush_due() is True
        assert held.flush_if_due() is True
        assert held.flush_due() is False  # nothing held any more
        assert _on_file(tmp_path / "db2") == 1
    finally:
        held.close()


def _put_entry(index: int) -> Entry:
    request = raft_internal_pb2.InternalRaftRequest(
        put=rpc_pb2.PutRequest(key=f"k{index}".encode(), value=b"v")
    )
    request.header.ID = index
    return Entry(term=1, index=index, data=request.SerializeToString())


def test_a_crash_with_blocks_held_applies_them_again_from_the_wal(tmp_path: Path) -> None:
    assert MemberBackend.group_commit_limit > 1
    live = tmp_path / "live"
    storage, _ = open_member_data(live, MEMBER, quota_bytes=2**30)
    entries = tuple(_put_entry(i) for i in range(1, 7))
    storage.disk.persist(HardState(term=1, vote=MEMBER, commit=6), entries, None)
    storage.state.backend.flush()
    storage.state.apply(entries[:2])
    storage.state.backend.flush()
    storage.state.apply(entries[2:])  # held by group commit
    assert storage.state.current_revision() == 7
    # The crash: the files as they are now, the held blocks never committed.
    crashed = tmp_path / "crashed"
    shutil.copytree(live, crashed)
    storage.close()

    reopened, recovered = open_member_data(crashed, MEMBER, quota_bytes=2**30)
    try:
        assert recovered.applied == 2  # what the file holds ...
        assert reopened.state.current_revision() == 3
        replay = [e for e in recovered.persisted.entries if e.index > recovered.applied]
        assert [e.index for e in replay] == [3, 4, 5, 6]  # ... and the WAL has the rest
        reopened.state.apply(tuple(replay))
        assert reopened.state.current_revision() == 7
        got = reopened.state.range(rpc_pb2.RangeRequest(key=b"k", range_end=b"l"))
        assert sorted(kv.key for kv in got.kvs) == [f"k{i}".encode() for i in range(1, 7)]
    finally:
        reopened.close()


def test_the_member_backend_checkpoints_in_a_worker_not_at_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from etcdspec.impl.kv import member_backend

    monkeypatch.setattr(member_backend, "CHECKPOINT_WAL_BYTES", 64 * 1024)
    backend = MemberBackend(tmp_path / "db")
    try:
        assert backend._conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
        before = (tmp_path / "db").stat().st_size
        for index in range(1, 40):
            with backend.transaction():
                backend.put_lease(index, 60)
                backend.set_applied(index, 1)
            backend.flush()
        backend._quiesce()  # waits for a checkpoint in flight
        assert backend.checkpoints >= 1
        assert (tmp_path / "db").stat().st_size > before  # the journal's pages reached the file
        assert backend.consistent_index() == 39
    finally:
        backend.close()
    reopened = MemberBackend(tmp_path / "db")
    try:
        assert reopened.consistent_index() == 39 and len(reopened.leases()) == 39
    finally:
        reopened.close()
