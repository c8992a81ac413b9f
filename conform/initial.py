"""The store's state when a conformance run starts, recorded as the history's first
operations, so that a run can target a store that already holds data.

The checker's sequential model starts empty at revision 1 (etcdspec.model.store.
initial_state) and the history format has no initial-state record. The smallest honest
encoding it already accepts is a block of completed operations, on one process of its
own, recorded before the workload starts, that takes the empty store to exactly the
state the target is in: same revision, and for every key the same value, lease,
create_revision, mod_revision and version.

Contract:
- `read_snapshot(endpoint)` reads the target once: a Range of the whole keyspace (one
  request, so one revision R) and the remaining TTL of every lease a key is attached to.
  The store must be quiet while a run goes on (no other writers), as before.
- `plan_initial(snapshot) -> list[Request]` (pure): lease grants (with the lease's ID and
  its remaining TTL less a second, so the checker never allows an expiry earlier than the
  real one could be), then exactly one write per revision 2..R: at a key's
  create_revision a put, then version-2 placeholder puts right after it, at its
  mod_revision a put of its real value and lease; revisions where no key of the snapshot
  was written get writes of a filler key that is deleted again by revision R. Several
  puts at one revision go in one txn. Placeholder values are never observable: the run
  reads no revision below R (`Worker.floor_revision`) and watches nothing below R + 1.
- `record_initial(recorder, requests, snapshot)` applies the plan to the model's store
  (the responses recorded are the model's own), checks that the result is the snapshot
  (an InitialStateError otherwise), and records each as invoke/ok on a new process.
  The block claims nothing about the store's real past, only its state at R: every
  later operation is judged from there.
- A store of more than `MAX_REVISIONS` revisions is refused (the block would need one
  operation a revision); so is a snapshot no history can produce.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field

from etcdspec.checker.etcd_json import request_to_json, response_to_json
from etcdspec.conform.recorder import Recorder
from etcdspec.conform.secure import aio_channel
from etcdspec.conform.wire import kv_from_pb
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc
from etcdspec.model.lease import DEFAULT_MIN_LEASE_TTL
from etcdspec.model.requests import (
    RANGE_END_ALL,
    DeleteRangeRequest,
    KeyValue,
    LeaseGrantRequest,
    PutRequest,
    RangeRequest,
    RangeResponse,
    Request,
    TxnOp,
    TxnRequest,
)
from etcdspec.model.store import StoreConfig, apply, initial_state

MAX_REVISIONS = 50_000
MAX_TXN_OPS = StoreConfig().max_txn_ops
FILLER_KEY = b"\x00etcdspec-initial-filler"
LEASE_MARGIN_S = 1  # taken off a lease's remaining TTL (reading it takes time)
ALL_KEYS = b"\x00"


class InitialStateError(ValueError):
    """A store whose state cannot be recorded as the history's start (what, and why)."""


@dataclass(frozen=True)
class Snapshot:
    """The target's keyspace at one revision, and the leases its keys are attached to."""

    revision: int
    kvs: tuple[KeyValue, ...]
    lease_ttls: dict[int, int] = field(default_factory=dict)  # lease_id -> remaining s

    def describe(self) -> str:
        leases = f", {len(self.lease_ttls)} leases" if self.lease_ttls else ""
        return f"revision {self.revision}, {len(self.kvs)} keys{leases}"


async def read_snapshot(endpoint: str, timeout_s: float = 10.0) -> Snapshot:
    """The whole keyspace at the current revision, and its leases' remaining TTLs."""
    async with aio_channel(endpoint) as channel:
        reply = await rpc_pb2_grpc.KVStub(channel).Range(
            rpc_pb2.RangeRequest(key=ALL_KEYS, range_end=RANGE_END_ALL), timeout=timeout_s
        )
        kvs = tuple(kv_from_pb(kv) for kv in reply.kvs)
        ttls: dict[int, int] = {}
        for lease_id in sorted({kv.lease for kv in kvs if kv.lease}):
            lease = await rpc_pb2_grpc.LeaseStub(channel).LeaseTimeToLive(
                rpc_pb2.LeaseTimeToLiveRequest(ID=lease_id), timeout=timeout_s
            )
            ttls[lease_id] = int(lease.TTL)
    return Snapshot(int(reply.header.revision), kvs, ttls)


