"""etcd's Lock service (v3lock): Lock waits for a named lock, Unlock releases it.

Lock(name, lease) makes the caller's key `name/<lease hex>` (etcdspec.impl.api.
concurrency), its create revision its place in the queue, and answers once every key
under `name/` with a lower create revision is deleted: with the key and the header of
the acquiring txn (uncontended) or of the read that found its key still there after the
wait. A waiter whose own key went meanwhile (its lease expired or was revoked) is
answered etcd's "mutex: session is expired"; a waiter whose call ends (cancelled, the
client gone) has its key deleted. Unlock(key) deletes the key and answers its header.

The failpoint `lock_without_wait` answers Lock at once, without waiting for the keys
ahead of it: the planted bug the locks workload's mutual-exclusion check must find.
"""

from __future__ import annotations

import asyncio

from etcdspec.impl import errors, failpoints
from etcdspec.impl.api.concurrency import (
    MemberClient,
    client_errors,
    owner_read,
    participant_key,
    put_if_absent,
)
from etcdspec.impl.api.handlers import unary
from etcdspec.impl.api.ports import MemberPorts
from etcdspec.impl.errors import RpcError
from etcdspec.impl.pb import rpc_pb2, v3lock_pb2, v3lock_pb2_grpc


class LockServicer(v3lock_pb2_grpc.LockServicer):
    def __init__(self, ports: MemberPorts) -> None:
        self.client = MemberClient(ports)

    @unary
    @client_errors
    async def Lock(self, request: v3lock_pb2.LockRequest) -> v3lock_pb2.LockResponse:
        client = self.client
        prefix = request.name + b"/"
        lease = await client.session_lease(request.lease)
        key = participant_key(prefix, lease)
        acquired = await client.txn(put_if_absent(key, b"", lease, owner_read(prefix)))
        if acquired.succeeded:
            my_revision = acquired.header.revision
        else:
            my_revision = acquired.responses[0].response_range.kvs[0].create_revision
        owner = acquired.responses[1].response_range.kvs
        if (
            not owner
            or owner[0].create_revision == my_revision
            or failpoints.on("lock_without_wait")
        ):
            return v3lock_pb2.LockResponse(header=acquired.header, key=key)
        try:
            await client.wait_deletes(prefix, my_revision - 1)
            mine = await client.get(rpc_pb2.RangeRequest(key=key))
        except (asyncio.CancelledError, Exception):
            client.cleanup(key)
            raise
        if not mine.kvs:
            raise RpcError(errors.SESSION_EXPIRED)
        return v3lock_pb2.LockResponse(header=mine.header, key=key)

    @unary
    @client_errors
    async def Unlock(self, request: v3lock_pb2.UnlockRequest) -> v3lock_pb2.UnlockResponse:
        deleted = await self.client.delete(request.key)
        return v3lock_pb2.UnlockResponse(header=deleted.header)
