"""The member's clock: a task that ticks the Raft driver every --heartbeat-interval, and the
periodic work that rides on the ticks.

Each tick: the driver's logical clock (election and heartbeat timeouts are counted in
ticks), the leader's lease expiry (etcdspec.impl.server.leases), the fault file
(--fault-file, fault-injection tests only: which peers to block), watchers left behind
by a slow client caught up from the backend; every WATCH_PROGRESS_S a progress
notification to the watchers that asked for one; every AUTO_COMPACTION_CHECK_S the
leader's auto compaction (--auto-compaction-retention N, revision mode: the leader keeps
N revisions); and then the Raft pump.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable

from etcdspec.impl.kv.state_machine import StateMachine
from etcdspec.impl.pb import raft_internal_pb2 as internal_pb2
from etcdspec.impl.pb import rpc_pb2
from etcdspec.impl.raft.driver import RaftDriver
from etcdspec.impl.server.config import MemberConfig
from etcdspec.impl.server.leases import LeaseKeeper
from etcdspec.impl.server.peer import FrameError, PeerTransport, read_fault_file
from etcdspec.impl.server.proposals import Proposals

log = logging.getLogger("etcdspec.impl.server.ticker")

AUTO_COMPACTION_CHECK_S = 1.0  # etcd's revision mode checks every 5 min; we check often
WATCH_PROGRESS_S = 600.0  # etcd's default progress notify interval (10 minutes)


class Ticker:
    """See the module docstring. `run()` is the task; it runs until cancelled."""

    def __init__(
        self,
        config: MemberConfig,
        driver: RaftDriver,
        state: StateMachine,
        transport: PeerTransport,
        leases: LeaseKeeper,
        proposals: Proposals,
        *,
        wake: Callable[[], None],
    ) -> None:
        self.config = config
        self.driver = driver
        self.state = state
        self.transport = transport
        self.leases = leases
        self.proposals = proposals
        self.wake = wake
        self.ticks = 0
        interval_ms = config.heartbeat_interval_ms
        self._progress_ticks = max(1, int(WATCH_PROGRESS_S * 1000 / interval_ms))
        self._compaction_ticks = max(1, int(AUTO_COMPACTION_CHECK_S * 1000 / interval_ms))
        self._compact_proposed = 0
        self._fault_stamp = -1

    async def run(self) -> None:
        interval = self.config.heartbeat_interval_ms / 1000.0
        while True:
            await asyncio.sleep(interval)
            self.driver.tick()
            self.leases.expire()
            self.ticks += 1
            self._reload_faults()
            hub = self.state.watch_hub
            if hub.unsynced():
                hub.sync()
            if self.ticks % self._progress_ticks == 0:
                hub.progress()
            if self.ticks % self._compaction_ticks == 0:
                self._auto_compact()
            self.wake()

    def _reload_faults(self) -> None:
        """Re-read --fault-file when it changed (fault-injection tests only)."""
        path = self.config.fault_file
        if path is None:
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

    def _auto_compact(self) -> None:
        """--auto-compaction-retention N (revision mode): the leader keeps N revisions."""
        retention = self.config.compaction_retention_revisions
        if retention <= 0 or not self.driver.is_leader():
            return
        target = self.state.current_revision() - retention
        if target > self.state.compact_revision() and target > self._compact_proposed:
            self._compact_proposed = target
            self.proposals.propose_internal(
                internal_pb2.InternalRaftRequest(
                    compaction=rpc_pb2.CompactionRequest(revision=target)
                )
            )
            log.info("auto compaction proposed", extra={"revision": target})
