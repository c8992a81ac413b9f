"""etcd's Cluster service: MemberList (a linearizable one waits for a ReadIndex round)."""

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
