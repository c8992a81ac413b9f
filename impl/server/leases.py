"""Leases at a member: expiry proposed by the leader, keep-alives and TTLs answered by it.

Only the leader's lessor tracks expiry (etcdspec.impl.kv.lessor, promoted when this member
becomes leader, demoted when it stops leading: `on_role`). Each tick the leader proposes
a LeaseRevoke for every lease its lessor finds expired (again after REQUEST_TIMEOUT_S if
the revoke has not been applied by then), so that every member removes the lease and its
keys at the same point of the log. A keep-alive or a TTL question that reaches a
follower is forwarded to the leader over a gRPC channel to its client URL (learnt from
the peer transport's hello attributes), as etcd's followers do.

Time: time.monotonic(), the I/O layer's clock. Runs on the member's event loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

import grpc

from etcdspec.impl import errors, failpoints
from etcdspec.impl.errors import RpcError
from etcdspec.impl.kv.lessor import NotPrimaryError
from etcdspec.impl.kv.state_machine import StateMachine
from etcdspec.impl.pb import raft_internal_pb2 as internal_pb2
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc
from etcdspec.impl.raft.core import Role
from etcdspec.impl.raft.driver import RaftDriver
from etcdspec.impl.raft.messages import NONE
from etcdspec.impl.server.proposals import REQUEST_TIMEOUT_S, Proposals

log = logging.getLogger("etcdspec.impl.server.leases")


class LeaseKeeper:
    """See the module docstring."""

    def __init__(
        self,
        driver: RaftDriver,
        state: StateMachine,
        proposals: Proposals,
        *,
        election_timeout_s: float,
        leader_id: Callable[[], int],
        leader_client_urls: Callable[[int], list[str]],
        header: Callable[[], rpc_pb2.ResponseHeader],
        barrier: Callable[[], Awaitable[None]],
        leader_credentials: grpc.ChannelCredentials | None = None,
    ) -> None:
        self.leader_credentials = leader_credentials  # for an https client URL (TLS)
        self.driver = driver
        self.state = state
        self.proposals = proposals
        self.election_timeout_s = election_timeout_s
        self.leader_id = leader_id
        self.leader_client_urls = leader_client_urls
        self.header = header
        self.barrier = barrier
        self._revoking: dict[int, float] = {}
        self._leader_channels: dict[int, grpc.aio.Channel] = {}

    async def close(self) -> None:
        for channel in self._leader_channels.values():
            await channel.close()

    def on_role(self, role: Role, catch_up: Callable[[], None]) -> None:
        """Promote the lessor when this member starts leading (after `catch_up`: its state
        machine, leases included, before it leads), demote it when it stops."""
        lessor = self.state.lessor
        if role is Role.LEADER and not lessor.primary:
            catch_up()
            lessor.promote(time.monotonic(), extend=self.election_timeout_s)
            self._revoking.clear()
        elif role is not Role.LEADER and lessor.primary:
            lessor.demote()

    def expire(self) -> None:
        """On the leader, propose the revocation of every expired lease (each tick)."""
        if not self.driver.is_leader():
            return
        now = time.monotonic()
        due = now
        if failpoints.on("keepalive_after_expiry"):
            due -= failpoints.REVOKE_LAG_S  # the bug's window held open (impl/failpoints.py)
        for lease_id in self.state.lessor.expired(due):
            last = self._revoking.get(lease_id)
            if last is not None and now - last < REQUEST_TIMEOUT_S:
                continue
            self._revoking[lease_id] = now
            if failpoints.on("stale_leader_lease_revoke"):
                self.state.revoke_lease_unlogged(lease_id)
                log.warning("failpoint: lease revoked outside the log", extra={"lease": lease_id})
                continue
            self.proposals.propose_internal(
                internal_pb2.InternalRaftRequest(
                    lease_revoke=rpc_pb2.LeaseRevokeRequest(ID=lease_id)
                )
            )

    async def keepalive(self, lease_id: int) -> int:
        """Renew `lease_id` here if this member leads, else at the leader; its new TTL."""
        if failpoints.on("keepalive_after_expiry") and self.driver.is_leader():
            lease = self.state.lessor.leases.get(lease_id)
            if lease is not None and lease.expiry is not None and lease.expiry <= time.monotonic():
                log.warning("failpoint: keep-alive of an expired lease", extra={"lease": lease_id})
                return int(lease.ttl)
        try:
            return self.state.lessor.renew(lease_id, time.monotonic())
        except NotPrimaryError:
            pass
        stub = self._leader_stub()
        request = rpc_pb2.LeaseKeepAliveRequest(ID=lease_id)
        try:
            call = stub.LeaseKeepAlive(iter([request]), timeout=REQUEST_TIMEOUT_S)
            async for response in call:
                return int(response.TTL)
        except grpc.aio.AioRpcError as error:
            raise RpcError(
                errors.kind_by_message(error.details() or "") or errors.TIMEOUT
            ) from error
        raise RpcError(errors.LEASE_NOT_FOUND)

    def _leader_stub(self) -> rpc_pb2_grpc.LeaseStub:
        leader = self.leader_id()
        if leader == NONE:
            raise RpcError(errors.NO_LEADER)
        urls = self.leader_client_urls(leader)
        if not urls:
            raise RpcError(errors.NO_LEADER, "leader's client URL not known yet")
        channel = self._leader_channels.get(leader)
        if channel is None:
            channel = self._channel_to(urls[0])
            self._leader_channels[leader] = channel
        return rpc_pb2_grpc.LeaseStub(channel)

    def _channel_to(self, url: str) -> grpc.aio.Channel:
        """A channel to a client URL: over TLS for https (this member's client-port
        certificate presented, the server's checked against its trusted CA)."""
        if url.startswith("https://") and self.leader_credentials is not None:
            return grpc.aio.secure_channel(url.removeprefix("https://"), self.leader_credentials)
        return grpc.aio.insecure_channel(url.removeprefix("http://"))

    async def time_to_live(
        self, request: rpc_pb2.LeaseTimeToLiveRequest
    ) -> rpc_pb2.LeaseTimeToLiveResponse:
        if not self.driver.is_leader() and self.leader_id() != NONE:
            try:
                stub = self._leader_stub()
                response: rpc_pb2.LeaseTimeToLiveResponse = await stub.LeaseTimeToLive(
                    request, timeout=REQUEST_TIMEOUT_S
                )
                return response
            except grpc.aio.AioRpcError as error:
                kind = errors.kind_by_message(error.details() or "")
                if kind is not None:
                    raise RpcError(kind) from error
                raise RpcError(errors.TIMEOUT) from error
        await self.barrier()
        lessor = self.state.lessor
        try:
            ttl = lessor.time_to_live(request.ID, time.monotonic(), with_keys=request.keys)
        except RpcError as error:
            if error.kind is not errors.LEASE_NOT_FOUND:
                raise
            # etcd answers an unknown (or expired) lease with TTL -1, not an error.
            return rpc_pb2.LeaseTimeToLiveResponse(header=self.header(), ID=request.ID, TTL=-1)
        # Only the leader tracks expiry; elsewhere the granted TTL is all that is known.
        remaining = ttl.ttl if lessor.primary else ttl.granted_ttl
        return rpc_pb2.LeaseTimeToLiveResponse(
            header=self.header(),
            ID=ttl.lease_id,
            TTL=max(remaining, 0),
            grantedTTL=ttl.granted_ttl,
            keys=list(ttl.keys),
        )

    async def leases(self) -> rpc_pb2.LeaseLeasesResponse:
        await self.barrier()
        return rpc_pb2.LeaseLeasesResponse(
            header=self.header(),
            leases=[rpc_pb2.LeaseStatus(ID=i) for i in self.state.lessor.lease_ids()],
        )