def short_leases(snapshot: Snapshot) -> dict[int, int]:
    """Leases too close to expiry to be granted again in the model (wait them out)."""
    least = DEFAULT_MIN_LEASE_TTL + LEASE_MARGIN_S
    return {i: ttl for i, ttl in snapshot.lease_ttls.items() if ttl < least}


def plan_initial(snapshot: Snapshot) -> list[Request]:
    """Requests that take the empty store (revision 1) to exactly `snapshot`."""
    top = snapshot.revision
    if top < 1:
        raise InitialStateError(f"revision {top}: a store starts at revision 1")
    if top > MAX_REVISIONS:
        raise InitialStateError(
            f"the store is at revision {top}: recording its state as the history's start "
            f"takes one operation a revision (at most {MAX_REVISIONS}); use a fresh store"
        )
    grants: list[Request] = []
    for lease_id in sorted({kv.lease for kv in snapshot.kvs if kv.lease}):
        remaining = snapshot.lease_ttls.get(lease_id, -1)
        if remaining - LEASE_MARGIN_S < DEFAULT_MIN_LEASE_TTL:
            raise InitialStateError(
                f"lease {lease_id} has {remaining} s left: too close to expiry to record "
                "(wait for it to expire, then start again)"
            )
        grants.append(LeaseGrantRequest(ttl=remaining - LEASE_MARGIN_S, id=lease_id))
    writes: dict[int, list[TxnOp]] = {r: [] for r in range(2, top + 1)}
    for kv in snapshot.kvs:
        for revision, put in _key_puts(kv, top):
            writes[revision].append(put)
    filler = _filler_key(kv.key for kv in snapshot.kvs)
    _fill_gaps(writes, top, filler)
    requests = list(grants)
    for revision in range(2, top + 1):
        ops = writes[revision]
        if len(ops) > MAX_TXN_OPS:
            raise InitialStateError(
                f"revision {revision} would need {len(ops)} operations in one txn "
                f"(at most {MAX_TXN_OPS}); this snapshot cannot be replayed"
            )
        requests.append(ops[0] if len(ops) == 1 else TxnRequest(success=tuple(ops)))
    return requests


def _key_puts(kv: KeyValue, top: int) -> list[tuple[int, PutRequest]]:
    """(revision, put) for one key: create, version-2 placeholders right after, last."""
    where = f"key {kv.key!r}"
    if not 2 <= kv.create_revision <= kv.mod_revision <= top or kv.version < 1:
        raise InitialStateError(
            f"{where}: create_revision {kv.create_revision}, mod_revision {kv.mod_revision}, "
            f"version {kv.version} at store revision {top} is not a state etcd can reach"
        )
    if kv.version == 1:
        if kv.create_revision != kv.mod_revision:
            raise InitialStateError(f"{where}: version 1 but create != mod revision")
        return [(kv.mod_revision, PutRequest(kv.key, kv.value, lease=kv.lease))]
    if kv.create_revision + kv.version - 2 >= kv.mod_revision:
        raise InitialStateError(
            f"{where}: version {kv.version} needs more revisions than "
            f"{kv.create_revision}..{kv.mod_revision} hold"
        )
    puts = [
        (kv.create_revision + i, PutRequest(kv.key, b"initial-placeholder"))
        for i in range(kv.version - 1)
    ]
    puts.append((kv.mod_revision, PutRequest(kv.key, kv.value, lease=kv.lease)))
    return puts


def _filler_key(keys: Iterable[bytes]) -> bytes:
    taken = set(keys)
    filler = FILLER_KEY
    while filler in taken:
        filler += b"_"
    return filler


