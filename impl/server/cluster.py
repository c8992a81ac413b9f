"""What a member knows of its cluster and itself: the members, the leader, its status.

`ClusterView` answers MemberList from the applied state: the members the state machine
records, seeded from --initial-cluster and changed through the log, with the names and
client URLs each member published through the log (server.publish; a member added and
not yet started has neither, as etcd lists it). It answers Maintenance.Status and
MoveLeader, and builds the response header every answer carries (cluster and member id,
revision, Raft term). It learns the leader from the Raft loop's soft state
(`on_leader`), and the client URLs each peer announces in its hello from the peer
transport (`on_peer_attributes`): where a request goes to the leader before the leader
has published them. MemberList waits until this member has published its own
(`published`), as etcd serves no client before it has (its ReadyNotify): a member just
started lists itself with its client URLs, or answers nothing before the caller's
deadline.

Runs on the member's event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Protocol

from etcdspec.impl import errors
from etcdspec.impl.api.ports import Metadata
from etcdspec.impl.api.versions import SERVER_VERSION, STORAGE_VERSION
from etcdspec.impl.errors import RpcError
from etcdspec.impl.kv.members import MemberRecord
from etcdspec.impl.kv.state_machine import StateMachine
from etcdspec.impl.pb import rpc_pb2
from etcdspec.impl.raft.driver import RaftDriver
from etcdspec.impl.raft.messages import NONE
from etcdspec.impl.server.config import MemberConfig
from etcdspec.impl.server.proposals import REQUEST_TIMEOUT_S


class MembershipChanges(Protocol):
    """Who makes the membership changes (server.membership.Membership)."""

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


class ClusterView:
    """See the module docstring."""

    def __init__(
        self,
        config: MemberConfig,
        driver: RaftDriver,
        state: StateMachine,
        *,
        applied_index: Callable[[], int],
        wake: Callable[[], None],
    ) -> None:
        self.config = config
        self.member_id = config.member_id
        self.cluster_id = config.cluster_id
        self.driver = driver
        self.state = state
        self.applied_index = applied_index
        self.wake = wake
        self.leader_id = NONE
        self.peer_attributes: dict[int, dict[str, Any]] = {self.member_id: own_attributes(config)}
        self.changes: MembershipChanges | None = None  # set once the member has built it
        # Set once this member's attributes, published through the log, are applied here.
        self.published = asyncio.Event()

    def _changes(self) -> MembershipChanges:
        if self.changes is None:
            raise RpcError(errors.STOPPED)
        return self.changes

    async def member_add(
        self, request: rpc_pb2.MemberAddRequest, metadata: Metadata = ()
    ) -> rpc_pb2.MemberAddResponse:
        return await self._changes().member_add(request, metadata)

    async def member_remove(
        self, request: rpc_pb2.MemberRemoveRequest, metadata: Metadata = ()
    ) -> rpc_pb2.MemberRemoveResponse:
        return await self._changes().member_remove(request, metadata)

    async def member_update(
        self, request: rpc_pb2.MemberUpdateRequest, metadata: Metadata = ()
    ) -> rpc_pb2.MemberUpdateResponse:
        return await self._changes().member_update(request, metadata)

    async def member_promote(
        self, request: rpc_pb2.MemberPromoteRequest, metadata: Metadata = ()
    ) -> rpc_pb2.MemberPromoteResponse:
        return await self._changes().member_promote(request, metadata)

    def on_leader(self, leader_id: int) -> None:
        self.leader_id = leader_id

    def on_peer_attributes(self, from_id: int, attributes: dict[str, Any]) -> None:
        self.peer_attributes[from_id] = attributes

    def client_urls(self, member_id: int) -> list[str]:
        """The client URLs `member_id` published, else those its hello announced (none
        yet: an empty list)."""
        for record in self.state.members().current():
            if record.member_id == member_id and record.client_urls:
                return list(record.client_urls)
        return [str(url) for url in self.peer_attributes.get(member_id, {}).get("client_urls", [])]

    def header(self) -> rpc_pb2.ResponseHeader:
        return rpc_pb2.ResponseHeader(
            cluster_id=self.cluster_id,
            member_id=self.member_id,
            revision=self.state.current_revision(),
            raft_term=self.driver.term,
        )

    def header_at(self, revision: int) -> rpc_pb2.ResponseHeader:
        """The header, with `revision` when it is set (a read at a past revision)."""
        header = self.header()
        if revision:
            header.revision = revision
        return header

    def members(self) -> list[MemberRecord]:
        """The current members, by id, as the applied records hold them: a member's name
        (from --initial-cluster, or published) and the client URLs it published."""
        return self.state.members().current()

    def is_learner(self) -> bool:
        """Whether this member is a learner of the Raft configuration now."""
        return self.member_id in self.driver.learners

    def member(self, member_id: int) -> MemberRecord | None:
        for record in self.members():
            if record.member_id == member_id:
                return record
        return None

    def members_pb(self) -> list[rpc_pb2.Member]:
        """The current members as etcd's answers list them."""
        return [record.to_pb() for record in self.members()]

    async def wait_published(self) -> None:
        """Return once this member's attributes are applied here (see the docstring)."""
        await self.published.wait()

    def member_list(self) -> rpc_pb2.MemberListResponse:
        header = self.header()
        header.ClearField("revision")
        return rpc_pb2.MemberListResponse(header=header, members=self.members_pb())

    def status(self) -> rpc_pb2.StatusResponse:
        status = self.driver.status()
        size, in_use = self.state.sizes()
        alarms = self.state.alarms()
        return rpc_pb2.StatusResponse(
            header=self.header(),
            version=SERVER_VERSION,
            dbSize=size,
            leader=status.leader_id,
            raftIndex=status.commit_index,
            raftTerm=status.term,
            raftAppliedIndex=self.applied_index(),
            errors=[
                f"memberID:{alarm.memberID} alarm:{rpc_pb2.AlarmType.Name(alarm.alarm)} "
                for alarm in alarms
            ],
            dbSizeInUse=in_use,
            isLearner=self.is_learner(),
            dbSizeQuota=self.config.quota_backend_bytes,
            storageVersion=STORAGE_VERSION,
        )

    async def move_leader(self, target: int) -> rpc_pb2.MoveLeaderResponse:
        if not self.driver.is_leader():
            raise RpcError(errors.NOT_LEADER)
        transferee = self.member(target)
        if transferee is None or transferee.is_learner:  # etcd's check, learners too
            raise RpcError(errors.BAD_LEADER_TRANSFEREE)
        self.driver.transfer_leader(target)
        self.wake()
        deadline = time.monotonic() + REQUEST_TIMEOUT_S
        while self.leader_id != target:
            if time.monotonic() > deadline:
                raise RpcError(errors.TIMEOUT)
            await asyncio.sleep(0.02)
        return rpc_pb2.MoveLeaderResponse(header=self.header())


def own_attributes(config: MemberConfig) -> dict[str, Any]:
    """What a member announces of itself to its peers (the hello's attributes)."""
    return {"name": config.name, "client_urls": [e.url for e in config.advertise_client_urls]}
