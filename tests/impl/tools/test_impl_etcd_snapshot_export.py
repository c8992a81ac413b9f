"""Snapshots of our server are etcd's format: the bbolt writer's files read back by the
reader (branch levels, overflow pages, empty buckets), and a snapshot saved from a member
of ours by etcdctl 3.5.1 is accepted by `etcdctl snapshot status` (bbolt's check) with
our figures, restored by `etcdctl snapshot restore`, and served by real etcd with the
same ranges, leases, compaction and HashKV as our member gave before the save."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import etcd_procs
import grpc
import pytest
from etcd_snapshot_history import QUERIES, ask, write_history

from etcdspec.cli.main import run
from etcdspec.impl.kv.bbolt_writer import write_bbolt
from etcdspec.impl.tools import launcher, snapshot_cli
from etcdspec.impl.tools.bbolt import BoltFile


def test_written_buckets_read_back_with_branches_and_overflow() -> None:
    keys = [(b"%06d" % i, b"v" * (i % 50)) for i in range(3000)]
    big = [(b"a", b"x" * 10_000), (b"b", b""), (b"c", b"y" * 5000)]
    buckets = {b"key": keys, b"big": big, b"empty": []}
    bolt = BoltFile(write_bbolt(buckets), "written")
    assert bolt.check() == []
    assert bolt.buckets() == [b"big", b"empty", b"key"]
    for name, entries in buckets.items():
        assert [(e.key, e.value) for e in bolt.bucket(name)] == entries
    kinds = set()
    for page in range(2, bolt.meta.high_water):
        _, flags, _, overflow = struct.unpack_from("<QHHI", bolt.data, page * bolt.page_size)
        kinds.add((flags, overflow > 0))
    assert (0x01, False) in kinds and (0x02, True) in kinds


def test_keys_out_of_order_are_refused() -> None:
    with pytest.raises(ValueError, match="not strictly ascending"):
        write_bbolt({b"key": [(b"b", b""), (b"a", b"")]})


@pytest.mark.etcd
def test_etcd_restores_and_serves_a_snapshot_of_ours(tmp_path: Path) -> None:
    saved = tmp_path / "ours.db"
    with etcd_procs.cluster("ours", tmp_path / "ours", size=1) as running:
        endpoint = running.endpoints[0]
        with grpc.insecure_channel(endpoint.removeprefix("http://")) as channel:
            write_history(channel)
            expected = [(name, ask(query, channel)) for name, query in QUERIES]
        result = etcd_procs.etcdctl([endpoint], "snapshot", "save", str(saved))
        assert result.returncode == 0, result.stderr
    shown = etcd_procs.etcdctl([], "snapshot", "status", str(saved), "-w", "json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == snapshot_cli.status(saved).to_json()
    assert json.loads(shown.stdout)["revision"] == 343

    plan = launcher.plan_cluster(tmp_path / "etcd", 1, heartbeat_ms=50, election_ms=500)
    member = plan.members[0]
    restored = etcd_procs.etcdctl(
        [],
        "snapshot",
        "restore",
        str(saved),
        f"--name={member.name}",
        f"--data-dir={member.data_dir}",
        f"--initial-cluster={plan.initial_cluster}",
        f"--initial-cluster-token={plan.token}",
        f"--initial-advertise-peer-urls={member.peer_url}",
    )
    assert restored.returncode == 0, restored.stderr
    members = launcher.start_cluster(plan, etcd_procs.program_for("etcd"))
    got: list[tuple[str, Any]] = []
    try:
        launcher.wait_ready(plan.endpoints, timeout_s=30)
        with grpc.insecure_channel(plan.endpoints[0].removeprefix("http://")) as channel:
            got = [(name, ask(query, channel)) for name, query in QUERIES]
    finally:
        launcher.stop_members(members)
    for (name, want), (_, answer) in zip(expected, got, strict=True):
        assert answer == want, name


@pytest.mark.etcd
def test_our_restore_reads_our_snapshot(tmp_path: Path) -> None:
    """`etcdspec snapshot save` from our member, then status and restore by us."""
    saved = tmp_path / "ours.db"
    with etcd_procs.cluster("ours", tmp_path / "ours", size=1) as running:
        with grpc.insecure_channel(running.endpoints[0].removeprefix("http://")) as channel:
            write_history(channel)
        assert run(["snapshot", "save", str(saved), "--endpoints", running.endpoints[0]]) == 0
    assert snapshot_cli.status(saved).revision == 343
    assert snapshot_cli.restore(saved, tmp_path / "restored").exists()
