"""etcd's Election service (v3election): Campaign, Proclaim, Leader, Observe, Resign.

An election `name` is the keys under `name/`; its leader is the key with the lowest
create revision (etcdspec.impl.api.concurrency). As etcd's election server:
- Campaign(name, lease, value) makes the campaigner's key `name/<lease hex>` with
  `value` (an existing key of that lease keeps its create revision and takes the value
  by a Proclaim), waits until every key ahead of it is deleted, and answers the
  LeaderKey (name, key, create revision, lease) with the header of its txn. A cancelled
  campaign resigns.
- Proclaim(leader, value) puts `value` on the leader's key, ignoring its lease, only if
  the key still has the LeaderKey's create revision; else "election: not leader".
- Resign(leader) deletes the key under the same guard (answering success either way).
- Leader(name) answers the leader's key-value, or "election: no leader".
- Observe(name) streams the leader's key-value: the current one (or the first put
  under the prefix), then each new value of that key, and after its delete the next
  leader. An error of the underlying calls ends the stream without a status, as etcd's.
A request without a LeaderKey is answered etcd's "\"leader\" field must be provided".
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from etcdspec.impl import errors
from etcdspec.impl.api.concurrency import (
    MemberClient,
    client_errors,
    if_created_at,
    participant_key,
    prefix_end,
    put_if_absent,
)
from etcdspec.impl.api.handlers import Context, abort_with, unary
from etcdspec.impl.api.ports import MemberPorts
from etcdspec.impl.errors import RpcError
from etcdspec.impl.pb import kv_pb2, rpc_pb2, v3election_pb2, v3election_pb2_grpc


class ElectionServicer(v3election_pb2_grpc.ElectionServicer):
    def __init__(self, ports: MemberPorts) -> None:
        self.client = MemberClient(ports)

    @unary
    @client_errors
    async def Campaign(
        self, request: v3election_pb2.CampaignRequest
    ) -> v3election_pb2.CampaignResponse:
        client = self.client
        prefix = request.name + b"/"
        lease = await client.session_lease(request.lease)
        key = participant_key(prefix, lease)
        campaign = await client.txn(put_if_absent(key, request.value, lease))
        revision = campaign.header.revision
        if not campaign.succeeded:
            kv = campaign.responses[0].response_range.kvs[0]
            revision = kv.create_revision
            if kv.value != request.value:
                try:
                    await self._proclaim(key, revision, request.value)
                except Exception:
                    await self._resign(key, revision)
                    raise
        try:
            await client.wait_deletes(prefix, revision - 1)
        except asyncio.CancelledError:
            client.cleanup(_resign_txn(key, revision))
            raise
        leader = v3election_pb2.LeaderKey(name=request.name, key=key, rev=revision, lease=lease)
        return v3election_pb2.CampaignResponse(header=campaign.header, leader=leader)

    @unary
    @client_errors
    async def Proclaim(
        self, request: v3election_pb2.ProclaimRequest
    ) -> v3election_pb2.ProclaimResponse:
        if not request.HasField("leader"):
            raise RpcError(errors.MISSING_LEADER_KEY)
        leader = request.leader
        header = await self._proclaim(leader.key, leader.rev, request.value)
        return v3election_pb2.ProclaimResponse(header=header)

    @unary
    @client_errors
    async def Resign(self, request: v3election_pb2.ResignRequest) -> v3election_pb2.ResignResponse:
        if not request.HasField("leader"):
            raise RpcError(errors.MISSING_LEADER_KEY)
        header = await self._resign(request.leader.key, request.leader.rev)
        return v3election_pb2.ResignResponse(header=header)

    @unary
    @client_errors
    async def Leader(self, request: v3election_pb2.LeaderRequest) -> v3election_pb2.LeaderResponse:
        found = await self.client.first_created(request.name + b"/")
        if not found.kvs:
            raise RpcError(errors.ELECTION_NO_LEADER)
        return v3election_pb2.LeaderResponse(header=found.header, kv=found.kvs[0])

    async def Observe(
        self, request: v3election_pb2.LeaderRequest, context: Context
    ) -> AsyncIterator[v3election_pb2.LeaderResponse]:
        try:
            async for response in self._observe(request.name + b"/"):
                yield response
        except RpcError:
            return  # etcd's observer closes its channel: the stream ends
        except asyncio.CancelledError:
            raise
        except Exception as error:
            await abort_with(context, error)

    async def _observe(self, prefix: bytes) -> AsyncIterator[v3election_pb2.LeaderResponse]:
        client = self.client
        while True:
            found = await client.first_created(prefix)
            if found.kvs:
                header, kv = found.header, found.kvs[0]
            else:
                header, kv = await self._first_put(prefix, found.header.revision)
            yield v3election_pb2.LeaderResponse(header=header, kv=kv)
            async for response in client.watch(kv.key, b"", header.revision + 1):
                deleted = False
                for event in response.events:
                    if event.type == kv_pb2.Event.DELETE:
                        deleted = True
                        break
                    yield v3election_pb2.LeaderResponse(header=response.header, kv=event.kv)
                if deleted:
                    break

    async def _first_put(
        self, prefix: bytes, revision: int
    ) -> tuple[rpc_pb2.ResponseHeader, kv_pb2.KeyValue]:
        """The first key put under `prefix` from `revision` on; the header's revision is
        that put's (as etcd's observer sets it)."""
        async for response in self.client.watch(prefix, prefix_end(prefix), revision):
            for event in response.events:
                if event.type == kv_pb2.Event.PUT:
                    header = rpc_pb2.ResponseHeader()
                    header.CopyFrom(response.header)
                    header.revision = event.kv.mod_revision
                    return header, event.kv
        raise RpcError(errors.WATCH_CANCELED)  # not reached: the watch only ends by error

    async def _proclaim(self, key: bytes, revision: int, value: bytes) -> rpc_pb2.ResponseHeader:
        put = rpc_pb2.RequestOp(
            request_put=rpc_pb2.PutRequest(key=key, value=value, ignore_lease=True)
        )
        answer = await self.client.txn(if_created_at(key, revision, put))
        if not answer.succeeded:
            raise RpcError(errors.ELECTION_NOT_LEADER)
        return answer.header

    async def _resign(self, key: bytes, revision: int) -> rpc_pb2.ResponseHeader:
        answer = await self.client.txn(_resign_txn(key, revision))
        return answer.header


def _resign_txn(key: bytes, revision: int) -> rpc_pb2.TxnRequest:
    delete = rpc_pb2.RequestOp(request_delete_range=rpc_pb2.DeleteRangeRequest(key=key))
    return if_created_at(key, revision, delete)
