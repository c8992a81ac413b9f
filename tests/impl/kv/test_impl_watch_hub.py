"""The watch hub: etcd's watch guarantees on one member — Ordered, Unique, Reliable,
Atomic (a revision's events together), Resumable (start in the past, catch up from the
backend), compaction cancels, filters, prev_kv, progress, and bounded slow watchers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from google.protobuf.message import Message

from etcdspec.impl.kv.applier import Applier, encode_request
from etcdspec.impl.kv.backend import Backend
from etcdspec.impl.kv.lessor import Lessor
from etcdspec.impl.kv.quota import BackendQuota
from etcdspec.impl.kv.watch_hub import (
    FILTER_NODELETE,
    FILTER_NOPUT,
    WatcherState,
    WatchEvents,
    WatchHub,
)
from etcdspec.impl.pb import rpc_pb2 as pb


class Member:
    def __init__(self, path: Path, buffer_limit: int = 1024, durable: bool = True) -> None:
        self.backend = Backend(path, durable=durable)
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


# ---- stateful: every watcher sees exactly the history it asked for ----

from hypothesis import event, note, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.stateful import (  # noqa: E402
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from etcdspec.impl.kv.mvcc import Event  # noqa: E402

KEYS = [b"a", b"b", b"c"]


class WatchHistory(RuleBasedStateMachine):
    """Random writes, compactions, watchers (live, past, future; filters; prev_kv),
    slow consumers (tiny buffers) and restores; checks Ordered, Unique, Reliable, Atomic
    against the applier's own record of every revision's events."""

    def __init__(self) -> None:
        super().__init__()
        import tempfile

        self._dir = tempfile.TemporaryDirectory(prefix="etcdspec-watch-")
        self.member: Member | None = None
        self.history: dict[int, tuple[Event, ...]] = {}
        self.watchers: dict[int, dict[str, Any]] = {}
        self.restores = 0

    @initialize(limit=st.integers(1, 5))
    def start(self, limit: int) -> None:
        self.member = Member(Path(self._dir.name) / "m.db", buffer_limit=limit, durable=False)

    def _apply(self, request: Message) -> None:
        assert self.member is not None
        self.member.index += 1
        result = self.member.applier.apply(
            self.member.index, 1, encode_request(request, self.member.index)
        )
        if result.events:
            self.history[result.revision] = result.events

    @rule(key=st.sampled_from(KEYS), value=st.binary(max_size=2))
    def put(self, key: bytes, value: bytes) -> None:
        self._apply(pb.PutRequest(key=key, value=value))

    @rule(key=st.sampled_from(KEYS), to_end=st.booleans())
    def delete(self, key: bytes, to_end: bool) -> None:
        self._apply(pb.DeleteRangeRequest(key=key, range_end=b"\x00" if to_end else b""))

    @rule(first=st.sampled_from(KEYS), second=st.sampled_from(KEYS))
    def txn(self, first: bytes, second: bytes) -> None:
        ops = [pb.RequestOp(request_put=pb.PutRequest(key=first, value=b"t"))]
        if second != first:
            ops.append(pb.RequestOp(request_delete_range=pb.DeleteRangeRequest(key=second)))
        self._apply(pb.TxnRequest(success=ops))

    @rule(data=st.data())
    def compact(self, data: st.DataObject) -> None:
        assert self.member is not None
        low = self.member.backend.compact_revision() + 1
        high = self.member.backend.current_revision()
        if low <= high:
            self._apply(pb.CompactionRequest(revision=data.draw(st.integers(low, high))))
            event("compacted")

    @rule(
        key=st.sampled_from([b"a", b"b"]),
        whole=st.booleans(),
        start=st.sampled_from(["now", "past", "future"]),
        prev_kv=st.booleans(),
        filters=st.sampled_from([(), (FILTER_NOPUT,), (FILTER_NODELETE,)]),
        data=st.data(),
    )
    def watch(
        self,
        key: bytes,
        whole: bool,
        start: str,
        prev_kv: bool,
        filters: tuple[int, ...],
        data: st.DataObject,
    ) -> None:
        assert self.member is not None
        current = self.member.backend.current_revision()
        first = {
            "now": 0,
            "past": data.draw(st.integers(1, current)),
            "future": current + data.draw(st.integers(1, 3)),
        }[start]
        range_end = b"\x00" if whole else b""
        handle = self.member.hub.create(
            len(self.watchers) + 1, key, range_end, first, prev_kv, filters
        )
        self.watchers[handle] = {
            "key": key,
            "range_end": range_end,
            "from": first if first else current + 1,
            "prev_kv": prev_kv,
            "filters": filters,
            "seen": [],
            "revisions": [],
            "canceled_at": None,
        }

    @rule(data=st.data())
    def take(self, data: st.DataObject) -> None:
        assert self.member is not None
        if not self.watchers:
            return
        handle = data.draw(st.sampled_from(sorted(self.watchers)))
        watcher = self.member.hub.get(handle)
        if watcher is not None and watcher.state is WatcherState.UNSYNCED:
            event("a slow watcher caught up from the backend")
        self._receive(handle, self.member.hub.take(handle))

    @precondition(lambda self: self.restores == 0)  # slow (file copies): once per run
    @rule()
    def restore_from_own_snapshot(self) -> None:
        assert self.member is not None
        self.restores += 1
        self.member.applier.restore(self.member.backend.snapshot_bytes())
        event("restored from a snapshot")

    @rule()
    def sync(self) -> None:
        assert self.member is not None
        self.member.hub.sync()

    def _receive(self, handle: int, batches: list[WatchEvents]) -> None:
        w = self.watchers[handle]
        for batch in batches:
            assert w["canceled_at"] is None, "a response after the cancel"
            if batch.canceled:
                w["canceled_at"] = batch.compact_revision
                event("watcher canceled by compaction")
                continue
            revisions = {e.kv.mod_revision for e in batch.events}
            assert len(revisions) <= 1 or batch.revision >= max(revisions)
            w["revisions"].append(sorted(revisions))
            w["seen"].extend(batch.to_pb().events)

    def _expected(self, w: dict[str, Any]) -> list[Any]:
        out = []
        for revision in sorted(self.history):
            if revision < w["from"]:
                continue
            for e in self.history[revision]:
                in_range = e.kv.key >= w["key"] if w["range_end"] else e.kv.key == w["key"]
                filtered = (e.type.name == "PUT" and FILTER_NOPUT in w["filters"]) or (
                    e.type.name == "DELETE" and FILTER_NODELETE in w["filters"]
                )
                if in_range and not filtered:
                    out.append(e.to_pb(with_prev_kv=w["prev_kv"]))
        return out

    def _matches(self, seen: list[Any], expected: list[Any]) -> bool:
        """Same events in the same order; a prev_kv may be missing only if compacted."""
        assert self.member is not None
        compacted_below = self.member.backend.compact_revision()
        if len(seen) > len(expected):
            return False
        for got, want in zip(seen, expected, strict=False):
            if (got.type, got.kv) != (want.type, want.kv):
                return False
            if got.HasField("prev_kv"):
                if got.prev_kv != want.prev_kv:
                    return False
            elif want.HasField("prev_kv") and want.prev_kv.mod_revision >= compacted_below:
                return False
        return True

    @invariant()
    def delivered_is_a_prefix_of_the_history(self) -> None:
        for w in self.watchers.values():
            assert self._matches(w["seen"], self._expected(w))

    def teardown(self) -> None:
        try:
            if self.member is None:
                return
            for handle, w in self.watchers.items():
                for _ in range(1000):
                    batches = self.member.hub.take(handle)
                    self._receive(handle, batches)
                    watcher = self.member.hub.get(handle)
                    if watcher is None or (
                        watcher.state is WatcherState.SYNCED and not watcher.pending
                    ):
                        break
                expected = self._expected(w)
                note(f"watcher {handle}: {len(w['seen'])} of {len(expected)} events")
                assert self._matches(w["seen"], expected)  # Ordered, Unique
                if w["canceled_at"] is None:
                    assert len(w["seen"]) == len(expected)  # Reliable
                else:  # canceled: only if it still needed compacted history
                    last = w["seen"][-1].kv.mod_revision if w["seen"] else 0
                    assert max(w["from"], last + 1) < w["canceled_at"]
            self.member.backend.close()
        finally:
            self._dir.cleanup()


TestWatchHistory = WatchHistory.TestCase
TestWatchHistory.settings = settings(stateful_step_count=30)


@pytest.mark.parametrize("start_at_compact_revision", [True, False])
def test_a_deletion_at_the_compact_revision_reaches_a_watcher_resuming_there(
    member: Member, start_at_compact_revision: bool
) -> None:
    member.put(b"a")  # 2
    member.delete(b"a")  # 3
    member.do(pb.CompactionRequest(revision=3))
    start = 3 if start_at_compact_revision else 2
    batches = member.hub.take(member.hub.create(1, b"a", start_revision=start))
    if start_at_compact_revision:
        assert _flat(batches) == [("DELETE", b"a", 3)]
    else:
        assert batches[0].canceled and batches[0].compact_revision == 3
