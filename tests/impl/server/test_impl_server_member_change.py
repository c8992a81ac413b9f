"""Membership changes on running processes, our members and real etcd 3.5.1 alike (the
same test body runs on both, through the launcher's membership API):

- a learner is added under writes, started with --initial-cluster-state existing, catches
  up (the same revision everywhere, HashKV equal on the voters), serves serializable reads
  but refuses a write as etcd's learners do, and is promoted once in sync;
- the leader is removed: its process exits by itself (the same exit code as etcd's), the
  others elect a leader among themselves and go on serving writes;
- a member restarted after the changes keeps the configuration (MemberList unchanged);
- a follower replaced by a fresh voter after the logs were compacted catches up;
- a member removed while down, started again, is told so by its peers and exits 0.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import etcd_procs
import grpc
import pytest

from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc
from etcdspec.impl.tools import launcher

KINDS = ["ours"] + (["etcd"] if etcd_procs.ETCD_BIN else [])
HEALTH_INTERVAL_S = 5.5  # etcd refuses changes until its voters are connected for 5 s


class Writer(threading.Thread):
    """Puts keys w/0, w/1, ... through any member that answers, until stopped."""

    def __init__(self, endpoints: list[str]) -> None:
        super().__init__(daemon=True)
        self.endpoints = endpoints
        self.done = threading.Event()
        self.written = 0

    def run(self) -> None:
        while not self.done.is_set():
            for endpoint in list(self.endpoints):
                try:
                    with grpc.insecure_channel(endpoint.removeprefix("http://")) as channel:
                        rpc_pb2_grpc.KVStub(channel).Put(
                            rpc_pb2.PutRequest(key=f"w/{self.written}".encode(), value=b"v"),
                            timeout=2,
                        )
                    self.written += 1
                    break
                except grpc.RpcError:
                    continue
            time.sleep(0.01)


def _members(endpoint: str) -> list[tuple[str, bool]]:
    """MemberList at `endpoint`; retried while it is a learner (which refuses it, as
    etcd's do) that has not yet applied its promotion."""
    deadline = time.monotonic() + 10
    while True:
        with grpc.insecure_channel(endpoint.removeprefix("http://")) as channel:
            try:
                answer = rpc_pb2_grpc.ClusterStub(channel).MemberList(
                    rpc_pb2.MemberListRequest(linearizable=True), timeout=10
                )
                return sorted((m.name, m.isLearner) for m in answer.members)
            except grpc.RpcError as error:
                if "learner" not in str(error.details()) or time.monotonic() > deadline:
                    raise
        time.sleep(0.1)


def _leader_name(plan: launcher.ClusterPlan) -> str:
    ids = launcher.member_ids(plan.endpoints)
    leader = launcher.wait_ready(plan.endpoints)[plan.endpoints[0]]["leader"]
    return next(name for name, ident in ids.items() if ident == leader)


@pytest.mark.parametrize("kind", KINDS)
def test_add_a_learner_under_writes_promote_it_remove_the_leader_restart(
    kind: str, tmp_path: Path
) -> None:
    program = etcd_procs.program_for(kind)
    with etcd_procs.cluster(kind, tmp_path, 3) as running:
        time.sleep(HEALTH_INTERVAL_S)
        writer = Writer(list(running.endpoints))
        writer.start()
        try:
            plan, added = launcher.add_member(running.plan, running.members, program, learner=True)
            running.members.append(added)
            running.plan = plan
            time.sleep(1.0)  # writes go on while it catches up
        finally:
            writer.done.set()
            writer.join()
        assert writer.written > 20
        revision = launcher.wait_caught_up(plan.endpoints)
        assert revision >= writer.written
        assert _members(plan.endpoints[0]) == [
            ("m1", False),
            ("m2", False),
            ("m3", False),
            ("m4", True),
        ]
        with grpc.insecure_channel(plan.endpoints[3].removeprefix("http://")) as channel:
            with pytest.raises(grpc.RpcError, match="rpc not supported for learner"):
                rpc_pb2_grpc.KVStub(channel).Put(rpc_pb2.PutRequest(key=b"k", value=b"v"))
            serializable = rpc_pb2.RangeRequest(key=b"w/0", serializable=True)
            assert rpc_pb2_grpc.KVStub(channel).Range(serializable).count == 1
        launcher.promote_member(plan, "m4")
        assert _members(plan.endpoints[3]) == [(f"m{i}", False) for i in range(1, 5)]

        time.sleep(HEALTH_INTERVAL_S)  # m4 connected long enough for etcd's check
        leader = _leader_name(plan)
        removed = running.member(leader)
        plan = launcher.remove_member(plan, running.members, leader)
        running.plan = plan
        assert not removed.alive()
        assert removed.process is not None and removed.process.returncode == 0
        launcher.wait_ready(plan.endpoints)
        with grpc.insecure_channel(plan.endpoints[0].removeprefix("http://")) as channel:
            rpc_pb2_grpc.KVStub(channel).Put(rpc_pb2.PutRequest(key=b"after", value=b"x"))
        before = _members(plan.endpoints[0])
        assert len(before) == 3 and leader not in {name for name, _ in before}

        restarted = plan.members[0].name
        launcher.stop_member(running.member(restarted))
        running.members[running.members.index(running.member(restarted))] = launcher.start_member(
            plan, plan.members[0], program, state="existing"
        )
        launcher.wait_ready(plan.endpoints)
        assert _members(plan.endpoints[0]) == before
        launcher.wait_caught_up(plan.endpoints)


@pytest.mark.parametrize("kind", KINDS)
def test_replace_a_member_with_a_fresh_voter_after_the_log_was_compacted(
    kind: str, tmp_path: Path
) -> None:
    """A follower removed and a fresh member added as a voter (no learner step) on a new
    data directory, after enough writes that our members have compacted their logs (a
    snapshot every 50 entries): it catches up, from a snapshot that carries the members,
    and the cluster of three serves on."""
    program = etcd_procs.program_for(kind)
    with etcd_procs.cluster(kind, tmp_path, 3, snapshot_count=50) as running:
        with grpc.insecure_channel(running.endpoints[0].removeprefix("http://")) as channel:
            kv = rpc_pb2_grpc.KVStub(channel)
            for index in range(200):
                kv.Put(rpc_pb2.PutRequest(key=f"k/{index}".encode(), value=b"v"), timeout=5)
        time.sleep(HEALTH_INTERVAL_S)
        leader = _leader_name(running.plan)
        follower = next(m.name for m in running.plan.members if m.name != leader)
        plan = launcher.remove_member(running.plan, running.members, follower)
        running.plan = plan
        plan, added = launcher.add_member(plan, running.members, program, name="m9")
        running.members.append(added)
        running.plan = plan
        revision = launcher.wait_caught_up(plan.endpoints)
        assert revision >= 201
        names = sorted(m.name for m in plan.members)
        assert [name for name, _ in _members(added.plan.client_url)] == names
        with grpc.insecure_channel(added.plan.client_url.removeprefix("http://")) as channel:
            got = rpc_pb2_grpc.KVStub(channel).Range(
                rpc_pb2.RangeRequest(key=b"k/", range_end=b"k0", count_only=True), timeout=5
            )
        assert got.count == 200
        if kind == "ours":  # it was sent a snapshot: the log was compacted past its start
            assert list(Path(added.plan.data_dir, "member", "snap").glob("*.snap"))
        # Restarted on its data, the new member is the same member of the same cluster.
        before = launcher.probe_status(added.plan.client_url)
        launcher.stop_member(added)
        again = launcher.start_member(plan, added.plan, program, state="existing")
        running.members[running.members.index(added)] = again
        launcher.wait_ready(plan.endpoints)
        after = launcher.probe_status(added.plan.client_url)
        assert (after["member_id"], after["cluster_id"]) == (
            before["member_id"],
            before["cluster_id"],
        )
        assert [name for name, _ in _members(added.plan.client_url)] == names


@pytest.mark.parametrize("kind", KINDS)
def test_a_member_removed_while_down_stops_itself_when_started(kind: str, tmp_path: Path) -> None:
    """A follower stopped, removed by the others (a member that is down is safe to
    remove), then started again on its data: its peers tell it it was removed, and it
    exits 0 by itself, as etcd's does."""
    program = etcd_procs.program_for(kind)
    with etcd_procs.cluster(kind, tmp_path, 3) as running:
        time.sleep(HEALTH_INTERVAL_S)
        leader = _leader_name(running.plan)
        name = next(m.name for m in running.plan.members if m.name != leader)
        ids = launcher.member_ids(running.endpoints)
        launcher.stop_member(running.member(name))
        others = [m.client_url for m in running.plan.members if m.name != name]
        with grpc.insecure_channel(others[0].removeprefix("http://")) as channel:
            rpc_pb2_grpc.ClusterStub(channel).MemberRemove(
                rpc_pb2.MemberRemoveRequest(ID=ids[name]), timeout=10
            )
        old = running.member(name)
        again = launcher.start_member(running.plan, old.plan, program, state="existing")
        running.members[running.members.index(old)] = again
        assert again.process is not None
        assert again.process.wait(timeout=30) == 0
        assert "the member has been permanently removed from the cluster" in Path(
            again.log_path
        ).read_text(errors="replace")


def test_a_member_the_cluster_does_not_list_is_refused_when_it_joins(tmp_path: Path) -> None:
    """Started with --initial-cluster-state existing before anyone added it, a member of
    ours asks the cluster who it is, is told nothing, and exits saying what to do."""
    with etcd_procs.cluster("ours", tmp_path, 3) as running:
        plan, member = launcher.plan_added_member(running.plan)
        stray = launcher.start_member(plan, member, launcher.ours_program(), state="existing")
        running.members.append(stray)
        assert stray.process is not None
        assert stray.process.wait(timeout=30) != 0
        log = Path(stray.log_path).read_text(errors="replace")
        assert f"has no member with peer URL {member.peer_url}" in log
        assert f"etcdctl member add m4 --peer-urls={member.peer_url}" in log
