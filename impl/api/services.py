"""The client API: etcd v3's gRPC services over one member, served by `grpc_h2`.

Each servicer validates a request as etcd's v3rpc layer does (empty keys, txn op counts
and duplicate keys, request size), then hands it to the member (`etcdspec.impl.server.member`):
writes and lease grants/revokes become proposals through Raft; linearizable reads wait
for a ReadIndex and read locally; serializable reads read locally at once. Every error
leaves as etcd's gRPC status code and message (`etcdspec.impl.errors.RpcError`, which
the store raises too); anything else is an internal error (UNKNOWN). Nothing of a
rejected request is applied: validation happens before the proposal.

Every unary method is one `@unary` handler `(self, request) -> response`; the decorator
does the error mapping. Proposals go through `_propose(member, field, request, answer)`.
The servicers are grpc's generated servicer classes, registered as generic handlers
(`GenericOnly`) into our own HTTP/2 gRPC server (`etcdspec.impl.rpc.grpc_h2`), which costs
a seventh of grpc.aio's CPU per call (bench/grpc_ceiling.py); grpc.aio's server would
take them unchanged. A handler's context is anything with grpc's `abort` (`Context`).

Ownership: servicers hold no state of their own except per-stream state (watch ids and
lease keep-alive loops), which ends with the stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, TypeVar

import grpc
from google.protobuf.message import Message

from etcdspec.impl import errors, failpoints
from etcdspec.impl.errors import RpcError
from etcdspec.impl.kv import mvcc
from etcdspec.impl.pb import raft_internal_pb2 as internal_pb2
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc
from etcdspec.impl.rpc.grpc_h2 import GrpcH2Server

if TYPE_CHECKING:
    from etcdspec.impl.server.member import Member

log = logging.getLogger("etcdspec.impl.api.services")

GRPC_OVERHEAD_BYTES = 512 * 1024  # etcd lets gRPC frames exceed --max-request-bytes by this


def status_of(error: BaseException) -> tuple[grpc.StatusCode, str] | None:
    """The gRPC (code, message) an error maps to, or None when it is not an etcd error."""
    if isinstance(error, RpcError):
        return error.code, error.message
    return None


async def _abort_with(context: Context, error: Exception) -> None:
    """Abort the call as etcd would for `error`: its code and message, or UNKNOWN."""
    mapped = status_of(error)
    if mapped is None:
        log.exception("internal error serving a request")
        await context.abort(grpc.StatusCode.UNKNOWN, f"etcdserver: internal error: {error}")
    else:
        await context.abort(mapped[0], mapped[1])


class Context(Protocol):
    """What our servicers use of a call's context: grpc_h2's Call and grpc.aio's
    ServicerContext both have it."""

    async def abort(self, code: grpc.StatusCode, details: str = "") -> NoReturn: ...


Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)
S = TypeVar("S")
Handler = Callable[[S, Req], Awaitable[Resp]]
Method = Callable[[S, Req, Context], Awaitable[Resp]]


def unary(handler: Handler[S, Req, Resp]) -> Method[S, Req, Resp]:
    """The gRPC unary method serving `handler(self, request)`: its answer, or an abort
    with etcd's code and message when it raises an etcd error (UNKNOWN otherwise)."""

    @functools.wraps(handler)
    async def method(self: S, request: Req, context: Context) -> Resp:
        try:
            return await handler(self, request)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            await _abort_with(context, error)
            raise  # abort raises; this is not reached

    return method


async def _propose(member: Member, field: str, request: Message, answer: type[Resp]) -> Resp:
    """Propose `request` as the InternalRaftRequest field `field`; the applied answer."""
    internal = internal_pb2.InternalRaftRequest()
    getattr(internal, field).CopyFrom(request)
    response = await member.propose(internal)
    if not isinstance(response, answer):
        raise TypeError(f"{field} was answered with {type(response).__name__}")
    return response


