"""etcd's Cluster service: MemberList (a linearizable one waits for a ReadIndex round), and
MemberAdd, MemberRemove, MemberUpdate, MemberPromote (the member's membership changes)."""

from __future__ import annotations

from etcdspec.impl.api.handlers import unary
from etcdspec.impl.api.ports import MemberPorts
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc


class ClusterServicer(rpc_pb2_grpc.ClusterServicer):
    def __init__(self, ports: MemberPorts) -> None:
        self.reads = ports.reads
        self.cluster = ports.cluster

    @unary
    async def MemberList(self, request: rpc_pb2.MemberListRequest) -> rpc_pb2.MemberListResponse:
        if request.linearizable:
            await self.reads.barrier()
        return self.cluster.member_list()

    @unary
    async def MemberAdd(self, request: rpc_pb2.MemberAddRequest) -> rpc_pb2.MemberAddResponse:
        return await self.cluster.member_add(request)

    @unary
    async def MemberRemove(
        self, request: rpc_pb2.MemberRemoveRequest
    ) -> rpc_pb2.MemberRemoveResponse:
        return await self.cluster.member_remove(request)

    @unary
    async def MemberUpdate(
        self, request: rpc_pb2.MemberUpdateRequest
    ) -> rpc_pb2.MemberUpdateResponse:
        return await self.cluster.member_update(request)

    @unary
    async def MemberPromote(
        self, request: rpc_pb2.MemberPromoteRequest
    ) -> rpc_pb2.MemberPromoteResponse:
        return await self.cluster.member_promote(request)
