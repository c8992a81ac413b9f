"""Membership changes at a member: etcd's Cluster calls checked, proposed and applied.

`Membership` serves MemberAdd, MemberRemove, MemberUpdate and MemberPromote. A follower
hands the call to the leader (a gRPC call to its client URL), whose Raft core alone may
propose a configuration change. The leader runs etcd's checks before proposing, in
etcd's order (etcd 3.5's AddMember, RemoveMember, PromoteMember):
- promote: the learner in sync with the leader (its match index at least
  LEARNER_READY_FRACTION of the leader's), else "can only promote a learner member which
  is in sync with leader";
- strict reconfiguration (etcd's default --strict-reconfig-check): a voter is added,
  removed or promoted only if enough voters have started to keep a quorum ("re-configuration
  failed due to not enough started members"), and a voter added or a started voter removed
  only if every voter (resp. a quorum after the removal) has been connected to this member
  for HEALTH_INTERVAL_S ("unhealthy cluster");
- then, as etcd does when it applies the change, the member records' own checks (member
  not found, Peer URLs already exists, can only promote a learner member, too many
  learners: etcdspec.impl.kv.members), which are run again when the entry is applied.
The change is proposed as a Raft CONF_CHANGE entry whose context carries the member record
and the proposer's request id; the caller waits until the entry is applied here and
answers with the members then. As etcd's, that wait has no deadline of its own (the
caller's ends it): a change the Raft core drops (one pending and not yet applied, the
leader's first entry of its term not yet committed, leadership moving; or, asked of a
follower, no leader) is never answered, as etcd's Raft turns such a change into an empty
entry and its server waits on. Refusals answer etcd's errors with etcd's codes (even
etcd 3.5.1's UNKNOWN for "not enough started members"). Two differences, kept: the peer
URLs of MemberUpdate are checked (etcd 3.5.1 takes any text and its members panic when
they apply a URL that does not parse), and a peer URL must be a loopback address (this
server's limit), both refused as "given member URLs are invalid".

`apply(entry)` is how the apply queue applies a committed CONF_CHANGE entry, in log order:
the member records first (with the consistent index, or etcd's error if a check refuses),
then the Raft core's configuration (`RaftDriver.apply_conf_change`), then the peer
transport (a peer added or dropped) and, for the member removed, `on_removed` (it stops
itself, as etcd does: "the member has been permanently removed from the cluster").

Runs on the member's event loop.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import grpc

from etcdspec.impl import errors
from etcdspec.impl.api.ports import Metadata
from etcdspec.impl.errors import RpcError
from etcdspec.impl.kv.members import ChangeKind, MemberChange, MemberRecord, check_change
from etcdspec.impl.kv.state_machine import StateMachine
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc
from etcdspec.impl.raft.driver import RaftDriver
from etcdspec.impl.raft.messages import (
    NONE,
    ConfChange,
    ConfChangeType,
    Entry,
    ProposalDropped,
)
from etcdspec.impl.server.cluster import ClusterView
from etcdspec.impl.server.config import ConfigError, parse_url
from etcdspec.impl.server.peer import PeerTransport
from etcdspec.impl.server.proposals import REQUEST_TIMEOUT_S

# etcd's HealthInterval: how long the voters must have been connected before a change.
HEALTH_INTERVAL_S = 5.0
# etcd's readyPercent: a learner is in sync when its match is 90% of the leader's.
LEARNER_READY_FRACTION = 0.9

log = logging.getLogger("etcdspec.impl.server.membership")

_CHANGE_TYPES = {
    ChangeKind.ADD: ConfChangeType.ADD_NODE,
    ChangeKind.ADD_LEARNER: ConfChangeType.ADD_LEARNER_NODE,
    ChangeKind.REMOVE: ConfChangeType.REMOVE_NODE,
    ChangeKind.UPDATE: ConfChangeType.UPDATE_NODE,
    ChangeKind.PROMOTE: ConfChangeType.ADD_NODE,  # ADD_NODE of a learner promotes it
}


@dataclass(frozen=True)
class ChangeContext:
    """What a CONF_CHANGE entry's context carries: the change and who waits for it."""

    change: MemberChange
    proposer_id: int
    request_id: int

    def encode(self) -> bytes:
        return json.dumps(
            {
                "version": 1,
                "kind": self.change.kind.value,
                "member": self.change.record.to_json(),
                "proposer": self.proposer_id,
                "request": self.request_id,
            },
            sort_keys=True,
        ).encode()

    @staticmethod
    def decode(data: bytes) -> ChangeContext:
        try:
            parsed: dict[str, Any] = json.loads(data)
            if parsed.get("version") != 1:
                raise ValueError(f"context version {parsed.get('version')!r}, expected 1")
            return ChangeContext(
                change=MemberChange(
                    ChangeKind(parsed["kind"]), MemberRecord.from_json(parsed["member"])
                ),
                proposer_id=int(parsed["proposer"]),
                request_id=int(parsed["request"]),
            )
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(
                f"not a membership change context: {data[:120]!r} ({error})"
            ) from error

    def describe(self) -> str:
        return f"{self.change.describe()} (request {self.request_id:x})"


