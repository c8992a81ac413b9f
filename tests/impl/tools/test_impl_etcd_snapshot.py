"""etcd's bbolt snapshots read: a snapshot of real etcd 3.5.1 (saved by etcdctl and by
`etcdspec snapshot save`) gives the status etcdctl gives, restores into a member of ours
that then answers ranges, leases, compaction errors and HashKV as the etcd it came from,
and a damaged file is refused with its name and the place of the damage."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import etcd_procs
import grpc
import pytest
from etcd_snapshot_history import QUERIES, ask, write_history

from etcdspec.cli.main import run
from etcdspec.exitcodes import ExitCode
from etcdspec.impl.tools import launcher, snapshot_cli
from etcdspec.impl.tools.bbolt import BoltFile

pytestmark = pytest.mark.etcd


@dataclass
class Saved:
    by_etcdctl: Path
    by_us: Path
    etcdctl_status: dict[str, dict[str, int]]
    etcdctl_simple: dict[str, str]
    answers: list[tuple[str, Any]]


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Saved:
    directory = tmp_path_factory.mktemp("etcd")
    by_etcdctl, by_us = directory / "etcdctl.db", directory / "ours.db"
    with etcd_procs.cluster("etcd", directory / "cluster", size=1) as running:
        endpoint = running.endpoints[0]
        with grpc.insecure_channel(endpoint.removeprefix("http://")) as channel:
            write_history(channel)
            answers = [(name, ask(query, channel)) for name, query in QUERIES]
        result = etcd_procs.etcdctl([endpoint], "snapshot", "save", str(by_etcdctl))
        assert result.returncode == 0, result.stderr
        assert run(["snapshot", "save", str(by_us), "--endpoints", endpoint]) == 0
    statuses = {}
    simple = {}
    for path in (by_etcdctl, by_us):
        plain = etcd_procs.etcdctl([], "snapshot", "status", str(path))
        assert plain.returncode == 0, plain.stderr
        simple[path.name] = plain.stdout
        shown = etcd_procs.etcdctl([], "snapshot", "status", str(path), "-w", "json")
        assert shown.returncode == 0, shown.stderr
        statuses[path.name] = json.loads(shown.stdout)
    return Saved(by_etcdctl, by_us, statuses, simple, answers)


def test_status_of_etcd_snapshots_equals_etcdctls(saved: Saved) -> None:
    for path in (saved.by_etcdctl, saved.by_us):
        ours = snapshot_cli.status(path).to_json()
        assert ours == saved.etcdctl_status[path.name]
    assert saved.etcdctl_status["etcdctl.db"]["revision"] == 343


def test_status_verb_prints_etcdctls_figures(
    saved: Saved, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["snapshot", "status", str(saved.by_us), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == saved.etcdctl_status["ours.db"]
    assert run(["snapshot", "status", str(saved.by_etcdctl)]) == 0
    assert capsys.readouterr().out == saved.etcdctl_simple["etcdctl.db"]


def test_the_snapshot_has_branch_and_overflow_pages(saved: Saved) -> None:
    """Not vacuous: the reader walks more than one leaf."""
    data = saved.by_etcdctl.read_bytes()[:-32]
    bolt = BoltFile(data, "s")
    flags = set()
    for page in range(2, bolt.meta.high_water):
        _, flag, _, overflow = struct.unpack_from("<QHHI", data, page * bolt.page_size)
        flags.add((flag, overflow > 0))
    assert (0x01, False) in flags and (0x02, True) in flags


@pytest.mark.parametrize("which", ["by_etcdctl", "by_us"])
def test_restored_member_serves_what_etcd_served(saved: Saved, tmp_path: Path, which: str) -> None:
    plan = launcher.plan_cluster(tmp_path / "restored", 1, heartbeat_ms=50, election_ms=500)
    member = plan.members[0]
    assert (
        run(["snapshot", "restore", str(getattr(saved, which)), "--data-dir", member.data_dir]) == 0
    )
    members = launcher.start_cluster(plan)
    try:
        launcher.wait_ready(plan.endpoints, timeout_s=30)
        with grpc.insecure_channel(plan.endpoints[0].removeprefix("http://")) as channel:
            answers = [(name, ask(query, channel)) for name, query in QUERIES]
    finally:
        launcher.stop_members(members)
    for (name, expected), (_, got) in zip(saved.answers, answers, strict=True):
        assert got == expected, name


def _damaged(saved: Saved, tmp_path: Path, change: Callable[[bytearray], None]) -> Path:
    data = bytearray(saved.by_etcdctl.read_bytes()[:-32])  # no digest: the reader must see it
    change(data)
    path = tmp_path / "damaged.db"
    path.write_bytes(bytes(data))
    return path


def test_truncated_file_is_refused_with_file_and_size(saved: Saved, tmp_path: Path) -> None:
    path = _damaged(saved, tmp_path, lambda d: d.__delitem__(slice(len(d) // 2, None)))
    with pytest.raises(snapshot_cli.SnapshotError, match=rf"{path}.*truncated"):
        snapshot_cli.status(path)


def test_page_pointing_outside_the_file_is_refused_with_page_and_offset(
    saved: Saved, tmp_path: Path
) -> None:
    bolt = BoltFile(saved.by_etcdctl.read_bytes()[:-32], "s")
    root = bolt.meta.root * bolt.page_size

    def corrupt(data: bytearray) -> None:
        # The root page's first element's position, pointed far past its page.
        struct.pack_into("<I", data, root + 16 + 4, 1 << 30)

    path = _damaged(saved, tmp_path, corrupt)
    with pytest.raises(snapshot_cli.SnapshotError, match=rf"{path}: page \d+, offset \d+"):
        snapshot_cli.status(path)
    assert run(["snapshot", "status", str(path)]) == ExitCode.BAD_INPUT


def test_damaged_meta_checksum_falls_back_then_fails(saved: Saved, tmp_path: Path) -> None:
    def corrupt(data: bytearray) -> None:
        for page in (0, 1):
            data[page * 4096 + 16 + 40] ^= 0xFF  # the high water mark of both metas

    path = _damaged(saved, tmp_path, corrupt)
    with pytest.raises(snapshot_cli.SnapshotError, match=r"no valid meta page.*checksum"):
        snapshot_cli.status(path)


def test_digest_mismatch_is_refused(saved: Saved, tmp_path: Path) -> None:
    data = bytearray(saved.by_etcdctl.read_bytes())
    data[5000] ^= 1
    path = tmp_path / "flipped.db"
    path.write_bytes(bytes(data))
    with pytest.raises(snapshot_cli.SnapshotError, match="SHA-256"):
        snapshot_cli.restore(path, tmp_path / "dir")


def test_database_without_digest_needs_skip_hash_check(saved: Saved, tmp_path: Path) -> None:
    path = _damaged(saved, tmp_path, lambda d: None)
    with pytest.raises(snapshot_cli.SnapshotError, match="--skip-hash-check"):
        snapshot_cli.restore(path, tmp_path / "one")
    assert snapshot_cli.restore(path, tmp_path / "two", skip_hash_check=True).exists()
