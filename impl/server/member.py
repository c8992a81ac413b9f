"""One member of the reference server: the asyncio loop around the Raft driver.

The member owns, on one asyncio event loop (one thread; every driver call happens on
it): the Raft driver (etcdspec.impl.raft.driver), the WAL and snapshot files, the
applier over the SQLite backend, the lessor and the watch hub, the peer transport, the
gRPC server and the metrics endpoint.

The Raft pump (`pump`) handles the driver's Readies at the end of the read that brought
the messages or requests that made them (or in the next turn of the loop, for a timer's or
the ticker's), and follows the driver's Ready contract, in this order:
1. persist the Ready's snapshot, entries and hard state in the WAL, one fsync: on the
   loop thread while the disk's recent fsyncs are fast (`FsyncPace`), else in a worker
   thread, while which the committed entries that earlier Readies persisted are
   applied as in step 3 (committed means durable on a quorum already);
2. only then send its messages to the peers -- except a leader's MsgApp, which leaves
   while the leader's own fsync runs (the leader's parallel persist, Raft dissertation
   §10.2.1, as etcd does; safe because the Raft core counts the leader in a commit
   quorum only after this fsync, see `leader_sends_early`). A follower's
   MsgAppResp and every vote still leave only after the fsync;
3. restore a received snapshot, apply committed entries through the applier (the
   backend stores the applied index in the same SQLite transaction; its commits are
   grouped, at most GROUP_COMMIT_S apart: the pump commits a due group at each run,
   and a crash loses only batches the WAL replays), answer the client
   calls waiting on those entries (matched by the request id in the entry), and the
   linearizable reads whose read index is now applied;
4. advance; if the leader now owes its followers a commit index (the Raft core runs with
   defer_commit_broadcast), start a COMMIT_FLUSH_S timer that sends it, unless an
   MsgApp (the next write's) carries it first. One client's writes then cost one round
   of peer messages each, not two; a follower applies a lone write COMMIT_FLUSH_S later
   (but a write it forwarded at once: its client waits for it to apply that one).
   A follower holds back committed entries nobody there waits for, to apply them in a
   batch at its turn, at most APPLY_DEFER_S later (`_defer_apply`).
A client write is acknowledged only after its entry is committed (durable on a quorum)
and applied here. Serializable reads read the local backend at once; linearizable reads
wait for a ReadIndex round. The leader proposes LeaseRevoke for leases its lessor finds
expired, and takes a snapshot (log compaction) every --snapshot-count applied entries.

Failpoints (etcdspec.impl.failpoints, off unless ETCDSPEC_FAILPOINTS names them, read
once in `run_member`) plant known bugs at marked spots: ack_before_fsync (persist after
send and apply, no fsync) and stale_leader_lease_revoke (revoke outside the log) here;
the others in the server, the watch hub and the member's storage.

Profiling (performance work): with ETCDSPEC_PROFILE=PREFIX in its environment,
`run_member` runs cProfile over the loop thread and writes PREFIX.<name> on stopping.

Garbage collection (`tune_gc`, in `run_member` once the member serves): what start-up
allocated is frozen out of the collector, and the youngest generation is collected every
GC_THRESHOLDS[0] allocations instead of 700, so that collections (pauses of the loop
thread, the tail of the latency) are rare; the work is cyclic garbage only, which the
put path hardly makes.

Time: a task ticks the driver every --heartbeat-interval; the election timeout is
counted in ticks. Lease expiry uses time.monotonic() here, the I/O layer.
"""

from __future__ import annotations

import asyncio
import contextlib
import cProfile
import gc
import hashlib
import json
import logging
import os
import random
import signal
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.message import Message as PbMessage

from etcdspec.impl import errors, failpoints
from etcdspec.impl.api.watch_stream import WatchStream
from etcdspec.impl.errors import RpcError
from etcdspec.impl.kv.lessor import LeaseIdGenerator, NotPrimaryError
from etcdspec.impl.kv.quota import nospace_alarm_request
from etcdspec.impl.pb import raft_internal_pb2 as internal_pb2
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc
from etcdspec.impl.raft import codec as raft_codec
from etcdspec.impl.raft.driver import RaftConfig, RaftDriver, Ready, Role
from etcdspec.impl.raft.messages import (
    NONE,
    Entry,
    HardState,
    Message,
    MessageType,
    ProposalDropped,
    Snapshot,
)
from etcdspec.impl.rpc.eager import start_eagerly
from etcdspec.impl.rpc.grpc_h2 import GrpcH2Server
from etcdspec.impl.server import event_loop
from etcdspec.impl.server.config import MemberConfig
from etcdspec.impl.server.member_storage import MemberStorage, PreparedPersist
from etcdspec.impl.server.metrics import Metrics, MetricsServer
from etcdspec.impl.server.peer import FrameError, PeerTransport, read_fault_file
from etcdspec.impl.server.trace import TraceWriter

log = logging.getLogger("etcdspec.impl.server.member")

SERVER_VERSION = "3.5.0"
STORAGE_VERSION = "3.5.0"
SNAPSHOT_CHUNK_BYTES = 32 * 1024
REQUEST_TIMEOUT_S = 7.0
AUTO_COMPACTION_CHECK_S = 1.0  # etcd's revision mode checks every 5 min; we check often
WATCH_PROGRESS_S = 600.0  # etcd's default progress notify interval (10 minutes)
# How long a leader waits for an MsgApp to carry a new commit index to the followers
# before it sends them one for that alone (RaftConfig.defer_commit_broadcast).
COMMIT_FLUSH_S = 0.002
# How long a follower may hold committed entries that nobody here waits for, to apply them
# in one batch at its turn (`_defer_apply`).
APPLY_DEFER_S = 0.005
_ID_MASK = (1 << 48) - 1
# Collector thresholds of a serving member (see `tune_gc`); Python's default is (700, 10, 10).
GC_THRESHOLDS = (50_000, 20, 20)
# Profiling (performance work only): cProfile the event-loop thread; the stats go to
# "<value>.<member name>" when the member stops (SIGTERM).
PROFILE_ENV = "ETCDSPEC_PROFILE"