def new_member_id(peer_urls: tuple[str, ...], cluster_token: str, now_s: int) -> int:
    """An added member's id as etcd's NewMember makes it: from its sorted peer URLs, the
    cluster token and the time in whole seconds (so the same URLs added twice within one
    second get the same id: "member ID already exist", as etcd answers); 63 bits, as
    every id of ours (server.config.member_id_of)."""
    text = "".join(sorted(peer_urls)) + cluster_token + str(now_s)
    value = int.from_bytes(hashlib.sha1(text.encode()).digest()[:8], "big") & ((1 << 63) - 1)
    return value or 1


_URL_SCHEMES = ("http", "https", "unix", "unixs")


def check_urls(urls: list[str]) -> tuple[str, ...]:
    """The peer URLs of a MemberAdd (sorted), or etcd's "given member URLs are invalid":
    etcd's rules (types.NewURLs: at least one URL, each parsed, of scheme http, https,
    unix or unixs, of the form host:port, without a path), then this server's own limit
    (a loopback host: server.config.parse_url), the reason kept in the log."""
    if not urls:
        raise RpcError(errors.MEMBER_BAD_URLS, "no valid URLs given")
    checked = []
    for url in urls:
        text = url.strip()
        try:
            parts = urlsplit(text)
            port = parts.port
        except ValueError as error:
            raise RpcError(errors.MEMBER_BAD_URLS, f"{text!r}: {error}") from error
        if parts.scheme not in _URL_SCHEMES:
            reason = "URL scheme must be http, https, unix, or unixs"
        elif parts.hostname is None or port is None:
            reason = 'URL address does not have the form "host:port"'
        elif parts.path:
            reason = "URL must not contain a path"
        else:
            try:
                checked.append(parse_url(text, "peerURLs").url)
            except ConfigError as error:
                raise RpcError(errors.MEMBER_BAD_URLS, str(error)) from error
            continue
        raise RpcError(errors.MEMBER_BAD_URLS, f"{reason}: {text!r}")
    return tuple(sorted(checked))


