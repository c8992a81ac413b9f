"""etcd's KV service: Range, Put, DeleteRange, Txn and Compact.

Each request is checked as etcd's v3rpc layer checks it (empty keys, txn op counts and
duplicate keys) before anything else, so that nothing of a rejected request is applied.
Writes are proposals through Raft; a linearizable Range waits for a ReadIndex round and
reads the local state machine; a serializable one reads it at once.

Auth: writes carry the caller (its token's user and auth revision) to the applier, which
checks them; a Range is checked here before it is served, and refused if the auth store
moved on while it was served (etcd's doSerialize).
"""

from __future__ import annotations

from etcdspec.impl import errors, failpoints
from etcdspec.impl.api.handlers import Context, caller, propose, unary_in_context
from etcdspec.impl.api.ports import MemberPorts
from etcdspec.impl.errors import RpcError
from etcdspec.impl.kv import request_checks as checks
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc


class KVServicer(rpc_pb2_grpc.KVServicer):
    def __init__(self, ports: MemberPorts) -> None:
        self.state = ports.state
        self.proposer = ports.proposer
        self.reads = ports.reads
        self.cluster = ports.cluster
        self.auth = ports.state.auth
        self.cert_auth = ports.client_cert_auth  # a certificate's CN as the caller

    @unary_in_context
    async def Range(self, request: rpc_pb2.RangeRequest, context: Context) -> rpc_pb2.RangeResponse:
        checks.check_range(request)
        if not request.serializable and not failpoints.on("local_linearizable_read"):
            await self.reads.barrier()
        if self.auth.enabled:
            who = caller(self.auth, context, self.cert_auth)
            self.auth.check_range(who, request.key, request.range_end)
            response = self.state.range(request)
            if who.revision and who.revision != self.auth.revision:
                raise RpcError(errors.AUTH_OLD_REVISION)
        else:
            response = self.state.range(request)
        response.header.CopyFrom(self.cluster.header_at(response.header.revision))
        return response

    @unary_in_context
    async def Put(self, request: rpc_pb2.PutRequest, context: Context) -> rpc_pb2.PutResponse:
        checks.check_put(request)
        who = caller(self.auth, context, self.cert_auth)
        return await propose(self.proposer, "put", request, rpc_pb2.PutResponse, who)

    @unary_in_context
    async def DeleteRange(
        self, request: rpc_pb2.DeleteRangeRequest, context: Context
    ) -> rpc_pb2.DeleteRangeResponse:
        checks.check_delete(request)
        who = caller(self.auth, context, self.cert_auth)
        return await propose(
            self.proposer, "delete_range", request, rpc_pb2.DeleteRangeResponse, who
        )

    @unary_in_context
    async def Txn(self, request: rpc_pb2.TxnRequest, context: Context) -> rpc_pb2.TxnResponse:
        checks.check_txn(request)
        who = caller(self.auth, context, self.cert_auth)
        return await propose(self.proposer, "txn", request, rpc_pb2.TxnResponse, who)

    @unary_in_context
    async def Compact(
        self, request: rpc_pb2.CompactionRequest, context: Context
    ) -> rpc_pb2.CompactionResponse:
        who = caller(self.auth, context, self.cert_auth)
        return await propose(self.proposer, "compaction", request, rpc_pb2.CompactionResponse, who)
