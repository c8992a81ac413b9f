"""Crash tests: kill -9 a follower, then the leader, of our 3-member cluster under a
write load; restart them; every acknowledged write is still there on every member, and
the members' HashKV agree.

Writers are threads with their own gRPC channels (durability.Load, shared with the
verify stage), each putting unique keys and recording a key as acknowledged only when
its Put returned OK. A small --snapshot-count
makes the leader compact its log while a follower is down, so the restarted follower is
caught up by snapshot. Witnesses make sure the test cannot pass vacuously: writes were
acknowledged after each kill.
"""

from __future__ import annotations

import threading
from pathlib import Path

import etcd_procs
import grpc
import pytest

from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc
from etcdspec.impl.tools import durability, launcher

Load = durability.Load


def _leader_name(cluster: etcd_procs.Cluster) -> str:
    return durability.leader_name(cluster.plan)


def _wait_for_more(load: Load, at_least: int, timeout_s: float = 20) -> None:
    load.wait_for_more(at_least, timeout_s)


def _converged(cluster: etcd_procs.Cluster, timeout_s: float = 30) -> dict[str, dict[str, int]]:
    return durability.wait_converged(cluster.endpoints, timeout_s)


@pytest.mark.slow
def test_kill_follower_then_leader_loses_no_acknowledged_write(tmp_path: Path) -> None:
    with etcd_procs.cluster("ours", tmp_path, 3, snapshot_count=200) as cluster:
        load = Load(cluster.endpoints)
        writers = [threading.Thread(target=load.writer, args=(n,)) for n in range(4)]
        for writer in writers:
            writer.start()
        try:
            _wait_for_more(load, 100)
            leader = _leader_name(cluster)
            follower = next(m.name for m in cluster.plan.members if m.name != leader)
            launcher.kill_member(cluster.member(follower))
            _wait_for_more(load, 400)  # the log moves past a snapshot while it is down
            cluster.restart(follower)
            _wait_for_more(load, 100)
            leader = _leader_name(cluster)
            launcher.kill_member(cluster.member(leader))
            _wait_for_more(load, 100)  # a new leader took over and acknowledges writes
            cluster.restart(leader)
            _wait_for_more(load, 100)
        finally:
            load.stop.set()
            for writer in writers:
                writer.join(timeout=30)
        statuses = _converged(cluster)
        acked = dict(load.acked)
        assert len(acked) >= 800
        revision = next(iter(statuses.values()))["revision"]
        hashes = set()
        for endpoint in cluster.endpoints:
            with grpc.insecure_channel(endpoint.removeprefix("http://")) as channel:
                kv = rpc_pb2_grpc.KVStub(channel)
                got = kv.Range(
                    rpc_pb2.RangeRequest(key=b"w", range_end=b"x", serializable=True), timeout=10
                )
                stored = {item.key: item.value for item in got.kvs}
                missing = [key for key, value in acked.items() if stored.get(key) != value]
                assert not missing, f"{endpoint} lost {len(missing)} acknowledged writes"
                maintenance = rpc_pb2_grpc.MaintenanceStub(channel)
                hashes.add(
                    maintenance.HashKV(rpc_pb2.HashKVRequest(revision=revision), timeout=10).hash
                )
        assert len(hashes) == 1, f"members' HashKV at revision {revision} differ: {hashes}"
        # Witness: the follower restarted behind the leader's compacted log was caught up
        # by InstallSnapshot (not only by log replication).
        follower_log = Path(cluster.member(follower).log_path).read_text()
        assert '"msg": "snapshot received"' in follower_log


@pytest.mark.slow
def test_kill_every_member_at_once_loses_no_acknowledged_write(tmp_path: Path) -> None:
    """A total crash (all three kill -9 together, mid-load): only the WALs remain, and
    they must hold every acknowledged write (fsync before acknowledgement)."""
    with etcd_procs.cluster("ours", tmp_path, 3, snapshot_count=150) as cluster:
        load = Load(cluster.endpoints)
        writers = [threading.Thread(target=load.writer, args=(n,)) for n in range(4)]
        for writer in writers:
            writer.start()
        try:
            _wait_for_more(load, 300)
            for member in list(cluster.members):
                launcher.kill_member(member)
        finally:
            load.stop.set()
            for writer in writers:
                writer.join(timeout=30)
        acked = dict(load.acked)
        for member in cluster.plan.members:
            cluster.restart(member.name)
        launcher.wait_ready(cluster.endpoints, timeout_s=30)
        _converged(cluster)
        for endpoint in cluster.endpoints:
            with grpc.insecure_channel(endpoint.removeprefix("http://")) as channel:
                got = rpc_pb2_grpc.KVStub(channel).Range(
                    rpc_pb2.RangeRequest(key=b"w", range_end=b"x"), timeout=10
                )
            stored = {item.key: item.value for item in got.kvs}
            missing = [key for key, value in acked.items() if stored.get(key) != value]
            assert not missing, (
                f"{endpoint} lost {len(missing)} of {len(acked)} acknowledged writes"
            )
        assert len(acked) >= 300


