"""etcd's server-side concurrency recipes (mutex and election) over one member's KV,
leases and watches: what the Lock and Election servicers are built on.

etcd serves v3lock and v3election with its client library's `concurrency` package
talking to the member itself; `MemberClient` is that client here: every call goes
through the member's ports (`etcdspec.impl.api.ports`) exactly as a client request
would (writes proposed through Raft, reads linearizable, watches on the member's hub),
so the recipes see the store a client sees, its requests checked as the KV service
checks a client's (an empty key is etcd's "key is not provided").

Contract (the semantics of etcd 3.5's concurrency package, as its servers use it):
- A participant's key is `<name>/<lease id in hex>`, put with its lease in a txn only
  if it does not exist yet (`If(create_revision == 0)`); the key's create revision is
  its place in the queue. A second call with the same lease reuses the key.
- The holder (the leader) is the key under `<name>/` with the lowest create revision.
  A waiter waits (`wait_deletes`) until every key under the prefix with a lower create
  revision is deleted: it watches the newest such key from the revision read until a
  DELETE, and looks again.
- A lease of 0 asks for a new one: a lease of 60 s is granted (etcd's session TTL) and
  never kept alive, as etcd's servers orphan their sessions.
- A waiter whose call is cancelled deletes its key (etcd's cleanup), in the background
  so that the cancellation itself is not held up.
- Errors: etcd's servers answer what their in-process client raised, which keeps the
  message but not the gRPC code, so every error of these services leaves as UNKNOWN
  with etcd's text (`client_errors`; "etcdserver: requested lease not found" included).

Threading: everything runs on the member's event loop.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

import grpc

from etcdspec.impl import errors
from etcdspec.impl.api.handlers import propose
from etcdspec.impl.api.ports import MemberPorts
from etcdspec.impl.errors import RpcError
from etcdspec.impl.kv import request_checks as checks
from etcdspec.impl.pb import kv_pb2, rpc_pb2

SESSION_TTL_S = 60  # etcd's concurrency.defaultSessionTTL

S = TypeVar("S")
Req = TypeVar("Req")
Resp = TypeVar("Resp")


def client_errors(
    handler: Callable[[S, Req], Awaitable[Resp]],
) -> Callable[[S, Req], Awaitable[Resp]]:
    """The handler with its etcd errors re-coded UNKNOWN, their messages kept (as etcd's
    servers answer the errors of their in-process client)."""

    @functools.wraps(handler)
    async def method(self: S, request: Req) -> Resp:
        try:
            return await handler(self, request)
        except RpcError as error:
            if error.code is grpc.StatusCode.UNKNOWN:
                raise
            raise RpcError(errors.EtcdErrorKind(grpc.StatusCode.UNKNOWN, error.message)) from error

    return method


def prefix_end(prefix: bytes) -> bytes:
    """The range end of every key starting with `prefix` (etcd's GetPrefixRangeEnd)."""
    end = bytearray(prefix)
    for i in range(len(end) - 1, -1, -1):
        if end[i] < 0xFF:
            end[i] += 1
            return bytes(end[: i + 1])
    return b"\0"


def participant_key(prefix: bytes, lease: int) -> bytes:
    """`<prefix><lease id in lower-case hex>`, as etcd's fmt "%s%x"."""
    return prefix + format(lease, "x").encode()


class MemberClient:
    """The member as its own client: KV, lease and watch calls through its ports."""

    def __init__(self, ports: MemberPorts) -> None:
        self.state = ports.state
        self.proposer = ports.proposer
        self.reads = ports.reads
        self.cluster = ports.cluster
        self.watches = ports.watches
        self._cleanups: set[asyncio.Task[None]] = set()

    async def txn(self, request: rpc_pb2.TxnRequest) -> rpc_pb2.TxnResponse:
        checks.check_txn(request)
        return await propose(self.proposer, "txn", request, rpc_pb2.TxnResponse)

    async def get(self, request: rpc_pb2.RangeRequest) -> rpc_pb2.RangeResponse:
        checks.check_range(request)
        await self.reads.barrier()
        response = self.state.range(request)
        response.header.CopyFrom(self.cluster.header_at(response.header.revision))
        return response

    async def delete(self, key: bytes) -> rpc_pb2.DeleteRangeResponse:
        request = rpc_pb2.DeleteRangeRequest(key=key)
        checks.check_delete(request)
        return await propose(self.proposer, "delete_range", request, rpc_pb2.DeleteRangeResponse)

    async def grant(self, ttl: int) -> int:
        request = rpc_pb2.LeaseGrantRequest(TTL=ttl)
        response = await propose(self.proposer, "lease_grant", request, rpc_pb2.LeaseGrantResponse)
        return int(response.ID)

    async def session_lease(self, lease: int) -> int:
        """The lease of a session asked for with `lease` (0: a new 60 s lease)."""
        return await self.grant(SESSION_TTL_S) if lease == 0 else lease

    def cleanup(self, request: rpc_pb2.TxnRequest | bytes) -> None:
        """Delete a key (or run a guarded delete txn) in the background: the cleanup of
        a cancelled wait, which must not wait on the cancelled call."""

        async def run() -> None:
            try:
                if isinstance(request, bytes):
                    await self.delete(request)
                else:
                    await self.txn(request)
            except Exception:  # the member stops or lost its quorum: the lease ends it
                return

        task = asyncio.ensure_future(run())
        self._cleanups.add(task)
        task.add_done_callback(self._cleanups.discard)

    async def first_created(self, prefix: bytes) -> rpc_pb2.RangeResponse:
        """The key under `prefix` with the lowest create revision (etcd's
        WithFirstCreate: prefix, sorted by create revision ascending, limit 1)."""
        return await self.get(_by_create(prefix, "ASCEND"))

    async def wait_delete(self, key: bytes, revision: int) -> None:
        """Return once `key` is deleted at or after `revision` (a watch from there)."""
        async for response in self.watch(key, b"", revision):
            if any(e.type == kv_pb2.Event.DELETE for e in response.events):
                return

    async def wait_deletes(self, prefix: bytes, max_create_revision: int) -> None:
        """Return once no key under `prefix` has a create revision up to
        `max_create_revision`: wait for the newest such key's delete, and look again."""
        while True:
            request = _by_create(prefix, "DESCEND")
            request.max_create_revision = max_create_revision
            response = await self.get(request)
            if not response.kvs:
                return
            await self.wait_delete(response.kvs[0].key, response.header.revision)

    async def watch(
        self, key: bytes, range_end: bytes, start_revision: int
    ) -> AsyncIterator[rpc_pb2.WatchResponse]:
        """The responses with events of one watch on this member, until the caller stops
        (compaction of `start_revision` raises etcd's compacted error)."""
        stream = self.watches.open()
        try:
            stream.create(
                rpc_pb2.WatchCreateRequest(
                    key=key, range_end=range_end, start_revision=start_revision
                )
            )
            while True:
                response = await stream.next_response()
                if response.canceled:
                    if response.compact_revision:
                        raise RpcError(errors.COMPACTED)
                    raise RpcError(errors.WATCH_CANCELED)
                if response.events:
                    yield response
        finally:
            stream.close()


def _by_create(prefix: bytes, order: str) -> rpc_pb2.RangeRequest:
    """Keys under `prefix` by create revision, `order` "ASCEND" or "DESCEND", limit 1."""
    return rpc_pb2.RangeRequest(
        key=prefix,
        range_end=prefix_end(prefix),
        sort_order=order,
        sort_target=rpc_pb2.RangeRequest.CREATE,
        limit=1,
    )


def put_if_absent(
    key: bytes, value: bytes, lease: int, *also: rpc_pb2.RequestOp
) -> rpc_pb2.TxnRequest:
    """etcd's acquire txn: put `key` with `lease` if it does not exist, else read it;
    `also` runs in either branch after that."""
    return rpc_pb2.TxnRequest(
        compare=[
            rpc_pb2.Compare(
                key=key,
                target=rpc_pb2.Compare.CREATE,
                result=rpc_pb2.Compare.EQUAL,
                create_revision=0,
            )
        ],
        success=[
            rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=key, value=value, lease=lease)),
            *also,
        ],
        failure=[rpc_pb2.RequestOp(request_range=rpc_pb2.RangeRequest(key=key)), *also],
    )


def owner_read(prefix: bytes) -> rpc_pb2.RequestOp:
    """The txn op reading the current holder of `prefix` (lowest create revision)."""
    return rpc_pb2.RequestOp(request_range=_by_create(prefix, "ASCEND"))


def if_created_at(key: bytes, revision: int, *then: rpc_pb2.RequestOp) -> rpc_pb2.TxnRequest:
    """A txn doing `then` only if `key` still has create revision `revision` (the
    participant's key is still the one it made)."""
    return rpc_pb2.TxnRequest(
        compare=[
            rpc_pb2.Compare(
                key=key,
                target=rpc_pb2.Compare.CREATE,
                result=rpc_pb2.Compare.EQUAL,
                create_revision=revision,
            )
        ],
        success=list(then),
    )
