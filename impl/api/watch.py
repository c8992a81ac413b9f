"""etcd's Watch service: one bidirectional stream per client, any number of watchers on it.

A reader task turns requests into the stream's calls (etcdspec.impl.api.watch_stream),
which queue the answers (created, canceled, progress); when the watch hub signals that a
watcher of this stream has events, the writer takes them and sends one response per
revision batch. The created response of a watcher is always queued before its events.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from etcdspec.impl.api.handlers import Context
from etcdspec.impl.api.ports import MemberPorts
from etcdspec.impl.api.watch_stream import WatchStream
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc


class WatchServicer(rpc_pb2_grpc.WatchServicer):
    def __init__(self, ports: MemberPorts) -> None:
        self.watches = ports.watches

    async def Watch(
        self,
        request_iterator: AsyncIterator[rpc_pb2.WatchRequest],
        context: Context,
    ) -> AsyncIterator[rpc_pb2.WatchResponse]:
        stream = self.watches.open()
        reader = asyncio.create_task(self._read(request_iterator, stream))
        try:
            while True:
                yield await stream.next_response()
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader
            stream.close()

    async def _read(
        self, request_iterator: AsyncIterator[rpc_pb2.WatchRequest], stream: WatchStream
    ) -> None:
        async for request in request_iterator:
            kind = request.WhichOneof("request_union")
            if kind == "create_request":
                stream.create(request.create_request)
            elif kind == "cancel_request":
                stream.cancel(request.cancel_request.watch_id)
            elif kind == "progress_request":
                stream.progress()
