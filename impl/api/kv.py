"""etcd's KV service: Range, Put, DeleteRange, Txn and Compact.

Each request is checked as etcd's v3rpc layer checks it (empty keys, txn op counts and
duplicate keys) before anything else, so that nothing of a rejected request is applied.
Writes are proposals through Raft; a linearizable Range waits for a ReadIndex round and
reads the local state machine; a serializable one reads it at once.
"""

from __future__ import annotations

from etcdspec.impl import failpoints
from etcdspec.impl.api.handlers import propose, unary
from etcdspec.impl.api.ports import MemberPorts
from etcdspec.impl.kv import request_checks as checks
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc


class KVServicer(rpc_pb2_grpc.KVServicer):
    def __init__(self, ports: MemberPorts) -> None:
        self.state = ports.state
        self.proposer = ports.proposer
        self.reads = ports.reads
        self.cluster = ports.cluster

    @unary
    async def Range(self, request: rpc_pb2.RangeRequest) -> rpc_pb2.RangeResponse:
        checks.check_range(request)
        if not request.serializable and not failpoints.on("local_linearizable_read"):
            await self.reads.barrier()
        response = self.state.range(request)
        response.header.CopyFrom(self.cluster.header_at(response.header.revision))
        return response

    @unary
    async def Put(self, request: rpc_pb2.PutRequest) -> rpc_pb2.PutResponse:
        checks.check_put(request)
        return await propose(self.proposer, "put", request, rpc_pb2.PutResponse)

    @unary
    async def DeleteRange(self, request: rpc_pb2.DeleteRangeRequest) -> rpc_pb2.DeleteRangeResponse:
        checks.check_delete(request)
        return await propose(self.proposer, "delete_range", request, rpc_pb2.DeleteRangeResponse)

    @unary
    async def Txn(self, request: rpc_pb2.TxnRequest) -> rpc_pb2.TxnResponse:
        checks.check_txn(request)
        return await propose(self.proposer, "txn", request, rpc_pb2.TxnResponse)

    @unary
    async def Compact(self, request: rpc_pb2.CompactionRequest) -> rpc_pb2.CompactionResponse:
        return await propose(self.proposer, "compaction", request, rpc_pb2.CompactionResponse)