class Membership:
    """See the module docstring."""

    def __init__(
        self,
        driver: RaftDriver,
        state: StateMachine,
        cluster: ClusterView,
        transport: PeerTransport,
        *,
        cluster_token: str,
        next_request_id: Callable[[], int],
        wake: Callable[[], None],
        on_removed: Callable[[], None],
    ) -> None:
        self.driver = driver
        self.state = state
        self.cluster = cluster
        self.transport = transport
        self.member_id = cluster.member_id
        self.cluster_token = cluster_token
        self.next_request_id = next_request_id
        self.wake = wake
        self.on_removed = on_removed
        self._waiters: dict[int, asyncio.Future[MemberRecord]] = {}
        self._leader_channels: dict[int, grpc.aio.Channel] = {}

    async def close(self) -> None:
        for future in self._waiters.values():
            if not future.done():
                future.set_exception(RpcError(errors.STOPPED))
        for channel in self._leader_channels.values():
            await channel.close()

    # ---- the Cluster calls ------------------------------------------------------------

    async def member_add(
        self, request: rpc_pb2.MemberAddRequest, metadata: Metadata = ()
    ) -> rpc_pb2.MemberAddResponse:
        urls = check_urls(list(request.peerURLs))
        if not self.driver.is_leader():
            answer: rpc_pb2.MemberAddResponse = await self._forward("MemberAdd", request, metadata)
            return answer
        kind = ChangeKind.ADD_LEARNER if request.isLearner else ChangeKind.ADD
        record = MemberRecord(
            new_member_id(urls, self.cluster_token, int(time.time())),
            peer_urls=urls,
            is_learner=request.isLearner,
        )
        if not request.isLearner and not self._ready_to_add_voter():
            raise RpcError(errors.MEMBER_NOT_ENOUGH_STARTED)
        if not self._connected_fully():
            raise RpcError(errors.UNHEALTHY)
        added = await self._change(MemberChange(kind, record))
        return rpc_pb2.MemberAddResponse(
            header=self._header(), member=added.to_pb(), members=self.cluster.members_pb()
        )

    async def member_remove(
        self, request: rpc_pb2.MemberRemoveRequest, metadata: Metadata = ()
    ) -> rpc_pb2.MemberRemoveResponse:
        if not self.driver.is_leader():
            answer: rpc_pb2.MemberRemoveResponse = await self._forward(
                "MemberRemove", request, metadata
            )
            return answer
        self._may_remove(request.ID)
        await self._change(MemberChange(ChangeKind.REMOVE, MemberRecord(request.ID)))
        return rpc_pb2.MemberRemoveResponse(
            header=self._header(), members=self.cluster.members_pb()
        )

    async def member_update(
        self, request: rpc_pb2.MemberUpdateRequest, metadata: Metadata = ()
    ) -> rpc_pb2.MemberUpdateResponse:
        urls = check_urls(list(request.peerURLs))
        if not self.driver.is_leader():
            answer: rpc_pb2.MemberUpdateResponse = await self._forward(
                "MemberUpdate", request, metadata
            )
            return answer
        await self._change(
            MemberChange(ChangeKind.UPDATE, MemberRecord(request.ID, peer_urls=urls))
        )
        return rpc_pb2.MemberUpdateResponse(
            header=self._header(), members=self.cluster.members_pb()
        )

    async def member_promote(
        self, request: rpc_pb2.MemberPromoteRequest, metadata: Metadata = ()
    ) -> rpc_pb2.MemberPromoteResponse:
        if not self.driver.is_leader():
            answer: rpc_pb2.MemberPromoteResponse = await self._forward(
                "MemberPromote", request, metadata
            )
            return answer
        # etcd's isLearnerReady looks at any member with a progress, voters too (a voter
        # that trails the leader is "not in sync" as well).
        if request.ID in (*self.driver.voters, *self.driver.learners):
            leader_match = self.driver.match_index(self.member_id)
            if self.driver.match_index(request.ID) < leader_match * LEARNER_READY_FRACTION:
                raise RpcError(errors.LEARNER_NOT_READY)
        if not self._ready_to_promote():
            raise RpcError(errors.MEMBER_NOT_ENOUGH_STARTED)
        await self._change(MemberChange(ChangeKind.PROMOTE, MemberRecord(request.ID)))
        return rpc_pb2.MemberPromoteResponse(
            header=self._header(), members=self.cluster.members_pb()
        )

    def _header(self) -> rpc_pb2.ResponseHeader:
        header = self.cluster.header()
        header.ClearField("revision")  # as etcd's Cluster answers: no revision
        return header

    # ---- etcd's strict reconfiguration checks --------------------------------------------

    def _voters(self) -> list[MemberRecord]:
        # The voters as etcd's records list them (a learner whose URL was updated counts).
        return [m for m in self.cluster.members() if not m.listed_learner]

    def _ready_to_add_voter(self) -> bool:
        """etcd's IsReadyToAddVotingMember: with one more voter, a quorum has started."""
        voters = self._voters()
        started = sum(1 for m in voters if m.started)
        total = len(voters) + 1
        if started == 1 and total == 2:  # a single member cluster
            return True
        return started >= total // 2 + 1

    def _ready_to_promote(self) -> bool:
        """etcd's IsReadyToPromoteMember: the member promoted counts as a started voter
        (asked of any id: a voter or an unknown one is refused when applied)."""
        voters = self._voters()
        started = 1 + sum(1 for m in voters if m.started)
        return started >= (len(voters) + 1) // 2 + 1

    def _connected_since(self, member_id: int, since: float) -> bool:
        if member_id == self.member_id:
            return True
        active = self.transport.active_since.get(member_id)
        return active is not None and active <= since

    def _connected_fully(self) -> bool:
        since = time.monotonic() - HEALTH_INTERVAL_S
        return all(self._connected_since(m.member_id, since) for m in self._voters())

    def _may_remove(self, member_id: int) -> None:
        voters = self._voters()
        target = self.cluster.member(member_id)
        if target is None or target.listed_learner:
            return  # an unknown member is refused when applied; a learner holds no vote
        others = [m for m in voters if m.member_id != member_id]
        started = sum(1 for m in others if m.started)
        if started < len(others) // 2 + 1:
            raise RpcError(errors.MEMBER_NOT_ENOUGH_STARTED)
        if member_id != self.member_id and member_id not in self.transport.active_since:
            return  # a member that is down is safe to remove
        since = time.monotonic() - HEALTH_INTERVAL_S
        active = sum(1 for m in voters if self._connected_since(m.member_id, since))
        if active - 1 < 1 + (len(voters) - 1) // 2:
            raise RpcError(errors.UNHEALTHY)

    # ---- proposing and waiting ---------------------------------------------------------

    async def _change(self, change: MemberChange) -> MemberRecord:
        members, removed = self.state.members().all()
        check_change(members, removed, change)
        request_id = self.next_request_id()
        context = ChangeContext(change, self.member_id, request_id)
        conf_change = ConfChange(
            _CHANGE_TYPES[change.kind], change.record.member_id, context.encode()
        )
        future: asyncio.Future[MemberRecord] = asyncio.get_running_loop().create_future()
        self._waiters[request_id] = future
        try:
            self.driver.propose_conf_change(conf_change)
        except ProposalDropped as error:  # ConfChangeRefused too
            # As etcd: its Raft turns a conf change it refuses (one pending, leadership
            # moving, no leader) into an empty entry, and the server waits for an answer
            # that never comes: the caller meets its own deadline.
            log.info(
                "configuration change dropped",
                extra={"change": context.describe(), "reason": str(error)},
            )
        else:
            log.info("configuration change proposed", extra={"change": context.describe()})
            self.wake()
        try:
            # No deadline of ours: etcd's configure() waits for the caller's (or STOPPED).
            return await future
        finally:
            self._waiters.pop(request_id, None)

    async def _dropped(self) -> Any:
        """Wait as for a change etcd's Raft dropped: until the caller's deadline, or
        STOPPED when this member stops."""
        request_id = self.next_request_id()
        future: asyncio.Future[MemberRecord] = asyncio.get_running_loop().create_future()
        self._waiters[request_id] = future
        try:
            return await future
        finally:
            self._waiters.pop(request_id, None)

    async def _forward(self, method: str, request: Any, metadata: Metadata) -> Any:
        """The call made at the leader (a follower's answer is the leader's), with the
        caller's token."""
        leader = self.cluster.leader_id
        if leader == NONE:
            if method == "MemberPromote":  # etcd asks the leader, and has none to ask
                raise RpcError(errors.NO_LEADER)
            # etcd proposes the change where it is asked; Raft drops it without a leader.
            return await self._dropped()
        urls = self.cluster.client_urls(leader)
        if not urls:
            raise RpcError(errors.NO_LEADER, "leader's client URL not known yet")
        channel = self._leader_channels.get(leader)
        if channel is None:
            channel = grpc.aio.insecure_channel(urls[0].removeprefix("http://"))
            self._leader_channels[leader] = channel
        stub = rpc_pb2_grpc.ClusterStub(channel)
        try:
            return await getattr(stub, method)(
                request, timeout=REQUEST_TIMEOUT_S, metadata=metadata or None
            )
        except grpc.aio.AioRpcError as error:
            kind = errors.kind_by_message(error.details() or "")
            raise RpcError(kind or errors.TIMEOUT) from error

    # ---- applying -------------------------------------------------------------------------

    def apply(self, entry: Entry) -> None:
        """Apply a committed CONF_CHANGE entry (see the module docstring)."""
        conf_change = ConfChange.decode(entry.data)
        context = ChangeContext.decode(conf_change.context)
        # A joining member's changes before its own addition are already in the
        # configuration it was given (its Raft core skips them): no peer is (re)connected.
        joining = self.driver.core.joining
        outcome = self.state.apply_member_change(entry.index, entry.term, context.change)
        if outcome is None:  # applied before this start: the backend holds it
            self.driver.apply_conf_change(conf_change)
            return
        if isinstance(outcome, RpcError):
            if self.driver.core.joining:
                # A joining member's records start at the configuration that added it,
                # so the changes before it are refused here; the Raft core, joining too,
                # skips them itself (and must see its own addition to stop joining).
                self.driver.apply_conf_change(conf_change)
            else:
                # As etcd: the Raft configuration does not change (a change of no node).
                self.driver.apply_conf_change(ConfChange(conf_change.type, NONE))
            log.info(
                "configuration change refused when applied",
                extra={"change": context.describe(), "error": outcome.describe()},
            )
        else:
            self.driver.apply_conf_change(conf_change)
            if not joining:
                self._reconnect(context.change.kind, outcome)
            log.info(
                "configuration change applied",
                extra={"change": context.describe(), "joining": joining},
            )
        if context.proposer_id == self.member_id:
            future = self._waiters.pop(context.request_id, None)
            if future is not None and not future.done():
                if isinstance(outcome, RpcError):
                    future.set_exception(outcome)
                else:
                    future.set_result(outcome)
        removed = context.change.kind is ChangeKind.REMOVE and not isinstance(outcome, RpcError)
        if removed and context.change.record.member_id == self.member_id:
            self.on_removed()

    def _reconnect(self, kind: ChangeKind, record: MemberRecord) -> None:
        """The peer transport follows the change: a peer added, moved or dropped."""
        if record.member_id == self.member_id:
            return
        if kind is ChangeKind.REMOVE:
            self.transport.remove_peer(record.member_id)
        elif kind in (ChangeKind.ADD, ChangeKind.ADD_LEARNER, ChangeKind.UPDATE):
            endpoint = parse_url(record.peer_urls[0], "peerURLs")
            self.transport.add_peer(record.member_id, endpoint.host, endpoint.port)
