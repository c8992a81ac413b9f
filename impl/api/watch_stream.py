"""The state of one Watch RPC stream: its watchers and the responses waiting to be sent.

A client opens one bidirectional Watch stream and creates, cancels and asks progress of
any number of watchers on it. `WatchStream` keeps the stream's watch ids -> watch hub
handles, turns requests into hub calls and queues the control responses (created,
canceled, progress), and, when the hub reports that a watcher has events, takes them
(`WatchHub.take`) and queues one response per batch. Responses of one watcher leave in
the order they were queued; a watcher's created response precedes its events.

Watch ids: a create request with watch_id 0 gets the next free id of the stream,
counting from 0 as etcd does; a create with an id already in use is answered, as by
etcd, with a created-and-canceled response with watch_id -1 and etcd's reason, and
nothing is registered.

Threading: everything runs on the member's event loop; `on_ready` is called by the hub
during apply and only marks the handle and wakes the writer.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from etcdspec.impl.kv.watch_hub import WatchHub
from etcdspec.impl.pb import rpc_pb2

DUPLICATE_WATCH_ID = "mvcc: duplicate watch ID provided on the WatchStream"

HeaderSource = Callable[[], rpc_pb2.ResponseHeader]


class WatchStream:
    def __init__(
        self,
        hub: WatchHub,
        header: HeaderSource,
        register: Callable[[int, WatchStream | None], None],
    ) -> None:
        self.hub = hub
        self.header = header
        self.register = register
        self.handles: dict[int, int] = {}  # watch_id -> hub handle
        self.watch_ids: dict[int, int] = {}  # hub handle -> watch_id
        self.queue: deque[rpc_pb2.WatchResponse] = deque()
        self.ready: set[int] = set()
        self.wake = asyncio.Event()
        self._next_watch_id = 0
        self._progress_wanted = False
        self.closed = False

    # ---- requests ---------------------------------------------------------------------

    def refuse(self, reason: str) -> None:
        """Answer a create request that registers nothing, as etcd does: created and
        canceled at once, watch_id -1, with `reason`."""
        refused = rpc_pb2.WatchResponse(
            watch_id=-1, created=True, canceled=True, cancel_reason=reason
        )
        refused.header.CopyFrom(self.header())
        self._push(refused)

    def create(self, request: rpc_pb2.WatchCreateRequest) -> None:
        watch_id = request.watch_id
        if watch_id == 0 or watch_id in self.handles:
            if watch_id != 0:
                self.refuse(DUPLICATE_WATCH_ID)
                return
            while self._next_watch_id in self.handles:
                self._next_watch_id += 1
            watch_id = self._next_watch_id
            self._next_watch_id += 1
        created = rpc_pb2.WatchResponse(watch_id=watch_id, created=True)
        created.header.CopyFrom(self.header())
        self._push(created)
        handle = self.hub.create(
            watch_id=watch_id,
            key=request.key,
            range_end=request.range_end,
            start_revision=request.start_revision,
            prev_kv=request.prev_kv,
            filters=list(request.filters),
            progress_notify=request.progress_notify,
        )
        self.handles[watch_id] = handle
        self.watch_ids[handle] = watch_id
        self.register(handle, self)
        self.on_ready(handle)

    def cancel(self, watch_id: int) -> None:
        handle = self.handles.pop(watch_id, None)
        if handle is None:
            return
        self.watch_ids.pop(handle, None)
        self.ready.discard(handle)
        self.hub.cancel(handle)
        self.register(handle, None)
        response = rpc_pb2.WatchResponse(watch_id=watch_id, canceled=True)
        response.header.CopyFrom(self.header())
        self._push(response)

    def progress(self) -> None:
        self._progress_wanted = True
        self.wake.set()

    def on_ready(self, handle: int) -> None:
        self.ready.add(handle)
        self.wake.set()

    # ---- the writer side --------------------------------------------------------------

    def _push(self, response: rpc_pb2.WatchResponse) -> None:
        self.queue.append(response)
        self.wake.set()

    def _drain_ready(self) -> None:
        ready, self.ready = self.ready, set()
        for handle in sorted(ready):
            watch_id = self.watch_ids.get(handle)
            if watch_id is None:
                continue
            for item in self.hub.take(handle):
                response = item.to_pb()
                header = self.header()
                if item.canceled and item.compact_revision:
                    header.revision = 0  # etcd sends a compaction cancel at revision 0
                else:
                    header.revision = max(item.revision, 0) or header.revision
                response.header.CopyFrom(header)
                self.queue.append(response)
                if item.canceled:
                    self.handles.pop(watch_id, None)
                    self.watch_ids.pop(handle, None)
                    self.register(handle, None)
        if self._progress_wanted:
            revision = self.hub.request_progress(self.handles.values())
            if revision is not None:
                self._progress_wanted = False
                response = rpc_pb2.WatchResponse(watch_id=-1)
                header = self.header()
                header.revision = revision
                response.header.CopyFrom(header)
                self.queue.append(response)

    async def next_response(self) -> rpc_pb2.WatchResponse:
        """The next response to send. A client that half-closes its side still gets
        events (as from etcd); the stream ends when the client cancels the call."""
        while True:
            if not self.queue:
                self._drain_ready()
            if self.queue:
                return self.queue.popleft()
            self.wake.clear()
            await self.wake.wait()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for handle in list(self.watch_ids):
            self.hub.cancel(handle)
            self.register(handle, None)
        self.handles.clear()
        self.watch_ids.clear()


class WatchStreams:
    """The watch streams open at a member, found by the hub handles of their watchers: the
    watch hub says which handle has events (`on_ready`, the state machine's
    on_watch_ready), and the stream that holds it is woken."""

    def __init__(self, hub: WatchHub, header: HeaderSource) -> None:
        self.hub = hub
        self.header = header
        self._by_handle: dict[int, WatchStream] = {}

    def open(self) -> WatchStream:
        return WatchStream(self.hub, self.header, self._register)

    def _register(self, handle: int, stream: WatchStream | None) -> None:
        if stream is None:
            self._by_handle.pop(handle, None)
        else:
            self._by_handle[handle] = stream

    def on_ready(self, handle: int) -> None:
        stream = self._by_handle.get(handle)
        if stream is not None:
            stream.on_ready(handle)
