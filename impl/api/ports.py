"""What the client API's servicers need of a member, and nothing more.

The servicers (one module per etcd service in this package) are written against these
protocols, which the member's parts (etcdspec.impl.server) implement: the api layer
never imports the server layer, so the server can build and start the servicers
without an import loop. Reads of the state machine go to it directly
(etcdspec.impl.kv.state_machine.StateMachine).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from google.protobuf.message import Message

from etcdspec.impl.api.watch_stream import WatchStreams
from etcdspec.impl.kv.state_machine import StateMachine
from etcdspec.impl.pb import raft_internal_pb2 as internal_pb2
from etcdspec.impl.pb import rpc_pb2


class Proposer(Protocol):
    """Writes through Raft: the applied answer of `request` (etcd errors as RpcError)."""

    async def propose(self, request: internal_pb2.InternalRaftRequest) -> Message: ...


class ReadBarrier(Protocol):
    """A linearizable read's wait: returns once everything committed before it is applied
    here."""

    async def barrier(self) -> None: ...


class LeaseService(Protocol):
    """The lease calls that need the leader's lessor (a follower forwards them)."""

    async def keepalive(self, lease_id: int) -> int: ...

    async def time_to_live(
        self, request: rpc_pb2.LeaseTimeToLiveRequest
    ) -> rpc_pb2.LeaseTimeToLiveResponse: ...

    async def leases(self) -> rpc_pb2.LeaseLeasesResponse: ...


# Call metadata handed on with a forwarded call (the caller's auth token).
Metadata = tuple[tuple[str, str], ...]


class ClusterService(Protocol):
    """What the member knows of its cluster and itself, and every answer's header."""

    def header(self) -> rpc_pb2.ResponseHeader: ...

    def header_at(self, revision: int) -> rpc_pb2.ResponseHeader: ...

    async def wait_published(self) -> None: ...

    def member_list(self) -> rpc_pb2.MemberListResponse: ...

    def status(self) -> rpc_pb2.StatusResponse: ...

    async def move_leader(self, target: int) -> rpc_pb2.MoveLeaderResponse: ...

    def is_learner(self) -> bool: ...

    async def member_add(
        self, request: rpc_pb2.MemberAddRequest, metadata: Metadata = ()
    ) -> rpc_pb2.MemberAddResponse: ...

    async def member_remove(
        self, request: rpc_pb2.MemberRemoveRequest, metadata: Metadata = ()
    ) -> rpc_pb2.MemberRemoveResponse: ...

    async def member_update(
        self, request: rpc_pb2.MemberUpdateRequest, metadata: Metadata = ()
    ) -> rpc_pb2.MemberUpdateResponse: ...

    async def member_promote(
        self, request: rpc_pb2.MemberPromoteRequest, metadata: Metadata = ()
    ) -> rpc_pb2.MemberPromoteResponse: ...


@dataclass(frozen=True)
class MemberPorts:
    """Everything the servicers use of one member."""

    state: StateMachine
    proposer: Proposer
    reads: ReadBarrier
    leases: LeaseService
    cluster: ClusterService
    watches: WatchStreams
    max_request_bytes: int
    bcrypt_cost: int = 10  # etcd's --bcrypt-cost, checked (config.effective_bcrypt_cost)
    client_cert_auth: bool = False  # etcd's --client-cert-auth: a certificate's CN is a user