class KVServicer(rpc_pb2_grpc.KVServicer):
    def __init__(self, member: Member) -> None:
        self.member = member

    @unary
    async def Range(self, request: rpc_pb2.RangeRequest) -> rpc_pb2.RangeResponse:
        mvcc.check_range(request)
        if not request.serializable and not failpoints.on("local_linearizable_read"):
            await self.member.linearizable_barrier()
        return self.member.local_range(request)

    @unary
    async def Put(self, request: rpc_pb2.PutRequest) -> rpc_pb2.PutResponse:
        mvcc.check_put(request)
        return await _propose(self.member, "put", request, rpc_pb2.PutResponse)

    @unary
    async def DeleteRange(self, request: rpc_pb2.DeleteRangeRequest) -> rpc_pb2.DeleteRangeResponse:
        mvcc.check_delete(request)
        return await _propose(self.member, "delete_range", request, rpc_pb2.DeleteRangeResponse)

    @unary
    async def Txn(self, request: rpc_pb2.TxnRequest) -> rpc_pb2.TxnResponse:
        mvcc.check_txn(request)
        return await _propose(self.member, "txn", request, rpc_pb2.TxnResponse)

    @unary
    async def Compact(self, request: rpc_pb2.CompactionRequest) -> rpc_pb2.CompactionResponse:
        return await _propose(self.member, "compaction", request, rpc_pb2.CompactionResponse)


class LeaseServicer(rpc_pb2_grpc.LeaseServicer):
    def __init__(self, member: Member) -> None:
        self.member = member

    @unary
    async def LeaseGrant(self, request: rpc_pb2.LeaseGrantRequest) -> rpc_pb2.LeaseGrantResponse:
        return await _propose(self.member, "lease_grant", request, rpc_pb2.LeaseGrantResponse)

    @unary
    async def LeaseRevoke(self, request: rpc_pb2.LeaseRevokeRequest) -> rpc_pb2.LeaseRevokeResponse:
        return await _propose(self.member, "lease_revoke", request, rpc_pb2.LeaseRevokeResponse)

    async def LeaseKeepAlive(
        self,
        request_iterator: AsyncIterator[rpc_pb2.LeaseKeepAliveRequest],
        context: Context,
    ) -> AsyncIterator[rpc_pb2.LeaseKeepAliveResponse]:
        async for request in request_iterator:
            try:
                ttl = await self.member.lease_keepalive(request.ID)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                mapped = status_of(error)
                if mapped is None:
                    raise
                if mapped[1] == errors.LEASE_NOT_FOUND.message:
                    # etcd answers an unknown lease on the stream with TTL 0.
                    ttl = 0
                else:
                    await context.abort(mapped[0], mapped[1])
                    return
            yield rpc_pb2.LeaseKeepAliveResponse(
                header=self.member.header(), ID=request.ID, TTL=ttl
            )

    @unary
    async def LeaseTimeToLive(
        self, request: rpc_pb2.LeaseTimeToLiveRequest
    ) -> rpc_pb2.LeaseTimeToLiveResponse:
        return await self.member.lease_time_to_live(request)

    @unary
    async def LeaseLeases(self, request: rpc_pb2.LeaseLeasesRequest) -> rpc_pb2.LeaseLeasesResponse:
        return await self.member.lease_leases()


class ClusterServicer(rpc_pb2_grpc.ClusterServicer):
    def __init__(self, member: Member) -> None:
        self.member = member

    @unary
    async def MemberList(self, request: rpc_pb2.MemberListRequest) -> rpc_pb2.MemberListResponse:
        if request.linearizable:
            await self.member.linearizable_barrier()
        return self.member.member_list()