class FsyncPace:
    """Whether the next WAL write and fsync should run on the loop thread (inline).

    A worker thread lets the loop serve while an fsync runs, but costs two thread
    hand-offs and GIL transfers per Ready: with fsyncs of ~0.1 ms (this machine's disk)
    that is more CPU and more latency than the fsync itself (server_bench, put with one
    client: p50 2.8 -> 2.2 ms, CPU per put -25%; at 64 clients no worse). With a slow
    disk the loop must not stall: the moving average of recent write+fsync times
    (weight ALPHA for the newest) decides, inline while it is under INLINE_MAX_S.
    """

    INLINE_MAX_S = 0.002
    ALPHA = 0.2

    def __init__(self) -> None:
        self.average_s = 0.0

    def inline(self) -> bool:
        return self.average_s < self.INLINE_MAX_S

    def observe(self, seconds: float) -> None:
        self.average_s += self.ALPHA * (seconds - self.average_s)


def committed_already_persisted(ready: Ready) -> bool:
    """Whether `ready` has committed entries, all persisted by earlier Readies: no
    snapshot to restore first, and none at or after the first index of the entries this
    Ready persists (which may replace a conflicting suffix). Those may be applied while
    this Ready's own persist runs."""
    committed = ready.committed_entries
    if not committed or ready.snapshot is not None:
        return False
    return not ready.entries or committed[-1].index < ready.entries[0].index


def leader_sends_early(ready: Ready, is_leader: bool, persisted: HardState) -> bool:
    """Whether this Ready's MsgApp messages may leave before its fsync completes.

    The leader's parallel persist (Raft dissertation §10.2.1; etcd's raftNode sends a
    leader's messages before it saves the Ready): only a leader, and only when the
    Ready changes neither term nor vote and restores no snapshot, so that what its
    MsgApp claims about the leader itself (its term, which it voted for in) is durable
    already. Only MsgApp leaves early; acknowledgements (MsgAppResp, vote grants)
    and everything else still wait for the fsync.

    Why acknowledged writes stay durable on a quorum: a MsgApp promises nothing about
    the leader's own disk. The Raft core counts the leader in a commit quorum only up
    to `log.stable_index`, which moves in `advance`, after this Ready's fsync
    (raft_core.RaftCore.stable_to); a follower answers only after its own fsync. So
    an entry is committed only when a quorum, the leader counted only if it is
    durable there, holds it on disk; and a client is answered only when its entry
    is applied, which is after commit. If the leader dies before its fsync, its lost
    entries are uncommitted ones or ones a quorum of followers holds durably (the
    election restriction then keeps them).
    """
    if not is_leader or ready.snapshot is not None or not ready.entries:
        return False
    hard = ready.hard_state
    return hard is None or (hard.term, hard.vote) == (persisted.term, persisted.vote)


class MemberStartError(Exception):
    """The member could not start (data directory, ports); the message says why."""


class JsonLogFormatter(logging.Formatter):
    """One JSON object per line: level, ts, logger, msg, and any `extra` fields."""

    _STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None)))

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "level": record.levelname.lower(),
            "ts": round(record.created, 6),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in self._STANDARD and key not in ("message", "asctime"):
                entry[key] = value
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure_logging(level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLogFormatter())
    root = logging.getLogger("etcdspec")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False


@dataclass
class _ReadBatch:
    """Linearizable reads waiting on one ReadIndex request."""

    context: bytes
    waiters: list[asyncio.Future[None]] = field(default_factory=list)
    index: int | None = None


