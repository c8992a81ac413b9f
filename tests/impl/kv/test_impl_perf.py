"""What the performance work may not change: the backend's in-memory caches (meta,
alarms, size) never show what the file does not hold; a batch writes its consistent
index once, in its transaction (a put, which has no savepoint, refuses only before it
writes); the member applies committed entries during a Ready's fsync only when earlier
Readies persisted every one of them; a follower forwards the proposals made between two
Readies in one message, in order."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from etcdspec.impl import errors
from etcdspec.impl.errors import RpcError
from etcdspec.impl.kv.applier import Applier, ApplyError, encode_request
from etcdspec.impl.kv.backend import Backend
from etcdspec.impl.kv.lessor import Lessor
from etcdspec.impl.kv.mvcc import KVStore, WriteTxn
from etcdspec.impl.kv.quota import BackendQuota
from etcdspec.impl.kv.watch_hub import WatchHub
from etcdspec.impl.pb import rpc_pb2 as pb
from etcdspec.impl.raft.core import RaftConfig
from etcdspec.impl.raft.driver import RaftDriver, Ready
from etcdspec.impl.raft.messages import (
    Entry,
    HardState,
    Message,
    MessageType,
    Snapshot,
    SnapshotMeta,
)
from etcdspec.impl.server.pump import committed_already_persisted


def _file_meta(path: Path, name: str) -> int:
    """A meta value as another connection reads it from the file."""
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()[0])
    finally:
        conn.close()


def test_a_rolled_back_transaction_leaves_no_cached_meta(tmp_path: Path) -> None:
    backend = Backend(tmp_path / "m.db", durable=False)
    with backend.transaction():
        backend.set_current_revision(5)
        backend.set_applied(7, 2)
    with pytest.raises(RuntimeError), backend.transaction():
        backend.set_current_revision(9)
        backend.set_applied(8, 3)
        assert (backend.current_revision(), backend.consistent_index()) == (9, 8)
        raise RuntimeError("abandon the transaction")
    assert backend.current_revision() == 5 == _file_meta(backend.path, "current_revision")
    assert backend.consistent_index() == 7 == _file_meta(backend.path, "consistent_index")
    assert backend.applied_term() == 2


def test_a_rolled_back_savepoint_leaves_no_cached_meta_or_alarm(tmp_path: Path) -> None:
    backend = Backend(tmp_path / "m.db", durable=False)
    with backend.transaction():
        backend.set_current_revision(3)
        with pytest.raises(RuntimeError), backend.savepoint():
            backend.set_current_revision(4)
            backend.put_alarm(1, pb.NOSPACE)
            assert backend.alarms() == [(1, pb.NOSPACE)]
            raise RuntimeError("undo the request")
        assert backend.current_revision() == 3
        assert backend.alarms() == []
    assert _file_meta(backend.path, "current_revision") == 3


def test_alarm_cache_follows_raise_and_disarm(tmp_path: Path) -> None:
    backend = Backend(tmp_path / "m.db", durable=False)
    assert backend.alarms() == []
    with backend.transaction():
        backend.put_alarm(2, pb.NOSPACE)
    assert backend.alarms() == [(2, pb.NOSPACE)]
    listed = backend.alarms()
    listed.clear()  # a caller's copy: the cache is not changed through it
    assert backend.alarms() == [(2, pb.NOSPACE)]
    with backend.transaction():
        backend.delete_alarm(2, pb.NOSPACE)
    assert backend.alarms() == []


def test_restore_drops_the_cached_meta(tmp_path: Path) -> None:
    source = Backend(tmp_path / "a.db", durable=False)
    with source.transaction():
        source.set_current_revision(11)
        source.set_applied(20, 4)
    target = Backend(tmp_path / "b.db", durable=False)
    assert (target.current_revision(), target.consistent_index()) == (1, 0)
    target.restore(source.snapshot_bytes())
    assert (target.current_revision(), target.consistent_index()) == (11, 20)


def _file_size(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        return int(pages) * int(conn.execute("PRAGMA page_size").fetchone()[0])
    finally:
        conn.close()


def test_the_cached_size_follows_every_transaction_and_defragmentation(tmp_path: Path) -> None:
    backend = Backend(tmp_path / "m.db", durable=False)
    store = KVStore(backend)
    empty = backend.size()
    for round_ in range(2):
        with backend.transaction():
            wtx = store.write(lambda lease: False)
            for index in range(200):
                wtx.put(pb.PutRequest(key=b"k%d" % index, value=bytes(500)))
            wtx.finish()
        assert backend.size() == _file_size(backend.path) > empty, round_
    grown = backend.size()
    with backend.transaction():
        store.compact(backend.current_revision())
    backend.defragment()
    assert backend.size() == _file_size(backend.path) < grown


def test_a_batch_ends_at_its_last_entry_in_one_transaction(tmp_path: Path) -> None:
    backend = Backend(tmp_path / "m.db", durable=False)
    applier = Applier(backend, Lessor(), WatchHub(backend), BackendQuota(backend))
    entries = [
        (1, 1, b""),
        (2, 1, encode_request(pb.PutRequest(key=b"a", value=b"1"), 10, 1)),
        (3, 1, encode_request(pb.PutRequest(key=b"a", value=b"2", lease=99), 11, 1)),
        (4, 2, encode_request(pb.PutRequest(key=b"b", value=b"3"), 12, 1)),
    ]
    results = applier.apply_batch(entries)
    assert [r.error is not None for r in results] == [False, False, True, False]
    assert (backend.consistent_index(), backend.applied_term()) == (4, 2)
    assert _file_meta(backend.path, "consistent_index") == 4
    assert backend.current_revision() == 3 == _file_meta(backend.path, "current_revision")
    replayed = applier.apply_batch(entries[2:])
    assert all(r.skipped for r in replayed)


def test_a_put_that_refuses_after_writing_applies_nothing_of_its_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = Backend(tmp_path / "m.db", durable=False)
    applier = Applier(backend, Lessor(), WatchHub(backend), BackendQuota(backend))
    applier.apply_batch([(1, 1, encode_request(pb.PutRequest(key=b"a", value=b"1"), 10, 1))])
    original_put = WriteTxn.put

    def put_then_refuse(self: WriteTxn, req: pb.PutRequest) -> pb.PutResponse:
        original_put(self, req)
        raise RpcError(errors.LEASE_NOT_FOUND)

    monkeypatch.setattr(WriteTxn, "put", put_then_refuse)
    batch = [
        (2, 1, encode_request(pb.DeleteRangeRequest(key=b"a"), 11, 1)),
        (3, 1, encode_request(pb.PutRequest(key=b"b", value=b"2"), 12, 1)),
    ]
    with pytest.raises(ApplyError, match="entry 3@1: a put refused"):
        applier.apply_batch(batch)
    assert (backend.consistent_index(), backend.current_revision()) == (1, 2)
    assert [r.key for r in backend.live(b"\x00", b"\x00", 2)] == [b"a"]


def _ready(entries: tuple[int, ...], committed: tuple[int, ...], snapshot: bool = False) -> Ready:
    return Ready(
        soft_state=None,
        hard_state=HardState(term=1, commit=max(committed, default=0)),
        snapshot=Snapshot(SnapshotMeta(index=5, term=1, voters=(1,))) if snapshot else None,
        entries=tuple(Entry(1, i, b"x") for i in entries),
        committed_entries=tuple(Entry(1, i, b"x") for i in committed),
        messages=(),
        read_states=(),
    )


@pytest.mark.parametrize(
    ("entries", "committed", "snapshot", "early"),
    [
        ((), (), False, False),  # nothing to apply
        ((), (3, 4), False, True),  # a commit-index Ready: all persisted before
        ((7, 8), (3, 4), False, True),  # new entries after the committed ones (leader)
        ((5, 6), (4, 5), False, False),  # the follower commits an entry it persists now
        ((3, 4), (2,), False, True),  # a conflicting suffix from 3 spares entry 2
        ((3, 4), (3,), False, False),  # ...but not entry 3, which it replaces
        ((), (6,), True, False),  # a snapshot is restored before anything is applied
    ],
)
def test_only_entries_persisted_by_earlier_readies_are_applied_during_the_fsync(
    entries: tuple[int, ...], committed: tuple[int, ...], snapshot: bool, early: bool
) -> None:
    assert committed_already_persisted(_ready(entries, committed, snapshot)) is early


def _follower_of(leader: int) -> RaftDriver:
    follower = RaftDriver(RaftConfig(id=2, voters=(1, 2, 3)), random.Random(0))
    follower.step(Message(MessageType.HEARTBEAT, to=2, from_=leader, term=1))
    while follower.has_ready():
        follower.advance(follower.ready())
    return follower


def test_a_follower_forwards_the_proposals_between_two_readies_as_one_message() -> None:
    follower = _follower_of(1)
    for data in (b"a", b"b", b"c"):
        follower.propose(data)
    sent = [(m.type, m.to, [e.data for e in m.entries]) for m in follower.ready().messages]
    assert sent == [(MessageType.PROP, 1, [b"a", b"b", b"c"])]


def test_a_forwarded_proposal_is_not_merged_across_another_message() -> None:
    follower = _follower_of(1)
    follower.propose(b"a")
    follower.step(Message(MessageType.HEARTBEAT, to=2, from_=1, term=1))
    follower.propose(b"b")
    sent = [(m.type, [e.data for e in m.entries]) for m in follower.ready().messages]
    assert sent == [
        (MessageType.PROP, [b"a"]),
        (MessageType.HEARTBEAT_RESP, []),
        (MessageType.PROP, [b"b"]),
    ]
