"""The backend as a member runs it: SQLite in WAL journal mode, group commit, and the
disk work (checkpoints, syncs for a snapshot) done in worker threads.

See `MemberBackend`. Not thread-safe beyond what it says: the member calls it from its
event loop; `in_worker` jobs, `sync_committed` and `copy_committed` may run elsewhere.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from etcdspec.impl.kv.backend import Backend, BackendError

# Group commit of the member's backend (etcd: --backend-batch-interval 100 ms,
# --backend-batch-limit 10,000 writes); counted here in apply batches.
GROUP_COMMIT_S = 0.1
GROUP_COMMIT_LIMIT = 1000
# The journal size that starts a checkpoint in a worker (SQLite's own default: 1,000 pages).
CHECKPOINT_WAL_BYTES = 4 * 1024 * 1024
CHECKPOINT_ROUNDS = 8  # passive checkpoints in a row, until one copies the whole journal

log = logging.getLogger("etcdspec.impl.kv.member_backend")
_T = TypeVar("_T")


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
