"""etcd's Watch service: one bidirectional stream per client, any number of watchers on it.

A reader task turns requests into the stream's calls (etcdspec.impl.api.watch_stream),
which queue the answers (created, canceled, progress); when the watch hub signals that a
watcher of this stream has events, the writer takes them and sends one response per
revision batch. The created response of a watcher is always queued before its events.

Auth: each create request is checked against the stream's token (read from the call's
metadata at that moment, as etcd does): a caller without READ over the watched range is
answered created-and-canceled with etcd's reason, and nothing is registered.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from etcdspec.impl.api.handlers import Context, caller
from etcdspec.impl.api.ports import MemberPorts
from etcdspec.impl.api.watch_stream import WatchStream
from etcdspec.impl.errors import RpcError
from etcdspec.impl.kv.auth_tokens import TokenNotApplied
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc

# etcd sends the status error's text as the reason: rpctypes.ErrGRPCPermissionDenied.Error().
PERMISSION_DENIED_REASON = "rpc error: code = PermissionDenied desc = etcdserver: permission denied"


class WatchServicer(rpc_pb2_grpc.WatchServicer):
    def __init__(self, ports: MemberPorts) -> None:
        self.watches = ports.watches
        self.auth = ports.state.auth
        self.cert_auth = ports.client_cert_auth  # a certificate's CN as the caller
        self.reads = ports.reads

    async def Watch(
        self,
        request_iterator: AsyncIterator[rpc_pb2.WatchRequest],
        context: Context,
    ) -> AsyncIterator[rpc_pb2.WatchResponse]:
        stream = self.watches.open()
        reader = asyncio.create_task(self._read(request_iterator, stream, context))
        try:
            while True:
                yield await stream.next_response()
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader
            stream.close()

    async def _read(
        self,
        request_iterator: AsyncIterator[rpc_pb2.WatchRequest],
        stream: WatchStream,
        context: Context,
    ) -> None:
        async for request in request_iterator:
            kind = request.WhichOneof("request_union")
            if kind == "create_request":
                if self.auth.enabled and not await self._permitted(request.create_request, context):
                    stream.refuse(PERMISSION_DENIED_REASON)
                else:
                    stream.create(request.create_request)
            elif kind == "cancel_request":
                stream.cancel(request.cancel_request.watch_id)
            elif kind == "progress_request":
                stream.progress()

    async def _permitted(self, create: rpc_pb2.WatchCreateRequest, context: Context) -> bool:
        """Whether the stream's caller may read the watched range (etcd's isWatchPermitted:
        a bad token, no token or a stale revision are all "no"). A token issued at an
        index not applied here yet waits for it, as in unary_in_context."""
        try:
            try:
                who = caller(self.auth, context, self.cert_auth)
            except TokenNotApplied:
                await self.reads.barrier()
                who = caller(self.auth, context, self.cert_auth)
            self.auth.check_range(who, create.key, create.range_end)
        except (RpcError, TokenNotApplied):
            return False
        return True