class Member:
    """See the module docstring. Create, `await start()`, serve, `await stop()`."""

    def __init__(self, config: MemberConfig) -> None:
        self.config = config
        self.member_id = config.member_id
        self.cluster_id = config.cluster_id
        self.metrics = Metrics()
        self.storage_version = STORAGE_VERSION
        self.rng = random.Random(config.seed ^ self.member_id)
        self.storage = MemberStorage(Path(config.data_dir), self.member_id)
        self.driver: RaftDriver | None = None
        self.transport: PeerTransport | None = None
        self.grpc_server: GrpcH2Server | None = None
        self.metrics_server: MetricsServer | None = None
        self.peer_attributes: dict[int, dict[str, Any]] = {self.member_id: self._own_attributes()}
        self._waiters: dict[int, asyncio.Future[PbMessage]] = {}
        self._request_seq = (time.time_ns() // 1_000_000) << 8
        self._lease_ids = LeaseIdGenerator(self.member_id, time.time_ns() // 1_000_000)
        self._read_pending: list[asyncio.Future[None]] = []
        self._read_inflight: dict[bytes, _ReadBatch] = {}
        self._read_waiting_apply: list[_ReadBatch] = []
        self._read_seq = 0
        self._revoking: dict[int, float] = {}
        # The Raft pump (`pump`): whether Readies wait to be handled, whether one runs, and
        # the task driving it on when it had to wait.
        self._pump_wanted = False
        self._pumping = False
        self._pump_task: asyncio.Task[None] | None = None
        self._flush_scheduled = False  # a due group commit waits for `_flush_backend`
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        self._leader_id = NONE
        self._last_snapshot_index = 0
        self._snapshot_job: Future[Snapshot] | None = None  # `_maybe_snapshot`'s worker
        self._applied_index = 0
        self._leader_clients: dict[int, grpc.aio.Channel] = {}
        self.stopped = asyncio.Event()
        self._persisted_hard_state = HardState()
        self._fsync_pace = FsyncPace()
        self.failure: str | None = None
        self._ticks = 0
        self._progress_ticks = max(1, int(WATCH_PROGRESS_S * 1000 / config.heartbeat_interval_ms))
        self._watch_streams: dict[int, WatchStream] = {}
        self._compaction_ticks = max(
            1, int(AUTO_COMPACTION_CHECK_S * 1000 / config.heartbeat_interval_ms)
        )
        self._compact_proposed = 0
        self.tracer: TraceWriter | None = None
        self._fault_stamp = -1
        self._commit_flush: asyncio.TimerHandle | None = None
        self._deferred: tuple[Entry, ...] = ()  # committed, not yet applied (_defer_apply)
        voters = sorted(peer.member_id for peer in config.peers)
        self._apply_period = len(voters)  # a follower's turn to apply (_apply_turn)
        self._apply_rank = voters.index(self.member_id)
        self._apply_timer: asyncio.TimerHandle | None = None
        self.storage.on_watch_ready = self._on_watch_ready

    # ---- life cycle -------------------------------------------------------------------

    def _own_attributes(self) -> dict[str, Any]:
        return {
            "name": self.config.name,
            "client_urls": [e.url for e in self.config.advertise_client_urls],
        }

    async def start(self) -> None:
        """Recover from disk and start serving; on failure, release everything and raise
        MemberStartError saying what could not be done."""
        try:
            await self._start()
        except Exception as error:
            self._stopping = False
            with contextlib.suppress(Exception):
                await self.stop()
            if isinstance(error, MemberStartError):
                raise
            raise MemberStartError(f"{self.config.name}: cannot start: {error}") from error

    async def _start(self) -> None:
        recovered = self.storage.open(
            quota_bytes=self.config.quota_backend_bytes,
            initial_cluster_state=self.config.initial_cluster_state,
        )
        voters = tuple(peer.member_id for peer in self.config.peers)
        raft_config = RaftConfig(
            id=self.member_id,
            voters=voters,
            election_tick=self.config.election_ticks,
            heartbeat_tick=1,
            defer_commit_broadcast=True,
        )
        self.driver = RaftDriver(
            raft_config, self.rng, persisted=recovered.persisted, applied=recovered.applied
        )
        self._applied_index = recovered.applied
        self._last_snapshot_index = recovered.snapshot_index
        self._persisted_hard_state = recovered.persisted.hard_state
        if self.config.trace_file:
            self.tracer = TraceWriter(self.config.trace_file, self.member_id)
            self._trace("start")
        log.info(
            "member starting",
            extra={
                "member": self.config.describe(),
                "recovered": recovered.describe(),
            },
        )
        peers = {
            peer.member_id: (peer.peer.host, peer.peer.port)
            for peer in self.config.peers
            if peer.member_id != self.member_id
        }
        listen = self.config.listen_peer_urls[0]
        self.transport = PeerTransport(
            self.member_id,
            listen.host,
            listen.port,
            peers,
            self._on_peer_frame,
            after_read=self.pump,
            attributes=self._own_attributes(),
            on_attributes=self._on_peer_attributes,
        )
        await self.transport.start()
        from etcdspec.impl.api.services import start_grpc_server

        targets = [e.target for e in self.config.listen_client_urls]
        try:
            self.grpc_server = await start_grpc_server(self, targets)
            self.grpc_server.before_call = self.catch_up
            self.grpc_server.after_read = self.pump
        except RuntimeError as error:
            raise MemberStartError(
                f"cannot listen for clients on {', '.join(targets)} ({error}); "
                "is another server using the port? choose --listen-client-urls"
            ) from error
        for endpoint in self.config.listen_metrics_urls[:1]:
            self.metrics_server = MetricsServer(
                self.metrics, endpoint.host, endpoint.port, refresh=self._refresh_metrics
            )
            await self.metrics_server.start()
        self._tasks.append(asyncio.create_task(self._ticker(), name="ticker"))
        if len(voters) == 1:
            self.driver.campaign()
        self._request_pump()

    async def stop(self) -> None:
        if self._stopping:
            return
        self._stopping = True
        if self._commit_flush is not None:
            self._commit_flush.cancel()
        if self._apply_timer is not None:
            self._apply_timer.cancel()
        tasks = [*self._tasks, *([self._pump_task] if self._pump_task is not None else [])]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self.grpc_server is not None:
            await self.grpc_server.stop(grace=0.5)
        if self.transport is not None:
            await self.transport.close()
        if self.metrics_server is not None:
            await self.metrics_server.close()
        for channel in self._leader_clients.values():
            await channel.close()
        for future in self._waiters.values():
            if not future.done():
                future.set_exception(RpcError(errors.STOPPED))
        self._fail_reads(RpcError(errors.STOPPED))
        self.storage.close()
        if self.tracer is not None:
            self.tracer.close()
        self.stopped.set()
        log.info("member stopped", extra={"member_id": f"{self.member_id:x}"})

    # ---- peers ------------------------------------------------------------------------

    def _on_peer_frame(self, from_id: int, payload: bytes) -> None:
        if self.driver is None or self._stopping:
            return
        try:
            message = self.storage.decode_message(payload)
        except raft_codec.CodecError:
            log.exception("dropping an undecodable raft message", extra={"from": f"{from_id:x}"})
            return
        self.driver.step(message)
        if self.tracer is not None:
            self._trace("receive", message=message)
        self._request_pump()

    def _on_peer_attributes(self, from_id: int, attributes: dict[str, Any]) -> None:
        self.peer_attributes[from_id] = attributes

    # ---- the loop ---------------------------------------------------------------------

    async def _ticker(self) -> None:
        interval = self.config.heartbeat_interval_ms / 1000.0
        while True:
            await asyncio.sleep(interval)
            assert self.driver is not None
            self.driver.tick()
            self._expire_leases()
            self._ticks += 1
            self._reload_faults()
            hub = self.storage.watch_hub
            if hub.unsynced():
                hub.sync()
            if self._ticks % self._progress_ticks == 0:
                hub.progress()
            if self._ticks % self._compaction_ticks == 0:
                self._auto_compact()
            self._request_pump()

    def _reload_faults(self) -> None:
        """Re-read --fault-file when it changed (fault-injection tests only)."""
        path = self.config.fault_file
        if path is None or self.transport is None:
            return
        try:
            stamp = os.stat(path).st_mtime_ns
        except FileNotFoundError:
            stamp = 0
        if stamp == self._fault_stamp:
            return
        self._fault_stamp = stamp
        try:
            blocked = read_fault_file(path)
        except FrameError as error:
            log.error("ignoring the fault file", extra={"error": str(error)})
            return
        if blocked != self.transport.blocked:
            log.warning("fault injection", extra={"blocked_peers": sorted(blocked)})
            self.transport.blocked = blocked

    def _request_pump(self) -> None:
        """Have the Readies that a step, proposal or tick made handled: by `pump` at the
        end of the read that brought the message or request (the transports call it), or
        else in the next turn of the event loop; by the pump running, if one runs."""
        if self._pump_wanted:
            return
        self._pump_wanted = True
        if not self._pumping:
            asyncio.get_running_loop().call_soon(self.pump)

    def pump(self) -> None:
        """Handle the pending Readies now, in the caller's turn of the event loop.

        The peer transport calls this once it has parsed a read, and the gRPC server once
        the calls a read completed have begun: the Readies that read made (a MsgApp to
        persist and acknowledge, a proposal to send on) are handled without waiting for
        another turn of the loop, and all of that read's messages in one Ready. With the
        WAL fsync inline (FsyncPace) a Ready never waits; when one does (a fsync in a
        worker), a task takes the pump on from there (eager.start_eagerly), and requests
        made meanwhile are handled when it has finished.
        """
        if self._pumping or not self._pump_wanted or self._stopping:
            return
        self._pumping = True
        self._pump_task = start_eagerly(
            asyncio.get_running_loop(), self._pump_readies(), name="raft-pump"
        )

    async def _pump_readies(self) -> None:
        assert self.driver is not None
        try:
            while self._pump_wanted:
                self._pump_wanted = False
                self._issue_read_index()
                while self.driver.has_ready():
                    await self._handle_ready(self.driver.ready())
                    if self.driver.has_ready():
                        # Let other tasks (gRPC, peers) run between Readies.
                        await asyncio.sleep(0)
                if self.storage.backend_flush_due() and not self._flush_scheduled:
                    # Two turns of the loop later, so that the answers this run's applies
                    # released leave before the group commit's writes: their handlers run
                    # in the next turn, and a connection with several calls writes in the
                    # one after (grpc_h2 `answered`).
                    self._flush_scheduled = True
                    loop = asyncio.get_running_loop()
                    loop.call_soon(loop.call_soon, self._flush_backend)
        except Exception as error:
            self._fail(error)
        finally:
            self._pumping = False

    def _flush_backend(self) -> None:
        self._flush_scheduled = False
        if self._stopping:
            return
        try:
            self.storage.flush_backend_if_due()
        except Exception as error:
            self._fail(error)

    def _fail(self, error: Exception) -> None:
        log.exception("fatal error in the raft loop; stopping the member")
        self.failure = f"raft loop: {error!r}"
        asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(self.stop()))

    async def _handle_ready(self, ready: Ready) -> None:
        assert self.driver is not None and self.transport is not None
        # 1. Persist (one fsync), before any message leaves. On a slow disk the fsync
        # runs in a worker thread so that the loop keeps taking proposals and messages
        # meanwhile (the driver allows step/propose between ready() and advance());
        # they go out in the next Ready. Inline (FsyncPace), they wait in the sockets
        # for the same next Ready: under load, writes are batched either way.
        late_persist = ready.must_sync and failpoints.on("ack_before_fsync")
        persisting: asyncio.Future[float] | None = None
        inline: PreparedPersist | None = None
        if ready.must_sync and not late_persist:
            if self._needs_fsync(ready):
                # Encoded here; a worker only writes and fsyncs, so it hardly needs
                # the GIL that the loop wants back after each of its own system calls.
                prepared = self.storage.prepare_persist(
                    ready.hard_state, ready.entries, ready.snapshot
                )
                if self._fsync_pace.inline():
                    inline = prepared
                else:
                    persisting = asyncio.ensure_future(
                        asyncio.to_thread(self._write_persist, prepared)
                    )
            else:
                self.storage.persist(ready.hard_state, ready.entries, ready.snapshot, sync=False)
                self._persisted(ready)
        # 2a. A leader's MsgApp leaves before its own fsync (parallel persist; see
        # `leader_sends_early`): the followers persist in parallel with the leader.
        encode = self.storage.encode_message
        early = (persisting is not None or inline is not None) and leader_sends_early(
            ready, self.driver.is_leader(), self._persisted_hard_state
        )
        if early:
            self._send(ready.messages, encode, appends=True)
            self.transport.flush()
        if inline is not None:
            self._fsync_pace.observe(self._write_persist(inline))
            self.metrics.wal_fsyncs += 1
            self._persisted(ready)
        if ready.soft_state is not None:
            self._on_soft_state(ready.soft_state.leader_id, ready.soft_state.role)
        # While the fsync runs, apply the committed entries this member persisted in an
        # earlier Ready (all of them but those this Ready's entries replace): committed
        # means durable on a quorum, so their clients may be answered now rather than
        # after the fsync of the entries that came in since (etcd applies in parallel
        # with the WAL write too).
        applied_early = persisting is not None and committed_already_persisted(ready)
        try:
            if applied_early:
                self._apply(ready.committed_entries)
        finally:
            if persisting is not None:
                # Even when applying failed: the WAL is not left mid-write.
                self._fsync_pace.observe(await persisting)
        if persisting is not None:
            self.metrics.wal_fsyncs += 1
            self._persisted(ready)
        # 2. Send (the rest, when a leader's MsgApp already left), before applying: a
        # leader's MsgApp carrying a new commit index lets the followers apply (and answer
        # their clients) while this member applies.
        self._send(ready.messages, encode, appends=False if early else None)
        if ready.messages:
            self.transport.flush()
        # 3. Apply.
        if ready.snapshot is not None:
            self.catch_up()
            log.info("snapshot received", extra={"snapshot": ready.snapshot.describe()})
            self._trace("restore", index=ready.snapshot.meta.index)
            self.storage.restore_snapshot(ready.snapshot)
            self._applied_index = ready.snapshot.meta.index
            self._last_snapshot_index = ready.snapshot.meta.index
        if ready.committed_entries and not applied_early:
            if self._defer_apply(ready.committed_entries):
                self._deferred += ready.committed_entries
                if self._apply_timer is None:
                    self._apply_timer = asyncio.get_running_loop().call_later(
                        APPLY_DEFER_S, self.catch_up
                    )
            else:
                self._apply(ready.committed_entries)
        for read_state in ready.read_states:
            batch = self._read_inflight.pop(read_state.context, None)
            if batch is not None:
                batch.index = read_state.index
                self._read_waiting_apply.append(batch)
        self._release_reads()
        if late_persist:
            self.storage.persist(ready.hard_state, ready.entries, ready.snapshot, sync=False)
            self._persisted(ready)
        self.driver.advance(ready)
        self._schedule_commit_flush()
        self._maybe_snapshot()
        if self.tracer is not None:
            self.tracer.flush()

    def _schedule_commit_flush(self) -> None:
        """Time the sending of a commit index the followers are owed (step 4)."""
        assert self.driver is not None
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
        if self.driver is not None and self.driver.commit_pending and not self._stopping:
            self.driver.flush_commit()
            self._request_pump()

    def _send(
        self,
        messages: tuple[Message, ...],
        encode: Callable[[Message], bytes],
        appends: bool | None,
    ) -> None:
        """Send `messages`: all of them (appends None), only the MsgApp ones (True), or
        all but the MsgApp ones (False). A MsgSnap of a snapshot of this member's own
        leaves once a copy of the database is made for it (`_send_snapshot`)."""
        assert self.transport is not None
        for message in messages:
            if appends is not None and (message.type is MessageType.APP) is not appends:
                continue
            if message.type is MessageType.SNAP and self._send_snapshot_later(message):
                continue
            self.transport.send(message.to, encode(message))
            if self.tracer is not None:
                self._trace("send", message=message)

    def _send_snapshot_later(self, message: Message) -> bool:
        """Whether `message`, a MsgSnap, waits for a copy of the database to carry: its
        snapshot is this member's own, which holds none (`_maybe_snapshot`)."""
        if message.snapshot is None or message.snapshot.data:
            return False
        task = asyncio.get_running_loop().create_task(
            self._send_snapshot(message), name=f"snapshot-to-{message.to:x}"
        )
        self._tasks.append(task)
        task.add_done_callback(self._tasks.remove)
        return True

    async def _send_snapshot(self, message: Message) -> None:
        """Send `message` with a copy of the database made in a worker thread (0.1 s for
        45 MB: the loop goes on meanwhile), unless this member has stopped leading in its
        term since. The follower's progress waits for it in the Raft core; if the copy
        fails, the core's snapshot timeout sends another."""
        assert message.snapshot is not None
        try:
            snapshot = await asyncio.to_thread(self.storage.database_for, message.snapshot)
        except Exception:
            log.exception("could not copy the database for a snapshot; it is sent again later")
            return
        driver, transport = self.driver, self.transport
        if driver is None or transport is None or self._stopping:
            return
        if not driver.is_leader() or driver.term != message.term:
            return  # the follower would refuse a message of a past term
        message = replace(message, snapshot=snapshot)
        transport.send(message.to, self.storage.encode_message(message))
        transport.flush()
        if self.tracer is not None:
            self._trace("send", message=message)
            self.tracer.flush()

    def _write_persist(self, prepared: PreparedPersist) -> float:
        """Write and fsync a prepared Ready (on any thread); the seconds it took."""
        started = time.monotonic()
        self.storage.write_persist(prepared)
        return time.monotonic() - started

    def _persisted(self, ready: Ready) -> None:
        if ready.hard_state is not None:
            self._persisted_hard_state = ready.hard_state
        if self.tracer is not None:
            self._trace("persist", entries=ready.entries)

    def _needs_fsync(self, ready: Ready) -> bool:
        """Whether persisting `ready` needs an fsync before its messages may leave.

        As etcd raft's MustSync: new entries, a snapshot, or a new term or vote. A change
        of the commit index alone is written without an fsync: a lost commit index is
        learnt again from the leader, and what was applied is never reapplied (the
        backend's consistent index), so nothing acknowledged depends on it.
        """
        if ready.entries or ready.snapshot is not None:
            return True
        hard, before = ready.hard_state, self._persisted_hard_state
        return hard is not None and (hard.term, hard.vote) != (before.term, before.vote)

    def _on_soft_state(self, leader_id: int, role: Role) -> None:
        self._trace("role", leader=leader_id)
        if leader_id != self._leader_id:
            # A ReadIndex in flight may never be answered by a leader that is gone:
            # queue its reads again, to be asked of the new leader (reads are idempotent).
            for batch in self._read_inflight.values():
                self._read_pending.extend(w for w in batch.waiters if not w.done())
            self._read_inflight.clear()
            if leader_id != NONE:
                self.metrics.leader_changes_seen += 1
            log.info(
                "leader changed",
                extra={"leader": f"{leader_id:x}", "role": role.value},
            )
            self._leader_id = leader_id
        self.metrics.has_leader = leader_id != NONE
        lessor = self.storage.lessor
        if role is Role.LEADER and not lessor.primary:
            self.catch_up()  # its state machine, leases included, before it leads
            lessor.promote(time.monotonic(), extend=self.config.election_timeout_ms / 1000.0)
            self._revoking.clear()
        elif role is not Role.LEADER and lessor.primary:
            lessor.demote()

    def _defer_apply(self, committed: tuple[Entry, ...]) -> bool:
        """Whether a follower may hold `committed` back, to apply it with later entries.

        Applying one entry at a time costs a follower 1.7 times the CPU per entry of a
        batch of four (bench.apply_batch); and with one client, the CPU a follower spends
        applying right after its acknowledgement is CPU the leader, waiting for that
        acknowledgement, competes with (members and clients share a machine's cores in
        tests and benchmarks). So a follower holds committed entries that nobody here
        waits for until its turn (`_apply_turn`: one index in as many as there are
        voters), and for at most APPLY_DEFER_S. It applies them at once for a leader, for
        a proposal or a linearizable read waiting here, before a snapshot is restored, and
        before any client call starts (`catch_up`): what a client observes here is what
        it would without the deferral; only watchers already streaming here see events
        up to APPLY_DEFER_S later. (With the fsync in a worker, a follower applies while
        it waits for its fsync, as before: that CPU overlaps its own disk wait.)
        """
        assert self.driver is not None
        return (
            not self.driver.is_leader()
            and not self._waiters
            and not self._read_waiting_apply
            and not self._apply_turn(committed)
        )

    def _apply_turn(self, committed: tuple[Entry, ...]) -> bool:
        """Whether the entries held back and `committed` include this member's turn: an
        index equal to its rank among the voters, modulo their number.

        The followers receive the same commit indices at the same moments; with one
        entry per MsgApp, batches ended by a timer alone sometimes ran on both at once,
        and the leader, which needs a core to answer once one of them acknowledges,
        waited for one (in a traced run, the 2.6% of puts that overlapped applies on
        both followers had a p90 of 3.6 ms against 1.1). Turns by index never coincide
        while commits come one entry at a time, and make batches of about the cluster's
        size; under load, when each MsgApp commits many entries, every follower has a
        turn in each, as without deferral.
        """
        period, rank = self._apply_period, self._apply_rank
        first = (self._deferred or committed)[0].index
        return first + (rank - first) % period <= committed[-1].index

    def catch_up(self) -> None:
        """Apply the committed entries a follower holds back (`_defer_apply`), if any
        (`_apply` takes them first, and stops their timer)."""
        if self._deferred and not self._stopping:
            self._apply(())

    def _apply(self, entries: tuple[Entry, ...]) -> None:
        if self._deferred:  # they precede `entries`
            entries, self._deferred = self._deferred + entries, ()
            if self._apply_timer is not None:
                self._apply_timer.cancel()
                self._apply_timer = None
        self.metrics.proposals_committed += len(entries)
        fresh = tuple(entry for entry in entries if entry.index > self._applied_index)
        if not fresh:
            return
        results = self.storage.apply(fresh)
        self._applied_index = fresh[-1].index
        self.metrics.proposals_applied += len(fresh)
        tracing = self.tracer is not None
        for entry, result in zip(fresh, results, strict=True):
            if tracing:
                self._trace("apply", entries=(entry,))
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

    def _maybe_snapshot(self) -> None:
        """Every --snapshot-count applied entries, snapshot the state machine and compact
        the log to it, in two halves, so that the loop never waits for the disk.

        The backend is committed; in a worker thread, it is synced and a snapshot file
        written for the index it holds (`MemberStorage.start_snapshot`); at the end of a
        later Ready (after its WAL write: the WAL is not written from two places at
        once), the log is compacted to that index and the snapshot recorded in the WAL.
        As in etcd, the snapshot holds no copy of the database (a follower that needs
        one gets a copy made when it is sent, `_send_snapshot`): copying and saving a
        45 MB database on the loop had stalled every member at once, each
        --snapshot-count entries, for up to 0.5 s, longer as the database grew, and in a
        worker still for 0.1-0.2 s (three members writing 45 MB files with fsync at once).
        """
        assert self.driver is not None
        job = self._snapshot_job
        if job is not None:
            if job.done():
                self._snapshot_job = None
                self._record_snapshot(job.result())  # a failure is fatal, as any write's
            return
        if self._applied_index - self._last_snapshot_index < self.config.snapshot_count:
            return
        self.storage.backend.flush()  # the synced file then holds all applied so far
        self._snapshot_job = self.storage.start_snapshot(self.driver.voters)

    def _record_snapshot(self, snapshot: Snapshot) -> None:
        assert self.driver is not None
        index, term = snapshot.meta.index, snapshot.meta.term
        if index <= self._last_snapshot_index or not self.driver.compactable(index, term):
            # A snapshot received from the leader meanwhile is newer: this one is unused.
            log.info("snapshot passed over", extra={"snapshot": snapshot.meta.describe()})
            return
        self.driver.compact(index, snapshot.data)
        self.storage.record_snapshot(snapshot)
        self._last_snapshot_index = index
        self.metrics.snapshots_saved += 1
        log.info("snapshot saved", extra={"index": index})
        self._trace("snapshot", index=index)

    def _trace(self, event: str, **fields: Any) -> None:
        if self.tracer is not None and self.driver is not None:
            self.tracer.event(self.driver, event, applied=self._applied_index, **fields)

    # ---- leases -----------------------------------------------------------------------

    def _expire_leases(self) -> None:
        assert self.driver is not None
        if not self.driver.is_leader():
            return
        now = time.monotonic()
        for lease_id in self.storage.lessor.expired(now):
            last = self._revoking.get(lease_id)
            if last is not None and now - last < REQUEST_TIMEOUT_S:
                continue
            self._revoking[lease_id] = now
            if failpoints.on("stale_leader_lease_revoke"):
                self.storage.revoke_lease_unlogged(lease_id)
                log.warning("failpoint: lease revoked outside the log", extra={"lease": lease_id})
                continue
            self._propose_internal(
                internal_pb2.InternalRaftRequest(
                    lease_revoke=rpc_pb2.LeaseRevokeRequest(ID=lease_id)
                )
            )

    def _propose_internal(self, request: internal_pb2.InternalRaftRequest) -> None:
        """Propose a request of the member's own (no client waits for it); best effort."""
        assert self.driver is not None
        request.header.ID = self._next_request_id()
        request.header.member_id = self.member_id
        with contextlib.suppress(ProposalDropped):
            self.driver.propose(request.SerializeToString())
            self._request_pump()

    def _auto_compact(self) -> None:
        """--auto-compaction-retention N (revision mode): the leader keeps N revisions."""
        assert self.driver is not None
        retention = self.config.compaction_retention_revisions
        if retention <= 0 or not self.driver.is_leader():
            return
        target = self.storage.current_revision() - retention
        if target > self.storage.backend.compact_revision() and target > self._compact_proposed:
            self._compact_proposed = target
            self._propose_internal(
                internal_pb2.InternalRaftRequest(
                    compaction=rpc_pb2.CompactionRequest(revision=target)
                )
            )
            log.info("auto compaction proposed", extra={"revision": target})

    async def lease_keepalive(self, lease_id: int) -> int:
        try:
            return self.storage.lessor.renew(lease_id, time.monotonic())
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
        leader = self._leader_id
        if leader == NONE:
            raise RpcError(errors.NO_LEADER)
        attributes = self.peer_attributes.get(leader)
        if not attributes or not attributes.get("client_urls"):
            raise RpcError(errors.NO_LEADER, "leader's client URL not known yet")
        channel = self._leader_clients.get(leader)
        if channel is None:
            target = str(attributes["client_urls"][0]).removeprefix("http://")
            channel = grpc.aio.insecure_channel(target)
            self._leader_clients[leader] = channel
        return rpc_pb2_grpc.LeaseStub(channel)

    async def lease_time_to_live(
        self, request: rpc_pb2.LeaseTimeToLiveRequest
    ) -> rpc_pb2.LeaseTimeToLiveResponse:
        assert self.driver is not None
        if not self.driver.is_leader() and self._leader_id != NONE:
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
        await self.linearizable_barrier()
        lessor = self.storage.lessor
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

    async def lease_leases(self) -> rpc_pb2.LeaseLeasesResponse:
        await self.linearizable_barrier()
        return rpc_pb2.LeaseLeasesResponse(
            header=self.header(),
            leases=[rpc_pb2.LeaseStatus(ID=i) for i in self.storage.lessor.lease_ids()],
        )

    # ---- proposals and reads ----------------------------------------------------------

    def _next_request_id(self) -> int:
        self._request_seq += 1
        return ((self.member_id & 0xFFFF) << 48) | (self._request_seq & _ID_MASK)

    async def propose(self, request: internal_pb2.InternalRaftRequest) -> PbMessage:
        """Propose `request`; return the applier's response once it is applied here."""
        assert self.driver is not None
        if self._stopping:
            raise RpcError(errors.STOPPED)
        kind = request.WhichOneof("request")
        if kind == "lease_grant" and request.lease_grant.ID == 0:
            request.lease_grant.ID = self._lease_ids.next()
        try:
            self.storage.precheck(request)
        except RpcError as error:
            if error.kind is errors.NO_SPACE and not self.storage.nospace_raised():
                # As etcd: the first write refused for lack of space raises the alarm.
                self._propose_internal(
                    internal_pb2.InternalRaftRequest(alarm=nospace_alarm_request(self.member_id))
                )
            raise
        request_id = self._next_request_id()
        request.header.ID = request_id
        request.header.member_id = self.member_id
        data = request.SerializeToString()
        if len(data) > self.config.max_request_bytes:
            raise RpcError(errors.REQUEST_TOO_LARGE)
        future: asyncio.Future[PbMessage] = asyncio.get_running_loop().create_future()
        self._waiters[request_id] = future
        try:
            self.driver.propose(data)
            if self.tracer is not None:
                self._trace("propose", size=len(data))
        except ProposalDropped as error:
            self._waiters.pop(request_id, None)
            self.metrics.proposals_failed += 1
            raise RpcError(
                errors.NO_LEADER if error.leader_id == NONE else errors.LEADER_CHANGED
            ) from error
        self.metrics.proposals_pending = len(self._waiters)
        self._request_pump()
        # A plain await with a timer on the future itself: no extra task or shield, so
        # the answer reaches the caller in the loop iteration after `_apply` sets it; and
        # no asyncio.timeout, which needs a task (grpc_h2 runs a handler's first steps
        # before it makes one).
        timer = asyncio.get_running_loop().call_later(REQUEST_TIMEOUT_S, _time_out, future)
        try:
            response = await future
        except TimeoutError as error:
            self.metrics.proposals_failed += 1
            raise RpcError(
                errors.TIMEOUT if self._leader_id != NONE else errors.TIMEOUT_LEADER_FAIL
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
                header.revision = self.storage.current_revision()
            if not header.raft_term:
                header.raft_term = self.driver.term
        return response

    async def linearizable_barrier(self) -> None:
        """Return once this member has applied everything committed before the call."""
        if self._stopping:
            raise RpcError(errors.STOPPED)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._read_pending.append(future)
        self._request_pump()
        timer = loop.call_later(REQUEST_TIMEOUT_S, _time_out, future)  # as in `propose`
        try:
            await future  # a timed-out future is done: no later ReadIndex carries it
        except TimeoutError as error:
            raise RpcError(
                errors.TIMEOUT if self._leader_id != NONE else errors.TIMEOUT_LEADER_FAIL
            ) from error
        finally:
            timer.cancel()

    def _issue_read_index(self) -> None:
        """Send one ReadIndex for all reads queued since the last one (etcd batches them)."""
        assert self.driver is not None
        self._read_pending = [waiter for waiter in self._read_pending if not waiter.done()]
        if not self._read_pending or self._read_inflight:
            return
        self._read_seq += 1
        context = self._read_seq.to_bytes(8, "big") + self.member_id.to_bytes(8, "big")
        batch = _ReadBatch(context=context, waiters=self._read_pending)
        try:
            self.driver.read_index(context)
        except ProposalDropped:
            # No leader right now (an election): the reads stay queued and are asked
            # again at the next wake (every tick) until their own deadline.
            return
        self._read_pending = []
        self._read_inflight[context] = batch
        loop = asyncio.get_running_loop()
        loop.call_later(REQUEST_TIMEOUT_S, self._expire_read, context)

    def _expire_read(self, context: bytes) -> None:
        batch = self._read_inflight.pop(context, None)
        if batch is None:
            return
        for waiter in batch.waiters:
            if not waiter.done():
                waiter.set_exception(RpcError(errors.TIMEOUT))
        self._request_pump()

    def _release_reads(self) -> None:
        if self._read_waiting_apply and self._deferred:
            self.catch_up()
        still: list[_ReadBatch] = []
        for batch in self._read_waiting_apply:
            if batch.index is not None and batch.index <= self._applied_index:
                for waiter in batch.waiters:
                    if not waiter.done():
                        waiter.set_result(None)
            else:
                still.append(batch)
        self._read_waiting_apply = still
        if self._read_pending and not self._read_inflight:
            self._request_pump()

    def _fail_reads(self, error: RpcError) -> None:
        batches = [*self._read_inflight.values(), *self._read_waiting_apply]
        waiters = [w for b in batches for w in b.waiters] + self._read_pending
        for waiter in waiters:
            if not waiter.done():
                waiter.set_exception(error)
        self._read_inflight.clear()
        self._read_waiting_apply = []
        self._read_pending = []

    # ---- watches ----------------------------------------------------------------------

    def open_watch_stream(self) -> WatchStream:
        return WatchStream(self.storage.watch_hub, self.header, self._register_watch)

    def _register_watch(self, handle: int, stream: WatchStream | None) -> None:
        if stream is None:
            self._watch_streams.pop(handle, None)
        else:
            self._watch_streams[handle] = stream

    def _on_watch_ready(self, handle: int) -> None:
        stream = self._watch_streams.get(handle)
        if stream is not None:
            stream.on_ready(handle)

    # ---- local answers ----------------------------------------------------------------

    def header(self) -> rpc_pb2.ResponseHeader:
        assert self.driver is not None
        return rpc_pb2.ResponseHeader(
            cluster_id=self.cluster_id,
            member_id=self.member_id,
            revision=self.storage.current_revision(),
            raft_term=self.driver.term,
        )

    def local_range(self, request: rpc_pb2.RangeRequest) -> rpc_pb2.RangeResponse:
        response = self.storage.range(request)
        response.header.CopyFrom(self._header_at(response.header.revision))
        return response

    def _header_at(self, revision: int) -> rpc_pb2.ResponseHeader:
        header = self.header()
        if revision:
            header.revision = revision
        return header

    def member_list(self) -> rpc_pb2.MemberListResponse:
        header = self.header()
        header.ClearField("revision")
        members = []
        for peer in self.config.peers:
            attributes = self.peer_attributes.get(peer.member_id, {})
            members.append(
                rpc_pb2.Member(
                    ID=peer.member_id,
                    name=str(attributes.get("name", "")),
                    peerURLs=[peer.peer.url],
                    clientURLs=[str(u) for u in attributes.get("client_urls", [])],
                )
            )
        return rpc_pb2.MemberListResponse(header=header, members=members)

    def status(self) -> rpc_pb2.StatusResponse:
        assert self.driver is not None
        status = self.driver.status()
        size, in_use = self.storage.sizes()
        alarms = self.storage.alarm_list()
        return rpc_pb2.StatusResponse(
            header=self.header(),
            version=SERVER_VERSION,
            dbSize=size,
            leader=status.leader_id,
            raftIndex=status.commit_index,
            raftTerm=status.term,
            raftAppliedIndex=self._applied_index,
            errors=[
                f"memberID:{alarm.memberID} alarm:{rpc_pb2.AlarmType.Name(alarm.alarm)} "
                for alarm in alarms
            ],
            dbSizeInUse=in_use,
            dbSizeQuota=self.config.quota_backend_bytes,
            storageVersion=STORAGE_VERSION,
        )

    async def defragment(self) -> rpc_pb2.DefragmentResponse:
        self.storage.defragment()
        return rpc_pb2.DefragmentResponse(header=self.header())

    def alarm_list(self) -> rpc_pb2.AlarmResponse:
        return rpc_pb2.AlarmResponse(header=self.header(), alarms=self.storage.alarm_list())

    def hash(self) -> rpc_pb2.HashResponse:
        return rpc_pb2.HashResponse(header=self.header(), hash=self.storage.backend_hash())

    def hash_kv(self, revision: int) -> rpc_pb2.HashKVResponse:
        value, compact_revision, hash_revision = self.storage.hash_kv(revision)
        header = self.header()
        header.revision = hash_revision
        return rpc_pb2.HashKVResponse(header=header, hash=value, compact_revision=compact_revision)

    async def snapshot_chunks(self) -> list[bytes]:
        """The backend as etcd streams it: the database, then its sha256 (32 bytes). All
        that is applied is committed first; the copy is made in a worker thread, so the
        member goes on serving meanwhile (it may hold entries applied since)."""
        backend = self.storage.backend
        backend.flush()
        data = (await asyncio.to_thread(backend.copy_committed)).data
        data += hashlib.sha256(data).digest()
        return [
            data[offset : offset + SNAPSHOT_CHUNK_BYTES]
            for offset in range(0, len(data), SNAPSHOT_CHUNK_BYTES)
        ] or [b""]

    async def move_leader(self, target: int) -> rpc_pb2.MoveLeaderResponse:
        assert self.driver is not None
        if not self.driver.is_leader():
            raise RpcError(errors.NOT_LEADER)
        if target not in {peer.member_id for peer in self.config.peers}:
            raise RpcError(errors.MEMBER_NOT_FOUND)
        self.driver.transfer_leader(target)
        self._request_pump()
        deadline = time.monotonic() + REQUEST_TIMEOUT_S
        while self._leader_id != target:
            if time.monotonic() > deadline:
                raise RpcError(errors.TIMEOUT)
            await asyncio.sleep(0.02)
        return rpc_pb2.MoveLeaderResponse(header=self.header())

    def _refresh_metrics(self) -> None:
        size, in_use = self.storage.sizes()
        self.metrics.db_size_bytes = size
        self.metrics.db_size_in_use_bytes = in_use


async def serve_member(
    config: MemberConfig, ready: Callable[[Member], None] | None = None
) -> str | None:
    """Run one member until SIGTERM/SIGINT (or until it stops itself); its failure, if any."""
    member = Member(config)
    await member.start()
    if ready is not None:
        ready(member)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, lambda: asyncio.ensure_future(member.stop()))
    log.info("member ready", extra={"pid": os.getpid(), "member_id": f"{member.member_id:x}"})
    await member.stopped.wait()
    return member.failure


def _time_out(future: asyncio.Future[Any]) -> None:
    """A request's deadline passed: its future fails with TimeoutError (if still open)."""
    if not future.done():
        future.set_exception(TimeoutError())


def tune_gc() -> None:
    """Collect once, freeze what survives (start-up's modules, protobuf classes, the
    recovered state: never garbage) and raise the thresholds (GC_THRESHOLDS). For a
    serving process only: it changes the interpreter's collector for good."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def run_member(config: MemberConfig) -> int:
    """The `etcdspec serve` entry point: JSON logs on stderr, serve, exit code."""
    from etcdspec.exitcodes import ExitCode

    configure_logging()
    try:
        failpoints.activate_from_environment()
        loop_name = event_loop.chosen_loop()
    except (failpoints.FailpointError, event_loop.EventLoopChoiceError) as error:
        log.error("cannot serve", extra={"error": str(error)})
        print(f"etcdspec: {config.name}: cannot start: {error}", file=sys.stderr)
        return int(ExitCode.USAGE)
    if failpoints.active_names():
        log.warning("failpoints active", extra={"failpoints": failpoints.describe()})
    else:
        log.info("failpoints active", extra={"failpoints": failpoints.describe()})
    log.info("event loop", extra={"event_loop": loop_name})
    profile_path = os.environ.get(PROFILE_ENV)
    profiler = cProfile.Profile() if profile_path else None
    try:
        if profiler is not None:
            profiler.enable()
        failure = event_loop.run(serve_member(config, ready=lambda _member: tune_gc()))
    except MemberStartError as error:
        log.error("cannot serve", extra={"error": str(error)})
        print(f"etcdspec: {error}", file=sys.stderr)
        return int(ExitCode.USAGE)
    finally:
        if profiler is not None and profile_path:
            profiler.disable()
            profiler.dump_stats(f"{profile_path}.{config.name}")
    if failure is not None:
        print(f"etcdspec: member stopped on an internal error: {failure}", file=sys.stderr)
        return int(ExitCode.INTERNAL_ERROR)
    return int(ExitCode.HOLDS)
