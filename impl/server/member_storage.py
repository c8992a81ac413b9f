"""A member's durable state on disk, and the state machine over it.

Layout of --data-dir (as etcd's): `member/wal/` (the WAL, etcdspec.impl.storage.wal),
`member/snap/` (Raft snapshot files, etcdspec.impl.storage.snapfile) and `member/snap/db` (the
SQLite backend, etcdspec.impl.kv.backend).

`open()` recovers: the newest valid snapshot file that the WAL records, then the WAL
replayed after it, then the backend; a backend older than a snapshot received from the
leader (a crash between persisting it and restoring it) is restored from the snapshot. A
member's own snapshots hold no database (it is synced before they are recorded): a
backend older than one of them refuses to start. The applied index handed to Raft is
the backend's consistent index, clamped to [snapshot index, commit index]: committed
entries after it are applied again on start (the applier skips any the backend already
holds).

`persist()` is step 1 of the Ready contract: a received snapshot's file first, then one
WAL batch (entries + hard state + snapshot metadata) with one fsync (the member skips the
fsync for a batch that only moves the commit index, as etcd does). It is
`prepare_persist()` (encoding, on the event loop) then `write_persist()` (the files and
the fsync, which the member runs in a worker thread). A local snapshot is taken in two
halves: `start_snapshot()` syncs the backend and writes a snapshot file (no database in
it) in a worker thread, and `record_snapshot()` then records it in the WAL and releases
the WAL segments and snapshot files it makes obsolete.

Not thread-safe: the member calls it from its event loop only.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from google.protobuf.message import Message as PbMessage

from etcdspec.impl import errors, failpoints
from etcdspec.impl.errors import RpcError
from etcdspec.impl.kv.applier import Applier, ApplyResult
from etcdspec.impl.kv.backend import Backend, BackendError
from etcdspec.impl.kv.lessor import Lessor
from etcdspec.impl.kv.mvcc import KVStore
from etcdspec.impl.kv.quota import BackendQuota, consumes_space
from etcdspec.impl.kv.watch_hub import WatchHub
from etcdspec.impl.pb import raft_internal_pb2 as internal_pb2
from etcdspec.impl.pb import rpc_pb2
from etcdspec.impl.raft import codec as raft_codec
from etcdspec.impl.raft.core import PersistedState
from etcdspec.impl.raft.messages import NONE, Entry, HardState, Message, Snapshot, SnapshotMeta
from etcdspec.impl.storage import snapfile
from etcdspec.impl.storage.wal import PendingBatch, Wal, recorded_snapshots

# Group commit of the member's backend (etcd: --backend-batch-interval 100 ms,
# --backend-batch-limit 10,000 writes); counted here in apply batches.
GROUP_COMMIT_S = 0.1
GROUP_COMMIT_LIMIT = 1000
# The journal size that starts a checkpoint in a worker (SQLite's own default: 1,000 pages).
CHECKPOINT_WAL_BYTES = 4 * 1024 * 1024
CHECKPOINT_ROUNDS = 8  # passive checkpoints in a row, until one copies the whole journal


log = logging.getLogger("etcdspec.impl.server.member_storage")
_T = TypeVar("_T")


@dataclass(frozen=True)
class Recovered:
    """What `open()` found on disk: the Raft state to start from and the applied index."""

    persisted: PersistedState
    applied: int
    snapshot_index: int
    warnings: tuple[str, ...]

    def describe(self) -> str:
        text = f"{self.persisted.describe()}; applied {self.applied}"
        return text + "".join(f"; warning: {w}" for w in self.warnings)


@dataclass(frozen=True)
class AppliedEntry:
    """One applied entry, as the member needs it to answer its waiting client."""

    request_id: int | None
    response: PbMessage | None
    error: RpcError | None

    def describe(self) -> str:
        what = self.error.describe() if self.error else type(self.response).__name__
        return f"request {self.request_id}: {what}"


# An applied entry no client of this member waits for (frozen: one value serves all).
_NOT_PROPOSED_HERE = AppliedEntry(None, None, None)


@dataclass(frozen=True)
class PreparedPersist:
    """What `prepare_persist` encoded, for `write_persist` to write."""

    snapshot: Snapshot | None
    batch: PendingBatch | None

    def describe(self) -> str:
        what = self.batch.describe() if self.batch is not None else "no batch"
        return what + (f", {self.snapshot.describe()}" if self.snapshot is not None else "")


class MemberBackend(Backend):
    """The backend as a member uses it: SQLite in WAL journal mode, synchronous=NORMAL,
    group commit (one SQLite commit per GROUP_COMMIT_S or GROUP_COMMIT_LIMIT apply
    batches; see etcdspec.impl.kv.backend).

    The Raft WAL, fsynced before anything is acknowledged, is the member's durable record
    of the entries after its newest snapshot; the backend holds the state they are
    applied to (entries after its consistent index are applied again on start, and a
    backend older than a snapshot received from the leader is restored from it). So each
    applied entry need not cost the backend an fsync, as in etcd, where bbolt commits in
    batches. A kill -9 loses nothing SQLite committed (it is in the OS); WAL journal mode
    keeps the file consistent even on power loss, where at most the last commits are
    lost and replayed.
    Likewise, the apply batches that group commit holds are lost by a crash and applied
    again from the WAL on start: the Raft WAL keeps every entry after the newest
    snapshot, and a member records a snapshot of its own (letting the WAL drop the
    entries before it) only once the file is synced at the snapshot's index
    (`sync_committed`), so the file never falls behind what the WAL still holds.

    Checkpoints (copying the journal's pages into the file, with its fsyncs) run in a
    worker thread on a connection of their own, started after a commit that leaves the
    journal over CHECKPOINT_WAL_BYTES, so that the event loop never waits for that disk
    work; SQLite's automatic checkpoint (run by the committing connection) is off. A
    failed checkpoint is logged and retried after a later commit (the journal grows
    meanwhile; nothing is lost). Operations that need the file itself wait for it.
    """

    group_commit_limit = GROUP_COMMIT_LIMIT
    group_commit_s = GROUP_COMMIT_S

    def __init__(self, path: str | os.PathLike[str], durable: bool = True) -> None:
        self._worker: threading.Thread | None = None
        self._worker_done: Future[Any] = Future()
        self._checkpointer: threading.Thread | None = None
        self._checkpoint_conn: sqlite3.Connection | None = None
        self.checkpoints = 0
        self._checkpoint_started_at = 0
        self._next_checkpoint_at = CHECKPOINT_WAL_BYTES
        super().__init__(path, durable)

    def _connect(self) -> sqlite3.Connection:
        conn = super()._connect()
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA wal_autocheckpoint=0")
        # The journal restarts after a complete checkpoint and is cut back to this size
        # then, so that its size tells how much waits for the next checkpoint.
        conn.execute(f"PRAGMA journal_size_limit={CHECKPOINT_WAL_BYTES // 4}")
        return conn

    def _after_commit(self) -> None:
        if self._checkpointer is not None and self._checkpointer.is_alive():
            return
        try:
            journal = os.path.getsize(self._sidecar("-wal"))
        except FileNotFoundError:
            return
        if journal < self._checkpoint_started_at:  # the journal restarted since
            self._next_checkpoint_at = CHECKPOINT_WAL_BYTES
        if journal >= self._next_checkpoint_at:
            # The next one when this much more is written (if the journal cannot restart
            # meanwhile, having been written to during the checkpoint).
            self._checkpoint_started_at = journal
            self._next_checkpoint_at = journal + CHECKPOINT_WAL_BYTES // 2
            self._checkpointer = threading.Thread(
                target=self._checkpoint, name="backend-checkpoint", daemon=True
            )
            self._checkpointer.start()

    def _checkpoint(self) -> None:
        try:
            if self._checkpoint_conn is None:
                self._checkpoint_conn = sqlite3.connect(
                    self.path, isolation_level=None, check_same_thread=False
                )
            # Frames committed during a round are left for the next: the journal restarts
            # (and is cut back) only after a round that copied everything.
            for _ in range(CHECKPOINT_ROUNDS):
                row = self._checkpoint_conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                self.checkpoints += 1
                if row is None or row[2] >= row[1]:
                    break
        except sqlite3.Error as error:
            log.warning("backend checkpoint failed; retried later", extra={"error": str(error)})

    def in_worker(self, job: Callable[[], _T]) -> Future[_T]:
        """Run `job` in a worker thread; the future has what it returned or raised.

        For work on the file that must not hold up the event loop (`sync_committed`): one
        at a time, and what needs the file itself (restore, defragment, close) waits for
        it, as for a checkpoint.
        """
        if self._worker is not None:
            if not self._worker_done.done():
                raise BackendError("a worker of the backend is already under way")
            self._worker.join()  # it has set its future: it is returning
        future: Future[_T] = Future()
        self._worker_done = future

        def work() -> None:
            try:
                future.set_result(job())
            except BaseException as error:  # handed to the future's owner
                future.set_exception(error)

        self._worker = threading.Thread(target=work, name="backend-worker", daemon=True)
        self._worker.start()
        return future

    def sync_committed(self) -> tuple[int, int]:
        """Make what the file has committed durable; the Raft position it holds
        (consistent index, term). Any thread, while this connection goes on writing.

        Under synchronous=NORMAL a commit is not fsynced. This reads the position
        through a connection of its own, then fsyncs the journal and the file: every
        transaction committed by then is in one or the other (a checkpoint syncs the
        file before the journal restarts over the frames it copied).
        """
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            meta = dict(
                conn.execute(
                    "SELECT name, value FROM meta WHERE name IN ('consistent_index', 'term')"
                ).fetchall()
            )
        finally:
            conn.close()
        for path in (self._sidecar("-wal"), self.path):
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:  # no journal: everything is in the file
                continue
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        return meta["consistent_index"], meta["term"]

    def _quiesce(self) -> None:
        if self._worker is not None:
            self._worker.join()
            self._worker = None
        if self._checkpointer is not None:
            self._checkpointer.join()
            self._checkpointer = None
        if self._checkpoint_conn is not None:
            self._checkpoint_conn.close()
            self._checkpoint_conn = None


class MemberStorage:
    def __init__(self, data_dir: Path, member_id: int) -> None:
        self.data_dir = data_dir
        self.member_id = member_id
        self.wal_dir = data_dir / "member" / "wal"
        self.snap_dir = data_dir / "member" / "snap"
        self.db_path = self.snap_dir / "db"
        self._wal: Wal | None = None
        self._backend: MemberBackend | None = None
        self._applier: Applier | None = None
        self._quota: BackendQuota | None = None
        self.lessor = Lessor()
        self.on_watch_ready: Callable[[int], None] = lambda handle: None
        self._hub: WatchHub | None = None

    # ---- open / close -----------------------------------------------------------------

    def open(self, *, quota_bytes: int, initial_cluster_state: str = "new") -> Recovered:
        self.snap_dir.mkdir(parents=True, exist_ok=True)
        # Only a snapshot the WAL records: a file written just before a crash, whose WAL
        # record never reached the disk, is passed over (the WAL still holds its entries).
        recorded = recorded_snapshots(self.wal_dir)
        loaded = snapfile.load_newest(
            self.snap_dir, accept=lambda meta: (meta.index, meta.term) in recorded
        )
        snapshot = loaded.snapshot if loaded is not None else None
        wal, state = Wal.open(self.wal_dir, snapshot=snapshot.meta if snapshot else None)
        self._wal = wal
        backend = MemberBackend(self.db_path)
        if snapshot is not None and backend.consistent_index() < snapshot.meta.index:
            if not snapshot.data:  # a local snapshot: the database was synced before it
                assert loaded is not None
                held = backend.consistent_index()
                backend.close()
                raise BackendError(
                    f"{self.db_path}: the database holds entries up to {held}, behind the "
                    f"{snapshot.meta.describe()} in {loaded.path}, which holds no copy of it "
                    "(the file was replaced or damaged since): restore this member from a "
                    "backup (etcdspec snapshot restore), or remove its data directory to add "
                    "it afresh"
                )
            backend.restore(snapshot.data)
        self._backend = backend
        self._hub = WatchHub(backend, on_ready=lambda handle: self.on_watch_ready(handle))
        self._quota = BackendQuota(backend, quota_bytes)
        self._applier = Applier(backend, self.lessor, self._hub, self._quota, clock=time.monotonic)
        snapshot_index = snapshot.meta.index if snapshot else 0
        hard_state = state.hard_state
        applied = min(
            max(backend.consistent_index(), snapshot_index), max(hard_state.commit, snapshot_index)
        )
        persisted = PersistedState(hard_state=hard_state, snapshot=snapshot, entries=state.entries)
        return Recovered(persisted, applied, snapshot_index, state.warnings)

    def close(self) -> None:
        if self._wal is not None:
            self._wal.close()
            self._wal = None
        if self._backend is not None:
            self._backend.close()
            self._backend = None

    @property
    def backend(self) -> MemberBackend:
        if self._backend is None:
            raise RpcError(errors.STOPPED)
        return self._backend

    @property
    def watch_hub(self) -> WatchHub:
        if self._hub is None:
            raise RpcError(errors.STOPPED)
        return self._hub

    # ---- Raft's durable state ---------------------------------------------------------

    def persist(
        self,
        hard_state: HardState | None,
        entries: tuple[Entry, ...],
        snapshot: Snapshot | None,
        sync: bool = True,
    ) -> None:
        self.write_persist(self.prepare_persist(hard_state, entries, snapshot), sync)

    def prepare_persist(
        self, hard_state: HardState | None, entries: tuple[Entry, ...], snapshot: Snapshot | None
    ) -> PreparedPersist:
        """The CPU half of `persist` (checks and encoding), for the event loop's thread."""
        assert self._wal is not None
        if hard_state is not None and failpoints.on("forget_vote_on_restart"):
            hard_state = replace(hard_state, vote=NONE)
        batch = self._wal.prepare_save(hard_state, entries, snapshot.meta if snapshot else None)
        return PreparedPersist(snapshot, batch)

    def write_persist(self, prepared: PreparedPersist, sync: bool = True) -> None:
        """The I/O half of `persist`: snapshot file, WAL batch, one fsync (any thread, one
        at a time, after the `prepare_persist` that gave `prepared`)."""
        assert self._wal is not None
        if prepared.snapshot is not None:
            snapfile.save(self.snap_dir, prepared.snapshot)
        if prepared.batch is not None:
            self._wal.write_batch(prepared.batch, sync)

    def start_snapshot(self, voters: tuple[int, ...]) -> Future[Snapshot]:
        """Begin a snapshot of the state machine in a worker thread
        (`MemberBackend.in_worker`): make what the backend has committed durable, and
        write a snapshot file for the position it holds (fsynced). The future has the
        snapshot; the member then compacts its log to it and records it in the WAL
        (`record_snapshot`); until then a start does not use the file.

        As in etcd, the snapshot holds no copy of the database: the backend file is the
        state machine, durable at the snapshot's index before the WAL lets go of the
        entries before it. The database is copied only for a follower that needs it
        (`database_for`).
        """

        def save() -> Snapshot:
            index, term = self.backend.sync_committed()
            snapshot = Snapshot(SnapshotMeta(index, term, voters))
            snapfile.save(self.snap_dir, snapshot)
            return snapshot

        return self.backend.in_worker(save)

    def database_for(self, snapshot: Snapshot) -> Snapshot:
        """`snapshot` with a copy of the database for a follower to restore, if it holds
        none (a local one). The copy is of what the backend holds now, which includes
        every entry up to the snapshot's index; the follower skips the entries after it
        that the copy already holds (its consistent index), as etcd's followers do.
        Any thread (`Backend.copy_committed`)."""
        if snapshot.data:
            return snapshot
        copy = self.backend.copy_committed()
        if copy.index < snapshot.meta.index:
            raise BackendError(
                f"{self.db_path}: the database holds entries up to {copy.index}, "
                f"behind the {snapshot.meta.describe()} it was synced for"
            )
        return Snapshot(snapshot.meta, copy.data)

    def record_snapshot(self, snapshot: Snapshot) -> None:
        """Record a local snapshot whose file is written (`start_snapshot`) in the WAL, and
        release the WAL segments and snapshot files it makes obsolete."""
        assert self._wal is not None
        self._wal.save_snapshot(snapshot.meta)
        self._wal.release_to(snapshot.meta.index)
        snapfile.prune(self.snap_dir, keep=2)

    def restore_snapshot(self, snapshot: Snapshot) -> None:
        assert self._applier is not None
        if self.backend.consistent_index() >= snapshot.meta.index:
            return
        self._applier.restore(snapshot.data)

    @staticmethod
    def encode_message(message: Message) -> bytes:
        return raft_codec.encode_message(message)

    @staticmethod
    def decode_message(payload: bytes) -> Message:
        return raft_codec.decode_message(payload)

    # ---- the state machine ------------------------------------------------------------

    def precheck(self, request: internal_pb2.InternalRaftRequest) -> None:
        """Refuse, before proposing, what the applier would refuse for lack of space."""
        assert self._quota is not None
        if consumes_space(request) and (
            self._quota.nospace_raised() or not self._quota.available(request)
        ):
            raise RpcError(errors.NO_SPACE)

    def flush_backend_if_due(self) -> None:
        """Commit the backend's group-committed batches once they are GROUP_COMMIT_S old
        (the member calls this after a run of its Raft pump that found them due; the
        ticker's run comes at least once a tick)."""
        if self._backend is not None:
            self._backend.flush_if_due()

    def backend_flush_due(self) -> bool:
        return self._backend is not None and self._backend.flush_due()

    def nospace_raised(self) -> bool:
        assert self._quota is not None
        return self._quota.nospace_raised()

    def apply(self, entries: tuple[Entry, ...]) -> list[AppliedEntry]:
        """Apply committed entries in one backend transaction (Applier.apply_batch)."""
        assert self._applier is not None
        results: list[ApplyResult] = self._applier.apply_batch(
            [(entry.index, entry.term, entry.data) for entry in entries]
        )
        out = []
        member_id = self.member_id
        for entry, result in zip(entries, results, strict=True):
            if not entry.data or result.skipped or result.proposer_id != member_id:
                out.append(_NOT_PROPOSED_HERE)
            else:
                out.append(AppliedEntry(result.request_id, result.response, result.error))
        return out

    def revoke_lease_unlogged(self, lease_id: int) -> None:
        """Failpoint stale_leader_lease_revoke only: revoke a lease here, outside the log."""
        assert self._applier is not None
        self._applier.revoke_unlogged(lease_id)

    def current_revision(self) -> int:
        return self.backend.current_revision()

    def range(self, request: rpc_pb2.RangeRequest) -> rpc_pb2.RangeResponse:
        return KVStore(self.backend).range(request)

    def hash_kv(self, revision: int) -> tuple[int, int, int]:
        return KVStore(self.backend).hash_kv(revision)

    def backend_hash(self) -> int:
        return self.backend.hash()

    def sizes(self) -> tuple[int, int]:
        return self.backend.size(), self.backend.size_in_use()

    def defragment(self) -> None:
        self.backend.defragment()

    def alarm_list(self) -> list[rpc_pb2.AlarmMember]:
        return [
            rpc_pb2.AlarmMember(memberID=member_id, alarm=alarm)  # type: ignore[arg-type]
            for member_id, alarm in self.backend.alarms()
        ]
