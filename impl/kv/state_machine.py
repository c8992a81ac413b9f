"""A member's state machine behind one object: the backend, the applier, the lessor, the
watch hub and the quota over one SQLite file.

The member applies committed entries through `apply` (in log order, one backend
transaction per batch: Applier.apply_batch) and is told which of them a client of its
own waits for (`AppliedEntry`); the client API's servicers read through it directly
(ranges, hashes, sizes, alarms, leases, watches) and Maintenance's defragment and backup
go to it. What is on disk besides the database (the Raft WAL, snapshot files) is
another layer's (etcdspec.impl.storage); this one knows nothing of Raft but the
(index, term, data) of the entries it applies.

Not thread-safe: one thread (the member's event loop) calls it, except the methods that
say otherwise (`sync_committed`, `copy_committed`, and jobs run by `in_worker`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from google.protobuf.message import Message as PbMessage

from etcdspec.impl import errors
from etcdspec.impl.errors import RpcError
from etcdspec.impl.kv.applier import Applier
from etcdspec.impl.kv.auth_store import AuthStore
from etcdspec.impl.kv.auth_tokens import TokenProvider
from etcdspec.impl.kv.backend import BackendCopy
from etcdspec.impl.kv.etcd_export import etcd_database_from_copy
from etcdspec.impl.kv.lessor import Lessor
from etcdspec.impl.kv.member_backend import MemberBackend
from etcdspec.impl.kv.members import MemberChange, MemberRecord, MemberTable
from etcdspec.impl.kv.mvcc import KVStore
from etcdspec.impl.kv.quota import BackendQuota, consumes_space
from etcdspec.impl.kv.watch_hub import WatchHub
from etcdspec.impl.pb import raft_internal_pb2 as internal_pb2
from etcdspec.impl.pb import rpc_pb2

_T = TypeVar("_T")


class CommittedEntry(Protocol):
    """What the state machine reads of a committed log entry."""

    @property
    def index(self) -> int: ...

    @property
    def term(self) -> int: ...

    @property
    def data(self) -> bytes: ...


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
NOT_PROPOSED_HERE = AppliedEntry(None, None, None)


class StateMachine:
    """See the module docstring. Open on construction; `close()` when done."""

    def __init__(
        self,
        db_path: Path,
        member_id: int,
        *,
        quota_bytes: int,
        on_watch_ready: Callable[[int], None] = lambda handle: None,
        clock: Callable[[], float] = time.monotonic,
        tokens: TokenProvider | None = None,
    ) -> None:
        self.db_path = db_path
        self.member_id = member_id
        self.lessor = Lessor()
        self._backend: MemberBackend | None = MemberBackend(db_path)
        self.watch_hub = WatchHub(self._backend, on_ready=on_watch_ready)
        self.quota = BackendQuota(self._backend, quota_bytes)
        self.auth = AuthStore(self._backend, tokens)
        self._applier = Applier(
            self._backend, self.lessor, self.watch_hub, self.quota, clock=clock, auth=self.auth
        )

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()
            self._backend = None

    @property
    def backend(self) -> MemberBackend:
        if self._backend is None:
            raise RpcError(errors.STOPPED)
        return self._backend

    # ---- applying the log ---------------------------------------------------------------

    def consistent_index(self) -> int:
        """The index of the last entry the backend holds applied."""
        return self.backend.consistent_index()

    def apply(self, entries: Sequence[CommittedEntry]) -> list[AppliedEntry]:
        """Apply committed entries in one backend transaction (Applier.apply_batch)."""
        results = self._applier.apply_batch([(e.index, e.term, e.data) for e in entries])
        out = []
        member_id = self.member_id
        for entry, result in zip(entries, results, strict=True):
            if not entry.data or result.skipped or result.proposer_id != member_id:
                out.append(NOT_PROPOSED_HERE)
            else:
                out.append(AppliedEntry(result.request_id, result.response, result.error))
        return out

    def apply_member_change(
        self, index: int, term: int, change: MemberChange
    ) -> MemberRecord | RpcError | None:
        """Apply the configuration change of the committed entry (index, term): the member
        records written with the consistent index, in one transaction. The record written,
        or etcd's error if its checks refuse the change here (nothing but the index is
        written then), or None if the backend holds the entry applied already."""
        backend = self.backend
        if index <= backend.consistent_index():
            return None
        outcome: MemberRecord | RpcError
        with backend.transaction():
            try:
                with backend.savepoint("member"):
                    outcome = MemberTable(backend).write(change)
            except RpcError as error:
                outcome = error
            backend.set_applied(index, term)
        return outcome

    def members(self) -> MemberTable:
        """The member records (read them on the event loop)."""
        return MemberTable(self.backend)

    def restore(self, database: bytes, index: int) -> None:
        """Replace the state with `database` (a snapshot's, at log index `index`), unless
        the backend already holds that index."""
        if self.backend.consistent_index() >= index:
            return
        self._applier.restore(database)

    def revoke_lease_unlogged(self, lease_id: int) -> None:
        """Failpoint stale_leader_lease_revoke only: revoke a lease here, outside the log."""
        self._applier.revoke_unlogged(lease_id)

    # ---- admission --------------------------------------------------------------------

    def precheck(self, request: internal_pb2.InternalRaftRequest) -> None:
        """Refuse, before proposing, what the applier would refuse for lack of space."""
        if consumes_space(request) and (
            self.quota.nospace_raised() or not self.quota.available(request)
        ):
            raise RpcError(errors.NO_SPACE)

    def nospace_raised(self) -> bool:
        return self.quota.nospace_raised()

    # ---- group commit -----------------------------------------------------------------

    def flush_due(self) -> bool:
        return self._backend is not None and self._backend.flush_due()

    def flush_if_due(self) -> None:
        """Commit the backend's group-committed batches once they are GROUP_COMMIT_S old."""
        if self._backend is not None:
            self._backend.flush_if_due()

    def flush(self) -> None:
        """Commit everything applied so far."""
        self.backend.flush()

    # ---- reads ------------------------------------------------------------------------

    def current_revision(self) -> int:
        return self.backend.current_revision()

    def compact_revision(self) -> int:
        return self.backend.compact_revision()

    def range(self, request: rpc_pb2.RangeRequest) -> rpc_pb2.RangeResponse:
        return KVStore(self.backend).range(request)

    def hash_kv(self, revision: int) -> tuple[int, int, int]:
        """(hash, compact revision, current revision) as etcd's HashKV at `revision`."""
        return KVStore(self.backend).hash_kv(revision)

    def hash(self) -> int:
        return self.backend.hash()

    def sizes(self) -> tuple[int, int]:
        """(database size, size in use), in bytes."""
        return self.backend.size(), self.backend.size_in_use()

    def alarms(self) -> list[rpc_pb2.AlarmMember]:
        return [
            rpc_pb2.AlarmMember(memberID=member_id, alarm=alarm)  # type: ignore[arg-type]
            for member_id, alarm in self.backend.alarms()
        ]

    # ---- maintenance and snapshots ------------------------------------------------------

    def defragment(self) -> None:
        self.backend.defragment()

    def in_worker(self, job: Callable[[], _T]) -> Future[_T]:
        """Run `job` in the backend's worker thread (MemberBackend.in_worker)."""
        return self.backend.in_worker(job)

    def sync_committed(self) -> tuple[int, int]:
        """Make what the file has committed durable; the (index, term) it holds. Any
        thread."""
        return self.backend.sync_committed()

    def copy_committed(self) -> BackendCopy:
        """A copy of the database as committed, with the index it holds. Any thread."""
        return self.backend.copy_committed()

    def etcd_snapshot(self) -> bytes:
        """What is committed, as an etcd 3.5 (bbolt) database: what Maintenance.Snapshot
        streams, so that etcd's tools read it. Any thread."""
        return etcd_database_from_copy(self.backend.copy_committed().data)