class MaintenanceServicer(rpc_pb2_grpc.MaintenanceServicer):
    def __init__(self, member: Member) -> None:
        self.member = member

    @unary
    async def Status(self, request: rpc_pb2.StatusRequest) -> rpc_pb2.StatusResponse:
        return self.member.status()

    @unary
    async def Defragment(self, request: rpc_pb2.DefragmentRequest) -> rpc_pb2.DefragmentResponse:
        return await self.member.defragment()

    @unary
    async def Alarm(self, request: rpc_pb2.AlarmRequest) -> rpc_pb2.AlarmResponse:
        if request.action == rpc_pb2.AlarmRequest.GET:
            return self.member.alarm_list()
        return await _propose(self.member, "alarm", request, rpc_pb2.AlarmResponse)

    @unary
    async def Hash(self, request: rpc_pb2.HashRequest) -> rpc_pb2.HashResponse:
        return self.member.hash()

    @unary
    async def HashKV(self, request: rpc_pb2.HashKVRequest) -> rpc_pb2.HashKVResponse:
        return self.member.hash_kv(request.revision)

    async def Snapshot(
        self, request: rpc_pb2.SnapshotRequest, context: Context
    ) -> AsyncIterator[rpc_pb2.SnapshotResponse]:
        try:
            chunks = await self.member.snapshot_chunks()
        except Exception as error:
            mapped = status_of(error)
            if mapped is None:
                raise
            await context.abort(mapped[0], mapped[1])
            return
        for index, chunk in enumerate(chunks):
            remaining = sum(len(c) for c in chunks[index + 1 :])
            yield rpc_pb2.SnapshotResponse(
                header=self.member.header(),
                remaining_bytes=remaining,
                blob=chunk,
                version=self.member.storage_version,
            )

    @unary
    async def MoveLeader(self, request: rpc_pb2.MoveLeaderRequest) -> rpc_pb2.MoveLeaderResponse:
        return await self.member.move_leader(request.targetID)


class WatchServicer(rpc_pb2_grpc.WatchServicer):
    """One bidirectional stream per client; any number of watchers on it.

    A reader task turns requests into hub calls and queues the answers (created,
    canceled, progress); when the hub signals a watcher of this stream has events, the
    writer takes them and sends one response per revision batch. The created response of
    a watcher is always queued before any of its events.
    """

    def __init__(self, member: Member) -> None:
        self.member = member

    async def Watch(
        self,
        request_iterator: AsyncIterator[rpc_pb2.WatchRequest],
        context: Context,
    ) -> AsyncIterator[rpc_pb2.WatchResponse]:
        stream = self.member.open_watch_stream()
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
        self, request_iterator: AsyncIterator[rpc_pb2.WatchRequest], stream: Any
    ) -> None:
        async for request in request_iterator:
            kind = request.WhichOneof("request_union")
            if kind == "create_request":
                stream.create(request.create_request)
            elif kind == "cancel_request":
                stream.cancel(request.cancel_request.watch_id)
            elif kind == "progress_request":
                stream.progress()


def max_receive_bytes(max_request_bytes: int) -> int:
    return max_request_bytes + GRPC_OVERHEAD_BYTES


class GenericHandlerSink(Protocol):
    """What GenericOnly needs of a server: GrpcH2Server and grpc.aio.Server are both one."""

    def add_generic_rpc_handlers(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None: ...


class GenericOnly:
    """A server as the generated `add_*Servicer_to_server` functions see it, keeping only
    their generic handlers.

    The generated code also registers every method with `add_registered_method_handlers`,
    which GrpcH2Server does not have. grpc.aio (bench/grpc_ceiling.py) has it, and then
    keeps one pending request per registered method (19 for our five services) and waits
    on all of them with `asyncio.wait` for every call it accepts, which costs more CPU per
    call than the registration saves. With generic handlers only, the handlers, codes and
    messages are the same.
    """

    def __init__(self, server: GenericHandlerSink) -> None:
        self.server = server

    def add_generic_rpc_handlers(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        self.server.add_generic_rpc_handlers(handlers)

    def add_registered_method_handlers(self, service: str, handlers: dict[str, Any]) -> None:
        """Ignored: the same handlers arrive through add_generic_rpc_handlers."""


async def start_grpc_server(member: Member, targets: list[str]) -> GrpcH2Server:
    """Create, bind and start the gRPC server with every servicer; returns it running."""
    server = GrpcH2Server(max_receive_bytes(member.config.max_request_bytes))
    handlers = GenericOnly(server)
    rpc_pb2_grpc.add_KVServicer_to_server(KVServicer(member), handlers)
    rpc_pb2_grpc.add_LeaseServicer_to_server(LeaseServicer(member), handlers)
    rpc_pb2_grpc.add_ClusterServicer_to_server(ClusterServicer(member), handlers)
    rpc_pb2_grpc.add_MaintenanceServicer_to_server(MaintenanceServicer(member), handlers)
    rpc_pb2_grpc.add_WatchServicer_to_server(WatchServicer(member), handlers)
    for target in targets:
        server.add_insecure_port(target)
    await server.start()
    return server
