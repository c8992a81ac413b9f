"""Proposals: a client's write through Raft, answered once its entry is applied here.

`Proposals.propose(request)` checks the request (quota, size), gives it a request id
(this member's id in the top 16 bits, a sequence below), proposes it to the driver and
waits, at most REQUEST_TIMEOUT_S, until the entry carrying that id is applied at this
member (`resolve`, called by the apply queue with the state machine's answers); the
answer's header then names this member, its term and revision. A proposal the driver
drops (no leader, a leadership transfer) fails at once with etcd's error. Requests of
the member's own (lease expiry, auto compaction, the NOSPACE alarm) go through
`propose_internal`, best effort, with nobody waiting.

Runs on the member's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

from google.protobuf.message import Message as PbMessage

from etcdspec.impl import errors
from etcdspec.impl.errors import RpcError
from etcdspec.impl.kv.lessor import LeaseIdGenerator
from etcdspec.impl.kv.quota import nospace_alarm_request
from etcdspec.impl.kv.state_machine import AppliedEntry, StateMachine
from etcdspec.impl.pb import raft_internal_pb2 as internal_pb2
from etcdspec.impl.raft.driver import RaftDriver
from etcdspec.impl.raft.messages import NONE, ProposalDropped
from etcdspec.impl.server.config import MemberConfig
from etcdspec.impl.server.metrics import Metrics
from etcdspec.impl.server.trace import MemberTrace

REQUEST_TIMEOUT_S = 7.0
_ID_MASK = (1 << 48) - 1


class Proposals:
    """See the module docstring."""

    def __init__(
        self,
        driver: RaftDriver,
        state: StateMachine,
        config: MemberConfig,
        *,
        metrics: Metrics,
        wake: Callable[[], None],
        leader_id: Callable[[], int],
        trace: MemberTrace | None,
    ) -> None:
        self.driver = driver
        self.state = state
        self.member_id = member_id = config.member_id
        self.cluster_id = config.cluster_id
        self.max_request_bytes = config.max_request_bytes
        self.metrics = metrics
        self.wake = wake
        self.leader_id = leader_id
        self.trace = trace
        self.stopping = False
        self._waiters: dict[int, asyncio.Future[PbMessage]] = {}
        self._request_seq = (time.time_ns() // 1_000_000) << 8
        self._lease_ids = LeaseIdGenerator(member_id, time.time_ns() // 1_000_000)

    def waiting(self) -> bool:
        """Whether a client of this member waits for a proposal to be applied."""
        return bool(self._waiters)

    def next_request_id(self) -> int:
        self._request_seq += 1
        return ((self.member_id & 0xFFFF) << 48) | (self._request_seq & _ID_MASK)

    async def propose(self, request: internal_pb2.InternalRaftRequest) -> PbMessage:
        """Propose `request`; return the applier's response once it is applied here."""
        if self.stopping:
            raise RpcError(errors.STOPPED)
        kind = request.WhichOneof("request")
        if kind == "lease_grant" and request.lease_grant.ID == 0:
            request.lease_grant.ID = self._lease_ids.next()
        try:
            self.state.precheck(request)
        except RpcError as error:
            if error.kind is errors.NO_SPACE and not self.state.nospace_raised():
                # As etcd: the first write refused for lack of space raises the alarm.
                self.propose_internal(
                    internal_pb2.InternalRaftRequest(alarm=nospace_alarm_request(self.member_id))
                )
            raise
        request_id = self.next_request_id()
        request.header.ID = request_id
        request.header.member_id = self.member_id
        data = request.SerializeToString()
        if len(data) > self.max_request_bytes:
            raise RpcError(errors.REQUEST_TOO_LARGE)
        future: asyncio.Future[PbMessage] = asyncio.get_running_loop().create_future()
        self._waiters[request_id] = future
        try:
            self.driver.propose(data)
            if self.trace is not None:
                self.trace.event("propose", size=len(data))
        except ProposalDropped as error:
            self._waiters.pop(request_id, None)
            self.metrics.proposals_failed += 1
            raise RpcError(
                errors.NO_LEADER if error.leader_id == NONE else errors.LEADER_CHANGED
            ) from error
        self.metrics.proposals_pending = len(self._waiters)
        self.wake()
        # A plain await with a timer on the future itself: no extra task or shield, so
        # the answer reaches the caller in the loop iteration after `resolve` sets it;
        # and no asyncio.timeout, which needs a task (grpc_h2 runs a handler's first
        # steps before it makes one).
        timer = asyncio.get_running_loop().call_later(REQUEST_TIMEOUT_S, time_out, future)
        try:
            response = await future
        except TimeoutError as error:
            self.metrics.proposals_failed += 1
            raise RpcError(
                errors.TIMEOUT if self.leader_id() != NONE else errors.TIMEOUT_LEADER_FAIL
            ) from error
        finally:
            timer.cancel()
            self._waiters.pop(request_id, None)
            self.metrics.proposals_pending = len(self._waiters)
        header = getattr(response, "header", None)
        if header is not None:
            header.cluster_id = self.cluster_id
            header.member_id = self.member_id
            if not header.revision:
                header.revision = self.state.current_revision()
            if not header.raft_term:
                header.raft_term = self.driver.term
        return response

    def propose_internal(self, request: internal_pb2.InternalRaftRequest) -> None:
        """Propose a request of the member's own (no client waits for it); best effort.
        It is applied with root's rights when auth is enabled (`as_member`)."""
        request.header.ID = self.next_request_id()
        request.header.member_id = self.member_id
        request.header.as_member = True
        with contextlib.suppress(ProposalDropped):
            self.driver.propose(request.SerializeToString())
            self.wake()

    def resolve(self, results: list[AppliedEntry]) -> None:
        """Answer the clients waiting for the entries just applied."""
        for result in results:
            if result.request_id is None:
                continue
            future = self._waiters.pop(result.request_id, None)
            if future is not None and not future.done():
                if result.error is not None:
                    self.metrics.proposals_failed += 1
                    future.set_exception(result.error)
                else:
                    assert result.response is not None
                    future.set_result(result.response)

    def stop(self) -> None:
        """Fail every waiting proposal: the member stops."""
        self.stopping = True
        for future in self._waiters.values():
            if not future.done():
                future.set_exception(RpcError(errors.STOPPED))


def time_out(future: asyncio.Future[Any]) -> None:
    """A request's deadline passed: its future fails with TimeoutError (if still open)."""
    if not future.done():
        future.set_exception(TimeoutError())
