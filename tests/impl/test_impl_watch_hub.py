"""The watch hub: etcd's watch guarantees on one member — Ordered, Unique, Reliable,
Atomic (a revision's events together), Resumable (start in the past, catch up from the
backend), compaction cancels, filters, prev_kv, progress, and bounded slow watchers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from etcdspec.impl.applier import Applier, encode_request
from etcdspec.impl.backend import Backend
from etcdspec.impl.lessor import Lessor
from etcdspec.impl.pb import rpc_pb2 as pb
from etcdspec.impl.quota import BackendQuota
from etcdspec.impl.watch_hub import (
    FILTER_NODELETE,
    FILTER_NOPUT,
    WatcherState,
    WatchEvents,
    WatchHub,
)
from google.protobuf.message import Message


class Member:
    def __init__(self, path: Path, buffer_limit: int = 1024) -> None:
        self.backend = Backend(path)
        self.ready: list[int] = []
        self.hub = WatchHub(self.backend, buffer_limit=buffer_limit, on_ready=self.ready.append)
        self.applier = Applier(self.backend, Lessor(), self.hub, BackendQuota(self.backend))
        self.index = 0

    def do(self, request: Message) -> Any:
        self.index += 1
        result = self.applier.apply(self.index, 1, encode_request(request))
        if result.error is not None:
            raise result.error
        return result.response

    def put(self, key: bytes, value: bytes = b"v") -> int:
        return int(self.do(pb.PutRequest(key=key, value=value)).header.revision)

    def delete(self, key: bytes, range_end: bytes = b"") -> int:
        return int(self.do(pb.DeleteRangeRequest(key=key, range_end=range_end)).header.revision)


@pytest.fixture
def member(tmp_path: Path) -> Member:
    return Member(tmp_path / "m.db")


def _flat(batches: list[WatchEvents]) -> list[tuple[str, bytes, int]]:
    return [(e.type.name, e.kv.key, e.kv.mod_revision) for b in batches for e in b.events]


def test_a_watcher_gets_new_events_in_order_once(member: Member) -> None:
    handle = member.hub.create(7, b"a", b"c")
    member.put(b"a")  # 2
    member.put(b"z")  # 3, outside
    member.put(b"b")  # 4
    member.delete(b"a")  # 5
    batches = member.hub.take(handle)
    assert _flat(batches) == [("PUT", b"a", 2), ("PUT", b"b", 4), ("DELETE", b"a", 5)]
    assert [b.revision for b in batches] == [2, 4, 5]
    assert all(b.watch_id == 7 for b in batches)
    assert member.hub.take(handle) == []
    assert member.ready == [handle, handle, handle]


def test_all_events_of_a_revision_come_in_one_response(member: Member) -> None:
    for key in (b"a", b"b", b"c"):
        member.put(key)
    handle = member.hub.create(1, b"\x00", b"\x00")
    member.delete(b"a", b"\x00")
    (batch,) = member.hub.take(handle)
    assert [e.kv.key for e in batch.events] == [b"a", b"b", b"c"]
    assert {e.kv.mod_revision for e in batch.events} == {batch.revision}


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ((), ["PUT", "DELETE"]),
        ((FILTER_NOPUT,), ["DELETE"]),
        ((FILTER_NODELETE,), ["PUT"]),
        ((FILTER_NOPUT, FILTER_NODELETE), []),
    ],
)
def test_filters(member: Member, filters: tuple[int, ...], expected: list[str]) -> None:
    handle = member.hub.create(1, b"k", filters=filters)
    member.put(b"k")
    member.delete(b"k")
    assert [t for t, _, _ in _flat(member.hub.take(handle))] == expected


@pytest.mark.parametrize("from_the_past", [False, True])
def test_prev_kv_only_when_asked(member: Member, from_the_past: bool) -> None:
    start = member.put(b"k", b"1") if from_the_past else 0
    with_prev = member.hub.create(1, b"k", prev_kv=True, start_revision=start + 1 if start else 0)
    plain = member.hub.create(2, b"k", start_revision=start + 1 if start else 0)
    if not from_the_past:
        member.put(b"k", b"1")
    member.put(b"k", b"2")
    (last_with,) = [b for b in member.hub.take(with_prev) if b.events][-1:]
    event = last_with.to_pb().events[-1]
    assert event.kv.value == b"2" and event.prev_kv.value == b"1"
    (last_plain,) = [b for b in member.hub.take(plain) if b.events][-1:]
    assert not last_plain.to_pb().events[-1].HasField("prev_kv")


def test_watch_from_the_past_catches_up_then_follows(member: Member) -> None:
    for i in range(5):
        member.put(b"k", b"%d" % i)  # revisions 2..6
    handle = member.hub.create(1, b"k", start_revision=3)
    member.put(b"k", b"live")  # 7
    batches = member.hub.take(handle)
    assert [rev for _, _, rev in _flat(batches)] == [3, 4, 5, 6, 7]
    assert member.hub.get(handle) is not None
    assert member.hub.get(handle).state is WatcherState.SYNCED  # type: ignore[union-attr]


def test_watch_from_a_future_revision_waits_for_it(member: Member) -> None:
    handle = member.hub.create(1, b"k", start_revision=4)
    member.put(b"k")  # 2
    member.put(b"k")  # 3
    member.put(b"k")  # 4
    assert [rev for _, _, rev in _flat(member.hub.take(handle))] == [4]


@pytest.mark.parametrize(("start", "canceled"), [(2, True), (4, True), (5, False), (6, False)])
def test_compacted_start_revision_is_answered_with_a_cancel(
    member: Member, start: int, canceled: bool
) -> None:
    for i in range(5):
        member.put(b"k", b"%d" % i)  # revisions 2..6
    member.do(pb.CompactionRequest(revision=5))
    handle = member.hub.create(1, b"k", start_revision=start)
    batches = member.hub.take(handle)
    if canceled:
        (only,) = batches
        assert only.canceled and only.compact_revision == 5
        assert (only.revision, only.cancel_reason) == (0, "")
        assert only.to_pb().canceled
        assert member.hub.get(handle) is None
    else:
        assert [rev for _, _, rev in _flat(batches)] == list(range(start, 7))


def test_catch_up_prev_kv_is_absent_when_compacted_or_deleted(member: Member) -> None:
    for i in range(5):
        member.put(b"k", b"%d" % i)  # revisions 2..6
    member.delete(b"k")  # 7
    member.put(b"k", b"x")  # 8
    member.do(pb.CompactionRequest(revision=5))
    handle = member.hub.create(1, b"k", start_revision=5, prev_kv=True)
    (batch,) = member.hub.take(handle)
    assert batch.revision == 8
    events = batch.to_pb().events
    assert [e.kv.mod_revision for e in events] == [5, 6, 7, 8]
    assert [e.HasField("prev_kv") for e in events] == [False, True, True, False]
    assert events[2].prev_kv.value == b"4" and events[2].kv.value == b""


def test_a_slow_watcher_is_bounded_and_caught_up_later(tmp_path: Path) -> None:
    member = Member(tmp_path / "m.db", buffer_limit=4)
    handle = member.hub.create(1, b"k")
    for i in range(20):
        member.put(b"k", b"%d" % i)  # revisions 2..21
    watcher = member.hub.get(handle)
    assert watcher is not None
    assert watcher.pending_events <= 4
    assert watcher.state is WatcherState.UNSYNCED
    seen: list[int] = []
    for _ in range(20):
        batches = member.hub.take(handle)
        assert sum(len(b.events) for b in batches) <= 2 * 4
        seen += [rev for _, _, rev in _flat(batches)]
        if watcher.state is WatcherState.SYNCED and not watcher.pending:
            break
    assert seen == list(range(2, 22))
    member.put(b"k", b"after")  # 22, straight to the synced watcher
    assert [rev for _, _, rev in _flat(member.hub.take(handle))] == [22]


def test_a_slow_watcher_whose_history_is_compacted_is_canceled(tmp_path: Path) -> None:
    member = Member(tmp_path / "m.db", buffer_limit=2)
    handle = member.hub.create(1, b"k")
    for i in range(10):
        member.put(b"k", b"%d" % i)
    member.do(pb.CompactionRequest(revision=member.backend.current_revision()))
    batches = member.hub.take(handle)
    assert batches[-1].canceled
    assert batches[-1].compact_revision == member.backend.current_revision()
    revs = [rev for _, _, rev in _flat(batches)]
    assert revs == sorted(set(revs))


def test_sync_serves_unsynced_watchers_with_room_only(tmp_path: Path) -> None:
    member = Member(tmp_path / "m.db", buffer_limit=3)
    for i in range(10):
        member.put(b"k", b"%d" % i)  # revisions 2..11
    handle = member.hub.create(1, b"k", start_revision=2)
    assert member.hub.unsynced() == [handle]
    assert member.hub.sync() == []  # its buffer is full: nothing more is read
    first = member.hub.take(handle)  # 2..4 buffered, then 5..7 caught up
    assert [rev for _, _, rev in _flat(first)] == [2, 3, 4, 5, 6, 7]
    assert member.hub.sync() == [handle]  # 8..10 (buffer now full again)
    assert member.hub.sync() == []
    rest = member.hub.take(handle)  # 8..10, then 11
    assert [rev for _, _, rev in _flat(rest)] == [8, 9, 10, 11]
    assert member.hub.unsynced() == []


def test_progress_notifies_idle_watchers_that_asked(member: Member) -> None:
    asked = member.hub.create(1, b"a", progress_notify=True)
    silent = member.hub.create(2, b"a")
    member.put(b"other")
    assert member.hub.progress() == [asked]
    (mark,) = member.hub.take(asked)
    assert mark.events == () and mark.revision == member.backend.current_revision()
    assert member.hub.take(silent) == []
    assert member.hub.request_progress([asked, silent]) == member.backend.current_revision()


def test_request_progress_waits_while_a_watcher_catches_up(tmp_path: Path) -> None:
    member = Member(tmp_path / "m.db", buffer_limit=1)
    for i in range(4):
        member.put(b"k", b"%d" % i)
    handle = member.hub.create(1, b"k", start_revision=2)
    assert member.hub.request_progress([handle]) is None


def test_cancel_stops_delivery(member: Member) -> None:
    handle = member.hub.create(1, b"k")
    assert member.hub.cancel(handle)
    member.put(b"k")
    assert member.hub.take(handle) == []
    assert not member.hub.cancel(handle)


def test_watchers_catch_up_after_a_snapshot_restore(tmp_path: Path) -> None:
    source = Member(tmp_path / "source.db")
    for i in range(3):
        source.put(b"k", b"%d" % i)  # 2..4
    member = Member(tmp_path / "m.db")
    handle = member.hub.create(1, b"k")
    member.applier.restore(source.backend.snapshot_bytes())
    assert [rev for _, _, rev in _flat(member.hub.take(handle))] == [2, 3, 4]


def test_describe_is_one_canonical_line(member: Member) -> None:
    handle = member.hub.create(3, b"k")
    member.put(b"k", b"v")
    (batch,) = member.hub.take(handle)
    assert batch.describe() == "watch 3 rev 2: PUT b'k'=b'v' (create=2 mod=2 version=1 lease=0)"
