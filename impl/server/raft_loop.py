"""The member's Raft loop: the Raft driver's Readies handled as the pump's plan says.

`RaftLoop` owns the driver on the member's event loop (one thread; every driver call
happens on it). Whatever makes a Ready (a peer's message, a proposal, a tick) asks for
the pump (`request_pump`); `pump` handles the pending Readies at the end of the read
that brought those messages or requests (the peer transport and the gRPC server call
it), or in the next turn of the loop for a timer's or the ticker's, and all of that
read's messages in one Ready. With the WAL fsync inline a Ready never waits; when one
does (a fsync in a worker), a task takes the pump on from there
(rpc.eager.start_eagerly), and requests made meanwhile are handled when it has finished.

Each Ready is handled by carrying out `plan(facts, settings)` step by step
(`_handle_ready`): this module decides nothing about the order. After the plan:
- if the leader now owes its followers a commit index (the Raft core runs with
  defer_commit_broadcast), a COMMIT_FLUSH_S timer sends it, unless an MsgApp (the next
  write's) carries it first: one client's writes then cost one round of peer messages
  each, not two;
- a local snapshot is started or recorded (server.snapshots), and the trace flushed.
After each run, the backend's group commit, when due, runs two turns of the loop later,
so that the answers the run's applies released leave first.
A failure in the loop is fatal: the member stops (`on_failure`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import replace

from etcdspec.impl.raft import codec as raft_codec
from etcdspec.impl.raft.core import Role
from etcdspec.impl.raft.driver import RaftDriver, Ready
from etcdspec.impl.raft.messages import Entry, HardState, MessageType
from etcdspec.impl.rpc.eager import start_eagerly
from etcdspec.impl.server.apply import ApplyQueue
from etcdspec.impl.server.metrics import Metrics
from etcdspec.impl.server.peer import PeerTransport
from etcdspec.impl.server.proposals import Proposals
from etcdspec.impl.server.pump import FsyncPace, Plans, PumpSettings, Step, facts_key
from etcdspec.impl.server.reads import ReadIndexQueue
from etcdspec.impl.server.recovery import MemberData
from etcdspec.impl.server.snapshots import Snapshots
from etcdspec.impl.server.trace import MemberTrace
from etcdspec.impl.storage.data_dir import PreparedPersist

log = logging.getLogger("etcdspec.impl.server.raft_loop")

# How long a leader waits for an MsgApp to carry a new commit index to the followers
# before it sends them one for that alone (RaftConfig.defer_commit_broadcast).
COMMIT_FLUSH_S = 0.002


class RaftLoop:
    """See the module docstring."""

    def __init__(
        self,
        driver: RaftDriver,
        data: MemberData,
        transport: PeerTransport,
        *,
        applying: ApplyQueue,
        reads: ReadIndexQueue,
        proposals: Proposals,
        snapshots: Snapshots,
        persisted: HardState,
        settings: PumpSettings,
        metrics: Metrics,
        trace: MemberTrace | None,
        on_soft_state: Callable[[int, Role], None],
        on_failure: Callable[[Exception], None],
    ) -> None:
        self.driver = driver
        self.data = data
        self.transport = transport
        self.applying = applying
        self.reads = reads
        self.proposals = proposals
        self.snapshots = snapshots
        self.persisted_hard_state = persisted
        self.settings = settings
        # The plans with the fsync inline and in a worker (FsyncPace picks per Ready).
        self._plans = {
            inline: Plans(replace(settings, fsync_inline=inline)) for inline in (True, False)
        }
        self.fsync_pace = FsyncPace()
        self.metrics = metrics
        self.trace = trace
        self.on_soft_state = on_soft_state
        self.on_failure = on_failure
        self.stopping = False
        # Whether Readies wait to be handled, whether one runs, and the task driving it
        # on when it had to wait.
        self.pump_wanted = False
        self.pumping = False
        self.pump_task: asyncio.Task[None] | None = None
        self._flush_scheduled = False  # a due group commit waits for `_flush_backend`
        self._commit_flush: asyncio.TimerHandle | None = None
        self._synchronous: dict[Step, Callable[[Ready], None]] = {
            Step.FSYNC_INLINE: self._fsync_inline,
            Step.WRITE: self._write_unsynced,
            Step.WRITE_LATE: self._write_unsynced,
            Step.SEND_APPENDS: lambda ready: self._send(ready, appends=True),
            Step.SEND: lambda ready: self._send(ready, appends=None),
            Step.SEND_REST: lambda ready: self._send(ready, appends=False),
            Step.SOFT_STATE: self._soft_state,
            Step.APPLY_PERSISTED: lambda ready: self.applying.apply(ready.committed_entries),
            Step.APPLY: lambda ready: self.applying.apply(ready.committed_entries),
            Step.APPLY_OR_DEFER: lambda ready: self._apply_or_defer(ready.committed_entries),
            Step.RESTORE: self._restore,
            Step.RELEASE_READS: self._release_reads,
            Step.ADVANCE: self.driver.advance,
        }
        asynchronous = {Step.FSYNC_WORKER, Step.AWAIT_FSYNC}  # in `_handle_ready` itself
        assert set(self._synchronous) == set(Step) - asynchronous, "a step without a handler"

    # ---- scheduling ---------------------------------------------------------------------

    def request_pump(self) -> None:
        """Have the Readies that a step, proposal or tick made handled: by `pump` at the
        end of the read that brought the message or request (the transports call it), or
        else in the next turn of the event loop; by the pump running, if one runs."""
        if self.pump_wanted:
            return
        self.pump_wanted = True
        if not self.pumping:
            asyncio.get_running_loop().call_soon(self.pump)

    def pump(self) -> None:
        """Handle the pending Readies now, in the caller's turn of the event loop."""
        if self.pumping or not self.pump_wanted or self.stopping:
            return
        self.pumping = True
        self.pump_task = start_eagerly(
            asyncio.get_running_loop(), self._pump_readies(), name="raft-pump"
        )

    async def _pump_readies(self) -> None:
        driver = self.driver
        try:
            while self.pump_wanted:
                self.pump_wanted = False
                self.reads.issue()
                while driver.has_ready():
                    await self._handle_ready(driver.ready())
                    if driver.has_ready():
                        # Let other tasks (gRPC, peers) run between Readies.
                        await asyncio.sleep(0)
                if self.data.state.flush_due() and not self._flush_scheduled:
                    # Two turns of the loop later, so that the answers this run's applies
                    # released leave before the group commit's writes: their handlers run
                    # in the next turn, and a connection with several calls writes in the
                    # one after (grpc_h2 `answered`).
                    self._flush_scheduled = True
                    loop = asyncio.get_running_loop()
                    loop.call_soon(loop.call_soon, self._flush_backend)
        except Exception as error:
            self.on_failure(error)
        finally:
            self.pumping = False

    def _flush_backend(self) -> None:
        self._flush_scheduled = False
        if self.stopping:
            return
        try:
            self.data.state.flush_if_due()
        except Exception as error:
            self.on_failure(error)

    def stop(self) -> asyncio.Task[None] | None:
        """Stop pumping; the pump's task, if one runs, for the caller to cancel."""
        self.stopping = True
        if self._commit_flush is not None:
            self._commit_flush.cancel()
        return self.pump_task

    # ---- one Ready ------------------------------------------------------------------------

    async def _handle_ready(self, ready: Ready) -> None:
        key = facts_key(ready, leader=self.driver.is_leader(), persisted=self.persisted_hard_state)
        steps = self._plans[self.fsync_pace.inline()].for_key(key)
        synchronous = self._synchronous
        persisting: asyncio.Future[float] | None = None
        try:
            for step in steps:
                if step is Step.FSYNC_WORKER:
                    # Encoded here; a worker only writes and fsyncs, so it hardly needs
                    # the GIL that the loop wants back after each of its own system calls.
                    prepared = self._prepare(ready)
                    persisting = asyncio.ensure_future(
                        asyncio.to_thread(self._write_persist, prepared)
                    )
                elif step is Step.AWAIT_FSYNC:
                    assert persisting is not None
                    waiting, persisting = persisting, None
                    self.fsync_pace.observe(await waiting)
                    self.metrics.wal_fsyncs += 1
                    self._persisted(ready)
                else:
                    synchronous[step](ready)
        finally:
            if persisting is not None:
                # A step failed while the worker writes: the WAL is not left mid-write.
                self.fsync_pace.observe(await persisting)
        self._schedule_commit_flush()
        self.snapshots.maybe_snapshot(self.applying.applied_index)
        if self.trace is not None:
            self.trace.flush()

    # The synchronous steps of a plan (`_synchronous`), each given the Ready.

    def _fsync_inline(self, ready: Ready) -> None:
        self.fsync_pace.observe(self._write_persist(self._prepare(ready)))
        self.metrics.wal_fsyncs += 1
        self._persisted(ready)

    def _write_unsynced(self, ready: Ready) -> None:
        self.data.disk.persist(ready.hard_state, ready.entries, ready.snapshot, sync=False)
        self._persisted(ready)

    def _soft_state(self, ready: Ready) -> None:
        assert ready.soft_state is not None
        self.on_soft_state(ready.soft_state.leader_id, ready.soft_state.role)

    def _release_reads(self, ready: Ready) -> None:
        self.reads.on_read_states(ready.read_states)
        if self.reads.waiting_apply() and self.applying.deferred:
            self.applying.catch_up()
        self.reads.release(self.applying.applied_index)

    def _apply_or_defer(self, committed: tuple[Entry, ...]) -> None:
        """A follower's committed entries: held back while it still follows, nobody here
        waits for a proposal or a read, and the entries held back and these do not include
        its turn (ApplyQueue.turn); else applied."""
        if (
            self.driver.is_leader()
            or self.proposals.waiting()
            or self.reads.waiting_apply()
            or self.applying.turn(committed)
        ):
            self.applying.apply(committed)
        else:
            self.applying.defer(committed)

    def _prepare(self, ready: Ready) -> PreparedPersist:
        return self.data.disk.prepare_persist(ready.hard_state, ready.entries, ready.snapshot)

    def _write_persist(self, prepared: PreparedPersist) -> float:
        """Write and fsync a prepared Ready (on any thread); the seconds it took."""
        started = time.monotonic()
        self.data.disk.write_persist(prepared)
        return time.monotonic() - started

    def _persisted(self, ready: Ready) -> None:
        if ready.hard_state is not None:
            self.persisted_hard_state = ready.hard_state
        if self.trace is not None:
            self.trace.event("persist", entries=ready.entries)

    def _restore(self, ready: Ready) -> None:
        snapshot = ready.snapshot
        assert snapshot is not None
        self.applying.catch_up()
        log.info("snapshot received", extra={"snapshot": snapshot.describe()})
        if self.trace is not None:
            self.trace.event("restore", index=snapshot.meta.index)
        self.data.state.restore(snapshot.data, snapshot.meta.index)
        self.applying.restored(snapshot.meta.index)
        self.snapshots.restored(snapshot.meta.index)

    def _send(self, ready: Ready, appends: bool | None) -> None:
        """Send the Ready's messages: all of them (appends None), only the MsgApp ones
        (True), or all but the MsgApp ones (False). A MsgSnap of a snapshot of this
        member's own leaves once a copy of the database is made for it
        (Snapshots.send_later)."""
        transport, encode, trace = self.transport, raft_codec.encode_message, self.trace
        for message in ready.messages:
            if appends is not None and (message.type is MessageType.APP) is not appends:
                continue
            if message.type is MessageType.SNAP and self.snapshots.send_later(message):
                continue
            transport.send(message.to, encode(message))
            if trace is not None:
                trace.event("send", message=message)
        if ready.messages:
            transport.flush()

    # ---- the commit index owed to followers ------------------------------------------------

    def _schedule_commit_flush(self) -> None:
        """Time the sending of a commit index the followers are owed."""
        owed = self.driver.commit_pending
        if owed and self._commit_flush is None:
            self._commit_flush = asyncio.get_running_loop().call_later(
                COMMIT_FLUSH_S, self._flush_commit
            )
        elif not owed and self._commit_flush is not None:
            self._commit_flush.cancel()  # an MsgApp carried it
            self._commit_flush = None

    def _flush_commit(self) -> None:
        self._commit_flush = None
        if self.driver.commit_pending and not self.stopping:
            self.driver.flush_commit()
            self.request_pump()