def _fill_gaps(writes: dict[int, list[TxnOp]], top: int, filler: bytes) -> None:
    """Give every revision without a write one that leaves no trace by revision `top`:
    the filler key is put (and overwritten) along a gap and deleted right after it."""
    revision = 2
    while revision <= top:
        if writes[revision]:
            revision += 1
            continue
        end = revision
        while end + 1 <= top and not writes[end + 1]:
            end += 1
        if end < top:  # the next revision writes: it deletes the filler too
            for r in range(revision, end + 1):
                writes[r].append(PutRequest(filler, b"filler"))
            writes[end + 1].append(DeleteRangeRequest(filler))
        elif end > revision:  # a gap up to the top: the last revision deletes
            for r in range(revision, end):
                writes[r].append(PutRequest(filler, b"filler"))
            writes[end].append(DeleteRangeRequest(filler))
        elif revision > 2:  # one revision at the top: the filler lives up to it
            before = writes[revision - 1]
            delete = DeleteRangeRequest(filler)
            if delete in before:  # put along the gap before: keep it one write longer
                before.remove(delete)
            else:
                before.append(PutRequest(filler, b"filler"))
            writes[revision].append(delete)
        else:
            raise InitialStateError(
                "an empty store at revision 2 is not a state etcd can reach "
                "(revision 2 is a write, and nothing it wrote is left)"
            )
        revision = end + 1


def record_initial(recorder: Recorder, requests: list[Request], snapshot: Snapshot) -> int:
    """Record the plan as completed operations of a new process; returns the process id.
    The responses are the model's; the final state must be the snapshot's."""
    state = initial_state()
    process = recorder.new_process()
    for request in requests:
        state, response = apply(state, request)
        f, value = request_to_json(request)
        recorder.add(process, "invoke", f, value)
        recorder.add(process, "ok", f, response_to_json(response))
    _, reply = apply(state, RangeRequest(ALL_KEYS, RANGE_END_ALL))
    assert isinstance(reply, RangeResponse)
    if state.revision != snapshot.revision or reply.kvs != snapshot.kvs:
        differing = sorted({kv.key for kv in set(reply.kvs).symmetric_difference(snapshot.kvs)})[:3]
        raise InitialStateError(
            f"replaying the store's state gave revision {state.revision} (store: "
            f"{snapshot.revision}); keys differing: {differing}"
        )
    return process


@dataclass(frozen=True)
class InitialRecord:
    """What `capture` recorded: the snapshot, and the process and operations used."""

    snapshot: Snapshot
    process: int | None  # None: a fresh store, nothing recorded
    operations: int

    @property
    def revision(self) -> int:
        return self.snapshot.revision

    def describe(self) -> str:
        if self.process is None:
            return "a fresh store (revision 1)"
        return (
            f"{self.snapshot.describe()}, recorded as {self.operations} completed "
            f"operations of process p{self.process} before the workload"
        )

    def to_json(self) -> dict[str, int | None]:
        return {
            "revision": self.snapshot.revision,
            "keys": len(self.snapshot.kvs),
            "leases": len(self.snapshot.lease_ttls),
            "process": self.process,
            "operations": self.operations,
        }


async def capture(recorder: Recorder, endpoint: str, lease_wait_s: float = 20.0) -> InitialRecord:
    """Read the target's state and record it as the history's start (nothing for a
    fresh store). Leases too close to expiry are waited out (up to `lease_wait_s`)."""
    snapshot = await read_snapshot(endpoint)
    waited = 0.0
    while short_leases(snapshot) and waited < lease_wait_s:
        pause = min(short_lease_wait_s(snapshot), lease_wait_s - waited)
        await asyncio.sleep(pause)
        waited += pause
        snapshot = await read_snapshot(endpoint)
    if snapshot.revision == 1 and not snapshot.kvs:
        return InitialRecord(snapshot, None, 0)
    requests = plan_initial(snapshot)
    process = record_initial(recorder, requests, snapshot)
    return InitialRecord(snapshot, process, len(requests))


def short_lease_wait_s(snapshot: Snapshot) -> float:
    """How long until every lease `short_leases` names has run out (0 if none)."""
    shortest = short_leases(snapshot)
    return float(max(shortest.values())) + 1.0 if shortest else 0.0
