"""etcd's Lease service: grant and revoke through Raft; keep-alive, TTL and the lease list
answered by the leader's lessor (a follower forwards them: etcdspec.impl.server.leases)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from etcdspec.impl import errors
from etcdspec.impl.api.handlers import (
    Context,
    caller,
    propose,
    status_of,
    unary,
    unary_in_context,
)
from etcdspec.impl.api.ports import MemberPorts
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc


class LeaseServicer(rpc_pb2_grpc.LeaseServicer):
    def __init__(self, ports: MemberPorts) -> None:
        self.proposer = ports.proposer
        self.leases = ports.leases
        self.cluster = ports.cluster
        self.auth = ports.state.auth
        self.cert_auth = ports.client_cert_auth  # a certificate's CN as the caller
        self.reads = ports.reads

    @unary_in_context
    async def LeaseGrant(
        self, request: rpc_pb2.LeaseGrantRequest, context: Context
    ) -> rpc_pb2.LeaseGrantResponse:
        who = caller(self.auth, context, self.cert_auth)
        return await propose(self.proposer, "lease_grant", request, rpc_pb2.LeaseGrantResponse, who)

    @unary_in_context
    async def LeaseRevoke(
        self, request: rpc_pb2.LeaseRevokeRequest, context: Context
    ) -> rpc_pb2.LeaseRevokeResponse:
        # The applier checks WRITE on every key attached to the lease (etcd's rule).
        who = caller(self.auth, context, self.cert_auth)
        return await propose(
            self.proposer, "lease_revoke", request, rpc_pb2.LeaseRevokeResponse, who
        )

    async def LeaseKeepAlive(
        self,
        request_iterator: AsyncIterator[rpc_pb2.LeaseKeepAliveRequest],
        context: Context,
    ) -> AsyncIterator[rpc_pb2.LeaseKeepAliveResponse]:
        async for request in request_iterator:
            try:
                ttl = await self.leases.keepalive(request.ID)
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
                header=self.cluster.header(), ID=request.ID, TTL=ttl
            )

    @unary
    async def LeaseTimeToLive(
        self, request: rpc_pb2.LeaseTimeToLiveRequest
    ) -> rpc_pb2.LeaseTimeToLiveResponse:
        return await self.leases.time_to_live(request)

    @unary
    async def LeaseLeases(self, request: rpc_pb2.LeaseLeasesRequest) -> rpc_pb2.LeaseLeasesResponse:
        return await self.leases.leases()
