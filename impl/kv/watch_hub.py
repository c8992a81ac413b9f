"""Watchers on keys and ranges, fed by applied revisions, with bounded buffers.

Contract:
- `notify(revision, events)` is called by the applier after the revision's backend
  transaction committed, once per new revision, with ALL of that revision's events in
  order. A watcher receives a revision's matching events together, in one response, and
  never part of a revision.
- Each watcher has a `next_revision`: the first revision it has not yet been given.
  A synced watcher gets new revisions straight from `notify`. A watcher that starts in the
  past, or whose buffer would pass `buffer_limit` events, is unsynced: `notify` skips it
  and it is caught up from the backend (`history`) when its consumer drains it (`take`)
  or the server calls `sync()`; catch-up reads at most about `buffer_limit` events at a
  time (whole revisions), so memory stays bounded however slow the consumer is.
- A watcher whose next revision has been compacted away (next_revision <
  compact_revision, etcd's rule: starting AT the compact revision is allowed) gets one
  response with compact_revision set, canceled, header revision 0 and no cancel reason
  (as etcd 3.5 sends it), and is removed after it is taken.
- Catch-up events carry prev_kv only when the previous revision still exists and is not
  a deletion (as etcd).
- Filters (NOPUT, NODELETE) drop events; prev_kv is included only if asked for.
- Progress: `progress()` queues an empty response carrying the current revision for
  synced watchers that asked for progress_notify and have nothing pending;
  `request_progress()` answers a client's progress request.
- `on_ready(handle)` is called whenever a watcher gets something to take.
- Not thread-safe: call everything from the thread that applies entries.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from etcdspec.impl import failpoints
from etcdspec.impl.kv.backend import Backend, KeyRevision
from etcdspec.impl.kv.mvcc import Event, EventType, KeyValue, key_in_range
from etcdspec.impl.pb import rpc_pb2

DEFAULT_BUFFER_LIMIT = 1024
FILTER_NOPUT = rpc_pb2.WatchCreateRequest.NOPUT
FILTER_NODELETE = rpc_pb2.WatchCreateRequest.NODELETE


class WatcherState(enum.Enum):
    SYNCED = "synced"
    UNSYNCED = "unsynced"
    CANCELED = "canceled"


@dataclass(frozen=True)
class WatchEvents:
    """One response for one watcher: events (whole revisions), a progress mark, or a cancel."""

    watch_id: int
    revision: int
    events: tuple[Event, ...] = ()
    compact_revision: int = 0
    canceled: bool = False
    cancel_reason: str = ""
    with_prev_kv: bool = False

    def to_pb(self) -> rpc_pb2.WatchResponse:
        resp = rpc_pb2.WatchResponse(
            watch_id=self.watch_id,
            compact_revision=self.compact_revision,
            canceled=self.canceled,
            cancel_reason=self.cancel_reason,
        )
        resp.header.revision = self.revision
        resp.events.extend(e.to_pb(with_prev_kv=self.with_prev_kv) for e in self.events)
        return resp

    def describe(self) -> str:
        if self.canceled:
            return (
                f"watch {self.watch_id} canceled at rev {self.revision} "
                f"compact_revision={self.compact_revision} reason={self.cancel_reason!r}"
            )
        if not self.events:
            return f"watch {self.watch_id} progress rev {self.revision}"
        body = "; ".join(e.describe() for e in self.events)
        return f"watch {self.watch_id} rev {self.revision}: {body}"


@dataclass
class Watcher:
    handle: int
    watch_id: int
    key: bytes
    range_end: bytes
    prev_kv: bool
    filters: frozenset[int]
    progress_notify: bool
    next_revision: int
    state: WatcherState
    pending: deque[WatchEvents] = field(default_factory=deque)
    pending_events: int = 0
    skip_first: bool = False  # failpoint skip_watch_event_on_resume only

    def wants(self, event: Event) -> bool:
        if event.type is EventType.PUT and FILTER_NOPUT in self.filters:
            return False
        if event.type is EventType.DELETE and FILTER_NODELETE in self.filters:
            return False
        return key_in_range(event.kv.key, self.key, self.range_end)

    def describe(self) -> str:
        return (
            f"watcher {self.handle} (watch_id {self.watch_id}) [{self.key!r}, "
            f"{self.range_end!r}) next={self.next_revision} {self.state.value} "
            f"pending={self.pending_events}"
        )


class WatchHub:
    """All watchers of one member."""

    def __init__(
        self,
        backend: Backend,
        buffer_limit: int = DEFAULT_BUFFER_LIMIT,
        on_ready: Callable[[int], None] | None = None,
    ) -> None:
        if buffer_limit < 1:
            raise ValueError(f"buffer_limit must be >= 1, got {buffer_limit}")
        self.backend = backend
        self.buffer_limit = buffer_limit
        self.on_ready = on_ready
        self.watchers: dict[int, Watcher] = {}
        self._next_handle = 1

    # ---- lifecycle of watchers ----

    def create(
        self,
        watch_id: int,
        key: bytes,
        range_end: bytes = b"",
        start_revision: int = 0,
        prev_kv: bool = False,
        filters: Iterable[int] = (),
        progress_notify: bool = False,
    ) -> int:
        """Register a watcher; return its handle. start_revision 0 means "from now"."""
        current = self.backend.current_revision()
        handle = self._next_handle
        self._next_handle += 1
        past = 0 < start_revision <= current
        watcher = Watcher(
            handle=handle,
            watch_id=watch_id,
            key=key,
            range_end=range_end,
            prev_kv=prev_kv,
            filters=frozenset(filters),
            progress_notify=progress_notify,
            next_revision=start_revision if start_revision > 0 else current + 1,
            state=WatcherState.UNSYNCED if past else WatcherState.SYNCED,
            skip_first=past and failpoints.on("skip_watch_event_on_resume"),
        )
        self.watchers[handle] = watcher
        if past:
            self._catch_up(watcher)
        return handle

    def cancel(self, handle: int) -> bool:
        """Remove a watcher; False if there was none."""
        return self.watchers.pop(handle, None) is not None

    def get(self, handle: int) -> Watcher | None:
        return self.watchers.get(handle)

    def unsynced(self) -> list[int]:
        return sorted(h for h, w in self.watchers.items() if w.state is WatcherState.UNSYNCED)

    # ---- feeding ----

    def notify(self, revision: int, events: Sequence[Event]) -> None:
        """Deliver one committed revision's events to the synced watchers."""
        if not events or not self.watchers:
            return
        for watcher in list(self.watchers.values()):
            if watcher.state is not WatcherState.SYNCED or revision < watcher.next_revision:
                continue
            if revision > watcher.next_revision:
                # A revision went by without notify (e.g. a snapshot restore): catch up.
                watcher.state = WatcherState.UNSYNCED
                continue
            matched = tuple(e for e in events if watcher.wants(e))
            if not matched:
                watcher.next_revision = revision + 1
                continue
            if watcher.pending_events and (
                watcher.pending_events + len(matched) > self.buffer_limit
            ):
                watcher.state = WatcherState.UNSYNCED  # next_revision stays at `revision`
                continue
            watcher.next_revision = revision + 1
            self._enqueue(watcher, WatchEvents(watcher.watch_id, revision, matched))

    def on_restore(self) -> None:
        """The backend was replaced by a snapshot: every watcher catches up from it."""
        for watcher in self.watchers.values():
            if watcher.state is WatcherState.SYNCED:
                watcher.state = WatcherState.UNSYNCED

    def _enqueue(self, watcher: Watcher, item: WatchEvents) -> None:
        if watcher.prev_kv and item.events:
            item = WatchEvents(
                item.watch_id,
                item.revision,
                item.events,
                item.compact_revision,
                item.canceled,
                item.cancel_reason,
                with_prev_kv=True,
            )
        watcher.pending.append(item)
        watcher.pending_events += len(item.events)
        if self.on_ready is not None:
            self.on_ready(watcher.handle)

    # ---- consuming ----

    def take(self, handle: int) -> list[WatchEvents]:
        """Everything queued for a watcher; an unsynced one is then caught up once more."""
        watcher = self.watchers.get(handle)
        if watcher is None:
            return []
        out = list(watcher.pending)
        watcher.pending.clear()
        watcher.pending_events = 0
        if watcher.state is WatcherState.UNSYNCED:
            self._catch_up(watcher)
            out.extend(watcher.pending)
            watcher.pending.clear()
            watcher.pending_events = 0
        if watcher.state is WatcherState.CANCELED:
            del self.watchers[handle]
        return out

    def sync(self) -> list[int]:
        """Catch up every unsynced watcher whose buffer has room; return the handles served."""
        served = []
        for handle in self.unsynced():
            watcher = self.watchers[handle]
            if watcher.pending_events < self.buffer_limit:
                self._catch_up(watcher)
                served.append(handle)
        return served

    def _catch_up(self, watcher: Watcher) -> None:
        current = self.backend.current_revision()
        compact = self.backend.compact_revision()
        if watcher.next_revision < compact:
            watcher.state = WatcherState.CANCELED
            # As etcd 3.5 sends it: no header revision, no cancel reason.
            self._enqueue(
                watcher,
                WatchEvents(watcher.watch_id, 0, compact_revision=compact, canceled=True),
            )
            return
        if watcher.next_revision > current:
            watcher.state = WatcherState.SYNCED
            return
        room = max(1, self.buffer_limit - watcher.pending_events)
        rows = self.backend.history(
            watcher.key, watcher.range_end, watcher.next_revision, current, limit=room
        )
        truncated = len(rows) >= room and rows[-1].main < current
        upto = rows[-1].main if truncated else current
        events = tuple(
            e for e in (self._event(row, watcher.prev_kv) for row in rows) if watcher.wants(e)
        )
        if watcher.skip_first and events:
            events, watcher.skip_first = events[1:], False
        if events:
            self._enqueue(watcher, WatchEvents(watcher.watch_id, upto, events))
        watcher.next_revision = upto + 1
        if not truncated:
            watcher.state = WatcherState.SYNCED
            watcher.skip_first = False

    def _event(self, row: KeyRevision, with_prev: bool) -> Event:
        prev = None
        if with_prev:
            before = self.backend.previous(row.key, row.main)
            if before is not None and not before.tombstone:
                prev = KeyValue.from_row(before)
        if row.tombstone:
            return Event(EventType.DELETE, KeyValue(row.key, b"", 0, row.main, 0, 0), prev)
        return Event(EventType.PUT, KeyValue.from_row(row), prev)

    # ---- progress ----

    def progress(self) -> list[int]:
        """Queue a progress response for idle synced progress_notify watchers; their handles."""
        current = self.backend.current_revision()
        served = []
        for watcher in self.watchers.values():
            if (
                watcher.progress_notify
                and watcher.state is WatcherState.SYNCED
                and not watcher.pending
            ):
                self._enqueue(watcher, WatchEvents(watcher.watch_id, current))
                served.append(watcher.handle)
        return served

    def request_progress(self, handles: Iterable[int]) -> int | None:
        """The revision to report for a progress request, or None while any is catching up."""
        for handle in handles:
            watcher = self.watchers.get(handle)
            if watcher is not None and (
                watcher.state is not WatcherState.SYNCED or watcher.pending
            ):
                return None
        return self.backend.current_revision()
