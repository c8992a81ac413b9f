"""Record member traces from a real 3-member cluster of our server, for trace validation.

`record(directory, ...)` plans a traced cluster on free loopback ports, waits for a
leader, runs a short write load, kills one member with SIGKILL (the leader, or a
follower), writes on, restarts it on its data, writes on again, then stops every member
(SIGTERM, so the traces are flushed) and returns the trace files. Every process it
started is stopped, even on failure. `env` is added to the members' environment (e.g.
ETCDSPEC_FAILPOINTS). `record_partition` cuts the leader off instead (its uncommitted
entries are overwritten after the heal); `record_concurrent` kills members under
concurrent writers, with frequent snapshots. Phases wait on counts of taken writes and
on cluster readiness, each with a deadline.
"""

from __future__ import annotations

import time
from pathlib import Path

import grpc

from etcdspec.conform.trace_stage import Writers
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc
from etcdspec.impl.tools import launcher


def put(endpoints: list[str], key: str, deadline_s: float = 10.0) -> bool:
    """Write key through any member that takes it; False if none did before the deadline."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        for endpoint in endpoints:
            try:
                with grpc.insecure_channel(endpoint.removeprefix("http://")) as channel:
                    stub = rpc_pb2_grpc.KVStub(channel)
                    stub.Put(rpc_pb2.PutRequest(key=key.encode(), value=b"v"), timeout=2)
                return True
            except grpc.RpcError:
                continue
        time.sleep(0.05)
    return False


def leader_name(plan: launcher.ClusterPlan, endpoints: list[str]) -> str:
    statuses = launcher.wait_ready(endpoints, timeout_s=30)
    leader = next(iter(statuses.values()))["leader"]
    for member, endpoint in zip(plan.members, plan.endpoints, strict=True):
        if endpoint in statuses and statuses[endpoint]["member_id"] == leader:
            return member.name
    raise AssertionError(f"leader {leader:x} is not among {list(statuses)}")


def record(
    directory: Path,
    *,
    kill: str = "leader",
    writes: int = 10,
    snapshot_count: int = 10_000,
    env: dict[str, str] | None = None,
    restarts: int = 1,
) -> list[Path]:
    plan = launcher.plan_cluster(
        directory,
        3,
        heartbeat_ms=50,
        election_ms=500,
        snapshot_count=snapshot_count,
        trace=True,
    )
    program = launcher.ours_program()
    members: list[launcher.RunningMember] = []
    try:
        for member in plan.members:
            members.append(launcher.start_member(plan, member, program, env=env))
        launcher.wait_ready(plan.endpoints, timeout_s=60)
        written = 0
        for round_ in range(restarts):
            for _ in range(writes):
                assert put(plan.endpoints, f"k{written}"), "a write was not taken"
                written += 1
            name = leader_name(plan, plan.endpoints)
            if kill != "leader":
                name = next(m.plan.name for m in members if m.plan.name != name)
            victim = next(m for m in members if m.plan.name == name)
            launcher.kill_member(victim)
            others = [m.plan.client_url for m in members if m is not victim]
            for _ in range(writes):
                assert put(others, f"k{written}"), f"no write after killing {name} (round {round_})"
                written += 1
            restarted = launcher.start_member(plan, victim.plan, program, "existing", env=env)
            members[members.index(victim)] = restarted
            launcher.wait_ready(plan.endpoints, timeout_s=60)
        for _ in range(writes):
            assert put(plan.endpoints, f"k{written}"), "a write after the restart was not taken"
            written += 1
    finally:
        launcher.stop_members(members)
    return [launcher.trace_path(plan, member) for member in plan.members]


def put_once(endpoint: str, key: str, timeout_s: float) -> bool:
    """One write attempt at one member (a leader cut off from its quorum times out)."""
    try:
        with grpc.insecure_channel(endpoint.removeprefix("http://")) as channel:
            stub = rpc_pb2_grpc.KVStub(channel)
            stub.Put(rpc_pb2.PutRequest(key=key.encode(), value=b"v"), timeout=timeout_s)
        return True
    except grpc.RpcError:
        return False


def record_partition(directory: Path, *, writes: int = 10) -> list[Path]:
    """Writes, then the leader is cut off from both followers and given writes it cannot
    commit (its uncommitted entries are overwritten after the heal), the others elect a
    new leader and take writes, the partition heals, and writes go on."""
    plan = launcher.plan_cluster(
        directory, 3, heartbeat_ms=50, election_ms=500, trace=True, faults=True
    )
    members: list[launcher.RunningMember] = []
    try:
        members.extend(launcher.start_cluster(plan))
        statuses = launcher.wait_ready(plan.endpoints, timeout_s=60)
        ids = {member.name: statuses[member.client_url]["member_id"] for member in plan.members}
        written = 0
        for _ in range(writes):
            assert put(plan.endpoints, f"k{written}"), "a write was not taken"
            written += 1
        old = leader_name(plan, plan.endpoints)
        old_url = next(m.client_url for m in plan.members if m.name == old)
        launcher.partition(plan, ids, {old})
        # Members read their fault file on a tick: write to the old leader until a write
        # times out, i.e. until the cut is in effect and the entry cannot commit.
        # A first timed-out write may still have reached a follower before its own cut
        # took effect; a few more right after (well within the leader's election timeout,
        # before CheckQuorum makes it step down) are appended on the old leader alone.
        for attempt in range(40):
            if not put_once(old_url, f"cut{attempt}", timeout_s=0.3):
                break
        for attempt in range(3):
            put_once(old_url, f"lost{attempt}", timeout_s=0.05)
        others = [m.client_url for m in plan.members if m.name != old]
        for _ in range(writes):
            assert put(others, f"k{written}"), "the majority side took no write"
            written += 1
        launcher.heal(plan)
        launcher.wait_ready(plan.endpoints, timeout_s=60)
        for _ in range(writes):
            assert put(plan.endpoints, f"k{written}"), "a write after the heal was not taken"
            written += 1
    finally:
        launcher.stop_members(members)
    return [launcher.trace_path(plan, member) for member in plan.members]


LOAD_TIMEOUT_S = 30.0  # for each phase's writes


def record_concurrent(
    directory: Path, *, clients: int = 6, kills: int = 3, snapshot_count: int = 20
) -> list[Path]:
    """Concurrent writers while members are killed with SIGKILL mid-load and restarted
    (the leader, then a follower, alternately), with frequent snapshots."""
    plan = launcher.plan_cluster(
        directory, 3, heartbeat_ms=50, election_ms=500, snapshot_count=snapshot_count, trace=True
    )
    program = launcher.ours_program()
    members: list[launcher.RunningMember] = []
    try:
        members.extend(launcher.start_cluster(plan))
        launcher.wait_ready(plan.endpoints, timeout_s=60)
        with Writers(plan.endpoints, clients) as load:
            for round_ in range(kills):
                load.wait_for(60, LOAD_TIMEOUT_S)
                name = leader_name(plan, plan.endpoints)
                if round_ % 2:
                    name = next(m.plan.name for m in members if m.plan.name != name)
                victim = next(m for m in members if m.plan.name == name)
                launcher.kill_member(victim)
                load.wait_for(40, LOAD_TIMEOUT_S)
                restarted = launcher.start_member(plan, victim.plan, program, "existing")
                members[members.index(victim)] = restarted
                launcher.wait_ready(plan.endpoints, timeout_s=60)
            load.wait_for(60, LOAD_TIMEOUT_S)
    finally:
        launcher.stop_members(members)
    return [launcher.trace_path(plan, member) for member in plan.members]
