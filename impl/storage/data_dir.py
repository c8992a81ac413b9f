"""A member's Raft state on disk: the WAL and the snapshot files in its --data-dir.

Layout (as etcd's): `member/wal/` (the WAL, etcdspec.impl.storage.wal), `member/snap/`
(Raft snapshot files, etcdspec.impl.storage.snapfile) and `member/snap/db`, the state
machine's database, which this layer only names (etcdspec.impl.kv opens it).

`open()` reads what a start needs: the newest valid snapshot file that the WAL records
(a file written just before a crash, whose WAL record never reached the disk, is passed
over: the WAL still holds its entries), then the WAL replayed after it.

`persist()` is step 1 of the Ready contract: a received snapshot's file first, then one
WAL batch (entries + hard state + snapshot metadata) with one fsync (the member skips the
fsync for a batch that only moves the commit index, as etcd does). It is
`prepare_persist()` (checks and encoding, on the event loop) then `write_persist()` (the
files and the fsync, which the member may run in a worker thread). A local snapshot's
file is written by `save_snapshot_file` (in a worker) and recorded by `record_snapshot`,
which releases the WAL segments and snapshot files it makes obsolete.

Not thread-safe: one thread at a time; `write_persist` and `save_snapshot_file` may run
in a worker while the event loop does not touch the WAL.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from etcdspec.impl import failpoints
from etcdspec.impl.raft.messages import NONE, Entry, HardState, Snapshot, SnapshotMeta
from etcdspec.impl.storage import snapfile
from etcdspec.impl.storage.wal import PendingBatch, Wal, recorded_snapshots

SNAPSHOT_FILES_KEPT = 2


@dataclass(frozen=True)
class OnDisk:
    """What `DataDir.open()` read: the snapshot to start from (and its file), and the
    WAL's state after it."""

    snapshot: Snapshot | None
    snapshot_path: Path | None
    hard_state: HardState
    entries: tuple[Entry, ...]
    warnings: tuple[str, ...]

    def describe(self) -> str:
        where = self.snapshot.meta.describe() if self.snapshot else "no snapshot"
        return f"{where}; {self.hard_state.describe()}; {len(self.entries)} entries"


@dataclass(frozen=True)
class PreparedPersist:
    """What `prepare_persist` encoded, for `write_persist` to write."""

    snapshot: Snapshot | None
    batch: PendingBatch | None

    def describe(self) -> str:
        what = self.batch.describe() if self.batch is not None else "no batch"
        return what + (f", {self.snapshot.describe()}" if self.snapshot is not None else "")


class DataDir:
    """See the module docstring. `open()` before anything else; `close()` when done."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.wal_dir = data_dir / "member" / "wal"
        self.snap_dir = data_dir / "member" / "snap"
        self.db_path = self.snap_dir / "db"
        self._wal: Wal | None = None

    def open(self) -> OnDisk:
        self.snap_dir.mkdir(parents=True, exist_ok=True)
        recorded = recorded_snapshots(self.wal_dir)
        loaded = snapfile.load_newest(
            self.snap_dir, accept=lambda meta: (meta.index, meta.term) in recorded
        )
        snapshot = loaded.snapshot if loaded is not None else None
        wal, state = Wal.open(self.wal_dir, snapshot=snapshot.meta if snapshot else None)
        self._wal = wal
        return OnDisk(
            snapshot=snapshot,
            snapshot_path=loaded.path if loaded is not None else None,
            hard_state=state.hard_state,
            entries=state.entries,
            warnings=state.warnings,
        )

    def close(self) -> None:
        if self._wal is not None:
            self._wal.close()
            self._wal = None

    @property
    def wal(self) -> Wal:
        if self._wal is None:
            raise RuntimeError(f"{self.wal_dir}: the WAL is not open")
        return self._wal

    # ---- step 1 of the Ready contract ---------------------------------------------------

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
        if hard_state is not None and failpoints.on("forget_vote_on_restart"):
            hard_state = replace(hard_state, vote=NONE)
        batch = self.wal.prepare_save(hard_state, entries, snapshot.meta if snapshot else None)
        return PreparedPersist(snapshot, batch)

    def write_persist(self, prepared: PreparedPersist, sync: bool = True) -> None:
        """The I/O half of `persist`: snapshot file, WAL batch, one fsync (any thread, one
        at a time, after the `prepare_persist` that gave `prepared`)."""
        wal = self.wal
        if prepared.snapshot is not None:
            snapfile.save(self.snap_dir, prepared.snapshot)
        if prepared.batch is not None:
            wal.write_batch(prepared.batch, sync)

    # ---- local snapshots --------------------------------------------------------------

    def save_snapshot_file(self, snapshot: Snapshot) -> Path:
        """Write `snapshot`'s file, fsynced (any thread). A start uses it only once
        `record_snapshot` has recorded it in the WAL."""
        return snapfile.save(self.snap_dir, snapshot)

    def record_snapshot(self, meta: SnapshotMeta) -> None:
        """Record a snapshot whose file is written in the WAL, and release the WAL
        segments and snapshot files it makes obsolete."""
        wal = self.wal
        wal.save_snapshot(meta)
        wal.release_to(meta.index)
        snapfile.prune(self.snap_dir, keep=SNAPSHOT_FILES_KEPT)