@pytest.mark.slow
def test_paused_leader_is_replaced_and_rejoins_as_follower(tmp_path: Path) -> None:
    """SIGSTOP the leader under load: the others elect a new leader and keep acknowledging
    writes; after SIGCONT the old leader follows the new term and catches up."""
    with etcd_procs.cluster("ours", tmp_path, 3) as cluster:
        load = Load(cluster.endpoints)
        writers = [threading.Thread(target=load.writer, args=(n,)) for n in range(3)]
        for writer in writers:
            writer.start()
        try:
            _wait_for_more(load, 50)
            old_leader = _leader_name(cluster)
            paused = cluster.member(old_leader)
            term_before = launcher.probe_status(paused.plan.client_url)["raft_term"]
            launcher.pause_member(paused)
            try:
                _wait_for_more(load, 100)  # only possible with a new leader
                other = next(m for m in cluster.plan.members if m.name != old_leader)
                with grpc.insecure_channel(other.client_url.removeprefix("http://")) as channel:
                    read = rpc_pb2_grpc.KVStub(channel).Range(
                        rpc_pb2.RangeRequest(key=b"w", range_end=b"x", count_only=True), timeout=5
                    )
                assert read.count >= 100  # a linearizable read is served meanwhile
            finally:
                launcher.resume_member(paused)
            _wait_for_more(load, 50)
        finally:
            load.stop.set()
            for writer in writers:
                writer.join(timeout=30)
        statuses = _converged(cluster)
        leaders = {status["leader"] for status in statuses.values()}
        old_status = statuses[cluster.member(old_leader).plan.client_url]
        assert len(leaders) == 1
        assert old_status["raft_term"] > term_before  # it learnt of the new leader's term
        acked = dict(load.acked)
        with grpc.insecure_channel(cluster.endpoints[0].removeprefix("http://")) as channel:
            got = rpc_pb2_grpc.KVStub(channel).Range(
                rpc_pb2.RangeRequest(key=b"w", range_end=b"x"), timeout=10
            )
        stored = {item.key: item.value for item in got.kvs}
        assert all(stored.get(key) == value for key, value in acked.items())


@pytest.mark.slow
def test_partitioned_leader_is_replaced_and_loses_no_acknowledged_write(tmp_path: Path) -> None:
    """Cut the leader off from both followers under load: the majority elects a leader and
    keeps acknowledging writes, the isolated old leader acknowledges none; after healing
    everyone converges on one history holding every acknowledged write."""
    with etcd_procs.cluster("ours", tmp_path, 3, faults=True) as cluster:
        ids = {
            m.name: launcher.probe_status(m.client_url)["member_id"] for m in cluster.plan.members
        }
        load = Load(cluster.endpoints)
        writers = [threading.Thread(target=load.writer, args=(n,)) for n in range(3)]
        for writer in writers:
            writer.start()
        try:
            _wait_for_more(load, 50)
            old_leader = _leader_name(cluster)
            launcher.partition(cluster.plan, ids, {old_leader})
            try:
                _wait_for_more(load, 100)  # only possible with a new leader in the majority
                isolated = cluster.member(old_leader).plan.client_url
                with (
                    grpc.insecure_channel(isolated.removeprefix("http://")) as channel,
                    pytest.raises(grpc.RpcError),
                ):
                    rpc_pb2_grpc.KVStub(channel).Put(
                        rpc_pb2.PutRequest(key=b"isolated", value=b"x"), timeout=3
                    )
            finally:
                launcher.heal(cluster.plan)
            _wait_for_more(load, 50)
        finally:
            load.stop.set()
            for writer in writers:
                writer.join(timeout=30)
        statuses = _converged(cluster)
        assert len({status["leader"] for status in statuses.values()}) == 1
        acked = dict(load.acked)
        hashes = set()
        revision = next(iter(statuses.values()))["revision"]
        for endpoint in cluster.endpoints:
            with grpc.insecure_channel(endpoint.removeprefix("http://")) as channel:
                got = rpc_pb2_grpc.KVStub(channel).Range(
                    rpc_pb2.RangeRequest(key=b"w", range_end=b"x", serializable=True), timeout=10
                )
                stored = {item.key: item.value for item in got.kvs}
                assert all(stored.get(key) == value for key, value in acked.items())
                hashes.add(
                    rpc_pb2_grpc.MaintenanceStub(channel)
                    .HashKV(rpc_pb2.HashKVRequest(revision=revision), timeout=10)
                    .hash
                )
        assert len(hashes) == 1
