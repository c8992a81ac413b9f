"""etcd's Cluster service: MemberList (a linearizable one waits for a ReadIndex round), and
MemberAdd, MemberRemove, MemberUpdate, MemberPromote (the member's membership changes)."""

from __future__ import annotations

from etcdspec.impl.api.handlers import (
    TOKEN_METADATA,
    TOKEN_METADATA_GATEWAY,
    Context,
    caller,
    unary,
    unary_in_context,
)
from etcdspec.impl.api.ports import MemberPorts, Metadata
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc


class ClusterServicer(rpc_pb2_grpc.ClusterServicer):
    def __init__(self, ports: MemberPorts) -> None:
        self.reads = ports.reads
        self.cluster = ports.cluster
        self.state = ports.state

    def _check_admin(self, context: Context) -> Metadata:
        """etcd's checkMembershipOperationPermission: with auth enabled, only root may
        change the membership (errors in their gRPC form). The caller's token, to hand on
        with a call forwarded to the leader."""
        auth = self.state.auth
        if not auth.enabled:
            return ()
        auth.check_admin(caller(auth, context))
        return tuple(
            (TOKEN_METADATA, value)
            for name, value in context.invocation_metadata() or ()
            if name in (TOKEN_METADATA, TOKEN_METADATA_GATEWAY)
        )

    @unary
    async def MemberList(self, request: rpc_pb2.MemberListRequest) -> rpc_pb2.MemberListResponse:
        await self.cluster.wait_published()  # as etcd: not before its attributes are
        if request.linearizable:
            await self.reads.barrier()
        return self.cluster.member_list()

    @unary_in_context
    async def MemberAdd(
        self, request: rpc_pb2.MemberAddRequest, context: Context
    ) -> rpc_pb2.MemberAddResponse:
        return await self.cluster.member_add(request, self._check_admin(context))

    @unary_in_context
    async def MemberRemove(
        self, request: rpc_pb2.MemberRemoveRequest, context: Context
    ) -> rpc_pb2.MemberRemoveResponse:
        return await self.cluster.member_remove(request, self._check_admin(context))

    @unary_in_context
    async def MemberUpdate(
        self, request: rpc_pb2.MemberUpdateRequest, context: Context
    ) -> rpc_pb2.MemberUpdateResponse:
        return await self.cluster.member_update(request, self._check_admin(context))

    @unary_in_context
    async def MemberPromote(
        self, request: rpc_pb2.MemberPromoteRequest, context: Context
    ) -> rpc_pb2.MemberPromoteResponse:
        return await self.cluster.member_promote(request, self._check_admin(context))
