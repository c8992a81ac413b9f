"""Linearizable reads: a ReadIndex round for each batch of reads, answered once applied.

`ReadIndexQueue.barrier()` returns once this member has applied everything committed
before the call (etcd's linearizable read): the reads queued since the last ReadIndex
are asked together (`issue`, which the Raft loop calls at the start of each pump run:
etcd batches them too), the leader's answer gives their read index (`on_read_states`),
and they are released once the member has applied that index (`release`). A ReadIndex
in flight when the leader changes is asked again of the new leader (`requeue`; reads
are idempotent); one unanswered for REQUEST_TIMEOUT_S fails its reads with TIMEOUT.

Runs on the member's event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from etcdspec.impl import errors
from etcdspec.impl.errors import RpcError
from etcdspec.impl.raft.driver import RaftDriver
from etcdspec.impl.raft.messages import NONE, ProposalDropped, ReadState
from etcdspec.impl.server.proposals import REQUEST_TIMEOUT_S, time_out


@dataclass
class _ReadBatch:
    """Linearizable reads waiting on one ReadIndex request."""

    context: bytes
    waiters: list[asyncio.Future[None]] = field(default_factory=list)
    index: int | None = None


class ReadIndexQueue:
    """See the module docstring."""

    def __init__(
        self,
        driver: RaftDriver,
        member_id: int,
        *,
        wake: Callable[[], None],
        leader_id: Callable[[], int],
    ) -> None:
        self.driver = driver
        self.member_id = member_id
        self.wake = wake
        self.leader_id = leader_id
        self.stopping = False
        self._pending: list[asyncio.Future[None]] = []
        self._inflight: dict[bytes, _ReadBatch] = {}
        self._waiting_apply: list[_ReadBatch] = []
        self._seq = 0

    async def barrier(self) -> None:
        """Return once this member has applied everything committed before the call."""
        if self.stopping:
            raise RpcError(errors.STOPPED)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._pending.append(future)
        self.wake()
        timer = loop.call_later(REQUEST_TIMEOUT_S, time_out, future)  # as Proposals.propose
        try:
            await future  # a timed-out future is done: no later ReadIndex carries it
        except TimeoutError as error:
            raise RpcError(
                errors.TIMEOUT if self.leader_id() != NONE else errors.TIMEOUT_LEADER_FAIL
            ) from error
        finally:
            timer.cancel()

    def waiting_apply(self) -> bool:
        """Whether reads wait for this member to apply their read index."""
        return bool(self._waiting_apply)

    def issue(self) -> None:
        """Send one ReadIndex for all reads queued since the last one (etcd batches them)."""
        self._pending = [waiter for waiter in self._pending if not waiter.done()]
        if not self._pending or self._inflight:
            return
        self._seq += 1
        context = self._seq.to_bytes(8, "big") + self.member_id.to_bytes(8, "big")
        batch = _ReadBatch(context=context, waiters=self._pending)
        try:
            self.driver.read_index(context)
        except ProposalDropped:
            # No leader right now (an election): the reads stay queued and are asked
            # again at the next wake (every tick) until their own deadline.
            return
        self._pending = []
        self._inflight[context] = batch
        loop = asyncio.get_running_loop()
        loop.call_later(REQUEST_TIMEOUT_S, self._expire, context)

    def _expire(self, context: bytes) -> None:
        batch = self._inflight.pop(context, None)
        if batch is None:
            return
        for waiter in batch.waiters:
            if not waiter.done():
                waiter.set_exception(RpcError(errors.TIMEOUT))
        self.wake()

    def on_read_states(self, read_states: tuple[ReadState, ...]) -> None:
        """The leader's answers: each batch now waits for its read index to be applied."""
        for read_state in read_states:
            batch = self._inflight.pop(read_state.context, None)
            if batch is not None:
                batch.index = read_state.index
                self._waiting_apply.append(batch)

    def release(self, applied_index: int) -> None:
        """Answer the reads whose read index is applied (`applied_index`)."""
        still: list[_ReadBatch] = []
        for batch in self._waiting_apply:
            if batch.index is not None and batch.index <= applied_index:
                for waiter in batch.waiters:
                    if not waiter.done():
                        waiter.set_result(None)
            else:
                still.append(batch)
        self._waiting_apply = still
        if self._pending and not self._inflight:
            self.wake()

    def requeue(self) -> None:
        """The leader changed: a ReadIndex in flight may never be answered by a leader that
        is gone; queue its reads again, to be asked of the new leader."""
        for batch in self._inflight.values():
            self._pending.extend(w for w in batch.waiters if not w.done())
        self._inflight.clear()

    def stop(self, error: RpcError) -> None:
        """Fail every read still waiting: the member stops."""
        self.stopping = True
        batches = [*self._inflight.values(), *self._waiting_apply]
        waiters = [w for b in batches for w in b.waiters] + self._pending
        for waiter in waiters:
            if not waiter.done():
                waiter.set_exception(error)
        self._inflight.clear()
        self._waiting_apply = []
        self._pending = []
