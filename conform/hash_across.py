"""HashKV across implementations: the same seeded writes on a fresh member of ours and a
fresh member of real etcd, HashKV compared after every write.

A conformance run's own history cannot be compared across targets: its concurrent
clients and faults order the writes differently on each. So `etcdspec conform
--hashkv-across` runs, after its own run, a short script of writes that is a pure
function of the run's seed — puts (some on leases), deletes of a key or a prefix, txns
taking either branch, lease grants with explicit ids and revokes, compactions — one at a
time, on a fresh 1-member cluster of each implementation, and asks HashKV (revision 0:
the current one) after each. Contract:
- `seeded_writes(seed, count)`: the script, the same for a seed in any process;
- `hashkv_trail(url, writes)`: each write's outcome (an error's code, or OK) and the
  HashKV answer after it (hash, compact revision, header revision);
- `compare_trails(trails)` -> CheckResult "HashKV across targets": TRUE when every
  target's trail is equal, FALSE at the first step where they differ (both answers
  shown), UNKNOWN when a target gave no trail;
- `hashkv_across(directory, seed, etcd_bin)` starts the two members, runs the script on
  each and compares; a member that does not start or answer is UNKNOWN, never a pass.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
import grpc.aio

from etcdspec.checker.results import CheckResult
from etcdspec.conform.targets import Target, TargetError, make_target
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc
from etcdspec.verdict import Verdict

NAME = "HashKV across targets"
KINDS = ("reference", "etcd")
WRITES = 80
KEYS = tuple(b"h/%d" % i for i in range(8))


@dataclass(frozen=True)
class Write:
    """One step of the script: which call, and its request."""

    method: str  # Put, DeleteRange, Txn, LeaseGrant, LeaseRevoke, Compact
    request: object
    compact_back: int = 0  # Compact: this many revisions behind the current one

    def describe(self) -> str:
        text = " ".join(str(self.request).split())
        return f"{self.method} {text}" + (
            f" ({self.compact_back} back)" if self.compact_back else ""
        )


def seeded_writes(seed: int, count: int = WRITES) -> list[Write]:
    rng = random.Random(f"hashkv-across-{seed}")
    writes: list[Write] = []
    leases: list[int] = []
    next_lease = 1000
    for _ in range(count):
        roll = rng.random()
        key = rng.choice(KEYS)
        value = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 40)))
        if roll < 0.45:
            lease = rng.choice(leases) if leases and rng.random() < 0.3 else 0
            writes.append(Write("Put", rpc_pb2.PutRequest(key=key, value=value, lease=lease)))
        elif roll < 0.6:
            if rng.random() < 0.5:
                request = rpc_pb2.DeleteRangeRequest(key=key)
            else:
                request = rpc_pb2.DeleteRangeRequest(
                    key=b"h/", range_end=b"h/" + b"%d" % rng.randrange(1, 8)
                )
            writes.append(Write("DeleteRange", request))
        elif roll < 0.75:
            compare = rpc_pb2.Compare(
                key=key, target=rpc_pb2.Compare.VERSION, result=rpc_pb2.Compare.GREATER, version=1
            )
            other = rng.choice(KEYS)
            txn = rpc_pb2.TxnRequest(
                compare=[compare],
                success=[
                    rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=other, value=value)),
                    rpc_pb2.RequestOp(request_delete_range=rpc_pb2.DeleteRangeRequest(key=key)),
                ],
                failure=[rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=key, value=value))],
            )
            writes.append(Write("Txn", txn))
        elif roll < 0.83:
            next_lease += 1
            leases.append(next_lease)
            writes.append(Write("LeaseGrant", rpc_pb2.LeaseGrantRequest(ID=next_lease, TTL=600)))
        elif roll < 0.9 and leases:
            lease_id = leases.pop(rng.randrange(len(leases)))
            writes.append(Write("LeaseRevoke", rpc_pb2.LeaseRevokeRequest(ID=lease_id)))
        else:
            back = rng.randrange(0, 4)
            writes.append(Write("Compact", rpc_pb2.CompactionRequest(physical=True), back))
    return writes


Step = tuple[str, tuple[int, int, int] | str]
"""A write's outcome ("OK" or a status code name) and the HashKV after it (or the
status code name of HashKV's error)."""


async def hashkv_trail(url: str, writes: Sequence[Write], timeout_s: float = 5.0) -> list[Step]:
    trail: list[Step] = []
    revision = 1
    async with grpc.aio.insecure_channel(url.removeprefix("http://")) as channel:
        kv = rpc_pb2_grpc.KVStub(channel)
        lease = rpc_pb2_grpc.LeaseStub(channel)
        maintenance = rpc_pb2_grpc.MaintenanceStub(channel)
        for write in writes:
            outcome = "OK"
            try:
                if write.method == "Compact":
                    request = rpc_pb2.CompactionRequest(
                        revision=max(1, revision - write.compact_back), physical=True
                    )
                    await kv.Compact(request, timeout=timeout_s)
                elif write.method in ("LeaseGrant", "LeaseRevoke"):
                    await getattr(lease, write.method)(write.request, timeout=timeout_s)
                else:
                    await getattr(kv, write.method)(write.request, timeout=timeout_s)
            except grpc.aio.AioRpcError as error:
                if error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise
                outcome = error.code().name
            try:
                reply = await maintenance.HashKV(rpc_pb2.HashKVRequest(), timeout=timeout_s)
            except grpc.aio.AioRpcError as error:
                if error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise
                trail.append((outcome, error.code().name))
                continue
            revision = reply.header.revision
            trail.append((outcome, (reply.hash, reply.compact_revision, revision)))
    return trail


def compare_trails(
    trails: dict[str, list[Step] | str], writes: Sequence[Write], seconds: float
) -> CheckResult:
    missing = {kind: why for kind, why in trails.items() if isinstance(why, str)}
    if missing:
        shown = "; ".join(f"{kind}: {why}" for kind, why in missing.items())
        return CheckResult(NAME, Verdict.UNKNOWN, f"no HashKV trail from {shown}", seconds)
    full = {kind: trail for kind, trail in trails.items() if not isinstance(trail, str)}
    (first_kind, first), *others = full.items()
    for kind, trail in others:
        for index, (mine, theirs) in enumerate(zip(first, trail, strict=True)):
            if mine != theirs:
                return CheckResult(
                    NAME,
                    Verdict.FALSE,
                    f"{first_kind} and {kind} differ after write {index + 1} of {len(writes)}",
                    seconds,
                    (
                        writes[index].describe(),
                        f"{first_kind}: {mine}",
                        f"{kind}: {theirs}",
                    ),
                )
    last = first[-1][1] if first else "nothing"
    return CheckResult(
        NAME,
        Verdict.TRUE,
        f"{' and '.join(full)} agree after each of {len(writes)} seeded writes (last {last})",
        seconds,
    )


async def hashkv_across(
    directory: Path, seed: int, etcd_bin: str | None = None, count: int = WRITES
) -> CheckResult:
    started = time.monotonic()
    writes = seeded_writes(seed, count)
    trails: dict[str, list[Step] | str] = {}
    for kind in KINDS:
        target: Target | None = None
        try:
            target = make_target(kind, directory / kind, etcd_bin=etcd_bin, size=1)
            await target.start()
            url = target.client_url(target.member_names()[0])
            trails[kind] = await hashkv_trail(url, writes)
        except (TargetError, grpc.aio.AioRpcError, OSError) as error:
            trails[kind] = f"{type(error).__name__}: {error}"
        finally:
            if target is not None:
                await target.close()
    return compare_trails(trails, writes, time.monotonic() - started)
