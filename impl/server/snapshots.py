"""A member's snapshots: its own, taken every --snapshot-count applied entries to compact
the log, and the copies of the database a lagging follower is sent.

A local snapshot is taken in two halves, so that the loop never waits for the disk
(`maybe_snapshot`, after each Ready): the backend is committed; in a worker thread it is
synced and a snapshot file written for the index it holds (`start_snapshot`); at the
end of a later Ready (after its WAL write: the WAL is not written from two places at
once), the log is compacted to that index and the snapshot recorded in the WAL. As in
etcd, the snapshot holds no copy of the database: the backend file is the state machine,
durable at the snapshot's index before the WAL lets go of the entries before it. Copying
and saving a 45 MB database on the loop had stalled every member at once, each
--snapshot-count entries, for up to 0.5 s, longer as the database grew, and in a worker
still for 0.1-0.2 s (three members writing 45 MB files with fsync at once).

A follower that needs a snapshot gets a MsgSnap carrying a copy of the database made in a
worker thread when it is sent (`send_later`, `database_for`): 0.1 s for 45 MB, the loop
going on meanwhile; the follower skips the entries after the snapshot's index that the
copy already holds (its consistent index), as etcd's followers do.

Runs on the member's event loop, but for the work it hands to threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from concurrent.futures import Future
from dataclasses import replace

from etcdspec.impl.kv.backend import BackendError
from etcdspec.impl.raft import codec as raft_codec
from etcdspec.impl.raft.driver import RaftDriver
from etcdspec.impl.raft.messages import ConfState, Message, Snapshot, SnapshotMeta
from etcdspec.impl.server.metrics import Metrics
from etcdspec.impl.server.peer import PeerTransport
from etcdspec.impl.server.recovery import MemberData
from etcdspec.impl.server.trace import MemberTrace

log = logging.getLogger("etcdspec.impl.server.snapshots")


def start_snapshot(data: MemberData, confs: tuple[tuple[int, ConfState], ...]) -> Future[Snapshot]:
    """Begin a snapshot of the state machine in the backend's worker thread: make what
    the backend has committed durable, and write a snapshot file for the position it
    holds (fsynced), with the Raft configuration at that index (`confs`: the
    configurations from the index each took effect, oldest first, up to the applied
    index; copied on the loop, as the driver is the loop's). The future has the
    snapshot; it is then recorded (`DataDir.record_snapshot`) once the log is compacted
    to it; until then a start does not use the file."""

    def save() -> Snapshot:
        index, term = data.state.sync_committed()
        conf = confs[0][1]
        for at, state in confs:
            if at <= index:
                conf = state
        snapshot = Snapshot(SnapshotMeta(index, term, conf.voters, conf.learners))
        data.disk.save_snapshot_file(snapshot)
        return snapshot

    return data.state.in_worker(save)


def database_for(data: MemberData, snapshot: Snapshot) -> Snapshot:
    """`snapshot` with a copy of the database for a follower to restore, if it holds none
    (a local one). The copy is of what the backend holds now, which includes every entry
    up to the snapshot's index. Any thread."""
    if snapshot.data:
        return snapshot
    copy = data.state.copy_committed()
    if copy.index < snapshot.meta.index:
        raise BackendError(
            f"{data.disk.db_path}: the database holds entries up to {copy.index}, "
            f"behind the {snapshot.meta.describe()} it was synced for"
        )
    return Snapshot(snapshot.meta, copy.data)


class Snapshots:
    """See the module docstring."""

    def __init__(
        self,
        data: MemberData,
        driver: RaftDriver,
        transport: PeerTransport,
        *,
        snapshot_count: int,
        snapshot_index: int,
        metrics: Metrics,
        trace: MemberTrace | None,
    ) -> None:
        self.data = data
        self.driver = driver
        self.transport = transport
        self.snapshot_count = snapshot_count
        self.last_index = snapshot_index
        self.metrics = metrics
        self.trace = trace
        self.stopping = False
        self._job: Future[Snapshot] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def stop(self) -> None:
        self.stopping = True
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def maybe_snapshot(self, applied_index: int) -> None:
        """Every --snapshot-count applied entries, start a snapshot; record one whose
        file is written (the end of a Ready: see the module docstring)."""
        job = self._job
        if job is not None:
            if job.done():
                self._job = None
                self._record(job.result())  # a failure is fatal, as any write's
            return
        if applied_index - self.last_index < self.snapshot_count:
            return
        self.data.state.flush()  # the synced file then holds all applied so far
        # The configurations so far (read-only copy of the core's history: the worker
        # picks the one at the index the backend holds).
        self._job = start_snapshot(self.data, tuple(self.driver.core.conf_history))

    def _record(self, snapshot: Snapshot) -> None:
        index, term = snapshot.meta.index, snapshot.meta.term
        if index <= self.last_index or not self.driver.compactable(index, term):
            # A snapshot received from the leader meanwhile is newer: this one is unused.
            log.info("snapshot passed over", extra={"snapshot": snapshot.meta.describe()})
            return
        self.driver.compact(index, snapshot.data)
        self.data.disk.record_snapshot(snapshot.meta)
        self.last_index = index
        self.metrics.snapshots_saved += 1
        log.info("snapshot saved", extra={"index": index})
        if self.trace is not None:
            self.trace.event("snapshot", index=index)

    def restored(self, index: int) -> None:
        """A snapshot received from the leader was restored at `index`."""
        self.last_index = index

    def send_later(self, message: Message) -> bool:
        """Whether `message`, a MsgSnap, waits for a copy of the database to carry: its
        snapshot is this member's own, which holds none; if so, it is sent once the copy
        is made (`_send`)."""
        if message.snapshot is None or message.snapshot.data:
            return False
        task = asyncio.get_running_loop().create_task(
            self._send(message), name=f"snapshot-to-{message.to:x}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    async def _send(self, message: Message) -> None:
        """Send `message` with a copy of the database made in a worker thread, unless
        this member has stopped leading in its term since. The follower's progress waits
        for it in the Raft core; if the copy fails, the core's snapshot timeout sends
        another."""
        assert message.snapshot is not None
        try:
            snapshot = await asyncio.to_thread(database_for, self.data, message.snapshot)
        except Exception:
            log.exception("could not copy the database for a snapshot; it is sent again later")
            return
        if self.stopping:
            return
        if not self.driver.is_leader() or self.driver.term != message.term:
            return  # the follower would refuse a message of a past term
        message = replace(message, snapshot=snapshot)
        self.transport.send(message.to, raft_codec.encode_message(message))
        self.transport.flush()
        if self.trace is not None:
            self.trace.event("send", message=message)
            self.trace.flush()
