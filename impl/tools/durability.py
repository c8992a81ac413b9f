"""A durability run of the reference server: acknowledged writes and convergence under faults.

A stage in `verify`'s form (StageOptions -> StageResult) that `verify` itself does not run
(its conform stage covers the same ground, checked end to end); the crash tests use it.

`run_stage(options)` starts a local 3-member cluster of our server (separate processes,
free loopback ports, data under options.report_dir/server-cluster), drives a write load
from several client threads, and injects faults while it runs: kill -9 of a follower and
its restart (which is caught up by snapshot), then a network partition isolating the
leader, healed afterwards. Then it checks, on every member: every acknowledged write is
present with its value, the members converged (same applied index and revision, one
leader) and their HashKV agree.

Verdict: FALSE if an acknowledged write is missing or the hashes differ (a violation);
UNKNOWN if the cluster could not be started, made no progress, or did not converge
before the deadline (never reported as a pass); TRUE otherwise. The cluster is always
stopped. `Load` (the writer threads) is shared with the crash tests.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc
from etcdspec.impl.tools import launcher
from etcdspec.stage import StageOptions, StageResult
from etcdspec.verdict import Verdict

STAGE_NAME = "server"


class StageUnknown(Exception):
    """The run could not decide (no progress, no convergence); the message says where."""


@dataclass
class Load:
    """Writer threads putting unique keys; a key counts as acknowledged only on OK."""

    endpoints: list[str]
    acked: dict[bytes, bytes] = field(default_factory=dict)
    failures: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def writer(self, number: int) -> None:
        channels = [grpc.insecure_channel(e.removeprefix("http://")) for e in self.endpoints]
        stubs = [rpc_pb2_grpc.KVStub(channel) for channel in channels]
        sequence = 0
        target = number
        try:
            while not self.stop.is_set():
                key = f"w{number}-{sequence:06d}".encode()
                value = f"{time.monotonic_ns()}".encode()
                try:
                    stubs[target % len(stubs)].Put(
                        rpc_pb2.PutRequest(key=key, value=value), timeout=2
                    )
                except grpc.RpcError:
                    with self.lock:
                        self.failures += 1
                    target += 1  # try another member next time
                    time.sleep(0.02)
                else:
                    with self.lock:
                        self.acked[key] = value
                sequence += 1
        finally:
            for channel in channels:
                channel.close()

    def count(self) -> int:
        with self.lock:
            return len(self.acked)

    def wait_for_more(self, at_least: int, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        start = self.count()
        while self.count() < start + at_least:
            if time.monotonic() > deadline:
                raise StageUnknown(f"writes stalled at {self.count()} acknowledged")
            time.sleep(0.02)

    def describe(self) -> str:
        return f"{self.count()} writes acknowledged, {self.failures} failed"


def statuses(endpoints: list[str]) -> dict[str, dict[str, Any]]:
    out = {}
    for endpoint in endpoints:
        try:
            out[endpoint] = launcher.probe_status(endpoint, timeout_s=1.0)
        except launcher.LauncherError:
            continue
    return out


def leader_name(plan: launcher.ClusterPlan, timeout_s: float = 20.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = statuses(plan.endpoints)
        for member in plan.members:
            status = found.get(member.client_url)
            if status and status["leader"] == status["member_id"]:
                return member.name
        time.sleep(0.05)
    raise StageUnknown(f"no leader within {timeout_s:.0f} s")


def wait_converged(endpoints: list[str], timeout_s: float = 30.0) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = statuses(endpoints)
        if (
            len(found) == len(endpoints)
            and len({s["raft_index"] for s in found.values()}) == 1
            and len({s["revision"] for s in found.values()}) == 1
            and len({s["leader"] for s in found.values()}) == 1
        ):
            return found
        time.sleep(0.1)
    raise StageUnknown(f"members did not converge within {timeout_s:.0f} s")


def check_members(endpoints: list[str], acked: dict[bytes, bytes], revision: int) -> list[str]:
    """Violations: acknowledged writes missing on a member, or differing HashKV."""
    problems = []
    hashes = {}
    for endpoint in endpoints:
        with grpc.insecure_channel(endpoint.removeprefix("http://")) as channel:
            got = rpc_pb2_grpc.KVStub(channel).Range(
                rpc_pb2.RangeRequest(key=b"w", range_end=b"x", serializable=True), timeout=10
            )
            stored = {item.key: item.value for item in got.kvs}
            missing = [key for key, value in acked.items() if stored.get(key) != value]
            if missing:
                problems.append(
                    f"{endpoint} lost {len(missing)} acknowledged writes, e.g. {missing[0]!r}"
                )
            hashes[endpoint] = (
                rpc_pb2_grpc.MaintenanceStub(channel)
                .HashKV(rpc_pb2.HashKVRequest(revision=revision), timeout=10)
                .hash
            )
    if len(set(hashes.values())) != 1:
        problems.append(f"HashKV at revision {revision} differs between members: {hashes}")
    return problems


def _faulty_run(
    plan: launcher.ClusterPlan, members: list[launcher.RunningMember], writes: int
) -> Load:
    ids = {m.name: launcher.probe_status(m.client_url)["member_id"] for m in plan.members}
    load = Load(plan.endpoints)
    threads = [threading.Thread(target=load.writer, args=(n,), daemon=True) for n in range(3)]
    for thread in threads:
        thread.start()
    try:
        load.wait_for_more(writes)
        leader = leader_name(plan)
        follower = next(m for m in plan.members if m.name != leader)
        index = [m.plan.name for m in members].index(follower.name)
        launcher.kill_member(members[index])
        load.wait_for_more(writes)
        members[index] = launcher.start_member(
            plan, follower, launcher.ours_program(), state="existing"
        )
        load.wait_for_more(writes)
        leader = leader_name(plan)
        launcher.partition(plan, ids, {leader})
        try:
            load.wait_for_more(writes)
        finally:
            launcher.heal(plan)
        load.wait_for_more(writes // 2)
    finally:
        load.stop.set()
        for thread in threads:
            thread.join(timeout=30)
    return load


def run_stage(options: StageOptions) -> StageResult:
    started = time.monotonic()
    writes = 50 if options.quick else 300
    directory = Path(options.report_dir) / "server-cluster"
    plan = launcher.plan_cluster(
        directory,
        3,
        heartbeat_ms=50,
        election_ms=500,
        snapshot_count=max(50, writes // 2),
        faults=True,
    )
    members: list[launcher.RunningMember] = []
    details: dict[str, Any] = {"directory": str(directory), "writes_per_phase": writes}
    try:
        members.extend(launcher.start_cluster(plan))
        launcher.wait_ready(plan.endpoints, timeout_s=60)
        load = _faulty_run(plan, members, writes)
        found = wait_converged(plan.endpoints)
        revision = int(next(iter(found.values()))["revision"])
        problems = check_members(plan.endpoints, dict(load.acked), revision)
        details.update(acknowledged=load.count(), failed=load.failures, revision=revision)
        if problems:
            details["violations"] = problems
            verdict, summary = Verdict.FALSE, "; ".join(problems)
        else:
            verdict = Verdict.TRUE
            summary = (
                f"3 members, kill -9 + restart and a leader partition under load: "
                f"{load.count()} acknowledged writes all present, HashKV agree"
            )
    except (StageUnknown, launcher.LauncherError, grpc.RpcError) as error:
        verdict, summary = Verdict.UNKNOWN, f"undecided: {error}"
    finally:
        launcher.stop_members(members)
    return StageResult(STAGE_NAME, verdict, summary, time.monotonic() - started, details)
