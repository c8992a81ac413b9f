"""Recovery at start: a member's disk (etcdspec.impl.storage) and state machine
(etcdspec.impl.kv) opened and made to agree, and the Raft state to start from.

`open_member_data()` reads the data directory (DataDir.open: the newest snapshot file the
WAL records, then the WAL after it), opens the state machine over its database, and
settles the two:
- a backend older than a snapshot received from the leader (a crash between persisting
  it and restoring it) is restored from the snapshot, which carries the database;
- a member's own snapshots hold no database (it is synced before they are recorded): a
  backend older than one of them refuses to start, naming both files;
- the applied index handed to Raft is the backend's consistent index, clamped to
  [snapshot index, commit index]: committed entries after it are applied again on start
  (the applier skips any the backend already holds).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from etcdspec.impl.kv.auth_tokens import TokenProvider
from etcdspec.impl.kv.backend import BackendError
from etcdspec.impl.kv.state_machine import StateMachine
from etcdspec.impl.raft.core import PersistedState
from etcdspec.impl.storage.data_dir import DataDir


@dataclass(frozen=True)
class Recovered:
    """What recovery found on disk: the Raft state to start from and the applied index."""

    persisted: PersistedState
    applied: int
    snapshot_index: int
    warnings: tuple[str, ...]

    def describe(self) -> str:
        text = f"{self.persisted.describe()}; applied {self.applied}"
        return text + "".join(f"; warning: {w}" for w in self.warnings)


@dataclass
class MemberData:
    """A member's two durable parts, open: its Raft state on disk and its state machine."""

    disk: DataDir
    state: StateMachine

    def close(self) -> None:
        self.disk.close()
        self.state.close()


def open_member_data(
    data_dir: Path,
    member_id: int,
    *,
    quota_bytes: int,
    on_watch_ready: Callable[[int], None] = lambda handle: None,
    clock: Callable[[], float] = time.monotonic,
    tokens: TokenProvider | None = None,
) -> tuple[MemberData, Recovered]:
    """Open and settle a member's data directory; see the module docstring. Raises
    BackendError (or the WAL's and snapshot files' errors) when it cannot be started
    from, with nothing left open."""
    disk = DataDir(data_dir)
    found = disk.open()
    try:
        state = StateMachine(
            disk.db_path,
            member_id,
            quota_bytes=quota_bytes,
            on_watch_ready=on_watch_ready,
            clock=clock,
            tokens=tokens,
        )
    except BaseException:
        disk.close()
        raise
    data = MemberData(disk, state)
    snapshot = found.snapshot
    try:
        held = state.consistent_index()
        if snapshot is not None and held < snapshot.meta.index:
            if not snapshot.data:  # a local snapshot: the database was synced before it
                raise BackendError(
                    f"{disk.db_path}: the database holds entries up to {held}, behind the "
                    f"{snapshot.meta.describe()} in {found.snapshot_path}, which holds no copy "
                    "of it (the file was replaced or damaged since): restore this member from "
                    "a backup (etcdspec snapshot restore), or remove its data directory to "
                    "add it afresh"
                )
            state.restore(snapshot.data, snapshot.meta.index)
    except BaseException:
        data.close()
        raise
    snapshot_index = snapshot.meta.index if snapshot else 0
    hard_state = found.hard_state
    applied = min(
        max(state.consistent_index(), snapshot_index), max(hard_state.commit, snapshot_index)
    )
    persisted = PersistedState(hard_state=hard_state, snapshot=snapshot, entries=found.entries)
    return data, Recovered(persisted, applied, snapshot_index, found.warnings)
